// Command taskd is the taskd daemon and its command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	// The zone database, in the binary: a release build (CGO off,
	// -trimpath) on a host or image without tzdata (debian:12 and alpine
	// images, scratch) could load no zone but UTC, and refused
	// `--tz Asia/Shanghai` and a cron.timezone as unknown zones.
	_ "time/tzdata"

	// Trusted roots, used only where the host has none (scratch and
	// debian:12-slim images without ca-certificates): https handlers,
	// notifiers and OTLP endpoints failed there with "certificate signed
	// by unknown authority". A host's own roots always take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/taskd/taskd/pkg/cli"
)

// gcPercent is the garbage collector's target unless GOGC is set. The
// daemon's live heap is a few megabytes and its garbage is per task, so
// Go's default (100) collects every few megabytes of tasks; 200 halves
// the collections for about 5 MB more resident memory (docs/benchmarks.md,
// "taskd's own CPU").
const gcPercent = 200

func main() {
	setGCPercent()
	ctx, stop := stopContext()
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Stdin)
	stop()
	os.Exit(code)
}

// stopContext is cancelled by the first of stopSignals, with a
// cli.Signalled cause naming it: `taskd run` exits for a restart on SIGHUP.
func stopContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, stopSignals()...)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(cli.Signalled{Signal: s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}

// setGCPercent applies gcPercent, unless GOGC says otherwise.
func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// stopSignals are the signals that stop a command, a daemon by draining.
// SIGHUP is one of them (Go's default would kill the process at once:
// `taskd run` in a terminal whose SSH session dropped, or a HUP sent for a
// reload, would leave its running tasks to recovery) unless it is ignored,
// as under nohup, which must keep ignoring it. After a HUP `taskd run`
// exits 75, which the shipped units restart: a reload.
func stopSignals() []os.Signal {
	sigs := []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}
