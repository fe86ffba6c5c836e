#!/usr/bin/env bats
# Retention by policy (docs/architecture.md "Retention") through the real stack: the
# operator's policies by path prefix delete streams and sessions older than an age or
# beyond the newest N, `dstream gc --dry-run` says what would go and why the rest stays
# (within age or count, a live fork reads it, waiting for a human, a timer or a signal,
# running) and deletes
# nothing; the runner applies its own file (DSTREAM_RETENTION) a slice at a time, counted
# in /metrics; a runner killed (-9) in the middle of its pass leaves every session whole
# or gone with its stream; a bounded load reaches a steady number of rows. Ages are made
# by moving creation and activity times back in the database.

load runner-helpers

setup_file() {
    BATS_TEST_TMPDIR=$BATS_FILE_TMPDIR
    # The runner's own policies: sessions under gcr- older than an hour, the newest
    # 20 streams under gcr/; a pass every 300 ms.
    RETAIN_FILE=$BATS_FILE_TMPDIR/retention.json
    printf '%s\n' '{"policies": [{"prefix": "sessions/gcr-", "maxAge": "1h"}, {"prefix": "gcr/", "keep": 20}]}' \
        >"$RETAIN_FILE"
    chmod 644 "$RETAIN_FILE"
    export RETAIN_FILE
    # One item per transaction: a pass of many takes several slices of the loop.
    rn_start DSTREAM_RETENTION="$RETAIN_FILE" DSTREAM_SWEEP_MS=300 DSTREAM_RETENTION_BATCH=1
}
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
    D=$DS_BIN/dstream
}
teardown() { rn_test_teardown; }

# policy JSON: a policy file for dstream gc in $T/policy.json (mode 0644).
policy() {
    printf '%s\n' "$1" >"$T/policy.json"
    chmod 644 "$T/policy.json"
}

# older PATH_PREFIX HOURS: the streams under the prefix were created and last active
# HOURS hours earlier than they were.
older() {
    ds_sql "UPDATE streams SET created_ms = created_ms - $2 * 3600000, access_ms = access_ms - $2 * 3600000
            WHERE path LIKE '$1%'" >/dev/null
}

# gc ARGS...: dstream gc on the stack's database, JSON lines in $output.
gc() { run "$D" --db "$DS_DB" gc --policy "$T/policy.json" --json "$@"; }

# verdict PATH: the JSON line of gc's output about PATH.
verdict() { jq -c --arg p "$1" 'select(.path == $p) | [.action, .reason]' <<<"$output"; }

exists() { curl -fsS -o /dev/null -I "$DS_URL/v1/stream/$1"; }

# chat ID: a chat session that answered one message (completed).
chat() {
    rn_session "{\"agent\": \"$AGENT\", \"id\": \"$1\"}" >/dev/null || return 1
    rn_say "$1" hello && rn_wait "$1" '.status == "completed" and (.messages | length) == 2'
}

@test "streams: by age and by count; a dry run deletes nothing and says why the rest stays" {
    p=gct$$
    for s in a b c; do ds_create "/v1/stream/$p/age/$s"; done
    for s in 1 2 3 4; do
        ds_create "/v1/stream/$p/count/$s"
        ds_sql "UPDATE streams SET created_ms = created_ms - (10 - $s) * 1000 WHERE path = '$p/count/$s'" >/dev/null
    done
    older "$p/age/a" 48
    older "$p/age/b" 30
    policy "{\"policies\": [{\"prefix\": \"$p/age/\", \"maxAge\": \"1d\"}, {\"prefix\": \"$p/count/\", \"keep\": 2}]}"

    gc --dry-run
    assert_success
    [ "$(verdict "$p/age/a")" = '["would delete","age"]' ]
    [ "$(verdict "$p/age/b")" = '["would delete","age"]' ]
    [ "$(verdict "$p/age/c")" = '["keep","within_age"]' ]
    [ "$(verdict "$p/count/4")" = '["keep","within_count"]' ]
    [ "$(verdict "$p/count/3")" = '["keep","within_count"]' ]
    [ "$(verdict "$p/count/2")" = '["would delete","count"]' ]
    [ "$(verdict "$p/count/1")" = '["would delete","count"]' ]
    jq -se 'last | .dryRun and .streams == 4 and .sessions == 0 and .kept == 3' <<<"$output"
    for s in age/a age/b age/c count/1 count/2 count/3 count/4; do exists "$p/$s"; done

    run "$D" --db "$DS_DB" gc --policy "$T/policy.json" --dry-run
    assert_success
    assert_line --regexp "^keep +stream +$p/age/c  \(within_age: younger than the policy's maxAge; age [0-9]+s, #1 under \"$p/age/\"\)$"
    assert_line --regexp "^delete +stream +$p/age/a  \(age: older than the policy's maxAge; age 2d, #3 under \"$p/age/\"\)$"
    assert_line "would delete 0 sessions and 4 streams; 3 kept (dry run: nothing deleted)"

    gc
    assert_success
    jq -se 'last | (.dryRun | not) and .streams == 4 and .kept == 3' <<<"$output"
    for s in age/c count/3 count/4; do exists "$p/$s"; done
    for s in age/a age/b count/1 count/2; do run exists "$p/$s"; assert_failure; done

    # A mistake in the file is named; nothing runs.
    policy '{"policies": [{"prefix": "x/", "maxAge": "1w"}]}'
    gc
    assert_failure 2
    assert_output --partial 'policies[0]: "maxAge" must be an age'
}

@test "sessions: old ones go with their streams; a parent whose fork lives, one waiting for a human, a timer or a signal, one running stay" {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" \
        --data-binary '{"text": "echo: {{user}}"}'
    AGENT=$(rn_agent anthropic claude-test-model)
    p=gcs$(_rn_hex 3)
    chat "$p-old"
    chat "$p-par"
    req POST "/v1/sessions/$p-par/fork" -H 'Content-Type: application/json' --data-binary "{\"id\": \"$p-kid\"}"
    assert_status 201
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, phases: [
        {name: "ask", steps: [{kind: "human", id: "pick", input: "choice", options: ["red", "blue"],
            prompt: "Which?", update: {colour: "$response"}}], transitions: [{to: "done"}]},
        {name: "done", terminal: true, steps: [{kind: "update", set: {finished: true}}]}]}')"
    rn_session "{\"workflow\": \"$wf\", \"id\": \"$p-ask\"}" >/dev/null
    rn_wait "$p-ask" '.status == "awaiting_input"'
    # A workflow asleep for an hour, one waiting for a signal (docs/workflows.md).
    for k in nap sig; do
        if [ $k = nap ]; then step='{kind: "sleep", name: "nap", duration: "1h"}'
        else step='{kind: "wait", name: "sig", signals: {go: {}}}'; fi
        w=$(ds_name wf)
        rn_workflow "$(jq -nc --arg n "$w" --argjson s "$(jq -nc "$step")" '{name: $n, phases: [
            {name: "go", steps: [$s], transitions: [{to: "done"}]},
            {name: "done", terminal: true, steps: [{kind: "update", set: {finished: true}}]}]}')"
        rn_session "{\"workflow\": \"$w\", \"id\": \"$p-$k\"}" >/dev/null
        ds_poll 10 rn_has_event "$p-$k" '.type == "step:started"'
    done
    rn_session "{\"agent\": \"$AGENT\", \"id\": \"$p-run\"}" >/dev/null
    # The reply waits after its first delta (the mock holds it until the next test):
    # the session stays running, and no append of it makes its stream young again
    # between the ageing below and the passes, however slowly they come.
    rn_script '{"text": "slow slow slow slow slow slow slow slow", "chunkSize": 1, "holdAfter": 1}'
    rn_say "$p-run" talk
    rn_wait "$p-run" '.status == "running"'
    ds_poll 20 rn_has_event "$p-run" '.type == "text:delta"'
    for s in old par ask run nap sig; do older "sessions/$p-$s" 72; done
    policy "{\"policies\": [{\"prefix\": \"sessions/$p-\", \"maxAge\": \"1d\"}]}"

    gc --dry-run
    assert_success
    [ "$(verdict "sessions/$p-old")" = '["would delete","age"]' ]
    [ "$(verdict "sessions/$p-par")" = '["keep","fork_needed"]' ]
    [ "$(verdict "sessions/$p-ask")" = '["keep","waiting"]' ]
    [ "$(verdict "sessions/$p-run")" = '["keep","running"]' ]
    [ "$(verdict "sessions/$p-nap")" = '["keep","waiting_timer"]' ]
    [ "$(verdict "sessions/$p-sig")" = '["keep","waiting_signal"]' ]
    [ "$(verdict "sessions/$p-kid")" = '["keep","within_age"]' ]
    jq -se --arg s "$p-old" 'map(select(.path == "sessions/" + $s)) | .[0].session == $s' <<<"$output"
    rn_get "$p-old"
    [ "$status_code" = 200 ]

    gc
    assert_success
    jq -se 'last | .sessions == 1 and .streams == 0' <<<"$output"
    req GET "/v1/sessions/$p-old"
    assert_status 404
    run exists "sessions/$p-old"
    assert_failure
    for s in par kid ask run nap sig; do
        req GET "/v1/sessions/$p-$s"
        assert_status 200
    done
    # The fork's history still reads through its parent's.
    req GET "/v1/sessions/$p-kid/events"
    assert_status 200

    # With the fork gone, its parent goes at the next pass.
    req DELETE "/v1/sessions/$p-kid"
    [ "$status_code" -lt 300 ]
    gc
    jq -se 'last | .sessions == 1' <<<"$output"
    req GET "/v1/sessions/$p-par"
    assert_status 404
}

# rows PREFIX: the streams under PREFIX that are not deleted.
rows() { ds_sql "SELECT count(*) FROM streams WHERE deleted = 0 AND path LIKE '$1%'"; }
metric() { curl -fsS "$DS_URL/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
_le() { [ "$(rows "$1")" -le "$2" ]; }

@test "the runner applies DSTREAM_RETENTION: a bounded load stays at a steady number of rows, counted in /metrics" {
    before=$(metric dstream_retention_deleted_streams_total)
    # 5 rounds of 30 streams under gcr/ (keep 20): after each, the runner brings them
    # back to 20.
    for round in 1 2 3 4 5; do
        for i in $(seq 1 30); do
            curl -fsS -o /dev/null -X PUT "$DS_URL/v1/stream/gcr/r$round-$i"
        done
        ds_poll 20 _le gcr/ 20 || fail "round $round: $(rows gcr/) streams under gcr/"
    done
    [ "$(rows gcr/)" = 20 ]
    exists gcr/r5-30
    run exists gcr/r1-1
    assert_failure
    after=$(metric dstream_retention_deleted_streams_total)
    [ $((after - ${before:-0})) -eq 130 ]
    [ "$(metric dstream_retention_passes_total)" -ge 5 ]
    grep -q 'retention: pass done: 0 sessions and [0-9]* streams deleted' "$DS_DIR/logs/runner.log"
}

# _gone_some P: the runner has deleted some of the sessions gcr-P-* (their rows go too).
_gone_some() {
    local n
    n=$(ds_sql "SELECT count(*) FROM sessions WHERE deleted = 0 AND id LIKE 'gcr-$1-%'")
    [ "$n" -lt 150 ]
}

@test "runner kill -9 during a pass: every session is whole or gone with its stream" {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" \
        --data-binary '{"text": "ok"}'
    AGENT=$(rn_agent anthropic claude-test-model)
    # 150 sessions made while the runner is stopped, then finished and made old by
    # hand (their rows say completed: what a finished chat's says).
    rn_runner_signal TERM
    p=$(_rn_hex 3)
    for i in $(seq 1 150); do
        req POST /v1/sessions -H 'Content-Type: application/json' \
            --data-binary "{\"agent\": \"$AGENT\", \"id\": \"gcr-$p-$i\"}"
        [ "$status_code" = 201 ] || fail "session $i: $status_code $body"
    done
    ds_sql "UPDATE sessions SET status = 'completed' WHERE id LIKE 'gcr-$p-%'" >/dev/null
    older "sessions/gcr-$p-" 2
    rn_runner_start
    # Killed as soon as it has deleted some (polled without pause, for 20 s at most).
    end=$((SECONDS + 20))
    until _gone_some "$p"; do [ "$SECONDS" -lt "$end" ] || fail "the runner deleted none"; done
    kill -KILL "$(rn_runner_pid)"
    ds_poll 10 rn_gone "$(rn_runner_pid)"
    left=$(ds_sql "SELECT count(*) FROM sessions WHERE deleted = 0 AND id LIKE 'gcr-$p-%'")
    echo "deleted when killed: $((150 - left)) of 150" >&3
    # Whole or gone: each row left is live with its live stream, each stream left has
    # its live row, and a deleted session left neither (its row is forgotten too).
    [ "$(ds_sql "SELECT count(*) FROM sessions WHERE id LIKE 'gcr-$p-%'")" = "$left" ]
    [ "$(ds_sql "SELECT count(*) FROM sessions s JOIN streams t ON t.path = 'sessions/' || s.id AND t.deleted = 0
                 WHERE s.id LIKE 'gcr-$p-%' AND s.deleted = 0")" = "$left" ]
    [ "$(ds_sql "SELECT count(*) FROM streams WHERE path LIKE 'sessions/gcr-$p-%'")" = "$left" ]
    run "$D" check "$DS_DB"
    assert_success
    # The next runner finishes the pass.
    rn_runner_start
    ds_poll 20 eval '[ "$(ds_sql "SELECT count(*) FROM sessions WHERE id LIKE '"'gcr-$p-%'"'")" = 0 ]'
    [ "$(ds_sql "SELECT count(*) FROM streams WHERE path LIKE 'sessions/gcr-$p-%'")" = 0 ]
}
