-- API tokens (lib/auth). A token is "dst_<id>_<secret>": id is public and names the
-- row, only the SHA-256 of the whole token is kept. scopes is the space-separated
-- list of scopes ("admin", "streams:read:PREFIX", ...). Revoking deletes the row.
CREATE TABLE tokens (
  id          TEXT PRIMARY KEY,
  name        TEXT    NOT NULL UNIQUE,
  hash        BLOB    NOT NULL,
  scopes      TEXT    NOT NULL,
  created_ms  INTEGER NOT NULL,
  expires_ms  INTEGER             -- NULL: never
) WITHOUT ROWID;
