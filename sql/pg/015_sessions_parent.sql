-- A session's forks by their parent (sql/sqlite/015_sessions_parent.sql).
CREATE INDEX sessions_parent ON sessions(parent, created_ms);
