-- Retention by policy (sql/sqlite/020_retention.sql).
CREATE TABLE retention_totals (
  what  text   PRIMARY KEY,
  n     bigint NOT NULL
);
CREATE INDEX streams_created ON streams(created_ms, path COLLATE "C");
