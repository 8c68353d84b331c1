package node

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
)

// poolsOf lists the pools of reg, sorted by code.
func poolsOf(reg *handler.Registry) []*handler.Pool {
	var out []*handler.Pool
	for _, code := range reg.Codes() {
		if h, _ := reg.Lookup(code); h != nil {
			if p, ok := h.(*handler.Pool); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// stopPools stops the pools side by side: each waits up to a kill grace
// for its processes to exit.
func stopPools(pools []*handler.Pool) {
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Go(p.Stop)
	}
	wg.Wait()
}

// poolStates is what the process heartbeat says of the pools.
func (n *Node) poolStates() []broker.PoolState {
	out := make([]broker.PoolState, 0, len(n.Pools))
	for _, p := range n.Pools {
		s := p.Stats()
		out = append(out, broker.PoolState{
			Code: s.Code, Size: s.Size, Processes: s.Processes, Busy: s.Busy, FailedStarts: s.FailedStarts,
			FailuresInARow: s.FailuresInARow, CrashLooping: s.CrashLooping, LastError: s.LastError,
		})
	}
	return out
}

// warnUnrunnable logs, at start, each exec handler whose program (or an
// interpreter's script) this host cannot start, as `taskd doctor` says it:
// otherwise the first word of it was each of its tasks failing, retried
// and dead. Its tasks still run here once the program appears (a deploy
// that comes after the restart). Pools say so as their processes start.
func warnUnrunnable(cfg *config.Config, log *slog.Logger) {
	for _, code := range slices.Sorted(maps.Keys(cfg.Handlers)) {
		h := cfg.Handlers[code]
		if len(h.Exec) == 0 {
			continue
		}
		if err := handler.CheckProgram(h.Exec, h.Dir); err != nil {
			log.Warn("exec handler cannot start on this host: its tasks fail here, and are retried, until it can", "code", code, "err", err)
		}
	}
}

// CheckPools is what `taskd doctor` reports of the pool handlers, one
// line per problem: a configured pool whose program cannot be started from
// this host, and a pool that a live taskd process reports crash-looping
// (with its last start error).
func CheckPools(ctx context.Context, cfg *config.Config, b *broker.Broker) ([]string, error) {
	var problems []string
	codes := make([]string, 0, len(cfg.Handlers))
	for code, h := range cfg.Handlers {
		if len(h.Pool) > 0 {
			codes = append(codes, code)
		}
	}
	sort.Strings(codes)
	for _, code := range codes {
		h := cfg.Handlers[code]
		if err := handler.CheckProgram(h.Pool, h.Dir); err != nil {
			problems = append(problems, fmt.Sprintf("handlers.%s: pool %v cannot start: %v", code, h.Pool, err))
		}
	}
	procs, err := b.Processes(ctx, cfg.Worker.HeartbeatTTL)
	if err != nil {
		return problems, err
	}
	for _, p := range procs {
		for _, s := range p.Pools {
			if s.CrashLooping {
				problems = append(problems, fmt.Sprintf("node %s (pid %d): pool %s is crash-looping, %d failed starts in a row: %s",
					p.Node, p.PID, s.Code, s.FailuresInARow, s.LastError))
			}
		}
	}
	return problems, nil
}
