package alert

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd/pkg/clock"
)

// promRules is the part of a Prometheus rules file the test reads.
type promRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

const promRulesFile = "../../deploy/prometheus/taskd-rules.yaml"

// prometheusOnly are the alerts of the rules file that the built-in
// alerter has no rule for.
var prometheusOnly = []string{"taskd_monitor_down", "taskd_target_down", "taskd_results_unwritten"}

// The shipped Prometheus rules say what the built-in rules say: the same
// alert names, severities, descriptions and runbooks, and the thresholds
// and durations of DefaultRules (promtool's tests in deploy/prometheus
// check what the expressions do with them).
func TestPrometheusRulesMatchTheBuiltInRules(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(promRulesFile)
	require.NoError(t, err)
	var f promRules
	require.NoError(t, yaml.Unmarshal(raw, &f))

	d := DefaultRules
	// The comparison each expression must make, from the defaults.
	compares := map[string][]string{
		RuleBacklog:        {fmt.Sprintf("> %g", d.Backlog.Threshold)},
		RuleSuccessRate:    {fmt.Sprintf("< %g", d.SuccessRate.Threshold)},
		RuleHeartbeatStale: {fmt.Sprintf("> %g", d.HeartbeatStale.Threshold)},
		RuleNoConsumer:     {fmt.Sprintf(">= %g", d.NoConsumer.Threshold)},
		RuleOldestDue:      {fmt.Sprintf("> %g", d.OldestDue.Threshold)},
		RuleDeadTasks:      {fmt.Sprintf("> %g", d.DeadTasks.Threshold), "[" + clock.Format(d.DeadTasks.For) + "]"},
		// "A heal within the window" is "more than 0 heals" only.
		RuleWatchdogHeal: {fmt.Sprintf("< %g", d.WatchdogHeal.For.Seconds())},
		RuleRedisMemory:  {fmt.Sprintf(">= %g", d.RedisMemory.Threshold)},
	}
	require.Zero(t, d.WatchdogHeal.Threshold, "taskd_watchdog_heal's expression holds for a threshold of 0 only")
	fors := map[string]string{
		RuleBacklog: clock.Format(d.Backlog.For), RuleSuccessRate: clock.Format(d.SuccessRate.For),
		RuleHeartbeatStale: clock.Format(d.HeartbeatStale.For), RuleNoConsumer: clock.Format(d.NoConsumer.For),
		RuleOldestDue: clock.Format(d.OldestDue.For), RuleRedisMemory: clock.Format(d.RedisMemory.For),
	}

	anchors := headingAnchors(t, "../../docs/troubleshooting.md")
	seen := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			name := r.Alert
			seen[name] = true
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbookBase+"#")
			require.True(t, ok, "%s: runbook_url %q is not a section of %s", name, url, runbookBase)
			require.Contains(t, anchors, anchor, "%s: docs/troubleshooting.md has no section #%s", name, anchor)
			require.NotEmpty(t, r.Annotations["summary"], name)
			require.NotEmpty(t, r.Annotations["description"], name)
			if _, builtin := severities[name]; !builtin {
				require.Contains(t, prometheusOnly, name, "an alert the built-in alerter does not have")
				continue
			}
			require.Equal(t, severities[name], r.Labels["severity"], name)
			require.Equal(t, describe(name, &d), r.Annotations["description"], name)
			require.Equal(t, runbook(name), url, name)
			for _, c := range compares[name] {
				require.Contains(t, r.Expr, c, name)
			}
			if want, ok := fors[name]; ok && want != "0s" {
				require.Equal(t, want, r.For, name)
			} else {
				require.Empty(t, r.For, "%s fires at once", name)
			}
		}
	}
	for name := range severities {
		require.True(t, seen[name], "the rules file has no alert %s", name)
		require.Contains(t, compares, name, "the comparison %s must make", name)
	}
	for name := range runbooks {
		require.Contains(t, anchors, runbooks[name], "docs/troubleshooting.md has no section for %s", name)
	}
}

// headingAnchors returns the GitHub anchors of a Markdown file's headings.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	var out []string
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out = append(out, strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-"))
	}
	require.NoError(t, sc.Err())
	return out
}
