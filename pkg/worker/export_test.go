package worker

import (
	"context"
	"time"

	"github.com/taskd/taskd/pkg/broker"
)

// RereadKills reads the kept kill requests now, as w does every
// killedReread.
func RereadKills(ctx context.Context, w *Worker) {
	w.kills.reread(ctx, time.Now().Add(-broker.KillKeep))
}
