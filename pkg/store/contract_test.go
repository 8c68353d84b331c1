package store_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// testSteps are the product's migrations followed by an expand step, a
// contract step that drops what the expand step's predecessor used
// (t_old, created by the expand step so that it exists either way), and an
// ordinary step of a later release, numbered after the embedded ones.
func testSteps(t *testing.T) (all []store.Migration, expand, contract, later store.Migration) {
	t.Helper()
	migs, err := store.Migrations()
	require.NoError(t, err)
	n := migs[len(migs)-1].Version
	extra, err := store.MigrationsFrom(fstest.MapFS{
		fmt.Sprintf("%04d_expand.sql", n+1):   {Data: []byte("-- The new table, and the old one.\nCREATE TABLE IF NOT EXISTS t_new (id INT PRIMARY KEY);\nCREATE TABLE IF NOT EXISTS t_old (id INT PRIMARY KEY);\n")},
		fmt.Sprintf("%04d_contract.sql", n+2): {Data: []byte("-- contract\n-- The previous release reads t_old.\nDROP TABLE IF EXISTS t_old;\n")},
		fmt.Sprintf("%04d_later.sql", n+3):    {Data: []byte("CREATE TABLE IF NOT EXISTS t_later (id INT PRIMARY KEY);\n")},
	})
	require.NoError(t, err)
	require.Len(t, extra, 3)
	return append(migs, extra...), extra[0], extra[1], extra[2]
}

func tableExists(t *testing.T, env *testenv.Env, name string) bool {
	t.Helper()
	return env.Count(t, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, name) == 1
}

// A migration is a contract step when its first line is exactly
// `-- contract`, and only then.
func TestContractStepMarking(t *testing.T) {
	t.Parallel()
	migs, err := store.MigrationsFrom(fstest.MapFS{
		"0001_a.sql": {Data: []byte("-- contract\n-- Release 1 reads x.\nDROP TABLE x;\n")},
		"0002_b.sql": {Data: []byte("-- contract\r\nDROP TABLE y;\r\n")},
		"0003_c.sql": {Data: []byte("-- Drops x.\n-- contract\nDROP TABLE x;\n")},
		"0004_d.sql": {Data: []byte("-- contract step\nDROP TABLE x;\n")},
		"0005_e.sql": {Data: []byte("CREATE TABLE z (id INT);\n")},
	})
	require.NoError(t, err)
	var marked []bool
	for _, m := range migs {
		marked = append(marked, m.Contract)
	}
	require.Equal(t, []bool{true, true, false, false, false}, marked)
}

// A task center without a schema applies contract steps at once, without
// asking about running processes: none of taskd can run on it.
func TestMigrateFreshAppliesContractSteps(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	dsn, _ := sideDatabase(t, env, "_fresh")
	st, err := store.Open(ctx, dsn, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	all, _, contract, _ := testSteps(t)
	res, err := st.Migrate(ctx, store.MigrateParams{Migrations: all, MayContract: func(context.Context, store.Migration) string {
		t.Error("asked about processes on a fresh task center")
		return "asked"
	}})
	require.NoError(t, err)
	require.Len(t, res.Applied, len(all))
	require.Contains(t, res.Applied, contract.Version)
	require.Empty(t, res.Deferred)
}

// On a live task center a contract step waits for MayContract; ordinary
// steps before and after it apply meanwhile, and a binary that knows the
// step runs on the schema before and after it, an older one only before.
func TestMigrateDefersContractStep(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	all, expand, contract, later := testSteps(t)
	release := all[:len(all)-1] // the release of the contract step
	var asked []int
	older := func(_ context.Context, m store.Migration) string {
		asked = append(asked, m.Version)
		return "node old-1 runs an older release"
	}

	res, err := st.Migrate(b.ctx, store.MigrateParams{Migrations: release, MayContract: older})
	require.NoError(t, err)
	require.Equal(t, []int{expand.Version}, res.Applied)
	require.Equal(t, []store.Deferred{{Version: contract.Version, Name: contract.Name, Reason: "node old-1 runs an older release"}}, res.Deferred)
	require.Equal(t, []int{contract.Version}, asked)
	require.True(t, tableExists(t, b.env, "t_old"), "the contract step did not run")
	require.NoError(t, st.CheckSchemaOf(b.ctx, release), "a pending contract step is fine")
	pending, err := st.PendingContractsOf(b.ctx, release)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, contract.Name, pending[0].Name)

	// Without a gate a contract step waits too.
	res, err = st.Migrate(b.ctx, store.MigrateParams{Migrations: release})
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.Len(t, res.Deferred, 1)

	// A later release's ordinary step applies while the contract step
	// still waits: the versions are a set, not a high-water mark.
	res, err = st.Migrate(b.ctx, store.MigrateParams{Migrations: all, MayContract: older})
	require.NoError(t, err)
	require.Equal(t, []int{later.Version}, res.Applied)
	require.Len(t, res.Deferred, 1)
	require.NoError(t, st.CheckSchemaOf(b.ctx, all))
	require.NoError(t, st.CheckSchemaOf(b.ctx, release), "the release before the later one runs on its ordinary step")

	res, err = st.Migrate(b.ctx, store.MigrateParams{Migrations: all, MayContract: func(context.Context, store.Migration) string { return "" }})
	require.NoError(t, err)
	require.Equal(t, []int{contract.Version}, res.Applied)
	require.Empty(t, res.Deferred)
	require.False(t, tableExists(t, b.env, "t_old"))
	require.NoError(t, st.CheckSchemaOf(b.ctx, all))
	pending, err = st.PendingContractsOf(b.ctx, all)
	require.NoError(t, err)
	require.Empty(t, pending)

	// A binary of the release before the contract step refuses it.
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, all[:len(all)-3]), fmt.Sprintf("contract step %d (%s) of a newer taskd", contract.Version, contract.Name))
	// A missing ordinary step is still an older schema.
	b.env.Exec(t, `DELETE FROM taskd_schema WHERE version = ?`, later.Version)
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, all), fmt.Sprintf("older than this taskd's %d: run `taskd migrate`", later.Version))
	b.env.Exec(t, `INSERT INTO taskd_schema (version, name) VALUES (?, ?)`, later.Version, later.Name)
	b.env.Exec(t, `DELETE FROM taskd_schema WHERE version = ?`, expand.Version)
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, all), "lacks migration "+expand.Name)
}

// A binary that knows up to N runs on a schema with a newer taskd's
// ordinary step N+1 (the rolling upgrade after the new release's
// migrate), its own migrate applying nothing and saying so; once the
// contract step N+2 has run, both refuse it, naming the step.
func TestOlderBinaryOnNewerSchema(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	all, expand, contract, _ := testSteps(t)
	old := all[:len(all)-3]

	_, err := st.Migrate(b.ctx, store.MigrateParams{Migrations: all[:len(all)-1]})
	require.NoError(t, err)
	require.NoError(t, st.CheckSchemaOf(b.ctx, old), "a newer ordinary step only adds")
	res, err := st.Migrate(b.ctx, store.MigrateParams{Migrations: old})
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.Equal(t, []int{expand.Version}, res.Newer)

	res, err = st.Migrate(b.ctx, store.MigrateParams{Migrations: all[:len(all)-1], MayContract: func(context.Context, store.Migration) string { return "" }})
	require.NoError(t, err)
	require.Equal(t, []int{contract.Version}, res.Applied)
	want := fmt.Sprintf("the task center's schema is version %d, newer than this taskd's %d: it has contract step %d (%s) of a newer taskd, which drops what this one uses: upgrade taskd",
		contract.Version, old[len(old)-1].Version, contract.Version, contract.Name)
	require.EqualError(t, st.CheckSchemaOf(b.ctx, old), want)
	_, err = st.Migrate(b.ctx, store.MigrateParams{Migrations: old})
	require.EqualError(t, err, want)
	// The binary of the expand step also predates the contract step.
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, all[:len(all)-2]), "contract step")
}

// A taskd_schema of before the contract column gets it from migrate, with
// the contract steps it knows flagged; until then a version above the
// binary's is refused, since nothing says whether it is a contract step.
func TestSchemaTableWithoutContractColumn(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	all, expand, _, _ := testSteps(t)
	old := all[:len(all)-3]
	b.env.Exec(t, `ALTER TABLE taskd_schema DROP COLUMN contract`)
	require.NoError(t, st.CheckSchemaOf(b.ctx, old), "its own schema needs no flags")

	b.env.Exec(t, `INSERT INTO taskd_schema (version, name) VALUES (?, ?)`, expand.Version, expand.Name)
	newer := fmt.Sprintf("version %d, newer than this taskd's %d: upgrade taskd to the version that migrated it", expand.Version, old[len(old)-1].Version)
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, old), newer)
	_, err := st.Migrate(b.ctx, store.MigrateParams{Migrations: old})
	require.ErrorContains(t, err, newer)
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'taskd_schema' AND COLUMN_NAME = 'contract'`),
		"a refused migrate does not add the column, which would read the newer row as ordinary")

	b.env.Exec(t, `DELETE FROM taskd_schema WHERE version = ?`, expand.Version)
	res, err := st.Migrate(b.ctx, store.MigrateParams{Migrations: old})
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	last := -1 // the last contract step
	for i, m := range old {
		flag := 0
		if m.Contract {
			flag, last = 1, i
		}
		require.Equal(t, flag, b.env.Count(t, `SELECT contract FROM taskd_schema WHERE version = ?`, m.Version), m.Name)
	}
	require.NotEqual(t, -1, last, "no contract step among the embedded migrations to flag")
	// The flags are what a binary before that step goes by.
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, old[:last]), "contract step "+strconv.Itoa(old[last].Version))
}
