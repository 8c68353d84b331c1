-- Flow control.
--
-- group_key puts a task in a group of its queue (a tenant, a customer):
-- per-group limits and serial order apply to each group separately. ''
-- is no group, so a seed-style INSERT runs as before.
--
-- released_key is the unique_key of an ended task whose key a later
-- submit with --on-conflict until-done took over: the key moves there, so
-- the new task can hold it in uk_code_unique.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS group_key VARCHAR(64) NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS released_key VARCHAR(191) DEFAULT NULL;

-- A grouped queue's claim reads groups, not the due-time index:
-- group_open is the group of a task that has not ended (its queue as
-- written, else its code, then the key), indexed with the status, so one
-- index tells a group's tasks in flight, failed and pending, oldest
-- first. Tasks without a group have NULL, for ever: the index costs them
-- nothing but its entry. A grouped task's entry changes with its status.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS group_open VARCHAR(130) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin GENERATED ALWAYS AS
    (IF(group_key <> '' AND status IN (0, 1, 2, 4), CONCAT(IF(queue = '', task_code, queue), CHAR(31), group_key), NULL)) VIRTUAL,
  ADD KEY IF NOT EXISTS idx_group (group_open, status, id);

-- A queue's limits, which every node follows like its pause and shards:
-- rate tasks per rate_period_ms (0: no rate) with burst, max_running
-- (0: no bound), per '' (the whole queue) or 'group', serial 0 off, 1
-- (a failed task blocks its group), 2 (it does not). limit_source is
-- 'config' when a node recorded its configuration (the last to start
-- wins), 'operator' after `taskd limit`, which nodes then leave alone.
ALTER TABLE task_queue
  ADD COLUMN IF NOT EXISTS rate INT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS rate_period_ms INT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS burst INT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS max_running INT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS per VARCHAR(16) NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS serial TINYINT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS limit_source VARCHAR(16) NOT NULL DEFAULT '';
