-- A session's forks by their parent: the lineage of a session (GET
-- /v1/sessions/{id}/lineage) walks down the tree of forks one parent at a time.
CREATE INDEX sessions_parent ON sessions(parent, created_ms);
