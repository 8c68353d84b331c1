package cli

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/suggest"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) statsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "stats [QUEUE...]",
		Short:   "Per-queue and per-worker figures (cheap enough to poll every second)",
		Long:    "Per-queue and per-worker figures (cheap enough to poll every second): of every queue, or of the queues named and the workers that consume them.",
		Example: "  taskd stats\n  taskd stats send_email\n  taskd -o json stats",
		RunE: func(cmd *cobra.Command, only []string) error {
			c, err := a.config()
			if err != nil {
				return err
			}
			var names []string
			for q := range c.WorkerQueues() {
				names = append(names, q)
			}
			sort.Strings(names)
			src := stats.Source{Queues: names}
			src.Configured, src.ConfiguredLimit = ops.ConfiguredOf(c)
			// During an outage of either server the other's figures still
			// say what waits and who works: they are shown, and the
			// command fails after. A configuration the task center
			// refuses (a password, the schema) fails at once.
			o, closeFn, mysqlErr := a.readOps(cmd)
			if mysqlErr != nil && task.ErrorCode(mysqlErr) == task.CodeConfig {
				return mysqlErr
			}
			if mysqlErr == nil {
				defer closeFn()
				for _, q := range only {
					if err := o.CheckQueue(cmd.Context(), q); err != nil {
						return err
					}
				}
				src.Store = o.Store()
			}
			br, redisErr := a.openBroker(cmd.Context())
			if redisErr == nil {
				defer br.Close()
				src.Broker = br
			}
			var s *stats.Stats
			switch {
			case mysqlErr != nil && redisErr != nil:
				return fmt.Errorf("%w; Redis: %w", mysqlErr, redisErr)
			case mysqlErr != nil:
				mysqlErr = fmt.Errorf("MySQL: %w", mysqlErr)
				s, err = stats.CollectWithoutMySQL(cmd.Context(), src, mysqlErr)
				if err == nil {
					err = unknownWithoutMySQL(s, only, names, mysqlErr)
				}
			case redisErr != nil:
				s, err = stats.CollectWithoutRedis(cmd.Context(), src, redisErr)
			default:
				s, err = stats.Collect(cmd.Context(), src)
			}
			if err != nil {
				return err
			}
			if len(only) > 0 {
				s.Only(only)
			}
			if err := a.printStats(s, c.Alerts.RedisMemoryThreshold); err != nil {
				return err
			}
			switch {
			case mysqlErr != nil:
				return exitError{code: ExitFailure, msg: fmt.Sprintf("%v: the task center's counts are not shown (?)", mysqlErr)}
			case redisErr != nil:
				return exitError{code: ExitFailure, msg: fmt.Sprintf("%v: the backlog in Redis, throughput and workers are not shown (?)", redisErr)}
			}
			return nil
		},
	}
}

// readOps opens the one task center a command that only reads uses
// (stats, audit, limit QUEUE): mysql.read_dsn when set, and nothing of the primary, so
// that it answers while a failover leaves the primary unreachable; else
// the primary.
func (a *App) readOps(cmd *cobra.Command) (*ops.Ops, func(), error) {
	c, err := a.config()
	if err != nil {
		return nil, nil, err
	}
	if c.MySQL.ReadDSN == "" {
		return a.ops(cmd, noRedis)
	}
	rs, err := a.openReadStore(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	return ops.NewFromConfig(rs, nil, c), func() { rs.Close() }, nil
}

// unknownWithoutMySQL is a not-found error for the first of only that
// neither the configuration nor a live worker names: a typo would
// otherwise print an empty table. Whether a task in the task center
// names it, MySQL being down, is not known, and the error says so.
func unknownWithoutMySQL(s *stats.Stats, only, configured []string, mysqlErr error) error {
	for _, q := range only {
		if !slices.ContainsFunc(s.Queues, func(sq stats.Queue) bool { return sq.Name == q }) {
			return task.NotFoundf("unknown queue %q%s: no handler or queues: entry configures it and no worker consumes it (%v: whether a task names it is not known)",
				q, suggest.DidYouMean(q, configured), mysqlErr)
		}
	}
	return nil
}

// printStats prints a snapshot: its JSON, or the queue and worker tables,
// with ? for what only Redis knows when it did not answer, and a warning
// when Redis uses at least near of its maxmemory (the alert rule's
// threshold).
func (a *App) printStats(s *stats.Stats, near float64) error {
	if a.json() {
		return a.printJSON(s)
	}
	unknown, noCounts := s.RedisError != "", s.MySQLError != ""
	// Narrow: CANC, DISP, FAIL/MIN, FAILED, OK 10M, DONE/MIN go first;
	// STATE (paused, limited) is cut before any.
	g := newGrid(13, []int{7, 3, 10, 5, 11, 9}, "QUEUE", "PENDING", "DUE", "DISP", "RUN", "FAILED", "DEAD", "CANC", "BACKLOG",
		"DONE/MIN", "FAIL/MIN", "OK 10M", "OLDEST DUE", "STATE", "WORKERS")
	// Before those, any count that is 0 (or -) on every queue: first
	// those that stay 0 for long (CANC, DEAD, FAILED, FAIL/MIN), then
	// those that come and go with each task (OLDEST DUE, DISP, DUE, ...),
	// so that `watch taskd stats` keeps its columns while tasks trickle
	// through. Never WORKERS: none is news however quiet.
	g.quiet = []int{7, 6, 5, 10, 12, 3, 2, 8, 4, 1, 11, 9}
	for _, q := range s.Queues {
		rate := "-"
		if q.SuccessRate10m != nil {
			rate = fmt.Sprintf("%.1f%%", 100**q.SuccessRate10m)
		}
		state := ops.Plural(q.Shards, "shard")
		switch {
		case noCounts:
			state = "paused ?, " + state // a pause is the task center's
		case q.Paused:
			state = "PAUSED, " + state
		case !unknown && q.NoConsumer():
			state = "NO CONSUMER, " + state
		}
		if !q.Limit.IsZero() {
			state += ", " + q.Limit.Short()
		}
		if q.Limited != nil {
			state += ", " + stats.LimitedText(q.Limited)
		}
		redis := []any{q.BacklogTotal(), q.ProcessedPerMin, q.FailedPerMin, rate}
		workers := any(q.LiveWorkers)
		if unknown {
			redis, workers = []any{"?", "?", "?", "?"}, "?"
		}
		counts := []any{q.Pending, q.Due, q.Dispatched, q.Running, q.Failed, q.Dead, q.Cancelled, oldestDue(q.OldestDueSeconds)}
		if noCounts {
			counts = []any{"?", "?", "?", "?", "?", "?", "?", "?"}
		}
		g.add(q.Name, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], redis[0], redis[1], redis[2], redis[3],
			counts[7], state, workers)
	}
	width := a.width()
	if err := g.write(a.Stdout, width); err != nil {
		return err
	}
	if n, drain, drains := s.Waiting(); n > 0 && !unknown && !noCounts {
		when := "no time to drain: a queue waits with no attempt in the last minute, or behind results waiting to be written"
		if qs := s.NoConsumer(); len(qs) > 0 {
			when = "no time to drain: no live worker takes from " + strings.Join(qs, ", ") + " (NO CONSUMER: no running node has its handler)"
		}
		if s.RedisMemory != nil && s.RedisMemory.Full() {
			when = "no time to drain: Redis is full, and nothing is dispatched until it has room"
		}
		if drains {
			when = "drains in ~" + stats.Roughly(drain) + " at the last minute's rates"
		}
		fmt.Fprintln(a.Stdout, hanging(fmt.Sprintf("waiting %d (DUE and BACKLOG); %s", n, when), 0, width))
	}
	if n, qs := s.Paused(); n > 0 && !unknown && !noCounts {
		queues := "queues"
		if len(qs) == 1 {
			queues = "queue"
		}
		fmt.Fprintln(a.Stdout, hanging(fmt.Sprintf("held %d in paused %s (%s); taskd resume QUEUE lets them run",
			n, queues, strings.Join(qs, ", ")), 0, width))
	}
	fmt.Fprintln(a.Stdout)
	if m := s.RedisMemory; m != nil {
		if warn := m.Warning(near); warn != "" {
			fmt.Fprintf(a.Stdout, "warning: %s\n\n", hanging(warn, len("warning: "), width))
		}
	}
	if unknown {
		_, err := fmt.Fprintln(a.Stdout, "WORKERS: ? (Redis did not answer)")
		return err
	}
	// Narrow: PID, HOST, RUNNING, DONE/MIN go first; QUEUES is cut.
	g = newGrid(8, []int{3, 2, 7, 5}, "WORKER", "NODE", "HOST", "PID", "BEAT AGE", "DONE/MIN", "BUSY", "RUNNING", "QUEUES")
	g.quiet = []int{7, 6, 1}
	for _, wk := range s.Workers {
		g.add(wk.ID, dash(wk.Node), wk.Host, wk.PID, fmt.Sprintf("%.1fs", wk.HeartbeatAgeSeconds),
			wk.ProcessedPerMin, wk.Busy, oneLine(joinIDs(wk.Current), 40), strings.Join(wk.Queues, ","))
	}
	if err := g.write(a.Stdout, width); err != nil {
		return err
	}
	for _, wk := range s.Workers {
		if wk.ResultsStuckSeconds > 0 {
			fmt.Fprintf(a.Stdout, "\nwarning: %s\n", hanging(stats.ResultsStuckText(wk.ID, time.Duration(wk.ResultsStuckSeconds*float64(time.Second))),
				len("warning: "), width))
		}
	}
	return nil
}

// oldestDue is the OLDEST DUE cell: "-" when no task is due, as tasktop
// shows it, not a wait of 0.0s.
func oldestDue(seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", seconds)
}
