package tui

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// A flag's bad value is worded like a bad configuration value, not in the
// parser's words, and is a usage error.
func TestBadFlagValue(t *testing.T) {
	for _, args := range [][]string{{"--refresh", "5"}, {"serve", "--refresh", "5"}} {
		var stdout, stderr bytes.Buffer
		code := 2
		if args[0] == "serve" {
			code = 78
		}
		require.Equal(t, code, Main(context.Background(), args, &stdout, &stderr), args)
		require.Equal(t, "tasktop: bad value \"5\" for --refresh: want a duration such as 500ms, 30s or 5m\n", stderr.String(), args)
	}
}

// A mistyped flag names the flag it was likely meant as.
func TestMistypedFlag(t *testing.T) {
	for want, args := range map[string][]string{
		"tasktop: unknown flag: --confg (did you mean --config?)\n": {"--confg", "x.yaml"},
		"tasktop: unknown flag: --ref (did you mean --refresh?)\n":  {"serve", "--ref", "1s"},
	} {
		var stdout, stderr bytes.Buffer
		code := 2
		if args[0] == "serve" {
			code = 78 // a unit's mistyped flag: its units restart on 2, a crash
		}
		require.Equal(t, code, Main(context.Background(), args, &stdout, &stderr), args)
		require.Equal(t, want, stderr.String(), args)
	}
}

// tasktop serve refusing its configuration exits 78, which its units do
// not restart on; tasktop itself says 2. Both shipped units restart on 2,
// which is also a Go crash's exit.
func TestServeRefusesItsConfigurationWith78(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("tasktop:\n  refrsh: 5s\n"), 0o644))
	for args, code := range map[string]int{"serve": 78, "": 2} {
		var stdout, stderr bytes.Buffer
		argv := []string{"--config", cfg}
		if args != "" {
			argv = append([]string{args}, argv...)
		}
		require.Equal(t, code, Main(context.Background(), argv, &stdout, &stderr), "%v: %s", argv, stderr.String())
		require.Contains(t, stderr.String(), `unknown key "tasktop.refrsh"`)
	}
}

// A task center that takes the connection and never answers held the
// start, on a blank terminal, for up to mysql.read_timeout: it says what
// it waits for, and ctrl+c (the context) gives up at once.
func TestStartSaysWhatItWaitsFor(t *testing.T) {
	host := testenv.NewHungServer(t)
	hung := "root:@tcp(" + host.Addr() + ")/taskd"
	withTerminal(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := Main(ctx, []string{"--config", "/dev/null", "--mysql-dsn", hung}, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "tasktop: waiting for MySQL ("+host.Addr()+") and Redis (127.0.0.1:6379) to answer; ctrl+c gives up\n")

	// Without a terminal (ssh HOST tasktop, without -t) that is said
	// first: it used to come after the wait on the servers.
	withTerminal(t, false)
	stderr.Reset()
	code = Main(context.Background(), []string{"--config", "/dev/null", "--mysql-dsn", hung}, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Equal(t, "tasktop: "+errNoTerminal.Error()+"\n", stderr.String())
}

// withTerminal makes tasktop see a terminal, or none, for the test.
func withTerminal(t *testing.T, has bool) {
	was := hasTerminal
	hasTerminal = func() bool { return has }
	t.Cleanup(func() { hasTerminal = was })
}
