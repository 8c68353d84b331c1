-- Chains: a task can name tasks to submit when it succeeds. then_spec is
-- that list (a JSON array of {code, queue, priority, timeout, max_retry,
-- delay_ms, then}); each child is created in the transaction that writes
-- its parent's success, with parent_id set and the parent's result as its
-- payload.
--
-- Batches: batch_id makes a task a member of a task_batch. batch_open is
-- batch_id while the member has not ended (succeeded, dead, cancelled): it
-- changes when a member ends or is retried, never for other tasks (their
-- entry stays NULL), so the index costs the hot path nothing, and "does
-- batch B have an open member" is one index dive.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS parent_id BIGINT UNSIGNED DEFAULT NULL,
  ADD COLUMN IF NOT EXISTS then_spec TEXT DEFAULT NULL,
  ADD COLUMN IF NOT EXISTS batch_id BIGINT UNSIGNED DEFAULT NULL;

ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS batch_open BIGINT UNSIGNED GENERATED ALWAYS AS (IF(status IN (3, 5, 6), NULL, batch_id)) VIRTUAL,
  ADD KEY IF NOT EXISTS idx_parent (parent_id),
  ADD KEY IF NOT EXISTS idx_batch (batch_id),
  ADD KEY IF NOT EXISTS idx_batch_open (batch_open);

-- A batch: members (task_center.batch_id) plus a callback task created
-- once, when the last member has ended, with the counts of how they ended
-- in its payload. The counts and callback_id are written then, in the
-- transaction that creates the callback; finished_at NULL is an open batch.
CREATE TABLE IF NOT EXISTS task_batch (
  id                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  total              INT UNSIGNED    NOT NULL,
  callback_code      VARCHAR(64)     NOT NULL,
  callback_queue     VARCHAR(64)     NOT NULL DEFAULT '',
  callback_priority  TINYINT         NOT NULL DEFAULT 5,
  callback_timeout   INT             NOT NULL DEFAULT 300,
  callback_max_retry TINYINT         NOT NULL DEFAULT 3,
  callback_payload   JSON            NOT NULL,
  callback_id        BIGINT UNSIGNED DEFAULT NULL,
  succeeded          INT UNSIGNED    NOT NULL DEFAULT 0,
  dead               INT UNSIGNED    NOT NULL DEFAULT 0,
  cancelled          INT UNSIGNED    NOT NULL DEFAULT 0,
  created_at         DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  finished_at        DATETIME(3)     DEFAULT NULL,
  PRIMARY KEY (id),
  -- Open batches (finished_at NULL) by id; finished ones by age.
  KEY idx_batch_finished (finished_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
