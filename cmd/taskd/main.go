// Command taskd is the taskd daemon and its command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/taskd/taskd/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Stdin)
	stop()
	os.Exit(code)
}
