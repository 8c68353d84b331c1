package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// execMulti sends statements in one round trip (the connection allows
// multiple statements) and returns the rows each affected. args fill the
// placeholders of all statements in order; the driver interpolates them.
func execMulti(ctx context.Context, c *sql.Conn, stmts []string, args []any) ([]int64, error) {
	q := strings.Join(stmts, ";\n")
	// database/sql would convert arguments (int to int64 ...); Raw does not.
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	var affected []int64
	err := c.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("driver connection cannot execute")
		}
		res, err := ex.ExecContext(ctx, q, named)
		if err != nil {
			return err
		}
		mr, ok := res.(mysql.Result)
		if !ok {
			return fmt.Errorf("driver result has no per-statement counts")
		}
		affected = mr.AllRowsAffected()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(affected) != len(stmts) {
		return nil, fmt.Errorf("%d statements sent, %d answered", len(stmts), len(affected))
	}
	return affected, nil
}

// execTx runs statements inside a transaction opened in the same round
// trip and returns the rows each affected. With commit it also commits;
// otherwise the caller finishes the transaction on c. On error the
// transaction is rolled back.
func execTx(ctx context.Context, c *sql.Conn, stmts []string, args []any, commit bool) ([]int64, error) {
	all := make([]string, 0, len(stmts)+2)
	all = append(all, "START TRANSACTION")
	all = append(all, stmts...)
	if commit {
		all = append(all, "COMMIT")
	}
	n, err := execMulti(ctx, c, all, args)
	if err != nil {
		rollback(c)
		return nil, err
	}
	return n[1 : 1+len(stmts)], nil
}

// rollback ends whatever transaction a failed batch left open, so the
// connection goes back to the pool clean; if even that fails the
// connection is discarded.
func rollback(c *sql.Conn) {
	if _, err := c.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// affectedOne turns per-statement counts into "this compare-and-set won".
func affectedOne(n []int64) []bool {
	ok := make([]bool, len(n))
	for i, v := range n {
		ok[i] = v == 1
	}
	return ok
}
