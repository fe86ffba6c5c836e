#!/usr/bin/env bats
# Durability and robustness: data survives a pool restart, parallel appends are all
# kept, the CLI and CGI mode share the database with the pool, and bad input is
# always a 4xx with a JSON error, never a 5xx.

load helpers

setup_file() { ds_stack_start; }
teardown_file() { ds_stack_stop; }

# A restart may move the stack to another free port: always use the current URL.
setup() { DS_URL=$(cat "$DS_DIR/url"); }

# cgi METHOD URI [NAME=VALUE ...] < body: run dstream-fcgi as a CGI program on the
# stack's database, with the stack's admin token; stdout goes to $BATS_TEST_TMPDIR/cgi.out.
cgi() {
    local method=$1 uri=$2
    shift 2
    env -i PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD="$method" \
        REQUEST_URI="$uri" SERVER_PROTOCOL=HTTP/1.1 DSTREAM_DB="$DS_DB" \
        HTTP_AUTHORIZATION="Bearer $(cat "$DS_DIR/admin.token")" "$@" \
        "$DS_BIN/dstream-fcgi" >"$BATS_TEST_TMPDIR/cgi.out" 2>"$BATS_TEST_TMPDIR/cgi.err"
}

# cgi_done PID: the CGI process has exited (for ds_poll).
cgi_done() { ! kill -0 "$1" 2>/dev/null; }

# cgi_split: split cgi.out at the first blank line into cgi.head (CRs removed) and
# cgi.body (byte-exact).
cgi_split() {
    local out=$BATS_TEST_TMPDIR/cgi.out
    local n
    n=$(grep -a -n -m1 -E $'^\r?$' "$out" | cut -d: -f1) || fail "no blank line after the CGI header block: $(head -c 400 "$out")"
    head -n $((n - 1)) "$out" | tr -d '\r' >"$BATS_TEST_TMPDIR/cgi.head"
    tail -n +$((n + 1)) "$out" >"$BATS_TEST_TMPDIR/cgi.body"
}

@test "data survives a restart of nginx and the pool on the same database" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'before restart'
    tail=$(header Stream-Next-Offset)
    s2=$(ds_stream)
    ds_create "$s2" application/json -H 'Stream-TTL: 3600'
    ds_append "$s2" application/json '[{"k":1},{"k":2}]'

    ds_stack_restart
    if ds_is_pg; then
        [ "$(ds_sql 'SELECT count(*) > 0 FROM streams')" = t ] || fail "the database $DS_DB holds no stream"
    else
        [ -s "$DS_DB" ] || fail "the database $DS_DB is not where the stack was told to put it"
    fi

    ds_read_all "$s"
    assert_body 'before restart'
    assert_header Stream-Next-Offset "$tail"
    req HEAD "$s2"
    assert_status 200
    assert_header Stream-TTL 3600
    ds_read_all "$s2"
    assert_body_json '. == [{"k":1},{"k":2}]'

    # and it keeps going
    ds_append "$s" text/plain ', after'
    ds_read_all "$s"
    assert_body 'before restart, after'
}

@test "20 parallel appends to one stream all return 204 and all 20 messages are kept" {
    s=$(ds_stream)
    ds_create "$s" application/json
    out=$BATS_TEST_TMPDIR/par
    mkdir -p "$out"
    # at most 10 in flight at a time
    seq 1 20 | xargs -P 10 -I{} curl -sS --max-time 20 -o /dev/null -D "$out/h.{}" \
        -w '%{http_code}\n' -X POST -H 'Content-Type: application/json' \
        --data-binary '{"n":{}}' "$DS_URL$s" >"$out/statuses"
    [ "$(wc -l <"$out/statuses")" -eq 20 ] || fail "$(wc -l <"$out/statuses") of 20 requests answered"
    bad=$(grep -v '^204$' "$out/statuses" | sort | uniq -c || true)
    [ -z "$bad" ] || fail "statuses other than 204: $bad"

    # every append got its own offset
    offs=$(cat "$out"/h.* | tr -d '\r' | grep -i '^stream-next-offset:' | sort -u | wc -l)
    [ "$offs" -eq 20 ] || fail "expected 20 distinct Stream-Next-Offset values, got $offs"

    ds_read_all "$s"
    assert_body_json '(map(.n) | sort) == [range(1;21)]'
}

@test "a writer stopped while it holds the writers' lock delays appends by the busy timeout, never for ever" {
    local s lockfd
    ds_is_pg && skip "SQLite only: the writers' file lock beside the database (DB-wlock) serialises SQLite's writers; PostgreSQL has no such file"
    s=$(ds_stream)
    ds_create "$s" text/plain
    # This test takes the writers' file lock and keeps it, as a runner SIGSTOPped in
    # the middle of a commit would (holding no SQLite lock here).
    exec {lockfd}>>"$DS_DB-wlock"
    flock -x "$lockfd"
    # The append waits out the pool's busy timeout (5 s), then commits.
    run curl -sS --max-time 30 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: text/plain' \
        --data-binary 'while the lock is held' "$DS_URL$s"
    flock -u "$lockfd"
    exec {lockfd}>&-
    [ "$output" = 204 ] || fail "append while the lock was held: $output"
    ds_append "$s" text/plain ', and after'
    ds_read_all "$s"
    assert_body 'while the lock is held, and after'
}

@test "20 parallel text appends are each stored whole (no torn writes)" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    out=$BATS_TEST_TMPDIR/par
    mkdir -p "$out"
    seq -w 1 20 | xargs -P 10 -I{} sh -c \
        'printf "<%s:%0500d>" {} 0 | curl -sS --max-time 20 -o /dev/null -w "%{http_code}\n" -X POST -H "Content-Type: text/plain" --data-binary @- "$0"' \
        "$DS_URL$s" >"$out/statuses"
    [ "$(grep -c '^204$' "$out/statuses")" -eq 20 ] || fail "statuses: $(sort "$out/statuses" | uniq -c)"
    # read all pages (the default read cap is far above 20 x 505 bytes)
    ds_read_all "$s"
    assert_header Stream-Up-To-Date true
    [ "$(stat -c %s "$DS_BODY")" -eq $((20 * 505)) ] || fail "stored $(stat -c %s "$DS_BODY") bytes"
    n=$(grep -a -o -E '<[0-9]{2}:0{500}>' "$DS_BODY" | sort -u | wc -l)
    [ "$n" -eq 20 ] || fail "$n of 20 records found whole"
}

@test "an append through the CLI is visible over HTTP" {
    name=$(ds_name cli)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'http,'
    run --separate-stderr bash -c 'printf "from the cli" | "$1" --db "$2" append "$3"' _ "$DS_BIN/dstream" "$DS_DB" "$name"
    assert_success
    off=$output
    [[ $off =~ ^[^[:space:]]+$ ]] || fail "the CLI printed '$off', not an offset"

    ds_read_all "$s"
    assert_body 'http,from the cli'
    assert_header Stream-Next-Offset "$off"
    req HEAD "$s"
    assert_header Stream-Next-Offset "$off"

    ds_append "$s" text/plain ',http again'
    ds_read_all "$s"
    assert_body 'http,from the cli,http again'
}

@test "CGI mode: a GET prints a Status: 200 OK header block and the data" {
    name=$(ds_name cgi)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'cgi data'
    tail=$(header Stream-Next-Offset)

    cgi GET "$s?offset=-1" </dev/null || fail "dstream-fcgi exited $?: $(cat "$BATS_TEST_TMPDIR/cgi.err")"
    cgi_split
    head -n1 "$BATS_TEST_TMPDIR/cgi.head" | grep -qx 'Status: 200 OK' ||
        fail "first header line: $(head -n1 "$BATS_TEST_TMPDIR/cgi.head")"
    grep -qix 'content-type: text/plain' "$BATS_TEST_TMPDIR/cgi.head" || fail "no Content-Type: text/plain"
    grep -qix "stream-next-offset: $tail" "$BATS_TEST_TMPDIR/cgi.head" || fail "no Stream-Next-Offset: $tail"
    [ "$(cat "$BATS_TEST_TMPDIR/cgi.body")" = 'cgi data' ] || fail "body: $(cat "$BATS_TEST_TMPDIR/cgi.body")"
}

@test "CGI mode: live reads answer with what is there instead of waiting (nothing can wake a CGI process)" {
    name=$(ds_name cgi)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'cgi live'
    # A long-poll at the tail: 204 at once, not after DSTREAM_LONGPOLL_MS (10 min here).
    cgi GET "$s?offset=now&live=long-poll" DSTREAM_LONGPOLL_MS=600000 </dev/null &
    local pid=$!
    ds_poll 10 cgi_done "$pid" || { kill "$pid"; fail "a CGI long-poll waited"; }
    wait "$pid" || fail "dstream-fcgi exited: $(cat "$BATS_TEST_TMPDIR/cgi.err")"
    cgi_split
    head -n1 "$BATS_TEST_TMPDIR/cgi.head" | grep -qx 'Status: 204 No Content' ||
        fail "first header line: $(head -n1 "$BATS_TEST_TMPDIR/cgi.head")"
    # SSE: the data and a control event, then the response ends.
    cgi GET "$s?offset=-1&live=sse" DSTREAM_SSE_MAX_MS=600000 </dev/null &
    pid=$!
    ds_poll 10 cgi_done "$pid" || { kill "$pid"; fail "a CGI SSE read waited"; }
    wait "$pid" || fail "dstream-fcgi exited: $(cat "$BATS_TEST_TMPDIR/cgi.err")"
    cgi_split
    grep -q '^data:cgi live$' "$BATS_TEST_TMPDIR/cgi.body" || fail "body: $(cat "$BATS_TEST_TMPDIR/cgi.body")"
    grep -q '^event: control$' "$BATS_TEST_TMPDIR/cgi.body" || fail "no control event"
}

@test "CGI mode: a POST with CONTENT_LENGTH and CONTENT_TYPE appends the body from stdin" {
    name=$(ds_name cgi)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'http+'
    printf 'via cgi' | cgi POST "$s" CONTENT_LENGTH=7 CONTENT_TYPE=text/plain ||
        fail "dstream-fcgi exited: $(cat "$BATS_TEST_TMPDIR/cgi.err")"
    cgi_split
    head -n1 "$BATS_TEST_TMPDIR/cgi.head" | grep -qx 'Status: 204 No Content' ||
        fail "first header line: $(head -n1 "$BATS_TEST_TMPDIR/cgi.head")"
    grep -qi '^stream-next-offset: ' "$BATS_TEST_TMPDIR/cgi.head" || fail "no Stream-Next-Offset"
    ds_read_all "$s"
    assert_body 'http+via cgi'
}

@test "CGI mode: bad input is a 4xx Status with a JSON error body" {
    name=$(ds_name cgi)
    s=/v1/stream/$name
    ds_create "$s" application/json
    cgi GET "$s?offset=abc" QUERY_STRING=offset=abc </dev/null || true
    cgi_split
    grep -qx 'Status: 400 .*' "$BATS_TEST_TMPDIR/cgi.head" || fail "status line: $(head -n1 "$BATS_TEST_TMPDIR/cgi.head")"
    jq -e '.error.code' "$BATS_TEST_TMPDIR/cgi.body" >/dev/null || fail "body: $(cat "$BATS_TEST_TMPDIR/cgi.body")"

    printf '{bad' | cgi POST "$s" CONTENT_LENGTH=4 CONTENT_TYPE=application/json || true
    cgi_split
    grep -qx 'Status: 400 .*' "$BATS_TEST_TMPDIR/cgi.head" || fail "status line: $(head -n1 "$BATS_TEST_TMPDIR/cgi.head")"
    ds_read_all "$s"
    assert_body_json '. == []'
}

# ---- bad input: always 4xx with a JSON error ----------------------------------------

# bad EXPECT DESCRIPTION METHOD PATH [curl args...]: send one malformed request; EXPECT
# is an exact status or 4xx. Mismatches are collected in $problems.
bad() {
    local expect=$1 what=$2 method=$3 path=$4
    shift 4
    req "$method" "$path" "$@"
    local ok=1
    case $expect in
    4xx) [[ $status_code == 4?? ]] || ok=0 ;;
    *) [ "$status_code" = "$expect" ] || ok=0 ;;
    esac
    if [ $ok = 0 ]; then
        problems+=("$what: expected $expect, got $status_code: $(head -c 200 "$DS_BODY" | tr -d '\0')")
        return
    fi
    if ! jq -e '(.error.code | type == "string" and length > 0) and (.error.message | type == "string")' \
        "$DS_BODY" >/dev/null 2>&1; then
        problems+=("$what: $status_code without a JSON error body: $(head -c 200 "$DS_BODY" | tr -d '\0')")
    fi
    checked=$((checked + 1))
}

@test "malformed requests are all 4xx with a JSON error body, never 5xx" {
    problems=()
    checked=0
    j=$(ds_stream json)
    t=$(ds_stream text)
    ds_create "$j" application/json
    ds_create "$t" text/plain
    ds_append "$t" text/plain 'x'
    long=$(head -c 5000 /dev/zero | tr '\0' 9)
    longname=$(head -c 3000 /dev/zero | tr '\0' a)
    tmp=$BATS_TEST_TMPDIR
    printf '["\xff\xfe"]' >"$tmp/bad-utf8-1"
    printf '{"a":"\xc3\x28"}' >"$tmp/bad-utf8-2"
    printf '"\xed\xa0\x80"' >"$tmp/bad-utf8-surrogate"
    printf '"\xc0\xaf"' >"$tmp/bad-utf8-overlong"
    { head -c 10000 /dev/zero | tr '\0' '['; head -c 10000 /dev/zero | tr '\0' ']'; } >"$tmp/deep-array"
    { for _ in $(seq 10000); do printf '{"a":'; done; printf 1; head -c 10000 /dev/zero | tr '\0' '}'; } >"$tmp/deep-object"
    printf '{"a":"tab\there"}' >"$tmp/raw-tab"
    ct=(-H 'Content-Type: application/json')
    pt=(-H 'Content-Type: text/plain')
    pr() { printf '%s\n' -H "Producer-Id: p" -H "Producer-Epoch: $1" -H "Producer-Seq: $2"; }

    # methods and paths
    bad 405 "PATCH" PATCH "$t" "${pt[@]}" --data-binary x
    bad 4xx "unknown method FOO" FOO "$t"
    bad 4xx "empty stream path" GET /v1/stream/
    bad 4xx "empty stream path PUT" PUT /v1/stream/ "${pt[@]}"
    bad 4xx "NUL in path" GET /v1/stream/a%00b
    bad 4xx "bad percent-encoding" GET /v1/stream/%zz%
    bad 4xx "stream path over DSTREAM_PATH_MAX" PUT "/v1/stream/$longname" "${pt[@]}"
    bad 4xx "dot-dot path" PUT /v1/stream/a/../../etc --path-as-is "${pt[@]}"
    bad 404 "unknown /v1 resource" GET /v1/nothing-here
    bad 404 "missing stream" GET "$(ds_stream missing)"
    # query strings
    bad 400 "offset with letters" GET "$t?offset=zzz"
    bad 400 "two offsets" GET "$t?offset=-1&offset=-1"
    bad 400 "long-poll without offset" GET "$t?live=long-poll"
    bad 400 "sse without offset" GET "$t?live=sse"
    bad 4xx "unknown live mode" GET "$t?offset=-1&live=bogus"
    bad 400 "huge offset" GET "$t?offset=$long"
    # headers
    bad 400 "huge Stream-TTL" PUT "$(ds_stream)" "${pt[@]}" -H "Stream-TTL: $long"
    bad 400 "Expires-At not a time" PUT "$(ds_stream)" "${pt[@]}" -H 'Stream-Expires-At: tomorrow'
    bad 400 "Expires-At month 13" PUT "$(ds_stream)" "${pt[@]}" -H 'Stream-Expires-At: 2030-13-01T00:00:00Z'
    bad 400 "Expires-At hour 25" PUT "$(ds_stream)" "${pt[@]}" -H 'Stream-Expires-At: 2030-01-01T25:00:00Z'
    bad 400 "Expires-At date only" PUT "$(ds_stream)" "${pt[@]}" -H 'Stream-Expires-At: 2030-01-01'
    bad 400 "Expires-At huge" PUT "$(ds_stream)" "${pt[@]}" -H "Stream-Expires-At: $long"
    bad 400 "Fork-Sub-Offset without Forked-From" PUT "$(ds_stream)" "${pt[@]}" -H 'Stream-Fork-Sub-Offset: 0'
    bad 404 "fork of a missing stream" PUT "$(ds_stream)" "${pt[@]}" -H "Stream-Forked-From: $(ds_stream missing)"
    mapfile -t h < <(pr -1 0)
    bad 400 "negative Producer-Epoch" POST "$t" "${pt[@]}" "${h[@]}" --data-binary x
    mapfile -t h < <(pr 0 1.5)
    bad 400 "fractional Producer-Seq" POST "$t" "${pt[@]}" "${h[@]}" --data-binary x
    mapfile -t h < <(pr 9007199254740992 0)
    bad 400 "Producer-Epoch 2^53" POST "$t" "${pt[@]}" "${h[@]}" --data-binary x
    mapfile -t h < <(pr 0 "$long")
    bad 400 "5000-digit Producer-Seq" POST "$t" "${pt[@]}" "${h[@]}" --data-binary x
    bad 400 "POST without Content-Type" POST "$t" -H 'Content-Type:' --data-binary x
    bad 400 "POST empty body" POST "$t" "${pt[@]}" --data-binary ''
    # JSON bodies
    bad 400 "JSON not UTF-8 (ff fe)" POST "$j" "${ct[@]}" --data-binary "@$tmp/bad-utf8-1"
    bad 400 "JSON not UTF-8 (c3 28)" POST "$j" "${ct[@]}" --data-binary "@$tmp/bad-utf8-2"
    bad 400 "JSON UTF-8 surrogate bytes" POST "$j" "${ct[@]}" --data-binary "@$tmp/bad-utf8-surrogate"
    bad 400 "JSON overlong UTF-8" POST "$j" "${ct[@]}" --data-binary "@$tmp/bad-utf8-overlong"
    bad 400 "JSON nested 10000 arrays" POST "$j" "${ct[@]}" --data-binary "@$tmp/deep-array"
    bad 400 "JSON nested 10000 objects" POST "$j" "${ct[@]}" --data-binary "@$tmp/deep-object"
    bad 400 "JSON raw tab in a string" POST "$j" "${ct[@]}" --data-binary "@$tmp/raw-tab"
    bad 400 "JSON single quotes" POST "$j" "${ct[@]}" --data-binary "{'a':1}"
    bad 400 "JSON NaN" POST "$j" "${ct[@]}" --data-binary '[NaN]'
    bad 400 "JSON leading zero" POST "$j" "${ct[@]}" --data-binary '[01]'
    bad 400 "JSON trailing comma" POST "$j" "${ct[@]}" --data-binary '[1,]'
    bad 400 "JSON trailing garbage" POST "$j" "${ct[@]}" --data-binary '{"a":1} x'
    bad 400 "JSON bare minus" POST "$j" "${ct[@]}" --data-binary '-'
    bad 400 "JSON whitespace only" POST "$j" "${ct[@]}" --data-binary '   '
    bad 400 "JSON bad escape" POST "$j" "${ct[@]}" --data-binary '"\x41"'
    bad 400 "JSON short unicode escape" POST "$j" "${ct[@]}" --data-binary '"\u12"'
    bad 400 "JSON invalid PUT body" PUT "$(ds_stream)" "${ct[@]}" --data-binary '{oops'

    [ ${#problems[@]} -eq 0 ] || fail "$(printf '%s\n' "${problems[@]}")"
    [ "$checked" -ge 30 ]

    # nothing above changed the streams, and the pool is still healthy
    ds_read_all "$j"
    assert_body_json '. == []'
    ds_read_all "$t"
    assert_body x
    req GET /v1/health
    assert_status 200
}
