package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rivo/uniseg"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
)

// taskd doctor: one line per check and a summary, -o json, exit 0 unless
// a check failed; a broken configuration is a failed check, not exit 2.
func TestDoctorCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "doctor")
	require.Equal(t, cli.ExitOK, r.code, "%s%s", r.stdout, r.stderr)
	require.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	line := regexp.MustCompile(`^(ok|warn|fail) +[a-z_.]+[a-z] +\S`)
	for _, l := range lines[:len(lines)-1] {
		require.Regexp(t, line, l)
	}
	require.Regexp(t, `^doctor: \d+ ok, \d+ warnings?, 0 failures$`, lines[len(lines)-1])
	require.Contains(t, r.stdout, "handlers.hello")

	var rep struct {
		OK     bool
		Counts map[string]int
		Checks []struct{ Name, Status, Detail, Fix string }
	}
	b.okJSON(t, &rep, "doctor")
	require.True(t, rep.OK)
	require.Len(t, rep.Checks, len(lines)-1)

	b.env.Exec(t, `DROP TABLE taskd_schema`)
	r = b.run(t, "doctor", "-o", "json")
	require.Equal(t, cli.ExitFailure, r.code)
	require.Empty(t, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.False(t, rep.OK)
	require.Equal(t, 1, rep.Counts["fail"])

	typo := writeConfig(t, b.env.ConfigYAML("workr: { concurrency: 2 }\n"))
	r = runCLI(t, typo, "", "doctor")
	require.Equal(t, cli.ExitFailure, r.code)
	require.Contains(t, r.stdout, `fail config unknown key "workr" in `+typo+` (did you mean "worker"?)`)
}

// On a terminal of 80 columns a long check is wrapped under its own
// column instead of breaking mid-word under the names; piped, each check
// stays one line for grep.
func TestDoctorFitsTheTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var stdout, stderr bytes.Buffer
	a := &cli.App{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(""), Width: 80}
	require.Equal(t, cli.ExitOK, a.Execute(context.Background(), []string{"--config", b.cfgPath, "doctor"}), stderr.String())
	piped := strings.Split(strings.TrimSpace(b.ok(t, "doctor")), "\n")
	narrow := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Greater(t, len(narrow), len(piped), "some checks are longer than 80 columns")
	indent := regexp.MustCompile(`^(?:ok|warn|fail) +[a-z_.]+[a-z] +`).FindString(narrow[0])
	require.NotEmpty(t, indent)
	var joined []string
	for _, l := range narrow {
		require.LessOrEqual(t, uniseg.StringWidth(l), 80, "%q", l)
		if rest, ok := strings.CutPrefix(l, strings.Repeat(" ", len(indent))); ok {
			joined[len(joined)-1] += " " + rest // a continuation, under the detail column
			continue
		}
		joined = append(joined, l)
	}
	figure := regexp.MustCompile(`\d+`) // Redis's memory, the open connections, the clocks' agreement (1ms, 10ms): the shared servers' figures move
	squeeze := func(ls []string) []string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = figure.ReplaceAllString(strings.Join(strings.Fields(l), ""), "0")
		}
		return out
	}
	require.Equal(t, squeeze(piped), squeeze(joined), "the same text, each check wrapped under its own column")
}

// On a terminal of 80 columns every command's help fits it: descriptions
// and flags wrap between words (examples, being commands, stay whole);
// piped, the help is as it was written.
func TestHelpFitsTheTerminal(t *testing.T) {
	t.Parallel()
	help := func(width int, path ...string) string {
		var stdout, stderr bytes.Buffer
		a := &cli.App{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(""), Width: width}
		require.Equal(t, cli.ExitOK, a.Execute(context.Background(), append(path, "--help")), stderr.String())
		return stdout.String()
	}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		inExamples := false
		for _, l := range strings.Split(help(80, path...), "\n") {
			switch {
			case l == "Examples:":
				inExamples = true
			case inExamples && !strings.HasPrefix(l, "  "):
				inExamples = false
			}
			if !inExamples {
				require.LessOrEqual(t, uniseg.StringWidth(l), 80, "%v: %q", path, l)
			}
		}
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub, append(slices.Clone(path), sub.Name()))
			}
		}
	}
	walk((&cli.App{}).Root(), nil)

	piped := help(0, "submit")
	require.Regexp(t, `(?m)^      --on-conflict string +what a submit does when a task holds its unique key: reject .{200,}$`, piped, "one line each")
	narrow := help(80, "submit")
	require.Contains(t, narrow, "      --on-conflict string      what a submit does when a task holds its\n                                unique key:")
}
