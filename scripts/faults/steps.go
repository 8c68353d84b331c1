package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
)

// Chains and batches under the same faults: --chains chains of three steps
// (append, then append, then append) and --batches batches of --batch-size
// members, the last --batch-dead of which die (their handler exits 1, no
// retry), each with a callback. They are submitted alongside the plain
// tasks, so they are in flight at every fault. The checks: every chain has
// exactly one child and one grandchild, each succeeded once; every batch
// has exactly one callback, succeeded once, whose payload counts
// batch-size − batch-dead succeeded and batch-dead dead.

// steps is what the suite submitted of chains and batches.
type steps struct {
	roots   []int64             // chain roots
	batches map[int64]batchPlan // by batch id
}

type batchPlan struct {
	members []int64
	dead    int // members of code die
}

// submitSteps submits the chains and batches due by tick k of ticks.
func (s *suite) submitSteps(ctx context.Context, cl *producer.Client, k, ticks int) error {
	for len(s.steps.roots) < (k+1)*s.o.chains/ticks {
		id, err := s.submitChain(ctx, cl, len(s.steps.roots))
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.steps.roots = append(s.steps.roots, id)
		s.mu.Unlock()
	}
	for len(s.steps.batches) < (k+1)*s.o.batches/ticks {
		j := len(s.steps.batches)
		id, plan, err := s.submitBatch(ctx, cl, j)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.steps.batches[id] = plan
		s.mu.Unlock()
	}
	return nil
}

// retrying calls fn until it succeeds (MariaDB restarts meanwhile).
func (s *suite) retrying(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := fn(sctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if s.o.verbose {
			s.say("%s failed, retrying: %v", what, err)
		}
		if !startstop.Sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// submitChain submits chain j; its unique key makes a retry safe.
func (s *suite) submitChain(ctx context.Context, cl *producer.Client, j int) (int64, error) {
	var id int64
	err := s.retrying(ctx, "submit chain", func(ctx context.Context) error {
		res, err := cl.Submit(ctx, producer.Submission{
			Code: "append", UniqueKey: "c" + strconv.Itoa(j), Timeout: taskTimeout,
			Payload:  json.RawMessage(`{"c":` + strconv.Itoa(j) + `}`),
			Children: []producer.Child{{Code: "append", Timeout: taskTimeout, Children: []producer.Child{{Code: "append", Timeout: taskTimeout}}}},
		})
		id = res.ID
		return err
	})
	return id, err
}

// submitBatch submits batch j. A batch has no unique key: after a failed
// attempt, the suite looks for the batch by its members' payloads before
// trying again, since the commit may have happened.
func (s *suite) submitBatch(ctx context.Context, cl *producer.Client, j int) (int64, batchPlan, error) {
	dead := min(s.o.batchDead, s.o.batchSize)
	b := producer.Batch{Callback: producer.Callback{Code: "append", Timeout: taskTimeout,
		Payload: json.RawMessage(`{"b":` + strconv.Itoa(j) + `}`)}}
	for m := range s.o.batchSize {
		code, retries := "append", 3
		if m >= s.o.batchSize-dead {
			code, retries = "die", 0
		}
		b.Members = append(b.Members, producer.Submission{Code: code, MaxRetry: &retries, Timeout: taskTimeout,
			Payload: json.RawMessage(fmt.Sprintf(`{"b":%d,"m":%d}`, j, m))})
	}
	var res store.BatchInsertResult
	tried := false
	err := s.retrying(ctx, "submit batch", func(ctx context.Context) error {
		if tried {
			found, err := s.findBatch(ctx, j)
			if err != nil {
				return err
			}
			if found.ID != 0 {
				res = found
				return nil
			}
		}
		tried = true
		var err error
		res, err = cl.Batch(ctx, b)
		return err
	})
	return res.ID, batchPlan{members: res.MemberIDs, dead: dead}, err
}

// findBatch finds batch j by its members' payloads (ID 0: not there).
func (s *suite) findBatch(ctx context.Context, j int) (store.BatchInsertResult, error) {
	var res store.BatchInsertResult
	rows, err := s.db.QueryContext(ctx, `SELECT id, batch_id FROM task_center
		WHERE batch_id IS NOT NULL AND JSON_EXTRACT(payload, '$.b') = ? ORDER BY id`, j)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, batch int64
		if err := rows.Scan(&id, &batch); err != nil {
			return res, err
		}
		res.ID = batch
		res.MemberIDs = append(res.MemberIDs, id)
	}
	return res, rows.Err()
}

// expectedRows is the number of tasks the task center holds once every
// chain and batch has run: roots, two children each, members, callbacks.
func (s *suite) expectedStepRows() int {
	n := 3 * len(s.steps.roots)
	for _, b := range s.steps.batches {
		n += len(b.members) + 1
	}
	return n
}

// stepFigures checks chains and batches against the task center and
// returns their figures line. known receives every task it accounts for;
// succeeded checks one task that must have succeeded exactly once.
func (s *suite) stepFigures(tasks map[int64]taskRow, known map[int64]bool, succeeded func(id int64) bool,
	lines map[int64][]int, succ map[int64][]runRow, fail func(string, ...any)) string {
	kids := map[int64][]int64{}
	callbacks := map[int64][]int64{}
	for id, t := range tasks {
		if t.parent != 0 {
			kids[t.parent] = append(kids[t.parent], id)
		}
		if b := store.BatchOfCallback(t.uniqueKey); b != 0 {
			callbacks[b] = append(callbacks[b], id)
		}
	}
	children, chainsOK := 0, 0
	for _, root := range s.steps.roots {
		known[root] = true
		ok := succeeded(root)
		level := []int64{root}
		for depth := 1; depth <= 2; depth++ {
			k := kids[level[0]]
			if len(k) != 1 {
				fail("chain %d: task %d has %d children, want 1", root, level[0], len(k))
				ok = false
				break
			}
			known[k[0]] = true
			children++
			ok = succeeded(k[0]) && ok
			level = k
		}
		if ok {
			chainsOK++
		}
	}
	cbs, countsOK := 0, 0
	for id, plan := range s.steps.batches {
		for i, m := range plan.members {
			known[m] = true
			if i < len(plan.members)-plan.dead {
				succeeded(m)
				continue
			}
			if t := tasks[m]; t.status != 5 || len(succ[m]) > 0 || len(lines[m]) == 0 {
				fail("batch %d: member %d should be dead after running: status %d, %d succeeded runs, handler lines %v",
					id, m, t.status, len(succ[m]), lines[m])
			}
		}
		cb := callbacks[id]
		cbs += len(cb)
		if len(cb) != 1 {
			fail("batch %d has %d callbacks, want 1", id, len(cb))
			continue
		}
		known[cb[0]] = true
		succeeded(cb[0])
		var p struct {
			B     int               `json:"b"`
			Batch store.BatchCounts `json:"batch"`
		}
		want := store.BatchCounts{ID: id, Total: len(plan.members), Succeeded: len(plan.members) - plan.dead, Dead: plan.dead}
		if err := json.Unmarshal(tasks[cb[0]].payload, &p); err != nil || p.Batch != want {
			fail("batch %d: callback %d has payload %s, want counts %+v", id, cb[0], tasks[cb[0]].payload, want)
			continue
		}
		countsOK++
	}
	return fmt.Sprintf("chains=%d chains-complete=%d children=%d batches=%d callbacks=%d callback-counts-right=%d",
		len(s.steps.roots), chainsOK, children, len(s.steps.batches), cbs, countsOK)
}

// taskRow is a task as the figures read it.
type taskRow struct {
	status, attempt int
	parent          int64
	uniqueKey       string
	payload         []byte
}

// runRow is a succeeded run.
type runRow struct {
	attempt  int
	finished float64
}

// readTasks reads every task of the task center.
func readTasks(ctx context.Context, db *sql.DB) (map[int64]taskRow, error) {
	tasks := map[int64]taskRow{}
	rs, err := db.QueryContext(ctx, `SELECT id, status, attempt, COALESCE(parent_id, 0), COALESCE(unique_key, ''),
		IF(unique_key LIKE 'batch:%', payload, '') FROM task_center`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var id int64
		var r taskRow
		if err := rs.Scan(&id, &r.status, &r.attempt, &r.parent, &r.uniqueKey, &r.payload); err != nil {
			return nil, err
		}
		tasks[id] = r
	}
	if err := rs.Err(); err != nil {
		return nil, errors.Join(errors.New("read the task center"), err)
	}
	return tasks, nil
}
