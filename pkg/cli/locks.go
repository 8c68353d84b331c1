package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
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
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(nonNil(held))
			}
			w := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tBACKEND\tHOST\tPID\tSINCE\tTTL LEFT\tTOKEN")
			for _, h := range held {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", h.Name, h.Backend, dash(h.Host), pidText(h.PID),
					sinceText(h.Since), h.TTLLeft.Round(100*time.Millisecond), h.Token)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "all", "where to look: all, redis or mysql")
	return cmd
}

// listLocks lists the locks of backend (all, redis or mysql).
func (a *App) listLocks(ctx context.Context, backend string) ([]lock.Held, error) {
	var listers []lock.Lister
	if backend != "mysql" {
		br, err := a.openBroker(ctx)
		if err != nil {
			return nil, err
		}
		defer br.Close()
		listers = append(listers, lock.NewRedis(br.Client(), br.Keys.Prefix))
	}
	if backend != "redis" {
		st, err := a.openLockStore(ctx)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		listers = append(listers, lock.NewMySQL(st.DB()))
	}
	return lock.ListAll(ctx, listers...)
}

func pidText(pid int) string {
	if pid == 0 {
		return "-"
	}
	return strconv.Itoa(pid)
}

func sinceText(t time.Time) string { return fmtTime(&t) }
