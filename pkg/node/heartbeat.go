package node

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/broker"
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
