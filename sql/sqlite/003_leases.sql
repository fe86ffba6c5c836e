-- Runner leases: at most one runner drives a session at a time. A lease is held
-- until expires_ms and renewed while the runner works; an expired lease may be
-- taken over by another runner (lib/lease).
CREATE TABLE leases (
  session     TEXT PRIMARY KEY,
  owner       TEXT    NOT NULL,
  expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
