package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) locksCmd() *cobra.Command {
	var backend string
	cmd := &cobra.Command{
		Use:   "locks",
		Short: "List the held locks: holder host and pid, since, TTL left, token",
		Long: `List the locks held now, in Redis and in MySQL (table task_lock): the
locks of "taskd lock" and those of the daemons' singular duties (alerts,
retention). TOKEN is the fencing token of the holder's acquisition; SINCE is
the server's clock.`,
		Example: `  taskd locks
  taskd locks --backend mysql -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if backend != "all" && backend != "redis" && backend != "mysql" {
				return task.Invalidf("--backend must be all, redis or mysql, not %q", backend)
			}
			held, err := a.listLocks(cmd.Context(), backend)
			if held == nil {
				return err
			}
			// One backend answered: its locks, then why the other is
			// missing (exit 1), as `stats` does without Redis.
			if a.json() {
				if perr := a.printJSON(nonNil(held)); perr != nil {
					return perr
				}
				return err
			}
			defer func() {
				if err != nil {
					fmt.Fprintf(a.Stderr, "taskd: warning: %v; only the other backend's locks are listed\n", err)
				}
			}()
			// Narrow: TOKEN, BACKEND, PID go first.
			g := newGrid(-1, []int{6, 1, 3}, "NAME", "BACKEND", "HOST", "PID", "SINCE", "TTL LEFT", "TOKEN")
			for _, h := range held {
				g.add(h.Name, h.Backend, dash(h.Host), pidText(h.PID), sinceText(h.Since), h.TTLLeft.Round(100*time.Millisecond), h.Token)
			}
			if ferr := g.write(a.Stdout, a.width()); ferr != nil {
				return ferr
			}
			if err != nil {
				return exitError{code: ExitFailure}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "all", "where to look: all, redis or mysql")
	return cmd
}

// listLocks lists the locks of backend (all, redis or mysql). With all,
// a backend that cannot be reached leaves the other's locks listed
// (held not nil) beside the error that says which.
func (a *App) listLocks(ctx context.Context, backend string) ([]lock.Held, error) {
	var listers []lock.Lister
	var missing error
	if backend != "mysql" {
		br, err := a.openBroker(ctx)
		if err != nil && backend != "all" {
			return nil, err
		}
		if err != nil {
			missing = fmt.Errorf("Redis: %w", err)
		} else {
			defer br.Close()
			listers = append(listers, lock.NewRedis(br.Client(), br.Keys.Prefix))
		}
	}
	if backend != "redis" {
		st, err := a.openLockStore(ctx)
		if err != nil && backend != "all" {
			return nil, err
		}
		if err != nil && missing != nil {
			return nil, fmt.Errorf("%w; MySQL: %w", missing, err)
		}
		if err != nil {
			missing = fmt.Errorf("MySQL: %w", err)
		} else {
			defer st.Close()
			listers = append(listers, lock.NewMySQL(st.DB()))
		}
	}
	held, err := lock.ListAll(ctx, listers...)
	if err != nil {
		return nil, err
	}
	return nonNil(held), missing
}

func pidText(pid int) string {
	if pid == 0 {
		return "-"
	}
	return strconv.Itoa(pid)
}

func sinceText(t time.Time) string { return fmtTime(&t) }
