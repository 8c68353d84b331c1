-- Unique keys compare exactly. In the table's utf8mb4_general_ci,
-- uk_code_unique took order-abc and order-ABC for one key, and every
-- character outside the Basic Multilingual Plane for every other (gift-🐶
-- and gift-😀, the extension-plane Chinese characters): a second submit
-- returned the first task, and the second never ran. utf8mb4_bin tells
-- them apart, and exists on MariaDB 10.6+ and MySQL 8 alike
-- (utf8mb4_nopad_bin does not exist on MySQL 8).
--
-- Exact comparison only splits what was one key, so the rows of a task
-- center cannot collide under it. released_key holds an ended task's key
-- and compares as unique_key does. Lengths and NULLs stay: 191
-- characters is 764 bytes, within the 767 of an index column of the
-- redundant row format (migration 12).
--
-- utf8mb4_bin pads with spaces, so a key and the key with trailing
-- spaces are still one: submits refuse a key that starts or ends with
-- whitespace (pkg/producer, clients/php).
--
-- MariaDB 10.6+ changes the columns in place and rebuilds uk_code_unique
-- alone, reads and writes going on (1.9 s for 200,000 rows); MySQL 8
-- copies the table, writes waiting (docs/upgrading.md). Run again, it
-- changes nothing and copies nothing.
ALTER TABLE task_center
  MODIFY COLUMN unique_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,
  MODIFY COLUMN released_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
