package store

import (
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// A batched write carries its integers (ids, attempts, states, counters)
// and its plain strings in its text, and only strings the driver would
// escape as arguments: with the driver's interpolation the server gets
// the same statement, and database/sql has hundreds fewer values to
// convert per batch.
func TestBatchedWritesCarryValuesAsLiterals(t *testing.T) {
	in := time.Second
	ts := []Transition{
		{ID: 7, Attempt: 1, From: task.Running, To: task.Succeeded, SetResult: true, Result: "it's done?",
			Run: &RunRecord{WorkerID: "w1", Outcome: task.OutcomeSucceeded, Duration: time.Millisecond}},
		{ID: 3, Attempt: 2, From: task.Dispatched, To: task.Pending, Retry: RetryInc, NextIn: &in, StartedAt: time.UnixMilli(1_700_000_000_123),
			Run: &RunRecord{WorkerID: "w1", Outcome: task.OutcomeFailed, Duration: 2 * time.Millisecond}},
		{ID: 9, Attempt: 5, From: task.Running, To: task.Dead},
	}
	for _, st := range transitionSQL(ts, 1<<63+5, true, 1<<20) {
		for _, a := range st.args {
			if a != "it's done?" {
				t.Errorf("argument %v (%T) of %q: want only the result, which needs escaping", a, a, st.q)
			}
		}
		for _, want := range []string{"id IN (3, 7, 9)", "claim_token = 9223372036854775813", "attempt = ELT(INTERVAL(id, 3, 7, 9), 2, 1, 5)",
			"worker_id = ''", "FROM_UNIXTIME(ELT(INTERVAL(id, 3, 7), '1700000000.123', NULL))"} {
			if !strings.Contains(st.q, want) {
				t.Errorf("statement lacks %q:\n%s", want, st.q)
			}
		}
		if got, want := strings.Count(st.q, "?"), len(st.args); got != want {
			t.Errorf("%d placeholders for %d arguments", got, want)
		}
	}
}

// A column's lookup lists the id each run of equal values starts at, in
// id order, not every id: the starts of a batch of results come in runs.
func TestLookupsListRuns(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
	var ts []Transition
	for i, ms := range []int64{5, 5, 5, 9, 9, 5, 7} {
		ts = append(ts, Transition{ID: int64(10 + 10*i), Attempt: 1, From: task.Dispatched, To: task.Succeeded, StartedAt: at(ms),
			Run: &RunRecord{WorkerID: "w", Outcome: task.OutcomeSucceeded}})
	}
	// Entries out of id order are put in it first.
	ts[0], ts[6] = ts[6], ts[0]
	sts := transitionSQL(ts, 1, false, 1<<20)
	if len(sts) != 1 {
		t.Fatalf("%d statements", len(sts))
	}
	want := "FROM_UNIXTIME(ELT(INTERVAL(id, 10, 40, 60, 70), '1700000000.005', '1700000000.009', '1700000000.005', '1700000000.007'))"
	if !strings.Contains(sts[0].q, want) {
		t.Errorf("statement lacks %q:\n%s", want, sts[0].q)
	}
	if !strings.Contains(sts[0].q, "id IN (10, 20, 30, 40, 50, 60, 70)") {
		t.Errorf("statement reads other rows:\n%s", sts[0].q)
	}
}

func TestPlainStrings(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "noop": true, "vm-1234-2a56:q.x_y": true, "1700000000.123": true, "a b": true,
		"it's": false, `a"b`: false, `a\b`: false, "a?": false, "a\nb": false, "\x00": false, "é": false,
	} {
		if got := plain(s); got != want {
			t.Errorf("plain(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestUnixArg(t *testing.T) {
	for ms, want := range map[int64]string{
		0: "0.000", 1: "0.001", 1_700_000_000_123: "1700000000.123", 1_700_000_000_100: "1700000000.100",
		-1: "-0.001", -1_500: "-1.500", 999: "0.999",
	} {
		if got := unixArg(time.UnixMilli(ms)); got != want {
			t.Errorf("unixArg(%d ms) = %q, want %q", ms, got, want)
		}
	}
}

// A statement's text is its own: the buffer it was written in goes back
// to the pool and is written over by the next statement.
func TestStatementsOutliveTheirBuffer(t *testing.T) {
	first := transitionSQL([]Transition{{ID: 1, Attempt: 1, From: task.Running, To: task.Succeeded}}, 1, false, 1<<20)[0]
	want := strings.Clone(first.q)
	for range 3 {
		transitionSQL([]Transition{{ID: 999_999, Attempt: 7, From: task.Dispatched, To: task.Dead, SetResult: true, Result: "xxxxxxxxxxxxxxxx"}}, 2, false, 1<<20)
	}
	if first.q != want {
		t.Errorf("the first statement changed:\n%s\nwas\n%s", first.q, want)
	}
}
