package worker

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/cronspec"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Backoff is the delay before retry number retry+1: exponential from base,
// capped at max, with equal jitter (half fixed, half random) so that tasks
// failing together do not retry together, yet never retry sooner than half
// the nominal delay.
func Backoff(base, max time.Duration, retry int) time.Duration {
	d := base
	for i := 0; i < retry && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// attemptEnd is how a handler call ended.
type attemptEnd struct {
	output string
	// value is what the handler told apart from its logs (Request.Value),
	// the children's payload; nil: the output.
	value    *string
	err      error
	timedOut bool
	// interrupted: handed back on shutdown; no retry is counted.
	interrupted bool
	// killed by an operator: the task is cancelled.
	killed bool
	// permanent: the handler said no retry can mend it (ErrPermanent).
	permanent bool
	// retryAfter: the handler asked the retry to wait at least this long
	// (an http endpoint's Retry-After).
	retryAfter time.Duration
	duration   time.Duration
}

// policy turns the end of an attempt into the task's next state.
type policy struct {
	backoff func(retry int) time.Duration
	// now is the database clock's lower bound: the next cron occurrence
	// is the first after now, and a lower bound never skips one the
	// database clock has not reached.
	now             func() time.Time
	defaultTimezone string
	outputLimit     int
}

// transition decides the fenced write that ends attempt m. Periodic tasks
// never die: when their retries are exhausted the run is recorded dead and
// the task moves on to its next occurrence.
func (p *policy) transition(m *task.Message, e *attemptEnd, run *store.RunRecord) store.Transition {
	t := store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Running, Run: run, Batch: m.Batch}
	out := e.output
	if e.err != nil {
		// An error that quotes the output's first line (http's "http 500:
		// <first line of body>", exec's last stderr line when it is the
		// only one) keeps it, as the summary lists show, and the output
		// goes on after it.
		// The error quotes it as valid UTF-8, as the result is kept.
		line, rest, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if line = handler.ValidText(strings.TrimSpace(line)); line != "" && strings.HasSuffix(e.err.Error(), ": "+line) {
			out = rest
		}
	}
	// Output is arbitrary bytes; a utf8mb4 column refuses invalid UTF-8, and
	// a refused batch would hold every other result back. The output's
	// tail is kept, after the error: its line says why it failed.
	result := handler.Truncate(handler.ValidText(out), p.outputLimit)
	if e.err != nil {
		msg := e.err.Error()
		if len(msg) > p.outputLimit {
			msg = msg[:p.outputLimit] + "…"
		}
		msg = handler.ValidText(msg)
		if out != "" {
			msg += "\n" + result
		}
		result = msg
	}
	t.SetResult, t.Result = true, result
	run.Result, run.Duration = t.Result, e.duration

	switch {
	case e.killed:
		t.To, t.Retry, t.Result = task.Cancelled, store.RetryKeep, "killed by operator"
		run.Outcome, run.Result = task.OutcomeCancelled, t.Result
		if m.Type == task.Periodic {
			// A periodic task's run is cancelled; the task moves on.
			return p.nextOccurrence(m, t)
		}
		return t
	case e.interrupted:
		zero := time.Duration(0)
		t.To, t.NextIn, t.Retry, t.SetResult = task.Pending, &zero, store.RetryKeep, false
		run.Outcome = task.OutcomeInterrupted
		return t
	case e.err == nil:
		run.Outcome = task.OutcomeSucceeded
		t.Crash = store.RetryReset
		t.Then = m.Then // created with the write, only if it applies
		if len(t.Then) > 0 && e.value != nil {
			v := handler.Truncate(handler.ValidText(*e.value), p.outputLimit)
			t.Value = &v
		}
		if m.Type != task.Periodic {
			t.To, t.Retry = task.Succeeded, store.RetryKeep
			return t
		}
		return p.nextOccurrence(m, t)
	}

	run.Outcome = task.OutcomeFailed
	if e.timedOut {
		run.Outcome = task.OutcomeTimeout
	}
	if m.RetryCount < m.MaxRetry && !e.permanent {
		d := max(p.backoff(m.RetryCount), e.retryAfter)
		t.To, t.Retry, t.NextIn = task.Failed, store.RetryInc, &d
		return t
	}
	if !e.timedOut {
		run.Outcome = task.OutcomeDead
	}
	if m.Type == task.Periodic {
		return p.nextOccurrence(m, t)
	}
	t.To, t.Retry = task.Dead, store.RetryKeep
	return t
}

// nextOccurrence sends a periodic task back to pending at its next cron
// time after the planned one and now (the misfire rule: missed occurrences
// fire once).
func (p *policy) nextOccurrence(m *task.Message, t store.Transition) store.Transition {
	next, err := cronspec.NextRun(m.CronExpr, cmp.Or(m.Timezone, p.defaultTimezone), time.UnixMilli(m.DueUnixMS), p.now())
	if err != nil {
		if len(t.Then) > 0 && t.Value == nil {
			v := t.Result // the run's own result stays its children's payload
			t.Value = &v
		}
		t.To, t.Retry = task.Dead, store.RetryKeep
		t.SetResult, t.Result = true, "cannot schedule the next run: "+err.Error()
		return t
	}
	t.To, t.Retry, t.NextAt = task.Pending, store.RetryReset, next
	return t
}

// timedOut is an attempt past its timeout, said without Go's words for
// it: "timed out after 10s (signal: terminated)", not "timed out after
// 10s: context deadline exceeded (signal: terminated)", which listings,
// alerts and the run history showed.
type timedOut struct {
	after time.Duration
	err   error
}

func (e timedOut) Error() string {
	rest := strings.Replace(e.err.Error(), context.DeadlineExceeded.Error(), "", 1)
	rest = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":")), ":")
	switch {
	case rest == "":
		return fmt.Sprintf("timed out after %s", e.after)
	case strings.HasPrefix(rest, "("):
		return fmt.Sprintf("timed out after %s %s", e.after, rest)
	}
	return fmt.Sprintf("timed out after %s: %s", e.after, rest)
}

func (e timedOut) Unwrap() error { return e.err }
