#!/usr/bin/env bats
# The runner's loop with many transfers on its curl multi handle at once (runner/
# curlev.c: libcurl handed only the sockets that are ready, and its timer when due):
# two dozen sessions streaming together all finish with their whole reply, while one
# session's provider stalls mid-stream (its transfer idle on a quiet socket, then
# cancelled) and another's connection is cut mid-stream (retried, the reply continued);
# and a webhook receiver that holds the wake past DSTREAM_WEBHOOK_TIMEOUT_MS while no
# other transfer is in flight: the delivery times out on libcurl's timer alone (the
# loop must wake up for it), is retried and acked while sessions stream. And a runner
# whose drives stop at their budget after every one (DSTREAM_RUNNER_DRIVE_BUDGET_US=1)
# still answers every session once, and wakes every sleeping session it parked in the
# pass of those put off (each alone, at a time of its own); and a commit of few
# sessions' deltas lets the next go at once (DSTREAM_RUNNER_FLUSH_SMALL), whatever
# DSTREAM_RUNNER_FLUSH_MS says; and a user's message posted the moment the runner
# committed the last reply is seen and answered, for many sessions at once.
#
# One stack and one mock for the file (runner-helpers.bash). Waits are polls with
# deadlines; every load is bounded in count.

load runner-helpers

RECEIVER=$DS_ROOT/tests/http/tools/webhook-receiver.mjs
MANY=24

setup_file() { rn_start DSTREAM_WEBHOOK_ALLOW=127.0.0.2 DSTREAM_WEBHOOK_TIMEOUT_MS=1000; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
    rn_slow_default 20     # about 60 deltas, 20 ms apart, naming the question
}
teardown() {
    rn_test_teardown
    ds_bg_stop
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default"
}

_count_ge() { [ "$(rn_request_count)" -ge "$1" ]; }

# start_many AGENT PREFIX: MANY sessions, each asked "PREFIX-N"; their ids in $T/ids.
start_many() {
    local i id
    : >"$T/ids"
    for i in $(seq 1 "$MANY"); do
        id=$(rn_session "{\"agent\": \"$1\"}") || return 1
        rn_say "$id" "$2-$i" || return 1
        echo "$id $2-$i" >>"$T/ids"
    done
}

# all_replied: every session of $T/ids completed with its one whole reply (those
# found so far are remembered in $T/done).
all_replied() {
    local id q
    touch "$T/done"
    while read -r id q; do
        grep -qx "$id" "$T/done" && continue
        rn_get "$id" && rn_one_reply "$DS_BODY" "$(rn_slow_expected "$q")" || return 1
        echo "$id" >>"$T/done"
    done <"$T/ids"
}

@test "$MANY sessions streaming at once all finish whole, while one provider stalls mid-stream (then cancelled) and one connection is cut (retried)" {
    local agent stalled cut
    agent=$(rn_agent anthropic claude-test-model)
    # The stalled one: its reply starts, then nothing comes (until it is cancelled).
    stalled=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script '{"hang": true}'
    rn_say "$stalled" "stall"
    ds_poll 10 _count_ge 1
    # The cut one: a few deltas, then the connection is closed mid-stream; the retry
    # gets the default reply.
    cut=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "$(jq -nc '{text: "cut short in the middle of a long reply", chunkSize: 4, delayMs: 20, cutAfter: 3}')"
    rn_say "$cut" "cut"
    ds_poll 10 _count_ge 2
    start_many "$agent" q
    ds_poll 90 all_replied || { echo "replied: $(wc -l <"$T/done") of $MANY" >&2; tail -20 "$DS_DIR/logs/runner.log" >&2; return 1; }
    # (the retry continues the reply from what the cut attempt had said)
    rn_wait "$cut" ".status == \"completed\" and (.messages | length) == 2 and
        (.messages[1].content | startswith(\"cut short\") and endswith(\"$(rn_slow_expected cut)\"))" 30
    # The stalled request is still in flight through all of it; a cancel cuts it.
    rn_holds "$stalled" '.request != null and .status != "completed"'
    req POST "/v1/sessions/$stalled/cancel"
    assert_status 202
    rn_wait "$stalled" '.status == "cancelled" and .request == null'
    # One request per session, two for the cut one (its retry).
    rn_requests >"$T/requests.json"
    jq -e --argjson n "$((MANY + 3))" 'length == $n' "$T/requests.json" >/dev/null ||
        { jq length "$T/requests.json" >&2; return 1; }
}

# budget_start AGENT: the runner started again with a drive budget spent after every
# drive (DSTREAM_RUNNER_DRIVE_BUDGET_US=1), and a session of AGENT's whose request hangs
# (its id in HELD): while a request is in flight the budget holds. budget_end: that
# session cancelled, the runner stopped, and its last line counts turns it cut.
budget_start() {
    rn_runner_signal TERM
    DS_SETTINGS="$DS_SETTINGS DSTREAM_RUNNER_DRIVE_BUDGET_US=1" rn_runner_start
    HELD=$(rn_session "{\"agent\": \"$1\"}")
    rn_script '{"hang": true}'
    rn_say "$HELD" "hold"
    ds_poll 10 _count_ge 1
}
budget_end() {
    local line
    req POST "/v1/sessions/$HELD/cancel"
    assert_status 202
    rn_wait "$HELD" '.status == "cancelled" and .request == null'
    rn_runner_signal TERM
    line=$(grep 'dstream-runner: stopped (' "$DS_DIR/logs/runner.log" | tail -n 1)    # (this one's: the last to stop)
    [[ "$line" =~ \ ([0-9]+)\ turns\ whose\ drives\ were\ cut ]] || fail "no count in: $line"
    [ "${BASH_REMATCH[1]}" -gt 0 ] || fail "no turn was cut: $line"
}

@test "a drive budget spent after every drive (DSTREAM_RUNNER_DRIVE_BUDGET_US=1): $MANY sessions asked at once while another's request is in flight are all answered, each once; the turns cut at the budget are counted" {
    local agent i id
    agent=$(rn_agent anthropic claude-test-model)
    # This runner drives one session a turn while any request is in flight: the
    # sessions put off go first at the next turn, none is left behind.
    budget_start "$agent"
    # Every message in one curl, 24 at a time: their claims come together, and so do
    # their drives at the next turn.
    : >"$T/ids"
    : >"$T/post.cfg"
    for i in $(seq 1 "$MANY"); do
        id=$(rn_session "{\"agent\": \"$agent\"}")
        echo "$id b-$i" >>"$T/ids"
        [ "$i" = 1 ] || echo next >>"$T/post.cfg"
        printf 'url = "%s/v1/sessions/%s/messages"\nheader = "Content-Type: application/json"\ndata-binary = "{\\"content\\": \\"b-%s\\"}"\noutput = "/dev/null"\n' \
            "$DS_URL" "$id" "$i" >>"$T/post.cfg"
    done
    curl -fsS --parallel --parallel-max "$MANY" -K "$T/post.cfg"
    ds_poll 90 all_replied || { echo "replied: $(wc -l <"$T/done") of $MANY" >&2; tail -20 "$DS_DIR/logs/runner.log" >&2; return 1; }
    rn_requests >"$T/requests.json"
    jq -e --argjson n "$((MANY + 1))" 'length == $n' "$T/requests.json" >/dev/null ||
        { jq length "$T/requests.json" >&2; return 1; }
    budget_end
}

@test "a drive budget spent after every drive: $MANY workflows started at once while a request is in flight, each asleep until a time of its own (150 ms apart), all wake and complete (a session parked by a drive of the pass that goes first is driven when its timer puts it back alone)" {
    local agent name i id now
    agent=$(rn_agent anthropic claude-test-model)
    budget_start "$agent"
    name=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$name" '{name: $n, initialState: {},
        phases: [{name: "go", steps: [{kind: "sleep", until: "{{input.ms}}"}], transitions: [{to: "done"}]},
                 {name: "done", terminal: true, steps: [{kind: "update", set: {done: true}}]}]}')"
    # Every session in one curl: their drives come together, most of them in the
    # pass of those the last turn put off, and each ends parked until its time (3 s
    # on, after the last is asleep even on a loaded machine), which comes when no
    # other session is driven.
    : >"$T/post.cfg"
    now=$(date +%s%3N)
    for i in $(seq 1 "$MANY"); do
        [ "$i" = 1 ] || echo next >>"$T/post.cfg"
        printf 'url = "%s/v1/sessions"\nheader = "Content-Type: application/json"\ndata-binary = "{\\"workflow\\": \\"%s\\", \\"input\\": {\\"ms\\": %s}}"\noutput = "%s/s-%s.json"\n' \
            "$DS_URL" "$name" "$((now + 3000 + 150 * i))" "$T" "$i" >>"$T/post.cfg"
    done
    curl -fsS --parallel --parallel-max "$MANY" -K "$T/post.cfg"
    for i in $(seq 1 "$MANY"); do
        id=$(jq -r .id "$T/s-$i.json")
        rn_wait "$id" '.status == "completed" and .state.done == true' 30
    done
    budget_end
}

# deltas_with SETTINGS...: a runner with these settings answers one session with the
# slow reply (about 60 deltas 20 ms apart); prints how many text:delta events its log
# holds (a commit makes one of a session's deltas gathered since the last).
deltas_with() {
    local agent id
    rn_runner_signal TERM
    DS_SETTINGS="$DS_SETTINGS $*" rn_runner_start
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "flush"
    rn_wait "$id" '.status == "completed"' 30 >&2 || return 1
    rn_get "$id" && rn_one_reply "$DS_BODY" "$(rn_slow_expected flush)" || { cat "$DS_BODY" >&2; return 1; }
    rn_events "$id" | jq '[.[] | select(.type == "text:delta")] | length'
}

@test "a commit of few sessions' deltas lets the next go at once (DSTREAM_RUNNER_FLUSH_SMALL): one reply under a 1 s gap between commits still streams delta by delta; with the rule off, in a few clumps" {
    local n
    # (the reply's 60 deltas take 1.2 s: under the gap alone, 2 or 3 commits)
    n=$(deltas_with DSTREAM_RUNNER_FLUSH_MS=1000) || return 1
    [ "$n" -ge 20 ] || fail "$n delta events with the default DSTREAM_RUNNER_FLUSH_SMALL"
    n=$(deltas_with DSTREAM_RUNNER_FLUSH_MS=1000 DSTREAM_RUNNER_FLUSH_SMALL=0) || return 1
    [ "$n" -le 5 ] || fail "$n delta events with DSTREAM_RUNNER_FLUSH_SMALL=0"
    rn_runner_signal TERM     # (the next test's setup starts the stack's own again)
}

# turns ID N PREFIX: ask session ID N questions "PREFIX-1".. one after another, each
# the moment the reply to the last has been committed (a request of its own dir, so
# that it can run beside others).
turns() {
    local k
    BATS_TEST_TMPDIR=$T/turns-$3
    mkdir -p "$BATS_TEST_TMPDIR"
    for k in $(seq "$2"); do
        rn_say "$1" "$3-$k" || return 1
        ds_poll 60 rn_holds "$1" "$(printf '.status == "completed" and ([.messages[] | select(.role == "assistant")] | length) == %d' "$k")" || return 1
    done
    echo done >"$T/turns-$3.done"
}

_turns_done() { [ "$(ls "$T"/turns-*.done 2>/dev/null | wc -l)" -eq "$1" ]; }

@test "a user's message posted the moment the runner committed the last reply is seen and answered: 12 sessions of 4 turns each, each turn asked so while the others stream, every turn answered once" {
    local agent i k ids=() n=12
    agent=$(rn_agent anthropic claude-test-model)
    for i in $(seq $n); do ids+=("$(rn_session "{\"agent\": \"$agent\"}")") || return 1; done
    for i in $(seq $n); do
        turns "${ids[i - 1]}" 4 "q$i" &
        BG_PIDS+=("$!")
    done
    ds_poll 120 _turns_done $n ||
        { ls "$T"; tail -20 "$DS_DIR/logs/runner.log"; fail "not every session's four turns were answered"; }
    for i in $(seq $n); do
        rn_get "${ids[i - 1]}" || return 1
        for k in 1 2 3 4; do
            jq -e --argjson k "$k" --arg q "q$i-$k" --arg a "$(rn_slow_expected "q$i-$k")" \
                '.messages[2 * ($k - 1)].content == $q and .messages[2 * $k - 1].content == $a
                 and ([.messages[] | select(.role == "assistant")] | length) == 4' "$DS_BODY" >/dev/null ||
                { jq -c '.messages' "$DS_BODY"; fail "session $i, turn $k"; }
        done
    done
}

received() { [ -f "$T/$1/requests.jsonl" ] && wc -l <"$T/$1/requests.jsonl" || echo 0; }
_received_ge() { [ "$(received "$1")" -ge "$2" ]; }
sub_is() {
    req GET "/v1/stream/__ds/subscriptions/$1"
    [ "$status_code" = 200 ] && jq -e "$2" <<<"$body" >/dev/null
}

@test "a webhook receiver holding the wake past DSTREAM_WEBHOOK_TIMEOUT_MS on an idle runner: the delivery times out on libcurl's timer alone, is retried and acked while sessions stream" {
    local agent tail
    mkdir -p "$T/r"
    spawn "$T/r/log" node "$RECEIVER" 127.0.0.2 "$T/r"
    ds_poll 10 test -s "$T/r/url"
    printf '%s\n' '{"hold": true}' >"$T/r/response.json"
    req PUT /v1/stream/__ds/subscriptions/t1 -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg u "$(cat "$T/r/url")/hook" '{type: "webhook", pattern: "t1/*", webhook: {url: $u}}')"
    assert_status 201
    req PUT /v1/stream/t1/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    ds_poll 10 _received_ge r 1
    # Held, with no other transfer in flight: only libcurl's timer, which the loop
    # must wake up for, ends it (the receiver never answers nor closes).
    ds_poll 20 grep -q 'subscription t1: webhook delivery failed: Timeout was reached' "$DS_DIR/logs/runner.log"
    printf '%s\n' '{"body": {"done": true}}' >"$T/r/response.json"
    agent=$(rn_agent anthropic claude-test-model)
    start_many "$agent" w
    ds_poll 30 _received_ge r 2
    tail=$(req HEAD /v1/stream/t1/a && header Stream-Next-Offset)
    ds_poll 10 sub_is t1 "[.streams[] | select(.path == \"t1/a\") | .acked_offset == \"$tail\"] | any"
    ds_poll 90 all_replied || { echo "replied: $(wc -l <"$T/done") of $MANY" >&2; return 1; }
    req DELETE /v1/stream/__ds/subscriptions/t1
    assert_status 204
}
