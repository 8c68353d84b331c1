// Command tasktop is the operator's terminal UI.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/node"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Printf("tasktop %s (commit %s, built %s, %s)\n", node.Version, cli.Commit, cli.Date, runtime.Version())
		return
	}
	fmt.Fprintln(os.Stderr, "tasktop: the terminal UI is not built yet; use `taskd list` and `taskd show`")
	os.Exit(1)
}
