package node

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/testenv"
)

// A node says at start which exec handlers this host cannot start,
// naming what is missing; the others pass without a word.
func TestWarnUnrunnable(t *testing.T) {
	t.Parallel()
	var buf testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	dir := t.TempDir()
	warnUnrunnable(&config.Config{Handlers: map[string]config.HandlerSpec{
		"typo":   {Exec: []string{"phpx", "artisan", "x"}},
		"script": {Exec: []string{"sh", "missing.sh"}, Dir: dir},
		"fine":   {Exec: []string{"sh", "-c", "true"}},
		"web":    {HTTP: "http://127.0.0.1:1/x"},
	}}, log)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	require.Contains(t, lines[0], `msg="exec handler cannot start on this host: its tasks fail here, and are retried, until it can" code=script err="script missing.sh: not found in dir `+dir+`"`)
	require.Contains(t, lines[1], `code=typo err="program phpx: exec: \"phpx\": executable file not found in $PATH"`)
}
