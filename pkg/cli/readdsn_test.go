package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// With mysql.read_dsn set, list, show and stats read the replica while
// submit writes the primary. A second private database stands in for the
// replica, so which one a command read is plain from its output.
func TestReadDSNServesReads(t *testing.T) {
	t.Parallel()
	primary := testenv.New(t)
	replica := testenv.New(t)
	replica.Exec(t, `INSERT INTO task_center (task_code, payload) VALUES ('only_on_replica', '{}')`)
	cfg := writeConfig(t, strings.Replace(primary.ConfigYAML(handlersYAML), "mysql:\n", "mysql:\n  read_dsn: \""+replica.DSN+"\"\n", 1))

	r := runCLI(t, cfg, "", "submit", "hello")
	require.Zero(t, r.code, r.stderr)
	require.Equal(t, 1, primary.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'hello'`), "submit writes the primary")
	require.Zero(t, replica.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'hello'`))

	r = runCLI(t, cfg, "", "list")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "only_on_replica")
	require.NotContains(t, r.stdout, "hello")
	r = runCLI(t, cfg, "", "show", "1")
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "only_on_replica")
	r = runCLI(t, cfg, "", "-o", "json", "stats")
	require.Zero(t, r.code, r.stderr)
}
