package cli

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// warnUnknown says on stderr that a listing's filter names a task code or
// queue nothing knows, with the nearest known one. The listing stays what
// a filter gives, empty with exit 0, for scripts; but at a terminal an
// empty table after `list --queue emial --status dead` must not pass for
// "no dead tasks". Called only when the listing is empty (a name with
// tasks is known).
func (a *App) warnUnknown(ctx context.Context, st *store.Store, code, queue string) {
	for _, err := range []error{a.unknown(ctx, st, (*ops.Ops).CheckCode, code), a.unknown(ctx, st, (*ops.Ops).CheckQueue, queue)} {
		if err != nil {
			fmt.Fprintf(a.Stderr, "taskd: warning: %v\n", err)
		}
	}
}

// unknown is check's not-found error for name, with the nearest known
// name, when the configuration, the live workers and the task center do
// not know it; nil when they do, or when name is "". A check that fails
// to read is no reason to fail what asked, and gives nil.
func (a *App) unknown(ctx context.Context, st *store.Store, check func(*ops.Ops, context.Context, string) error, name string) error {
	if name == "" {
		return nil
	}
	c, err := a.config()
	if err != nil {
		return nil
	}
	if err := check(ops.NewFromConfig(st, nil, c), ctx, name); task.ErrorCode(err) == task.CodeNotFound {
		return err
	}
	return nil
}
