package startstop_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/startstop"
)

// TestFailLog: the first failure is logged, the next ones once per Repeat
// with their count, and a pass that works after them once.
func TestFailLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	f := &startstop.FailLog{Log: slog.New(slog.NewTextHandler(&buf, nil)), Level: slog.LevelError,
		Failed: "pass failed", Again: "pass works again", Repeat: 50 * time.Millisecond}
	down := errors.New("connection refused")
	f.OK()
	require.Empty(t, buf.String(), "nothing failed")
	for range 10 {
		f.Fail(down)
	}
	require.Equal(t, 1, strings.Count(buf.String(), `msg="pass failed"`), buf.String())
	time.Sleep(60 * time.Millisecond)
	f.Fail(down)
	require.Equal(t, 2, strings.Count(buf.String(), `msg="pass failed"`), buf.String())
	require.Contains(t, buf.String(), "failed_passes=11")
	f.OK()
	f.OK()
	require.Equal(t, 1, strings.Count(buf.String(), `msg="pass works again" failed_passes=11`), buf.String())
	f.Fail(down)
	require.Equal(t, 3, strings.Count(buf.String(), `msg="pass failed"`), "a new outage is logged at once:\n%s", buf.String())
}

// Pass counts a pass cut short by a stop as neither a failure nor a pass
// that worked.
func TestFailLogPass(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	f := &startstop.FailLog{Log: slog.New(slog.NewTextHandler(&buf, nil)), Level: slog.LevelError,
		Failed: "pass failed", Again: "pass works again"}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	f.Pass(stopped, context.Canceled)
	require.Empty(t, buf.String(), "a stop is no failure")
	f.Pass(context.Background(), errors.New("connection refused"))
	require.Contains(t, buf.String(), `msg="pass failed"`)
	f.Pass(context.Background(), nil)
	require.Contains(t, buf.String(), `msg="pass works again" failed_passes=1`)
}

// A pass cut by its own time limit says so: the bare "context deadline
// exceeded" does not tell an operator that a server stopped answering.
func TestFailLogLimit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	f := &startstop.FailLog{Log: slog.New(slog.NewTextHandler(&buf, nil)), Level: slog.LevelWarn,
		Failed: "read queue state", Again: "read queue state works again", Limit: 30 * time.Second}
	pass, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-pass.Done()
	f.Pass(context.Background(), fmt.Errorf("list queues: %w", pass.Err()))
	require.Contains(t, buf.String(), `err="list queues: context deadline exceeded (no answer within 30s)"`)
}
