#!/usr/bin/env bats
# Agents that act: MCP servers configured by the operator (DSTREAM_MCP_CONFIG), their
# tools offered to the model (tests/mock-provider scripts the tool calls in both wire
# formats), calls run and their results sent back, workflow tool steps, skills, and
# what the runner does when a server misbehaves or the runner itself is killed.
#
# Servers: the real filesystem server from the npm registry
# (@modelcontextprotocol/server-filesystem, installed by tests/mcp/install.sh) on a
# temporary directory, and tests/mcp/test-server.mjs (crash mid-call, hang, error
# result, notification, large result, side-effect counter), plus the same test
# server told to exit at start. Server t times a call out after 3 s (the hang test
# needs it); a call that must still run while a test acts on it (a kill -9, a
# cancel) goes to server slow, the same server (and state) with a timeout of 2
# minutes, so a busy machine's slow polls cannot end it first. Waits are polls with
# deadlines.

load runner-helpers

setup_file() {
    FS_ENTRY=$("$DS_ROOT/tests/mcp/install.sh") || return 1
    MCP_TMP=$(mktemp -d -t dstream-mcp.XXXXXX)
    mkdir -p "$MCP_TMP/files" "$MCP_TMP/state"
    FILES=$(cd "$MCP_TMP/files" && pwd -P)
    STATE=$MCP_TMP/state
    local node
    node=$(command -v node)
    jq -n --arg node "$node" --arg fs "$FS_ENTRY" --arg files "$FILES" \
        --arg ts "$DS_ROOT/tests/mcp/test-server.mjs" --arg state "$STATE" '{mcpServers: {
            files: {command: $node, args: [$fs, $files]},
            t: {command: $node, args: [$ts, "--state", $state], timeoutMs: 3000},
            slow: {command: $node, args: [$ts, "--state", $state], timeoutMs: 120000},
            dead: {command: $node, args: [$ts, "--exit-at-start"]},
            m: {command: $node, args: [$ts], timeoutMs: 2000},
            idle: {command: $node, args: [$ts], idleStopMs: 300}}}' >"$MCP_TMP/mcp.json"
    chmod 644 "$MCP_TMP/mcp.json"
    export FILES STATE MCP_TMP
    # A tool result may be 110000 bytes here (the default is 1 MiB).
    rn_start DSTREAM_MCP_CONFIG="$MCP_TMP/mcp.json" DSTREAM_TOOL_RESULT_MAX=110000
}
teardown_file() {
    rn_stop
    [ -n "${MCP_TMP:-}" ] && rm -rf "$MCP_TMP"
    return 0
}
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# mcp_agent PROVIDER MODEL SERVERS_JSON [EXTRA_JSON]: store an agent using those servers.
mcp_agent() {
    local name
    name=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$name" --arg p "$1" \
        --arg m "$2" --argjson s "$3" --argjson x "${4:-{\}}" '{name: $n, provider: $p, model: $m, mcpServers: $s} + $x')"
    [ "$status_code" = 201 ] || { echo "agent: $status_code $body" >&2; return 1; }
    echo "$name"
}

# events_of ID: the session's events into $T/ev.json.
events_of() { rn_events "$1" >"$T/ev.json"; }

# ev JQ: run a jq program on $T/ev.json.
ev() { jq -r "$1" "$T/ev.json"; }

count_file() { cat "$STATE/count" 2>/dev/null || echo 0; }

# ---- the operator's servers only --------------------------------------------------------

@test "agents: MCP servers by name only; a command or env in an agent is refused and a GET shows no secret" {
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary '{"name": "evil", "provider": "openai",
        "model": "m", "mcpServers": [{"name": "sh", "command": ["/bin/sh", "-c", "id"], "env": {"LD_PRELOAD": "/tmp/x.so"}}]}'
    assert_status 400
    jq -e '.error.details | any(startswith("mcpServers[0]: commands and environment cannot be given"))' "$DS_BODY"
    a=$(mcp_agent openai gpt-test-model '["files", "t"]')
    req GET "/v1/agents/$a"
    assert_status 200
    jq -e '.mcpServers == ["files", "t"]' "$DS_BODY"
}

@test "the runner refuses an MCP configuration with a mistake, or one that others may write, and says why" {
    printf '%s\n' '{"mcpServers": {"x": {"command": "node", "env": {"A": 1}}}}' >"$T/bad.json"
    chmod 644 "$T/bad.json"
    run env DSTREAM_MCP_CONFIG="$T/bad.json" "$DS_BIN/dstream-runner" --db "$T/none.db"
    [ "$status" = 2 ]
    [[ "$output" == *"mcpServers.x.command: must be an absolute path"* ]]
    [[ "$output" == *"mcpServers.x.env.A: must be a string"* ]]
    cp "$MCP_TMP/mcp.json" "$T/open.json"
    chmod 666 "$T/open.json"
    run env DSTREAM_MCP_CONFIG="$T/open.json" "$DS_BIN/dstream-runner" --db "$T/none.db"
    [ "$status" = 2 ]
    [[ "$output" == *"must not be writable by others"* ]]
    # dstream mcp says the same, and shows a good file's servers (env values hidden).
    run "$DS_BIN/dstream" mcp "$T/bad.json"
    [ "$status" = 1 ]
    [[ "$output" == *"problem: mcpServers.x.command: must be an absolute path"* ]]
    run "$DS_BIN/dstream" mcp "$MCP_TMP/mcp.json"
    [ "$status" = 0 ]
    [[ "$output" == *"files: $(command -v node) "*"6 MCP servers"* ]]
    [[ "$output" == *"idle: "*"stopped after 300 ms idle"* ]]
}

# ---- the real filesystem server ------------------------------------------------------------

# fs_chat PROVIDER MODEL: a chat whose model reads a file through the filesystem server.
fs_chat() {
    local provider=$1 model=$2 a id
    printf 'dstream reads files through MCP\n' >"$FILES/hello-$provider.txt"
    a=$(mcp_agent "$provider" "$model" '["files"]')
    rn_script "$(jq -nc --arg p "$FILES/hello-$provider.txt" '{replies: [
        {toolCalls: [{id: "call_fs_1", name: "files__read_text_file", arguments: {path: $p}}], usage: {input: 30, output: 9}},
        {text: "The file says: dstream reads files through MCP.", usage: {input: 50, output: 12}}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "What does hello.txt say?"
    rn_wait "$id" '.status == "completed" and ([.messages[] | select(.role == "assistant" and (.content | test("The file says")))] | length == 1)' 30
    events_of "$id"
    # Called once, resolved to the server's tool, read-only; its result is the file.
    [ "$(ev '[.[] | select(.type == "tool:called")] | length')" = 1 ]
    ev '.[] | select(.type == "tool:called") | .payload' | jq -e '.server == "files" and .tool == "read_text_file" and
        .sideEffecting == false and .callId == "call_fs_1" and .requestId != null'
    ev '.[] | select(.type == "tool:result") | .payload' | jq -e '.isError == false and .failed == false and
        (.result | contains("dstream reads files through MCP"))'
    # Two requests: the first offered the server's tools, the second carried the result.
    rn_requests >"$T/req.json"
    [ "$(jq length "$T/req.json")" = 2 ]
    if [ "$provider" = anthropic ]; then
        jq -e '.[0].body.tools | any(.name == "files__read_text_file" and .input_schema.type == "object")' "$T/req.json"
        jq -e '.[1].body.messages | any(.role == "assistant" and (.content | type == "array") and
            any(.content[]; .type == "tool_use" and .id == "call_fs_1"))' "$T/req.json"
        jq -e '.[1].body.messages | any(.role == "user" and (.content | type == "array") and
            any(.content[]; .type == "tool_result" and .tool_use_id == "call_fs_1" and (.content | contains("through MCP"))))' "$T/req.json"
    else
        jq -e '.[0].body.tools | any(.type == "function" and .function.name == "files__read_text_file" and .function.parameters.type == "object")' "$T/req.json"
        jq -e '.[1].body.messages | any(.role == "assistant" and any(.tool_calls[]?; .id == "call_fs_1"))' "$T/req.json"
        jq -e '.[1].body.messages | any(.role == "tool" and .tool_call_id == "call_fs_1" and (.content | contains("through MCP")))' "$T/req.json"
    fi
}

@test "filesystem server (anthropic): tools listed, a call made, its result in the next request, the final reply" {
    fs_chat anthropic claude-test-model
}

@test "filesystem server (openai): tools listed, a call made, its result in the next request, the final reply" {
    fs_chat openai gpt-test-model
}

@test "workflow: tool steps write a file and read it back through the filesystem server" {
    local wf id
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, initialPhase: "io", phases: [{name: "io", terminal: true, steps: [
        {kind: "tool", name: "Write", server: "files", tool: "write_file",
         arguments: {path: "{{input.dir}}/note.txt", content: "note about {{input.topic}}"}, update: {wrote: "$output"}},
        {kind: "tool", name: "Read", server: "files", tool: "read_text_file",
         arguments: {path: "{{input.dir}}/note.txt"}, update: {note: "$output"}}]}]}')"
    id=$(rn_session "$(jq -nc --arg w "$wf" --arg d "$FILES" '{workflow: $w, input: {dir: $d, topic: "owls"}}')")
    rn_wait "$id" '.status == "completed"' 30
    [ "$(cat "$FILES/note.txt")" = "note about owls" ]
    rn_get "$id"
    jq -e '.state.note == "note about owls" and (.state.wrote | test("Successfully wrote"))' "$DS_BODY"
    events_of "$id"
    # write_file has side effects (its annotations), read_text_file not.
    ev '[.[] | select(.type == "tool:called") | .payload | [.tool, .sideEffecting, .phase, .step]]' |
        jq -e '. == [["write_file", true, "io", 0], ["read_text_file", false, "io", 1]]'
    [ "$(ev '[.[] | select(.type == "tool:result" and .payload.isError == false)] | length')" = 2 ]
}

@test "workflow: an agent step (invoking a skill) reads a file through the filesystem server, then answers; the answer is the step's output" {
    local a wf id
    printf 'owls hunt at night\n' >"$FILES/facts.txt"
    a=$(mcp_agent anthropic claude-test-model '["files"]' '{"skills": [{"name": "brief", "instructions": "Answer in {{n}} words.", "params": ["n"]}]}')
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$a" '{name: $n, phases: [{name: "p", terminal: true, steps: [
        {kind: "agent", agent: $a, prompt: "Summarize {{input.file}}", skill: {name: "brief", params: {n: "{{input.words}}"}},
         update: {summary: "$output"}}]}]}')"
    rn_script "$(jq -nc --arg p "$FILES/facts.txt" '{replies: [
        {toolCalls: [{id: "w1", name: "files__read_text_file", arguments: {path: $p}}]},
        {text: "Owls are nocturnal hunters."}]}')"
    id=$(rn_session "$(jq -nc --arg w "$wf" --arg f "$FILES/facts.txt" '{workflow: $w, input: {file: $f, words: "five"}}')")
    rn_wait "$id" '.status == "completed"' 30
    rn_get "$id"
    jq -e '.state.summary == "Owls are nocturnal hunters."' "$DS_BODY"
    events_of "$id"
    ev '.[] | select(.type == "tool:result" and .payload.callId == "w1") | .payload' | jq -e '.result | contains("owls hunt at night")'
    [ "$(ev '[.[] | select(.type == "agent:started")] | length')" = 1 ]
    [ "$(ev '[.[] | select(.type == "agent:completed")] | length')" = 1 ]
    rn_requests >"$T/req.json"
    jq -e '.[1].body.messages[0].content == "Answer in five words.\n\nSummarize \($f)" and
        (.[1].body.system | contains("## brief (parameters: n)")) and
        any(.[1].body.messages[]; .role == "user" and any(.content[]?; .type == "tool_result" and .tool_use_id == "w1"))' \
        --arg f "$FILES/facts.txt" "$T/req.json"
}

# ---- a misbehaving server ----------------------------------------------------------------

@test "test server: error result, hang past the timeout, notification and a large result in one turn; the reply goes on" {
    local a id
    a=$(mcp_agent anthropic claude-test-model '["t"]')
    rn_script "$(jq -nc '{replies: [
        {toolCalls: [{id: "c_fail", name: "t__fail", arguments: {}}, {id: "c_hang", name: "t__hang", arguments: {}},
                     {id: "c_note", name: "t__notify", arguments: {}}, {id: "c_big", name: "t__big", arguments: {bytes: 100000}},
                     {id: "c_echo", name: "t__echo", arguments: {text: "hi"}}, {id: "c_ask", name: "t__ask", arguments: {}}]},
        {text: "Done with the tools."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Use every tool."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .role == "assistant" and .content == "Done with the tools.")' 30
    events_of "$id"
    result() { ev ".[] | select(.type == \"tool:result\" and .payload.callId == \"$1\") | .payload"; }
    result c_fail | jq -e '.isError == true and .failed == false and .result == "the tool failed on purpose"'
    result c_hang | jq -e '.isError == true and .failed == true and (.result | test("did not answer within 3000 ms"))'
    result c_note | jq -e '.isError == false and .result == "notified and pinged"'
    result c_echo | jq -e '.isError == false and .result == "hi"'
    # A request of the server's own that dstream does not offer is refused (-32601).
    result c_ask | jq -e '.isError == false and (.result | startswith("refused -32601"))'
    # The large result is recorded whole; the model got it cut, with the marker.
    result c_big | jq -e '.isError == false and (.result | length) == 100000'
    rn_requests >"$T/req.json"
    jq -e '.[1].body.messages | any(.role == "user" and any(.content[]?; .type == "tool_result" and .tool_use_id == "c_big" and
        (.content | length) < 40000 and (.content | test("truncated: 32768 of 100000 bytes shown"))))' "$T/req.json"
    # The server saw the cancellation of the hung call; its notification reached the log.
    ds_poll 5 grep -q '"notifications/cancelled"' "$STATE/received.jsonl"
    grep -q 'mcp t: info: "notify tool says hello"' "$DS_DIR/logs/runner.log"
}

@test "test server: a crash mid-call fails that call only; the server is started again for the next" {
    local a id
    a=$(mcp_agent openai gpt-test-model '["t"]')
    rn_script "$(jq -nc '{replies: [
        {toolCalls: [{id: "c_crash", name: "t__crash", arguments: {}}]},
        {toolCalls: [{id: "c_after", name: "t__echo", arguments: {text: "still here"}}]},
        {text: "Recovered."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Crash, then echo."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Recovered.")' 30
    events_of "$id"
    ev '.[] | select(.type == "tool:result" and .payload.callId == "c_crash") | .payload' |
        jq -e '.failed == true and (.result | test("exited with status 3 during the call"))'
    ev '.[] | select(.type == "tool:result" and .payload.callId == "c_after") | .payload' |
        jq -e '.failed == false and .result == "still here"'
    ds_poll 10 grep -q 'mcp t: stderr: test-server: crashing mid-call' "$DS_DIR/logs/runner.log"
    rn_runner_alive
}

@test "a server that exits at start: tool:server_failed, the reply goes on without its tools; a tool step on it fails the workflow" {
    local a id wf
    a=$(mcp_agent anthropic claude-test-model '["dead"]')
    rn_script '{"text": "No tools today."}'
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Hello?"
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "No tools today.")' 30
    events_of "$id"
    ev '.[] | select(.type == "tool:server_failed") | .payload' | jq -e '.server == "dead" and (.error | test("exited with status 3 at start"))'
    rn_requests >"$T/req.json"
    jq -e '.[0].body.tools == null' "$T/req.json"
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, phases: [{name: "p", terminal: true, steps: [
        {kind: "tool", server: "dead", tool: "echo", arguments: {text: "x"}}]}]}')"
    id=$(rn_session "{\"workflow\": \"$wf\"}")
    rn_wait "$id" '.status == "failed" and (.error | test("dead/echo: MCP server dead is unavailable"))' 30
    rn_runner_alive
}

@test "workflow: a tool step whose tool answers an error fails the workflow with what it said" {
    local wf id
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, phases: [{name: "p", terminal: true, steps: [
        {kind: "tool", server: "t", tool: "fail"}]}]}')"
    id=$(rn_session "{\"workflow\": \"$wf\"}")
    rn_wait "$id" '.status == "failed" and (.error | test("tool step fail: the tool failed on purpose"))' 30
}

@test "a server unused for idleStopMs is stopped, and started again when next needed" {
    local a id
    a=$(mcp_agent openai gpt-test-model '["idle"]')
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "i1", name: "idle__echo", arguments: {text: "one"}}]}, {text: "First."},
                                    {toolCalls: [{id: "i2", name: "idle__echo", arguments: {text: "two"}}]}, {text: "Second."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Once."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "First.")' 30
    ds_poll 10 grep -q 'mcp idle: idle, stopping' "$DS_DIR/logs/runner.log"
    rn_say "$id" "Twice."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Second.")' 30
    events_of "$id"
    ev '.[] | select(.type == "tool:result" and .payload.callId == "i2") | .payload' | jq -e '.result == "two" and .failed == false'
    [ "$(grep -c 'mcp idle: started' "$DS_DIR/logs/runner.log")" -ge 2 ]
}

@test "/metrics: MCP calls, failures by reason and server starts, exactly, for the server the test alone uses" {
    local a id runner
    runner=$(sed -n 's/.*started (owner \([^,]*\),.*/\1/p' "$DS_DIR/logs/runner.log" | tail -n 1)
    [ -n "$runner" ]
    a=$(mcp_agent anthropic claude-test-model '["m"]')
    # Five calls: an answer, an error result and a hang past the timeout in one turn,
    # then a crash mid-call, then an answer from the server started again.
    rn_script "$(jq -nc '{replies: [
        {toolCalls: [{id: "m1", name: "m__echo", arguments: {text: "one"}}, {id: "m2", name: "m__fail", arguments: {}},
                     {id: "m3", name: "m__hang", arguments: {}}]},
        {toolCalls: [{id: "m4", name: "m__crash", arguments: {}}]},
        {toolCalls: [{id: "m5", name: "m__echo", arguments: {text: "five"}}]},
        {text: "Counted."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Call them all."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Counted.")' 30
    l="runner=\"$runner\",server=\"m\""
    # metric NAME{LABELS}: its value in the last scrape.
    metric() { awk -v k="$1" '$1 == k { print $2; found = 1 } END { exit !found }' "$T/metrics"; }
    figures() {
        curl -fsS --max-time 10 "$DS_URL/metrics" >"$T/metrics" &&
            [ "$(metric "dstream_runner_mcp_calls_total{$l}")" = 5 ] &&
            [ "$(metric "dstream_runner_mcp_server_starts_total{$l}")" = 2 ]
    }
    ds_poll 10 figures || fail "figures: $(grep mcp "$T/metrics")"
    [ "$(metric "dstream_runner_mcp_call_failures_total{$l,reason=\"error\"}")" = 1 ]
    [ "$(metric "dstream_runner_mcp_call_failures_total{$l,reason=\"timeout\"}")" = 1 ]
    [ "$(metric "dstream_runner_mcp_call_failures_total{$l,reason=\"crash\"}")" = 1 ]
    [ "$(metric "dstream_runner_mcp_call_failures_total{$l,reason=\"unavailable\"}")" = 0 ]
    for f in mcp_calls_total mcp_call_failures_total mcp_server_starts_total; do
        [ "$(grep -c "^# TYPE dstream_runner_$f counter\$" "$T/metrics")" = 1 ]
        grep -q "^# HELP dstream_runner_$f " "$T/metrics"
    done
}

# ---- kill -9: a side-effecting call never runs twice ------------------------------------------

@test "kill -9 after a side-effecting call's result, before it reaches the model: not executed again" {
    local a id before
    a=$(mcp_agent anthropic claude-test-model '["t"]')
    before=$(count_file)
    # The second request hangs: the runner is killed while it is in flight.
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "c_count", name: "t__count", arguments: {}}]}, {hang: true},
                                    {text: "Counted once."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Count."
    ds_poll 20 rn_has_event "$id" '.type == "tool:result" and .payload.callId == "c_count"'
    ds_poll 20 bash -c "[ \"\$(curl -fsS '$RN_MOCK/__requests' | jq length)\" -ge 2 ]"
    rn_runner_signal KILL
    rn_runner_start
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Counted once.")' 30
    [ "$(count_file)" = $((before + 1)) ]
    events_of "$id"
    [ "$(ev '[.[] | select(.type == "tool:result")] | length')" = 1 ]
    [ "$(ev '[.[] | select(.type == "tool:called")] | length')" = 1 ]
}

@test "kill -9 while a side-effecting call runs: after the restart it is answered as failed, never run twice" {
    local a id before
    # On server slow: the call still runs when the kill comes, however long the poll
    # below takes (on t it would time out after 3 s, and its result be written).
    a=$(mcp_agent openai gpt-test-model '["slow"]')
    before=$(count_file)
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "c_slow", name: "slow__count", arguments: {delayMs: 60000}}]},
                                    {text: "I could not tell whether it counted."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Count slowly."
    # The server has counted (the call is running) when the runner dies.
    ds_poll 20 bash -c "[ \"\$(cat '$STATE/count' 2>/dev/null || echo 0)\" -gt $before ]"
    rn_runner_signal KILL
    rn_runner_start
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "I could not tell whether it counted.")' 30
    [ "$(count_file)" = $((before + 1)) ]
    events_of "$id"
    ev '.[] | select(.type == "tool:result" and .payload.callId == "c_slow") | .payload' |
        jq -e '.failed == true and .isError == true and (.result | test("not run again"))'
    [ "$(ev '[.[] | select(.type == "tool:result")] | length')" = 1 ]
}

@test "fork: a side-effecting call is never run again in a fork, whether its result was recorded before the fork or not" {
    local a id before at fork
    a=$(mcp_agent anthropic claude-test-model '["t"]')
    before=$(count_file)
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "f_count", name: "t__count", arguments: {}}]}, {text: "Counted."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Count."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Counted.")' 30
    [ "$(count_file)" = $((before + 1)) ]
    events_of "$id"
    # Forked before its result: the call is open in the fork, and not run there.
    at=$(ev '.[] | select(.type == "tool:result") | .offset')
    rn_script '{"text": "Fork without the result."}'
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary "{\"at\": \"$at\"}"
    assert_status 201
    fork=$(jq -r .id "$DS_BODY")
    rn_wait "$fork" '.status == "completed" and any(.messages[]; .content == "Fork without the result.")' 30
    rn_events "$fork" >"$T/fork1.json"
    jq -e '[.[] | select(.type == "tool:result")] | length == 1 and (.[0].payload.failed == true) and
        (.[0].payload.result | test("not run again"))' "$T/fork1.json"
    # Forked after it: the recorded result is reused in the fork's next request.
    at=$(ev '[.[] | select(.type == "provider:request_started")][1].offset')
    rn_script '{"text": "Fork with the result."}'
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary "{\"at\": \"$at\"}"
    assert_status 201
    fork=$(jq -r .id "$DS_BODY")
    rn_wait "$fork" '.status == "completed" and any(.messages[]; .content == "Fork with the result.")' 30
    rn_requests >"$T/req.json"
    jq -e --arg c "count $((before + 1))" '.[0].body.messages | any(.role == "user" and
        any(.content[]?; .type == "tool_result" and .tool_use_id == "f_count" and .content == $c))' "$T/req.json"
    [ "$(count_file)" = $((before + 1)) ]
}

@test "cancel during a tool call: the call is abandoned (the server is told), the session ends cancelled, no result is written" {
    local a id
    # On server slow: the call still runs when the cancel comes, however long the polls
    # below take (on t it would time out after 3 s, its result be written and the
    # next reply complete the session).
    a=$(mcp_agent anthropic claude-test-model '["slow"]')
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "c_cancel", name: "slow__count", arguments: {delayMs: 60000}}]}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Count slowly."
    ds_poll 20 rn_has_event "$id" '.type == "tool:called" and .payload.callId == "c_cancel"'
    ds_poll 20 grep -q 'tool call c_cancel: count on slow' "$DS_DIR/logs/runner.log"
    req POST "/v1/sessions/$id/cancel"
    assert_status 202
    rn_wait "$id" '.status == "cancelled"' 30
    ds_poll 10 bash -c "grep -q '\"notifications/cancelled\".*the session no longer waits' '$STATE/received.jsonl'"
    events_of "$id"
    [ "$(ev '[.[] | select(.type == "tool:result")] | length')" = 0 ]
}

# ---- limits and skills -------------------------------------------------------------------

@test "limits.maxTurns: a model that keeps asking for tools is stopped (tool:loop_stopped) after that many turns" {
    local a id
    a=$(mcp_agent anthropic claude-test-model '["t"]' '{"limits": {"maxTurns": 2}}')
    rn_script "$(jq -nc '{replies: [range(3) | {toolCalls: [{id: "c\(.)", name: "t__echo", arguments: {text: "again"}}]}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Loop."
    rn_wait "$id" '.status == "completed"' 30
    events_of "$id"
    ev '.[] | select(.type == "tool:loop_stopped") | .payload' | jq -e '.reason == "maxTurns" and .turns == 2'
    [ "$(rn_request_count)" = 2 ]
}

@test "a permanent provider error in the turn after a tool call fails the reply once; nothing more is asked until the next message" {
    local a id
    a=$(mcp_agent anthropic claude-test-model '["t"]')
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "c1", name: "t__echo", arguments: {text: "x"}}]},
        {status: 400, errorType: "invalid_request_error", errorMessage: "refused for ever"}, {text: "Fine now."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Go."
    rn_wait "$id" '.status == "failed"' 30
    # The tool turn is over with the failed reply: the next request answers the next message.
    rn_say "$id" "Again."
    rn_wait "$id" '.status == "completed"' 30
    events_of "$id"
    [ "$(ev '[.[] | select(.type == "reply:failed")] | length')" = 1 ]
    [ "$(rn_request_count)" = 3 ]
    # The answer follows the second message: the last two messages are it and "Fine now.".
    rn_get "$id"
    jq -e '[.messages[-2:][] | [.role, .content]] == [["user", "Again."], ["assistant", "Fine now."]]' "$DS_BODY" >/dev/null ||
        fail "the answer is not the second message's: $(jq -c '.messages' "$DS_BODY")"
}

@test "skills: in the system prompt, invoked by a chat message, exported as DIR/<name>/SKILL.md" {
    local a id out
    a=$(mcp_agent anthropic claude-test-model '[]' '{"system": "Be brief.", "skills": [
        {"name": "summarize", "instructions": "Summarize for {{audience}} in {{words}} words.", "params": ["audience", "words"]}]}')
    rn_script '{"text": "Short."}'
    id=$(rn_session "{\"agent\": \"$a\"}")
    req POST "/v1/sessions/$id/messages" -H 'Content-Type: application/json' \
        --data-binary '{"content": "The text.", "skill": {"name": "summarize", "params": {"audience": "kids", "words": "10"}}}'
    assert_status 202
    rn_wait "$id" '.status == "completed"' 30
    rn_requests >"$T/req.json"
    jq -e '.[0].body.system | startswith("Be brief.\n\n# Skills") and contains("## summarize (parameters: audience, words)")' "$T/req.json"
    jq -e '.[0].body.messages[0].content == "Summarize for kids in 10 words.\n\nThe text."' "$T/req.json"
    # A skill that does not exist, or a missing parameter: 400.
    req POST "/v1/sessions/$id/messages" -H 'Content-Type: application/json' --data-binary '{"skill": {"name": "nope"}}'
    assert_status 400
    assert_json_error bad_skill
    req POST "/v1/sessions/$id/messages" -H 'Content-Type: application/json' \
        --data-binary '{"skill": {"name": "summarize", "params": {"audience": "kids"}}}'
    assert_status 400
    # Export; a planted link is not followed.
    out=$T/skills
    mkdir -p "$out" "$T/elsewhere"
    run "$DS_BIN/dstream" --db "$DS_DB" skills export "$out" "$a"
    [ "$status" = 0 ]
    grep -q '^name: summarize$' "$out/summarize/SKILL.md"
    grep -q 'Summarize for {{audience}} in {{words}} words.' "$out/summarize/SKILL.md"
    rm -rf "$out/summarize" && ln -s "$T/elsewhere" "$out/summarize"
    run "$DS_BIN/dstream" --db "$DS_DB" skills export "$out" "$a"
    [ "$status" = 1 ]
    [ -z "$(ls -A "$T/elsewhere")" ]
}

@test "a tool result over DSTREAM_TOOL_RESULT_MAX is not kept: the call fails saying so, the reply goes on" {
    local a id
    a=$(mcp_agent anthropic claude-test-model '["t"]')
    rn_script "$(jq -nc '{replies: [
        {toolCalls: [{id: "c_huge", name: "t__big", arguments: {bytes: 150000}}, {id: "c_fits", name: "t__big", arguments: {bytes: 100000}}]},
        {text: "Done."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Fetch it."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .role == "assistant" and .content == "Done.")' 30
    events_of "$id"
    ev '.[] | select(.type == "tool:result" and .payload.callId == "c_huge") | .payload' >"$T/huge.json"
    jq -e '.isError == true and .failed == true and
        (.result | test("^the tool.s result was 1[0-9]{5} bytes, over the limit of 110000 \\(DSTREAM_TOOL_RESULT_MAX\\)$"))' "$T/huge.json"
    ev '.[] | select(.type == "tool:result" and .payload.callId == "c_fits") | .payload' >"$T/fits.json"
    jq -e '.isError == false and (.result | length) == 100000' "$T/fits.json"
    # The model was told.
    rn_requests >"$T/req.json"
    jq -e '.[1].body.messages | any(.role == "user" and any(.content[]?; .type == "tool_result" and .tool_use_id == "c_huge" and
        (.content | tostring | test("DSTREAM_TOOL_RESULT_MAX"))))' "$T/req.json"
}
