package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Actor identifies who made an operator action.
type Actor struct {
	User   string // OS user
	Origin string // SSH client address, host, or program
}

// AuditEntry is one row of task_audit.
type AuditEntry struct {
	ID        int64     `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	Actor     string    `json:"actor"`
	Origin    string    `json:"origin"`
	Action    string    `json:"action"`
	Target    string    `json:"target"`
	Affected  int       `json:"affected"`
	Detail    string    `json:"detail,omitempty"`
}

// TaskRetry moves dead, failed or cancelled tasks back to pending, due now,
// and audits it in the same transaction. It returns the ids that changed.
func (s *Store) TaskRetry(ctx context.Context, a Actor, ids []int64) ([]int64, error) {
	return s.taskAction(ctx, a, "retry", qRetry, ids)
}

// TaskCancel cancels tasks that no worker holds (pending, dispatched or
// failed) and audits it. A dispatched task's message is then stale and is
// dropped by the worker that takes it. Running tasks are killed through
// their worker instead.
func (s *Store) TaskCancel(ctx context.Context, a Actor, ids []int64) ([]int64, error) {
	return s.taskAction(ctx, a, "cancel", qCancel, ids)
}

func (s *Store) taskAction(ctx context.Context, a Actor, action, q string, ids []int64) ([]int64, error) {
	var changed []int64
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 1000)]
		ids = ids[len(chunk):]
		token := newToken()
		args := make([]any, 0, len(chunk)+1)
		args = append(args, token)
		for _, id := range chunk {
			args = append(args, id)
		}
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			in := placeholders(len(chunk))
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(q, in), args...); err != nil {
				return err
			}
			done, err := queryIDs(ctx, tx, fmt.Sprintf(qChangedBy, in), append(args[1:len(args):len(args)], token)...)
			if err != nil {
				return err
			}
			detail, _ := json.Marshal(map[string]any{"ids": done, "requested": len(chunk)})
			if _, err := tx.ExecContext(ctx, qAuditInsert, a.User, a.Origin, action, idsTarget(chunk), len(done), string(detail)); err != nil {
				return err
			}
			changed = append(changed, done...)
			return nil
		})
		if err != nil {
			return changed, fmt.Errorf("%s %d tasks: %w", action, len(chunk), err)
		}
	}
	return changed, nil
}

// Audit records an action that changed nothing in the task center itself
// (a kill request carried by Redis, for example).
func (s *Store) Audit(ctx context.Context, a Actor, action, target string, affected int, detail any) error {
	d, _ := json.Marshal(detail)
	if _, err := s.db.ExecContext(ctx, qAuditInsert, a.User, a.Origin, action, target, affected, string(d)); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// AuditList returns audit rows newest first, before id beforeID (0: from
// the newest).
func (s *Store) AuditList(ctx context.Context, beforeID int64, limit int) ([]AuditEntry, error) {
	if beforeID <= 0 {
		beforeID = math.MaxInt64
	}
	rows, err := s.db.QueryContext(ctx, qAuditList, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Origin, &e.Action, &e.Target, &e.Affected, &e.Detail); err != nil {
			return nil, fmt.Errorf("list audit log: %w", err)
		}
		e.CreatedAt = parseUnix(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// idsTarget names a set of task ids for the audit log, shortened.
func idsTarget(ids []int64) string {
	var b strings.Builder
	b.WriteString("tasks ")
	for i, id := range ids {
		if i == 20 {
			fmt.Fprintf(&b, " and %d more", len(ids)-20)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}
