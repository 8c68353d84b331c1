// Package node wires a `taskd run` process: it opens the task center and
// Redis from the configuration, builds the roles the node runs, and starts
// and stops them in order.
//
// Start order: store and broker (checked), the metrics listener, the
// process heartbeat, the pool handlers' processes (booting while the rest
// starts), worker and its watchdog (so tasks dispatched by this node find a
// consumer), scheduler, recovery, retention, the alerter. Stop order is the
// reverse: the alerter (releasing its lock), retention, recovery and the
// scheduler stop first, then the worker drains within its grace period,
// the pools' processes get EOF and exit, the process heartbeat is
// withdrawn, the metrics listener closes, then the connections close.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/taskd/taskd/pkg/alert"
	"github.com/taskd/taskd/pkg/batch"
	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/retention"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/watchdog"
	"github.com/taskd/taskd/pkg/worker"
)

// Version is stamped at build time (see .goreleaser.yaml).
var Version = "dev"

// Node is one `taskd run` process.
type Node struct {
	// ID names this process (host-pid-bootid); its worker has the same id.
	ID        string
	cfg       *config.Config
	log       *slog.Logger
	beat      *processBeat
	Store     *store.Store
	Broker    *broker.Broker
	Scheduler *scheduler.Scheduler // nil without the scheduler role
	Worker    *worker.Worker       // nil without the worker role
	Pools     []*handler.Pool      // the worker's pool handlers
	Recoverer *recovery.Recoverer  // nil without the recovery role
	Batches   *batch.Finisher      // nil without the recovery role
	Retention *retention.Retention // nil without the retention role
	Queues    *queues.Cache        // queue state (paused, shards) every role follows

	// Metrics are this process's Prometheus collectors.
	Metrics    *metrics.Metrics
	metricsSrv *metrics.Server
	Watchdog   *watchdog.Watchdog // nil without the watchdog or the worker role
	Alerter    *alert.Alerter     // nil unless alerts.enabled
	fatal      chan error         // see Fatal
	// tracing exports the worker's spans (nil unless tracing.enabled).
	tracing *sdktrace.TracerProvider
}

// Open connects to MySQL and Redis and builds the roles. Go handlers
// registered in handlers (may be nil) are added to those of the
// configuration.
func Open(ctx context.Context, cfg *config.Config, handlers *handler.Registry, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node", cfg.Node.ID)
	st, err := retry(ctx, log, "mysql", store.DSNAddr(cfg.MySQL.DSN), func() (*store.Store, error) {
		st, err := OpenStore(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if err := st.CheckSchema(ctx); err != nil {
			st.Close()
			return nil, err
		}
		if err := st.CheckWriteAccess(ctx); err != nil {
			st.Close()
			return nil, err
		}
		return st, nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := InitCronZone(ctx, st, cfg, log); err != nil {
		log.Warn("no default time zone for periodic tasks that name none: each node uses its own until one is set (taskd cron timezone ZONE)", "err", err)
	}
	br, err := retry(ctx, log, "redis", RedisAt(cfg), func() (*broker.Broker, error) {
		br, err := OpenBroker(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if err := br.CheckEviction(ctx); err != nil {
			br.Close()
			return nil, err
		}
		return br, nil
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	warnSharedNodeID(ctx, br, cfg, log)
	tp, err := openTracing(ctx, cfg, log)
	if err != nil {
		st.Close()
		br.Close()
		return nil, err
	}
	n := &Node{ID: worker.NewID(), cfg: cfg, log: log, Store: st, Broker: br, Metrics: metrics.New(Version, cfg.Node.ID), tracing: tp}
	n.beat = &processBeat{broker: br, p: broker.Process{ID: n.ID, Node: cfg.Node.ID, Version: Version, Schema: store.LatestVersion(), Roles: cfg.Node.Roles,
		Zone: HostZone(time.Now()), CronTimezone: cfg.Cron.Timezone, MySQLConns: store.PoolSize(cfg.MySQL.MaxOpenConns)},
		interval: cfg.Worker.HeartbeatInterval, ttl: cfg.Worker.HeartbeatTTL, log: log}
	n.Queues = openQueues(ctx, cfg, st, br, log)
	if cfg.HasRole("scheduler") {
		n.Scheduler = scheduler.New(scheduler.Config{
			BatchSize: cfg.Scheduler.BatchSize, PollInterval: cfg.Scheduler.PollInterval,
			ProbeInterval: offIfZero(cfg.Scheduler.ProbeInterval),
			Window:        cfg.Scheduler.Window, WindowBytes: offIfZero(int64(cfg.Scheduler.WindowBytes)),
			ClaimAhead: offIfZero(cfg.Scheduler.ClaimAhead), Logger: log,
		}, st, br)
	}
	if cfg.HasRole("worker") {
		if len(cfg.WorkerQueues()) == 0 {
			// A configuration whose handlers went missing (another file,
			// a wrong mount) would otherwise idle without a word.
			log.Warn("the worker role has no handler and no queue in this configuration: this node runs no task (configure handlers, or leave worker out of node.roles)")
		}
		warnUnrunnable(cfg, log)
		reg := Handlers(cfg, handlers, log)
		n.Pools = poolsOf(reg)
		n.beat.pools = n.poolStates
		n.Worker = worker.New(worker.Config{
			ID: n.ID, Node: cfg.Node.ID, Version: Version, Queues: cfg.WorkerQueues(), Handlers: reg,
			ShutdownGrace: cfg.Worker.ShutdownGrace, HandBackWait: cfg.Worker.HandBackWait, OutputLimit: int(cfg.Worker.OutputLimit),
			RetryBase: cfg.Retry.Base, RetryMax: cfg.Retry.Max, DefaultTimezone: cfg.Cron.Timezone,
			HeartbeatInterval: cfg.Worker.HeartbeatInterval, HeartbeatTTL: cfg.Worker.HeartbeatTTL, Logger: log,
			RunningMarkDelay: cfg.Worker.RunningMarkDelay,
			Metrics:          n.Metrics, Tracer: n.tracer(),
		}, st, br)
		recordRoutes(ctx, st, cfg, reg, log)
	}
	if cfg.HasRole("recovery") {
		n.Recoverer = recovery.New(recovery.Config{
			Interval: cfg.Recovery.Interval, DispatchWindow: cfg.Recovery.DispatchWindow,
			RunningGrace: cfg.Recovery.RunningGrace, HeartbeatTTL: cfg.Worker.HeartbeatTTL,
			CrashLimit: cfg.Recovery.CrashLimit, LossGrace: recovery.LossGrace(cfg.Worker.RunningMarkDelay),
			DefaultTimezone: cfg.Cron.Timezone, Logger: log,
			Metrics: n.Metrics,
		}, st, br)
		// Finishing batches whose last end no result write finished is
		// recovery's kind of duty.
		n.Batches = batch.New(batch.Config{Logger: log}, st)
	}
	if cfg.HasRole("retention") {
		n.Retention = retention.New(retention.Config{
			Interval: cfg.Retention.Interval, TaskAge: cfg.Retention.TaskAge, RunAge: cfg.Retention.RunAge, Logger: log,
		}, st, lock.NewRedis(br.Client(), cfg.Redis.Prefix))
	}
	n.fatal = make(chan error, 1)
	if cfg.HasRole("watchdog") && n.Worker != nil {
		n.Watchdog = n.newWatchdog()
	}
	if cfg.Alerts.Enabled {
		n.Alerter = n.newAlerter()
	}
	n.observe()
	return n, nil
}

// retry calls open until it succeeds or ctx is done: a daemon started
// before its database (a host boot, a failover) waits for it with clear
// logs instead of exiting. An error that waiting cannot heal (wrong
// credentials, an unknown database, a schema to migrate: task.CodeConfig)
// is returned at once, for the daemon to exit with EX_CONFIG.
func retry[T any](ctx context.Context, log *slog.Logger, what, addr string, open func() (T, error)) (T, error) {
	delay := retryFirst
	for {
		// A server that takes the connection and never answers holds an
		// attempt up to its dial and read timeouts (40 s for MySQL by
		// default): the log says so rather than nothing.
		stop := startstop.Notice(slowConnect, func() {
			log.Warn("no answer yet; still waiting", "to", what, "addr", addr, "after", slowConnect)
		})
		v, err := open()
		stop()
		if err == nil || task.ErrorCode(err) == task.CodeConfig {
			return v, err
		}
		log.Error("cannot connect; retrying", "to", what, "err", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("gave up connecting to %s: %w", what, err)
		case <-t.C:
		}
		delay = min(2*delay, retryMax)
	}
}

// The backoff between connection attempts at start, and how long an
// attempt may take before the log says it is still waiting.
const (
	retryFirst  = 500 * time.Millisecond
	retryMax    = 10 * time.Second
	slowConnect = 5 * time.Second
)

// ErrorText is err's message, with what an error of MySQL or Redis means
// where its own text does not say (store.ErrorText: "invalid connection",
// the connection limits; broker.Hint: a password Redis asks for), for
// every front end's error line and log line alike.
func ErrorText(err error) string { return store.ErrorText(err) + broker.Hint(err) }

// OpenStore opens the task center of cfg.
func OpenStore(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	return store.Open(ctx, cfg.MySQL.DSN, storeOptions(cfg, "mysql.dsn"))
}

// OpenMigrationStore opens the task center of cfg for migrations, whose
// statements may rebuild a large table: the server answers only when it
// is done, so they wait up to store.MigrateReadTimeout.
func OpenMigrationStore(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	o := storeOptions(cfg, "mysql.dsn")
	o.MinReadTimeout = store.MigrateReadTimeout
	return store.Open(ctx, cfg.MySQL.DSN, o)
}

// storeOptions are the pool and session options of cfg's task center;
// key names the DSN in errors.
func storeOptions(cfg *config.Config, key string) store.Options {
	m := cfg.MySQL
	return store.Options{MaxOpenConns: m.MaxOpenConns, LockWaitTimeout: m.LockWaitTimeout, Key: cfg.Named(key),
		DialTimeout: m.DialTimeout, ReadTimeout: m.ReadTimeout, WriteTimeout: m.WriteTimeout}
}

// OpenReadStore opens the task center for reads that may lag a little:
// mysql.read_dsn when set, else the primary.
func OpenReadStore(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	if cfg.MySQL.ReadDSN == "" {
		return OpenStore(ctx, cfg)
	}
	return store.Open(ctx, cfg.MySQL.ReadDSN, storeOptions(cfg, "mysql.read_dsn"))
}

// OpenBroker opens the Redis of cfg.
func OpenBroker(ctx context.Context, cfg *config.Config) (*broker.Broker, error) {
	return broker.Open(ctx, brokerOptions(cfg))
}

// DialBroker opens the Redis of cfg without waiting for it to answer
// (broker.Dial).
func DialBroker(ctx context.Context, cfg *config.Config) (*broker.Broker, error) {
	return broker.Dial(ctx, brokerOptions(cfg))
}

func brokerOptions(cfg *config.Config) broker.Options {
	// A worker blocks on all its queues with one connection: the pool need
	// not grow with the number of queues.
	return broker.Options{
		Addr: redisAddr(cfg), Addrs: cfg.Redis.Addrs, MasterName: cfg.Redis.MasterName, Cluster: cfg.Redis.Cluster,
		Password: cfg.Redis.Password, PasswordKey: cfg.Named("redis.password"), DB: cfg.Redis.DB,
		Prefix: cfg.Redis.Prefix, PoolSize: cfg.Redis.PoolSize,
		DialTimeout: cfg.Redis.DialTimeout, ReadTimeout: cfg.Redis.ReadTimeout, WriteTimeout: cfg.Redis.WriteTimeout,
	}
}

// RedisAt names the Redis servers of cfg, for messages: the seeds of
// redis.addrs, else redis.addr.
func RedisAt(cfg *config.Config) string {
	if len(cfg.Redis.Addrs) > 0 {
		return strings.Join(cfg.Redis.Addrs, ",")
	}
	return cfg.Redis.Addr
}

// redisAddr is redis.addr unless redis.addrs lists the seeds.
func redisAddr(cfg *config.Config) string {
	if len(cfg.Redis.Addrs) > 0 {
		return ""
	}
	return cfg.Redis.Addr
}

// Handlers builds the handler registry: exec, pool and http handlers from
// the configuration, then the Go handlers given (which win on a clash).
// Pools are not started.
func Handlers(cfg *config.Config, extra *handler.Registry, log *slog.Logger) *handler.Registry {
	reg := handler.NewRegistry()
	for code, h := range cfg.Handlers {
		switch {
		case len(h.Exec) > 0:
			reg.Register(code, &handler.Exec{Argv: h.Exec, Env: h.Env, Dir: h.Dir, PermanentExit: h.PermanentExitCodes, Timeout: h.Timeout,
				KillGrace: cfg.Worker.KillGrace, OutputLimit: int(cfg.Worker.OutputLimit)})
		case len(h.Pool) > 0:
			mem, _ := h.MaxMemoryBytes() // checked by Validate
			reg.Register(code, handler.NewPool(handler.PoolConfig{
				Code: code, Argv: h.Pool, Env: h.Env, Dir: h.Dir, Size: h.PoolSize(),
				MaxJobs: h.MaxJobs, MaxMemory: mem, Idle: h.Idle, StartTimeout: h.StartTimeout, Timeout: h.Timeout,
				KillGrace: cfg.Worker.KillGrace, OutputLimit: int(cfg.Worker.OutputLimit), Logger: log,
				WaitCredit: min(cfg.Recovery.RunningGrace, cfg.Watchdog.Grace) / 2, StdoutOutput: h.Stdout == config.StdoutOutput,
			}))
		case h.HTTP != "":
			reg.Register(code, &handler.HTTP{URL: h.HTTP, Header: h.Header, OutputLimit: int(cfg.Worker.OutputLimit), Timeout: h.Timeout})
		}
	}
	if extra != nil {
		for _, code := range extra.Codes() {
			h, _ := extra.Lookup(code)
			reg.Register(code, h)
		}
	}
	return reg
}

// Start starts the roles.
func (n *Node) Start(ctx context.Context) error {
	if err := n.serveMetrics(); err != nil {
		return err
	}
	if err := n.beat.Start(ctx); err != nil {
		n.stopMetrics()
		return err
	}
	if err := n.Queues.Start(ctx); err != nil {
		return err
	}
	for i, p := range n.Pools {
		if err := p.Start(ctx); err != nil {
			for _, started := range n.Pools[:i] {
				started.Stop()
			}
			return err
		}
	}
	if n.Worker != nil {
		if err := n.Worker.Start(ctx); err != nil {
			return err
		}
	}
	if n.Watchdog != nil {
		if err := n.Watchdog.Start(ctx); err != nil {
			n.Stop()
			return err
		}
	}
	if n.Scheduler != nil {
		if err := n.Scheduler.Start(ctx); err != nil {
			n.Stop()
			return err
		}
	}
	if n.Recoverer != nil {
		if err := n.Recoverer.Start(ctx); err != nil {
			n.Stop()
			return err
		}
	}
	if n.Batches != nil {
		if err := n.Batches.Start(ctx); err != nil {
			n.Stop()
			return err
		}
	}
	if n.Retention != nil {
		if err := n.Retention.Start(ctx); err != nil {
			n.Stop()
			return err
		}
	}
	if n.Alerter != nil {
		if err := n.Alerter.Start(ctx); err != nil {
			n.Stop()
			return err
		}
	}
	n.log.Info("taskd node started", "version", Version, "scheduler", n.Scheduler != nil, "worker", n.Worker != nil, "recovery", n.Recoverer != nil)
	return nil
}

// Stop stops the roles in reverse order and waits for them.
func (n *Node) Stop() {
	if n.Alerter != nil {
		n.Alerter.Stop()
	}
	if n.Retention != nil {
		n.Retention.Stop()
	}
	if n.Batches != nil {
		n.Batches.Stop()
	}
	if n.Recoverer != nil {
		n.Recoverer.Stop()
	}
	if n.Scheduler != nil {
		n.Scheduler.Stop()
	}
	if n.Watchdog != nil {
		n.Watchdog.Stop()
	}
	if n.Worker != nil {
		n.Worker.Stop()
	}
	stopPools(n.Pools)
	n.Queues.Stop()
	n.beat.Stop()
	n.stopTracing()
	n.stopMetrics()
}

// Close stops the node and closes its connections.
func (n *Node) Close() error {
	n.Stop()
	n.Broker.Close()
	return n.Store.Close()
}

// offIfZero is a value of the file as the scheduler takes it: 0 in the
// file turns the feature off (scheduler.claim_ahead,
// scheduler.probe_interval, scheduler.window_bytes), which the
// scheduler's Config says with a negative value.
func offIfZero[T time.Duration | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
