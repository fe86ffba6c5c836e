-- Runner figures by model, MCP server and retry cause (lib/rstats.h): one JSON
-- document per runner id, the one SQLite keeps in a file beside the database
-- (DB-runner-OWNER.json). A PostgreSQL database has nothing beside it, and the pool
-- that serves /metrics may run on another host: the document is a row instead.
CREATE TABLE runner_figures (
  owner  text PRIMARY KEY,
  doc    text NOT NULL
);
