-- A session's labels (sql/sqlite/014_session_labels.sql): text holding a JSON
-- object, matched by containment through ds_jsonb (010_jsonb.sql).
ALTER TABLE sessions ADD COLUMN labels text;
