package cli

import (
	"context"
	"io"
	"strings"

	"github.com/taskd/taskd/pkg/store"
)

// ExecuteMigrations runs args like Execute, with migs in place of the
// embedded migrations.
func ExecuteMigrations(ctx context.Context, migs []store.Migration, args []string, stdout, stderr io.Writer) int {
	a := &App{Stdout: stdout, Stderr: stderr, Stdin: strings.NewReader(""), migrations: migs}
	return a.Execute(ctx, args)
}
