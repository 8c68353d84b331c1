package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
)

// taskd limit: shown, changed (audited), reset; bad input is exit 2 and
// writes nothing, an unknown queue exit 1.
func TestLimitCommand(t *testing.T) {
	t.Parallel()
	env := setup(t).env
	b := &testBundle{env: env, cfgPath: writeConfig(t, env.ConfigYAML(handlersYAML+"queues:\n  hello: { rate: 100/s, burst: 20 }\n"))}

	require.Equal(t, "queue hello: 100/s burst 20 (set by the configuration)\n", b.ok(t, "limit", "hello"))
	for _, args := range [][]string{
		{"limit", "hello", "--rate", "0/s", "--yes"},
		{"limit", "hello", "--rate", "abc", "--yes"},
		{"limit", "hello", "--rate", "5/fortnight", "--yes"},
		{"limit", "hello", "--max-running", "-1", "--yes"},
		{"limit", "hello", "--burst", "-3", "--yes"},
		{"limit", "hello", "--per", "tenant", "--yes"},
		{"limit", "hello", "--serial", "maybe", "--yes"},
		{"limit", "hello", "--reset", "--rate", "5/s", "--yes"},
		{"limit", "hello", "--per", "group", "--rate", "0", "--yes"}, // per group with nothing to apply
		{"limit", "hello", "--rate", "5/s"},                          // no --yes, not a terminal
		{"submit", "hello", "--on-conflict", "sometimes", "--unique-key", "k"},
		{"submit", "hello", "--on-conflict", "debounce", "--unique-key", "k"},
		{"submit", "hello", "--on-conflict", "replace"},
		{"submit", "hello", "--debounce-max", "1m", "--unique-key", "k"},
		{"submit", "hello", "--group", "tab\there"},
	} {
		requireOneLineError(t, b.run(t, args...), cli.ExitUsage, "taskd %v", args)
	}
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_audit`), "bad input audits nothing")
	require.Zero(t, b.rows(t))
	requireOneLineError(t, b.run(t, "limit", "nosuch", "--rate", "5/s", "--yes"), cli.ExitFailure)

	require.Equal(t, "limit: queue hello limit 100/s burst 20 -> 50/s burst 20, max 5 running\n",
		b.ok(t, "limit", "hello", "--rate", "50/s", "--max-running", "5", "--yes"))
	require.Equal(t, "queue hello: 50/s burst 20, max 5 running (set by an operator; --reset returns to the configuration)\n",
		b.ok(t, "limit", "hello"))
	var ch struct {
		Changed int `json:"changed"`
		Queue   struct {
			After struct {
				Limit struct {
					Rate       string `json:"rate"`
					MaxRunning int    `json:"max_running"`
					Per        string `json:"per"`
				} `json:"limit"`
				Source string `json:"limit_source"`
			} `json:"after"`
		} `json:"queue"`
	}
	b.okJSON(t, &ch, "limit", "hello", "--per", "group", "--yes")
	require.Equal(t, 1, ch.Changed)
	require.Equal(t, "group", ch.Queue.After.Limit.Per)
	require.Equal(t, "operator", ch.Queue.After.Source)
	require.Equal(t, 2, env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'limit' AND affected = 1`))

	b.ok(t, "limit", "hello", "--reset", "--yes")
	require.Equal(t, "queue hello: 100/s burst 20 (set by the configuration)\n", b.ok(t, "limit", "hello"))
}

// A bad limit in the configuration is exit 2, naming the key, for the
// daemon as for the commands; doctor names it as a failed check.
func TestLimitConfigErrors(t *testing.T) {
	t.Parallel()
	env := setup(t).env
	for yaml, want := range map[string]string{
		"queues:\n  q: { rate: 0/s }\n":              `queues.q: rate "0/s"`,
		"queues:\n  q: { rate: abc }\n":              `queues.q: rate "abc"`,
		"queues:\n  q: { rate: 100 }\n":              `queues.q: rate "100"`,
		"queues:\n  q: { max_running: -2 }\n":        "queues.q: max_running -2",
		"queues:\n  q: { max_running: lots }\n":      "queues.q.max_running",
		"queues:\n  q: { per: tenant, rate: 5/s }\n": `queues.q: per "tenant"`,
		"queues:\n  q: { per: group }\n":             "queues.q: per group",
		"queues:\n  q: { skip_failed: true }\n":      "queues.q: skip_failed",
		"queues:\n  q: { burst: 5 }\n":               "queues.q: a burst",
		"queues:\n  q: { max_runing: 5 }\n":          `did you mean "queues.q.max_running"`,
	} {
		cfg := writeConfig(t, env.ConfigYAML(yaml))
		for _, cmd := range [][]string{{"limit", "q"}, {"run", "--node-id", "n"}, {"submit", "q"}} {
			r := runCLI(t, cfg, "", cmd...)
			code := cli.ExitUsage
			if cmd[0] == "run" {
				code = cli.ExitConfig // the daemon's units restart on 2, a crash
			}
			requireOneLineError(t, r, code, "%s: taskd %v", yaml, cmd)
			require.Contains(t, r.stderr, want, "%s: taskd %v", yaml, cmd)
		}
		r := runCLI(t, cfg, "", "doctor")
		require.Equal(t, cli.ExitFailure, r.code, yaml)
		require.Contains(t, r.stdout, "fail config ", yaml)
		require.Contains(t, r.stdout, want, yaml)
	}
}

// A group is a filter of list and of the bulk actions: exact, its case
// kept (as the schedulers keep it), and named in the audit log.
func TestListAndActByGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a1 := b.submit(t, "hello", "--group", "tenant-a", "--delay", "1h")
	a2 := b.submit(t, "report", "--group", "tenant-a", "--delay", "1h")
	upper := b.submit(t, "hello", "--group", "Tenant-A", "--delay", "1h")
	other := b.submit(t, "hello", "--group", "tenant-ab", "--delay", "1h")

	var got []listed
	b.okJSON(t, &got, "list", "--group", "tenant-a")
	require.Equal(t, []int64{a2, a1}, ids(got))
	b.okJSON(t, &got, "list", "--group", "Tenant-A", "--code", "hello")
	require.Equal(t, []int64{upper}, ids(got))
	requireOneLineError(t, b.run(t, "list", "--group", "tab\there"), cli.ExitUsage)

	require.Contains(t, b.ok(t, "kill", "--group", "tenant-a", "--yes"), "2 of 2")
	b.okJSON(t, &got, "list", "--status", "cancelled")
	require.Equal(t, []int64{a2, a1}, ids(got))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'kill' AND target = 'filter group="tenant-a"'`))
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id IN (?, ?) AND status = 0`, upper, other))
}
