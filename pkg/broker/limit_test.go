package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// limited is a layout with limits.
type limited struct {
	layout
	limits map[string]limit.Limit
}

func (l limited) Limit(q string) limit.Limit { return l.limits[q] }

// driven is a clock a test moves.
type driven struct{ t time.Time }

func (d *driven) now() time.Time { return d.t }

func limitedBroker(t *testing.T, limits map[string]limit.Limit) (*broker.Broker, *driven) {
	t.Helper()
	env := testenv.New(t)
	b := env.Broker
	b.SetLayout(limited{limits: limits})
	clk := &driven{t: time.UnixMilli(1_700_000_000_000)}
	b.SetLimitClock(clk.now)
	return b, clk
}

func seq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// A rate holds across workers: over any window of a driven second, the
// takes of three workers asking as often as they like add up to at most
// the rate plus the burst; and the rate is reached.
func TestTakeRateWindow(t *testing.T) {
	t.Parallel()
	r := limit.Rate{N: 20, Period: time.Second}
	b, clk := limitedBroker(t, map[string]limit.Limit{"sms": {Rate: r, Burst: 5}})
	ctx := context.Background()
	push(t, b, "sms", seq(1, 400), task.DefaultPriority)

	var takes []time.Time
	start := clk.t
	for ms := 0; ms < 5000; ms += 7 {
		clk.t = start.Add(time.Duration(ms) * time.Millisecond)
		w := []string{"w1", "w2", "w3"}[ms%3]
		got, err := b.TakeMany(ctx, w, []broker.TakeRequest{{Queue: "sms", Max: 50}})
		require.NoError(t, err)
		for range got[0].Msgs {
			takes = append(takes, clk.t)
		}
		if len(got[0].Msgs) < 50 {
			require.Equal(t, "rate", got[0].By)
			require.Positive(t, got[0].Retry)
			require.LessOrEqual(t, got[0].Retry, r.Interval())
		}
	}
	for i := range takes {
		n := 0
		for j := i; j < len(takes) && takes[j].Sub(takes[i]) < time.Second; j++ {
			n++
		}
		require.LessOrEqual(t, n, 20+5, "window from %s", takes[i].Sub(start))
	}
	// 5 s at 20/s plus the burst, less the last interval's rounding.
	require.InDelta(t, 5*20+5, len(takes), 2)
}

func TestTakeRateRetry(t *testing.T) {
	t.Parallel()
	b, clk := limitedBroker(t, map[string]limit.Limit{"sms": {Rate: limit.Rate{N: 10, Period: time.Second}, Burst: 3}})
	ctx := context.Background()
	push(t, b, "sms", seq(1, 20), task.DefaultPriority)
	take := func(max int) broker.Taken {
		t.Helper()
		got, err := b.TakeMany(ctx, "w", []broker.TakeRequest{{Queue: "sms", Max: max}})
		require.NoError(t, err)
		return got[0]
	}
	got := take(10)
	require.Len(t, got.Msgs, 3, "the burst")
	require.Len(t, got.Leases, 3)
	require.Equal(t, "rate", got.By)
	require.Equal(t, 100*time.Millisecond, got.Retry)

	st, err := b.LimitedQueues(ctx, []string{"sms", "other"})
	require.NoError(t, err)
	require.Equal(t, "rate", st["sms"].By)
	require.Equal(t, clk.t, st["sms"].Since)
	require.NotContains(t, st, "other")

	clk.t = clk.t.Add(40 * time.Millisecond)
	got = take(10)
	require.Empty(t, got.Msgs)
	require.NotNil(t, got.Msgs, "an empty take is not a failed one")
	require.Equal(t, 60*time.Millisecond, got.Retry)

	clk.t = clk.t.Add(60 * time.Millisecond)
	require.Len(t, take(10).Msgs, 1)

	// A take bounded by its slots, not the limit, is not limited.
	clk.t = clk.t.Add(time.Hour)
	got = take(2)
	require.Len(t, got.Msgs, 2)
	require.Empty(t, got.By)
	st, err = b.LimitedQueues(ctx, []string{"sms"})
	require.NoError(t, err)
	require.Empty(t, st)
}

func TestTakeMaxRunningLeases(t *testing.T) {
	t.Parallel()
	b, clk := limitedBroker(t, map[string]limit.Limit{"reports": {MaxRunning: 2}})
	ctx := context.Background()
	push(t, b, "reports", seq(1, 10), task.DefaultPriority)
	take := func(w string) broker.Taken {
		t.Helper()
		got, err := b.TakeMany(ctx, w, []broker.TakeRequest{{Queue: "reports", Max: 5, LeaseTTL: 30 * time.Second}})
		require.NoError(t, err)
		return got[0]
	}
	first := take("w1")
	require.Len(t, first.Msgs, 2)
	require.Equal(t, "max_running", first.By)
	require.Equal(t, 30*time.Second, first.Retry, "no release: the leases' expiry")
	require.Empty(t, take("w2").Msgs, "the limit holds across workers")

	// A released lease frees its capacity, and wakes a waiting worker.
	require.NoError(t, b.Client().Del(ctx, b.Keys.Notify("reports")).Err())
	require.NoError(t, b.ReleaseLeases(ctx, map[string][]string{"reports": first.Leases[:1]}))
	require.EqualValues(t, 1, b.Client().LLen(ctx, b.Keys.Notify("reports")).Val())
	second := take("w2")
	require.Len(t, second.Msgs, 1)

	// The leases of a worker that died expire with its TTL.
	clk.t = clk.t.Add(30*time.Second + time.Millisecond)
	require.Len(t, take("w3").Msgs, 2)
	st, err := b.LimitedQueues(ctx, []string{"reports"})
	require.NoError(t, err)
	require.Equal(t, "max_running", st["reports"].By)
	require.EqualValues(t, 2, st["reports"].Running)
}

// A running attempt's lease is renewed, on Redis's clock; a lease that is
// gone (Redis restarted empty, or it expired while the worker could not
// reach Redis) is brought back: the attempt still runs. Left out, a
// max_running of 2 let 2 more run beside the 2 still running.
func TestRenewLeases(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	b, ctx := env.Broker, context.Background()
	b.SetLayout(limited{limits: map[string]limit.Limit{"q": {MaxRunning: 5}}})
	push(t, b, "q", seq(1, 2), task.DefaultPriority)
	got, err := b.TakeMany(ctx, "w", []broker.TakeRequest{{Queue: "q", Max: 5, LeaseTTL: 2 * time.Second}})
	require.NoError(t, err)
	require.Len(t, got[0].Leases, 2)
	key := b.Keys.Leases("q")
	before := b.Client().ZScore(ctx, key, got[0].Leases[0]).Val()
	require.NoError(t, b.Client().ZRem(ctx, key, got[0].Leases[1]).Err()) // expired, purged
	require.NoError(t, b.RenewLeases(ctx, map[string][]string{"q": got[0].Leases}, time.Minute))
	after := b.Client().ZScore(ctx, key, got[0].Leases[0]).Val()
	require.Greater(t, after-before, float64(50*time.Second/time.Millisecond))
	require.EqualValues(t, 2, b.Client().ZCard(ctx, key).Val(), "the lease that was gone is back")
	require.NoError(t, b.Client().Del(ctx, key).Err()) // Redis restarted empty
	require.NoError(t, b.RenewLeases(ctx, map[string][]string{"q": got[0].Leases}, time.Minute))
	require.EqualValues(t, 2, b.Client().ZCard(ctx, key).Val(), "the running attempts hold their capacity again")
}

// Unlimited queues of the same take are served as before, beside a
// limited one.
func TestTakeLimitedBesideOthers(t *testing.T) {
	t.Parallel()
	b, _ := limitedBroker(t, map[string]limit.Limit{"slow": {Rate: limit.Rate{N: 1, Period: time.Minute}, Burst: 1}})
	ctx := context.Background()
	push(t, b, "slow", seq(1, 5), task.DefaultPriority)
	push(t, b, "fast", seq(10, 5), task.DefaultPriority)
	got, err := b.TakeMany(ctx, "w", []broker.TakeRequest{{Queue: "slow", Max: 5}, {Queue: "fast", Max: 5}})
	require.NoError(t, err)
	require.Len(t, got[0].Msgs, 1)
	require.Equal(t, time.Minute, got[0].Retry)
	require.Len(t, got[1].Msgs, 5)
	require.Empty(t, got[1].Leases)
	n, err := b.QueueLen(ctx, "slow")
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "what the limit holds back waits in its list")
}
