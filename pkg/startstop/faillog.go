package startstop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// FailLogRepeatDefault is how often a loop that keeps failing says so again.
const FailLogRepeatDefault = time.Minute

// FailLog logs the failed passes of a loop that runs every second or so
// without a line a second while a dependency is down (a MySQL restart gave
// two such lines a second per node): the first failure, then one line per
// Repeat with how many passes failed since it began, and one line when a
// pass works again. Safe for concurrent use.
type FailLog struct {
	// Log receives the lines; Level is the failures' level (the line of
	// a pass that works again is Info).
	Log   *slog.Logger
	Level slog.Level
	// Failed is the message of a failure ("batch pass failed"), Again the
	// one of the first pass that works after failures ("batch pass works
	// again").
	Failed, Again string
	// Repeat is the time between lines while passes keep failing
	// (default FailLogRepeatDefault).
	Repeat time.Duration
	// Limit is the time a pass may take, if it sets one: a pass it cut
	// logs "no answer within" it, where the bare "context deadline
	// exceeded" would not say that a server stopped answering.
	Limit time.Duration

	mu     sync.Mutex
	failed int // passes failed since the last one that worked
	first  time.Time
	logged time.Time
}

// Fail records a failed pass, and logs it with attrs when it is the first
// or Repeat passed since the last line.
func (f *FailLog) Fail(err error, attrs ...any) {
	f.mu.Lock()
	now := time.Now()
	f.failed++
	n, first := f.failed, f.first
	if n == 1 {
		f.first, first = now, now
	} else if now.Sub(f.logged) < cmp.Or(f.Repeat, FailLogRepeatDefault) {
		f.mu.Unlock()
		return
	}
	f.logged = now
	f.mu.Unlock()
	if f.Limit > 0 && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (no answer within %s)", err, f.Limit)
	}
	attrs = append([]any{"err", err}, attrs...)
	if n == 1 {
		f.Log.Log(context.Background(), f.Level, f.Failed, attrs...)
		return
	}
	f.Log.Log(context.Background(), f.Level, f.Failed, append(attrs,
		"failed_passes", n, "failing_for", now.Sub(first).Round(time.Second))...)
}

// Pass records a pass's outcome: a failure, unless ctx ended (a stop is
// no failure), or a pass that worked.
func (f *FailLog) Pass(ctx context.Context, err error) {
	switch {
	case err == nil:
		f.OK()
	case ctx.Err() == nil:
		f.Fail(err)
	}
}

// OK records a pass that worked, and logs it when passes failed before it.
func (f *FailLog) OK() {
	f.mu.Lock()
	n, first := f.failed, f.first
	f.failed = 0
	f.mu.Unlock()
	if n > 0 {
		f.Log.Info(f.Again, "failed_passes", n, "failed_for", time.Since(first).Round(time.Second))
	}
}
