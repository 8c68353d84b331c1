package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGoEmbedExample builds examples/go, the program embedding taskd's Go
// API, and runs it against a task center: its Go handler runs every task
// it submitted, and the results are in the task center.
func TestGoEmbedExample(t *testing.T) {
	t.Parallel()
	b := setup(t, "scheduler:\n  poll_interval: 200ms\n")
	bin := filepath.Join(t.TempDir(), "go-embed")
	build := exec.Command("go", "build", "-o", bin, "github.com/taskd/taskd/examples/go")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err = exec.CommandContext(ctx, bin, "--config", b.config, "-n", "4").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Len(t, regexp.MustCompile(`(?m)^hello, gopher \d \(task \d+, attempt 1\)$`).FindAll(out, -1), 4, "%s", out)
	require.Equal(t, 4, b.env.Count(t, "SELECT COUNT(*) FROM task_center WHERE task_code = 'greet' AND status = 3 AND last_result LIKE 'greeted gopher %'"))
}
