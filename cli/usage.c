/* The usage of every command of dstream (cli/dstream.c dispatches them by these
 * names): its options, a summary for dstream --help, its usage. Kept apart from
 * the dispatch so that each command can print its own usage (cli_usage) without
 * calling back into main. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "http.h"

int cli_json;
const char *cli_dbpath;

#define REMOTE " --url= --token= "
/* The rule, in the usage of each command it concerns (docs/cli.md). */
#define BOTH "  over HTTP ($DSTREAM_URL, else http://127.0.0.1:8080, with $DSTREAM_TOKEN); with\n" \
             "  --db [PATH] on the database instead (offline)\n"
#define DB_ONLY "  on the database only (--db PATH, else $DSTREAM_DB, else ./dstream.db), never over HTTP\n"
#define HTTP_ONLY "  over HTTP only ($DSTREAM_URL, else http://127.0.0.1:8080, with $DSTREAM_TOKEN)\n"
static const cli_doc docs[] = {
    {"migrate", "", "create or upgrade the database (database only)",
     "usage: dstream [--db PATH] migrate [--json]\n"
     "  create the database or apply pending schema migrations; print the schema version\n"
     DB_ONLY},
    {"append", REMOTE, "append standard input as one message to a stream",
     "usage: dstream [--db PATH] append STREAM [--json] < MESSAGE\n"
     "  append standard input as one message to STREAM (POST with the stream's content\n"
     "  type); print the offset after it\n"
     BOTH},
    {"tail", " --from= --no-follow " REMOTE, "print a stream's messages and follow it",
     "usage: dstream [--db PATH] tail [--from OFFSET] [--no-follow] [--json] STREAM\n"
     "  print the messages from OFFSET (-1: the start, the default; now: the tail), one a\n"
     "  line, then wait for more until the stream is closed or Ctrl-C; --json: one\n"
     "  {\"offset\", \"message\"} a line (a JSON stream's message as its value). Over HTTP\n"
     "  it catches up with GETs, then follows over SSE (resumed where it was when the\n"
     "  connection drops); a stream that is not JSON prints each batch the server sends\n"
     "  and a newline, and --json gives \"offset\" on the last line of a catch-up batch\n"
     BOTH},
    {"token", " --name= --scope= --expires= ", "API tokens: create, list, revoke, check (database only)",
     "usage: dstream [--db PATH] token create --name NAME --scope SCOPE [--scope SCOPE ...] [--expires DURATION]\n"
     "       dstream [--db PATH] token list [--json]\n"
     "       dstream [--db PATH] token revoke NAME|ID\n"
     "       dstream [--db PATH] token check < TOKEN_FILE\n"
     "  scopes: admin, streams:read[:PREFIX], streams:write[:PREFIX], sessions:read[:PREFIX],\n"
     "  sessions:write[:PREFIX]; DURATION: 90s, 15m, 12h, 30d. create prints the token alone\n"
     "  on its last line (shown once); check exits 0 for a valid token\n"
     DB_ONLY},
    {"free-port", "", "print a free TCP port (for scripts and tests)",
     "usage: dstream free-port [HOST] [--json]\n"
     "  print a free TCP port on HOST (127.0.0.1)\n"},
    {"backup", " --no-check ", "copy the live database to a file, consistently (database only)",
     "usage: dstream [--db PATH] backup [--no-check] [--json] FILE\n"
     "  copy the live database to FILE (which must not exist) as of one commit while the\n"
     "  servers write, then check the copy as check does (unless --no-check)\n"
     DB_ONLY},
    {"restore", "", "replace the database by a backup (database only)",
     "usage: dstream [--db PATH] restore [--json] FILE\n"
     "  check the backup FILE, then replace the contents of the database by it (stop\n"
     "  dstream-fcgi and dstream-runner first)\n"
     DB_ONLY},
    {"check", "", "integrity and invariants of the database or of a backup (database only)",
     "usage: dstream [--db PATH] check [--json] [FILE]\n"
     "  SQLite's integrity check and dstream's invariants on the database (or FILE);\n"
     "  exit 1 when a problem is found, 2 when it cannot look\n"
     DB_ONLY},
    {"copy", " --from= --to= --verify ", "copy the database to another, between engines, verified (database only)",
     "usage: dstream [--db PATH] copy [--from DB] --to DB [--verify] [--json]\n"
     "  copy every stream, message, session, definition, token, recording and\n"
     "  subscription of DB (default the database) into the empty database --to (a\n"
     "  SQLite file or a postgresql:// URI), ids and offsets as they were, then verify\n"
     "  the copy (rows per table, a SHA-256 per stream); exit 1 naming the first\n"
     "  difference. --verify: compare the two databases only\n"
     DB_ONLY},
    {"skills", "", "export the stored agents' skills as SKILL.md files (database only)",
     "usage: dstream [--db PATH] skills export DIR [AGENT...] [--json]\n"
     "  write each skill of the stored agents (or of the agents named) as DIR/<name>/SKILL.md\n"
     DB_ONLY},
    {"providers", "", "check the operator's provider file, show what it allows",
     "usage: dstream providers [FILE] [--json]\n"
     "  check the provider file (default $DSTREAM_PROVIDERS; none: the built-ins) as the\n"
     "  servers read it and show what it allows, never a key\n"},
    {"mcp", "", "check the operator's MCP servers and bindings",
     "usage: dstream mcp [FILE] [--json]\n"
     "  check the MCP configuration (default $DSTREAM_MCP_CONFIG) as the runner reads it\n"
     "  and show its servers and bindings (environment values hidden); exit 1 when the\n"
     "  runner would not start with it\n"},
    {"gc", " --dry-run --policy= ", "retention: apply the policies now, or say what would go and why the rest stays (database only)",
     "usage: dstream [--db PATH] gc [--dry-run] [--policy FILE] [--json]\n"
     "  one pass of the retention policies (FILE, default $DSTREAM_RETENTION) on the\n"
     "  database: streams and sessions older than a policy's maxAge or beyond its keep are\n"
     "  deleted, a line each with why; the rest is listed with why it stays (within_age,\n"
     "  within_count, fork_needed, waiting, waiting_timer, waiting_signal, running).\n"
     "  --dry-run deletes nothing\n"
     DB_ONLY},
    {"recordings", " --session= --older-than= --dry-run ", "recordings: export, import, prune, pin, unpin (database only)",
     "usage: dstream [--db PATH] recordings export FILE [--session ID]   (FILE -: standard output)\n"
     "       dstream [--db PATH] recordings import FILE\n"
     "       dstream [--db PATH] recordings prune --older-than AGE [--dry-run]   (AGE: 90s, 30m, 12h, 7d)\n"
     "       dstream [--db PATH] recordings pin KEY | unpin KEY\n"
     "  the recordings of provider exchanges and tool calls (docs/recording.md)\n"
     DB_ONLY},
    {"session", "", "one session on the database: status, attempts, retries, error (database only)",
     "usage: dstream [--db PATH] session ID [--json]\n"
     "  one session, read from the database: status, the request in flight, its attempts\n"
     "  and the retries spent, when the next attempt is due, and why it failed\n"
     DB_ONLY},
    {"sessions", " --status= --limit= --all --agent= --workflow= --input= --id= --at= --label= --dry-run"
                 " --created-before= --created-after= --to-agent= --to-version= " REMOTE,
     "sessions: list, show, create, delete, fork --at, state --at, signal; cancel, delete, retry by filter; compact",
     "usage: dstream sessions [list] [--status S] [--label KEY:VALUE]... [--limit N] [--all]\n"
     "       dstream sessions show ID | delete ID\n"
     "       dstream sessions cancel|delete|retry [--status S] [--agent NAME] [--workflow NAME]\n"
     "           [--label KEY:VALUE]... [--created-before TIME] [--created-after TIME]\n"
     "           [--dry-run] [--limit N] [--all]   (retry: [--to-agent NAME] [--to-version N|latest])\n"
     "       dstream sessions create (--agent NAME | --workflow NAME) [--input JSON] [--id ID]\n"
     "       dstream sessions fork ID --at OFFSET [--id NEW]\n"
     "       dstream sessions state ID [--at OFFSET]\n"
     "       dstream sessions compact ID\n"
     "       dstream sessions signal ID NAME [JSON]\n"
     "       dstream --db PATH sessions [--status S] [--label KEY:VALUE]... [--limit N]\n"
     "  over HTTP ($DSTREAM_URL, else http://127.0.0.1:8080, with $DSTREAM_TOKEN; or --url,\n"
     "  --token); with --db [PATH] list (status, attempts, error), show and state are read\n"
     "  from the database instead (offline); create, delete, fork, signal and the operations\n"
     "  by filter only over HTTP (TIME: RFC 3339 or milliseconds since the epoch; --all\n"
     "  follows the answer's next until the filter takes no more). signal sends NAME to a\n"
     "  workflow's wait step, JSON (any value) its payload\n"},
    {"chat", " --queue --background --interrupt " REMOTE, "talk to a session, print the streamed answer",
     "usage: dstream chat ID MESSAGE [--queue|--background]\n"
     "  post MESSAGE to a chat session and print the answer as it streams (not with\n"
     "  --background, which adds it to the history without a reply)\n"
     HTTP_ONLY},
    {"cancel", REMOTE, "cancel a session",
     "usage: dstream cancel ID\n"
     "  ask the runner to cancel the session\n"
     HTTP_ONLY},
    {"answer", REMOTE, "answer a human checkpoint",
     "usage: dstream answer ID INTERACTION RESPONSE\n"
     "  RESPONSE is JSON (true, false, \"text\"); anything else is sent as a string\n"
     HTTP_ONLY},
    {"events", " --follow -f --type= --last= --around= --context= " REMOTE, "a session's events; follow them",
     "usage: dstream [--db PATH] events ID [--follow] [--type T] [--last N] [--around OFFSET [--context N]]\n"
     "  the session's events, one a line (offset, time, type, payload); --type tool\n"
     "  matches every tool:* type; --around shows N [5] events each side of OFFSET;\n"
     "  --follow then waits for new ones until Ctrl-C\n"
     BOTH},
    {"convo", REMOTE, "the conversation as text",
     "usage: dstream [--db PATH] convo ID\n"
     "  the conversation as text: roles, tool calls, interrupted, background and queued\n"
     "  messages\n"
     BOTH},
    {"requests", REMOTE, "provider requests: attempts, durations, tokens, cost",
     "usage: dstream [--db PATH] requests ID\n"
     "  provider requests: attempts, outcome, duration, tokens and cost\n"
     BOTH},
    {"export", " --format= " REMOTE, "every event of a session as JSON lines or YAML",
     "usage: dstream [--db PATH] export ID [--format jsonl|yaml]\n"
     "  every event, with its offset (--json: jsonl)\n"
     BOTH},
    {"lineage", " --limit= " REMOTE, "the tree of forks a session belongs to",
     "usage: dstream [--db PATH] lineage ID [--limit N]\n"
     "  the tree of forks from its root: each session with its status, creation time and\n"
     "  the event of its parent it forked at; sessions the token may not read are\n"
     "  (hidden); at most N [200] sessions looked at\n"
     BOTH},
    {"diff", " --at= --with-at= --context= " REMOTE, "where two sessions agree and how they differ",
     "usage: dstream [--db PATH] diff A B [--at OFFSET] [--with-at OFFSET] [--context N]\n"
     "  where the events of A and B (up to OFFSET of each, else their ends) agree, their\n"
     "  first N [3] events after it, and the paths where their states differ\n"
     BOTH},
    {"otlp", REMOTE, "a session's OpenTelemetry trace, as OTLP protobuf or JSON",
     "usage: dstream [--db PATH] otlp ID [--json]\n"
     "  the spans the runner exports for the session (docs/otlp.md), rebuilt from its\n"
     "  events: an OTLP/HTTP ExportTraceServiceRequest in protobuf on stdout (refused on\n"
     "  a terminal), or with --json in OTLP JSON\n"
     BOTH},
    {"search", " --status= " REMOTE, "events of every session that contain a text",
     "usage: dstream [--db PATH] search TEXT [--status S]\n"
     "  the events of every session whose payload contains TEXT, as\n"
     "  `SESSION OFFSET TIME TYPE PAYLOAD`; exit 3 when nothing matched\n"
     BOTH},
    {"streams", " --prefix= " REMOTE, "streams: list (on the database), head, delete",
     "usage: dstream --db PATH streams [list] [--prefix P]    (on the database: the API has no listing)\n"
     "       dstream [--db PATH] streams head PATH            (next offset, type, closed)\n"
     "       dstream streams delete PATH                      (over HTTP only)\n"
     "  head over HTTP ($DSTREAM_URL, else http://127.0.0.1:8080, with $DSTREAM_TOKEN); with\n"
     "  --db [PATH] on the database instead (offline)\n"},
    {"help", "", "this list, or a command's usage",
     "usage: dstream help [COMMAND]   (or dstream COMMAND --help)\n"},
};
#define NDOCS (sizeof docs / sizeof docs[0])

const cli_doc *cli_doc_find(const char *name)
{
    for (size_t k = 0; k < NDOCS; k++)
        if (!strcmp(docs[k].name, name)) return &docs[k];
    return NULL;
}

void cli_usage_all(FILE *f)
{
    fprintf(f, "usage: dstream [--db PATH] [--url URL] [--token TOKEN] COMMAND [ARGS] [--json] [--help]\n"
               "Commands:\n");
    for (size_t k = 0; k < NDOCS; k++) fprintf(f, "  %-12s %s\n", docs[k].name, docs[k].summary);
    fprintf(f, "Every command takes --help (its usage) and --json (JSON, one document a line).\n"
               "Every command that can work over HTTP does so by default: the server $DSTREAM_URL\n"
               "(--url; else http://127.0.0.1:8080) with the bearer token $DSTREAM_TOKEN (--token).\n"
               "--db [PATH] before the command is the offline mode: the database directly (PATH, a\n"
               "file or a postgresql:// URI; without one $DSTREAM_DB, else ./dstream.db), which the\n"
               "commands marked (database only) always use; $DSTREAM_DB alone never makes a command\n"
               "offline.\n"
               "Exit codes: 0 done, 1 failed, 2 usage, 3 not found, 4 refused (401/403), 5 rejected (4xx).\n");
}

int cli_usage(const char *name)
{
    const cli_doc *c = cli_doc_find(name);
    if (c) fputs(c->usage, stderr);
    else cli_usage_all(stderr);
    return EXIT_USAGE;
}
