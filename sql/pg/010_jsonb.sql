-- ds_jsonb(text): the text as jsonb, NULL when it is not JSON (SQLite's
-- json_valid() guard, which PostgreSQL 15 has no expression for). Recordings keep
-- meta as the text the recorder wrote and read its answer ordinal through this
-- (lib/store/pg/pg_recordings.c), so that a meta that is not JSON is no ordinal
-- rather than an error.
CREATE FUNCTION ds_jsonb(t text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  RETURN t::jsonb;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$$;
