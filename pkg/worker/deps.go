package worker

import (
	"context"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Store is what the worker needs of the task center: *store.Store, or a
// wrapper of it that injects failures in a test.
type Store interface {
	store.TimeSource
	// TaskMarkRunning moves dispatched attempts to running (fenced).
	TaskMarkRunning(ctx context.Context, workerID string, fences []store.Fence) ([]bool, error)
	// TaskTransition writes results and hand-backs (fenced).
	TaskTransition(ctx context.Context, ts []store.Transition) ([]bool, error)
	TaskGet(ctx context.Context, id int64) (*task.Task, error)
	// TaskStates reads the state of tasks (absent: deleted).
	TaskStates(ctx context.Context, ids []int64) (map[int64]store.TaskState, error)
}

// Broker is what the worker needs of Redis: *broker.Broker, or a wrapper
// of it.
type Broker interface {
	// TakeMany moves messages of several queues into the worker's
	// processing lists in one round trip; WaitNotify blocks on the wake
	// tokens of queues, Interrupt ends that wait.
	TakeMany(ctx context.Context, w string, reqs []broker.TakeRequest) ([]broker.Taken, error)
	WaitNotify(ctx context.Context, w string, queues []string, wait time.Duration) (string, error)
	Interrupt(ctx context.Context, w string) error
	// Layout tells which queues are paused, and when that changes.
	Layout() broker.Layout
	Ack(ctx context.Context, w string, msgs map[string][]string) error
	AckEnded(ctx context.Context, w string, msgs map[string][]string, at time.Time, ended map[string]broker.Ended) error
	Quarantine(ctx context.Context, q, w, raw string) error
	Kills(ctx context.Context) (<-chan broker.KillRequest, func() error)
	// Killed reads the kill requests kept since since, for the attempts
	// killed while this worker did not listen.
	Killed(ctx context.Context, since time.Time) ([]broker.Killed, error)
	BeatCounts(ctx context.Context, hb *broker.Heartbeat, ttl time.Duration, at time.Time, c broker.Counts) error
	// Withdraw deletes the worker's heartbeat: recovery takes its tasks
	// without waiting for the TTL.
	Withdraw(ctx context.Context, w string) error
	Orphans(ctx context.Context, w string) (map[string][]string, error)
	// Leave removes the worker's lists and registration at a clean stop.
	Leave(ctx context.Context, w string) error
	// PublishTail stores a running attempt's latest output.
	PublishTail(ctx context.Context, t *broker.TaskTail) error
	// ReleaseLeases gives back the leases of ended attempts of queues
	// limited at take; RenewLeases extends those still running.
	ReleaseLeases(ctx context.Context, leases map[string][]string) error
	RenewLeases(ctx context.Context, leases map[string][]string, ttl time.Duration) error
	// Wake tells the schedulers that tasks may be due: a grouped task's
	// end may free its group.
	Wake(ctx context.Context, d time.Duration) error
}
