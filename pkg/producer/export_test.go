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
