package lock

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
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
// `taskd migrate`.
//
// name is binary-collated so that lock names compare exactly as in Redis.
const createLockTable = `CREATE TABLE IF NOT EXISTS task_lock (
  name       VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  owner      VARCHAR(64) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// acquireLock inserts the lock, or takes it over when it has expired.
// owner must be assigned before expires_at: both IFs then read the old
// expires_at whether the server evaluates assignments left to right (the
// default) or simultaneously (MariaDB's SIMULTANEOUS_ASSIGNMENT).
const acquireLock = `INSERT INTO task_lock (name, owner, expires_at)
VALUES (?, ?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
  owner      = IF(expires_at < UTC_TIMESTAMP(3), VALUES(owner), owner),
  expires_at = IF(expires_at < UTC_TIMESTAMP(3), VALUES(expires_at), expires_at)`

// lockOwned tells whether owner holds the lock, unexpired.
const lockOwned = `SELECT COUNT(*) FROM task_lock
WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(3)`

// renewLock extends a lock its owner still holds, unexpired (an expired
// lock is free for the taking, as in Redis).
//
// UTC_TIMESTAMP and NOW are fixed at the statement's start, SYSDATE is read
// when the row is: the last condition drops a renewal that waited for a
// row lock longer than its caller waited for the reply. The caller has
// given up on it, and applying it would keep the lock from the next owner
// for another TTL. (A renewal that never reached the server is harmless.)
const renewLock = `UPDATE task_lock SET expires_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(3)
  AND TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) < ?`

// releaseLock deletes a lock its owner still holds.
const releaseLock = `DELETE FROM task_lock WHERE name = ? AND owner = ?`

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
	m.ready = true
	return nil
}

func (m *MySQL) tryAcquire(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	if _, err := m.db.ExecContext(ctx, acquireLock, name, token, ttl.Microseconds()); err != nil {
		return false, err
	}
	return m.owned(ctx, name, token)
}

func (m *MySQL) owned(ctx context.Context, name, token string) (bool, error) {
	var n int
	if err := m.db.QueryRowContext(ctx, lockOwned, name, token).Scan(&n); err != nil {
		return false, err
	}
	return n == 1, nil
}

func (m *MySQL) renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	wait := CallTimeout
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	res, err := m.db.ExecContext(ctx, renewLock, ttl.Microseconds(), name, token, wait.Microseconds())
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
	// 0 rows: not ours, or (without CLIENT_FOUND_ROWS) renewed twice within
	// one millisecond, leaving the row unchanged. Tell them apart.
	return m.owned(ctx, name, token)
}

func (m *MySQL) release(ctx context.Context, name, token string) error {
	_, err := m.db.ExecContext(ctx, releaseLock, name, token)
	return err
}
