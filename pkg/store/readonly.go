package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// A failover makes the old primary read-only and moves the address (a
// virtual IP, a DNS name, a proxy) to the new one, but the pool's open
// connections stay where they were: every statement failed "running with
// the --read-only option" until the connections aged out (30 minutes).
// So a read-only refusal retires every connection opened before it: the
// one that met it leaves the pool when it is put back, the others when
// they are next taken, and the statements after it run on new connections,
// on whatever server the address names now. On a server that is merely
// read-only the next statement meets the refusal again, with its message.

// readOnlyErrors are the server's refusals of a write for being read-only:
// ER_OPTION_PREVENTS_STATEMENT (read_only, super_read_only),
// ER_READ_ONLY_MODE, ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION (a session
// or a replica endpoint that is read-only).
var readOnlyErrors = map[uint16]bool{1290: true, 1836: true, 1792: true}

func isReadOnly(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && readOnlyErrors[me.Number]
}

// retiringConnector opens connections that retire on a read-only refusal.
type retiringConnector struct {
	driver.Connector
	// epoch counts read-only refusals; a connection opened in an older
	// epoch is not used again.
	epoch *atomic.Uint64
}

func (c retiringConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &retiringConn{Conn: conn, epoch: c.epoch, born: c.epoch.Load()}, nil
}

// retiringConn is one connection of a retiringConnector. The driver's
// connection implements every interface below.
type retiringConn struct {
	driver.Conn
	epoch *atomic.Uint64
	born  uint64
}

func (c *retiringConn) check(err error) error {
	if isReadOnly(err) {
		c.epoch.Add(1)
	}
	return err
}

func (c *retiringConn) retired() bool { return c.born != c.epoch.Load() }

func (c *retiringConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	return r, c.check(err)
}

func (c *retiringConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	return r, c.check(err)
}

func (c *retiringConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *retiringConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	return tx, c.check(err)
}

func (c *retiringConn) Ping(ctx context.Context) error {
	return c.Conn.(driver.Pinger).Ping(ctx)
}

func (c *retiringConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

// ResetSession runs when a pooled connection is taken again: a retired one
// is refused, and the pool opens another.
func (c *retiringConn) ResetSession(ctx context.Context) error {
	if c.retired() {
		return driver.ErrBadConn
	}
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

// IsValid runs when a connection is put back into the pool.
func (c *retiringConn) IsValid() bool {
	return !c.retired() && c.Conn.(driver.Validator).IsValid()
}
