package node

import (
	"context"
	"log/slog"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Routes are the task codes this node's worker runs, with the queue it
// takes each from: the handler's queue, else the code. A code whose queue
// the worker does not consume has no route from this node.
func Routes(cfg *config.Config, reg *handler.Registry) map[string]string {
	return RoutesOf(cfg, reg.Codes())
}

// RoutesOf are the routes of codes under cfg, as Routes.
func RoutesOf(cfg *config.Config, codes []string) map[string]string {
	consumed := cfg.WorkerQueues()
	out := map[string]string{}
	for _, code := range codes {
		q := task.QueueOf(cfg.QueueFor(code), code)
		if _, ok := consumed[q]; ok {
			out[code] = q
		}
	}
	return out
}

// recordRoutes records the node's routes in the task center, so that every
// scheduler sends a task INSERTed with no queue where this worker takes
// it, whatever the scheduler's own configuration says.
func recordRoutes(ctx context.Context, st *store.Store, cfg *config.Config, reg *handler.Registry, log *slog.Logger) {
	changes, err := st.RouteRecord(ctx, cfg.Node.ID, Routes(cfg, reg))
	if err != nil {
		// Rows with a queue of their own are unaffected; the others go by
		// what other nodes recorded, else by their code.
		log.Error("record the queues of this node's task codes", "err", err)
		return
	}
	for _, c := range changes {
		log.Warn("task code moves to another queue: tasks with no queue of their own go there now (if this flips back and forth, nodes configure different queues for it)",
			"task_code", c.Code, "queue", c.Queue, "was", c.Before, "recorded_by", c.BeforeNode)
	}
}
