package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The production loader reads what the services hold: queue figures, the
// per-minute series from task_run, workers, events, alerts, tasks by
// keyset page, a task with its runs, and the audit log.
func TestLoaderReadsTheServices(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	var ps []store.TaskInsertParams
	for i := range 5 {
		ps = append(ps, store.TaskInsertParams{Code: "mail", Payload: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
			Timeout: 60, MaxRetry: 3, Delay: time.Hour})
	}
	res, err := env.Store.TaskInsert(ctx, ps)
	require.NoError(t, err)
	first := res[0].ID
	// Three attempts ended a minute ago, one of them failed, and one now.
	env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, finished_at, outcome, result)
		VALUES (?, 1, 'mail', 'mail', 'w1', NOW(3) - INTERVAL 1 MINUTE, 'succeeded', ''),
		       (?, 1, 'mail', 'mail', 'w1', NOW(3) - INTERVAL 1 MINUTE, 'succeeded', ''),
		       (?, 2, 'mail', 'mail', 'w1', NOW(3) - INTERVAL 1 MINUTE, 'failed', 'exit status 1'),
		       (?, 1, 'mail', 'mail', 'w1', NOW(3), 'succeeded', 'ok'),
		       (?, 1, 'mail', 'mail', 'w1', NOW(3) - INTERVAL 2 HOUR, 'succeeded', 'too old')`,
		first, first+1, first, first+2, first+3)
	require.NoError(t, env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w1", Node: "n1", Host: "h1", PID: 42,
		Queues: []string{"mail"}, Busy: 1, Slots: []broker.Slot{{Queue: "mail", TaskID: first, Code: "mail", Since: time.Now()}}}, time.Minute))
	require.NoError(t, env.Broker.RecordEvent(ctx, &broker.Event{At: time.Now(), Kind: "idle", WorkerID: "w1", Queue: "mail"}))
	require.NoError(t, env.Store.SaveAlertStates(ctx, map[string]string{
		"taskd_backlog{queue=mail}": `{"firing":true,"starts_at":"2026-11-30T10:00:00Z","annotations":{"summary":"mail backlog 5"}}`,
	}, nil))
	o := ops.New(env.Store, env.Broker)
	_, err = o.Pause(ctx, "mail")
	require.NoError(t, err)

	l := &Loader{Store: env.Store, Broker: env.Broker, Queues: []string{"other"}, Alerts: StoredAlerts(env.Store)}
	ov, err := l.Overview(ctx)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, q := range ov.Stats.Queues {
		names[q.Name] = true
		if q.Name == "mail" {
			require.Equal(t, int64(5), q.Pending)
			require.True(t, q.Paused)
			require.Equal(t, 1, q.LiveWorkers)
		}
	}
	require.Equal(t, map[string]bool{"mail": true, "other": true}, names)
	s := ov.Series["mail"]
	require.Len(t, s, SeriesMinutes)
	require.Equal(t, int64(4), sum(s[SeriesMinutes-3:]), "the last minutes")
	require.Equal(t, int64(4), sum(s), "older runs are outside the 30 minutes")
	require.Len(t, ov.Workers, 1)
	require.Equal(t, first, ov.Workers[0].Heartbeat.Slots[0].TaskID)
	require.Len(t, ov.Events, 1)
	require.Equal(t, []Alert{{Name: "taskd_backlog{queue=mail}", Firing: true,
		Since: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Summary: "mail backlog 5"}}, ov.Alerts)

	// The next refresh reads only the last minutes and keeps the others.
	env.Exec(t, `DELETE FROM task_run WHERE finished_at < NOW(3) - INTERVAL 90 SECOND`)
	env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, outcome) VALUES (?, 1, 'mail', 'mail', 'w1', 'succeeded')`, first+4)
	ov, err = l.Overview(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), sum(ov.Series["mail"]))

	page, err := l.Tasks(ctx, TaskQuery{Code: "mail", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{first + 4, first + 3}, []int64{page[0].ID, page[1].ID})
	page, err = l.Tasks(ctx, TaskQuery{Code: "mail", Limit: 2, BeforeID: page[1].ID})
	require.NoError(t, err)
	require.Equal(t, []int64{first + 2, first + 1}, []int64{page[0].ID, page[1].ID})
	// A page reads no payload, and a result's first KiB only: megabytes
	// a row, at each refresh, cost more than the rest of tasktop's reads.
	env.Exec(t, `UPDATE task_center SET last_result = REPEAT('错', 100000) WHERE id = ?`, first+2)
	page, err = l.Tasks(ctx, TaskQuery{Code: "mail", Limit: 1, BeforeID: first + 3})
	require.NoError(t, err)
	require.Empty(t, page[0].Payload)
	require.Equal(t, strings.Repeat("错", 1024), page[0].LastResult)

	tk, runs, err := l.Task(ctx, first)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":0}`, string(tk.Payload))
	require.Len(t, runs, 2)
	_, _, err = l.Task(ctx, first+100)
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err))

	audit, err := l.Audit(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, audit, 1)
	require.Equal(t, "pause", audit[0].Action)
}

// When Redis stops answering, a refresh still reads the task center
// within its deadline and says Redis did not answer; once Redis is back
// the next refresh reads both.
func TestLoaderRedisDownAndBack(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	port := testenv.FreePort(t)
	addr := testenv.PrivateRedis(t, port)
	br, err := broker.Open(context.Background(), broker.Options{Addr: addr, Prefix: env.Prefix})
	require.NoError(t, err)
	defer br.Close()
	_, err = env.Store.TaskInsert(context.Background(), []store.TaskInsertParams{
		{Code: "mail", Payload: json.RawMessage(`{}`), Timeout: 60, MaxRetry: 3, Delay: time.Hour},
		{Code: "mail", Payload: json.RawMessage(`{}`), Timeout: 60, MaxRetry: 3, Delay: time.Hour}})
	require.NoError(t, err)
	l := &Loader{Store: env.Store, Broker: br, Alerts: StoredAlerts(env.Store)}
	ov, err := l.Overview(context.Background())
	require.NoError(t, err)
	require.NoError(t, ov.RedisErr)

	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(port), "shutdown", "nosave").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "connect") {
		require.NoError(t, err, string(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	start := time.Now()
	ov, err = l.Overview(ctx)
	cancel()
	require.NoError(t, err, "the task center answers")
	require.Error(t, ov.RedisErr)
	require.True(t, strings.HasPrefix(ov.RedisErr.Error(), "Redis: "), ov.RedisErr.Error())
	require.Len(t, ov.Stats.Queues, 1)
	require.Equal(t, int64(2), ov.Stats.Queues[0].Pending)
	require.Empty(t, ov.Workers)
	require.Less(t, time.Since(start), 3*time.Second)

	testenv.PrivateRedis(t, port)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ov, err := l.Overview(ctx)
		return err == nil && ov.RedisErr == nil
	}, 10*time.Second, 100*time.Millisecond)
}

// While the task center does not answer, a refresh reads Redis's figures
// (workers and their current tasks, backlogs, events) and says MySQL did
// not answer; a loader that never reached it connects at the first
// refresh it answers, and reads everything again.
func TestLoaderMySQLDownAndBack(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	require.NoError(t, env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w1", Node: "n1", Host: "h1", PID: 42,
		Queues: []string{"mail"}, Busy: 1, Slots: []broker.Slot{{Queue: "mail", TaskID: 77, Code: "mail", Since: time.Now()}}}, time.Minute))
	_, err := env.Broker.Push(ctx, []*task.Message{{ID: 78, Attempt: 1, Code: "mail", Queue: "mail", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	require.NoError(t, env.Broker.RecordEvent(ctx, &broker.Event{At: time.Now(), Kind: "idle", WorkerID: "w1", Queue: "mail"}))

	cfg, err := store.ParseDSN(env.DSN, store.Options{})
	require.NoError(t, err)
	cfg.Addr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) // nothing listens there
	var up atomic.Bool
	tries := 0
	l := &Loader{Broker: env.Broker, Queues: []string{"other"}, Connect: func(ctx context.Context) (*store.Store, error) {
		tries++
		if !up.Load() {
			_, err := store.Open(ctx, cfg.FormatDSN(), store.Options{})
			return nil, fromMySQL(err)
		}
		return env.Store, nil
	}}
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ov, err := l.Overview(ctx2)
	require.NoError(t, err, "Redis answers")
	require.ErrorContains(t, ov.MySQLErr, "MySQL: connect to mysql "+cfg.Addr)
	require.NoError(t, ov.RedisErr)
	require.Contains(t, ov.Stats.MySQLError, "connection refused")
	var mail *stats.Queue
	for i := range ov.Stats.Queues {
		if ov.Stats.Queues[i].Name == "mail" {
			mail = &ov.Stats.Queues[i]
		}
	}
	require.NotNil(t, mail, "the queue of a live worker")
	require.Equal(t, int64(1), mail.BacklogTotal())
	require.Equal(t, 1, mail.LiveWorkers)
	require.Len(t, ov.Stats.Workers, 1)
	require.Equal(t, []int64{77}, ov.Stats.Workers[0].Current, "the heartbeat's tasks")
	require.Len(t, ov.Workers, 1)
	require.Len(t, ov.Events, 1)
	_, err = l.Tasks(ctx, TaskQuery{Limit: 10})
	require.ErrorContains(t, err, "MySQL: ")

	// Both down: the refresh fails naming both.
	dead, err := broker.Dial(ctx, broker.Options{Addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), Prefix: env.Prefix})
	require.NoError(t, err)
	defer dead.Close()
	both := &Loader{Broker: dead, Connect: l.Connect}
	ctx3, cancel3 := context.WithTimeout(ctx, 4*time.Second)
	defer cancel3()
	_, err = both.Overview(ctx3)
	require.Regexp(t, `^MySQL: connect to mysql .*; Redis: .*connection refused$`, err.Error())

	up.Store(true)
	ov, err = l.Overview(ctx)
	require.NoError(t, err)
	require.NoError(t, ov.MySQLErr)
	require.Empty(t, ov.Stats.MySQLError)
	require.Equal(t, 4, tries, "each read tries while it never answered")
	_, err = l.Tasks(ctx, TaskQuery{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 4, tries, "connected once")
}

// A Redis that accepts connections and never answers holds a refresh at
// most half its deadline: the task center's figures still arrive.
func TestLoaderRedisHangs(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	proxy := testenv.NewFreezeProxy(t, testenv.RedisAddr())
	br, err := broker.Open(context.Background(), broker.Options{Addr: proxy.Addr(), Prefix: env.Prefix})
	require.NoError(t, err)
	defer br.Close()
	l := &Loader{Store: env.Store, Broker: br, Queues: []string{"mail"}}
	proxy.Freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ov, err := l.Overview(ctx)
	require.NoError(t, err)
	require.Error(t, ov.RedisErr)
	require.Equal(t, "mail", ov.Stats.Queues[0].Name)
}

func sum(ns []int64) int64 {
	var t int64
	for _, n := range ns {
		t += n
	}
	return t
}

// The detail's refresh reads a task's payload and last result again only
// when its row changed: a payload of megabytes was read every 2 s. A
// submit that replaces the payload shows at the next refresh.
func TestLoaderTaskReadsTextsWhenTheRowChanged(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	submit := func(payload string, c store.ConflictMode) int64 {
		res, err := env.Store.TaskInsert(ctx, []store.TaskInsertParams{{Code: "mail", Payload: json.RawMessage(payload),
			UniqueKey: "k", Timeout: 60, MaxRetry: 3, Delay: time.Hour, OnConflict: store.Conflict{Mode: c}}})
		require.NoError(t, err)
		return res[0].ID
	}
	id := submit(`{"v":"a"}`, store.Reject)
	env.Exec(t, `UPDATE task_center SET last_result = 'r1', updated_at = NOW(3) - INTERVAL 1 MINUTE WHERE id = ?`, id)
	l := &Loader{Store: env.Store, Broker: env.Broker}
	read := func() *task.Task {
		tk, _, err := l.Task(ctx, id)
		require.NoError(t, err)
		return tk
	}
	require.JSONEq(t, `{"v":"a"}`, string(read().Payload))

	// Texts changed behind a row that keeps its stamp are not read again:
	// the refresh did not read them.
	env.Exec(t, `UPDATE task_center SET payload = '{"v":"b"}', last_result = 'r2', updated_at = updated_at WHERE id = ?`, id)
	for range 3 {
		tk := read()
		require.JSONEq(t, `{"v":"a"}`, string(tk.Payload))
		require.Equal(t, "r1", tk.LastResult)
	}

	require.Equal(t, id, submit(`{"v":"c"}`, store.Replace))
	require.JSONEq(t, `{"v":"c"}`, string(read().Payload))
	// A row that changed a moment ago may change again under the same
	// stamp (two writes within a millisecond): its texts are read again
	// until it has been still a while.
	env.Exec(t, `UPDATE task_center SET payload = '{"v":"d"}', last_result = 'r3', updated_at = updated_at WHERE id = ?`, id)
	tk := read()
	require.JSONEq(t, `{"v":"d"}`, string(tk.Payload))
	require.Equal(t, "r3", tk.LastResult)
}

// replicaConfig is the configuration of env with its task center as the
// replica (mysql.read_dsn) and the primary at addr, with the mysql
// settings of extra.
func replicaConfig(t *testing.T, env *testenv.Env, addr, extra string) *config.Config {
	t.Helper()
	primary, err := store.ParseDSN(env.DSN, store.Options{})
	require.NoError(t, err)
	primary.Addr = addr
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf("mysql:\n  dsn: %q\n  read_dsn: %q\n%sredis:\n  addr: %q\n  prefix: %q\n",
		primary.FormatDSN(), env.DSN, extra, env.RedisAddr, env.Prefix)), 0o644))
	cfg, err := config.Load(config.NewViper(), path)
	require.NoError(t, err)
	return cfg
}

// With mysql.read_dsn set, tasktop's screens read the replica on its own:
// during a failover that leaves the primary unreachable they show the
// task center, and only the actions wait for the primary (they used to
// connect to the replica only once the primary answered).
func TestBackendReadsTheReplicaWhilePrimaryDown(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `INSERT INTO task_center (task_code, queue, payload) VALUES ('mail', 'mail', '{}')`)
	dead := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) // nothing listens there
	cfg := replicaConfig(t, env, dead, "")

	be, err := openBackend(ctx, cfg)
	require.NoError(t, err)
	defer be.Close()
	ov, err := be.Loader.Overview(ctx)
	require.NoError(t, err)
	require.NoError(t, ov.MySQLErr, "the replica answers")
	tasks, err := be.Loader.Tasks(ctx, TaskQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	_, err = be.Ops.Pause(ctx, "mail")
	require.ErrorContains(t, err, "MySQL: connect to mysql "+dead, "actions write the primary")
}

// A primary that takes connections and never answers (a failover left
// its address to a host that hangs) holds neither the start nor the quit:
// the screens read the replica when there is one, and otherwise show what
// Redis holds and say that MySQL does not answer; only an action waits
// for the primary, up to the time its caller gives it.
func TestBackendStartsWhilePrimaryHangs(t *testing.T) {
	t.Parallel()
	for _, replica := range []bool{true, false} {
		t.Run(fmt.Sprintf("replica=%v", replica), func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t)
			ctx := context.Background()
			env.Exec(t, `INSERT INTO task_center (task_code, queue, payload) VALUES ('mail', 'mail', '{}')`)
			host := testenv.NewHungServer(t)
			hangs := "  dial_timeout: 10m\n  read_timeout: 10m\n  write_timeout: 10m\n"
			cfg := replicaConfig(t, env, host.Addr(), hangs)
			if !replica {
				cfg.MySQL.ReadDSN = ""
			}

			// Bounds far below the hang's ten minutes, far above the work.
			within := func(what string, f func()) {
				t.Helper()
				done := make(chan struct{})
				go func() { defer close(done); f() }()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("%s waits for the hung primary", what)
				}
			}
			var be *backend
			var err error
			within("the start", func() { be, err = openBackend(ctx, cfg) })
			require.NoError(t, err)
			octx, cancel := context.WithTimeout(ctx, 4*time.Second)
			defer cancel()
			ov, err := be.Loader.Overview(octx)
			require.NoError(t, err)
			if replica {
				require.NoError(t, ov.MySQLErr, "the replica answers")
			} else {
				require.ErrorContains(t, ov.MySQLErr, "MySQL: connect to mysql "+host.Addr(), "the screens say it")
			}
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			within("an action", func() { _, err = be.Ops.Pause(actx, "mail") })
			require.ErrorContains(t, err, "MySQL: connect to mysql "+host.Addr(), "actions write the primary")
			require.ErrorAs(t, err, &notSent{}, "and say they were not sent")
			within("the quit", be.Close)
			require.Positive(t, host.Accepted(), "the primary was tried")
		})
	}
}
