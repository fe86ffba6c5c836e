#!/usr/bin/env bats
# DSTREAM_LOG_FORMAT=json: every line the pool and the runner write on standard error
# is one JSON object (time, program, level, message); an unknown format is refused.

load helpers

setup_file() { ds_stack_start DSTREAM_LOG_FORMAT=json; }
teardown_file() { ds_stack_stop; }

# json_lines FILE PROGRAM: FILE has lines, and each is an object from PROGRAM.
json_lines() {
    [ -s "$1" ] || return 1
    jq -e -s --arg p "$2" 'length > 0 and all(.[]; type == "object" and .program == $p and
        (.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T")) and (.level | type == "string") and
        (.message | type == "string"))' "$1" >/dev/null
}

@test "DSTREAM_LOG_FORMAT=json: the pool's and the runner's lines are JSON objects" {
    ds_poll 10 grep -q '"message":"started' "$DS_DIR/logs/runner.log" || fail "$(cat "$DS_DIR/logs/runner.log")"
    json_lines "$DS_DIR/logs/fcgi.log" dstream-fcgi || fail "$(cat "$DS_DIR/logs/fcgi.log")"
    json_lines "$DS_DIR/logs/runner.log" dstream-runner || fail "$(cat "$DS_DIR/logs/runner.log")"
    grep -q '"message":"1 processes x' "$DS_DIR/logs/fcgi.log" || fail "$(cat "$DS_DIR/logs/fcgi.log")"
}

@test "an unknown DSTREAM_LOG_FORMAT is refused at start" {
    run env DSTREAM_LOG_FORMAT=xml DSTREAM_DB="$BATS_TEST_TMPDIR/db" "$DS_BIN/dstream-fcgi" --listen "$BATS_TEST_TMPDIR/s"
    assert_failure 2
    assert_output --partial "DSTREAM_LOG_FORMAT must be text or json"
    run env DSTREAM_LOG_FORMAT=xml DSTREAM_DB="$BATS_TEST_TMPDIR/db" "$DS_BIN/dstream-runner"
    assert_failure 2
    assert_output --partial "DSTREAM_LOG_FORMAT must be text or json"
}

# runner_refuses NAME=VALUE... [-- ARGS]: start the runner with DSTREAM_LOG_FORMAT=json
# and the given settings; it must refuse to start (status 1 or 2) and every line it
# wrote on standard error must be a JSON object from dstream-runner.
runner_refuses() {
    local err=$BATS_TEST_TMPDIR/runner.err settings=() args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do settings+=("$1"); shift; done
    [ "${1:-}" = -- ] && { shift; args=("$@"); }
    local rc=0
    timeout 20 env DSTREAM_LOG_FORMAT=json DSTREAM_DB="${RR_DB:-$BATS_TEST_TMPDIR/db}" "${settings[@]}" \
        "$DS_BIN/dstream-runner" "${args[@]}" </dev/null >/dev/null 2>"$err" || rc=$?
    [ "$rc" -eq 1 ] || [ "$rc" -eq 2 ] || fail "status $rc: $(cat "$err")"
    json_lines "$err" dstream-runner || fail "not JSON lines (${settings[*]} ${args[*]}): $(cat "$err")"
    jq -e -s 'all(.[]; .level == "error")' "$err" >/dev/null || fail "$(cat "$err")"
}

@test "DSTREAM_LOG_FORMAT=json: the runner's start-up errors are JSON lines too" {
    echo '{' >"$BATS_TEST_TMPDIR/bad.json"
    chmod 600 "$BATS_TEST_TMPDIR/bad.json"
    runner_refuses -- --bogus                               # usage
    runner_refuses DSTREAM_LEASE_MS=soon                    # a setting not a number
    runner_refuses DSTREAM_CREDENTIALS="$BATS_TEST_TMPDIR/none.json"
    runner_refuses DSTREAM_MCP_CONFIG="$BATS_TEST_TMPDIR/bad.json"   # a multi-line message
    runner_refuses DSTREAM_PRICING="$BATS_TEST_TMPDIR/bad.json"
    runner_refuses DSTREAM_PROVIDERS="$BATS_TEST_TMPDIR/bad.json"
    runner_refuses DSTREAM_RECORDING=sometimes
    runner_refuses DSTREAM_RECORDING_TIMING=slow
    runner_refuses DSTREAM_WEBHOOK_ALLOW=10.0.0.0/99
    runner_refuses DSTREAM_DB="$BATS_TEST_TMPDIR/no/such/dir/db"
    RR_DB=$DS_DB runner_refuses                              # the stack's runner holds the lock
    grep -q 'refusing to start' "$BATS_TEST_TMPDIR/runner.err" || fail "$(cat "$BATS_TEST_TMPDIR/runner.err")"
}
