package e2e

// The watchdog against a real process: a worker whose MySQL connections go
// through a proxy that silently stops forwarding (a black hole: sockets
// open, no bytes either way, so every read hangs) while its Redis
// heartbeat keeps flowing. Recovery sees a live worker and leaves it
// alone; only the watchdog can tell that it is alive but idle, and it
// makes the process exit with code 75 for its supervisor to restart it.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/watchdog"
)

// TestWatchdogExitsWhenMySQLHangs runs two daemons on queue "tick": node-1
// (roles worker,watchdog) reaches MySQL through a black-hole proxy, node-2
// (scheduler, recovery, worker) directly. Under a steady stream of tasks
// the proxy goes dark: node-1's claims and result writes hang, its
// heartbeat stays fresh, the queue's backlog grows. Its watchdog must make
// it exit with code 75 (idle window + grace after its last progress), and
// every task submitted must end succeeded: node-1's held tasks recovered
// and run by node-2.
func TestWatchdogExitsWhenMySQLHangs(t *testing.T) {
	t.Parallel()
	const (
		idleWindow = 2 * time.Second
		grace      = 2 * time.Second
	)
	// Two slots per worker and a 50 ms handler: one worker runs at most 40
	// tasks a second, fewer than the stream's 60, so a backlog builds once
	// node-1 hangs whatever the machine's speed. The heartbeat TTL is 8s,
	// not 3s: every 12th beat the worker's heartbeat loop also syncs the
	// database clock, a read bounded at 5s, so with MySQL hung one beat
	// comes up to 5s late; a shorter TTL would let recovery take node-1 for
	// dead before its watchdog decides.
	b := setup(t, fmt.Sprintf(`handlers:
  tick:
    exec: ["sh", "-c", "sleep 0.05"]
queues:
  tick: { concurrency: 2 }
scheduler:
  poll_interval: 200ms
worker:
  shutdown_grace: 2s
  kill_grace: 1s
  heartbeat_interval: 300ms
  heartbeat_ttl: 8s
recovery:
  interval: 500ms
  dispatch_window: 5s
watchdog:
  interval: 500ms
  idle_window: %s
  grace: %s
`, idleWindow, grace))

	// node-1's configuration: the same, with MySQL behind the proxy.
	dsn, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	dsnAddr := dsn.Addr
	cfg, err := os.ReadFile(b.config)
	require.NoError(t, err)
	require.Contains(t, string(cfg), "tcp("+dsnAddr+")")
	proxy := testenv.NewFreezeProxy(t, dsnAddr)
	proxied := *b
	proxied.config = filepath.Join(b.dir, "proxied.yaml")
	require.NoError(t, os.WriteFile(proxied.config,
		[]byte(strings.ReplaceAll(string(cfg), "tcp("+dsnAddr+")", "tcp("+proxy.Addr()+")")), 0o644))

	n1 := proxied.startDaemonArgs(t, "node-1", "run", "--node-id", "node-1", "--roles", "worker,watchdog")
	n2 := b.startDaemonArgs(t, "node-2", "run", "--node-id", "node-2", "--roles", "scheduler,recovery,worker")

	// node-1's worker id, from its heartbeat.
	var n1Worker string
	require.Eventually(t, func() bool {
		ws, err := b.env.Broker.Workers(b.ctx, 0)
		require.NoError(t, err)
		for _, w := range ws {
			if w.Alive() && w.Heartbeat.Node == "node-1" {
				n1Worker = w.ID
			}
		}
		return n1Worker != ""
	}, 15*time.Second, 50*time.Millisecond, "node-1's worker is up")

	// The stream: 6 tasks every 100 ms until stopped.
	cl := producer.New(b.env.Store, b.env.Broker, producer.Options{Logger: quiet})
	var submitted atomic.Int64
	stopStream := make(chan struct{})
	streamDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopStream:
				streamDone <- nil
				return
			case <-tick.C:
			}
			subs := make([]producer.Submission, 6)
			for i := range subs {
				subs[i] = producer.Submission{Code: "tick"}
			}
			res, err := cl.SubmitBatch(b.ctx, subs)
			if err != nil {
				streamDone <- err
				return
			}
			submitted.Add(int64(len(res)))
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(stopStream)
			require.NoError(t, <-streamDone)
		}
	}
	defer stop()

	// Both workers take work before the hang.
	b.waitCount(t, 2, 20*time.Second, `SELECT COUNT(DISTINCT node) FROM task_run WHERE outcome = 'succeeded'`)

	proxy.Freeze()
	hangAt := time.Now()

	// Until its watchdog decides, node-1's heartbeat must stay live:
	// recovery must not be what notices the hang. (The watchdog records
	// its exit event, then withdraws the heartbeat.)
	exitRecorded := func() bool {
		events, err := b.env.Broker.Events(b.ctx, 10)
		require.NoError(t, err)
		for _, e := range events {
			if e.Kind == watchdog.KindExit {
				return true
			}
		}
		return false
	}
	var exitAt time.Time
	var deadBeats int
	var beatGap time.Duration // longest time seen since node-1's last heartbeat
	exitBound := idleWindow + grace + 15*time.Second
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
wait:
	for {
		select {
		case <-n1.done:
			exitAt = time.Now()
			break wait
		case <-poll.C:
			if time.Since(hangAt) > exitBound {
				logged, _ := os.ReadFile(n1.log)
				t.Fatalf("node-1 did not exit within %s of its MySQL going dark; its log ends:\n%s", exitBound, tail(string(logged), 4000))
			}
			ws, err := b.env.Broker.Workers(b.ctx, 0)
			require.NoError(t, err)
			for _, w := range ws {
				switch {
				case w.ID != n1Worker:
				case w.Alive():
					beatGap = max(beatGap, time.Since(w.LastBeat))
				case !exitRecorded():
					deadBeats++
				}
			}
		}
	}
	stop()
	var ee *exec.ExitError
	require.True(t, errors.As(n1.err, &ee), "node-1 exit: %v", n1.err)
	require.Equal(t, watchdog.ExitCode, ee.ExitCode(), "node-1's exit code")
	require.Zero(t, deadBeats, "node-1's heartbeat expired while it hung: recovery, not the watchdog, would have noticed")
	hangToExit := exitAt.Sub(hangAt)
	// The wait counts from the oldest unwritten result, which may have
	// been queued, or its write begun, just before the freeze: CI saw the
	// exit 65 ms short of the window counted from the freeze. An exit at
	// the idle window alone (2 s) is still far below the bound.
	const queuedBefore = 500 * time.Millisecond
	require.GreaterOrEqual(t, hangToExit, idleWindow+grace-queuedBefore, "not before idle window + grace")

	// Why it exited: its results unwritten, recorded before the exit. The
	// exit itself may come from either check that sees the hang: the
	// results unwritten, or its queue idle with a backlog when the
	// worker, slowed down (a loaded machine spawns slowly), let one build
	// while no result got written; both count from about the freeze.
	logged, err := os.ReadFile(n1.log)
	require.NoError(t, err)
	require.Contains(t, string(logged), "worker alive but its results unwritten")
	require.Regexp(t, `exiting so that the supervisor restarts this process.*"reason":"(results unwritten for|queue tick idle with a backlog for)`, string(logged))
	events, err := b.env.Broker.Events(b.ctx, 10)
	require.NoError(t, err)
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	require.Contains(t, kinds, watchdog.KindIdle)
	require.Contains(t, kinds, watchdog.KindExit)

	// Every task ends succeeded; those node-1 held are run again by node-2.
	total := int(submitted.Load())
	b.waitCount(t, total, 30*time.Second, `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	hangToRecovery := time.Since(hangAt)
	require.Equal(t, total, b.env.Count(t, `SELECT COUNT(*) FROM task_center`))
	rerun := b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE attempt > 1`)
	require.Positive(t, rerun, "node-1 held tasks when it hung")
	require.Equal(t, rerun, b.env.Count(t, `SELECT COUNT(*) FROM task_run r JOIN task_center c ON c.id = r.task_id
		WHERE c.attempt > 1 AND r.attempt = c.attempt AND r.outcome = 'succeeded' AND r.node = 'node-2'`),
		"the recovered tasks' last attempts succeeded on node-2")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE outcome NOT IN ('succeeded', 'crashed')`))
	t.Logf("idle window %s, grace %s, watchdog every 500ms; %d tasks, %d recovered from node-1: hang to exit (code %d) %s, hang to all succeeded %s; longest heartbeat gap while hung %s",
		idleWindow, grace, total, rerun, ee.ExitCode(), hangToExit.Round(10*time.Millisecond), hangToRecovery.Round(10*time.Millisecond),
		beatGap.Round(10*time.Millisecond))

	code, _ := n2.stop(t, 20*time.Second)
	require.Zero(t, code)
}
