package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// TaskClaimDue claims up to limit due tasks for one dispatch and returns
// their messages in priority, then due-time order. A random claim token
// marks the rows a claim won.
//
// No row lock is held across a network call: the candidates are read
// without locks, then one short transaction compare-and-sets those no one
// else holds (writeFree) 0/4 -> 1 with attempt + 1. A
// candidate another transaction holds is left for a later claim, which
// leaves it out for lockedBackoff. Only when another scheduler won some
// candidates is a read-back of the winners needed.
func (s *Store) TaskClaimDue(ctx context.Context, limit int) ([]*task.Message, error) {
	return s.TaskClaimDueIn(ctx, limit, 0, nil)
}

// Room says how many more tasks of a queue a claim may take: the room left
// in its Redis lists. Negative: no bound.
type Room func(queue string) int

// within keeps of msgs, in order, those that fit in room (nil: all).
func within(msgs []*task.Message, room Room) []*task.Message {
	if room == nil {
		return msgs
	}
	taken := map[string]int{}
	return slices.DeleteFunc(msgs, func(m *task.Message) bool {
		r := room(m.Queue)
		if r >= 0 && taken[m.Queue] >= r {
			return true
		}
		taken[m.Queue]++
		return false
	})
}

// TaskClaimDueIn claims like TaskClaimDue, at most room(q) tasks of each
// queue q, and also the tasks due within ahead of now by the database
// clock: the caller holds the message of such a task until it is due
// (Message.DueUnixMS), so that the claim's round trips and commit are over
// by then.
func (s *Store) TaskClaimDueIn(ctx context.Context, limit int, ahead time.Duration, room Room) ([]*task.Message, error) {
	if limit <= 0 {
		return nil, nil
	}
	skip := s.skip.snapshot(time.Now())
	read := limit
	if r := int(s.claimRead.Load()); r > 0 {
		read = min(r, limit)
	}
	if avg := int(s.payloadAvg.Load()); avg > 0 {
		read = min(read, max(1, claimBytesMax/avg))
	}
	// Read past the rows backing off, so they do not cost the batch.
	n := read + len(skip)
	args := make([]any, 0, claimCandidateArgs+1)
	for range claimCandidateArgs + 1 {
		args = append(args, n)
	}
	cands, size, cut, err := s.claimCandidates(ctx, ahead, args)
	if err != nil {
		return nil, fmt.Errorf("claim: select due tasks: %w", err)
	}
	s.candidates.Add(int64(len(cands)))
	if len(cands) > 0 {
		s.payloadAvg.Store(int64(size / len(cands)))
	}
	all := len(cands) < n && !cut
	cands = slices.DeleteFunc(cands, func(m *task.Message) bool { return skip[m.ID] })
	free := len(cands)
	cands = within(cands, room)
	s.claimRead.Store(int64(nextClaimRead(all, free, len(cands), limit)))
	cands = cands[:min(len(cands), limit)]
	if len(cands) == 0 {
		return nil, nil
	}
	won, err := s.claimLocked(ctx, cands, ahead)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	for _, m := range won {
		m.Attempt++
	}
	return won, nil
}

// claimReadMin is the fewest candidates a claim reads.
const claimReadMin = 50

// claimBytesMax bounds the payloads a claim reads, by the mean of the last
// claim's: 500 tasks of 1 MiB each (submit.max_payload) read at once are
// half a gigabyte in taskd's memory, sent on to Redis in one go, for
// queues whose slots take one at a time. The mean cannot foresee the first
// claim of a process, or one where large payloads follow small ones, so
// the read also keeps no candidate past that many bytes (claimCandidates).
const claimBytesMax = 16 << 20

// nextClaimRead is how many candidates the next claim reads, after one
// that read free candidates not backing off (all: every due task), of
// which kept fit in their queues' room. While the queues' windows are
// nearly full, reading a whole batch to claim a few costs MySQL and taskd
// a row each for nothing: the next claim reads twice what this one kept.
// When room left none out, or the read ran out of due tasks, it reads a
// whole batch again. Tasks of other queues behind the head are not
// starved by a shorter read: the head's queues fill and are then left out
// by the filtered claim.
func nextClaimRead(all bool, free, kept, limit int) int {
	if all || kept == free {
		return limit
	}
	return min(max(2*kept, claimReadMin), limit)
}

// claimLocked compare-and-sets the candidates no other transaction holds
// (writeFree), and returns those it won. The held ones back off.
func (s *Store) claimLocked(ctx context.Context, cands []*task.Message, ahead time.Duration) ([]*task.Message, error) {
	ids := make([]int64, len(cands))
	for i, m := range cands {
		ids[i] = m.ID
	}
	var won []*task.Message
	free, err := s.writeFree(ctx, ids, func(tx *batchTx) error {
		won = nil
		todo, _ := covered(tx, cands, func(m *task.Message) int64 { return m.ID })
		if len(todo) == 0 {
			return nil
		}
		fences := make([]Fence, len(todo))
		for i, m := range todo {
			fences[i] = Fence{ID: m.ID, Attempt: m.Attempt}
		}
		token := newToken()
		changed, err := tx.exec(ctx, claimSQL(fences, token, s.perRow, ahead))
		if err != nil {
			return fmt.Errorf("compare-and-set: %w", err)
		}
		if changed == len(todo) {
			won = todo
			return nil
		}
		if won, err = s.claimed(ctx, tx, todo, token); err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		return nil
	})
	s.backOff(ids, free)
	if err != nil {
		return nil, err
	}
	return won, nil
}

// claimCandidates reads the due tasks a claim tries for, sorted by
// priority, due time and id. It keeps candidates until their payloads add
// up to claimBytesMax, and returns those payloads' bytes (size) and
// whether it left any candidate out (cut): the rows
// after those are read off the connection and dropped one at a time. The
// server answers in the candidates' order (the sorted derived table leads
// the STRAIGHT_JOIN), so the ones kept are the first due.
func (s *Store) claimCandidates(ctx context.Context, ahead time.Duration, args []any) (out []*task.Message, size int, cut bool, err error) {
	q := qClaimCandidates
	if ahead > 0 {
		q = claimCandidatesSQL(ahead)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		if size >= claimBytesMax {
			cut = true
			break
		}
		m, err := scanMessage(rows)
		if err != nil {
			return nil, 0, false, err
		}
		size += len(m.Payload)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, false, err
	}
	slices.SortFunc(out, func(a, b *task.Message) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.DueUnixMS, b.DueUnixMS), cmp.Compare(a.ID, b.ID))
	})
	return out, size, cut, nil
}

// scanMessage reads a message from a row of the columns of
// qClaimCandidates and qClaimedRows: the dispatch time is NOW(3) for a
// candidate, dispatched_at for a claimed row.
func scanMessage(r rowScanner) (*task.Message, error) {
	var m task.Message
	var payload []byte
	var due, disp string
	var then, sched []byte
	if err := r.Scan(&m.ID, &m.Attempt, &m.Code, &m.Type, &m.Queue, &payload, &m.CronExpr,
		&m.Timezone, &m.Priority, &m.Timeout, &m.MaxRetry, &m.RetryCount, &m.UniqueKey, &m.TraceParent, &due, &disp,
		&then, &m.Batch, &m.Group, &sched); err != nil {
		return nil, err
	}
	m.Payload = payload
	m.Then = nilIfEmpty(then)
	m.Queue = task.QueueOf(m.Queue, m.Code)
	m.DueUnixMS = parseUnix(due).UnixMilli()
	m.DispatchedUnixMS = parseUnix(disp).UnixMilli()
	m.ScheduledUnixMS = scheduledMS(sched)
	return &m, nil
}

// claimed returns the candidates the claim with token won: those now
// dispatched with it at the attempt after the one they were read at.
func (s *Store) claimed(ctx context.Context, db queryer, cands []*task.Message, token uint64) ([]*task.Message, error) {
	args := make([]any, 0, len(cands)+1)
	for _, m := range cands {
		args = append(args, m.ID)
	}
	args = append(args, token)
	rows, err := db.QueryContext(ctx, fmt.Sprintf(qClaimed, placeholders(len(cands))), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	now := map[int64]int{}
	for rows.Next() {
		var id int64
		var attempt int
		if err := rows.Scan(&id, &attempt); err != nil {
			return nil, err
		}
		now[id] = attempt
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var won []*task.Message
	for _, m := range cands {
		if a, ok := now[m.ID]; ok && a == m.Attempt+1 {
			won = append(won, m)
		}
	}
	return won, nil
}

func queryIDs(ctx context.Context, db queryer, q string, args ...any) ([]int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// NextDue returns how long until the earliest pending or failed task is due
// by the database clock (zero or negative when one is due now), and false
// when there is none.
func (s *Store) NextDue(ctx context.Context) (time.Duration, bool, error) {
	return s.nextDue(ctx, qNextDue)
}

// NextFutureDue is NextDue for the tasks not due yet.
func (s *Store) NextFutureDue(ctx context.Context) (time.Duration, bool, error) {
	return s.nextDue(ctx, qNextFutureDue)
}

func (s *Store) nextDue(ctx context.Context, q string) (time.Duration, bool, error) {
	var secs sql.NullFloat64
	if err := s.db.QueryRowContext(ctx, q).Scan(&secs); err != nil {
		return 0, false, fmt.Errorf("next due time: %w", err)
	}
	if !secs.Valid {
		return 0, false, nil
	}
	return time.Duration(secs.Float64 * float64(time.Second)), true, nil
}

// Fence identifies one dispatch of a task.
type Fence struct {
	ID      int64
	Attempt int
}

// TaskMarkRunning moves dispatched tasks to running for workerID with one
// fenced compare-and-set over the batch on (id, attempt, status 1), then
// reads back which rows it won. ok[i] reports whether fences[i] won; a
// loser is a stale or duplicate message. Tasks whose rows another
// transaction holds are left alone and reported by a *LockedError (see
// LockedEntries) beside the valid ok of the others: try those again later.
func (s *Store) TaskMarkRunning(ctx context.Context, workerID string, fences []Fence) ([]bool, error) {
	ok := make([]bool, len(fences))
	if len(fences) == 0 {
		return ok, nil
	}
	ids := make([]int64, len(fences))
	for i, f := range fences {
		ids[i] = f.ID
	}
	free, err := s.writeFree(ctx, ids, func(tx *batchTx) error {
		clear(ok)
		todo, _ := covered(tx, fences, func(f Fence) int64 { return f.ID })
		if len(todo) == 0 {
			return nil
		}
		token := newToken()
		changed, err := tx.exec(ctx, markRunningSQL(todo, workerID, token, s.perRow))
		if err != nil {
			return err
		}
		if changed == len(fences) {
			for i := range ok {
				ok[i] = true
			}
			return nil
		}
		won, err := wonBy(ctx, tx, todo, token)
		if err != nil {
			return err
		}
		markWon(ok, fences, won)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mark %d tasks running: %w", len(fences), err)
	}
	return ok, lockedResult(ids, free)
}

// markWon sets ok[i] for the fences in won; of copies of one fence (a
// retried push) only the first wins.
func markWon(ok []bool, fences []Fence, won map[Fence]bool) {
	for i, f := range fences {
		if won[f] {
			ok[i] = true
			delete(won, f)
		}
	}
}

// wonBy returns the fences whose rows carry token.
func wonBy(ctx context.Context, db queryer, fences []Fence, token uint64) (map[Fence]bool, error) {
	args := make([]any, 0, len(fences)+1)
	for _, f := range fences {
		args = append(args, f.ID)
	}
	args = append(args, token)
	rows, err := db.QueryContext(ctx, fmt.Sprintf(qWonBy, placeholders(len(fences))), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	won := map[Fence]bool{}
	for rows.Next() {
		var id int64
		var attempt int
		if err := rows.Scan(&id, &attempt); err != nil {
			return nil, err
		}
		won[Fence{ID: id, Attempt: attempt}] = true
	}
	return won, rows.Err()
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// newToken returns a random non-zero claim token.
func newToken() uint64 {
	for {
		if t := rand.Uint64() >> 1; t != 0 {
			return t
		}
	}
}

// RetryMode says what a transition does to retry_count.
type RetryMode string

const (
	RetryKeep  RetryMode = "keep"
	RetryInc   RetryMode = "inc"
	RetryReset RetryMode = "reset"
)

// Transition is one fenced change of a task's state, with the run row that
// records it. It applies only if the task is still at (ID, Attempt, From).
type Transition struct {
	ID      int64
	Attempt int
	From    task.Status
	To      task.Status
	Retry   RetryMode
	// Crash says what happens to crash_count, the number of times the task
	// was found held by a dead worker.
	Crash RetryMode
	// NextAt sets plan_next_run_at to an instant; NextIn to NOW(3) plus a
	// delay. Neither: unchanged. NextAt wins when both are set.
	NextAt time.Time
	NextIn *time.Duration
	// Result replaces last_result when SetResult is true.
	SetResult bool
	Result    string
	// Run, when set, is inserted into task_run if the transition applies.
	Run *RunRecord
	// StartedAt is when an attempt that ended before its running mark
	// started (From dispatched, with Run), by the database clock's upper
	// bound (Clock.Latest): its started_at and last_run_at, at most NOW(3).
	// Zero: NOW(3) less Run.Duration.
	StartedAt time.Time
	// Then, when set, are the tasks to create if the transition applies
	// (a parent's success: task.Message.Then), with Value as their
	// payload, else Result.
	Then  []byte
	Value *string
	// Lost, when set, says why the run's result was not stored (Result is
	// a note in its place): the children are created dead, saying so,
	// rather than run with the note as their payload.
	Lost string
	// Batch is the batch the task is a member of (0: none). After a write
	// that ends members, their batches are finished if that was the last.
	Batch int64
}

// HandBack is the transition that returns a dispatched task whose message
// never started (a failed push, a lost or orphaned message, a claim ahead
// not pushed) to pending, without counting a retry. It keeps its due time,
// and with it its place among the due tasks and the age the oldest-due
// alert reads: a task handed back every ten seconds by a Redis at
// maxmemory still shows how long it has waited. The attempt stays spent:
// if the old message ever surfaces, the fence rejects it.
func HandBack(id int64, attempt int) Transition {
	return Transition{ID: id, Attempt: attempt, From: task.Dispatched, To: task.Pending}
}

// RunRecord is the task_run row of a transition. FinishedAt is the
// database's NOW(3); StartedAt is derived from Duration.
type RunRecord struct {
	Code     string
	Queue    string
	WorkerID string
	Node     string
	Outcome  task.Outcome
	Result   string
	Duration time.Duration
}

// TaskTransition applies transitions in one transaction and reports which
// applied. Run rows are written only for transitions that applied, so the
// run log and the task center never disagree. Whatever the batch size it is
// one lock, one fenced UPDATE, one read-back and one INSERT of run rows.
// Transitions of tasks whose rows another transaction holds are left alone
// and reported by a *LockedError (see LockedEntries) beside the valid
// results of the others: try those again later.
func (s *Store) TaskTransition(ctx context.Context, ts []Transition) ([]bool, error) {
	applied := make([]bool, len(ts))
	if len(ts) == 0 {
		return applied, nil
	}
	ids := make([]int64, len(ts))
	for i := range ts {
		ids[i] = ts[i].ID
	}
	free, err := s.writeFree(ctx, ids, func(tx *batchTx) error {
		clear(applied)
		// idx maps the entries written to their place in ts.
		todo, idx := covered(tx, ts, func(t Transition) int64 { return t.ID })
		if len(todo) == 0 {
			return nil
		}
		done := applied
		if idx != nil {
			done = make([]bool, len(todo))
		}
		if err := s.transition(ctx, tx, todo, done); err != nil {
			return err
		}
		for j, i := range idx {
			applied[i] = done[j]
		}
		return insertChildren(ctx, tx.Tx, ts, applied, s.stmtBytes)
	})
	if err != nil {
		return nil, fmt.Errorf("write %d task transitions: %w", len(ts), err)
	}
	s.finishEnded(ctx, ts, applied)
	return applied, lockedResult(ids, free)
}

// transition writes ts in tx, which covers their rows, and sets applied.
func (s *Store) transition(ctx context.Context, tx *batchTx, ts []Transition, applied []bool) error {
	token := newToken()
	changed, err := tx.exec(ctx, transitionSQL(ts, token, s.perRow, s.stmtBytes))
	if err != nil {
		return err
	}
	if changed == len(ts) {
		for i := range applied {
			applied[i] = true
		}
	} else {
		fences := make([]Fence, len(ts))
		for i := range ts {
			fences[i] = Fence{ID: ts[i].ID, Attempt: ts[i].Attempt}
		}
		won, err := wonBy(ctx, tx, fences, token)
		if err != nil {
			return err
		}
		markWon(applied, fences, won)
	}
	return insertRuns(ctx, tx, ts, applied, s.stmtBytes)
}

// insertRuns writes the run rows of the transitions that applied, in as
// many statements as their results' bytes need (see sizeBudget).
func insertRuns(ctx context.Context, tx *batchTx, ts []Transition, applied []bool, bytes int) error {
	var runs sqlText
	rows, size := 0, 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		st := runs.stmt()
		rows, size = 0, 0
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		return nil
	}
	for i := range ts {
		if !applied[i] || ts[i].Run == nil {
			continue
		}
		n := len(ts[i].Run.Result)
		if overBytes(size, n, bytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		if rows == 0 {
			runs = newSQLText()
			runs.sql(qRunInsertHead)
		} else {
			runs.sql(", ")
		}
		rows++
		size += n
		runRow(&runs, ts[i].ID, ts[i].Attempt, ts[i].Run)
	}
	return flush()
}

// finishEnded finishes the batches of members whose end was just written,
// so that a batch's callback follows its last member at once. It runs
// after the commit, so it sees every member that ended before; a failure
// here only delays the callback until the next pass of the batch
// finisher, which looks at every open batch.
func (s *Store) finishEnded(ctx context.Context, ts []Transition, applied []bool) {
	var ids []int64
	for i := range ts {
		if applied[i] && ts[i].Batch != 0 && ts[i].To.Ended() {
			ids = append(ids, ts[i].Batch)
		}
	}
	if len(ids) > 0 {
		_, _ = s.BatchFinish(ctx, ids)
	}
}

func cmpOr(a, b RetryMode) RetryMode {
	if a != "" {
		return a
	}
	return b
}

func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// NewestID returns the highest task id (0 for an empty task center): it
// changes when a row is inserted, by any producer.
func (s *Store) NewestID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.db.QueryRowContext(ctx, qNewestID).Scan(&id); err != nil {
		return 0, fmt.Errorf("newest task id: %w", err)
	}
	return id, nil
}
