package testenv

import (
	"context"

	"github.com/taskd/taskd/pkg/store"
)

// HungStore is a task center whose result writes (TaskTransition) hang
// until Release is closed, as behind a link that froze; the rest works.
type HungStore struct {
	*store.Store
	Release chan struct{}
}

// NewHungStore wraps s.
func NewHungStore(s *store.Store) *HungStore {
	return &HungStore{Store: s, Release: make(chan struct{})}
}

// TaskTransition waits for Release (or ctx), then writes.
func (h *HungStore) TaskTransition(ctx context.Context, ts []store.Transition) ([]bool, error) {
	select {
	case <-h.Release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Store.TaskTransition(ctx, ts)
}
