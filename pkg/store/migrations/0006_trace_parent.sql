-- The W3C trace context (traceparent) of the span that submitted the task,
-- copied into each of its messages so that every attempt's span links to
-- it. Empty for producers that do not trace, seed-style INSERTs included.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS trace_parent VARCHAR(128) NOT NULL DEFAULT '';
