package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
)

// MayContract says why contract step version may not run yet on a task
// center that already has a schema, and what to do, from the live
// processes of the Redis registry (or the error reading it); "" when it
// may run. A process knows the step when its binary's schema
// (Process.Schema) reaches version; one that does not say is of an older
// release. force is `taskd migrate --contract`: the operator says no
// older node runs, which stands in for an empty registry (Redis flushed,
// or no node up), never for one that names an older process or cannot be
// read.
func MayContract(version int, procs []broker.Process, registryErr error, force bool) string {
	if registryErr != nil {
		return fmt.Sprintf("the process registry cannot be read (%v), so older nodes may be running: run `taskd migrate` again once Redis answers", registryErr)
	}
	var older []string
	for _, p := range procs {
		if p.Schema < version {
			older = append(older, describeProcess(p))
		}
	}
	switch {
	case len(older) > 0:
		n, more := len(older), ""
		if n > 3 {
			more, older = fmt.Sprintf(" and %d more", n-3), older[:3]
		}
		todo := "run `taskd migrate` again once every node runs this release"
		if force {
			todo = "upgrade or stop them, then run `taskd migrate --contract` again"
		}
		return fmt.Sprintf("%s of an older release: %s%s; %s", ops.Plural(n, "live process"), strings.Join(older, ", "), more, todo)
	case len(procs) == 0 && !force:
		return "no live process in the Redis registry, which may have been flushed, so nothing shows that older nodes stopped: " +
			"run `taskd migrate` again once every node runs this release, or `taskd migrate --contract` once no older node is running"
	}
	return ""
}

// describeProcess names p for an operator: node, host, pid and version.
func describeProcess(p broker.Process) string {
	if p.PID == 0 {
		return fmt.Sprintf("process %s (its heartbeat has expired)", p.ID)
	}
	return fmt.Sprintf("node %s on %s pid %d (taskd %s)", p.Node, p.Hostname(), p.PID, p.Version)
}

// registryGate is the store.MigrateParams.MayContract of `taskd migrate`
// on cfg: it reads the process registry of cfg's Redis once, when the
// first contract step asks (a migrate with none pending, or of a fresh
// task center, needs no Redis), and decides each step with MayContract.
type registryGate struct {
	cfg   *config.Config
	force bool
	once  sync.Once
	br    *broker.Broker
	procs []broker.Process
	err   error
}

// registryTimeout bounds reading the registry: a Redis that does not
// answer defers the step rather than holding the migration lock.
const registryTimeout = 15 * time.Second

func (g *registryGate) mayContract(ctx context.Context, m store.Migration) string {
	g.once.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, registryTimeout)
		defer cancel()
		if g.br, g.err = OpenBroker(ctx, g.cfg); g.err == nil {
			g.procs, g.err = g.br.Processes(ctx, g.cfg.Worker.HeartbeatTTL)
		}
	})
	return MayContract(m.Version, g.procs, g.err, g.force)
}

func (g *registryGate) close() {
	if g.br != nil {
		g.br.Close()
	}
}

// Migrate applies the task center's migrations as `taskd migrate` does:
// ordinary ones at once, contract steps when the gate of cfg lets them
// (force: `--contract`). migs nil means the embedded ones; progress, when
// set, gets the lines of steps that run long or wait.
func Migrate(ctx context.Context, cfg *config.Config, st *store.Store, migs []store.Migration, force bool, progress func(string)) (store.MigrateResult, error) {
	g := &registryGate{cfg: cfg, force: force}
	defer g.close()
	return st.Migrate(ctx, store.MigrateParams{Migrations: migs, MayContract: g.mayContract, Progress: progress})
}
