#!/usr/bin/env bats
# The operator's MCP configuration as the whole stack applies it (docs/mcp.md):
# agents and workflows may name only configured servers (the pool checks when they
# are written), declared tools bound by the operator to a server's tool
# ("bindings"), and a server whose tools change (notifications/tools/list_changed)
# listed again before the next request offers them.
#
# Servers: tests/mcp/test-server.mjs, as `t` (with an environment value that must
# never show) and as `g`, told to add a tool at its first call (--grow). The pool
# and the runner get the same DSTREAM_MCP_CONFIG. Waits are polls with deadlines.

load runner-helpers

setup_file() {
    MCP_TMP=$(mktemp -d -t dstream-mcpops.XXXXXX)
    mkdir -p "$MCP_TMP/state" "$MCP_TMP/gstate"
    local node
    node=$(command -v node)
    jq -n --arg node "$node" --arg ts "$DS_ROOT/tests/mcp/test-server.mjs" --arg state "$MCP_TMP/state" \
        --arg gstate "$MCP_TMP/gstate" '{
        mcpServers: {
            t: {command: $node, args: [$ts, "--state", $state], env: {TEST_SECRET: "s3cret-env-value"}},
            g: {command: $node, args: [$ts, "--grow", "--page-size", "2", "--state", $gstate]}},
        bindings: {say: {server: "t", tool: "echo"}, tally: {server: "t", tool: "count"}}}' >"$MCP_TMP/mcp.json"
    chmod 644 "$MCP_TMP/mcp.json"
    export MCP_TMP
    rn_start DSTREAM_MCP_CONFIG="$MCP_TMP/mcp.json"
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

# post_agent JSON: POST it to /v1/agents (status_code, DS_BODY set).
post_agent() { req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$1"; }

# no_secret: the last response names neither the server's command nor its environment.
no_secret() {
    ! grep -q 's3cret-env-value\|TEST_SECRET\|test-server.mjs\|--state' "$DS_BODY"
}

# The declared tools of the binding tests.
SAY='{"name": "say", "description": "Say the text aloud", "inputSchema": {"type": "object",
      "properties": {"text": {"type": "string"}}, "required": ["text"]}}'
TALLY='{"name": "tally", "inputSchema": {"type": "object"}}'

# ---- names are checked when a document is written ------------------------------------------

@test "agents: an unknown MCP server is refused at write time (unknown_mcp_server, with its JSON path), a configured one accepted" {
    local n
    n=$(ds_name agent)
    post_agent "{\"name\": \"$n\", \"provider\": \"anthropic\", \"model\": \"m\", \"mcpServers\": [\"t\", \"nope\"]}"
    assert_status 400
    assert_json_error unknown_mcp_server
    assert_body_json '.error.message == "mcpServers[1]: no MCP server named \"nope\" is configured"'
    assert_body_json '.error.details == ["mcpServers[1]: no MCP server named \"nope\" is configured"]'
    no_secret
    # PUT is checked the same way; nothing was stored.
    req PUT "/v1/agents/$n" -H 'Content-Type: application/json' \
        --data-binary '{"provider": "anthropic", "model": "m", "mcpServers": ["cms"]}'
    assert_status 400
    assert_json_error unknown_mcp_server
    assert_body_json '.error.message | contains("mcpServers[0]") and contains("\"cms\"")'
    req GET "/v1/agents/$n"
    assert_status 404
    # With other mistakes, every one is named under invalid_agent.
    post_agent "{\"name\": \"$n\", \"provider\": \"anthropic\", \"model\": \"m\", \"limits\": {\"maxTurns\": 0},
                 \"mcpServers\": [\"nope\", \"g\", \"other\"]}"
    assert_status 400
    assert_json_error invalid_agent
    assert_body_json '.error.details | any(startswith("limits.maxTurns:")) and
        any(. == "mcpServers[0]: no MCP server named \"nope\" is configured") and
        any(. == "mcpServers[2]: no MCP server named \"other\" is configured") and (any(startswith("mcpServers[1]")) | not)'
    no_secret
    # Configured names are accepted.
    post_agent "{\"name\": \"$n\", \"provider\": \"anthropic\", \"model\": \"m\", \"mcpServers\": [\"t\", \"g\"]}"
    assert_status 201
}

@test "workflows: a tool step on an unknown MCP server is refused at write time (unknown_mcp_server, with its JSON path)" {
    local n doc
    n=$(ds_name wf)
    doc=$(jq -nc --arg n "$n" --arg s nope '{name: $n, phases: [{name: "p", terminal: true, steps: [
        {kind: "update", set: {a: 1}}, {kind: "tool", server: $s, tool: "echo", arguments: {text: "x"}}]}]}')
    req POST /v1/workflows -H 'Content-Type: application/json' --data-binary "$doc"
    assert_status 400
    assert_json_error unknown_mcp_server
    assert_body_json '.error.message == "phases[0].steps[1].server: no MCP server named \"nope\" is configured"'
    no_secret
    req PUT "/v1/workflows/$n" -H 'Content-Type: application/json' --data-binary "$doc"
    assert_status 400
    assert_json_error unknown_mcp_server
    req POST /v1/workflows -H 'Content-Type: application/json' --data-binary "${doc/\"nope\"/\"t\"}"
    assert_status 201
}

@test "the pool refuses to start with an MCP configuration others may write or with a mistake, as the runner does" {
    cp "$MCP_TMP/mcp.json" "$T/open.json"
    chmod 666 "$T/open.json"
    run env DSTREAM_MCP_CONFIG="$T/open.json" "$DS_BIN/dstream-fcgi" --db "$T/none.db" --listen "$T/sock"
    [ "$status" = 2 ]
    [[ "$output" == *"must not be writable by others"* ]]
    jq '.mcpServers.t.command = "node" | .mcpServers.t.shell = true' "$MCP_TMP/mcp.json" >"$T/bad.json"
    chmod 644 "$T/bad.json"
    run env DSTREAM_MCP_CONFIG="$T/bad.json" "$DS_BIN/dstream-fcgi" --db "$T/none.db" --listen "$T/sock"
    [ "$status" = 2 ]
    [[ "$output" == *"mcpServers.t.command: must be an absolute path"* ]]
    [[ "$output" == *"mcpServers.t.shell: unknown key"* ]]
    [[ "$output" != *"s3cret-env-value"* ]]
    [ ! -e "$T/sock" ]
}

# ---- bindings --------------------------------------------------------------------------------

@test "bindings: a declared tool runs the server tool the operator bound it to; tool:called says what it resolved to" {
    local a id
    a=$(ds_name agent)
    post_agent "$(jq -nc --arg n "$a" --argjson say "$SAY" '{name: $n, provider: "anthropic", model: "claude-test-model",
        tools: [$say], mcpServers: ["t"]}')"
    assert_status 201
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "b_say", name: "say", arguments: {text: "bound and run"}}]},
                                    {text: "Said it."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Say something."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Said it.")' 30
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "tool:called") | .payload] | length == 1 and (.[0] | .callId == "b_say" and
        .name == "say" and .server == "t" and .tool == "echo" and .sideEffecting == false)' "$T/ev.json"
    jq -e '.[] | select(.type == "tool:result" and .payload.callId == "b_say") | .payload |
        .result == "bound and run" and .failed == false' "$T/ev.json"
    # The model was offered the declared tool as declared, and the server's own tools.
    rn_requests >"$T/req.json"
    jq -e '.[0].body.tools | any(.name == "say" and .description == "Say the text aloud") and any(.name == "t__echo")' "$T/req.json"
    jq -e '.[1].body.messages | any(.role == "user" and any(.content[]?; .type == "tool_result" and
        .tool_use_id == "b_say" and .content == "bound and run"))' "$T/req.json"
}

@test "bindings: a bound side-effecting tool is side-effecting; an agent that does not name the server gets no binding" {
    local a b id before
    before=$(cat "$MCP_TMP/state/count" 2>/dev/null || echo 0)
    a=$(ds_name agent)
    post_agent "$(jq -nc --arg n "$a" --argjson t "$TALLY" '{name: $n, provider: "openai", model: "gpt-test-model",
        tools: [$t], mcpServers: ["t"]}')"
    assert_status 201
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "b_tally", name: "tally", arguments: {}}]}, {text: "Tallied."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Tally."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Tallied.")' 30
    rn_events "$id" >"$T/ev.json"
    jq -e '.[] | select(.type == "tool:called") | .payload | .server == "t" and .tool == "count" and .sideEffecting == true' "$T/ev.json"
    [ "$(cat "$MCP_TMP/state/count")" = $((before + 1)) ]
    # The same declared tools without the server in mcpServers: the binding does not apply.
    b=$(ds_name agent)
    post_agent "$(jq -nc --arg n "$b" --argjson say "$SAY" --argjson t "$TALLY" '{name: $n, provider: "openai",
        model: "gpt-test-model", tools: [$say, $t], mcpServers: ["g"]}')"
    assert_status 201
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "u_tally", name: "tally", arguments: {}}]}, {text: "Could not."}]}')"
    id=$(rn_session "{\"agent\": \"$b\"}")
    rn_say "$id" "Tally."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Could not.")' 30
    rn_events "$id" >"$T/ev.json"
    jq -e '.[] | select(.type == "tool:called") | .payload | .name == "tally" and .server == null and .tool == null' "$T/ev.json"
    jq -e '.[] | select(.type == "tool:result") | .payload | .failed == true and .result == "no tool named tally"' "$T/ev.json"
    [ "$(cat "$MCP_TMP/state/count")" = $((before + 1)) ]
}

@test "dstream mcp shows the bindings; a binding to a server that is not configured is a mistake" {
    run "$DS_BIN/dstream" mcp "$MCP_TMP/mcp.json"
    [ "$status" = 0 ]
    [[ "$output" == *"binding say: echo on server t"* ]]
    [[ "$output" == *"binding tally: count on server t"* ]]
    [[ "$output" == *"2 MCP servers, 2 bindings"* ]]
    [[ "$output" == *"env: TEST_SECRET (values not shown)"* ]]
    [[ "$output" != *"s3cret-env-value"* ]]
    jq '.bindings += {"bad name": {server: "t", tool: "echo"}, x: {server: "gone", tool: "a b"}}' "$MCP_TMP/mcp.json" >"$T/bad.json"
    chmod 644 "$T/bad.json"
    run "$DS_BIN/dstream" mcp "$T/bad.json"
    [ "$status" = 1 ]
    [[ "$output" == *'problem: bindings.bad name: a tool name must be'* ]]
    [[ "$output" == *'problem: bindings.x.server: no server named "gone" in mcpServers'* ]]
    [[ "$output" == *'problem: bindings.x.tool: must be a tool name'* ]]
}

# ---- notifications/tools/list_changed ----------------------------------------------------------

@test "list_changed: a server that adds a tool at its first call is listed again, and the next request offers the new tool" {
    local a id lists
    a=$(ds_name agent)
    post_agent "$(jq -nc --arg n "$a" '{name: $n, provider: "anthropic", model: "claude-test-model", mcpServers: ["g"]}')"
    assert_status 201
    rn_script "$(jq -nc '{replies: [
        {toolCalls: [{id: "g1", name: "g__echo", arguments: {text: "first"}}]},
        {toolCalls: [{id: "g2", name: "g__grown", arguments: {text: "new"}}]},
        {text: "Used the new tool."}]}')"
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "Echo, then use what appears."
    rn_wait "$id" '.status == "completed" and any(.messages[]; .content == "Used the new tool.")' 30
    rn_requests >"$T/req.json"
    [ "$(jq length "$T/req.json")" = 3 ]
    # Offered before the change: not the new tool; after it: the new tool, and the old ones still.
    jq -e '(.[0].body.tools | any(.name == "g__grown") | not) and (.[0].body.tools | any(.name == "g__echo"))' "$T/req.json"
    jq -e '(.[1].body.tools | any(.name == "g__grown" and .description == "A tool added after the first call" and
        .input_schema.required == ["text"])) and (.[1].body.tools | any(.name == "g__big"))' "$T/req.json"
    rn_events "$id" >"$T/ev.json"
    jq -e '.[] | select(.type == "tool:result" and .payload.callId == "g2") | .payload | .result == "grown: new" and .failed == false' "$T/ev.json"
    jq -e '.[] | select(.type == "tool:called" and .payload.callId == "g2") | .payload | .server == "g" and .tool == "grown"' "$T/ev.json"
    grep -q 'mcp g: its tools changed' "$DS_DIR/logs/runner.log"
    grep -q 'mcp g: tools listed again, 11 tools' "$DS_DIR/logs/runner.log"
    # Listed again page by page (2 a page): 5 pages of 10 tools at the start, 6 of 11 after the change.
    lists=$(jq -s '[.[] | select(.method == "tools/list")] | length' "$MCP_TMP/gstate/received.jsonl")
    [ "$lists" = 11 ]
    jq -se '[.[] | select(.method == "tools/list") | .params.cursor // "first"] == ["first", "2", "4", "6", "8", "first", "2", "4", "6", "8", "10"]' \
        "$MCP_TMP/gstate/received.jsonl"
    rn_runner_alive
}

@test "GET /v1/mcp/servers: the operator's servers with their limits and each runner's figures, never an environment value; admin only" {
    # A call on t first, so that the runner has figures for it.
    local n sid
    n=$(ds_name agent)
    post_agent "{\"name\": \"$n\", \"provider\": \"anthropic\", \"model\": \"claude-test-model\", \"mcpServers\": [\"t\"]}"
    assert_status 201
    rn_script "$(jq -nc '{replies: [{toolCalls: [{id: "c1", name: "t__echo", arguments: {text: "x"}}]}, {text: "Done."}]}')"
    sid=$(rn_session "{\"agent\": \"$n\"}")
    rn_say "$sid" "Echo."
    rn_wait "$sid" 'any(.messages[]; .content == "Done.") and .request == null'
    calls() { req GET /v1/mcp/servers/t && jq -e '[.figures[].calls] | add >= 1' "$DS_BODY" >/dev/null; }
    ds_poll 10 calls || fail "no figures: $(cat "$DS_BODY")"
    assert_body_json '.name == "t" and .env == ["TEST_SECRET"] and .timeoutMs == 30000 and .concurrency == 4
        and (.figures[0] | .runner != null and .failures.timeout == 0 and .starts >= 1)'
    ! grep -q 's3cret-env-value' "$DS_BODY"

    req GET /v1/mcp/servers
    assert_status 200
    assert_body_json '.configured == true and ([.servers[].name] | sort) == ["g", "t"]
        and .bindings.say == {server: "t", tool: "echo"}'
    ! grep -q 's3cret-env-value' "$DS_BODY"
    req GET /v1/mcp/servers/nope
    assert_status 404
    assert_json_error not_found
    req DELETE /v1/mcp/servers/t
    assert_status 405
    # Only admin: a session token may use agents, not see what the operator runs.
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "mcp-$$" --scope sessions:write | tail -n 1)
    run curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$(cat "$DS_DIR/url-direct")/v1/mcp/servers"
    assert_output 403
}
