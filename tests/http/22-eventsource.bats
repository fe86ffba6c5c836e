#!/usr/bin/env bats
# A browser's own EventSource resumes exactly on a plain Durable Stream: every SSE
# control event carries the offset after its batch as its id, and a request with
# Last-Event-ID (what EventSource sends when it reconnects to the same URL) resumes
# from it, whatever ?offset= says. The last test drives Debian's headless Chromium
# through server-ended responses (tests/browser/eventsource.mjs).

load helpers

setup_file() { ds_stack_start DSTREAM_SSE_MAX_MS=1000 DSTREAM_HEARTBEAT_MS=60000; }
teardown_file() { ds_stack_stop; }

# control_ids FILE: the id of every control event in FILE, one a line.
control_ids() { awk 'BEGIN { RS = "" } /(^|\n)event: control(\n|$)/ { if (match($0, /(^|\n)id: [^\n]*/)) { s = substr($0, RSTART, RLENGTH); sub(/^\n?id: /, "", s); print s } }' "$1"; }

@test "SSE control events carry the next offset as their id" {
    s=$(ds_stream ids)
    ds_create "$s" application/json
    ds_append "$s" application/json '{"a":1}'
    tail=$(header Stream-Next-Offset)
    curl -sS -N --max-time 5 -o "$BATS_TEST_TMPDIR/ev" "$DS_URL$s?offset=-1&live=sse" || true
    run control_ids "$BATS_TEST_TMPDIR/ev"
    [ -n "$output" ] || fail "no control event with an id: $(cat "$BATS_TEST_TMPDIR/ev")"
    assert_line --index 0 "$tail"
    grep -q "\"streamNextOffset\":\"$tail\"" "$BATS_TEST_TMPDIR/ev"
}

@test "Last-Event-ID resumes an SSE read after that offset, over ?offset=-1" {
    s=$(ds_stream resume)
    ds_create "$s" application/json
    ds_append "$s" application/json '{"n":1}'
    mid=$(header Stream-Next-Offset)
    ds_append "$s" application/json '{"n":2}'
    curl -sS -N --max-time 5 -o "$BATS_TEST_TMPDIR/ev" -H "Last-Event-ID: $mid" \
        "$DS_URL$s?offset=-1&live=sse" || true
    grep -q '"n":2' "$BATS_TEST_TMPDIR/ev" || fail "no second message: $(cat "$BATS_TEST_TMPDIR/ev")"
    ! grep -q '"n":1' "$BATS_TEST_TMPDIR/ev" || fail "the first message again: $(cat "$BATS_TEST_TMPDIR/ev")"
}

@test "a Last-Event-ID that is not an offset the server returned: 400 bad_offset" {
    s=$(ds_stream badid)
    ds_create "$s" text/plain
    req GET "$s?offset=-1&live=sse" -H "Last-Event-ID: now"
    assert_status 400
    assert_json_error bad_offset
    req GET "$s?offset=-1&live=sse" -H "Last-Event-ID: x/../y"
    assert_status 400
    assert_json_error bad_offset
}

@test "headless Chromium: EventSource receives 40 messages exactly once across server-ended responses" {
    command -v chromium >/dev/null || skip "no chromium (make deps installs it)"
    run "$DS_ROOT/tests/browser/run.sh" eventsource.mjs "$DS_URL"
    echo "# ${lines[-1]}" >&3
    assert_success
    assert_output --partial "eventsource: PASS"
}
