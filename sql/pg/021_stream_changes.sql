-- The change feed's index (lib/store/pg/pg_feed.c): a row per committed group that
-- changed streams, naming them (ids; NULL: any stream may have changed), stamped
-- with its transaction. It replaces the index on streams.xid, which made every
-- update of a stream row (an append's tail) a non-HOT update writing an entry in
-- each of the table's indexes; streams.xid stays, unindexed, each row's last
-- changer. The feed's look reads the rows here at or above its cursor and the
-- stream rows they name (a NULL row: every stream row whose xid is at or above
-- it, a scan). Writers trim it now and then (pg_engine.c): what they delete is
-- replaced by one NULL row at the newest xid deleted, so that a look whose cursor
-- is older than what is kept scans the stream rows instead of missing a change.
CREATE TABLE stream_changes (
  xid  xid8     NOT NULL DEFAULT pg_current_xact_id(),
  ids  bigint[]
);
CREATE INDEX stream_changes_xid ON stream_changes(xid);
-- Every stream row is a change here until the first trim: a look of a process
-- that started before this migration scans them once.
INSERT INTO stream_changes (ids) VALUES (NULL);
DROP INDEX streams_xid;
-- Room on each page for a row's next version (a HOT update, no index touched).
ALTER TABLE streams SET (fillfactor = 70);
