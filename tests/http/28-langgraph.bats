#!/usr/bin/env bats
# The LangGraph SDK's Client against /v1/langgraph (docs/clients.md): the real
# @langchain/langgraph-sdk from npm (tests/langgraph: one small case script per test,
# run by run.mjs), through nginx, the pool and the runner, with the mock provider
# (tests/mock-provider) standing in for Anthropic. Assistants, threads (create, get,
# search, state, history, copy), runs streamed with messages-tuple and values, wait,
# join and cancel, a workflow's human checkpoint as an interrupt answered by a resumed
# run; the routes' errors and scopes with curl. Waits are polls with deadlines.

load runner-helpers

setup_file() {
    LG_NODE=$("$DS_ROOT/tests/langgraph/install.sh") || return 1
    export LG_NODE
    # A run's response ends after 3 s here: a longer one is followed by the SDK's
    # reconnection (Location, Last-Event-ID).
    rn_start DSTREAM_REPLY_MAX_MS=3000
}
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# sdk CASE [ARGS...]: run tests/langgraph/cases/CASE.mjs with the SDK's Client; its JSON
# result on stdout.
sdk() {
    timeout 60 "$LG_NODE" "$DS_ROOT/tests/langgraph/run.mjs" "$DS_URL/v1/langgraph" "$@"
}

# check FILE JQ [JQ_ARGS...]: the program holds on FILE; else print both and fail.
check() {
    local file=$1 prog=$2
    shift 2
    jq -e "$@" "$prog" "$file" >/dev/null && return 0
    { echo "does not hold: $prog"; jq -c . "$file" | cut -c1-3000; } >&2
    return 1
}

reply() { jq -nc --arg t "$1" '{text: $t, chunkSize: 4, usage: {input: 10, output: 5}}'; }

@test "langgraph: assistants are the agents and the workflows, read-only" {
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, initialState: {}, phases: [{name: "done", terminal: true}]}')"
    sdk assistants "$agent" "$wf" >"$T/a.json"
    check "$T/a.json" '(.search | map(.assistant_id) | index($a) != null and index($w) != null) and
        .agent.assistant_id == $a and .agent.graph_id == $a and .agent.metadata.kind == "agent" and
        .workflow.metadata.kind == "workflow" and .workflow.version == 1 and
        (.byGraph | map(.assistant_id)) == [$a]' --arg a "$agent" --arg w "$wf"
    req GET "/v1/langgraph/assistants/$(ds_name none)"
    assert_status 404
    assert_json_error not_found
}

@test "langgraph: a chat through threads and runs: streamed messages and values, state, history" {
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "$(reply "Hello there, how can I help?")"
    rn_script "$(reply "Still me.")"
    sdk chat "$agent" "Hi, who are you?" "And now?" >"$T/c.json"
    # The run's stream: metadata first, the values with the user's message, the reply's
    # chunks as (message chunk, metadata) tuples, the values with the reply, end.
    check "$T/c.json" '.one | map(.event) | .[0] == "metadata" and .[1] == "values" and .[-2] == "values" and
        (.[2:-2] | unique) == ["messages"]'
    check "$T/c.json" '.one[0].data.run_id != null and .one[1].data.messages == [.one[1].data.messages[0]] and
        .one[1].data.messages[0].type == "human" and .one[1].data.messages[0].content == "Hi, who are you?" and
        ([.one[] | select(.event == "messages") | .data[0].content] | join("")) == "Hello there, how can I help?" and
        ([.one[] | select(.event == "messages") | .data[0].type] | unique) == ["AIMessageChunk"] and
        (.one[-2].data.messages | map([.type, .content])) == [["human", "Hi, who are you?"], ["ai", "Hello there, how can I help?"]]'
    # The second run goes on with the thread's history; its updates: what the agent wrote.
    check "$T/c.json" '(.two[-2].data.messages | map(.content)) == ["Hi, who are you?", "Hello there, how can I help?", "And now?", "Still me."] and
        ([.two[] | select(.event == "updates") | .data.agent.messages | map([.type, .content])]) == [[["ai", "Still me."]]]'
    check "$T/c.json" '.state.values == .two[-2].data and .state.next == [] and .state.checkpoint.thread_id == .created.thread_id and
        .got.status == "idle" and .got.values == .state.values and .got.metadata.graph_id == $a and
        (.found | map(.thread_id)) == [.created.thread_id]' --arg a "$agent"
    # History: now, then the thread before each turn, newest first, each naming its parent.
    check "$T/c.json" '(.history | map(.values.messages | length)) == [4, 2, 0] and
        .history[0].checkpoint == .state.checkpoint and
        .history[0].parent_checkpoint.checkpoint_id == .history[1].checkpoint.checkpoint_id and
        .history[-1].parent_checkpoint == null and .earlier.values == .history[1].values'
    id=$(jq -r .created.thread_id "$T/c.json")
    rn_get "$id"
    check "$DS_BODY" '.agent == $a and (.messages | length) == 4' --arg a "$agent"
    # A fork by copy: the history up to now, and a run of its own.
    rn_script "$(reply "On the fork.")"
    sdk fork "$id" "$agent" "Fork?" >"$T/f.json"
    check "$T/f.json" '.copy.thread_id != $id and (.copy.values.messages | length) == 4 and
        (.fork.values.messages | map(.content)) == ["Hi, who are you?", "Hello there, how can I help?", "And now?", "Still me.", "Fork?", "On the fork."] and
        (.source.values.messages | length) == 4 and .run[-2].data == .fork.values' --arg id "$id"
    # Deleted, it is gone.
    req DELETE "/v1/langgraph/threads/$id"
    assert_status 204
    req GET "/v1/langgraph/threads/$id"
    assert_status 404
    assert_json_error not_found
}

@test "langgraph: a tool call streams as a chunk with tool_call_chunks and a tool message; values hold both" {
    agent=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$agent" '{name: $n,
        provider: "anthropic", model: "claude-test-model", tools: [{name: "word_count", description: "Count words",
        inputSchema: {type: "object", properties: {text: {type: "string"}}}}]}')"
    assert_status 201
    rn_script '{"replies": [
        {"text": "Let me count.", "toolCalls": [{"id": "call_wc", "name": "word_count", "arguments": {"text": "a b c"}}],
         "usage": {"input": 10, "output": 5}},
        {"text": "Counted.", "usage": {"input": 20, "output": 6}}]}'
    sdk tools "$agent" "Count a b c." >"$T/t.json"
    # Nothing runs word_count here (no binding): its result is a failed one, still a
    # tool message; then the model's next turn.
    check "$T/t.json" '[.run[] | select(.event == "messages") | .data[0] | select(.tool_call_chunks)] |
        length == 1 and .[0].tool_call_chunks[0].id == "call_wc" and .[0].tool_call_chunks[0].name == "word_count" and
        (.[0].tool_call_chunks[0].args | fromjson) == {text: "a b c"}'
    check "$T/t.json" '[.run[] | select(.event == "messages") | .data[0] | select(.type == "tool")] |
        length == 1 and .[0].tool_call_id == "call_wc" and (.[0].content | test("no tool named"))'
    check "$T/t.json" '(.state.values.messages | map(.type)) == ["human", "ai", "tool", "ai"] and
        .state.values.messages[1].tool_calls == [{id: "call_wc", name: "word_count", args: {text: "a b c"}, type: "tool_call"}] and
        .state.values.messages[2].tool_call_id == "call_wc" and .state.values.messages[3].content == "Counted." and
        .run[-2].data == .state.values'
}

@test "langgraph: stream mode events: on_chat_model_start, _stream, _end per model request, on_tool_start and _end per call" {
    agent=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$agent" '{name: $n,
        provider: "anthropic", model: "claude-test-model", tools: [{name: "word_count", description: "Count words",
        inputSchema: {type: "object", properties: {text: {type: "string"}}}}]}')"
    assert_status 201
    rn_script '{"replies": [
        {"text": "Let me count.", "toolCalls": [{"id": "call_wc", "name": "word_count", "arguments": {"text": "a b c"}}],
         "usage": {"input": 10, "output": 5}},
        {"text": "Counted.", "usage": {"input": 20, "output": 6}}]}'
    sdk events "$agent" "Count a b c." >"$T/e.json"
    # Only what the mode asks for: metadata, the events, end.
    check "$T/e.json" '(map(.event) | unique) - ["metadata", "end"] == ["events"] and .[0].event == "metadata"'
    # Each model request: a start, its text's chunks, an end, under the request's run_id;
    # the tool call between the two requests.
    check "$T/e.json" '[.[] | select(.event == "events") | .data] as $e |
        ([$e[].event] | reduce .[] as $x ([]; if .[-1] == $x then . else . + [$x] end)) ==
            ["on_chat_model_start", "on_chat_model_stream", "on_tool_start", "on_chat_model_end", "on_tool_end",
             "on_chat_model_start", "on_chat_model_stream", "on_chat_model_end"] and
        ([$e[] | select(.event == "on_chat_model_start") | .run_id] | length == 2 and .[0] != .[1]) and
        ([$e[] | select(.event == "on_chat_model_stream") | .data.chunk.content] | join("")) == "Let me count.Counted." and
        ([$e[] | select(.event == "on_chat_model_stream") | .data.chunk.type] | unique) == ["AIMessageChunk"] and
        ([$e[] | select(.event == "on_chat_model_start") | .name] | unique) == ["claude-test-model"] and
        ([$e[] | select(.event | test("^on_chat_model")) | .run_id] | unique | length) == 2 and
        ([$e[] | select(.event == "on_chat_model_end") | .data.output.usage_metadata.output_tokens]) == [5, 6] and
        ([$e[] | select(.event == "on_tool_start")] | length == 1 and .[0].name == "word_count" and
            .[0].run_id == "call_wc" and .[0].data.input == {text: "a b c"}) and
        ([$e[] | select(.event == "on_tool_end")] | length == 1 and .[0].run_id == "call_wc" and
            .[0].data.output.tool_call_id == "call_wc" and .[0].data.output.status == "error") and
        ([$e[] | .tags == [] and .parent_ids == [] and (.metadata.langgraph_node | type) == "string"] | all)'
}

@test "langgraph: runs.wait, runs.create then join, runs.get; a cancel stops the reply and the thread goes on" {
    agent=$(rn_agent anthropic claude-test-model)
    rn_script "$(reply "Waited for.")"
    rn_script "$(reply "Joined.")"
    sdk wait "$agent" "First?" "Second?" >"$T/w.json"
    check "$T/w.json" '.thread.status == "idle" and (.waited.messages | map(.content)) == ["First?", "Waited for."] and
        .run.status == "pending" and .run.thread_id == .thread.thread_id and
        (.joined.messages | map(.content)) == ["First?", "Waited for.", "Second?", "Joined."] and .got.status == "success" and
        (.list | length) == 2 and .list[0].run_id == .run.run_id and (.list | map(.status) | unique) == ["success"] and
        (.older | map(.run_id)) == [.list[1].run_id] and .list[1].run_id == (.joined.messages[0].id | ltrimstr("msg_"))'
    # A slow reply, cancelled once it has begun: it stops where it was. It waits after 5
    # deltas (20 characters) until released, which nothing here does: it is still
    # under way when the cancel comes, however slowly the case gets there, and the
    # cancel (which closes the provider's connection) ends the wait.
    rn_script "$(jq -nc --arg t "$(seq -s ' ' 1 80)" '{text: $t, chunkSize: 4, delayMs: 50, holdAfter: 5,
        usage: {input: 40, output: 80}}')"
    sdk cancel "$agent" "Count slowly." >"$T/x.json"
    check "$T/x.json" '.status == "success" and (.joined.messages | length) == 2 and (.joined.messages[1].content | length) < 200'
    id=$(jq -r .thread.thread_id "$T/x.json")
    rn_has_event "$id" '.type == "reply:stopped"'
}

@test "langgraph: a run joined while it streams (joinStream, a reload) reads the whole reply from the log, each word once; a run longer than DSTREAM_REPLY_MAX_MS is followed by the SDK's reconnection" {
    agent=$(rn_agent anthropic claude-test-model)
    slow=$(seq -s ' ' 1 130 | sed 's/[0-9]*/w&/g')
    rn_script "$(jq -nc --arg t "$slow" '{text: $t, chunkSize: 4, delayMs: 40, usage: {input: 40, output: 60}}')"
    sdk slow "$agent" "Count slowly." >"$T/s.json"
    # It was joined mid-reply: the thread had part of it. The reply took longer than a
    # response lasts: both readers reconnected (from their last event) and saw one
    # metadata event, each word once.
    check "$T/s.json" '.seen > 0 and .seen < ($all | length) and .elapsed > 3000 and
        ([.own[], .joined[] | select(.event == "metadata")] | length) == 2' --arg all "$slow"
    check "$T/s.json" '.runId != null and .midway == "success" and
        ([.own[] | select(.event == "messages") | .data[0].content] | join("")) == $all and
        ([.joined[] | select(.event == "messages") | .data[0].content] | join("")) == $all and
        .joined[0] == {event: "metadata", data: {run_id: .runId, attempt: 1}} and .joined[-1].event == "end" and
        .joined[-2].data == .own[-2].data and (.own[-2].data.messages[1].content) == $all' --arg all "$slow"
}

@test "langgraph: a workflow's human checkpoint is an interrupt, answered by a run resumed with command" {
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{name: $n, initialState: {ok: null}, phases: [
        {name: "draft", steps: [{kind: "agent", name: "Draft", agent: $a, prompt: "Write about {{input.topic}}.",
            update: {draft: "$output"}}], transitions: [{to: "ask"}]},
        {name: "ask", steps: [{kind: "human", id: "go", input: "approval", prompt: "Go?", update: {ok: "$response"}}],
         transitions: [{to: "done"}]}, {name: "done", terminal: true}]}')"
    rn_script "$(reply "A draft about tests.")"
    sdk interrupt "$wf" true >"$T/i.json"
    # The first run: the workflow's start, its agent step's text as messages, then the
    # human step: values with __interrupt__, the thread interrupted.
    check "$T/i.json" '([.first[] | select(.event == "messages") | .data[0].content] | join("")) == "A draft about tests." and
        .first[1] == {event: "values", data: {ok: null}} and .first[-2].data.draft == "A draft about tests."'
    check "$T/i.json" '.first[0].event == "metadata" and .first[-1].event == "end" and
        (.first[-2].data.__interrupt__ | length) == 1 and .first[-2].data.__interrupt__[0].id == "go" and
        .first[-2].data.__interrupt__[0].value.prompt == "Go?" and
        .waiting.status == "interrupted" and (.waiting.interrupts.go | length) == 1 and
        .waitingState.next == ["ask"] and .waitingState.tasks[0].interrupts[0].id == "go"'
    check "$T/i.json" '.resumed[-2].data == {ok: true, draft: "A draft about tests."} and
        .resumed[-3] == {event: "updates", data: {done: {ok: true, draft: "A draft about tests."}}} and
        .done.status == "idle" and .done.values == .resumed[-2].data'
}

@test "langgraph: bad bodies and unknown names get JSON errors; scopes are the sessions'" {
    agent=$(rn_agent anthropic claude-test-model)
    id=$(ds_name th)
    J=(-H 'Content-Type: application/json')
    run_post() { req POST "/v1/langgraph/threads/$1/runs/stream" "${J[@]}" --data-binary "$2"; }
    msg='{"messages": [{"role": "user", "content": "hi"}]}'
    run_post "$id" 'not json'
    assert_status 400
    assert_json_error
    run_post "$id" "{\"input\": $msg}"
    assert_status 400
    assert_json_error bad_assistant
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": {\"messages\": []}}"
    assert_status 400
    assert_json_error bad_messages
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": {\"messages\": [{\"role\": \"ai\", \"content\": \"x\"}]}}"
    assert_status 400
    assert_json_error bad_messages
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": {\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}}"
    assert_status 400
    assert_json_error unsupported_part
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": {\"messages\": [{\"role\": \"user\", \"content\": \"\"}]}}"
    assert_status 400
    assert_json_error bad_content
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": $msg, \"stream_mode\": [\"debug\"]}"
    assert_status 400
    assert_json_error unsupported_stream_mode
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": $msg, \"multitask_strategy\": \"later\"}"
    assert_status 400
    assert_json_error bad_multitask_strategy
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": $msg, \"checkpoint\": {\"checkpoint_id\": \"x\"}}"
    assert_status 400
    assert_json_error unsupported_checkpoint
    run_post "$id" "{\"assistant_id\": \"$agent\", \"command\": {\"goto\": \"x\"}}"
    assert_status 400
    assert_json_error bad_command
    run_post "$id" "{\"assistant_id\": \"$(ds_name none)\", \"input\": {}}"
    assert_status 422
    assert_json_error unknown_workflow
    req POST /v1/langgraph/threads "${J[@]}" --data-binary '{"thread_id": "a/b"}'
    assert_status 400
    assert_json_error bad_id
    req POST /v1/langgraph/threads/search "${J[@]}" --data-binary '{"limit": 0}'
    assert_status 400
    assert_json_error bad_limit
    req POST /v1/langgraph/threads/search "${J[@]}" --data-binary '{"offset": 1001}'
    assert_status 400
    assert_json_error bad_limit
    req POST "/v1/langgraph/threads/$id/history" "${J[@]}" --data-binary '{"before": {"configurable": {"checkpoint_id": "x"}}}'
    assert_status 400
    assert_json_error bad_checkpoint
    # None of these made the thread.
    req GET "/v1/langgraph/threads/$id/state"
    assert_status 404
    # reject: a run while a reply is under way is refused; interrupt cuts it. The reply
    # waits after 5 deltas until released, which nothing here does: it is under way
    # whenever the runs below come, and the cancel (which closes the provider's
    # connection) ends the wait.
    rn_script "$(jq -nc --arg t "$(seq -s ' ' 1 60)" '{text: $t, chunkSize: 4, delayMs: 50, holdAfter: 5,
        usage: {input: 1, output: 1}}')"
    req POST "/v1/langgraph/threads/$id/runs" "${J[@]}" --data-binary "{\"assistant_id\": \"$agent\", \"input\": $msg}"
    assert_status 200
    run=$(jq -r .run_id "$DS_BODY")
    run_post "$id" "{\"assistant_id\": \"$agent\", \"input\": $msg, \"multitask_strategy\": \"reject\"}"
    assert_status 409
    assert_json_error busy
    other=$(rn_agent anthropic claude-test-model)
    run_post "$id" "{\"assistant_id\": \"$other\", \"input\": $msg}"
    assert_status 409
    assert_json_error assistant_mismatch
    # The join below needs a text:delta of the reply: the cancel comes after the first.
    ds_poll 20 rn_has_event "$id" '.type == "text:delta"'
    req POST "/v1/langgraph/threads/$id/runs/$run/cancel"
    assert_status 202
    rn_wait "$id" '.status == "completed"'
    # A run is named by its first event's offset: another offset is none (its join ends
    # at once), one not of the thread's log is 400.
    req GET "/v1/langgraph/threads/$id/runs/0000000000000001_0000000000000001/join"
    assert_status 400
    assert_json_error bad_offset
    req GET "/v1/langgraph/threads/$id/runs/nothing"
    assert_status 400
    assert_json_error bad_checkpoint
    req GET "/v1/langgraph/threads/$id/runs?limit=0"
    assert_status 400
    assert_json_error bad_limit
    rn_events "$id" >"$T/ev.json"
    tdelta=$(jq -r '[.[] | select(.type == "text:delta")][0].offset' "$T/ev.json")
    DS_CURL_MAX_TIME=5 req GET "/v1/langgraph/threads/$id/runs/$tdelta/join"
    assert_status 200
    check "$DS_BODY" '(.messages | length) >= 1'
    # Scopes: a token that may read and write only its own prefix sees only its
    # threads; one without sessions:read gets 403.
    p=$(ds_name tk)
    w=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "$p-w" --scope "sessions:write:$p-" --scope "sessions:read:$p-" | tail -n 1)
    wo=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "$p-o" --scope "sessions:write:$p-" | tail -n 1)
    A=(-H "Authorization: Bearer $w")
    req POST /v1/langgraph/threads/search "${A[@]}" "${J[@]}" --data-binary '{"limit": 100}'
    assert_status 200
    check "$DS_BODY" 'length == 0'
    req POST /v1/langgraph/threads/search "${A[@]}" "${J[@]}" --data-binary "{\"ids\": [\"$id\"]}"
    assert_status 200
    check "$DS_BODY" 'length == 0'
    req GET "/v1/langgraph/threads/$id" "${A[@]}"
    assert_status 403
    req POST /v1/langgraph/threads "${A[@]}" "${J[@]}" --data-binary "{\"thread_id\": \"x$p\"}"
    assert_status 403
    req POST /v1/langgraph/threads "${A[@]}" "${J[@]}" --data-binary "{\"metadata\": {\"graph_id\": \"$agent\"}}"
    assert_status 200
    mine=$(jq -r .thread_id "$DS_BODY")
    [[ $mine == "$p-"* ]]
    req POST /v1/langgraph/threads/search "${A[@]}" "${J[@]}" --data-binary '{}'
    check "$DS_BODY" 'map(.thread_id) == [$m]' --arg m "$mine"
    req GET "/v1/langgraph/threads/$mine/state" -H "Authorization: Bearer $wo"
    assert_status 403
    req POST /v1/langgraph/threads/search -H "Authorization: Bearer $wo" "${J[@]}" --data-binary '{}'
    assert_status 403
    req POST "/v1/langgraph/threads/$mine/copy" -H "Authorization: Bearer $wo"
    assert_status 403
    # Without sessions:read a run may be started but not streamed or waited for (their
    # answers hold the thread's values), nor an existing thread answered.
    lgmsg="{\"assistant_id\": \"$agent\", \"input\": $msg}"
    req POST "/v1/langgraph/threads/$mine/runs/stream" -H "Authorization: Bearer $wo" "${J[@]}" --data-binary "$lgmsg"
    assert_status 403
    req POST "/v1/langgraph/threads/$mine/runs/wait" -H "Authorization: Bearer $wo" "${J[@]}" --data-binary "$lgmsg"
    assert_status 403
    req POST /v1/langgraph/threads -H "Authorization: Bearer $wo" "${J[@]}" --data-binary "{\"thread_id\": \"$mine\", \"if_exists\": \"do_nothing\"}"
    assert_status 403
    rn_script '{"text": "ok", "usage": {"input": 1, "output": 1}}'
    req POST "/v1/langgraph/threads/$mine/runs" -H "Authorization: Bearer $wo" "${J[@]}" --data-binary "$lgmsg"
    assert_status 200
    rn_wait "$mine" '.status == "completed" and (.messages | length) == 2'
}
