package producer

import (
	"context"

	"github.com/taskd/taskd/pkg/task"
)

// SetPush replaces the push after the commit of tasks dispatched at once,
// so that tests can fail it.
func SetPush(c *Client, push func(ctx context.Context, msgs []*task.Message) ([]*task.Message, error)) {
	c.disp.push = push
}

// Joined says how many Submit calls wait for a shared write, whether one
// is in flight, and how many INSERTs the calls tried.
func Joined(c *Client) (waiting int, writing bool, writes int64) {
	c.join.mu.Lock()
	defer c.join.mu.Unlock()
	return len(c.join.waiting), c.join.writing, c.join.writes.Load()
}
