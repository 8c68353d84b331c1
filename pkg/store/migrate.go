package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/task"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// Contract marks a contract step (the file's first line is exactly
	// `-- contract`): it drops or changes what the previous release still
	// uses, so on a live task center it waits until no process of that
	// release runs (MigrateParams.MayContract). The new code works both
	// before and after it.
	Contract bool
}

// contractMark is the first line of a contract step's file.
const contractMark = "-- contract"

// Migrations lists the embedded migrations in order.
func Migrations() ([]Migration, error) {
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	return migrationsFrom(sub)
}

// migrationsFrom lists the migrations NNNN_name.sql of fsys in order.
func migrationsFrom(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number", e.Name())
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b),
			Contract: strings.TrimRight(first, "\r") == contractMark})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have one number", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// MigrateParams are the options of Migrate.
type MigrateParams struct {
	// Migrations to apply, in version order; nil: the embedded ones.
	Migrations []Migration
	// MayContract is asked about each contract step not applied yet on a
	// task center that already had a schema: "" lets it run, anything
	// else is why it is deferred. It is not asked on a task center
	// without one (nothing of taskd can be running on it). Nil defers
	// every such step.
	MayContract func(ctx context.Context, m Migration) (deferReason string)
	// Progress, when set, is told in a line for a person what a step
	// that runs long or waits for its table is doing.
	Progress func(line string)
}

// MigrateResult is what Migrate did.
type MigrateResult struct {
	Applied  []int      // versions applied by this run, in order
	Deferred []Deferred // contract steps left for a later run
	// Newer are the applied versions of a newer taskd (above the
	// migrations given), none of them a contract step: this binary runs
	// on the schema until one is.
	Newer []int
}

// Deferred is a contract step Migrate left for a later run, and why.
type Deferred struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Reason  string `json:"reason"`
}

// Migrate applies every migration the database does not have yet, in
// version order: each ordinary one, and each contract step that
// p.MayContract lets run (all of them on a database without a schema).
// A deferred contract step does not hold back the ones after it: the
// applied versions are a set. It is safe to run on several hosts at once:
// a named lock serialises them, and each statement is idempotent. On an
// error, the result holds what was applied before it.
func (s *Store) Migrate(ctx context.Context, p MigrateParams) (MigrateResult, error) {
	var res MigrateResult
	migs := p.Migrations
	if migs == nil {
		var err error
		if migs, err = Migrations(); err != nil {
			return res, err
		}
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	// The session is changed below (its lock wait, its sql_mode): the
	// connection is closed, not given back to the pool, where the rest of
	// taskd would run under those settings.
	defer conn.Close()
	defer conn.Raw(func(any) error { return driver.ErrBadConn })
	say := syncLines(p.Progress)
	if err := s.takeMigrateLock(ctx, conn, say); err != nil {
		return res, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(`+migrateLock+`)`)
	// A step's ALTER waits for the table's metadata lock, and every
	// statement on the table queues behind the wait: one transaction left
	// open on task_center would stop every node's claims and results for
	// the server's lock_wait_timeout (a day by default). The wait is
	// short and tried again instead (applyStep).
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`SET SESSION lock_wait_timeout = %d`, int(migrateLockWait/time.Second))); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	if err := allowZeroDates(ctx, conn); err != nil {
		return res, err
	}

	// Another application's task_center is refused before anything is
	// written into its database.
	taskCols, err := taskTable(ctx, conn)
	if err != nil {
		return res, err
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS taskd_schema (
		version INT NOT NULL PRIMARY KEY,
		name VARCHAR(255) NOT NULL,
		applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
		contract TINYINT NOT NULL DEFAULT 0
	) ENGINE=InnoDB`); err != nil {
		return res, fmt.Errorf("migrate: create taskd_schema: %w", err)
	}
	a, err := readApplied(ctx, conn)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	// Judged before the column is added: newer rows written without it
	// would read as ordinary steps after.
	if res.Newer, err = a.newer(migs[len(migs)-1].Version); err != nil {
		return res, err
	}
	if err := recordContracts(ctx, conn, a, migs); err != nil {
		return res, err
	}
	have := a.have
	fresh := len(have) == 0
	for _, m := range migs {
		if have[m.Version] {
			continue
		}
		if m.Contract && !fresh {
			reason := "no check of the running processes was made"
			if p.MayContract != nil {
				reason = p.MayContract(ctx, m)
			}
			if reason != "" {
				res.Deferred = append(res.Deferred, Deferred{Version: m.Version, Name: m.Name, Reason: reason})
				continue
			}
		}
		if m.Version == 1 {
			if _, err := adoptSeedTable(ctx, conn, taskCols); err != nil {
				return res, err
			}
		}
		if err := s.applyStep(ctx, conn, m, say); err != nil {
			return res, err
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO taskd_schema (version, name, contract) VALUES (?, ?, ?)`, m.Version, m.Name, m.Contract); err != nil {
			return res, fmt.Errorf("migration %s: record: %w", m.Name, err)
		}
		res.Applied = append(res.Applied, m.Version)
	}
	if err := s.addTaskChecks(ctx, conn, say); err != nil {
		return res, err
	}
	return res, nil
}

// allowZeroDates takes NO_ZERO_DATE and NO_ZERO_IN_DATE out of conn's
// sql_mode. MySQL 8 starts with both, and with them a strict server
// refuses any ALTER of a table whose columns hold or default to
// '0000-00-00 00:00:00', as PHP schemas of the seed's time often do
// ("Invalid default value for 'last_run_at'"): the migrations add and
// change columns beside those, and write no date themselves.
func allowZeroDates(ctx context.Context, conn *sql.Conn) error {
	var mode string
	if err := conn.QueryRowContext(ctx, `SELECT @@SESSION.sql_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("migrate: read sql_mode: %w", err)
	}
	all := strings.Split(mode, ",")
	kept := slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == "NO_ZERO_DATE" || m == "NO_ZERO_IN_DATE" })
	if len(kept) == len(all) {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `SET SESSION sql_mode = ?`, strings.Join(kept, ",")); err != nil {
		return fmt.Errorf("migrate: set sql_mode: %w", err)
	}
	return nil
}

// querier is a *sql.DB or a *sql.Conn.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// applied is what taskd_schema records.
type applied struct {
	have     map[int]bool   // the applied versions
	names    map[int]string // their files
	contract map[int]bool   // those recorded as contract steps
	// flagged: the table has the contract column (taskd_schema of before
	// it cannot tell a newer contract step from an ordinary one).
	flagged bool
}

// readApplied reads taskd_schema (nothing applied when the table does not
// exist).
func readApplied(ctx context.Context, q querier) (applied, error) {
	a := applied{have: map[int]bool{}, names: map[int]string{}, contract: map[int]bool{}, flagged: true}
	rows, err := q.QueryContext(ctx, `SELECT version, name, contract FROM taskd_schema`)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errNoSuchColumn {
		a.flagged = false
		rows, err = q.QueryContext(ctx, `SELECT version, name, 0 FROM taskd_schema`)
	}
	if errors.As(err, &me) && me.Number == errNoSuchTable {
		return a, nil
	}
	if err != nil {
		return a, fmt.Errorf("read taskd_schema: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		var name string
		var contract bool
		if err := rows.Scan(&v, &name, &contract); err != nil {
			return a, fmt.Errorf("read taskd_schema: %w", err)
		}
		a.have[v], a.names[v], a.contract[v] = true, name, contract
	}
	if err := rows.Err(); err != nil {
		return a, fmt.Errorf("read taskd_schema: %w", err)
	}
	return a, nil
}

// newer is the rule for a schema ahead of a binary that knows up to
// latest: it returns the applied versions above latest, in order, and a
// config error when the binary cannot run on them. A newer ordinary step
// only adds what this binary ignores (docs/upgrading.md: expand
// migrations keep the previous release working); a newer contract step
// drops what it may use, and a table without the contract column cannot
// tell which kind they are.
func (a applied) newer(latest int) ([]int, error) {
	var out []int
	for v := range a.have {
		if v > latest {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil, nil
	}
	if !a.flagged {
		return nil, schemaError(out[len(out)-1], latest)
	}
	for _, v := range out {
		if a.contract[v] {
			return nil, task.Configf("the task center's schema is version %d, newer than this taskd's %d: it has contract step %d (%s) of a newer taskd, which drops what this one uses: upgrade taskd",
				out[len(out)-1], latest, v, a.names[v])
		}
	}
	return out, nil
}

// recordContracts gives a taskd_schema of before the contract column the
// column, and flags the contract steps among the versions this binary
// knows (rows written before the column read 0).
func recordContracts(ctx context.Context, conn *sql.Conn, a applied, migs []Migration) error {
	if !a.flagged {
		stmt, err := portable(`ALTER TABLE taskd_schema ADD COLUMN IF NOT EXISTS contract TINYINT NOT NULL DEFAULT 0`, tableSchema(ctx, conn))
		if err == nil && stmt != "" {
			_, err = conn.ExecContext(ctx, stmt)
		}
		if err != nil {
			return fmt.Errorf("migrate: add taskd_schema.contract: %w", err)
		}
	}
	for _, m := range migs {
		if m.Contract && a.have[m.Version] && !a.contract[m.Version] {
			if _, err := conn.ExecContext(ctx, `UPDATE taskd_schema SET contract = 1 WHERE version = ?`, m.Version); err != nil {
				return fmt.Errorf("migration %s: record as a contract step: %w", m.Name, err)
			}
		}
	}
	return nil
}

// maxVersion is the highest of the versions in have, 0 when none.
func maxVersion(have map[int]bool) int {
	if len(have) == 0 {
		return 0
	}
	return slices.Max(slices.Collect(maps.Keys(have)))
}

// SchemaVersion returns the highest applied migration (0 when none).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM taskd_schema`).Scan(&v)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errNoSuchTable {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// LatestVersion is the schema version this binary migrates to.
func LatestVersion() int {
	migs, err := Migrations()
	if err != nil || len(migs) == 0 {
		return 0 // the embedded files are checked by the tests
	}
	return migs[len(migs)-1].Version
}

// CheckSchema is a config error unless this binary can run on the task
// center's schema: every ordinary migration it knows applied (missing or
// older, `taskd migrate` fixes it) and no contract step it does not know
// (this binary is too old for it; see applied.newer). A contract step
// not applied yet is fine: the code of its release works before and
// after it, and so are a newer taskd's ordinary steps.
func (s *Store) CheckSchema(ctx context.Context) error {
	migs, err := Migrations()
	if err != nil {
		return err
	}
	return s.checkSchema(ctx, migs)
}

func (s *Store) checkSchema(ctx context.Context, migs []Migration) error {
	a, err := readApplied(ctx, s.db)
	if err != nil {
		return err
	}
	v, latest := maxVersion(a.have), migs[len(migs)-1].Version
	if v == 0 {
		return schemaError(v, latest)
	}
	if _, err := a.newer(latest); err != nil {
		return err
	}
	for _, m := range migs {
		if !m.Contract && !a.have[m.Version] {
			if v < latest {
				return schemaError(v, latest)
			}
			return task.Configf("the task center's schema lacks migration %s: run `taskd migrate`", m.Name)
		}
	}
	return nil
}

// NewerVersions returns the applied migrations of a taskd newer than this
// binary, in order (none on its own schema), or the error of CheckSchema
// when one of them is a contract step.
func (s *Store) NewerVersions(ctx context.Context) ([]int, error) {
	a, err := readApplied(ctx, s.db)
	if err != nil {
		return nil, err
	}
	return a.newer(LatestVersion())
}

// PendingContracts returns the contract steps of this binary that the
// task center has not applied yet, in order: what `taskd migrate` defers
// while older processes run.
func (s *Store) PendingContracts(ctx context.Context) ([]Migration, error) {
	migs, err := Migrations()
	if err != nil {
		return nil, err
	}
	return s.pendingContracts(ctx, migs)
}

func (s *Store) pendingContracts(ctx context.Context, migs []Migration) ([]Migration, error) {
	a, err := readApplied(ctx, s.db)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, m := range migs {
		if m.Contract && !a.have[m.Version] {
			out = append(out, m)
		}
	}
	return out, nil
}

// schemaError says what to do about schema version v, for a binary that
// knows up to latest (nil when they match).
func schemaError(v, latest int) error {
	switch {
	case v == 0:
		return task.Configf("the task center has no schema: run `taskd migrate`")
	case v < latest:
		return task.Configf("the task center's schema is version %d, older than this taskd's %d: run `taskd migrate`", v, latest)
	case v > latest:
		return task.Configf("the task center's schema is version %d, newer than this taskd's %d: upgrade taskd to the version that migrated it", v, latest)
	}
	return nil
}

// splitStatements splits a migration file on semicolons that end a line,
// dropping comment lines. Migrations contain no semicolons inside strings.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			out = append(out, stmt)
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// syncLines calls progress (nil: nothing) one line at a time: a slow
// step's line comes from a timer, beside the waits' lines.
func syncLines(progress func(string)) func(string) {
	var mu sync.Mutex
	return func(line string) {
		if progress != nil {
			mu.Lock()
			defer mu.Unlock()
			progress(line)
		}
	}
}

// migrateLock names the migration lock of the connection's database:
// task centers side by side on one server migrate independently (lock
// names are the server's, of at most 64 characters).
const migrateLock = `CONCAT('taskd_migrate.', MD5(DATABASE()))`

// migrateLockPoll is how long one try for the migration lock waits;
// migrateHolderIdle how long its holder may sit idle, running no
// statement, before the wait is given up.
var (
	migrateLockPoll   = 10 * time.Second
	migrateHolderIdle = 60 * time.Second
)

// takeMigrateLock takes the database's migration lock on conn. Deploy
// scripts run migrate on every host at once: the others wait as long as
// the one that holds it works (a rebuild takes minutes), saying what it
// runs, and give up only when it sits idle.
func (s *Store) takeMigrateLock(ctx context.Context, conn *sql.Conn, say func(string)) error {
	var unseen time.Time // since when the holder could not be seen
	for {
		var got, id sql.NullInt64
		if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT GET_LOCK(%s, %d), IS_USED_LOCK(%[1]s)`,
			migrateLock, max(1, int(migrateLockPoll/time.Second)))).Scan(&got, &id); err != nil {
			return fmt.Errorf("migrate: take the migration lock: %w", err)
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if !id.Valid {
			continue // released meanwhile
		}
		var secs sql.NullInt64
		var command, info sql.NullString
		err := conn.QueryRowContext(ctx, `SELECT COMMAND, TIME, INFO FROM information_schema.PROCESSLIST WHERE ID = ?`,
			id.Int64).Scan(&command, &secs, &info)
		if errors.Is(err, sql.ErrNoRows) {
			// Another account's session, which this one sees only with
			// the PROCESS privilege: working or idle cannot be told.
			if unseen.IsZero() {
				unseen = time.Now()
			}
			if time.Since(unseen) >= migrateHolderIdle {
				return fmt.Errorf("migrate: the migration lock is held by connection %d of another account, which this one cannot see (it needs the PROCESS privilege), for %s; KILL %d frees it",
					id.Int64, time.Since(unseen).Round(time.Second), id.Int64)
			}
			say(fmt.Sprintf("waiting for another taskd migrate (connection %d, another account's)", id.Int64))
			continue
		}
		unseen = time.Time{}
		switch {
		case err != nil:
			return fmt.Errorf("migrate: find the migration lock's holder: %w", err)
		case command.String == "Sleep" && time.Duration(secs.Int64)*time.Second >= migrateHolderIdle:
			return fmt.Errorf("migrate: the migration lock is held by connection %d, idle for %ds: a migrate that hangs, or a session that took it; KILL %d frees it",
				id.Int64, secs.Int64, id.Int64)
		case info.Valid:
			say(fmt.Sprintf("waiting for another taskd migrate: connection %d runs %q, for %ds", id.Int64, firstLine(info.String, 60), secs.Int64))
		default:
			say(fmt.Sprintf("waiting for another taskd migrate (connection %d)", id.Int64))
		}
	}
}

// firstLine is the start of s's first line, at most n bytes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// Migration steps run long on a large table (a rebuild: about 17 s a
// million rows here) and wait for other transactions on it.
const (
	// MigrateReadTimeout is the read timeout a migrating connection
	// needs at least: the server answers a table rebuild only when it is
	// done. A dead server is still found by TCP keepalives, and an
	// interrupt stops the statement (applyStep).
	MigrateReadTimeout = 24 * time.Hour
	// migrateLockWait is how long a step's statement waits for its
	// table's metadata lock before it gives way; migrateLockTries how
	// often it tries, migrateLockWait apart.
	migrateLockWait  = 3 * time.Second
	migrateLockTries = 20
	// migrateSlow: a step still running after this is announced.
	migrateSlow = 3 * time.Second
)

// applyStep runs the statements of m on conn. Each is idempotent, so one
// that timed out waiting for its table's metadata lock runs again, up to
// migrateLockTries times. When ctx ends, the statement is stopped on the
// server too, which otherwise goes on with it (and with the migration
// lock) after the connection is gone.
func (s *Store) applyStep(ctx context.Context, conn *sql.Conn, m Migration, say func(string)) error {
	var connID int64
	if err := conn.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&connID); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	start := time.Now()
	var slow atomic.Bool
	announce := time.AfterFunc(migrateSlow, func() {
		slow.Store(true)
		msg := fmt.Sprintf("applying %s (running for %s; a table rebuild takes about 17 s a million rows)", m.Name, migrateSlow)
		if n := s.heldBehind(ctx, connID); n > 0 {
			msg += fmt.Sprintf("; writes to its table wait until it ends, %d held now (Ctrl-C stops it, changing nothing)", n)
		}
		say(msg)
	})
	defer announce.Stop()
	schema := tableSchema(ctx, conn)
	for _, stmt := range splitStatements(m.SQL) {
		stmt, err := portable(stmt, schema)
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if stmt == "" {
			continue // applied before this step was cut short
		}
		began := time.Now()
		for try := 1; ; try++ {
			_, err := conn.ExecContext(ctx, stmt)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				s.killQuery(ctx, connID)
				return fmt.Errorf("migration %s: interrupted: %w", m.Name, ctx.Err())
			}
			if !isLockWait(err) {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			holder := s.oldestTransaction(ctx, connID)
			if try == migrateLockTries {
				return fmt.Errorf("migration %s: its table stayed in use by another transaction for %s (%s): end it, or wait for a quiet minute, and run taskd migrate again",
					m.Name, time.Since(began).Round(time.Second), holder)
			}
			say(fmt.Sprintf("%s waits for its table, in use by another transaction (%s); trying again (%d of %d)", m.Name, holder, try+1, migrateLockTries))
			if !startstop.Sleep(ctx, migrateLockWait) {
				return fmt.Errorf("migration %s: interrupted: %w", m.Name, ctx.Err())
			}
		}
	}
	if announce.Stop() || !slow.Load() {
		return nil // not announced: nothing to close
	}
	say(fmt.Sprintf("applied %s in %s", m.Name, time.Since(start).Round(100*time.Millisecond)))
	return nil
}

// heldBehind counts the statements of other sessions of this database
// that wait for a table's metadata lock while connection self runs a
// step: the writes a rebuild that is not online holds (MariaDB rebuilds a
// table with indexed virtual columns under a shared lock, so the nodes'
// claims and results stop until it ends). Zero when it cannot tell: an
// account without the PROCESS privilege sees only its own sessions.
func (s *Store) heldBehind(ctx context.Context, self int64) int {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var n int
	if err := s.db.QueryRowContext(qctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE DB = DATABASE() AND ID <> ? AND STATE = 'Waiting for table metadata lock'`, self).Scan(&n); err != nil {
		return 0
	}
	return n
}

// killQuery stops the statement connection id runs on the server.
func (s *Store) killQuery(ctx context.Context, id int64) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Best effort: the statement may be over already.
	_, _ = s.db.ExecContext(kctx, fmt.Sprintf(`KILL QUERY %d`, id))
}

// oldestTransaction describes the oldest open InnoDB transaction of
// another connection, one whose session uses this database first (the
// server's other databases' transactions hold no lock on its tables):
// most often what holds a table's metadata lock.
func (s *Store) oldestTransaction(ctx context.Context, self int64) string {
	var id, secs int64
	var user, host string
	err := s.db.QueryRowContext(ctx, `SELECT t.trx_mysql_thread_id, TIMESTAMPDIFF(SECOND, t.trx_started, NOW()),
		COALESCE(p.USER, ''), COALESCE(p.HOST, '')
		FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		WHERE t.trx_mysql_thread_id <> ? ORDER BY p.DB <=> DATABASE() DESC, t.trx_started LIMIT 1`, self).Scan(&id, &secs, &user, &host)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "no open transaction seen; perhaps LOCK TABLES or a long query"
	case err != nil:
		return fmt.Sprintf("its open transactions could not be read: %v", err)
	}
	return fmt.Sprintf("the oldest open one: connection %d of %s@%s, open %ds; KILL %d ends it", id, user, host, secs, id)
}
