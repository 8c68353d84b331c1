package store_test

import (
	"context"
	"fmt"
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
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, release), "newer than this taskd's", "the release before the later one")

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
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, all[:len(all)-3]), "newer than this taskd's")
	// A missing ordinary step is still an older schema.
	b.env.Exec(t, `DELETE FROM taskd_schema WHERE version = ?`, later.Version)
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, all), fmt.Sprintf("older than this taskd's %d: run `taskd migrate`", later.Version))
	b.env.Exec(t, `INSERT INTO taskd_schema (version, name) VALUES (?, ?)`, later.Version, later.Name)
	b.env.Exec(t, `DELETE FROM taskd_schema WHERE version = ?`, expand.Version)
	require.ErrorContains(t, st.CheckSchemaOf(b.ctx, all), "lacks migration "+expand.Name)
}
