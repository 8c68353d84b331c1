package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/doctor"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
)

func (a *App) doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration and what it points at: MySQL, Redis, handlers, queues, nodes",
		Long: `Check what a deployment needs, one line per check: ok, warn or fail, with
what to do. Exit 0 when nothing failed (warnings allowed), 1 otherwise:
run it after every configuration change and in deploy pipelines.`,
		Example: "  taskd doctor\n  taskd --config /etc/taskd/taskd.yaml -o json doctor",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep *doctor.Report
			c, err := a.config()
			if err != nil {
				rep = doctor.ConfigFailed(err)
			} else {
				o := doctor.Options{OpenReadStore: func(ctx context.Context) (*store.Store, error) { return node.OpenReadStore(ctx, c) }}
				rep = doctor.Run(cmd.Context(), c, o,
					func(ctx context.Context) (*store.Store, error) { return node.OpenStore(ctx, c) },
					func(ctx context.Context) (*broker.Broker, error) { return node.OpenBroker(ctx, c) })
			}
			if a.json() {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				var statusW, nameW int
				for _, ch := range rep.Checks {
					statusW, nameW = max(statusW, len(ch.Status)), max(nameW, len(ch.Name))
				}
				width := a.width()
				for _, ch := range rep.Checks {
					line := ch.Detail
					if ch.Fix != "" {
						line += "; fix: " + ch.Fix
					}
					fmt.Fprintf(a.Stdout, "%-*s %-*s %s\n", statusW, ch.Status, nameW, ch.Name, hanging(line, statusW+nameW+2, width))
				}
				fmt.Fprintf(a.Stdout, "doctor: %d ok, %s, %s\n", rep.Counts[doctor.OK],
					ops.Plural(rep.Counts[doctor.Warn], "warning"), ops.Plural(rep.Counts[doctor.Fail], "failure"))
			}
			if !rep.OK {
				return exitError{code: ExitFailure}
			}
			return nil
		},
	}
}
