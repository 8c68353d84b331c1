package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/benchmark"
	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/testenv"
)

// taskd bench runs the scenarios it is told to, prints JSON with the
// figures against their targets, exits 1 with --check when one is missed,
// and refuses an unknown scenario as bad usage.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	cfg := writeConfig(t, env.ConfigYAML(""))

	r := runCLI(t, cfg, "", "-o", "json", "bench", "--only", "submit", "--submit-tasks", "500", "--single-tasks", "50")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var rep struct {
		Targets []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
			Met   bool    `json:"met"`
		} `json:"targets"`
		Figures     map[string]float64 `json:"figures"`
		Environment map[string]string  `json:"environment"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, strconv.Itoa(benchmark.GCPercent()), rep.Environment["gogc"], "the collector's target the figures were measured at")
	require.Len(t, rep.Targets, 2)
	require.Positive(t, rep.Figures["submit_batch_tasks_per_s"])
	require.Positive(t, rep.Figures["submit_single_tasks_per_s"])
	require.NotContains(t, rep.Figures, "burn_down_tasks_per_s", "only the scenario asked for runs")

	// A burn-down of 20 tasks cannot reach 18,000 tasks/s (starting the
	// node alone takes longer): a missed target, so --check fails.
	// With a CPU profile and one of the allocations, for go tool pprof
	// (gzipped protobuf).
	prof, mem := filepath.Join(t.TempDir(), "cpu.pprof"), filepath.Join(t.TempDir(), "mem.pprof")
	r = runCLI(t, cfg, "", "bench", "--check", "--only", "burn_down", "--tasks", "20", "--cpuprofile", prof, "--memprofile", mem)
	require.Equal(t, cli.ExitFailure, r.code, "stdout %s stderr %s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "MISSED")
	require.Contains(t, r.stderr, "targets missed")
	raw, err := os.ReadFile(prof)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(raw, []byte{0x1f, 0x8b}), "a pprof profile")
	raw, err = os.ReadFile(mem)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(raw, []byte{0x1f, 0x8b}), "a pprof profile")

	r = runCLI(t, cfg, "", "bench", "--only", "burn_down", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir"))
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "cpu profile")
	r = runCLI(t, cfg, "", "bench", "--only", "burn_down", "--memprofile", filepath.Join(t.TempDir(), "no", "such", "dir"))
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "memory profile")

	r = runCLI(t, cfg, "", "bench", "--only", "nope")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, `unknown scenario "nope"`)
}

// What would fail every scenario alike is said once, in one line, before
// any runs: an account that may use the task center's database but not
// create the bench's own printed an empty table and the same error for
// each scenario, and a wrong password the hint of a password changed
// under a running process.
func TestBenchSaysOnceWhatFailsEveryScenario(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	dsn := env.Account(t, "ALL")
	cfg := writeConfig(t, env.ConfigYAML(""))
	r := runCLI(t, cfg, "", "--mysql-dsn", dsn, "bench", "--only", "submit,idle")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Empty(t, r.stdout, "no table")
	require.Contains(t, r.stderr, "Access denied for user")
	require.Contains(t, r.stderr, "taskd bench makes a database of its own for each scenario and drops it after; GRANT ALL ON `"+env.Database+`\_bench\_%`+"`.* to the account of mysql.dsn")

	wrong, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	wrong.Passwd = "wrong"
	r = runCLI(t, cfg, "", "--mysql-dsn", wrong.FormatDSN(), "bench", "--only", "submit,idle")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Empty(t, r.stdout)
	require.Regexp(t, `: fix the user or password in mysql.dsn \(from flag --mysql-dsn\)\n$`, r.stderr)
}
