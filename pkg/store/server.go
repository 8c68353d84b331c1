package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// What `taskd doctor` reads of the server.

const qServerInfo = `SELECT VERSION(), CURRENT_USER(), DATABASE(), @@SESSION.innodb_lock_wait_timeout,
	@@GLOBAL.innodb_lock_wait_timeout, @@SESSION.time_zone, @@system_time_zone,
	TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW()), UNIX_TIMESTAMP(NOW(6)), @@GLOBAL.max_connections,
	@@SESSION.max_user_connections`

const qConnections = `SHOW GLOBAL STATUS WHERE Variable_name IN ('Threads_connected', 'Max_used_connections')`

const qGrants = `SHOW GRANTS FOR CURRENT_USER()`

// qWaitingCodes counts the tasks waiting for a worker per queue and task
// code: pending or failed (due or not), through the claim index like the
// stats, and dispatched (their messages wait in Redis), along the
// in-flight lane, which holds as many as the queues' windows.
var qWaitingCodes = routedGroups(`SELECT MIN(queue) queue, MIN(task_code) task_code, SUM(n) n FROM (`+qWaiting+` UNION ALL
	SELECT queue, task_code, status, 1, 0, NULL FROM task_center WHERE lane = 10 AND lane_at IS NOT NULL AND status = 1
	) w GROUP BY `+exactly("queue", "task_code"), "g.task_code, g.n")

// ServerInfo is the server and session taskd runs on.
type ServerInfo struct {
	Version  string
	User     string // the account the server matched (user@host)
	Database string
	// LockWait is the session's innodb_lock_wait_timeout, GlobalLockWait
	// the server's default.
	LockWait, GlobalLockWait time.Duration
	// TimeZone is the session's time_zone (SYSTEM: SystemTimeZone), Offset
	// the session's offset from UTC.
	TimeZone, SystemTimeZone string
	Offset                   time.Duration
	// Now is the database clock.
	Now time.Time
	// MaxConnections is the server's max_connections, MaxUserConnections
	// the account's limit (its MAX_USER_CONNECTIONS, else the server's
	// max_user_connections; 0: none).
	MaxConnections, MaxUserConnections int
}

// ConnectionUse is how many connections the server holds now and the
// most it held since it started.
type ConnectionUse struct{ Now, Peak int }

// Connections reads the server's connection counters.
func (s *Store) Connections(ctx context.Context) (ConnectionUse, error) {
	var u ConnectionUse
	err := scanRows(ctx, s.db, qConnections, func(r *sql.Rows) error {
		var name string
		var n int
		if err := r.Scan(&name, &n); err != nil {
			return err
		}
		if name == "Threads_connected" {
			u.Now = n
		} else {
			u.Peak = n
		}
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("read connection counters: %w", err)
	}
	return u, nil
}

// Server reads what ServerInfo holds.
func (s *Store) Server(ctx context.Context) (ServerInfo, error) {
	var in ServerInfo
	var lw, glw, off int64
	var now string
	err := s.db.QueryRowContext(ctx, qServerInfo).Scan(&in.Version, &in.User, &in.Database, &lw, &glw,
		&in.TimeZone, &in.SystemTimeZone, &off, &now, &in.MaxConnections, &in.MaxUserConnections)
	if err != nil {
		return in, fmt.Errorf("read server settings: %w", err)
	}
	in.LockWait, in.GlobalLockWait = time.Duration(lw)*time.Second, time.Duration(glw)*time.Second
	in.Offset = time.Duration(off) * time.Second
	in.Now = parseUnix(now)
	return in, nil
}

// Grants returns the GRANT statements of the current account.
func (s *Store) Grants(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, qGrants)
	if err != nil {
		return nil, fmt.Errorf("show grants: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, fmt.Errorf("show grants: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// WaitingCode is the number of tasks of one code waiting in one queue.
type WaitingCode struct {
	Code, Queue string
	Tasks       int64
}

// WaitingCodes returns the codes and queues of the tasks waiting for a
// worker, dispatched ones included. Its cost follows the number of such
// tasks, not the size of the task center.
func (s *Store) WaitingCodes(ctx context.Context) ([]WaitingCode, error) {
	var out []WaitingCode
	err := scanRows(ctx, s.db, qWaitingCodes, func(r *sql.Rows) error {
		var w WaitingCode
		if err := r.Scan(&w.Queue, &w.Code, &w.Tasks); err != nil {
			return err
		}
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting task codes: %w", err)
	}
	return out, nil
}
