package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// contractRelease is a release after the product's: an expand step, then
// a contract step that drops what the previous release used. It returns
// the whole list and the two new steps.
func contractRelease(t *testing.T) (migs []store.Migration, expand, contract store.Migration) {
	t.Helper()
	migs, err := store.Migrations()
	require.NoError(t, err)
	n := migs[len(migs)-1].Version
	expand = store.Migration{Version: n + 1, Name: fmt.Sprintf("%04d_expand.sql", n+1),
		SQL: "CREATE TABLE IF NOT EXISTS t_new (id INT PRIMARY KEY);\nCREATE TABLE IF NOT EXISTS t_old (id INT PRIMARY KEY);\n"}
	contract = store.Migration{Version: n + 2, Name: fmt.Sprintf("%04d_contract.sql", n+2), Contract: true,
		SQL: "-- contract\n-- The previous release reads t_old.\nDROP TABLE IF EXISTS t_old;\n"}
	return append(migs, expand, contract), expand, contract
}

// migrateWith runs taskd migrate with migs as this binary's migrations.
func migrateWith(t *testing.T, cfgPath string, migs []store.Migration, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := cli.ExecuteMigrations(ctx, migs, append([]string{"--config", cfgPath, "migrate"}, args...), &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

type migrateJSON struct {
	Applied  []int            `json:"applied"`
	Version  int              `json:"version"`
	Deferred []store.Deferred `json:"deferred"`
}

func beat(t *testing.T, env *testenv.Env, p broker.Process) {
	t.Helper()
	require.NoError(t, env.Broker.BeatProcess(context.Background(), &p, time.Minute))
}

// A contract step waits while a process of the previous release runs,
// says which and what to do, and runs once only processes that know it
// are left; --contract refuses while an older one runs.
func TestMigrateContractWaitsForOlderNodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	migs, expand, contract := contractRelease(t)
	old := broker.Process{ID: "web-1-4242-ab", Node: "web-1", Host: "web-1.example", PID: 4242, Version: "1.4.0", Schema: expand.Version - 1}
	beat(t, b.env, old)

	r := migrateWith(t, b.cfgPath, migs)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("applied migrations [%d]; schema version %d\n", expand.Version, expand.Version)+
		"deferred contract step "+contract.Name+": 1 live process of an older release: node web-1 on web-1.example pid 4242 (taskd 1.4.0); "+
		"run `taskd migrate` again once every node runs this release\n", r.stdout)
	require.Empty(t, r.stderr)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't_old'`))

	r = migrateWith(t, b.cfgPath, migs, "-o", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var out migrateJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.NotNil(t, out.Applied)
	require.Empty(t, out.Applied)
	require.Equal(t, expand.Version, out.Version)
	require.Len(t, out.Deferred, 1)
	require.Equal(t, contract.Version, out.Deferred[0].Version)
	require.Equal(t, contract.Name, out.Deferred[0].Name)
	require.Contains(t, out.Deferred[0].Reason, "node web-1 on web-1.example pid 4242 (taskd 1.4.0)")

	r = migrateWith(t, b.cfgPath, migs, "--contract")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Equal(t, "taskd: contract step "+contract.Name+" not applied: 1 live process of an older release: "+
		"node web-1 on web-1.example pid 4242 (taskd 1.4.0); upgrade or stop them, then run `taskd migrate --contract` again\n", r.stderr)

	// The old node restarted on the new release: the step runs.
	require.NoError(t, b.env.Broker.EndProcess(context.Background(), old.ID))
	beat(t, b.env, broker.Process{ID: "web-1-5151-cd", Node: "web-1", Host: "web-1.example", PID: 5151, Version: "1.5.0", Schema: contract.Version})
	r = migrateWith(t, b.cfgPath, migs)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("applied migrations [%d]; schema version %d\n", contract.Version, contract.Version), r.stdout)
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't_old'`))

	r = migrateWith(t, b.cfgPath, migs, "-o", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	out = migrateJSON{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.NotNil(t, out.Deferred, "deferred is [] in JSON, not null")
	require.Empty(t, out.Deferred)
}

// An empty registry may be a flushed Redis: the automatic case defers,
// --contract (the operator says no older node runs) applies.
func TestMigrateContractEmptyRegistry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	migs, _, contract := contractRelease(t)

	r := migrateWith(t, b.cfgPath, migs)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "deferred contract step "+contract.Name+": no live process in the Redis registry")
	require.Contains(t, r.stdout, "`taskd migrate --contract` once no older node is running\n")

	r = migrateWith(t, b.cfgPath, migs, "--contract")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("applied migrations [%d]; schema version %d\n", contract.Version, contract.Version), r.stdout)
}

// With Redis down an ordinary migrate still applies the ordinary steps
// and defers the contract step with the error; --contract fails; a fresh
// task center needs no Redis at all.
func TestMigrateContractRedisDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	migs, expand, contract := contractRelease(t)
	down := strings.Replace(b.env.ConfigYAML(""), fmt.Sprintf("%q", b.env.RedisAddr),
		fmt.Sprintf("\"127.0.0.1:%d\"", testenv.FreePorts(t, 1)[0]), 1)
	require.NotEqual(t, b.env.ConfigYAML(""), down)
	cfgPath := writeConfig(t, down)

	r := migrateWith(t, cfgPath, migs, "-o", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var out migrateJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.Equal(t, []int{expand.Version}, out.Applied)
	require.Len(t, out.Deferred, 1)
	require.Contains(t, out.Deferred[0].Reason, "the process registry cannot be read (connect to redis 127.0.0.1:")
	require.Contains(t, out.Deferred[0].Reason, "run `taskd migrate` again once Redis answers")

	r = migrateWith(t, cfgPath, migs, "--contract")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Contains(t, r.stderr, "taskd: contract step "+contract.Name+" not applied: the process registry cannot be read")

	// A fresh task center: everything applies, contract steps included.
	b.env.Exec(t, `DROP TABLE taskd_schema`)
	r = migrateWith(t, cfgPath, migs)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("applied migrations %v; schema version %d\n", versions(migs), contract.Version), r.stdout)
}

func versions(migs []store.Migration) []int {
	out := make([]int, len(migs))
	for i, m := range migs {
		out[i] = m.Version
	}
	return out
}

// slowRelease is a release after the product's with one step of extra.
func slowRelease(t *testing.T, stepSQL string) (migs []store.Migration, step store.Migration) {
	t.Helper()
	migs, err := store.Migrations()
	require.NoError(t, err)
	n := migs[len(migs)-1].Version
	step = store.Migration{Version: n + 1, Name: fmt.Sprintf("%04d_slow.sql", n+1), SQL: stepSQL}
	return append(migs, step), step
}

// A step that outlasts mysql.read_timeout, as a table rebuild does, is
// waited for (it was cut off as an "invalid connection" while the server
// went on with it), and one that runs long says so while it runs.
func TestMigrateWaitsForALongStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := writeConfig(t, strings.Replace(b.env.ConfigYAML(handlersYAML), "mysql:\n", "mysql:\n  read_timeout: 1s\n", 1))
	migs, step := slowRelease(t, "DO SLEEP(3.5);\n")

	r := migrateWith(t, cfg, migs)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	require.True(t, strings.HasPrefix(lines[0], "applying "+step.Name+" (running for 3s"), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "applied "+step.Name+" in 3."), lines[1])
	require.Equal(t, fmt.Sprintf("applied migrations [%d]; schema version %d", step.Version, step.Version), lines[2])
}

// A long step that holds the writes to its table (a rebuild MariaDB
// cannot do online: task_center's migration 12) says so while it runs,
// with how many wait, so that the operator can stop it: nothing but the
// elapsed time told that every claim and result had stopped.
func TestMigrateSaysALongStepHoldsWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	migs, step := slowRelease(t, "LOCK TABLES task_queue WRITE;\nDO SLEEP(4);\nUNLOCK TABLES;\n")
	ctx := context.Background()

	done := make(chan result, 1)
	go func() { done <- migrateWith(t, b.cfgPath, migs) }()
	require.Eventually(t, func() bool {
		return b.env.Count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE 'DO SLEEP(4)%'`) > 0
	}, 30*time.Second, 20*time.Millisecond)
	// A node's write, held behind the step until it ends.
	other, err := b.env.Store.DB().Conn(ctx)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, `SET SESSION lock_wait_timeout = 10`)
	require.NoError(t, err)
	_, err = other.ExecContext(ctx, `UPDATE task_queue SET paused = paused WHERE name = 'none'`)
	require.NoError(t, err)

	r := <-done
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	require.Equal(t, "applying "+step.Name+" (running for 3s; a table rebuild takes about 17 s a million rows); "+
		"writes to its table wait until it ends, 1 held now (Ctrl-C stops it, changing nothing)", lines[0])
	require.True(t, strings.HasPrefix(lines[1], "applied "+step.Name+" in "), lines[1])
}

// A step whose table another transaction holds gives way after a short
// wait, so that the statements of the nodes queued behind its metadata
// lock go on, names the transaction, and runs once it ends. Waiting on,
// as the server's lock_wait_timeout (a day) has it, stopped every claim
// and result.
func TestMigrateGivesWayToAnOpenTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	migs, step := slowRelease(t, "ALTER TABLE task_queue ADD COLUMN IF NOT EXISTS extra INT;\n")
	ctx := context.Background()
	db := b.env.Store.DB()

	holder, err := db.Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	var holderID int64
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&holderID))
	_, err = holder.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	_, err = holder.ExecContext(ctx, `SELECT COUNT(*) FROM task_queue`)
	require.NoError(t, err)

	done := make(chan result, 1)
	go func() { done <- migrateWith(t, b.cfgPath, migs) }()
	altering := func() bool {
		return b.env.Count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND STATE = 'Waiting for table metadata lock' AND INFO LIKE 'ALTER TABLE task_queue%'`) > 0
	}
	require.Eventually(t, altering, 30*time.Second, 20*time.Millisecond)

	// A node's statement on the table, queued behind the ALTER's wait: it
	// runs once the ALTER gives way, well within its own 10 s.
	other, err := db.Conn(ctx)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, `SET SESSION lock_wait_timeout = 10`)
	require.NoError(t, err)
	_, err = other.ExecContext(ctx, `UPDATE task_queue SET paused = paused WHERE name = 'none'`)
	require.NoError(t, err, "a statement queued behind the migration's wait")

	// The ALTER tries again once it has told what it waits for.
	require.Eventually(t, altering, 30*time.Second, 20*time.Millisecond)
	_, err = holder.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)
	r := <-done
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("%s waits for its table, in use by another transaction (the oldest open one: connection %d of ", step.Name, holderID))
	require.Contains(t, r.stdout, fmt.Sprintf("applied migrations [%d]", step.Version))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_queue' AND COLUMN_NAME = 'extra'`))
}
