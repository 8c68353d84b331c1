package doctor_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/doctor"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

type testBundle struct {
	env *testenv.Env
	cfg *config.Config
}

// setup loads a configuration of the test's environment with extra YAML.
func setup(t *testing.T, extra string) *testBundle {
	t.Helper()
	env := testenv.New(t)
	return &testBundle{env: env, cfg: load(t, env.ConfigYAML(extra))}
}

func load(t *testing.T, body string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	c, err := config.Load(config.NewViper(), path)
	require.NoError(t, err)
	return c
}

func (b *testBundle) run(t *testing.T, o doctor.Options) *doctor.Report {
	t.Helper()
	return doctor.Run(context.Background(), b.cfg, o,
		func(ctx context.Context) (*store.Store, error) { return node.OpenStore(ctx, b.cfg) },
		func(ctx context.Context) (*broker.Broker, error) { return node.OpenBroker(ctx, b.cfg) })
}

// check returns the report's check named name.
func check(t *testing.T, r *doctor.Report, name string) doctor.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", name, r.Checks)
	return doctor.Check{}
}

func requireStatus(t *testing.T, r *doctor.Report, name string, want doctor.Status, detail string) {
	t.Helper()
	c := check(t, r, name)
	require.Equal(t, want, c.Status, "%s: %s (fix: %s)", name, c.Detail, c.Fix)
	require.Contains(t, c.Detail, detail, name)
	if want != doctor.OK {
		require.NotEmpty(t, c.Fix, "%s says what to do", name)
	}
}

// A configuration that does not load is the one check, said once.
func TestConfigFailed(t *testing.T) {
	t.Parallel()
	r := doctor.ConfigFailed(errors.New(`config handlers.x: http "http://a:80800/b": port 80800 is not 1-65535`))
	requireStatus(t, r, "config", doctor.Fail, `handlers.x: http "http://a:80800/b"`)
	require.NotContains(t, check(t, r, "config").Detail, "config handlers.x")
}

// A deployment that works passes every check, warnings aside.
func TestHealthy(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	b := setup(t, "handlers:\n  hello: { exec: [\"true\"] }\n  web: { http: \""+srv.URL+"/task\" }\n")
	ctx := context.Background()
	require.NoError(t, b.env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w1", Node: "n1", Queues: []string{"hello", "web"}}, time.Minute))

	r := b.run(t, doctor.Options{})
	require.True(t, r.OK, "%+v", r.Checks)
	for _, name := range []string{"config", "mysql", "mysql.grants", "mysql.schema", "mysql.lock_wait_timeout", "mysql.max_allowed_packet", "mysql.time_zone",
		"mysql.clock", "redis", "redis.oom", "redis.eviction", "redis.cluster", "handlers.hello", "handlers.web", "tasks.handlers", "tasks.routes", "queues.consumers",
		"workers.results", "queues.limits", "queues.paused", "nodes.ids", "nodes.time_zones", "nodes.cron_timezone"} {
		requireStatus(t, r, name, doctor.OK, "")
	}
	require.Equal(t, len(r.Checks), r.Counts[doctor.OK]+r.Counts[doctor.Warn])
	requireStatus(t, r, "config", doctor.OK, "; 2 handlers, 2 queues")
	r = setup(t, "handlers:\n  hello: { exec: [\"true\"] }\n").run(t, doctor.Options{})
	requireStatus(t, r, "config", doctor.OK, "; 1 handler, 1 queue")
}

// A live worker whose results have waited to be written (the task
// center's disk is full, or it is read-only) takes no new work: doctor
// says so, where every other check is fine.
func TestResultsStuck(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	ctx := context.Background()
	require.NoError(t, b.env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w1", Node: "n1", Queues: []string{"hello"}, ResultsWaitingMS: 300}, time.Minute))
	requireStatus(t, b.run(t, doctor.Options{}), "workers.results", doctor.OK, "1 live worker, none with results waiting to be written")

	require.NoError(t, b.env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w1", Node: "n1", Queues: []string{"hello"}, ResultsWaitingMS: 125_000}, time.Minute))
	requireStatus(t, b.run(t, doctor.Options{}), "workers.results", doctor.Warn, "worker w1 has results waiting 2m to be written")
}

// The connections taskd's live processes may open are added up against
// the server's max_connections: five hosts of the example configuration
// could take all of a default server's.
func TestConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.cfg.MySQL.MaxOpenConns = 20
	ctx := context.Background()
	r := b.run(t, doctor.Options{})
	requireStatus(t, r, "mysql.connections", doctor.OK, "one node of this configuration may open up to 20 of the server's max_connections ")

	var most int
	require.NoError(t, b.env.Store.DB().QueryRow(`SELECT @@GLOBAL.max_connections`).Scan(&most))
	for i, conns := range []int{most / 2, most / 2, 0} { // the last one an older taskd, which does not say
		require.NoError(t, b.env.Broker.BeatProcess(ctx, &broker.Process{ID: fmt.Sprint("p", i), Node: fmt.Sprint("web-", i), MySQLConns: conns}, time.Minute))
	}
	r = b.run(t, doctor.Options{})
	requireStatus(t, r, "mysql.connections", doctor.Warn, fmt.Sprintf("3 live taskd processes may open up to %d connections (mysql.max_open_conns each), more than the server's max_connections %d; ",
		most/2*2+20, most))
	require.Contains(t, check(t, r, "mysql.connections").Detail, " open now, at most ")
	require.Contains(t, check(t, r, "mysql.connections").Fix, "lower mysql.max_open_conns")

	// An account with a limit of its own (shared hosting) binds first.
	user := fmt.Sprintf("taskd_doctor_%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := b.env.Store.DB().Exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw' WITH MAX_USER_CONNECTIONS 10", user)); err != nil {
		t.Skipf("the test account cannot create accounts: %v", err)
	}
	t.Cleanup(func() { _, _ = b.env.Store.DB().Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	_, err := b.env.Store.DB().Exec(fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", b.env.Database, user))
	require.NoError(t, err)
	dsn, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	dsn.User, dsn.Passwd = user, "pw"
	b.cfg.MySQL.DSN = dsn.FormatDSN()
	r = b.run(t, doctor.Options{})
	requireStatus(t, r, "mysql.connections", doctor.Warn, fmt.Sprintf("3 live taskd processes may open up to %d connections (mysql.max_open_conns each), more than the account's max_user_connections 10; ", most/2*2+20))
	require.Contains(t, check(t, r, "mysql.connections").Detail, "(Error 1226: User has exceeded the 'max_user_connections' resource)")
}

// A configuration file that holds credentials and that every user may read
// is warned about; one that holds none is not checked.
func TestConfigFileSecrets(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	run := func(extra string, mode os.FileMode) *doctor.Report {
		require.NoError(t, os.WriteFile(path, []byte(env.ConfigYAML(extra)), mode))
		require.NoError(t, os.Chmod(path, mode)) // whatever the umask
		c, err := config.Load(config.NewViper(), path)
		require.NoError(t, err)
		b := &testBundle{env: env, cfg: c}
		return b.run(t, doctor.Options{})
	}
	secret := "handlers:\n  web: { http: \"http://127.0.0.1:1/x\", header: { X-Api-Key: s3cret } }\n"
	r := run(secret, 0o644)
	requireStatus(t, r, "config.secrets", doctor.Warn, path+" holds credentials (handlers.web.header) and every user of this host may read it (mode 0644)")
	require.Contains(t, check(t, r, "config.secrets").Fix, "chmod o-r "+path)
	requireStatus(t, run(secret, 0o640), "config.secrets", doctor.OK, "others may not read it")
	for _, c := range run("", 0o644).Checks {
		require.NotEqual(t, "config.secrets", c.Name)
	}
}

// Each problem is found, by the check that names it, with a fix.
func TestProblems(t *testing.T) {
	t.Parallel()
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	b := setup(t, "handlers:\n  gone: { exec: [\"/no/such/program\"] }\n  down: { http: \"http://"+closed+"/task?key=s3cret\" }\n"+
		"  nowhere: { http: \"http://no-such-host.invalid/task\" }\n  indir: { exec: [\"true\"], dir: /no/such/dir }\n"+
		"submit: { max_payload: 104857600 }\n")
	ctx := context.Background()
	// A waiting task whose code no node handles, in a queue nobody consumes.
	prod := producer.New(b.env.Store, nil, producer.Options{})
	_, err := prod.Submit(ctx, producer.Submission{Code: "ghost"})
	require.NoError(t, err)
	// And one INSERTed and dispatched by some scheduler: its message waits
	// in a queue nobody consumes, for good.
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at, status, attempt, dispatched_at)
		VALUES ('spook', '{}', NOW(3), 1, 1, NOW(3))`)
	// Its queue paused by an operator, and forgotten.
	_, err = ops.New(b.env.Store, b.env.Broker).Pause(ctx, "ghost")
	require.NoError(t, err)
	// A node in another zone, with another cron.timezone.
	require.NoError(t, b.env.Broker.BeatProcess(ctx, &broker.Process{ID: "p1", Node: "tokyo-1", Host: "tk-a", Zone: "Asia/Tokyo +09:00",
		CronTimezone: "Asia/Tokyo"}, time.Minute))
	// A configuration copied to a second host with its node.id; two
	// processes of one host under one node.id are fine.
	for _, p := range []broker.Process{{ID: "p2", Node: "tokyo-1", Host: "tk-b"}, {ID: "p3", Node: "osaka", Host: "os-a"}, {ID: "p4", Node: "osaka", Host: "os-a"}} {
		require.NoError(t, b.env.Broker.BeatProcess(ctx, &p, time.Minute))
	}

	// This host's clock 45 s ahead of the database's, in UTC+05:00.
	skewed := func() time.Time { return time.Now().Add(45 * time.Second).In(time.FixedZone("X", 5*3600)) }
	r := b.run(t, doctor.Options{Now: skewed})
	require.False(t, r.OK)
	requireStatus(t, r, "handlers.gone", doctor.Fail, `exec "/no/such/program" cannot start`)
	requireStatus(t, r, "handlers.indir", doctor.Fail, "dir /no/such/dir")
	requireStatus(t, r, "handlers.down", doctor.Fail, "http://"+closed+"/task?…: 127.0.0.1 resolves (127.0.0.1) but port")
	require.NotContains(t, check(t, r, "handlers.down").Detail, "s3cret", "the endpoint's key is not shown")
	requireStatus(t, r, "handlers.nowhere", doctor.Fail, "does not resolve")
	requireStatus(t, r, "tasks.handlers", doctor.Warn, "ghost (1 task), spook (1 task)")
	require.Contains(t, check(t, r, "tasks.handlers").Fix, "taskd kill --code ghost --yes")
	requireStatus(t, r, "queues.consumers", doctor.Warn, "ghost (1 task waiting), gone")
	requireStatus(t, r, "queues.consumers", doctor.Warn, "spook (1 task waiting)")
	requireStatus(t, r, "mysql.clock", doctor.Fail, "ahead of the database's")
	requireStatus(t, r, "queues.paused", doctor.Warn, "queue ghost is paused since ")
	require.Contains(t, check(t, r, "queues.paused").Detail, " by "+ops.CurrentActor().User+" with 1 task due: they wait until it is resumed")
	require.Equal(t, "taskd resume ghost --yes, if what it was paused for is over", check(t, r, "queues.paused").Fix)
	requireStatus(t, r, "mysql.time_zone", doctor.Warn, "this host's UTC+05:00")
	requireStatus(t, r, "mysql.max_allowed_packet", doctor.Warn, "less than the 100.0 MiB submit.max_payload allows")
	requireStatus(t, r, "nodes.time_zones", doctor.OK, "hosts in 2 zones (Asia/Tokyo +09:00: tokyo-1; ")
	requireStatus(t, r, "nodes.cron_timezone", doctor.Warn, "Asia/Tokyo: tokyo-1")
	requireStatus(t, r, "nodes.ids", doctor.Warn, `cannot tell them apart: "tokyo-1" on tk-a, tk-b`)
	require.NotContains(t, check(t, r, "nodes.ids").Detail, "osaka")
	// Run on the host the configuration was copied to, before its node
	// starts: this host takes osaka too.
	id := b.cfg.Node.ID
	b.cfg.Node.ID = "osaka"
	here, err := os.Hostname()
	require.NoError(t, err)
	requireStatus(t, b.run(t, doctor.Options{Now: skewed}), "nodes.ids", doctor.Warn, `"osaka" on `+strings.Join(slices.Sorted(slices.Values([]string{"os-a", here})), ", "))
	b.cfg.Node.ID = id

	// A node records a handler for ghost, a worker consumes its queue.
	_, err = b.env.Store.RouteRecord(ctx, "n2", map[string]string{"ghost": "ghost", "spook": "spook"})
	require.NoError(t, err)
	require.NoError(t, b.env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w2", Node: "n2", Queues: []string{"ghost", "spook", "gone", "down", "nowhere", "indir"}}, time.Minute))
	r = b.run(t, doctor.Options{Now: func() time.Time { return time.Now().Add(2 * time.Second) }})
	requireStatus(t, r, "tasks.handlers", doctor.OK, "")
	requireStatus(t, r, "queues.consumers", doctor.OK, "")
	requireStatus(t, r, "mysql.clock", doctor.Warn, "ahead of the database")
}

// A route in the task center that is not this configuration's: tasks
// INSERTed with no queue go where another node said.
func TestRoutesDiffer(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  mail: { exec: [\"true\"], queue: mail }\n  sms: { exec: [\"true\"] }\n")
	ctx := context.Background()
	_, err := b.env.Store.RouteRecord(ctx, "n1", map[string]string{"mail": "mail", "sms": "sms"})
	require.NoError(t, err)
	requireStatus(t, b.run(t, doctor.Options{}), "tasks.routes", doctor.OK, "2 task codes routed as configured")

	_, err = b.env.Store.RouteRecord(ctx, "web-2", map[string]string{"mail": "bulk"})
	require.NoError(t, err)
	requireStatus(t, b.run(t, doctor.Options{}), "tasks.routes", doctor.Warn,
		"task code mail: this configuration takes it from queue mail, but tasks INSERTed with no queue go to bulk (recorded by node web-2, ")
}

// A limit in force that is not this configuration's: an operator's, or
// another node's.
func TestLimitsDiffer(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  sms: { exec: [\"true\"] }\n  rep: { exec: [\"true\"] }\nqueues:\n  sms: { rate: 100/s }\n  rep: { max_running: 3 }\n")
	ctx := context.Background()
	r := b.run(t, doctor.Options{})
	requireStatus(t, r, "queues.limits", doctor.Warn, "queue rep: this configuration's limit max 3 running is not recorded yet")

	require.NoError(t, b.env.Store.LimitSeed(ctx, []string{"sms", "rep"}, map[string]limit.Limit{
		"sms": {Rate: limit.Rate{N: 100, Period: time.Second}}, "rep": {MaxRunning: 3}}))
	requireStatus(t, b.run(t, doctor.Options{}), "queues.limits", doctor.OK, "2 queues limited as configured")

	o := ops.New(b.env.Store, b.env.Broker)
	fifty := limit.Rate{N: 50, Period: time.Second}
	_, err := o.Limit(ctx, "sms", ops.LimitChange{Rate: &fifty})
	require.NoError(t, err)
	require.NoError(t, b.env.Store.LimitSeed(ctx, []string{"rep"}, map[string]limit.Limit{"rep": {MaxRunning: 9}}))
	r = b.run(t, doctor.Options{})
	requireStatus(t, r, "queues.limits", doctor.Warn, "queue rep runs under max 9 running, recorded by another node's configuration")
	var sms bool
	for _, c := range r.Checks {
		if c.Name == "queues.limits" && strings.Contains(c.Detail, "queue sms runs under 50/s burst 5, set by an operator") {
			sms = strings.Contains(c.Fix, "taskd limit sms --reset")
		}
	}
	require.True(t, sms, "%+v", r.Checks)
}

func TestSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.env.Exec(t, `DROP TABLE taskd_schema`)
	r := b.run(t, doctor.Options{})
	require.False(t, r.OK)
	c := check(t, r, "mysql.schema")
	require.Equal(t, doctor.Fail, c.Status)
	require.Contains(t, c.Detail, "run `taskd migrate`")
	for _, ch := range r.Checks {
		require.NotEqual(t, "tasks.handlers", ch.Name, "the task checks need the schema")
	}
}

// A contract step not applied yet is a warning that says what to run: this
// binary works on the schema before and after it.
func TestPendingContractStep(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	migs, err := store.Migrations()
	require.NoError(t, err)
	var step store.Migration
	for _, m := range migs {
		if m.Contract {
			step = m
		}
	}
	require.NotZero(t, step.Version, "no contract step among the migrations")
	b.env.Exec(t, `DELETE FROM taskd_schema WHERE version = ?`, step.Version)

	r := b.run(t, doctor.Options{})
	requireStatus(t, r, "mysql.schema", doctor.Warn, "contract step "+step.Name+" not applied yet")
	require.Contains(t, check(t, r, "mysql.schema").Fix, "taskd migrate --contract")
	require.True(t, r.OK, "a pending contract step fails nothing: %+v", r.Checks)
	check(t, r, "tasks.handlers") // the checks that need the schema still ran

	// While a node of the previous release runs, the warning names it;
	// once only nodes that know the step run, it says migrate may run it.
	ctx := context.Background()
	require.NoError(t, b.env.Broker.BeatProcess(ctx, &broker.Process{ID: "old", Node: "web-3", PID: 4242, Version: "1.4.0",
		Schema: step.Version - 1}, time.Minute))
	require.NoError(t, b.env.Broker.BeatProcess(ctx, &broker.Process{ID: "new", Node: "web-1", PID: 4343, Version: "1.5.0",
		Schema: store.LatestVersion()}, time.Minute))
	r = b.run(t, doctor.Options{})
	requireStatus(t, r, "mysql.schema", doctor.Warn, "contract step "+step.Name+
		" not applied yet: 1 live process of an older release: node web-3 on ")
	require.Contains(t, check(t, r, "mysql.schema").Detail, "pid 4242 (taskd 1.4.0)")

	require.NoError(t, b.env.Broker.EndProcess(ctx, "old"))
	r = b.run(t, doctor.Options{})
	requireStatus(t, r, "mysql.schema", doctor.Warn, "contract step "+step.Name+
		" not applied yet, and every live process runs a release that knows it")
	require.Equal(t, "run `taskd migrate`", check(t, r, "mysql.schema").Fix)
}

// A newer taskd's ordinary migration is a warning (this binary runs on
// it); a newer taskd's contract step fails the schema check.
func TestNewerSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.env.Exec(t, `INSERT INTO taskd_schema (version, name) VALUES (998, 'a'), (999, 'b')`)
	r := b.run(t, doctor.Options{})
	requireStatus(t, r, "mysql.schema", doctor.Warn, "schema version 999 has migrations of a newer taskd (998, 999)")
	require.True(t, r.OK, "%+v", r.Checks)
	check(t, r, "tasks.handlers") // the checks that need the schema still ran

	b.env.Exec(t, `UPDATE taskd_schema SET contract = 1 WHERE version = 999`)
	r = b.run(t, doctor.Options{})
	c := check(t, r, "mysql.schema")
	require.Equal(t, doctor.Fail, c.Status, c.Detail)
	require.Contains(t, c.Detail, "contract step 999 (b) of a newer taskd")
	require.False(t, r.OK)
}

func TestRedis(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	for _, tc := range []struct {
		name, args, extra string
		check             string
		want              doctor.Status
		detail            string
	}{
		{"evicting", "--maxmemory-policy allkeys-lru", "", "redis.eviction", doctor.Fail, "maxmemory-policy is allkeys-lru"},
		{"nearly full", "--maxmemory 64mb", "alerts: { redis_memory_threshold: 0.001 }\n", "redis.memory", doctor.Fail, "pushes will fail with OOM"},
		{"headroom", "--maxmemory 64mb", "", "redis.memory", doctor.OK, "of 64.0 MiB used"},
		{"memory alert off", "--maxmemory 64mb", "alerts: { redis_memory_threshold: -1 }\n", "redis.memory", doctor.OK, "memory alert off)"},
		{"no persistence", "", "", "redis.persistence", doctor.Warn, "neither AOF nor snapshots"},
		{"append-only", "--appendonly yes", "", "redis.persistence", doctor.OK, "append-only file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var args []string
			if tc.args != "" {
				args = strings.Fields(tc.args)
			}
			addr := testenv.PrivateRedis(t, 0, args...)
			cfg := load(t, "mysql: { dsn: \""+env.DSN+"\" }\nredis: { addr: \""+addr+"\" }\n"+tc.extra)
			b := &testBundle{env: env, cfg: cfg}
			r := b.run(t, doctor.Options{})
			requireStatus(t, r, tc.check, tc.want, tc.detail)
			if tc.check == "redis.memory" && tc.want == doctor.Fail {
				require.Equal(t, broker.FullFix, check(t, r, tc.check).Fix, "the same fix as stats'")
			}
		})
	}
}

// A password Redis does not ask for is no protection: said, since the
// client's connections work either way.
func TestRedisPassword(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	for _, tc := range []struct {
		name        string
		requirepass string
		want        doctor.Status
		detail      string
	}{
		{"asked for none", "", doctor.Warn, "redis.password is set, but Redis asks for none"},
		{"asked for", "s3cret", doctor.OK, "Redis asks for a password, and takes redis.password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := testenv.PrivateRedis(t, 0)
			if tc.requirepass != "" {
				rdb := redis.NewClient(&redis.Options{Addr: addr})
				require.NoError(t, rdb.ConfigSet(context.Background(), "requirepass", tc.requirepass).Err())
				require.NoError(t, rdb.Close())
			}
			cfg := load(t, "mysql: { dsn: \""+env.DSN+"\" }\nredis: { addr: \""+addr+"\", password: s3cret }\n")
			b := &testBundle{env: env, cfg: cfg}
			requireStatus(t, b.run(t, doctor.Options{}), "redis.auth", tc.want, tc.detail)
		})
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	port := strconv.Itoa(testenv.FreePort(t))
	cfg := load(t, "mysql: { dsn: \"root:@tcp(127.0.0.1:"+port+")/taskd\" }\nredis: { addr: \"127.0.0.1:"+port+"\" }\n")
	b := &testBundle{cfg: cfg}
	r := b.run(t, doctor.Options{Timeout: 2 * time.Second})
	require.False(t, r.OK)
	requireStatus(t, r, "mysql", doctor.Fail, "127.0.0.1:"+port)
	requireStatus(t, r, "redis", doctor.Fail, "127.0.0.1:"+port)
}

// A server that answers and refuses (a wrong password, an unknown
// database) is not to be started: its fix is what its error says.
func TestRefused(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	dsn, err := mysql.ParseDSN(env.DSN)
	require.NoError(t, err)
	dsn.Passwd = "wrong-" + dsn.Passwd
	addr := testenv.PrivateRedis(t, 0)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	require.NoError(t, rdb.ConfigSet(context.Background(), "requirepass", "secret").Err())
	rdb.Close()
	r := (&testBundle{cfg: load(t, "mysql: { dsn: \""+dsn.FormatDSN()+"\" }\nredis: { addr: \""+addr+"\" }\n")}).run(t, doctor.Options{})
	for name, detail := range map[string]string{"mysql": "fix the user or password in mysql.dsn", "redis": addr} {
		requireStatus(t, r, name, doctor.Fail, detail)
	}
	require.Equal(t, "correct mysql.dsn (its user, password or database) or the server's account as the error says; restarting MySQL would not help",
		check(t, r, "mysql").Fix)
	require.Equal(t, "correct redis.password (or redis.addr, redis.db) as the error says; restarting Redis would not help", check(t, r, "redis").Fix)

	// A DSN that names no database is refused before any server is asked.
	dsn.Passwd, dsn.DBName = strings.TrimPrefix(dsn.Passwd, "wrong-"), ""
	r = (&testBundle{cfg: load(t, "mysql: { dsn: \""+dsn.FormatDSN()+"\" }\n")}).run(t, doctor.Options{})
	requireStatus(t, r, "mysql", doctor.Fail, ") names no database")
	require.Contains(t, check(t, r, "mysql").Fix, "restarting MySQL would not help")
}

// Pool handlers: a program that cannot start from this host, and a pool a
// live node reports crash-looping, each fail with what the node saw.
func TestPools(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  img: { pool: [\"/no/such/php\", \"artisan\", \"taskd:work\"] }\n  thumbs: { pool: [\"true\"] }\n")
	ctx := context.Background()
	r := b.run(t, doctor.Options{})
	requireStatus(t, r, "handlers.img", doctor.Fail, `pool "/no/such/php" cannot start`)
	requireStatus(t, r, "handlers.thumbs", doctor.OK, "pool true is executable")
	for _, c := range r.Checks {
		require.NotEqual(t, "handlers.pools", c.Name, "no node reports a pool yet: %+v", c)
	}

	require.NoError(t, b.env.Broker.BeatProcess(ctx, &broker.Process{ID: "p1", Node: "web-3", PID: 4242, Pools: []broker.PoolState{
		{Code: "thumbs", Size: 4, Processes: 2, Busy: 2},
		{Code: "img", Size: 4, FailedStarts: 7, FailuresInARow: 7, CrashLooping: true,
			LastError: "process 99 exited before it was ready: exit status 255: PHP Parse error: syntax error"},
	}}, time.Minute))
	r = b.run(t, doctor.Options{})
	requireStatus(t, r, "handlers.pools", doctor.Fail, "node web-3 (pid 4242): pool img is crash-looping, 7 failed starts in a row")
	require.Contains(t, check(t, r, "handlers.pools").Detail, "PHP Parse error")
	n := 0
	for _, c := range r.Checks {
		if c.Name == "handlers.pools" {
			n++
		}
	}
	require.Equal(t, 1, n, "only the crash-looping pool is reported")
}

// The alerts' receivers are checked as http handlers are, their URLs
// (secrets: a Slack hook's path is its key) shown by host only.
func TestNotifiers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	b := setup(t, "alerts:\n  enabled: true\n  webhook_url: \""+srv.URL+"/alerts\"\n  slack_url: \"http://"+closed+"/services/T0/B0/s3cret\"\n")
	r := b.run(t, doctor.Options{Timeout: 2 * time.Second})
	requireStatus(t, r, "alerts.webhook_url", doctor.OK, "accepts connections")
	requireStatus(t, r, "alerts.slack_url", doctor.Fail, "http://"+closed+"/…: 127.0.0.1 resolves")
	for _, c := range r.Checks {
		require.NotContains(t, c.Detail, "s3cret", c.Name)
	}
}

// An https handler whose certificate this host does not trust (here
// httptest's self-signed one) fails every task though its port opens:
// doctor says so, and how to make the host trust it.
func TestHTTPSHandlerUntrustedCertificate(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	b := setup(t, "handlers:\n  web: { http: \""+srv.URL+"/task?key=s3cret\" }\n")
	r := b.run(t, doctor.Options{Timeout: 2 * time.Second})
	requireStatus(t, r, "handlers.web", doctor.Fail, srv.URL+"/task?… accepts connections but TLS fails: tls: failed to verify certificate: x509:")
	require.Contains(t, check(t, r, "handlers.web").Fix, "SSL_CERT_FILE")
	require.NotContains(t, check(t, r, "handlers.web").Detail, "s3cret")
}

// An interpreter's script that is not where the handler runs it: in its
// dir, a failure; without a dir, where doctor runs, a warning, as the
// daemon may be started elsewhere.
func TestHandlerScripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, "handlers:\n  nodir: { exec: [\"sh\", \"no-such-job.sh\"] }\n  indir: { exec: [\"sh\", \"no-such-job.sh\"], dir: "+dir+" }\n")
	r := b.run(t, doctor.Options{})
	requireStatus(t, r, "handlers.nodir", doctor.Warn, "script no-such-job.sh: not found in the working directory ")
	require.Equal(t, "give the handler a dir, so that every daemon finds it wherever it was started", check(t, r, "handlers.nodir").Fix)
	requireStatus(t, r, "handlers.indir", doctor.Fail, "script no-such-job.sh: not found in dir "+dir)
}

// mysql.read_dsn, which list, show, stats and tasktop read, is checked
// as the primary is: a replica that refuses the node, or holds another
// database, fails the check where every other one passes.
func TestReadDSN(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	dsn, err := mysql.ParseDSN(env.DSN)
	require.NoError(t, err)
	run := func(read string) *doctor.Report {
		b := &testBundle{env: env, cfg: load(t, strings.Replace(env.ConfigYAML(""), "mysql:\n", "mysql:\n  read_dsn: \""+read+"\"\n", 1))}
		return b.run(t, doctor.Options{OpenReadStore: func(ctx context.Context) (*store.Store, error) { return node.OpenReadStore(ctx, b.cfg) }})
	}
	requireStatus(t, run(env.DSN), "mysql.read_dsn", doctor.OK, "answers with the task center's schema")

	wrong := *dsn
	wrong.Passwd = "wrong-" + wrong.Passwd
	r := run(wrong.FormatDSN())
	require.False(t, r.OK)
	requireStatus(t, r, "mysql.read_dsn", doctor.Fail, "mysql.read_dsn")
	requireStatus(t, r, "mysql", doctor.OK, "")

	other := *dsn
	other.DBName = "mysql"
	requireStatus(t, run(other.FormatDSN()), "mysql.read_dsn", doctor.Fail, "taskd migrate")
}
