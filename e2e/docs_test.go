package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// TestDocs runs the commands the guides in docs/ show, so they cannot
// drift from the code. Each guide runs on a fresh database named taskd and
// an empty Redis with the default prefix (a private mariadbd and
// redis-server, so the commands read exactly as written), from a directory
// holding the repository's config/ and examples/. Fenced blocks:
//
//   - ```sh: run with bash -e -o pipefail; a non-zero exit fails the guide.
//   - ```sh daemon: started in the background (a `taskd run`, a `tasktop
//     serve`); the guide goes on once it logs that it started, and at its
//     end it gets SIGTERM and must exit 0.
//   - ```sh manual: host administration the test cannot do (apt-get
//     install, systemctl, editing /etc); not run, listed in the log.
//   - ```crontab: every line's command is run once with `php` on PATH
//     replaced by a stub that prints its arguments (the application's
//     artisan commands are not taskd's to test; the taskd part is real).
//
// Other blocks (yaml, php, ini, text) are not commands; bash, shell and
// console blocks are refused, so that no command escapes the check.
func TestDocs(t *testing.T) {
	t.Parallel()
	guides, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, guides)
	srv := startPrivateServers(t)
	repo, err := filepath.Abs("..")
	require.NoError(t, err)

	// PATH shims: taskd is the binary under test; mysql and redis-cli
	// reach the private servers by default, as they reach 127.0.0.1:3306
	// and :6379 on a host.
	shims := t.TempDir()
	require.NoError(t, os.Symlink(taskdBin, filepath.Join(shims, "taskd")))
	require.NoError(t, os.Symlink(buildTasktop(t), filepath.Join(shims, "tasktop")))
	myCnf := filepath.Join(shims, "my.cnf")
	require.NoError(t, os.WriteFile(myCnf, fmt.Appendf(nil,
		"[client]\nprotocol=tcp\nhost=127.0.0.1\nport=%d\nuser=root\npassword=\n", srv.mysqlPort), 0o644))
	writeScript(t, filepath.Join(shims, "mysql"), fmt.Sprintf("exec %s --defaults-extra-file=%s \"$@\"\n", lookPath(t, "mysql"), myCnf))
	writeScript(t, filepath.Join(shims, "redis-cli"), fmt.Sprintf("exec %s -p %d \"$@\"\n", lookPath(t, "redis-cli"), srv.redisPort))
	stubs := t.TempDir()
	writeScript(t, filepath.Join(stubs, "php"), "echo \"php $*\"\n")

	env := append(os.Environ(),
		"PATH="+shims+string(os.PathListSeparator)+os.Getenv("PATH"),
		fmt.Sprintf("TASKD_MYSQL_DSN=root:@tcp(127.0.0.1:%d)/taskd", srv.mysqlPort),
		fmt.Sprintf("TASKD_REDIS_ADDR=127.0.0.1:%d", srv.redisPort),
		"TASKD_LOG_FORMAT=text",
		fmt.Sprintf("DB_PORT=%d", srv.mysqlPort), // the PHP examples' database port
		// redis.md's Cluster on free ports, not the script's fixed ones.
		"REDIS_TOPOLOGY_PORTS="+strings.Trim(fmt.Sprint(testenv.FreePorts(t, 6)), "[]"),
	)
	for _, guide := range guides {
		t.Run(filepath.Base(guide), func(t *testing.T) {
			srv.reset(t)
			dir := t.TempDir()
			for _, d := range []string{"config", "deploy", "examples", "scripts", "clients"} {
				require.NoError(t, os.Symlink(filepath.Join(repo, d), filepath.Join(dir, d)))
			}
			// A guide that fails midway leaves no Redis topology running.
			t.Cleanup(func() {
				for _, kind := range []string{"cluster", "sentinel"} {
					if _, err := os.Stat(filepath.Join(dir, ".run", "redis-"+kind)); err == nil {
						_, _ = runShell(dir, env, "scripts/redis-cluster.sh "+kind+" stop")
					}
				}
			})
			runGuide(t, guide, dir, env, stubs)
		})
	}
}

// block is one fenced block of a guide.
type block struct {
	line  int    // line of the opening fence
	lang  string // first word of the info string
	attrs string // the rest of it
	text  string
}

func readBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			lang, attrs, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "```")), " ")
			cur = &block{line: n, lang: lang, attrs: strings.TrimSpace(attrs)}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "%s: a fence opened at line %d is not closed", path, func() int {
		if cur != nil {
			return cur.line
		}
		return 0
	}())
	return out
}

// guidePorts are the fixed ports the guides' commands listen on (tasktop
// serve's SSH, a node's metrics), as a reader would run them; the test
// runs each on a free port instead, so that another run, a leftover of
// one, or anything else on the host holding the port fails nothing.
var guidePorts = regexp.MustCompile(`\b(2222|9464)\b`)

func runGuide(t *testing.T, path, dir string, env []string, stubs string) {
	name := filepath.Base(path)
	blocks := readBlocks(t, path)
	free := map[string]string{}
	for i := range blocks {
		if blocks[i].lang == "sh" {
			blocks[i].text = guidePorts.ReplaceAllStringFunc(blocks[i].text, func(port string) string {
				if free[port] == "" {
					free[port] = strconv.Itoa(testenv.FreePort(t))
				}
				return free[port]
			})
		}
	}
	for _, b := range blocks {
		// The PHP examples, and doctor, which checks that the example
		// configuration's php handler can start: skips only this guide
		// where PHP cannot be had.
		if b.lang == "sh" && b.attrs != "manual" && (strings.Contains(b.text, "php ") || strings.Contains(b.text, "taskd doctor")) {
			needTool(t, "php")
			break
		}
	}
	var daemons []*docDaemon
	defer func() {
		for _, d := range daemons {
			d.stop(t)
		}
	}()
	ran := 0
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", name, b.line)
		switch {
		case b.lang == "sh" && b.attrs == "":
			out, err := runShell(dir, env, b.text)
			require.NoError(t, err, "%s: the commands failed:\n%s\noutput:\n%s", where, b.text, out)
			ran++
		case b.lang == "sh" && b.attrs == "daemon":
			daemons = append(daemons, startDocDaemon(t, where, dir, env, b.text))
			ran++
		case b.lang == "sh" && b.attrs == "manual":
			t.Logf("%s: not run (host administration)", where)
		case b.lang == "sh":
			t.Fatalf("%s: unknown block kind %q (sh, sh daemon, sh manual)", where, b.attrs)
		case b.lang == "bash" || b.lang == "shell" || b.lang == "console" || b.lang == "zsh":
			t.Fatalf("%s: a %s block is not run: mark commands ```sh (or sh daemon, sh manual)", where, b.lang)
		case b.lang == "crontab":
			stubEnv := append(append([]string{}, env...), "PATH="+stubs+string(os.PathListSeparator)+pathOf(env))
			for i, line := range strings.Split(b.text, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") || strings.Contains(line, "=") && !strings.Contains(line, " ") {
					continue
				}
				fields := strings.Fields(line)
				skip := 5
				if strings.HasPrefix(fields[0], "@") {
					skip = 1
				}
				require.Greater(t, len(fields), skip, "%s: crontab line %q", where, line)
				cmd := strings.Join(fields[skip:], " ")
				out, err := runShell(dir, stubEnv, cmd)
				require.NoError(t, err, "%s (line %d of the block): %s\noutput:\n%s", where, i+1, cmd, out)
				ran++
			}
		}
	}
	t.Logf("%s: %d commands or blocks run", name, ran)
}

// pathOf returns the PATH of env (the last one wins, as for exec).
func pathOf(env []string) string {
	p := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	return p
}

func runShell(dir string, env []string, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type docDaemon struct {
	where string
	cmd   *exec.Cmd
	log   string
	done  chan struct{}
	err   error
}

func startDocDaemon(t *testing.T, where, dir string, env []string, script string) *docDaemon {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	// exec env: the signal reaches taskd itself, as Supervisor's would,
	// and VAR=value words before the command still work.
	cmd := exec.Command("bash", "-e", "-c", "exec env "+strings.TrimSpace(script))
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, logf, logf
	testenv.DieWithTest(cmd)
	require.NoError(t, cmd.Start())
	d := &docDaemon{where: where, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := os.ReadFile(logPath)
		if strings.Contains(string(out), "taskd node started") || strings.Contains(string(out), "tasktop serve listening") {
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("%s: %s exited at start: %v\n%s", where, script, d.err, out)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("%s: %s did not start within 30s:\n%s", where, script, out)
		}
		time.Sleep(50 * time.Millisecond) // polls the daemon's log: a real process starting
	}
}

// stop sends SIGTERM and requires a drained exit 0.
func (d *docDaemon) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("%s: the daemon did not exit within 60s of SIGTERM", d.where)
	}
	if d.err != nil {
		out, _ := os.ReadFile(d.log)
		t.Errorf("%s: the daemon exited with %v after SIGTERM:\n%s", d.where, d.err, tail(string(out), 3000))
	}
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed", name)
	}
	return p
}

// privateServers are a mariadbd and a redis-server of the test's own.
type privateServers struct {
	mysqlPort, redisPort int
	db                   *sql.DB
	rdb                  *redis.Client
}

func startPrivateServers(t *testing.T) *privateServers {
	t.Helper()
	var bin string
	for _, b := range []string{"/usr/sbin/mariadbd", "/usr/sbin/mysqld", "mariadbd", "mysqld"} {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("mariadbd is not installed (scripts/services.sh installs it)")
	}
	me, err := user.Current()
	require.NoError(t, err)
	s := &privateServers{}
	// A free port may be taken before mariadbd binds it: then it exits,
	// and it starts again on another.
	for try := 1; ; try++ {
		s.mysqlPort = testenv.FreePort(t)
		err := startMariadb(t, bin, me.Username, s.mysqlPort)
		if err == nil {
			break
		}
		require.Less(t, try, 3, "%v", err)
		t.Logf("%v; trying another port", err)
	}
	s.db, err = sql.Open("mysql", fmt.Sprintf("root:@tcp(127.0.0.1:%d)/", s.mysqlPort))
	require.NoError(t, err)
	t.Cleanup(func() { s.db.Close() })
	addr := testenv.PrivateRedis(t, 0)
	_, port, _ := strings.Cut(addr, ":")
	s.redisPort, err = strconv.Atoi(port)
	require.NoError(t, err)
	s.rdb = redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { s.rdb.Close() })
	return s
}

// startMariadb starts a mariadbd of the test's own on port, stopped when
// the test ends, and waits until it answers, or returns why it did not.
// Its data directory is new: InnoDB creates its files first, which on a
// loaded machine takes a while, so the wait is bounded by the process
// (it answers or exits) and a generous two minutes.
func startMariadb(t *testing.T, bin, user string, port int) error {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	logPath := filepath.Join(dir, "mysql.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	// No system tables: --skip-grant-tables lets root in without them. A
	// small redo log and buffer pool, no doublewrite, binary log or
	// performance schema: less to create at start.
	cmd := exec.Command(bin, "--no-defaults", "--user="+user, "--datadir="+data,
		"--socket="+filepath.Join(dir, "mysql.sock"), "--pid-file="+filepath.Join(dir, "mysql.pid"),
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--skip-grant-tables",
		"--skip-name-resolve", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M",
		"--skip-innodb-doublewrite", "--skip-log-bin", "--performance-schema=OFF")
	cmd.Stdout, cmd.Stderr = logf, logf
	testenv.DieWithTest(cmd)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	db, err := sql.Open("mysql", fmt.Sprintf("root:@tcp(127.0.0.1:%d)/?timeout=5s", port))
	require.NoError(t, err)
	defer db.Close()
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for db.Ping() != nil {
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("private mariadbd on %d exited at start:\n%s", port, tail(string(out), 2000))
		case <-deadline:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("private mariadbd did not answer on %d within 2 minutes:\n%s", port, tail(string(out), 2000))
		case <-tick.C:
		}
	}
	return nil
}

// reset gives a guide an empty database taskd and an empty Redis.
func (s *privateServers) reset(t *testing.T) {
	t.Helper()
	for _, q := range []string{"DROP DATABASE IF EXISTS taskd", "CREATE DATABASE taskd CHARACTER SET utf8mb4"} {
		_, err := s.db.Exec(q)
		require.NoError(t, err, q)
	}
	err := s.rdb.FlushAll(context.Background()).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		require.NoError(t, err)
	}
}
