-- Recordings of provider exchanges (lib/recorder, docs/recording.md). One row per
-- request a session in record or hybrid mode sent live, keyed by the hash of the
-- normalized request and its occurrence in the session; opened when the request
-- starts, its response body appended as chunks as it streams (each chunk the bytes
-- between two flushes of the runner, so that playback reproduces the deltas), and
-- marked complete when the exchange ended. A runner killed mid-stream leaves a row
-- with complete = 0, which playback never serves. Rows, chunks and the session's
-- events commit in the same transactions.
CREATE TABLE recordings (
  id          INTEGER PRIMARY KEY,
  session     TEXT    NOT NULL,           -- the session that recorded it
  kind        TEXT    NOT NULL,           -- 'provider'
  key         TEXT    NOT NULL,           -- hex SHA-256 of the normalized request
  occurrence  INTEGER NOT NULL,           -- how many times the session asked it before
  request_id  TEXT,
  provider    TEXT,
  model       TEXT,
  request     TEXT    NOT NULL,           -- the normalized request (canonical JSON; no key, no host)
  complete    INTEGER NOT NULL DEFAULT 0,
  pinned      INTEGER NOT NULL DEFAULT 0, -- kept when its session is deleted, and by prune
  status      INTEGER,                    -- HTTP status (0: no answer)
  result      INTEGER,                    -- transport result (0: none)
  meta        TEXT,                       -- retry hints, duration
  created_ms  INTEGER NOT NULL,
  ended_ms    INTEGER,
  UNIQUE (session, kind, key, occurrence)
);
CREATE INDEX recordings_key ON recordings(key, complete);
CREATE INDEX recordings_session ON recordings(session);

CREATE TABLE recording_chunks (
  recording   INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  t_ms        INTEGER NOT NULL,           -- since the request started
  data        BLOB    NOT NULL,
  PRIMARY KEY (recording, seq)
) WITHOUT ROWID;
