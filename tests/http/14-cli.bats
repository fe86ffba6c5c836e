#!/usr/bin/env bats
# dstream tail and append: on the database (--db) and over HTTP (the default), following.

load helpers

# SSE responses end after 500 ms: tail over HTTP must resume (Last-Event-ID) across them.
setup_file() { ds_stack_start DSTREAM_SSE_MAX_MS=500; }
teardown_file() { ds_stack_stop; }

setup() {
    T=$BATS_TEST_TMPDIR
    CLI=$DS_BIN/dstream
    BG_PIDS=()
}

teardown() { ds_bg_stop; }

# follow_check S FIRST TAIL_COMMAND...: TAIL_COMMAND (a following tail of S's stream
# from an offset before anything below) runs in the background; the command FIRST
# appends 'first', then 'second' is POSTed and the stream closed: the tail printed
# both, one a line, and ended by itself with status 0.
follow_check() {
    local s=$1 first=$2 st
    shift 2
    "$@" >"$T/out" 2>"$T/err" 3>&- &
    TAIL_PID=$!
    BG_PIDS+=("$TAIL_PID")
    "$first"
    ds_poll 5 grep -qx first "$T/out" || fail "no 'first' within 5 s: $(cat "$T/out" "$T/err")"
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'second'
    ds_poll 5 grep -qx second "$T/out" || fail "no 'second' within 5 s: $(cat "$T/out" "$T/err")"
    req POST "$s" -H 'Stream-Closed: true'
    ds_poll 5 eval '! kill -0 "$TAIL_PID" 2>/dev/null' || fail "tail still running 5 s after the stream was closed"
    wait "$TAIL_PID" && st=0 || st=$?
    [ "$st" = 0 ] || fail "exit $st: $(cat "$T/err")"
    [ "$(cat "$T/out")" = $'first\nsecond' ] || fail "output: $(cat "$T/out")"
}

@test "tail --no-follow prints every message of a JSON stream, one value a line" {
    name=$(ds_name tail)
    s=/v1/stream/$name
    ds_create "$s" application/json
    req POST "$s" -H 'Content-Type: application/json' --data-binary '{"n":1}'
    req POST "$s" -H 'Content-Type: application/json' --data-binary '[{"n":2},{"n":3}]'
    run "$CLI" --db "$DS_DB" tail --no-follow "$name"
    assert_success
    [ "$output" = $'{"n":1}\n{"n":2}\n{"n":3}' ] || fail "output: $output"
    # From an offset the server returned: only what comes after it.
    req POST "$s" -H 'Content-Type: application/json' --data-binary '{"n":4}'
    off=$(header Stream-Next-Offset)
    req POST "$s" -H 'Content-Type: application/json' --data-binary '{"n":5}'
    run "$CLI" --db "$DS_DB" tail --no-follow --from "$off" "$name"
    assert_success
    [ "$output" = '{"n":5}' ] || fail "output from $off: $output"
}

@test "tail follows appends made over HTTP and ends when the stream is closed; --from now" {
    name=$(ds_name follow)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'before'
    off=$(header Stream-Next-Offset)
    # --from now: nothing of what is there; the follow starts from the offset that
    # was now (a follow --from now would miss what is appended before it has looked).
    run "$CLI" --db "$DS_DB" tail --no-follow --from now "$name"
    assert_success
    [ -z "$output" ] || fail "--from now: $output"
    _first() { req POST "$s" -H 'Content-Type: text/plain' --data-binary 'first'; }
    follow_check "$s" _first "$CLI" --db "$DS_DB" tail --from "$off" "$name"
}

@test "tail: an unknown stream is exit 1, a bad offset or a missing stream name exit 2" {
    run "$CLI" --db "$DS_DB" tail --no-follow "no-such-$RANDOM"
    [ "$status" -eq 1 ] || fail "unknown stream: exit $status: $output"
    [[ $output == *"stream not found"* ]] || fail "message: $output"
    run "$CLI" --db "$DS_DB" tail --from bogus x
    [ "$status" -eq 2 ] || fail "bad offset: exit $status"
    run "$CLI" --db "$DS_DB" tail
    [ "$status" -eq 2 ] || fail "no stream: exit $status"
}

# ---- over HTTP by default, --db the offline mode (docs/cli.md) ---------------------------

# The server itself (auth on) with the admin token, and a $DSTREAM_DB that is not
# there: without --db nothing may read it.
http_env() {
    export DSTREAM_URL DSTREAM_TOKEN DSTREAM_DB=$T/not-there.db
    DSTREAM_URL=$(cat "$DS_DIR/url-direct")
    DSTREAM_TOKEN=$(cat "$DS_DIR/admin.token")
}

@test "over HTTP by default: append and tail reach the server with DSTREAM_TOKEN; --db reads the database instead" {
    http_env
    name=$(ds_name httptail)
    ds_create "/v1/stream/$name" application/json
    run "$CLI" append "$name" <<<'{"n":1}'
    assert_success
    first=$output
    run "$CLI" append "$name" --json <<<'{"n":2}'
    assert_success
    jq -e '.offset | test("^[0-9]+_[0-9]+$")' <<<"$output"
    echo '{"n":3}' | "$CLI" append "$name" >/dev/null
    [ ! -e "$DSTREAM_DB" ] || fail "a database was made"
    run --separate-stderr "$CLI" tail --no-follow "$name"
    assert_success
    [ "$output" = $'{"n":1}\n{"n":2}\n{"n":3}' ] || fail "over HTTP: $output $stderr"
    # The same on the database (--db TARGET), and --db alone is $DSTREAM_DB.
    run "$CLI" --db "$DS_DB" tail --no-follow "$name"
    [ "$output" = $'{"n":1}\n{"n":2}\n{"n":3}' ] || fail "on the database: $output"
    DSTREAM_DB=$DS_DB run "$CLI" --db tail --no-follow "$name"
    [ "$output" = $'{"n":1}\n{"n":2}\n{"n":3}' ] || fail "--db alone: $output"
    # From an offset append printed; --json: the offset to resume from on the batch's last line.
    run "$CLI" tail --no-follow --from "$first" "$name"
    [ "$output" = $'{"n":2}\n{"n":3}' ] || fail "from $first: $output"
    run "$CLI" tail --no-follow --json "$name"
    [ "$(jq -c .message <<<"$output" | tr '\n' ' ')" = '{"n":1} {"n":2} {"n":3} ' ] || fail "--json: $output"
    last=$(tail -n 1 <<<"$output" | jq -r .offset)
    run "$CLI" tail --no-follow --from "$last" "$name"
    assert_success
    [ -z "$output" ] || fail "after the last offset: $output"
    # The server's answers: an unknown stream 3, a token that may not 4.
    run "$CLI" tail --no-follow "no-such-$RANDOM"
    assert_failure 3
    run "$CLI" append "no-such-$RANDOM" <<<'x'
    assert_failure 3
    DSTREAM_TOKEN=wrong run "$CLI" tail --no-follow "$name"
    assert_failure 4
}

@test "tail over HTTP follows over SSE and ends when the stream is closed; --from now; a text stream" {
    http_env
    name=$(ds_name httpfollow)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'before'
    off=$(header Stream-Next-Offset)
    run "$CLI" tail --no-follow --from now "$name"
    assert_success
    [ -z "$output" ] || fail "--from now: $output"
    _first() { echo -n first | "$CLI" append "$name" >/dev/null; }
    follow_check "$s" _first "$CLI" tail --from "$off" "$name"
}

@test "tail over HTTP resumes where it was when the server ends its SSE response: every message once, in order" {
    http_env
    name=$(ds_name resume)
    ds_create "/v1/stream/$name" application/json
    "$CLI" tail "$name" >"$T/out" 2>"$T/err" 3>&- &
    TAIL_PID=$!
    BG_PIDS+=("$TAIL_PID")
    # Appends, each waited for, for at least 2 s (4 responses of 500 ms), at most 200.
    end=$(($(date +%s%N) + 2000000000))
    n=0
    while [ "$(date +%s%N)" -lt "$end" ] && [ "$n" -lt 200 ]; do
        n=$((n + 1))
        echo "{\"n\":$n}" | "$CLI" append "$name" >/dev/null
        ds_poll 5 grep -qx "{\"n\":$n}" "$T/out" || fail "no message $n within 5 s: $(cat "$T/out" "$T/err")"
    done
    kill -0 "$TAIL_PID" || fail "tail ended: $(cat "$T/err")"
    [ "$(cat "$T/out")" = "$(seq -f '{"n":%g}' 1 "$n")" ] || fail "not every message once in order: $(cat "$T/out")"
    [ ! -s "$T/err" ] || fail "stderr: $(cat "$T/err")"
}

@test "a server that cannot be reached is said plainly: its URL and --db, never dstream migrate" {
    http_env
    port=$("$CLI" free-port)
    export DSTREAM_URL=http://127.0.0.1:$port
    for args in "tail x" "tail --no-follow x" "append x" "sessions" "sessions list" "sessions show x" "streams head x" \
        "events x" "convo x" "requests x" "export x" "search x" "chat x hello" "cancel x"; do
        # shellcheck disable=SC2086 # args is words
        run --separate-stderr "$CLI" $args </dev/null
        [ "$status" = 1 ] || fail "$args: exit $status: $stderr"
        [[ $stderr == *"cannot reach the server at http://127.0.0.1:$port"* ]] || fail "$args: $stderr"
        [[ $stderr == *"--db"* ]] || fail "$args: no word of --db: $stderr"
        [[ $stderr != *migrate* ]] || fail "$args: $stderr"
    done
    [ ! -e "$DSTREAM_DB" ] || fail "a database was made"
    # Without DSTREAM_URL: http://127.0.0.1:8080, said as such (when nothing listens there).
    if ! (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
        run --separate-stderr env -u DSTREAM_URL "$CLI" sessions list
        assert_failure 1
        [[ $stderr == *"cannot reach the server at http://127.0.0.1:8080"* ]] || fail "$stderr"
    fi
}
