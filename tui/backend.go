package tui

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// backend is what a tasktop reads and acts through, opened from the
// configuration: tasktop and each session of tasktop serve.
type backend struct {
	Loader *Loader
	// Ops are the operator actions; each waits for the task center's
	// connection (see connect).
	Ops *actions
	// KillWait is how long a kill waits for its worker (ops.KillWaitFor).
	KillWait time.Duration

	cfg *config.Config
	br  *broker.Broker
	// changed is told after an action changed something (tasktop serve
	// refreshes its sessions' shared reads).
	changed func()

	// connecting lets one connection to the primary be tried at a time,
	// and those waiting for it give up with their context; mu guards the
	// fields, so that a try that hangs holds neither the replica's
	// connection nor Close.
	connecting chan struct{}
	mu         sync.Mutex
	ops        *ops.Ops // nil until the task center answered
	closes     []func() error
	closed     bool
	// stopPrimary ends the start's try of the primary, which may outlive
	// the start (connectAtStart); primaryDone is closed once it is over.
	stopPrimary context.CancelFunc
	primaryDone chan struct{}

	// readMu guards read, the replica the screens read from (mysql.read_dsn;
	// nil until it answered), apart from mu: a primary that hangs an action
	// does not hold the screens.
	readMu sync.Mutex
	read   *store.Store
}

// openBackend connects to Redis and the task center. What the screens
// show may come from a replica (mysql.read_dsn); actions write the
// primary. A task center that does not answer at start is shown like one
// that stops answering later: in the error bar, with what Redis holds,
// connected at the first refresh it answers. A configuration it refuses
// (a password, a database, the schema) ends the start.
func openBackend(ctx context.Context, cfg *config.Config) (*backend, error) {
	// Redis down at start is shown like Redis down later, in the error
	// bar, with what the task center holds: an operator needs tasktop
	// most during an outage.
	br, err := node.DialBroker(ctx, cfg)
	if err != nil {
		return nil, err
	}
	be := &backend{cfg: cfg, br: br, connecting: make(chan struct{}, 1), closes: []func() error{br.Close}, KillWait: ops.KillWaitFor(cfg)}
	be.Ops = &actions{be: be}
	if err := be.connectAtStart(ctx); err != nil {
		be.Close()
		return nil, err
	}
	var queues []string
	for q := range cfg.WorkerQueues() {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	be.Loader = &Loader{Broker: br, Queues: queues, Connect: be.readStore}
	be.Loader.Configured, be.Loader.ConfiguredLimit = ops.ConfiguredOf(cfg)
	be.Loader.Alerts = func(ctx context.Context) ([]Alert, error) {
		st, err := be.Loader.store(ctx)
		if err != nil {
			return nil, err
		}
		return StoredAlerts(st)(ctx)
	}
	return be, nil
}

// startWait is how long a start waits for a task center that does not
// answer before it shows the screens without it (a server that takes
// connections and never answers holds a connection up to mysql's dial
// and read timeouts, 40 s by default).
var startWait = 3 * time.Second

// connectAtStart tries the task center once, and returns the error of a
// configuration it refuses (a password, a database, the schema), which
// ends the start. A task center that has not answered within startWait
// is left to answer later: the screens show what Redis holds meanwhile,
// and say that MySQL does not answer, as when it stops answering later.
// With a replica (mysql.read_dsn) the screens read, the start waits for
// the replica alone; the primary, tried beside it, holds only the
// actions.
func (be *backend) connectAtStart(ctx context.Context) error {
	pctx, stop := context.WithCancel(ctx)
	primary := make(chan error, 1)
	be.stopPrimary, be.primaryDone = stop, make(chan struct{})
	go func() {
		defer close(be.primaryDone)
		_, err := be.connect(pctx)
		primary <- err
	}()
	if be.cfg.MySQL.ReadDSN != "" {
		if _, err := be.readStore(ctx); configErr(err) != nil {
			return err
		}
		select {
		case err := <-primary:
			return configErr(err)
		default:
			return nil
		}
	}
	wait := time.NewTimer(startWait)
	defer wait.Stop()
	select {
	case err := <-primary:
		return configErr(err)
	case <-wait.C:
		return nil
	case <-ctx.Done():
		return nil
	}
}

// configErr is err when it is a configuration's (what a retry does not
// mend), nil otherwise.
func configErr(err error) error {
	if err != nil && task.ErrorCode(err) == task.CodeConfig {
		return err
	}
	return nil
}

// connect returns the actions on the task center, connecting to it
// first if no try did yet (an unmigrated or outdated schema says to run
// taskd migrate, as every taskd command does).
func (be *backend) connect(ctx context.Context) (*ops.Ops, error) {
	select {
	case be.connecting <- struct{}{}:
		defer func() { <-be.connecting }()
	case <-ctx.Done():
		return nil, fromMySQL(fmt.Errorf("connect to mysql %s: %w", store.DSNAddr(be.cfg.MySQL.DSN), ctx.Err()))
	}
	be.mu.Lock()
	o := be.ops
	be.mu.Unlock()
	if o != nil {
		return o, nil
	}
	st, err := openChecked(ctx, node.OpenStore, be.cfg)
	if err != nil {
		return nil, err
	}
	o = ops.NewFromConfig(st, be.br, be.cfg)
	o.Changed = be.onChange
	if !be.keep(st.Close) {
		return nil, errClosed
	}
	be.mu.Lock()
	be.ops = o
	be.mu.Unlock()
	return o, nil
}

// notSent is the error of an action that never reached the task center:
// it was not done, whatever its error says.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// errClosed is a connection's that ended after its backend closed.
var errClosed = errors.New("tasktop: closed")

// keep adds a connection's close to the backend's, or closes it at once
// when the backend closed while it connected; it says whether it kept it.
func (be *backend) keep(close func() error) bool {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		_ = close()
		return false
	}
	be.closes = append(be.closes, close)
	return true
}

// openChecked opens a task center with open and checks its schema.
func openChecked(ctx context.Context, open func(context.Context, *config.Config) (*store.Store, error), cfg *config.Config) (*store.Store, error) {
	st, err := open(ctx, cfg)
	if err != nil {
		return nil, unreached(err)
	}
	if err := st.CheckSchema(ctx); err != nil {
		st.Close()
		return nil, unreached(err)
	}
	return st, nil
}

// unreached names the server of a connection's error, unless its words
// already say what to fix (a password, the schema).
func unreached(err error) error {
	if task.ErrorCode(err) == task.CodeConfig {
		return err
	}
	return fromMySQL(err)
}

// readStore is the Loader's Connect: the store the screens read. A
// replica (mysql.read_dsn) is connected to on its own, so that the
// screens show the task center while a failover leaves the primary
// unreachable; only the actions wait for the primary then.
func (be *backend) readStore(ctx context.Context) (*store.Store, error) {
	if be.cfg.MySQL.ReadDSN == "" {
		o, err := be.connect(ctx)
		if err != nil {
			return nil, err
		}
		return o.Store(), nil
	}
	be.readMu.Lock()
	defer be.readMu.Unlock()
	if be.read != nil {
		return be.read, nil
	}
	rs, err := openChecked(ctx, node.OpenReadStore, be.cfg)
	if err != nil {
		return nil, err
	}
	if !be.keep(rs.Close) {
		return nil, errClosed
	}
	be.read = rs
	return rs, nil
}

func (be *backend) onChange() {
	if be.changed != nil {
		be.changed()
	}
}

// Close closes the connections, the last opened first, once the start's
// try of the primary is over.
func (be *backend) Close() {
	if be.stopPrimary != nil {
		be.stopPrimary()
		<-be.primaryDone
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	be.closed = true
	for i := len(be.closes) - 1; i >= 0; i-- {
		_ = be.closes[i]()
	}
	be.closes = nil
}

// actions are a backend's operator actions, attributed to the process's
// user or, when as is set, to a tasktop serve session's key.
type actions struct {
	be *backend
	as *store.Actor
}

var _ Actions = (*actions)(nil)

// As returns the same actions attributed to a.
func (a *actions) As(actor store.Actor) *actions { return &actions{be: a.be, as: &actor} }

// act runs f on the task center's actions, once it answers.
func act[T any](ctx context.Context, a *actions, f func(*ops.Ops) (T, error)) (T, error) {
	o, err := a.be.connect(ctx)
	if err != nil {
		var zero T
		return zero, notSent{err}
	}
	if a.as != nil {
		o = o.As(*a.as)
	}
	return f(o)
}

func (a *actions) Retry(ctx context.Context, t ops.Target) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Retry(ctx, t) })
}

func (a *actions) Kill(ctx context.Context, t ops.Target) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Kill(ctx, t) })
}

func (a *actions) RunNow(ctx context.Context, t ops.Target) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.RunNow(ctx, t) })
}

func (a *actions) Delete(ctx context.Context, t ops.Target) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Delete(ctx, t) })
}

func (a *actions) Enable(ctx context.Context, t ops.Target) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Enable(ctx, t) })
}

func (a *actions) Disable(ctx context.Context, t ops.Target) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Disable(ctx, t) })
}

func (a *actions) Pause(ctx context.Context, q string) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Pause(ctx, q) })
}

func (a *actions) Resume(ctx context.Context, q string) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Resume(ctx, q) })
}

func (a *actions) Reshard(ctx context.Context, q string, n int) (ops.Change, error) {
	return act(ctx, a, func(o *ops.Ops) (ops.Change, error) { return o.Reshard(ctx, q, n) })
}

func (a *actions) IDs(ctx context.Context, t ops.Target) ([]int64, error) {
	return act(ctx, a, func(o *ops.Ops) ([]int64, error) { return o.IDs(ctx, t) })
}
