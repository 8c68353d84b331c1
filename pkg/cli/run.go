package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) runCmd() *cobra.Command {
	var roles []string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: scheduler and workers (stop with SIGTERM; it drains)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("roles") {
				a.v.Set("node.roles", roles)
			}
			c, err := a.config()
			if err != nil {
				return err
			}
			log := a.logger(c)
			ctx := cmd.Context()
			if err := handler.StartReaper(ctx); err != nil {
				log.Warn("cannot reap orphans of exec handlers; run under an init that does", "err", err)
			}
			n, err := node.Open(ctx, c, a.Handlers, log)
			if err != nil {
				if ctx.Err() != nil {
					log.Info("stopped while waiting for dependencies", "err", err)
					return nil
				}
				if task.ErrorCode(err) == task.CodeConfig {
					// Waiting cannot heal it: exit for a person to fix it,
					// with a code the shipped units do not restart on.
					return exitError{code: ExitConfig, msg: err.Error()}
				}
				return err
			}
			defer n.Close()
			if err := n.Start(ctx); err != nil {
				return fmt.Errorf("start: %w", err)
			}
			select {
			case <-ctx.Done():
			case err := <-n.Fatal():
				// The watchdog gave up on this process: withdraw its
				// heartbeat so recovery elsewhere takes its tasks now, kill
				// running handlers, and exit for the supervisor to restart.
				var ee *node.ExitError
				errors.As(err, &ee)
				log.Error("exiting for a restart", "exit_code", ee.Code, "reason", ee.Reason)
				if n.Worker != nil {
					n.Worker.Abort(c.Worker.KillGrace + 2*time.Second)
				}
				return exitError{code: ee.Code, msg: err.Error()}
			}
			log.Info("shutting down: draining running tasks", "grace", c.Worker.ShutdownGrace)
			n.Stop()
			log.Info("stopped")
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&roles, "roles", nil, "roles to run: scheduler, worker, recovery, retention (default all)")
	cmd.Flags().String("node-id", "", "node id (default: hostname)")
	a.v.BindPFlag("node.id", cmd.Flags().Lookup("node-id"))
	return cmd
}
