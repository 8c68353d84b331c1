// Package benchmark measures taskd on real MySQL and Redis through the
// daemon's own code paths: the producer inserts, a node built by pkg/node
// (scheduler and worker, exactly as `taskd run` wires them) dispatches and
// runs, and every figure is read from the task center's timestamps (one
// clock) or from the operating system. `taskd bench` prints the figures
// against the project's targets; bench/ runs the same scenarios under
// `go test -bench`.
package benchmark

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
)

// Env is one scenario's private task center database and Redis prefix.
type Env struct {
	Config   *config.Config // DSN and prefix point at the private ones
	Store    *store.Store
	Broker   *broker.Broker
	Producer *producer.Client
	Log      *slog.Logger

	// floor is the highest task id before the running phase submitted:
	// the phase reads its own tasks as the primary-key range above it,
	// so what it reads follows its tasks, not the rows already there.
	floor int64
	// Unsettled says why phases began without the write-back of the
	// pages earlier ones left dirty ("" when each began settled).
	Unsettled string

	drop func() error // removes the database and the keys; nil when borrowed
}

// NewEnv creates a database named after base's (with a random suffix) on
// the same server, applies the schema, and picks a fresh Redis prefix.
// Close removes both.
func NewEnv(ctx context.Context, base *config.Config, log *slog.Logger) (*Env, error) {
	dsn, err := mysql.ParseDSN(base.MySQL.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql.dsn: %w", err)
	}
	id := randomID()
	name := strings.ReplaceAll(cmp.Or(dsn.DBName, "taskd"), "`", "") + "_bench_" + id
	server := dsn.Clone()
	server.DBName = ""
	admin, err := sql.Open("mysql", server.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		return nil, fmt.Errorf("create benchmark database: %w", err)
	}
	cfg := *base
	cfg.Queues = maps.Clone(base.Queues)
	own := dsn.Clone()
	own.DBName = name
	cfg.MySQL.DSN = own.FormatDSN()
	cfg.Redis.Prefix = base.Redis.Prefix + "bench-" + id + ":"
	dropDB := func() error {
		a, err := sql.Open("mysql", server.FormatDSN())
		if err != nil {
			return err
		}
		defer a.Close()
		if _, err := a.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			return fmt.Errorf("drop benchmark database %s: %w", name, err)
		}
		return nil
	}
	env, err := Borrow(ctx, &cfg, log)
	if err != nil {
		dropDB()
		return nil, err
	}
	if _, err := env.Store.Migrate(ctx, store.MigrateParams{}); err != nil {
		env.Close()
		dropDB()
		return nil, fmt.Errorf("migrate benchmark database: %w", err)
	}
	env.drop = func() error {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return errors.Join(env.Broker.DeletePrefix(dctx), dropDB())
	}
	return env, nil
}

// Preflight makes one scenario's database and Redis prefix, and removes
// them: what would fail every scenario alike (an account that may not
// create databases, a wrong password, Redis down) is said once, before
// any runs, rather than once per scenario under an empty table.
func Preflight(ctx context.Context, base *config.Config) error {
	e, err := NewEnv(ctx, base, nil)
	if err == nil {
		return e.Close()
	}
	dsn, perr := mysql.ParseDSN(base.MySQL.DSN)
	if perr != nil {
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1044 { // ER_DBACCESS_DENIED_ERROR: the bench's database, not the configured one
		return fmt.Errorf("%w: taskd bench makes a database of its own for each scenario and drops it after; "+
			"GRANT ALL ON `%s\\_bench\\_%%`.* to the account of %s, or run it as one that may create databases",
			err, cmp.Or(dsn.DBName, "taskd"), base.Named("mysql.dsn"))
	}
	if cerr := store.ConfigError(err, dsn, base.Named("mysql.dsn")); cerr != nil { // wrong credentials, as every command says them
		return cerr
	}
	return err
}

// Borrow opens an Env on cfg's database and prefix as they are (tests
// bring their own); Close leaves them in place.
func Borrow(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Env, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	st, err := node.OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	br, err := node.OpenBroker(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Env{Config: cfg, Store: st, Broker: br, Producer: node.NewProducer(cfg, st, br, log), Log: log}, nil
}

// Close closes the connections and removes what NewEnv created; the error
// says what could not be removed.
func (e *Env) Close() error {
	var err error
	if e.drop != nil {
		err = e.drop()
	}
	e.Broker.Close()
	e.Store.Close()
	return err
}

// StartNode starts a scheduler and a worker consuming queues (name to
// slots) with the Go handlers of reg, wired by pkg/node as `taskd run`
// wires them. batch is the scheduler's claim size (0: the configured one).
func (e *Env) StartNode(ctx context.Context, queues map[string]int, reg *handler.Registry, batch int) (*node.Node, error) {
	cfg := *e.Config
	cfg.Node.ID = "bench"
	cfg.Node.Roles = []string{"scheduler", "worker"}
	cfg.Handlers = nil
	cfg.Queues = map[string]config.QueueConfig{}
	for q, n := range queues {
		cfg.Queues[q] = config.QueueConfig{Concurrency: n}
	}
	if batch > 0 {
		cfg.Scheduler.BatchSize = batch
	}
	n, err := node.Open(ctx, &cfg, reg, e.Log)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func randomID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// rssBytes is the process's resident set size now (Linux; 0 elsewhere).
func rssBytes() int64 {
	return statusKB("/proc/self/status", "VmRSS:") * 1024
}

func statusKB(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// cpuTime returns the user plus system CPU time of process pid ("self"
// for this one) from /proc, or false when it cannot be read (another host,
// another OS, no permission).
func cpuTime(pid string) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which may hold spaces: utime and
	// stime are the 14th and 15th fields of the line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, true
}

// childrenCPU is the user plus system CPU time of this process's waited-for
// children (getrusage RUSAGE_CHILDREN), or false where it cannot be read.
func childrenCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// ServerCPU returns a reader of the MySQL server's CPU time (user plus
// system), for go test benchmarks that report the server's cost of what
// they time; false when the server does not run on this host.
func ServerCPU(ctx context.Context, db *sql.DB) (func() time.Duration, bool) {
	pid := serverPID(ctx, db)
	if pid == "" {
		return nil, false
	}
	return func() time.Duration {
		d, _ := cpuTime(pid)
		return d
	}, true
}

// serverPID finds the MySQL server's process when it runs on this host:
// the pid file the server names, if this process can read it.
func serverPID(ctx context.Context, db *sql.DB) string {
	var path string
	if err := db.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&path); err != nil {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	pid := strings.TrimSpace(string(b))
	if _, ok := cpuTime(pid); !ok {
		return ""
	}
	return pid
}
