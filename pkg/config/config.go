// Package config loads taskd's configuration: one YAML file (--config, else
// ./taskd.yaml, else /etc/taskd/taskd.yaml), every key overridable by a
// TASKD_* environment variable (mysql.dsn -> TASKD_MYSQL_DSN) and by flags.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/retention"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/sshserve"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/watchdog"
	"github.com/taskd/taskd/pkg/worker"
)

// Config is the whole configuration. Field tags are the YAML keys.
type Config struct {
	Node      NodeConfig             `mapstructure:"node"`
	MySQL     MySQLConfig            `mapstructure:"mysql"`
	Redis     RedisConfig            `mapstructure:"redis"`
	Scheduler SchedulerConfig        `mapstructure:"scheduler"`
	Worker    WorkerConfig           `mapstructure:"worker"`
	Retry     RetryConfig            `mapstructure:"retry"`
	Recovery  RecoveryConfig         `mapstructure:"recovery"`
	Retention RetentionConfig        `mapstructure:"retention"`
	Submit    SubmitConfig           `mapstructure:"submit"`
	Cron      CronConfig             `mapstructure:"cron"`
	Log       LogConfig              `mapstructure:"log"`
	Metrics   MetricsConfig          `mapstructure:"metrics"`
	Watchdog  WatchdogConfig         `mapstructure:"watchdog"`
	Alerts    AlertsConfig           `mapstructure:"alerts"`
	Tracing   TracingConfig          `mapstructure:"tracing"`
	Tasktop   TasktopConfig          `mapstructure:"tasktop"`
	Handlers  map[string]HandlerSpec `mapstructure:"handlers"`
	Queues    map[string]QueueConfig `mapstructure:"queues"`

	// File is the configuration file that was read ("" when none).
	File string `mapstructure:"-"`
	// FileSecrets are the keys whose credential File itself holds
	// (mysql.dsn with a password, redis.password, ...), for taskd doctor
	// to warn when others may read it.
	FileSecrets []string `mapstructure:"-"`
	// source says where a key's value came from (Named); nil in a Config
	// that Load did not make.
	source func(key string) string
}

// Named names key for an error about its value, with where the value came
// from: "mysql.dsn (from environment variable TASKD_MYSQL_DSN)". An
// operator who corrected the file learns that a TASKD_* variable (a
// Supervisor environment=, a systemd unit) or a flag overrides it.
func (c *Config) Named(key string) string {
	if c.source == nil {
		return key
	}
	return key + " (from " + c.source(key) + ")"
}

// NodeConfig identifies this process.
type NodeConfig struct {
	// ID names the node in logs, heartbeats and task_run (default: hostname).
	ID string `mapstructure:"id"`
	// Roles run by `taskd run`: scheduler, worker, recovery, retention
	// (default all; retention runs on one node at a time).
	Roles []string `mapstructure:"roles"`
}

// MySQLConfig locates the task center.
type MySQLConfig struct {
	// DSN in go-sql-driver form: user:pass@tcp(host:3306)/taskd.
	DSN string `mapstructure:"dsn"`
	// ReadDSN, when set, serves what only reads (list, show, stats): a
	// replica, so operators' queries stay off the primary.
	ReadDSN string `mapstructure:"read_dsn"`
	// MaxOpenConns bounds the connection pool.
	MaxOpenConns int `mapstructure:"max_open_conns"`
	// LockWaitTimeout is the session's innodb_lock_wait_timeout.
	LockWaitTimeout time.Duration `mapstructure:"lock_wait_timeout"`
	// DialTimeout bounds opening a connection; ReadTimeout and
	// WriteTimeout each network read and write (a slow link is not a dead
	// one: the defaults survive a second added each way).
	DialTimeout  time.Duration `mapstructure:"dial_timeout"`
	ReadTimeout  time.Duration `mapstructure:"read_timeout"`
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
}

// RedisConfig locates the transport.
type RedisConfig struct {
	// Addr is host:port, or several separated by commas (a Cluster).
	Addr string `mapstructure:"addr"`
	// Addrs, when set, are the seeds instead of Addr: the Sentinels with
	// MasterName, else the nodes of a Cluster.
	Addrs []string `mapstructure:"addrs"`
	// MasterName selects Sentinel.
	MasterName string `mapstructure:"master_name"`
	// Cluster forces Cluster mode with a single seed address (a managed
	// Cluster's configuration endpoint).
	Cluster  bool   `mapstructure:"cluster"`
	Password string `mapstructure:"password"`
	DB       int    `mapstructure:"db"`
	// Prefix starts every key (default "task:").
	Prefix   string `mapstructure:"prefix"`
	PoolSize int    `mapstructure:"pool_size"`
	// DialTimeout bounds opening a connection with its handshake;
	// ReadTimeout and WriteTimeout each command's read and write.
	DialTimeout  time.Duration `mapstructure:"dial_timeout"`
	ReadTimeout  time.Duration `mapstructure:"read_timeout"`
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
}

// SchedulerConfig tunes dispatch.
type SchedulerConfig struct {
	// BatchSize is the number of tasks claimed per round trip.
	BatchSize int `mapstructure:"batch_size"`
	// PollInterval is the longest a scheduler sleeps without a wakeup: it
	// bounds the pickup delay of rows INSERTed by producers that do not
	// publish a wakeup (PHP code writing SQL directly).
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// ProbeInterval is how often a waiting scheduler reads the newest
	// task id, so that such rows start within it (0s: no probe; they wait
	// for the poll).
	ProbeInterval time.Duration `mapstructure:"probe_interval"`
	// Window is the most messages one queue holds in Redis; the rest of
	// its backlog waits in the task center (0: four per slot of the
	// queue's live consumers, at least two batches).
	Window int `mapstructure:"window"`
	// WindowBytes bounds a queue's window by its payloads: about this
	// many bytes of them in Redis, at least a message per consumer slot
	// (0: no bound but the window's).
	WindowBytes Bytes `mapstructure:"window_bytes"`
	// ClaimAhead is how long before their due time tasks are claimed, to
	// be pushed when due: the claim's round trips do not make them late
	// (0s: claimed when due).
	ClaimAhead time.Duration `mapstructure:"claim_ahead"`
}

// WorkerConfig tunes the worker pool.
type WorkerConfig struct {
	// Concurrency is the default number of slots per queue.
	Concurrency int `mapstructure:"concurrency"`
	// ShutdownGrace is how long SIGTERM waits for running tasks before
	// handing them back.
	ShutdownGrace time.Duration `mapstructure:"shutdown_grace"`
	// HandBackWait is how long, after the grace, cancelled handlers get to
	// return before their tasks are handed back regardless.
	HandBackWait time.Duration `mapstructure:"hand_back_wait"`
	// KillGrace is the time between SIGTERM and SIGKILL for exec handlers.
	KillGrace time.Duration `mapstructure:"kill_grace"`
	// OutputLimit is the number of bytes of output kept per attempt.
	OutputLimit Bytes `mapstructure:"output_limit"`
	// HeartbeatInterval and HeartbeatTTL govern the worker's liveness key.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	HeartbeatTTL      time.Duration `mapstructure:"heartbeat_ttl"`
	// RunningMarkDelay: an attempt still running this long after it
	// started is marked running in the task center; one that ends sooner
	// goes from dispatched straight to its result.
	RunningMarkDelay time.Duration `mapstructure:"running_mark_delay"`
}

// RecoveryConfig tunes the recovery scanner.
type RecoveryConfig struct {
	// Interval between recovery passes.
	Interval time.Duration `mapstructure:"interval"`
	// DispatchWindow: a dispatched task whose message is not in its queue
	// after this long is re-dispatched.
	DispatchWindow time.Duration `mapstructure:"dispatch_window"`
	// RunningGrace: a running task past its timeout plus this is taken
	// from its worker.
	RunningGrace time.Duration `mapstructure:"running_grace"`
	// CrashLimit: a task whose worker died this many times is poison: dead.
	CrashLimit int `mapstructure:"crash_limit"`
}

// RetentionConfig bounds how long finished work is kept.
type RetentionConfig struct {
	Interval time.Duration `mapstructure:"interval"`
	// TaskAge: succeeded and cancelled tasks are deleted this long after
	// they finished (dead tasks are kept for an operator).
	TaskAge time.Duration `mapstructure:"task_age"`
	// RunAge: run history older than this is deleted.
	RunAge time.Duration `mapstructure:"run_age"`
}

// RetryConfig is the backoff between attempts of a failed task:
// min(Max, Base * 2^retry), of which a random half is jitter.
type RetryConfig struct {
	Base time.Duration `mapstructure:"base"`
	Max  time.Duration `mapstructure:"max"`
}

// SubmitConfig bounds what producers may submit.
type SubmitConfig struct {
	MaxPayload Bytes `mapstructure:"max_payload"`
}

// CronConfig sets defaults for periodic tasks.
type CronConfig struct {
	// Timezone is the zone `taskd cron add` records in a periodic task
	// given no --tz ("" = the host's zone), and the cluster's default the
	// first node or migrate records for rows INSERTed with none.
	Timezone string `mapstructure:"timezone"`
}

// LogConfig selects the log output.
type LogConfig struct {
	// Format: auto (text on a terminal, JSON otherwise), json or text.
	Format string `mapstructure:"format"`
	Level  string `mapstructure:"level"`
}

// MetricsConfig is the HTTP listener for /metrics, /livez and /readyz.
type MetricsConfig struct {
	Addr string `mapstructure:"addr"`
}

// validateKillGrace checks worker.kill_grace against the waits that must
// outlast it, where a handler runs processes (exec, pool): a process
// past its timeout gets kill_grace after SIGTERM, so a watchdog.grace no
// longer than it abandoned every timed-out slot and counted a crash
// instead of a timeout; and at shutdown a hand_back_wait no longer than it
// handed tasks back while their processes still ran.
func (c *Config) validateKillGrace() error {
	procs := false
	for _, h := range c.Handlers {
		procs = procs || len(h.Exec) > 0 || len(h.Pool) > 0
	}
	g := c.Worker.KillGrace
	switch {
	case !procs:
		return nil
	case g >= c.Watchdog.Grace:
		return invalid("worker.kill_grace", g.String(), "shorter than watchdog.grace (%s), which a process past its timeout must stop within: raise watchdog.grace with it", c.Watchdog.Grace)
	case g >= c.Worker.HandBackWait:
		return invalid("worker.kill_grace", g.String(), "shorter than worker.hand_back_wait (%s), which a process stopped at shutdown must end within: raise worker.hand_back_wait with it", c.Worker.HandBackWait)
	}
	return nil
}

// HandlerSpec configures the handler of one task code: exactly one of Exec
// (argv, no shell, a process per task), Pool (argv of long-lived processes
// speaking the pool protocol) or HTTP (URL).
type HandlerSpec struct {
	Exec   []string          `mapstructure:"exec"`
	Pool   []string          `mapstructure:"pool"`
	HTTP   string            `mapstructure:"http"`
	Env    []string          `mapstructure:"env"`
	Dir    string            `mapstructure:"dir"`
	Header map[string]string `mapstructure:"header"`
	// Timeout caps each attempt of the code, whatever its task's timeout
	// (the shorter wins; 0: the task's alone).
	Timeout time.Duration `mapstructure:"timeout"`
	// PermanentExitCodes are an exec handler's exit statuses that fail
	// its task at once, without the retries it has left.
	PermanentExitCodes []int `mapstructure:"permanent_exit_codes"`
	// Queue the code's tasks go to when the producer names none.
	Queue string `mapstructure:"queue"`
	// Size is a pool's number of processes on this node (default
	// handler.PoolSizeDefault); the queue gets
	// handler.PoolSlotsPerProcess slots per process unless
	// queues.NAME.concurrency says otherwise.
	Size int `mapstructure:"size"`
	// MaxJobs recycles a pool process after this many tasks (0: never).
	MaxJobs int `mapstructure:"max_jobs"`
	// MaxMemory recycles a pool process whose resident memory passed this
	// after a task: bytes, or a number with KB, MB, GB (or KiB, MiB, GiB).
	MaxMemory string `mapstructure:"max_memory"`
	// Idle stops a pool process that had no task this long (0: never).
	Idle time.Duration `mapstructure:"idle"`
	// StartTimeout bounds a pool process's boot, up to its ready line
	// (default handler.PoolStartTimeoutDefault).
	StartTimeout time.Duration `mapstructure:"start_timeout"`
	// Stdout is what a pool process's stdout carries: "protocol" (the
	// default, its answers) or "output" (kept as the task's output, like
	// stderr; it answers on descriptor 3, named by TASK_POOL_FD).
	Stdout string `mapstructure:"stdout"`
}

// Pool stdout values (HandlerSpec.Stdout).
const (
	StdoutProtocol = "protocol"
	StdoutOutput   = "output"
)

// poolSizeMax bounds handlers.CODE.size.
const poolSizeMax = 1000

// PoolSize is the number of processes of a pool handler.
func (h *HandlerSpec) PoolSize() int { return cmp.Or(h.Size, handler.PoolSizeDefault) }

// MaxMemoryBytes is MaxMemory in bytes (0: no limit).
func (h *HandlerSpec) MaxMemoryBytes() (int64, error) { return ParseBytes(h.MaxMemory) }

// Bytes is a size in the configuration: a number of bytes, or a number
// with a unit as ParseBytes reads it ("32MiB").
type Bytes int64

// bytesHook decodes a string into Bytes with ParseBytes; a number is
// taken as bytes by the decoder itself.
func bytesHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	if s, ok := data.(string); ok && to == reflect.TypeFor[Bytes]() {
		n, err := ParseBytes(s)
		return Bytes(n), err
	}
	return data, nil
}

// wholeNumberHook refuses a number with a point where a whole number is
// expected: the decoder would cut concurrency: 10.5 to 10 without a word.
// 10.0 is refused too, as "10.0" in a variable is: one rule for the file
// and the environment, digits only.
func wholeNumberHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	switch data.(type) {
	case float32, float64:
		if k := to.Kind(); k >= reflect.Int && k <= reflect.Uint64 {
			return nil, fmt.Errorf("%v is not a whole number", data)
		}
	}
	return data, nil
}

// decodeHook is how the configuration's values are decoded: viper's own
// hooks (durations, comma-separated lists), sizes with units, and whole
// numbers kept whole.
func decodeHook() mapstructure.DecodeHookFunc {
	return mapstructure.ComposeDecodeHookFunc(
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
		bytesHook,
		wholeNumberHook,
	)
}

// ParseBytes reads a size: a number of bytes, or a number followed by KB,
// MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024; K, M and G
// alone are those too, as PHP's memory_limit reads them). "" is 0.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.ToUpper(strings.TrimSpace(s[i:]))
	mult := map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
		"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if mult == 0 || err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (like 256MB or 1GiB)", s)
	}
	return n * mult, nil
}

// QueueConfig configures one queue.
type QueueConfig struct {
	Concurrency int `mapstructure:"concurrency"`
	// Rate bounds the tasks started per period over the whole cluster:
	// 100/s, 5/m, 30/10s ("" none); Burst is how many may start at once
	// after a quiet spell (default limit.DefaultBurst).
	Rate  string `mapstructure:"rate"`
	Burst int    `mapstructure:"burst"`
	// MaxRunning bounds the queue's tasks running at once over the whole
	// cluster (0: no bound).
	MaxRunning int `mapstructure:"max_running"`
	// Per "group" applies Rate and MaxRunning to each group of tasks
	// separately ("": to the whole queue).
	Per string `mapstructure:"per"`
	// Serial runs the tasks of each group one at a time, oldest first; a
	// failed task holds its group until it ends, unless SkipFailed.
	Serial     bool `mapstructure:"serial"`
	SkipFailed bool `mapstructure:"skip_failed"`
	Shards     int  `mapstructure:"shards"`
}

// Roles are the parts `taskd run` can run.
var Roles = []string{"scheduler", "worker", "recovery", "retention", "watchdog"}

// defaults are every scalar key with its default; they also make viper
// honour TASKD_* variables for keys absent from the file.
var defaults = map[string]any{
	"node.id":                            "",
	"node.roles":                         []string{"scheduler", "worker", "recovery", "retention", "watchdog"},
	"mysql.dsn":                          "root:@tcp(127.0.0.1:3306)/taskd",
	"mysql.read_dsn":                     "",
	"mysql.max_open_conns":               store.MaxOpenConnsDefault,
	"mysql.lock_wait_timeout":            dur(store.LockWaitTimeoutDefault),
	"mysql.dial_timeout":                 dur(store.DialTimeoutDefault),
	"mysql.read_timeout":                 dur(store.ReadTimeoutDefault),
	"mysql.write_timeout":                dur(store.WriteTimeoutDefault),
	"redis.addr":                         "127.0.0.1:6379",
	"redis.addrs":                        []string{},
	"redis.master_name":                  "",
	"redis.cluster":                      false,
	"redis.password":                     "",
	"redis.db":                           0,
	"redis.prefix":                       broker.PrefixDefault,
	"redis.pool_size":                    broker.PoolSizeDefault,
	"redis.dial_timeout":                 dur(broker.DialTimeoutDefault),
	"redis.read_timeout":                 dur(broker.ReadTimeoutDefault),
	"redis.write_timeout":                dur(broker.WriteTimeoutDefault),
	"scheduler.batch_size":               scheduler.BatchSizeDefault,
	"scheduler.poll_interval":            dur(scheduler.PollIntervalDefault),
	"scheduler.probe_interval":           dur(scheduler.ProbeIntervalDefault),
	"scheduler.window":                   0,
	"scheduler.window_bytes":             scheduler.WindowBytesDefault,
	"scheduler.claim_ahead":              dur(scheduler.ClaimAheadDefault),
	"worker.concurrency":                 10,
	"worker.shutdown_grace":              dur(worker.ShutdownGraceDefault),
	"worker.hand_back_wait":              dur(worker.HandBackWaitDefault),
	"worker.kill_grace":                  dur(handler.KillGraceDefault),
	"worker.output_limit":                worker.OutputLimitDefault,
	"worker.heartbeat_interval":          dur(worker.HeartbeatIntervalDefault),
	"worker.heartbeat_ttl":               dur(worker.HeartbeatTTLDefault),
	"worker.running_mark_delay":          dur(worker.RunningMarkDelayDefault),
	"recovery.interval":                  dur(recovery.IntervalDefault),
	"recovery.dispatch_window":           dur(recovery.DispatchWindowDefault),
	"recovery.running_grace":             dur(recovery.RunningGraceDefault),
	"recovery.crash_limit":               recovery.CrashLimitDefault,
	"retention.interval":                 dur(retention.IntervalDefault),
	"retention.task_age":                 dur(retention.TaskAgeDefault),
	"retention.run_age":                  dur(retention.RunAgeDefault),
	"retry.base":                         dur(worker.RetryBaseDefault),
	"retry.max":                          dur(worker.RetryMaxDefault),
	"submit.max_payload":                 task.DefaultMaxPayload,
	"cron.timezone":                      "",
	"log.format":                         "auto",
	"log.level":                          "info",
	"metrics.addr":                       "",
	"tasktop.readonly":                   false,
	"tasktop.refresh":                    "2s", // tui.RefreshDefault (tui imports this package)
	"tasktop.serve.listen":               sshserve.ListenDefault,
	"tasktop.serve.host_key":             sshserve.HostKeyDefault,
	"tasktop.serve.authorized_keys":      sshserve.AuthorizedKeysDefault,
	"tasktop.serve.roles.operator":       []string{},
	"tasktop.serve.roles.viewer":         []string{},
	"tasktop.serve.idle_timeout":         dur(sshserve.IdleTimeoutDefault),
	"tasktop.serve.max_sessions":         sshserve.MaxSessionsDefault,
	"tasktop.serve.max_sessions_per_key": sshserve.MaxSessionsPerKeyDefault,
	"watchdog.interval":                  dur(watchdog.IntervalDefault),
	"watchdog.idle_window":               dur(watchdog.IdleWindowDefault),
	"watchdog.grace":                     dur(watchdog.GraceDefault),
}

// dur writes a default duration as the configuration reference shows it:
// 1m, not 1m0s.
var dur = clock.Format

// Keys lists every configuration key with its default, sorted: the
// configuration reference is checked against it.
func Keys() []string {
	out := make([]string, 0, len(defaults))
	for k := range defaults {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NewViper returns a viper instance with taskd's defaults and environment
// binding; flags may be bound to it before Load.
func NewViper() *viper.Viper {
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	v.SetEnvPrefix("TASKD")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	return v
}

// Default returns the configuration of every default, as Load gives it
// with no file and no TASKD_* variable: what a Go program embedding taskd
// starts from before setting its own values.
func Default() *Config {
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	var c Config
	if err := v.Unmarshal(&c, viper.DecodeHook(decodeHook())); err != nil {
		panic(fmt.Sprintf("config: the defaults do not decode: %v", err)) // a bug, caught by its test
	}
	if err := c.Validate(); err != nil {
		panic(fmt.Sprintf("config: the defaults are not valid: %v", err))
	}
	return &c
}

// NoFile and NoFileFix say what follows from Load finding no file:
// `taskd doctor` and `taskd run` say it, since a daemon started from the
// wrong directory would otherwise run on the defaults unnoticed.
const (
	NoFile    = "no configuration file: the defaults and TASKD_* variables are in force"
	NoFileFix = "pass --config, or install /etc/taskd/taskd.yaml"
)

// Load reads the configuration file (path, else TASKD_CONFIG, else the
// search path) into v and decodes it. A missing file is fine unless path
// or TASKD_CONFIG named it. An
// unknown key in the file, a TASKD_* variable that names no key, or a value
// its key cannot take is an error naming the key, where it came from and,
// for a typo, the nearest known key.
func Load(v *viper.Viper, path string) (*Config, error) {
	file := cmp.Or(path, os.Getenv(EnvConfig))
	if file == "" {
		for _, p := range []string{"taskd.yaml", "/etc/taskd/taskd.yaml"} {
			if _, err := os.Stat(p); err == nil {
				file = p
				break
			}
		}
	}
	if err := checkEnv(os.Environ()); err != nil {
		return nil, err
	}
	var raw map[string]any
	if file != "" {
		v.SetConfigFile(file)
		// The file is YAML whatever its name (taskd.conf, /etc/taskd/node-a).
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			var nf viper.ConfigFileNotFoundError
			if errors.As(err, &nf) || os.IsNotExist(err) {
				if path == "" && file == os.Getenv(EnvConfig) {
					return nil, task.Invalidf("config file %s (named by %s) not found", file, EnvConfig)
				}
				return nil, task.Invalidf("config file %s not found", file)
			}
			return nil, parseError(file, err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, task.Invalidf("config file %s: %v", file, err)
		}
		if err := yaml.Unmarshal(b, &raw); err != nil {
			return nil, parseError(file, err)
		}
		if err := checkFile(file, raw); err != nil {
			return nil, err
		}
	}
	if err := checkEnvValues(); err != nil {
		return nil, err
	}
	var c Config
	if err := v.Unmarshal(&c, viper.DecodeHook(decodeHook())); err != nil {
		return nil, task.Invalidf("config: %v", err)
	}
	if err := decodeNamed(raw, &c); err != nil {
		return nil, task.Invalidf("config: %v", err)
	}
	c.File = file
	c.FileSecrets = secretsIn(raw)
	c.source = func(key string) string { return source(v, key, file) }
	if err := c.Validate(); err != nil {
		return nil, withSource(err, v, file)
	}
	return &c, nil
}

// decodeNamed decodes the handlers and queues from the file's own map:
// viper lowercases every key (task codes and queue names are
// case-sensitive: SendEmail is not sendemail) and splits keys at dots,
// which codes and queue names may hold (orders.sync would be handler
// sync under handler orders).
func decodeNamed(raw map[string]any, c *Config) error {
	for key, out := range map[string]any{"handlers": &c.Handlers, "queues": &c.Queues} {
		m, ok := raw[key]
		if !ok {
			continue
		}
		d, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{Result: out, WeaklyTypedInput: true,
			DecodeHook: decodeHook(), TagName: "mapstructure", ZeroFields: true})
		if err != nil {
			return err
		}
		if err := d.Decode(m); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the configuration and fills derived defaults.
func (c *Config) Validate() error {
	if c.Node.ID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		c.Node.ID = h
	}
	if len(c.Node.ID) > 100 {
		c.Node.ID = c.Node.ID[:100] // task_run.node holds 128 characters
	}
	for _, r := range c.Node.Roles {
		if !slices.Contains(Roles, r) {
			return invalid("node.roles", r, "some of %s", strings.Join(Roles, ", "))
		}
	}
	if len(c.Node.Roles) == 0 { // --roles "$ROLES" with the variable unset: a node that does nothing
		return invalid("node.roles", "", "some of %s", strings.Join(Roles, ", "))
	}
	// A mistyped level would leave the default in force, unsaid.
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Log.Level)); err != nil && c.Log.Level != "" {
		return invalid("log.level", c.Log.Level, "debug, info, warn or error")
	}
	if !slices.Contains([]string{"", "auto", "json", "text"}, c.Log.Format) {
		return invalid("log.format", c.Log.Format, "auto, json or text")
	}
	for key, dsn := range map[string]string{"mysql.dsn": c.MySQL.DSN, "mysql.read_dsn": c.MySQL.ReadDSN} {
		if dsn == "" && key == "mysql.read_dsn" {
			continue
		}
		// A network name with a ':' is user:password that lost its '@':
		// the driver's "unknown network" error would quote it whole.
		if m, err := mysql.ParseDSN(dsn); err != nil || dsn == "" || strings.Contains(m.Net, ":") {
			return invalid(key, dsn, "a DSN such as user:password@tcp(host:3306)/taskd")
		}
	}
	if c.Redis.Addr == "" && len(c.Redis.Addrs) == 0 {
		return invalid("redis.addr", "", "host:port")
	}
	// TASKD_REDIS_ADDRS=a:1,b:2 arrives as one element.
	var addrs []string
	for _, a := range c.Redis.Addrs {
		for _, part := range strings.Split(a, ",") {
			if part = strings.TrimSpace(part); part != "" {
				addrs = append(addrs, part)
			}
		}
	}
	c.Redis.Addrs = addrs
	if c.Redis.Addr != "" {
		for _, a := range strings.Split(c.Redis.Addr, ",") { // a:1,b:2: the nodes of a Cluster
			if !hostPort(strings.TrimSpace(a), 1) {
				return invalid("redis.addr", c.Redis.Addr, "host:port, such as 127.0.0.1:6379, or several separated by commas")
			}
		}
	}
	for _, a := range addrs {
		if !hostPort(a, 1) {
			return invalid("redis.addrs", a, "a list of host:port, such as [10.0.0.1:6379, 10.0.0.2:6379]")
		}
	}
	// The listener would fail only once `taskd run` had started (exit 1,
	// which a supervisor restarts): refused here, with every other value.
	if c.Metrics.Addr != "" && !hostPort(c.Metrics.Addr, 0) {
		return invalid("metrics.addr", c.Metrics.Addr, "host:port to listen on, such as :9464 or 127.0.0.1:9464 (empty: no listener)")
	}
	if c.Redis.Prefix == "" {
		// Every key would sit among other applications' keys on that Redis.
		return invalid("redis.prefix", "", "a key prefix such as task:")
	}
	if c.Redis.MasterName != "" && c.Redis.Cluster {
		return task.Invalidf("config redis.master_name (Sentinel) and redis.cluster exclude each other")
	}
	if c.Scheduler.BatchSize <= 0 || c.Scheduler.BatchSize > 10000 {
		return invalid("scheduler.batch_size", c.Scheduler.BatchSize, "1 to 10000")
	}
	if c.Scheduler.ClaimAhead < 0 || c.Scheduler.ClaimAhead > 10*time.Second {
		return invalid("scheduler.claim_ahead", c.Scheduler.ClaimAhead.String(), "0s to 10s")
	}
	if c.Scheduler.ProbeInterval < 0 {
		return invalid("scheduler.probe_interval", c.Scheduler.ProbeInterval.String(), "0s (off) or a duration")
	}
	if c.Scheduler.Window < 0 {
		return invalid("scheduler.window", c.Scheduler.Window, "0 (from the consumers' slots) or a number of messages")
	}
	if c.Scheduler.WindowBytes < 0 {
		return invalid("scheduler.window_bytes", c.Scheduler.WindowBytes, "0 (no bound) or a number of bytes")
	}
	positive := []struct {
		key string
		d   time.Duration
	}{
		{"scheduler.poll_interval", c.Scheduler.PollInterval},
		{"mysql.dial_timeout", c.MySQL.DialTimeout},
		{"mysql.read_timeout", c.MySQL.ReadTimeout},
		{"mysql.write_timeout", c.MySQL.WriteTimeout},
		{"redis.dial_timeout", c.Redis.DialTimeout},
		{"redis.read_timeout", c.Redis.ReadTimeout},
		{"redis.write_timeout", c.Redis.WriteTimeout},
		{"recovery.interval", c.Recovery.Interval},
		{"recovery.dispatch_window", c.Recovery.DispatchWindow},
		{"retention.interval", c.Retention.Interval},
		{"retention.task_age", c.Retention.TaskAge},
		{"retention.run_age", c.Retention.RunAge},
		{"retry.base", c.Retry.Base},
		{"worker.hand_back_wait", c.Worker.HandBackWait},
		// 0 would not mean none: the ticker of a heartbeat every 0s
		// panics, and the others would take their defaults unsaid.
		{"worker.heartbeat_interval", c.Worker.HeartbeatInterval},
		{"worker.shutdown_grace", c.Worker.ShutdownGrace},
		{"worker.kill_grace", c.Worker.KillGrace},
		{"worker.running_mark_delay", c.Worker.RunningMarkDelay},
		{"recovery.running_grace", c.Recovery.RunningGrace},
	}
	for _, p := range positive {
		if p.d <= 0 {
			return invalid(p.key, p.d.String(), "a positive duration")
		}
	}
	if c.Worker.OutputLimit < 0 || c.Worker.OutputLimit > 4<<20 {
		return invalid("worker.output_limit", c.Worker.OutputLimit, "0 to 4194304 (bytes)")
	}
	if c.Worker.Concurrency <= 0 {
		return invalid("worker.concurrency", c.Worker.Concurrency, "a positive number")
	}
	if lw := c.MySQL.LockWaitTimeout; lw < time.Second || lw%time.Second != 0 {
		return invalid("mysql.lock_wait_timeout", lw.String(), "whole seconds, 1s or more (InnoDB waits whole seconds)")
	}
	if c.Recovery.CrashLimit < 1 {
		return invalid("recovery.crash_limit", c.Recovery.CrashLimit, "at least 1")
	}
	if c.Worker.HeartbeatTTL <= c.Worker.HeartbeatInterval {
		return invalid("worker.heartbeat_ttl", c.Worker.HeartbeatTTL.String(), "longer than worker.heartbeat_interval (%s)", c.Worker.HeartbeatInterval)
	}
	if err := c.validateKillGrace(); err != nil {
		return err
	}
	if c.Retry.Max < c.Retry.Base {
		return invalid("retry.max", c.Retry.Max.String(), "at least retry.base (%s)", c.Retry.Base)
	}
	if err := c.validateObserve(); err != nil {
		return err
	}
	if err := c.validateTracing(); err != nil {
		return err
	}
	if err := c.validateAlerts(); err != nil {
		return err
	}
	if err := c.validateTasktop(); err != nil {
		return err
	}
	if _, err := task.ValidateTimezone(c.Cron.Timezone); err != nil {
		if near := task.ZoneNear(c.Cron.Timezone); near != "" {
			return invalid("cron.timezone", c.Cron.Timezone, "an IANA time zone (did you mean %q?), or empty for the host's", near)
		}
		return invalid("cron.timezone", c.Cron.Timezone, "an IANA time zone such as Asia/Shanghai, or empty for the host's")
	}
	for _, code := range sortedKeys(c.Handlers) {
		h := c.Handlers[code]
		if err := task.ValidateName("handler task code", code); err != nil {
			return err
		}
		if err := h.validate(); err != nil {
			return task.Invalidf("config handlers.%s: %v", code, err)
		}
		if h.Queue != "" {
			if err := task.ValidateName("queue", h.Queue); err != nil {
				return err
			}
		}
	}
	for _, q := range sortedKeys(c.Queues) {
		qc := c.Queues[q]
		if err := task.ValidateName("queue", q); err != nil {
			return err
		}
		if qc.Concurrency < 0 {
			return invalid("queues."+q+".concurrency", qc.Concurrency, "a number not negative")
		}
		if qc.Shards < 0 {
			return invalid("queues."+q+".shards", qc.Shards, "a number not negative")
		}
		if _, err := qc.Limit(); err != nil {
			return task.Invalidf("queues.%s: %v", q, err)
		}
	}
	return nil
}

// Limit is the flow control the queue's configuration asks for.
func (qc QueueConfig) Limit() (limit.Limit, error) {
	r, err := limit.ParseRate(qc.Rate)
	if err != nil {
		return limit.Limit{}, err
	}
	l := limit.Limit{Rate: r, Burst: qc.Burst, MaxRunning: qc.MaxRunning, Per: qc.Per}
	if qc.Serial {
		l.Serial = limit.SerialOn
		if qc.SkipFailed {
			l.Serial = limit.SerialSkip
		}
	} else if qc.SkipFailed {
		return l, task.Invalidf("skip_failed needs serial: true")
	}
	return l, l.Validate()
}

// QueueLimits returns the configured limits of every queue that sets one.
func (c *Config) QueueLimits() map[string]limit.Limit {
	out := map[string]limit.Limit{}
	for q, qc := range c.Queues {
		if l, err := qc.Limit(); err == nil && !l.IsZero() {
			out[q] = l
		}
	}
	return out
}

func (h *HandlerSpec) validate() error {
	kinds := 0
	for _, set := range []bool{len(h.Exec) > 0, len(h.Pool) > 0, h.HTTP != ""} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return errors.New("set exactly one of exec, pool or http")
	}
	if h.HTTP != "" {
		// Any other scheme fails every attempt ("unsupported protocol
		// scheme"): said at start, not task by task.
		u, err := url.Parse(h.HTTP)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("http %q: want an http:// or https:// URL with a host", h.HTTP)
		}
		if p := u.Port(); p != "" && !hostPort(u.Host, 1) {
			return fmt.Errorf("http %q: port %s is not 1-65535", h.HTTP, p)
		}
	}
	// net/http refuses such a header on every request: said at start, not
	// task by task. A value may be a credential, and is not quoted.
	for _, k := range sortedKeys(h.Header) {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("header %q: not a valid header name", k)
		}
		if !httpguts.ValidHeaderFieldValue(h.Header[k]) {
			return fmt.Errorf("header %q: its value holds a line break or another control character", k)
		}
	}
	if h.Timeout < 0 {
		return fmt.Errorf("timeout %s is negative (0: the task's timeout alone)", h.Timeout)
	}
	if len(h.PermanentExitCodes) > 0 && len(h.Exec) == 0 {
		return errors.New("permanent_exit_codes applies to exec handlers only (a pool handler answers \"permanent\": true)")
	}
	for _, c := range h.PermanentExitCodes {
		if c < 1 || c > 255 {
			return fmt.Errorf("permanent_exit_codes: %d is not an exit status that fails (1-255)", c)
		}
	}
	if len(h.Pool) == 0 {
		if h.Size != 0 || h.MaxJobs != 0 || h.MaxMemory != "" || h.Idle != 0 || h.StartTimeout != 0 || h.Stdout != "" {
			return errors.New("size, max_jobs, max_memory, idle, start_timeout and stdout apply to pool handlers only")
		}
		return nil
	}
	if h.Stdout != "" && h.Stdout != StdoutProtocol && h.Stdout != StdoutOutput {
		return fmt.Errorf("stdout %q is neither %q (its answers, the default) nor %q (kept as output; answers on descriptor 3)",
			h.Stdout, StdoutProtocol, StdoutOutput)
	}
	if h.Size < 0 || h.Size > poolSizeMax {
		return fmt.Errorf("size %d is out of range 1-%d", h.Size, poolSizeMax)
	}
	if h.MaxJobs < 0 || h.Idle < 0 || h.StartTimeout < 0 {
		return errors.New("max_jobs, idle and start_timeout must not be negative")
	}
	if _, err := h.MaxMemoryBytes(); err != nil {
		return fmt.Errorf("max_memory: %w", err)
	}
	return nil
}

// hostPort reports whether addr is host:port with a port number from
// minPort to 65535 (0 is a listener's "any free port"); the host may be
// empty.
func hostPort(addr string, minPort int) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= minPort && n < 65536
}

// HasRole reports whether `taskd run` should run role.
func (c *Config) HasRole(role string) bool {
	for _, r := range c.Node.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// WorkerQueues returns the queues this node consumes and their
// concurrency: every configured queue, and the queue of every configured
// handler. A queue without a configured concurrency has
// handler.PoolSlotsPerProcess slots per process of its pool handlers, plus
// worker.concurrency when other handlers share it (or it has no pool).
func (c *Config) WorkerQueues() map[string]int {
	pools, others := map[string]int{}, map[string]bool{}
	for code, h := range c.Handlers {
		q := task.QueueOf(h.Queue, code)
		if len(h.Pool) > 0 {
			pools[q] += h.PoolSize() * handler.PoolSlotsPerProcess
		} else {
			others[q] = true
		}
	}
	slots := func(q string) int {
		if others[q] || pools[q] == 0 {
			return pools[q] + c.Worker.Concurrency
		}
		return pools[q]
	}
	out := map[string]int{}
	for q, qc := range c.Queues {
		out[q] = qc.Concurrency
		if qc.Concurrency == 0 {
			out[q] = slots(q)
		}
	}
	for code, h := range c.Handlers {
		q := task.QueueOf(h.Queue, code)
		if _, ok := out[q]; !ok {
			out[q] = slots(q)
		}
	}
	return out
}

// QueueFor is the queue a new task of code goes to when the producer names
// none ("" means the code itself).
func (c *Config) QueueFor(code string) string {
	if h, ok := c.Handlers[code]; ok {
		return h.Queue
	}
	return ""
}

// QueueShards returns the configured shard count of every queue that sets
// one.
func (c *Config) QueueShards() map[string]int {
	out := map[string]int{}
	for q, qc := range c.Queues {
		if qc.Shards > 0 {
			out[q] = qc.Shards
		}
	}
	return out
}
