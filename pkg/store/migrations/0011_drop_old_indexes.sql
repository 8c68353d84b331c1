-- contract
-- Drops the three indexes idx_lane (0010) replaces: the previous release
-- forces idx_claim and idx_inflight in its claims, stats and recovery
-- scans and reads idx_finished in its retention deletes, so this waits
-- until no node of it runs. From here a claim and a result each move one
-- index entry instead of two.
--
-- The virtual columns claim_key and inflight_at stay, though taskd no
-- longer reads them: without an index a virtual column is computed only
-- where a statement names it, so they cost a write nothing, while a query
-- someone wrote against the schema may still name them.
ALTER TABLE task_center
  DROP KEY IF EXISTS idx_claim,
  DROP KEY IF EXISTS idx_inflight,
  DROP KEY IF EXISTS idx_finished;
