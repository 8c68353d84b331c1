package benchmark

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	phpclient "github.com/taskd/taskd/clients/php"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/startstop"
)

// bootMS is the boot of the PHP handlers in the pool-versus-exec run: an
// application that takes 50 ms to start before it handles anything.
const bootMS = "50"

// execScript is an exec handler with the same boot as the pool's worker:
// a process per task, booting every time.
const execScript = `<?php
if ($boot = (int) getenv('WORKER_BOOT_MS')) {
    usleep($boot * 1000);
}
$payload = json_decode(stream_get_contents(STDIN), true);
echo json_encode(['id' => (int) getenv('TASK_ID')]), "\n";
`

// httpScript is an http handler for PHP's built-in server.
const httpScript = `<?php
file_get_contents('php://input');
header('Content-Type: application/json');
echo json_encode(['id' => (int) ($_SERVER['HTTP_X_TASK_ID'] ?? 0)]), "\n";
`

// phpFixture writes the PHP client (src/ and examples/worker.php) and the
// exec script to a temporary directory.
func phpFixture() (dir string, err error) {
	if _, err := exec.LookPath("php"); err != nil {
		return "", fmt.Errorf("the pool scenario runs PHP handlers: php is not installed (Debian: apt-get install php-cli); --only can leave the scenario out")
	}
	dir, err = os.MkdirTemp("", "taskd-bench-php-")
	if err != nil {
		return "", err
	}
	if err := os.CopyFS(dir, phpclient.FS); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write the PHP client: %w", err)
	}
	for name, text := range map[string]string{"exec.php": execScript, "http.php": httpScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// PoolOptions size the pool scenario.
type PoolOptions struct {
	Size         int // processes of each pool (with handler.PoolSlotsPerProcess slots each), and exec slots
	BootTasks    int // tasks of the 50 ms-boot pool
	ExecTasks    int // tasks of each exec handler (50 ms boot, none)
	NoopTasks    int // tasks of the no-op pool (a quarter of it on http)
	RecycleTasks int // tasks of the recycled pool
	MaxJobs      int // its max_jobs
}

// Pool measures PHP handlers: a pool and an exec handler whose script
// boots for 50 ms (the pool boots once per process, exec once per task), a
// no-op PHP pool, and a pool recycled every MaxJobs tasks while tasks flow,
// counting every run the PHP side records: none may be lost or run twice.
func Pool(ctx context.Context, e *Env, o PoolOptions) (Figures, error) {
	dir, err := phpFixture()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	worker := []string{"php", filepath.Join(dir, "examples", "worker.php")}
	pool := func(code string, mod func(*handler.PoolConfig)) *handler.Registry {
		cfg := handler.PoolConfig{Code: code, Argv: worker, Size: o.Size, KillGrace: time.Second, Logger: e.Log}
		if mod != nil {
			mod(&cfg)
		}
		reg := handler.NewRegistry()
		reg.Register(code, handler.NewPool(cfg))
		return reg
	}
	f := Figures{}

	bootPool, err := e.rate(ctx, "php_boot", o.BootTasks, o.Size*handler.PoolSlotsPerProcess, pool("php_boot", func(c *handler.PoolConfig) {
		c.Env = []string{"WORKER_BOOT_MS=" + bootMS}
	}))
	if err != nil {
		return nil, fmt.Errorf("pool with a 50 ms boot: %w", err)
	}
	execReg := handler.NewRegistry()
	execReg.Register("php_exec_boot", &handler.Exec{Argv: []string{"php", filepath.Join(dir, "exec.php")},
		Env: []string{"WORKER_BOOT_MS=" + bootMS}, KillGrace: time.Second})
	bootExec, err := e.rate(ctx, "php_exec_boot", o.ExecTasks, o.Size, execReg)
	if err != nil {
		return nil, fmt.Errorf("exec with a 50 ms boot: %w", err)
	}
	f["pool_boot_tasks_per_s"], f["exec_boot_tasks_per_s"] = bootPool, bootExec
	f["pool_vs_exec_boot_x"] = bootPool / bootExec

	if f["pool_noop_tasks_per_s"], err = e.rate(ctx, "php_noop", o.NoopTasks, o.Size*handler.PoolSlotsPerProcess, pool("php_noop", nil)); err != nil {
		return nil, fmt.Errorf("no-op pool: %w", err)
	}
	// The same no-op script as an exec handler (PHP's own start only) and
	// as an http endpoint of PHP's built-in server with Size workers.
	execReg = handler.NewRegistry()
	execReg.Register("php_exec_noop", &handler.Exec{Argv: []string{"php", filepath.Join(dir, "exec.php")}, KillGrace: time.Second})
	if f["exec_noop_tasks_per_s"], err = e.rate(ctx, "php_exec_noop", o.ExecTasks, o.Size, execReg); err != nil {
		return nil, fmt.Errorf("no-op exec: %w", err)
	}
	url, stop, err := phpServer(ctx, dir, o.Size)
	if err != nil {
		return nil, err
	}
	httpReg := handler.NewRegistry()
	httpReg.Register("php_http_noop", &handler.HTTP{URL: url})
	f["http_noop_tasks_per_s"], err = e.rate(ctx, "php_http_noop", o.NoopTasks/4, o.Size, httpReg)
	stop()
	if err != nil {
		return nil, fmt.Errorf("no-op http: %w", err)
	}

	runs := filepath.Join(dir, "runs.log")
	reg := pool("php_recycle", func(c *handler.PoolConfig) {
		c.MaxJobs, c.Env = o.MaxJobs, []string{"WORKER_RUN_LOG=" + runs}
	})
	if _, err := e.rate(ctx, "php_recycle", o.RecycleTasks, o.Size*handler.PoolSlotsPerProcess, reg); err != nil {
		return nil, fmt.Errorf("recycled pool: %w", err)
	}
	h, _ := reg.Lookup("php_recycle")
	lost, twice, err := countRuns(runs, o.RecycleTasks)
	if err != nil {
		return nil, err
	}
	f["recycle_lost_tasks"], f["recycle_run_twice_tasks"] = float64(lost), float64(twice)
	f["recycle_processes_recycled"] = float64(h.(*handler.Pool).Stats().Ended[handler.EndMaxJobs])
	return f, nil
}

// phpServer starts PHP's built-in server on http.php with workers
// processes, on a free loopback port, and returns its URL once it answers.
func phpServer(ctx context.Context, dir string, workers int) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command("php", "-S", addr, filepath.Join(dir, "http.php"))
	cmd.Env = append(os.Environ(), fmt.Sprintf("PHP_CLI_SERVER_WORKERS=%d", workers))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its workers go with it
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start php -S: %w", err)
	}
	stop = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return "http://" + addr + "/", stop, nil
		}
		if time.Now().After(deadline) || !startstop.Sleep(ctx, 20*time.Millisecond) {
			stop()
			return "", nil, fmt.Errorf("php -S did not listen on %s: %w", addr, err)
		}
	}
}

// rate submits n tasks of code, then runs them on a node with slots slots
// and the handlers of reg, and returns tasks per second from the node's
// start to the last result written.
func (e *Env) rate(ctx context.Context, code string, n, slots int, reg *handler.Registry) (float64, error) {
	for done := 0; done < n; done += 1000 {
		batch := subs(min(1000, n-done), producer.Submission{Code: code, Payload: []byte(`{"quiet":1}`)})
		if _, err := e.Producer.SubmitBatch(ctx, batch); err != nil {
			return 0, fmt.Errorf("submit: %w", err)
		}
	}
	start := time.Now()
	nd, err := e.StartNode(ctx, map[string]int{code: slots}, reg, DrainBatch)
	if err != nil {
		return 0, err
	}
	defer nd.Close()
	deadline := start.Add(10 * time.Minute)
	for {
		var ok, bad int
		if err := e.Store.DB().QueryRowContext(ctx,
			`SELECT COALESCE(SUM(status = 3), 0), COALESCE(SUM(status IN (4, 5)), 0) FROM task_center WHERE task_code = ?`, code).Scan(&ok, &bad); err != nil {
			return 0, err
		}
		if bad > 0 {
			return 0, fmt.Errorf("%d tasks of %s failed", bad, code)
		}
		if ok >= n {
			return float64(n) / time.Since(start).Seconds(), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d of %d tasks of %s succeeded within 10 minutes", ok, n, code)
		}
		if !startstop.Sleep(ctx, 5*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}

// countRuns reads the "id attempt pid" lines the PHP worker wrote: tasks
// of the n submitted with no run, and tasks run more than once.
func countRuns(path string, n int) (lost, twice int, err error) {
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, err
	}
	if err != nil { // no run at all
		f = nil
	}
	seen := map[string]int{}
	if f != nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if id, _, ok := strings.Cut(sc.Text(), " "); ok {
				seen[id]++
			}
		}
		if err := sc.Err(); err != nil {
			return 0, 0, err
		}
	}
	for _, c := range seen {
		if c > 1 {
			twice++
		}
	}
	return max(0, n-len(seen)), twice, nil
}
