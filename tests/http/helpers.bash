# Shared helpers for the HTTP suites: start the real stack (nginx + dstream-fcgi pool)
# once per file in a private temp directory, and talk to it with curl.
#
# In a .bats file:
#
#     load helpers
#     setup_file()    { ds_stack_start DSTREAM_READ_MAX=1000; }
#     teardown_file() { ds_stack_stop; }
#
#     @test "..." {
#         s=$(ds_stream)                       # /v1/stream/<unique name>
#         req PUT "$s" -H 'Content-Type: text/plain'
#         assert_status 201
#         assert_header Stream-Next-Offset      # present
#         assert_header Content-Type text/plain # exact value
#     }
#
# req stores the status in $status_code, the headers of the final response in
# $DS_HDRS (a file), the body in $DS_BODY (a file, byte-exact) and in $body (a shell
# string: NUL bytes and trailing newlines do not survive, compare files for binary).
# Header lookups are case-insensitive. Nothing here sleeps as a wait: ds_poll retries
# a command until it succeeds or a deadline passes.

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
bats_require_minimum_version 1.5.0  # run --separate-stderr

DS_ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
DS_B=${B:-build}
# What a test that runs make passes with B=$DS_B: under a sanitizer (B=build-address,
# ...) make must build with it too, or it would rebuild that directory without it,
# and every later file would run unsanitized binaries (or none).
case $DS_B in
build-address | build-undefined | build-thread) DS_MAKE_SAN="SANITIZER=${DS_B#build-}" ;;
*) DS_MAKE_SAN="" ;;
esac
DS_BIN=$DS_ROOT/$DS_B
DS_STACK=$DS_ROOT/deploy/dstream-stack

# ---- the stack ----------------------------------------------------------------------

# The engine: DSTREAM_TEST_ENGINE=sqlite (the default) or pg. With pg, DS_PG_DIR is a
# running throwaway cluster (tests/pg.sh start DIR; tests/run-http.sh starts one) and
# each stack gets a database of its own on it, made by ds_stack_start and dropped by
# ds_stack_stop; DS_DB is then its postgresql:// URI instead of a file's path.
DS_ENGINE=${DSTREAM_TEST_ENGINE:-sqlite}

# ds_stack_start [NAME=VALUE ...]: make a temp dir, start nginx + pool in it with the
# given settings (plus DSTREAM_DB=$DS_DIR/dstream.db, or a fresh database's URI on
# PostgreSQL), export DS_DIR, DS_DB, DS_URL and DS_SETTINGS (the settings, for
# ds_stack_restart).
ds_stack_start() {
    [ -x "$DS_BIN/dstream-fcgi" ] || { echo "build first: make (B=$DS_B)" >&2; return 1; }
    DS_DIR=$(mktemp -d -t dstream-http.XXXXXX)
    DS_DB=$DS_DIR/dstream.db
    DS_SETTINGS="$*"
    if [ "$DS_ENGINE" = pg ]; then
        DS_PG_NAME=$(ds_pg_name "$DS_DIR")
        DS_DB=$(_ds_pg_newdb "$DS_PG_NAME") || return 1
        export DS_PG_NAME
    fi
    export DS_DIR DS_DB DS_SETTINGS
    _ds_stack_up
}

# ds_pg_name DIR: the name of the database of the stack in DIR (a-z, 0-9 and _).
ds_pg_name() {
    local b=${1##*/}
    b=${b,,}
    printf 'ds_%s\n' "${b//[^a-z0-9]/_}"
}

# _ds_pg_newdb NAME: a fresh database NAME on DS_PG_DIR's cluster; prints its URI.
_ds_pg_newdb() {
    [ -n "${DS_PG_DIR:-}" ] && [ -S "$DS_PG_DIR/.s.PGSQL.5432" ] || {
        echo "DSTREAM_TEST_ENGINE=pg needs a running cluster in DS_PG_DIR (tests/pg.sh start DIR)" >&2
        return 1
    }
    "$DS_ROOT/tests/pg.sh" db "$DS_PG_DIR" "$1"
}

# _ds_pg_dropdb NAME: drop the database NAME (its connections ended first).
_ds_pg_dropdb() {
    PGOPTIONS='-c client_min_messages=warning' psql -h "$DS_PG_DIR" -U postgres -d postgres -Atqc \
        "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null
}

# ds_sql QUERY: run QUERY on the stack's database (sqlite3 or psql by engine) and print
# the result, one row a line, columns separated by |. QUERY must be valid on the
# engine at hand (json_extract on SQLite, ->> on PostgreSQL: see ds_is_pg).
ds_sql() {
    if [ "$DS_ENGINE" = pg ]; then
        PGOPTIONS='-c client_min_messages=warning' psql "$DS_DB" -Atq -v ON_ERROR_STOP=1 -c "$1"
    else
        sqlite3 -cmd '.timeout 5000' "$DS_DB" "$1"
    fi
}

# ds_is_pg: the stack's database is on PostgreSQL.
ds_is_pg() { [ "$DS_ENGINE" = pg ]; }

# ds_sql_json COLUMN KEY[.KEY...]: SQL for the text of a JSON column's member (as
# SQLite's json_extract(COLUMN, '$.KEY') gives it), for the engine at hand.
ds_sql_json() {
    if ds_is_pg; then
        printf "(%s::jsonb #>> '{%s}')" "$1" "${2//./,}"
    else
        printf "json_extract(%s, '\$.%s')" "$1" "$2"
    fi
}

# ds_sql_agg EXPR SEP [ORDER]: SQL joining EXPR's values with SEP (SQLite's
# group_concat), in ORDER on PostgreSQL (SQLite's order is the rows').
ds_sql_agg() {
    if ds_is_pg; then
        printf "string_agg(CAST(%s AS text), '%s'%s)" "$1" "$2" "${3:+ ORDER BY $3}"
    else
        printf "group_concat(%s, '%s')" "$1" "$2"
    fi
}

# ds_db_files: the files holding everything the database stores, for a grep of its
# bytes: the SQLite file and its -wal and -shm, or on PostgreSQL a plain pg_dump of
# the database (written to $BATS_TEST_TMPDIR/db.dump).
ds_db_files() {
    if ds_is_pg; then
        pg_dump -d "$DS_DB" -f "$BATS_TEST_TMPDIR/db.dump" || return 1
        echo "$BATS_TEST_TMPDIR/db.dump"
    else
        ls -d "$DS_DB"*
    fi
}

_ds_stack_up() {
    # shellcheck disable=SC2086 # DS_SETTINGS is a list of NAME=VALUE words
    if ! env $DS_SETTINGS DSTREAM_DB="$DS_DB" B="$DS_B" "$DS_STACK" start "$DS_DIR" \
        >"$DS_DIR/start.out" 2>&1; then
        echo "dstream-stack start failed:" >&2
        cat "$DS_DIR/start.out" >&2
        return 1
    fi
    DS_URL=$(cat "$DS_DIR/url")
    export DS_URL
}

# ds_direct: talk to the server itself instead of through the stack's token-adding
# proxy (for tests of what sits between nginx and the pool: buffering, connection
# counts): DS_URL becomes DIR/url-direct and every curl of the test sends the admin
# token (a .curlrc in CURL_HOME).
ds_direct() {
    DS_URL=$(cat "$DS_DIR/url-direct")
    printf 'header = "Authorization: Bearer %s"\n' "$(cat "$DS_DIR/admin.token")" >"$DS_DIR/.curlrc"
    CURL_HOME=$DS_DIR
    export DS_URL CURL_HOME
}

# ds_stack_stop: stop what ds_stack_start started and remove its directory.
ds_stack_stop() {
    [ -n "${DS_DIR:-}" ] && [ -d "$DS_DIR" ] || return 0
    # dstream-stack stop fails (and says what) when a sanitizer build reported into
    # the logs: that fails the test or file that stops the stack.
    local rc=0
    "$DS_STACK" stop "$DS_DIR" >/dev/null 2>"$DS_DIR.stop.err" || rc=$?
    [ "$rc" = 0 ] || cat "$DS_DIR.stop.err" >&2
    rm -rf "$DS_DIR" "$DS_DIR.stop.err"
    if [ "$DS_ENGINE" = pg ] && [ -n "${DS_PG_NAME:-}" ]; then
        _ds_pg_dropdb "$DS_PG_NAME" || rc=1
    fi
    return "$rc"
}

# ds_stack_restart: stop nginx and the pool, start them again on the same directory
# and database with the same settings. DS_URL may change (a new free port).
ds_stack_restart() {
    "$DS_STACK" stop "$DS_DIR" >/dev/null 2>&1
    _ds_stack_up
}

# ---- names --------------------------------------------------------------------------

# ds_name [PREFIX]: a stream name no other test (or earlier run) uses.
ds_name() {
    printf '%s-%s-%s-%s%s\n' "${1:-s}" "${BATS_TEST_NUMBER:-0}" "$$" "$RANDOM" "$RANDOM"
}

# ds_stream [PREFIX]: the request path of a fresh stream, /v1/stream/<unique name>.
ds_stream() { printf '/v1/stream/%s\n' "$(ds_name "$@")"; }

# ---- requests -----------------------------------------------------------------------

# req METHOD PATH [curl args...]: PATH is relative to $DS_URL (or a full URL).
req() {
    local method=$1 path=$2 url
    shift 2
    case $path in
    http://* | https://*) url=$path ;;
    *) url=$DS_URL$path ;;
    esac
    DS_HDRS=$BATS_TEST_TMPDIR/resp.headers
    DS_BODY=$BATS_TEST_TMPDIR/resp.body
    : >"$DS_HDRS"
    : >"$DS_BODY"
    local args=(-sS --max-time "${DS_CURL_MAX_TIME:-10}" -D "$DS_HDRS" -w '%{http_code}')
    # curl -I writes the headers where the body would go, and a HEAD response has no
    # body curl could read anyway: $DS_BODY stays empty for HEAD.
    if [ "$method" = HEAD ]; then args+=(-I -o /dev/null); else args+=(-X "$method" -o "$DS_BODY"); fi
    status_code=$(curl "${args[@]}" "$@" "$url" 2>"$BATS_TEST_TMPDIR/curl.err") || true
    [ -n "$status_code" ] || status_code=000
    body=$(tr -d '\0' <"$DS_BODY")
    export status_code body DS_HDRS DS_BODY
}

# header NAME: the value of NAME in the last response (the final response block when
# curl saw a 100 Continue first), without the trailing CR; status 1 when absent.
header() {
    awk -v name="$1" '
        BEGIN { want = tolower(name) }
        /^HTTP\// { found = 0; val = "" }
        {
            sub(/\r$/, "")
            i = index($0, ":")
            if (i > 0 && tolower(substr($0, 1, i - 1)) == want) {
                v = substr($0, i + 1); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
                val = v; found = 1
            }
        }
        END { if (found) print val; exit !found }' "$DS_HDRS"
}

# ---- assertions ---------------------------------------------------------------------

# assert_status CODE: the last response had status CODE.
assert_status() {
    [ "$status_code" = "$1" ] && return 0
    batslib_print_kv_single_or_multi 8 expected "$1" actual "$status_code" headers "$(cat "$DS_HDRS")" \
        body "$(head -c 600 "$DS_BODY" | tr -d '\0')" |
        batslib_decorate "unexpected HTTP status" | fail
}

# assert_status_4xx: the last response was a client error (never 5xx, never 2xx).
assert_status_4xx() {
    case $status_code in 4??) return 0 ;; esac
    batslib_print_kv_single_or_multi 8 expected 4xx actual "$status_code" \
        body "$(head -c 600 "$DS_BODY" | tr -d '\0')" |
        batslib_decorate "expected a 4xx status" | fail
}

# assert_header NAME [VALUE]: NAME is present (and equals VALUE exactly).
assert_header() {
    local v
    if ! v=$(header "$1"); then
        batslib_print_kv_single_or_multi 8 header "$1" headers "$(cat "$DS_HDRS")" |
            batslib_decorate "header missing" | fail
        return
    fi
    [ $# -lt 2 ] || [ "$v" = "$2" ] && return 0
    batslib_print_kv_single_or_multi 8 header "$1" expected "$2" actual "$v" |
        batslib_decorate "header has the wrong value" | fail
}

# assert_header_ci NAME VALUE: NAME equals VALUE, compared case-insensitively.
assert_header_ci() {
    local v
    v=$(header "$1") || { assert_header "$1"; return; }
    [ "${v,,}" = "${2,,}" ] && return 0
    batslib_print_kv_single_or_multi 8 header "$1" expected "$2" actual "$v" |
        batslib_decorate "header has the wrong value" | fail
}

# assert_header_matches NAME REGEX: NAME is present and matches the ERE.
assert_header_matches() {
    local v
    v=$(header "$1") || { assert_header "$1"; return; }
    [[ $v =~ $2 ]] && return 0
    batslib_print_kv_single_or_multi 8 header "$1" regex "$2" actual "$v" |
        batslib_decorate "header does not match" | fail
}

# refute_header NAME: NAME is absent from the last response.
refute_header() {
    local v
    v=$(header "$1") || return 0
    batslib_print_kv_single_or_multi 8 header "$1" value "$v" |
        batslib_decorate "header should be absent" | fail
}

# assert_body TEXT: the body (as a string) is exactly TEXT.
assert_body() {
    [ "$body" = "$1" ] && return 0
    batslib_print_kv_single_or_multi 8 expected "$1" actual "$body" |
        batslib_decorate "unexpected body" | fail
}

# assert_body_file FILE: the body is byte-for-byte FILE.
assert_body_file() {
    cmp -s "$1" "$DS_BODY" && return 0
    batslib_print_kv_single_or_multi 8 expected "$(od -c "$1" | head -5)" actual "$(od -c "$DS_BODY" | head -5)" |
        batslib_decorate "body differs from $1" | fail
}

# assert_body_json JQ_FILTER: the body is JSON and the jq filter (with -e) holds.
assert_body_json() {
    jq -e "$1" "$DS_BODY" >/dev/null 2>&1 && return 0
    batslib_print_kv_single_or_multi 8 filter "$1" body "$(head -c 600 "$DS_BODY" | tr -d '\0')" |
        batslib_decorate "body is not JSON satisfying the filter" | fail
}

# assert_json_error [CODE]: the body is {"error":{"code":"...","message":"..."}}
# (with that code when given).
assert_json_error() {
    assert_body_json '(.error.code | type == "string" and length > 0) and (.error.message | type == "string")' || return
    [ $# -eq 0 ] || assert_body_json ".error.code == \"$1\""
}

# ---- waiting ------------------------------------------------------------------------

# ds_poll SECONDS COMMAND...: run COMMAND every 50 ms until it succeeds (0) or SECONDS
# have passed (1). This is a poll with a deadline, not a sleep used as a wait.
ds_poll() {
    local secs=$1 deadline
    shift
    deadline=$(($(date +%s%N) + secs * 1000000000))
    while :; do
        "$@" && return 0
        [ "$(date +%s%N)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# ds_head_is PATH STATUS: HEAD PATH answers STATUS (for ds_poll).
ds_head_is() {
    req HEAD "$1"
    [ "$status_code" = "$2" ]
}

# ---- small conveniences -------------------------------------------------------------

# ds_create PATH [CONTENT_TYPE] [curl args...]: PUT PATH and require 201.
ds_create() {
    local path=$1 ct=${2:-text/plain}
    shift 2 || shift $#
    req PUT "$path" -H "Content-Type: $ct" "$@"
    assert_status 201
}

# ds_append PATH CONTENT_TYPE DATA [curl args...]: POST DATA and require 204.
ds_append() {
    local path=$1 ct=$2 data=$3
    shift 3
    req POST "$path" -H "Content-Type: $ct" --data-binary "$data" "$@"
    assert_status 204
}

# ds_append_texts PATH PREFIX FROM TO: append "PREFIX<i>;" (text/plain) to PATH (of
# DS_URL, or a full URL) for each i from FROM to TO, each acknowledged; DS_TEXTS: the
# texts appended, end to end.
ds_append_texts() {
    local path=$1 prefix=$2 i
    DS_TEXTS=""
    for i in $(seq "$3" "$4"); do
        ds_append "$path" text/plain "$prefix$i;"
        DS_TEXTS+="$prefix$i;"
    done
}

# ds_reads_are URL N WANT WHAT: N reads of URL, each 200 with WANT as its body (WHAT
# names them in a failure).
ds_reads_are() {
    local k
    for k in $(seq "$2"); do
        req GET "$1"
        assert_status 200
        [ "$body" = "$3" ] || fail "$4, read $k: $(head -c 200 <<<"$body")"
    done
}

# ds_metric NAME [BASE]: the value of NAME in BASE's /metrics (BASE: DS_URL).
ds_metric() {
    req GET "${2:-$DS_URL}/metrics"
    awk -v n="$1" '$1 == n { print $2 }' "$DS_BODY"
}

# ds_read_all PATH: GET ?offset=-1 and require 200 (body in $body / $DS_BODY).
ds_read_all() {
    req GET "$1?offset=-1" "${@:2}"
    assert_status 200
}

# ---- background clients ---------------------------------------------------------------
# A test that starts clients in the background records their PIDs in BG_PIDS (spawn
# does it); ds_bg_stop, from teardown, ends them by PID.

# spawn OUT COMMAND...: run COMMAND in the background with stdout and stderr to OUT
# (fd 3 closed, or bats would wait for it); its PID is in $LAST_PID.
spawn() {
    local out=$1
    shift
    "$@" >"$out" 2>&1 3>&- &
    LAST_PID=$!
    BG_PIDS+=("$LAST_PID")
}

ds_bg_stop() {
    local pid
    for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${BG_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    BG_PIDS=()
}
