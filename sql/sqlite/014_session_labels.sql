-- A session's labels (POST /v1/sessions {"labels"}): a JSON object of strings,
-- compact with its keys sorted, as lib/sstore writes it; NULL for none. Lists and
-- bulk operations filter on them (lib/store/sqlite/sq_sessions.c).
ALTER TABLE sessions ADD COLUMN labels TEXT;
