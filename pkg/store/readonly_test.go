package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
)

// TestReadOnlyRetiresConnections: after a failover the pool's connections
// still lead to the old primary, now read-only, while new ones reach the
// new primary. One read-only refusal retires every pooled connection, so
// the statement after it runs on a new connection (it failed on the next
// old one, and on every pooled one for 30 minutes). Sessions made
// read-only (SET SESSION TRANSACTION READ ONLY) stand in for the old
// primary's connections: no global setting is changed.
func TestReadOnlyRetiresConnections(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	st, err := store.Open(ctx, b.env.DSN, store.Options{MaxOpenConns: 4})
	require.NoError(t, err)
	defer st.Close()

	// Every connection of the pool is made read-only.
	conns := make([]*sql.Conn, 4)
	for i := range conns {
		conns[i], err = st.DB().Conn(ctx)
		require.NoError(t, err)
		_, err = conns[i].ExecContext(ctx, "SET SESSION TRANSACTION READ ONLY")
		require.NoError(t, err)
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}

	write := func() error {
		_, err := st.TaskInsert(ctx, []store.TaskInsertParams{{Code: "hello", Payload: json.RawMessage(`{}`), Priority: 5, Timeout: 60}})
		return err
	}
	err = write()
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "the first write meets a read-only session: %v", err)
	require.Equal(t, uint16(1792), me.Number, "%v", err)
	require.NoError(t, write(), "the next write runs on a new connection")
}
