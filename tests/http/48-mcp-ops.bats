#!/usr/bin/env bats
# The operator's MCP configuration as the whole stack applies it (docs/mcp.md):
# agents and workflows may name only configured servers (the pool checks when they
# are written).
#
# Servers: tests/mcp/test-server.mjs, as `t` (with an environment value that must
# never show) and as `g`. The pool and the runner get the same DSTREAM_MCP_CONFIG.
# Waits are polls with deadlines.

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
            g: {command: $node, args: [$ts, "--page-size", "2", "--state", $gstate]}}}' >"$MCP_TMP/mcp.json"
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
