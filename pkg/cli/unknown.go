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
// tasks is known); a check that fails to read is no reason to fail the
// listing, and says nothing.
func (a *App) warnUnknown(ctx context.Context, st *store.Store, code, queue string) {
	c, err := a.config()
	if err != nil {
		return
	}
	o := ops.NewFromConfig(st, nil, c)
	var errs []error
	if code != "" {
		errs = append(errs, o.CheckCode(ctx, code))
	}
	if queue != "" {
		errs = append(errs, o.CheckQueue(ctx, queue))
	}
	for _, err := range errs {
		if task.ErrorCode(err) == task.CodeNotFound {
			fmt.Fprintf(a.Stderr, "taskd: warning: %v\n", err)
		}
	}
}
