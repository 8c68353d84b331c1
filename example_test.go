package taskd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/pkg/testenv"
)

// TestMain gives the examples a task center and a Redis prefix of their
// own, through the TASKD_* variables LoadConfig reads, as a deployment's
// environment would.
func TestMain(m *testing.M) {
	env, cleanup, err := testenv.Open(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples need MySQL and Redis:", err)
		os.Exit(1)
	}
	os.Setenv("TASKD_MYSQL_DSN", env.DSN)
	os.Setenv("TASKD_REDIS_ADDR", env.RedisAddr)
	os.Setenv("TASKD_REDIS_PREFIX", env.Prefix)
	os.Setenv("TASKD_SCHEDULER_POLL_INTERVAL", "200ms")
	os.Setenv("TASKD_RETRY_BASE", "100ms")
	os.Setenv("TASKD_RETRY_MAX", "200ms")
	slog.SetDefault(slog.New(slog.DiscardHandler)) // keep the examples' output their own
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// SendEmail is a typed payload: its Kind is the task code.
type SendEmail struct {
	To   string `json:"to"`
	Name string `json:"name"`
}

func (SendEmail) Kind() string { return "send_email" }

// A Go handler in a node running in this process, and a client submitting
// to it.
func Example() {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("") // ./taskd.yaml, /etc/taskd/taskd.yaml, TASKD_* variables
	if err != nil {
		panic(err)
	}

	sent := make(chan string, 1)
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[SendEmail]) error {
		job.SetResult("sent to " + job.Args.To)
		sent <- fmt.Sprintf("Welcome, %s <%s> (task attempt %d)", job.Args.Name, job.Args.To, job.Attempt)
		return nil
	})
	srv := taskd.NewServer(cfg, mux)
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	defer srv.Stop()

	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if _, err := client.Submit(ctx, SendEmail{To: "zoe@example.com", Name: "Zoë"}); err != nil {
		panic(err)
	}
	fmt.Println(<-sent)
	// Output: Welcome, Zoë <zoe@example.com> (task attempt 1)
}

// CloseOrder is the payload of close_order tasks.
type CloseOrder struct {
	Order int `json:"order"`
}

func (CloseOrder) Kind() string { return "close_order" }

// A unique key makes a second submission return the first task.
func ExampleClient_Submit() {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	if err != nil {
		panic(err)
	}
	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	first, err := client.Submit(ctx, CloseOrder{Order: 42},
		taskd.Delay(30*time.Minute), taskd.UniqueKey("order-42"), taskd.Priority(1), taskd.MaxRetry(5))
	if err != nil {
		panic(err)
	}
	again, err := client.Submit(ctx, CloseOrder{Order: 42}, taskd.UniqueKey("order-42"))
	if err != nil {
		panic(err)
	}
	fmt.Println("same task:", again.ID == first.ID, "existing:", again.Existing)

	_, err = client.Submit(ctx, CloseOrder{Order: 43}, taskd.Priority(12))
	fmt.Println(err)
	// Output:
	// same task: true existing: true
	// priority 12 is out of range 0-9 (0 is the highest)
}

// Resize is the payload of resize tasks.
type Resize struct {
	Path string `json:"path"`
}

func (Resize) Kind() string { return "resize" }

// An error fails the attempt; the task is retried with backoff while its
// retries last.
func ExampleHandle() {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	if err != nil {
		panic(err)
	}
	attempts := make(chan string, 2)
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[Resize]) error {
		if job.Attempt == 1 {
			attempts <- fmt.Sprintf("attempt 1 on %s: the image store is busy", job.Args.Path)
			return errors.New("image store busy")
		}
		attempts <- fmt.Sprintf("attempt %d on %s: resized", job.Attempt, job.Args.Path)
		return nil
	})
	srv := taskd.NewServer(cfg, mux)
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	defer srv.Stop()
	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if _, err := client.Submit(ctx, Resize{Path: "a.jpg"}, taskd.MaxRetry(1)); err != nil {
		panic(err)
	}
	fmt.Println(<-attempts)
	fmt.Println(<-attempts)
	// Output:
	// attempt 1 on a.jpg: the image store is busy
	// attempt 2 on a.jpg: resized
}

// A program follows the task it submitted, and cancels it before it is
// due, as `taskd show` and `taskd kill` would.
func ExampleClient_Get() {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	if err != nil {
		panic(err)
	}
	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	res, err := client.Submit(ctx, Resize{Path: "b.jpg"}, taskd.Delay(time.Hour))
	if err != nil {
		panic(err)
	}
	tk, err := client.Get(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(tk.Status, tk.Status.Ended())
	ch, err := client.Kill(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	tk, err = client.Get(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(ch.Changed, "killed:", tk.Status, tk.Status.Ended())
	// Output:
	// pending false
	// 1 killed: cancelled true
}

// Report is the payload of the nightly report.
type Report struct {
	Region string `json:"region"`
}

func (Report) Kind() string { return "build_report" }

// A periodic task, added or updated by name: a deploy can run it every
// time.
func ExampleClient_Cron() {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	if err != nil {
		panic(err)
	}
	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	for range 2 {
		r, err := client.Cron(ctx, "nightly", "0 3 * * *", "Asia/Shanghai", Report{Region: "emea"})
		if err != nil {
			panic(err)
		}
		fmt.Println("updated:", r.Updated, "runs at:", r.Next.In(time.FixedZone("CST", 8*3600)).Format("15:04"))
	}
	// Output:
	// updated: false runs at: 03:00
	// updated: true runs at: 03:00
}

// BuildReport, MailReport and ArchiveReport are the steps of a chain.
type BuildReport struct {
	Month string `json:"month"`
}

func (BuildReport) Kind() string { return "build_monthly_report" }

// MailReport is the result of BuildReport: a chain's child gets its
// parent's result as its payload.
type MailReport struct {
	Report int `json:"report"`
	Rows   int `json:"rows"`
}

func (MailReport) Kind() string { return "mail_monthly_report" }

type ArchiveReport struct {
	Report int `json:"report"`
}

func (ArchiveReport) Kind() string { return "archive_monthly_report" }

// A chain: each step is submitted when the one before succeeds, with its
// result as the payload.
func ExampleThen() {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	if err != nil {
		panic(err)
	}
	steps := make(chan string, 3)
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[BuildReport]) error {
		steps <- "built the report of " + job.Args.Month
		return job.SetResultJSON(MailReport{Report: 7, Rows: 120})
	})
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[MailReport]) error {
		steps <- fmt.Sprintf("mailed report %d (%d rows)", job.Args.Report, job.Args.Rows)
		return job.SetResultJSON(ArchiveReport{Report: job.Args.Report})
	})
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[ArchiveReport]) error {
		steps <- fmt.Sprintf("archived report %d", job.Args.Report)
		return nil
	})
	srv := taskd.NewServer(cfg, mux)
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	defer srv.Stop()
	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	_, err = client.Submit(ctx, BuildReport{Month: "2026-05"},
		taskd.Then[MailReport](taskd.Priority(1), taskd.Then[ArchiveReport](taskd.Delay(time.Second))))
	if err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println(<-steps)
	}
	// Output:
	// built the report of 2026-05
	// mailed report 7 (120 rows)
	// archived report 7
}

// Invite is a member of the batch; CampaignDone its callback.
type Invite struct {
	To string `json:"to"`
}

func (Invite) Kind() string { return "send_invite" }

type CampaignDone struct {
	Campaign int `json:"campaign"`
	// Batch gets the counts when the batch ends.
	Batch taskd.BatchCounts `json:"batch"`
}

func (CampaignDone) Kind() string { return "invite_campaign_done" }

// A batch: the callback is created once, when every member has ended,
// with the counts of how they ended.
func ExampleClient_Batch() {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	if err != nil {
		panic(err)
	}
	done := make(chan CampaignDone, 1)
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[Invite]) error {
		if job.Args.To == "nobody@example.com" {
			return errors.New("no such mailbox")
		}
		return nil
	})
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[CampaignDone]) error {
		done <- job.Args
		return nil
	})
	srv := taskd.NewServer(cfg, mux)
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	defer srv.Stop()
	client, err := taskd.NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	b, err := client.Batch(ctx,
		[]taskd.Args{Invite{To: "a@example.com"}, Invite{To: "b@example.com"}, Invite{To: "nobody@example.com"}},
		CampaignDone{Campaign: 7},
		taskd.MaxRetry(0), taskd.ForCallback(taskd.Priority(1)))
	if err != nil {
		panic(err)
	}
	fmt.Println("members:", len(b.MemberIDs))
	cb := <-done
	fmt.Println("batch is ours:", cb.Batch.ID == b.ID)
	fmt.Printf("campaign %d: %d of %d sent, %d dead\n", cb.Campaign, cb.Batch.Succeeded, cb.Batch.Total, cb.Batch.Dead)
	// Output:
	// members: 3
	// batch is ours: true
	// campaign 7: 2 of 3 sent, 1 dead
}
