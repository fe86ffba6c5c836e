#!/usr/bin/env bats
# dstream tail: the command-line tool reads a stream from the database and follows it.

load helpers

setup_file() { ds_stack_start; }
teardown_file() { ds_stack_stop; }

setup() {
    T=$BATS_TEST_TMPDIR
    CLI=$DS_BIN/dstream
    BG_PIDS=()
}

teardown() { ds_bg_stop; }

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

@test "tail follows appends made over HTTP and ends when the stream is closed" {
    name=$(ds_name follow)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    "$CLI" --db "$DS_DB" tail --from now "$name" > "$T/out" 2> "$T/err" 3>&- &
    TAIL_PID=$!
    BG_PIDS+=("$TAIL_PID")
    sleep 0.3
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'first'
    ds_poll 5 grep -qx first "$T/out" || fail "no 'first' within 5 s: $(cat "$T/out" "$T/err")"
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'second'
    ds_poll 5 grep -qx second "$T/out" || fail "no 'second' within 5 s: $(cat "$T/out" "$T/err")"
    req POST "$s" -H 'Stream-Closed: true'
    not_running() { ! kill -0 "$TAIL_PID" 2>/dev/null; }
    ds_poll 5 not_running || fail "tail still running 5 s after the stream was closed"
    wait "$TAIL_PID" && st=0 || st=$?
    [ "$st" = 0 ] || fail "exit $st: $(cat "$T/err")"
    [ "$(cat "$T/out")" = $'first\nsecond' ] || fail "output: $(cat "$T/out")"
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
