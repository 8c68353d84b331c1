// Package store is the task center: every read and write of task_center,
// task_run, task_audit, task_queue, task_route and task_setting. All SQL
// lives in this package (queries.go), all
// due and expiry comparisons use the database clock (NOW(3)), and every
// write a worker makes is a compare-and-set fenced by (id, attempt, status).
//
// Times cross the boundary as instants: they are written with FROM_UNIXTIME
// and read with UNIX_TIMESTAMP, so DATETIME columns hold the database
// session's local time, as the seed design's PHP producers expect when they
// INSERT date('Y-m-d H:i:s').
package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/task"
)

// Defaults of Options.
const (
	MaxOpenConnsDefault    = 32
	LockWaitTimeoutDefault = 5 * time.Second
	// A slow link is not a dead one: with a second added each way, a
	// connection's handshake (several round trips) and a transaction
	// still fit these many times over.
	DialTimeoutDefault  = 10 * time.Second
	ReadTimeoutDefault  = 30 * time.Second
	WriteTimeoutDefault = 30 * time.Second
)

// Options tune the connection pool and session.
type Options struct {
	// MaxOpenConns bounds the pool (default 32).
	MaxOpenConns int
	// LockWaitTimeout is the session's innodb_lock_wait_timeout: a row lock
	// held by someone else's long transaction fails the statement instead
	// of hanging a worker (the seed's "alive but idle" night); it is also
	// the session's lock_wait_timeout, for metadata locks. Default 5s.
	LockWaitTimeout time.Duration
	// DialTimeout bounds opening a connection; ReadTimeout and
	// WriteTimeout each network read and write on one (defaults above).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Key is the configuration key of the DSN, named in errors that only
	// a change of it fixes (default mysql.dsn).
	Key string
	// MinReadTimeout raises the read timeout of statements, the DSN's
	// included, to at least this (migrations: MigrateReadTimeout); the
	// checks of Open keep the configured one.
	MinReadTimeout time.Duration
}

// Store is a handle on the task center.
type Store struct {
	db *sql.DB
	// perRow renders every column of a batched write as a per-row lookup
	// (tests; see byID).
	perRow bool
	// lock is how batched writes lock their rows without waiting for
	// other transactions (locked.go); skip holds the rows claims found
	// locked, backing off. zeroWait: the server can run a statement with
	// no lock wait, so batches are written without locking them first
	// until they meet a held row. preReads counts locking reads (tests).
	lock     lockMode
	zeroWait bool
	skip     skipSet
	preReads atomic.Int64
	// setStatement: the server takes SET STATEMENT (MariaDB), the way a
	// listing is given a time limit of its own (scanLimited), which is at
	// most the connections' read timeout and scanCap (tests; 0: none).
	setStatement bool
	readTimeout  time.Duration
	scanCap      time.Duration
	// packet is the server's max_allowed_packet; stmtBytes bounds the
	// text values of one batched statement (see sizeBudget).
	packet    int64
	stmtBytes int
	// claimRead is how many candidates the next claim reads (0: a batch;
	// see nextClaimRead); candidates counts those read (tests).
	claimRead  atomic.Int64
	candidates atomic.Int64
	// payloadAvg is the mean payload of the last claim's candidates, in
	// bytes (see claimBytesMax).
	payloadAvg atomic.Int64
}

// Open connects to the task center described by a go-sql-driver DSN and
// checks that it answers.
func Open(ctx context.Context, dsn string, o Options) (*Store, error) {
	cfg, err := ParseDSN(dsn, o)
	if err != nil {
		return nil, err
	}
	// Without one every statement fails "No database selected", which no
	// retry mends.
	if cfg.DBName == "" {
		return nil, task.Configf("%s names no database: end it with one, as in user:password@tcp(%s)/taskd", cmp.Or(o.Key, "mysql.dsn"), cfg.Addr)
	}
	// The handshake, the session's settings and the probes below are a
	// few round trips each.
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout+cfg.ReadTimeout)
	defer cancel()
	cfg.ReadTimeout = max(cfg.ReadTimeout, o.MinReadTimeout)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql dsn: %w", err)
	}
	db := sql.OpenDB(retiringConnector{Connector: conn, epoch: new(atomic.Uint64)})
	n := PoolSize(o.MaxOpenConns)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(30 * time.Minute)
	s := &Store{db: db, readTimeout: cfg.ReadTimeout}
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		if cerr := ConfigError(err, cfg, cmp.Or(o.Key, "mysql.dsn")); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("connect to mysql %s: %w", cfg.Addr, err)
	}
	if s.lock, err = probeLockMode(pctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to mysql %s: %w", cfg.Addr, err)
	}
	if s.zeroWait, s.setStatement, err = probeZeroWait(pctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to mysql %s: %w", cfg.Addr, err)
	}
	if err := db.QueryRowContext(pctx, qMaxAllowedPacket).Scan(&s.packet); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to mysql %s: %w", cfg.Addr, err)
	}
	s.stmtBytes = packetBytes(s.packet)
	return s, nil
}

// DSNAddr is the server address of a DSN, without credentials, for
// messages ("?" when it does not parse).
func DSNAddr(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "?"
	}
	return c.Addr
}

// ParseDSN parses dsn and sets the session options taskd relies on, unless
// the DSN sets them itself.
func ParseDSN(dsn string, o Options) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql dsn: %w", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	// taskd's text is UTF-8 and the tables utf8mb4, so the connection is
	// too, whatever charset the DSN names (one copied from a PHP
	// application's config): with charset=utf8 an emoji was refused
	// ("Incorrect string value"), with latin1 Chinese was stored as
	// mojibake, and with gbk the client-side interpolation taskd uses
	// would not escape safely.
	if cs, coll := dsnCharset(cfg); (cs != "" && cs != "utf8mb4") || (coll != "" && !strings.HasPrefix(coll, "utf8mb4_")) {
		if !strings.HasPrefix(coll, "utf8mb4_") {
			coll = ""
		}
		if err := cfg.Apply(mysql.Charset("utf8mb4", coll)); err != nil {
			return nil, fmt.Errorf("mysql dsn: %w", err)
		}
	}
	lw := o.LockWaitTimeout
	if lw <= 0 {
		lw = LockWaitTimeoutDefault
	}
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(max(1, int(lw.Seconds())))
	}
	// The same bound on metadata locks: an ALTER or OPTIMIZE TABLE
	// waiting behind someone's open transaction, or a backup's FLUSH
	// TABLES WITH READ LOCK, queues every statement on the table for the
	// server's lock_wait_timeout (a day by default). Without it each
	// statement hung to the read timeout, silently, and came back as
	// "invalid connection"; now it fails "Lock wait timeout exceeded" and
	// is retried like a row lock wait.
	if _, ok := cfg.Params["lock_wait_timeout"]; !ok {
		cfg.Params["lock_wait_timeout"] = strconv.Itoa(max(1, int(lw.Seconds())))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cmp.Or(o.DialTimeout, DialTimeoutDefault)
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = cmp.Or(o.ReadTimeout, ReadTimeoutDefault)
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = cmp.Or(o.WriteTimeout, WriteTimeoutDefault)
	}
	// The driver's own log lines (a read that timed out, a connection
	// reset) would land raw on a command's stderr beside its one-line
	// error; every one of them is also returned as an error.
	cfg.Logger = quietDriver{}
	// One round trip per statement instead of prepare/execute/close.
	cfg.InterpolateParams = true
	cfg.MultiStatements = false
	return cfg, nil
}

// dsnCharset is the first charset cfg's DSN names ("" none) and its
// collation.
func dsnCharset(cfg *mysql.Config) (charset, collation string) {
	c := cfg.Clone()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = "", "", "", "", ""
	dsn := c.FormatDSN()
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		if q, err := url.ParseQuery(dsn[i+1:]); err == nil {
			charset, _, _ = strings.Cut(q.Get("charset"), ",")
		}
	}
	return strings.ToLower(strings.TrimSpace(charset)), strings.ToLower(cfg.Collation)
}

// quietDriver drops the driver's log lines.
type quietDriver struct{}

func (quietDriver) Print(...any) {}

// ErrorText is err's message, with what the driver's "invalid connection"
// means when it is one: the driver says only that for a read that timed
// out or a link that dropped, and its own line with the cause is dropped
// (quietDriver). An operator reading "claim: select due tasks: invalid
// connection" learns where to look; one reading "Too many connections",
// which limit was reached and what taskd takes of it.
func ErrorText(err error) string {
	msg := err.Error()
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, mysql.ErrInvalidConn):
		msg += " (MySQL dropped the connection or gave no answer within mysql.read_timeout)"
	case !errors.As(err, &me):
	case me.Number == 1040:
		msg += " (every connection the server's max_connections allows is taken; taskd doctor's mysql.connections adds up what taskd's processes may open: mysql.max_open_conns each)"
	case diskFull(me):
		msg += " (MySQL cannot store more: the disk under its data directory or its tmpdir is full, or the table reached a size limit: free space there)"
	case grantErrors[me.Number]:
		msg += " (the account of mysql.dsn lacks a privilege taskd needs: taskd doctor's mysql.grants says which to GRANT)"
	case me.Number == 1203 || me.Number == 1226:
		msg += " (the account's own connection limit is reached; each taskd process may open mysql.max_open_conns)"
	case (me.Number == errAccessDenied || me.Number == errAccessDeniedNoPassword) && !strings.Contains(msg, "mysql.dsn"):
		// A running process: the connections it opened before go on.
		msg += " (the account's password changed, or it was dropped, since this process connected: fix mysql.dsn and restart it)"
	}
	return msg
}

// CheckValueSize refuses a value (a payload) of n bytes that no statement
// the server takes can carry: escaped, it could double, and the longest
// statement is its max_allowed_packet.
func (s *Store) CheckValueSize(what string, n int) error {
	if limit := s.MaxValueBytes(); n > limit {
		return task.Invalidf("%s is %d bytes, over the %d the task center takes in one statement (its max_allowed_packet is %d; raise that for larger ones)",
			what, n, limit, s.packet)
	}
	return nil
}

// MaxValueBytes is the largest value one statement carries, and
// MaxAllowedPacket the server's limit it follows from.
func (s *Store) MaxValueBytes() int      { return int(s.packet/2 - 64<<10) }
func (s *Store) MaxAllowedPacket() int64 { return s.packet }

// PoolSize is the most connections a store opened with MaxOpenConns n
// holds.
func PoolSize(n int) int {
	if n <= 0 {
		return MaxOpenConnsDefault
	}
	return n
}

// DB exposes the pool for tests and benchmarks.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the pool.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks that the task center answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Now returns the database clock, the one clock every node uses.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var ts string
	if err := s.db.QueryRowContext(ctx, qNow).Scan(&ts); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return parseUnix(ts), nil
}

// parseUnix converts UNIX_TIMESTAMP(...) output ("1700000000.123") to a time.
func parseUnix(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	sec, frac, _ := strings.Cut(s, ".")
	secs, _ := strconv.ParseInt(sec, 10, 64)
	var nanos int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		nanos, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(secs, nanos)
}

// scheduledMS is scheduled_at as UNIX_TIMESTAMP read it, in ms (0: NULL).
func scheduledMS(b []byte) int64 {
	if b == nil {
		return 0
	}
	return parseUnix(string(b)).UnixMilli()
}

// unixArg formats t for FROM_UNIXTIME with millisecond precision.
func unixArg(t time.Time) string {
	ms := t.UnixMilli()
	b := make([]byte, 0, 24)
	if ms < 0 {
		b, ms = append(b, '-'), -ms
	}
	b = strconv.AppendInt(b, ms/1000, 10)
	b = append(b, '.', byte('0'+ms%1000/100), byte('0'+ms%100/10), byte('0'+ms%10))
	return string(b)
}

func nullUnix(ns sql.NullString) *time.Time {
	if !ns.Valid || ns.String == "" {
		return nil
	}
	t := parseUnix(ns.String)
	return &t
}

// MySQL server errors taskd tells apart.
const (
	errDBAccessDenied = 1044
	errAccessDenied   = 1045
	errUnknownDB      = 1049
	errNoSuchTable    = 1146
	errNoSuchColumn   = 1054
	errTableFull      = 1114
	errInterrupted    = 1317 // a KILL QUERY
	errTableAccess    = 1142 // "UPDATE command denied to user ... for table ..."
	errColumnAccess   = 1143
	// A statement stopped at its time limit: MariaDB's max_statement_time,
	// MySQL's MAX_EXECUTION_TIME.
	errStatementTime = 1969
	errExecutionTime = 3024
	// ER_ACCESS_DENIED_NO_PASSWORD_ERROR: MariaDB's answer to a user it
	// does not know ('nobody'@'host', without "using password"), and
	// MySQL's to one that must log in another way: wrong credentials, as
	// 1045.
	errAccessDeniedNoPassword = 1698
)

// ConfigError returns a config error (task.CodeConfig) when the server
// refused the connection for a reason only a person can fix, else nil: a
// daemon must not retry wrong credentials forever. key names the DSN's
// configuration key in the message.
func ConfigError(err error, cfg *mysql.Config, key string) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return nil
	}
	switch me.Number {
	case errAccessDenied, errAccessDeniedNoPassword:
		return task.Configf("mysql %s: %s: fix the user or password in %s", cfg.Addr, me.Message, key)
	case errDBAccessDenied:
		return task.Configf("mysql %s: %s: GRANT the user access to %s, or fix %s", cfg.Addr, me.Message, cfg.DBName, key)
	case errUnknownDB:
		return task.Configf("mysql %s: unknown database %q: create it (CREATE DATABASE %s) and run `taskd migrate`, or fix the database name in %s",
			cfg.Addr, cfg.DBName, cfg.DBName, key)
	}
	return nil
}

// transientErrors are server errors that go away by themselves: lock waits,
// deadlocks, a server shutting down or read-only during a failover, out of
// memory or resources (a full disk: diskFull).
var transientErrors = map[uint16]bool{1205: true, 1213: true, 1040: true, 1053: true, 1290: true, 1836: true, 1927: true,
	1037: true, 1038: true, 1041: true}

// diskFull reports whether the server could not write for want of space:
// 1021, and 1114 (a table that cannot grow: InnoDB's answer when the disk
// under it is full) say so; other numbers carry the OS's errno 28 (ENOSPC) in
// their text, as "Got error 28 \"No space left on device\" from storage
// engine" (1030) or "Error writing file ... (Errcode: 28 ...)" (1026) when
// the disk under tmpdir or the data directory fills. The same 1030 with
// another errno (139: a row too large) is a refusal of what the statement
// holds.
func diskFull(me *mysql.MySQLError) bool {
	if me.Number == 1021 || me.Number == errTableFull {
		return true
	}
	m := strings.ToLower(me.Message)
	return strings.Contains(m, "no space left on device") || strings.Contains(m, "error 28 ") ||
		strings.Contains(m, "errcode: 28 ") || strings.Contains(m, "errno: 28 ")
}

// connectErrors refuse a connection, not a statement: the statement was
// never sent, and may go through on a connection that opens later (the
// account's connection limit, a host blocked after connection errors,
// credentials rotated under a running node; the server's limit, 1040, is
// among transientErrors). A result written then is not "refused".
var connectErrors = map[uint16]bool{errDBAccessDenied: true, errAccessDenied: true, errUnknownDB: true,
	1129: true, 1130: true, 1203: true, 1226: true, 1251: true, 1524: true, errAccessDeniedNoPassword: true, 1862: true, 3118: true}

// stoppedErrors stop a statement before its end, by a KILL QUERY (a
// DBA's, pt-kill's) or at the server's time limit: for how long it ran,
// not for what it holds.
var stoppedErrors = map[uint16]bool{errInterrupted: true, errStatementTime: true, errExecutionTime: true}

// IsStopped reports whether the server stopped a statement before its end
// (stoppedErrors). Sent again it may go through; a smaller one likelier.
func IsStopped(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && stoppedErrors[me.Number]
}

// grantErrors refuse a statement to the account, not for what it holds:
// a privilege revoked (or never granted) under a running node. A GRANT lets
// the same statement through; a result written then is not "refused".
var grantErrors = map[uint16]bool{errTableAccess: true, errColumnAccess: true, 1227: true}

// serverOwnErrors is the range of the server's own file system and memory
// errors (mysys, "Error 6 (HY000): Error on delete of '/tmp/#sql-update-...
// .MAI'"): the server's trouble with its temporary tables, not with the
// statement, which may succeed when sent again.
const serverOwnErrors = 1000

// IsRejected reports whether the server refused a statement for what it
// holds (a value it cannot store, say), or the driver refused to send one
// larger than the server's max_allowed_packet: retrying the same statement
// cannot succeed. Connection errors, transient server errors, statements
// stopped for how long they ran and privileges the account lacks are not
// rejections.
func IsRejected(err error) bool {
	if errors.Is(err, mysql.ErrPktTooLarge) { // the driver's own refusal of a statement too large to send
		return true
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number >= serverOwnErrors && !transientErrors[me.Number] && !connectErrors[me.Number] &&
		!stoppedErrors[me.Number] && !grantErrors[me.Number] && !diskFull(me)
}
