package cli

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/taskd/taskd/pkg/store"
)

// ExecuteMigrations runs args like Execute, with migs in place of the
// embedded migrations.
func ExecuteMigrations(ctx context.Context, migs []store.Migration, args []string, stdout, stderr io.Writer) int {
	a := &App{Stdout: stdout, Stderr: stderr, Stdin: strings.NewReader(""), migrations: migs}
	return a.Execute(ctx, args)
}

// The tests read output written to pipes and files whole: a COLUMNS
// exported where they run (a shell's, watch's) would narrow its tables
// (App.width). TestTablesFollowColumns sets it where it means to.
func init() { os.Unsetenv("COLUMNS") }
