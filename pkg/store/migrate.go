package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/task"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations lists the embedded migrations in order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number", e.Name())
		}
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have one number", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// Migrate applies every embedded migration the database does not have yet,
// in order, and returns the versions it applied. It is safe to run on
// several hosts at once: a named lock serialises them, and each statement is
// idempotent.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	migs, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	var got int
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK('taskd_migrate', 60)`).Scan(&got); err != nil || got != 1 {
		return nil, fmt.Errorf("migrate: could not take the migration lock (another migrate running?): %v", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK('taskd_migrate')`)

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS taskd_schema (
		version INT NOT NULL PRIMARY KEY,
		name VARCHAR(255) NOT NULL,
		applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
	) ENGINE=InnoDB`); err != nil {
		return nil, fmt.Errorf("migrate: create taskd_schema: %w", err)
	}
	have := map[int]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT version FROM taskd_schema`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read taskd_schema: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
		have[v] = true
	}
	rows.Close()
	if len(have) > 0 {
		if v := slices.Max(slices.Collect(maps.Keys(have))); v > migs[len(migs)-1].Version {
			return nil, schemaError(v, migs[len(migs)-1].Version)
		}
	}

	var applied []int
	for _, m := range migs {
		if have[m.Version] {
			continue
		}
		if m.Version == 1 {
			if _, err := adoptSeedTable(ctx, conn); err != nil {
				return applied, err
			}
		}
		for _, stmt := range splitStatements(m.SQL) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return applied, fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO taskd_schema (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			return applied, fmt.Errorf("migration %s: record: %w", m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// SchemaVersion returns the highest applied migration (0 when none).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM taskd_schema`).Scan(&v)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errNoSuchTable {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// LatestVersion is the schema version this binary migrates to.
func LatestVersion() int {
	migs, err := Migrations()
	if err != nil || len(migs) == 0 {
		return 0 // the embedded files are checked by the tests
	}
	return migs[len(migs)-1].Version
}

// CheckSchema is a config error unless the task center's schema is the one
// this binary was built for: missing or older, `taskd migrate` fixes it;
// newer, this binary is too old for it.
func (s *Store) CheckSchema(ctx context.Context) error {
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	return schemaError(v, LatestVersion())
}

// schemaError says what to do about schema version v, for a binary that
// knows up to latest (nil when they match).
func schemaError(v, latest int) error {
	switch {
	case v == 0:
		return task.Configf("the task center has no schema: run `taskd migrate`")
	case v < latest:
		return task.Configf("the task center's schema is version %d, older than this taskd's %d: run `taskd migrate`", v, latest)
	case v > latest:
		return task.Configf("the task center's schema is version %d, newer than this taskd's %d: upgrade taskd to the version that migrated it", v, latest)
	}
	return nil
}

// splitStatements splits a migration file on semicolons that end a line,
// dropping comment lines. Migrations contain no semicolons inside strings.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			out = append(out, stmt)
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
