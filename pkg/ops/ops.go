// Package ops is the one implementation of operator actions, shared by the
// taskd subcommands and tasktop. Every action is safe under load (each
// change is a compare-and-set), is written to the audit log with who made
// it, and reports exactly what it changed.
package ops

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Ops performs operator actions.
type Ops struct {
	store  *store.Store
	broker *broker.Broker
	actor  store.Actor
	// KillWait is how long Kill waits for the worker running a task to
	// cancel it before taking the task from it (a dead or hung worker).
	KillWait time.Duration
}

// New returns the operator actions, attributed to the current OS user and
// SSH client.
func New(s *store.Store, b *broker.Broker) *Ops {
	return &Ops{store: s, broker: b, actor: CurrentActor(), KillWait: 3 * time.Second}
}

// CurrentActor identifies the operator: OS user, and the SSH client's
// address when there is one, else the host.
func CurrentActor() store.Actor {
	a := store.Actor{User: "unknown"}
	if u, err := user.Current(); err == nil {
		a.User = u.Username
	}
	if c := os.Getenv("SSH_CONNECTION"); c != "" {
		a.Origin = "ssh " + strings.Fields(c)[0]
	} else if h, err := os.Hostname(); err == nil {
		a.Origin = h
	}
	return a
}

// Filter selects tasks for a bulk action.
type Filter struct {
	Status *task.Status
	Queue  string
	Code   string
}

// Change is what an action did.
type Change struct {
	Action    string  `json:"action"`
	Requested int     `json:"requested"`
	Changed   int     `json:"changed"`
	IDs       []int64 `json:"ids"`
}

// Select returns the ids of tasks matching f (all pages).
func (o *Ops) Select(ctx context.Context, f Filter) ([]int64, error) {
	var ids []int64
	p := &store.TaskListParams{Status: f.Status, Queue: f.Queue, Code: f.Code, Limit: 10000}
	for {
		ts, err := o.store.TaskList(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			ids = append(ids, t.ID)
		}
		if len(ts) < p.Limit {
			return ids, nil
		}
		p.BeforeID = ts[len(ts)-1].ID
	}
}

// Retry moves dead, failed or cancelled tasks back to pending, due now,
// with their retry counts reset.
func (o *Ops) Retry(ctx context.Context, ids []int64) (Change, error) {
	done, err := o.store.TaskRetry(ctx, o.actor, ids)
	c := Change{Action: "retry", Requested: len(ids), Changed: len(done), IDs: nonNil(done)}
	if err != nil {
		return c, err
	}
	if len(done) > 0 && o.broker != nil {
		o.broker.Wake(ctx, 0) // best effort: the next poll finds them anyway
	}
	return c, nil
}

// Kill cancels tasks. A running task is cancelled wherever it runs (an
// exec handler's process group is terminated) and becomes cancelled; if its
// worker does not answer within KillWait, the task is taken from it with a
// fenced write, so a late result is rejected. Pending, dispatched and
// failed tasks are cancelled directly.
func (o *Ops) Kill(ctx context.Context, ids []int64) (Change, error) {
	c := Change{Action: "kill", Requested: len(ids), IDs: []int64{}}
	var idle []int64
	running := map[int64]*task.Task{}
	for _, id := range ids {
		t, err := o.store.TaskGet(ctx, id)
		if err != nil {
			return c, err
		}
		if t.Status == task.Running {
			running[id] = t
		} else {
			idle = append(idle, id)
		}
	}
	if len(idle) > 0 {
		done, err := o.store.TaskCancel(ctx, o.actor, idle)
		c.IDs = append(c.IDs, done...)
		if err != nil {
			return c, err
		}
	}
	if len(running) > 0 {
		done, err := o.killRunning(ctx, running)
		c.IDs = append(c.IDs, done...)
		if err != nil {
			return c, err
		}
	}
	c.Changed = len(c.IDs)
	return c, nil
}

func (o *Ops) killRunning(ctx context.Context, running map[int64]*task.Task) ([]int64, error) {
	for id, t := range running {
		if _, err := o.broker.Kill(ctx, broker.KillRequest{ID: id, Attempt: t.Attempt}); err != nil {
			return nil, err
		}
	}
	var done []int64
	deadline := time.Now().Add(o.KillWait)
	for len(running) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		for id, was := range running {
			t, err := o.store.TaskGet(ctx, id)
			if err != nil {
				return done, err
			}
			if t.Status != task.Running || t.Attempt != was.Attempt {
				if t.Status == task.Cancelled {
					done = append(done, id)
				}
				delete(running, id)
			}
		}
	}
	// Workers that did not answer are dead or hung: take the tasks.
	var ts []store.Transition
	var forced []int64
	const why = "killed by operator (its worker did not answer)"
	for id, t := range running {
		forced = append(forced, id)
		ts = append(ts, store.Transition{ID: id, Attempt: t.Attempt, From: task.Running, To: task.Cancelled,
			SetResult: true, Result: why,
			Run: &store.RunRecord{Code: t.Code, Queue: t.QueueName(), WorkerID: t.WorkerID, Outcome: task.OutcomeCancelled, Result: why}})
	}
	if len(ts) > 0 {
		applied, err := o.store.TaskTransition(ctx, ts)
		if err != nil {
			return done, err
		}
		for i, ok := range applied {
			if ok {
				done = append(done, forced[i])
			}
		}
	}
	err := o.store.Audit(ctx, o.actor, "kill", fmt.Sprintf("%d running tasks", len(done)), len(done), map[string]any{"ids": done})
	return done, err
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}
