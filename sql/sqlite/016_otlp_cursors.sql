-- The OpenTelemetry export's cursors (runner/otlp.c, docs/otlp.md): per session,
-- the position in its log up to which every span that ended was accepted by the
-- operator's OTLP receiver (a 2xx). Moved only after that answer; a session's row
-- goes when the session is deleted.
CREATE TABLE otlp_cursors (
  session  TEXT PRIMARY KEY,
  seq      INTEGER NOT NULL
) WITHOUT ROWID;
