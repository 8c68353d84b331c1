package taskd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Args is a typed payload: Kind is the task code, the value itself is
// encoded as JSON (encoding/json rules and tags apply).
type Args interface {
	Kind() string
}

// Client submits tasks to the task center. Safe for concurrent use.
type Client struct {
	store  *store.Store
	broker *broker.Broker
	p      *producer.Client
}

// NewClient connects to the task center and Redis of cfg.
func NewClient(ctx context.Context, cfg *Config) (*Client, error) {
	s, err := node.OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b, err := node.OpenBroker(ctx, cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	return &Client{store: s, broker: b, p: producer.New(s, b, producer.Options{
		MaxPayload: cfg.Submit.MaxPayload, QueueFor: cfg.QueueFor, Timezone: cfg.Cron.Timezone,
	})}, nil
}

// Close closes the connections.
func (c *Client) Close() error {
	c.broker.Close()
	return c.store.Close()
}

// Result says what a submission did.
type Result struct {
	ID int64
	// Existing is true when a task with the same code and unique key was
	// there already: nothing new was created, ID is that task's.
	Existing bool
}

// Option tunes a submission: Queue, Delay, At, Priority, Timeout, MaxRetry,
// UniqueKey.
type Option func(*producer.Submission)

// Queue overrides the queue (default: the code's configured queue, else
// the code).
func Queue(q string) Option { return func(s *producer.Submission) { s.Queue = q } }

// Delay makes the task due after d.
func Delay(d time.Duration) Option { return func(s *producer.Submission) { s.Delay = d } }

// At makes the task due at t.
func At(t time.Time) Option { return func(s *producer.Submission) { s.At = t } }

// Priority from 0 (highest) to 9; 5 by default.
func Priority(p int) Option { return func(s *producer.Submission) { s.Priority = &p } }

// Timeout of each attempt; 300 s by default.
func Timeout(d time.Duration) Option { return func(s *producer.Submission) { s.Timeout = d } }

// MaxRetry is the number of retries after a failed attempt; 3 by default.
func MaxRetry(n int) Option { return func(s *producer.Submission) { s.MaxRetry = &n } }

// UniqueKey deduplicates: at most one task per code and key.
func UniqueKey(k string) Option { return func(s *producer.Submission) { s.UniqueKey = k } }

// Submit submits one task with args as its payload.
func (c *Client) Submit(ctx context.Context, args Args, opts ...Option) (Result, error) {
	s, err := submission(args, opts)
	if err != nil {
		return Result{}, err
	}
	r, err := c.p.Submit(ctx, s)
	return Result{ID: r.ID, Existing: r.Existing}, err
}

// SubmitMany submits every task in one statement: all or none.
func (c *Client) SubmitMany(ctx context.Context, args []Args, opts ...Option) ([]Result, error) {
	subs := make([]producer.Submission, len(args))
	for i, a := range args {
		s, err := submission(a, opts)
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		subs[i] = s
	}
	rs, err := c.p.SubmitBatch(ctx, subs)
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = Result{ID: r.ID, Existing: r.Existing}
	}
	return out, err
}

// SubmitJSON submits a task of code with a payload already encoded.
func (c *Client) SubmitJSON(ctx context.Context, code string, payload json.RawMessage, opts ...Option) (Result, error) {
	s := producer.Submission{Code: code, Payload: payload}
	for _, o := range opts {
		o(&s)
	}
	r, err := c.p.Submit(ctx, s)
	return Result{ID: r.ID, Existing: r.Existing}, err
}

// CronResult says what Cron did.
type CronResult struct {
	ID int64
	// Updated is true when the periodic task existed and was changed.
	Updated bool
	// Next is its next run.
	Next time.Time
}

// Cron adds the periodic task name of args's code, or updates it (a deploy
// can run it every time): expr has five fields, or six with seconds, or a
// descriptor (@hourly, @every 5m), in time zone tz ("" is cron.timezone).
// Of the options, Queue, Priority, Timeout and MaxRetry apply.
func (c *Client) Cron(ctx context.Context, name, expr, tz string, args Args, opts ...Option) (CronResult, error) {
	s, err := submission(args, opts)
	if err != nil {
		return CronResult{}, err
	}
	if s.Delay != 0 || !s.At.IsZero() || s.UniqueKey != "" {
		return CronResult{}, task.Invalidf("a periodic task takes no delay, time or unique key")
	}
	r, err := c.p.CronAdd(ctx, producer.Cron{Code: s.Code, Name: name, Expr: expr, Timezone: tz, Payload: s.Payload,
		Queue: s.Queue, Priority: s.Priority, Timeout: s.Timeout, MaxRetry: s.MaxRetry})
	return CronResult{ID: r.ID, Updated: r.Updated, Next: r.Next}, err
}

func submission(args Args, opts []Option) (producer.Submission, error) {
	if args == nil {
		return producer.Submission{}, task.Invalidf("no task arguments")
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return producer.Submission{}, task.Invalidf("encode the payload of %s: %v", args.Kind(), err)
	}
	s := producer.Submission{Code: args.Kind(), Payload: payload}
	for _, o := range opts {
		o(&s)
	}
	return s, nil
}
