package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// supervise runs supervisord on program (a file of scripts/supervisor/ with
// its paths replaced) and returns a supervisorctl function; supervisord is
// shut down when the test ends.
func supervise(t *testing.T, b *testBundle, program string, paths map[string]string) func(args ...string) string {
	t.Helper()
	needTool(t, "supervisor")
	text, err := os.ReadFile(filepath.Join("../scripts/supervisor", program))
	require.NoError(t, err)
	conf := string(text)
	for from, to := range paths {
		require.Contains(t, conf, from, "%s names %s", program, from)
		conf = strings.ReplaceAll(conf, from, to)
	}
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
	out, err := exec.Command("supervisord", "-c", cfg).CombinedOutput()
	require.NoError(t, err, "supervisord: %s", out)
	t.Cleanup(func() { ctl("shutdown") })
	return ctl
}

// superviseTaskd runs scripts/supervisor/taskd.conf on b's configuration,
// logging to taskd.log in b's directory.
func superviseTaskd(t *testing.T, b *testBundle) func(args ...string) string {
	t.Helper()
	return supervise(t, b, "taskd.conf", map[string]string{
		"/usr/bin/taskd":           taskdBin,
		"/etc/taskd/taskd.yaml":    b.config,
		"/var/log/taskd/taskd.log": filepath.Join(b.dir, "taskd.log"),
	})
}

// scripts/supervisor/taskd.conf works as shipped: Supervisor starts the
// node, it runs tasks, and `supervisorctl stop` drains it (SIGTERM, exit 0)
// with nothing left behind.
func TestSupervisorProgram(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  hello:\n    exec: [\"true\"]\n")
	ctl := superviseTaskd(t, b)

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

// scripts/supervisor/taskd-groups.conf works as shipped: one scheduler
// program and four worker-only processes of the email group, each with its
// own node id; the workers run the group's tasks, and every process drains
// and exits 0 when the group is stopped.
func TestSupervisorGroups(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  send_email:\n    exec: [\"sh\", \"-c\", \"echo sent\"]\n")
	ctl := supervise(t, b, "taskd-groups.conf", map[string]string{
		"/usr/bin/taskd":        taskdBin,
		"/etc/taskd/taskd.yaml": b.config,
		"/etc/taskd/email.yaml": b.config,
		"/var/log/taskd/":       b.dir + "/",
	})
	workers := []string{"taskd-worker-email_00", "taskd-worker-email_01", "taskd-worker-email_02", "taskd-worker-email_03"}
	require.Eventually(t, func() bool {
		status := ctl("status")
		return strings.Count(status, "RUNNING") == 5 && strings.Contains(status, "taskd-scheduler")
	}, 30*time.Second, 200*time.Millisecond, "supervisor runs a scheduler and four workers: %s", ctl("status"))
	for _, w := range workers {
		require.Contains(t, ctl("status"), "taskd-worker-email:"+w)
	}

	for range 20 {
		b.taskd(t, "submit", "send_email", "--payload", `{"to":"a@example.com"}`)
	}
	b.waitCount(t, 20, 30*time.Second, "SELECT COUNT(*) FROM task_center WHERE status = 3")
	host, err := os.Hostname()
	require.NoError(t, err)
	var nodes []string
	rows, err := b.env.Store.DB().Query("SELECT DISTINCT node FROM task_run")
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		nodes = append(nodes, n)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.NotEmpty(t, nodes)
	for _, n := range nodes {
		require.Regexp(t, "^"+regexp.QuoteMeta(host)+"-email-0[0-3]$", n, "worker node ids come from process_num")
	}

	out := ctl("stop", "all")
	require.Equal(t, 5, strings.Count(out, "stopped"), out)
	log, err := os.ReadFile(filepath.Join(b.dir, "supervisord.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "stopped: taskd-scheduler (exit status 0)")
	for _, w := range workers {
		require.Contains(t, string(log), "stopped: "+w+" (exit status 0)", "a drained stop, not a kill")
	}
}

// scripts/systemd/taskd.service and tasktop-serve.service pass systemd's
// own checks.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	tasktop := buildTasktop(t)
	for _, name := range []string{"taskd.service", "tasktop-serve.service"} {
		unit, err := os.ReadFile("../scripts/systemd/" + name)
		require.NoError(t, err)
		text := strings.NewReplacer("/usr/bin/taskd", taskdBin, "/usr/bin/tasktop", tasktop).Replace(string(unit))
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
		require.Empty(t, strings.TrimSpace(string(out)), name)
	}
}

// scripts/supervisor/tasktop-serve.conf works as shipped: Supervisor
// starts tasktop serve, a key logs in, and `supervisorctl stop` closes
// its session with a message and exits 0.
func TestSupervisorServeProgram(t *testing.T) {
	t.Parallel()
	op := newKey(t, "role=operator", "otto@laptop")
	port := testenv.FreePort(t)
	b := setup(t, fmt.Sprintf("tasktop:\n  serve:\n    listen: \"127.0.0.1:%d\"\n    host_key: %%DIR%%/host_ed25519\n"+
		"    authorized_keys: %%DIR%%/tasktop_keys\n", port))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "tasktop_keys"), []byte(op.line+"\n"), 0o644))
	ctl := supervise(t, b, "tasktop-serve.conf", map[string]string{
		"/usr/bin/tasktop":                 buildTasktop(t),
		"/etc/taskd/taskd.yaml":            b.config,
		"/var/log/taskd/tasktop-serve.log": filepath.Join(b.dir, "serve.log"),
	})
	require.Eventually(t, func() bool { return strings.Contains(ctl("status", "tasktop-serve"), "RUNNING") },
		30*time.Second, 200*time.Millisecond, "supervisor runs tasktop serve: %s", ctl("status"))
	sb := &serveBundle{testBundle: b, addr: "127.0.0.1:" + strconv.Itoa(port), serve: &daemon{log: filepath.Join(b.dir, "serve.log")}}
	require.Eventually(t, func() bool {
		for _, line := range sb.logLines(t) {
			if line["msg"] == "tasktop serve host key" {
				sb.hostKey, _ = line["fingerprint"].(string)
			}
		}
		return sb.hostKey != ""
	}, 30*time.Second, 100*time.Millisecond)
	term := openTerm(t, sb.login(t, op), 100, 30)
	term.waitFor("[1 Queues]")

	out := ctl("stop", "tasktop-serve")
	require.Contains(t, out, "stopped", out)
	require.Equal(t, 1, term.closed(10*time.Second))
	require.Contains(t, term.errText(), "tasktop serve is stopping")
	log, err := os.ReadFile(filepath.Join(b.dir, "supervisord.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "stopped: tasktop-serve (exit status 0)", "a graceful stop, not a kill")
}

// The shipped program restarts a node that crashed (a Go crash exits 2:
// here SIGQUIT's stack dump) and one that exits 75 on SIGHUP, a reload.
// Exit 2 was listed as expected, for bad configuration, so a crashed node
// stayed down; a HUP drained the node and exited 0, which left it down too.
func TestSupervisorRestartsACrashAndAHangup(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  hello:\n    exec: [\"true\"]\n")
	ctl := superviseTaskd(t, b)
	running := func(not string) string {
		var pid string
		require.Eventually(t, func() bool {
			pid = strings.TrimSpace(ctl("pid", "taskd"))
			return strings.Contains(ctl("status", "taskd"), "RUNNING") && pid != "0" && pid != not
		}, 40*time.Second, 200*time.Millisecond, "supervisor runs the node: %s", ctl("status"))
		return pid
	}
	for _, sig := range []struct{ name, exit string }{{"HUP", "exit status 75; not expected"}, {"QUIT", "exit status 2; not expected"}} {
		pid := running("")
		// Past startsecs, so that the exit is read against exitcodes.
		time.Sleep(5500 * time.Millisecond)
		out := ctl("signal", sig.name, "taskd")
		require.Contains(t, out, "signalled", out)
		running(pid)
		log, err := os.ReadFile(filepath.Join(b.dir, "supervisord.log"))
		require.NoError(t, err)
		require.Contains(t, string(log), "exited: taskd ("+sig.exit+")", "%s", log)
	}
}

// The shipped program gives up on a node that exits with EX_CONFIG (here:
// no schema) after a few starts, instead of restarting it in a loop.
func TestSupervisorGivesUpOnExConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  hello:\n    exec: [\"true\"]\n")
	b.env.Exec(t, `DROP TABLE taskd_schema`)
	ctl := superviseTaskd(t, b)
	require.Eventually(t, func() bool { return strings.Contains(ctl("status", "taskd"), "FATAL") },
		40*time.Second, 200*time.Millisecond, "supervisor gives up: %s", ctl("status"))
	log, err := os.ReadFile(filepath.Join(b.dir, "supervisord.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "exited: taskd (exit status 78", "%s", log)
	require.LessOrEqual(t, strings.Count(string(log), "spawned: 'taskd'"), 4, "at most startretries+1 starts: %s", log)
	out, err := os.ReadFile(filepath.Join(b.dir, "taskd.log"))
	require.NoError(t, err)
	require.Contains(t, string(out), "taskd: the task center has no schema: run `taskd migrate`")
}

// The shipped unit restarts a crashed (2) or unhealthy (75) node, but not
// one that exits on an error only a person fixes (78).
func TestSystemdUnitDoesNotRestartOnExConfig(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("../scripts/systemd/taskd.service")
	require.NoError(t, err)
	settings := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = v
		}
	}
	require.Equal(t, "on-failure", settings["Restart"])
	require.Equal(t, []string{"78"}, strings.Fields(settings["RestartPreventExitStatus"]))
}
