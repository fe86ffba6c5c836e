-- Retention by policy (lib/retain): what its passes removed, in total, for
-- GET /metrics (dstream_retention_*_total). One row per kind: "streams",
-- "sessions", "snapshots", "passes"; added to in the transaction that removes.
CREATE TABLE retention_totals (
  what  TEXT PRIMARY KEY,
  n     INTEGER NOT NULL
);
-- The retention scan walks a prefix's streams newest first, page by page.
CREATE INDEX streams_created ON streams(created_ms, path);
