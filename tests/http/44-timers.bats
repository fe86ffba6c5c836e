#!/usr/bin/env bats
# Durable timers and signals end to end (docs/workflows.md, sleep and wait; the
# route POST /v1/sessions/{id}/signals/{name}): a sleep for a duration and until a
# time read from the input, a wait that a signal ends on the signal's branch with its
# payload in the state, a signal sent before its wait step is reached (kept, then
# taken), a wait's timeout and its branch, a sleep and a wait across a kill -9 of the
# runner (each timer fires once), the route's errors and scopes, the validation of
# the steps, and 1,000 sleeping sessions that cost the runner (almost) no CPU.
#
# One stack for the file (runner-helpers.bash). Waits are polls with deadlines;
# nothing asserts on timing, only on order (a timer never fires before its time).

load runner-helpers

setup_file() { rn_start DSTREAM_SIGNAL_PAYLOAD_MAX=1024 DSTREAM_SIGNALS_PENDING_MAX=3; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# check FILE JQ [JQ_ARGS...]: the jq program holds on FILE; otherwise print both, fail.
check() {
    local file=$1 prog=$2
    shift 2
    jq -e "$@" "$prog" "$file" >/dev/null && return 0
    {
        echo "does not hold: $prog"
        jq -c 'if type == "array" then .[] | [.offset, .type, .payload, .createdAt] else . end' "$file" | cut -c1-300
    } >&2
    return 1
}

# signal ID NAME [JSON]: POST the signal (JSON as its payload, when given).
signal() {
    if [ $# -ge 3 ]; then
        req POST "/v1/sessions/$1/signals/$2" -H 'Content-Type: application/json' --data-binary "$3"
    else
        req POST "/v1/sessions/$1/signals/$2"
    fi
}

# wf STEPS [PHASES]: a workflow whose phase "go" runs STEPS, then the terminal phase
# "done"; PHASES (more phases, e.g. branches) are added. Both are jq expressions.
# Prints its name.
wf() {
    local name steps more
    name=$(ds_name wf)
    steps=$(jq -nc "$1") && more=$(jq -nc "${2:-[]}") || return 1
    rn_workflow "$(jq -nc --arg n "$name" --argjson steps "$steps" --argjson more "$more" '{name: $n,
        initialState: {}, phases: ([{name: "go", steps: $steps, transitions: [{to: "done"}]},
        {name: "done", terminal: true, steps: [{kind: "update", set: {done: true}}]}] + $more)}')" || return 1
    echo "$name"
}

# ms ISO: an event's createdAt in ms since the epoch.
ms_of() { jq -rn --arg t "$1" '($t[0:19] + "Z" | fromdateiso8601) * 1000 + ($t[20:23] | tonumber)'; }

# ---- sleep ---------------------------------------------------------------------------

@test "sleep: a 300 ms sleep sets its timer in the log, fires it once at its time, and the workflow goes on" {
    w=$(wf '[{kind: "sleep", name: "nap", duration: "300ms"}]')
    id=$(rn_session "{\"workflow\": \"$w\"}")
    rn_wait "$id" '.status == "completed" and .state.done == true'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | .type] | index("timer:set") < index("timer:fired") and index("timer:fired") < index("step:completed")'
    check "$T/ev.json" '[.[] | select(.type == "step:started")][0].payload | .kind == "sleep" and .name == "nap"'
    check "$T/ev.json" '[.[] | select(.type == "timer:fired")] | length == 1'
    due=$(jq -r '[.[] | select(.type == "timer:set")][0].payload.dueAt' "$T/ev.json")
    set_at=$(ms_of "$(jq -r '[.[] | select(.type == "timer:set")][0].createdAt' "$T/ev.json")")
    fired_at=$(ms_of "$(jq -r '[.[] | select(.type == "timer:fired")][0].createdAt' "$T/ev.json")")
    # Due 300 ms after it was set (the clock of the same process), and not fired before.
    [ $((due - set_at)) -ge 290 ] && [ $((due - set_at)) -le 400 ]
    [ "$fired_at" -ge "$due" ]
    check "$T/ev.json" "[.[] | select(.type == \"timer:fired\")][0].payload == {phase: \"go\", step: 0, dueAt: $due}"
}

@test "sleep: until a time from the input (RFC 3339) and from the state (ms since the epoch); a value that is no time fails the workflow, saying so" {
    w=$(wf '[{kind: "sleep", until: "{{input.at}}"}, {kind: "update", set: {then: "$input"}},
             {kind: "sleep", until: "{{state.then.ms}}"}]')
    now=$(date +%s%3N)
    at=$(date -u -d "@$(((now + 400) / 1000)).$(printf %03d $(((now + 400) % 1000)))" +%Y-%m-%dT%H:%M:%S.%3NZ)
    at_ms=$(ms_of "$at")
    id=$(rn_session "$(jq -nc --arg w "$w" --arg at "$at" --argjson ms $((now + 700)) '{workflow: $w, input: {at: $at, ms: $ms}}')")
    rn_wait "$id" '.status == "completed"'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" "[.[] | select(.type == \"timer:set\") | .payload.dueAt] == [$at_ms, $((now + 700))]"
    check "$T/ev.json" '[.[] | select(.type == "timer:fired")] | length == 2'
    for f in 0 1; do
        due=$(jq -r "[.[] | select(.type == \"timer:fired\")][$f].payload.dueAt" "$T/ev.json")
        [ "$(ms_of "$(jq -r "[.[] | select(.type == \"timer:fired\")][$f].createdAt" "$T/ev.json")")" -ge "$due" ]
    done
    # Not a time: the workflow fails with the value in its error.
    id=$(rn_session "$(jq -nc --arg w "$w" '{workflow: $w, input: {at: "tomorrow"}}')")
    rn_wait "$id" '.status == "failed"'
    check "$DS_BODY" '.error | test("sleep until: \"tomorrow\" is not a time")'
}

# ---- wait and signals ----------------------------------------------------------------

# A wait for approve (to phase yes, the payload into state.approval) or reject (to
# phase no), 60 s at most (then phase late).
WAIT_STEPS='[{kind: "wait", name: "approval", signals: {
    approve: {to: "yes", update: {approval: "$payload", by: "{{input.who}}"}},
    reject: {to: "no"}}, timeout: "60s", onTimeout: {to: "late"}},
    {kind: "update", set: {unreachable: true}}]'
BRANCHES='[{name: "yes", terminal: true, steps: [{kind: "update", set: {result: "yes"}}]},
           {name: "no", terminal: true, steps: [{kind: "update", set: {result: "no"}}]},
           {name: "late", terminal: true, steps: [{kind: "update", set: {result: "late"}}]}]'

@test "wait: a signal ends the wait on its branch, with its payload in the state; the session showed what it waited for" {
    w=$(wf "$WAIT_STEPS" "$BRANCHES")
    id=$(rn_session "{\"workflow\": \"$w\", \"input\": {\"who\": \"ann\"}}")
    rn_wait "$id" '.waitingFor == ["approve", "reject"] and (.timerAt | type == "number") and .status == "running"'
    signal "$id" approve '{"ok": true, "note": "ship it"}'
    assert_status 202
    assert_body_json ".id == \"$id\" and (.offset | test(\"^[0-9]{16}_[0-9]{16}$\"))"
    rn_wait "$id" '.status == "completed"'
    check "$DS_BODY" '.state == {approval: {ok: true, note: "ship it"}, by: "ann", result: "yes"} and .signals == [] and .waitingFor == null'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "signal:received")] | length == 1 and .[0].actor == "user"
        and .[0].payload == {name: "approve", payload: {ok: true, note: "ship it"}}'
    check "$T/ev.json" '[.[] | select(.type == "step:completed")][0].payload == {phase: "go", step: 0, signal: "approve", to: "yes"}'
    check "$T/ev.json" '[.[] | select(.type == "phase:exited")][0].payload == {phase: "go", to: "yes"}'
    check "$T/ev.json" '[.[] | select(.type == "timer:fired")] == []'
    # The other branch, with no payload: null.
    id=$(rn_session "{\"workflow\": \"$w\", \"input\": {\"who\": \"bob\"}}")
    rn_wait "$id" '.waitingFor != null'
    signal "$id" reject
    assert_status 202
    rn_wait "$id" '.status == "completed" and .state == {result: "no"}'
    # From the command line: the payload any JSON value; it prints the offset.
    rn_cli_env
    id=$(rn_session "{\"workflow\": \"$w\", \"input\": {\"who\": \"cli\"}}")
    run "$DS_BIN/dstream" sessions signal "$id" approve '"by the CLI"'
    [ "$status" -eq 0 ] && [[ "$output" =~ ^[0-9]{16}_[0-9]{16}$ ]]
    rn_wait "$id" '.status == "completed" and .state.approval == "by the CLI"'
    run "$DS_BIN/dstream" sessions signal "$id" approve '{not json'
    [ "$status" -eq 2 ] && [[ "$output" == *"the payload is not JSON"* ]]
    run "$DS_BIN/dstream" sessions signal "$id" approve
    [ "$status" -eq 5 ] && [[ "$output" == *session_finished* ]]
}

@test "wait: a signal sent before the wait step is reached is kept, and the first wait that names it takes it (once)" {
    # The session first waits for the signal start, then sleeps: go is sent while it
    # waits for start, however late the test gets to send it (a sleep first would end
    # before it on a busy machine), and is kept across that wait and the sleep's timer
    # until the wait for go takes it; start lets the session go on.
    w=$(wf '[{kind: "wait", signals: {start: {}}}, {kind: "sleep", duration: "200ms"},
             {kind: "wait", signals: {go: {update: {first: "$payload"}}}},
             {kind: "wait", signals: {go: {update: {second: "$payload"}}}}]')
    id=$(rn_session "{\"workflow\": \"$w\"}")
    rn_wait "$id" '.waitingFor == ["start"]'
    signal "$id" go '1'
    assert_status 202
    rn_get "$id"
    check "$DS_BODY" '[.signals[] | {name, payload}] == [{name: "go", payload: 1}] and .waitingFor == ["start"]'
    signal "$id" start
    assert_status 202
    # The first wait takes it; the second waits for the next one.
    rn_wait "$id" '.state.first == 1 and .waitingFor == ["go"] and .signals == []'
    signal "$id" go '"two"'
    assert_status 202
    rn_wait "$id" '.status == "completed" and .state == {first: 1, second: "two", done: true}'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "signal:received") | .payload.name] == ["go", "start", "go"]'
    check "$T/ev.json" '[.[] | .type] | index("signal:received") < index("timer:fired")'
    check "$T/ev.json" '[.[] | select(.type == "step:completed" and .payload.phase == "go") | .payload.signal] == ["start", null, "go", "go"]'
    # A session keeps at most DSTREAM_SIGNALS_PENDING_MAX (3 here) signals not yet taken.
    w2=$(wf '[{kind: "sleep", duration: "1h"}, {kind: "wait", signals: {go: {}}}]')
    id=$(rn_session "{\"workflow\": \"$w2\"}")
    for i in 1 2 3; do signal "$id" go "$i"; assert_status 202; done
    signal "$id" go 4
    assert_status 409
    assert_json_error too_many_signals
    req POST "/v1/sessions/$id/cancel"
}

@test "wait: the timeout fires once and takes the timeout's branch; without onTimeout it fails the workflow" {
    w=$(wf '[{kind: "wait", signals: {go: {}}, timeout: 300, onTimeout: {to: "late", update: {timedOut: true}}}]' \
        '[{name: "late", terminal: true}]')
    id=$(rn_session "{\"workflow\": \"$w\"}")
    rn_wait "$id" '.status == "completed"'
    check "$DS_BODY" '.state == {timedOut: true} and .phase == "late"'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "timer:fired")] | length == 1'
    check "$T/ev.json" '[.[] | select(.type == "step:completed")][0].payload == {phase: "go", step: 0, timeout: true, to: "late"}'
    # A signal now: the session has finished.
    signal "$id" go
    assert_status 409
    assert_json_error session_finished
    w=$(wf '[{kind: "wait", signals: {go: {}}, timeout: "200ms"}]')
    id=$(rn_session "{\"workflow\": \"$w\"}")
    rn_wait "$id" '.status == "failed"'
    check "$DS_BODY" '.error == "the wait timed out"'
}

# ---- across a kill -9 ----------------------------------------------------------------

@test "kill -9: a sleep, a wait's timeout and a wait for a signal sent while no runner runs each end once after the restart" {
    ws=$(wf '[{kind: "sleep", duration: "2s"}]')
    wt=$(wf '[{kind: "wait", signals: {go: {}}, timeout: "2500ms", onTimeout: {update: {late: true}}}]')
    wg=$(wf '[{kind: "wait", signals: {go: {update: {got: "$payload"}}}}]')
    a=$(rn_session "{\"workflow\": \"$ws\"}")
    b=$(rn_session "{\"workflow\": \"$wt\"}")
    c=$(rn_session "{\"workflow\": \"$wg\"}")
    rn_wait "$a" '.timerAt != null'
    rn_wait "$b" '.timerAt != null'
    rn_wait "$c" '.waitingFor == ["go"]'
    rn_runner_signal KILL
    signal "$c" go '"while down"'
    assert_status 202
    rn_runner_start
    rn_wait "$a" '.status == "completed"'
    rn_wait "$b" '.status == "completed" and .state == {late: true, done: true}'
    rn_wait "$c" '.status == "completed" and .state == {got: "while down", done: true}'
    for s in "$a" "$b"; do
        rn_events "$s" >"$T/ev.json"
        check "$T/ev.json" '[.[] | select(.type == "timer:set")] | length == 1'
        check "$T/ev.json" '[.[] | select(.type == "timer:fired")] | length == 1'
        due=$(jq -r '[.[] | select(.type == "timer:set")][0].payload.dueAt' "$T/ev.json")
        [ "$(ms_of "$(jq -r '[.[] | select(.type == "timer:fired")][0].createdAt' "$T/ev.json")")" -ge "$due" ]
    done
}

# ---- the route's errors and scopes ---------------------------------------------------

@test "signals: unknown session 404, bad name 400, bad or too large payload 400/413/415, a signal no wait names 409, GET 405: JSON errors" {
    w=$(wf '[{kind: "wait", signals: {go: {}}}]')
    id=$(rn_session "{\"workflow\": \"$w\"}")
    signal no-such-session go '{}'
    assert_status 404
    assert_json_error not_found
    signal "$id" 'bad@name' '{}'
    assert_status 400
    assert_json_error bad_signal_name
    signal "$id" "$(printf 'x%.0s' $(seq 65))" '{}'
    assert_status 400
    assert_json_error bad_signal_name
    signal "$id" go '{"open": '
    assert_status 400
    assert_json_error invalid_json
    signal "$id" go "$(jq -nc --arg s "$(printf 'y%.0s' $(seq 1100))" '{s: $s}')"
    assert_status 413
    assert_json_error payload_too_large
    req POST "/v1/sessions/$id/signals/go" -H 'Content-Type: text/plain' --data-binary 'hello'
    assert_status 415
    assert_json_error unsupported_media_type
    signal "$id" other '{}'
    assert_status 409
    assert_json_error signal_not_awaited
    req GET "/v1/sessions/$id/signals/go"
    assert_status 405
    assert_json_error
    # A chat has no wait steps.
    agent=$(rn_agent anthropic claude-test-model)
    chat=$(rn_session "{\"agent\": \"$agent\"}")
    signal "$chat" go '{}'
    assert_status 409
    assert_json_error signal_not_awaited
    # None of these was recorded; the session still waits.
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "signal:received")] == []'
    signal "$id" go
    assert_status 202
    rn_wait "$id" '.status == "completed"'
}

@test "signals: a token needs sessions:write on the session (read-only or another session's: 403)" {
    w=$(wf '[{kind: "wait", signals: {go: {update: {ok: true}}}}]')
    id=$(rn_session "{\"workflow\": \"$w\", \"id\": \"sig-$(ds_name s)\"}")
    mk() { "$DS_BIN/dstream" --db "$DS_DB" token create --name "$1" "${@:2}" 2>/dev/null | tail -n 1; }
    ro=$(mk ro --scope "sessions:read:$id")
    other=$(mk other --scope "sessions:write:nothing-like-it")
    rw=$(mk rw --scope "sessions:write:$id")
    post() { curl -q -sS -o "$T/out" -w '%{http_code}' -X POST -H "Authorization: Bearer $1" "$DS_URL/v1/sessions/$id/signals/go"; }
    [ "$(post "$ro")" = 403 ] && jq -e '.error.code | type == "string"' "$T/out"
    [ "$(post "$other")" = 403 ] && jq -e '.error.code | type == "string"' "$T/out"
    [ "$(post bogus-token)" = 401 ]
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "signal:received")] == []'
    [ "$(post "$rw")" = 202 ]
    rn_wait "$id" '.status == "completed" and .state == {ok: true, done: true}'
}

@test "validation: sleep and wait steps' mistakes are named when the workflow is stored" {
    req POST /v1/workflows -H 'Content-Type: application/json' --data-binary '{"name": "bad-timers", "phases": [
        {"name": "a", "terminal": true, "steps": [
            {"kind": "sleep", "duration": "5 minutes"},
            {"kind": "sleep"},
            {"kind": "sleep", "duration": "1s", "until": "{{state.t}}"},
            {"kind": "sleep", "duration": -1},
            {"kind": "wait", "signals": {}},
            {"kind": "wait", "signals": {"go": {"to": "nowhere", "update": {"x": "$response"}}, "bad name": {}},
             "onTimeout": {"to": "a"}}]}]}'
    assert_status 400
    assert_json_error invalid_workflow
    check "$DS_BODY" '.error.details | map(select(test("phases\\[0\\].steps"))) | length >= 8'
    check "$DS_BODY" '.error.details | any(test("steps\\[0\\].duration: must be a duration"))'
    check "$DS_BODY" '.error.details | any(test("steps\\[1\\]: a sleep step needs exactly one of duration and until"))'
    check "$DS_BODY" '.error.details | any(test("steps\\[2\\]: a sleep step needs exactly one"))'
    check "$DS_BODY" '.error.details | any(test("steps\\[3\\].duration: must be from 0"))'
    check "$DS_BODY" '.error.details | any(test("steps\\[4\\].signals: must be an object of 1 to 16 signals"))'
    check "$DS_BODY" '.error.details | any(test("steps\\[5\\].signals.go.to: no phase named \"nowhere\""))'
    check "$DS_BODY" '.error.details | any(test("signals.go.update.x: \"\\$response\" exists only in human steps"))'
    check "$DS_BODY" '.error.details | any(test("steps\\[5\\].onTimeout: needs timeout"))'
}

# ---- sleeping sessions cost nothing --------------------------------------------------

# cpu_ticks PID: the process's user + system time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# kept N: the runner's metrics say it keeps N sessions and leases none.
kept() {
    req GET /metrics
    grep -q "^dstream_runner_sessions{.*state=\"known\"} $1\$" "$DS_BODY" &&
        grep -q '^dstream_runner_sessions{.*state="leased"} 0$' "$DS_BODY"
}

@test "load: 1,000 sleeping sessions: each is parked (no lease), the runner's CPU over 3 s stays small, and after a kill -9 the next runner parks them again" {
    w=$(wf '[{kind: "sleep", duration: "1h"}]')
    start=$(date +%s%N)
    seq 1000 | xargs -P 4 -I{} curl -sS -o /dev/null -X POST -H 'Content-Type: application/json' \
        --data-binary "{\"workflow\": \"$w\", \"id\": \"zz-sleep-{}\"}" "$DS_URL/v1/sessions"
    # Every one has set its timer and let its lease go (bounded wait).
    ds_poll 120 kept 1000 || { grep '^dstream_runner_sessions' "$DS_BODY" >&2; false; }
    echo "# 1,000 sessions created and parked in $((($(date +%s%N) - start) / 1000000)) ms" >&3
    pid=$(rn_runner_pid)
    t0=$(cpu_ticks "$pid")
    start=$(date +%s%N)
    ds_poll 3 false || true     # three seconds of nothing to do
    t1=$(cpu_ticks "$pid")
    elapsed=$((($(date +%s%N) - start) / 10000000))     # in ticks of 10 ms
    echo "# runner CPU: $((t1 - t0)) ticks in $elapsed" >&3
    # Generously: under a fifth of one core (an idle runner turns once a second).
    [ $(((t1 - t0) * 5)) -lt "$elapsed" ]
    # After a kill -9, the next runner finds them in the log and parks them again.
    rn_runner_signal KILL
    start=$(date +%s%N)
    rn_runner_start
    ds_poll 60 kept 1000 || { grep '^dstream_runner_sessions' "$DS_BODY" >&2; false; }
    echo "# after a kill -9, parked again in $((($(date +%s%N) - start) / 1000000)) ms" >&3
    for i in $(seq 1000); do echo "zz-sleep-$i"; done | xargs -P 4 -I{} curl -sS -o /dev/null -X DELETE "$DS_URL/v1/sessions/{}"
}
