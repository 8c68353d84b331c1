package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// pausedHolder opens a Locker of backend tb that talks to its server
// through a testenv.FreezeProxy.
func pausedHolder(t *testing.T, tb testBackend, env *testenv.Env) (Locker, *testenv.FreezeProxy) {
	switch tb.name {
	case "redis":
		p := testenv.NewFreezeProxy(t, env.RedisAddr)
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return NewRedis(rdb, env.Prefix), p
	case "mysql":
		cfg, err := mysql.ParseDSN(env.DSN)
		require.NoError(t, err)
		p := testenv.NewFreezeProxy(t, cfg.Addr)
		cfg.Addr = p.Addr()
		st, err := store.Open(context.Background(), cfg.FormatDSN(), store.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return NewMySQL(st.DB()), p
	}
	t.Fatalf("no backend %s", tb.name)
	return nil, nil
}

// TestPausedHolder: a holder cut off from the server (a partition, a
// frozen server) must stop trusting its lease before the lock expires on
// the server, so that the next owner, which takes the lock once it has
// expired, never overlaps it.
func TestPausedHolder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		ttl := 3 * time.Second
		holder, proxy := pausedHolder(t, tb, env)
		lease, err := holder.Acquire(ctx, "job", ttl)
		require.NoError(t, err)
		release(t, lease)

		// Let a renewal or two succeed, so the window runs from a renewal.
		time.Sleep(ttl / 2) // renewals against the real server, on its clock
		require.True(t, lease.Valid())
		proxy.Freeze()
		frozenAt := time.Now()

		select {
		case <-lease.Context().Done():
		case <-time.After(ttl):
			t.Fatal("the cut-off holder still trusts its lease a TTL after its last renewal")
		}
		require.False(t, lease.Valid())
		require.ErrorIs(t, lease.Err(), ErrLost)
		// Cancelled before the lock expired on the server: it is still the
		// holder's, so nobody else can have it yet.
		require.Equal(t, lease.Owner(), tb.owner(t, env, "job"), "the lease was cancelled only after the lock expired")
		_, err = tb.open(env).Acquire(ctx, "job", ttl)
		require.ErrorIs(t, err, ErrNotAcquired)

		next, err := AcquireWait(ctx, tb.open(env), "job", ttl, 2*ttl)
		require.NoError(t, err)
		release(t, next)
		require.Greater(t, next.Token(), lease.Token(), "the cut-off holder's token is lower than the next owner's")
		require.Less(t, time.Since(frozenAt), ttl+time.Second, "the next owner waited too long")

		// The cut-off holder's Release is bounded by its context and
		// cannot touch the next owner's lock.
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		require.Error(t, lease.Release(rctx))
		require.Less(t, time.Since(start), 2*time.Second)
		require.Equal(t, next.Owner(), tb.owner(t, env, "job"))
		require.NoError(t, next.Release(ctx))
	})
}

// TestMySQLRenewalBlockedByRowLock: a long transaction holding the
// task_lock row blocks renewals; the lease must end before the lock
// expires, and the lock is free once the row is.
func TestMySQLRenewalBlockedByRowLock(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	ttl := 3 * time.Second
	lease, err := NewMySQL(env.Store.DB()).Acquire(ctx, "job", ttl)
	require.NoError(t, err)
	release(t, lease)

	tx, err := env.Store.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	var owner, expiry string
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT owner, expires_at FROM task_lock WHERE name = 'job' FOR UPDATE`).Scan(&owner, &expiry))
	require.Equal(t, lease.Owner(), owner)

	select {
	case <-lease.Context().Done():
	case <-time.After(ttl):
		t.Fatal("a holder whose renewals block still trusts its lease a TTL later")
	}
	require.ErrorIs(t, lease.Err(), ErrLost)
	var unexpired bool
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT expires_at > UTC_TIMESTAMP(3) FROM task_lock WHERE name = 'job'`).Scan(&unexpired))
	require.True(t, unexpired, "the lease was cancelled only after the lock expired")

	// The server still runs the blocked renewals once the row is free;
	// their callers have given up on them, so they must extend nothing:
	// once none is left on the server, the expiry is the one they found.
	waiting := func() int {
		return env.Count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE '%task_lock%'`)
	}
	require.Eventually(t, func() bool { return waiting() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the blocked renewals reach the server")
	require.NoError(t, tx.Rollback())
	require.Eventually(t, func() bool { return waiting() == 0 }, 30*time.Second, 10*time.Millisecond)
	var after string
	require.NoError(t, env.Store.DB().QueryRowContext(ctx, `SELECT expires_at FROM task_lock WHERE name = 'job'`).Scan(&after))
	require.Equal(t, expiry, after, "a blocked renewal extended the lock after its caller gave up")

	next, err := AcquireWait(ctx, NewMySQL(env.Store.DB()), "job", ttl, ttl)
	require.NoError(t, err)
	release(t, next)
	require.NoError(t, next.Release(ctx))
	require.NoError(t, lease.Release(ctx))
}

// TestMySQLRenewalHeldPastItsWait: a renewal the server drops because it
// waited behind a row lock longer than its caller would (with the quarter
// taken off) may still be answered before the caller's deadline. That
// answer must not confirm it: the lock's expiry is the old one.
func TestMySQLRenewalHeldPastItsWait(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	m := NewMySQL(env.Store.DB())
	require.NoError(t, m.ensureTable(ctx))
	ttl := 10 * time.Second
	_, ok, err := m.tryAcquire(ctx, "job", "holder", ttl, thisHolder())
	require.NoError(t, err)
	require.True(t, ok)

	tx, err := env.Store.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	var expiry string
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT expires_at FROM task_lock WHERE name = 'job' FOR UPDATE`).Scan(&expiry))

	// The server waits at most 3/4 of the 4 s, 3 s; the row is freed
	// after 3.4 s, well before the caller's deadline.
	rctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	go func() {
		time.Sleep(3400 * time.Millisecond)
		tx.Rollback()
	}()
	ok, err = m.renew(rctx, "job", "holder", ttl, Margin(ttl))
	var after string
	require.NoError(t, env.Store.DB().QueryRowContext(ctx, `SELECT expires_at FROM task_lock WHERE name = 'job'`).Scan(&after))
	require.Equal(t, expiry, after, "the renewal was applied after its wait")
	require.False(t, ok, "a renewal the server dropped was confirmed")
	if !errors.Is(err, context.DeadlineExceeded) { // a host too slow to answer in 0.6 s
		require.ErrorIs(t, err, errTooLate)
	}
}
