package store

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func objects(columns, indexes []string) schemaObjects {
	o := schemaObjects{columns: map[string]bool{}, indexes: map[string]bool{}}
	for _, c := range columns {
		o.columns[strings.ToLower(c)] = true
	}
	for _, i := range indexes {
		o.indexes[strings.ToLower(i)] = true
	}
	return o
}

func TestPortableGuards(t *testing.T) {
	have := objects([]string{"held_status", "parent_id"}, []string{"PRIMARY", "idx_held"})
	for _, c := range []struct{ name, in, want string }{
		{"all there: nothing to send",
			"ALTER TABLE task_center\n  ADD COLUMN IF NOT EXISTS held_status TINYINT GENERATED ALWAYS AS (IF(status IN (5, 6), status, NULL)) VIRTUAL,\n  ADD KEY IF NOT EXISTS idx_held (held_status)",
			""},
		{"some there: the rest without guards",
			"ALTER TABLE task_center ADD COLUMN IF NOT EXISTS parent_id BIGINT, ADD COLUMN IF NOT EXISTS batch_id BIGINT UNSIGNED DEFAULT NULL, add key if not exists idx_batch (batch_id)",
			"ALTER TABLE task_center\n  ADD COLUMN batch_id BIGINT UNSIGNED DEFAULT NULL,\n  ADD KEY idx_batch (batch_id)"},
		{"drop what is there, not what is not",
			"ALTER TABLE task_center DROP KEY IF EXISTS idx_held, DROP INDEX IF EXISTS idx_gone, DROP COLUMN IF EXISTS parent_id",
			"ALTER TABLE task_center\n  DROP KEY idx_held,\n  DROP COLUMN parent_id"},
		{"a drop and its rebuild",
			"ALTER TABLE task_center DROP KEY IF EXISTS idx_held, ADD KEY idx_held (held_status, id)",
			"ALTER TABLE task_center\n  DROP KEY idx_held,\n  ADD KEY idx_held (held_status, id)"},
		{"only how is left",
			"ALTER TABLE task_center ADD COLUMN IF NOT EXISTS parent_id INT, ALGORITHM=COPY",
			""},
		{"how stays with what",
			"ALTER TABLE task_center ADD COLUMN IF NOT EXISTS extra INT, ALGORITHM=COPY",
			"ALTER TABLE task_center\n  ADD COLUMN extra INT,\n  ALGORITHM=COPY"},
		{"names are not case-sensitive",
			"ALTER TABLE `task_center` ADD KEY IF NOT EXISTS `IDX_HELD` (x), ADD COLUMN IF NOT EXISTS Parent_ID INT",
			""},
		{"unguarded: as it is",
			"ALTER TABLE task_center MODIFY COLUMN unique_key VARCHAR(191), ROW_FORMAT=REDUNDANT",
			"ALTER TABLE task_center MODIFY COLUMN unique_key VARCHAR(191), ROW_FORMAT=REDUNDANT"},
		{"not an ALTER",
			"CREATE TABLE IF NOT EXISTS t (a INT, KEY k (a))",
			"CREATE TABLE IF NOT EXISTS t (a INT, KEY k (a))"},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := 0
			got, err := portable(c.in, func(string) (schemaObjects, error) { read++; return have, nil })
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			require.Equal(t, c.want != c.in, read == 1, "the schema is read for a guarded statement only")
		})
	}
}

// MySQL 8 has no IF [NOT] EXISTS on ALTER TABLE's clauses: whatever the
// schema, no statement of a migration reaches the server with one.
func TestMigrationsSendNoGuards(t *testing.T) {
	guard := regexp.MustCompile(`(?i)\bIF\s+(NOT\s+)?EXISTS\b`)
	migs, err := Migrations()
	require.NoError(t, err)
	guarded := 0
	for _, m := range migs {
		for _, stmt := range append(splitStatements(m.SQL), `ALTER TABLE taskd_schema ADD COLUMN IF NOT EXISTS contract TINYINT NOT NULL DEFAULT 0`) {
			var named []string // what its guarded clauses add or drop
			if a := alterTable.FindStringSubmatch(stmt); a != nil {
				for _, c := range splitClauses(a[2]) {
					if g := guardedClause.FindStringSubmatch(c); g != nil {
						named = append(named, g[4])
					}
				}
			}
			if len(named) > 0 {
				guarded++
			}
			for _, have := range []schemaObjects{objects(nil, nil), objects(named, named)} {
				got, err := portable(stmt, func(string) (schemaObjects, error) { return have, nil })
				require.NoError(t, err)
				if alterTable.MatchString(stmt) {
					require.NotRegexp(t, guard, got, "%s: %s", m.Name, stmt)
				}
			}
		}
	}
	require.Greater(t, guarded, 10, "the guarded statements were found")
}
