package tui

import (
	"context"
	"sort"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
)

// backend is what a tasktop reads and acts through, opened from the
// configuration: tasktop and each session of tasktop serve.
type backend struct {
	Loader *Loader
	Ops    *ops.Ops
	closes []func() error
}

// openBackend connects to the task center and Redis. What the screens
// show may come from a replica (mysql.read_dsn); actions write the
// primary.
func openBackend(ctx context.Context, cfg *config.Config) (*backend, error) {
	be := &backend{}
	st, err := node.OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	be.closes = append(be.closes, st.Close)
	// An unmigrated or outdated schema says to run taskd migrate, as
	// every taskd command does.
	if err := st.CheckSchema(ctx); err != nil {
		be.Close()
		return nil, err
	}
	// Redis down at start is shown like Redis down later, in the error
	// bar, with what the task center holds: an operator needs tasktop
	// most during an outage.
	br, err := node.DialBroker(ctx, cfg)
	if err != nil {
		be.Close()
		return nil, err
	}
	be.closes = append(be.closes, br.Close)
	rs := st
	if cfg.MySQL.ReadDSN != "" {
		if rs, err = node.OpenReadStore(ctx, cfg); err != nil {
			be.Close()
			return nil, err
		}
		be.closes = append(be.closes, rs.Close)
	}
	be.Ops = ops.NewFromConfig(st, br, cfg)
	var queues []string
	for q := range cfg.WorkerQueues() {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	be.Loader = &Loader{Store: rs, Broker: br, Queues: queues, Configured: be.Ops.Configured,
		ConfiguredLimit: be.Ops.ConfiguredLimit, Alerts: StoredAlerts(rs)}
	return be, nil
}

// Close closes the connections, the last opened first.
func (be *backend) Close() {
	for i := len(be.closes) - 1; i >= 0; i-- {
		_ = be.closes[i]()
	}
}
