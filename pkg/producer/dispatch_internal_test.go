package producer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// While one submit reads the queue state, the others go on with what was
// read before; only with nothing read yet do they wait for it.
func TestRefreshWaitsOnlyForTheFirstRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inFlight := make(chan struct{})
	d := &dispatcher{reading: inFlight, readAt: time.Now().Add(-time.Hour)}
	require.NoError(t, d.refresh(ctx, nil), "a stale state serves while another submit reads")

	d = &dispatcher{reading: inFlight}
	waited := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	go func() { waited <- d.refresh(wctx, nil) }()
	select {
	case err := <-waited:
		t.Fatalf("returned before the first read ended: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	require.ErrorIs(t, <-waited, context.Canceled)
}
