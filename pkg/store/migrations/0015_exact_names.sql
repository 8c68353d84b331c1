-- Queue names, and the task codes and queues of task_route, compare
-- exactly (utf8mb4_bin), as workers, Redis keys and the daemons' maps take
-- them. Under the tables' utf8mb4_general_ci task_queue held one row for
-- HELLO and hello: after a pause of HELLO (a queue a producer's stray
-- rows made), `taskd pause hello` updated HELLO's row, said "queue hello
-- paused", and hello kept running. Two handlers whose codes differ only
-- in case shared one route the same way.
--
-- Exact comparison only tells apart what was one name, so existing rows
-- cannot collide. Both tables are small (a row per queue, a row per
-- handler's code): the change copies them in a moment, and the previous
-- release runs on them unchanged. Run again, it changes nothing.
ALTER TABLE task_queue
  MODIFY COLUMN name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE task_route
  MODIFY COLUMN task_code VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  MODIFY COLUMN queue VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
