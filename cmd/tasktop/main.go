// Command tasktop is the operator's terminal UI (see package tui).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/taskd/taskd/tui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := tui.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
