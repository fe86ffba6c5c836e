/* dstream: commands kept in files of their own (cli/NAME.c), called from main.c. */
#ifndef DSTREAM_CLI_H
#define DSTREAM_CLI_H

#include <jansson.h>
#include <signal.h>
#include <stdio.h>

#include "../lib/log.h"

/* --json was given: print JSON, one document a line (cli/dstream.c). */
extern int cli_json;
/* The database (--db TARGET, else $DSTREAM_DB, else ./dstream.db): a file or a
 * postgresql:// URI. */
extern const char *cli_dbpath;
/* A command's documentation (cli/usage.c): options (" --a --b= ", '=': takes a
 * value; --json and --help go without saying), a summary, its usage. */
typedef struct {
    const char *name;
    const char *options;
    const char *summary;
    const char *usage;
} cli_doc;
/* The documentation of command name, or NULL. */
const cli_doc *cli_doc_find(const char *name);
/* Every command with its summary, the options and the exit codes (dstream --help). */
void cli_usage_all(FILE *f);
/* The usage of command name on stderr; returns 2 (EXIT_USAGE). */
int cli_usage(const char *name);

/* dstream backup [--no-check] FILE: a consistent copy of the live database db. */
int cmd_backup(const char *db, int argc, char **argv);
/* dstream restore FILE: replace the contents of db by those of a checked backup. */
int cmd_restore(const char *db, int argc, char **argv);
/* dstream copy --from DB --to DB [--verify]: the database copied to another,
 * between engines or on one, then verified (lib/dbcopy). */
int cmd_copy(const char *db, int argc, char **argv);
/* dstream check [FILE]: integrity and the log's invariants of db (or FILE). */
int cmd_check(const char *db, int argc, char **argv);
/* cmd_check on one file: 0 if sound, else 1 (problems printed). */
int check_file(const char *path);

/* dstream skills export DIR [AGENT...]: each skill as DIR/<name>/SKILL.md. */
int cmd_skills(const char *db, int argc, char **argv);

/* dstream providers [FILE]: check the operator's provider file and show what it
 * allows (cli/cmd_providers.c). */
int cmd_providers(int argc, char **argv);
/* dstream mcp [FILE]: check the operator's MCP configuration and show its servers
 * (cli/cmd_mcp.c). */
int cmd_mcp(int argc, char **argv);

/* dstream token ...: API tokens (cli/cmd_token.c). Returns the exit status. */
int cmd_token(log_t *log, int argc, char **argv);

/* dstream sessions [--status S] [--limit N] and dstream session ID, on the database:
 * sessions with their status, attempts and last error (cli/cmd_sessions.c). */
int cmd_sessions(const char *db, int argc, char **argv);
int cmd_session(const char *db, int argc, char **argv);
/* dstream gc [--dry-run] [--policy FILE]: the retention policies applied to the
 * database, or explained (cli/cmd_gc.c). */
int cmd_gc(log_t *log, int argc, char **argv);
/* dstream recordings export|import|prune|pin|unpin (cli/cmd_recordings.c). */
int cmd_recordings(log_t *log, int argc, char **argv);

/* The debug commands over HTTP ($DSTREAM_URL, $DSTREAM_TOKEN): cli/cmd_steer.c,
 * cli/cmd_events.c, cli/cmd_streams.c (docs/cli.md). Each returns the exit status. */
int cmd_sessions_http(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_answer(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_convo(int argc, char **argv);
int cmd_requests(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_otlp(int argc, char **argv);
int cmd_search(int argc, char **argv);
/* dstream lineage ID and dstream diff A B (cli/cmd_lineage.c). */
int cmd_lineage(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_streams(const char *db, int argc, char **argv);
/* dstream tail and append over HTTP, on /v1/stream/PATH (cli/cmd_streams.c). */
int cmd_tail_http(int argc, char **argv);
int cmd_append_http(int argc, char **argv);

/* The database when --db was given (NULL: none, the commands that work both ways
 * ask the server): events (--follow too), convo, requests, export, search, sessions
 * show and state, streams head then read it (cli/offline.c). */
extern const char *cli_db;
/* Every event of session id from cli_db, with offsets (the API's form); the offset
 * after the last in next. NULL on failure with *rc the exit code. */
json_t *offline_events(const char *id, char *next, size_t ncap, int *rc);
/* Session id from cli_db as GET /v1/sessions/ID (at NULL) or GET .../state?at=AT
 * give it; NULL on failure with *rc the exit code. */
json_t *offline_session(const char *id, const char *at, int *rc);
/* The lineage of session id (at most limit sessions looked at), or the diff of a
 * and b (at, with_at: positions or NULL), from cli_db as GET .../lineage and GET
 * .../diff give them; NULL with *rc. */
json_t *offline_lineage(const char *id, int limit, int *rc);
json_t *offline_diff(const char *a, const char *b, const char *at, const char *with_at, int context, int *rc);
/* A page of sessions from cli_db as GET /v1/sessions gives it: {"sessions": [{id,
 * status, ...}], "nextCursor"}; NULL with *rc. */
json_t *offline_list(const char *status, const char *cursor, int limit, int *rc);
/* A stream's metadata from cli_db: 0, or the exit code (printed). */
int offline_head(const char *path, log_info *info);
/* Follow session id's events on cli_db from offset `from` (offline_events' next):
 * cb(ud, event) for each (nonzero stops), until Ctrl-C. Returns the exit code. */
int offline_follow(const char *id, const char *from, int (*cb)(void *ud, json_t *ev), void *ud);

/* Ctrl-C and SIGTERM set cli_stop from cli_catch_stop on (the handlers they replace
 * kept in old, for cli_restore_stop); the follows end on it. */
extern volatile sig_atomic_t cli_stop;
void cli_catch_stop(struct sigaction old[2]);
void cli_restore_stop(const struct sigaction old[2]);
/* fflush(stdout), as a wake_follow caught_up callback. */
void cli_flush_stdout(void *ud);

#endif
