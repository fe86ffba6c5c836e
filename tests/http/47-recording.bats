#!/usr/bin/env bats
# Recording and playback (docs/recording.md) through the real stack with the mock
# provider: a chat and a workflow recorded, then played back with the mock stopped
# (SIGSTOP: a request sent to it would hang, never be answered) giving the same
# events with the same chunking; a playback miss with its explicit event naming the
# key and the differing field; a hybrid fork that changes one answer and calls the
# provider only after the change, with its drift report; a 529 then a 200 replayed
# in order; kill -9 of the runner mid-stream while recording leaves an incomplete
# recording that playback never serves; no provider key in any recording; an MCP
# server's tool list recorded, so that playback never starts the server.
#
# One stack and one mock for the file; waits are polls with deadlines.

load runner-helpers

# Two MCP servers, tests/mcp/test-server.mjs: t, whose side-effecting "count" tool
# counts its calls in $STATE/count; p, stopped when idle for 300 ms, which logs
# every message it gets in $PSTATE/received.jsonl (its starts are its initializes).
setup_file() {
    MCP_TMP=$(mktemp -d -t dstream-rec-mcp.XXXXXX)
    STATE=$MCP_TMP/state
    PSTATE=$MCP_TMP/pstate
    HSTATE=$MCP_TMP/hstate
    GSTATE=$MCP_TMP/gstate
    mkdir -p "$STATE" "$PSTATE" "$HSTATE" "$GSTATE"
    jq -n --arg node "$(command -v node)" --arg ts "$DS_ROOT/tests/mcp/test-server.mjs" --arg state "$STATE" \
        --arg pstate "$PSTATE" --arg hstate "$HSTATE" --arg gstate "$GSTATE" \
        '{mcpServers: {t: {command: $node, args: [$ts, "--state", $state], timeoutMs: 5000},
                       p: {command: $node, args: [$ts, "--state", $pstate], timeoutMs: 5000, idleStopMs: 300},
                       h: {command: $node, args: [$ts, "--state", $hstate], timeoutMs: 120000},
                       g: {command: $node, args: [$ts, "--state", $gstate, "--grow"], timeoutMs: 5000}}}' \
        >"$MCP_TMP/mcp.json"
    chmod 644 "$MCP_TMP/mcp.json"
    export MCP_TMP STATE PSTATE HSTATE GSTATE
    rn_start DSTREAM_MCP_CONFIG="$MCP_TMP/mcp.json"
}
teardown_file() {
    [ -n "${RN_MOCK_PID:-}" ] && kill -CONT "$RN_MOCK_PID" 2>/dev/null
    rn_stop
    [ -n "${MCP_TMP:-}" ] && rm -rf "$MCP_TMP"
    return 0
}
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() {
    kill -CONT "$RN_MOCK_PID" 2>/dev/null || true
    rn_test_teardown
}

# A reply in many pieces, 20 ms apart: several flushes, so several deltas.
chunky_reply() { jq -nc --arg t "$1" '{text: $t, chunkSize: 3, delayMs: 20, usage: {input: 12, output: 9}}'; }
quick_reply() { jq -nc --arg t "$1" '{text: $t, usage: {input: 20, output: 5}}'; }

# check FILE JQ: the jq program holds on FILE, else print both and fail.
check() {
    jq -e "$2" "$1" >/dev/null || {
        echo "does not hold: $2" >&2
        jq -c . "$1" | head -c 6000 >&2
        return 1
    }
}

# The events as compared between a run and its playback: without recording events
# and the session's own creation, with nothing that names an id or a time.
NORM='[.[] | select(.type != "recording:request" and .type != "session:created")
       | {type, actor, payload: (.payload | walk(if type == "object"
             then del(.requestId, .callId, .createdAt, .durationMs, .retryAt, .at, .interactionOffset) else . end))}]'

# mock_stop / mock_cont: the mock stops answering (a request would hang) / answers again.
mock_stop() { kill -STOP "$RN_MOCK_PID"; }
mock_cont() { kill -CONT "$RN_MOCK_PID"; }

# played_tool_call REC PLAY: PLAY (events) answered a request, its tool call and the
# next request from recordings, with the same events as REC otherwise.
played_tool_call() {
    check "$2" '[.[] | select(.type == "recording:request") | [(.payload.kind // "provider"), .payload.outcome]]
        == [["provider", "hit"], ["tool", "hit"], ["provider", "hit"]]'
    jq "$NORM" "$1" >"$T/a.json"
    jq "$NORM" "$2" >"$T/b.json"
    diff "$T/a.json" "$T/b.json"
}

sql() { ds_sql "$1"; }

# echo_session AGENT MODE CALL_ID SERVER: a session of AGENT in MODE that says "Echo.":
# with the mock's two replies scripted (record) the model calls SERVER__echo (id
# CALL_ID, "" for none) and answers "Echoed."; waits for that answer; prints the id.
echo_session() {
    local id
    if [ "$2" = record ]; then
        rn_script "$(jq -nc --arg id "$3" --arg t "$4__echo" \
            '{replies: [{toolCalls: [{id: $id, name: $t, arguments: {text: "hi"}}]}, {text: "Echoed."}]}')" || return 1
    fi
    id=$(rn_session "{\"agent\": \"$1\", \"mode\": \"$2\"}") || return 1
    rn_say "$id" "Echo." >&2 || return 1
    rn_wait "$id" 'any(.messages[]; .content == "Echoed.") and .request == null' >&2 || return 1
    echo "$id"
}

# tool_agent SERVER [PROVIDER MODEL]: store an agent (the mock's anthropic model by
# default) that uses the MCP server SERVER; print its name.
tool_agent() {
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$(ds_name agent)" \
        --arg s "$1" --arg p "${2:-anthropic}" --arg m "${3:-claude-test-model}" \
        '{name: $n, provider: $p, model: $m, mcpServers: [$s]}')"
    [ "$status_code" = 201 ] || { echo "agent: $status_code $body" >&2; return 1; }
    jq -r .name "$DS_BODY"
}
# sql_holds QUERY OP VALUE: the query's answer, asked now, compares (test OP) to VALUE (for ds_poll).
sql_holds() { test "$(sql "$1")" "$2" "$3"; }

@test "recording: a chat recorded live is played back with the mock stopped: the same events, the same deltas; no key in any recording" {
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "{\"replies\": [$(chunky_reply "The first answer, in several small pieces."), $(chunky_reply "And a second one, also in pieces.")]}"
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$rec" "Hello"
    rn_wait "$rec" '(.messages | length) == 2 and .request == null'
    rn_say "$rec" "Again"
    rn_wait "$rec" '(.messages | length) == 4 and .request == null'
    [ "$(rn_request_count)" = 2 ]
    rn_events "$rec" >"$T/rec.json"
    check "$T/rec.json" '[.[] | select(.type == "text:delta")] | length > 2'
    check "$T/rec.json" '[.[] | select(.type == "recording:request") | .payload.outcome] == ["recorded", "recorded"]'
    [ "$(sql "SELECT count(*) FROM recordings WHERE session = '$rec' AND complete = 1")" = 2 ]
    # The provider key reached the mock, never a recording.
    rn_requests | grep -q "$RN_KEY"
    [ "$(grep -c "$RN_KEY" "$DS_DIR/logs/runner.log")" = 0 ]
    if ds_is_pg; then
        pg_dump -d "$DS_DB" -t recordings -t recording_chunks -f "$T/dump.sql"
    else
        sqlite3 "$DS_DB" '.dump recordings recording_chunks' >"$T/dump.sql"
    fi
    [ -s "$T/dump.sql" ]
    [ "$(grep -c "$RN_KEY" "$T/dump.sql")" = 0 ]
    [ "$(grep -c "127.0.0.1" "$T/dump.sql")" = 0 ]

    mock_stop
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Hello"
    rn_wait "$play" '(.messages | length) == 2 and .request == null'
    rn_say "$play" "Again"
    rn_wait "$play" '(.messages | length) == 4 and .request == null'
    mock_cont
    [ "$(rn_request_count)" = 2 ]
    rn_events "$play" >"$T/play.json"
    check "$T/play.json" '[.[] | select(.type == "recording:request") | .payload.outcome] == ["hit", "hit"]'
    jq "$NORM" "$T/rec.json" >"$T/a.json"
    jq "$NORM" "$T/play.json" >"$T/b.json"
    diff "$T/a.json" "$T/b.json"
    # The same state, and the drift report says every request was a hit.
    rn_get "$rec"; jq -S '{messages, usage, costUsd} | walk(if type == "object" then del(.offset, .requestId) else . end)' "$DS_BODY" >"$T/sa.json"
    rn_get "$play"; jq -S '{messages, usage, costUsd} | walk(if type == "object" then del(.offset, .requestId) else . end)' "$DS_BODY" >"$T/sb.json"
    diff "$T/sa.json" "$T/sb.json"
    req GET "/v1/sessions/$play/drift"
    assert_status 200
    assert_body_json '.mode == "playback" and .hit == 2 and .miss == 0 and .diverged == 0 and (.requests | length) == 2'
    # In real time too (its pace is not asserted: the same events are).
    mock_stop
    slow=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\", \"timing\": \"realtime\"}")
    rn_say "$slow" "Hello"
    rn_wait "$slow" '(.messages | length) == 2 and .request == null'
    mock_cont
    rn_events "$slow" >"$T/slow.json"
    jq "[$NORM[] | select(.type == \"text:delta\")]" "$T/slow.json" >"$T/b1.json"
    n=$(jq length "$T/b1.json")
    [ "$n" -gt 1 ]
    jq "[$NORM[] | select(.type == \"text:delta\")] | .[0:$n]" "$T/rec.json" >"$T/a1.json"
    diff "$T/a1.json" "$T/b1.json"
    check "$T/slow.json" '[.[] | select(.type == "recording:request") | .payload.outcome] == ["hit"]'
}

# A workflow: a draft, a human checkpoint (text), an announcement that quotes the answer.
make_workflow() {
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{
        name: $n, initialState: {},
        phases: [
          {name: "draft", steps: [{kind: "agent", name: "Draft", agent: $a,
              prompt: "Write about {{input.topic}}.", update: {draft: "$output"}}],
           transitions: [{to: "ask"}]},
          {name: "ask", steps: [{kind: "human", id: "tone", input: "text",
              prompt: "Which tone for {{state.draft}}?", update: {tone: "$response"}}],
           transitions: [{to: "publish"}]},
          {name: "publish", terminal: true, steps: [{kind: "agent", name: "Announce", agent: $a,
              prompt: "Announce {{state.draft}} in a {{state.tone}} tone.", update: {announcement: "$output"}}]}
        ]}')"
}

answer() {
    req POST "/v1/sessions/$1/input" -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg r "$2" '{interactionId: "tone", response: $r}')"
    assert_status 202
}

record_workflow() {
    agent=$(rn_agent anthropic claude-test-model)
    make_workflow
    rn_script "{\"replies\": [$(chunky_reply "A draft about otters."), $(chunky_reply "Otters, announced warmly.")]}"
    rec=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w, input: {topic: "otters"}, mode: "record"}')")
    rn_wait "$rec" '.status == "awaiting_input"'
    answer "$rec" warm
    rn_wait "$rec" '.status == "completed"'
    [ "$(rn_request_count)" = 2 ]
}

@test "recording: a workflow with two agent steps and a checkpoint, replayed in playback with the mock stopped: the same events and final state" {
    record_workflow
    rn_events "$rec" >"$T/rec.json"
    mock_stop
    play=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w, input: {topic: "otters"}, mode: "playback", timing: "fast"}')")
    rn_wait "$play" '.status == "awaiting_input"'
    answer "$play" warm
    rn_wait "$play" '.status == "completed"'
    mock_cont
    [ "$(rn_request_count)" = 2 ]
    rn_events "$play" >"$T/play.json"
    jq "$NORM" "$T/rec.json" >"$T/a.json"
    jq "$NORM" "$T/play.json" >"$T/b.json"
    diff "$T/a.json" "$T/b.json"
    rn_get "$rec"; jq -S '{state, status, usage}' "$DS_BODY" >"$T/sa.json"
    rn_get "$play"; jq -S '{state, status, usage}' "$DS_BODY" >"$T/sb.json"
    diff "$T/sa.json" "$T/sb.json"
    check "$T/sb.json" '.state.announcement == "Otters, announced warmly."'
}

@test "recording: a playback miss fails the step with an event naming the key and the differing field (the system prompt)" {
    record_workflow
    # The agent's system prompt changes: every request of the workflow differs.
    req PUT "/v1/agents/$agent" -H 'Content-Type: application/json' \
        --data-binary '{"provider": "anthropic", "model": "claude-test-model", "system": "Be terse."}'
    assert_status 200
    play=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w, input: {topic: "otters"}, mode: "playback"}')")
    rn_wait "$play" '.status == "failed"'
    [ "$(rn_request_count)" = 2 ]
    rn_events "$play" >"$T/play.json"
    check "$T/play.json" '[.[] | select(.type == "recording:request")] | length == 1'
    check "$T/play.json" '[.[] | select(.type == "recording:request")][0].payload
        | .outcome == "diverged" and .mode == "playback" and (.key | test("^[0-9a-f]{64}$"))
          and .nearest.field == "system" and .nearest.recorded == "(absent)" and .nearest.requested == "\"Be terse.\""'
    key=$(jq -r '[.[] | select(.type == "recording:request")][0].payload.key' "$T/play.json")
    check "$T/play.json" '.[-1].type == "workflow:failed"'
    jq -r '.[-1].payload.error' "$T/play.json" >"$T/err.txt"
    grep -q "$key" "$T/err.txt"
    grep -q "differs at system" "$T/err.txt"
    check "$T/play.json" '.[-1].payload.reason == "playback_miss"'
    req GET "/v1/sessions/$play/drift"
    assert_body_json '.diverged == 1 and .requests[0].nearest.field == "system"'
}

@test "recording: a hybrid fork that changes the checkpoint's answer: the call before it from the recording, the one after it live; the drift report says so" {
    record_workflow
    rn_events "$rec" >"$T/rec.json"
    at=$(jq -r '[.[] | select(.type == "workflow:started")][0].offset' "$T/rec.json")
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    rn_script "$(quick_reply "Otters, announced coldly.")"
    req POST "/v1/sessions/$rec/fork" -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg at "$at" '{at: $at, mode: "hybrid"}')"
    assert_status 201
    fork=$(jq -r .id "$DS_BODY")
    rn_wait "$fork" '.status == "awaiting_input"'
    [ "$(rn_request_count)" = 0 ]      # the draft came from the recording
    answer "$fork" cold
    rn_wait "$fork" '.status == "completed"'
    [ "$(rn_request_count)" = 1 ]      # the announcement, which quotes the new answer, went live
    rn_get "$fork"
    check "$DS_BODY" '.state == {draft: "A draft about otters.", tone: "cold", announcement: "Otters, announced coldly."}'
    req GET "/v1/sessions/$fork/drift"
    assert_status 200
    cp "$DS_BODY" "$T/drift.json"
    check "$T/drift.json" '.mode == "hybrid" and .hit == 1 and .diverged == 1 and .miss == 0'
    check "$T/drift.json" '[.requests[].outcome] == ["hit", "diverged"]'
    check "$T/drift.json" '.requests[1].nearest.field == "messages[0].content[0].text" or .requests[1].nearest.field == "messages[0].content"'
    check "$T/drift.json" '.requests[0].recording.session == "'"$rec"'"'
    # The live call was recorded: a playback of the fork's answer now hits.
    [ "$(sql "SELECT count(*) FROM recordings WHERE session = '$fork' AND complete = 1")" = 1 ]
}

@test "recording: a 529 then a 200 are recorded under one key and replayed in that order" {
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "{\"replies\": [{\"status\": 529}, $(quick_reply "After the storm.")]}"
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$rec" "Hi"
    rn_wait "$rec" '(.messages | length) == 2 and .request == null'
    [ "$(sql "SELECT $(ds_sql_agg "occurrence || ':' || status || ':' || complete" ' ' id) FROM recordings WHERE session = '$rec'")" = "0:529:1 1:200:1" ]
    [ "$(sql "SELECT count(DISTINCT key) FROM recordings WHERE session = '$rec'")" = 1 ]
    mock_stop
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Hi"
    rn_wait "$play" '(.messages | length) == 2 and .request == null'
    mock_cont
    rn_events "$play" >"$T/play.json"
    check "$T/play.json" '[.[] | select(.type == "recording:request") | .payload.recording.occurrence] == [0, 1]'
    check "$T/play.json" '[.[] | select(.type == "provider:request_retried")][0].payload.status == 529'
    rn_get "$play"
    check "$DS_BODY" '.messages[1].content == "After the storm."'
}

@test "recording: kill -9 of the runner mid-stream leaves an incomplete recording; the retry's is complete and playback uses it" {
    agent=$(rn_agent anthropic claude-test-model)
    # The slow reply waits after 40 of its 93 deltas (holdAfter: 2 s of streaming, flushed
    # in several chunks) until the kill below closes its connection: the kill lands
    # mid-reply, however slowly the two polls before it run.
    slow=$(jq -nc --arg t "$(seq -s ' ' 1 120)" '{text: $t, chunkSize: 4, delayMs: 50, holdAfter: 40, usage: {input: 40, output: 60}}')
    rn_script "{\"replies\": [$slow, $(chunky_reply "Complete at last.")]}"
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$rec" "Count"
    ds_poll 20 rn_has_event "$rec" '.type == "text:delta"'
    ds_poll 20 sql_holds "SELECT count(*) FROM recording_chunks c JOIN recordings r ON r.id = c.recording WHERE r.session = '$rec'" -gt 1
    rn_runner_signal KILL
    [ "$(sql "SELECT count(*) FROM recordings WHERE session = '$rec' AND complete = 0")" = 1 ]
    rn_runner_start
    rn_wait "$rec" '(.messages | length) >= 2 and .request == null and (.messages[-1].content == "Complete at last.")' 30
    [ "$(sql "SELECT $(ds_sql_agg "occurrence || ':' || complete" ' ' id) FROM recordings WHERE session = '$rec'")" = "0:0 1:1" ]
    mock_stop
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Count"
    rn_wait "$play" '(.messages | length) == 2 and .request == null'
    mock_cont
    rn_get "$play"
    check "$DS_BODY" '.messages[1].content == "Complete at last."'
    rn_events "$play" >"$T/play.json"
    check "$T/play.json" '[.[] | select(.type == "recording:request") | .payload | [.outcome, .recording.occurrence]] == [["hit", 1]]'
    check "$T/play.json" '[.[] | select(.type == "provider:request_retried")] | length == 0'
}

@test "recording: a bad mode or timing is a 400; a fork inherits its source's mode unless it names one" {
    agent=$(rn_agent anthropic claude-test-model)
    req POST /v1/sessions -H 'Content-Type: application/json' --data-binary "{\"agent\": \"$agent\", \"mode\": \"replay\"}"
    assert_status 400
    assert_body_json '.error.code == "bad_mode"'
    req POST /v1/sessions -H 'Content-Type: application/json' --data-binary "{\"agent\": \"$agent\", \"timing\": 3}"
    assert_status 400
    assert_body_json '.error.code == "bad_timing"'
    id=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\", \"timing\": \"realtime\"}")
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary '{"mode": "x"}'
    assert_status 400
    req GET "/v1/sessions/nope-nope/drift"
    assert_status 404
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary '{}'
    assert_status 201
    f=$(jq -r .id "$DS_BODY")
    req GET "/v1/sessions/$f/drift"
    assert_body_json '.mode == "playback" and .requests == []'
}

count_file() { cat "$STATE/count" 2>/dev/null || echo 0; }

@test "recording: a tool call is recorded with its result; playback answers it from the recording without running it" {
    agent=$(tool_agent t)
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "c1", name: "t__count", arguments: {}}]}, {text: "Counted."}]}')"
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    before=$(count_file)
    rn_say "$rec" "Count."
    rn_wait "$rec" 'any(.messages[]; .content == "Counted.") and .request == null'
    [ "$(count_file)" = $((before + 1)) ]
    [ "$(sql "SELECT count(*) FROM recordings WHERE session = '$rec' AND kind = 'tool' AND complete = 1")" = 1 ]
    rn_events "$rec" >"$T/rec.json"

    mock_stop
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Count."
    rn_wait "$play" 'any(.messages[]; .content == "Counted.") and .request == null'
    mock_cont
    [ "$(count_file)" = $((before + 1)) ]      # not run again
    rn_events "$play" >"$T/play.json"
    played_tool_call "$T/rec.json" "$T/play.json"
}

@test "recording: a read-only tool call cut off by kill -9 runs again; made again later, playback gives each call its own answer" {
    agent=$(tool_agent h)
    rm -f "$HSTATE/ticks"
    touch "$HSTATE/hold"    # h__tick does not answer while it exists
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "c1", name: "h__tick", arguments: {}}]},
                                    {toolCalls: [{id: "c2", name: "h__tick", arguments: {}}]}, {text: "Ticked."}]}')"
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$rec" "Tick."
    # The first call is in flight, its recording opened: the runner dies under it.
    ds_poll 20 sql_holds "SELECT count(*) FROM recordings WHERE session = '$rec' AND kind = 'tool'" = 1
    rn_runner_signal KILL
    rm "$HSTATE/hold"
    rn_runner_start
    rn_wait "$rec" 'any(.messages[]; .content == "Ticked.") and .request == null' 30
    [ "$(cat "$HSTATE/ticks")" = 2 ]
    # The cut attempt stays incomplete; the two answers are answers 0 and 1 of one key.
    [ "$(sql "SELECT count(DISTINCT key) FROM recordings WHERE session = '$rec' AND kind = 'tool'")" = 1 ]
    [ "$(sql "SELECT $(ds_sql_agg x ' ') FROM (SELECT occurrence || ':' || complete || ':' || coalesce($(ds_sql_json meta ordinal), '-') AS x
              FROM recordings WHERE session = '$rec' AND kind = 'tool' ORDER BY occurrence) r")" = "0:0:- 1:1:0 2:1:1" ]
    rn_events "$rec" >"$T/rec.json"
    check "$T/rec.json" '[.[] | select(.type == "tool:result") | .payload.result | tostring | test("tick 1")] == [true, false]'
    check "$T/rec.json" '[.[] | select(.type == "tool:result") | .payload.result | tostring | test("tick 2")] == [false, true]'

    mock_stop
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Tick."
    rn_wait "$play" 'any(.messages[]; .content == "Ticked.") and .request == null'
    mock_cont
    [ "$(cat "$HSTATE/ticks")" = 2 ]      # not run
    rn_events "$play" >"$T/play.json"
    check "$T/play.json" '[.[] | select(.type == "recording:request") | [(.payload.kind // "provider"), .payload.outcome]]
        == [["provider", "hit"], ["tool", "hit"], ["provider", "hit"], ["tool", "hit"], ["provider", "hit"]]'
    check "$T/play.json" '[.[] | select(.type == "tool:result") | .payload.result | tostring | test("tick 1")] == [true, false]'
    check "$T/play.json" '[.[] | select(.type == "tool:result") | .payload.result | tostring | test("tick 2")] == [false, true]'
}

@test "recording: a playback miss in the turn after a tool call fails the reply once (no request loop); the next message is asked once" {
    agent=$(tool_agent t)
    rec=$(echo_session "$agent" record "c1" t)
    # The turn after the tool call is forgotten: playback misses it.
    key=$(sql "SELECT key FROM recordings WHERE session = '$rec' AND kind = 'provider' ORDER BY id DESC LIMIT 1")
    req DELETE "/v1/recordings/$key"
    assert_status 204
    mock_stop
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Echo."
    rn_wait "$play" '.status == "failed"'
    rn_say "$play" "Again."
    rn_wait "$play" '.status == "failed" and any(.messages[]; .content == "Again.")'
    mock_cont
    rn_events "$play" >"$T/play.json"
    # Before the fix the runner started the failed turn again at once, for ever (a
    # reply:failed a millisecond): the tool turn still looked due.
    check "$T/play.json" '[.[] | select(.type == "reply:failed")] | length == 2'
    check "$T/play.json" '[.[] | select(.type == "recording:request") | [(.payload.kind // "provider"), .payload.outcome]]
        == [["provider", "hit"], ["tool", "hit"], ["provider", "diverged"], ["provider", "diverged"]]'
}

@test "recording: a tool call that came without an id (some OpenAI-compatible servers) plays back past the call" {
    agent=$(tool_agent t openai gpt-test-model)
    rec=$(echo_session "$agent" record "" t)
    rn_events "$rec" >"$T/rec.json"
    # The id the runner made: from the request's key and ordinal, not from its random id.
    check "$T/rec.json" '[.[] | select(.type == "tool:called") | .payload.callId | test("^call_[0-9a-f]{24}_0$")] == [true]'

    mock_stop
    play=$(echo_session "$agent" playback "" "")
    mock_cont
    rn_events "$play" >"$T/play.json"
    played_tool_call "$T/rec.json" "$T/play.json"
    [ "$(jq -c '[.[] | select(.type == "tool:called") | .payload.callId]' "$T/rec.json")" = \
      "$(jq -c '[.[] | select(.type == "tool:called") | .payload.callId]' "$T/play.json")" ]
}

@test "recording: an MCP server whose tool list changes mid-session: playback offers each request the list it had" {
    agent=$(tool_agent g)
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "g1", name: "g__echo", arguments: {text: "first"}}]},
        {toolCalls: [{id: "g2", name: "g__grown", arguments: {text: "new"}}]}, {text: "Used the new tool."}]}')"
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$rec" "Echo, then use what appears."
    rn_wait "$rec" 'any(.messages[]; .content == "Used the new tool.") and .request == null' 30
    # Two lists recorded (the server grew at its first call); the three requests name theirs.
    [ "$(sql "SELECT $(ds_sql_agg occurrence ,) FROM (SELECT occurrence FROM recordings WHERE session = '$rec' AND kind = 'tools' ORDER BY id) o")" = "0,1" ]
    [ "$(sql "SELECT $(ds_sql_agg t ,) FROM (SELECT $(ds_sql_json meta tools.g) AS t FROM recordings
              WHERE session = '$rec' AND kind = 'provider' AND complete = 1 ORDER BY id) r")" = "0,1,1" ]
    rn_events "$rec" >"$T/rec.json"

    mock_stop
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Echo, then use what appears."
    rn_wait "$play" 'any(.messages[]; .content == "Used the new tool.") and .request == null' 30
    mock_cont
    rn_events "$play" >"$T/play.json"
    check "$T/play.json" '[.[] | select(.type == "recording:request") | [(.payload.kind // "provider"), .payload.outcome]]
        == [["provider", "hit"], ["tool", "hit"], ["provider", "hit"], ["tool", "hit"], ["provider", "hit"]]'
    jq "$NORM" "$T/rec.json" >"$T/a.json"
    jq "$NORM" "$T/play.json" >"$T/b.json"
    diff "$T/a.json" "$T/b.json"
}

@test "recordings: listed, read and deleted over HTTP (admin); exported without any key and imported back; retention" {
    CLI=$DS_BIN/dstream
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "$(chunky_reply "Worth keeping.")"
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$rec" "Keep"
    rn_wait "$rec" '(.messages | length) == 2 and .request == null'

    req GET "/v1/recordings?session=$rec"
    assert_status 200
    assert_body_json '(.recordings | length) == 1 and .recordings[0].complete == true and .recordings[0].model == "claude-test-model" and .recordings[0].bytes > 0 and .nextCursor == null'
    key=$(jq -r '.recordings[0].key' "$DS_BODY")
    req GET "/v1/recordings?model=claude-test-model&limit=1"
    assert_status 200
    assert_body_json '(.recordings | length) == 1'
    req GET "/v1/recordings?limit=0"
    assert_status 400
    req GET "/v1/recordings/$key"
    assert_status 200
    assert_body_json '[.recordings[0].request.messages[0] | .. | strings] | index("Keep") != null'
    assert_body_json '[.recordings[0].chunks[].data] | join("") | contains("text_delta")'
    req GET "/v1/recordings/nothex"
    assert_status 404

    # Export, with a key planted where a careless recorder would have put it.
    "$CLI" --db "$DS_DB" recordings export "$T/rec.jsonl" --session "$rec"
    [ "$(wc -l <"$T/rec.jsonl")" = 1 ]
    [ "$(grep -c "$RN_KEY" "$T/rec.jsonl")" = 0 ]
    [ "$(grep -c "x-api-key\|authorization" "$T/rec.jsonl")" = 0 ]

    req DELETE "/v1/recordings/$key"
    assert_status 204
    req DELETE "/v1/recordings/$key"
    assert_status 404
    mock_stop
    miss=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$miss" "Keep"
    rn_wait "$miss" '.status == "failed"'
    # Imported back, the same request plays back.
    "$CLI" --db "$DS_DB" recordings import "$T/rec.jsonl" | grep -q '^1 recording(s) imported'
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Keep"
    rn_wait "$play" '(.messages | length) == 2 and .request == null'
    mock_cont
    rn_get "$play"
    check "$DS_BODY" '.messages[1].content == "Worth keeping."'
    # A broken line imports nothing.
    printf '{"session": "x"}\n' >>"$T/rec.jsonl"
    run "$CLI" --db "$DS_DB" recordings import "$T/rec.jsonl"
    [ "$status" = 1 ]
    [[ "$output" == *"rec.jsonl:2:"* ]]

    # Retention: a deleted session takes its recordings, unless they are pinned.
    "$CLI" --db "$DS_DB" recordings pin "$key" | grep -q '^pinned 1 recording'
    req DELETE "/v1/sessions/$rec"
    assert_status 204
    [ "$(sql "SELECT count(*) FROM recordings WHERE key = '$key'")" = 1 ]
    "$CLI" --db "$DS_DB" recordings unpin "$key" >/dev/null
    rn_script "$(quick_reply "Short-lived.")"
    gone=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$gone" "Go"
    rn_wait "$gone" '(.messages | length) == 2 and .request == null'
    [ "$(sql "SELECT count(*) FROM recordings WHERE session = '$gone'")" = 1 ]
    req DELETE "/v1/sessions/$gone"
    assert_status 204
    [ "$(sql "SELECT count(*) FROM recordings WHERE session = '$gone'")" = 0 ]
    # Prune: a dry run says what it would free and frees nothing.
    before=$(sql "SELECT count(*) FROM recordings")
    "$CLI" --db "$DS_DB" recordings prune --older-than 0s --dry-run >"$T/prune.txt"
    grep -Eq "^would delete $before recording\(s\), [0-9]+ bytes" "$T/prune.txt"
    [ "$(sql "SELECT count(*) FROM recordings")" = "$before" ]
    run "$CLI" --db "$DS_DB" recordings prune --older-than 7x
    [ "$status" = 2 ]
}

@test "recording: playback takes an MCP server's tool list from the recording and never starts the server" {
    agent=$(tool_agent p)
    rec=$(echo_session "$agent" record "c1" p)
    # The list was recorded once, though the session asked for it at each of its two requests.
    [ "$(sql "SELECT count(*) FROM recordings WHERE session = '$rec' AND kind = 'tools' AND complete = 1")" = 1 ]
    [ "$(sql "SELECT provider || ' ' || model FROM recordings WHERE session = '$rec' AND kind = 'tools'")" = "p tools/list" ]
    rn_events "$rec" >"$T/rec.json"
    # Wait for the server to stop (idle), then count its starts.
    for _ in $(seq 100); do
        grep -q 'mcp p: idle, stopping' "$DS_DIR/logs/runner.log" && break
        sleep 0.1
    done
    grep -q 'mcp p: idle, stopping' "$DS_DIR/logs/runner.log"
    starts=$(grep -c '"initialize"' "$PSTATE/received.jsonl")
    [ "$starts" -ge 1 ]

    mock_stop
    play=$(echo_session "$agent" playback "" "")
    mock_cont
    [ "$(grep -c '"initialize"' "$PSTATE/received.jsonl")" = "$starts" ]   # never started
    rn_events "$play" >"$T/play.json"
    played_tool_call "$T/rec.json" "$T/play.json"
    # The list travels with an export and is checked on import like the rest.
    "$DS_BIN/dstream" --db "$DS_DB" recordings export "$T/rec.jsonl" --session "$rec"
    [ "$(jq -s 'map(select(.kind == "tools")) | length' "$T/rec.jsonl")" = 1 ]
    run "$DS_BIN/dstream" --db "$DS_DB" recordings import "$T/rec.jsonl"
    assert_success
    jq -c 'select(.kind == "tools") | .request.server = "q"' "$T/rec.jsonl" >"$T/bad.jsonl"
    run "$DS_BIN/dstream" --db "$DS_DB" recordings import "$T/bad.jsonl"
    [ "$status" = 1 ]
    [[ "$output" == *"key is not the key of request"* ]]
}

# tenant_token NAME: a token that reads and writes the sessions under NAME- (only those).
tenant_token() {
    "$DS_BIN/dstream" --db "$DS_DB" token create --name "$1-$(_rn_hex 4)" --scope "sessions:read:$1-" \
        --scope "sessions:write:$1-" 2>/dev/null | tail -n 1
}
# as TOKEN METHOD PATH [curl args...]: req to the server itself with TOKEN (not the admin proxy).
as() {
    local tok=$1 method=$2 path=$3
    shift 3
    req "$method" "$(cat "$DS_DIR/url-direct")$path" -H "Authorization: Bearer $tok" "$@"
}
# as_session TOKEN JSON: create a session with TOKEN; prints its id.
as_session() {
    as "$1" POST /v1/sessions -H 'Content-Type: application/json' --data-binary "$2"
    [ "$status_code" = 201 ] || { echo "session: $status_code $body" >&2; return 1; }
    jq -r .id "$DS_BODY"
}
as_say() {
    as "$1" POST "/v1/sessions/$2/messages" -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg c "$3" '{content: $c}')"
    [ "$status_code" = 202 ] || { echo "message: $status_code $body" >&2; return 1; }
}
# leaks FILE...: any of the files names team 1's recorded session or holds its reply.
leaks() { grep -l -e "$t1rec" -e "Confidential" "$@"; }

@test "recording: a session is answered from, and compared with, only recordings its creator could read: team2 misses team1's, team1 and an admin hit" {
    agent=$(rn_agent anthropic claude-test-model)
    T1=$(tenant_token team1)
    T2=$(tenant_token team2)
    secret="Team one's launch code is $(_rn_hex 4)."
    rn_script "$(quick_reply "Confidential reply for team one.")"
    t1rec=$(as_session "$T1" "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    as_say "$T1" "$t1rec" "$secret"
    rn_wait "$t1rec" '(.messages | length) == 2 and .request == null'
    mock_stop
    # Team 1's own playback hits.
    t1play=$(as_session "$T1" "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    as_say "$T1" "$t1play" "$secret"
    rn_wait "$t1play" '(.messages | length) == 2 and .request == null'
    rn_get "$t1play"
    check "$DS_BODY" '.messages[1].content == "Confidential reply for team one."'
    # Team 2's playback of the identical conversation misses: its reply fails, and
    # nothing of team 1's is in its events, its drift report or the runner's lines.
    t2play=$(as_session "$T2" "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    as_say "$T2" "$t2play" "$secret"
    rn_wait "$t2play" '.status == "failed" and .request == null'
    rn_events "$t2play" >"$T/t2.json"
    check "$T/t2.json" '[.[] | select(.type == "recording:request") | .payload | {outcome, nearest}] == [{outcome: "miss", nearest: null}]'
    check "$T/t2.json" '[.[] | select(.type == "reply:failed")][0].payload | .reason == "playback_miss" and (.error | test("no recording of request [0-9a-f]{64} \\(occurrence 0\\)"))'
    as "$T2" GET "/v1/sessions/$t2play/drift"
    assert_status 200
    cp "$DS_BODY" "$T/t2drift.json"
    check "$T/t2drift.json" '.miss == 1 and .hit == 0 and .diverged == 0 and .requests[0].nearest == null'
    grep "session $t2play" "$DS_DIR/logs/runner.log" >"$T/t2log.txt"
    [ -s "$T/t2log.txt" ]
    run leaks "$T/t2.json" "$T/t2drift.json" "$T/t2log.txt"
    [ "$status" = 1 ]
    # An admin's session reads every session: it hits.
    adplay=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$adplay" "$secret"
    rn_wait "$adplay" '(.messages | length) == 2 and .request == null'
    rn_events "$adplay" >"$T/ad.json"
    check "$T/ad.json" '[.[] | select(.type == "recording:request") | .payload | [.outcome, .recording.session]] == [["hit", "'"$t1rec"'"]]'
    # A session named for team 2 by an admin (recordingScope) reaches only team 2's;
    # team 2 cannot name team 1's, nor everything.
    adt2=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\", \"recordingScope\": [\"team2-\"]}")
    rn_say "$adt2" "$secret"
    rn_wait "$adt2" '.status == "failed" and .request == null'
    rn_events "$adt2" >"$T/adt2.json"
    check "$T/adt2.json" '[.[] | select(.type == "recording:request") | .payload.outcome] == ["miss"]'
    as "$T2" POST /v1/sessions -H 'Content-Type: application/json' \
        --data-binary "{\"agent\": \"$agent\", \"recordingScope\": [\"team1-\"]}"
    assert_status 403
    as "$T2" POST /v1/sessions -H 'Content-Type: application/json' --data-binary "{\"agent\": \"$agent\", \"recordingScope\": [\"\"]}"
    assert_status 403
    as "$T2" POST /v1/sessions -H 'Content-Type: application/json' --data-binary "{\"agent\": \"$agent\", \"recordingScope\": \"team2-\"}"
    assert_status 400
    assert_body_json '.error.code == "bad_recording_scope"'
    # A fork made by team 2 of its own session keeps team 2's scope.
    as "$T2" POST "/v1/sessions/$t2play/fork" -H 'Content-Type: application/json' --data-binary '{}'
    assert_status 201
    t2fork=$(jq -r .id "$DS_BODY")
    as_say "$T2" "$t2fork" "$secret"
    rn_wait "$t2fork" '.status == "failed" and .request == null'
    rn_events "$t2fork" >"$T/t2fork.json"
    check "$T/t2fork.json" '[.[] | select(.type == "recording:request") | .payload.outcome] == ["miss", "miss"]'
    mock_cont
    # Team 2 in hybrid, with a question like team 1's: sent live; its drift names no
    # nearest of team 1's (before, it showed team 1's message as the nearest).
    rn_script "$(quick_reply "Team two's own answer.")"
    t2hyb=$(as_session "$T2" "{\"agent\": \"$agent\", \"mode\": \"hybrid\"}")
    as_say "$T2" "$t2hyb" "$secret Again."
    rn_wait "$t2hyb" '(.messages | length) == 2 and .request == null'
    as "$T2" GET "/v1/sessions/$t2hyb/drift"
    cp "$DS_BODY" "$T/t2hyb.json"
    check "$T/t2hyb.json" '.miss == 1 and .diverged == 0 and .requests[0].nearest == null
        and (.requests[0].reason | test("nor of any like it that this session may use"))'
    grep "session $t2hyb" "$DS_DIR/logs/runner.log" >"$T/t2hlog.txt"
    run leaks "$T/t2hyb.json" "$T/t2hlog.txt"
    [ "$status" = 1 ]
}

@test "recording: a hybrid request recorded fewer times than asked says so in words (no empty field); the runner's line names key, occurrence and reason" {
    agent=$(rn_agent anthropic claude-test-model)
    word=$(_rn_hex 4)
    once=$(ds_name wf)
    twice=$(ds_name wf)
    step='{kind: "agent", agent: $a, prompt: ("Say " + $w + "."), update: {said: "$output"}}'
    rn_workflow "$(jq -nc --arg n "$once" --arg a "$agent" --arg w "$word" \
        "{name: \$n, initialState: {}, phases: [{name: \"p\", terminal: true, steps: [$step]}]}")"
    rn_workflow "$(jq -nc --arg n "$twice" --arg a "$agent" --arg w "$word" \
        "{name: \$n, initialState: {}, phases: [{name: \"p\", terminal: true, steps: [$step, $step]}]}")"
    rn_script "{\"replies\": [$(quick_reply "Said once."), $(quick_reply "Said live.")]}"
    rec=$(rn_session "$(jq -nc --arg w "$once" '{workflow: $w, mode: "record"}')")
    rn_wait "$rec" '.status == "completed"'
    hyb=$(rn_session "$(jq -nc --arg w "$twice" '{workflow: $w, mode: "hybrid"}')")
    rn_wait "$hyb" '.status == "completed"'
    req GET "/v1/sessions/$hyb/drift"
    cp "$DS_BODY" "$T/drift.json"
    check "$T/drift.json" '[.requests[].outcome] == ["hit", "diverged"]'
    check "$T/drift.json" '.requests[1] | .nearest.key == .key and (.nearest | has("field") | not)
        and .reason == "request \(.key) (occurrence 1) is recorded, but not as answer 1: it was asked more times than it was recorded"'
    key=$(jq -r '.requests[1].key' "$T/drift.json")
    grep -q "session $hyb: request req_[^ ]*: request $key (occurrence 1) is recorded, but not as answer 1: it was asked more times than it was recorded: sent live" \
        "$DS_DIR/logs/runner.log"
}

@test "cost: a fork's inherited cost and a playback's recorded cost are shown apart from what it spent; the list's totals count each once (HTTP, CLI)" {
    agent=$(rn_agent anthropic claude-test-model)
    T3=$(tenant_token team3)
    word=$(_rn_hex 4)
    # One request: 20 tokens in at $3/M, 5 out at $15/M.
    C=0.000135
    near() { jq -e "def near(a; b): ((a - b) | if . < 0 then -. else . end) < 1e-9; $2" "$1" >/dev/null || {
        echo "does not hold: $2" >&2; jq -c '{costUsd, cost, totals}' "$1" >&2; return 1; }; }
    rn_script "$(quick_reply "Priced answer.")"
    rec=$(as_session "$T3" "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    as_say "$T3" "$rec" "Price $word."
    rn_wait "$rec" '(.messages | length) == 2 and .request == null'
    as "$T3" GET "/v1/sessions/$rec"
    near "$DS_BODY" "near(.costUsd; $C) and near(.cost.spentUsd; $C) and .cost.inheritedUsd == 0 and .cost.recordedUsd == 0"
    # A playback: the recorded cost is shown as recorded, nothing spent.
    mock_stop
    play=$(as_session "$T3" "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    as_say "$T3" "$play" "Price $word."
    rn_wait "$play" '(.messages | length) == 2 and .request == null'
    mock_cont
    as "$T3" GET "/v1/sessions/$play"
    near "$DS_BODY" "near(.costUsd; $C) and .cost.spentUsd == 0 and near(.cost.recordedUsd; $C) and .cost.inheritedUsd == 0"
    # A fork carries its source's cost as inherited; what it asks next is its own.
    as "$T3" POST "/v1/sessions/$rec/fork" -H 'Content-Type: application/json' --data-binary '{}'
    assert_status 201
    fork=$(jq -r .id "$DS_BODY")
    near "$DS_BODY" "near(.costUsd; $C) and .cost.spentUsd == 0 and near(.cost.inheritedUsd; $C)"
    rn_script "$(quick_reply "Forked answer.")"
    as_say "$T3" "$fork" "And again, $word."
    rn_wait "$fork" '(.messages | length) == 4 and .request == null'
    as "$T3" GET "/v1/sessions/$fork"
    near "$DS_BODY" "near(.costUsd; 2 * $C) and near(.cost.spentUsd; $C) and near(.cost.inheritedUsd; $C) and .cost.recordedUsd == 0"
    # The list (team 3's three sessions): each row apart, totals spent once.
    as "$T3" GET /v1/sessions
    assert_status 200
    cp "$DS_BODY" "$T/list.json"
    check "$T/list.json" '(.sessions | length) == 3'
    near "$T/list.json" "near(.totals.spentUsd; 2 * $C) and near(.totals.recordedUsd; $C)
        and near([.sessions[].cost.spentUsd] | add; 2 * $C)
        and (.sessions[] | select(.id == \"$fork\") | near(.cost.inheritedUsd; $C))"
    # The CLI says the same.
    run env DSTREAM_URL="$(cat "$DS_DIR/url-direct")" DSTREAM_TOKEN="$T3" "$DS_BIN/dstream" sessions show "$fork"
    assert_success
    assert_line "usage     40 in, 10 out, \$0.000135 spent, \$0.000135 inherited from $rec"
    run env DSTREAM_URL="$(cat "$DS_DIR/url-direct")" DSTREAM_TOKEN="$T3" "$DS_BIN/dstream" sessions show "$play"
    assert_line "usage     20 in, 5 out, \$0.000000 spent, \$0.000135 answered from recordings (not spent)"
    run env DSTREAM_URL="$(cat "$DS_DIR/url-direct")" DSTREAM_TOKEN="$T3" "$DS_BIN/dstream" sessions list
    assert_success
    assert_line --regexp "^$fork +completed +$agent +[0-9]+[smhd] +0\.000135$"
    assert_line --regexp "^$play +completed +$agent +[0-9]+[smhd] +0\.000000$"
    assert_line --regexp "^$rec +completed +$agent +[0-9]+[smhd] +0\.000135$"
    run env DSTREAM_URL="$(cat "$DS_DIR/url-direct")" DSTREAM_TOKEN="$T3" "$DS_BIN/dstream" requests "$fork"
    assert_success
    assert_line "2 requests, \$0.000270: \$0.000135 spent, \$0.000135 inherited from the fork's source, \$0.000000 answered from recordings (not spent)"
    run env DSTREAM_URL="$(cat "$DS_DIR/url-direct")" DSTREAM_TOKEN="$T3" "$DS_BIN/dstream" requests "$play"
    assert_line "1 requests, \$0.000135: \$0.000000 spent, \$0.000000 inherited from the fork's source, \$0.000135 answered from recordings (not spent)"
}
