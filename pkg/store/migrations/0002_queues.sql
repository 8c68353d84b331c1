-- Queue state, the truth every scheduler and worker follows (they cache it
-- for about a second). A queue without a row runs unpaused with its
-- configured shards. paused: nothing of the queue is dispatched or started.
-- shards: the number of Redis lists new messages are spread over (0: as
-- configured, queues.<name>.shards). span: the number of shard lists
-- workers consume (0: as shards); it exceeds shards while lists a reshard
-- retired may still hold messages, and recovery lowers it once they are
-- empty.
CREATE TABLE IF NOT EXISTS task_queue (
  name       VARCHAR(64) NOT NULL,
  paused     TINYINT     NOT NULL DEFAULT 0,
  shards     INT         NOT NULL DEFAULT 0,
  span       INT         NOT NULL DEFAULT 0,
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (name),
  CONSTRAINT ck_queue_shards CHECK (shards BETWEEN 0 AND 256 AND span BETWEEN 0 AND 256)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Stats count dead and cancelled tasks per queue on every refresh. Like
-- claim_key and inflight_at, held_status changes only when a task enters or
-- leaves those states, so the index costs the hot path nothing, and the
-- count reads only held rows, never the millions of succeeded ones.
ALTER TABLE task_center
  ADD COLUMN IF NOT EXISTS held_status TINYINT GENERATED ALWAYS AS (IF(status IN (5, 6), status, NULL)) VIRTUAL,
  ADD KEY IF NOT EXISTS idx_held (held_status);
