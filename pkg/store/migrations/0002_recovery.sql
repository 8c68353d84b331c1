-- Recovery scans dispatched and running tasks by how long they have been
-- there: one bounded index range, whatever the size of the table.
ALTER TABLE task_center ADD INDEX IF NOT EXISTS idx_status_dispatched (status, dispatched_at);

-- Retention deletes finished tasks by age.
ALTER TABLE task_center ADD INDEX IF NOT EXISTS idx_status_finished (status, finished_at);
