package benchmark

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskd/taskd/pkg/config"
)

// Options size the scenarios. Zero values take the defaults: the sizes the
// project's targets are stated for.
type Options struct {
	Tasks       int           // burn-down size (100,000)
	Rate        int           // steady submissions per second (1,000)
	Duration    time.Duration // steady run (10 s)
	Scheduled   int           // tasks due within one window (10,000)
	Window      time.Duration // (10 s)
	SubmitTasks int           // batched submit (100,000)
	SingleTasks int           // single-row submit (20,000)
	SeedTasks   int           // rows INSERTed the seed's way, one every 37 ms (200)
	Clients     int           // single-row submitters (8)
	ExecTasks   int           // exec handler runs (10,000)
	ExecSlots   int           // (32)
	IdleSlots   int           // (1,000)
	LargeRows   int           // rows added for the large-table run (1,000,000)
	Slots       int           // worker slots of the burn-down (100)
	Pool        PoolOptions   // the PHP pool scenario (8 processes; 3,000, 300, 20,000 and 10,000 tasks; max_jobs 100)
	Limit       LimitOptions  // the rate-limit scenario (6,000 tasks at 100/s, burst 20, on 3 nodes)
	Only        []string      // scenario names; empty = all
	Progress    func(string)  // told what runs next (may be nil)
}

func (o *Options) defaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&o.Tasks, 100_000)
	def(&o.Rate, 1000)
	def(&o.Scheduled, 10_000)
	def(&o.SubmitTasks, 100_000)
	def(&o.SingleTasks, 20_000)
	def(&o.SeedTasks, 200)
	def(&o.Clients, 8)
	def(&o.ExecTasks, 10000)
	def(&o.ExecSlots, 32)
	def(&o.IdleSlots, 1000)
	def(&o.LargeRows, 1_000_000)
	def(&o.Slots, 100)
	def(&o.Limit.Tasks, 6000)
	def(&o.Limit.Rate, 100)
	def(&o.Limit.Burst, 20)
	def(&o.Limit.Nodes, 3)
	def(&o.Pool.Size, 8)
	def(&o.Pool.BootTasks, 3000)
	def(&o.Pool.ExecTasks, 300)
	def(&o.Pool.NoopTasks, 20_000)
	def(&o.Pool.RecycleTasks, 10_000)
	def(&o.Pool.MaxJobs, 100)
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Second
	}
}

// Scenarios are the names Options.Only accepts, in the order they run
// (memory of an idle node first, while the process is fresh).
var Scenarios = []string{"idle", "submit", "burn_down", "steady", "seed", "lateness", "exec", "pool", "rate_limit", "large"}

// Row is one line of the report: a figure and its target.
type Row struct {
	Name   string  `json:"name"`
	Label  string  `json:"label"`
	Unit   string  `json:"unit"`
	Op     string  `json:"op"` // ">=" or "<="
	Target float64 `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
}

// Report is the outcome of Run.
type Report struct {
	Environment map[string]string `json:"environment"`
	Options     Options           `json:"-"`
	Rows        []Row             `json:"targets"`
	Figures     Figures           `json:"figures"` // everything measured, by name
	Errors      map[string]string `json:"errors,omitempty"`
}

// Missed reports whether a target was missed or a scenario failed.
func (r *Report) Missed() bool {
	if len(r.Errors) > 0 {
		return true
	}
	for _, row := range r.Rows {
		if !row.Met {
			return true
		}
	}
	return false
}

// Run runs the scenarios against the MySQL server and Redis of base, each
// in its own database and key prefix, removed afterwards.
func Run(ctx context.Context, base *config.Config, o Options) *Report {
	o.defaults()
	r := &Report{Options: o, Figures: Figures{}, Errors: map[string]string{}}
	r.Environment = map[string]string{"go": runtime.Version(), "cpus": fmt.Sprint(runtime.NumCPU()), "os": runtime.GOOS + "/" + runtime.GOARCH,
		"gogc": fmt.Sprint(GCPercent()), "drain_batch_size": fmt.Sprint(DrainBatch)}
	for _, name := range Scenarios {
		if len(o.Only) > 0 && !slices.Contains(o.Only, name) {
			continue
		}
		if ctx.Err() != nil {
			r.Errors[name] = ctx.Err().Error()
			continue
		}
		if o.Progress != nil {
			o.Progress(name)
		}
		f, err := r.scenario(ctx, base, name)
		if err != nil {
			r.Errors[name] = err.Error()
			continue
		}
		for k, v := range f {
			r.Figures[k] = v
		}
	}
	r.Rows = rows(r.Figures)
	return r
}

func (r *Report) scenario(ctx context.Context, base *config.Config, name string) (Figures, error) {
	e, err := NewEnv(ctx, base, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if e.Unsettled != "" {
			r.Environment["settle"] = e.Unsettled
		}
		if err := e.Close(); err != nil {
			r.Errors[name+" cleanup"] = err.Error()
		}
	}()
	if r.Environment["mysql"] == "" {
		var v string
		if e.Store.DB().QueryRowContext(ctx, "SELECT VERSION()").Scan(&v) == nil {
			r.Environment["mysql"] = v
		}
		if info, err := e.Broker.Client().Info(ctx, "server").Result(); err == nil {
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					r.Environment["redis"] = v
				}
			}
		}
	}
	o := r.Options
	switch name {
	case "idle":
		return IdleSlots(ctx, e, o.IdleSlots)
	case "submit":
		f, err := SubmitBatch(ctx, e, o.SubmitTasks)
		if err != nil {
			return nil, err
		}
		g, err := SubmitSingle(ctx, e, o.SingleTasks, o.Clients)
		if err != nil {
			return nil, err
		}
		f["submit_single_tasks_per_s"] = g["submit_single_tasks_per_s"]
		return f, nil
	case "burn_down":
		return BurnDown(ctx, e, o.Tasks, o.Slots)
	case "steady":
		return Steady(ctx, e, o.Rate, o.Duration)
	case "seed":
		return Seed(ctx, e, o.SeedTasks)
	case "lateness":
		return Lateness(ctx, e, o.Scheduled, o.Window)
	case "exec":
		return Exec(ctx, e, o.ExecTasks, o.ExecSlots)
	case "pool":
		return Pool(ctx, e, o.Pool)
	case "rate_limit":
		return RateLimit(ctx, e, o.Limit)
	case "large":
		if err := FillLarge(ctx, e, o.LargeRows); err != nil {
			return nil, err
		}
		f := Figures{}
		b, err := BurnDown(ctx, e, o.Tasks, o.Slots)
		if err != nil {
			return nil, err
		}
		// The burn-down's tasks stay as history beside the fill's: the
		// steady run reads only its own (newPhase), so no row is rewritten
		// (nor left to purge) just before it measures.
		s, err := Steady(ctx, e, o.Rate, o.Duration)
		if err != nil {
			return nil, err
		}
		for k, v := range b {
			f["large_"+k] = v
		}
		for k, v := range s {
			f["large_"+k] = v
		}
		return f, nil
	}
	return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(Scenarios, ", "))
}

// rows sets the measured figures against the targets; a figure not
// measured is left out.
func rows(f Figures) []Row {
	abs := []Row{
		{Name: "burn_down_tasks_per_s", Label: "burn-down of queued no-op tasks (Go handler)", Unit: "tasks/s", Op: ">=", Target: 18000},
		{Name: "burn_down_mysql_cpu_us_per_task", Label: "... MySQL server CPU per task", Unit: "µs", Op: "<=", Target: 50},
		{Name: "burn_down_redis_cpu_us_per_task", Label: "... Redis server CPU per task", Unit: "µs", Op: "<=", Target: 15},
		{Name: "burn_down_taskd_cpu_us_per_task", Label: "... taskd CPU per task", Unit: "µs", Op: "<=", Target: 35},
		{Name: "steady_p50_ms", Label: "submit-to-start at a steady rate, p50", Unit: "ms", Op: "<=", Target: 4},
		{Name: "steady_p99_ms", Label: "submit-to-start at a steady rate, p99", Unit: "ms", Op: "<=", Target: 15},
		{Name: "seed_p99_ms", Label: "INSERT to start of rows INSERTed without a wakeup (PHP, the seed), p99", Unit: "ms", Op: "<=", Target: 200},
		{Name: "lateness_p99_ms", Label: "lateness of tasks due within one window, p99", Unit: "ms", Op: "<=", Target: 10},
		{Name: "lateness_early_tasks", Label: "... tasks started before their due time (server's clock)", Unit: "tasks", Op: "<=", Target: 0},
		{Name: "submit_batch_tasks_per_s", Label: "submit, batched from one client", Unit: "tasks/s", Op: ">=", Target: 30000},
		{Name: "submit_single_tasks_per_s", Label: "submit, single-row from 8 clients", Unit: "tasks/s", Op: ">=", Target: 5000},
		{Name: "exec_tasks_per_s", Label: "exec handler running /bin/true", Unit: "tasks/s", Op: ">=", Target: 2000},
		{Name: "pool_vs_exec_boot_x", Label: "PHP handler booting 50 ms: pool over exec, tasks/s", Unit: "x", Op: ">=", Target: 20},
		{Name: "pool_noop_tasks_per_s", Label: "no-op PHP pool handler (Worker::run)", Unit: "tasks/s", Op: ">=", Target: 3000},
		{Name: "recycle_lost_tasks", Label: "pool recycled every max_jobs while tasks flow: tasks lost", Unit: "tasks", Op: "<=", Target: 0},
		{Name: "recycle_run_twice_tasks", Label: "... tasks run twice", Unit: "tasks", Op: "<=", Target: 0},
		{Name: "rate_limit_window_over_bound", Label: "rate limit over 3 nodes: most starts in 10 s over rate x 10 + burst", Unit: "tasks", Op: "<=", Target: 0},
		{Name: "rate_limit_abs_off_ideal_pct", Label: "... backlog's time off the ideal (tasks - burst) / rate", Unit: "%", Op: "<=", Target: 10},
		{Name: "burn_down_rss_mb", Label: "resident memory during the burn-down", Unit: "MB", Op: "<=", Target: 64},
		{Name: "idle_rss_mb", Label: "resident memory with 1,000 idle worker slots", Unit: "MB", Op: "<=", Target: 64},
	}
	// With the large table: within 10% of the same figure on an empty one.
	rel := []struct {
		name, of, label string
		unit, op        string
		factor          float64
	}{
		{"large_burn_down_tasks_per_s", "burn_down_tasks_per_s", "burn-down with 1,000,000 rows in the task center", "tasks/s", ">=", 0.9},
		{"large_steady_p50_ms", "steady_p50_ms", "submit-to-start p50 with 1,000,000 rows", "ms", "<=", 1.1},
		{"large_steady_p99_ms", "steady_p99_ms", "submit-to-start p99 with 1,000,000 rows", "ms", "<=", 1.1},
	}
	var out []Row
	for _, row := range abs {
		if v, ok := f[row.Name]; ok {
			row.Value = v
			row.Met = met(row.Op, v, row.Target)
			out = append(out, row)
		}
	}
	for _, r := range rel {
		v, ok := f[r.name]
		base, hasBase := f[r.of]
		if !ok || !hasBase {
			continue
		}
		row := Row{Name: r.name, Label: r.label, Unit: r.unit, Op: r.op, Target: base * r.factor, Value: v}
		row.Met = met(r.op, v, row.Target)
		out = append(out, row)
	}
	return out
}

func met(op string, v, target float64) bool {
	if math.IsNaN(v) {
		return false
	}
	if op == ">=" {
		return v >= target
	}
	return v <= target
}

// WriteTable prints the report for a terminal.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "taskd bench: %s, %s CPUs, GOGC %s, MySQL %s, Redis %s; burn_down, exec and pool claim %s tasks at a time (scheduler.batch_size)\n\n",
		r.Environment["os"], r.Environment["cpus"], r.Environment["gogc"], r.Environment["mysql"], r.Environment["redis"], r.Environment["drain_batch_size"])
	if s := r.Environment["settle"]; s != "" {
		fmt.Fprintf(w, "note: %s\n\n", s)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tTARGET\tMEASURED\t")
	for _, row := range r.Rows {
		verdict := "ok"
		if !row.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%s %s %s\t%s %s\t%s\n", row.Label, row.Op, num(row.Target), row.Unit, num(row.Value), row.Unit, verdict)
	}
	tw.Flush()
	if len(r.Figures) > 0 {
		fmt.Fprintln(w, "\nall figures:")
		keys := make([]string, 0, len(r.Figures))
		for k := range r.Figures {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, k := range keys {
			fmt.Fprintf(tw, "  %s\t%s\n", k, num(r.Figures[k]))
		}
		tw.Flush()
	}
	for name, err := range r.Errors {
		fmt.Fprintf(w, "\nscenario %s failed: %s\n", name, err)
	}
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.Abs(v) >= 100:
		return groupThousands(fmt.Sprintf("%.0f", v))
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// GCPercent is the collector's target now, which the figures are
// measured at (taskd sets its own unless GOGC is set): the CPU and memory
// figures move with it. debug.SetGCPercent returns the previous target.
func GCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
