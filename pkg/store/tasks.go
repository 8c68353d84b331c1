package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/task"
)

// TaskInsertParams describes one task to insert. Validation happens before
// (pkg/producer); the store writes what it is given.
type TaskInsertParams struct {
	Code      string
	Type      task.Type
	Queue     string
	Payload   json.RawMessage
	CronExpr  string
	Timezone  string
	Priority  int
	Timeout   int // seconds
	MaxRetry  int
	UniqueKey string
	// TraceParent is the W3C trace context of the submitting span ("" when
	// none), copied into the task's messages.
	TraceParent string
	// RunAt is an absolute due time; when zero, the task is due Delay after
	// the database's NOW(3).
	RunAt time.Time
	Delay time.Duration
	// Then are the tasks to submit when this one succeeds (then_spec).
	Then json.RawMessage
	// BatchID makes the task a member of a batch (set by BatchInsert).
	BatchID int64
	// Group is the task's group ("" none).
	Group string
	// OnConflict says what a task holding the same unique key makes of
	// this one (default: Reject).
	OnConflict Conflict
	// Claim, for a one-off task due now, inserts it already dispatched,
	// as a scheduler's claim leaves it: attempt 1, dispatched_at now.
	// Its result carries its message, for
	// DispatchQueue (the queue the row's queue resolves to); the caller
	// pushes it. A task that is never pushed is found by recovery as a
	// dispatched task whose message was lost.
	Claim         bool
	DispatchQueue string
}

// TaskInsertResult is the outcome of one insert.
type TaskInsertResult struct {
	ID int64
	// Existing is true when a task with the same code and unique key was
	// already there: nothing was inserted and ID is that task's.
	Existing bool
	// Changed: that task took the submission's payload and due time
	// (Replace, Debounce).
	Changed bool
	// Status and Reason say, for an existing task left unchanged by a
	// mode other than Reject, what it was and why.
	Status task.Status
	Reason string
	// Message is the message of a task inserted dispatched (Claim).
	Message *task.Message
	// Err is why this row was not written while others of the same call
	// were (see TaskInsert); the other fields are then zero.
	Err error
}

// TaskInsert inserts tasks in one multi-row statement. Tasks whose unique
// key already exists are not inserted; their existing ids are returned.
//
// It returns an error only when it wrote nothing. A unique key taken by
// a concurrent submit between the check and the insert makes it write
// the rows one at a time; a row that fails after others were written
// has its own Err, and a failure not of the row's own (the server gone)
// is the Err of that row and of every row after it.
func (s *Store) TaskInsert(ctx context.Context, ps []TaskInsertParams) ([]TaskInsertResult, error) {
	out := make([]TaskInsertResult, len(ps))
	existing, err := s.existingUnique(ctx, ps)
	if err != nil {
		return nil, err
	}
	w := partialWrite{out: out}
	todo := make([]int, 0, len(ps))
	for i := range ps {
		if id := existing[uniqueRef{ps[i].Code, ps[i].UniqueKey}]; id != 0 && ps[i].UniqueKey != "" && !w.stopped {
			if err := w.done(i, s.onConflictWrote(ctx, &ps[i], id, &out[i])); err != nil {
				return nil, err
			}
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 || w.stopped {
		return w.result(todo)
	}
	rs, err := s.insertRows(ctx, ps, todo)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		for k, i := range todo {
			out[i] = rs[k]
		}
		return out, nil
	case errors.As(err, &me) && me.Number == 1062, w.wrote && IsRejected(err):
		// A concurrent submit took a unique key between our check and the
		// insert, or, after rows of existing keys were written, a row is
		// refused: one row at a time says which.
		for k, i := range todo {
			if w.stopped {
				return w.result(todo[k:])
			}
			r, err := s.insertRows(ctx, ps, []int{i})
			if errors.As(err, &me) && me.Number == 1062 {
				var id int64
				if id, err = s.taskIDByUnique(ctx, ps[i].Code, ps[i].UniqueKey); err == nil {
					err = s.onConflictWrote(ctx, &ps[i], id, &out[i])
				}
			} else if err == nil {
				out[i] = r[0]
			}
			if err := w.done(i, err); err != nil {
				return nil, err
			}
		}
		return w.result(nil)
	case w.wrote:
		w.stopped, w.err = true, err
		return w.result(todo)
	default:
		return nil, err
	}
}

// onConflictWrote resolves p's conflict with task id into *r.
func (s *Store) onConflictWrote(ctx context.Context, p *TaskInsertParams, id int64, r *TaskInsertResult) error {
	res, err := s.onConflict(ctx, p, id)
	if err == nil {
		*r = res
	}
	return err
}

// partialWrite follows a TaskInsert that writes row by row: once a row
// is written, a later row's failure is that row's alone.
type partialWrite struct {
	out     []TaskInsertResult
	wrote   bool  // a row of the call is written
	stopped bool  // a failure not of its row's own: the rest are not tried
	err     error // that failure
}

// done records the outcome of row i (err nil: written or resolved, and
// out[i] says how). It returns err when nothing of the call is written
// yet: the call fails as a whole.
func (w *partialWrite) done(i int, err error) error {
	if err == nil {
		if r := w.out[i]; !r.Existing || r.Changed {
			w.wrote = true
		}
		return nil
	}
	if !w.wrote {
		return err
	}
	w.out[i] = TaskInsertResult{Err: err}
	if task.ErrorCode(err) != task.CodeInvalid && !IsRejected(err) {
		w.stopped, w.err = true, err
	}
	return nil
}

// result ends the call: the rows left, not tried, fail with the failure
// that stopped it.
func (w *partialWrite) result(left []int) ([]TaskInsertResult, error) {
	if w.stopped {
		for _, i := range left {
			w.out[i] = TaskInsertResult{Err: w.err}
		}
	}
	return w.out, nil
}

// insertSize is what a task's row carries in text values (see sizeBudget).
func insertSize(p *TaskInsertParams) int {
	return len(p.Payload) + len(p.Then) + len(p.UniqueKey) + len(p.CronExpr)
}

// insertParts cuts ps[idx...] into the runs one INSERT each carries: at
// most rows rows, and the bytes of one statement (an entry larger alone).
func insertParts(ps []TaskInsertParams, idx []int, rows, bytes int) [][]int {
	var parts [][]int
	size := 0
	for k, i := range idx {
		n := insertSize(&ps[i])
		if k == 0 || len(parts[len(parts)-1]) >= rows || overBytes(size, n, bytes) {
			parts, size = append(parts, nil), 0
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], i)
		size += n
	}
	return parts
}

// insertedIDs is where a multi-row insert's ids start and how far apart
// they are, and the database clock just before it (only when it inserted
// tasks dispatched).
type insertedIDs struct {
	id, step int64
	now      time.Time
}

// result is the outcome of p, the k-th row of the insert.
func (ids insertedIDs) result(p *TaskInsertParams, k int) TaskInsertResult {
	r := TaskInsertResult{ID: ids.id + int64(k)*ids.step}
	if p.Claim {
		r.Message = p.message(r.ID, ids.now)
	}
	return r
}

// message is the message of p inserted dispatched as task id, due and
// dispatched at now: what a claim would have read of its row.
func (p *TaskInsertParams) message(id int64, now time.Time) *task.Message {
	return &task.Message{ID: id, Attempt: 1, Code: p.Code, Queue: p.DispatchQueue, Type: p.Type,
		Payload: p.Payload, UniqueKey: p.UniqueKey, Timezone: p.Timezone, Timeout: p.Timeout,
		MaxRetry: p.MaxRetry, Priority: p.Priority, DueUnixMS: now.UnixMilli(), DispatchedUnixMS: now.UnixMilli(),
		Then: nilIfEmpty(p.Then), Batch: p.BatchID, TraceParent: p.TraceParent, Group: p.Group}
}

// insertRows inserts ps[idx...] and returns their results in order: in
// one statement, or, when their text outgrows one (large payloads), in
// one transaction of several, so that they are written all or none.
func (s *Store) insertRows(ctx context.Context, ps []TaskInsertParams, idx []int) ([]TaskInsertResult, error) {
	// The step is a session variable: read it on the inserting connection.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert %d tasks: %w", len(idx), err)
	}
	defer conn.Close()
	parts := insertParts(ps, idx, len(idx), s.stmtBytes)
	var db session = conn
	if len(parts) > 1 {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("insert %d tasks: %w", len(idx), err)
		}
		defer tx.Rollback()
		db = tx
	}
	out := make([]TaskInsertResult, 0, len(idx))
	for _, part := range parts {
		ids, err := insertRowsOn(ctx, db, ps, part)
		if err != nil {
			return nil, err
		}
		// A single multi-row INSERT receives evenly spaced auto-increment
		// values on InnoDB in every autoinc lock mode ("simple inserts"):
		// step apart, which is 1 unless a cluster (Galera) spreads ids
		// across nodes.
		for k, i := range part {
			out = append(out, ids.result(&ps[i], k))
		}
	}
	if tx, ok := db.(*sql.Tx); ok {
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("insert %d tasks: %w", len(idx), err)
		}
	}
	return out, nil
}

// session is one connection: a *sql.Conn or a *sql.Tx.
type session interface {
	execer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// insertRowsOn inserts ps[idx...] in one statement on db.
func insertRowsOn(ctx context.Context, db session, ps []TaskInsertParams, idx []int) (insertedIDs, error) {
	q := []byte(qInsertHead)
	args := make([]any, 0, len(idx)*20)
	claims := false
	for k, i := range idx {
		p := &ps[i]
		if k > 0 {
			q = append(q, ", "...)
		}
		q = append(q, qInsertRow...)
		var runAt any
		if !p.RunAt.IsZero() {
			runAt = unixArg(p.RunAt)
		}
		status, attempt := task.Pending, 0
		if p.Claim {
			status, attempt, claims = task.Dispatched, 1, true
		}
		args = append(args, p.Code, int(p.Type), p.Queue, string(p.Payload), nullString(p.CronExpr),
			p.Timezone, p.Priority, int(p.Delay/time.Second), p.Timeout, p.MaxRetry,
			nullString(p.UniqueKey), nullString(string(p.Then)), nullInt(p.BatchID), p.TraceParent, p.Group,
			int(status), attempt, int(status), runAt, p.Delay.Microseconds())
	}
	ids := insertedIDs{step: 1}
	switch {
	case claims:
		// The messages carry the due and dispatch times by the database
		// clock, as a claim reads them.
		var now string
		if err := db.QueryRowContext(ctx, qAutoIncStepNow).Scan(&ids.step, &now); err != nil {
			return insertedIDs{}, fmt.Errorf("insert %d tasks: %w", len(idx), err)
		}
		ids.now = parseUnix(now)
	case len(idx) > 1:
		if err := db.QueryRowContext(ctx, qAutoIncStep).Scan(&ids.step); err != nil {
			return insertedIDs{}, fmt.Errorf("insert %d tasks: %w", len(idx), err)
		}
	}
	res, err := db.ExecContext(ctx, string(q), args...)
	if err != nil {
		return insertedIDs{}, fmt.Errorf("insert %d tasks: %w", len(idx), err)
	}
	if ids.id, err = res.LastInsertId(); err != nil {
		return insertedIDs{}, fmt.Errorf("insert tasks: %w", err)
	}
	return ids, nil
}

type uniqueRef struct{ code, key string }

// existingUnique finds the tasks that already hold the unique keys of ps,
// with one query per task code.
func (s *Store) existingUnique(ctx context.Context, ps []TaskInsertParams) (map[uniqueRef]int64, error) {
	keys := map[string][]any{}
	for i := range ps {
		if ps[i].UniqueKey != "" {
			keys[ps[i].Code] = append(keys[ps[i].Code], ps[i].UniqueKey)
		}
	}
	out := map[uniqueRef]int64{}
	for code, ks := range keys {
		rows, err := s.db.QueryContext(ctx, fmt.Sprintf(qByUniqueKeys, placeholders(len(ks))), append([]any{code}, ks...)...)
		if err != nil {
			return nil, fmt.Errorf("look up unique keys: %w", err)
		}
		for rows.Next() {
			var key, holder string
			var id int64
			if err := rows.Scan(&key, &id, &holder); err != nil {
				rows.Close()
				return nil, fmt.Errorf("look up unique keys: %w", err)
			}
			if err := sameCode(code, holder, key, id); err != nil {
				rows.Close()
				return nil, err
			}
			out[uniqueRef{code, key}] = id
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("look up unique keys: %w", err)
		}
	}
	return out, nil
}

func (s *Store) taskIDByUnique(ctx context.Context, code, key string) (int64, error) {
	var id int64
	var holder string
	err := s.db.QueryRowContext(ctx, `SELECT id, task_code FROM task_center WHERE task_code = ? AND unique_key = ?`, code, key).Scan(&id, &holder)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up unique key %q: %w", key, err)
	}
	return id, sameCode(code, holder, key, id)
}

// sameCode refuses a unique key held by a task whose code differs from
// code only in what uk_code_unique's collation folds (case, trailing
// spaces): the submission is not a duplicate of that task, yet the index
// takes it for one, and treating it as one would answer, or update, a
// task of another code.
func sameCode(code, holder, key string, id int64) error {
	if holder == code {
		return nil
	}
	return task.Invalidf("unique key %q is held by task %d of code %q, which the task center does not tell apart from %q (case and trailing spaces are folded): use one spelling of the code",
		key, id, holder, code)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// TaskGet reads one task.
func (s *Store) TaskGet(ctx context.Context, id int64) (*task.Task, error) {
	t, err := scanTask(s.db.QueryRowContext(ctx, qTaskGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, task.NotFoundf("task %d not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read task %d: %w", id, err)
	}
	return t, nil
}

// stillFor is how long a task's row must not have changed for a read of
// it to be still (TaskGetStill).
const stillFor = 5 * time.Second

// TaskGetStill reads task id, and reports whether its row had not
// changed for stillFor by the database clock when it was read. Brief
// leaves out the payload and the last result, which can be megabytes.
//
// Every write that changes a row moves its updated_at (ON UPDATE
// CURRENT_TIMESTAMP(3); none sets it), so a row with the updated_at of a
// still read holds that read's payload and result: tasktop reads them
// once, not at each refresh. A read that is not still proves less: two
// writes whose statements start within one millisecond stamp the same
// time (a burst of debounce submits), and a read between their commits
// saw the first.
func (s *Store) TaskGetStill(ctx context.Context, id int64, brief bool) (*task.Task, bool, error) {
	q := qTaskGetStill
	if brief {
		q = qTaskGetStillBrief
	}
	var still bool
	t, err := scanTask(andScan{s.db.QueryRowContext(ctx, q, id), &still})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, task.NotFoundf("task %d not found", id)
	}
	if err != nil {
		return nil, false, fmt.Errorf("read task %d: %w", id, err)
	}
	return t, still, nil
}

// andScan scans a row of a task's columns followed by one more.
type andScan struct {
	r    rowScanner
	more any
}

func (a andScan) Scan(dest ...any) error { return a.r.Scan(append(dest, a.more)...) }

// TaskGetByUnique reads the task with a code and unique key.
func (s *Store) TaskGetByUnique(ctx context.Context, code, key string) (*task.Task, error) {
	t, err := scanTask(s.db.QueryRowContext(ctx, qTaskByUnique, code, code, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, task.NotFoundf("no task %s with unique key %q", code, key)
	}
	if err != nil {
		return nil, fmt.Errorf("read task %s/%s: %w", code, key, err)
	}
	return t, nil
}

type rowScanner interface{ Scan(...any) error }

func scanTask(r rowScanner) (*task.Task, error) {
	var t task.Task
	var payload []byte
	var plan, created, updated string
	var lastRun, disp, started, sched sql.NullString
	var then []byte
	err := r.Scan(&t.ID, &t.Code, &t.Type, &t.Queue, &payload, &t.CronExpr, &t.Timezone,
		&t.Priority, &t.Delay, &t.Timeout, &t.MaxRetry, &t.RetryCount, &t.Status, &t.UniqueKey,
		&t.Attempt, &t.CrashCount, &t.WorkerID, &plan, &lastRun, &disp, &started, &t.LastResult,
		&created, &updated, &t.ParentID, &then, &t.BatchID, &t.Group, &t.ReleasedKey, &sched)
	if err != nil {
		return nil, err
	}
	if t.Then, err = task.DecodeChildren(then); err != nil {
		return nil, fmt.Errorf("task %d: %w", t.ID, err)
	}
	t.Payload = json.RawMessage(payload)
	t.PlanNextRun = parseUnix(plan)
	t.LastRunAt, t.Dispatched, t.StartedAt = nullUnix(lastRun), nullUnix(disp), nullUnix(started)
	t.ScheduledAt = nullUnix(sched)
	t.CreatedAt, t.UpdatedAt = parseUnix(created), parseUnix(updated)
	return &t, nil
}

// TaskListParams filters a listing. Paging is by keyset: BeforeID returns
// tasks with smaller ids, newest first, so a page costs the same on a
// million rows as on ten.
type TaskListParams struct {
	Status *task.Status
	Code   string
	Queue  string
	Type   *task.Type
	// Search keeps tasks whose code, queue, unique key or last result
	// contains it (a substring, case-insensitive; one emoji matches
	// itself only). It reads rows until a page is full: no index serves it.
	Search string
	// Group keeps the tasks of one group (limit.ValidateGroup; its case
	// matters, as it does to the schedulers).
	Group string
	// ParentID keeps the children of a task; BatchID the members of a
	// batch.
	ParentID int64
	BatchID  int64
	// ChangedSince and ChangedBefore keep the tasks whose row last changed
	// (updated_at) in [ChangedSince, ChangedBefore); zero: no bound. The
	// tasks that died during an incident, say: a dead task's row changes
	// when it dies, and only an operator's action changes it after.
	ChangedSince  time.Time
	ChangedBefore time.Time
	BeforeID      int64
	Limit         int
	// Brief leaves out the payload and keeps the first listBriefChars of
	// the last result: what a listing shows. A page of tasks with
	// payloads of megabytes, read at each of tasktop's refreshes, cost
	// more than everything else it reads.
	Brief bool
}

// listBriefChars is how much of a last result a brief listing reads.
const listBriefChars = 1024

// briefTaskColumns are taskColumns without the payload, and with the
// first listBriefChars of the last result.
var briefTaskColumns = briefColumns(fmt.Sprintf("COALESCE(LEFT(last_result, %d), '')", listBriefChars))

// briefColumns are taskColumns without the payload, and with result read
// in place of the last result.
func briefColumns(result string) string {
	return strings.NewReplacer(", payload,", ", '',", "COALESCE(last_result, '')", result).Replace(taskColumns)
}

// where is the filter of p as SQL conditions and their arguments.
//
// A waiting or in-flight status is not read through its lanes of
// idx_lane, which would cost what those tasks cost rather than the whole
// table: MariaDB 10.11 at times misses a row through that index (of
// virtual columns) just after the row changed, under concurrent writes
// (about 1 read in 500 in a loop of six sessions each updating a task and
// reading it back), and an operator's listing, or a bulk retry, must see
// what was committed before it. The daemons' reads through it are
// repeated.
func (p *TaskListParams) where() (string, []any) {
	q := ` WHERE 1 = 1`
	var args []any
	if p.Status != nil {
		q += ` AND status = ?`
		args = append(args, int(*p.Status))
		if *p.Status == task.Dead || *p.Status == task.Cancelled {
			// idx_held holds only dead and cancelled rows, in id order:
			// the page reads those, not every row of a code.
			q += ` AND held_status = ?`
			args = append(args, int(*p.Status))
		}
	}
	// Codes and queues match exactly (exactCode): a kill of the stray
	// "HELLO" rows a producer INSERTed must not take hello's.
	if p.Code != "" {
		q += ` AND ` + exactCode
		args = append(args, p.Code, p.Code)
	}
	if p.Queue != "" {
		q += ` AND ` + queueOf("task_center") + ` = BINARY ?`
		args = append(args, p.Queue)
	}
	if p.Group != "" {
		q += ` AND group_key = BINARY ?`
		args = append(args, p.Group)
	}
	if p.ParentID != 0 {
		q += ` AND parent_id = ?`
		args = append(args, p.ParentID)
	}
	if p.BatchID != 0 {
		q += ` AND batch_id = ?`
		args = append(args, p.BatchID)
	}
	if p.Type != nil {
		q += ` AND task_type = ?`
		args = append(args, int(*p.Type))
	}
	if p.Search != "" {
		like := "%" + likeEscaper.Replace(p.Search) + "%"
		// utf8mb4_unicode_520_ci: case-insensitive, also on unique_key,
		// which compares exactly (utf8mb4_bin, migration 13); not the
		// table's utf8mb4_general_ci, which weighs every character
		// outside the BMP alike, so a search for one emoji matched any
		// other (and a bulk action on it took their tasks).
		q += ` AND (task_code LIKE ? COLLATE utf8mb4_unicode_520_ci OR queue LIKE ? COLLATE utf8mb4_unicode_520_ci
			OR unique_key LIKE ? COLLATE utf8mb4_unicode_520_ci OR last_result LIKE ? COLLATE utf8mb4_unicode_520_ci)`
		args = append(args, like, like, like, like)
	}
	// FROM_UNIXTIME: the bound in the session's zone, as updated_at is
	// written, whatever the zones of the client and the server.
	if !p.ChangedSince.IsZero() {
		q += ` AND updated_at >= FROM_UNIXTIME(?)`
		args = append(args, unixArg(p.ChangedSince))
	}
	if !p.ChangedBefore.IsZero() {
		q += ` AND updated_at < FROM_UNIXTIME(?)`
		args = append(args, unixArg(p.ChangedBefore))
	}
	if p.BeforeID > 0 {
		q += ` AND id < ?`
		args = append(args, p.BeforeID)
	}
	return q, args
}

// likeEscaper makes a search text match literally in LIKE (backslash is
// MySQL's escape character).
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// TaskCountMax bounds TaskCount: a count past it is reported as it.
const TaskCountMax = 100000

// TaskCount counts the tasks matching p (BeforeID and Limit ignored), at
// most TaskCountMax, so a count over a huge table costs a bounded scan.
func (s *Store) TaskCount(ctx context.Context, p TaskListParams) (int, error) {
	p.BeforeID = 0
	where, args := p.where()
	q, limit := s.scanLimited(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM task_center`+where+` LIMIT ?) t`)
	var n int
	err := s.db.QueryRowContext(ctx, q, append(args, TaskCountMax)...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count tasks: %w", s.scanStopped(ctx, &p, err, limit))
	}
	return n, nil
}

// ErrScanStopped is the error of a listing the server stopped at its time
// limit (scanLimited).
var ErrScanStopped = errors.New("read stopped")

// scanLimited gives a listing, which may read every row when no index
// serves its filter, a time limit on the server: the caller's deadline or
// the connections' read timeout, whichever comes first, less a tenth for
// the server's error to arrive before the client gives up. A client that
// gives up closes its connection, but the server would read on to the end
// of the table, and tasktop's next refresh would start another such read
// beside it.
func (s *Store) scanLimited(ctx context.Context, q string) (string, time.Duration) {
	d := s.readTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	if d <= 0 {
		return q, 0
	}
	d = max(d*9/10, time.Millisecond)
	if s.scanCap > 0 {
		d = min(d, s.scanCap)
	}
	return s.timeLimited(q, d), d
}

// timeLimited is q with a time limit d on the server.
func (s *Store) timeLimited(q string, d time.Duration) string {
	if s.setStatement {
		return fmt.Sprintf("SET STATEMENT max_statement_time = %.3f FOR %s", d.Seconds(), q)
	}
	// MySQL: an optimizer hint of the outermost SELECT.
	return strings.Replace(q, "SELECT ", fmt.Sprintf("SELECT /*+ MAX_EXECUTION_TIME(%d) */ ", d.Milliseconds()), 1)
}

// scanStopped tells a read the server stopped at its time limit (MariaDB's
// max_statement_time, MySQL's MAX_EXECUTION_TIME) from other errors, and
// says why it took that long: a filter no index serves reads rows until a
// page is full; any read waits for a lock held elsewhere (LOCK TABLES, an
// ALTER) or a server too busy. When the filter could be the cause, a read
// of the newest row by primary key tells the two apart.
func (s *Store) scanStopped(ctx context.Context, p *TaskListParams, err error, limit time.Duration) error {
	if !isStatementTime(err) {
		return err
	}
	why := "a lock held elsewhere or a busy server kept it waiting (mysql.read_timeout)"
	// Newest first, a filter that keeps few of the rows reads many to fill
	// a page, unless an index serves it.
	held := p.Status != nil && (*p.Status == task.Dead || *p.Status == task.Cancelled)
	indexed := p.Code != "" || p.ParentID != 0 || p.BatchID != 0 || held
	sparse := p.Queue != "" || p.Group != "" || p.Search != "" || p.Type != nil || p.Status != nil && *p.Status != task.Succeeded
	if !indexed && sparse {
		var id int64
		err := s.db.QueryRowContext(ctx, s.timeLimited(`SELECT id FROM task_center ORDER BY id DESC LIMIT 1`, min(max(limit, scanProbeMin), scanProbeMax))).Scan(&id)
		if err == nil || errors.Is(err, sql.ErrNoRows) {
			why = "no index serves this filter: narrow it by task code (dead and cancelled tasks are indexed by status)"
		}
	}
	return fmt.Errorf("%w after %s without an answer: %s", ErrScanStopped, limit.Round(time.Millisecond), why)
}

// scanProbeMin and scanProbeMax bound the read scanStopped makes to tell a
// slow filter from a lock.
const (
	scanProbeMin = 100 * time.Millisecond
	scanProbeMax = time.Second
)

// isStatementTime reports whether err is the server's stop of a statement
// at its time limit.
func isStatementTime(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errStatementTime || me.Number == errExecutionTime)
}

// TaskList lists tasks, newest first.
func (s *Store) TaskList(ctx context.Context, p *TaskListParams) ([]*task.Task, error) {
	where, args := p.where()
	cols := taskColumns
	if p.Brief {
		cols = briefTaskColumns
	}
	q := `SELECT ` + cols + ` FROM task_center` + where
	limit := p.Limit
	if limit <= 0 || limit > 10000 {
		limit = 50
	}
	q, stop := s.scanLimited(ctx, q+` ORDER BY id DESC LIMIT ?`)
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", s.scanStopped(ctx, p, err, stop))
	}
	defer rows.Close()
	var out []*task.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tasks: %w", s.scanStopped(ctx, p, err, stop))
	}
	return out, nil
}

// RunList returns the newest runs of a task, newest first.
func (s *Store) RunList(ctx context.Context, taskID int64, limit int) ([]*task.Run, error) {
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.db.QueryContext(ctx, qRunsForTask, taskID, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs of task %d: %w", taskID, err)
	}
	defer rows.Close()
	var out []*task.Run
	for rows.Next() {
		var r task.Run
		var started sql.NullString
		var finished string
		if err := rows.Scan(&r.ID, &r.TaskID, &r.Attempt, &r.WorkerID, &r.Node, &started, &finished,
			&r.Outcome, &r.Result, &r.DurationMS); err != nil {
			return nil, fmt.Errorf("list runs of task %d: %w", taskID, err)
		}
		if t := nullUnix(started); t != nil {
			r.StartedAt = *t
		}
		r.FinishedAt = parseUnix(finished)
		out = append(out, &r)
	}
	return out, rows.Err()
}

// CronUpdate changes a periodic task's definition in place (a deploy
// re-running `cron add`). Its next run moves to p.RunAt only when it waits
// for an occurrence of a schedule that changed: a run in flight, a failed
// run waiting for its retry, a task an operator disabled and an overdue
// occurrence of the same schedule keep their state and time.
func (s *Store) CronUpdate(ctx context.Context, id int64, p *TaskInsertParams) error {
	// MySQL assigns left to right, each assignment seeing the ones before:
	// the time and status are decided on the old schedule and status.
	// A run whose time moves is a new occurrence: no scheduled time of
	// its own.
	_, err := s.db.ExecContext(ctx, `UPDATE task_center SET
		scheduled_at = IF(status IN (1, 2, 4, 6) OR (status = 0 AND cron_expr <=> ? AND timezone <=> ?),
			scheduled_at, NULL),
		plan_next_run_at = IF(status IN (1, 2, 4, 6) OR (status = 0 AND cron_expr <=> ? AND timezone <=> ?),
			plan_next_run_at, FROM_UNIXTIME(?)),
		status = IF(status IN (1, 2, 4, 6), status, 0),
		cron_expr = ?, timezone = ?, payload = ?,
		queue = ?, priority = ?, timeout = ?, max_retry = ?, then_spec = ?, task_type = 1
		WHERE id = ?`,
		p.CronExpr, p.Timezone, p.CronExpr, p.Timezone, unixArg(p.RunAt),
		p.CronExpr, p.Timezone, string(p.Payload), p.Queue, p.Priority, p.Timeout, p.MaxRetry,
		nullString(string(p.Then)), id)
	if err != nil {
		return fmt.Errorf("update periodic task %d: %w", id, err)
	}
	return nil
}

// CronZoneless is a pending periodic task whose row names no time zone
// (an INSERT the seed's way): it runs in the cluster's default zone, so its
// next run moves when that zone does.
type CronZoneless struct {
	ID   int64
	Expr string
	// What CronZonelessMove fences on: the attempt and next run read.
	attempt int
	planned string
}

// CronZonelessList returns the pending periodic tasks whose row names no
// time zone. Those in flight get their next run when their run ends, and
// a failed one waits for its retry, whatever the zone.
func (s *Store) CronZonelessList(ctx context.Context) ([]CronZoneless, error) {
	// The next run is read as text: compared back as it was read, exactly,
	// whatever the session's time zone.
	var out []CronZoneless
	err := scanRows(ctx, s.db, `SELECT id, COALESCE(cron_expr, ''), attempt, CAST(plan_next_run_at AS CHAR)
		FROM task_center WHERE task_type = 1 AND status = 0 AND timezone = '' ORDER BY id`, func(r *sql.Rows) error {
		var z CronZoneless
		if err := r.Scan(&z.ID, &z.Expr, &z.attempt, &z.planned); err != nil {
			return err
		}
		out = append(out, z)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list periodic tasks with no time zone: %w", err)
	}
	return out, nil
}

// CronZonelessMove moves the next run of each task of ts to next[i], as
// CronUpdate moves that of a task whose zone changed, and returns the ids
// it moved. A task is moved only while it is as CronZonelessList read it:
// still pending for the same occurrence, with the same expression and no
// zone. One claimed, run-now, disabled or re-added meanwhile is left alone.
func (s *Store) CronZonelessMove(ctx context.Context, ts []CronZoneless, next []time.Time) ([]int64, error) {
	var moved []int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		moved = moved[:0]
		for i, z := range ts {
			res, err := tx.ExecContext(ctx, `UPDATE task_center SET scheduled_at = NULL, plan_next_run_at = FROM_UNIXTIME(?)
				WHERE id = ? AND task_type = 1 AND status = 0 AND timezone = '' AND COALESCE(cron_expr, '') = ?
				AND attempt = ? AND plan_next_run_at = ?`,
				unixArg(next[i]), z.ID, z.Expr, z.attempt, z.planned)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				moved = append(moved, z.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("move the next run of %d periodic tasks with no time zone: %w", len(ts), err)
	}
	return moved, nil
}

// TaskDelete removes a task row (its runs stay as history).
func (s *Store) TaskDelete(ctx context.Context, id int64) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM task_center WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete task %d: %w", id, err)
	}
	return nil
}
