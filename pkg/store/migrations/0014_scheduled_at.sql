-- The time the occurrence a task's next run belongs to was planned for,
-- while a retry or a recovery has moved plan_next_run_at past it: a
-- handler reads it (TASK_SCHEDULED_AT and its kin) to know which day's
-- report a retried or late run makes, and to key its own idempotency.
-- NULL: plan_next_run_at is that time (every task before its first
-- failure or crash, and every row a producer INSERTs). A new occurrence
-- (a periodic task's next time, a replace, an enable) sets it back to
-- NULL.
--
-- A nullable column at the table's end: both servers add it without
-- copying the table or rebuilding an index.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS scheduled_at DATETIME(3) DEFAULT NULL;
