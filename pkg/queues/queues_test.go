package queues_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/testenv"
)

// A read of the state that waits behind a slow statement is no failure:
// the cache sees a pause made meanwhile once the pool frees, and logs no
// warning. Its bound was 5 s, shorter than a read takes on a link with a
// second added each way when it opens a connection (FAULTS.md row 21).
func TestRefreshWaitsOutASlowServer(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	st := env.OneConnection(t) // a slow statement holds the pool
	var logs bytes.Buffer
	c := queues.New(queues.Config{Refresh: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, st, env.Broker)
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	require.False(t, c.Paused("q"))

	slow := make(chan error, 1)
	go func() {
		_, err := st.DB().ExecContext(ctx, `DO SLEEP(6)`)
		slow <- err
	}()
	time.Sleep(200 * time.Millisecond) // the sleep holds the connection
	env.Exec(t, `INSERT INTO task_queue (name, paused) VALUES ('q', 1)`)
	require.NoError(t, <-slow)
	require.Eventually(t, func() bool { return c.Paused("q") }, 5*time.Second, 20*time.Millisecond)
	c.Stop()
	require.NotContains(t, logs.String(), "read queue state")
}

// A task center that fails the first read, at the start, and the reads
// after it is said once, and once more when a read works again: the
// start's failure was a line of its own, and its end was never said when
// only the start had failed.
func TestFailuresFromTheStartSaidOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `RENAME TABLE task_queue TO task_queue_away`)
	var logs testenv.LogBuffer
	c := queues.New(queues.Config{Refresh: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, env.Store, env.Broker)
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	time.Sleep(200 * time.Millisecond) // the loop's reads fail too
	env.Exec(t, `RENAME TABLE task_queue_away TO task_queue`)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `msg="read queue state works again"`) },
		10*time.Second, 20*time.Millisecond)
	c.Stop()
	require.Equal(t, 1, strings.Count(logs.String(), `msg="read queue state`)-strings.Count(logs.String(), `msg="read queue state works again"`), logs.String())
	m := regexp.MustCompile(`failed_passes=(\d+)`).FindStringSubmatch(logs.String())
	require.NotNil(t, m, logs.String())
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 2, "the start's read and the loop's count as one outage")
}
