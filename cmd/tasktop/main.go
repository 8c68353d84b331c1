// Command tasktop is the operator's terminal UI (see package tui).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	// The zone database, in the binary: a release build (CGO off,
	// -trimpath) on a host or image without tzdata (debian:12 and alpine
	// images, scratch) could load no zone but UTC, and refused
	// `--tz Asia/Shanghai` and a cron.timezone as unknown zones.
	_ "time/tzdata"

	"github.com/taskd/taskd/tui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := tui.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
