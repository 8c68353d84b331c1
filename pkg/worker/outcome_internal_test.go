package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A timeout is said in the operator's words, whatever the handler wrapped
// around Go's "context deadline exceeded", and is still one.
func TestTimedOutSaysItPlainly(t *testing.T) {
	t.Parallel()
	for handler, want := range map[error]string{
		fmt.Errorf("%w (signal: terminated)", context.DeadlineExceeded):     "timed out after 10s (signal: terminated)",
		fmt.Errorf("%w (pool process 42 killed)", context.DeadlineExceeded): "timed out after 10s (pool process 42 killed)",
		fmt.Errorf(`Post "http://app/task": %w`, context.DeadlineExceeded):  `timed out after 10s: Post "http://app/task"`,
		context.DeadlineExceeded:              "timed out after 10s",
		errors.New("the handler's own words"): "timed out after 10s: the handler's own words",
	} {
		err := timedOut{after: 10 * time.Second, err: handler}
		require.Equal(t, want, err.Error())
		require.Equal(t, errors.Is(handler, context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded))
	}
}
