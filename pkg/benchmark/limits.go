package benchmark

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
)

// LimitOptions size the rate-limit scenario: Tasks queued up front on a
// queue limited to Rate a second with Burst, run by Nodes nodes.
type LimitOptions struct {
	Tasks, Rate, Burst, Nodes int
}

// starts is a Go handler that records when each attempt started.
type starts struct {
	mu sync.Mutex
	at []time.Time
}

func (s *starts) Handle(context.Context, *handler.Request) (string, error) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return "", nil
}

// RateLimit runs a backlog through a rate-limited queue on several nodes
// (each a scheduler and a worker, as `taskd run` wires them) and measures
// how the cluster-wide limit holds: the most tasks started in any 10 s
// window against the bound (rate x 10 + burst), and the time from the
// first start to the last against the ideal (tasks - burst) / rate.
func RateLimit(ctx context.Context, e *Env, o LimitOptions) (Figures, error) {
	rec := &starts{}
	c := counting(rec)
	reg := noopRegistry(c)
	cfg := *e.Config
	cfg.Node.Roles = []string{"scheduler", "worker"}
	cfg.Handlers = nil
	cfg.Queues = map[string]config.QueueConfig{"noop": {Concurrency: 32, Rate: fmt.Sprintf("%d/s", o.Rate), Burst: o.Burst}}
	var nodes []*node.Node
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	for i := range o.Nodes {
		c := cfg
		c.Node.ID = fmt.Sprintf("bench-%d", i)
		n, err := node.Open(ctx, &c, reg, e.Log)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
		if err := n.Start(ctx); err != nil {
			return nil, err
		}
	}
	if err := e.fill(ctx, o.Tasks, nil); err != nil {
		return nil, err
	}
	ideal := time.Duration(float64(o.Tasks-o.Burst) / float64(o.Rate) * float64(time.Second))
	if err := e.waitSucceeded(ctx, c, o.Tasks, 3*ideal+time.Minute); err != nil {
		return nil, err
	}
	rec.mu.Lock()
	at := slices.Clone(rec.at)
	rec.mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	worst := 0
	for i, j := 0, 0; i < len(at); i++ {
		for j < len(at) && at[j].Sub(at[i]) < 10*time.Second {
			j++
		}
		worst = max(worst, j-i)
	}
	took := at[len(at)-1].Sub(at[0])
	return Figures{
		"rate_limit_tasks":             float64(o.Tasks),
		"rate_limit_nodes":             float64(o.Nodes),
		"rate_limit_per_s":             float64(o.Rate),
		"rate_limit_worst_10s":         float64(worst),
		"rate_limit_bound_10s":         float64(o.Rate*10 + o.Burst),
		"rate_limit_seconds":           took.Seconds(),
		"rate_limit_ideal_seconds":     ideal.Seconds(),
		"rate_limit_off_ideal_pct":     100 * (took.Seconds()/ideal.Seconds() - 1),
		"rate_limit_achieved_per_s":    float64(len(at)-o.Burst) / took.Seconds(),
		"rate_limit_window_over_bound": float64(max(0, worst-(o.Rate*10+o.Burst))),
		"rate_limit_abs_off_ideal_pct": 100 * abs(took.Seconds()/ideal.Seconds()-1),
	}, nil
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
