package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/producer"
)

const (
	rulesFile     = "../deploy/prometheus/taskd-rules.yaml"
	dashboardFile = "../deploy/grafana/taskd-dashboard.json"
)

// The shipped Prometheus rules load in Prometheus and pass their unit
// tests (each alert fires, stays quiet and resolves), run by promtool from
// Debian's prometheus package.
func TestPrometheusRulesPromtool(t *testing.T) {
	t.Parallel()
	needTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "taskd-rules.yaml"},
		{"test", "rules", "taskd-rules.test.yaml"},
	} {
		cmd := exec.Command("promtool", args...)
		cmd.Dir = "../deploy/prometheus"
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %v:\n%s", args, out)
	}
}

// The dashboard and the rules cannot drift from the code: every metric
// and label a panel, a variable or a rule uses is in what a running
// daemon serves on /metrics.
func TestMonitoringMatchesTheMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, appendHandler+`
metrics:
  addr: 127.0.0.1:0
scheduler:
  poll_interval: 200ms
queues:
  append: { concurrency: 2 }
`)
	d := b.startDaemonArgs(t, "web-1", "run", "--node-id", "web-1")
	addr := metricsAddr(t, d)

	// What only some states show: a finished task, a watchdog heal.
	cl := producer.New(b.env.Store, b.env.Broker, producer.Options{Logger: quiet})
	_, err := cl.Submit(b.ctx, producer.Submission{Code: "append", Payload: json.RawMessage(`{}`)})
	require.NoError(t, err)
	b.waitCount(t, 1, 60*time.Second, `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	require.NoError(t, b.env.Broker.RecordEvent(b.ctx, &broker.Event{At: time.Now(), Kind: "idle", Node: "web-1", WorkerID: "w-1-ab", Detail: "test"}))

	exprs, records := monitoringExprs(t)
	require.NotEmpty(t, exprs)
	// Some series come with a state (the heal, a live worker's slots,
	// Redis's memory read, the process's beat), so one scrape may not
	// have them yet: wait for one that serves every metric used, and
	// check that one. If none comes, the checks name what is missing.
	served := map[string]bool{}
	for _, e := range exprs {
		for name := range promRefs(e.expr).metrics {
			served[name] = !strings.Contains(name, ":") && name != "up" // recording rules and Prometheus's own up are not served
		}
	}
	var have map[string][]string
	if !assert.Eventually(t, func() bool {
		fams := familyLabels(scrapeMetrics(t, addr))
		for name, isServed := range served {
			if _, ok := fams[name]; isServed && !ok {
				return false
			}
		}
		have = fams
		return true
	}, 60*time.Second, 200*time.Millisecond, "a scrape serving every metric the rules and the dashboard use") {
		have = familyLabels(scrapeMetrics(t, addr))
	}
	for _, e := range exprs {
		refs := promRefs(e.expr)
		require.NotEmpty(t, refs.metrics, "%s: no metric found in %q", e.where, e.expr)
		known := map[string]bool{}
		for name, used := range refs.metrics {
			labels, ok := have[name]
			if name == "up" { // Prometheus's, per target
				labels, ok = targetLabels, true
			}
			if strings.Contains(name, ":") {
				labels, ok = records[name], records[name] != nil
				require.True(t, ok, "%s: %s is not a recording rule of %s", e.where, name, rulesFile)
			}
			require.True(t, ok, "%s: metric %s is not served on /metrics", e.where, name)
			for _, l := range used {
				require.Contains(t, labels, l, "%s: %s has no label %s", e.where, name, l)
			}
			for _, l := range labels {
				known[l] = true
			}
		}
		for _, l := range append(refs.grouping, e.labels...) {
			require.True(t, known[l], "%s: label %s is on none of %v", e.where, l, refs.names())
		}
	}
}

// monitored is one PromQL expression of the rules or the dashboard, and
// the labels its legend or variable reads.
type monitored struct {
	where  string
	expr   string
	labels []string
}

var (
	legendLabel  = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	labelValues  = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
	grafanaVar   = regexp.MustCompile(`\$__\w+|\$\{\w+\}|\$\w+`)
	targetLabels = []string{"job", "instance"} // added by Prometheus when it scrapes
)

// monitoringExprs reads every expression of the rules file and the
// dashboard, and the labels each recording rule's series has.
func monitoringExprs(t *testing.T) ([]monitored, map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string } `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	var out []monitored
	records := map[string][]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, monitored{where: "rule " + r.Record + r.Alert, expr: r.Expr})
			if r.Record != "" {
				records[r.Record] = promRefs(r.Expr).outLabels(records)
			}
		}
	}

	dash := readDashboard(t)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		require.NoError(t, json.Unmarshal(v.Query, &q), "variable %s", v.Name)
		m := labelValues.FindStringSubmatch(q.Query)
		require.NotNil(t, m, "variable %s: %q is not label_values(metric, label)", v.Name, q.Query)
		out = append(out, monitored{where: "variable " + v.Name, expr: m[1], labels: []string{m[2]}})
	}
	for _, p := range dash.allPanels() {
		for _, tg := range p.Targets {
			var labels []string
			for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
				labels = append(labels, m[1])
			}
			out = append(out, monitored{where: "panel " + p.Title, expr: tg.Expr, labels: labels})
		}
	}
	return out, records
}

// dashboard is the part of the Grafana JSON model the tests read.
type dashboard struct {
	UID           string
	Title         string
	SchemaVersion int
	Templating    struct {
		List []struct {
			Name  string
			Type  string
			Query json.RawMessage
		}
	}
	Panels []dashPanel
}

type dashPanel struct {
	ID          int
	Type        string
	Title       string
	Description string
	Datasource  struct{ Type, UID string }
	GridPos     struct{ H, W, X, Y int }
	Targets     []struct {
		Expr         string
		LegendFormat string
		RefID        string `json:"refId"`
	}
	Panels []dashPanel // of a row
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	return &d
}

// allPanels returns the panels, those of rows included.
func (d *dashboard) allPanels() []dashPanel {
	var out []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// metricsAddr reads the address a daemon's metrics listener took from its
// log.
func metricsAddr(t *testing.T, d *daemon) string {
	t.Helper()
	var addr string
	require.Eventually(t, func() bool {
		f, err := os.Open(d.log)
		if err != nil {
			return false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "metrics listening" {
				addr = l.Addr
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the daemon logs its metrics address")
	return addr
}

func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// familyLabels maps every series name /metrics serves (a histogram's
// _bucket, _sum and _count) to its label names, Prometheus's target
// labels included.
func familyLabels(fams map[string]*dto.MetricFamily) map[string][]string {
	out := map[string][]string{}
	for name, f := range fams {
		labels := slices.Clone(targetLabels)
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		out[name] = labels
		if f.GetType() == dto.MetricType_HISTOGRAM {
			out[name+"_bucket"] = append(slices.Clone(labels), "le")
			out[name+"_sum"], out[name+"_count"] = labels, labels
		}
	}
	return out
}

// refs are what one PromQL expression names: each metric with the labels
// its matchers use, and the labels of by, without, on, ignoring,
// group_left and group_right.
type refs struct {
	metrics  map[string][]string
	grouping []string
	// outer is the labels of the outermost aggregation (nil: none).
	outer []string
}

func (r refs) names() []string {
	var out []string
	for n := range r.metrics {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// outLabels are the labels of the expression's series: those of its
// outermost aggregation, else those of the recording rules it combines.
func (r refs) outLabels(records map[string][]string) []string {
	if r.outer != nil {
		return r.outer
	}
	var out []string
	for name := range r.metrics {
		out = append(out, records[name]...)
	}
	return out
}

var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// promTokens splits PromQL into identifiers, strings (quoted) and
// punctuation; numbers, durations and ranges ([5m], [10m:1m]) are dropped.
var promToken = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\[[^\]]*\]|#[^\n]*|[A-Za-z_:][A-Za-z0-9_:]*|[0-9][0-9A-Za-z.]*|=~|!~|!=|==|<=|>=|\S`)

func promRefs(expr string) refs {
	expr = grafanaVar.ReplaceAllString(expr, "5m")
	var toks []string
	for _, tok := range promToken.FindAllString(expr, -1) {
		if c := tok[0]; c == '[' || c == '#' || (c >= '0' && c <= '9') {
			continue
		}
		toks = append(toks, tok)
	}
	r := refs{metrics: map[string][]string{}}
	depth := 0
	// list reads "( a, b )" from toks[i], returning the names and the index
	// after it.
	list := func(i int) ([]string, int) {
		var names []string
		for i++; i < len(toks) && toks[i] != ")"; i++ {
			if toks[i] != "," {
				names = append(names, toks[i])
			}
		}
		return names, i + 1
	}
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tok == "(":
			depth++
		case tok == ")":
			depth--
		case promKeywords[tok] && next == "(":
			names, j := list(i + 1)
			r.grouping = append(r.grouping, names...)
			if tok == "by" && depth == 0 && r.outer == nil {
				r.outer = names
			}
			i = j - 1
		case promKeywords[tok] || next == "(" || next == "by" || next == "without" || !isIdent(tok):
			// an operator, a function, an aggregation (sum by (...) (...))
		default: // a metric, maybe with matchers
			used := r.metrics[tok]
			if next == "{" {
				j := i + 2
				for ; j < len(toks) && toks[j] != "}"; j++ {
					if isIdent(toks[j]) && j+1 < len(toks) && strings.ContainsAny(toks[j+1], "=!~") {
						used = append(used, toks[j])
					}
				}
				i = j
			}
			r.metrics[tok] = used
		}
	}
	return r
}

func isIdent(tok string) bool {
	c := tok[0]
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// The dashboard is one Grafana JSON model the importer takes: a uid,
// the current schema, a data source variable every panel uses, the queue
// and node variables, and panels that do not overlap.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	dash := readDashboard(t)
	require.NotEmpty(t, dash.UID)
	require.LessOrEqual(t, len(dash.UID), 40)
	require.NotEmpty(t, dash.Title)
	require.GreaterOrEqual(t, dash.SchemaVersion, 41, "the JSON model of Grafana 12 or later")
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
	}
	require.Equal(t, map[string]string{"datasource": "datasource", "job": "query", "queue": "query", "node": "query"}, vars)

	ids := map[int]bool{}
	type cell struct{ x, y int }
	used := map[cell]string{}
	titles := map[string]bool{}
	for _, p := range dash.Panels {
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Title)
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, p.Title)
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				require.Empty(t, used[cell{x, y}], "%s overlaps %s", p.Title, used[cell{x, y}])
				used[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		titles[p.Title] = true
		require.NotEmpty(t, p.Description, "%s says what it shows", p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.RefID, p.Title)
			require.Contains(t, tg.Expr, `job=~"$job"`, "%s: every query keeps to the chosen job", p.Title)
		}
	}
	for _, want := range []string{"Throughput per queue", "Success rate per queue", "Backlog per queue", "Oldest due per queue",
		"Start delay percentiles", "Duration percentiles", "Busy and total slots", "Heartbeat ages", "Recoveries",
		"Stale writes rejected", "Watchdog heals", "Redis memory"} {
		require.True(t, titles[want], "a panel %q", want)
	}
}
