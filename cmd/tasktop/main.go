// Command tasktop is the operator's terminal UI.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "tasktop: the terminal UI is not built yet; use `taskd list` and `taskd show`")
	os.Exit(1)
}
