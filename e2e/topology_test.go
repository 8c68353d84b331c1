package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/testenv"
)

// Two daemons run tasks of eight queues (their keys spread over the hash
// slots) on a local Redis Cluster, and a master is killed with SIGKILL
// mid-run: its replica takes over and every task succeeds. Nothing is
// lost; what the dead master held and its replica had not received yet is
// re-dispatched by recovery from the task center.
func TestRedisClusterFailover(t *testing.T) {
	topologyFailover(t, "cluster", 6, "")
}

// The same with one master, one replica and three Sentinels: the master is
// killed, the Sentinels promote the replica, the daemons follow.
func TestRedisSentinelFailover(t *testing.T) {
	topologyFailover(t, "sentinel", 5, "taskd")
}

// topologyFailover runs scripts/redis-cluster.sh's topology kind of n
// servers on free ports (not its fixed ones, which another run or a
// leftover set may hold) and kills its first master.
func topologyFailover(t *testing.T, kind string, n int, master string) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed", bin)
		}
	}
	script := filepath.Join(repoRoot(t), "scripts", "redis-cluster.sh")
	ports := testenv.FreePorts(t, n)
	var list []string
	for _, p := range ports {
		list = append(list, strconv.Itoa(p))
	}
	victim := ports[0]
	topo := func(action string) string {
		cmd := exec.Command("bash", script, kind, action)
		cmd.Env = append(os.Environ(), "REDIS_TOPOLOGY_PORTS="+strings.Join(list, " "))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "redis-cluster.sh %s %s: %s", kind, action, out)
		return strings.TrimSpace(string(out))
	}
	t.Cleanup(func() { topo("stop") })
	topo("start")
	addr := topo("addr")

	env := testenv.New(t)
	dir := t.TempDir()
	var handlers strings.Builder
	for q := range 8 {
		fmt.Fprintf(&handlers, "  q%d: { exec: [\"true\"] }\n", q)
	}
	cfg := filepath.Join(dir, "taskd.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`mysql:
  dsn: %q
redis:
  addr: %q
  master_name: %q
  prefix: %q
log:
  format: json
scheduler:
  poll_interval: 100ms
worker:
  concurrency: 4
  heartbeat_interval: 500ms
  heartbeat_ttl: 3s
recovery:
  interval: 1s
  dispatch_window: 3s
handlers:
%s`, env.DSN, addr, master, env.Prefix, handlers.String())), 0o644))
	b := &testBundle{env: env, ctx: context.Background(), dir: dir, config: cfg}
	nodes := []*daemon{b.startAllRoles(t, "node-a"), b.startAllRoles(t, "node-b")}

	// Submit for about three seconds; the master dies after one.
	const total = 2400
	p := producer.New(env.Store, nil, producer.Options{})
	killed := make(chan time.Time, 1)
	go func() {
		time.Sleep(time.Second) // the master dies a second into the submissions, while work flows
		pid, err := os.ReadFile(filepath.Join(repoRoot(t), ".run", "redis-"+kind, strconv.Itoa(victim), "redis.pid"))
		if err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
		killed <- time.Now()
	}()
	for i := 0; i < total; i += 40 {
		subs := make([]producer.Submission, 40)
		for j := range subs {
			subs[j] = producer.Submission{Code: fmt.Sprintf("q%d", (i+j)%8)}
		}
		_, err := p.SubmitBatch(b.ctx, subs)
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // paces the submissions over about three seconds (real daemons consume them)
	}
	at := <-killed
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(victim), "ping").CombinedOutput()
	require.Error(t, err, "the %s master on %d must be dead: %s", kind, victim, out)

	b.waitCount(t, total, 90*time.Second, `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	recovered := time.Since(at)
	twice := env.Count(t, `SELECT COUNT(*) FROM (SELECT task_id FROM task_run WHERE outcome = 'succeeded'
		GROUP BY task_id HAVING COUNT(*) > 1) d`)
	t.Logf("%s: %d tasks succeeded, none lost; %d ran twice; all done %.1fs after the master was killed",
		kind, total, twice, recovered.Seconds())
	for _, d := range nodes {
		code, _ := d.stop(t, 60*time.Second)
		require.Zero(t, code, "node %s exit code", d.node)
	}
}

// startAllRoles starts `taskd run` with every role of the configuration
// (recovery included).
func (b *testBundle) startAllRoles(t *testing.T, node string) *daemon {
	t.Helper()
	return b.startDaemonArgs(t, node, "run", "--node-id", node)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Dir(wd)
}
