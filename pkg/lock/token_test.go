package lock

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// TestTokensGrow: every acquisition of a name, by any holder, after a
// release or an expiry, has a greater token than the one before.
func TestTokensGrow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		ttl := time.Second
		var tokens []uint64
		for range 3 { // released by its holder, taken by another
			lease, err := tb.open(env).Acquire(ctx, "job", ttl)
			require.NoError(t, err)
			tokens = append(tokens, lease.Token())
			require.NoError(t, lease.Release(ctx))
		}
		// A holder that died holding it: the next one takes it on expiry.
		a := tb.open(env)
		dead, ok, err := a.tryAcquire(ctx, "job", "dead-holder", ttl, thisHolder())
		require.NoError(t, err)
		require.True(t, ok)
		tokens = append(tokens, dead)
		lease, err := AcquireWait(ctx, tb.open(env), "job", ttl, 3*ttl)
		require.NoError(t, err)
		tokens = append(tokens, lease.Token())
		require.NoError(t, lease.Release(ctx))

		for i := 1; i < len(tokens); i++ {
			require.Greater(t, tokens[i], tokens[i-1], "tokens %v", tokens)
		}
		// Another name counts on its own, from the clock.
		other, err := tb.open(env).Acquire(ctx, "other", ttl)
		require.NoError(t, err)
		require.Greater(t, other.Token(), uint64(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()))
		require.NoError(t, other.Release(ctx))
	})
}

// TestTokenGrowsWithoutItsCounter: a Redis that lost its keys (FLUSHALL, a
// restart without persistence) or a task_lock row deleted by hand still
// gives a greater token, from the server's clock.
func TestTokenGrowsWithoutItsCounter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		first, err := tb.open(env).Acquire(ctx, "job", time.Minute)
		require.NoError(t, err)
		release(t, first)
		switch tb.name {
		case "redis":
			r := NewRedis(nil, env.Prefix)
			require.NoError(t, env.Broker.Client().Del(ctx, r.Key("job"), r.SeqKey("job")).Err())
		case "mysql":
			env.Exec(t, `DELETE FROM task_lock WHERE name = 'job'`)
		}
		next, err := tb.open(env).Acquire(ctx, "job", time.Minute)
		require.NoError(t, err)
		release(t, next)
		require.Greater(t, next.Token(), first.Token())
	})
}

// TestList: the held locks with their holder, age, TTL left and token;
// released and expired ones are gone.
func TestList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		l := tb.open(env).(Lister)
		if tb.name == "mysql" {
			held, err := l.List(ctx)
			require.NoError(t, err, "a database without task_lock has no locks")
			require.Empty(t, held)
		}
		before := time.Now()
		a, err := tb.open(env).Acquire(ctx, "alpha", 10*time.Second)
		require.NoError(t, err)
		release(t, a)
		b, err := tb.open(env).Acquire(ctx, "beta", 20*time.Second)
		require.NoError(t, err)
		gone, err := tb.open(env).Acquire(ctx, "gone", time.Second)
		require.NoError(t, err)
		require.NoError(t, gone.Release(ctx))
		require.NoError(t, b.Release(ctx))
		b, err = tb.open(env).Acquire(ctx, "beta", 20*time.Second)
		require.NoError(t, err)
		release(t, b)

		held, err := l.List(ctx)
		require.NoError(t, err)
		byName := map[string]Held{}
		for _, h := range held {
			byName[h.Name] = h
		}
		require.Len(t, byName, 2, "%+v", held)
		host, _ := os.Hostname()
		for _, want := range []struct {
			lease *Lease
			ttl   time.Duration
		}{{a, 10 * time.Second}, {b, 20 * time.Second}} {
			h := byName[want.lease.Name()]
			require.Equal(t, tb.name, h.Backend)
			require.Equal(t, host, h.Host)
			require.Equal(t, os.Getpid(), h.PID)
			require.Equal(t, want.lease.Token(), h.Token)
			require.Greater(t, h.TTLLeft, time.Duration(0))
			require.LessOrEqual(t, h.TTLLeft, want.ttl)
			// The server's clock: the same host here, give or take.
			require.WithinRange(t, h.Since, before.Add(-5*time.Second), time.Now().Add(5*time.Second))
		}
	})
}

// TestCheckAfterResume: a process whose clock says the window has passed
// (resumed after a freeze or a suspend) ends its lease when it checks,
// without waiting for a timer.
func TestCheckAfterResume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		ttl := time.Minute
		lease, err := tb.open(env).Acquire(ctx, "job", ttl)
		require.NoError(t, err)
		release(t, lease)
		require.True(t, lease.Check())
		require.True(t, lease.checkAt(time.Now().Add(ttl/2)))

		// A suspend stops the monotonic clock; the wall clock goes on.
		wallOnly := time.Now().Round(0).Add(ttl)
		require.False(t, lease.checkAt(wallOnly))
		require.ErrorIs(t, lease.Err(), ErrLost)
		require.False(t, lease.Valid())
		require.False(t, lease.Check())
		select {
		case <-lease.Context().Done():
		default:
			t.Fatal("the lease's context is not cancelled")
		}
		require.NoError(t, lease.Release(ctx))
	})
}

// TestMySQLUpgradesOldTable: a task_lock created by an older taskd (no
// token column) is upgraded on first use; its held lock is respected.
func TestMySQLUpgradesOldTable(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `CREATE TABLE task_lock (
  name       VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  owner      VARCHAR(64) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`)
	env.Exec(t, `INSERT INTO task_lock VALUES ('held', 'old-binary', UTC_TIMESTAMP(3) + INTERVAL 1 MINUTE)`)

	held, err := NewMySQL(env.Store.DB()).List(ctx)
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, "held", held[0].Name)

	m := NewMySQL(env.Store.DB())
	_, err = m.Acquire(ctx, "held", time.Second)
	require.ErrorIs(t, err, ErrNotAcquired)
	lease, err := m.Acquire(ctx, "job", time.Second)
	require.NoError(t, err)
	require.Positive(t, lease.Token())
	require.NoError(t, lease.Release(ctx))
}

// TestRedisOldStringLock: a lock key of an older taskd (a string) is held
// by someone else: not taken, not renewed or released, listed.
func TestRedisOldStringLock(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	r := NewRedis(env.Broker.Client(), env.Prefix)
	require.NoError(t, env.Broker.Client().Set(ctx, r.Key("job"), "old-owner", time.Minute).Err())

	_, err := r.Acquire(ctx, "job", time.Second)
	require.ErrorIs(t, err, ErrNotAcquired)
	ok, err := r.renew(ctx, "job", "old-owner", time.Second, 0)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, r.release(ctx, "job", "old-owner"))
	held, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.Equal(t, "job", held[0].Name)
}
