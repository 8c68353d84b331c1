// Package doctor checks what a deployment of taskd needs, the way an
// operator would after a configuration change or in a deploy pipeline: the
// configuration, MySQL (reachable, grants, schema, lock wait, time zone,
// clock), Redis (reachable, eviction, memory, persistence, Cluster slots),
// every handler's program or endpoint, the task codes and queues nothing
// serves, and nodes that disagree on time zones. Each check gives one line:
// ok, warn or fail, and for a problem what to do about it.
package doctor

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Status is the outcome of a check.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn" // works, but an operator should look
	Fail Status = "fail" // taskd cannot work (or loses work) like this
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail is what was found, Fix what to do about a problem.
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Report is every check, in order.
type Report struct {
	Checks []Check `json:"checks"`
	// OK is true when no check failed (warnings allowed).
	OK     bool           `json:"ok"`
	Counts map[Status]int `json:"counts"`

	pending pendingContract // of the mysql.schema check, for explainPending
}

func (r *Report) add(name string, st Status, fix, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Status: st, Detail: fmt.Sprintf(format, args...), Fix: fix})
}

func (r *Report) ok(name, format string, args ...any) { r.add(name, OK, "", format, args...) }

func (r *Report) finish() *Report {
	r.Counts = map[Status]int{OK: 0, Warn: 0, Fail: 0}
	for _, c := range r.Checks {
		r.Counts[c.Status]++
	}
	r.OK = r.Counts[Fail] == 0
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	return r
}

// Deps are what the checks talk to; nil when it could not be opened.
type Deps struct {
	Store  *store.Store
	Broker *broker.Broker
}

// Options tune the checks.
type Options struct {
	// Timeout bounds each network check (default 5s).
	Timeout time.Duration
	// MaxSkew is the clock difference with the database from which the
	// clock check warns (default 1s); FailSkew fails (default 30s, the
	// heartbeat TTL's order).
	MaxSkew, FailSkew time.Duration
	// Now is the local clock (default time.Now).
	Now func() time.Time
	// OpenReadStore opens mysql.read_dsn, when set (nil: not checked).
	OpenReadStore func(context.Context) (*store.Store, error)
}

// Defaults of Options.
const (
	TimeoutDefault  = 5 * time.Second
	MaxSkewDefault  = time.Second
	FailSkewDefault = 30 * time.Second
)

// ConfigFailed is the report when the configuration cannot be loaded:
// nothing else can be checked.
func ConfigFailed(err error) *Report {
	r := &Report{}
	// The check's name says "config" already: "config handlers.x: ..."
	// would read "config config handlers.x".
	r.add("config", Fail, "fix the key or value named", "%s", strings.TrimPrefix(err.Error(), "config "))
	return r.finish()
}

// Run checks cfg and what it points at. open opens the task center and
// Redis; an error of either is a failed check, and the checks that need it
// are skipped.
func Run(ctx context.Context, cfg *config.Config, o Options,
	openStore func(context.Context) (*store.Store, error), openBroker func(context.Context) (*broker.Broker, error)) *Report {
	o.Timeout = cmp.Or(o.Timeout, TimeoutDefault)
	o.MaxSkew = cmp.Or(o.MaxSkew, MaxSkewDefault)
	o.FailSkew = cmp.Or(o.FailSkew, FailSkewDefault)
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Report{}
	checkConfig(r, cfg)

	var d Deps
	schemaOK := false
	var server *store.ServerInfo
	sctx, cancel := context.WithTimeout(ctx, o.Timeout)
	st, err := openStore(sctx)
	cancel()
	if err != nil {
		r.add("mysql", Fail, downFix(err, "start MySQL, or fix mysql.dsn",
			"correct mysql.dsn (its user, password or database) or the server's account as the error says; restarting MySQL would not help"), "%v", err)
	} else {
		defer st.Close()
		d.Store = st
		server, schemaOK = checkMySQL(ctx, r, cfg, st, o)
	}
	if cfg.MySQL.ReadDSN != "" && o.OpenReadStore != nil {
		checkReadDSN(ctx, r, o)
	}
	bctx, cancel := context.WithTimeout(ctx, o.Timeout)
	br, err := openBroker(bctx)
	cancel()
	if err != nil {
		r.add("redis", Fail, downFix(err, "start Redis, or fix redis.addr and redis.password",
			"correct redis.password (or redis.addr, redis.db) as the error says; restarting Redis would not help"), "%v", err)
	} else {
		defer br.Close()
		d.Broker = br
		checkRedis(ctx, r, cfg, br, o)
		explainPending(ctx, r, cfg, br, o)
	}
	checkHandlers(ctx, r, cfg, br, o)
	checkNotifiers(ctx, r, cfg, o)
	if d.Store != nil && d.Broker != nil && schemaOK {
		checkWork(ctx, r, cfg, d, o)
		checkLimits(ctx, r, cfg, d, o)
		checkPaused(ctx, r, d, o)
	}
	if server != nil && d.Broker != nil {
		checkConnections(ctx, r, cfg, d, *server, o)
	}
	if d.Broker != nil {
		checkNodes(ctx, r, cfg, d.Broker, o)
	}
	return r.finish()
}

// downFix is the fix for a server that could not be opened: fix when it
// does not answer, else (it answered and refused: bad credentials, an
// unknown database; or the DSN names no database) what its error says,
// which starting it would not.
func downFix(err error, fix, refused string) string {
	if task.ErrorCode(err) == task.CodeConfig {
		return refused
	}
	return fix
}

func checkConfig(r *Report, cfg *config.Config) {
	if cfg.File == "" {
		r.add("config", Warn, config.NoFileFix, config.NoFile)
		return
	}
	r.ok("config", "%s: no unknown keys, every value valid; %s, %s", cfg.File,
		ops.Plural(len(cfg.Handlers), "handler"), ops.Plural(len(cfg.WorkerQueues()), "queue"))
	checkFileSecrets(r, cfg)
}

// checkFileSecrets warns when the configuration file holds credentials and
// every user of the host may read it, as the packages install it (0644):
// the database password of every node is then one cat away. Checked only
// for a file that holds some; group-readable is fine (root:taskd 0640).
func checkFileSecrets(r *Report, cfg *config.Config) {
	if len(cfg.FileSecrets) == 0 {
		return
	}
	fi, err := os.Stat(cfg.File)
	if err != nil {
		return // it was read a moment ago; nothing to say
	}
	what := strings.Join(cfg.FileSecrets, ", ")
	if mode := fi.Mode().Perm(); mode&0o004 != 0 {
		r.add("config.secrets", Warn, fmt.Sprintf("chmod o-r %s (0640, group of the user taskd runs as), or move them to the environment (TASKD_MYSQL_DSN, TASKD_REDIS_PASSWORD, ...)", cfg.File),
			"%s holds credentials (%s) and every user of this host may read it (mode %04o)", cfg.File, what, mode)
		return
	}
	r.ok("config.secrets", "%s holds credentials (%s); others may not read it", cfg.File, what)
}
