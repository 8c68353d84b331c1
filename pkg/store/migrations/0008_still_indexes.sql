-- Indexes that a task without a group, or its history, do not rewrite.
--
-- idx_group held every task's status beside its NULL group_open, so each
-- status change of every task (claim, result) moved its entry. The status
-- is indexed as group_status now, NULL like group_open for a task without
-- a group or ended: such a task's entry never changes.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS group_status TINYINT GENERATED ALWAYS AS
    (IF(group_key <> '' AND status IN (0, 1, 2, 4), status, NULL)) VIRTUAL,
  ADD KEY IF NOT EXISTS idx_group_status (group_open, group_status, id),
  DROP KEY IF EXISTS idx_group;

-- task_run's rows by queue and end time: no query reads them that way (the
-- throughput series reads idx_run_finished), and every run row wrote one.
ALTER TABLE task_run DROP KEY IF EXISTS idx_run_queue;
