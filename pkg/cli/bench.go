package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/benchmark"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) benchCmd() *cobra.Command {
	var o benchmark.Options
	var only string
	var check bool
	var cpuProfile, memProfile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput, latency and memory against the configured MySQL and Redis",
		Long: `Runs the performance scenarios with the daemon's own code paths, each in a
database of its own (named after the configured one, with a _bench_ suffix) and
a Redis prefix of its own, both removed afterwards. Prints each figure against
its target; -o json for scripts. Scenarios: ` + strings.Join(benchmark.Scenarios, ", ") + `.
It loads the servers: do not point it at production.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if only != "" {
				for _, s := range strings.Split(only, ",") {
					if !slices.Contains(benchmark.Scenarios, s) {
						return task.Invalidf("unknown scenario %q (have %s)", s, strings.Join(benchmark.Scenarios, ", "))
					}
					o.Only = append(o.Only, s)
				}
			}
			c, err := a.config()
			if err != nil {
				return err
			}
			if err := benchmark.Preflight(cmd.Context(), c); err != nil {
				return err
			}
			if !a.json() {
				o.Progress = func(s string) { fmt.Fprintf(a.Stderr, "running %s...\n", s) }
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			var allocs *os.File // created first: a bad path fails before the run
			if memProfile != "" {
				if allocs, err = os.Create(memProfile); err != nil {
					return fmt.Errorf("memory profile: %w", err)
				}
				defer allocs.Close()
			}
			r := benchmark.Run(cmd.Context(), c, o)
			if allocs != nil {
				// Every allocation since the process started.
				if err := pprof.Lookup("allocs").WriteTo(allocs, 0); err != nil {
					return fmt.Errorf("memory profile: %w", err)
				}
			}
			if a.json() {
				if err := a.printJSON(r); err != nil {
					return err
				}
			} else {
				r.WriteTable(a.Stdout)
			}
			if len(r.Errors) > 0 {
				return exitError{code: ExitFailure, msg: fmt.Sprintf("%d scenarios failed", len(r.Errors))}
			}
			if check && r.Missed() {
				return exitError{code: ExitFailure, msg: "targets missed"}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&only, "only", "", "comma-separated scenarios to run (default all)")
	fl.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of taskd's own code to this file (go tool pprof)")
	fl.StringVar(&memProfile, "memprofile", "", "write a profile of the allocations of the whole run to this file (go tool pprof -sample_index alloc_space)")
	fl.BoolVar(&check, "check", false, "exit 1 when a target is missed")
	fl.IntVar(&o.Tasks, "tasks", 0, "burn-down size (default 100000)")
	fl.IntVar(&o.Rate, "rate", 0, "steady submissions per second (default 1000)")
	fl.DurationVar(&o.Duration, "duration", 0, "steady run length (default 10s)")
	fl.IntVar(&o.Scheduled, "scheduled", 0, "tasks due within one window (default 10000)")
	fl.DurationVar(&o.Window, "window", 0, "window of the scheduled tasks (default 10s)")
	fl.IntVar(&o.SubmitTasks, "submit-tasks", 0, "batched submissions (default 100000)")
	fl.IntVar(&o.SingleTasks, "single-tasks", 0, "single-row submissions (default 20000)")
	fl.IntVar(&o.SeedTasks, "seed-tasks", 0, "rows INSERTed without a wakeup, one every 37 ms (default 200)")
	fl.IntVar(&o.ExecTasks, "exec-tasks", 0, "exec handler runs (default 10000)")
	fl.IntVar(&o.Pool.NoopTasks, "pool-tasks", 0, "no-op PHP pool tasks (default 20000)")
	fl.IntVar(&o.Pool.RecycleTasks, "recycle-tasks", 0, "tasks of the PHP pool recycled every max_jobs (default 10000)")
	fl.IntVar(&o.LargeRows, "large-rows", 0, "rows in the task center for the large-table run (default 1000000)")
	fl.IntVar(&o.Limit.Tasks, "limit-tasks", 0, "rate_limit: tasks queued up front (default 6000)")
	fl.IntVar(&o.Limit.Rate, "limit-rate", 0, "rate_limit: the queue's rate, tasks a second (default 100)")
	fl.IntVar(&o.Limit.Burst, "limit-burst", 0, "rate_limit: the rate's burst (default 20)")
	fl.IntVar(&o.Limit.Nodes, "limit-nodes", 0, "rate_limit: nodes sharing the limit (default 3)")
	return cmd
}
