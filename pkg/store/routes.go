package store

import (
	"context"
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

// RouteRecord records that node runs the handlers of routes (task code ->
// queue), and returns the routes whose queue it changed. Each route is one
// statement of its own: nodes starting at once record the same routes.
func (s *Store) RouteRecord(ctx context.Context, node string, routes map[string]string) ([]RouteChange, error) {
	before, err := s.RouteList(ctx)
	if err != nil {
		return nil, err
	}
	had := make(map[string]Route, len(before))
	for _, r := range before {
		had[r.Code] = r
	}
	codes := make([]string, 0, len(routes))
	for c := range routes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var changes []RouteChange
	for _, code := range codes {
		if _, err := s.db.ExecContext(ctx, qRouteUpsert, code, routes[code], node); err != nil {
			return nil, fmt.Errorf("record task route %s: %w", code, err)
		}
		if r, ok := had[code]; ok && r.Queue != routes[code] {
			changes = append(changes, RouteChange{Code: code, Queue: routes[code], Before: r.Queue, BeforeNode: r.Node})
		}
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
