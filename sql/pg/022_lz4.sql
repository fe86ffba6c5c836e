-- Large values compressed with lz4, not pglz, where the server has it (Debian's
-- PostgreSQL 15 does). A session's snapshot (its view, a growing reply), a large
-- message and a recorded request go over the 2 KiB at which PostgreSQL compresses a
-- row's value; pglz was a fifth of the runner's backend CPU at 800 streaming sessions
-- of 750 deltas (bench/RESULTS.md, 2026-11-28). lz4 compresses several times
-- faster and decompresses faster still. Only values written from now on change; a
-- server without lz4 keeps pglz.
--
-- A row of stream_changes names the streams of one group commit: 256 of them are
-- 2 KiB of ids, compressed on insert and decompressed by every process's look at
-- the feed. Kept whole in the row up to the largest a page holds.
ALTER TABLE stream_changes SET (toast_tuple_target = 8160);
DO $$
BEGIN
  ALTER TABLE stream_changes ALTER COLUMN ids SET COMPRESSION lz4;
  ALTER TABLE snapshots ALTER COLUMN view SET COMPRESSION lz4;
  ALTER TABLE messages ALTER COLUMN data SET COMPRESSION lz4;
  ALTER TABLE recordings ALTER COLUMN request SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END $$;
