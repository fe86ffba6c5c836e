#!/usr/bin/env bats
# dstream check on a database the servers wrote: sessions run by the runner (with
# snapshots, since their logs pass SSTORE_SNAPSHOT_EVERY events), a session forked at
# a past offset, stream forks of forks, a parent deleted while its fork still reads it
# (soft-deleted), expired and deleted streams. Every invariant holds and every
# snapshot equals a replay of its session's events, so check says ok; a backup of it
# says the same. A snapshot altered by hand is named, with the key that differs.

load runner-helpers

setup_file() { rn_start; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# long_chat: a chat long enough for snapshots (each reply streams many deltas), run
# by the runner; its id in $id.
long_chat() {
    local agent long snaps
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    long=$(seq -s ' ' 1 150)
    rn_script "$(jq -nc --arg t "$long" '{text: $t, chunkSize: 2, delayMs: 8, usage: {input: 5, output: 50}}')"
    rn_say "$id" "Count, please."
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 2' 30
    rn_say "$id" "Again."
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 4' 30
    snaps=$(ds_sql "SELECT count(*) FROM snapshots WHERE session = '$id'")
    [ "$snaps" -ge 1 ] || fail "no snapshot was written ($snaps)"
}

@test "check finds nothing wrong in what the pool and the runner wrote" {
    long_chat
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
    [ "$(ds_sql 'SELECT count(*) FROM streams WHERE deleted = 1')" -ge 1 ] || fail "no soft-deleted stream"
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_success
    assert_output "check: $DS_DB: ok"
    # dstream backup is SQLite's: on PostgreSQL it names pg_dump and changes nothing.
    run "$DS_BIN/dstream" --db "$DS_DB" backup "$T/b.db"
    if ds_is_pg; then
        assert_failure 1
        assert_output --partial pg_dump
    else
        assert_success
        assert_line "check: $T/b.db: ok"
    fi
}

# set_output_tokens SESSION SEQ VALUE: the snapshot's usage.outputTokens set by hand.
set_output_tokens() {
    if ds_is_pg; then
        ds_sql "UPDATE snapshots SET view = jsonb_set(view::jsonb, '{usage,outputTokens}', '$3')::text
                WHERE session = '$1' AND seq = $2"
    else
        ds_sql "UPDATE snapshots SET view = json_set(view, '\$.usage.outputTokens', $3) WHERE session = '$1' AND seq = $2"
    fi
}

@test "check replays the sessions: a snapshot altered by hand makes it fail, naming the session, position and key" {
    long_chat
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_success
    seq=$(ds_sql "SELECT max(seq) FROM snapshots WHERE session = '$id'")
    if ds_is_pg; then
        was=$(ds_sql "SELECT view::jsonb #>> '{usage,outputTokens}' FROM snapshots WHERE session = '$id' AND seq = $seq")
    else
        was=$(ds_sql "SELECT json_extract(view, '\$.usage.outputTokens') FROM snapshots WHERE session = '$id' AND seq = $seq")
    fi
    set_output_tokens "$id" "$seq" 123456
    run "$DS_BIN/dstream" --db "$DS_DB" check
    [ "$status" = 1 ]
    assert_line "problem: snapshot differs from a replay of its session's events: session=$id seq=$seq key=usage.outputTokens"
    assert_line "check: $DS_DB: 1 problem"
    # Put back as it was: sound again.
    set_output_tokens "$id" "$seq" "$was"
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_success
}
