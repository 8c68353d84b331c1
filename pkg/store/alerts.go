package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AlertStates returns the alerter's states, one JSON document per alert
// by its name (its labels).
func (s *Store) AlertStates(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	err := scanRows(ctx, s.db, `SELECT name, state FROM task_alert`, func(r *sql.Rows) error {
		var name, state string
		if err := r.Scan(&name, &state); err != nil {
			return err
		}
		out[name] = state
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read alert states: %w", err)
	}
	return out, nil
}

// SaveAlertStates writes set and deletes del in one transaction, so that a
// reader never sees half an evaluation.
func (s *Store) SaveAlertStates(ctx context.Context, set map[string]string, del []string) error {
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if len(set) > 0 {
			names := slices.Sorted(maps.Keys(set)) // one lock order for every writer
			args := make([]any, 0, 3*len(names))
			for _, n := range names {
				args = append(args, alertID(n), n, set[n])
			}
			q := `INSERT INTO task_alert (id, name, state) VALUES ` + strings.Repeat("(?, ?, ?), ", len(names)-1) +
				`(?, ?, ?) ON DUPLICATE KEY UPDATE name = VALUES(name), state = VALUES(state)`
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		if len(del) > 0 {
			args := make([]any, len(del))
			for i, n := range del {
				args[i] = alertID(n)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM task_alert WHERE id IN (`+placeholders(len(del))+`)`, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save alert states: %w", err)
	}
	return nil
}

// alertID is the key of alert name: names (an alert's labels) can be
// longer than a key.
func alertID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}
