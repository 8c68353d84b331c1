package taskd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/worker"
)

// Job is one attempt of a task whose payload decoded into A.
type Job[A Args] struct {
	Args A
	// ID and Attempt identify the run (Attempt is 1 for the first, and
	// counts every run: a periodic task's occurrences too); UniqueKey is
	// the producer's deduplication key, "" when none. A task can run more
	// than once: use them to make side effects idempotent.
	ID      int64
	Attempt int
	// Retry is the try of the task's retry budget: 0 on its first try,
	// MaxRetry on its last (a failure then is final).
	Retry, MaxRetry int
	UniqueKey       string
	Code            string
	Queue           string
	// Group is the task's group ("" none).
	Group string
	// ScheduledAt is the time the run's occurrence was planned for: a
	// periodic task's cron time, a one-off task's due time. A retry, a run
	// recovered from a dead worker and a run late after an outage keep the
	// time of the run they repeat: which day a nightly report is for, and
	// with ID a key per occurrence.
	ScheduledAt time.Time
	result      string
}

// SetResult sets the attempt's result, kept in the task center (truncated
// to worker.output_limit) and shown by `taskd show` and tasktop.
func (j *Job[A]) SetResult(s string) { j.result = s }

// SetResultJSON sets the attempt's result to v encoded as JSON. A chain's
// child (Then) gets it as its payload, decoded into the child's Args. A
// result past worker.output_limit (64 KiB by default) is cut, and reaches a
// child as a JSON string that does not decode: pass large data by
// reference.
func (j *Job[A]) SetResultJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the result of %s task %d: %w", j.Code, j.ID, err)
	}
	j.result = string(b)
	return nil
}

// Mux holds the Go handlers of a Server, by task code.
type Mux struct {
	mu  sync.Mutex
	reg *handler.Registry
}

// NewMux returns an empty mux.
func NewMux() *Mux { return &Mux{reg: handler.NewRegistry()} }

// Handle registers f for the tasks of A's code (the zero A's Kind). The
// payload is decoded into A; a task whose payload does not decode is dead
// at once (no retry decodes it). f's error fails the attempt (retried as
// the task allows; Permanent(err) makes the task dead at once); a panic
// fails it too, with its stack as the output. ctx ends at the task's
// timeout, on an operator's kill and on shutdown: f must return then. It
// panics when A's Kind is not a valid task code or already has a handler
// in m (a programming error, found at start).
func Handle[A Args](m *Mux, f func(ctx context.Context, job *Job[A]) error) {
	var zero A
	code := zero.Kind()
	m.HandleFunc(code, func(ctx context.Context, r *handler.Request) (string, error) {
		job := &Job[A]{ID: r.ID, Attempt: r.Attempt, Retry: r.Retry, MaxRetry: r.MaxRetry, UniqueKey: r.UniqueKey,
			Code: r.Code, Queue: r.Queue, Group: r.Group, ScheduledAt: r.ScheduledAt}
		if len(r.Payload) > 0 {
			if err := json.Unmarshal(r.Payload, &job.Args); err != nil {
				return "", handler.Permanent(fmt.Errorf("decode the payload of %s task %d: %w", code, r.ID, err))
			}
		}
		err := f(ctx, job)
		return job.result, err
	})
}

// ErrShutdown is context.Cause of a handler's ctx when its server stops
// and the task is handed back (an operator's kill and the task's timeout
// have causes of their own).
var ErrShutdown = worker.ErrShutdown

// Permanent wraps err as a failure no retry can mend (a record that no
// longer exists, a request the far side refuses for good): returned by a
// handler, it makes the task dead at once, whatever retries it has left.
func Permanent(err error) error { return handler.Permanent(err) }

// RetryAfter wraps err as a failure whose retry waits at least d, for a
// handler that knows when to come back (an API's rate limit said so): the
// retry waits the longer of d and the backoff, at most a day, and counts
// as a retry like any other.
func RetryAfter(err error, d time.Duration) error { return handler.RetryLater(err, d) }

// HandleFunc registers f for the tasks of code with the payload as JSON
// text and the output f returns. Like Handle, it panics on a code that is
// not valid or already has a handler in m.
func (m *Mux) HandleFunc(code string, f func(ctx context.Context, r *handler.Request) (output string, err error)) {
	if err := task.ValidateName("task code", code); err != nil {
		panic(fmt.Sprintf("taskd: Handle: %v", err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.reg.Lookup(code); dup {
		// As net/http's mux: two handlers of one code is a bug, and the
		// second silently winning would hide it.
		panic(fmt.Sprintf("taskd: Handle: a handler of task code %q is already registered", code))
	}
	m.reg.Register(code, handler.Func(f))
}

// Server runs a taskd node in this process: every role of the
// configuration (node.roles: scheduler, worker, recovery, ...), its exec,
// pool and http handlers, and the mux's Go handlers, which win on a clash.
// The queue of each Go handler's code is consumed with worker.concurrency
// slots unless the configuration names it.
type Server struct {
	cfg *Config
	mux *Mux
	log *slog.Logger

	mu   sync.Mutex
	node *node.Node
}

// NewServer returns a server; Start or Run starts it.
func NewServer(cfg *Config, mux *Mux) *Server {
	return &Server{cfg: cfg, mux: mux, log: slog.Default()}
}

// WithLogger sets the logger (default slog.Default()).
func (s *Server) WithLogger(log *slog.Logger) *Server {
	s.log = log
	return s
}

// Start connects (waiting for MySQL and Redis until ctx is done) and
// starts the node.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node != nil {
		return errors.New("taskd: server already started")
	}
	cfg := *s.cfg
	if err := checked(&cfg); err != nil {
		return err
	}
	cfg.Queues = maps.Clone(cfg.Queues)
	if cfg.Queues == nil {
		cfg.Queues = map[string]config.QueueConfig{}
	}
	for _, code := range s.mux.reg.Codes() {
		q := task.QueueOf(cfg.QueueFor(code), code)
		if _, ok := cfg.Queues[q]; !ok {
			cfg.Queues[q] = config.QueueConfig{}
		}
	}
	n, err := node.Open(ctx, &cfg, s.mux.reg, s.log)
	if err != nil {
		return err
	}
	if err := n.Start(ctx); err != nil {
		n.Close()
		return err
	}
	s.node = n
	return nil
}

// Stop drains, as on SIGTERM: no new tasks are taken, running ones get
// worker.shutdown_grace to finish, the rest are handed back; then the
// connections close. Safe to call twice or without Start.
func (s *Server) Stop() {
	s.mu.Lock()
	n := s.node
	s.node = nil
	s.mu.Unlock()
	if n != nil {
		n.Close()
	}
}

// Fatal delivers the watchdog's error when this node must exit: a handler
// ignored its cancellation, or results cannot be written. A program that
// uses Start and Stop should Stop and exit on it (a supervisor restarts
// the process); Run returns it. Nil before Start.
func (s *Server) Fatal() <-chan error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return nil
	}
	return s.node.Fatal()
}

// Run starts the server, runs it until ctx is done, and stops it. It
// returns early with the watchdog's error when the node must exit (a
// supervisor should restart the process).
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer s.Stop()
	fatal := s.Fatal()
	select {
	case <-ctx.Done():
		return nil
	case err := <-fatal:
		return err
	}
}
