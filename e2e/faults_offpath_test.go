package e2e

// Faults off the happy path (FAULTS.md rows 21, 26, 27 and 30, a first
// start on a fresh Redis, and periodic tasks on hosts in several zones),
// against real `taskd run` processes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/testenv"
)

// TestFaultLockedRows is FAULTS.md row 30, the seed's incident 6.3:
// another transaction holds row locks on 10 of 60 due tasks. While it
// holds them, the other 50 are claimed, run and written back; once it lets
// go, the 10 run too, each once.
func TestFaultLockedRows(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	ids := b.submitDue(t, 60, 2*time.Second)
	locked := make([]int64, 0, 10)
	for i := 0; i < 60; i += 6 {
		locked = append(locked, ids[i])
	}
	release := testenv.HoldRowLocks(t, b.env.DSN, locked...)
	b.startNode(t, "node-a")

	// Several lock wait timeouts (5 s) pass while the 50 run.
	b.eventually(t, 40*time.Second, equal(50), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	require.Zero(t, b.count(t, fmt.Sprintf(`SELECT COUNT(*) FROM task_center WHERE status = 3 AND id IN (%s)`, joinIDs(locked))),
		"a locked task ran while its row was locked")
	release()

	b.eventually(t, 30*time.Second, equal(60), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	b.checkRecords(t, ids)
	require.Equal(t, 60, b.count(t, `SELECT COUNT(*) FROM task_run`), "a task ran twice")
}

// writeConfig writes a configuration of the bundle's task center and
// Redis with extra YAML, and returns its path.
func (b *faultBundle) writeConfig(t *testing.T, name, redisAddr, extra string) string {
	t.Helper()
	if redisAddr == "" {
		redisAddr = b.env.RedisAddr
	}
	path := filepath.Join(b.dir, name+".yaml")
	yaml := fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\n%s%s", b.env.DSN, redisAddr, b.env.Prefix, faultTimings, extra)
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	return path
}

// TestFaultSeedInsertRouting is FAULTS.md row 27: the handler of send_mail
// names queue mail, and rows are INSERTed the seed's way, with no queue
// column. The only scheduler runs on a node whose configuration has no
// handlers at all: the tasks still go to mail, where the worker takes
// them, and run once each.
func TestFaultSeedInsertRouting(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	argv, err := json.Marshal([]string{"sh", "-c", fmt.Sprintf(`echo "$TASK_ID $TASK_ATTEMPT $TASK_QUEUE" >> %s`, b.out)})
	require.NoError(t, err)
	workerCfg := b.writeConfig(t, "worker", "", fmt.Sprintf("handlers:\n  send_mail:\n    exec: %s\n    queue: mail\n", argv))
	schedCfg := b.writeConfig(t, "scheduler", "", "")
	b.startNodeWith(t, "worker-1", workerCfg, "worker")
	b.startNodeWith(t, "sched-1", schedCfg, "scheduler,recovery")

	for range 20 {
		b.env.Exec(t, `INSERT INTO task_center (task_code, task_type, payload, cron_expr, priority, timeout, max_retry, plan_next_run_at, status)
			VALUES ('send_mail', 0, '{"to":"a@b.c"}', NULL, 5, 300, 3, NOW(), 0)`)
	}
	b.eventually(t, 30*time.Second, equal(20), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	require.Equal(t, 20, b.count(t, `SELECT COUNT(*) FROM task_center WHERE attempt = 1`), "a task was dispatched twice")
	require.Equal(t, 20, b.count(t, `SELECT COUNT(*) FROM task_run WHERE queue = 'mail' AND outcome = 'succeeded'`))
	lines, err := os.ReadFile(b.out)
	require.NoError(t, err)
	require.Equal(t, 20, strings.Count(string(lines), " mail\n"), "the handler saw TASK_QUEUE=mail:\n%s", lines)
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM task_route WHERE task_code = 'send_mail' AND queue = 'mail' AND node = 'worker-1'`))
	n, err := b.env.Broker.QueueLen(b.ctx, "send_mail")
	require.NoError(t, err)
	require.Zero(t, n, "messages in the unconsumed queue send_mail")
}

// TestFaultFullRedis is FAULTS.md row 26: a private Redis with a 2 MB
// maxmemory under noeviction, and a backlog of 1,500 tasks of 2 KB, more
// than it holds. With no worker running, the scheduler fills Redis up to
// the limit and no further than the queue's window; the rest waits in the
// task center. Then a worker starts: the queue drains while Redis stays at
// maxmemory (each message acked makes room for one more), the worker's
// heartbeat never lapses, and every task succeeds, once.
func TestFaultFullRedis(t *testing.T) {
	t.Parallel()
	addr := testenv.PrivateRedis(t, 0, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	b := faultSetup(t, addr, `sleep 0.02; echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	const total = 1500
	cl := producer.New(b.env.Store, b.env.Broker, producer.Options{Logger: quiet})
	big := strings.Repeat("x", 2048)
	var ids []int64
	for len(ids) < total {
		subs := make([]producer.Submission, 500)
		for i := range subs {
			subs[i] = producer.Submission{Code: "work", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, len(ids)+i, big))}
		}
		res, err := cl.SubmitBatch(b.ctx, subs)
		require.NoError(t, err)
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	sched := b.startNodeWith(t, "sched-1", b.config, "scheduler,recovery")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	// Redis fills up: pushes are refused and their tasks handed back.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(string(sched.read()), "OOM") {
		require.True(t, time.Now().Before(deadline), "Redis never reached maxmemory")
		time.Sleep(50 * time.Millisecond) // polls a real daemon's log
	}
	queued, err := rdb.LLen(b.ctx, b.env.Prefix+"queue:{work}").Result()
	require.NoError(t, err)
	window := int64(2 * 500) // no consumer: two batches
	require.LessOrEqual(t, queued, window)
	require.GreaterOrEqual(t, b.count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0`), total-int(window),
		"the backlog waits in the task center")
	t.Logf("at maxmemory: %d messages in Redis", queued)

	b.startNodeWith(t, "work-1", b.config, "worker")
	beat := b.env.Prefix + "worker:*"
	require.Eventually(t, func() bool { return len(rdb.Keys(b.ctx, beat).Val()) == 1 }, 10*time.Second, 20*time.Millisecond)
	lapses := 0
	for b.count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3`) < total {
		if len(rdb.Keys(b.ctx, beat).Val()) == 0 {
			lapses++
		}
		require.Zero(t, b.count(t, `SELECT COUNT(*) FROM task_run WHERE outcome <> 'succeeded'`), "a task was taken from its live worker")
		require.True(t, time.Now().Before(deadline.Add(2*time.Minute)), "the backlog did not drain")
		time.Sleep(100 * time.Millisecond) // polls the database that real daemons drain
	}
	require.Zero(t, lapses, "the worker's heartbeat lapsed at maxmemory")
	b.checkRecords(t, ids)
	require.Equal(t, total, b.count(t, `SELECT COUNT(*) FROM task_run`), "a task ran twice")
	used, err := rdb.Info(b.ctx, "memory").Result()
	require.NoError(t, err)
	t.Logf("drained; redis %s", strings.Join(strings.Fields(used)[1:3], " "))
}

// nextRunIn returns the task's next run in zone, after waiting for the
// run that was due to end (its next run moved past now).
func (b *faultBundle) nextRunIn(t *testing.T, id int64, zone string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	b.eventually(t, 30*time.Second, equal(1), `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0 AND plan_next_run_at > NOW(3) + INTERVAL 1 MINUTE`, id)
	tk, err := b.env.Store.TaskGet(b.ctx, id)
	require.NoError(t, err)
	return tk.PlanNextRun.In(loc)
}

// TestFaultCronZones: a periodic task runs in one zone whichever node runs
// it. Nodes on hosts in Asia/Shanghai and America/New_York take turns
// running two daily tasks: one INSERTed the seed's way with no zone, which
// follows the cluster's default (recorded by the first node: Shanghai),
// and one added by `taskd cron add` without --tz on a New York host, which
// records New York. Each run's successor is 02:00 in the task's zone, on
// either node.
func TestFaultCronZones(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	res := b.env.Exec(t, `INSERT INTO task_center (task_code, task_type, payload, cron_expr, priority, timeout, max_retry, plan_next_run_at, status)
		VALUES ('work', 1, '{}', '0 2 * * *', 5, 300, 3, NOW(), 0)`)
	seed, err := res.LastInsertId()
	require.NoError(t, err)
	add := exec.Command(taskdBin, "--config", b.config, "cron", "add", "work", "0 2 * * *", "--name", "ny")
	add.Env = append(os.Environ(), "TZ=America/New_York")
	out, err := add.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var added int64
	require.NoError(t, b.env.Store.DB().QueryRowContext(b.ctx, `SELECT id FROM task_center WHERE unique_key = 'cron:ny'`).Scan(&added))
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND timezone = 'America/New_York'`, added),
		"cron add records the zone of the host it ran on")

	for i, host := range []string{"Asia/Shanghai", "America/New_York", "Asia/Shanghai"} {
		name := fmt.Sprintf("node-%d", i)
		n := b.startNodeWith(t, name, b.config, "scheduler,worker,recovery", "TZ="+host)
		b.env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) WHERE id IN (?, ?)`, seed, added)
		for id, zone := range map[int64]string{seed: "Asia/Shanghai", added: "America/New_York"} {
			next := b.nextRunIn(t, id, zone)
			require.Equal(t, "02:00:00", next.Format("15:04:05"), "task %d run on a host in %s: next run %s", id, host, next)
		}
		require.Equal(t, 0, n.terminate(t, 20*time.Second))
	}
	require.Equal(t, 3, b.count(t, `SELECT COUNT(DISTINCT node) FROM task_run WHERE task_id = ?`, seed), "each node ran it")
	var def string
	require.NoError(t, b.env.Store.DB().QueryRowContext(b.ctx, `SELECT value FROM task_setting WHERE name = 'cron_timezone'`).Scan(&def))
	require.Equal(t, "Asia/Shanghai", def, "the first node recorded its zone as the cluster's default")
}

// slowConfig writes a configuration whose MySQL and Redis connections go
// through proxies adding each to every read and write, with the default
// timings, and extra YAML.
func (b *faultBundle) slowConfig(t *testing.T, name string, each time.Duration, extra string) string {
	t.Helper()
	dsn, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	dsn.Addr = testenv.LatencyProxy(t, dsn.Addr, each)
	argv, err := json.Marshal([]string{"sh", "-c", fmt.Sprintf(`echo "$TASK_ID $TASK_ATTEMPT" >> %s`, b.out)})
	require.NoError(t, err)
	yaml := fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\nlog:\n  format: json\nhandlers:\n  work:\n    exec: %s\n%s",
		dsn.FormatDSN(), testenv.LatencyProxy(t, b.env.RedisAddr, each), b.env.Prefix, argv, extra)
	path := filepath.Join(b.dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	return path
}

// TestFaultSlowLinks is FAULTS.md row 21: a second added each way to every
// MySQL and Redis connection, and the default timeouts. The node starts,
// runs every task once, slowly, and recovers nothing: a slow link is not a
// dead one.
func TestFaultSlowLinks(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	b.startWithin = 3 * time.Minute
	slow := b.slowConfig(t, "slow", time.Second, "")
	start := time.Now()
	n := b.startNodeWith(t, "slow-1", slow, "scheduler,worker,recovery")
	started := time.Since(start)
	ids := b.submit(t, 20)
	b.eventually(t, 3*time.Minute, equal(len(ids)), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	t.Logf("started in %s, ran %d tasks in %s", started.Round(time.Second), len(ids), (time.Since(start) - started).Round(time.Second))
	b.checkRecords(t, ids)
	require.Equal(t, len(ids), b.count(t, `SELECT COUNT(*) FROM task_center WHERE attempt = 1`), "a task was dispatched twice")
	require.Equal(t, len(ids), b.count(t, `SELECT COUNT(*) FROM task_run`), "a task ran twice")
	log := string(n.read())
	require.NotContains(t, log, "recovered lost work")
	require.NotContains(t, log, "context deadline exceeded")
	require.NotContains(t, log, `"level":"ERROR"`)
}

// TestFaultFreshRedis: three nodes start at once on a fresh prefix, over
// links with 300 ms added each way, while 300 seed-style INSERTs arrive. A
// first start is no Redis reset: it is logged at INFO, nothing is
// re-dispatched, and every task runs once, at attempt 1.
func TestFaultFreshRedis(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	b.startWithin = 2 * time.Minute
	slow := b.slowConfig(t, "slow", 300*time.Millisecond, "scheduler:\n  poll_interval: 200ms\n")
	const total = 300
	inserted := make(chan error, 1)
	go func() {
		for i := range total / 10 {
			var q strings.Builder
			q.WriteString(`INSERT INTO task_center (task_code, task_type, payload, cron_expr, priority, timeout, max_retry, plan_next_run_at, status) VALUES `)
			for j := range 10 {
				if j > 0 {
					q.WriteString(", ")
				}
				fmt.Fprintf(&q, `('work', 0, '{"i":%d}', NULL, 5, 300, 3, NOW(), 0)`, 10*i+j)
			}
			if _, err := b.env.Store.DB().ExecContext(b.ctx, q.String()); err != nil {
				inserted <- err
				return
			}
			time.Sleep(100 * time.Millisecond) // paces the producer's INSERTs (a real stream)
		}
		inserted <- nil
	}()
	nodes := make([]*faultNode, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { nodes[i] = b.startNodeWith(t, fmt.Sprintf("node-%d", i), slow, "scheduler,worker,recovery") })
	}
	wg.Wait()
	require.NoError(t, <-inserted)
	b.eventually(t, 3*time.Minute, equal(total), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	b.checkRecords(t, b.ids(t, `SELECT id FROM task_center`))
	require.Equal(t, total, b.count(t, `SELECT COUNT(*) FROM task_center WHERE attempt = 1`), "a task was dispatched twice")
	require.Equal(t, total, b.count(t, `SELECT COUNT(*) FROM task_run`), "a task ran twice")
	firsts := 0
	for _, n := range nodes {
		log := string(n.read())
		require.NotContains(t, log, "redis lost its data", n.name)
		require.NotContains(t, log, "recovered lost work", n.name)
		require.NotContains(t, log, `"level":"ERROR"`, n.name)
		firsts += strings.Count(log, `"level":"INFO","msg":"first start on this Redis`)
	}
	require.Equal(t, 1, firsts, "one node logs the first start, at INFO")
}

// A statement that outlasts mysql.read_timeout (here: its table locked by
// another session) fails the command with its one line on stderr: the
// driver's own log lines of the timed-out read stay out of it. A listing
// is stopped by the server itself just before, saying so. A daemon's log
// says what the driver's "invalid connection" means, as the command does,
// once, and says when it claims again.
func TestFaultReadTimeoutOneLine(t *testing.T) {
	t.Parallel()
	// 3s: the listing's server-side limit is a tenth shorter, and on a
	// loaded host its error must arrive before the client gives up.
	b := setup(t, "mysql:\n  read_timeout: 3s\n")
	yaml, err := os.ReadFile(b.config)
	require.NoError(t, err)
	// One mysql section: the timeout goes beside the DSN.
	fixed := strings.Replace(strings.Replace(string(yaml), "mysql:\n  read_timeout: 3s\n", "", 1), "mysql:\n", "mysql:\n  read_timeout: 3s\n", 1)
	require.NoError(t, os.WriteFile(b.config, []byte(fixed), 0o644))

	d := b.startDaemon(t, "locked-out")
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(d.log)
		return strings.Contains(string(out), "taskd node started")
	}, 30*time.Second, 50*time.Millisecond, "the daemon starts")

	conn, err := b.env.Store.DB().Conn(b.ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(b.ctx, `LOCK TABLES task_center WRITE`)
	require.NoError(t, err)
	defer conn.ExecContext(b.ctx, `UNLOCK TABLES`)

	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	for cmdline, want := range map[string]string{
		"list":   "read stopped after 2.7s without an answer: a lock held elsewhere or a busy server kept it waiting (mysql.read_timeout)",
		"show 1": "gave no answer within mysql.read_timeout",
	} {
		cmd := exec.CommandContext(ctx, taskdBin, append([]string{"--config", b.config}, strings.Fields(cmdline)...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.Error(t, cmd.Run(), cmdline)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%s: one line on stderr: %q", cmdline, stderr.String())
		require.True(t, strings.HasPrefix(stderr.String(), "taskd: "), stderr.String())
		require.Contains(t, stderr.String(), want, cmdline)
	}
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(d.log)
		return strings.Contains(string(out), "invalid connection (MySQL dropped the connection or gave no answer within mysql.read_timeout)")
	}, 30*time.Second, 100*time.Millisecond, "the daemon's claim timed out, and its log says what that means")
	_, err = conn.ExecContext(b.ctx, `UNLOCK TABLES`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(d.log)
		return strings.Contains(string(out), `"msg":"dispatch works again"`)
	}, 30*time.Second, 100*time.Millisecond, "the daemon says when it claims again")
	out, err := os.ReadFile(d.log)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(out), `"msg":"dispatch failed; retrying"`),
		"a claim failing for seconds is one line, not one per try:\n%s", out)
}

// A password set on Redis under a running node (requirepass, after which
// the node's dropped connections reconnect without one) fails its
// heartbeats and its wait for work until the password is in its
// configuration: its log says so once per loop, with what the refusal
// means ("Protocol error: unauthenticated multibulk length" reads like a
// bug), not a line per beat, and says when they work again.
func TestFaultRedisPasswordSetUnderANode(t *testing.T) {
	t.Parallel()
	if testenv.RedisMaster() != "" {
		t.Skip("runs a private Redis server, not a Sentinel's")
	}
	b := setup(t, "worker:\n  heartbeat_interval: 200ms\nhandlers:\n  hello: { exec: [\"true\"] }\n")
	addr := testenv.PrivateRedis(t, 0)
	yaml, err := os.ReadFile(b.config)
	require.NoError(t, err)
	moved := strings.Replace(string(yaml), fmt.Sprintf("addr: %q", b.env.RedisAddr), fmt.Sprintf("addr: %q", addr), 1)
	require.NotEqual(t, string(yaml), moved)
	require.NoError(t, os.WriteFile(b.config, []byte(moved), 0o644))

	d := b.startDaemon(t, "guarded")
	logged := func(s string) func() bool {
		return func() bool {
			out, _ := os.ReadFile(d.log)
			return strings.Contains(string(out), s)
		}
	}
	require.Eventually(t, logged("taskd node started"), 30*time.Second, 50*time.Millisecond)

	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	require.NoError(t, admin.ConfigSet(b.ctx, "requirepass", "s3cret").Err())
	// The node's connections stay authenticated until they are dropped.
	require.NoError(t, admin.Do(b.ctx, "CLIENT", "KILL", "TYPE", "normal").Err())
	require.Eventually(t, logged(`"msg":"heartbeat failed"`), 30*time.Second, 50*time.Millisecond)
	time.Sleep(2 * time.Second) // ten beats fail
	require.NoError(t, admin.ConfigSet(b.ctx, "requirepass", "").Err())
	require.Eventually(t, logged(`"msg":"heartbeats work again"`), 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, logged(`"msg":"process heartbeat works again"`), 30*time.Second, 50*time.Millisecond)

	out, err := os.ReadFile(d.log)
	require.NoError(t, err)
	log := string(out)
	for _, msg := range []string{"heartbeat failed", "process heartbeat failed"} {
		require.Equal(t, 1, strings.Count(log, `"msg":"`+msg+`"`), "%s: one line, not one per beat:\n%s", msg, log)
	}
	require.Contains(t, log, "(Redis asks for a password this process does not give: set redis.password and restart it)")
}
