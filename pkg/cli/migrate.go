package cli

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/store"
)

// Build information, stamped by the release build with -ldflags -X.
var (
	Commit = "none"
	Date   = "unknown"
)

func (a *App) migrateCmd() *cobra.Command {
	var yes, contract bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the task center schema (idempotent)",
		Long: `Apply the migrations the task center has not applied yet, in order. A
contract step (one that drops what the previous release still uses) runs
on a task center without a schema, or once every live process in the
Redis registry runs a release that knows it; else it is deferred, which
is not an error, and the output says why. --contract runs it while no
live process is older even when the registry is empty, and fails naming
the older processes otherwise (docs/upgrading.md).`,
		Example: "  taskd migrate\n  taskd -o json migrate\n  taskd migrate --contract",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.config()
			if err != nil {
				return err
			}
			wait := a.waiting("MySQL", store.DSNAddr(c.MySQL.DSN))
			st, err := node.OpenMigrationStore(cmd.Context(), c)
			wait()
			if err != nil {
				return err
			}
			defer st.Close()
			// Long steps and waits are told as they happen: on stdout
			// beside the text result, on stderr beside JSON.
			progress := a.Stdout
			if a.json() {
				progress = a.Stderr
			}
			res, err := node.Migrate(cmd.Context(), c, st, a.migrations, contract, func(line string) {
				fmt.Fprintln(progress, line)
			})
			if err != nil {
				return err
			}
			if contract && len(res.Deferred) > 0 {
				return fmt.Errorf("contract %s not applied: %s", stepNames(res.Deferred), res.Deferred[0].Reason)
			}
			v, err := st.SchemaVersion(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := node.InitCronZone(cmd.Context(), st, c, nil); err != nil {
				fmt.Fprintf(a.Stderr, "taskd: warning: %v; set the default with taskd cron timezone ZONE\n", err)
			}
			if a.json() {
				return a.printJSON(map[string]any{"applied": nonNil(res.Applied), "version": v, "deferred": nonNil(res.Deferred), "newer": nonNil(res.Newer)})
			}
			switch {
			case len(res.Newer) > 0 && len(res.Applied) == 0:
				// An older host's migrate during a rolling upgrade: nothing to do.
				fmt.Fprintf(a.Stdout, "schema version %d has migrations of a newer taskd %v, none a contract step: this taskd runs on it; upgrade it\n", v, res.Newer)
			case len(res.Applied) > 0:
				fmt.Fprintf(a.Stdout, "applied migrations %v; schema version %d\n", res.Applied, v)
			case len(res.Deferred) == 0:
				fmt.Fprintf(a.Stdout, "schema is up to date (version %d)\n", v)
			default:
				fmt.Fprintf(a.Stdout, "applied no migration; schema version %d\n", v)
			}
			for _, d := range res.Deferred {
				fmt.Fprintf(a.Stdout, "deferred contract step %s: %s\n", d.Name, d.Reason)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&contract, "contract", false,
		"run contract steps while no live process is older, even with an empty process registry (no older node runs); fail if one is older")
	neverAsks(cmd, &yes)
	return cmd
}

// stepNames names deferred contract steps: "step 0011_x.sql", "steps 0011_x.sql, 0013_y.sql".
func stepNames(ds []store.Deferred) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	if len(names) == 1 {
		return "step " + names[0]
	}
	return "steps " + strings.Join(names, ", ")
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
