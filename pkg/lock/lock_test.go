package lock

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// testBackend is one backend under the conformance suite.
type testBackend struct {
	name string
	// open returns a new Locker (a separate "host") on env.
	open func(env *testenv.Env) interface {
		Locker
		backend
	}
	// owner is the token holding name unexpired, or "".
	owner func(t *testing.T, env *testenv.Env, name string) string
	// steal makes "thief" the owner of name.
	steal func(t *testing.T, env *testenv.Env, name string)
}

var backends = []testBackend{
	{
		name: "redis",
		open: func(env *testenv.Env) interface {
			Locker
			backend
		} {
			return NewRedis(env.Broker.Client(), env.Prefix)
		},
		owner: func(t *testing.T, env *testenv.Env, name string) string {
			v, err := env.Broker.Client().HGet(context.Background(), NewRedis(nil, env.Prefix).Key(name), "owner").Result()
			if errors.Is(err, redis.Nil) {
				return ""
			}
			require.NoError(t, err)
			return v
		},
		steal: func(t *testing.T, env *testenv.Env, name string) {
			key := NewRedis(nil, env.Prefix).Key(name)
			require.NoError(t, env.Broker.Client().HSet(context.Background(), key, "owner", "thief").Err())
			require.NoError(t, env.Broker.Client().Expire(context.Background(), key, time.Minute).Err())
		},
	},
	{
		name: "mysql",
		open: func(env *testenv.Env) interface {
			Locker
			backend
		} {
			return NewMySQL(env.Store.DB())
		},
		owner: func(t *testing.T, env *testenv.Env, name string) string {
			var owner string
			err := env.Store.DB().QueryRow(`SELECT owner FROM task_lock WHERE name = ? AND expires_at >= UTC_TIMESTAMP(3)`, name).Scan(&owner)
			if errors.Is(err, sql.ErrNoRows) {
				return ""
			}
			require.NoError(t, err)
			return owner
		},
		steal: func(t *testing.T, env *testenv.Env, name string) {
			env.Exec(t, `UPDATE task_lock SET owner = 'thief', expires_at = UTC_TIMESTAMP(3) + INTERVAL 1 MINUTE WHERE name = ?`, name)
		},
	},
}

// forEachBackend runs fn as a parallel subtest per backend, each with its
// own environment.
func forEachBackend(t *testing.T, fn func(t *testing.T, tb testBackend, env *testenv.Env)) {
	t.Parallel()
	for _, tb := range backends {
		t.Run(tb.name, func(t *testing.T) {
			t.Parallel()
			fn(t, tb, testenv.New(t))
		})
	}
}

// release releases lease at the end of the test.
func release(t *testing.T, lease *Lease) {
	t.Cleanup(func() { lease.Release(context.Background()) })
}

func TestAcquireRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		a, b := tb.open(env), tb.open(env)

		lease, err := a.Acquire(ctx, "job", 5*time.Second)
		require.NoError(t, err)
		release(t, lease)
		require.True(t, lease.Valid())
		require.NoError(t, lease.Err())
		require.Equal(t, lease.Owner(), tb.owner(t, env, "job"))

		_, err = b.Acquire(ctx, "job", 5*time.Second)
		require.ErrorIs(t, err, ErrNotAcquired)

		// Another name is another lock.
		other, err := b.Acquire(ctx, "other", 5*time.Second)
		require.NoError(t, err)
		require.NoError(t, other.Release(ctx))

		// A release by a non-owner changes nothing.
		require.NoError(t, b.release(ctx, "job", "not-the-owner"))
		require.Equal(t, lease.Owner(), tb.owner(t, env, "job"))
		_, err = b.Acquire(ctx, "job", 5*time.Second)
		require.ErrorIs(t, err, ErrNotAcquired)

		require.NoError(t, lease.Release(ctx))
		require.NoError(t, lease.Release(ctx), "Release is idempotent")
		require.False(t, lease.Valid())
		require.ErrorIs(t, lease.Err(), ErrReleased)
		require.ErrorIs(t, context.Cause(lease.Context()), ErrReleased)
		require.Equal(t, "", tb.owner(t, env, "job"))

		again, err := b.Acquire(ctx, "job", 5*time.Second)
		require.NoError(t, err)
		require.NotEqual(t, lease.Owner(), again.Owner(), "each acquisition has its own owner id")
		require.Greater(t, again.Token(), lease.Token(), "each acquisition has a greater token")
		// The old lease's Release does not remove the new owner's lock.
		require.NoError(t, lease.Release(ctx))
		require.Equal(t, again.Owner(), tb.owner(t, env, "job"))
		require.NoError(t, again.Release(ctx))
	})
}

func TestRenewalKeepsTheLock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		a, b := tb.open(env), tb.open(env)
		// Long enough that a renewal delayed by a loaded machine or server
		// (each may take up to TTL/3, the trust window is TTL - Margin) is
		// still in time: the lease is right to give up a lock it cannot
		// renew, and a short TTL would test the machine's latency instead.
		ttl := 5 * time.Second
		lease, err := a.Acquire(ctx, "job", ttl)
		require.NoError(t, err)
		release(t, lease)

		// The server's clock expires an unrenewed lock: real time must pass,
		// past the TTL of the acquisition, with renewals on the way.
		time.Sleep(ttl + ttl/2)
		require.True(t, lease.Valid(), "renewed: %v", lease.Err())
		require.Equal(t, lease.Owner(), tb.owner(t, env, "job"))
		_, err = b.Acquire(ctx, "job", ttl)
		require.ErrorIs(t, err, ErrNotAcquired)
		require.NoError(t, lease.Release(ctx))
	})
}

func TestLostWhenAnotherOwnerTakesIt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		ttl := time.Second
		lease, err := tb.open(env).Acquire(ctx, "job", ttl)
		require.NoError(t, err)
		release(t, lease)

		tb.steal(t, env, "job")
		select {
		case <-lease.Context().Done():
		case <-time.After(3 * ttl):
			t.Fatal("the lease did not notice that its renewal was refused")
		}
		require.False(t, lease.Valid())
		require.ErrorIs(t, lease.Err(), ErrLost)
		require.Contains(t, lease.Err().Error(), "renewal refused")

		require.NoError(t, lease.Release(ctx))
		require.Equal(t, "thief", tb.owner(t, env, "job"), "a lost lease's Release leaves the new owner's lock")
	})
}

func TestExpiredLockCanBeTaken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		a := tb.open(env)
		if m, ok := a.(*MySQL); ok {
			require.NoError(t, m.ensureTable(ctx))
		}
		// A holder that died right after acquiring: nobody renews.
		ttl := time.Second
		start := time.Now()
		_, ok, err := a.tryAcquire(ctx, "job", "dead-holder", ttl, thisHolder())
		require.NoError(t, err)
		require.True(t, ok)

		// Its last renewal, held up on the way until no more than late was
		// left of the lock, came after it stopped trusting the lease: it
		// changes nothing, and is no refusal.
		ok, err = a.renew(ctx, "job", "dead-holder", time.Hour, 2*ttl)
		require.ErrorIs(t, err, errTooLate)
		require.False(t, ok)
		require.Equal(t, "dead-holder", tb.owner(t, env, "job"))

		_, err = tb.open(env).Acquire(ctx, "job", ttl)
		require.ErrorIs(t, err, ErrNotAcquired)

		lease, err := AcquireWait(ctx, tb.open(env), "job", ttl, 3*ttl)
		require.NoError(t, err)
		release(t, lease)
		took := time.Since(start)
		require.GreaterOrEqual(t, took, ttl-50*time.Millisecond, "taken before the TTL ran out")
		require.Less(t, took, ttl+time.Second)

		// The dead holder's token renews nothing.
		ok, err = a.renew(ctx, "job", "dead-holder", ttl, 0)
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, lease.Release(ctx))
	})
}

func TestAcquireWait(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		ttl := 5 * time.Second
		held, err := tb.open(env).Acquire(ctx, "job", ttl)
		require.NoError(t, err)
		release(t, held)

		start := time.Now()
		_, err = AcquireWait(ctx, tb.open(env), "job", ttl, 300*time.Millisecond)
		require.ErrorIs(t, err, ErrNotAcquired)
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = AcquireWait(cctx, tb.open(env), "job", ttl, time.Minute)
		require.ErrorIs(t, err, context.Canceled)

		time.AfterFunc(200*time.Millisecond, func() { held.Release(ctx) })
		lease, err := AcquireWait(ctx, tb.open(env), "job", ttl, 3*time.Second)
		require.NoError(t, err)
		require.NoError(t, lease.Release(ctx))
	})
}

func TestRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		var calls atomic.Int32
		err := Run(ctx, tb.open(env), "job", time.Second, func(ctx context.Context) error {
			calls.Add(1)
			require.NoError(t, ctx.Err())
			// Singular while it runs.
			inner := Run(ctx, tb.open(env), "job", time.Second, func(context.Context) error {
				t.Error("ran twice at once")
				return nil
			})
			require.ErrorIs(t, inner, ErrNotAcquired)
			return nil
		})
		require.NoError(t, err)
		require.EqualValues(t, 1, calls.Load())
		require.Equal(t, "", tb.owner(t, env, "job"), "released after fn")

		boom := errors.New("boom")
		require.ErrorIs(t, Run(ctx, tb.open(env), "job", time.Second, func(context.Context) error { return boom }), boom)

		held, err := tb.open(env).Acquire(ctx, "job", time.Second)
		require.NoError(t, err)
		release(t, held)
		err = Run(ctx, tb.open(env), "job", time.Second, func(context.Context) error {
			t.Error("fn ran while another owner held the lock")
			return nil
		})
		require.ErrorIs(t, err, ErrNotAcquired)

		// fn's context ends when the lease is lost, and Run says so.
		err = Run(ctx, tb.open(env), "stolen", time.Second, func(ctx context.Context) error {
			tb.steal(t, env, "stolen")
			<-ctx.Done()
			return nil
		})
		require.ErrorIs(t, err, ErrLost)

		// ... and when the caller's context ends.
		cctx, cancel := context.WithCancel(ctx)
		err = Run(cctx, tb.open(env), "cancelled", time.Second, func(ctx context.Context) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, "", tb.owner(t, env, "cancelled"), "released although the caller's context was cancelled")
	})
}

func TestValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb testBackend, env *testenv.Env) {
		ctx := context.Background()
		l := tb.open(env)
		for _, name := range []string{"", "has space", "{tag}", string(make([]byte, MaxNameLen+1))} {
			_, err := l.Acquire(ctx, name, time.Second)
			require.Error(t, err, "name %q", name)
			require.Equal(t, task.CodeInvalid, task.ErrorCode(err))
		}
		for _, ttl := range []time.Duration{0, -time.Second, MinTTL - 1} {
			_, err := l.Acquire(ctx, "job", ttl)
			require.Error(t, err, "ttl %s", ttl)
			require.Equal(t, task.CodeInvalid, task.ErrorCode(err))
		}
	})
}

func TestMargin(t *testing.T) {
	t.Parallel()
	require.Equal(t, 100*time.Millisecond, Margin(500*time.Millisecond))
	require.Equal(t, 100*time.Millisecond, Margin(time.Second))
	require.Equal(t, 6*time.Second, Margin(time.Minute))
}
