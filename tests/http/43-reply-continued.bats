#!/usr/bin/env bats
# A reply cut off is continued, not restarted (docs/agents.md, "A reply cut off is
# continued"; docs/events.md, "A reply continued"): a runner SIGKILLed mid-stream, or
# a connection the provider drops, and the retry asks the model to go on from the
# text the log holds (the mock honours the prefill: it continues its canned text from
# where the prefill ends, and refuses one ending in whitespace, as Anthropic does).
# The reply is that text and the continuation, each word once, in the session's
# messages, in the deltas read with continuedFrom, and in what the provider saw. A cut
# inside a tool call, and a provider whose continuation is off in the operator's
# file, start over as before and say why.

load runner-helpers

# More providers on the mock: an OpenAI-compatible server that continues as vLLM
# does, and an Anthropic one whose continuation the operator turned off.
setup_file() {
    RN_EXTRA_PROVIDERS='{
        "vllm": {"kind": "openai", "baseUrl": "$RN_MOCK_URL", "keyEnv": "OPENAI_API_KEY",
                 "allowPrivate": ["127.0.0.1"], "continuation": "continue_final_message"},
        "nocont": {"kind": "anthropic", "baseUrl": "$RN_MOCK_URL", "keyEnv": "ANTHROPIC_API_KEY",
                   "allowPrivate": ["127.0.0.1"], "continuation": "off"}}' rn_start
}
teardown_file() { rn_stop; }
setup() { rn_crash_setup; }
teardown() { rn_crash_teardown; }

# WORDS: 60 distinct words, each delta one word and its space (chunkSize 4), so
# that a cut always ends in whitespace (the prefill must leave it off).
WORDS=$(for i in $(seq -w 1 60); do printf 'w%s ' "$i"; done)
WORDS="${WORDS}end."

# reply_text ID: the session's reply as its events give it, each attempt's text kept
# up to what the next one's continuedFrom says (chars), then the next one's.
reply_text() {
    rn_events "$1" | jq -r '
        reduce .[] as $e ({cur: null, text: {}, out: ""};
            if $e.type == "provider:request_started" then
                ($e.payload.continuedFrom) as $c |
                .text[$e.payload.requestId] = (if $c then (.text[$c.requestId] // "" | explode | .[0:$c.chars] | implode) else "" end)
                | .cur = $e.payload.requestId
            elif $e.type == "text:delta" then .text[$e.payload.requestId] += $e.payload.text
            else . end) | .text[.cur]'
}

# content_len ID: characters of the reply streaming (0 while there is none).
content_len() {
    rn_get "$1" && jq '[.messages[] | select(.role == "assistant") | .content | length] | last // 0' "$DS_BODY"
}
_len_ge() { [ "$(content_len "$1")" -ge "$2" ]; }

@test "a reply cut by kill -9 mid-stream (3 times, at different points) ends as the text kept and its continuation, each word once; the provider saw the prefill" {
    local agent id at round reply
    agent=$(rn_agent anthropic claude-test-model)
    reply=$(jq -nc --arg t "$WORDS" '{text: $t, chunkSize: 4, delayMs: 40, usage: {input: 10, output: 60}}')
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" --data-binary "$reply"
    round=0
    for at in 12 80 160; do
        round=$((round + 1))
        curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
        # The first attempt waits after AT characters (AT/4 deltas) until the kill
        # closes its connection: it is still streaming when the runner is killed,
        # however slowly the poll below comes. The retry gets the default, not held.
        rn_script "$(jq -c --argjson n $((at / 4)) '.holdAfter = $n' <<<"$reply")"
        id=$(rn_session "{\"agent\": \"$agent\"}")
        rn_say "$id" "Count, round $round."
        # Killed once the log holds at least AT characters of the reply.
        ds_poll 30 _len_ge "$id" "$at"
        rn_runner_signal KILL
        rn_runner_start
        rn_wait "$id" '.status == "completed" and .request == null' 30
        cp "$DS_BODY" "$T/s-$round.json"
        # The view: one reply, whole, no word twice.
        rn_one_reply "$T/s-$round.json" "$WORDS" ||
            { jq -c '.messages' "$T/s-$round.json" >&2; return 1; }
        rn_events "$id" >"$T/ev-$round.json"
        # The retry continued the cut attempt: its kept characters are the committed
        # text without its trailing space.
        jq -e '[.[] | select(.type == "provider:request_started") | .payload] as $s |
            ($s | length) == 2 and $s[1].continuedFrom.requestId == $s[0].requestId
            and $s[1].continuedFrom.trimmed == 1
            and ([.[] | select(.type == "text:delta" and .payload.requestId == $s[0].requestId) | .payload.text] | add
                 | length) == $s[1].continuedFrom.chars + 1' "$T/ev-$round.json" >/dev/null ||
            { jq -c '.[] | select(.type != "text:delta") | [.type, .payload]' "$T/ev-$round.json" >&2; return 1; }
        jq -e '[.[] | select(.type == "provider:request_cancelled") | .payload.reason] == ["restart"]' "$T/ev-$round.json" >/dev/null
        # The deltas read with continuedFrom make the reply.
        [ "$(reply_text "$id")" = "$WORDS" ]
        # The provider was asked to continue: the second request ends with the text
        # kept as the assistant's, no trailing whitespace (the mock would refuse it).
        rn_requests >"$T/req-$round.json"
        jq -e --arg w "$WORDS" '(. | length) == 2 and (.[0].body.messages | last | .role) == "user"
            and (.[1].body.messages | last) as $m | $m.role == "assistant"
            and ($m.content | type) == "string" and ($m.content | test("\\s$") | not)
            and ($w | startswith($m.content)) and ($m.content | length) >= 8' "$T/req-$round.json" >/dev/null ||
            { jq -c '[.[] | .body.messages | last]' "$T/req-$round.json" >&2; return 1; }
        # The later history sends the reply once: the next message's request holds it whole.
        rn_script '{"text": "Done.", "usage": {"input": 1, "output": 1}}'
        rn_say "$id" "Thanks."
        rn_wait "$id" '.status == "completed" and .messages[-1].content == "Done."'
        rn_requests | jq -e --arg w "$WORDS" '(last.body.messages | map(select(.role == "assistant") | .content)) == [$w]' >/dev/null
    done
}

# cut_then_continue AGENT TEXT: the provider drops the connection after 5 deltas of
# TEXT (chunks of 5), then the retry is continued from what the log holds.
cut_then_continue() {
    local id
    rn_script "$(jq -nc --arg t "$2" '{replies: [{text: $t, chunkSize: 5, cutAfter: 5, delayMs: 10},
        {text: $t, chunkSize: 5, usage: {input: 5, output: 9}}]}')"
    id=$(rn_session "{\"agent\": \"$1\"}")
    rn_say "$id" "Tell me about rivers."
    rn_wait "$id" '.status == "completed" and .request == null'
    rn_one_reply "$DS_BODY" "$2" || { jq -c .messages "$DS_BODY" >&2; return 1; }
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "provider:request_retried") | .payload | {reason, cause}] == [{reason: "failed", cause: "connection"}]' "$T/ev.json" >/dev/null
    jq -e '[.[] | select(.type == "provider:request_started") | .payload] as $s |
        $s[1].continuedFrom == {requestId: $s[0].requestId, chars: 25, trimmed: 0}' "$T/ev.json" >/dev/null ||
        { jq -c '.[] | select(.type != "text:delta") | [.type, .payload]' "$T/ev.json" >&2; return 1; }
    # Nothing trimmed: every delta of both attempts, in order, is the reply.
    jq -e --arg t "$2" '[.[] | select(.type == "text:delta") | .payload.text] | add == $t' "$T/ev.json" >/dev/null
    [ "$(reply_text "$id")" = "$2" ]
    rn_requests >"$T/req.json"
    jq -e --arg t "$2" '(. | length) == 2 and (.[1].body.messages | last) == {role: "assistant", content: ($t | .[0:25])}' "$T/req.json" >/dev/null
}

@test "a connection the provider drops mid-stream: the retry continues the reply (Anthropic prefill; vLLM's continue_final_message)" {
    local text="Rivers run down to the sea, carrying silt and stories from the hills."
    cut_then_continue "$(rn_agent anthropic claude-test-model)" "$text"
    jq -e '.[1].body | has("continue_final_message") | not' "$T/req.json" >/dev/null
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    cut_then_continue "$(rn_agent vllm gpt-test-model)" "$text"
    jq -e '.[1].body.continue_final_message == true and .[1].body.add_generation_prompt == false
        and (.[0].body | has("continue_final_message") | not)' "$T/req.json" >/dev/null
}

@test "a cut inside a tool call starts over and says so; so does a provider whose continuation is off" {
    local agent id
    # The stream is dropped while the call's arguments stream: no call in the log.
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "$(jq -nc '{replies: [
        {text: "Let me look that up. ", toolCalls: [{id: "call_cut", name: "lookup", arguments: {q: "a long question"}}], cutInTool: true},
        {text: "I know it already: forty-two.", usage: {input: 5, output: 7}}]}')"
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "What is the answer?"
    rn_wait "$id" '.status == "completed" and .request == null'
    rn_one_reply "$DS_BODY" "I know it already: forty-two."
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "provider:request_retried") | .payload.cutIn] == ["tool_use"]
        and ([.[] | select(.type == "provider:request_started") | .payload | {continued, reason}]
             == [{continued: null, reason: null}, {continued: false, reason: "tool_use"}])
        and ([.[] | select(.type == "tool:called")] | length) == 0' "$T/ev.json" >/dev/null ||
        { jq -c '.[] | select(.type != "text:delta") | [.type, .payload]' "$T/ev.json" >&2; return 1; }
    rn_requests | jq -e 'length == 2 and (.[1].body.messages | last | .role) == "user"' >/dev/null

    # Continuation off in the operator's file: a dropped connection starts over, marked.
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    agent=$(rn_agent nocont claude-test-model)
    rn_script "$(jq -nc '{replies: [{text: "A first go that breaks off.", chunkSize: 5, cutAfter: 3},
        {text: "A second go, whole.", usage: {input: 5, output: 5}}]}')"
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "Go."
    rn_wait "$id" '.status == "completed" and .request == null'
    rn_one_reply "$DS_BODY" "A second go, whole."
    rn_events "$id" >"$T/ev2.json"
    jq -e '[.[] | select(.type == "provider:request_started") | .payload][1] | .continued == false and .reason == "off"
        and (has("continuedFrom") | not)' "$T/ev2.json" >/dev/null
    rn_requests | jq -e 'length == 2 and (.[1].body.messages | last | .role) == "user"' >/dev/null
    # dstream providers says each provider's continuation.
    "$DS_BIN/dstream" providers --json "$RN_PROVIDERS" | jq -e '[.providers[] | {key: .name, value: .continuation}] | from_entries
        == {anthropic: "prefill", openai: "off", vllm: "continue_final_message", nocont: "off"}' >/dev/null
}

# A cut after "abcd efgh ijkl " (3 deltas of 5): the prefill leaves the space off, the
# continuation (" mnop ...") gives it again.
SPACED="abcd efgh ijkl mnop qrst uvwx yz."
spaced_script() {
    rn_script "$(jq -nc --arg t "$SPACED" '{replies: [{text: $t, chunkSize: 5, cutAfter: 3, delayMs: 10},
        {text: $t, chunkSize: 5, usage: {input: 5, output: 9}}]}')"
}

@test "the AI SDK's and the LangGraph SDK's streams and dstream chat show a continued reply as one text, each word once" {
    local agent id
    agent=$(rn_agent anthropic claude-test-model)
    # The AI SDK's UI message stream: one text part, no reset-step, the space once.
    spaced_script
    id=$(ds_name chat)
    curl -sS --max-time 30 -o "$T/raw" -H 'Content-Type: application/json' "$DS_URL/v1/aisdk/chat/$agent" \
        --data-binary "$(jq -nc --arg id "$id" '{id: $id, trigger: "submit-message", messageId: null,
            messages: [{id: "u1", role: "user", parts: [{type: "text", text: "Letters?"}]}]}')"
    sed -n 's/^data: //p' "$T/raw" | tr -d '\r' | sed '$d' >"$T/chunks"
    jq -s -e --arg t "$SPACED" '([.[] | select(.type == "text-delta") | .delta] | add) == $t
        and ([.[] | select(.type == "reset-step" or .type == "text-start")] | map(.type)) == ["text-start"]' "$T/chunks" >/dev/null ||
        { cat "$T/chunks" >&2; return 1; }
    rn_holds "$id" '.messages[1].content == "abcd efgh ijkl mnop qrst uvwx yz."'
    rn_events "$id" | jq -e '[.[] | select(.type == "provider:request_started")][1].payload.continuedFrom.trimmed == 1' >/dev/null

    # The LangGraph SDK's messages: the continuation's chunks carry the first attempt's id.
    spaced_script
    id=$(ds_name th)
    req POST "/v1/langgraph/threads/$id/runs/stream" -H 'Content-Type: application/json' --data-binary \
        "{\"assistant_id\": \"$agent\", \"input\": {\"messages\": [{\"role\": \"user\", \"content\": \"Letters?\"}]}, \"stream_mode\": [\"messages-tuple\", \"values\"]}"
    assert_status 200
    rn_sse_data "$DS_BODY" messages >"$T/lg"
    jq -s -e --arg t "$SPACED" '[.[] | .[0] | select(.type == "AIMessageChunk")] as $c
        | ($c | map(.id) | unique | length) == 1 and ([$c[].content] | add) == $t' "$T/lg" >/dev/null ||
        { cat "$T/lg" >&2; return 1; }
    rn_sse_data "$DS_BODY" values | tail -n 1 | jq -e --arg t "$SPACED" '.messages[-1].content == $t' >/dev/null

    # dstream chat prints it once too; dstream requests says which request continued which.
    rn_cli_env
    spaced_script
    id=$(rn_session "{\"agent\": \"$agent\"}")
    run --separate-stderr "$DS_BIN/dstream" chat "$id" "Letters?"
    assert_success
    assert_output "$SPACED"
    run --separate-stderr "$DS_BIN/dstream" requests "$id" --json
    assert_success
    jq -s -e '.[0].outcome == "retried" and .[1].continuedFrom == {requestId: .[0].requestId, chars: 14, trimmed: 1}' <<<"$output" >/dev/null
}

@test "a continuation the provider refuses (HTTP 400: a model that takes no prefill) is asked again from the start, once, marked refused" {
    local agent id
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "$(jq -nc '{replies: [{text: "Half of it, then", chunkSize: 5, cutAfter: 2},
        {status: 400, errorMessage: "This model does not support assistant message prefill."},
        {text: "The whole of it, from the start.", usage: {input: 5, output: 7}}]}')"
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "Go on."
    rn_wait "$id" '.status == "completed" and .request == null'
    rn_one_reply "$DS_BODY" "The whole of it, from the start."
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "provider:request_started") | .payload] as $s | ($s | length) == 3
        and $s[1].continuedFrom.requestId == $s[0].requestId
        and $s[2].continued == false and $s[2].reason == "refused"
        and ([.[] | select(.type == "provider:request_retried") | .payload.cause] == ["connection", "rejected"])' "$T/ev.json" >/dev/null ||
        { jq -c '.[] | select(.type != "text:delta") | [.type, .payload]' "$T/ev.json" >&2; return 1; }
    rn_requests | jq -e 'length == 3 and (.[1].body.messages | last | .role) == "assistant" and (.[2].body.messages | last | .role) == "user"' >/dev/null
}

@test "a session that records starts a cut reply over (reason recording): each recording is one request's whole answer" {
    local agent id
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "$(jq -nc '{replies: [{text: "Recorded first go, cut.", chunkSize: 5, cutAfter: 2},
        {text: "Recorded whole.", usage: {input: 5, output: 3}}]}')"
    id=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$id" "Record me."
    rn_wait "$id" '.status == "completed" and .request == null'
    rn_one_reply "$DS_BODY" "Recorded whole."
    rn_events "$id" | jq -e '[.[] | select(.type == "provider:request_started") | .payload][1]
        | .continued == false and .reason == "recording"' >/dev/null
    rn_requests | jq -e 'length == 2 and (.[1].body.messages | last | .role) == "user"' >/dev/null
}

@test "a workflow agent step's reply cut off is continued: its output, the state and agent:completed hold the whole reply" {
    local agent wf id
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{name: $n, phases: [
        {name: "write", terminal: true, steps: [{kind: "agent", agent: $a, prompt: "Write.", update: {draft: "$output"}}]}]}')"
    rn_script "$(jq -nc --arg t "$SPACED" '{replies: [{text: $t, chunkSize: 5, cutAfter: 3, delayMs: 10},
        {text: $t, chunkSize: 5, usage: {input: 5, output: 9}}]}')"
    id=$(rn_session "{\"workflow\": \"$wf\", \"input\": {}}")
    rn_wait "$id" '.status == "completed"'
    jq -e --arg t "$SPACED" '.state.draft == $t' "$DS_BODY" >/dev/null || { jq -c .state "$DS_BODY" >&2; return 1; }
    rn_events "$id" >"$T/ev.json"
    jq -e --arg t "$SPACED" '([.[] | select(.type == "agent:completed") | .payload.output] == [$t])
        and ([.[] | select(.type == "provider:request_started")][1].payload.continuedFrom.trimmed == 1)' "$T/ev.json" >/dev/null
    rn_requests | jq -e '(.[1].body.messages | last) == {role: "assistant", content: "abcd efgh ijkl"}' >/dev/null
}
