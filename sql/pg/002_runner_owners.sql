-- Runner owner locks (lib/store/pg/leases.c): at most one process runs with a
-- runner id (DSTREAM_RUNNER_ID) on the database, whatever host it runs on. The
-- row names the process that holds the id (instance: a token of its own, host
-- and pid for the message that refuses another) until expires_ms (milliseconds on
-- the database's clock); its lease code renews it while it runs. SQLite keeps
-- the same lock as a flock(2) on a file beside the database instead.
CREATE TABLE runner_owners (
  owner       text   PRIMARY KEY,
  instance    text   NOT NULL,
  host        text   NOT NULL,
  pid         bigint NOT NULL,
  expires_ms  bigint NOT NULL
);
