package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

var (
	tasktopOnce sync.Once
	tasktopBin  string
	tasktopErr  error
)

// buildTasktop builds the tasktop binary once, next to taskd.
func buildTasktop(t *testing.T) string {
	t.Helper()
	tasktopOnce.Do(func() {
		tasktopBin = filepath.Join(filepath.Dir(taskdBin), "tasktop")
		out, err := exec.Command("go", "build", "-o", tasktopBin, "github.com/taskd/taskd/cmd/tasktop").CombinedOutput()
		if err != nil {
			tasktopErr = err
			t.Logf("build tasktop: %s", out)
		}
	})
	require.NoError(t, tasktopErr)
	return tasktopBin
}

// screen is a tmux session of its own (a private server socket) running
// one program in a 120×40 pane.
type screen struct {
	t        *testing.T
	socket   string
	exitFile string // holds the program's exit code once it ended
}

func newScreen(t *testing.T, argv ...string) *screen {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (scripts/test-tools.sh tmux)")
	}
	s := &screen{t: t, socket: "tasktop-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		exitFile: filepath.Join(t.TempDir(), "exit")}
	// The program's exit code goes to a file: tmux may report a pane dead
	// without ever reporting its status.
	wrap := []string{"sh", "-c", `"$@"; echo $? > "` + s.exitFile + `"`, "sh"}
	args := append([]string{"-L", s.socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-s", "t", "--"},
		append(wrap, argv...)...)
	out, err := exec.Command("tmux", args...).CombinedOutput()
	require.NoError(t, err, "tmux: %s", out)
	// remain-on-exit keeps the pane after the program ends, so its last
	// screen and exit can be read.
	s.tmux("set-option", "-t", "t", "remain-on-exit", "on")
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	return s
}

// taskd stats in a real terminal of 80 columns (an SSH session) fits it:
// the width comes from the terminal itself.
func TestStatsFitsTheTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	// A row as a seed-style producer writes it, due in an hour: one
	// queue, its counts all 0 but PENDING.
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('hello', '{}', NOW(3) + INTERVAL 1 HOUR)`)
	s := newScreen(t, "sh", "-c", `stty cols 80 rows 24 && "$0" --config "$1" stats && sleep 60`, taskdBin, b.config)
	scr := s.waitFor("hidden to fit 80 columns: ", "WORKER")
	for _, line := range strings.Split(scr, "\n") {
		require.LessOrEqual(t, uniseg.StringWidth(strings.TrimRight(line, " ")), 80, "%q", line)
	}
	// Nothing waits or runs: the counts that are 0 on every queue make
	// room, and the line under the table says so.
	require.Regexp(t, `(?m)^QUEUE +PENDING +`, scr)
	require.Regexp(t, `(?m)^hello +1 +`, scr)
	require.Contains(t, scr, "hidden to fit 80 columns: 0 in every row: ")
}

func (s *screen) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	require.NoError(s.t, err, "tmux %v: %s", args, out)
	return string(out)
}

// keys sends tmux key names (Enter, Right, ...) or single characters,
// one frame apart as a person types. Escape goes through escape.
func (s *screen) keys(keys ...string) {
	s.t.Helper()
	for _, k := range keys {
		if strings.EqualFold(k, "Escape") || k == "\x1b" {
			s.t.Fatalf("keys(%q): send Escape with escape, which waits for what it leads to", keys)
		}
		s.tmux("send-keys", "-t", "t", k)
		time.Sleep(50 * time.Millisecond) // a person's typing: tmux hands keys to the real program one by one
	}
}

// keyShows sends key and waits until the screen shows want. A key the
// terminal lost (seen under load: the screen unchanged seconds later, with
// no trace of it) is sent once more, but only while the screen shows no
// sign of its effect: a key that arrives late and is then sent again
// would act twice and fail the wait.
func (s *screen) keyShows(key, want, sign string) {
	s.t.Helper()
	s.keys(key)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if strings.Contains(s.capture(), want) {
			return
		}
	}
	if screen := s.capture(); !strings.Contains(screen, sign) {
		s.t.Logf("%s had no effect in 5 s; sending it again:\n%s", key, screen)
		s.keys(key)
	}
	s.waitFor(want)
}

// escape sends Escape and waits until the screen shows every one of want,
// the state it leads to, so that the next key is read on its own: a key
// that reaches the program in the same read as the ESC before it is read
// as that key with alt, however long the test paused between them (a
// loaded machine delays the read). want must not all be on the screen
// already, or the wait would prove nothing.
func (s *screen) escape(want ...string) {
	s.t.Helper()
	before := s.capture()
	shown := true
	for _, w := range want {
		shown = shown && strings.Contains(before, w)
	}
	if shown {
		s.t.Fatalf("escape: the screen shows %q before Escape:\n%s", want, before)
	}
	s.tmux("send-keys", "-t", "t", "Escape")
	s.waitFor(want...)
}

// text types s literally.
func (s *screen) text(text string) {
	s.t.Helper()
	s.tmux("send-keys", "-t", "t", "-l", text)
}

func (s *screen) capture() string { return s.tmux("capture-pane", "-p", "-t", "t") }

// waitFor polls the screen until it shows every one of want.
func (s *screen) waitFor(want ...string) string {
	s.t.Helper()
	var last string
	// Polls the tmux pane of a real process.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		last = s.capture()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(last, w)
		}
		if ok {
			return last
		}
	}
	s.t.Fatalf("the screen does not show %q:\n%s", want, last)
	return ""
}

// TestTasktop drives the built tasktop in tmux against a running daemon:
// it navigates, filters, opens a task, retries a dead task, kills a
// running one, pauses and reshards a queue, and checks the task center
// after each action.
func TestTasktop(t *testing.T) {
	t.Parallel()
	bin := buildTasktop(t)
	b := setup(t, `handlers:
  hello: { exec: ["sh", "-c", "echo hello"] }
  fail: { exec: ["sh", "-c", "echo boom >&2; exit 3"] }
  sleep: { exec: ["sleep", "300"] }
`)
	b.startDaemon(t, "node-a")
	id := func(out string) string { return strings.TrimPrefix(strings.TrimSpace(out), "submitted task ") }
	dead := id(b.taskd(t, "submit", "fail", "--payload", `{"to":"a@example.com"}`, "--max-retry", "0"))
	running := id(b.taskd(t, "submit", "sleep", "--payload", `{}`))
	b.taskd(t, "submit", "hello", "--payload", `{}`)
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 5`, dead)
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2`, running)

	s := newScreen(t, bin, "--config", b.config, "--refresh", "500ms")
	s.waitFor("1 node up", "[1 Queues]", "fail", "hello", "sleep")

	// Tasks, filtered to the dead ones, then the dead task's detail.
	s.keys("3")
	s.waitFor("[3 Tasks]", dead, running)
	s.keys("/")
	s.text("dead")
	s.keys("Enter")
	scr := s.waitFor("status:dead", dead)
	require.NotContains(t, scr, " "+running+" running", "the filter hides the running task")
	s.keys("Enter")
	s.waitFor("Task "+dead+"  dead", "Payload", `"to": "a@example.com"`, "exit status 3: boom")

	// Retry asks too, naming the task; the task runs again (and dies again).
	s.keys("r")
	s.waitFor("Retry task " + dead + "?")
	s.keys("y")
	s.waitFor("retry: 1 of 1 task retried (" + dead + ")")
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND attempt = 2`, dead)
	b.waitCount(t, 1, 5*time.Second, `SELECT COUNT(*) FROM task_audit WHERE action = 'retry' AND target = ?`, "tasks "+dead)

	// Kill asks, Cancel first: enter alone changes nothing.
	s.escape("status:dead")              // back to the list, still filtered
	s.escape(" " + running + " running") // the filter cleared
	s.keys("/")
	s.text("running")
	s.keys("Enter")
	s.waitFor("status:running", running)
	s.keys("x")
	s.waitFor("Kill task " + running + "?")
	s.keys("Enter")
	s.waitFor("cancelled: nothing changed")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2`, running))
	s.keys("x")
	s.waitFor("Kill task " + running + "?")
	s.keys("Right", "Enter")
	s.waitFor("kill: 1 of 1 task killed (" + running + ")")
	b.waitCount(t, 1, 5*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 6`, running)

	// Pause the hello queue, then reshard it to 3 shards.
	s.keys("1", "/")
	s.text("hello")
	s.keys("Enter", "p")
	s.waitFor("Pause queue hello?")
	s.keys("y")
	s.waitFor("pause: queue hello paused", "PAUSED")
	b.waitCount(t, 1, 5*time.Second, `SELECT COUNT(*) FROM task_queue WHERE name = 'hello' AND paused = 1`)
	s.keys("S")
	s.waitFor("Shards for queue hello (now 1, 1-256):")
	s.text("3")
	s.keys("Enter")
	s.waitFor("Reshard queue hello from 1 to 3 shards?")
	s.keys("y")
	s.waitFor("reshard: queue hello shards 1 -> 3")
	b.waitCount(t, 1, 5*time.Second, `SELECT COUNT(*) FROM task_queue WHERE name = 'hello' AND shards = 3`)
	require.Equal(t, 4, b.env.Count(t, `SELECT COUNT(*) FROM task_audit`), "retry, kill, pause, reshard")

	// q at the top asks, y quits, and the program exits 0.
	s.keys("q")
	s.waitFor("Quit tasktop?")
	s.keys("y")
	var status []byte
	// Polls the tmux pane of a real process.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if status, err = os.ReadFile(s.exitFile); err == nil && len(status) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "tasktop did not exit on q:\n%s", s.capture())
	}
	require.Equal(t, "0", strings.TrimSpace(string(status)))
}

// An operator paged because MySQL is down opens tasktop: it starts, says
// MySQL does not answer, and shows what Redis holds (the node, its
// workers, the queues' backlogs). Once MySQL answers where the
// configuration says, the same screen connects and acts.
func TestTasktopMySQLDown(t *testing.T) {
	t.Parallel()
	bin := buildTasktop(t)
	b := setup(t, `handlers:
  hello: { exec: ["true"] }
`)
	b.startDaemon(t, "node-a")
	cfg, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	mysqlAddr := cfg.Addr
	cfg.Addr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) // nothing listens there yet
	s := newScreen(t, bin, "--config", b.config, "--refresh", "500ms", "--mysql-dsn", cfg.FormatDSN())
	s.waitFor("MYSQL DOWN · 1 node up", "✖ MySQL: connect to mysql "+cfg.Addr, "connection refused", "Redis's figures alone", "hello")
	s.keys("2")
	s.waitFor("[2 Workers]", "node-a")
	s.keys("1", "p")
	s.waitFor("Pause queue hello?")
	s.keys("y")
	s.waitFor("connection refused")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_queue WHERE paused = 1`))

	testenv.NewFreezeProxyOn(t, cfg.Addr, mysqlAddr)
	s.waitFor("1 node up · 1/1 workers · waiting 0")
	s.keys("p")
	s.waitFor("Pause queue hello?")
	s.keys("y")
	s.waitFor("pause: queue hello paused", "PAUSED")
	b.waitCount(t, 1, 5*time.Second, `SELECT COUNT(*) FROM task_queue WHERE name = 'hello' AND paused = 1`)
}

// TestTasktopIncident drives the built tasktop in tmux through an
// incident: the sequences that once made a key act on tasks the operator
// could not see, and the triage of many tasks at once. Every effect is
// checked in the task center.
func TestTasktopIncident(t *testing.T) {
	t.Parallel()
	bin := buildTasktop(t)
	const timings = `worker:
  heartbeat_interval: 1s
  heartbeat_ttl: 3s
recovery:
  interval: 1s
`
	b := setup(t, timings+`handlers:
  later: { exec: ["true"] }
  slow: { exec: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"] }
`)
	// Five tasks due in 30 minutes: nothing runs them meanwhile.
	var ids []string
	for range 5 {
		out := b.taskd(t, "submit", "later", "--delay", "30m")
		ids = append(ids, strings.TrimPrefix(strings.TrimSpace(out), "submitted task "))
	}
	newest, second, third := ids[4], ids[3], ids[2]

	s := newScreen(t, bin, "--config", b.config, "--refresh", "500ms")
	s.waitFor("[1 Queues]", "later")

	// The stale selection: select the two newest, kill them, move to the
	// third and retry. Only the third may be touched.
	s.keys("3")
	s.waitFor("[3 Tasks]", newest, third)
	// Each selection is waited for: on a loaded machine a key typed a
	// frame after another can reach tasktop before the first was drawn.
	s.keyShows("Space", "1 selected", "selected")
	s.keyShows("Space", "2 selected", "2 selected")
	s.keys("x")
	s.waitFor("Kill 2 selected: " + newest + ", " + second + "?")
	s.keys("y")
	s.waitFor("kill: 2 of 2 tasks killed")
	b.waitCount(t, 2, 5*time.Second, `SELECT COUNT(*) FROM task_center WHERE id IN (?, ?) AND status = 6`, newest, second)
	s.keys("r") // the cursor is on the third, pending: retry changes nothing
	s.waitFor("Retry task " + third + "?")
	s.keys("y")
	s.waitFor("retry: 0 of 1 task retried; " + third + " not changed, pending")
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id IN (?, ?) AND status = 6
		AND plan_next_run_at > NOW(3) + INTERVAL 20 MINUTE`, newest, second), "the killed tasks were not retried")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'retry' AND target = ?`, "tasks "+third))

	// Apply to all: 2,000 tasks found by a substring of their code, killed
	// with one confirmation and one audit row.
	b.env.Exec(t, `INSERT INTO task_center (task_code, task_type, payload, plan_next_run_at)
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
		SELECT 'nightly_bulk', 0, '{}', NOW(3) + INTERVAL 1 HOUR FROM n a, n b WHERE b.i <= 40`)
	s.keys("/")
	s.text("ly_bu")
	s.keys("Enter")
	s.waitFor("ly_bu", "nightly_bulk")
	require.NotContains(t, s.capture(), " later ", "the search hides the other tasks")
	s.keys("A")
	s.waitFor("ALL 2000 matching selected")
	s.keys("x")
	s.waitFor("Kill all 2000 matching tasks ly_bu?")
	s.keys("y")
	s.waitFor("kill: 2000 of 2000 tasks killed")
	require.Equal(t, 2000, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'nightly_bulk' AND status = 6`))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'kill' AND target = ? AND affected = 2000`,
		`filter search="ly_bu"`))
	require.Equal(t, 3, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'later' AND status = 0`),
		"the tasks outside the search are untouched")

	// A live tail: node-a runs the slow task (node-b has no handler for
	// it), and l shows its output as it prints.
	cfgB := filepath.Join(b.dir, "node-b.yaml")
	require.NoError(t, os.WriteFile(cfgB, []byte(b.env.ConfigYAML(timings+"handlers:\n  later: { exec: [\"true\"] }\n")), 0o644))
	nodeA := b.startDaemonArgs(t, "node-a", "run", "--node-id", "node-a", "--roles", "scheduler,worker")
	b.startDaemonArgs(t, "node-b", "run", "--config", cfgB, "--node-id", "node-b", "--roles", "scheduler,worker,recovery")
	slow := strings.TrimPrefix(strings.TrimSpace(b.taskd(t, "submit", "slow", "--timeout", "10m")), "submitted task ")
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2`, slow)
	s.escape(slow + " running") // the search cleared: the newest task is listed
	s.keys("/")
	s.text("slow")
	s.keys("Enter")
	s.waitFor(slow + " running")
	s.keys("l")
	s.waitFor("Output of task "+slow+", attempt 1", "live", "tick 3")
	s.waitFor("tick 12") // it moves
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2 AND worker_id LIKE '%'`, slow))

	// A killed node: its worker turns into a red dead row, with its node,
	// and stays; the header counts it.
	s.escape(slow + " running") // back from the output to the list
	s.keys("2")
	s.waitFor("2/2 workers")
	require.NoError(t, nodeA.cmd.Process.Signal(syscall.SIGKILL))
	<-nodeA.done
	s.waitFor("1/2 workers · 1 dead")
	deadRow := regexp.MustCompile(`(?m)^! \S+ +node-a .* dead( |$)`)
	s.waitForMatch(deadRow)
	// Recovery drains it, and it is still listed as dead.
	b.waitCount(t, 1, 20*time.Second, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND outcome = 'crashed'`, slow)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND crash_count = 1 AND status IN (0, 1)`, slow))
	time.Sleep(2 * time.Second) // two refreshes after the drain
	require.Regexp(t, deadRow, s.capture())

	// The recovery is in Events: the drained worker and the recovered task.
	s.keys("4")
	s.waitFor("drained", "node-a", "dead worker drained")
	s.waitForMatch(regexp.MustCompile(`recovered .* ` + slow + ` task recovered, now pending`))
}

// waitForMatch polls the screen until re matches it.
func (s *screen) waitForMatch(re *regexp.Regexp) string {
	s.t.Helper()
	var last string
	// Polls the tmux pane of a real process.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if last = s.capture(); re.MatchString(last) {
			return last
		}
	}
	s.t.Fatalf("the screen does not match %s:\n%s", re, last)
	return ""
}

// TestTasktopLimit: a limit changed online with `taskd limit` shows in
// tasktop's queue view (LIMIT), the queue LIMITED by it and for how long
// while it holds the backlog back, and the change in the audit view.
func TestTasktopLimit(t *testing.T) {
	t.Parallel()
	bin := buildTasktop(t)
	b := setup(t, `handlers:
  work: { exec: ["sh", "-c", "echo done"] }
`)
	// The limit is set before the node starts: a live change reaches a
	// node within its refresh (a second), in which 20 echo tasks can all
	// run unlimited.
	require.Equal(t, "limit: queue work limit none -> 1/s burst 1\n", b.taskd(t, "limit", "work", "--rate", "1/s", "--burst", "1", "--yes"))
	b.startDaemon(t, "node-a")
	for range 20 {
		b.taskd(t, "submit", "work")
	}

	s := newScreen(t, bin, "--config", b.config, "--refresh", "500ms")
	s.waitForMatch(regexp.MustCompile(`(?m)^  work .* 1/s +LIMITED by rate [1-9][0-9]*s$`))
	s.keys("5")
	s.waitFor("[5 Audit]", "limit", "queue work")

	// Reset: the limit goes, the backlog drains, the view says so.
	b.taskd(t, "limit", "work", "--reset", "--yes")
	b.waitCount(t, 20, 30*time.Second, `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	s.keys("1")
	scr := s.waitForMatch(regexp.MustCompile(`(?m)^  work +1 +0 +0 .*% +- +-( +\S.*)?$`))
	require.NotContains(t, scr, "LIMITED")
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'limit'`))
}
