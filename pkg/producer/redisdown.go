package producer

import (
	"context"
	"sync/atomic"
	"time"
)

// A submit writes its task to MySQL and is done; its Redis steps (the
// queue lengths of a dispatch at once, the schedulers' wakeup) only make
// it start sooner. While Redis does not answer they must not hold every
// submit of a web request for the client's dial timeouts and retries.
const (
	// redisStepTimeout bounds each optional Redis step: generous enough
	// for a loaded host, where a step that gives up too soon would leave
	// every task to the schedulers.
	redisStepTimeout = time.Second
	// redisRest is how long the submits skip their Redis steps after one
	// failed: the schedulers' polls find the tasks meanwhile. Short, so
	// that a Redis that answers again is used again at once.
	redisRest = time.Second
)

// redisGate skips the optional Redis steps for a while after one failed.
type redisGate struct{ until atomic.Int64 } // unix nanoseconds

// open reports whether the steps are tried now.
func (g *redisGate) open() bool { return time.Now().UnixNano() >= g.until.Load() }

// failed rests the steps after err, unless the caller itself gave up.
func (g *redisGate) failed(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil {
		g.until.Store(time.Now().Add(redisRest).UnixNano())
	}
}

// redisStep runs one optional Redis step within redisStepTimeout, unless
// Redis failed lately; false when it was skipped or failed.
func (c *Client) redisStep(ctx context.Context, step func(ctx context.Context) error) (bool, error) {
	if !c.gate.open() {
		return false, nil
	}
	sctx, cancel := context.WithTimeout(ctx, redisStepTimeout)
	defer cancel()
	err := step(sctx)
	c.gate.failed(ctx, err)
	return err == nil, err
}
