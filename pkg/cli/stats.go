package cli

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/stats"
)

func (a *App) statsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "stats",
		Short:   "Per-queue and per-worker figures (cheap enough to poll every second)",
		Example: "  taskd stats\n  taskd -o json stats",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, closeFn, err := a.ops(cmd, needRedis)
			if err != nil {
				return err
			}
			defer closeFn()
			rs, err := a.openReadStore(cmd.Context())
			if err != nil {
				return err
			}
			defer rs.Close()
			c, _ := a.config()
			var names []string
			for q := range c.WorkerQueues() {
				names = append(names, q)
			}
			sort.Strings(names)
			s, err := stats.Collect(cmd.Context(), stats.Source{Store: rs, Broker: o.Broker(), Queues: names,
				Configured: o.Configured, ConfiguredLimit: o.ConfiguredLimit})
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(s)
			}
			w := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "QUEUE\tPENDING\tDISP\tRUN\tFAILED\tDEAD\tCANC\tBACKLOG\tDONE/MIN\tFAIL/MIN\tOK 10M\tOLDEST DUE\tSTATE\tWORKERS")
			for _, q := range s.Queues {
				rate := "-"
				if q.SuccessRate10m != nil {
					rate = fmt.Sprintf("%.1f%%", 100**q.SuccessRate10m)
				}
				state := ops.Plural(q.Shards, "shard")
				if q.Paused {
					state = "PAUSED, " + state
				}
				if !q.Limit.IsZero() {
					state += ", " + q.Limit.Short()
				}
				if q.Limited != nil {
					state += ", " + stats.LimitedText(q.Limited)
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\n", q.Name, q.Pending, q.Dispatched, q.Running,
					q.Failed, q.Dead, q.Cancelled, q.BacklogTotal(), q.ProcessedPerMin, q.FailedPerMin, rate, oldestDue(q.OldestDueSeconds), state, q.LiveWorkers)
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "WORKER\tNODE\tHOST\tPID\tBEAT AGE\tDONE/MIN\tBUSY\tRUNNING\tQUEUES")
			for _, wk := range s.Workers {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.1fs\t%d\t%d\t%s\t%s\n", wk.ID, dash(wk.Node), wk.Host, wk.PID, wk.HeartbeatAgeSeconds,
					wk.ProcessedPerMin, wk.Busy, oneLine(joinIDs(wk.Current), 40), strings.Join(wk.Queues, ","))
			}
			return w.Flush()
		},
	}
}

// oldestDue is the OLDEST DUE cell: "-" when no task is due, as tasktop
// shows it, not a wait of 0.0s.
func oldestDue(seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", seconds)
}
