-- One secondary index for the states a task moves through, instead of
-- three. idx_claim (waiting), idx_inflight (in flight) and idx_finished
-- (finished) each hold an entry for every task, and a task's claim moves
-- its entries in idx_claim and idx_inflight, its result those in
-- idx_inflight and idx_finished: four index moves per task. In idx_lane a
-- task has one entry, (lane, lane_at, id), that a claim and a result each
-- move once; the running mark (1 -> 2) keeps it.
--
-- lane: the task's priority while it waits to be claimed (0, 4); 10 in
-- flight (1, 2); 11 once it finished and is retention's to delete
-- (succeeded or cancelled, with a finished_at: a disabled periodic task
-- has none and is kept); NULL otherwise (dead tasks: idx_held counts
-- them). lane_at: the time the lane is read by: the due time, the dispatch
-- time, the end. Each lane is one bounded range: the claim reads
-- lane = P AND lane_at <= NOW(3), recovery lane = 10 by age, retention
-- lane = 11 by age.
--
-- idx_claim, idx_inflight and idx_finished stay until the contract step
-- 0011: nodes of the previous release force them while a rolling upgrade
-- goes on. Until it runs, writes keep both sets.
--
-- Added alone first: MySQL cannot add a virtual column in place together
-- with other changes; both servers add one without a table copy.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS lane TINYINT GENERATED ALWAYS AS (CASE
    WHEN status IN (0, 4) THEN priority
    WHEN status IN (1, 2) THEN 10
    WHEN status IN (3, 6) AND finished_at IS NOT NULL THEN 11 END) VIRTUAL,
  ADD COLUMN IF NOT EXISTS lane_at DATETIME(3) GENERATED ALWAYS AS (CASE
    WHEN status IN (0, 4) THEN plan_next_run_at
    WHEN status IN (1, 2) THEN dispatched_at
    WHEN status IN (3, 6) THEN finished_at END) VIRTUAL;

-- id right after lane_at keeps each lane in (lane_at, id) order: the
-- paused-queue claim and recovery's running scan page by that key. The
-- wait_* columns (NULL unless waiting, see 0009) keep the waiting counts
-- index-only; they change together with the lane, never on their own.
ALTER TABLE task_center
  ADD KEY IF NOT EXISTS idx_lane (lane, lane_at, id, wait_status, wait_queue, wait_code);
