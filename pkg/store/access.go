package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/task"
)

// MySQL's errors for a statement on a table or column the account may not
// touch that way.
const (
	errTableAccessDenied  = 1142
	errColumnAccessDenied = 1143
)

// writeProbes are statements that change no row and need each privilege a
// running node writes with: the server checks an account's privileges
// before it finds that nothing matches, whether they were granted on the
// database, per table or through a role. An INSERT names the columns that
// have no default.
var writeProbes = []string{
	`INSERT INTO task_center (task_code, payload) SELECT task_code, payload FROM task_center WHERE 1 = 0`,
	`UPDATE task_center SET task_code = task_code WHERE 1 = 0`,
	`DELETE FROM task_center WHERE 1 = 0`,
	`INSERT INTO task_run (task_id, attempt, task_code, queue, outcome) SELECT task_id, attempt, task_code, queue, outcome FROM task_run WHERE 1 = 0`,
	`DELETE FROM task_run WHERE 1 = 0`,
	`INSERT INTO task_route (task_code, queue) SELECT task_code, queue FROM task_route WHERE 1 = 0`,
	`UPDATE task_route SET queue = queue WHERE 1 = 0`,
	`INSERT INTO task_queue (name) SELECT name FROM task_queue WHERE 1 = 0`,
	`UPDATE task_queue SET name = name WHERE 1 = 0`,
	`INSERT INTO task_setting (name, value) SELECT name, value FROM task_setting WHERE 1 = 0`,
	`UPDATE task_setting SET value = value WHERE 1 = 0`,
	`INSERT INTO task_batch (total, callback_code, callback_payload) SELECT total, callback_code, callback_payload FROM task_batch WHERE 1 = 0`,
	`UPDATE task_batch SET total = total WHERE 1 = 0`,
}

// CheckWriteAccess is a config error when the account may not write what
// a running node writes: it would start, then fail every claim, result or
// purge for good. Other errors are returned as they are.
func (s *Store) CheckWriteAccess(ctx context.Context) error {
	for _, q := range writeProbes {
		_, err := s.db.ExecContext(ctx, q)
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == errTableAccessDenied || me.Number == errColumnAccessDenied) {
			db := "the database"
			_ = s.db.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&db)
			return task.Configf("mysql: %s: a running node writes the task center: GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.* TO the user of mysql.dsn",
				me.Message, db)
		}
		if err != nil {
			return fmt.Errorf("check write access: %w", err)
		}
	}
	return nil
}
