-- Durable Streams subscriptions (PROTOCOL.md sections 6 and 7; lib/subscription).
--
-- A subscription is a set of stream links, each with a cursor (`acked`, the last
-- processed offset, inclusive), and one wake at a time: `generation` counts the
-- wakes, `wake_id` names the current one (NULL while idle). A webhook wake waits in
-- `deliver` = 1 until the runner has handed it to the receiver (attempts and
-- next_attempt_ms are its retry schedule, kept here so that a restarted runner
-- honours it); a pull-wake wake waits for a worker's claim (`holder`). A lease
-- (`lease_until`) bounds how long a receiver or worker may hold a wake.
CREATE TABLE subscriptions (
  id              TEXT PRIMARY KEY,
  type            TEXT    NOT NULL,          -- 'webhook' or 'pull-wake'
  pattern         TEXT,                      -- glob over stream paths, or NULL
  webhook_url     TEXT,
  wake_stream     TEXT,
  lease_ttl_ms    INTEGER NOT NULL,
  description     TEXT,
  config_hash     TEXT    NOT NULL,          -- of the normalized configuration
  created_ms      INTEGER NOT NULL,
  generation      INTEGER NOT NULL DEFAULT 0,
  wake_id         TEXT,
  snapshot        TEXT,                      -- {"path": "tail offset", ...} of the wake
  holder          TEXT,                      -- the pull-wake worker holding the lease
  lease_until     INTEGER,                   -- ms; NULL: no lease
  deliver         INTEGER NOT NULL DEFAULT 0,-- a webhook wake not yet accepted by its receiver
  attempts        INTEGER NOT NULL DEFAULT 0,-- failed deliveries of this wake
  next_attempt_ms INTEGER,
  last_error      TEXT
) WITHOUT ROWID;
CREATE INDEX subscriptions_deliver ON subscriptions(next_attempt_ms) WHERE deliver = 1;

CREATE TABLE subscription_links (
  sub       TEXT    NOT NULL,
  path      TEXT    NOT NULL,
  explicit  INTEGER NOT NULL DEFAULT 0,
  glob      INTEGER NOT NULL DEFAULT 0,
  acked     TEXT    NOT NULL,                -- offset; the stream's start when nothing is acked
  PRIMARY KEY (sub, path)
) WITHOUT ROWID;
CREATE INDEX subscription_links_path ON subscription_links(path);

-- The Ed25519 keys webhook deliveries are signed with (public in GET
-- /v1/stream/__ds/jwks.json). The newest signs; callback and claim tokens are
-- MACs under a key derived from it. The private key never leaves the database
-- and the runner.
CREATE TABLE webhook_keys (
  kid         TEXT PRIMARY KEY,
  pub         BLOB    NOT NULL,
  priv        BLOB    NOT NULL,
  created_ms  INTEGER NOT NULL
) WITHOUT ROWID;

-- Change numbers (streams.rev, lib/log) must never go back, or log_changes, which
-- the runner follows, misses a change: the next one was max(rev) + 1, which went
-- back when the stream holding the highest was deleted. The highest rev of a
-- deleted stream is kept here, and the next number is above it too.
CREATE TABLE stream_rev_floor (
  id   INTEGER PRIMARY KEY CHECK (id = 1),
  rev  INTEGER NOT NULL
);
CREATE TRIGGER streams_rev_floor AFTER DELETE ON streams
BEGIN
  INSERT INTO stream_rev_floor (id, rev) VALUES (1, OLD.rev)
    ON CONFLICT(id) DO UPDATE SET rev = max(rev, excluded.rev);
END;
