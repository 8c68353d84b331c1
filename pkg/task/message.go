package task

import (
	"encoding/json"
	"fmt"
	"time"
)

// Message is what a scheduler pushes to a Redis queue for one dispatch of a
// task. It carries everything a worker needs to run the task and write its
// result, so the hot path reads nothing back from MySQL. Attempt is the
// fencing token: every write a worker makes for this message is a
// compare-and-set on (ID, Attempt).
type Message struct {
	ID         int64           `json:"id"`
	Attempt    int             `json:"attempt"`
	Code       string          `json:"code"`
	Queue      string          `json:"queue"`
	Type       Type            `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	UniqueKey  string          `json:"unique_key,omitempty"`
	CronExpr   string          `json:"cron,omitempty"`
	Timezone   string          `json:"tz,omitempty"`
	Timeout    int             `json:"timeout"`
	MaxRetry   int             `json:"max_retry"`
	RetryCount int             `json:"retry_count"`
	Priority   int             `json:"priority"`
	DueUnixMS  int64           `json:"due_ms"` // plan_next_run_at, for the due-to-start latency
	// ScheduledUnixMS is the time the run's occurrence was planned for
	// when a retry or a recovery moved its due time past it
	// (scheduled_at); 0: DueUnixMS is that time. See Scheduled.
	ScheduledUnixMS int64 `json:"sched_ms,omitempty"`
	// DispatchedUnixMS is dispatched_at: recovery compares it with the
	// oldest message of a queue to tell a waiting message from a lost one.
	DispatchedUnixMS int64 `json:"dispatched_ms"`
	// Then are the tasks to submit when this one succeeds (then_spec, a
	// JSON array of Child), passed through to the result write.
	Then json.RawMessage `json:"then,omitempty"`
	// Batch is the batch the task is a member of (0: none).
	Batch int64 `json:"batch,omitempty"`
	// TraceParent is the W3C trace context of the span that submitted the
	// task (task_center.trace_parent): each attempt's span links to it.
	// Optional: messages without it run untraced by their producer.
	TraceParent string `json:"tp,omitempty"`
	// Group is the task's group (group_key): per-group limits and serial
	// order apply to each group separately.
	Group string `json:"group,omitempty"`
	// Grouped: the scheduler dispatched it as its group's turn, so its end
	// may free the group; the worker then wakes the schedulers.
	Grouped bool `json:"grouped,omitempty"`
}

// Encode serialises the message for a Redis list, as json.Marshal does.
// The scheduler encodes every message it pushes, so messages of plain
// strings and compact raw values are written without reflection
// (appendPlain); any other goes through json.Marshal.
func (m *Message) Encode() ([]byte, error) {
	if m != nil {
		if b, ok := appendPlain(make([]byte, 0, 256+len(m.Payload)+len(m.Then)), m); ok {
			return b, nil
		}
	}
	return json.Marshal(m)
}

// DecodeMessage parses a queued message. A message that does not parse or
// lacks its identity is poison: the caller moves it aside. Messages as
// Encode writes them are read without reflection (decodePlain, a tenth of
// a worker's CPU per task with encoding/json); any other goes through
// encoding/json.
func DecodeMessage(b []byte) (*Message, error) {
	m, ok := decodePlain(b)
	if !ok {
		m = &Message{}
		if err := json.Unmarshal(b, m); err != nil {
			return nil, fmt.Errorf("decode message: %w", err)
		}
	}
	if m.ID <= 0 || m.Attempt <= 0 || m.Code == "" {
		return nil, fmt.Errorf("decode message: missing id, attempt or code")
	}
	return m, nil
}

// Scheduled is the time the run's occurrence was planned for: its due
// time, or a retried or recovered run's first due time (zero when the
// message has neither).
func (m *Message) Scheduled() time.Time {
	switch {
	case m.ScheduledUnixMS != 0:
		return time.UnixMilli(m.ScheduledUnixMS)
	case m.DueUnixMS != 0:
		return time.UnixMilli(m.DueUnixMS)
	}
	return time.Time{}
}
