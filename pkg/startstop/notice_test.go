package startstop_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/startstop"
)

// A notice is said once its wait passed, never after its stop returned.
func TestNotice(t *testing.T) {
	t.Parallel()
	var said atomic.Int32
	stop := startstop.Notice(time.Hour, func() { said.Add(1) })
	stop()
	require.Zero(t, said.Load(), "stopped before its time")

	done := make(chan struct{})
	stop = startstop.Notice(time.Millisecond, func() { said.Add(1); close(done) })
	<-done
	stop()
	stop() // twice is fine
	require.Equal(t, int32(1), said.Load())

}
