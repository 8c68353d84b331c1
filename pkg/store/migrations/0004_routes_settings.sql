-- Where each task code's consumers take it from, recorded by every node
-- that configures a handler for it (its queue, else the code). A row
-- INSERTed with no queue, as the seed's producers write them, is
-- dispatched there, whatever the dispatching node's own configuration
-- says. seen_at is the last time a node recorded it.
CREATE TABLE IF NOT EXISTS task_route (
  task_code VARCHAR(64)  NOT NULL,
  queue     VARCHAR(64)  NOT NULL,
  node      VARCHAR(128) NOT NULL DEFAULT '',
  seen_at   DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Settings every node must agree on: the default time zone of periodic
-- tasks that name none (cron_timezone), and the lifetime of each Redis
-- key prefix's data set (redis_epoch:PREFIX), which tells a Redis that
-- lost its data from one that never had any.
CREATE TABLE IF NOT EXISTS task_setting (
  name       VARCHAR(191) NOT NULL,
  value      VARCHAR(255) NOT NULL,
  updated_at DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
