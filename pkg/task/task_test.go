package task_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/task"
)

func requireInvalid(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err), msgAndArgs...)
}

func TestValidatePayload(t *testing.T) {
	t.Parallel()

	t.Run("valid JSON values", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{`{}`, `{"to":"a@example.com","n":[1,2,3]}`, `[]`, `"text"`, `42`, `null`, " {\"a\":1}\n"} {
			require.NoError(t, task.ValidatePayload([]byte(p), 0), "payload %q", p)
		}
	})

	t.Run("invalid JSON", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{``, ` `, `{`, `{"a":}`, `not json`, `{}{}`, `{"a":1} x`, `'single'`, "\xff"} {
			err := task.ValidatePayload([]byte(p), 0)
			requireInvalid(t, err, "payload %q", p)
			require.Contains(t, err.Error(), "not valid JSON")
			require.NotContains(t, err.Error(), "\n")
		}
		// The error says why and where, so that a shell's quoting can be
		// found in a long payload.
		for p, want := range map[string]string{
			`{a:1}`:      "invalid character 'a' looking for beginning of object key string at byte 2",
			`{"a":1}x`:   "invalid character 'x' after top-level value at byte 8",
			`{"a":[1,2}`: "invalid character '}' after array element at byte 10",
			`{"a":1`:     "unexpected end of JSON input",
			"  ":         "it is empty (give {} for no payload)",
		} {
			require.ErrorContains(t, task.ValidatePayload([]byte(p), 0), want, "payload %q", p)
		}
	})

	t.Run("explicit size limit", func(t *testing.T) {
		t.Parallel()
		p := []byte(`"` + strings.Repeat("x", 98) + `"`) // 100 bytes
		require.NoError(t, task.ValidatePayload(p, 100), "exactly at the limit")
		err := task.ValidatePayload(p, 99)
		requireInvalid(t, err)
		require.Contains(t, err.Error(), "100 bytes")
		require.Contains(t, err.Error(), "99")
	})

	t.Run("default limit is 1 MiB", func(t *testing.T) {
		t.Parallel()
		at := []byte(`"` + strings.Repeat("x", task.DefaultMaxPayload-2) + `"`)
		require.Len(t, at, task.DefaultMaxPayload)
		require.NoError(t, task.ValidatePayload(at, 0))
		require.NoError(t, task.ValidatePayload(at, -1))
		over := []byte(`"` + strings.Repeat("x", task.DefaultMaxPayload-1) + `"`)
		requireInvalid(t, task.ValidatePayload(over, 0))
		requireInvalid(t, task.ValidatePayload(over, -1))
		require.NoError(t, task.ValidatePayload(over, 2<<20), "a configured larger limit")
	})
}

func TestParseStatus(t *testing.T) {
	t.Parallel()

	want := map[string]task.Status{
		"pending": task.Pending, "dispatched": task.Dispatched, "running": task.Running,
		"succeeded": task.Succeeded, "failed": task.Failed, "dead": task.Dead, "cancelled": task.Cancelled,
	}
	for name, st := range want {
		got, err := task.ParseStatus(name)
		require.NoError(t, err)
		require.Equal(t, st, got, name)
		require.Equal(t, name, st.String())

		got, err = task.ParseStatus(fmt.Sprint(int(st)))
		require.NoError(t, err)
		require.Equal(t, st, got, "by number %d", st)
	}
	// The numbers are the contract of DESIGN.md.
	require.EqualValues(t, 0, task.Pending)
	require.EqualValues(t, 1, task.Dispatched)
	require.EqualValues(t, 2, task.Running)
	require.EqualValues(t, 3, task.Succeeded)
	require.EqualValues(t, 4, task.Failed)
	require.EqualValues(t, 5, task.Dead)
	require.EqualValues(t, 6, task.Cancelled)

	got, err := task.ParseStatus("canceled")
	require.NoError(t, err)
	require.Equal(t, task.Cancelled, got, "the American spelling")
	_, err = task.ParseStatus("runing")
	requireInvalid(t, err, "a typo")
	require.Contains(t, err.Error(), `unknown status "runing" (did you mean "running"?) (want one of pending,`)

	for _, bad := range []string{"", "bogus", "7", "-1", "10", "00", " pending", "pend", "6 "} {
		_, err := task.ParseStatus(bad)
		requireInvalid(t, err, "status %q", bad)
	}
	require.Equal(t, "unknown", task.Status(42).String())
	require.Equal(t, "unknown", task.Status(-1).String())
}

func TestStatusJSON(t *testing.T) {
	t.Parallel()

	t.Run("marshal by name", func(t *testing.T) {
		t.Parallel()
		b, err := json.Marshal(task.Dead)
		require.NoError(t, err)
		require.JSONEq(t, `"dead"`, string(b))

		b, err = json.Marshal(struct {
			S task.Status `json:"status"`
			T task.Type   `json:"type"`
		}{task.Cancelled, task.Periodic})
		require.NoError(t, err)
		require.JSONEq(t, `{"status":"cancelled","type":"periodic"}`, string(b))
	})

	t.Run("unmarshal name or number", func(t *testing.T) {
		t.Parallel()
		for in, want := range map[string]task.Status{
			`"pending"`: task.Pending, `"running"`: task.Running, `"dead"`: task.Dead, `"cancelled"`: task.Cancelled,
			`0`: task.Pending, `3`: task.Succeeded, `5`: task.Dead, `6`: task.Cancelled,
		} {
			var s task.Status = 99
			require.NoError(t, json.Unmarshal([]byte(in), &s), in)
			require.Equal(t, want, s, in)
		}
	})

	t.Run("round trip every status", func(t *testing.T) {
		t.Parallel()
		for st := task.Pending; st <= task.Cancelled; st++ {
			b, err := json.Marshal(st)
			require.NoError(t, err)
			var back task.Status
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, st, back)
		}
	})

	t.Run("unmarshal rejects unknown names and other kinds", func(t *testing.T) {
		t.Parallel()
		for _, in := range []string{`"bogus"`, `"Dead"`, `""`, `true`, `{}`, `[]`, `1.5`, `300`} {
			var s task.Status
			require.Error(t, json.Unmarshal([]byte(in), &s), in)
		}
		var wrapper struct {
			S task.Status `json:"status"`
		}
		require.Error(t, json.Unmarshal([]byte(`{"status":"exploded"}`), &wrapper))
	})
}

// Numbers outside the enum decode without error into a value that
// marshals as "unknown", which then does not decode.
func TestStatusJSONRejectsOutOfRangeNumbers(t *testing.T) {
	t.Parallel()

	for _, in := range []string{`7`, `99`, `-1`} {
		var s task.Status
		require.Error(t, json.Unmarshal([]byte(in), &s), "status %s", in)
	}
	for _, in := range []string{`3`, `-1`} {
		var ty task.Type
		require.Error(t, json.Unmarshal([]byte(in), &ty), "type %s", in)
	}
}

func TestTypeJSON(t *testing.T) {
	t.Parallel()

	for ty, name := range map[task.Type]string{task.OneOff: "oneoff", task.Periodic: "periodic", task.Timed: "timed"} {
		require.Equal(t, name, ty.String())
		b, err := json.Marshal(ty)
		require.NoError(t, err)
		require.JSONEq(t, `"`+name+`"`, string(b))

		var byName, byNumber task.Type = 9, 9
		require.NoError(t, json.Unmarshal(b, &byName))
		require.Equal(t, ty, byName)
		require.NoError(t, json.Unmarshal([]byte(fmt.Sprint(int(ty))), &byNumber))
		require.Equal(t, ty, byNumber)
	}
	require.EqualValues(t, 0, task.OneOff)
	require.EqualValues(t, 1, task.Periodic)
	require.EqualValues(t, 2, task.Timed)

	var ty task.Type
	require.Error(t, json.Unmarshal([]byte(`"cron"`), &ty))
	require.Error(t, json.Unmarshal([]byte(`"pending"`), &ty), "a status name is not a type")
	require.Equal(t, "unknown", task.Type(7).String())
}

func TestTaskJSONUsesNames(t *testing.T) {
	t.Parallel()

	b, err := json.Marshal(&task.Task{ID: 7, Code: "hello", Type: task.Timed, Status: task.Failed, Payload: json.RawMessage(`{"a":1}`)})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, "timed", m["task_type"])
	require.Equal(t, "failed", m["status"])
	require.Equal(t, "hello", m["task_code"])
	require.Equal(t, map[string]any{"a": float64(1)}, m["payload"])
}

func TestQueueOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, "mail", task.QueueOf("", "mail"))
	require.Equal(t, "bulk", task.QueueOf("bulk", "mail"))
	require.Equal(t, "bulk", (&task.Task{Code: "mail", Queue: "bulk"}).QueueName())
	require.Equal(t, "mail", (&task.Task{Code: "mail"}).QueueName())
}

func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()

	m := &task.Message{ID: 42, Attempt: 3, Code: "send_email", Queue: "mail", Type: task.Periodic,
		Payload: json.RawMessage(`{"to":"a@example.com"}`), UniqueKey: "order-1", CronExpr: "*/5 * * * *",
		Timezone: "Asia/Shanghai", Timeout: 60, MaxRetry: 2, RetryCount: 1, Priority: 0, DueUnixMS: 1_700_000_000_123}
	b, err := m.Encode()
	require.NoError(t, err)
	require.Contains(t, string(b), `"type":"periodic"`)

	got, err := task.DecodeMessage(b)
	require.NoError(t, err)
	require.Equal(t, m.ID, got.ID)
	require.Equal(t, m.Attempt, got.Attempt)
	require.Equal(t, m.Code, got.Code)
	require.Equal(t, m.Queue, got.Queue)
	require.Equal(t, m.Type, got.Type)
	require.JSONEq(t, string(m.Payload), string(got.Payload))
	require.Equal(t, m.UniqueKey, got.UniqueKey)
	require.Equal(t, m.CronExpr, got.CronExpr)
	require.Equal(t, m.Timezone, got.Timezone)
	require.Equal(t, m.Timeout, got.Timeout)
	require.Equal(t, m.MaxRetry, got.MaxRetry)
	require.Equal(t, m.RetryCount, got.RetryCount)
	require.Equal(t, m.DueUnixMS, got.DueUnixMS)

	// A message written by another producer with the type as a number.
	got, err = task.DecodeMessage([]byte(`{"id":1,"attempt":1,"code":"x","type":2}`))
	require.NoError(t, err)
	require.Equal(t, task.Timed, got.Type)
}

func TestDecodeMessagePoison(t *testing.T) {
	t.Parallel()

	for name, in := range map[string]string{
		"empty":             ``,
		"not JSON":          `hello`,
		"truncated":         `{"id":1,"attempt":1,"code":"x"`,
		"trailing garbage":  `{"id":1,"attempt":1,"code":"x"} junk`,
		"array":             `[1,1,"x"]`,
		"null":              `null`,
		"missing id":        `{"attempt":1,"code":"x"}`,
		"zero id":           `{"id":0,"attempt":1,"code":"x"}`,
		"negative id":       `{"id":-4,"attempt":1,"code":"x"}`,
		"missing attempt":   `{"id":1,"code":"x"}`,
		"zero attempt":      `{"id":1,"attempt":0,"code":"x"}`,
		"missing code":      `{"id":1,"attempt":1}`,
		"empty code":        `{"id":1,"attempt":1,"code":""}`,
		"id as string":      `{"id":"1","attempt":1,"code":"x"}`,
		"unknown type name": `{"id":1,"attempt":1,"code":"x","type":"weekly"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, err := task.DecodeMessage([]byte(in))
			require.Error(t, err)
			require.Nil(t, m)
			require.Contains(t, err.Error(), "decode message")
		})
	}
}

func TestErrorCode(t *testing.T) {
	t.Parallel()

	require.Equal(t, task.CodeInvalid, task.ErrorCode(task.Invalidf("bad %d", 1)))
	require.Equal(t, task.CodeNotFound, task.ErrorCode(task.NotFoundf("gone")))
	require.Equal(t, task.CodeInternal, task.ErrorCode(fmt.Errorf("plain")))
	require.Equal(t, task.CodeInternal, task.ErrorCode(nil))

	wrapped := fmt.Errorf("submit: %w", task.Invalidf("priority %d is out of range", 10))
	require.Equal(t, task.CodeInvalid, task.ErrorCode(wrapped))
	require.Equal(t, "submit: priority 10 is out of range", wrapped.Error())
}

func TestEffectiveTimeout(t *testing.T) {
	t.Parallel()
	for secs, want := range map[int]time.Duration{
		-1: 5 * time.Minute, 0: 5 * time.Minute, 1: time.Second, 3600: time.Hour,
		1 << 30: 168 * time.Hour,
	} {
		require.Equal(t, want, task.EffectiveTimeout(secs), secs)
	}
	require.Equal(t, "LEAST(IF(t.timeout > 0, t.timeout, 300), 604800)", task.TimeoutSQL("t"))
}

func TestValidateOthers(t *testing.T) {
	t.Parallel()

	for _, ok := range []string{"send_email", "report:daily", "a.b-c", "X9"} {
		require.NoError(t, task.ValidateName("task code", ok), ok)
		require.True(t, task.NameOK(ok), ok)
	}
	for _, bad := range []string{"", "has space", "a/b", "{tag}", "名字", strings.Repeat("a", task.MaxCodeLen+1)} {
		requireInvalid(t, task.ValidateName("task code", bad), "name %q", bad)
		require.False(t, task.NameOK(bad), bad)
	}
	require.NoError(t, task.ValidateName("task code", strings.Repeat("a", task.MaxCodeLen)))
	// Chinese is refused for its alphabet, however short in characters.
	require.ErrorContains(t, task.ValidateName("task code", strings.Repeat("发送短信", 6)), "may only contain ASCII letters")

	for p := 0; p <= 9; p++ {
		require.NoError(t, task.ValidatePriority(p))
	}
	requireInvalid(t, task.ValidatePriority(-1))
	requireInvalid(t, task.ValidatePriority(10))

	requireInvalid(t, task.ValidateMaxRetry(-1))
	requireInvalid(t, task.ValidateMaxRetry(task.MaxMaxRetry+1))
	require.NoError(t, task.ValidateMaxRetry(0))

	_, err := task.ValidateTimezone("Mars/Base")
	requireInvalid(t, err)
	loc, err := task.ValidateTimezone("Asia/Shanghai")
	require.NoError(t, err)
	require.Equal(t, "Asia/Shanghai", loc.String())
	// Names are case-sensitive: the one meant is suggested.
	for typed, meant := range map[string]string{"asia/shanghai": "Asia/Shanghai", "america/new_york": "America/New_York", "etc/utc": "Etc/UTC", "utc": "UTC"} {
		_, err = task.ValidateTimezone(typed)
		require.EqualError(t, err, fmt.Sprintf("unknown time zone %q (did you mean %q? zone names are case-sensitive)", typed, meant))
	}
	// A typo: the host's zone nearest it.
	if _, err := os.Stat("/usr/share/zoneinfo/Asia/Shanghai"); err != nil {
		t.Skip("no zone database in /usr/share/zoneinfo (tzdata) to suggest from")
	}
	for typed, meant := range map[string]string{"Asia/Shangai": "Asia/Shanghai", "America/New_Yrok": "America/New_York", "Europe/Londn": "Europe/London"} {
		_, err = task.ValidateTimezone(typed)
		require.EqualError(t, err, fmt.Sprintf("unknown time zone %q (did you mean %q?)", typed, meant))
	}
	_, err = task.ValidateTimezone("Mars/Base")
	require.EqualError(t, err, `unknown time zone "Mars/Base"`, "nothing near")
}
