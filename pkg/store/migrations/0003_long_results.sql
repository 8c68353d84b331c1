-- Output kept per attempt can exceed TEXT's 64 KiB once the error text and
-- the truncation mark are added: a result that does not fit must never
-- block the result writer.
ALTER TABLE task_center MODIFY last_result MEDIUMTEXT DEFAULT NULL;
ALTER TABLE task_run MODIFY result MEDIUMTEXT DEFAULT NULL;
