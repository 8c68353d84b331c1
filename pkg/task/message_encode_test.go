package task

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// FuzzEncodeMessage: Encode writes exactly the bytes json.Marshal writes,
// or fails where it fails, for any message.
//
//	go test -run NONE -fuzz FuzzEncodeMessage -fuzztime 5m ./pkg/task/
func FuzzEncodeMessage(f *testing.F) {
	add := func(m *Message) {
		f.Add(m.ID, int64(m.Attempt), m.Code, m.Queue, int8(m.Type), []byte(m.Payload), m.Payload == nil,
			m.UniqueKey, m.CronExpr, m.Timezone, int64(m.Timeout), int64(m.MaxRetry), int64(m.RetryCount),
			int64(m.Priority), m.DueUnixMS, m.ScheduledUnixMS, m.DispatchedUnixMS, []byte(m.Then), m.Then == nil,
			m.Batch, m.TraceParent, m.Group, m.Grouped)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 40 {
		add(randomMessage(r, r.IntN(2) == 0))
	}
	for _, raw := range []string{
		`{"a": 1}`, " 1", "1 ", "[1,\n2]", `"a b"`, `"a\" b"`, `"\\"`, `{"a":"<"}`, `"&"`,
		"\"\u2028\"", "\"\u2029\"", "\"\u2027\"", `"é"`, "\"\xff\"", `{"a":}`, `[1,2}`, `tru`, `01`,
		`1.5e3`, `null`, `{}`, `[]`, "", `"a\u003cb"`, `{"a":[1,"]}"]}`,
	} {
		add(&Message{ID: 1, Attempt: 1, Code: "c", Payload: json.RawMessage(raw), Then: json.RawMessage(raw)})
	}
	for _, s := range []string{"a\"b", `a\b`, "a\nb", "a\x7fb", "<", ">", "&", "\u2028", "\u2029", "é€😀", "\xff", "a\xe2\x80"} {
		add(&Message{ID: 1, Attempt: 1, Code: s, Queue: s, Group: s, TraceParent: s})
	}
	add(&Message{Type: -1})
	add(&Message{Type: 7, Grouped: true, Batch: -1})
	f.Fuzz(func(t *testing.T, id, attempt int64, code, queue string, typ int8, payload []byte, payloadNil bool,
		unique, cron, tz string, timeout, maxRetry, retryCount, priority, due, sched, dispatched int64,
		then []byte, thenNil bool, batch int64, tp, group string, grouped bool) {
		if payloadNil {
			payload = nil
		}
		if thenNil {
			then = nil
		}
		m := &Message{
			ID: id, Attempt: int(attempt), Code: code, Queue: queue, Type: Type(typ), Payload: payload,
			UniqueKey: unique, CronExpr: cron, Timezone: tz, Timeout: int(timeout), MaxRetry: int(maxRetry),
			RetryCount: int(retryCount), Priority: int(priority), DueUnixMS: due, ScheduledUnixMS: sched, DispatchedUnixMS: dispatched,
			Then: then, Batch: batch, TraceParent: tp, Group: group, Grouped: grouped,
		}
		got, err := m.Encode()
		want, wantErr := json.Marshal(m)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Encode error %v, json.Marshal error %v, for %+v", err, wantErr, m)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Encode differs from json.Marshal for %+v:\n got  %s\n want %s", m, got, want)
		}
		if b, ok := appendPlain(nil, m); ok && !bytes.Equal(b, want) {
			t.Fatalf("plain encode differs for %+v:\n got  %s\n want %s", m, b, want)
		}
	})
}

// Messages of plain strings and compact payloads (what the scheduler
// pushes) are written without json.Marshal.
func TestPlainMessagesEncodePlain(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		m := randomMessage(r, true)
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendPlain(nil, m)
		if !ok {
			t.Fatalf("not encoded plainly: %s", want)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("plain encode differs:\n got  %s\n want %s", got, want)
		}
	}
	var nilMsg *Message
	if b, err := nilMsg.Encode(); err != nil || string(b) != "null" {
		t.Fatalf("nil message: %s, %v", b, err)
	}
}

// BenchmarkEncodeMessage encodes a message as the scheduler pushes it.
func BenchmarkEncodeMessage(b *testing.B) {
	m := &Message{ID: 1234567, Attempt: 1, Code: "send_email", Queue: "send_email", Payload: json.RawMessage(`{"to":"a@example.com","n":3}`),
		Timeout: 60, MaxRetry: 3, DueUnixMS: 1764600000000, DispatchedUnixMS: 1764600000123}
	for _, c := range []struct {
		name   string
		encode func() ([]byte, error)
	}{{"plain", m.Encode}, {"encoding-json", func() ([]byte, error) { return json.Marshal(m) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.encode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The message carries the scheduled time only when it differs from the
// due time, and a decoded message gives it back.
func TestScheduledTimeInTheMessage(t *testing.T) {
	t.Parallel()
	m := &Message{ID: 1, Attempt: 2, Code: "c", Queue: "c", Payload: []byte(`{}`), DueUnixMS: 2000, ScheduledUnixMS: 1000}
	b, err := m.Encode()
	if err != nil || !bytes.Contains(b, []byte(`"due_ms":2000,"sched_ms":1000,`)) {
		t.Fatalf("encoded %s, %v", b, err)
	}
	if d, err := DecodeMessage(b); err != nil || d.Scheduled().UnixMilli() != 1000 {
		t.Fatalf("decoded %+v, %v", d, err)
	}
	m.ScheduledUnixMS = 0
	if b, _ = m.Encode(); bytes.Contains(b, []byte("sched_ms")) {
		t.Fatalf("encoded %s: sched_ms only when it differs from due_ms", b)
	}
	if got := m.Scheduled().UnixMilli(); got != 2000 {
		t.Fatalf("scheduled %d, want the due time", got)
	}
	m.DueUnixMS = 0
	if !m.Scheduled().IsZero() {
		t.Fatal("a message without times is scheduled at 1970")
	}
}
