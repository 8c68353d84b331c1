package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scripts/supervisor/taskd.conf works as shipped: Supervisor starts the
// node, it runs tasks, and `supervisorctl stop` drains it (SIGTERM, exit 0)
// with nothing left behind.
func TestSupervisorProgram(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("supervisord"); err != nil {
		t.Skip("supervisord is not installed (apt-get install supervisor)")
	}
	b := setup(t, "handlers:\n  hello:\n    exec: [\"true\"]\n")
	program, err := os.ReadFile("../scripts/supervisor/taskd.conf")
	require.NoError(t, err)
	conf := strings.NewReplacer(
		"/usr/bin/taskd", taskdBin,
		"/etc/taskd/taskd.yaml", b.config,
		"/var/log/taskd/taskd.log", filepath.Join(b.dir, "taskd.log"),
	).Replace(string(program))
	sock := filepath.Join(b.dir, "s.sock")
	main := "[unix_http_server]\nfile=" + sock + "\n\n[supervisord]\nnodaemon=false\nlogfile=" +
		filepath.Join(b.dir, "supervisord.log") + "\npidfile=" + filepath.Join(b.dir, "supervisord.pid") +
		"\n\n[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n" +
		"[supervisorctl]\nserverurl=unix://" + sock + "\n\n" + conf
	cfg := filepath.Join(b.dir, "supervisord.conf")
	require.NoError(t, os.WriteFile(cfg, []byte(main), 0o644))
	ctl := func(args ...string) string {
		out, _ := exec.Command("supervisorctl", append([]string{"-c", cfg}, args...)...).CombinedOutput()
		return string(out)
	}
	require.NoError(t, exec.Command("supervisord", "-c", cfg).Run())
	t.Cleanup(func() { ctl("shutdown") })

	require.Eventually(t, func() bool { return strings.Contains(ctl("status", "taskd"), "RUNNING") },
		30*time.Second, 200*time.Millisecond, "supervisor runs the node: %s", ctl("status"))
	id := strings.TrimSpace(strings.TrimPrefix(b.taskd(t, "submit", "hello"), "submitted task "))
	require.Eventually(t, func() bool { return strings.Contains(b.taskd(t, "show", id), "succeeded") },
		30*time.Second, 100*time.Millisecond)

	out := ctl("stop", "taskd")
	require.Contains(t, out, "stopped", out)
	log, err := os.ReadFile(filepath.Join(b.dir, "supervisord.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "stopped: taskd (exit status 0)", "a drained stop, not a kill")
}

// scripts/systemd/taskd.service passes systemd's own checks.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit, err := os.ReadFile("../scripts/systemd/taskd.service")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "taskd.service")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/bin/taskd", taskdBin)), 0o644))
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.TrimSpace(string(out)))
}
