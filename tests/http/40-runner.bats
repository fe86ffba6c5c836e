#!/usr/bin/env bats
# The runner end to end, through nginx, with the mock provider (tests/mock-provider)
# standing in for Anthropic and OpenAI: chat replies streamed over SSE with usage and
# cost, a workflow with two agent steps and an approval, interrupt / queue /
# background / cancel under a slow stream, retries after 429, 529 and an in-stream
# error, kill -9 of the runner mid-reply, a checkpoint answered while the runner is
# down, and provider keys that never leave the request headers.
#
# One stack and one mock for the file (runner-helpers.bash); every test empties the
# mock's script and request record first and uses its own agents and sessions. The
# runner gets DSTREAM_RETRY_BASE_MS=100, so a retry delay near 1000 ms can only come
# from a Retry-After header. Waits are polls with deadlines (ds_poll, rn_wait).

load runner-helpers

setup_file() { rn_start DSTREAM_SWEEP_MS=300; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# A reply slow enough to act on while it streams: 73 deltas, 50 ms apart (~3.6 s).
SLOW_TEXT=$(seq -s ' ' 1 100)
slow_reply() { jq -nc --arg t "$SLOW_TEXT" '{text: $t, chunkSize: 4, delayMs: 50, usage: {input: 40, output: 60}}'; }
# The same reply, held by the mock after 20 deltas (80 characters) until release, or
# until the runner drops the transfer (an interrupt, a cancel, a stop, a kill -9 end
# the hold by themselves): it is still under way when the message, cancel, stop or
# kill comes, however slowly a loaded machine polls. The runner may commit the deltas
# before the hold as one text:delta event, and deltas_are_streaming waits for two:
# 20 deltas (about 1 s) leave room for that.
held_reply() { slow_reply | jq -c '.holdAfter = 20'; }
release() { curl -fsS -o /dev/null -X POST "$RN_MOCK/__release"; }
quick_reply() { jq -nc --arg t "$1" '{text: $t, usage: {input: 20, output: 5}}'; }

# ev FILE JQ: run a jq program on the events array in FILE (output raw).
ev() { jq -r "$2" "$1"; }

# check FILE JQ [JQ_ARGS...]: the jq program holds on FILE (with --arg etc. given
# after it); otherwise print the program and the file, and fail.
check() {
    local file=$1 prog=$2
    shift 2
    jq -e "$@" "$prog" "$file" >/dev/null && return 0
    {
        echo "does not hold: $prog"
        jq -c 'if type == "array" then .[] | (if has("offset") then [.offset, .type, .payload]
               elif has("headers") then {path, time, messages: [.body.messages[]? | {role, content: (.content | tostring | .[0:60])}]}
               else . end)
               else . end' "$file" | cut -c1-400
    } >&2
    return 1
}

# deltas_are_streaming ID: at least two text:delta events are in the session.
deltas_are_streaming() {
    rn_events "$1" >"$T/poll.json" && [ "$(jq '[.[] | select(.type == "text:delta")] | length' "$T/poll.json")" -ge 2 ]
}

# ---- 1. chat over SSE ---------------------------------------------------------------

# chat_over_sse PROVIDER MODEL COST PATH: a chat reply streamed over SSE, with usage
# and cost (COST is what the pricing file makes of 1200 in / 345 out tokens).
chat_over_sse() {
    local provider=$1 model=$2 cost=$3 path=$4 agent id sse text
    text="The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun."
    agent=$(rn_agent "$provider" "$model")
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "$(jq -nc --arg t "$text" '{text: $t, chunkSize: 4, delayMs: 15, usage: {input: 1200, output: 345}}')"
    sse=$T/sse-$provider.out
    rn_sse_start "$id" "$sse"
    ds_poll 10 grep -q '^event: session:created' "$sse"
    rn_say "$id" "Tell me about foxes."
    ds_poll 20 grep -q '^event: provider:request_ended' "$sse" || {
        echo "no provider:request_ended over SSE; got:" >&2
        rn_sse_events "$sse" >&2
        tail -15 "$DS_DIR/logs/runner.log" >&2
        return 1
    }
    # The events in order: started, several deltas, then ended (with nothing after the
    # deltas but the end).
    rn_sse_events "$sse" | sed '/^provider:request_ended$/q' >"$T/names"
    run grep -c '^text:delta$' "$T/names"
    [ "$output" -ge 3 ] || { echo "only $output text:delta before request_ended" >&2; cat "$T/names" >&2; return 1; }
    [ "$(grep -v '^text:delta$' "$T/names" | tr '\n' ' ')" = "session:created message:user provider:request_started provider:request_ended " ] ||
        { cat "$T/names" >&2; return 1; }
    # The deltas add up to the reply.
    [ "$(rn_sse_data "$sse" text:delta | jq -rj .payload.text)" = "$text" ]
    rn_sse_data "$sse" provider:request_started | head -1 >"$T/started.json"
    check "$T/started.json" ".payload.provider == \"$provider\" and .payload.model == \"$model\" and .payload.attempt == 1"
    rn_sse_data "$sse" provider:request_ended | head -1 >"$T/ended.json"
    check "$T/ended.json" '.payload.usage == {inputTokens: 1200, outputTokens: 345}'
    check "$T/ended.json" ".payload.costUsd > 0 and ((.payload.costUsd - $cost) | fabs) < 1e-9"
    check "$T/ended.json" '.payload.requestId == $s[0].payload.requestId' --slurpfile s "$T/started.json"
    # The session's view: completed between replies, with the totals.
    rn_wait "$id" '.status == "completed"'
    check "$DS_BODY" ".usage == {inputTokens: 1200, outputTokens: 345} and ((.costUsd - $cost) | fabs) < 1e-9"
    check "$DS_BODY" "[.messages[] | {role, content}] == [{role: \"user\", content: \"Tell me about foxes.\"}, {role: \"assistant\", content: \"$text\"}]"
    # The provider was called once, at its own endpoint, streaming.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" "length == 1 and .[0].path == \"$path\" and .[0].body.stream == true and .[0].body.model == \"$model\""
}

@test "chat (anthropic): the reply streams over SSE as deltas and ends with usage and cost" {
    # 1200 in x $3/Mtok + 345 out x $15/Mtok
    chat_over_sse anthropic claude-test-model 0.008775 /v1/messages
}

@test "chat (openai): the reply streams over SSE as deltas and ends with usage and cost" {
    # 1200 in x $2.5/Mtok + 345 out x $10/Mtok
    chat_over_sse openai gpt-test-model 0.00645 /v1/chat/completions
    check "$T/requests.json" '.[0].body.stream_options.include_usage == true'
}

# ---- 2. a workflow with an approval -------------------------------------------------

@test "workflow: two agent steps and an approval complete after the answer" {
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{
        name: $n, initialState: {},
        phases: [
          {name: "draft", steps: [{kind: "agent", name: "Draft", agent: $a,
              prompt: "Write about {{input.topic}}.", update: {draft: "$output"}}],
           transitions: [{to: "approve"}]},
          {name: "approve", steps: [{kind: "human", id: "approve", input: "approval",
              prompt: "Publish this? {{state.draft}}", update: {approved: "$response"}}],
           transitions: [{when: "state.approved == true", to: "publish"}, {to: "draft"}]},
          {name: "publish", terminal: true, steps: [{kind: "agent", name: "Announce", agent: $a,
              prompt: "Announce: {{state.draft}}", update: {announcement: "$output"}}]}
        ]}')"
    rn_script "{\"replies\": [$(quick_reply "A draft about otters."), $(quick_reply "Otters, announced.")]}"
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w, input: {topic: "otters"}}')")

    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.interactionId == "approve"'
    check "$DS_BODY" '.state == {draft: "A draft about otters."} and .phase == "approve" and .pendingInput.input == "approval"'
    [ "$(rn_request_count)" = 1 ]   # the second agent step waits for the answer

    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' \
        --data-binary '{"interactionId": "approve", "response": true}'
    assert_status 202
    rn_wait "$id" '.status == "completed"'
    check "$DS_BODY" '.state == {draft: "A draft about otters.", approved: true, announcement: "Otters, announced."}'
    check "$DS_BODY" '.pendingInput == null and .usage == {inputTokens: 40, outputTokens: 10} and .costUsd > 0'

    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.actor == "runner")][0].type == "workflow:started"'
    check "$T/ev.json" '.[-1].type == "workflow:completed" and .[-1].payload.state.approved == true'
    check "$T/ev.json" '[.[] | select(.type == "agent:completed")] | length == 2'
    check "$T/ev.json" '[.[] | select(.type == "agent:completed") | .payload.output] == ["A draft about otters.", "Otters, announced."]'
    check "$T/ev.json" '[.[] | select(.type == "agent:completed") | .payload | (.usage == {inputTokens: 20, outputTokens: 5} and .costUsd > 0)] | all'
    # agent 1, then the question, the answer, agent 2, completion: in that order.
    check "$T/ev.json" '[.[] | .type | select(. == "workflow:started" or . == "agent:completed" or . == "input:requested"
                          or . == "input:received" or . == "workflow:completed" or . == "workflow:failed")]
        == ["workflow:started", "agent:completed", "input:requested", "input:received", "agent:completed", "workflow:completed"]'
    check "$T/ev.json" '[.[] | select(.type == "phase:entered") | .payload.phase] == ["draft", "approve", "publish"]'
    # The second step's prompt was rendered from the state the first step wrote.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and (.[1].body.messages[-1].content | tostring | contains("Announce: A draft about otters."))'
}

# ---- 3. interrupt, queue, background, cancel ----------------------------------------

@test "interrupt: a message during a slow reply cuts it (interrupted), a new request answers, the partial reply stays" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "{\"replies\": [$(held_reply), $(quick_reply "Second answer.")]}"
    rn_say "$id" "First question."
    ds_poll 10 deltas_are_streaming "$id"
    rn_say "$id" "Second question."      # mode interrupt is the default
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 4'

    rn_events "$id" >"$T/ev.json"
    r1=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][0].payload.requestId')
    r2=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][1].payload.requestId')
    [ -n "$r1" ] && [ "$r1" != null ] && [ -n "$r2" ] && [ "$r2" != null ] && [ "$r1" != "$r2" ]
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_cancelled\") | .payload] == [{requestId: \"$r1\", reason: \"interrupted\"}]"
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_ended\") | .payload.requestId] == [\"$r2\"]"
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_started\")] | length == 2"
    # The new request started after the cut.
    check "$T/ev.json" "(map(.type == \"provider:request_cancelled\") | index(true)) < (map(.payload.requestId == \"$r2\") | index(true))"

    rn_get "$id"
    check "$DS_BODY" '[.messages[] | .role] == ["user", "assistant", "user", "assistant"]'
    check "$DS_BODY" '.messages[0].content == "First question." and .messages[2].content == "Second question."'
    check "$DS_BODY" ".messages[1].interrupted == true and .messages[1].reason == \"interrupted\" and .messages[1].requestId == \"$r1\""
    # What had streamed: a proper, non-empty prefix of the reply.
    check "$DS_BODY" '.messages[1].content as $c | ($c | length) > 0 and ($c | length) < ($t | length) and ($t | startswith($c))' \
        --arg t "$SLOW_TEXT"
    check "$DS_BODY" '.messages[3].content == "Second answer." and (.messages[3].interrupted | not)'
    # The second request carried the partial reply (as it was) and the new question.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and [.[1].body.messages[] | .role] == ["user", "assistant", "user"]
        and .[1].body.messages[1].content == $c and (.[1].body.messages[2].content | tostring | contains("Second question."))' \
        --arg c "$(jq -r '.messages[1].content' "$DS_BODY")"
}

@test "queue: a queued message waits for the reply in flight, then gets its own; order [u1, a1, u2, a2]" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "{\"replies\": [$(held_reply), $(quick_reply "Queued answer.")]}"
    rn_say "$id" "First question."
    ds_poll 10 deltas_are_streaming "$id"
    rn_say "$id" "Queued question." queue
    rn_get "$id"
    check "$DS_BODY" '[.queued[] | .content] == ["Queued question."] and .request != null'
    # The reply in flight goes on to its end.
    release
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 4'

    rn_events "$id" >"$T/ev.json"
    r1=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][0].payload.requestId')
    r2=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][1].payload.requestId')
    check "$T/ev.json" '[.[] | select(.type == "provider:request_cancelled")] == []'
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_ended\") | .payload.requestId] == [\"$r1\", \"$r2\"]"
    # The queued message's request started only after the first reply ended.
    check "$T/ev.json" "(map(.type == \"provider:request_ended\") | index(true)) < (map(.type == \"provider:request_started\" and .payload.requestId == \"$r2\") | index(true))"

    rn_get "$id"
    check "$DS_BODY" '[.messages[] | {role, content}] == [{role: "user", content: "First question."}, {role: "assistant", content: $t},
        {role: "user", content: "Queued question."}, {role: "assistant", content: "Queued answer."}]' --arg t "$SLOW_TEXT"
    check "$DS_BODY" '[.messages[] | .interrupted] == [null, null, null, null] and .queued == []'
    rn_requests >"$T/requests.json"
    # The queued message's request asked it, after the first exchange.
    check "$T/requests.json" 'length == 2 and [.[1].body.messages[] | .role] == ["user", "assistant", "user"]
        and (.[1].body.messages[-1].content | tostring | contains("Queued question."))'
}

@test "background: a background message joins the history and starts no request" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "{\"replies\": [$(held_reply), $(quick_reply "Third answer.")]}"
    rn_say "$id" "First question."
    ds_poll 10 deltas_are_streaming "$id"
    rn_say "$id" "Background note." background
    # The note came while the reply was held; the reply goes on to its end.
    release
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 3'
    # The first reply ran to its end and nothing answers the note.
    check "$DS_BODY" '[.messages[] | {role, content}] == [{role: "user", content: "First question."}, {role: "assistant", content: $t},
        {role: "user", content: "Background note."}] and .messages[2].background == true' --arg t "$SLOW_TEXT"
    [ "$(rn_request_count)" = 1 ]
    # A later message gets a reply that was asked with the note in its history, and it
    # is the only other request: none was ever made for the note.
    rn_say "$id" "Third question."
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 5'
    check "$DS_BODY" '[.messages[] | .content] == ["First question.", $t, "Background note.", "Third question.", "Third answer."]' --arg t "$SLOW_TEXT"
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "provider:request_started")] | length == 2'
    check "$T/ev.json" '[.[] | select(.type == "provider:request_ended")] | length == 2'
    check "$T/ev.json" '[.[] | select(.type == "provider:request_cancelled")] == []'
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and ([.[1].body.messages[] | .content | tostring | select(contains("Background note."))] | length) == 1'
}

@test "cancel: during a slow reply the request is cut (cancelled), the session ends cancelled, no request follows" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "$(held_reply)"
    rn_say "$id" "A question to cancel."
    ds_poll 10 deltas_are_streaming "$id"
    req POST "/v1/sessions/$id/cancel"
    assert_status 202
    rn_wait "$id" '.status == "cancelled"'
    check "$DS_BODY" '.request == null and [.messages[] | select(.role == "user") | .content] == ["A question to cancel."]'
    check "$DS_BODY" '.messages[1].interrupted == true and .messages[1].reason == "cancelled"'

    rn_events "$id" >"$T/ev.json"
    r1=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][0].payload.requestId')
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_cancelled\") | .payload] == [{requestId: \"$r1\", reason: \"cancelled\"}]"
    check "$T/ev.json" '[.[] | select(.type == "session:cancelled")] | length == 1'
    check "$T/ev.json" '[.[] | .type | select(. == "cancel:requested" or . == "provider:request_cancelled" or . == "session:cancelled")]
        == ["cancel:requested", "provider:request_cancelled", "session:cancelled"] and .[-1].type == "session:cancelled"'
    check "$T/ev.json" '[.[] | select(.type == "provider:request_ended" or .type == "provider:request_retried")] == []'
    # The session takes no more messages.
    req POST "/v1/sessions/$id/messages" -H 'Content-Type: application/json' --data-binary '{"content": "more?"}'
    assert_status 409
    # No request follows: another session's whole round trip goes by, and the mock saw
    # one request for the cancelled session and one for the other.
    other=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$other" "Sentinel question."
    rn_wait "$other" '.status == "completed" and .request == null and (.messages | length) == 2'
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2'
    check "$T/requests.json" '[.[] | select(.body | tostring | contains("A question to cancel."))] | length == 1'
    rn_events "$id" >"$T/ev2.json"
    [ "$(jq length "$T/ev2.json")" = "$(jq length "$T/ev.json")" ]
}

@test "replaces: a message that replaces an earlier one is answered without it and its reply, which stay marked" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "$(quick_reply "One.")"
    rn_say "$id" "Question?"
    rn_wait "$id" '.status == "completed" and (.messages | length) == 2'
    q1=$(jq -r '.messages[0].offset' "$DS_BODY")
    say() { req POST "/v1/sessions/$id/messages" -H 'Content-Type: application/json' --data-binary "$1"; }
    say '{"content": "x", "replaces": 7}'
    assert_status 400
    assert_json_error bad_replaces
    say '{"content": "x", "replaces": "soon"}'
    assert_status 400
    assert_json_error bad_replaces
    say '{"content": "x", "replaces": "0000000000000000_0000000000000000"}'
    assert_status 409
    assert_json_error nothing_to_replace
    rn_script "$(quick_reply "Two.")"
    say "$(jq -nc --arg q "$q1" '{content: "Question, again?", replaces: $q}')"
    assert_status 202
    rn_wait "$id" '.status == "completed" and (.messages | length) == 4'
    check "$DS_BODY" '[.messages[] | [.content, (.superseded == true)]] == [["Question?", true], ["One.", true], ["Question, again?", false], ["Two.", false]]'
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and [.[1].body.messages[] | .content | tostring] == ["Question, again?"]'
    # "last": the last question, here the one just answered.
    rn_script "$(quick_reply "Three.")"
    say '{"content": "Once more?", "replaces": "last"}'
    assert_status 202
    rn_wait "$id" '.status == "completed" and (.messages | length) == 6'
    check "$DS_BODY" '[.messages[] | select(.superseded | not) | .content] == ["Once more?", "Three."]'
}

@test "stop: during a slow reply the request is cut (stopped), the chat goes on and answers its next message" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    # Nothing under way: nothing to stop, nothing written.
    req POST "/v1/sessions/$id/stop"
    assert_status 202
    rn_script "$(held_reply)"
    rn_say "$id" "A question to stop."
    ds_poll 10 deltas_are_streaming "$id"
    req POST "/v1/sessions/$id/stop"
    assert_status 202
    rn_wait "$id" '.status == "completed" and .request == null and (.stopRequested | not)'
    check "$DS_BODY" '[.messages[] | .role] == ["user", "assistant"] and .messages[1].interrupted == true and .messages[1].reason == "stopped"'
    rn_events "$id" >"$T/ev.json"
    r1=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][0].payload.requestId')
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_cancelled\") | .payload] == [{requestId: \"$r1\", reason: \"stopped\"}]"
    check "$T/ev.json" '[.[] | .type | select(. == "stop:requested" or . == "provider:request_cancelled" or . == "reply:stopped")]
        == ["stop:requested", "provider:request_cancelled", "reply:stopped"]'
    check "$T/ev.json" '[.[] | select(.type == "provider:request_ended" or .type == "provider:request_retried" or .type == "session:cancelled")] == []'
    # The chat goes on: the next message gets its reply, with the stopped one in its history.
    rn_script "$(quick_reply "After the stop.")"
    rn_say "$id" "Go on."
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 4'
    check "$DS_BODY" '[.messages[] | .content][2:] == ["Go on.", "After the stop."]'
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and ([.[1].body.messages[] | .role] == ["user", "assistant", "user"])'
    # A stop with nothing under way writes nothing; a workflow's session has no reply to stop.
    rn_events "$id" >"$T/ev2.json"
    req POST "/v1/sessions/$id/stop"
    assert_status 202
    rn_events "$id" >"$T/ev3.json"
    [ "$(jq length "$T/ev3.json")" = "$(jq length "$T/ev2.json")" ]
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, initialState: {ok: null}, phases: [
        {name: "ask", steps: [{kind: "human", id: "go", input: "approval", prompt: "Go?", update: {ok: "$response"}}],
         transitions: [{to: "done"}]}, {name: "done", terminal: true}]}')"
    ws=$(rn_session "{\"workflow\": \"$wf\", \"input\": {}}")
    req POST "/v1/sessions/$ws/stop"
    assert_status 409
    assert_json_error not_a_chat
}

# ---- 4. retries ---------------------------------------------------------------------

# retry_after STATUS: STATUS with Retry-After: 1, then a reply; the retry waits ~1 s.
retry_after() {
    local status=$1 agent id r1
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "{\"replies\": [{\"status\": $status, \"retryAfter\": 1}, $(quick_reply "Answer after $status.")]}"
    rn_say "$id" "Please answer."
    rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 2'
    check "$DS_BODY" "[.messages[] | .content] == [\"Please answer.\", \"Answer after $status.\"] and (.messages[1].interrupted | not)"
    rn_events "$id" >"$T/ev.json"
    r1=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][0].payload.requestId')
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_retried\") | .payload | {requestId, attempt, status}] == [{requestId: \"$r1\", attempt: 2, status: $status}]"
    check "$T/ev.json" '[.[] | select(.type == "provider:request_retried")][0].payload.delayMs | (. >= 900 and . <= 1500)'
    # Each attempt has its own id: the second one ended the request.
    r2=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][1].payload.requestId')
    [ "$r2" != "$r1" ] && [ "$r2" != null ]
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_started\") | .payload.attempt] == [1, 2]"
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_ended\") | .payload.requestId] == [\"$r2\"]"
    check "$T/ev.json" '[.[] | select(.type == "provider:request_cancelled")] == []'
    # The mock saw the second attempt at least 900 ms after the first.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'def ms: (.[0:19] + "Z" | fromdateiso8601) * 1000 + (.[20:23] | tonumber);
        length == 2 and ((.[1].time | ms) - (.[0].time | ms)) >= 900'
}

@test "retry: 429 with Retry-After: 1 is retried after about 1000 ms and completes" {
    retry_after 429
}

@test "retry: 529 (Anthropic overloaded) with Retry-After: 1 is retried after about 1000 ms and completes" {
    retry_after 529
}

@test "retry: an error event inside a 200 stream is retried and the reply completes" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "{\"replies\": [{\"text\": \"Partial words before the error arrives.\", \"errorAfter\": 3, \"delayMs\": 20},
                              $(quick_reply "Recovered answer.")]}"
    rn_say "$id" "Please answer."
    rn_wait "$id" '.status == "completed" and .request == null and .messages[-1].content == "Recovered answer."'
    check "$DS_BODY" '.messages[0].content == "Please answer." and (.messages[-1].interrupted | not)'
    check "$DS_BODY" '.usage == {inputTokens: 20, outputTokens: 5}'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "provider:request_retried")] | length == 1 and .[0].payload.attempt == 2'
    check "$T/ev.json" '[.[] | select(.type == "provider:request_ended")] | length == 1'
    last=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][-1].payload.requestId')
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_ended\")][0].payload.requestId == \"$last\""
    # A partial reply that failed is not sent back to the model.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and ([.[1].body.messages[] | .content | tostring | select(contains("Partial"))] == [])'
}

# ---- 5. kill -9 mid-reply -----------------------------------------------------------

@test "kill -9 of the runner mid-reply: after a restart the session completes, one request_cancelled (restart), nothing duplicated" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    # The retry continues the cut reply (docs/agents.md): the mock goes on from the
    # text the log holds. The kill ends the first reply's hold; the retry's reply does
    # not hold.
    rn_script "{\"replies\": [$(held_reply), $(quick_reply "$SLOW_TEXT")]}"
    rn_say "$id" "A question that outlives a crash."
    ds_poll 10 deltas_are_streaming "$id"
    rn_runner_signal KILL
    rn_runner_start
    rn_wait "$id" ".status == \"completed\" and .request == null and .messages[-1].content == \"$SLOW_TEXT\""

    rn_events "$id" >"$T/ev.json"
    r1=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][0].payload.requestId')
    r2=$(ev "$T/ev.json" '[.[] | select(.type == "provider:request_started")][1].payload.requestId')
    [ "$r1" != "$r2" ] && [ "$r2" != null ]
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_cancelled\") | .payload] == [{requestId: \"$r1\", reason: \"restart\"}]"
    # Nothing twice: every offset is distinct, and each thing happened once.
    check "$T/ev.json" '[.[].offset] | length == (unique | length)'
    check "$T/ev.json" '[.[].offset] == ([.[].offset] | sort)'
    check "$T/ev.json" 'map({type, payload, createdAt}) | length == (unique | length)'
    check "$T/ev.json" '[.[] | select(.type == "session:created")] | length == 1'
    check "$T/ev.json" '[.[] | select(.type == "message:user")] | length == 1'
    check "$T/ev.json" '[.[] | select(.type == "provider:request_started")] | length == 2'
    check "$T/ev.json" "[.[] | select(.type == \"provider:request_ended\") | .payload.requestId] == [\"$r2\"]"
    # The first request's deltas are a prefix of its reply (none written twice), the
    # second's are the whole reply.
    check "$T/ev.json" "[.[] | select(.type == \"text:delta\" and .payload.requestId == \"$r1\") | .payload.text] | add as \$p
        | (\$p | length) > 0 and (\$t | startswith(\$p))" --arg t "$SLOW_TEXT"
    # ... and the second's continue it from the characters it kept: the reply, each word once.
    check "$T/ev.json" "([.[] | select(.type == \"provider:request_started\")][1].payload.continuedFrom) as \$c
        | \$c.requestId == \"$r1\" and ([.[] | select(.type == \"text:delta\" and .payload.requestId == \"$r2\") | .payload.text] | add)
          == (\$t | .[\$c.chars:])" --arg t "$SLOW_TEXT"
    rn_get "$id"
    # The cut attempt left the history (its retry replaced it; the events keep it).
    check "$DS_BODY" '[.messages[] | {role, reason}] == [{role: "user", reason: null}, {role: "assistant", reason: null}]'
    check "$DS_BODY" '.restarts == 0'
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2'
}

# ---- 6. a checkpoint answered while the runner is down --------------------------------

@test "a checkpoint answered while the runner is down resumes when it comes back" {
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{
        name: $n,
        phases: [
          {name: "ask", steps: [{kind: "human", id: "go-ahead", input: "approval",
              prompt: "Go ahead?", update: {approved: "$response"}}],
           transitions: [{when: "state.approved == true", to: "work"}, {to: "ask"}]},
          {name: "work", terminal: true, steps: [{kind: "agent", agent: $a,
              prompt: "Do the work.", update: {result: "$output"}}]}
        ]}')"
    rn_script "$(quick_reply "Work done.")"
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w}')")
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.interactionId == "go-ahead"'

    rn_runner_signal TERM
    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' \
        --data-binary '{"interactionId": "go-ahead", "response": true}'
    assert_status 202
    rn_get "$id"
    check "$DS_BODY" '.status == "running" and .pendingInput == null and .state == {}'
    [ "$(rn_request_count)" = 0 ]

    rn_runner_start
    rn_wait "$id" '.status == "completed"'
    check "$DS_BODY" '.state == {approved: true, result: "Work done."}'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | .type | select(. == "input:requested" or . == "input:received" or . == "agent:completed" or . == "workflow:completed")]
        == ["input:requested", "input:received", "agent:completed", "workflow:completed"]'
    check "$T/ev.json" '[.[].offset] | length == (unique | length)'
    [ "$(rn_request_count)" = 1 ]
}

# ---- 7. keys --------------------------------------------------------------------------

@test "provider keys reach the provider's headers and appear in no event, log or recording" {
    a_agent=$(rn_agent anthropic claude-test-model)
    o_agent=$(rn_agent openai gpt-test-model)
    a_id=$(rn_session "{\"agent\": \"$a_agent\"}")
    o_id=$(rn_session "{\"agent\": \"$o_agent\"}")
    rn_sse_start "$a_id" "$T/sse-a.out"
    rn_sse_start "$o_id" "$T/sse-o.out"
    rn_say "$a_id" "Hello, Anthropic."
    rn_say "$o_id" "Hello, OpenAI."
    rn_wait "$a_id" '.status == "completed" and (.messages | length) == 2'
    rn_wait "$o_id" '.status == "completed" and (.messages | length) == 2'
    ds_poll 10 grep -q '^event: provider:request_ended' "$T/sse-a.out"
    ds_poll 10 grep -q '^event: provider:request_ended' "$T/sse-o.out"
    rn_events "$a_id" >"$T/ev-a.json"
    rn_events "$o_id" >"$T/ev-o.json"

    # The key went where it belongs, exactly as given.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" '[.[] | select(.path == "/v1/messages") | .headers["x-api-key"]] == [$k]' --arg k "$RN_KEY"
    check "$T/requests.json" '[.[] | select(.path == "/v1/chat/completions") | .headers.authorization] == ["Bearer " + $k]' --arg k "$RN_OKEY"
    # The places to look are not empty (the runner logged these requests) ...
    grep -q "session $a_id: request .* ended" "$DS_DIR/logs/runner.log"
    [ -s "$RN_TMP/mock.log" ] && [ -s "$T/sse-a.out" ] && [ -s "$T/sse-o.out" ]
    # ... and neither key is in any of them: logs (runner, pool, nginx), the mock's
    # recording, the SSE captures, the events, nor the database itself.
    mapfile -t dbfiles < <(ds_db_files)
    [ ${#dbfiles[@]} -gt 0 ]
    for key in "$RN_KEY" "$RN_OKEY"; do
        run grep -rlaF -- "$key" "$DS_DIR/logs" "$RN_TMP/mock.log" "$T/sse-a.out" "$T/sse-o.out" \
            "$T/ev-a.json" "$T/ev-o.json" "${dbfiles[@]}"
        [ "$status" = 1 ] || { echo "the key ${key:0:12}... was found in: $output" >&2; return 1; }
    done
}

@test "cost budget: once an agent's limits.costBudgetUsd is spent, the next message ends the session" {
    local name id
    name=$(ds_name agent)
    # The pricing makes 20 in / 5 out tokens cost more than this budget.
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary \
        "$(jq -nc --arg n "$name" '{name: $n, provider: "anthropic", model: "claude-test-model", limits: {costBudgetUsd: 0.0000001}}')"
    [ "$status_code" = 201 ]
    id=$(rn_session "{\"agent\": \"$name\"}")
    rn_script "$(quick_reply "First answer.")"
    rn_say "$id" "First question."
    rn_wait "$id" '.status == "completed" and .request == null and .costUsd > 0'
    rn_say "$id" "Second question."
    rn_wait "$id" '.status == "cancelled"'
    [ "$(rn_request_count)" = 1 ]
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "session:cancelled")][0].payload.reason == "cost budget reached"'
}

@test "model text holding NULs (\\u0000) is kept whole: the session's messages, the next request, check" {
    local provider agent id text
    text=$(jq -nr '"\u0000lead, mid\u0000dle\u0000\u0000, end\u0000" | @json')
    for provider in anthropic openai; do
        agent=$(rn_agent "$provider" m)
        id=$(rn_session "{\"agent\": \"$agent\"}")
        rn_script "$(jq -nc --argjson t "$text" '{text: $t, chunkSize: 3, usage: {input: 20, output: 5}}')"
        rn_say "$id" "Zero bytes?"
        # The message was "" (the events that held a NUL did not fold).
        rn_wait "$id" '.status == "completed" and .request == null'
        check "$DS_BODY" '.messages[1].role == "assistant" and .messages[1].content == $t' --argjson t "$text"
        rn_script "$(quick_reply "Yes.")"
        rn_say "$id" "Again?"
        rn_wait "$id" '.status == "completed" and .request == null and (.messages | length) == 4'
        check "$DS_BODY" '.messages[1].content == $t and .messages[3].content == "Yes."' --argjson t "$text"
        # The next request carried the reply whole.
        rn_requests >"$T/requests.json"
        check "$T/requests.json" '.[-1].body.messages | map(.content | if type == "array" then map(.text? // empty) | add else . end) | index($t) != null' \
            --argjson t "$text"
    done
    run "$DS_BIN/dstream" --db "$DS_DB" check
    [ "$status" -eq 0 ] || fail "check: $output"
}

# wait_failed_file ID: poll the session, read from the database file (a session too
# large for req's variables is read that way too), until it has failed; then its
# JSON is in $T/s.json and its events (an array) in $T/ev.json.
failed_in_file() { "$DS_BIN/dstream" --db "$DS_DB" sessions show "$1" --json | jq -e '.status == "failed"' >/dev/null; }
wait_failed_file() {
    ds_poll 30 failed_in_file "$1" ||
        fail "not failed: $("$DS_BIN/dstream" --db "$DS_DB" sessions show "$1" --json | jq -c '{status, error}')"
    "$DS_BIN/dstream" --db "$DS_DB" sessions show "$1" --json >"$T/s.json"
    "$DS_BIN/dstream" --db "$DS_DB" events "$1" --json | jq -s . >"$T/ev.json"
}

# max_event FILE: the size in bytes of the largest event in FILE (an array).
max_event() { jq -c '.[] | tojson | utf8bytelength' "$1" | sort -rn | head -1; }

@test "state limit: a step whose templates would take the state past DSTREAM_WORKFLOW_STATE_MAX ends in workflow:failed (state_too_large), no event near it" {
    local wf id
    wf=$(ds_name wf)
    # 48 copies of a 40 kB value (each a value of its own, under the bound on one
    # rendered string) would be a 1.9 MB state: over the 1 MiB default.
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, phases: [{name: "p", terminal: true, steps: [
        {kind: "update", set: {big: "{{input.big}}"}},
        {kind: "update", set: {copies: ([range(48)] | map({key: "c\(.)", value: "{{state.big}}"}) | from_entries)}},
        {kind: "update", set: {after: 1}}]}]}')"
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w, input: {big: ("x" * 40000)}}')")
    wait_failed_file "$id"
    check "$T/s.json" '.state.big == ("x" * 40000) and (.state | has("copies") | not) and (.state | has("after") | not)'
    check "$T/ev.json" '[.[] | select(.type == "workflow:failed")] | length == 1 and (.[0].payload.reason == "state_too_large")
        and (.[0].payload.error | test("copies: .*1048576 bytes"))'
    # Before the limit, the failing step's state:updated was a 1.9 MB event.
    [ "$(max_event "$T/ev.json")" -lt 200000 ] || fail "an event of $(max_event "$T/ev.json") bytes"
}

@test "state limit: an agent step's reply over DSTREAM_WORKFLOW_STATE_MAX fails the workflow (state_too_large) without agent:completed" {
    local agent wf id
    agent=$(rn_agent openai m)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{name: $n, phases: [{name: "p", terminal: true, steps: [
        {kind: "agent", agent: $a, prompt: "Write a lot.", update: {draft: "$output"}}]}]}')"
    # (too long for rn_script's command line)
    jq -nc '{text: ("y" * 1200000), chunkSize: 60000, usage: {input: 20, output: 5}}' >"$T/script.json"
    curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @"$T/script.json" "$RN_MOCK/__script"
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w}')")
    wait_failed_file "$id"
    check "$T/s.json" '.state == {}'
    check "$T/ev.json" '(map(select(.type == "agent:completed")) | length) == 0 and
        (map(select(.type == "workflow:failed"))[0].payload | .reason == "state_too_large" and (.error | test("reply is over")))
        and (map(select(.type == "provider:request_cancelled"))[0].payload.reason == "failed")'
    # The reply streamed as deltas (each small): no event holds the whole of it, and
    # it was read no further than the limit.
    [ "$(max_event "$T/ev.json")" -lt 1100000 ] || fail "an event of $(max_event "$T/ev.json") bytes"
    jq -j '[.[] | select(.type == "text:delta") | .payload.text] | add | length' "$T/ev.json" >"$T/len"
    [ "$(cat "$T/len")" -le 1100000 ] || fail "$(cat "$T/len") bytes of deltas"
}

@test "settings: the runner and the pool read numbers by one rule (lib/env); a value out of range or not whole stops them with exit 2, naming it" {
    # Before, the runner took any non-negative number: a retry budget past INT_MAX
    # was cut to another number, and DSTREAM_DB_MAX_BYTES past the pool's range was
    # the runner's alone. Each case is bounded: a runner that started is stopped.
    local db=$T/env.db v
    for v in DSTREAM_PROVIDER_RETRIES=4294967297 DSTREAM_RESTART_RETRIES=2147483648 \
             DSTREAM_DB_MAX_BYTES=1125899906842625 DSTREAM_LEASE_MS=12x DSTREAM_RUNNER_FLUSH_MS=-1 \
             DSTREAM_RUNNER_DRIVE_BUDGET_US=-1 DSTREAM_RUNNER_FLUSH_SMALL=1.5; do
        run env "$v" DSTREAM_RUNNER_ID=envtest timeout 10 "$DS_BIN/dstream-runner" --db "$db"
        [ "$status" -eq 2 ] || fail "runner with $v: exit $status: $output"
        [[ "$output" == *"$v is not a number in ["* ]] || fail "runner with $v: $output"
    done
    for v in DSTREAM_DB_MAX_BYTES=1125899906842625 DSTREAM_THREADS=12x; do
        run env "$v" DSTREAM_DB="$db" timeout 10 "$DS_BIN/dstream-fcgi"
        [ "$status" -eq 2 ] || fail "pool with $v: exit $status: $output"
        [[ "$output" == *"$v is not a number in ["* ]] || fail "pool with $v: $output"
    done
}

@test "retention: the runner removes expired streams from the database (DSTREAM_SWEEP_MS), not the live ones" {
    req PUT /v1/stream/sweep/short -H 'Content-Type: text/plain' -H 'Stream-TTL: 1' --data-binary 'x'
    assert_status 201
    req PUT /v1/stream/sweep/long -H 'Content-Type: text/plain' -H 'Stream-TTL: 3600' --data-binary 'y'
    assert_status 201
    [ "$(ds_sql "SELECT count(*) FROM streams WHERE path = 'sweep/short'")" = 1 ]
    # Expired after a second (404 at once); gone from the database at the next sweep.
    short_gone() { [ "$(ds_sql "SELECT count(*) FROM streams WHERE path = 'sweep/short'")" = 0 ]; }
    ds_poll 15 short_gone || fail "the expired stream is still in the database"
    req GET /v1/stream/sweep/short
    assert_status 404
    [ "$(ds_sql "SELECT count(*) FROM streams WHERE path = 'sweep/long'")" = 1 ]
    grep -q 'retention sweep: [0-9]* expired streams removed' "$DS_DIR/logs/runner.log"
}
