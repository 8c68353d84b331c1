-- The counts of waiting tasks (stats, queue depths, /metrics, the alerter)
-- read idx_claim, and each entry's row by primary key for its queue, code
-- and status: one random read per waiting task, future ones included
-- (22-24 s a call with 500,000 of them on a 128 MB pool). These columns
-- put what the counts read into idx_claim itself. Like claim_key, they are
-- NULL unless the task waits to be claimed (0, 4), so a task that is not
-- waiting keeps one still entry (priority, NULLs, id) from its claim to its
-- end, and a claim or a result rewrites the entry it rewrote before, no
-- other.
--
-- Added alone first: MySQL cannot add a virtual column in place together
-- with other changes; both servers add one without a table copy.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS wait_status TINYINT GENERATED ALWAYS AS (IF(status IN (0, 4), status, NULL)) VIRTUAL,
  ADD COLUMN IF NOT EXISTS wait_queue VARCHAR(64) GENERATED ALWAYS AS (IF(status IN (0, 4), queue, NULL)) VIRTUAL,
  ADD COLUMN IF NOT EXISTS wait_code VARCHAR(64) GENERATED ALWAYS AS (IF(status IN (0, 4), task_code, NULL)) VIRTUAL;

-- id right after claim_key keeps the entries in (claim_key, id) order
-- within a priority, as before: the paused-queue claim pages by that key.
-- Rebuilt in place, with writes going on (one statement, so idx_claim
-- never goes missing for a node that forces it).
ALTER TABLE task_center
  DROP KEY IF EXISTS idx_claim,
  ADD KEY idx_claim (priority, claim_key, id, wait_status, wait_queue, wait_code);
