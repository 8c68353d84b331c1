package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/node"
)

// Build information, stamped by the release build with -ldflags -X.
var (
	Commit = "none"
	Date   = "unknown"
)

func (a *App) migrateCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the task center schema (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.config()
			if err != nil {
				return err
			}
			st, err := node.OpenStore(cmd.Context(), c)
			if err != nil {
				return err
			}
			defer st.Close()
			applied, err := st.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			v, err := st.SchemaVersion(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := node.InitCronZone(cmd.Context(), st, c, nil); err != nil {
				fmt.Fprintf(a.Stderr, "taskd: warning: %v; set the default with taskd cron timezone ZONE\n", err)
			}
			if a.json() {
				return a.printJSON(map[string]any{"applied": nonNil(applied), "version": v})
			}
			if len(applied) == 0 {
				fmt.Fprintf(a.Stdout, "schema is up to date (version %d)\n", v)
				return nil
			}
			fmt.Fprintf(a.Stdout, "applied migrations %v; schema version %d\n", applied, v)
			return nil
		},
	}
	neverAsks(cmd, &yes)
	return cmd
}

func (a *App) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info := map[string]string{"version": node.Version, "commit": Commit, "date": Date, "go": runtime.Version()}
			if a.json() {
				return a.printJSON(info)
			}
			fmt.Fprintf(a.Stdout, "taskd %s (commit %s, built %s, %s)\n", node.Version, Commit, Date, runtime.Version())
			return nil
		},
	}
}
