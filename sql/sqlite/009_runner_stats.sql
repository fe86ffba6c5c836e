-- What each runner is doing, for GET /metrics (lib/rstats): one row per runner id,
-- rewritten by that runner at most once a second while it runs. Counters are since
-- the runner process started; `starts` counts the processes that used this id.
CREATE TABLE runner_stats (
  owner         TEXT PRIMARY KEY,           -- DSTREAM_RUNNER_ID
  pid           INTEGER NOT NULL,
  started_ms    INTEGER NOT NULL,
  updated_ms    INTEGER NOT NULL,           -- when it last published (its loop is alive)
  starts        INTEGER NOT NULL DEFAULT 0,
  sessions      INTEGER NOT NULL DEFAULT 0, -- sessions it keeps in memory
  leased        INTEGER NOT NULL DEFAULT 0, -- of which it holds the lease
  in_flight     INTEGER NOT NULL DEFAULT 0, -- provider requests in flight now
  requests      INTEGER NOT NULL DEFAULT 0, -- provider attempts started
  retries       INTEGER NOT NULL DEFAULT 0, -- of which were retries (attempt > 1)
  failures      INTEGER NOT NULL DEFAULT 0, -- attempts that ended in an error
  loops         INTEGER NOT NULL DEFAULT 0, -- loop iterations
  loop_max_ms   INTEGER NOT NULL DEFAULT 0  -- longest gap between iterations, last period
) WITHOUT ROWID;
