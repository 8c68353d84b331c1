package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/task"
)

// abortCloseWait bounds closing a node that exits for a restart.
const abortCloseWait = 3 * time.Second

// restartOn is how a drained `taskd run` exits: 0, or on SIGHUP 75 for the
// supervisor to start it again (Supervisor and systemd do not restart a
// process that exits 0, and taskd has no reload of its own).
func restartOn(ctx context.Context) error {
	if !reloading(ctx) {
		return nil
	}
	return exitError{code: ExitRestart, msg: fmt.Sprintf("stopped on SIGHUP: exit %d, for the supervisor to start taskd again with its configuration read anew", ExitRestart)}
}

func (a *App) runCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:         "run",
		Short:       "Run the daemon: scheduler and workers (stop with SIGTERM; it drains)",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{daemon: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.config()
			if err != nil {
				return usageError{err} // exit 78 for the daemon (Execute)
			}
			log := a.logger(c)
			if c.File == "" && !config.EnvSetsAny() {
				// Nothing configured it: most likely started from the wrong
				// directory, and about to use the defaults' database.
				log.Warn(config.NoFile, "fix", config.NoFileFix)
			}
			if c.HasRole("watchdog") && !c.HasRole("worker") {
				// It watches this process's own workers: there are none.
				log.Warn("the watchdog role does nothing without the worker role in the same process", "roles", c.Node.Roles,
					"fix", "add worker to --roles, or leave watchdog out")
			}
			ctx := cmd.Context()
			// The reaper outlives the signal, to the command's end: the
			// drain still stops exec handlers, whose orphans, reparented
			// here, keep a stopped group looking alive as zombies.
			reapCtx, stopReaping := context.WithCancel(context.WithoutCancel(ctx))
			defer stopReaping()
			if err := handler.StartReaper(reapCtx); err != nil {
				log.Warn("cannot reap orphans of exec handlers; run under an init that does", "err", err)
			}
			// Deferred first, so stopped last: after the node's Close has
			// ended the handlers, the guard has nothing left to kill.
			stderr, _ := a.Stderr.(*os.File)
			guard, err := handler.StartGuard(logFormat(c, a.Stderr), stderr, log)
			if err != nil {
				log.Warn("running without the handler guard: the children of an exec handler may outlive a SIGKILLed taskd", "err", err)
			}
			defer guard.Stop()
			var starting *metrics.Server
			if c.Metrics.Addr != "" {
				// Seen while it waits for MySQL and Redis: /livez answers and
				// /metrics says taskd_monitor_up 0 until the node's own serve.
				if starting, err = metrics.ServeStarting(c.Metrics.Addr, "waiting for MySQL and Redis", log); err != nil {
					return err
				}
			}
			n, err := node.Open(ctx, c, a.Handlers, log)
			if starting != nil {
				starting.Close()
			}
			if err != nil {
				if ctx.Err() != nil {
					log.Info("stopped while waiting for dependencies", "err", err)
					return restartOn(ctx)
				}
				if task.ErrorCode(err) == task.CodeConfig {
					// Waiting cannot heal it: exit for a person to fix it,
					// with a code the shipped units do not restart on.
					return exitError{code: ExitConfig, msg: err.Error()}
				}
				return err
			}
			aborted := false
			defer func() {
				if !aborted {
					n.Close()
					return
				}
				// Exiting for a restart: a component still waiting on a hung
				// MySQL or Redis is given up after a moment, as recovery
				// elsewhere takes over its work.
				closed := make(chan struct{})
				go func() {
					n.Close()
					close(closed)
				}()
				select {
				case <-closed:
				case <-time.After(abortCloseWait):
					log.Warn("exiting with connections still busy", "waited", abortCloseWait)
				}
			}()
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
				aborted = true
				if n.Worker != nil {
					n.Worker.Abort(c.Worker.KillGrace + 2*time.Second)
				}
				return exitError{code: ee.Code, msg: err.Error()}
			}
			log.Info("shutting down: draining running tasks", "grace", c.Worker.ShutdownGrace, "cause", context.Cause(ctx).Error())
			n.Stop()
			log.Info("stopped")
			return restartOn(ctx)
		},
	}
	cmd.Flags().StringSlice("roles", nil, "roles to run, some of "+strings.Join(config.Roles, ", ")+" (default all)")
	config.BindFlag(a.v, "node.roles", cmd.Flags().Lookup("roles"))
	cmd.Flags().String("node-id", "", "node id (default: hostname)")
	config.BindFlag(a.v, "node.id", cmd.Flags().Lookup("node-id"))
	return cmd
}
