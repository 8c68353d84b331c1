package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// A team moving from the seed design already has a task_center table,
// full of tasks. Migrate adopts it instead of failing later on missing
// columns: it adds taskd's columns (all with defaults, so existing rows
// and PHP producers keep working), widens the time columns to
// milliseconds and adds taskd's indexes. The seed's own indexes stay.

// adoptColumns are the columns taskd adds to a seed table, as in
// migrations/0001_task_center.sql.
var adoptColumns = []struct{ name, def string }{
	{"queue", "VARCHAR(64) NOT NULL DEFAULT ''"},
	{"unique_key", "VARCHAR(191) DEFAULT NULL"},
	{"timezone", "VARCHAR(64) NOT NULL DEFAULT ''"},
	{"attempt", "INT UNSIGNED NOT NULL DEFAULT 0"},
	{"crash_count", "INT UNSIGNED NOT NULL DEFAULT 0"},
	{"worker_id", "VARCHAR(128) NOT NULL DEFAULT ''"},
	{"claim_token", "BIGINT UNSIGNED NOT NULL DEFAULT 0"},
	{"dispatched_at", "DATETIME(3) DEFAULT NULL"},
	{"started_at", "DATETIME(3) DEFAULT NULL"},
	{"finished_at", "DATETIME(3) DEFAULT NULL"},
	{"claim_key", "DATETIME(3) GENERATED ALWAYS AS (IF(status IN (0, 4), plan_next_run_at, NULL)) VIRTUAL"},
	{"inflight_at", "DATETIME(3) GENERATED ALWAYS AS (IF(status IN (1, 2), dispatched_at, NULL)) VIRTUAL"},
}

// adoptModify widens the seed's columns.
const adoptModify = `ALTER TABLE task_center
	MODIFY plan_next_run_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
	MODIFY last_run_at DATETIME(3) DEFAULT NULL,
	MODIFY last_result MEDIUMTEXT DEFAULT NULL,
	MODIFY created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
	MODIFY updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)`

// adoptIndexes are the indexes of migration 1 that taskd still reads. The
// hot states' index, idx_lane, comes with migration 10; of the three it
// replaces, idx_claim is built by migration 9 (and dropped by 11, in the
// same run: an adopted table is a fresh task center), idx_inflight and
// idx_finished never on an adopted table.
var adoptIndexes = []struct{ name, def string }{
	{"uk_code_unique", "UNIQUE KEY uk_code_unique (task_code, unique_key)"},
}

// taskTable reads the columns of the database's task_center (none when
// there is no such table), and refuses one that is neither taskd's nor
// the seed design's: another application's table of that name.
func taskTable(ctx context.Context, c *sql.Conn) (map[string]bool, error) {
	cols, err := names(ctx, c, "schema", `SELECT COLUMN_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center'`)
	if err != nil || len(cols) == 0 || cols["attempt"] {
		return cols, err
	}
	for _, col := range []string{"task_code", "task_type", "payload", "status", "plan_next_run_at"} {
		if !cols[col] {
			return nil, fmt.Errorf("a table task_center exists but has no column %s: it is not the seed design's task table; use another database", col)
		}
	}
	return cols, nil
}

// qNarrow counts the columns adoptModify has not widened yet.
const qNarrow = `SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center'
	AND ((COLUMN_NAME IN ('plan_next_run_at', 'last_run_at', 'created_at', 'updated_at') AND DATETIME_PRECISION <> 3)
	OR (COLUMN_NAME = 'last_result' AND DATA_TYPE <> 'mediumtext'))`

// adoptSeedTable upgrades an existing task_center that lacks taskd's
// columns; cols are its columns as taskTable read them. It runs until
// migration 1 is recorded, so each step is skipped once done: an
// adoption stopped half way (a lock held by the PHP application, an
// interrupt) goes on where it stopped at the next migrate. It returns
// whether it changed anything.
func adoptSeedTable(ctx context.Context, c *sql.Conn, cols map[string]bool) (changed bool, _ error) {
	if len(cols) == 0 {
		return false, nil // no table: migration 1 creates it
	}
	for _, col := range adoptColumns {
		if !cols[col.name] {
			if _, err := c.ExecContext(ctx, "ALTER TABLE task_center ADD COLUMN "+col.name+" "+col.def); err != nil {
				return changed, fmt.Errorf("adopt task_center: add %s: %w", col.name, err)
			}
			changed = true
		}
	}
	var narrow int
	if err := c.QueryRowContext(ctx, qNarrow).Scan(&narrow); err != nil {
		return changed, fmt.Errorf("adopt task_center: read its columns: %w", err)
	}
	if narrow > 0 {
		if _, err := c.ExecContext(ctx, adoptModify); err != nil {
			return changed, fmt.Errorf("adopt task_center: widen time columns: %w", err)
		}
		changed = true
	}
	idx, err := names(ctx, c, "schema", `SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center'`)
	if err != nil {
		return changed, err
	}
	for _, ix := range adoptIndexes {
		if !idx[ix.name] {
			if _, err := c.ExecContext(ctx, "ALTER TABLE task_center ADD "+ix.def); err != nil {
				return changed, fmt.Errorf("adopt task_center: add index %s: %w", ix.name, err)
			}
			changed = true
		}
	}
	return changed, nil
}

// taskChecks are the CHECK constraints of migration 1, which the seed's
// table has none of: each, the rows it would refuse, and what migrate
// does with them first.
var taskChecks = []struct{ name, check, outside, fix, said string }{
	// A priority outside 0-9 is a lane of idx_lane that no claim and no
	// recovery reads: never run, never dead. The nearest is meant.
	{"ck_task_priority", "priority BETWEEN 0 AND 9", "priority NOT BETWEEN 0 AND 9",
		"priority = LEAST(GREATEST(priority, 0), 9)", "%d tasks of a priority outside 0-9 given the nearest, 0 or 9"},
	{"ck_task_type", "task_type BETWEEN 0 AND 2", "task_type NOT BETWEEN 0 AND 2",
		"status = 5, finished_at = NOW(3), last_result = CONCAT('not run: task_type ', task_type, " +
			"' is none of 0 (one-off), 1 (periodic) and 2 (scheduled); submit it again with one of them'), task_type = 0",
		"%d tasks of a task_type outside 0-2 ended dead, saying so"},
	{"ck_task_status", "status BETWEEN 0 AND 6", "status NOT BETWEEN 0 AND 6",
		"finished_at = NOW(3), last_result = CONCAT('not run: status ', status, " +
			"' is none of taskd''s states (0-6); submit it again'), status = 5",
		"%d tasks of a status outside 0-6 ended dead, saying so"},
}

// addTaskChecks adds the CHECK constraints of migration 1 that task_center
// lacks: a seed table adopted now or by an earlier taskd. The rows they
// would refuse are counted and said, then mended and the constraints
// added as a migration step is applied (a lock wait retried, Ctrl-C
// stopping the statement on the server); then the PHP side's next such
// INSERT fails where it is made. On a table that has them, one read.
func (s *Store) addTaskChecks(ctx context.Context, c *sql.Conn, say func(string)) error {
	have, err := names(ctx, c, "constraints", `SELECT CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center' AND CONSTRAINT_TYPE = 'CHECK'`)
	if err != nil {
		return err
	}
	var step strings.Builder
	var add []string
	for _, ck := range taskChecks {
		if have[ck.name] {
			continue
		}
		var n int64
		if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM task_center WHERE "+ck.outside).Scan(&n); err != nil {
			return fmt.Errorf("migrate: read task_center for %s: %w", ck.name, err)
		}
		if n > 0 {
			say(fmt.Sprintf(ck.said, n))
			step.WriteString("UPDATE task_center SET " + ck.fix + " WHERE " + ck.outside + ";\n")
		}
		add = append(add, "ADD CONSTRAINT "+ck.name+" CHECK ("+ck.check+")")
	}
	if len(add) == 0 {
		return nil
	}
	step.WriteString("ALTER TABLE task_center " + strings.Join(add, ", ") + ";\n")
	say("adding the CHECK constraints of task_center (a copy of the table, as its other changes)")
	return s.applyStep(ctx, c, Migration{Name: "task_center's CHECK constraints", SQL: step.String()}, say)
}

// names reads the one-column result of q as a set; what names it in
// errors.
func names(ctx context.Context, db queryer, what, q string, args ...any) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		out[n] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return out, nil
}
