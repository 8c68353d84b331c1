package e2e

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
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
