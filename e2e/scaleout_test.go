package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
)

// Six daemons with their own node ids and roles, as on six hosts: two run
// only the scheduler and recovery, four only workers. Work spreads over
// every worker, and a worker and a scheduler killed with SIGKILL mid-run
// lose nothing: the other scheduler keeps dispatching and recovery hands
// the dead worker's tasks to the living.
func TestSixNodesSpreadAndSurviveKills(t *testing.T) {
	t.Parallel()
	var handlers strings.Builder
	for q := range 3 {
		fmt.Fprintf(&handlers, "  q%d: { exec: [\"sh\", \"-c\", \"sleep 0.02\"] }\n", q)
	}
	b := setup(t, `scheduler:
  poll_interval: 100ms
worker:
  concurrency: 4
  heartbeat_interval: 300ms
  heartbeat_ttl: 2s
recovery:
  interval: 500ms
  dispatch_window: 5s
handlers:
`+handlers.String())
	var nodes []*daemon
	for i := range 2 {
		id := fmt.Sprintf("sched-%d", i)
		nodes = append(nodes, b.startDaemonArgs(t, id, "run", "--node-id", id, "--roles", "scheduler,recovery"))
	}
	for i := range 4 {
		id := fmt.Sprintf("work-%d", i)
		nodes = append(nodes, b.startDaemonArgs(t, id, "run", "--node-id", id, "--roles", "worker"))
	}

	const total = 1500
	p := producer.New(b.env.Store, b.env.Broker, producer.Options{})
	for i := 0; i < total; i += 50 {
		subs := make([]producer.Submission, 50)
		for j := range subs {
			subs[j] = producer.Submission{Code: fmt.Sprintf("q%d", (i+j)%3)}
		}
		_, err := p.SubmitBatch(b.ctx, subs)
		require.NoError(t, err)
		if i == total/3 {
			// A scheduler and a worker die without a word.
			require.NoError(t, nodes[0].cmd.Process.Signal(syscall.SIGKILL))
			require.NoError(t, nodes[2].cmd.Process.Signal(syscall.SIGKILL))
		}
		time.Sleep(40 * time.Millisecond) // paces the stream of submissions that real daemons consume
	}
	b.waitCount(t, total, 120*time.Second, `SELECT COUNT(*) FROM task_center WHERE status = 3`)

	perNode := map[string]int{}
	rows, err := b.env.Store.DB().QueryContext(b.ctx, `SELECT node, COUNT(*) FROM task_run WHERE outcome = 'succeeded' GROUP BY node`)
	require.NoError(t, err)
	for rows.Next() {
		var node string
		var n int
		require.NoError(t, rows.Scan(&node, &n))
		perNode[node] = n
	}
	require.NoError(t, rows.Err())
	rows.Close()
	t.Logf("succeeded runs per worker node: %v", perNode)
	for i := 1; i < 4; i++ {
		require.Greater(t, perNode[fmt.Sprintf("work-%d", i)], total/20, "work spreads to every living worker")
	}
	require.Zero(t, perNode["sched-0"]+perNode["sched-1"], "scheduler-only nodes run no tasks")
	twice := b.env.Count(t, `SELECT COUNT(*) FROM (SELECT task_id FROM task_run WHERE outcome = 'succeeded'
		GROUP BY task_id HAVING COUNT(*) > 1) d`)
	t.Logf("%d tasks succeeded with one scheduler and one worker killed; %d ran twice", total, twice)
	for _, d := range []*daemon{nodes[1], nodes[3], nodes[4], nodes[5]} {
		code, _ := d.stop(t, 60*time.Second)
		require.Zero(t, code, "node %s exit code", d.node)
	}
}
