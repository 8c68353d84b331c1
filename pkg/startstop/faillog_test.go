package startstop_test

import (
	"bytes"
	"errors"
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
