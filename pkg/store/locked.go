package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Rows locked by someone else's transaction (another team's report holding
// SELECT ... FOR UPDATE, the seed's incident 6.3) must hold back only
// themselves. Every batched write that may meet them (the claim, the
// running mark, result and hand-back transitions) locks its rows in its own
// transaction without waiting for any: SKIP LOCKED where the server has it
// (MySQL 8, MariaDB 10.6+), else NOWAIT on halves of the batch, bisected
// down to the locked rows, else the same bisection with the session's short
// lock wait timeout. The write then covers only the rows it locked; the
// others are reported (LockedError) and retried later.
//
// That locking read is a second pass over every row of every batch, for
// rows that are almost never held. Where a statement's lock wait can be
// zero (MariaDB's SET STATEMENT innodb_lock_wait_timeout = 0; MySQL's
// minimum is 1 s), a batch is first written without it, each statement
// failing at once on a held row, and only then written again after the
// locking read (writeFree).

// lockMode is how a batch locks its rows without waiting for others.
type lockMode int

const (
	lockSkip   lockMode = iota // FOR UPDATE SKIP LOCKED
	lockNoWait                 // FOR UPDATE NOWAIT, bisected
	lockWait                   // FOR UPDATE (the lock wait timeout), bisected
)

// probeLockMode picks the best locking clause the server has.
func probeLockMode(ctx context.Context, db *sql.DB) (lockMode, error) {
	for _, p := range []struct {
		q    string
		mode lockMode
	}{{qProbeSkipLocked, lockSkip}, {qProbeNoWait, lockNoWait}} {
		var one int
		err := db.QueryRowContext(ctx, p.q).Scan(&one)
		if err == nil {
			return p.mode, nil
		}
		if !IsRejected(err) {
			return 0, err
		}
	}
	return lockWait, nil
}

// probeZeroWait reports whether the server runs a statement with no lock
// wait at all: MariaDB takes SET STATEMENT innodb_lock_wait_timeout = 0
// and fails a lock it cannot have at once (10.3+; older ones raise the 0
// to 1). MySQL has no SET STATEMENT and a minimum of 1 s. setStatement
// reports whether it has SET STATEMENT at all.
func probeZeroWait(ctx context.Context, db *sql.DB) (zeroWait, setStatement bool, err error) {
	var v int64
	err = db.QueryRowContext(ctx, qProbeZeroWait).Scan(&v)
	if err != nil {
		if IsRejected(err) {
			return false, false, nil
		}
		return false, false, err
	}
	return v == 0, true, nil
}

// errHeld fails a zero-wait write that met a row another transaction holds.
var errHeld = errors.New("a row of the batch is held by another transaction")

// batchTx is the transaction of one batched write (writeFree).
type batchTx struct {
	*sql.Tx
	// free holds the rows lockFree locked, the only ones to write; nil on
	// the zero-wait try, which writes every row.
	free map[int64]bool
}

// covered returns the entries of items whose rows tx covers, and their
// places in items: items itself and nil places when it covers them all.
func covered[T any](tx *batchTx, items []T, id func(T) int64) ([]T, []int) {
	if tx.free == nil {
		return items, nil
	}
	var out []T
	var at []int
	for i, it := range items {
		if tx.free[id(it)] {
			out, at = append(out, it), append(at, i)
		}
	}
	if len(out) == len(items) {
		return items, nil
	}
	return out, at
}

// exec runs the statements of a batched write and returns the rows they
// changed. When that is one row per batch entry, every entry won, and
// reading back which did is not needed: every fenced write sets a fresh
// claim token (a claim, its attempt), so a matched row is always a changed
// row, and copies of one fence change their row once and fall short. On
// the zero-wait try a statement that meets a held row fails at once, with
// errHeld.
func (b *batchTx) exec(ctx context.Context, stmts []stmt) (int, error) {
	changed := 0
	for _, st := range stmts {
		q := st.q
		if b.free == nil {
			q = zeroWaitPrefix + q
		}
		res, err := b.ExecContext(ctx, q, st.args...)
		if err != nil {
			if b.free == nil && isLockWait(err) {
				return 0, errHeld
			}
			return 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		changed += int(n)
	}
	return changed, nil
}

// writeFree runs write in a transaction that covers the rows of ids no
// other transaction holds, without waiting for any, and returns those rows
// (nil: all of them). Where the server has a zero lock wait, write first
// covers every row; when one is held, that transaction is rolled back, and
// with it the locks its failed statement took and the statements of the
// batch before it (InnoDB undoes only the failed statement), and write runs
// again in a new one, after lockFree. Whatever write returns besides errHeld
// ends it.
func (s *Store) writeFree(ctx context.Context, ids []int64, write func(*batchTx) error) (map[int64]bool, error) {
	if s.zeroWait {
		err := s.inTx(ctx, func(tx *sql.Tx) error { return write(&batchTx{Tx: tx}) })
		if !errors.Is(err, errHeld) {
			return nil, err
		}
	}
	var free map[int64]bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if free, err = s.lockFree(ctx, tx, ids); err != nil {
			return fmt.Errorf("lock rows: %w", err)
		}
		return write(&batchTx{Tx: tx, free: free})
	})
	return free, err
}

// LockedError reports the entries of a batched write that were left alone
// because another transaction held their rows locked: they neither applied
// nor lost their fence, and should be tried again later. The write's other
// results are valid and returned beside the error.
type LockedError struct {
	// Entries are indexes into the batch.
	Entries []int
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%d tasks locked by another transaction; left for later", len(e.Entries))
}

// LockedEntries returns the batch indexes err reports as locked, or nil
// when err is not a LockedError.
func LockedEntries(err error) []int {
	var le *LockedError
	if errors.As(err, &le) {
		return le.Entries
	}
	return nil
}

// lockedResult returns a LockedError for the entries of ids that are not
// in free, or nil when every entry was free (free nil: all were).
func lockedResult(ids []int64, free map[int64]bool) error {
	if free == nil {
		return nil
	}
	var locked []int
	for i, id := range ids {
		if !free[id] {
			locked = append(locked, i)
		}
	}
	if locked == nil {
		return nil
	}
	return &LockedError{Entries: locked}
}

// lockFree locks, in tx, the rows of ids no other transaction holds and
// returns the ids that are free to write: those it locked, and those with
// no row at all (their fenced write simply does not apply). It never waits
// for another transaction's lock (but the lock wait timeout where the
// server has neither SKIP LOCKED nor NOWAIT).
func (s *Store) lockFree(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]bool, error) {
	s.preReads.Add(1)
	free := make(map[int64]bool, len(ids))
	uniq := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !free[id] {
			free[id] = true
			uniq = append(uniq, id)
		}
	}
	clear(free)
	var err error
	if s.lock == lockSkip {
		err = s.lockSkipped(ctx, tx, uniq, free)
	} else {
		err = s.lockBisect(ctx, tx, uniq, free)
	}
	if err != nil {
		return nil, err
	}
	if len(free) == len(uniq) {
		return free, nil
	}
	// A row not locked is either held by someone else or gone; a gone
	// row is free (its write misses), so only the existing ones wait.
	var missing []any
	for _, id := range uniq {
		if !free[id] {
			missing = append(missing, id)
		}
	}
	exist, err := queryIDs(ctx, tx, fmt.Sprintf(qRowsExist, placeholders(len(missing))), missing...)
	if err != nil {
		return nil, err
	}
	held := make(map[int64]bool, len(exist))
	for _, id := range exist {
		held[id] = true
	}
	for _, m := range missing {
		if id := m.(int64); !held[id] {
			free[id] = true
		}
	}
	return free, nil
}

// lockCandidates locks, in tx, the claim candidates of ids no other
// transaction holds (lockFree) and returns them; the held ones back off
// from this process's claims for lockedBackoff.
func (s *Store) lockCandidates(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]bool, error) {
	free, err := s.lockFree(ctx, tx, ids)
	if err != nil {
		return nil, fmt.Errorf("lock candidates: %w", err)
	}
	s.backOff(ids, free)
	return free, nil
}

// backOff leaves the claim candidates of ids not in free (held by another
// transaction) out of this process's claims for lockedBackoff.
func (s *Store) backOff(ids []int64, free map[int64]bool) {
	if free == nil {
		return
	}
	var held []int64
	for _, id := range ids {
		if !free[id] {
			held = append(held, id)
		}
	}
	if held != nil {
		s.skip.add(held, time.Now())
	}
}

// lockSkipped locks ids with SKIP LOCKED and marks the rows it got in free.
func (s *Store) lockSkipped(ctx context.Context, tx *sql.Tx, ids []int64, free map[int64]bool) error {
	got, err := queryIDs(ctx, tx, fmt.Sprintf(qLockRows+" SKIP LOCKED", placeholders(len(ids))), int64Args(ids)...)
	if err != nil {
		return err
	}
	for _, id := range got {
		free[id] = true
	}
	return nil
}

// lockBisect locks ids all at once, and when some are held by another
// transaction, each half in turn, down to the single rows that are held.
// Locks a failed statement took stay with tx, which is harmless: the rows
// are locked again by the half that holds them.
func (s *Store) lockBisect(ctx context.Context, tx *sql.Tx, ids []int64, free map[int64]bool) error {
	if len(ids) == 0 {
		return nil
	}
	q := qLockRows
	if s.lock == lockNoWait {
		q += " NOWAIT"
	}
	got, err := queryIDs(ctx, tx, fmt.Sprintf(q, placeholders(len(ids))), int64Args(ids)...)
	if err == nil {
		for _, id := range got {
			free[id] = true
		}
		return nil
	}
	if !isLockWait(err) {
		return err
	}
	if len(ids) == 1 {
		return nil
	}
	half := len(ids) / 2
	if err := s.lockBisect(ctx, tx, ids[:half], free); err != nil {
		return err
	}
	return s.lockBisect(ctx, tx, ids[half:], free)
}

// isLockWait reports a lock that could not be had: a lock wait timeout
// (MariaDB's answer to NOWAIT too) or MySQL's NOWAIT refusal.
func isLockWait(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1205 || me.Number == 3572)
}

func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// lockedBackoff is how long a claim leaves out rows it found locked, so a
// run of locked rows at the head of the due order cannot take a claim's
// whole batch, round after round, from the rows due behind them.
const lockedBackoff = 2 * time.Second

// skipSet holds the rows this process's claims found locked, until their
// backoff ends. It is bounded: past skipMax the oldest are forgotten (they
// are tried again, which costs a skipped row, never a wait).
type skipSet struct {
	mu    sync.Mutex
	until map[int64]time.Time
}

const skipMax = 1000

// add remembers ids as locked from now.
func (k *skipSet) add(ids []int64, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.until == nil {
		k.until = map[int64]time.Time{}
	}
	for _, id := range ids {
		k.until[id] = now.Add(lockedBackoff)
	}
	k.prune(now)
}

// prune drops expired entries, and the soonest to expire beyond skipMax.
func (k *skipSet) prune(now time.Time) {
	for id, t := range k.until {
		if !t.After(now) {
			delete(k.until, id)
		}
	}
	for len(k.until) > skipMax {
		var oldest int64
		var at time.Time
		for id, t := range k.until {
			if at.IsZero() || t.Before(at) {
				oldest, at = id, t
			}
		}
		delete(k.until, oldest)
	}
}

// snapshot returns the ids still backing off.
func (k *skipSet) snapshot(now time.Time) map[int64]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.until) == 0 {
		return nil
	}
	k.prune(now)
	out := make(map[int64]bool, len(k.until))
	for id := range k.until {
		out[id] = true
	}
	return out
}
