// Package handler runs one attempt of a task: an external command per
// attempt (Exec), a long-lived process of a Pool speaking the pool protocol,
// an HTTP endpoint (HTTP) or a Go function (Func), looked up by task code in
// a Registry.
package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Request is one attempt of a task as a handler sees it.
type Request struct {
	ID      int64
	Code    string
	Queue   string
	Attempt int
	// Retry is the try of the task's retry budget (0: its first try, MaxRetry:
	// its last). Attempt counts every run, a periodic task's occurrences too.
	Retry, MaxRetry int
	UniqueKey       string
	// Group is the task's group ("" none).
	Group string
	// ScheduledAt is the time the run's occurrence was planned for: a
	// periodic task's cron time, a one-off task's due time; a retry, a
	// late run after an outage and a run recovered from a dead worker
	// keep the time of the run they repeat. Which day's report to make,
	// and with ID an idempotency key per occurrence. Zero: unknown.
	ScheduledAt time.Time
	Payload     []byte // JSON
	// Tail, when set, receives the attempt's output as it comes (see
	// Tail): Exec its stdout and stderr, HTTP the response body, Pool
	// the process's stderr. A Go handler may write its progress to it.
	Tail io.Writer
	// Value, when set (the task has children, whose payload it is), is
	// told what a successful attempt returned apart from its logs, by a
	// handler whose output mixes the two: an exec command's stdout
	// without its stderr, a pool process's result without its stderr.
	// Untold, the output is the value.
	Value func(string)
}

// withTail is w, also writing to the request's tail when it has one.
func (r *Request) withTail(w io.Writer) io.Writer {
	if r.Tail == nil {
		return w
	}
	return io.MultiWriter(w, r.Tail)
}

// Handler runs one attempt. output is kept (truncated) as the task's result;
// a non-nil error fails the attempt. Handlers must return promptly when ctx
// is done (ctx carries the task's timeout, and is cancelled when an operator
// kills the task or the daemon hands the task back on shutdown).
type Handler interface {
	Handle(ctx context.Context, r *Request) (output string, err error)
}

// Func adapts a Go function (registered by programs embedding pkg/ as a
// library).
type Func func(ctx context.Context, r *Request) (string, error)

// Handle calls f.
func (f Func) Handle(ctx context.Context, r *Request) (string, error) { return f(ctx, r) }

// Registry maps task codes to handlers. Safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Handler{}} }

// Register sets the handler of code, replacing any earlier one, so a program
// embedding pkg/ can override a handler that came from configuration.
func (r *Registry) Register(code string, h Handler) {
	if code == "" || h == nil {
		panic("handler: Register needs a code and a handler")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[code] = h
}

// Lookup returns the handler of code.
func (r *Registry) Lookup(code string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.m[code]
	return h, ok
}

// Codes returns the registered task codes, sorted.
func (r *Registry) Codes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}

// Safe calls h.Handle and turns a panic into an error, so one broken Go
// handler fails its attempt instead of crashing the worker. The output then
// holds the panicking frames.
func Safe(ctx context.Context, h Handler, r *Request) (out string, err error) {
	defer func() {
		if v := recover(); v != nil {
			if e, ok := v.(error); ok {
				err = fmt.Errorf("handler panicked: %w", e) // keep errors.Is working
			} else {
				err = fmt.Errorf("handler panicked: %v", v)
			}
			out = fmt.Sprintf("panic: %v\n\n%s", v, panicStack())
		}
	}()
	return h.Handle(ctx, r)
}

// panicStack formats the frames between the panic and Safe: what the
// handler's author needs, without the runtime's and the worker's frames.
func panicStack() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "/handler.Safe") {
			break
		}
		if !strings.HasPrefix(f.Function, "runtime.") {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	return b.String()
}

// ErrPermanent marks a failure no retry can mend (a payload that does not
// decode, a record that no longer exists): the task is dead at once,
// whatever retries it has left.
var ErrPermanent = errors.New("permanent failure")

// Permanent wraps err as a failure no retry can mend (ErrPermanent).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w (%w: not retried)", err, ErrPermanent)
}

// Capped is a handler whose attempts have a time limit of their own
// (handlers.CODE.timeout): an attempt runs for the shorter of that and
// its task's timeout.
type Capped interface {
	AttemptTimeout() time.Duration // 0: the task's timeout alone
}

// AttemptTimeout is the time an attempt of h may run, given its task's
// timeout.
func AttemptTimeout(h Handler, task time.Duration) time.Duration {
	if c, ok := h.(Capped); ok && c.AttemptTimeout() > 0 {
		return min(task, c.AttemptTimeout())
	}
	return task
}

// RetryLater wraps err as a failure whose retry must wait at least d (a
// rate-limited API that said when to come back); the retry waits the
// longer of d and its backoff, and still counts as a retry. d is capped at
// a day: a wrong figure must not park a task for years.
func RetryLater(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryLater{err: err, after: min(max(d, 0), retryAfterMax)}
}

type retryLater struct {
	err   error
	after time.Duration
}

func (e *retryLater) Error() string             { return e.err.Error() }
func (e *retryLater) Unwrap() error             { return e.err }
func (e *retryLater) RetryAfter() time.Duration { return e.after }

// RetryAfter is how long the task must wait before its retry, as err asks
// (an http endpoint's Retry-After, RetryLater); 0 when err does not say. The retry
// waits the longer of this and its backoff.
func RetryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// timeFormat is how handlers other than Go's get a time: UTC, to the
// millisecond, as RFC 3339 (and PHP's DateTimeImmutable) reads it.
const timeFormat = "2006-01-02T15:04:05.000Z"

// formatTime is t in timeFormat ("" for the zero time).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}
