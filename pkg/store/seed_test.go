package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/testenv"
)

// manyQueues is a configuration of 300 queues, q000 to q299: qN has
// 1 + N%3 shards (1: no row of its own) and the odd ones a limit of at
// most N running and rate tasks a second.
func manyQueues(rate int) (configured []string, shards map[string]int, limits map[string]limit.Limit) {
	shards, limits = map[string]int{}, map[string]limit.Limit{}
	for i := range 300 {
		q := fmt.Sprintf("q%03d", i)
		configured = append(configured, q)
		shards[q] = 1 + i%3
		if i%2 == 1 {
			limits[q] = limit.Limit{Rate: limit.Rate{N: rate, Period: time.Second}, Burst: 2, MaxRunning: i}
		}
	}
	return configured, shards, limits
}

// A node configuring hundreds of queues records their shards and limits
// in a statement each, not one per queue (over a link of a second each
// way, 300 statements took ten minutes and outlasted the start's bound of
// 10 s), with what each row held before kept as it was: a queue's
// recorded shards, an operator's limit.
func TestSeedsAreOneStatementEach(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	st := env.OneConnection(t)
	env.Exec(t, `INSERT INTO task_queue (name, shards, span, max_running, limit_source) VALUES
		('q000', 7, 7, 0, ''), ('q001', 0, 0, 5, 'operator'), ('q002', 0, 0, 3, 'config'), ('q003', 0, 0, 3, 'config')`)

	configured, shards, limits := manyQueues(1)
	questions := func() (n int) {
		var name string
		require.NoError(t, st.DB().QueryRowContext(ctx, `SHOW SESSION STATUS LIKE 'Questions'`).Scan(&name, &n))
		return n
	}
	before := questions()
	require.NoError(t, st.QueueSeed(ctx, shards))
	require.NoError(t, st.LimitSeed(ctx, configured, limits))
	require.Equal(t, 4, questions()-before, "a statement for the shards, one for the limits, one to clear the others', and the count's own")

	row := func(q string) (shards, maxRunning int, source string) {
		require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT shards, max_running, limit_source FROM task_queue WHERE name = ?`, q).Scan(&shards, &maxRunning, &source))
		return
	}
	s, m, src := row("q000")
	require.Equal(t, []any{7, 0, ""}, []any{s, m, src}, "recorded shards kept")
	s, m, src = row("q001")
	require.Equal(t, []any{2, 5, "operator"}, []any{s, m, src}, "an operator's limit kept; the shards, which its row did not record, recorded")
	s, m, src = row("q002")
	require.Equal(t, []any{3, 0, ""}, []any{s, m, src}, "a configured limit no longer configured is cleared")
	s, m, src = row("q003")
	require.Equal(t, []any{0, 3, "config"}, []any{s, m, src}, "a configured limit recorded anew")
	s, m, src = row("q299")
	require.Equal(t, []any{3, 299, "config"}, []any{s, m, src})
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_queue WHERE span <> shards`), "every row's workers consume its shards")
	var n int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM task_queue`).Scan(&n))
	require.Equal(t, 300-50+1, n, "a row for each queue with shards or a limit (all but the 50 of i%6 == 0), and q000's")
}

// Nodes starting together record the same new queues at once: each
// seed takes its rows in name order, so their statements wait for one
// another instead of deadlocking (in map order, the first round failed
// with Error 1213).
func TestSeedsOfNodesStartingTogether(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	for round := range 20 {
		env.Exec(t, `DELETE FROM task_queue`)
		configured, shards, limits := manyQueues(2 + round)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 8 {
			wg.Go(func() {
				if err := env.Store.QueueSeed(ctx, shards); err != nil {
					errs <- err
				}
				if err := env.Store.LimitSeed(ctx, configured, limits); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}
