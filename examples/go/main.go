// Command go-embed is a Go program that embeds taskd: it runs a node with a
// Go handler in its own process and submits tasks to it, typed.
//
//	go run ./examples/go --config config/taskd.yaml -n 5
//
// It needs a migrated task center (`taskd migrate`) and Redis, as the
// configuration says; it submits n greet tasks, prints each as its handler
// runs it, and exits once all ran, draining like `taskd run` on SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/taskd/taskd"
)

// Greet is the payload of greet tasks.
type Greet struct {
	Name string `json:"name"`
}

// Kind is the task code.
func (Greet) Kind() string { return "greet" }

func main() {
	configPath := flag.String("config", "", "configuration file (default ./taskd.yaml, then /etc/taskd/taskd.yaml)")
	n := flag.Int("n", 3, "tasks to submit")
	flag.Parse()
	if err := run(*configPath, *n); err != nil {
		fmt.Fprintln(os.Stderr, "go-embed:", err)
		os.Exit(1)
	}
}

func run(configPath string, n int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := taskd.LoadConfig(configPath)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var done atomic.Int64
	all := make(chan struct{})
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[Greet]) error {
		fmt.Printf("hello, %s (task %d, attempt %d)\n", job.Args.Name, job.ID, job.Attempt)
		job.SetResult("greeted " + job.Args.Name)
		if done.Add(1) == int64(n) {
			close(all)
		}
		return nil
	})
	srv := taskd.NewServer(cfg, mux).WithLogger(log)
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer srv.Stop()

	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	tasks := make([]taskd.Args, n)
	for i := range tasks {
		tasks[i] = Greet{Name: fmt.Sprintf("gopher %d", i+1)}
	}
	if _, err := client.SubmitMany(ctx, tasks); err != nil {
		return err
	}
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
