#!/usr/bin/env bats
# The Vercel AI SDK's chat client against /v1/aisdk/chat/{agent} (docs/clients.md):
# the real `ai` package from npm (tests/aisdk: its AbstractChat, the class useChat
# wraps, with DefaultChatTransport), through nginx, the pool and the runner, with the
# mock provider (tests/mock-provider) standing in for Anthropic. A round trip with
# text (and a fork), text holding NULs, tool calls (an MCP server's and an unbound
# one), tool calls that wait for approval (approved, denied with a reason, answered
# after a kill -9 of the runner), reasoning and a retried attempt, a reply longer than DSTREAM_SSE_MAX_MS, a
# reload mid-reply that resumes and shows each word once (the client's abort did not
# stop the reply), regenerate, a stop after which the chat goes on; the route's
# errors and scopes with curl. Waits are polls with deadlines.

load runner-helpers

setup_file() {
    AISDK_NODE=$("$DS_ROOT/tests/aisdk/install.sh") || return 1
    AISDK_TMP=$(mktemp -d -t dstream-aisdk.XXXXXX)
    export AISDK_NODE AISDK_TMP
    # An MCP server of the operator's (tests/mcp/test-server.mjs: its echo tool) for
    # the tool call.
    # Its state (--state: DIR/count counts the side-effecting count tool's runs).
    mkdir -p "$AISDK_TMP/mcp-state"
    jq -n --arg node "$(command -v node)" --arg ts "$DS_ROOT/tests/mcp/test-server.mjs" --arg st "$AISDK_TMP/mcp-state" \
        '{mcpServers: {t: {command: $node, args: [$ts, "--state", $st]}}}' >"$AISDK_TMP/mcp.json"
    chmod 644 "$AISDK_TMP/mcp.json"
    # SSE responses end after 1.5 s here; a reply's stream lasts as long as the reply.
    rn_start DSTREAM_MCP_CONFIG="$AISDK_TMP/mcp.json" DSTREAM_SSE_MAX_MS=1500
}
teardown_file() {
    rn_stop
    [ -n "${AISDK_TMP:-}" ] && rm -rf "$AISDK_TMP"
    return 0
}
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# sdk CHAT_ID COMMAND [ARGS...]: run the SDK's chat (tests/aisdk/chat.mjs) against
# $AGENT's route; its JSON result on stdout.
sdk() {
    local id=$1
    shift
    timeout 60 "$AISDK_NODE" "$DS_ROOT/tests/aisdk/chat.mjs" "$DS_URL/v1/aisdk/chat/$AGENT" "$id" "$@"
}

# text JQ_PATH: the text parts of a UI message joined (a jq function for the checks).
TEXT='def text: [.parts[] | select(.type == "text") | .text] | join("");'

# check FILE JQ [JQ_ARGS...]: the program holds on FILE; else print both and fail.
check() {
    local file=$1 prog=$2
    shift 2
    jq -e "$@" "$TEXT $prog" "$file" >/dev/null && return 0
    { echo "does not hold: $prog"; jq -c . "$file" | cut -c1-1500; } >&2
    return 1
}

@test "aisdk: a chat round trip: the SDK's messages in, the reply streamed as UI message chunks, the history in the session" {
    AGENT=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    rn_script '{"text": "Hello there, how can I help?", "chunkSize": 5, "usage": {"input": 12, "output": 7}}'
    sdk "$id" send "Hi, who are you?" >"$T/one.json"
    check "$T/one.json" '.status == "ready" and .error == null and ([.messages[].role] == ["user", "assistant"])
        and (.messages[0] | text) == "Hi, who are you?" and (.messages[1] | text) == "Hello there, how can I help?"
        and (.messages[1].id | startswith("msg_"))'
    # The chat is a session of that agent, created on first use; a second message goes
    # on with the history the session holds (the model is sent it).
    # This one as the SDK's persistence guide sends it: only the new message.
    rn_script '{"text": "Still me.", "usage": {"input": 30, "output": 3}}'
    AISDK_LAST_ONLY=1 sdk "$id" send "And now?" >"$T/two.json"
    check "$T/two.json" '(.messages | length) == 2 and (.messages[1] | text) == "Still me."'
    rn_get "$id"
    check "$DS_BODY" '.agent == $a and .status == "completed" and ([.messages[] | [.role, .content]] ==
        [["user", "Hi, who are you?"], ["assistant", "Hello there, how can I help?"], ["user", "And now?"], ["assistant", "Still me."]])' \
        --arg a "$AGENT"
    rn_requests >"$T/requests.json"
    check "$T/requests.json" '(.[1].body.messages | map(.role)) == ["user", "assistant", "user"]'
    # The raw answer: the SDK's header, the chunks in order, [DONE] last.
    rn_script '{"text": "Raw.", "usage": {"input": 1, "output": 1}}'
    curl -sS --max-time 20 -D "$T/h" -o "$T/raw" -H 'Content-Type: application/json' "$DS_URL/v1/aisdk/chat/$AGENT" \
        --data-binary "$(jq -nc --arg id "$id" '{id: $id, trigger: "submit-message", messageId: null,
            messages: [{id: "u3", role: "user", parts: [{type: "text", text: "Raw?"}]}]}')"
    grep -qi '^x-vercel-ai-ui-message-stream: v1' "$T/h"
    grep -qi '^content-type: text/event-stream' "$T/h"
    sed -n 's/^data: //p' "$T/raw" | tr -d '\r' >"$T/chunks"
    [ "$(tail -n 1 "$T/chunks")" = "[DONE]" ]
    [ "$(sed '$d' "$T/chunks" | jq -r .type | tr '\n' ' ')" = "start start-step text-start text-delta text-end finish-step finish " ] ||
        { cat "$T/chunks" >&2; false; }
    sed -n 7p "$T/chunks" | jq -e '.finishReason == "stop"'
    # A fork of the chat is a chat with the same agent under a new id: the SDK can
    # go on there, with the history up to the fork.
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary "{\"id\": \"$id-f\"}"
    assert_status 201
    rn_script '{"text": "On the fork.", "usage": {"input": 40, "output": 3}}'
    sdk "$id-f" send "Fork?" >"$T/fork.json"
    check "$T/fork.json" '(.messages[1] | text) == "On the fork."'
    rn_holds "$id-f" '(.messages | length) == 8'
}

@test "aisdk: model text holding NULs (\\u0000) reaches the SDK whole" {
    AGENT=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    text=$(jq -nr '"\u0000lead, mid\u0000dle\u0000\u0000, end\u0000" | @json')
    rn_script "$(jq -nc --argjson t "$text" '{text: $t, chunkSize: 3, thinking: $t, usage: {input: 20, output: 5}}')"
    sdk "$id" send "Zero bytes?" >"$T/nul.json"
    check "$T/nul.json" '.status == "ready" and (.messages[1] | text) == $t and
        ([.messages[1].parts[] | select(.type == "reasoning") | .text] == [$t])' --argjson t "$text"
}

@test "aisdk: tool calls stream as tool input and output parts, then the next turn's text" {
    AGENT=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$AGENT" '{name: $n,
        provider: "anthropic", model: "claude-test-model", mcpServers: ["t"], tools: [{name: "word_count",
        description: "Count words", inputSchema: {type: "object", properties: {text: {type: "string"}}}}]}')"
    assert_status 201
    rn_script '{"replies": [
        {"text": "Let me look.", "toolCalls": [{"id": "call_echo", "name": "t__echo", "arguments": {"text": "echoed"}},
            {"id": "call_wc", "name": "word_count", "arguments": {"text": "a b c"}}], "usage": {"input": 10, "output": 5}},
        {"text": "Done looking.", "usage": {"input": 20, "output": 6}}]}'
    id=$(ds_name chat)
    sdk "$id" send "Echo it, and count a b c." >"$T/tool.json"
    # The operator's server runs t__echo: its output. Nothing runs word_count here (no
    # binding): its result is a failed one, the tool part's error. Then the model's
    # next turn, a step of its own.
    check "$T/tool.json" '.status == "ready" and (.messages | length) == 2 and
        ([.messages[1].parts[].type] == ["step-start", "text", "tool-t__echo", "tool-word_count", "step-start", "text"]) and
        (.messages[1].parts[2] | .toolCallId == "call_echo" and .input == {text: "echoed"} and .state == "output-available"
            and (.output | tostring | test("echoed"))) and
        (.messages[1].parts[3] | .toolCallId == "call_wc" and .input == {text: "a b c"} and .state == "output-error"
            and (.errorText | test("no tool named"))) and
        (.messages[1] | text) == "Let me look.Done looking."'
}

@test "aisdk: reasoning streams as reasoning parts; a retried attempt leaves nothing behind (reset-step)" {
    AGENT=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    # The first attempt streams its thinking and three deltas, then the provider says
    # it is overloaded: the runner retries, and the retry's reply replaces it.
    rn_script '{"replies": [
        {"thinking": "Hmm, let me see.", "text": "A first try that breaks off here", "chunkSize": 4, "errorAfter": 3},
        {"thinking": "Once more.", "text": "The whole answer.", "usage": {"input": 8, "output": 4}}]}'
    sdk "$id" send "Think, then answer." >"$T/r.json"
    check "$T/r.json" '.status == "ready" and ([.messages[1].parts[].type] == ["step-start", "reasoning", "text"]) and
        .messages[1].parts[1].text == "Once more." and (.messages[1] | text) == "The whole answer."'
    rn_has_event "$id" '.type == "provider:request_retried"'
    [ "$(rn_request_count)" = 2 ]
}

# A reply slow enough to reload in: 80 deltas 50 ms apart (about 4 s).
SLOW=$(seq -s ' ' 1 80 | sed 's/[0-9]*/w&/g')
slow_reply() { jq -nc --arg t "$SLOW" '{text: $t, chunkSize: 4, delayMs: 50, usage: {input: 40, output: 80}}'; }

@test "aisdk: a reply longer than DSTREAM_SSE_MAX_MS arrives whole in its POST's stream" {
    AGENT=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    rn_script "$(slow_reply)"
    sdk "$id" send "Count to eighty, slowly." >"$T/long.json"
    check "$T/long.json" '.status == "ready" and (.messages[1] | text) == $all' --arg all "$SLOW"
}

@test "aisdk: a reload mid-reply resumes from the log and shows each word once; the client's abort stopped nothing" {
    AGENT=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    # The reply waits after 10 deltas (40 characters) until the readers below are
    # reading: it is still under way when they come, however slowly node starts.
    rn_script "$(slow_reply | jq -c '.holdAfter = 10')"
    # The first client goes away (chat.stop(): its fetch is aborted) after 20 characters.
    sdk "$id" send "Count to eighty." 20 >"$T/a.json"
    check "$T/a.json" '(.messages[1] | text | length) >= 20 and (.messages[1] | text) != $all' --arg all "$SLOW"
    # The page reloads: a new chat with what the page kept (only the question, or the
    # partial reply too) resumes, while the reply still streams.
    jq '.messages[:1]' "$T/a.json" >"$T/kept1.json"
    jq '.messages' "$T/a.json" >"$T/kept2.json"
    AISDK_READY="$T/r1" sdk "$id" resume "$T/kept1.json" >"$T/b1.json" &
    p1=$!
    AISDK_READY="$T/r2" sdk "$id" resume "$T/kept2.json" >"$T/b2.json" &
    p2=$!
    RN_BG_PIDS+=("$p1" "$p2")
    ds_poll 30 test -s "$T/r1" -a -s "$T/r2"
    [ "$(cat "$T/r1" "$T/r2")" = "$(printf '200\n200')" ]
    curl -fsS -o /dev/null -X POST "$RN_MOCK/__release"
    wait "$p1"
    wait "$p2"
    for f in b1 b2; do
        check "$T/$f.json" '.status == "ready" and .resumed and ([.messages[].role] == ["user", "assistant"])
            and (.messages[1] | text) == $all and (.messages[1].id == $mid)' \
            --arg all "$SLOW" --arg mid "$(jq -r '.messages[1].id' "$T/a.json")"
    done
    # Each word once, in order.
    [ "$(jq -r "$TEXT"' .messages[1] | text' "$T/b1.json" | tr ' ' '\n' | sort | uniq -d | wc -l)" = 0 ]
    # The abort cancelled nothing: one provider request, the session completed with it.
    rn_wait "$id" '.status == "completed"'
    [ "$(rn_request_count)" = 1 ]
    rn_holds "$id" '[.messages[] | .role] == ["user", "assistant"] and .messages[1].content == "'"$SLOW"'"'
    # Nothing under way now: 204, as for a chat that never began.
    req GET "/v1/aisdk/chat/$AGENT/$id/stream"
    assert_status 204
    req GET "/v1/aisdk/chat/$AGENT/$(ds_name never)/stream"
    assert_status 204
}

@test "aisdk: regenerate replaces the last reply: the model is asked afresh, the session keeps both, marked" {
    AGENT=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    rn_script '{"text": "First answer.", "usage": {"input": 5, "output": 2}}'
    sdk "$id" send "Say something." >"$T/a.json"
    jq '.messages' "$T/a.json" >"$T/kept.json"
    rn_script '{"text": "Second answer.", "usage": {"input": 9, "output": 2}}'
    sdk "$id" regenerate "$T/kept.json" >"$T/b.json"
    check "$T/b.json" '.status == "ready" and ([.messages[].role] == ["user", "assistant"]) and (.messages[1] | text) == "Second answer."'
    rn_holds "$id" '[.messages[] | .content] == ["Say something.", "First answer.", "Say something.", "Second answer."]
        and [.messages[] | .superseded == true] == [true, true, false, false]'
    # The model was asked the question alone, not after its first answer.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and [.[1].body.messages[] | .role] == ["user"]'
    # Regenerating by the reply's id (msg_<offset of its question>) replaces from there:
    # an earlier reply of the chat is regenerated, what came after it goes too (the
    # page holds the whole chat: both answers' pages joined).
    rn_script '{"text": "Third answer.", "usage": {"input": 9, "output": 2}}'
    sdk "$id" send "And more?" >"$T/c.json"
    jq -s '.[0].messages + .[1].messages' "$T/b.json" "$T/c.json" >"$T/page.json"
    rn_script '{"text": "Fourth answer.", "usage": {"input": 9, "output": 2}}'
    AISDK_REGENERATE_ID=$(jq -r '.[1].id' "$T/page.json") sdk "$id" regenerate "$T/page.json" >"$T/d.json"
    check "$T/d.json" '([.messages[].role] == ["user", "assistant"]) and (.messages[1] | text) == "Fourth answer."'
    rn_holds "$id" '[.messages[] | select(.superseded | not) | .content] == ["Say something.", "Fourth answer."]'
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 4 and [.[3].body.messages[] | .role] == ["user"]'
}

@test "aisdk: the stop route stops the reply under way: the client's stream ends with it, the chat goes on" {
    AGENT=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    # The reply waits after 10 deltas (40 characters) until the stop, which ends the
    # transfer and so the hold: it is still under way when the stop comes, however
    # slowly node starts and the events are polled.
    rn_script "$(slow_reply | jq -c '.holdAfter = 10')"
    sdk "$id" send "Count slowly." >"$T/a.json" &
    p=$!
    ds_poll 20 rn_has_event "$id" '.type == "text:delta"'
    req POST "/v1/aisdk/chat/$AGENT/$id/stop"
    assert_status 202
    wait "$p"
    rn_wait "$id" '.status == "completed" and .request == null'
    # The SDK's stream ended with the stop (an abort, not an error), the partial reply kept.
    check "$T/a.json" '.status == "ready" and .error == null and ([.messages[].role] == ["user", "assistant"])
        and (.messages[1] | text | length) > 0 and (.messages[1] | text) != $all and ($all | startswith($got))' \
        --arg all "$SLOW" --arg got "$(jq -r "$TEXT"' .messages[1] | text' "$T/a.json")"
    rn_has_event "$id" '.type == "reply:stopped"'
    # Nothing is under way any more; the chat takes its next message.
    req GET "/v1/aisdk/chat/$AGENT/$id/stream"
    assert_status 204
    rn_script '{"text": "After the stop.", "usage": {"input": 9, "output": 3}}'
    sdk "$id" send "Go on." >"$T/b.json"
    check "$T/b.json" '.status == "ready" and (.messages[1] | text) == "After the stop."'
    rn_holds "$id" '[.messages[] | .role] == ["user", "assistant", "user", "assistant"] and .messages[1].reason == "stopped"'
}

@test "aisdk: bad bodies, unknown agents, another agent's chat and scopes get JSON errors" {
    AGENT=$(rn_agent anthropic claude-test-model)
    other=$(rn_agent anthropic claude-test-model)
    id=$(ds_name chat)
    msg='[{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]'
    post() { req POST "/v1/aisdk/chat/$1" -H 'Content-Type: application/json' --data-binary "$2"; }
    post "$AGENT" 'not json'
    assert_status 400
    assert_json_error
    post "$AGENT" '[1]'
    assert_status 400
    assert_json_error
    post "$AGENT" "{\"messages\": $msg}"
    assert_status 400
    assert_json_error bad_id
    post "$AGENT" "{\"id\": \"a/b\", \"messages\": $msg}"
    assert_status 400
    assert_json_error bad_id
    post "$AGENT" "{\"id\": \"$id\", \"messages\": []}"
    assert_status 400
    assert_json_error bad_messages
    post "$AGENT" "{\"id\": \"$id\", \"messages\": {}}"
    assert_status 400
    assert_json_error bad_messages
    post "$AGENT" "{\"id\": \"$id\", \"message\": []}"
    assert_status 400
    assert_json_error bad_messages
    post "$AGENT" "{\"id\": \"$id\", \"trigger\": \"resume-stream\", \"messages\": $msg}"
    assert_status 400
    assert_json_error bad_trigger
    post "$AGENT" "{\"id\": \"$id\", \"messages\": [{\"role\": \"assistant\", \"parts\": []}]}"
    assert_status 400
    assert_json_error bad_messages
    post "$AGENT" "{\"id\": \"$id\", \"messages\": [{\"role\": \"user\", \"parts\": [{\"type\": \"file\", \"url\": \"x\", \"mediaType\": \"image/png\"}]}]}"
    assert_status 400
    assert_json_error unsupported_part
    post "$AGENT" "{\"id\": \"$id\", \"messages\": [{\"role\": \"user\", \"parts\": [{\"type\": \"text\", \"text\": \"\"}]}]}"
    assert_status 400
    assert_json_error bad_content
    post "$(ds_name noagent)" "{\"id\": \"$id\", \"messages\": $msg}"
    assert_status 422
    assert_json_error unknown_agent
    # None of these made the session.
    rn_get "$id" || [ "$status_code" = 404 ]
    # The chat is a chat with one agent: another agent's route refuses it.
    rn_script '{"text": "ok", "usage": {"input": 1, "output": 1}}'
    post "$AGENT" "{\"id\": \"$id\", \"messages\": $msg}"
    assert_status 200
    post "$other" "{\"id\": \"$id\", \"messages\": $msg}"
    assert_status 409
    assert_json_error chat_agent_mismatch
    req GET "/v1/aisdk/chat/$AGENT/$id/nothing"
    assert_status 404
    req DELETE "/v1/aisdk/chat/$AGENT/$id/stream"
    assert_status 405
    # Scopes: the session's. A token that may write only its own prefix makes chats
    # there and no others; one that may only read cannot post, but can resume.
    p=$(ds_name tk)
    w=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "$p-w" --scope "sessions:write:$p-" --scope "sessions:read:$p-" | tail -n 1)
    ro=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "$p-r" --scope "sessions:read:$p-" | tail -n 1)
    rn_script '{"text": "mine", "usage": {"input": 1, "output": 1}}'
    req POST "/v1/aisdk/chat/$AGENT" -H "Authorization: Bearer $w" -H 'Content-Type: application/json' \
        --data-binary "{\"id\": \"$p-1\", \"messages\": $msg}"
    assert_status 200
    grep -q '"finish"' "$DS_BODY"
    req POST "/v1/aisdk/chat/$AGENT" -H "Authorization: Bearer $w" -H 'Content-Type: application/json' \
        --data-binary "{\"id\": \"x$p-1\", \"messages\": $msg}"
    assert_status 403
    req POST "/v1/aisdk/chat/$AGENT" -H "Authorization: Bearer $ro" -H 'Content-Type: application/json' \
        --data-binary "{\"id\": \"$p-1\", \"messages\": $msg}"
    assert_status 403
    req GET "/v1/aisdk/chat/$AGENT/$p-1/stream" -H "Authorization: Bearer $ro"
    assert_status 204
    req POST "/v1/aisdk/chat/$AGENT/$p-1/stop" -H "Authorization: Bearer $ro"
    assert_status 403
    req GET "/v1/aisdk/chat/$AGENT/$id/stream" -H "Authorization: Bearer $ro"
    assert_status 403
}

# ---- tool approval --------------------------------------------------------------------

# approval_agent APPROVAL_JSON: an agent with the operator's server t whose approval is
# APPROVAL_JSON; its name on stdout.
approval_agent() {
    local name
    name=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$name" --argjson a "$1" \
        '{name: $n, provider: "anthropic", model: "claude-test-model", mcpServers: ["t"], approval: $a}')"
    [ "$status_code" = 201 ] || { echo "agent: $status_code $(cat "$DS_BODY")" >&2; return 1; }
    echo "$name"
}

# The tool part of the SDK's reply: its last message's tool-NAME part.
TOOL='def tool($n): [.messages[-1].parts[] | select(.type == "tool-" + $n)][0];'

@test "aisdk: a tool that needs approval: the SDK is asked (tool-approval-request), approves, the tool runs and the reply goes on" {
    AGENT=$(approval_agent '{"t__echo": "required"}')
    id=$(ds_name chat)
    rn_script '{"replies": [
        {"text": "Let me echo.", "toolCalls": [{"id": "call_ok", "name": "t__echo", "arguments": {"text": "approved words"}}],
            "usage": {"input": 10, "output": 5}},
        {"text": "Echoed it.", "usage": {"input": 20, "output": 3}}]}'
    # The first reply stops at the question: the SDK shows the call waiting for approval.
    sdk "$id" send "Echo, please." >"$T/ask.json"
    check "$T/ask.json" "$TOOL"' .status == "ready" and .error == null and (.messages | length) == 2 and
        (tool("t__echo") | .toolCallId == "call_ok" and .state == "approval-requested" and .approval.id == "call_ok"
            and .input == {text: "approved words"})'
    # The session waits for the answer, holding nothing: awaiting_input, the call its
    # open input; no reply is under way to resume; the tool has not run.
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.callId == "call_ok" and .pendingInput.input == "approval"'
    req GET "/v1/aisdk/chat/$AGENT/$id/stream"
    assert_status 204
    rn_has_event "$id" '.type == "tool:result"' && false
    [ "$(rn_request_count)" = 1 ]
    # The page approves, in the same Chat: the SDK sends the answer by itself, the tool
    # runs, the model's next turn streams into the same message.
    jq '.messages' "$T/ask.json" >"$T/page.json"
    sdk "$id" approve "$T/page.json" yes >"$T/ok.json"
    check "$T/ok.json" "$TOOL"' .status == "ready" and .error == null and .answered == ["call_ok"] and (.messages | length) == 2 and
        (tool("t__echo") | .state == "output-available" and .approval.approved == true and (.output | tostring | test("approved words")))
        and ([.messages[1].parts[] | select(.type == "text") | .text] == ["Let me echo.", "Echoed it."])'
    rn_wait "$id" '.status == "completed" and .pendingInput == null'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "input:received") | .payload] == [{interactionId: "call_ok", response: true}]
        and ([.[] | select(.type == "tool:result") | .payload.isError] == [false])'
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and (.[1].body.messages | tostring | test("approved words"))'
}

@test "aisdk: a tool call the user denies is not run: the SDK shows it denied, the model is told why and replies" {
    AGENT=$(approval_agent '{"t": "required"}')
    id=$(ds_name chat)
    rn_script '{"replies": [
        {"toolCalls": [{"id": "call_no", "name": "t__count", "arguments": {}}], "usage": {"input": 10, "output": 5}},
        {"text": "Understood, I did not count.", "usage": {"input": 20, "output": 3}}]}'
    before=$(cat "$AISDK_TMP/mcp-state/count" 2>/dev/null || echo 0)
    AISDK_APPROVE=no AISDK_REASON="not today" sdk "$id" send "Count, please." >"$T/no.json"
    check "$T/no.json" "$TOOL"' .status == "ready" and .error == null and .answered == ["call_no"] and
        (tool("t__count") | .state == "output-denied" and .approval.approved == false and .approval.reason == "not today")
        and ([.messages[1].parts[] | select(.type == "text") | .text] == ["Understood, I did not count."])'
    rn_wait "$id" '.status == "completed"'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '([.[] | select(.type == "input:received") | .payload] == [{interactionId: "call_no", response: false, reason: "not today"}])
        and ([.[] | select(.type == "tool:result") | .payload | {isError, failed, denied}] == [{isError: true, failed: false, denied: true}])'
    # The model was told: not run, and why.
    rn_requests >"$T/requests.json"
    check "$T/requests.json" 'length == 2 and (.[1].body.messages | tostring | test("did not approve") and test("not today"))'
    [ "$(cat "$AISDK_TMP/mcp-state/count" 2>/dev/null || echo 0)" = "$before" ]
}

@test "aisdk: an approval pending across a kill -9 of the runner: approved after the restart, the call runs once" {
    AGENT=$(approval_agent '{"t__count": "required"}')
    id=$(ds_name chat)
    # Two calls: one needs approval, one does not (it runs at once).
    rn_script '{"replies": [
        {"text": "Counting.", "toolCalls": [{"id": "call_c", "name": "t__count", "arguments": {}},
            {"id": "call_e", "name": "t__echo", "arguments": {"text": "free"}}], "usage": {"input": 10, "output": 5}},
        {"text": "Counted.", "usage": {"input": 20, "output": 3}}]}'
    before=$(cat "$AISDK_TMP/mcp-state/count" 2>/dev/null || echo 0)
    sdk "$id" send "Count once." >"$T/ask.json"
    check "$T/ask.json" "$TOOL"' .status == "ready" and (tool("t__count") | .state == "approval-requested") and
        (tool("t__echo") | .state == "output-available")'
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.callId == "call_c"'
    # The runner dies while the approval waits; another one starts. The wait is in the log.
    rn_runner_signal KILL
    rn_runner_start
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.callId == "call_c"'
    jq '.messages' "$T/ask.json" >"$T/page.json"
    sdk "$id" approve "$T/page.json" yes >"$T/ok.json"
    check "$T/ok.json" "$TOOL"' .status == "ready" and .error == null and
        (tool("t__count") | .state == "output-available" and .approval.approved == true) and
        ([.messages[1].parts[] | select(.type == "text") | .text] == ["Counting.", "Counted."])'
    rn_wait "$id" '.status == "completed"'
    # It ran once, as approved: not cut off as a side-effecting call of a dead runner.
    [ "$(cat "$AISDK_TMP/mcp-state/count")" = "$((before + 1))" ]
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "tool:result") | .payload | [.callId, .isError]] == [["call_e", false], ["call_c", false]]'
}

@test "aisdk: several approvals in one step, one answered on the session's input route, the rest by the SDK; the answers' errors" {
    AGENT=$(approval_agent '{"t__echo": "required"}')
    id=$(ds_name chat)
    rn_script '{"replies": [
        {"toolCalls": [{"id": "call_1", "name": "t__echo", "arguments": {"text": "one"}},
            {"id": "call_2", "name": "t__echo", "arguments": {"text": "two"}}], "usage": {"input": 10, "output": 5}},
        {"text": "Both done.", "usage": {"input": 20, "output": 3}}]}'
    sdk "$id" send "Echo twice." >"$T/ask.json"
    check "$T/ask.json" '[.messages[1].parts[] | select(.type == "tool-t__echo") | .state] == ["approval-requested", "approval-requested"]'
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.callId == "call_1"'
    # The answer route (as the viewer and the CLI use it): a yes or no only.
    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' --data-binary '{"interactionId": "call_2", "response": "yes"}'
    assert_status 400
    assert_json_error bad_response
    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' --data-binary '{"interactionId": "call_2", "response": true, "reason": 5}'
    assert_status 400
    assert_json_error bad_input
    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' --data-binary '{"interactionId": "call_9", "response": true}'
    assert_status 409
    assert_json_error input_not_requested
    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' --data-binary '{"interactionId": "call_2", "response": true}'
    assert_status 202
    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' --data-binary '{"interactionId": "call_2", "response": true}'
    assert_status 409
    assert_json_error input_answered
    # Still waiting, for the other one; call_2 has not run (its step goes on when both are answered).
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.callId == "call_1"'
    # The SDK answers both (the page still shows both waiting): the one answered already is left as it is.
    jq '.messages' "$T/ask.json" >"$T/page.json"
    sdk "$id" approve "$T/page.json" yes >"$T/ok.json"
    check "$T/ok.json" '.status == "ready" and .error == null and
        ([.messages[1].parts[] | select(.type == "tool-t__echo") | .state] == ["output-available", "output-available"]) and
        ([.messages[1].parts[] | select(.type == "text") | .text] == ["Both done."])'
    rn_events "$id" >"$T/ev.json"
    check "$T/ev.json" '[.[] | select(.type == "input:received") | .payload.interactionId] == ["call_2", "call_1"]'
    # An approval POST for a chat with nothing waiting, or for no chat, is refused.
    post() { req POST "/v1/aisdk/chat/$AGENT" -H 'Content-Type: application/json' --data-binary "$1"; }
    answered=$(jq -c --arg id "$id" '{id: $id, trigger: "submit-message", messages: .}' "$T/page.json" |
        jq -c '.messages[-1].parts |= map(if .state == "approval-requested" then .state = "approval-responded" | .approval.approved = true else . end)')
    post "$answered"
    assert_status 409
    assert_json_error input_not_requested
    post "$(jq -c --arg id "$(ds_name none)" '.id = $id' <<<"$answered")"
    assert_status 404
    post "$(jq -c '.messages[-1].parts |= map(.approval.approved = "yes")' <<<"$answered")"
    assert_status 400
    assert_json_error bad_messages
    post "$(jq -c '.messages[-1].parts |= map(select(.type != "tool-t__echo"))' <<<"$answered")"
    assert_status 400
    assert_json_error bad_messages
}
