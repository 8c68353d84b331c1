package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) limitCmd() *cobra.Command {
	var rate, per, serial string
	var burst, maxRunning int
	var reset, yes bool
	cmd := &cobra.Command{
		Use:   "limit QUEUE",
		Short: "Show or change a queue's rate and concurrency limits, online",
		Long: `Without flags, prints the limit in force. With flags, changes it on every
node within a second: --rate N/s (also /m, /h, /d or /10s; 0 for none),
--burst N, --max-running N (0 for none), --per group|queue, --serial
on|skip|off. What is not given stays. The change is audited, and holds
until --reset, whatever the nodes' configurations say; --reset returns the
queue to its configured limit (queues.NAME.rate and the rest).`,
		Example: `  taskd limit sms
  taskd limit sms --rate 50/s --burst 10 --yes
  taskd limit reports --max-running 5 --yes
  taskd limit import --max-running 2 --per group --yes
  taskd limit sms --reset --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			var ch ops.LimitChange
			ch.Reset = reset
			if fl.Changed("rate") {
				r := limit.Rate{}
				if rate != "0" && rate != "none" && rate != "off" {
					var err error
					if r, err = limit.ParseRate(rate); err != nil {
						return err
					}
				}
				ch.Rate = &r
			}
			if fl.Changed("burst") {
				ch.Burst = &burst
			}
			if fl.Changed("max-running") {
				if maxRunning < 0 {
					return task.Invalidf("--max-running %d is negative (0 removes the bound)", maxRunning)
				}
				ch.MaxRunning = &maxRunning
			}
			if fl.Changed("per") {
				p := per
				if p == "queue" {
					p = limit.PerQueue
				}
				if p != limit.PerQueue && p != limit.PerGroup {
					return task.Invalidf("--per %q: want group or queue", per)
				}
				ch.Per = &p
			}
			if fl.Changed("serial") {
				m, err := limit.ParseSerial(serial)
				if err != nil {
					return err
				}
				ch.Serial = &m
			}
			if reset && (ch.Rate != nil || ch.Burst != nil || ch.MaxRunning != nil || ch.Per != nil || ch.Serial != nil) {
				return task.Invalidf("--reset returns to the configured limit: give it alone")
			}
			q := args[0]
			open := func() (*ops.Ops, func(), error) { return a.ops(cmd, needRedis) }
			if ch.IsZero() {
				open = func() (*ops.Ops, func(), error) { return a.readOps(cmd) } // a read: the replica alone, no Redis
			}
			o, closeFn, err := open()
			if err != nil {
				return err
			}
			defer closeFn()
			if err := o.CheckQueue(cmd.Context(), q); err != nil {
				return err
			}
			if ch.IsZero() {
				return a.showLimit(cmd, o, q)
			}
			if err := a.confirm(yes, "change the limit of queue "+q); err != nil {
				return err
			}
			c, err := o.Limit(cmd.Context(), q, ch)
			if err != nil {
				return err
			}
			return a.printChange(c)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rate, "rate", "", "tasks started per period over all nodes: 100/s, 5/m, 30/10s; 0 for none")
	fl.IntVar(&burst, "burst", 0, "tasks that may start at once after a quiet spell (default a tenth of a second's worth)")
	fl.IntVar(&maxRunning, "max-running", 0, "tasks running at once over all nodes; 0 for no bound")
	fl.StringVar(&per, "per", "", "group: the rate and max running apply to each group of tasks; queue: to the whole queue")
	fl.StringVar(&serial, "serial", "", "on: the tasks of each group run one at a time, oldest first (skip: a failed one does not hold its group); off")
	fl.BoolVar(&reset, "reset", false, "return to the configured limit")
	yesFlag(cmd, &yes)
	return cmd
}

// showLimit prints the limit in force of queue q.
func (a *App) showLimit(cmd *cobra.Command, o *ops.Ops, q string) error {
	qs, err := o.Queues(cmd.Context())
	if err != nil {
		return err
	}
	cur := store.Queue{Name: q}
	for _, r := range qs {
		if r.Name == q {
			cur = r
		}
	}
	if cur.LimitSource == "" && o.ConfiguredLimit != nil {
		if l := o.ConfiguredLimit(q); !l.IsZero() {
			cur.Limit, cur.LimitSource = l, store.LimitFromConfig
		}
	}
	if a.json() {
		return a.printJSON(map[string]any{"queue": q, "limit": cur.Limit, "limit_source": cur.LimitSource})
	}
	switch {
	case cur.Limit.IsZero():
		fmt.Fprintf(a.Stdout, "queue %s: no limit\n", q)
	default:
		fmt.Fprintf(a.Stdout, "queue %s: %s (set by %s)\n", q, cur.Limit, map[string]string{
			store.LimitFromConfig: "the configuration", store.LimitFromOperator: "an operator; --reset returns to the configuration"}[cur.LimitSource])
	}
	return nil
}
