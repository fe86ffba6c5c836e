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
