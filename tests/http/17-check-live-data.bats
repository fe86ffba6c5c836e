#!/usr/bin/env bats
# dstream check on a database the servers wrote: sessions run by the runner (with
# snapshots, since their logs pass SSTORE_SNAPSHOT_EVERY events), a session forked at
# a past offset, stream forks of forks, a parent deleted while its fork still reads it
# (soft-deleted), expired and deleted streams. Every invariant holds, so check says
# ok; a backup of it says the same.

load runner-helpers

setup_file() { rn_start; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

@test "check finds nothing wrong in what the pool and the runner wrote" {
    # Sessions: a chat long enough for snapshots (each reply streams many deltas).
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    long=$(seq -s ' ' 1 150)
    rn_script "$(jq -nc --arg t "$long" '{text: $t, chunkSize: 2, delayMs: 8, usage: {input: 5, output: 50}}')"
    rn_say "$id" "Count, please."
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 2' 30
    rn_say "$id" "Again."
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 4' 30
    snaps=$(sqlite3 "$DS_DB" "SELECT count(*) FROM snapshots WHERE session = '$id'")
    [ "$snaps" -ge 1 ] || fail "no snapshot was written ($snaps)"
    # A session forked at its first reply's end.
    rn_events "$id" >"$T/ev.json"
    at=$(jq -r '[.[] | select(.type == "provider:request_ended")][0].offset' "$T/ev.json")
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary "{\"at\": \"$at\"}"
    assert_status 201
    # Streams: forks of forks, a deleted parent still read by its fork, a deleted leaf.
    a=/v1/stream/$(ds_name a)
    ds_create "$a" text/plain
    for i in 1 2 3; do ds_append "$a" text/plain "a$i"; done
    off=$(header Stream-Next-Offset)
    ds_append "$a" text/plain a4
    b=/v1/stream/$(ds_name b)
    req PUT "$b" -H 'Content-Type: text/plain' -H "Stream-Forked-From: $a" -H "Stream-Fork-Offset: $off"
    assert_status 201
    ds_append "$b" text/plain b1
    c=/v1/stream/$(ds_name c)
    req PUT "$c" -H 'Content-Type: text/plain' -H "Stream-Forked-From: $b"
    assert_status 201
    ds_append "$c" text/plain c1
    req DELETE "$a"
    assert_status 204
    req DELETE "$c"
    assert_status 204
    j=/v1/stream/$(ds_name j)
    ds_create "$j" application/json
    ds_append "$j" application/json '[{"n":1},{"n":2},{"n":3}]'
    [ "$(sqlite3 "$DS_DB" 'SELECT count(*) FROM streams WHERE deleted = 1')" -ge 1 ] || fail "no soft-deleted stream"
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_success
    assert_output "check: $DS_DB: ok"
    run "$DS_BIN/dstream" --db "$DS_DB" backup "$T/b.db"
    assert_success
    assert_line "check: $T/b.db: ok"
}
