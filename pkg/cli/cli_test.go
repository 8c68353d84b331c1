package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

const handlersYAML = "handlers:\n  hello:\n    exec: [\"true\"]\n  report:\n    exec: [\"true\"]\n"

type testBundle struct {
	env     *testenv.Env
	cfgPath string
}

// setup gives a test its own task center and a configuration file that
// points at it, with handlers for the codes hello and report.
func setup(t *testing.T) *testBundle {
	t.Helper()
	env := testenv.New(t)
	return &testBundle{env: env, cfgPath: writeConfig(t, env.ConfigYAML(handlersYAML))}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the taskd command line in-process with a configuration file.
func runCLI(t *testing.T, cfgPath, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full := append([]string{"--config", cfgPath}, args...)
	code := cli.Execute(ctx, full, &stdout, &stderr, strings.NewReader(stdin))
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (b *testBundle) run(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, b.cfgPath, "", args...)
}

// ok runs a command that must succeed and returns its standard output.
func (b *testBundle) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := b.run(t, args...)
	require.Equal(t, cli.ExitOK, r.code, "taskd %v: stderr %q", args, r.stderr)
	require.Empty(t, r.stderr, "taskd %v", args)
	return r.stdout
}

// okJSON runs a command with -o json and decodes its output into v.
func (b *testBundle) okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := b.ok(t, append(args, "-o", "json")...)
	require.NoError(t, json.Unmarshal([]byte(out), v), "output %q", out)
}

func (b *testBundle) rows(t *testing.T) int {
	t.Helper()
	return b.env.Count(t, `SELECT COUNT(*) FROM task_center`)
}

// requireOneLineError asserts the contract for failures: one line on
// stderr starting "taskd: ", nothing on stdout.
func requireOneLineError(t *testing.T, r result, wantCode int, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, wantCode, r.code, append([]any{"stderr %q"}, r.stderr)...)
	require.True(t, strings.HasPrefix(r.stderr, "taskd: "), "stderr %q", r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "exactly one line on stderr: %q", r.stderr)
	require.True(t, strings.HasSuffix(r.stderr, "\n"), "stderr %q", r.stderr)
	require.Empty(t, r.stdout, msgAndArgs...)
}

var submittedRE = regexp.MustCompile(`^submitted task (\d+)\n$`)

func (b *testBundle) submit(t *testing.T, args ...string) int64 {
	t.Helper()
	out := b.ok(t, append([]string{"submit"}, args...)...)
	m := submittedRE.FindStringSubmatch(out)
	require.NotNil(t, m, "output %q", out)
	id, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return id
}

// A payload piped to submit without --payload @- is named in a warning:
// the task gets {}, and the operator learns why at once.
func TestPipedPayloadWithoutAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pipe := func(text string) *os.File {
		r, w, err := os.Pipe()
		require.NoError(t, err)
		_, err = w.WriteString(text)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		t.Cleanup(func() { r.Close() })
		return r
	}
	run := func(stdin *os.File, args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := cli.Execute(t.Context(), append([]string{"--config", b.cfgPath}, args...), &stdout, &stderr, stdin)
		return code, stderr.String()
	}
	code, stderr := run(pipe(`{"to":"a@example.com"}`), "submit", "hello")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "taskd: warning: standard input is a pipe and is not read: the payload is {}; pass --payload @- to send what it carries\n", stderr)
	code, stderr = run(pipe(`{"to":"a@example.com"}`), "submit", "hello", "--payload", "@-")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Empty(t, stderr, "@- reads the pipe")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE JSON_VALUE(payload, '$.to') = 'a@example.com'`))
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	payloadFile := filepath.Join(t.TempDir(), "rows.json")
	require.NoError(t, os.WriteFile(payloadFile, []byte(`{"a":1}`), 0o600))

	for _, tc := range []struct {
		name string
		args []string
		want string // part of the error message
	}{
		{"payload -", []string{"submit", "hello", "--payload", "-"}, "taskd: --payload - is not JSON: pass --payload @- to read standard input\n"},
		{"payload file without @", []string{"cron", "add", "hello", "@daily", "--payload", payloadFile}, "is not JSON: pass --payload @" + payloadFile + " to read the file\n"},
		{"malformed cron", []string{"cron", "add", "hello", "61 * * * *"}, "61"},
		{"cron that never fires", []string{"cron", "add", "hello", "0 0 30 2 *"}, "never fires"},
		{"cron payload not JSON", []string{"cron", "add", "hello", "* * * * *", "--payload", "{oops"}, "JSON"},
		{"cron unknown time zone", []string{"cron", "add", "hello", "0 2 * * *", "--tz", "Mars/Base"}, "Mars/Base"},
		{"cron unknown code", []string{"cron", "add", "nosuch", "* * * * *"}, "nosuch"},
		{"cron missing expression", []string{"cron", "add", "hello"}, "taskd: cron add: missing EXPR; usage: taskd cron add CODE 'EXPR' [flags]\n"},
		{"cron expression unquoted", []string{"cron", "add", "hello", "0", "3", "*", "*", "*"}, "taskd: cron add: the cron expression came as 5 arguments: quote it as one, '0 3 * * *'; usage: taskd cron add CODE 'EXPR' [flags]\n"},
		{"@every unquoted", []string{"cron", "add", "hello", "@every", "5m"}, "quote it as one, '@every 5m'"},
		// The shell's expansion of the * of `cron add hello 0 3 * * *` here.
		{"cron expression globbed", []string{"cron", "add", "hello", "0", "3", "cli.go", "cron.go", "cli.go", "cron.go", "cli.go", "cron.go"},
			`the cron expression came as 8 arguments, file names among them ("cli.go"): the shell put the files here in place of an unquoted *`},
		{"many stray arguments", []string{"submit", "hello", "a", "b", "c", "d", "e", "f", "g"}, `unexpected arguments "a" "b" "c" "d" "e" and 2 more;`},
		{"cron missing code and expression", []string{"cron", "add"}, "taskd: cron add: missing CODE and EXPR; usage: taskd cron add CODE 'EXPR' [flags]\n"},
		{"cron remove without code", []string{"cron", "remove", "--yes"}, "taskd: cron remove: missing CODE; usage: taskd cron remove CODE [flags]\n"},
		{"cron timezone, two zones", []string{"cron", "timezone", "UTC", "Asia/Shanghai"}, "taskd: cron timezone: unexpected argument \"Asia/Shanghai\"; usage: taskd cron timezone [ZONE] [flags]\n"},
		{"payload not JSON", []string{"submit", "hello", "--payload", "not json"}, "JSON"},
		{"payload truncated", []string{"submit", "hello", "--payload", `{"a":`}, "JSON"},
		{"payload file missing", []string{"submit", "hello", "--payload", "@/nonexistent/payload.json"}, "payload"},
		{"payload empty", []string{"submit", "hello", "--payload", ""}, "payload from --payload is empty"},
		{"payload from empty standard input", []string{"submit", "hello", "--payload", "@-"}, "payload from standard input is empty"},
		{"cron payload empty", []string{"cron", "add", "hello", "* * * * *", "--payload", " "}, "payload from --payload is empty"},
		{"batch callback payload empty", []string{"batch", "hello", "{}", "--callback", "report", "--callback-payload", ""}, "payload from --callback-payload is empty"},
		{"priority 10", []string{"submit", "hello", "--priority", "10"}, "priority"},
		{"priority -1", []string{"submit", "hello", "--priority", "-1"}, "priority"},
		{"priority not a number", []string{"submit", "hello", "--priority", "high"}, "priority"},
		{"negative delay", []string{"submit", "hello", "--delay", "-5s"}, "negative"},
		{"delay not a duration", []string{"submit", "hello", "--delay", "soon"}, "delay"},
		{"delay with at", []string{"submit", "hello", "--delay", "5s", "--at", "2030-01-01T00:00:00Z"}, "--at"},
		{"bad at", []string{"submit", "hello", "--at", "tomorrow"}, "tomorrow"},
		{"timeout out of range", []string{"submit", "hello", "--timeout", "10ms"}, "timeout"},
		{"timeout 0", []string{"submit", "hello", "--timeout", "0"}, "--timeout: timeout 0s is out of range 1s-168h"},
		{"cron timeout 0", []string{"cron", "add", "hello", "* * * * *", "--timeout", "0s"}, "--timeout"},
		{"batch timeout 0", []string{"batch", "hello", "{}", "--callback", "report", "--timeout", "0"}, "--timeout"},
		{"max retry out of range", []string{"submit", "hello", "--max-retry", "1000"}, "max-retry"},
		{"bad queue name", []string{"submit", "hello", "--queue", "a b"}, "queue"},
		{"unique key too long", []string{"submit", "hello", "--unique-key", strings.Repeat("k", 192)}, "unique key"},
		{"unique key with a trailing space", []string{"submit", "hello", "--unique-key", "order-42 "}, `unique key "order-42 " starts or ends with whitespace`},
		{"unique key with a leading tab", []string{"submit", "hello", "--unique-key", "\torder-42"}, "starts or ends with whitespace"},
		{"unknown task code", []string{"submit", "nosuch"}, "nosuch"},
		{"invalid task code", []string{"submit", "no/such", "--any-code"}, "no/such"},
		{"unknown flag", []string{"submit", "hello", "--bogus"}, "taskd: unknown flag: --bogus\n"},
		{"mistyped flag", []string{"submit", "hello", "--paylod", "{}"}, "taskd: unknown flag: --paylod (did you mean --payload?)\n"},
		{"flag cut short", []string{"run", "--node", "a"}, "taskd: unknown flag: --node (did you mean --node-id?)\n"},
		{"daemon with an argument", []string{"run", "worker"}, "taskd: run: unexpected argument \"worker\""},
		{"mistyped global flag", []string{"list", "--confg", "x.yaml"}, "(did you mean --config?)"},
		{"another tool's --json", []string{"list", "--json"}, "taskd: unknown flag: --json (did you mean -o json?)\n"},
		{"another tool's --timezone", []string{"cron", "add", "hello", "@daily", "--timezone", "UTC"}, "taskd: unknown flag: --timezone (did you mean --tz?)\n"},
		{"another tool's --retries", []string{"submit", "hello", "--retries", "2"}, "(did you mean --max-retry?)"},
		{"another tool's --data", []string{"submit", "hello", "--data", "{}"}, "(did you mean --payload?)"},
		{"another tool's --force", []string{"kill", "1", "--force"}, "(did you mean --yes?)"},
		{"another tool's -n", []string{"list", "-n", "5"}, "taskd: unknown shorthand flag: 'n' in -n (did you mean --limit?)\n"},
		{"another tool's -n, joined", []string{"list", "-n50"}, "(did you mean --limit?)"},
		{"a synonym of no flag of the command", []string{"submit", "hello", "-n", "5"}, "taskd: unknown shorthand flag: 'n' in -n\n"},
		{"unknown shorthand", []string{"submit", "hello", "-z"}, "z"},
		{"negative shards", []string{"reshard", "hello", "-1"}, `bad argument "-1": no argument takes a negative number`},
		{"cron expression starting with -", []string{"cron", "add", "hello", "-1 * * * *"}, `bad argument "-1 * * * *": it starts with -, so it reads as flags; to give it as an argument, put -- before it`},
		{"flag without value", []string{"submit", "hello", "--priority"}, "priority"},
		{"missing argument", []string{"submit"}, "taskd: submit: missing CODE; usage: taskd submit CODE [flags]\n"},
		{"too many arguments", []string{"submit", "hello", "extra"}, "taskd: submit: unexpected argument \"extra\"; usage: taskd submit CODE [flags]\n"},
		{"payload as an argument", []string{"submit", "hello", `{"a":1}`}, `taskd: submit: unexpected argument "{\"a\":1}" (a payload is given with --payload); usage: taskd submit CODE [flags]` + "\n"},
		{"payload file as an argument", []string{"cron", "add", "hello", "@daily", "@rows.json"}, `unexpected argument "@rows.json" (a payload is given with --payload)`},
		{"pause without queue", []string{"pause", "--yes"}, "taskd: pause: missing QUEUE; usage: taskd pause QUEUE [flags]\n"},
		{"limit without queue", []string{"limit"}, "taskd: limit: missing QUEUE; usage: taskd limit QUEUE [flags]\n"},
		{"reshard without shards", []string{"reshard", "hello", "--yes"}, "taskd: reshard: missing N; usage: taskd reshard QUEUE N [flags]\n"},
		{"batch without code", []string{"batch", "--callback", "report"}, "taskd: batch: missing CODE and PAYLOAD; usage: taskd batch CODE PAYLOAD... --callback CODE [flags]\n"},
		{"unknown command", []string{"frobnicate"}, "taskd: unknown command \"frobnicate\"\n"},
		{"mistyped command", []string{"submitt", "hello"}, "taskd: unknown command \"submitt\" (did you mean \"submit\"?)\n"},
		{"mistyped command with its flags", []string{"sumbit", "hello", "--priority", "3", "--yes"}, "taskd: unknown command \"sumbit\" (did you mean \"submit\"?)\n"},
		{"ambiguous mistyped command", []string{"lok", "job", "--", "true"}, "taskd: unknown command \"lok\" (did you mean \"lock\" or \"locks\"?)\n"},
		{"bad -o value", []string{"submit", "hello", "-o", "yaml"}, "yaml"},
		{"bad --output value on list", []string{"list", "--output", "xml"}, "xml"},
		{"show abc", []string{"show", "abc"}, "abc"},
		{"show 0", []string{"show", "0"}, "0"},
		{"show without id", []string{"show"}, "taskd: show: missing task ID; usage: taskd show ID | --batch ID [flags]\n"},
		{"show two ids", []string{"show", "1", "2"}, "taskd: show: unexpected argument \"2\"; usage: taskd show ID | --batch ID [flags]\n"},
		{"show id and batch", []string{"show", "1", "--batch", "1"}, "either"},
		{"show batch 0", []string{"show", "--batch", "0"}, "batch"},
		{"then unknown code", []string{"submit", "hello", "--then", "report", "--then", "nosuch"}, `--then: unknown task code "nosuch": no handler`},
		{"mistyped code", []string{"submit", "helo"}, `unknown task code "helo" (did you mean "hello"?): no handler`},
		{"code in capitals", []string{"cron", "add", "HELLO", "@daily"}, `unknown task code "HELLO" (did you mean "hello"?)`},
		{"then invalid code", []string{"submit", "hello", "--then", "a b", "--any-code"}, "a b"},
		{"cron then unknown code", []string{"cron", "add", "hello", "* * * * *", "--then", "nosuch"}, "nosuch"},
		{"empty batch", []string{"batch", "hello", "--callback", "report"}, "empty batch"},
		{"batch without callback", []string{"batch", "hello", "{}"}, "--callback"},
		{"batch unknown callback", []string{"batch", "hello", "{}", "--callback", "nosuch"}, `--callback: unknown task code "nosuch"`},
		{"batch unknown code", []string{"batch", "nosuch", "{}", "--callback", "report"}, "nosuch"},
		{"batch payload not JSON", []string{"batch", "hello", "{}", "{oops", "--callback", "report"}, "task 2 of the batch"},
		{"batch callback payload not an object", []string{"batch", "hello", "{}", "--callback", "report", "--callback-payload", "[1]"}, "object"},
		{"batch callback payload with batch key", []string{"batch", "hello", "{}", "--callback", "report", "--callback-payload", `{"batch":1}`}, "batch"},
		{"batch - among payloads", []string{"batch", "hello", "{}", "-", "--callback", "report"}, "only PAYLOAD"},
		{"batch then unknown code", []string{"batch", "hello", "{}", "--callback", "report", "--then", "nosuch"}, "nosuch"},
		{"list --status bogus", []string{"list", "--status", "bogus"}, "bogus"},
		{"list --limit 0", []string{"list", "--limit", "0"}, "limit"},
		{"cron remove bad code", []string{"cron", "remove", "a b"}, "a b"},
		{"config file missing", []string{"--config", "/nonexistent/taskd.yaml", "submit", "hello"}, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.run(t, tc.args...)
			code := cli.ExitUsage
			if tc.args[0] == "run" {
				code = cli.ExitConfig // the daemon's units restart on 2, a crash
			}
			requireOneLineError(t, r, code)
			require.Contains(t, r.stderr, tc.want)
			require.Zero(t, b.rows(t), "nothing written")
		})
	}
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_run`))
}

// A flag's bad value says what the flag wants, as a bad configuration
// value does, not in the parser's words (strconv.ParseInt: ...).
func TestBadFlagValue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for args, want := range map[string]string{
		"list --limit abc":           `bad value "abc" for --limit: want a whole number`,
		"show --batch x1":            `bad value "x1" for --batch: want a whole number`,
		"submit hello --delay 5":     `bad value "5" for --delay: want a duration such as 500ms, 30s or 5m`,
		"submit hello --priority hi": `bad value "hi" for --priority: want a whole number`,
		"lock x --ttl 5 -- true":     `bad value "5" for --ttl: want a duration such as 500ms, 30s or 5m`,
		"submit hello --delay 2d":    `bad value "2d" for --delay: want a duration such as 500ms, 30s or 5m; there is no d: 2d is 48h`,
		"run --roles shceduler":      `bad value "shceduler" for node.roles in flag --roles: want some of scheduler, worker, recovery, retention, watchdog`,
		"--mysql-dsn bogus list":     `bad value "bogus" for mysql.dsn in flag --mysql-dsn: want a DSN such as user:password@tcp(host:3306)/taskd`,
	} {
		r := b.run(t, strings.Fields(args)...)
		code := cli.ExitUsage
		if strings.HasPrefix(args, "run ") {
			code = cli.ExitConfig // the daemon's units restart on 2, a crash
		}
		requireOneLineError(t, r, code)
		require.Equal(t, "taskd: "+want+"\n", r.stderr, args)
	}
	require.Zero(t, b.rows(t))
}

// A mistyped subcommand of a group fails as bad usage: it used to print
// the group's help and exit 0, which a script took for success.
func TestUnknownSubcommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "cron", "ad", "hello", "*/5 * * * *")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Equal(t, "taskd: unknown command \"ad\" for \"taskd cron\" (did you mean \"add\"?)\n", r.stderr)
	r = b.run(t, "cron", "remov", "hello", "--yes")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Equal(t, "taskd: unknown command \"remov\" for \"taskd cron\" (did you mean \"remove\"?)\n", r.stderr)
	r = b.run(t, "cron", "bogus")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Equal(t, "taskd: unknown command \"bogus\" for \"taskd cron\"\n", r.stderr)
	// The root says it the same way, in one line ("Did you mean this?"
	// and the suggestion on lines of their own, joined, it used to be).
	r = b.run(t, "submitt", "hello")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Equal(t, "taskd: unknown command \"submitt\" (did you mean \"submit\"?)\n", r.stderr)
	require.Zero(t, b.rows(t))
	// Alone, the group, or the root, shows what it holds.
	require.Contains(t, b.ok(t, "cron"), "Available Commands:")
	require.Contains(t, b.ok(t), "Available Commands:")
}

func TestBadConfigIsUsageError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := writeConfig(t, b.env.ConfigYAML("handlers:\n  hello: { exec: [\"true\"], http: \"http://x/\" }\n"))
	r := runCLI(t, path, "", "submit", "hello")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, "handlers.hello")
	require.Zero(t, b.rows(t))
}

func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "mysql:\n  dsn: \"root:@tcp(127.0.0.1:1)/taskd\"\n"+handlersYAML)
	for _, args := range [][]string{
		{"submit", "hello"},
		{"submit", "hello", "-o", "json"},
		{"cron", "add", "hello", "* * * * *"},
		{"list"},
		{"show", "1"},
		{"migrate"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var r result
			require.NotPanics(t, func() { r = runCLI(t, path, "", args...) })
			requireOneLineError(t, r, cli.ExitFailure)
			require.Contains(t, r.stderr, "127.0.0.1:1")
		})
	}
}

// A DSN that names no database is a configuration error, said as such:
// every statement would fail "No database selected".
func TestDSNWithoutDatabase(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "mysql:\n  dsn: \"root:@tcp(127.0.0.1:3306)/\"\n"+handlersYAML)
	for _, args := range [][]string{{"list"}, {"migrate"}, {"submit", "hello"}} {
		r := runCLI(t, path, "", args...)
		requireOneLineError(t, r, cli.ExitFailure)
		require.Contains(t, r.stderr, "mysql.dsn (from "+path+") names no database", "taskd %v", args)
	}
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t)

	id := b.submit(t, "hello", "--payload", `{"to":"a@example.com"}`, "--priority", "2", "--max-retry", "4", "--timeout", "90s")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND task_code = 'hello'
		AND task_type = 0 AND priority = 2 AND max_retry = 4 AND timeout = 90
		AND plan_next_run_at <= NOW(3) AND unique_key IS NULL`, id))
	// Due now: dispatched by the submit itself, pushed to its queue.
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 1 AND attempt = 1`, id))
	var payload string
	require.NoError(t, b.env.Store.DB().QueryRow(`SELECT payload FROM task_center WHERE id = ?`, id).Scan(&payload))
	require.JSONEq(t, `{"to":"a@example.com"}`, payload)

	t.Run("json output", func(t *testing.T) {
		var res change
		b.okJSON(t, &res, "submit", "hello", "--delay", "1h")
		require.Len(t, res.IDs, 1)
		require.Greater(t, res.IDs[0], id)
		require.Equal(t, "submit", res.Action)
		require.Equal(t, 1, res.Changed)
		require.WithinDuration(t, time.Now().Add(time.Hour), *res.NextRun, time.Minute)
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ?`, res.IDs[0]))
		require.False(t, *res.Dispatched, "delayed: a scheduler dispatches it")

		var now change
		b.okJSON(t, &now, "submit", "hello")
		require.True(t, *now.Dispatched, "due now: the submit pushed it")
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 1`, now.IDs[0]))
	})

	t.Run("unique key", func(t *testing.T) {
		var first, again change
		b.okJSON(t, &first, "submit", "hello", "--unique-key", "order-42")
		require.Equal(t, 1, first.Changed)

		b.okJSON(t, &again, "submit", "hello", "--unique-key", "order-42")
		require.Zero(t, again.Changed)
		require.Empty(t, again.IDs)
		require.Equal(t, []skipped{{ID: first.IDs[0], Status: "dispatched", Reason: `a task with unique key "order-42" exists`}}, again.Unchanged)

		out := b.ok(t, "submit", "hello", "--unique-key", "order-42")
		require.Equal(t, fmt.Sprintf("task %d already exists with unique key \"order-42\"; nothing submitted\n", first.IDs[0]), out)
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE unique_key = 'order-42'`))

		// Keys compare exactly: another case is another key.
		var upper change
		b.okJSON(t, &upper, "submit", "hello", "--unique-key", "ORDER-42")
		require.Equal(t, 1, upper.Changed)
		require.NotEqual(t, first.IDs[0], upper.IDs[0])
	})

	t.Run("delay is measured by the database clock", func(t *testing.T) {
		id := b.submit(t, "hello", "--delay", "1h")
		var diff int
		require.NoError(t, b.env.Store.DB().QueryRow(
			`SELECT TIMESTAMPDIFF(SECOND, NOW(3), plan_next_run_at) FROM task_center WHERE id = ?`, id).Scan(&diff))
		require.InDelta(t, 3600, diff, 10)
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND delay = 3600 AND task_type = 0`, id))
	})

	t.Run("at RFC 3339", func(t *testing.T) {
		at := time.Date(2031, 4, 5, 6, 7, 8, 0, time.UTC)
		id := b.submit(t, "hello", "--at", at.Format(time.RFC3339))
		var unix float64
		require.NoError(t, b.env.Store.DB().QueryRow(
			`SELECT UNIX_TIMESTAMP(plan_next_run_at) FROM task_center WHERE id = ? AND task_type = 2`, id).Scan(&unix))
		require.Equal(t, float64(at.Unix()), unix)
	})

	t.Run("at local time", func(t *testing.T) {
		at := time.Date(2031, 4, 5, 6, 7, 0, 0, time.Local)
		id := b.submit(t, "hello", "--at", "2031-04-05 06:07")
		var unix float64
		require.NoError(t, b.env.Store.DB().QueryRow(
			`SELECT UNIX_TIMESTAMP(plan_next_run_at) FROM task_center WHERE id = ? AND task_type = 2`, id).Scan(&unix))
		require.Equal(t, float64(at.Unix()), unix)
	})

	t.Run("payload from a file and from stdin", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "p.json")
		require.NoError(t, os.WriteFile(file, []byte(`{"from":"file"}`), 0o600))
		id := b.submit(t, "hello", "--payload", "@"+file)
		var payload string
		require.NoError(t, b.env.Store.DB().QueryRow(`SELECT payload FROM task_center WHERE id = ?`, id).Scan(&payload))
		require.JSONEq(t, `{"from":"file"}`, payload)

		r := runCLI(t, b.cfgPath, `{"from":"stdin"}`, "submit", "hello", "--payload", "@-")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		m := submittedRE.FindStringSubmatch(r.stdout)
		require.NotNil(t, m, r.stdout)
		require.NoError(t, b.env.Store.DB().QueryRow(`SELECT payload FROM task_center WHERE id = ?`, m[1]).Scan(&payload))
		require.JSONEq(t, `{"from":"stdin"}`, payload)

		// Saved by Notepad or redirected by PowerShell: a byte order mark
		// before the JSON was refused as "invalid character 'ï'".
		require.NoError(t, os.WriteFile(file, []byte("\xef\xbb\xbf"+`{"from":"notepad"}`), 0o600))
		id = b.submit(t, "hello", "--payload", "@"+file)
		require.NoError(t, b.env.Store.DB().QueryRow(`SELECT payload FROM task_center WHERE id = ?`, id).Scan(&payload))
		require.Equal(t, `{"from":"notepad"}`, payload)
		r = runCLI(t, b.cfgPath, "\xef\xbb\xbf"+`{"n":1}`+"\n"+`{"n":2}`+"\n", "batch", "hello", "-", "--callback", "hello")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "2 tasks")
	})

	t.Run("any-code accepts a code without a handler", func(t *testing.T) {
		id := b.submit(t, "go_handler", "--any-code", "--queue", "special")
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND queue = 'special'`, id))
	})
}

type cronTask struct {
	ID       int64  `json:"id"`
	Code     string `json:"task_code"`
	Type     string `json:"task_type"`
	Status   string `json:"status"`
	CronExpr string `json:"cron_expr"`
	Timezone string `json:"timezone"`
	Unique   string `json:"unique_key"`
	Next     string `json:"plan_next_run_at"`
}

var cronRE = regexp.MustCompile(`^(added|updated) periodic task (\d+); next run (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d), then [-0-9: ]+ and [-0-9: ]+\n$`)

// change is the one JSON shape of every action's result.
type change struct {
	Action    string
	Requested int
	Changed   int
	IDs       []int64
	Unchanged []skipped
	Queue     *struct {
		Name          string
		Before, After struct {
			Paused       bool
			Shards, Span int
		}
	}
	NextRun    *time.Time `json:"next_run"`
	Dispatched *bool
}

type skipped struct {
	ID     int64
	Status string
	Reason string
}

func TestCron(t *testing.T) {
	t.Parallel()
	b := setup(t)

	out := b.ok(t, "cron", "add", "hello", "*/5 * * * *")
	m := cronRE.FindStringSubmatch(out)
	require.NotNil(t, m, "output %q", out)
	require.Equal(t, "added", m[1])
	id := m[2]
	next, err := time.ParseInLocation("2006-01-02 15:04:05", m[3], time.Local)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), next, 5*time.Minute+5*time.Second)
	require.Zero(t, next.Minute()%5)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND task_type = 1
		AND cron_expr = '*/5 * * * *' AND status = 0 AND plan_next_run_at > NOW(3)`, id))

	out = b.ok(t, "cron", "add", "hello", "0 2 * * *", "--tz", "Asia/Shanghai")
	m = cronRE.FindStringSubmatch(out)
	require.NotNil(t, m, "output %q", out)
	require.Equal(t, "updated", m[1])
	require.Equal(t, id, m[2], "same code and name: the same task")
	// Both in the audit log, as cron remove is.
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'cron add' AND target = ?`, "task "+id))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'cron update' AND target = ?
		AND JSON_VALUE(detail, '$.cron') = '0 2 * * *' AND JSON_VALUE(detail, '$.timezone') = 'Asia/Shanghai'`, "task "+id))
	require.Equal(t, 1, b.rows(t))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND cron_expr = '0 2 * * *'
		AND timezone = 'Asia/Shanghai'`, id))
	var hourUTC int
	require.NoError(t, b.env.Store.DB().QueryRow(
		`SELECT FLOOR(MOD(UNIX_TIMESTAMP(plan_next_run_at), 86400) / 3600) FROM task_center WHERE id = ?`, id).Scan(&hourUTC))
	require.Equal(t, 18, hourUTC, "02:00 in Shanghai is 18:00 UTC")

	// The code matches exactly: HELLO's periodic task is not hello's.
	r := b.run(t, "cron", "remove", "HELLO", "--name", "hello", "--yes")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Contains(t, r.stderr, `unknown task code "HELLO" (did you mean "hello"?)`)
	require.Equal(t, 1, b.rows(t), "hello's periodic task is still there")

	r = b.run(t, "cron", "add", "report", "@hourly", "--name", "hourly report")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, `periodic task name "hourly report" may only contain ASCII letters, digits and _ . : -`)

	var res change
	b.okJSON(t, &res, "cron", "add", "report", "@hourly", "--name", "hourly-report")
	require.Equal(t, "cron add", res.Action)
	require.Zero(t, res.NextRun.Minute())
	b.okJSON(t, &res, "cron", "add", "report", "@daily", "--name", "hourly-report")
	require.Equal(t, "cron update", res.Action)
	require.Len(t, res.IDs, 1)

	var list []cronTask
	b.okJSON(t, &list, "cron", "list")
	require.Len(t, list, 2)
	byCode := map[string]cronTask{}
	for _, c := range list {
		require.Equal(t, "periodic", c.Type)
		require.Equal(t, "pending", c.Status)
		byCode[c.Code] = c
	}
	require.Equal(t, "0 2 * * *", byCode["hello"].CronExpr)
	require.Equal(t, "Asia/Shanghai", byCode["hello"].Timezone)
	require.Equal(t, "@daily", byCode["report"].CronExpr)
	require.Equal(t, res.IDs[0], byCode["report"].ID)

	// A one-off task is not a periodic one.
	b.submit(t, "hello")
	b.okJSON(t, &list, "cron", "list")
	require.Len(t, list, 2)

	text := b.ok(t, "cron", "list")
	require.Contains(t, text, "hourly-report")
	require.Contains(t, text, "Asia/Shanghai")
	b.okJSON(t, &list, "cron", "list", "report")
	require.Len(t, list, 1, "one code's periodic tasks")
	require.Equal(t, "report", list[0].Code)
	r = b.run(t, "cron", "list", "reprot", "-o", "json")
	require.Equal(t, cli.ExitOK, r.code, "stderr %q", r.stderr)
	require.Equal(t, "[]\n", r.stdout, "a code with no periodic task lists nothing")
	require.True(t, strings.HasPrefix(r.stderr, `taskd: warning: unknown task code "reprot" (did you mean "report"?)`), "stderr %q", r.stderr)
	requireOneLineError(t, b.run(t, "cron", "list", "bad code"), cli.ExitUsage)

	// A disabled periodic task reads disabled, with no next run (enable
	// sets one from then), in every listing; JSON keeps its status.
	b.ok(t, "disable", id, "--yes")
	require.Regexp(t, `(?m)^`+id+` +hello +hello +0 2 \* \* \* +Asia/Shanghai +disabled +- +disabled by operator$`, b.ok(t, "cron", "list"))
	require.Regexp(t, `(?m)^`+id+` +hello +hello +periodic +disabled +5 +0 +0/3 +- +disabled by operator$`, b.ok(t, "list", "--code", "hello"))
	shown := b.ok(t, "show", id)
	require.Contains(t, shown, "status      disabled (cancelled; `taskd enable "+id+"` sets its next run from then)\n")
	require.Contains(t, shown, "next run    -\n")
	b.okJSON(t, &list, "cron", "list")
	for _, c := range list {
		if strconv.FormatInt(c.ID, 10) == id {
			require.Equal(t, "cancelled", c.Status)
		}
	}
	r = b.run(t, "list", "--status", "disabled")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, "a disabled periodic task is cancelled")
	b.ok(t, "enable", id, "--yes")
	require.Regexp(t, `(?m)^`+id+` +hello .* pending +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +enabled by operator$`, b.ok(t, "cron", "list"))

	// Removing asks first: refused off a terminal without --yes.
	r = b.run(t, "cron", "remove", "hello")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, "refusing without --yes")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ?`, id))

	out = b.ok(t, "cron", "remove", "hello", "--yes")
	require.Equal(t, "removed periodic task "+id+"\n", out)

	// One whose run is under way: that run ends on its own, and its
	// result is not kept (its worker's log says so).
	b.ok(t, "cron", "add", "hello", "*/5 * * * *", "--name", "mid-run")
	b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 1, dispatched_at = NOW(3), started_at = NOW(3) WHERE unique_key = 'cron:mid-run'`)
	require.Regexp(t, `^removed periodic task \d+; its run under way ends on its own, and its result is not kept\n$`,
		b.ok(t, "cron", "remove", "hello", "--name", "mid-run", "--yes"))
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ?`, id))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'cron remove' AND target = ?`, "task "+id))

	audits := b.env.Count(t, `SELECT COUNT(*) FROM task_audit`)
	r = b.run(t, "cron", "remove", "hello", "--yes")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Contains(t, r.stderr, `no periodic task of code hello named "hello"`)
	require.Equal(t, audits, b.env.Count(t, `SELECT COUNT(*) FROM task_audit`), "not found: no audit row")
	// A code whose periodic task has a name of its own: the error names it.
	r = b.run(t, "cron", "remove", "report", "--yes")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Contains(t, r.stderr, `no periodic task of code report named "report": its periodic task is named "hourly-report" (--name hourly-report)`)

	// Listing and removing create no task: they need no Redis, and do not
	// warn that it is down (b.ok: nothing on stderr).
	require.Contains(t, b.ok(t, "cron", "list", "--redis-addr", "127.0.0.1:1"), "hourly-report")
	var removed change
	b.okJSON(t, &removed, "cron", "remove", "report", "--name", "hourly-report", "--yes", "--redis-addr", "127.0.0.1:1")
	require.Equal(t, "cron remove", removed.Action)
	require.Equal(t, []int64{res.IDs[0]}, removed.IDs)

	b.okJSON(t, &list, "cron", "list")
	require.Empty(t, list)
	require.Equal(t, "[]\n", b.ok(t, "cron", "list", "-o", "json"))
	require.Equal(t, 1, b.rows(t), "the one-off task is still there")
}

type listed struct {
	ID     int64  `json:"id"`
	Code   string `json:"task_code"`
	Status string `json:"status"`
	Queue  string `json:"queue"`
}

func ids(ts []listed) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// On a terminal of 80 columns, list and stats leave out the columns
// least needed, and say which, instead of wrapping every row; elsewhere
// (a pipe, a file) they keep every column.
func TestTablesFitTheTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, "hello", "--delay", "1h")
	b.env.Exec(t, `UPDATE task_center SET status = 4, last_result = ? WHERE id = ?`, strings.Repeat("connection refused ", 10), id)
	at := func(width int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		a := &cli.App{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(""), Width: width}
		require.Equal(t, cli.ExitOK, a.Execute(context.Background(), append([]string{"--config", b.cfgPath}, args...)), stderr.String())
		return stdout.String()
	}
	b.ok(t, "cron", "add", "hello", "0 3 * * *", "--name", "nightly-digest") // not due while the test runs: its figures stay put
	b.env.Exec(t, `UPDATE task_center SET last_result = ? WHERE cron_expr IS NOT NULL`, strings.Repeat("sent the digest ", 10))
	b.ok(t, "pause", "hello", "--yes") // an audit row
	// One whose filter leaves too little room for DETAIL at 80 columns.
	b.ok(t, "delete", "--status", "pending", "--code", "hello", "--search", "abc", "--yes")
	for _, args := range [][]string{{"list"}, {"stats"}, {"cron", "list"}, {"audit"}} {
		narrow := at(80, args...)
		for _, line := range strings.Split(strings.TrimRight(narrow, "\n"), "\n") {
			require.LessOrEqual(t, uniseg.StringWidth(line), 80, "%v: %q", args, line)
		}
		require.Contains(t, narrow, "hidden to fit 80 columns: ", args)
		require.Equal(t, at(0, args...), b.ok(t, args...), "no width: every column, as before")
		require.NotContains(t, at(300, args...), "hidden", "a wide terminal shows every column")
	}
	list := at(80, "list")
	require.Regexp(t, `(?m)^ID +CODE +QUEUE +STATUS +RETRY +NEXT RUN +LAST RESULT$`, list)
	require.Regexp(t, `(?m)^1 +hello +hello +failed +0/3 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +connection refused [a-z]+…$`, list,
		"LAST RESULT is cut to the width left")
	require.Contains(t, list, "\nhidden to fit 80 columns: TYPE, PRI; 0 in every row: ATTEMPT; -o json has all\n")
	stats := at(80, "stats")
	// The counts that are 0 on every queue make room first, said once
	// under the table: the failed task's FAILED shows.
	require.Regexp(t, `(?m)^QUEUE +PENDING +RUN +FAILED +DONE/MIN +OK 10M +STATE +WORKERS$`, stats)
	require.Regexp(t, `(?m)^hello +1 +0 +1 +0 +- +PAUSED, 1 shard +0$`, stats)
	require.Contains(t, stats, "\nhidden to fit 80 columns: 0 in every row: DUE, DISP, DEAD, CANC, BACKLOG,\nFAIL/MIN; - in every row: OLDEST DUE\n")
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var hello, report []int64
	for range 5 { // delayed: pending, not dispatched by the submit
		hello = append(hello, b.submit(t, "hello", "--delay", "1h"))
		report = append(report, b.submit(t, "report", "--delay", "1h"))
	}
	// Two dead hellos, one failed report.
	b.env.Exec(t, `UPDATE task_center SET status = 5 WHERE id IN (?, ?)`, hello[1], hello[3])
	b.env.Exec(t, `UPDATE task_center SET status = 4 WHERE id = ?`, report[2])

	var all []listed
	b.okJSON(t, &all, "list")
	require.Len(t, all, 10)
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i-1].ID, all[i].ID, "newest first")
	}

	var got []listed
	b.okJSON(t, &got, "list", "--status", "dead")
	require.Equal(t, []int64{hello[3], hello[1]}, ids(got))
	for _, x := range got {
		require.Equal(t, "dead", x.Status)
	}

	b.okJSON(t, &got, "list", "--status", "5", "--code", "report")
	require.Empty(t, got)
	require.Equal(t, "[]\n", b.ok(t, "list", "--status", "cancelled", "-o", "json"))

	b.okJSON(t, &got, "list", "--status", "failed", "--code", "report")
	require.Equal(t, []int64{report[2]}, ids(got))

	b.okJSON(t, &got, "list", "--code", "hello")
	require.Equal(t, []int64{hello[4], hello[3], hello[2], hello[1], hello[0]}, ids(got))

	b.okJSON(t, &got, "list", "--code", "hello", "--status", "pending")
	require.Equal(t, []int64{hello[4], hello[2], hello[0]}, ids(got))

	// A full page in text says where the next one starts; a page that
	// holds the rest does not.
	r := b.run(t, "list", "--limit", "3")
	require.Equal(t, cli.ExitOK, r.code)
	require.Equal(t, fmt.Sprintf("taskd: 3 tasks shown, more may match: the next page is --before %d (or --limit up to 10000)\n", report[3]), r.stderr)
	r = b.run(t, "list", "--limit", "3", "--before", strconv.FormatInt(hello[1], 10))
	require.Equal(t, cli.ExitOK, r.code)
	require.Regexp(t, `(?m)^`+strconv.FormatInt(hello[0], 10)+` +hello `, r.stdout)
	require.Empty(t, r.stderr, "the last page")

	// Keyset paging: pages of 3 until empty, no task twice, none lost.
	var paged []int64
	before := int64(0)
	for page := 0; page < 10; page++ {
		args := []string{"list", "--limit", "3"}
		if before > 0 {
			args = append(args, "--before", strconv.FormatInt(before, 10))
		}
		b.okJSON(t, &got, args...)
		if len(got) == 0 {
			break
		}
		require.LessOrEqual(t, len(got), 3)
		paged = append(paged, ids(got)...)
		before = got[len(got)-1].ID
	}
	require.Equal(t, ids(all), paged)

	// A filter that names nothing known lists nothing, as any filter does,
	// and says so with the nearest name; a known name with no tasks
	// (--status 5 --code report above) says nothing.
	for _, c := range []struct{ flag, name, want string }{
		{"--code", "helo", `taskd: warning: unknown task code "helo" (did you mean "hello"?)`},
		{"--queue", "reprot", `taskd: warning: unknown queue "reprot" (did you mean "report"?)`},
	} {
		r := b.run(t, "list", c.flag, c.name, "--status", "dead", "-o", "json")
		require.Equal(t, cli.ExitOK, r.code, "stderr %q", r.stderr)
		require.Equal(t, "[]\n", r.stdout)
		require.True(t, strings.HasPrefix(r.stderr, c.want), "stderr %q", r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "stderr %q", r.stderr)
	}

	b.okJSON(t, &got, "list", "--code", "hello", "--before", strconv.FormatInt(hello[2], 10))
	require.Equal(t, []int64{hello[1], hello[0]}, ids(got))

	text := b.ok(t, "list", "--status", "dead")
	require.Len(t, strings.Split(strings.TrimSpace(text), "\n"), 3, "header and two rows: %q", text)
	require.Contains(t, text, "dead")

	// Codes and queues match exactly, whatever the table's collation
	// folds: rows a producer INSERTed as "HELLO" and "hello " are not
	// hello's, and a kill of them leaves hello's alone.
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES
		('HELLO', '{}', NOW(3) + INTERVAL 1 HOUR), ('hello ', '{}', NOW(3) + INTERVAL 1 HOUR)`)
	var stray []listed
	b.okJSON(t, &stray, "list", "--code", "HELLO")
	require.Len(t, stray, 1)
	require.Equal(t, "HELLO", stray[0].Code)
	b.okJSON(t, &got, "list", "--code", "hello")
	require.Equal(t, []int64{hello[4], hello[3], hello[2], hello[1], hello[0]}, ids(got))
	b.okJSON(t, &got, "list", "--queue", "hello")
	require.Equal(t, []int64{hello[4], hello[3], hello[2], hello[1], hello[0]}, ids(got))
	b.ok(t, "kill", "--code", "HELLO", "--yes")
	require.Equal(t, 6, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, stray[0].ID))
	require.Equal(t, 3, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = BINARY 'hello' AND status = 0`),
		"hello's pending tasks are not killed")
}

func TestShow(t *testing.T) {
	t.Parallel()
	b := setup(t)

	id := b.submit(t, "hello", "--payload", `{"n":1}`, "--unique-key", "k1")
	b.env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, node, started_at, finished_at, outcome, result, duration_ms)
		VALUES (?, 1, 'hello', 'hello', 'w1', 'n1', NOW(3) - INTERVAL 3 SECOND, NOW(3) - INTERVAL 2 SECOND, 'failed', 'boom', 1000),
		       (?, 2, 'hello', 'hello', 'w2', 'n2', NOW(3) - INTERVAL 1 SECOND, NOW(3), 'succeeded', 'ok', 1000)`, id, id)
	b.env.Exec(t, `UPDATE task_center SET status = 3, attempt = 2, retry_count = 1, last_result = 'ok' WHERE id = ?`, id)
	other := b.submit(t, "report")
	b.env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, outcome) VALUES (?, 1, 'report', 'report', 'dead')`, other)

	var shown struct {
		ID         int64           `json:"id"`
		Code       string          `json:"task_code"`
		Type       string          `json:"task_type"`
		Status     string          `json:"status"`
		Attempt    int             `json:"attempt"`
		RetryCount int             `json:"retry_count"`
		UniqueKey  string          `json:"unique_key"`
		Payload    json.RawMessage `json:"payload"`
		LastResult string          `json:"last_result"`
		Runs       []struct {
			TaskID     int64  `json:"task_id"`
			Attempt    int    `json:"attempt"`
			WorkerID   string `json:"worker_id"`
			Node       string `json:"node"`
			Outcome    string `json:"outcome"`
			Result     string `json:"result"`
			DurationMS int64  `json:"duration_ms"`
		} `json:"runs"`
	}
	b.okJSON(t, &shown, "show", strconv.FormatInt(id, 10))
	require.Equal(t, id, shown.ID)
	require.Equal(t, "hello", shown.Code)
	require.Equal(t, "oneoff", shown.Type)
	require.Equal(t, "succeeded", shown.Status)
	require.Equal(t, 2, shown.Attempt)
	require.Equal(t, 1, shown.RetryCount)
	require.Equal(t, "k1", shown.UniqueKey)
	require.Equal(t, "ok", shown.LastResult)
	require.JSONEq(t, `{"n":1}`, string(shown.Payload))
	require.Len(t, shown.Runs, 2, "only this task's runs")
	require.Equal(t, 2, shown.Runs[0].Attempt, "newest first")
	require.Equal(t, "succeeded", shown.Runs[0].Outcome)
	require.Equal(t, "w2", shown.Runs[0].WorkerID)
	require.Equal(t, "n2", shown.Runs[0].Node)
	require.Equal(t, "ok", shown.Runs[0].Result)
	require.Equal(t, 1, shown.Runs[1].Attempt)
	require.Equal(t, "failed", shown.Runs[1].Outcome)
	require.Equal(t, "boom", shown.Runs[1].Result)
	require.EqualValues(t, 1000, shown.Runs[1].DurationMS)
	for _, r := range shown.Runs {
		require.Equal(t, id, r.TaskID)
	}

	b.okJSON(t, &shown, "show", strconv.FormatInt(id, 10), "--runs", "1")
	require.Len(t, shown.Runs, 1)
	require.Equal(t, 2, shown.Runs[0].Attempt)

	// A task without runs prints an empty list, not null.
	third := b.submit(t, "hello")
	out := b.ok(t, "show", strconv.FormatInt(third, 10), "-o", "json")
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	require.Equal(t, "[]", string(raw["runs"]))

	text := b.ok(t, "show", strconv.FormatInt(id, 10))
	require.Contains(t, text, "succeeded")
	require.Contains(t, text, "boom")
	require.Contains(t, text, "k1")
	require.Regexp(t, `worker +w2 \(node n2\), its last run\n`, text, "a finished task's worker, from its newest run")
	require.NotContains(t, text, "scheduled", "a task whose next run is its occurrence's")

	// A failed run waiting for its retry: show says which occurrence.
	b.env.Exec(t, `UPDATE task_center SET status = 4, scheduled_at = '2026-12-05 02:00:00.000', plan_next_run_at = NOW(3) + INTERVAL 1 HOUR WHERE id = ?`, third)
	require.Regexp(t, `scheduled +2026-12-0[45] \d\d:\d\d:00 \(the occurrence its retry runs for`, b.ok(t, "show", strconv.FormatInt(third, 10)))
	var sched struct {
		At time.Time `json:"scheduled_at"`
	}
	b.okJSON(t, &sched, "show", strconv.FormatInt(third, 10))
	require.False(t, sched.At.IsZero(), "scheduled_at in JSON")

	r := b.run(t, "show", "999999")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Contains(t, r.stderr, "not found")
}

// On a terminal, show gives a large payload and a long last result 40
// rows each and says where the rest is: a payload of 500 KiB scrolled
// the task's fields out of sight. Piped, and in JSON, they are whole.
func TestShowCutsLargeTextOnATerminal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows := make([]string, 5000)
	for i := range rows {
		rows[i] = fmt.Sprintf("%q", fmt.Sprintf("row %d %s", i, strings.Repeat("x", 100)))
	}
	payload := `{"rows":[` + strings.Join(rows, ",") + `]}`
	file := filepath.Join(t.TempDir(), "payload.json")
	require.NoError(t, os.WriteFile(file, []byte(payload), 0o644))
	id := strconv.FormatInt(b.submit(t, "hello", "--payload", "@"+file, "--delay", "1h"), 10)
	b.env.Exec(t, `UPDATE task_center SET last_result = ? WHERE id = ?`, "Fatal error: "+strings.Repeat("y", 20000)+"\nthe end", id)

	var stdout, stderr bytes.Buffer
	a := &cli.App{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(""), Width: 80}
	require.Equal(t, cli.ExitOK, a.Execute(context.Background(), []string{"--config", b.cfgPath, "show", id}), stderr.String())
	text := stdout.String()
	require.Contains(t, text, `"row 0 xxx`, "a line longer than the terminal left whole: copied, it is the same JSON")
	require.NotContains(t, text, `"row 4999 `)
	require.Regexp(t, `\n✂ cut: the payload is 5\d\d\.\d KiB, more than is shown here; taskd show `+id+` -o json\nprints all of it\n\nlast result:\nFatal error: y+…\n`, text)
	require.Regexp(t, `\n✂ cut: the result is 19\.\d KiB, more than is shown here; taskd show `+id+` -o json\nprints all of it\n\nruns`, text)
	require.Contains(t, text, "Fatal error: "+strings.Repeat("y", 40*80-len("Fatal error: ")-1)+"…\n", "cut at its 40th row")
	rowsUsed := 0
	for _, l := range strings.Split(text, "\n") {
		rowsUsed += max(1, (uniseg.StringWidth(l)+79)/80)
	}
	require.Less(t, rowsUsed, 40+40+40, "the fields, 40 rows of each text, the runs")

	whole := b.ok(t, "show", id)
	require.Contains(t, whole, `"row 4999 `)
	require.Contains(t, whole, "\nthe end\n")
	require.NotContains(t, whole, "✂ cut")
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Start from an empty database.
	rows, err := b.env.Store.DB().Query(`SHOW TABLES`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, "`"+name+"`")
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.NotEmpty(t, tables)
	b.env.Exec(t, `DROP TABLE `+strings.Join(tables, ", "))

	var first, second struct {
		Applied []int `json:"applied"`
		Version int   `json:"version"`
	}
	b.okJSON(t, &first, "migrate")
	require.NotEmpty(t, first.Applied)
	require.Equal(t, first.Applied[len(first.Applied)-1], first.Version)
	require.Equal(t, 1, first.Applied[0])
	require.Zero(t, b.rows(t), "task_center exists again")

	b.okJSON(t, &second, "migrate")
	require.Empty(t, second.Applied, "a second run applies nothing")
	require.NotNil(t, second.Applied, "applied is [] in JSON, not null")
	require.Equal(t, first.Version, second.Version)

	out := b.ok(t, "migrate")
	require.Equal(t, fmt.Sprintf("schema is up to date (version %d)\n", first.Version), out)

	// The schema works: a submit after migrate.
	b.submit(t, "hello")
	require.Equal(t, 1, b.rows(t))
}

func TestVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var v map[string]string
	b.okJSON(t, &v, "version")
	require.NotEmpty(t, v["version"])
	require.Equal(t, cli.Commit, v["commit"])
	require.Equal(t, cli.Date, v["date"])
	require.True(t, strings.HasPrefix(v["go"], "go"), v["go"])

	out := b.ok(t, "version")
	require.True(t, strings.HasPrefix(out, "taskd "+v["version"]+" "), out)
	require.Equal(t, 1, strings.Count(out, "\n"))
}

// A failure that is not a usage error must exit 1 even when its message
// happens to contain text that looks like one of cobra's usage errors.
func TestFailureExitCodeIgnoresMessageText(t *testing.T) {
	t.Parallel()

	b := setup(t)
	for _, name := range []string{"requires at least one", "unknown command", "invalid argument"} {
		r := b.run(t, "cron", "remove", "hello", "--name", name)
		requireOneLineError(t, r, cli.ExitFailure)
		require.Contains(t, r.stderr, "no periodic task of code hello")
	}
}

// A crontab step past its field's values is added, as crontabs take it,
// with a warning on stderr saying when it really fires.
func TestCronAddWarnsOfAStepPastItsField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "cron", "add", "hello", "*/61 * * * *", "--name", "typo")
	require.Equal(t, cli.ExitOK, r.code, "stderr %q", r.stderr)
	require.Regexp(t, `^added periodic task \d+; next run .*:00:00, then (\d{4}-\d\d-\d\d )?\d\d:00:00 and (\d{4}-\d\d-\d\d )?\d\d:00:00\n$`, r.stdout)
	require.Equal(t, `taskd: warning: "*/61" in the minute field steps past its 60 values: it fires at minute 0 only, not every 61 minutes (for a fixed interval, use @every)`+"\n", r.stderr)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE cron_expr = '*/61 * * * *'`))

	b.ok(t, "cron", "add", "hello", "*/60 * * * *", "--name", "hourly") // no warning: ok requires an empty stderr
}

// Only a waiting task has a next run: one in flight or ended shows none,
// not the past time it was due, in show and in list alike (tasktop's due
// column too).
func TestNextRunOnlyWhileWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, "hello", "--delay", "1h") // due now, it would be inserted dispatched
	sid := strconv.FormatInt(id, 10)
	require.Regexp(t, `\nnext run    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n`, b.ok(t, "show", sid))
	for _, status := range []task.Status{task.Dispatched, task.Running, task.Succeeded, task.Dead, task.Cancelled} {
		b.env.Exec(t, `UPDATE task_center SET status = ? WHERE id = ?`, status, id)
		require.Contains(t, b.ok(t, "show", sid), "\nnext run    -\n", status)
		list := b.ok(t, "list")
		require.Regexp(t, `\n`+sid+` +hello .* - +`, list, status)
	}
	b.env.Exec(t, `UPDATE task_center SET status = ? WHERE id = ?`, task.Failed, id)
	require.Regexp(t, `\nnext run    \d{4}-`, b.ok(t, "show", sid), "failed: due for its retry")
}

// On a host whose configuration has no handlers (one that only submits,
// or no file), a code is checked against the codes the nodes record in
// the task center: `taskd submit sned_email` went in and waited for good.
// Before any node has recorded its codes, nothing can tell, and any code
// goes in.
func TestSubmitWithoutHandlersChecksTheNodesCodes(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	cfg := writeConfig(t, env.ConfigYAML(""))
	run := func(args ...string) result { return runCLI(t, cfg, "", args...) }
	require.Equal(t, cli.ExitOK, run("submit", "anything", "--delay", "1h").code, "no node has recorded its codes yet")

	_, err := env.Store.RouteRecord(context.Background(), "node-a", map[string]string{"send_email": "mail", "report": "report"})
	require.NoError(t, err)
	for _, args := range [][]string{
		{"submit", "sned_email"},
		{"submit", "send_email", "--then", "sned_email"},
		{"cron", "add", "sned_email", "@daily"},
		{"batch", "sned_email", "{}", "--callback", "report"},
		{"batch", "send_email", "{}", "--callback", "sned_email"},
		// A code known by its tasks alone ends the check of none after it.
		{"submit", "anything", "--then", "sned_email"},
	} {
		r := run(args...)
		requireOneLineError(t, r, cli.ExitUsage)
		require.Contains(t, r.stderr, `unknown task code "sned_email" (did you mean "send_email"?): this configuration has no handlers, and no node records one for it`, "taskd %v", args)
	}
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center`), "nothing written")

	for _, args := range [][]string{
		{"submit", "send_email", "--delay", "1h"},
		{"submit", "anything", "--delay", "1h"}, // a task of it is in the task center
		{"submit", "sned_email", "--delay", "1h", "--any-code"},
	} {
		r := run(args...)
		require.Equal(t, cli.ExitOK, r.code, "taskd %v: %s", args, r.stderr)
	}
}
