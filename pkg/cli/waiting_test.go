package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/testenv"
)

// On a terminal, a command held by a MySQL that takes the connection and
// never answers says what it waits for after a second, instead of a
// silent terminal for up to the dial and read timeouts; off a terminal
// (a script, cron's mail) only the outcome is said.
func TestWaitingSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	host := testenv.NewHungServer(t)
	hung := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\n", "root:@tcp("+host.Addr()+")/taskd"))
	want := "taskd: waiting for MySQL (" + host.Addr() + ") to answer; ctrl+c gives up"
	run := func(stderr io.Writer) int {
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond) // the operator's ctrl+c
		defer cancel()
		return cli.Execute(ctx, []string{"--config", hung, "list"}, io.Discard, stderr, strings.NewReader(""))
	}

	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	read := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, ptmx) // until the terminal closes
		read <- b.String()
	}()
	require.Equal(t, cli.ExitFailure, run(tty))
	tty.Close()
	onTerminal := <-read
	require.Contains(t, onTerminal, want)
	require.Less(t, strings.Index(onTerminal, want), strings.Index(onTerminal, "taskd: connect to mysql"), "first the wait, then its end")

	var piped bytes.Buffer
	require.Equal(t, cli.ExitFailure, run(&piped))
	require.NotContains(t, piped.String(), "waiting for")
	require.Equal(t, 1, strings.Count(piped.String(), "\n"), "one line: %q", piped.String())
}

// ctrl+c (or SIGTERM) during a command exits 130, as a shell reports an
// interrupted program, and says what it interrupted without Go's
// "context canceled".
func TestInterrupted(t *testing.T) {
	t.Parallel()
	host := testenv.NewHungServer(t)
	hung := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\n", "root:@tcp("+host.Addr()+")/taskd"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	var stderr bytes.Buffer
	require.Equal(t, cli.ExitInterrupted, cli.Execute(ctx, []string{"--config", hung, "list"}, io.Discard, &stderr, strings.NewReader("")))
	require.Equal(t, "taskd: interrupted: connect to mysql "+host.Addr()+"\n", stderr.String())
}
