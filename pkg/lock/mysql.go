package lock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL is the backend for teams without Redis: one row of task_lock per
// held lock. Expiry is judged by the database clock, never this host's.
//
// It uses UTC_TIMESTAMP(3) rather than NOW(3): the same database clock, but
// independent of each session's time_zone, so nodes whose sessions use
// different zones (or a zone with daylight saving) agree on expires_at.
//
// Every statement is a single-row compare-and-set in autocommit; nothing
// depends on which pooled connection runs it, unlike GET_LOCK.
type MySQL struct {
	db *sql.DB

	mu    sync.Mutex
	ready bool // the table exists
}

// NewMySQL returns a Locker on db (the task center's pool). The table is
// created on first use.
func NewMySQL(db *sql.DB) *MySQL { return &MySQL{db: db} }

// createLockTable creates the lock table on first use, so that `taskd lock
// --backend mysql` works around a crontab line on a database that never ran
// `taskd migrate`. A released lock keeps its row (owner ”, expired) so
// that its token goes on growing.
//
// name is binary-collated so that lock names compare exactly as in Redis.
const createLockTable = `CREATE TABLE IF NOT EXISTS task_lock (
  name       VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  owner      VARCHAR(64) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  token      BIGINT UNSIGNED NOT NULL DEFAULT 0,
  host       VARCHAR(255) NOT NULL DEFAULT '',
  pid        INT UNSIGNED NOT NULL DEFAULT 0,
  since      DATETIME(3) NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// lockTableHasToken tells whether task_lock has its token column (a table
// created by an older taskd has not).
const lockTableHasToken = `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_lock' AND COLUMN_NAME = 'token'`

// upgradeLockTable adds the columns of createLockTable that an older
// taskd's table lacks.
const upgradeLockTable = `ALTER TABLE task_lock
  ADD COLUMN token BIGINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN host  VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN pid   INT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN since DATETIME(3) NULL`

// nowMicros is the database clock in microseconds since 1970, whatever the
// session's time zone.
const nowMicros = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))`

// acquireLock inserts the lock, or takes it over when it has expired,
// drawing the next token: max(last + 1, database clock in µs).
// expires_at must be assigned last: every IF then reads the old expires_at
// whether the server evaluates assignments left to right (the default) or
// simultaneously (MariaDB's SIMULTANEOUS_ASSIGNMENT).
const acquireLock = `INSERT INTO task_lock (name, owner, expires_at, token, host, pid, since)
VALUES (?, ?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, ` + nowMicros + `, ?, ?, UTC_TIMESTAMP(3))
ON DUPLICATE KEY UPDATE
  token      = IF(expires_at < UTC_TIMESTAMP(3), GREATEST(token + 1, VALUES(token)), token),
  host       = IF(expires_at < UTC_TIMESTAMP(3), VALUES(host), host),
  pid        = IF(expires_at < UTC_TIMESTAMP(3), VALUES(pid), pid),
  since      = IF(expires_at < UTC_TIMESTAMP(3), VALUES(since), since),
  owner      = IF(expires_at < UTC_TIMESTAMP(3), VALUES(owner), owner),
  expires_at = IF(expires_at < UTC_TIMESTAMP(3), VALUES(expires_at), expires_at)`

// lockOwned is the token of the lock if owner holds it, unexpired.
const lockOwned = `SELECT token FROM task_lock
WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(3)`

// renewLock extends a lock its owner still holds, unexpired (an expired
// lock is free for the taking, as in Redis), and only while the holder
// still trusts it.
//
// UTC_TIMESTAMP and NOW are fixed at the statement's start, SYSDATE is read
// when the row is; a renewal can wait there behind another transaction's
// row lock. Two conditions keep one that waited from extending a lock its
// holder has given up on, which would keep it from the next owner for
// another TTL:
//   - it waited less than its caller waits for the reply (the 4th ?);
//   - more than late (the 5th ?) is left of the lock when the row is read,
//     a bound that ends no later than the holder's trust window (see
//     backend.renew).
const renewLock = `UPDATE task_lock SET expires_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
WHERE name = ? AND owner = ?
  AND TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) < ?
  AND TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) - TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) > ?`

// lockRenewed tells, after a renewal that changed no row, whether it was
// renewed all the same: no row when owner does not hold the lock
// unexpired, else whether its expiry is at least ? microseconds (the TTL
// less its margin) from now.
const lockRenewed = `SELECT expires_at >= UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND FROM task_lock
WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(3)`

// releaseLock frees a lock its owner still holds, keeping the row and its
// token.
const releaseLock = `UPDATE task_lock SET owner = '', expires_at = '1970-01-01'
WHERE name = ? AND owner = ?`

// listLocks lists the held locks.
const listLocks = `SELECT name, host, pid, token,
  COALESCE(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', since), 0),
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), expires_at)
FROM task_lock WHERE expires_at >= UTC_TIMESTAMP(3) ORDER BY name`

// Acquire implements Locker.
func (m *MySQL) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	if err := validate(name, ttl); err != nil {
		return nil, err
	}
	if err := m.ensureTable(ctx); err != nil {
		return nil, err
	}
	return acquire(ctx, m, name, ttl)
}

// ensureTable creates task_lock once per MySQL value.
func (m *MySQL) ensureTable(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	if _, err := m.db.ExecContext(cctx, createLockTable); err != nil {
		return fmt.Errorf("create task_lock: %w", err)
	}
	var n int
	if err := m.db.QueryRowContext(cctx, lockTableHasToken).Scan(&n); err != nil {
		return fmt.Errorf("read task_lock's columns: %w", err)
	}
	if n == 0 {
		// Another host may be upgrading it at the same moment.
		if _, err := m.db.ExecContext(cctx, upgradeLockTable); err != nil && !isMySQLError(err, errDupColumn) {
			return fmt.Errorf("upgrade task_lock: %w", err)
		}
	}
	m.ready = true
	return nil
}

// MySQL error numbers.
const (
	errDupColumn   = 1060
	errBadColumn   = 1054
	errNoSuchTable = 1146
)

func isMySQLError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}

func (m *MySQL) tryAcquire(ctx context.Context, name, owner string, ttl time.Duration, h holder) (uint64, bool, error) {
	if _, err := m.db.ExecContext(ctx, acquireLock, name, owner, ttl.Microseconds(), h.host, h.pid); err != nil {
		return 0, false, err
	}
	return m.owned(ctx, name, owner)
}

// owned returns the lock's token when owner holds it.
func (m *MySQL) owned(ctx context.Context, name, owner string) (uint64, bool, error) {
	var token uint64
	err := m.db.QueryRowContext(ctx, lockOwned, name, owner).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return token, true, nil
}

// List implements Lister. A database where no lock was ever taken has no
// task_lock table, and no locks.
func (m *MySQL) List(ctx context.Context) ([]Held, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	rows, err := m.db.QueryContext(ctx, listLocks)
	switch {
	case isMySQLError(err, errNoSuchTable):
		return nil, nil
	case isMySQLError(err, errBadColumn): // an older taskd's table
		if err := m.ensureTable(ctx); err != nil {
			return nil, err
		}
		rows, err = m.db.QueryContext(ctx, listLocks)
	}
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	defer rows.Close()
	var out []Held
	for rows.Next() {
		h := Held{Backend: "mysql"}
		var since, left int64
		if err := rows.Scan(&h.Name, &h.Host, &h.PID, &h.Token, &since, &left); err != nil {
			return nil, fmt.Errorf("list locks: %w", err)
		}
		if since > 0 {
			h.Since = time.UnixMicro(since)
		}
		h.TTLLeft = time.Duration(left) * time.Microsecond
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	return out, nil
}

func (m *MySQL) renew(ctx context.Context, name, owner string, ttl, late time.Duration) (bool, error) {
	wait := CallTimeout
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	// The server counts from the statement's start, which comes after
	// this by the time the request takes to be sent and read. It gets a
	// quarter less; late bounds what this cannot.
	wait -= max(wait/4, 50*time.Millisecond)
	res, err := m.db.ExecContext(ctx, renewLock, ttl.Microseconds(), name, owner, wait.Microseconds(), late.Microseconds())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	// 0 rows: not ours; or renewed twice within one millisecond, leaving
	// the row unchanged (without CLIENT_FOUND_ROWS); or ours, but the
	// renewal came too late. Tell them apart: only the second is a renewal
	// the caller may trust, and its expiry is this one's, less the time
	// since, which a margin covers.
	var extended bool
	err = m.db.QueryRowContext(ctx, lockRenewed, (ttl - Margin(ttl)).Microseconds(), name, owner).Scan(&extended)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	case !extended:
		return false, errTooLate
	}
	return true, nil
}

func (m *MySQL) release(ctx context.Context, name, owner string) error {
	_, err := m.db.ExecContext(ctx, releaseLock, name, owner)
	return err
}
