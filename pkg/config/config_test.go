package config_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/task"
)

// writeConfig writes body to a taskd.yaml in a fresh directory.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func load(t *testing.T, body string) (*config.Config, error) {
	t.Helper()
	return config.Load(config.NewViper(), writeConfig(t, body))
}

func requireInvalid(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%v", err)
}

func TestDefaultsWithoutFile(t *testing.T) {
	// t.Chdir: no ./taskd.yaml is picked up from the package directory.
	t.Chdir(t.TempDir())
	if _, err := os.Stat("/etc/taskd/taskd.yaml"); err == nil {
		t.Skip("/etc/taskd/taskd.yaml exists on this host")
	}

	c, err := config.Load(config.NewViper(), "")
	require.NoError(t, err)
	require.Empty(t, c.File)
	require.Equal(t, "root:@tcp(127.0.0.1:3306)/taskd", c.MySQL.DSN)
	require.Equal(t, 32, c.MySQL.MaxOpenConns)
	require.Equal(t, 5*time.Second, c.MySQL.LockWaitTimeout)
	require.Equal(t, "127.0.0.1:6379", c.Redis.Addr)
	require.Equal(t, "task:", c.Redis.Prefix)
	require.Equal(t, 0, c.Redis.DB)
	require.Equal(t, 500, c.Scheduler.BatchSize)
	require.Equal(t, time.Second, c.Scheduler.PollInterval)
	require.Equal(t, 100*time.Millisecond, c.Scheduler.ProbeInterval)
	require.Equal(t, 10, c.Worker.Concurrency)
	require.Equal(t, 30*time.Second, c.Worker.ShutdownGrace)
	require.Equal(t, 5*time.Second, c.Worker.KillGrace)
	require.Equal(t, 30*time.Second, c.Worker.HeartbeatTTL)
	require.Equal(t, 10*time.Second, c.Retry.Base)
	require.Equal(t, time.Hour, c.Retry.Max)
	require.EqualValues(t, task.DefaultMaxPayload, c.Submit.MaxPayload)
	require.Subset(t, c.Node.Roles, []string{"scheduler", "worker"}, "every role by default")
	require.True(t, c.HasRole("scheduler"))
	require.True(t, c.HasRole("worker"))
	require.NotEmpty(t, c.Node.ID, "defaults to the hostname")
	require.Empty(t, c.Handlers)
	require.Empty(t, c.WorkerQueues())

	require.Contains(t, config.Keys(), "mysql.dsn")
	require.Contains(t, config.Keys(), "redis.prefix")
	require.IsIncreasing(t, config.Keys())
}

func TestDefaultFileInWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "taskd.yaml"), []byte("redis:\n  prefix: \"cwd:\"\n"), 0o600))
	t.Chdir(dir)

	c, err := config.Load(config.NewViper(), "")
	require.NoError(t, err)
	require.Equal(t, "taskd.yaml", c.File)
	require.Equal(t, "cwd:", c.Redis.Prefix)
}

func TestFile(t *testing.T) {
	t.Parallel()

	c, err := load(t, `
node: { id: n1, roles: [worker] }
mysql: { dsn: "u:p@tcp(db:3306)/tc" }
redis: { addr: "r:6380", prefix: "x:", db: 2 }
scheduler: { batch_size: 50, poll_interval: 250ms }
worker: { concurrency: 3, shutdown_grace: 1m }
cron: { timezone: Asia/Shanghai }
handlers:
  send_email: { exec: ["php", "artisan", "email:send"] }
  build_report: { http: "http://127.0.0.1:8080/tasks/report", queue: reports }
queues:
  send_email: { concurrency: 8, shards: 4 }
`)
	require.NoError(t, err)
	require.Equal(t, "n1", c.Node.ID)
	require.Equal(t, []string{"worker"}, c.Node.Roles)
	require.False(t, c.HasRole("scheduler"))
	require.Equal(t, "u:p@tcp(db:3306)/tc", c.MySQL.DSN)
	require.Equal(t, "r:6380", c.Redis.Addr)
	require.Equal(t, "x:", c.Redis.Prefix)
	require.Equal(t, 2, c.Redis.DB)
	require.Equal(t, 50, c.Scheduler.BatchSize)
	require.Equal(t, 250*time.Millisecond, c.Scheduler.PollInterval)
	require.Equal(t, time.Minute, c.Worker.ShutdownGrace)
	require.Equal(t, "Asia/Shanghai", c.Cron.Timezone)
	require.Equal(t, []string{"php", "artisan", "email:send"}, c.Handlers["send_email"].Exec)
	require.Equal(t, "http://127.0.0.1:8080/tasks/report", c.Handlers["build_report"].HTTP)
	require.Equal(t, config.QueueConfig{Concurrency: 8, Shards: 4}, c.Queues["send_email"])
	require.Equal(t, "reports", c.QueueFor("build_report"))
	require.Equal(t, "", c.QueueFor("send_email"))
	require.Equal(t, "", c.QueueFor("unknown"))
	// Untouched keys keep their defaults.
	require.Equal(t, 10*time.Second, c.Retry.Base)
}

func TestEnvOverrides(t *testing.T) {
	// t.Setenv: not parallel.
	t.Setenv("TASKD_MYSQL_DSN", "env:secret@tcp(10.0.0.1:3306)/envdb")
	t.Setenv("TASKD_REDIS_PREFIX", "envprefix:")
	t.Setenv("TASKD_SCHEDULER_POLL_INTERVAL", "3s")
	t.Setenv("TASKD_WORKER_CONCURRENCY", "7")

	t.Run("without a file", func(t *testing.T) {
		t.Chdir(t.TempDir())
		c, err := config.Load(config.NewViper(), "")
		require.NoError(t, err)
		require.Equal(t, "env:secret@tcp(10.0.0.1:3306)/envdb", c.MySQL.DSN)
		require.Equal(t, "envprefix:", c.Redis.Prefix)
		require.Equal(t, 3*time.Second, c.Scheduler.PollInterval)
		require.Equal(t, 7, c.Worker.Concurrency)
		require.Equal(t, "127.0.0.1:6379", c.Redis.Addr, "keys without a variable keep their default")
	})

	t.Run("the environment wins over the file", func(t *testing.T) {
		c, err := load(t, "mysql: { dsn: \"file@tcp(f:3306)/f\" }\nredis: { prefix: \"file:\", addr: \"file:6379\" }\n")
		require.NoError(t, err)
		require.Equal(t, "env:secret@tcp(10.0.0.1:3306)/envdb", c.MySQL.DSN)
		require.Equal(t, "envprefix:", c.Redis.Prefix)
		require.Equal(t, "file:6379", c.Redis.Addr, "the file wins over the default")
		// An error about a value names where it came from: an operator
		// who corrects the file learns that the variable overrides it.
		require.Equal(t, "mysql.dsn (from environment variable TASKD_MYSQL_DSN)", c.Named("mysql.dsn"))
		require.Regexp(t, `^redis\.addr \(from .*taskd\.yaml\)$`, c.Named("redis.addr"))
		require.Equal(t, "redis.password (from the defaults)", c.Named("redis.password"))
		require.Equal(t, "mysql.dsn", (&config.Config{}).Named("mysql.dsn"), "a Config Load did not make")
	})

	t.Run("an invalid value from the environment is rejected", func(t *testing.T) {
		t.Setenv("TASKD_SCHEDULER_BATCH_SIZE", "0")
		_, err := config.Load(config.NewViper(), writeConfig(t, ""))
		requireInvalid(t, err)
	})

	// An empty variable sets nothing, whatever its key's type: a compose
	// file's TASKD_WORKER_SHUTDOWN_GRACE=${GRACE}, GRACE unset, leaves the
	// file's value; and an error about the file's value names the file.
	t.Run("an empty variable leaves the file's value", func(t *testing.T) {
		t.Setenv("TASKD_WORKER_SHUTDOWN_GRACE", "")
		t.Setenv("TASKD_REDIS_PASSWORD", "")
		t.Setenv("TASKD_SCHEDULER_BATCH_SIZE", "")
		path := writeConfig(t, "worker: { shutdown_grace: 45s }\nredis: { password: s3cret }\n")
		c, err := config.Load(config.NewViper(), path)
		require.NoError(t, err)
		require.Equal(t, 45*time.Second, c.Worker.ShutdownGrace)
		require.Equal(t, "s3cret", c.Redis.Password)
		zero := writeConfig(t, "scheduler: { batch_size: 0 }\n")
		_, err = config.Load(config.NewViper(), zero)
		requireInvalid(t, err)
		require.Contains(t, err.Error(), "for scheduler.batch_size in "+zero+":", "the file's value, not the empty variable")
	})
}

func TestInvalid(t *testing.T) {
	t.Parallel()

	for name, body := range map[string]string{
		"handler with exec and http":  "handlers:\n  both: { exec: [\"true\"], http: \"http://x/\" }\n",
		"handler with neither":        "handlers:\n  none: { dir: /tmp }\n",
		"handler with exec and pool":  "handlers:\n  both: { exec: [\"true\"], pool: [\"php\", \"w.php\"] }\n",
		"pool keys on an exec":        "handlers:\n  h: { exec: [\"true\"], max_jobs: 5 }\n",
		"pool size too large":         "handlers:\n  h: { pool: [\"php\"], size: 100000 }\n",
		"pool negative max_jobs":      "handlers:\n  h: { pool: [\"php\"], max_jobs: -1 }\n",
		"pool max_memory not a size":  "handlers:\n  h: { pool: [\"php\"], max_memory: lots }\n",
		"handler with bad queue name": "handlers:\n  h: { exec: [\"true\"], queue: \"a b\" }\n",
		"queue with bad name":         "queues:\n  \"a/b\": { concurrency: 1 }\n",
		"negative concurrency":        "queues:\n  q: { concurrency: -1 }\n",
		"negative shards":             "queues:\n  q: { shards: -2 }\n",
		"unknown role":                "node: { roles: [scheduler, janitor] }\n",
		"empty dsn":                   "mysql: { dsn: \"\" }\n",
		"empty redis addr":            "redis: { addr: \"\" }\n",
		"batch size 0":                "scheduler: { batch_size: 0 }\n",
		"batch size too large":        "scheduler: { batch_size: 10001 }\n",
		"negative window bytes":       "scheduler: { window_bytes: -1 }\n",
		"zero poll interval":          "scheduler: { poll_interval: 0s }\n",
		"zero concurrency":            "worker: { concurrency: 0 }\n",
		"retry max below base":        "retry: { base: 1m, max: 30s }\n",
		"unknown time zone":           "cron: { timezone: Mars/Base }\n",
		"not a duration":              "scheduler: { poll_interval: soon }\n",
		"sample ratio above 1":        "tracing: { sample_ratio: 1.5 }\n",
		"tracing endpoint not a URL":  "tracing: { endpoint: \"otel:4318\" }\n",
		"http handler not http":       "handlers:\n  h: { http: \"ftp://files/x\" }\n",
		"http handler without scheme": "handlers:\n  h: { http: \"127.0.0.1:8080/x\" }\n",
		"http handler port too high":  "handlers:\n  h: { http: \"http://127.0.0.1:99999/x\" }\n",
		"http header name with space": "handlers:\n  h: { http: \"http://a/x\", header: { \"X Api Key\": k } }\n",
		"http header value two lines": "handlers:\n  h: { http: \"http://a/x\", header: { Authorization: \"Bearer a\\nb\" } }\n",
		"not YAML":                    "mysql: [unclosed\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, body)
			requireInvalid(t, err)
			require.Nil(t, c)
		})
	}

	t.Run("explicit file that does not exist", func(t *testing.T) {
		t.Parallel()
		_, err := config.Load(config.NewViper(), filepath.Join(t.TempDir(), "missing.yaml"))
		requireInvalid(t, err)
		require.Contains(t, err.Error(), "not found")
	})
}

func TestPoolHandler(t *testing.T) {
	t.Parallel()

	c, err := load(t, `
worker: { concurrency: 6 }
handlers:
  resize_image:
    pool: ["php", "artisan", "taskd:work"]
    size: 4
    max_jobs: 500
    max_memory: 256MB
    idle: 10m
    dir: /var/www/app
    env: ["APP_ENV=production"]
  thumbs: { pool: ["php", "w.php"], queue: media }
  crop: { pool: ["php", "w.php"], queue: media, size: 2 }
  mixed_pool: { pool: ["php", "w.php"], queue: mixed, size: 3 }
  mixed_exec: { exec: ["true"], queue: mixed }
  fixed: { pool: ["php", "w.php"], queue: fixed }
queues:
  fixed: { concurrency: 9 }
`)
	require.NoError(t, err)
	h := c.Handlers["resize_image"]
	require.Equal(t, []string{"php", "artisan", "taskd:work"}, h.Pool)
	require.Equal(t, 4, h.PoolSize())
	require.Equal(t, 500, h.MaxJobs)
	require.Equal(t, 10*time.Minute, h.Idle)
	mem, err := h.MaxMemoryBytes()
	require.NoError(t, err)
	require.Equal(t, int64(256e6), mem)
	require.Equal(t, map[string]int{
		"resize_image": 4 * handler.PoolSlotsPerProcess,                             // slots per process
		"media":        (handler.PoolSizeDefault + 2) * handler.PoolSlotsPerProcess, // two pools share a queue
		"mixed":        3*handler.PoolSlotsPerProcess + 6,                           // a pool and an exec handler
		"fixed":        9,                                                           // configured: tasks wait for a process
	}, c.WorkerQueues())
}

// A pool's stdout is its answers unless it is output; the option is a
// pool's alone, and a typo of its value names both values.
func TestPoolStdout(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
handlers:
  resize_image: { pool: ["php", "artisan", "taskd:work"], stdout: output }
  thumbs: { pool: ["php", "w.php"] }
`)
	require.NoError(t, err)
	require.Equal(t, config.StdoutOutput, c.Handlers["resize_image"].Stdout)
	require.Empty(t, c.Handlers["thumbs"].Stdout)
	for body, want := range map[string]string{
		`{ pool: ["php", "w.php"], stdout: outptu }`: `stdout "outptu" is neither "protocol" (its answers, the default) nor "output"`,
		`{ exec: ["php", "w.php"], stdout: output }`: "size, max_jobs, max_memory, idle, start_timeout and stdout apply to pool handlers only",
	} {
		_, err := load(t, "handlers:\n  resize_image: "+body+"\n")
		require.ErrorContains(t, err, want, body)
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"": 0, "1048576": 1 << 20, "256MB": 256e6, "256 MB": 256e6, "1GiB": 1 << 30, "512M": 512 << 20, "2k": 2048, "10kb": 1e4,
	} {
		got, err := config.ParseBytes(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"lots", "-5MB", "5TB", "MB", "1.5GB"} {
		_, err := config.ParseBytes(in)
		require.Error(t, err, in)
	}
}

func TestWorkerQueues(t *testing.T) {
	t.Parallel()

	c, err := load(t, `
worker: { concurrency: 6 }
handlers:
  send_email: { exec: ["true"] }
  build_report: { http: "http://127.0.0.1/r", queue: reports }
  resize: { exec: ["true"], queue: media }
queues:
  send_email: { concurrency: 8, shards: 4 }
  media: { shards: 2 }
  spare: { concurrency: 2 }
`)
	require.NoError(t, err)
	require.Equal(t, map[string]int{
		"send_email": 8, // handler code with a configured queue
		"reports":    6, // handler's own queue, default concurrency
		"media":      6, // configured without concurrency: the default
		"spare":      2, // configured queue without a handler
	}, c.WorkerQueues())
}

// viper lowercases every key, map keys included, so handlers and queues
// configured for codes with capital letters are registered under another
// code. task.ValidateName accepts capitals, so such codes are legal.
func TestHandlerCodeCaseIsKept(t *testing.T) {
	t.Parallel()

	c, err := load(t, "handlers:\n  SendEmail: { exec: [\"true\"] }\nqueues:\n  BulkMail: { concurrency: 2 }\n")
	require.NoError(t, err)
	require.Contains(t, c.Handlers, "SendEmail")
	require.Contains(t, c.WorkerQueues(), "SendEmail")
	require.Contains(t, c.WorkerQueues(), "BulkMail")
}

// Two handlers or queues whose names differ only in case are one key to
// the configuration: refused, naming both, never one silently dropped and
// its settings in force under the other's name.
func TestNamesDifferingOnlyInCaseRefused(t *testing.T) {
	t.Parallel()
	_, err := load(t, "handlers:\n  SendEmail: { exec: [\"echo\", \"A\"] }\n  sendemail: { exec: [\"echo\", \"B\"] }\n")
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%v", err)
	require.ErrorContains(t, err, "handlers.SendEmail and handlers.sendemail in ")
	require.ErrorContains(t, err, "differ only in case")
	_, err = load(t, "queues:\n  Bulk: { concurrency: 2 }\n  BULK: { concurrency: 3 }\n")
	require.ErrorContains(t, err, "queues.BULK and queues.Bulk in ")
}

// A misspelt key is an error naming the key, its file and the nearest
// known key, never a default silently in force (FAULTS.md row 28).
func TestUnknownKeys(t *testing.T) {
	t.Parallel()

	for name, tc := range map[string]struct{ body, want string }{
		"misspelt leaf":          {"mysql: { dns: \"u:p@tcp(db:3306)/x\" }\n", `unknown key "mysql.dns" in %s (did you mean "mysql.dsn"?)`},
		"misspelt section":       {"workr: { concurrency: 4 }\n", `unknown key "workr" in %s (did you mean "worker"?)`},
		"capitalised typo":       {"Redis: { Adr: \"r:6379\" }\n", `unknown key "redis.adr" in %s (did you mean "redis.addr"?)`},
		"handler field":          {"handlers:\n  mail: { exce: [\"true\"] }\n", `unknown key "handlers.mail.exce" in %s (did you mean "handlers.mail.exec"?)`},
		"queue field":            {"queues:\n  mail: { shard: 2 }\n", `unknown key "queues.mail.shard" in %s (did you mean "queues.mail.shards"?)`},
		"another driver's key":   {"mysql: { host: db1, user: taskd }\n", `unknown key "mysql.host" in %s (mysql.dsn holds it: "user:password@tcp(host:3306)/taskd")`},
		"another tool's key":     {"redis: { url: \"redis://r1:6379\" }\n", `unknown key "redis.url" in %s (redis.addr holds it: "host:6379", with redis.password and redis.db)`},
		"another tool's section": {"database: { dsn: x }\n", `unknown key "database" in %s (did you mean "mysql"?)`},
		"handler's other name":   {"handlers:\n  mail: { command: [\"true\"] }\n", `unknown key "handlers.mail.command" in %s (did you mean "handlers.mail.exec"?)`},
		"queue's key in handler": {"handlers:\n  mail: { exec: [\"true\"], queue: email, concurrency: 4 }\n", `unknown key "handlers.mail.concurrency" in %s (slots are a queue's: queues.email.concurrency)`},
		"task's key in handler":  {"handlers:\n  mail: { exec: [\"true\"], retries: 5 }\n", `unknown key "handlers.mail.retries" in %s (retries are a task's: --max-retry of taskd submit and cron add, 3 by default)`},
		"queue's other name":     {"queues:\n  mail: { workers: 3 }\n", `unknown key "queues.mail.workers" in %s (did you mean "queues.mail.concurrency"?)`},
		"handler's key in queue": {"queues:\n  mail: { timeout: 3s }\n", `unknown key "queues.mail.timeout" in %s (timeouts are a handler's: handlers.mail.timeout)`},
		"nothing near":           {"frobnicate: 1\n", `unknown key "frobnicate" in %s`},
		"too deep":               {"mysql: { dsn: { host: db } }\n", `bad value`},
		"leaf under a value key": {"log: { level: { debug: true } }\n", `bad value`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.body)
			c, err := config.Load(config.NewViper(), path)
			requireInvalid(t, err)
			require.Nil(t, c)
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, path)
			}
			require.Contains(t, err.Error(), want)
			if name == "nothing near" {
				require.NotContains(t, err.Error(), "did you mean")
			}
		})
	}
}

func TestBrokenYAML(t *testing.T) {
	t.Parallel()

	for name, tc := range map[string]struct{ body, want string }{
		"tab indent":    {"mysql:\n  dsn: \"root:@tcp(127.0.0.1:3306)/taskd\"\nredis:\n\taddr: 127.0.0.1:6379\n", "yaml: line 4: found character that cannot start any token (line 4 is indented with a tab: YAML indents with spaces)"},
		"open quote":    {"mysql:\n  dsn: \"root:@tcp(127.0.0.1:3306)/taskd\nredis:\n  addr: 127.0.0.1:6379\n", "(line 2 opens a quote it does not close)"},
		"open bracket":  {"mysql:\n  dsn: root\n  bad: [1, 2\n", "yaml: line 2: did not find expected ',' or ']'"},
		"apostrophe ok": {"log:\n  level: info # it's\n  x: [1\n", "yaml: line"},
		// The quote runs on to the next one, and the parser names the
		// mapping it was in, not the line that opened it.
		"quote opened below":  {openQuoteBelow, "yaml: line 16: did not find expected key (line 23 opens a quote it does not close)"},
		"open quote first":    {"dsn: \"x\nredis: 1\nb: \"y\"\n", "yaml: line 2: did not find expected key (line 1 opens a quote it does not close)"},
		"section out of line": {"mysql:\n  dsn: \"root:@tcp(127.0.0.1:3306)/taskd\"\n redis:\n  addr: x\n", "yaml: line 2: did not find expected key (line 3 is indented 1 space, as no line before it is: align it with its neighbours)"},
		"key out of line":     {"worker:\n  concurrency: 10\n   shutdown_grace: 30s\n", "yaml: line 3: mapping values are not allowed in this context (line 3 is indented 3 spaces"},
		"quoted over lines":   {"handlers:\n  x:\n    dir: \"/var/www\n      /app\"\n    exec: [\"true\"]\n    bad: [1, 2\n", "yaml: line"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.body)
			_, err := config.Load(config.NewViper(), path)
			requireInvalid(t, err)
			require.Contains(t, err.Error(), "config file "+path+": "+"yaml: line")
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "While parsing")
			if name == "open bracket" || name == "apostrophe ok" || name == "quoted over lines" {
				require.NotContains(t, err.Error(), "(line", "no hint where the line shows no tab or open quote")
			}
		})
	}
}

// openQuoteBelow is a file whose quote opened on line 23 is closed by
// the one that opens on line 26, as a user's was.
const openQuoteBelow = `node:
  roles: [scheduler, worker]

mysql:
  dsn: "root:@tcp(127.0.0.1:3306)/taskd"

redis:
  addr: "127.0.0.1:6379"
  prefix: "task:"

worker:
  concurrency: 4

handlers:
  artisan:
    # Laravel's scheduler, every minute
    queue: default
    env: ["APP_ENV=production"]
    timeout: 10m
    dir: /var/www/app
    permanent_exit_codes: [65]
    # the closing quote is missing
    command: "php artisan
    queue: default
  report:
    http: "http://127.0.0.1:8080/report"
`

func TestUnknownVariable(t *testing.T) {
	// t.Setenv: not parallel.
	t.Setenv("TASKD_MYSQL_DNS", "u:p@tcp(db:3306)/x")
	_, err := config.Load(config.NewViper(), writeConfig(t, ""))
	requireInvalid(t, err)
	require.Equal(t, "unknown variable TASKD_MYSQL_DNS in the environment (did you mean \"TASKD_MYSQL_DSN\"?)", err.Error())

	os.Unsetenv("TASKD_MYSQL_DNS")
	t.Setenv("TASKD_MYSQL_HOST", "db1") // another driver's setting
	_, err = config.Load(config.NewViper(), writeConfig(t, ""))
	require.Equal(t, `unknown variable TASKD_MYSQL_HOST in the environment (TASKD_MYSQL_DSN holds it: "user:password@tcp(host:3306)/taskd")`, err.Error())

	os.Unsetenv("TASKD_MYSQL_HOST")
	t.Setenv("TASKD_TEST_ANYTHING", "x") // the test suite's own
	// What `taskd lock` gives its command, which may run taskd.
	t.Setenv(config.EnvLockName, "job")
	t.Setenv(config.EnvLockToken, "1796115728043939")
	_, err = config.Load(config.NewViper(), writeConfig(t, ""))
	require.NoError(t, err)
}

// A size is a number of bytes, or a number with a unit, in a file and in
// the environment.
func TestSizes(t *testing.T) {
	c, err := load(t, "submit: { max_payload: 2MiB }\nworker: { output_limit: 64KB }\nscheduler: { window_bytes: 1048576 }\n")
	require.NoError(t, err)
	require.EqualValues(t, 2<<20, c.Submit.MaxPayload)
	require.EqualValues(t, 64_000, c.Worker.OutputLimit)
	require.EqualValues(t, 1<<20, c.Scheduler.WindowBytes)

	t.Setenv("TASKD_SCHEDULER_WINDOW_BYTES", "8M")
	c, err = config.Load(config.NewViper(), writeConfig(t, ""))
	require.NoError(t, err)
	require.EqualValues(t, 8<<20, c.Scheduler.WindowBytes)
}

// A bad value names the value, the key and where it came from; a
// password never appears.
func TestBadValues(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		for body, want := range map[string]string{
			"worker: { shutdown_grace: soon }\n":                                                         `bad value "soon" for worker.shutdown_grace in %s: want a duration`,
			"retention: { task_age: 7d }\n":                                                              `bad value "7d" for retention.task_age in %s: want a duration such as 500ms, 30s or 5m; there is no d: 7d is 168h`,
			"worker: { concurrency: many }\n":                                                            `bad value "many" for worker.concurrency in %s: want a whole number`,
			"worker: { concurrency: 0 }\n":                                                               `bad value 0 for worker.concurrency in %s: want a positive number`,
			"scheduler: { batch_size: 20000 }\n":                                                         `bad value 20000 for scheduler.batch_size in %s: want 1 to 10000`,
			"scheduler: { poll_interval: 100 }\n":                                                        `bad value 100 for scheduler.poll_interval in %s: want a duration with its unit, such as 100ms, 30s or 5m (a bare number is nanoseconds)`,
			"scheduler: { probe_interval: \"250\" }\n":                                                   `bad value "250" for scheduler.probe_interval in %s: want a duration with its unit`,
			"scheduler: { probe_interval: -1s }\n":                                                       `bad value "-1s" for scheduler.probe_interval in %s: want 0s (off) or a duration`,
			"queues:\n  mail: { shards: -1 }\n":                                                          `bad value -1 for queues.mail.shards in %s`,
			"queues:\n  mail: { concurrency: 0 }\n":                                                      "bad value 0 for queues.mail.concurrency in %s: want 1 or more slots: leave the key out for the default (worker.concurrency, or 4 per process of its pool handlers); `taskd pause QUEUE` stops a queue on every node",
			"handlers:\n  x: { pool: [\"php\"], size: 0 }\n":                                             `bad value 0 for handlers.x.size in %s: want 1 or more processes: leave the key out for the default (4)`,
			"queues:\n  mail: { shards: two }\n":                                                         `bad value "two" for queues.mail.shards in %s: want a whole number`,
			"cron: { timezone: Mars/Base }\n":                                                            `bad value "Mars/Base" for cron.timezone in %s: want an IANA time zone such as Asia/Shanghai`,
			"mysql:\n  dsn:\"root:s3cret@tcp(db:3306)/tc\"\n":                                            `bad value for mysql in %s: "dsn:" has no space after its colon, so YAML reads the line as one string: write dsn: "root:***@tcp(db:3306)/tc"`,
			"redis:\n  password:s3cret\n":                                                                `bad value for redis in %s: "password:" has no space after its colon, so YAML reads the line as one string: write password: (hidden)`,
			"handlers:\n  x:\n    exec:[\"true\"]\n":                                                     `bad value for handlers.x in %s: "exec:" has no space after its colon, so YAML reads the line as one string: write exec: "[\"true\"]"`,
			"handlers:\n  alpha:\n  timeout: 5s\n":                                                       `bad value "5s" for handlers.timeout in %s: want a map of settings (timeout is a setting: indent it under the name it belongs to)`,
			"handlers:\n  hello:\n    http: \"http://a/b\"\n  timeout: 5s\n":                             `bad value "5s" for handlers.timeout in %s: want a map of settings (timeout is a setting: indent it under the name it belongs to)`,
			"cron: { timezone: asia/shanghai }\n":                                                        `bad value "asia/shanghai" for cron.timezone in %s: want an IANA time zone (did you mean "Asia/Shanghai"?)`,
			"mysql: { dsn: \"root:s3cret@tcp(db:3306\" }\n":                                              `bad value "root:***@tcp(db:3306" for mysql.dsn in %s`,
			"mysql: { dsn: \"root:s3c@ret@tcp(db:3306\" }\n":                                             `bad value "root:***@tcp(db:3306" for mysql.dsn in %s`,
			"mysql: { dsn: \"root:s3cret/tc\" }\n":                                                       `bad value "root:***/tc" for mysql.dsn in %s`,
			"mysql: { dsn: \"root:s3crettcp(db:3306)/tc\" }\n":                                           `bad value "root:***(db:3306)/tc" for mysql.dsn in %s`,
			"handlers:\n  x: { http: \"http://a/b\", header: { Authorization: [\"Bearer s3cret\"] } }\n": `bad value (hidden) for handlers.x.header in %s: want a map of names to strings`,
			"mysql: { read_dsn: \"root:s3cret@tcp(db:3306\" }\n":                                         `bad value "root:***@tcp(db:3306" for mysql.read_dsn in %s`,
			"alerts: { slack_url: \"ftp://hooks/s3cret\" }\n":                                            `bad value (hidden) for alerts.slack_url in %s`,
			"worker: { heartbeat_ttl: 1s, heartbeat_interval: 5s }\n":                                    `bad value "1s" for worker.heartbeat_ttl in %s: want longer than worker.heartbeat_interval (5s)`,
			"worker: { heartbeat_interval: 0s }\n":                                                       `bad value "0s" for worker.heartbeat_interval in %s: want a positive duration`,
			"worker: { shutdown_grace: 0s }\n":                                                           `bad value "0s" for worker.shutdown_grace in %s: want a positive duration`,
			"worker: { running_mark_delay: -1s }\n":                                                      `bad value "-1s" for worker.running_mark_delay in %s: want a positive duration`,
			"recovery: { running_grace: 0s }\n":                                                          `bad value "0s" for recovery.running_grace in %s: want a positive duration`,
			"mysql: { lock_wait_timeout: 1500ms }\n":                                                     `bad value "1.5s" for mysql.lock_wait_timeout in %s: want whole seconds, 1s or more (InnoDB waits whole seconds)`,
			"mysql: { lock_wait_timeout: 0s }\n":                                                         `bad value "0s" for mysql.lock_wait_timeout in %s: want whole seconds, 1s or more (InnoDB waits whole seconds)`,
			"alerts: { cooldown: 0s }\n":                                                                 `bad value "0s" for alerts.cooldown in %s: want a positive duration`,
			"worker: { kill_grace: 60s }\nhandlers:\n  x: { exec: [\"true\"] }\n":                        `bad value "1m0s" for worker.kill_grace in %s: want shorter than watchdog.grace (30s), which a process past its timeout must stop within`,
			"worker: { kill_grace: 15s }\nhandlers:\n  x: { pool: [\"php\"] }\n":                         `bad value "15s" for worker.kill_grace in %s: want shorter than worker.hand_back_wait (10s)`,
			"handlers:\n  x: { exec: \"echo hi\" }\n":                                                    `bad value "echo hi" for handlers.x.exec in %s: want a list of argv strings, e.g. ["sh", "-c", "echo hi"]`,
			"handlers:\n  x: { pool: \"php artisan taskd:work\" }\n":                                     `bad value "php artisan taskd:work" for handlers.x.pool in %s: want a list of argv strings`,
			"handlers:\n  x: { exec: [\"true\"], env: \"A=1,B=2\" }\n":                                   `bad value "A=1,B=2" for handlers.x.env in %s: want a list of NAME=value strings`,
			"handlers:\n  x: { exec: [\"true\"], permanent_exit_codes: 65 }\n":                           `bad value 65 for handlers.x.permanent_exit_codes in %s: want a list of exit statuses, e.g. [65, 78]`,
			"log: { level: verbose }\n":                                                                  `bad value "verbose" for log.level in %s: want debug, info, warn or error`,
			"log: { format: pretty }\n":                                                                  `bad value "pretty" for log.format in %s: want auto, json or text`,
			"submit: { max_payload: 1 meg }\n":                                                           `bad value "1 meg" for submit.max_payload in %s: want a size such as 1048576, 64KiB or 32MiB`,
			"scheduler: { window_bytes: -1 }\n":                                                          `bad value -1 for scheduler.window_bytes in %s: want 0 (no bound) or a number of bytes`,
			"redis: { prefix: \"\" }\n":                                                                  `bad value "" for redis.prefix in %s: want a key prefix such as task:`,
			"redis: { addr: \"localhost:6379x\" }\n":                                                     `bad value "localhost:6379x" for redis.addr in %s: want host:port, such as 127.0.0.1:6379`,
			"redis: { addrs: [\"a:1\", \"b\"] }\n":                                                       `bad value "b" for redis.addrs in %s: want a list of host:port`,
			"redis: { addr: \"a:1,b\" }\n":                                                               `bad value "a:1,b" for redis.addr in %s: want host:port`,
			"node: { roles: [] }\n":                                                                      `bad value "" for node.roles in %s: want some of scheduler, worker`,
			"alerts: { success_rate_threshold: 99 }\n":                                                   `bad value 99 for alerts.success_rate_threshold in %s: want a share of attempts in [0, 1] (0.99 for 99%%)`,
		} {
			path := writeConfig(t, body)
			_, err := config.Load(config.NewViper(), path)
			requireInvalid(t, err)
			require.Contains(t, err.Error(), fmt.Sprintf(want, path), body)
			require.NotContains(t, err.Error(), "s3cret")
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("TASKD_WORKER_SHUTDOWN_GRACE", "30")
		_, err := config.Load(config.NewViper(), writeConfig(t, "worker: { shutdown_grace: 10s }\n"))
		requireInvalid(t, err)
		require.Contains(t, err.Error(), `bad value "30" for worker.shutdown_grace in environment variable TASKD_WORKER_SHUTDOWN_GRACE: want a duration`)

		os.Unsetenv("TASKD_WORKER_SHUTDOWN_GRACE")
		t.Setenv("TASKD_SCHEDULER_BATCH_SIZE", "0")
		_, err = config.Load(config.NewViper(), writeConfig(t, ""))
		requireInvalid(t, err)
		require.Contains(t, err.Error(), "bad value 0 for scheduler.batch_size in environment variable TASKD_SCHEDULER_BATCH_SIZE")
	})
}

// A configuration file is YAML whatever its name: Supervisor and systemd
// units often name it after the node, with no extension.
func TestFileOfAnyName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"node-a", "taskd.conf", "taskd.yml"} {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(path, []byte("worker: { concurrency: 7 }\n"), 0o600))
		c, err := config.Load(config.NewViper(), path)
		require.NoError(t, err, name)
		require.Equal(t, 7, c.Worker.Concurrency, name)
	}
	_, err := config.Load(config.NewViper(), filepath.Join(t.TempDir(), "missing"))
	requireInvalid(t, err)
	require.Contains(t, err.Error(), "not found")
	_, err = config.Load(config.NewViper(), t.TempDir())
	requireInvalid(t, err)
	require.Contains(t, err.Error(), "is a directory")
}

func TestRedisAddressesAccepted(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		"redis: { addr: \"10.0.0.1:7000, 10.0.0.2:7000\" }\n",
		"redis: { addr: \":6379\" }\n",
		"redis: { addr: \"[::1]:6379\" }\n",
		"redis: { addrs: [\"s1:26379\", \"s2:26379\"], master_name: mymaster }\n",
	} {
		_, err := load(t, body)
		require.NoError(t, err, body)
	}
}

// FileSecrets names the keys whose credential the file itself holds, for
// taskd doctor to warn when others may read it; one from the environment
// is not the file's.
func TestFileSecrets(t *testing.T) {
	c, err := load(t, "mysql: { dsn: \"u:s3cret@tcp(db:3306)/tc\", read_dsn: \"u:@tcp(replica:3306)/tc\" }\n"+
		"Redis: { Password: s3cret }\nalerts: { slack_url: \"https://hooks/s3cret\" }\n"+
		"handlers:\n  web: { http: \"http://app/x\", header: { X-Api-Key: s3cret } }\n  plain: { http: \"http://app/y\" }\n")
	require.NoError(t, err)
	require.Equal(t, []string{"mysql.dsn", "redis.password", "alerts.slack_url", "handlers.web.header"}, c.FileSecrets)

	t.Setenv("TASKD_REDIS_PASSWORD", "s3cret")
	c, err = load(t, "mysql: { dsn: \"u:@tcp(db:3306)/tc\" }\n")
	require.NoError(t, err)
	require.Empty(t, c.FileSecrets)
}

// permanent_exit_codes: exit statuses that fail, on exec handlers only.
func TestPermanentExitCodes(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		"handlers:\n  x: { pool: [\"true\"], permanent_exit_codes: [65] }\n":     "config handlers.x: permanent_exit_codes applies to exec handlers only",
		"handlers:\n  x: { http: \"http://a/b\", permanent_exit_codes: [65] }\n": "config handlers.x: permanent_exit_codes applies to exec handlers only",
		"handlers:\n  x: { exec: [\"true\"], permanent_exit_codes: [0] }\n":      "config handlers.x: permanent_exit_codes: 0 is not an exit status that fails (1-255)",
		"handlers:\n  x: { exec: [\"true\"], permanent_exit_codes: [256] }\n":    "config handlers.x: permanent_exit_codes: 256 is not an exit status that fails (1-255)",
	} {
		_, err := config.Load(config.NewViper(), writeConfig(t, body))
		requireInvalid(t, err)
		require.ErrorContains(t, err, want, body)
	}
	c, err := config.Load(config.NewViper(), writeConfig(t, "handlers:\n  x: { exec: [\"true\"], permanent_exit_codes: [65, 78] }\n"))
	require.NoError(t, err)
	require.Equal(t, []int{65, 78}, c.Handlers["x"].PermanentExitCodes)
}

// TASKD_CONFIG names the file when --config does not, and must exist.
func TestConfigFileFromTheEnvironment(t *testing.T) {
	named := filepath.Join(t.TempDir(), "node-a")
	require.NoError(t, os.WriteFile(named, []byte("worker: { concurrency: 7 }\n"), 0o600))
	given := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(given, []byte("worker: { concurrency: 9 }\n"), 0o600))
	t.Setenv(config.EnvConfig, named)

	c, err := config.Load(config.NewViper(), "")
	require.NoError(t, err)
	require.Equal(t, 7, c.Worker.Concurrency)
	require.Equal(t, named, c.File)

	c, err = config.Load(config.NewViper(), given)
	require.NoError(t, err)
	require.Equal(t, 9, c.Worker.Concurrency, "--config wins")

	t.Setenv(config.EnvConfig, filepath.Join(t.TempDir(), "missing"))
	_, err = config.Load(config.NewViper(), "")
	requireInvalid(t, err)
	require.ErrorContains(t, err, "missing (named by TASKD_CONFIG) not found")
}

// An http handler's header or port that net/http would refuse on every
// request is refused at start, in one line that does not quote the
// header's value (a credential).
func TestHTTPHandlerRefusedAtStart(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		"handlers:\n  x: { http: \"http://a/b\", header: { Authorization: \"Bearer s3cret\\r\\nX: y\" } }\n": `config handlers.x: header "Authorization": its value holds a line break or another control character`,
		"handlers:\n  x: { http: \"http://a/b\", header: { \"X Api Key\": s3cret } }\n":                      `config handlers.x: header "X Api Key": not a valid header name`,
		"handlers:\n  x: { http: \"http://a:80800/b\" }\n":                                                   `config handlers.x: http "http://a:80800/b": port 80800 is not 1-65535`,
	} {
		_, err := load(t, body)
		requireInvalid(t, err)
		require.EqualError(t, err, want)
		require.NotContains(t, err.Error(), "s3cret")
	}
}

// handlers.CODE.timeout: a duration, not negative.
func TestHandlerTimeout(t *testing.T) {
	t.Parallel()
	c, err := load(t, "handlers:\n  x: { http: \"http://a/b\", timeout: 30s }\n")
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, c.Handlers["x"].Timeout)
	_, err = load(t, "handlers:\n  x: { http: \"http://a/b\", timeout: -1s }\n")
	requireInvalid(t, err)
	require.ErrorContains(t, err, "config handlers.x: timeout -1s is negative")
}

// A section whose keys are all commented out is YAML null: the same as
// the section left out, its defaults in force, not an unknown key.
func TestEmptySectionIsItsDefaults(t *testing.T) {
	t.Parallel()
	def := config.Default()

	c, err := load(t, "alerts:\n#  interval: 1m\nsubmit:\ntasktop:\n  serve:\nworker:\n  concurrency: 3\nhandlers:\nqueues:\n")
	require.NoError(t, err)
	require.Equal(t, def.Alerts, c.Alerts)
	require.Equal(t, def.Submit, c.Submit)
	require.Equal(t, def.Tasktop, c.Tasktop)
	require.Equal(t, 3, c.Worker.Concurrency)
	require.Empty(t, c.Handlers)

	// The example file with the keys of a section commented out.
	example, err := os.ReadFile("../../config/taskd.yaml")
	require.NoError(t, err)
	require.Contains(t, string(example), "\nsubmit:\n  max_payload:")
	c, err = load(t, strings.Replace(string(example), "\nsubmit:\n  max_payload:", "\nsubmit:\n#  max_payload:", 1))
	require.NoError(t, err)
	require.Equal(t, def.Submit, c.Submit)

	// A section given a value is not an unknown key either.
	path := writeConfig(t, "alerts: 5\n")
	_, err = config.Load(config.NewViper(), path)
	requireInvalid(t, err)
	require.EqualError(t, err, "bad value 5 for alerts in "+path+": want a map of the section's keys")
}

// metrics.addr is refused with the other values, exit 2, not by the
// listener once `taskd run` has started (exit 1, restarted for ever).
func TestMetricsAddr(t *testing.T) {
	for _, addr := range []string{"", ":9464", "127.0.0.1:9464", "[::1]:9464", "localhost:9464", "127.0.0.1:0"} {
		c, err := load(t, fmt.Sprintf("metrics: { addr: %q }\n", addr))
		require.NoError(t, err, addr)
		require.Equal(t, addr, c.Metrics.Addr)
	}
	for _, addr := range []string{"9472", "localhost", "localhost:", ":http", ":65536", ":-1", "a:b:9464"} {
		path := writeConfig(t, fmt.Sprintf("metrics: { addr: %q }\n", addr))
		_, err := config.Load(config.NewViper(), path)
		requireInvalid(t, err)
		require.EqualError(t, err, fmt.Sprintf("bad value %q for metrics.addr in %s: want host:port to listen on, such as :9464 or 127.0.0.1:9464 (empty: no listener)", addr, path))
	}

	t.Setenv("TASKD_METRICS_ADDR", "9472")
	_, err := config.Load(config.NewViper(), writeConfig(t, ""))
	requireInvalid(t, err)
	require.EqualError(t, err, `bad value "9472" for metrics.addr in environment variable TASKD_METRICS_ADDR: want host:port to listen on, such as :9464 or 127.0.0.1:9464 (empty: no listener)`)
}

// A number with a point where a whole number is expected is refused, not
// cut (concurrency 10.5 ran 10 slots): every integer key, 10.0 too, in
// the file and the environment alike.
func TestWholeNumbers(t *testing.T) {
	for body, want := range map[string]string{
		"worker: { concurrency: 10.5 }\n":                                      `bad value 10.5 for worker.concurrency in %s: want a whole number`,
		"worker: { concurrency: 10.0 }\n":                                      `bad value 10.0 for worker.concurrency in %s: want a whole number`,
		"scheduler: { batch_size: 1e3 }\n":                                     `bad value 1000.0 for scheduler.batch_size in %s: want a whole number`,
		"mysql: { max_open_conns: 8.5 }\n":                                     `bad value 8.5 for mysql.max_open_conns in %s: want a whole number`,
		"alerts: { backlog_threshold: 99.9 }\n":                                `bad value 99.9 for alerts.backlog_threshold in %s: want a whole number`,
		"submit: { max_payload: 1.5 }\n":                                       `bad value 1.5 for submit.max_payload in %s: want a size`,
		"handlers:\n  x: { pool: [php], size: 2.5 }\n":                         `bad value 2.5 for handlers.x.size in %s: want a whole number`,
		"handlers:\n  x: { exec: [\"true\"], permanent_exit_codes: [65.5] }\n": `bad value [65.5] for handlers.x.permanent_exit_codes in %s: want a list`,
		"queues:\n  q: { burst: 1.5 }\n":                                       `bad value 1.5 for queues.q.burst in %s: want a whole number`,
	} {
		path := writeConfig(t, body)
		_, err := config.Load(config.NewViper(), path)
		requireInvalid(t, err)
		require.ErrorContains(t, err, fmt.Sprintf(want, path), body)
	}

	// A number key still takes a whole number and a fraction.
	c, err := load(t, "tracing: { sample_ratio: 0.5 }\nalerts: { success_rate_threshold: 1 }\n")
	require.NoError(t, err)
	require.Equal(t, 0.5, c.Tracing.SampleRatio)
	require.Equal(t, 1.0, c.Alerts.SuccessRateThreshold)

	t.Setenv("TASKD_WORKER_CONCURRENCY", "12")
	c, err = config.Load(config.NewViper(), writeConfig(t, ""))
	require.NoError(t, err)
	require.Equal(t, 12, c.Worker.Concurrency)
	for _, v := range []string{"10.5", "10.0"} {
		t.Setenv("TASKD_WORKER_CONCURRENCY", v)
		_, err = config.Load(config.NewViper(), writeConfig(t, ""))
		requireInvalid(t, err)
		require.EqualError(t, err, fmt.Sprintf("bad value %q for worker.concurrency in environment variable TASKD_WORKER_CONCURRENCY: want a whole number", v))
	}
}

// worker.kill_grace is held against the waits that must outlast it only
// where a handler runs processes: a node of Go or http handlers alone
// never sends SIGTERM.
func TestKillGraceOnlyWhereProcessesRun(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.NewViper(), writeConfig(t, "worker: { kill_grace: 60s }\nhandlers:\n  x: { http: \"http://a/b\" }\n"))
	require.NoError(t, err)
	require.Equal(t, time.Minute, c.Worker.KillGrace)
	c, err = config.Load(config.NewViper(), writeConfig(t, "watchdog: { grace: 2m }\nworker: { kill_grace: 60s, hand_back_wait: 90s }\nhandlers:\n  x: { exec: [\"true\"] }\n"))
	require.NoError(t, err, "both raised with it")
	require.Equal(t, time.Minute, c.Worker.KillGrace)
}

// Task codes and queue names may hold dots (and capitals), as PHP teams
// name them: each is one handler and one queue, not a section of
// another, and keeps its case.
func TestDottedNames(t *testing.T) {
	t.Parallel()
	c, err := load(t, "handlers:\n  orders.Sync: { exec: [\"true\"], queue: emails.high }\n"+
		"queues:\n  emails.high: { concurrency: 3, serial: true }\n")
	require.NoError(t, err)
	require.Equal(t, []string{"orders.Sync"}, slices.Collect(maps.Keys(c.Handlers)))
	require.Equal(t, "emails.high", c.Handlers["orders.Sync"].Queue)
	require.Equal(t, []string{"emails.high"}, slices.Collect(maps.Keys(c.Queues)))
	require.Equal(t, 3, c.Queues["emails.high"].Concurrency)
	require.True(t, c.Queues["emails.high"].Serial)
	require.Equal(t, "emails.high", c.QueueFor("orders.Sync"))
}
