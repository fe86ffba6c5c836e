-- Agents, workflows and sessions (DESIGN.md 4.2).
--
-- Definitions are JSON documents validated by lib/agent and lib/workflow before
-- they are stored. Workflows are versioned: every PUT of a name adds a version and
-- a session keeps the version it started with. A session's history is a JSON-mode
-- stream ("sessions/{id}"); the row here is an index for listing and lookup, and
-- snapshots cache the reduced state at a position (lib/session).
CREATE TABLE agents (
  name        TEXT PRIMARY KEY,
  doc         TEXT    NOT NULL,
  created_ms  INTEGER NOT NULL,
  updated_ms  INTEGER NOT NULL
);

CREATE TABLE workflows (
  name        TEXT    NOT NULL,
  version     INTEGER NOT NULL,
  doc         TEXT    NOT NULL,
  created_ms  INTEGER NOT NULL,
  PRIMARY KEY (name, version)
) WITHOUT ROWID;

CREATE TABLE sessions (
  id          TEXT PRIMARY KEY,
  stream      TEXT    NOT NULL,           -- path of its event stream
  agent       TEXT,
  workflow    TEXT,
  wf_version  INTEGER,
  parent      TEXT,                       -- forked from
  fork_offset TEXT,
  status      TEXT    NOT NULL,           -- as last derived (for listing)
  created_ms  INTEGER NOT NULL,
  updated_ms  INTEGER NOT NULL,
  deleted     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_status ON sessions(status, created_ms);
CREATE INDEX sessions_created ON sessions(created_ms);

CREATE TABLE snapshots (
  session     TEXT    NOT NULL,
  seq         INTEGER NOT NULL,           -- messages reduced into it
  pos         INTEGER NOT NULL,
  view        TEXT    NOT NULL,           -- session_view as JSON
  PRIMARY KEY (session, seq)
) WITHOUT ROWID;
