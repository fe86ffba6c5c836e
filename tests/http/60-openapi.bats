#!/usr/bin/env bats
# docs/openapi.json, the machine-readable description of the API: a valid OpenAPI 3.1
# document by a standard validator (@apidevtools/swagger-parser, pinned in
# tests/openapi/package.json and installed there by npm ci); its paths and methods
# exactly the routes the router serves (`dstream-fcgi --routes` prints the router's own
# table, which route() answers 404 and 405 from: no route outside it can be served);
# and every operation sent through the real stack (nginx, the pool, the runner on the
# mock provider) answering with a status the spec documents for it, in a documented
# content type, with a body that fits the spec's schema (JSON Schema 2020-12, ajv) and
# documented headers that fit theirs (Stream-Next-Offset, Location, ...).

load runner-helpers

SPEC=$DS_ROOT/docs/openapi.json
CHECK=$DS_ROOT/tests/openapi/check.mjs

setup_file() {
    "$DS_ROOT/tests/openapi/install.sh" >/dev/null || return 1
    OA_TMP=$(mktemp -d -t dstream-openapi.XXXXXX)
    export OA_TMP
    # An operator's MCP server, for /v1/mcp/servers/{name} (the pool reads its names only).
    jq -n '{mcpServers: {files: {command: "/bin/true", args: ["--x"], env: {"SECRET": "s"}}}}' >"$OA_TMP/mcp.json"
    chmod 644 "$OA_TMP/mcp.json"
    rn_start DSTREAM_LONGPOLL_MS=300 DSTREAM_SSE_MAX_MS=500 DSTREAM_MCP_CONFIG="$OA_TMP/mcp.json"
}
teardown_file() {
    rn_stop
    [ -n "${OA_TMP:-}" ] && rm -rf "$OA_TMP"
    return 0
}
setup() { rn_test_setup; }
teardown() { rn_test_teardown; }

@test "openapi: docs/openapi.json is a valid OpenAPI 3.1 document (@apidevtools/swagger-parser)" {
    run node "$CHECK" validate "$SPEC"
    [ "$status" -eq 0 ] || fail "$output"
}

@test "openapi: its paths and methods are exactly the routes the router serves (dstream-fcgi --routes), both ways" {
    "$DS_BIN/dstream-fcgi" --routes >"$BATS_TEST_TMPDIR/routes"
    [ "$(wc -l <"$BATS_TEST_TMPDIR/routes")" -ge 40 ] || fail "dstream-fcgi --routes: $(cat "$BATS_TEST_TMPDIR/routes")"
    run node "$CHECK" routes "$SPEC" "$BATS_TEST_TMPDIR/routes"
    [ "$status" -eq 0 ] || fail "$output"
    # The check itself: a route missing from the spec, and one the router does not serve.
    jq 'del(.paths["/v1/sessions/{id}/fork"].post)' "$SPEC" >"$BATS_TEST_TMPDIR/less.json"
    run node "$CHECK" routes "$BATS_TEST_TMPDIR/less.json" "$BATS_TEST_TMPDIR/routes"
    [ "$status" -eq 1 ] && [[ $output == *"served by the router but not in the spec: POST /v1/sessions/{id}/fork"* ]] ||
        fail "a route removed from the spec was not noticed: $output"
    { cat "$BATS_TEST_TMPDIR/routes"; echo "PATCH /v1/agents/{name}"; } >"$BATS_TEST_TMPDIR/more"
    run node "$CHECK" routes "$SPEC" "$BATS_TEST_TMPDIR/more"
    [ "$status" -eq 1 ] && [[ $output == *"served by the router but not in the spec: PATCH /v1/agents/{name}"* ]] ||
        fail "a route added to the router was not noticed: $output"
}

@test "openapi: the router answers only its table: 404 off it, 405 with Allow for a method it does not list" {
    req GET /v1/agents/x/y
    assert_status 404
    assert_json_error not_found
    req GET /v1/sessions/s1/nothing
    assert_status 404
    req POST /v1/stream/__ds/subscriptions/x/nothing
    assert_status 404
    assert_json_error SUBSCRIPTION_NOT_FOUND
    req PUT /v1/stream/__ds
    assert_status 404
    assert_json_error SUBSCRIPTION_NOT_FOUND
    req PATCH /v1/recordings
    assert_status 405
    assert_header Allow GET
    req POST /v1/mcp/servers/files
    assert_status 405
    assert_header Allow 'GET, HEAD'
    req DELETE /v1/stream/__ds/jwks.json
    assert_status 405
    assert_header Allow 'GET, HEAD'
    req GET /v1/sessions/
    assert_status 200
}

# ---- every operation through the real stack ------------------------------------------

# x TEMPLATE METHOD PATH [curl args...]: send the request (req) and log the answer for
# check.mjs: {method, template, url, status, headers (the final block), body}.
x() {
    local template=$1 method=$2 path=$3
    shift 3
    req "$method" "$path" "$@"
    tr -d '\r' <"$DS_HDRS" | awk 'BEGIN { RS = "" } { b = $0 } END { print b }' | tail -n +2 |
        jq -R 'capture("^(?<k>[^:]+):[ ]*(?<v>.*)$")' | jq -s 'map({(.k): .v}) | add // {}' >"$BATS_TEST_TMPDIR/h.json"
    jq -cn --arg m "$method" --arg t "$template" --arg u "$path" --argjson s "$status_code" \
        --slurpfile h "$BATS_TEST_TMPDIR/h.json" --rawfile b "$DS_BODY" \
        '{method: $m, template: $t, url: $u, status: $s, headers: $h[0], body: $b}' >>"$OA_LOG"
}

J=(-H 'Content-Type: application/json')

@test "openapi: every operation answers as the spec says (status, content type, body schema, headers)" {
    OA_LOG=$BATS_TEST_TMPDIR/answers.jsonl
    : >"$OA_LOG"
    local s t agent wf sid fid key tok wake gen tail

    # health and metrics
    x /v1/health GET /v1/health
    x /v1/health HEAD /v1/health
    x /metrics GET /metrics
    x /metrics HEAD /metrics
    x /v1/metrics GET /v1/metrics
    x /v1/metrics HEAD /v1/metrics

    # streams: create, append (plain and by a producer), read (catch-up, 304, long-poll, SSE), fork, errors
    s=$(ds_stream oa)
    t=/v1/stream/{path}
    x $t PUT "$s" "${J[@]}" -H 'Stream-TTL: 3600' --data-binary '[{"n": 1}]'
    x $t PUT "$s" "${J[@]}" -H 'Stream-TTL: 3600'
    x $t PUT "$s" -H 'Content-Type: text/plain'
    x $t POST "$s" "${J[@]}" --data-binary '{"n": 2}'
    x $t POST "$s" "${J[@]}" -H 'Producer-Id: p' -H 'Producer-Epoch: 0' -H 'Producer-Seq: 0' --data-binary '{"n": 3}'
    x $t POST "$s" "${J[@]}" -H 'Producer-Id: p' -H 'Producer-Epoch: 0' -H 'Producer-Seq: 5' --data-binary '{"n": 4}'
    x $t POST "$s" -H 'Content-Type: text/plain' --data-binary 'x'
    x $t POST "$s" "${J[@]}" --data-binary '{'
    x $t GET "$s?offset=-1"
    local next etag
    x $t HEAD "$s"
    next=$(header Stream-Next-Offset)
    x $t GET "$s?offset=$next&live=long-poll"
    x $t GET "$s?offset=now&live=sse"
    x $t GET "$s?offset=bogus"
    x $t PUT "$(ds_stream oa-text)" -H 'Content-Type: text/plain' --data-binary 'hello'
    x $t GET "$(ds_stream oa-missing)?offset=-1"
    x $t HEAD "$(ds_stream oa-missing)"
    x $t PUT "$s-fork" -H "Stream-Forked-From: $s" -H "Stream-Fork-Offset: $next"
    # A page's ETag sent back while the page is the same: 304.
    local s2
    s2=$(ds_stream oa-paged)
    ds_create "$s2" text/plain
    ds_append "$s2" text/plain a
    req GET "$s2?offset=-1"
    etag=$(header ETag)
    x $t GET "$s2?offset=-1" -H "If-None-Match: $etag"
    [ "$status_code" = 304 ] || fail "If-None-Match: $status_code"
    x $t POST "$s" "${J[@]}" -H 'Stream-Closed: true'
    x $t POST "$s" "${J[@]}" --data-binary '{"n": 5}'
    x $t DELETE "$s-fork"
    x $t DELETE "$s-fork"
    x $t POST /v1/stream/sessions/x "${J[@]}" --data-binary '{}'

    # agents
    agent=$(ds_name oa-agent)
    x /v1/agents POST /v1/agents "${J[@]}" --data-binary "$(jq -nc --arg n "$agent" '{name: $n, provider: "anthropic", model: "claude-test-model",
        system: "Be brief.", parameters: {temperature: 0.5, max_tokens: 100}, limits: {maxTurns: 4},
        skills: [{name: "sum", instructions: "Summarize for {{who}}.", params: ["who"]}]}')"
    x /v1/agents POST /v1/agents "${J[@]}" --data-binary "$(jq -nc --arg n "$agent" '{name: $n, provider: "anthropic", model: "m"}')"
    x /v1/agents POST /v1/agents "${J[@]}" --data-binary '{"name": "bad agent", "provider": 3, "extra": 1}'
    x /v1/agents POST /v1/agents --data-binary '{}'
    x /v1/agents GET /v1/agents
    x /v1/agents/{name} GET "/v1/agents/$agent"
    x /v1/agents/{name} GET /v1/agents/no-such-agent
    x /v1/agents/{name} GET /v1/agents/a%ffb
    x /v1/agents/{name} PUT "/v1/agents/$agent-2" "${J[@]}" --data-binary '{"provider": "anthropic", "model": "claude-test-model"}'
    x /v1/agents/{name} PUT "/v1/agents/$agent-2" "${J[@]}" --data-binary '{"provider": "anthropic", "model": "claude-test-model"}'
    x /v1/agents/{name} DELETE "/v1/agents/$agent-2"
    x /v1/agents/{name} DELETE "/v1/agents/$agent-2"

    # workflows
    wf=$(ds_name oa-wf)
    local doc
    doc=$(jq -nc --arg n "$wf" '{name: $n, initialState: {ok: null}, phases: [
        {name: "ask", steps: [{kind: "human", id: "go", input: "approval", prompt: "Go?", update: {ok: "$response"}}],
         transitions: [{to: "done"}]},
        {name: "done", terminal: true}]}')
    x /v1/workflows POST /v1/workflows "${J[@]}" --data-binary "$doc"
    x /v1/workflows POST /v1/workflows "${J[@]}" --data-binary '{"name": "w", "phases": []}'
    x /v1/workflows GET /v1/workflows
    x /v1/workflows/{name} PUT "/v1/workflows/$wf" "${J[@]}" --data-binary "$(jq -c 'del(.name)' <<<"$doc")"
    x /v1/workflows/{name} GET "/v1/workflows/$wf?version=1"
    x /v1/workflows/{name} GET "/v1/workflows/$wf?version=0"
    x /v1/workflows/{name} GET /v1/workflows/no-such-workflow

    # sessions: a chat recorded (the runner answers from the mock), a workflow waiting for a person
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary "$(jq -nc --arg a "$agent" '{agent: $a, mode: "record", input: {x: 1}}')"
    sid=$(jq -r .id "$DS_BODY")
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary '{"agent": "no-such-agent"}'
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary '{"agent": "a", "workflow": "w"}'
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary "$(jq -nc --arg a "$agent" --arg id "$sid" '{agent: $a, id: $id}')"
    x '/v1/sessions/{id}/messages' POST "/v1/sessions/$sid/messages" "${J[@]}" --data-binary '{"content": "Hello"}'
    x '/v1/sessions/{id}/messages' POST "/v1/sessions/$sid/messages" "${J[@]}" --data-binary '{"content": ""}'
    x '/v1/sessions/{id}/messages' POST "/v1/sessions/$sid/messages" "${J[@]}" --data-binary '{"content": "x", "replaces": "0000000000000000_0000000000000000"}'
    rn_wait "$sid" '.request == null and (.messages | length) >= 2'
    x '/v1/sessions/{id}/messages' POST "/v1/sessions/$sid/messages" "${J[@]}" \
        --data-binary '{"skill": {"name": "sum", "params": {"who": "kids"}}, "content": "text", "mode": "queue"}'
    x /v1/sessions/{id} GET "/v1/sessions/$sid"
    x /v1/sessions/{id} GET /v1/sessions/no-such-session
    x '/v1/sessions/{id}/state' GET "/v1/sessions/$sid/state?at=-1"
    x '/v1/sessions/{id}/state' GET "/v1/sessions/$sid/state?at=now"
    x '/v1/sessions/{id}/events' GET "/v1/sessions/$sid/events?offset=-1"
    next=$(header Stream-Next-Offset)
    x '/v1/sessions/{id}/events' GET "/v1/sessions/$sid/events?offset=-1&live=sse"
    x '/v1/sessions/{id}/events' GET "/v1/sessions/$sid/events?offset=$next&live=long-poll"
    x '/v1/sessions/{id}/events' GET "/v1/sessions/$sid/events?live=maybe"
    x '/v1/sessions/{id}/drift' GET "/v1/sessions/$sid/drift"
    x '/v1/sessions/{id}/fork' POST "/v1/sessions/$sid/fork" "${J[@]}" --data-binary '{"at": "-1", "mode": "playback"}'
    fid=$(jq -r .id "$DS_BODY")
    x '/v1/sessions/{id}/proof' GET "/v1/sessions/$fid/proof"
    x '/v1/sessions/{id}/proof' GET "/v1/sessions/$sid/proof"
    x '/v1/sessions/{id}/proof' GET /v1/sessions/no-such-session/proof
    x '/v1/sessions/{id}/fork' POST "/v1/sessions/$sid/fork" "${J[@]}" --data-binary '{"at": 7}'
    x '/v1/sessions/{id}/lineage' GET "/v1/sessions/$fid/lineage"
    x '/v1/sessions/{id}/lineage' GET "/v1/sessions/$sid/lineage?limit=1"
    x '/v1/sessions/{id}/lineage' GET "/v1/sessions/$sid/lineage?limit=0"
    x '/v1/sessions/{id}/lineage' GET /v1/sessions/no-such-session/lineage
    x '/v1/sessions/{id}/diff' GET "/v1/sessions/$fid/diff?with=$sid"
    x '/v1/sessions/{id}/diff' GET "/v1/sessions/$sid/diff?with=$sid&at=-1&context=0"
    x '/v1/sessions/{id}/diff' GET "/v1/sessions/$sid/diff"
    x '/v1/sessions/{id}/diff' GET "/v1/sessions/$sid/diff?with=no-such-session"
    x /v1/sessions GET "/v1/sessions?limit=1"
    x /v1/sessions GET "/v1/sessions?status=running&limit=100"
    x /v1/sessions GET "/v1/sessions?status=sleeping"
    # labels, the list's filter and the bulk operations (docs/agents.md)
    local lab
    lab=$(ds_name oa-lab)
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary "$(jq -nc --arg a "$agent" --arg l "$lab" '{agent: $a, labels: {oa: $l}}')"
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary "$(jq -nc --arg a "$agent" '{agent: $a, labels: {"a b": "c"}}')"
    x /v1/sessions GET "/v1/sessions?label=oa:$lab&agent=$agent&createdAfter=0&createdBefore=2100-01-01T00:00:00Z"
    x /v1/sessions GET "/v1/sessions?label=oa"
    x /v1/sessions/cancel POST /v1/sessions/cancel "${J[@]}" --data-binary "$(jq -nc --arg l "$lab" '{filter: {labels: {oa: $l}}, dryRun: true}')"
    x /v1/sessions/cancel POST /v1/sessions/cancel "${J[@]}" --data-binary "$(jq -nc --arg l "$lab" '{filter: {labels: {oa: $l}}, limit: 1}')"
    x /v1/sessions/cancel POST /v1/sessions/cancel "${J[@]}" --data-binary '{"filter": {}}'
    x /v1/sessions/retry POST /v1/sessions/retry "${J[@]}" --data-binary "$(jq -nc --arg l "$lab" '{filter: {labels: {oa: $l}}, dryRun: true}')"
    x /v1/sessions/retry POST /v1/sessions/retry "${J[@]}" --data-binary '{"filter": {"status": "running"}}'
    x /v1/sessions/retry POST /v1/sessions/retry "${J[@]}" --data-binary '{"filter": {}, "agent": "no-such-agent"}'
    x /v1/sessions/delete POST /v1/sessions/delete "${J[@]}" --data-binary "$(jq -nc --arg l "$lab" '{filter: {labels: {oa: $l}}}')"
    x /v1/sessions/delete POST /v1/sessions/delete "${J[@]}" --data-binary '{"filter": {"createdBefore": "soon"}}'
    local ws
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary "$(jq -nc --arg w "$wf" '{workflow: $w, input: {}}')"
    ws=$(jq -r .id "$DS_BODY")
    x '/v1/sessions/{id}/input' POST "/v1/sessions/$ws/input" "${J[@]}" --data-binary '{"interactionId": "go", "response": true}'
    x '/v1/sessions/{id}/input' POST "/v1/sessions/$ws/input" "${J[@]}" --data-binary '{"interactionId": "go", "response": true}'
    x '/v1/sessions/{id}/input' POST "/v1/sessions/$ws/input" "${J[@]}" --data-binary '{"response": true}'
    # a signal to a workflow waiting for it, one it does not wait for, a bad name, no session
    local wsig sg
    wsig=$(ds_name oa-sig)
    x /v1/workflows POST /v1/workflows "${J[@]}" --data-binary "$(jq -nc --arg n "$wsig" '{name: $n, phases: [
        {name: "w", terminal: true, steps: [{kind: "wait", signals: {go: {update: {p: "$payload"}}}}]}]}')"
    x /v1/sessions POST /v1/sessions "${J[@]}" --data-binary "$(jq -nc --arg w "$wsig" '{workflow: $w}')"
    sg=$(jq -r .id "$DS_BODY")
    x '/v1/sessions/{id}/signals/{name}' POST "/v1/sessions/$sg/signals/go" "${J[@]}" --data-binary '{"a": 1}'
    x '/v1/sessions/{id}/signals/{name}' POST "/v1/sessions/$sg/signals/nope" "${J[@]}" --data-binary '{}'
    x '/v1/sessions/{id}/signals/{name}' POST "/v1/sessions/$sg/signals/bad@name"
    x '/v1/sessions/{id}/signals/{name}' POST /v1/sessions/no-such-session/signals/go
    x '/v1/sessions/{id}/stop' POST "/v1/sessions/$sid/stop"
    x '/v1/sessions/{id}/stop' POST "/v1/sessions/$ws/stop"
    x '/v1/sessions/{id}/stop' POST /v1/sessions/no-such-session/stop
    x '/v1/sessions/{id}/compact' POST "/v1/sessions/$sid/compact"
    x '/v1/sessions/{id}/compact' POST "/v1/sessions/$ws/compact"
    x '/v1/sessions/{id}/compact' POST /v1/sessions/no-such-session/compact
    x '/v1/sessions/{id}/cancel' POST "/v1/sessions/$fid/cancel"
    x '/v1/sessions/{id}/cancel' POST /v1/sessions/no-such-session/cancel

    # the AI SDK's chat routes (docs/clients.md): a chat and its reply, mistakes, a
    # workflow's session, no reply under way, a stop
    local chat msgs='[{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}]'
    chat=$(ds_name oa-chat)
    x '/v1/aisdk/chat/{agent}' POST "/v1/aisdk/chat/$agent" "${J[@]}" --data-binary \
        "$(jq -nc --arg id "$chat" --argjson m "$msgs" '{id: $id, messages: $m, trigger: "submit-message", messageId: null}')"
    x '/v1/aisdk/chat/{agent}' POST "/v1/aisdk/chat/$agent" "${J[@]}" --data-binary '{"id": "x", "messages": []}'
    x '/v1/aisdk/chat/{agent}' POST /v1/aisdk/chat/no-such-agent "${J[@]}" --data-binary \
        "$(jq -nc --arg id "$chat-2" --argjson m "$msgs" '{id: $id, messages: $m}')"
    x '/v1/aisdk/chat/{agent}' POST "/v1/aisdk/chat/$agent" "${J[@]}" --data-binary \
        "$(jq -nc --arg id "$ws" --argjson m "$msgs" '{id: $id, messages: $m}')"
    rn_wait "$chat" '.status == "completed"'
    x '/v1/aisdk/chat/{agent}/{id}/stream' GET "/v1/aisdk/chat/$agent/$chat/stream"
    x '/v1/aisdk/chat/{agent}/{id}/stop' POST "/v1/aisdk/chat/$agent/$chat/stop"
    x '/v1/aisdk/chat/{agent}/{id}/stop' POST "/v1/aisdk/chat/$agent/no-such-session/stop"

    # the LangGraph SDK's routes (docs/clients.md): assistants, a thread and its runs,
    # its state and history, a copy, mistakes, a workflow's interrupt answered
    local th run ck lw
    th=$(ds_name oa-th)
    x /v1/langgraph/assistants/search POST /v1/langgraph/assistants/search "${J[@]}" --data-binary '{"limit": 100}'
    x /v1/langgraph/assistants/search POST /v1/langgraph/assistants/search "${J[@]}" --data-binary '{"limit": 0}'
    x '/v1/langgraph/assistants/{id}' GET "/v1/langgraph/assistants/$agent"
    x '/v1/langgraph/assistants/{id}' GET /v1/langgraph/assistants/no-such-assistant
    x /v1/langgraph/threads POST /v1/langgraph/threads "${J[@]}" --data-binary "$(jq -nc --arg id "$th" --arg a "$agent" '{thread_id: $id, metadata: {graph_id: $a}}')"
    x /v1/langgraph/threads POST /v1/langgraph/threads "${J[@]}" --data-binary "$(jq -nc --arg id "$th" '{thread_id: $id}')"
    x /v1/langgraph/threads POST /v1/langgraph/threads "${J[@]}" --data-binary '{}'
    x '/v1/langgraph/threads/{id}/runs/stream' POST "/v1/langgraph/threads/$th/runs/stream" "${J[@]}" --data-binary \
        "$(jq -nc --arg a "$agent" '{assistant_id: $a, input: {messages: [{role: "user", content: "Hi"}]}, stream_mode: ["values", "messages-tuple"]}')"
    x '/v1/langgraph/threads/{id}/runs/stream' POST "/v1/langgraph/threads/$th/runs/stream" "${J[@]}" --data-binary '{"input": {}}'
    x '/v1/langgraph/threads/{id}/runs/wait' POST "/v1/langgraph/threads/$th/runs/wait" "${J[@]}" --data-binary \
        "$(jq -nc --arg a "$agent" '{assistant_id: $a, input: {messages: [{role: "user", content: "Again"}]}}')"
    x '/v1/langgraph/threads/{id}/runs' POST "/v1/langgraph/threads/$th/runs" "${J[@]}" --data-binary \
        "$(jq -nc --arg a "$agent" '{assistant_id: $a, input: {messages: [{role: "user", content: "Once more"}]}}')"
    run=$(jq -r .run_id "$DS_BODY")
    x '/v1/langgraph/threads/{id}/runs/{run}/join' GET "/v1/langgraph/threads/$th/runs/$run/join"
    x '/v1/langgraph/threads/{id}/runs/{run}/stream' GET "/v1/langgraph/threads/$th/runs/$run/stream"
    x '/v1/langgraph/threads/{id}/runs' GET "/v1/langgraph/threads/$th/runs?limit=2"
    x '/v1/langgraph/threads/{id}/runs' GET "/v1/langgraph/threads/$th/runs?limit=1000"
    x '/v1/langgraph/threads/{id}/runs/{run}' GET "/v1/langgraph/threads/$th/runs/$run"
    x '/v1/langgraph/threads/{id}/runs/{run}' GET "/v1/langgraph/threads/$th/runs/x"
    x '/v1/langgraph/threads/{id}/runs/{run}/cancel' POST "/v1/langgraph/threads/$th/runs/$run/cancel"
    x '/v1/langgraph/threads/{id}' GET "/v1/langgraph/threads/$th"
    x '/v1/langgraph/threads/{id}' GET /v1/langgraph/threads/no-such-thread
    x /v1/langgraph/threads/search POST /v1/langgraph/threads/search "${J[@]}" --data-binary '{"limit": 5}'
    x '/v1/langgraph/threads/{id}/state' GET "/v1/langgraph/threads/$th/state"
    x '/v1/langgraph/threads/{id}/history' POST "/v1/langgraph/threads/$th/history" "${J[@]}" --data-binary '{"limit": 3}'
    ck=$(jq -r '.[1].checkpoint.checkpoint_id' "$DS_BODY")
    x '/v1/langgraph/threads/{id}/state/{checkpoint}' GET "/v1/langgraph/threads/$th/state/$ck"
    x '/v1/langgraph/threads/{id}/state/{checkpoint}' GET "/v1/langgraph/threads/$th/state/nowhere"
    x '/v1/langgraph/threads/{id}/copy' POST "/v1/langgraph/threads/$th/copy"
    x '/v1/langgraph/threads/{id}' DELETE "/v1/langgraph/threads/$(jq -r .thread_id "$DS_BODY")"
    lw=$(ds_name oa-lw)
    x '/v1/langgraph/threads/{id}/runs' POST "/v1/langgraph/threads/$lw/runs" "${J[@]}" --data-binary "$(jq -nc --arg w "$wf" '{assistant_id: $w, input: {}}')"
    rn_wait "$lw" '.status == "awaiting_input"'
    x '/v1/langgraph/threads/{id}/runs/wait' POST "/v1/langgraph/threads/$lw/runs/wait" "${J[@]}" --data-binary "$(jq -nc --arg w "$wf" '{assistant_id: $w, command: {resume: true}}')"
    x '/v1/langgraph/threads/{id}/runs/wait' POST "/v1/langgraph/threads/$lw/runs/wait" "${J[@]}" --data-binary "$(jq -nc --arg w "$wf" '{assistant_id: $w, command: {resume: true}}')"

    # recordings: the chat's, recorded by the runner
    ds_poll 20 _recorded "$sid"
    x /v1/recordings GET "/v1/recordings?session=$sid&limit=10"
    key=$(jq -r '.recordings[0].key' "$DS_BODY")
    x /v1/recordings GET "/v1/recordings?limit=0"
    x /v1/recordings/{key} GET "/v1/recordings/$key"
    x /v1/recordings/{key} GET "/v1/recordings/$(printf '%064d' 0)"
    x /v1/recordings/{key} DELETE "/v1/recordings/$key"
    x /v1/recordings/{key} DELETE "/v1/recordings/$key"
    x /v1/sessions/{id} DELETE "/v1/sessions/$fid"
    x /v1/sessions/{id} DELETE "/v1/sessions/$fid"

    # MCP servers
    x /v1/mcp/servers GET /v1/mcp/servers
    x /v1/mcp/servers HEAD /v1/mcp/servers
    x '/v1/mcp/servers/{name}' GET /v1/mcp/servers/files
    x '/v1/mcp/servers/{name}' HEAD /v1/mcp/servers/files
    x '/v1/mcp/servers/{name}' GET /v1/mcp/servers/nope

    # subscriptions: pull-wake, woken by the runner, claimed, acked; then released and deleted
    local SUBT=/v1/stream/__ds/subscriptions/{id} sub
    sub=$(ds_name oa-sub)
    x /v1/stream/__ds/jwks.json GET /v1/stream/__ds/jwks.json
    x /v1/stream/__ds/jwks.json HEAD /v1/stream/__ds/jwks.json
    ds_create "/v1/stream/$sub-wake" application/json
    ds_create "/v1/stream/$sub/a" application/json
    x $SUBT PUT "/v1/stream/__ds/subscriptions/$sub" "${J[@]}" --data-binary \
        "$(jq -nc --arg s "$sub" '{type: "pull-wake", pattern: ($s + "/*"), wake_stream: ($s + "-wake"), lease_ttl_ms: 5000, description: "d"}')"
    x $SUBT PUT "/v1/stream/__ds/subscriptions/$sub" "${J[@]}" --data-binary \
        "$(jq -nc --arg s "$sub" '{type: "pull-wake", pattern: ($s + "/*"), wake_stream: ($s + "-wake"), lease_ttl_ms: 5000, description: "d"}')"
    x $SUBT PUT "/v1/stream/__ds/subscriptions/$sub" "${J[@]}" --data-binary '{"type": "pull-wake", "pattern": "other/*", "wake_stream": "w"}'
    x $SUBT PUT "/v1/stream/__ds/subscriptions/$sub-2" "${J[@]}" --data-binary '{"type": "carrier-pigeon"}'
    x "$SUBT/streams" POST "/v1/stream/__ds/subscriptions/$sub/streams" "${J[@]}" --data-binary "$(jq -nc --arg s "$sub" '{streams: [($s + "-wake")]}')"
    x "$SUBT/streams" POST "/v1/stream/__ds/subscriptions/$sub/streams" "${J[@]}" --data-binary '{"streams": []}'
    x "$SUBT/streams/{path}" DELETE "/v1/stream/__ds/subscriptions/$sub/streams/$sub-wake"
    x "$SUBT/streams/{path}" DELETE "/v1/stream/__ds/subscriptions/nope-$sub/streams/x"
    x "$SUBT/claim" POST "/v1/stream/__ds/subscriptions/$sub/claim" "${J[@]}" --data-binary '{"worker": "w1"}'
    ds_append "/v1/stream/$sub/a" application/json '{"job": 1}'
    ds_poll 20 _claimed "$sub"
    x "$SUBT/claim" POST "/v1/stream/__ds/subscriptions/$sub/claim" "${J[@]}" --data-binary '{"worker": "w1"}'
    tok=$(jq -r .token "$DS_BODY")
    wake=$(jq -r .wake_id "$DS_BODY")
    gen=$(jq -r .generation "$DS_BODY")
    tail=$(jq -r '.streams[0].tail_offset' "$DS_BODY")
    x "$SUBT/claim" POST "/v1/stream/__ds/subscriptions/$sub/claim" "${J[@]}" --data-binary '{"worker": "w2"}'
    local ack
    ack=$(jq -nc --arg w "$wake" --argjson g "$gen" --arg s "$sub/a" --arg o "$tail" '{wake_id: $w, generation: $g, acks: [{stream: $s, offset: $o}]}')
    x "$SUBT/ack" POST "/v1/stream/__ds/subscriptions/$sub/ack" "${J[@]}" -H "Authorization: Bearer $tok" --data-binary "$ack"
    x "$SUBT/ack" POST "/v1/stream/__ds/subscriptions/$sub/ack" "${J[@]}" -H "Authorization: Bearer 1.x.1.bogus" --data-binary "$ack"
    x "$SUBT/callback" POST "/v1/stream/__ds/subscriptions/$sub/callback" "${J[@]}" -H "Authorization: Bearer $tok" --data-binary "$ack"
    x "$SUBT/callback" POST "/v1/stream/__ds/subscriptions/$sub/callback" "${J[@]}" --data-binary "$ack"
    x "$SUBT/release" POST "/v1/stream/__ds/subscriptions/$sub/release" "${J[@]}" -H "Authorization: Bearer $tok" \
        --data-binary "$(jq -nc --arg w "$wake" --argjson g "$gen" '{wake_id: $w, generation: $g}')"
    x "$SUBT/release" POST "/v1/stream/__ds/subscriptions/$sub/release" "${J[@]}" -H "Authorization: Bearer $tok" \
        --data-binary "$(jq -nc --arg w "$wake" --argjson g "$gen" '{wake_id: $w, generation: $g}')"
    x $SUBT GET "/v1/stream/__ds/subscriptions/$sub"
    x $SUBT HEAD "/v1/stream/__ds/subscriptions/$sub"
    x $SUBT GET "/v1/stream/__ds/subscriptions/nope-$sub"
    x $SUBT DELETE "/v1/stream/__ds/subscriptions/$sub"
    x $SUBT DELETE "/v1/stream/__ds/subscriptions/$sub"

    # Without a token (the server itself, not the stack's token-adding proxy): 401.
    local direct
    direct=$(cat "$DS_DIR/url-direct")
    x /v1/agents GET "$direct/v1/agents"

    # OPENAPI_ANSWERS=FILE keeps the answers (to see what a failing spec was compared with).
    [ -z "${OPENAPI_ANSWERS:-}" ] || cp "$OA_LOG" "$OPENAPI_ANSWERS"
    # A webhook receiver's callback needs a delivery (46-subscriptions does it): here only its refusals.
    run node "$CHECK" responses "$SPEC" "$OA_LOG" "POST /v1/stream/__ds/subscriptions/{id}/callback"
    [ "$status" -eq 0 ] || fail "$output"
}

# _recorded ID: the session has a complete recording.
_recorded() {
    req GET "/v1/recordings?session=$1"
    [ "$status_code" = 200 ] && jq -e '[.recordings[] | select(.complete)] | length >= 1' "$DS_BODY" >/dev/null
}

# _claimed SUB: the runner made a wake (the wake stream has it).
_claimed() {
    req GET "/v1/stream/$1-wake?offset=-1"
    [ "$status_code" = 200 ] && jq -e 'map(select(.type == "wake")) | length >= 1' "$DS_BODY" >/dev/null
}
