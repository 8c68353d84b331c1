-- The task center. Column names and defaults keep the seed design's PHP
-- producers working: an INSERT of only task_code, task_type, payload,
-- cron_expr, priority, timeout, max_retry, plan_next_run_at and status runs.
CREATE TABLE IF NOT EXISTS task_center (
  id               BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
  task_code        VARCHAR(64)      NOT NULL,
  task_type        TINYINT          NOT NULL DEFAULT 0,
  payload          JSON             NOT NULL,
  cron_expr        VARCHAR(100)     DEFAULT NULL,
  priority         TINYINT          NOT NULL DEFAULT 5,
  delay            INT              NOT NULL DEFAULT 0,
  timeout          INT              NOT NULL DEFAULT 300,
  max_retry        TINYINT          NOT NULL DEFAULT 3,
  retry_count      TINYINT          NOT NULL DEFAULT 0,
  status           TINYINT          NOT NULL DEFAULT 0,
  plan_next_run_at DATETIME(3)      NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  last_run_at      DATETIME(3)      DEFAULT NULL,
  last_result      MEDIUMTEXT       DEFAULT NULL,
  created_at       DATETIME(3)      NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at       DATETIME(3)      NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  queue            VARCHAR(64)      NOT NULL DEFAULT '',
  unique_key       VARCHAR(191)     DEFAULT NULL,
  timezone         VARCHAR(64)      NOT NULL DEFAULT '',
  attempt          INT UNSIGNED     NOT NULL DEFAULT 0,
  crash_count      INT UNSIGNED     NOT NULL DEFAULT 0,
  worker_id        VARCHAR(128)     NOT NULL DEFAULT '',
  -- Random per write batch: tells which rows of a one-statement
  -- compare-and-set over many tasks won.
  claim_token      BIGINT UNSIGNED  NOT NULL DEFAULT 0,
  dispatched_at    DATETIME(3)      DEFAULT NULL,
  started_at       DATETIME(3)      DEFAULT NULL,
  finished_at      DATETIME(3)      DEFAULT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_code_unique (task_code, unique_key),
  -- Two generated columns keep the hot indexes still: an index entry is
  -- rewritten only when its value changes, and these change once or twice
  -- in a task's life instead of at every status change.
  -- claim_key: the due time while the task waits to be claimed (0, 4).
  claim_key   DATETIME(3) GENERATED ALWAYS AS (IF(status IN (0, 4), plan_next_run_at, NULL)) VIRTUAL,
  -- inflight_at: the dispatch time while the task is in flight (1, 2).
  inflight_at DATETIME(3) GENERATED ALWAYS AS (IF(status IN (1, 2), dispatched_at, NULL)) VIRTUAL,
  -- The claim and the next due time: one bounded range per priority.
  KEY idx_claim (priority, claim_key),
  -- Recovery: in-flight tasks by how long ago they were dispatched.
  KEY idx_inflight (inflight_at),
  -- Retention: finished tasks by age (written once, when a task finishes).
  KEY idx_finished (finished_at),
  CONSTRAINT ck_task_status   CHECK (status BETWEEN 0 AND 6),
  CONSTRAINT ck_task_type     CHECK (task_type BETWEEN 0 AND 2),
  CONSTRAINT ck_task_priority CHECK (priority BETWEEN 0 AND 9)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One row per attempt that ended: history, success rate, the detail view.
CREATE TABLE IF NOT EXISTS task_run (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  task_id     BIGINT UNSIGNED NOT NULL,
  attempt     INT UNSIGNED    NOT NULL,
  task_code   VARCHAR(64)     NOT NULL,
  queue       VARCHAR(64)     NOT NULL,
  worker_id   VARCHAR(128)    NOT NULL DEFAULT '',
  node        VARCHAR(128)    NOT NULL DEFAULT '',
  started_at  DATETIME(3)     DEFAULT NULL,
  finished_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  outcome     VARCHAR(16)     NOT NULL,
  result      MEDIUMTEXT      DEFAULT NULL,
  duration_ms BIGINT          NOT NULL DEFAULT 0,
  PRIMARY KEY (id),
  KEY idx_run_task (task_id, attempt),
  KEY idx_run_finished (finished_at),
  KEY idx_run_queue (queue, finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Operator actions.
CREATE TABLE IF NOT EXISTS task_audit (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  created_at DATETIME(3)     NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  actor      VARCHAR(128)    NOT NULL,
  origin     VARCHAR(128)    NOT NULL DEFAULT '',
  action     VARCHAR(32)     NOT NULL,
  target     VARCHAR(255)    NOT NULL DEFAULT '',
  affected   INT             NOT NULL DEFAULT 0,
  detail     TEXT            DEFAULT NULL,
  PRIMARY KEY (id),
  KEY idx_audit_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
