-- The alerter's memory of each alert (active since, firing since, last
-- notified), kept in the task center rather than in Redis. A Redis that
-- lost its data (restarted without persistence, a failover to an empty
-- replica) took that memory with it: an alert notified as firing was
-- never notified as resolved, so a receiver kept it firing for good, and
-- one still firing was notified again inside its cooldown.
--
-- One row per alert, written by the node that holds the alerts lock each
-- evaluation; id is the SHA-256 of the alert's labels (name), which can be
-- longer than a key. A new table: the previous release runs beside it
-- unchanged (its alerter keeps its states in Redis until it is upgraded).
CREATE TABLE IF NOT EXISTS task_alert (
  id CHAR(64) CHARACTER SET ascii NOT NULL,
  name TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  state MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
