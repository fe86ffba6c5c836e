-- Streams, their messages and idempotent-producer state.
--
-- A stream's offset space is the sequence of its messages, numbered from 0. A fork
-- shares its source's numbering: it inherits messages [0, fork_seq) of its parent
-- without copying them and stores its own from fork_seq on. `pos` is the byte position
-- of a message in that space (the sum of the sizes of all messages before it).
CREATE TABLE streams (
  id            INTEGER PRIMARY KEY,
  path          TEXT    NOT NULL,
  content_type  TEXT    NOT NULL,
  json          INTEGER NOT NULL DEFAULT 0,
  created_ms    INTEGER NOT NULL,
  access_ms     INTEGER NOT NULL,          -- last read or write, for sliding TTLs
  ttl_s         INTEGER,                   -- NULL: no TTL
  expires_ms    INTEGER,                   -- NULL: no absolute expiry
  closed        INTEGER NOT NULL DEFAULT 0,
  tail_seq      INTEGER NOT NULL DEFAULT 0, -- number of messages, inherited ones included
  tail_pos      INTEGER NOT NULL DEFAULT 0, -- bytes, inherited ones included
  stream_seq    TEXT,                      -- last Stream-Seq accepted
  parent        INTEGER REFERENCES streams(id),
  fork_seq      INTEGER NOT NULL DEFAULT 0,
  fork_pos      INTEGER NOT NULL DEFAULT 0,
  fork_sub      INTEGER NOT NULL DEFAULT 0, -- Stream-Fork-Sub-Offset it was created with
  deleted       INTEGER NOT NULL DEFAULT 0, -- soft-deleted: kept while forks read it
  forks         INTEGER NOT NULL DEFAULT 0, -- live forks that inherit from this stream
  rev           INTEGER NOT NULL DEFAULT 0  -- database-wide change counter (lib/wake)
);
-- A soft-deleted stream keeps its path: re-creating it is refused until it is gone.
CREATE UNIQUE INDEX streams_path ON streams(path);
CREATE INDEX streams_rev ON streams(rev);
CREATE INDEX streams_parent ON streams(parent) WHERE parent IS NOT NULL;

CREATE TABLE messages (
  stream  INTEGER NOT NULL,
  seq     INTEGER NOT NULL,
  pos     INTEGER NOT NULL,
  rec     INTEGER NOT NULL,   -- seq of the first message of its append (one request body)
  data    BLOB    NOT NULL,
  PRIMARY KEY (stream, seq)
) WITHOUT ROWID;

CREATE TABLE producers (
  stream    INTEGER NOT NULL,
  producer  TEXT    NOT NULL,
  epoch     INTEGER NOT NULL,
  seq       INTEGER NOT NULL,
  PRIMARY KEY (stream, producer)
) WITHOUT ROWID;
