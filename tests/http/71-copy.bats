#!/usr/bin/env bats
# dstream copy: a stack's SQLite database, filled through the API (streams with forks,
# a deleted parent its fork still reads, TTL, expiry, closed, producers, Stream-Seq;
# a session answered by the mock provider and recorded, its fork; agents, two
# versions of a workflow, tokens, a subscription with its link), copied to a
# throwaway PostgreSQL database: a stack started on the copy gives the same answer
# to every read (bodies, offsets, ETags, session state, events, recordings, the
# subscription, the tokens) and dstream check is sound on it; copied back to SQLite,
# the same again. A destination that is not empty is refused; --verify names the
# first difference.

load runner-helpers

setup_file() {
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -x "${PG_BIN:-/nonexistent}/initdb" ] || return 0
    CP_PG=$("$DS_ROOT/tests/pg.sh" tmp dscp) || return 1
    CP_URI=$("$DS_ROOT/tests/pg.sh" start "$CP_PG/pg" fast) || return 1
    export CP_PG CP_URI
    rn_start && rn_cli_env
}

teardown_file() {
    rn_stop
    if [ -n "${CP_PG:-}" ]; then
        "$DS_ROOT/tests/pg.sh" stop "$CP_PG/pg" >/dev/null 2>&1 || true
        rm -rf "$CP_PG"
    fi
    return 0
}

setup() {
    [ -n "${CP_URI:-}" ] || skip "no PostgreSQL server binaries (apt-get install postgresql-15)"
    rn_test_setup
    D=$DS_BIN/dstream
    S=$BATS_FILE_TMPDIR
}
teardown() { rn_test_teardown; }

first_json_block() { awk '/^```json$/ { f = 1; next } f && /^```$/ { exit } f' "$1"; }

produce() {
    req POST "/v1/stream/$1" -H 'Content-Type: text/plain' -H "Producer-Id: $2" \
        -H "Producer-Epoch: $3" -H "Producer-Seq: $4" --data-binary "$5"
}

# fill: everything the copy carries, through the API; the names in $S/names.
fill() {
    local p=cp$$ ag sid fork at
    # Streams: a text stream with producers, Stream-Seq and three appends.
    req PUT "/v1/stream/$p/a" -H 'Content-Type: text/plain' --data-binary 'one'
    [ "$status_code" = 201 ] || return 1
    produce "$p/a" w1 0 0 'two' && [ "$status_code" = 200 ] || return 1
    produce "$p/a" w1 0 1 'three' && [ "$status_code" = 200 ] || return 1
    req POST "/v1/stream/$p/a" -H 'Content-Type: text/plain' -H 'Stream-Seq: 0005' --data-binary 'four'
    [ "$status_code" = 204 ] || [ "$status_code" = 200 ] || return 1
    at=$(header Stream-Next-Offset)
    req POST "/v1/stream/$p/a" -H 'Content-Type: text/plain' --data-binary 'five'
    # A JSON stream with a sliding TTL (long), one with an expiry, a closed one.
    req PUT "/v1/stream/$p/j" -H 'Content-Type: application/json' -H 'Stream-TTL: 86400' \
        --data-binary '[{"n": 1}, {"n": 2}, "three"]'
    [ "$status_code" = 201 ] || return 1
    req PUT "/v1/stream/$p/e" -H 'Content-Type: text/plain' -H 'Stream-Expires-At: 2999-01-01T00:00:00Z' \
        --data-binary 'expires'
    [ "$status_code" = 201 ] || return 1
    req PUT "/v1/stream/$p/c" -H 'Content-Type: text/plain' -H 'Stream-Closed: true' --data-binary 'closed'
    [ "$status_code" = 201 ] || return 1
    # A fork of a at its fourth message, then a fork of the fork; a deleted (its
    # fork reads it still).
    req PUT "/v1/stream/$p/f" -H 'Content-Type: text/plain' -H "Stream-Forked-From: /v1/stream/$p/a" \
        -H "Stream-Fork-Offset: $at" --data-binary 'fork-own'
    [ "$status_code" = 201 ] || return 1
    req PUT "/v1/stream/$p/g" -H 'Content-Type: text/plain' -H "Stream-Forked-From: /v1/stream/$p/f" \
        -H "Stream-Fork-Offset: $(header Stream-Next-Offset)"
    [ "$status_code" = 201 ] || return 1
    req DELETE "/v1/stream/$p/f"
    [ "$status_code" = 204 ] || return 1
    # A binary stream: every byte value.
    head -c 4096 /dev/urandom >"$S/bin"
    req PUT "/v1/stream/$p/b" -H 'Content-Type: application/octet-stream' --data-binary @"$S/bin"
    [ "$status_code" = 201 ] || return 1
    # Definitions: an agent on the mock, the example workflow in two versions.
    ag=$(rn_agent anthropic claude-test-model) || return 1
    first_json_block "$DS_ROOT/docs/workflows.md" >"$S/wf.json"
    rn_workflow @"$S/wf.json" || return 1
    jq -c '.description = "second version"' "$S/wf.json" >"$S/wf2.json"
    rn_workflow @"$S/wf2.json" || return 1
    # A recorded session answered by the mock, then its fork.
    rn_script '{"text": "Hello from the mock.", "usage": {"input": 11, "output": 7}}' || return 1
    sid=$(rn_session "{\"agent\": \"$ag\", \"mode\": \"record\"}") || return 1
    rn_say "$sid" "Say hello." || return 1
    rn_wait "$sid" '.status == "completed" and .request == null' || return 1
    req GET "/v1/sessions/$sid/events?offset=-1"
    req POST "/v1/sessions/$sid/fork" -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg at "$(header Stream-Next-Offset)" '{at: $at}')"
    [ "$status_code" = 201 ] || return 1
    fork=$(jq -r .id "$DS_BODY")
    # A token; a pull-wake subscription linked to a stream.
    "$D" --db "$DS_DB" token create --name "reader-$p" --scope sessions:read >/dev/null 2>&1 || return 1
    req PUT "/v1/stream/$p/wake" -H 'Content-Type: application/json' --data-binary '[]'
    req PUT "/v1/stream/__ds/subscriptions/sub-$p" -H 'Content-Type: application/json' \
        --data-binary "{\"type\": \"pull-wake\", \"pattern\": \"$p/jobs/*\", \"wake_stream\": \"$p/wake\", \"lease_ttl_ms\": 60000}"
    [ "$status_code" = 201 ] || return 1
    req PUT "/v1/stream/$p/jobs/1" -H 'Content-Type: application/json' --data-binary '{"job": 1}'
    [ "$status_code" = 201 ] || return 1
    printf '%s\n' "$p" "$ag" "$sid" "$fork" >"$S/names"
}

# reads DIR: the answers to every read, a file each, in DIR (compared with diff -r).
reads() {
    local out=$1 p ag sid fork s key i=0
    { read -r p; read -r ag; read -r sid; read -r fork; } <"$S/names"
    mkdir -p "$out"
    for s in a j e c f g b wake jobs/1; do
        i=$((i + 1))
        for q in "offset=-1" "offset=-1&max_bytes=1"; do
            req GET "/v1/stream/$p/$s?$q"
            {
                echo "$status_code"
                for h in ETag Stream-Next-Offset Stream-Closed Content-Type Stream-Up-To-Date Stream-Seq; do
                    echo "$h: $(header "$h" || true)"
                done
            } >"$out/stream$i-${q//[^a-z0-9]/}"
            cp "$DS_BODY" "$out/stream$i-${q//[^a-z0-9]/}.body"
        done
    done
    # A producer's retry of its last append: a duplicate, the same answer; a
    # Stream-Seq that does not go forward: refused the same.
    produce "$p/a" w1 0 1 'three'
    echo "$status_code $(header Producer-Seq || true) $(header Stream-Next-Offset || true)" >"$out/producer-dup"
    req POST "/v1/stream/$p/a" -H 'Content-Type: text/plain' -H 'Stream-Seq: 0001' --data-binary 'late'
    echo "$status_code" >"$out/stream-seq-back"
    for id in "$sid" "$fork"; do
        rn_get "$id" || return 1
        jq -S . "$DS_BODY" >"$out/session-$id.json"
        rn_events "$id" | jq -S . >"$out/events-$id.json"
    done
    req GET /v1/agents && jq -S . "$DS_BODY" >"$out/agents.json"
    req GET "/v1/agents/$ag" && jq -S . "$DS_BODY" >"$out/agent.json"
    for v in "" "?version=1"; do
        req GET "/v1/workflows/blog-post$v"
        echo "$status_code" >"$out/workflow$v"
        jq -S . "$DS_BODY" >>"$out/workflow$v"
    done
    req GET "/v1/recordings?limit=100" && jq -S . "$DS_BODY" >"$out/recordings.json"
    for key in $(jq -r '.recordings[].key' "$out/recordings.json" 2>/dev/null | sort -u); do
        req GET "/v1/recordings/$key" && jq -S . "$DS_BODY" >"$out/recording-$key.json"
    done
    req GET "/v1/stream/__ds/subscriptions/sub-$p"
    echo "$status_code" >"$out/subscription"
    jq -S . "$DS_BODY" >>"$out/subscription"
    "$D" --db "$DS_DB" token list --json | jq -S . >"$out/tokens.json"
}

# same A B: the reads in A and B agree, else the differences.
same() { diff -r "$1" "$2" >&2; }

@test "fill the SQLite stack's database through the API and read it back" {
    fill
    reads "$S/sqlite"
    # The reads found what was put there.
    grep -qx 201 "$S/sqlite/subscription" || grep -qx 200 "$S/sqlite/subscription"
    [ "$(jq '.recordings | length' "$S/sqlite/recordings.json")" -ge 1 ]
    [ "$(head -1 "$S/sqlite/stream6-offset1")" = 200 ]      # g reads its deleted parent
    [ "$(cat "$S/sqlite/stream6-offset1.body")" = onetwothreefourfork-own ]
    [ "$(head -1 "$S/sqlite/stream5-offset1")" != 200 ]      # f itself is gone
    grep -q '^ETag: ..*' "$S/sqlite/stream1-offset1"
    grep -qx 'Stream-Closed: true' "$S/sqlite/stream4-offset1"
    [ "$(cat "$S/sqlite/producer-dup")" != "" ] && [ "$(cat "$S/sqlite/stream-seq-back")" = 409 ]
    { read -r _; read -r _; read -r sid; read -r fork; } <"$S/names"
    jq -e '.status == "completed" and (.messages | length) == 2' "$S/sqlite/session-$sid.json"
    jq -e 'length > 3' "$S/sqlite/events-$fork.json"
    ! cmp -s "$S/sqlite/workflow" "$S/sqlite/workflow?version=1"
    run "$D" --db "$DS_DB" check
    assert_success
}

@test "copied to PostgreSQL: every read gives the same answer on a stack started on the copy" {
    [ -f "$S/sqlite/tokens.json" ] || skip "the fill failed"
    "$DS_STACK" stop "$DS_DIR" >/dev/null 2>&1
    PGDB=$("$DS_ROOT/tests/pg.sh" db "$CP_PG/pg" copy1)
    run --separate-stderr "$D" copy --from "$DS_DB" --to "$PGDB" --json
    assert_success
    jq -e '.ok and .rows.streams >= 9 and .rows.messages >= 10 and .rows.sessions == 2 and .rows.workflows == 2
        and .rows.tokens >= 2 and .rows.recordings >= 1 and .rows.recording_chunks >= 1
        and .rows.subscriptions == 1 and .rows.subscription_links == 1 and .rows.producers == 1' <<<"$output"
    echo "$PGDB" >"$S/pgdb"
    DS_DB=$PGDB
    _ds_stack_up
    rn_runner_wait_started 1
    reads "$S/pg"
    same "$S/sqlite" "$S/pg"
    run "$D" --db "$PGDB" check --json
    assert_success
    jq -e .ok <<<"$output"
    # New rows after the copied ones: a stream, a recorded session (ids past those copied).
    req PUT "/v1/stream/$(ds_name after)" -H 'Content-Type: text/plain' --data-binary 'new'
    assert_status 201
    ag=$(sed -n 2p "$S/names")
    rn_script '{"text": "Again.", "usage": {"input": 3, "output": 2}}'
    sid=$(rn_session "{\"agent\": \"$ag\", \"mode\": \"record\"}")
    rn_say "$sid" "Once more."
    rn_wait "$sid" '.status == "completed" and .request == null and .messages[1].content == "Again."'
    req GET "/v1/recordings?session=$sid"
    assert_body_json '.recordings | length == 1'
    reads "$S/pg-after"
}

@test "copied back to SQLite: verified alike, and the same answers again" {
    [ -f "$S/pgdb" ] || skip "the copy to PostgreSQL failed"
    PGDB=$(cat "$S/pgdb")
    "$DS_STACK" stop "$DS_DIR" >/dev/null 2>&1
    run "$D" copy --from "$PGDB" --to "$S/back.db"
    assert_success
    assert_line --partial "verified"
    # Nothing has read either since (a read moves a stream's access time).
    run "$D" copy --from "$PGDB" --to "$S/back.db" --verify
    assert_success
    assert_output --partial "hold the same rows and messages"
    DS_DB=$S/back.db
    _ds_stack_up
    rn_runner_wait_started 1
    reads "$S/back"
    same "$S/pg-after" "$S/back"
    run "$D" --db "$S/back.db" check
    assert_success
    "$DS_STACK" stop "$DS_DIR" >/dev/null 2>&1
}

@test "a destination that is not empty is refused, and nothing is written to it" {
    [ -f "$S/back.db" ] || skip "no copy"
    # The stopped stack's processes may have left a write-ahead log (a pool process
    # ends without closing its connection): fold it in first, or the copy's own
    # open and close would, changing the file's bytes but not what it holds.
    sqlite3 "$S/back.db" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null
    before=$(sha256sum <"$S/back.db")
    run --separate-stderr "$D" copy --from "$DS_DIR/dstream.db" --to "$S/back.db"
    assert_failure 1
    [[ $stderr == *"is not empty: its table streams has"* ]]
    [ "$(sha256sum <"$S/back.db")" = "$before" ]
    # A source that does not exist is not made.
    run --separate-stderr "$D" copy --from "$S/nothing.db" --to "$S/n2.db"
    assert_failure 1
    [[ $stderr == *"no such database"* ]]
    [ ! -e "$S/nothing.db" ]
    run "$D" copy --to
    assert_failure 2
}

@test "--verify names the first difference: a stream's messages, a table's rows" {
    [ -f "$S/back.db" ] || skip "no copy"
    p=$(head -1 "$S/names")
    cp "$S/back.db" "$S/changed.db"
    # One byte of one message, under the API (as a damaged copy would hold it).
    sqlite3 "$S/changed.db" "UPDATE messages SET data = X'00' || substr(data, 2)
        WHERE stream = (SELECT id FROM streams WHERE path = '$p/j') AND seq = 1"
    run --separate-stderr "$D" copy --from "$S/back.db" --to "$S/changed.db" --verify --json
    assert_failure 1
    jq -e --arg s "stream $p/j: its messages differ" '.ok == false and (.difference | startswith($s))' <<<"$output"
    [[ $stderr == *"stream $p/j: its messages differ"* ]]
    cp "$S/back.db" "$S/changed.db"
    sqlite3 "$S/changed.db" "DELETE FROM tokens WHERE name = 'reader-$p'"
    run --separate-stderr "$D" copy --from "$S/back.db" --to "$S/changed.db" --verify
    assert_failure 1
    [[ $stderr == *"table tokens: "*" rows, "*" in the copy"* ]]
}
