package node

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/startstop"
)

// processBeat publishes the process heartbeat: which node, pid, version
// and roles run here. It outlives every role (started first, stopped last)
// and withdraws itself on a clean exit, so a process in the registry whose
// beat is old vanished without stopping: the stale-heartbeat alert.
type processBeat struct {
	broker        *broker.Broker
	p             broker.Process
	interval, ttl time.Duration
	log           *slog.Logger
	runner        startstop.Runner
	// pools, when set, reports the pool handlers with each beat.
	pools func() []broker.PoolState
}

func (h *processBeat) Start(ctx context.Context) error {
	host, _ := os.Hostname()
	h.p.Host, h.p.PID, h.p.StartedAt = host, os.Getpid(), time.Now()
	fails := &startstop.FailLog{Log: h.log, Level: slog.LevelWarn, Failed: "process heartbeat failed", Again: "process heartbeat works again"}
	return h.runner.Start(context.WithoutCancel(ctx), func(ctx context.Context) {
		startstop.Every(ctx, h.interval, func(ctx context.Context) {
			bctx, cancel := context.WithTimeout(ctx, beatTimeout)
			defer cancel()
			if h.pools != nil {
				h.p.Pools = h.pools()
			}
			fails.Pass(ctx, h.broker.BeatProcess(bctx, &h.p, h.ttl))
		})
	})
}

func (h *processBeat) Stop() {
	h.runner.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), beatTimeout)
	defer cancel()
	if err := h.broker.EndProcess(ctx, h.p.ID); err != nil {
		h.log.Warn("withdraw process heartbeat", "err", err)
	}
}

// SharedNodeIDs returns the node ids that live processes on more than one
// host run under, each with its hosts, sorted; this host's own (id on
// host) counts too. That is a configuration file copied from host to host
// with its node.id left in: nothing breaks (a worker's id is its own), but
// tasktop, stats, the run history and the metrics can no longer tell the
// hosts apart. Processes of one host sharing its node.id (Supervisor's
// numprocs) are fine.
func SharedNodeIDs(procs []broker.Process, id, host string) map[string][]string {
	hosts := map[string][]string{}
	add := func(id, host string) {
		if host != "" && !slices.Contains(hosts[id], host) {
			hosts[id] = append(hosts[id], host)
		}
	}
	add(id, host)
	for _, p := range procs {
		add(p.Node, p.Host)
	}
	for id, hs := range hosts {
		if len(hs) < 2 {
			delete(hosts, id)
			continue
		}
		slices.Sort(hs)
	}
	return hosts
}

// warnSharedNodeID says so when a live process on another host runs under
// this node.id (SharedNodeIDs).
func warnSharedNodeID(ctx context.Context, br *broker.Broker, cfg *config.Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	procs, err := br.Processes(ctx, cfg.Worker.HeartbeatTTL)
	host, _ := os.Hostname()
	if err != nil || host == "" {
		return // the heartbeat's own failures are said where they happen
	}
	if hs := SharedNodeIDs(procs, cfg.Node.ID, host)[cfg.Node.ID]; len(hs) > 0 {
		others := slices.DeleteFunc(hs, func(h string) bool { return h == host })
		log.Warn("node.id is taken by live processes on other hosts: tasktop, stats, the run history and the metrics cannot tell the hosts apart; give each host its own node.id, or leave it empty (the hostname)",
			"node_id", cfg.Node.ID, "other_hosts", strings.Join(others, ","))
	}
}

// HostZone names this host's time zone at t: its IANA name when the
// system says it (TZ, or the /etc/localtime link), and the UTC offset,
// "Asia/Shanghai +08:00". Two hosts in one zone give the same string.
func HostZone(t time.Time) string {
	name := os.Getenv("TZ")
	if name == "" {
		if link, err := os.Readlink("/etc/localtime"); err == nil {
			if _, after, ok := strings.Cut(link, "zoneinfo/"); ok {
				name = after
			}
		}
	}
	if name == "" {
		name, _ = t.Local().Zone()
	}
	return strings.TrimPrefix(name, ":") + " " + t.Local().Format("-07:00")
}

// beatTimeout bounds a process heartbeat: one round trip, maybe on a new
// connection, over a link that may be slow.
const beatTimeout = 15 * time.Second
