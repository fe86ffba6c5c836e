-- The OpenTelemetry export's cursors (sql/sqlite/016_otlp_cursors.sql).
CREATE TABLE otlp_cursors (
  session  text PRIMARY KEY,
  seq      bigint NOT NULL
);
