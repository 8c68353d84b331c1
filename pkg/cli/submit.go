package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
)

// taskFlags are the options shared by submit and cron add.
type taskFlags struct {
	payload  string
	queue    string
	priority int
	timeout  time.Duration
	maxRetry int
	anyCode  bool
}

func (f *taskFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.payload, "payload", "{}", "payload: JSON text, @file, or @- for standard input")
	fl.StringVar(&f.queue, "queue", "", "queue (default: the code's configured queue, else the code)")
	fl.IntVar(&f.priority, "priority", task.DefaultPriority, "priority 0 (highest) to 9")
	fl.DurationVar(&f.timeout, "timeout", task.DefaultTimeout*time.Second, "timeout of each attempt")
	fl.IntVar(&f.maxRetry, "max-retry", task.DefaultMaxRetry, "retries after a failed attempt")
	fl.BoolVar(&f.anyCode, "any-code", false, "accept a task code that has no handler in the configuration")
}

// readPayload resolves --payload.
func (a *App) readPayload(p string) (json.RawMessage, error) {
	if !strings.HasPrefix(p, "@") {
		return json.RawMessage(p), nil
	}
	var b []byte
	var err error
	if p == "@-" {
		b, err = io.ReadAll(a.Stdin)
	} else {
		b, err = os.ReadFile(p[1:])
	}
	if err != nil {
		return nil, task.Invalidf("read payload %s: %v", p[1:], err)
	}
	return json.RawMessage(b), nil
}

// checkCode rejects a code no handler is configured for, when the
// configuration lists handlers: a typo would otherwise sit in a queue no
// worker reads.
func checkCode(c *config.Config, code string, any bool) error {
	if err := task.ValidateName("task code", code); err != nil {
		return err
	}
	if any || len(c.Handlers) == 0 {
		return nil
	}
	if _, ok := c.Handlers[code]; !ok {
		return task.Invalidf("unknown task code %q: no handler configured for it (pass --any-code if a Go handler or another configuration serves it)", code)
	}
	return nil
}

// client opens a producer client; Redis is optional (it only wakes the
// schedulers).
func (a *App) client(cmd *cobra.Command) (*producer.Client, func(), error) {
	c, err := a.config()
	if err != nil {
		return nil, nil, err
	}
	st, err := a.openStore(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	br, err := a.openBroker(cmd.Context())
	if err != nil {
		fmt.Fprintf(a.Stderr, "taskd: warning: %v; schedulers will find the task at their next poll\n", err)
		br = nil
	}
	cl := producer.New(st, br, producer.Options{
		MaxPayload: c.Submit.MaxPayload, QueueFor: c.QueueFor, Timezone: c.Cron.Timezone, Logger: a.logger(c),
	})
	return cl, func() {
		st.Close()
		if br != nil {
			br.Close()
		}
	}, nil
}

func (a *App) submitCmd() *cobra.Command {
	var f taskFlags
	var delay time.Duration
	var at, uniqueKey string
	cmd := &cobra.Command{
		Use:   "submit CODE",
		Short: "Submit a one-off task, now or later",
		Example: `  taskd submit send_email --payload '{"to":"a@example.com"}'
  taskd submit build_report --payload @report.json --delay 30s --priority 1
  taskd submit close_order --at '2026-12-01 10:00:00' --unique-key order-42`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.config()
			if err != nil {
				return err
			}
			if err := checkCode(c, args[0], f.anyCode); err != nil {
				return err
			}
			payload, err := a.readPayload(f.payload)
			if err != nil {
				return err
			}
			sub := producer.Submission{Code: args[0], Payload: payload, Queue: f.queue, Delay: delay,
				Priority: &f.priority, Timeout: f.timeout, MaxRetry: &f.maxRetry, UniqueKey: uniqueKey}
			if at != "" {
				if delay != 0 {
					return task.Invalidf("give either --delay or --at, not both")
				}
				if sub.At, err = parseTime(at); err != nil {
					return err
				}
			}
			cl, closeFn, err := a.client(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := cl.Submit(cmd.Context(), sub)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(res)
			}
			if res.Existing {
				fmt.Fprintf(a.Stdout, "task %d already exists with unique key %q; nothing submitted\n", res.ID, uniqueKey)
				return nil
			}
			fmt.Fprintf(a.Stdout, "submitted task %d\n", res.ID)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&delay, "delay", 0, "run after this delay (e.g. 30s, 5m)")
	cmd.Flags().StringVar(&at, "at", "", "run at this time: RFC 3339, or 'YYYY-MM-DD HH:MM[:SS]' in the local zone")
	cmd.Flags().StringVar(&uniqueKey, "unique-key", "", "deduplicate: a second submit with the same code and key returns the first task")
	return cmd
}

// parseTime accepts RFC 3339 or a local 'YYYY-MM-DD HH:MM[:SS]'.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, task.Invalidf("cannot parse time %q (want RFC 3339 or 'YYYY-MM-DD HH:MM:SS')", s)
}
