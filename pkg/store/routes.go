package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Route is where the tasks of one code go when their row names no queue:
// the queue its handler's nodes consume.
type Route struct {
	Code  string `json:"task_code"`
	Queue string `json:"queue"`
	// Node is the node that recorded it last, SeenAt when.
	Node   string    `json:"node"`
	SeenAt time.Time `json:"seen_at"`
}

// RouteChange is a route a node recorded that differed from the one in
// the task center: nodes disagree on a handler's queue.
type RouteChange struct {
	Code, Queue, Before, BeforeNode string
}

const qRouteGet = `SELECT queue, node FROM task_route WHERE task_code = ? FOR UPDATE`

const qRouteUpsert = `INSERT INTO task_route (task_code, queue, node, seen_at) VALUES (?, ?, ?, NOW(3))
	ON DUPLICATE KEY UPDATE queue = VALUES(queue), node = VALUES(node), seen_at = NOW(3)`

const qRouteList = `SELECT task_code, queue, node, UNIX_TIMESTAMP(seen_at) FROM task_route ORDER BY task_code`

// RouteRecord records that node runs the handlers of routes (task code ->
// queue), and returns the routes whose queue it changed.
func (s *Store) RouteRecord(ctx context.Context, node string, routes map[string]string) ([]RouteChange, error) {
	codes := make([]string, 0, len(routes))
	for c := range routes {
		codes = append(codes, c)
	}
	sort.Strings(codes) // one lock order for every node
	var changes []RouteChange
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		changes = changes[:0]
		for _, code := range codes {
			var before, beforeNode string
			err := tx.QueryRowContext(ctx, qRouteGet, code).Scan(&before, &beforeNode)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err == nil && before != routes[code] {
				changes = append(changes, RouteChange{Code: code, Queue: routes[code], Before: before, BeforeNode: beforeNode})
			}
			if _, err := tx.ExecContext(ctx, qRouteUpsert, code, routes[code], node); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record task routes: %w", err)
	}
	return changes, nil
}

// RouteList returns every recorded route, by task code: the task codes
// some node has a handler for, the queue their consumers take them from,
// and which node said so last, when.
func (s *Store) RouteList(ctx context.Context) ([]Route, error) {
	rows, err := s.db.QueryContext(ctx, qRouteList)
	if err != nil {
		return nil, fmt.Errorf("list task routes: %w", err)
	}
	defer rows.Close()
	var out []Route
	for rows.Next() {
		var r Route
		var at string
		if err := rows.Scan(&r.Code, &r.Queue, &r.Node, &at); err != nil {
			return nil, fmt.Errorf("list task routes: %w", err)
		}
		r.SeenAt = parseUnix(at)
		out = append(out, r)
	}
	return out, rows.Err()
}
