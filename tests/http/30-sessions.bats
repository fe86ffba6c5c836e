#!/usr/bin/env bats
# Sessions, agents and workflows through nginx + the pool (DESIGN.md 4.2): the
# example documents of docs/agents.md and docs/workflows.md are accepted as they
# stand, invalid documents are answered with every mistake, sessions are created,
# given messages in each mode, answers, cancels and forks, their state is read at
# past offsets, their events are read back (catch-up and SSE resumed with
# Last-Event-ID), and every client mistake gets its 4xx.
#
# No runner runs here (DSTREAM_RUNNER=0; the runner is tested elsewhere), so
# sessions stay pending and the only events are those HTTP commands write.

load helpers

setup_file() { ds_stack_start DSTREAM_RUNNER=0 DSTREAM_LONGPOLL_MS=5000; }
teardown_file() { ds_stack_stop; }

DOCS=$BATS_TEST_DIRNAME/../../docs

setup() {
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
}

teardown() { ds_bg_stop; }

# ---- helpers --------------------------------------------------------------------------

# first_json_block FILE: the first ```json block of a markdown file.
first_json_block() { awk '/^```json$/ { f = 1; next } f && /^```$/ { exit } f' "$1"; }

# post PATH JSON [curl args...]: POST a JSON body.
post() {
    local path=$1 data=$2
    shift 2
    req POST "$path" -H 'Content-Type: application/json' --data-binary "$data" "$@"
}

# jbody FILTER: jq -r FILTER on the last response body.
jbody() { jq -r "$1" "$DS_BODY"; }

# has_detail LINE: the last response's error.details holds LINE exactly.
has_detail() {
    jq -e --arg l "$1" '.error.details | index($l) != null' "$DS_BODY" >/dev/null && return 0
    batslib_print_kv_single_or_multi 8 expected "$1" details "$(jq -c '.error.details' "$DS_BODY" 2>/dev/null || cat "$DS_BODY")" |
        batslib_decorate "error.details does not name the mistake" | fail
}

# ensure_defs: the example agent ("writer") and workflow ("blog-post") are stored.
ensure_defs() {
    req GET /v1/agents/writer
    if [ "$status_code" != 200 ]; then
        first_json_block "$DOCS/agents.md" >"$T/agent.json"
        req POST /v1/agents -H 'Content-Type: application/json' --data-binary @"$T/agent.json"
        [ "$status_code" = 201 ] || [ "$status_code" = 409 ] || assert_status 201
    fi
    req GET /v1/workflows/blog-post
    if [ "$status_code" != 200 ]; then
        first_json_block "$DOCS/workflows.md" >"$T/wf.json"
        req POST /v1/workflows -H 'Content-Type: application/json' --data-binary @"$T/wf.json"
        assert_status 201
    fi
}

# new_chat: create a chat session with the example agent; its id in $SID.
new_chat() {
    ensure_defs
    post /v1/sessions '{"agent": "writer"}'
    assert_status 201
    SID=$(jbody .id)
}

# new_blog: a session of the example workflow; its id in $SID.
new_blog() {
    ensure_defs
    post /v1/sessions '{"workflow": "blog-post", "input": {"topic": "SQLite WAL mode", "audience": "backend developers"}}'
    assert_status 201
    SID=$(jbody .id)
}

# events_of ID: the catch-up of session ID's events into $T/events.json (a JSON array).
events_of() {
    req GET "/v1/sessions/$1/events?offset=-1"
    assert_status 200
    cp "$DS_BODY" "$T/events.json"
}

# n_events ID: how many events session ID has.
n_events() {
    req GET "/v1/sessions/$1/events?offset=-1" >/dev/null
    jq length "$DS_BODY"
}

# sse_count FILE: the number of complete session events (not control events) in FILE.
sse_count() {
    awk 'BEGIN { RS = ""; FS = "\n" } { e = ""; d = 0
            for (i = 1; i <= NF; i++) { if ($i ~ /^event:/) e = $i; if ($i ~ /^data:/) d = 1 }
            if (d && e != "event: control" && e != "event:control") n++ }
         END { print n + 0 }' "$1"
}
sse_has() { [ "$(sse_count "$1")" -ge "$2" ]; }

# sse_field FILE N FIELD: field (event, id or data) of the Nth session event in FILE.
sse_field() {
    awk -v want="$2" -v field="$3" 'BEGIN { RS = ""; FS = "\n" } {
            e = ""; id = ""; d = ""; has = 0
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^event:/) { e = substr($i, 7); sub(/^ /, "", e) }
                else if ($i ~ /^id:/) { id = substr($i, 4); sub(/^ /, "", id) }
                else if ($i ~ /^data:/) { d = substr($i, 6); sub(/^ /, "", d); has = 1 }
            }
            if (!has || e == "control") next
            if (++n == want) { print (field == "event" ? e : field == "id" ? id : d); exit }
        }' "$1"
}

# ---- agents and workflows ----------------------------------------------------------

@test "agents: the example of docs/agents.md is accepted, read back, listed, replaced, deleted" {
    first_json_block "$DOCS/agents.md" >"$T/agent.json"
    jq -e '.name == "writer"' "$T/agent.json" >/dev/null || fail "no example agent in docs/agents.md"
    req DELETE /v1/agents/writer
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary @"$T/agent.json"
    assert_status 201
    assert_header Location /v1/agents/writer
    req GET /v1/agents/writer
    assert_status 200
    [ "$(jq -S . "$DS_BODY")" = "$(jq -S . "$T/agent.json")" ] || fail "read back differs: $body"
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary @"$T/agent.json"
    assert_status 409
    assert_json_error agent_exists
    req GET /v1/agents
    assert_status 200
    assert_body_json '[.agents[] | select(.name == "writer")] | length == 1'

    # An endpoint only where the operator allows it (not for the built-in providers).
    req PUT /v1/agents/temp-agent -H 'Content-Type: application/json' \
        --data-binary '{"provider": "openai", "model": "llama3", "endpoint": "http://127.0.0.1:8080"}'
    assert_status 400
    has_detail "endpoint: provider openai does not let agents choose an endpoint (the operator's allowEndpoints)"
    req PUT /v1/agents/temp-agent -H 'Content-Type: application/json' \
        --data-binary '{"provider": "openai", "model": "llama3"}'
    assert_status 201
    req PUT /v1/agents/temp-agent -H 'Content-Type: application/json' \
        --data-binary '{"name": "temp-agent", "provider": "openai", "model": "qwen"}'
    assert_status 200
    req GET /v1/agents/temp-agent
    assert_body_json '.model == "qwen" and .name == "temp-agent"'
    req PUT /v1/agents/temp-agent -H 'Content-Type: application/json' \
        --data-binary '{"name": "other", "provider": "openai", "model": "qwen"}'
    assert_status 400
    assert_json_error name_mismatch
    req DELETE /v1/agents/temp-agent
    assert_status 204
    req GET /v1/agents/temp-agent
    assert_status 404
    req DELETE /v1/agents/temp-agent
    assert_status 404
    req PATCH /v1/agents/writer
    assert_status 405
    assert_header Allow "GET, PUT, DELETE"
    req DELETE /v1/agents
    assert_status 405
}

@test "workflows: the example of docs/workflows.md is accepted, read back, versioned" {
    first_json_block "$DOCS/workflows.md" >"$T/wf.json"
    jq -e '.name == "blog-post"' "$T/wf.json" >/dev/null || fail "no example workflow in docs/workflows.md"
    req POST /v1/workflows -H 'Content-Type: application/json' --data-binary @"$T/wf.json"
    assert_status 201
    v1=$(jbody .version)
    assert_header Location "/v1/workflows/blog-post?version=$v1"
    [ "$(jq -S .document "$DS_BODY")" = "$(jq -S . "$T/wf.json")" ] || fail "document differs: $body"
    req GET /v1/workflows/blog-post
    assert_status 200
    assert_body_json ".version == $v1 and .name == \"blog-post\""
    [ "$(jq -S .document "$DS_BODY")" = "$(jq -S . "$T/wf.json")" ] || fail "read back differs: $body"

    # A PUT adds a version; the old one stays readable.
    jq '.description = "second"' "$T/wf.json" >"$T/wf2.json"
    req PUT /v1/workflows/blog-post -H 'Content-Type: application/json' --data-binary @"$T/wf2.json"
    assert_status 201
    assert_body_json ".version == $((v1 + 1))"
    req GET /v1/workflows/blog-post
    assert_body_json ".version == $((v1 + 1)) and .document.description == \"second\""
    req GET "/v1/workflows/blog-post?version=$v1"
    assert_status 200
    assert_body_json ".version == $v1 and .document.description == \"Draft, review, approve and publish a blog post\""
    req GET /v1/workflows
    assert_status 200
    assert_body_json '[.workflows[] | select(.name == "blog-post")] | length == 1'
    req GET "/v1/workflows/blog-post?version=0"
    assert_status 400
    req GET "/v1/workflows/blog-post?version=abc"
    assert_status 400
    req GET "/v1/workflows/blog-post?version=999999"
    assert_status 404
    req GET /v1/workflows/no-such-workflow
    assert_status 404
    assert_json_error not_found
    req DELETE /v1/workflows/blog-post
    assert_status 405
    req GET "/v1/workflows/bad%20name"
    assert_status 400
}

@test "agents: an invalid document is 400 with every mistake in error.details" {
    # The three mistakes of docs/agents.md's Validation example, and more.
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary '{
        "name": "bad agent!", "provider": "google", "model": "",
        "parameters": {"temperature": 3, "top_p": 0.5, "bogus": 1},
        "tools": [{"name": "has.dot", "inputSchema": {"type": "object"}}],
        "mcpServers": [{"name": "m", "command": ["/bin/sh", "-c", "id"], "env": {"LD_PRELOAD": "/tmp/x.so"}}],
        "skills": [{"name": "s", "instructions": "Write in {{lang}}."}],
        "limits": {"maxTurns": 0},
        "extra": true}'
    assert_status 400
    assert_json_error invalid_agent
    # The message says how many and lists the first five (every one is in details).
    assert_body_json '.error.details as $d | ($d | length) > 5 and
        (.error.message == "\($d | length) mistakes: \($d[0:5] | join("; ")); and \($d | length - 5) more (error.details)")'
    # The doc's example lines, as the doc writes them.
    awk '/^## Validation/ { v = 1 } v && /^```$/ { if (b) exit; b = 1; next } b' "$DOCS/agents.md" >"$T/doc-lines"
    [ -s "$T/doc-lines" ] || fail "no validation example in docs/agents.md"
    while IFS= read -r line; do has_detail "$line"; done <"$T/doc-lines"
    for path in name parameters.temperature parameters.bogus 'tools[0].name' 'mcpServers[0]' extra model; do
        jq -e --arg p "$path: " '[.error.details[] | select(startswith($p))] | length >= 1' "$DS_BODY" >/dev/null ||
            fail "no mistake named at $path: $(jq -c .error.details "$DS_BODY")"
    done
    req GET "/v1/agents/bad%20agent!"
    assert_status_4xx
}

@test "workflows: an invalid document is 400 with every mistake in error.details" {
    # Built to make exactly the three mistakes of docs/workflows.md's Validation example.
    req POST /v1/workflows -H 'Content-Type: application/json' --data-binary '{
        "name": "broken",
        "phases": [
            {"name": "one", "steps": [], "transitions": [{"to": "two"}]},
            {"name": "two", "steps": [{"kind": "agent", "prompt": "hi"}],
             "transitions": [{"when": "state.review.score >=", "to": "three"}, {"to": "one"}]},
            {"name": "three"}
        ]}'
    assert_status 400
    assert_json_error invalid_workflow
    awk '/^## Validation/ { v = 1 } v && /^```$/ { if (b) exit; b = 1; next } b' "$DOCS/workflows.md" >"$T/doc-lines"
    [ -s "$T/doc-lines" ] || fail "no validation example in docs/workflows.md"
    while IFS= read -r line; do has_detail "$line"; done <"$T/doc-lines"
    assert_body_json ".error.details | length == $(wc -l <"$T/doc-lines")"
    # The message says how many mistakes and lists them, as docs/workflows.md shows.
    assert_body_json '.error.message == "3 mistakes: \(.error.details | join("; "))"'
    jq -r .error.message "$DS_BODY" >"$T/msg"
    grep -qF -f "$T/msg" "$DOCS/workflows.md" || fail "docs/workflows.md does not show the message $(cat "$T/msg")"

    # More mistakes, all named at once.
    req POST /v1/workflows -H 'Content-Type: application/json' --data-binary '{
        "name": "w", "extra": 1, "initialPhase": "nowhere",
        "phases": [
            {"name": "a", "steps": [{"kind": "teleport"}, {"kind": "human", "id": "h", "input": "choice", "prompt": "?", "options": ["x"]}],
             "transitions": [{"when": "(state.x", "to": "b"}, {"to": "missing"}]},
            {"name": "a", "terminal": true, "transitions": [{"to": "a"}]}
        ]}'
    assert_status 400
    for path in extra initialPhase 'phases[0].steps[0].kind' 'phases[0].steps[1].options' \
        'phases[0].transitions[0].when' 'phases[0].transitions[1].to' 'phases[1].name' 'phases[1].transitions'; do
        jq -e --arg p "$path: " '[.error.details[] | select(startswith($p))] | length >= 1' "$DS_BODY" >/dev/null ||
            fail "no mistake named at $path: $(jq -c .error.details "$DS_BODY")"
    done
    post /v1/workflows '{"name": "w"}'
    assert_status 400
    has_detail "phases: missing"
    post /v1/workflows '[]'
    assert_status 400
    assert_json_error invalid_json
}

# ---- sessions: create, read, list, delete ----------------------------------------------

@test "sessions: create with an agent or a workflow, read it back" {
    ensure_defs
    post /v1/sessions '{"agent": "writer", "input": {"x": 1}}' -H 'Content-Type: application/json; charset=utf-8'
    assert_status 201
    id=$(jbody .id)
    assert_header Location "/v1/sessions/$id"
    assert_body_json '.status == "pending" and .agent == "writer" and .workflow == null and .parent == null'
    assert_body_json ".stream == \"/v1/stream/sessions/$id\" and .events == \"/v1/sessions/$id/events\""
    assert_body_json '.created.input == {"x": 1} and .messages == [] and .eventCount == 1 and (.position | test("^[0-9]{16}_[0-9]{16}$"))'
    pos=$(jbody .position)
    req GET "/v1/sessions/$id"
    assert_status 200
    assert_body_json ".id == \"$id\" and .status == \"pending\" and .position == \"$pos\""
    assert_body_json '(.usage.inputTokens == 0) and (.usage.outputTokens == 0) and (.costUsd == 0) and .pendingInput == null'
    # The session's stream is readable over the stream API.
    req GET "/v1/stream/sessions/$id?offset=-1"
    assert_status 200
    assert_body_json 'length == 1 and .[0].type == "session:created" and .[0].actor == "user"'

    new_blog
    req GET "/v1/sessions/$SID"
    assert_body_json '.workflow == "blog-post" and (.workflowVersion | type == "number") and .state == {"feedback": ""}'
    assert_body_json '.created.input.topic == "SQLite WAL mode" and .created.initialState == {"feedback": ""}'

    # Chosen ids, and an id that is taken.
    sid=s-$RANDOM$RANDOM
    post /v1/sessions "{\"agent\": \"writer\", \"id\": \"$sid\"}"
    assert_status 201
    assert_body_json ".id == \"$sid\""
    post /v1/sessions "{\"agent\": \"writer\", \"id\": \"$sid\"}"
    assert_status 409
    assert_json_error session_exists
    post /v1/sessions '{"agent": "writer", "id": "not/valid"}'
    assert_status 400
    assert_json_error bad_id
}

@test "sessions: unknown agent or workflow is 422, a malformed request 400 or 415" {
    ensure_defs
    post /v1/sessions '{"agent": "nobody-here"}'
    assert_status 422
    assert_json_error unknown_agent
    post /v1/sessions '{"workflow": "nothing-here"}'
    assert_status 422
    assert_json_error unknown_workflow
    post /v1/sessions '{"agent": "writer", "workflow": "blog-post"}'
    assert_status 400
    assert_json_error bad_session
    post /v1/sessions '{}'
    assert_status 400
    post /v1/sessions '{"agent": 5}'
    assert_status 400
    post /v1/sessions '{"agent": "writer"'
    assert_status 400
    assert_json_error invalid_json
    post /v1/sessions '"writer"'
    assert_status 400
    req POST /v1/sessions -H 'Content-Type: text/plain' --data-binary '{"agent": "writer"}'
    assert_status 415
    assert_json_error
    req POST /v1/sessions --data-binary '{"agent": "writer"}'
    assert_status 415
}

@test "sessions: list filters by status and pages with a cursor" {
    ensure_defs
    ids=()
    for i in 1 2 3 4 5; do
        post /v1/sessions '{"agent": "writer"}'
        assert_status 201
        ids+=("$(jbody .id)")
    done
    # Every page of 2 until nextCursor is null: each of ours exactly once, newest first.
    : >"$T/seen"
    cursor=
    for page in $(seq 1 200); do
        req GET "/v1/sessions?limit=2${cursor:+&cursor=$cursor}"
        assert_status 200
        assert_body_json '(.sessions | length) <= 2'
        jq -r '.sessions[].id' "$DS_BODY" >>"$T/seen"
        cursor=$(jbody '.nextCursor // empty')
        [ -n "$cursor" ] || break
        cursor=$(jq -rn --arg c "$cursor" '$c | @uri')
    done
    [ -z "$cursor" ] || fail "paging did not end"
    [ "$(sort "$T/seen" | uniq -d | wc -l)" -eq 0 ] || fail "a session was listed twice: $(sort "$T/seen" | uniq -d)"
    for id in "${ids[@]}"; do grep -qx "$id" "$T/seen" || fail "$id not listed"; done
    # newest first: ours appear in reverse order of creation
    got=$(grep -xF -f <(printf '%s\n' "${ids[@]}") "$T/seen" | tr '\n' ' ')
    want=$(printf '%s\n' "${ids[@]}" | tac | tr '\n' ' ')
    [ "$got" = "$want" ] || fail "order: got $got want $want"

    req GET "/v1/sessions?status=pending&limit=100"
    assert_status 200
    assert_body_json '[.sessions[].status] | all(. == "pending")'
    assert_body_json "[.sessions[].id] | index(\"${ids[4]}\") != null"
    req GET "/v1/sessions?status=running&limit=100"
    assert_status 200
    assert_body_json "[.sessions[].id] | index(\"${ids[4]}\") == null"
    req GET "/v1/sessions?status=sleeping"
    assert_status 400
    assert_json_error bad_status
    req GET "/v1/sessions?limit=0"
    assert_status 400
    req GET "/v1/sessions?limit=abc"
    assert_status 400
    req GET "/v1/sessions?cursor=garbage"
    assert_status 400
    assert_json_error bad_cursor
}

@test "sessions: a token's list pages with cursors that name only sessions it may read" {
    ensure_defs
    p=lc$$$RANDOM
    D=$(cat "$DS_DIR/url-direct")
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "$p" --scope "sessions:read:$p-vis" | tail -n 1)
    # Newest first: vis-b, hid, vis-a. A page of one that ended on vis-b had the
    # hidden session's id as its cursor.
    for id in "$p-vis-a" "$p-hid" "$p-vis-b"; do
        post /v1/sessions "{\"agent\": \"writer\", \"id\": \"$id\"}"
        assert_status 201
    done
    : >"$T/seen"
    cursor=
    for page in $(seq 1 200); do
        req GET "$D/v1/sessions?limit=1${cursor:+&cursor=$cursor}" -H "Authorization: Bearer $tok"
        assert_status 200
        jq -r '.sessions[].id' "$DS_BODY" >>"$T/seen"
        ! grep -q "$p-hid" "$DS_BODY" || fail "page $page names the hidden session: $(cat "$DS_BODY")"
        ! grep -q "$p-hid" "$DS_HDRS" || fail "page $page's headers name the hidden session"
        cursor=$(jbody '.nextCursor // empty')
        [ -n "$cursor" ] || break
        cursor=$(jq -rn --arg c "$cursor" '$c | @uri')
    done
    [ -z "$cursor" ] || fail "paging did not end"
    [ "$(tr '\n' ' ' <"$T/seen")" = "$p-vis-b $p-vis-a " ] || fail "listed: $(cat "$T/seen")"
}

@test "sessions: delete, then the session is gone" {
    new_chat
    req DELETE "/v1/sessions/$SID"
    assert_status 204
    req GET "/v1/sessions/$SID"
    assert_status 404
    assert_json_error not_found
    req GET "/v1/sessions/$SID/events?offset=-1"
    assert_status 404
    req DELETE "/v1/sessions/$SID"
    assert_status 404
    req GET "/v1/sessions?limit=100"
    assert_body_json "[.sessions[].id] | index(\"$SID\") == null"
    post "/v1/sessions/$SID/messages" '{"content": "anyone?"}'
    assert_status 404
}

@test "sessions: the id of a deleted session is free again (or taken), never a 5xx" {
    ensure_defs
    sid=d-$RANDOM$RANDOM
    post /v1/sessions "{\"agent\": \"writer\", \"id\": \"$sid\"}"
    assert_status 201
    req DELETE "/v1/sessions/$sid"
    assert_status 204
    post /v1/sessions "{\"agent\": \"writer\", \"id\": \"$sid\"}"
    case $status_code in
    201 | 409) ;;
    *) fail "re-creating deleted session $sid: expected 201 or 409, got $status_code: $body" ;;
    esac
}

# ---- commands -------------------------------------------------------------------------

@test "messages: each mode is accepted and lands in the session's history" {
    new_chat
    post "/v1/sessions/$SID/messages" '{"content": "first, default mode"}'
    assert_status 202
    assert_body_json ".id == \"$SID\" and (.offset | test(\"^[0-9]{16}_[0-9]{16}$\"))"
    o1=$(jbody .offset)
    post "/v1/sessions/$SID/messages" '{"content": "queued", "mode": "queue"}'
    assert_status 202
    post "/v1/sessions/$SID/messages" '{"content": "interrupting", "mode": "interrupt"}'
    assert_status 202
    post "/v1/sessions/$SID/messages" '{"content": "just so you know", "mode": "background"}'
    assert_status 202

    events_of "$SID"
    jq -e 'length == 5 and ([.[1:][] | .type] | all(. == "message:user")) and ([.[1:][] | .actor] | all(. == "user"))' \
        "$T/events.json" >/dev/null || fail "events: $(cat "$T/events.json")"
    jq -e '[.[1:][] | .payload.mode] == ["interrupt", "queue", "interrupt", "background"]' "$T/events.json" >/dev/null ||
        fail "modes: $(jq -c '[.[].payload.mode]' "$T/events.json")"
    jq -e --arg o "$o1" '.[1].offset == $o' "$T/events.json" >/dev/null || fail "the 202's offset is not the event's"

    req GET "/v1/sessions/$SID"
    assert_status 200
    # Nothing in flight (no runner): a queued message joins at once; background is marked.
    assert_body_json '[.messages[] | .content] == ["first, default mode", "queued", "interrupting", "just so you know"]'
    assert_body_json '[.messages[] | .role] | all(. == "user")'
    assert_body_json '.messages[3].background == true and (.messages[0].background // false) == false'
    assert_body_json '.queued == [] and .status == "pending" and .eventCount == 5'
}

@test "events: each envelope has the fields of docs/events.md" {
    new_chat
    post "/v1/sessions/$SID/messages" '{"content": "hello"}'
    assert_status 202
    events_of "$SID"
    first_json_block "$DOCS/events.md" >"$T/example.json"
    jq -e 'has("type") and has("payload")' "$T/example.json" >/dev/null || fail "no example in docs/events.md"
    want=$(jq -c 'keys' "$T/example.json")
    want_trace=$(jq -c '.trace | keys' "$T/example.json")
    for i in 0 1; do
        [ "$(jq -c ".[$i] | keys" "$T/events.json")" = "$want" ] ||
            fail "event $i has keys $(jq -c ".[$i] | keys" "$T/events.json"), the doc's example $want"
        [ "$(jq -c ".[$i].trace | keys" "$T/events.json")" = "$want_trace" ] || fail "trace keys of event $i"
    done
    jq -e '.[1] | (.createdAt | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$"))
        and (.trace.traceId | test("^[0-9a-f]{32}$")) and (.trace.spanId | test("^[0-9a-f]{16}$"))
        and .causedBy == null and .actor == "user" and (.payload | type == "object")' "$T/events.json" >/dev/null ||
        fail "envelope: $(jq -c '.[1]' "$T/events.json")"
}

@test "messages: a traceparent header becomes the event's trace, its span the parentSpanId" {
    new_chat
    post "/v1/sessions/$SID/messages" '{"content": "traced"}' \
        -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    assert_status 202
    post "/v1/sessions/$SID/messages" '{"content": "badly traced"}' -H 'traceparent: 00-zzzz-yyyy-01'
    assert_status 202
    events_of "$SID"
    jq -e '.[2].trace.traceId != "4bf92f3577b34da6a3ce929d0e0e4736" and (.[2].trace.traceId | test("^[0-9a-f]{32}$"))' \
        "$T/events.json" >/dev/null || fail "a malformed traceparent should start a new trace: $(jq -c '.[2].trace' "$T/events.json")"
    jq -e '.[1].trace.traceId == "4bf92f3577b34da6a3ce929d0e0e4736"' "$T/events.json" >/dev/null ||
        fail "traceId: $(jq -c '.[1].trace' "$T/events.json")"
    jq -e '.[1].trace.parentSpanId == "00f067aa0ba902b7" and .[1].trace.spanId != "00f067aa0ba902b7"' "$T/events.json" >/dev/null ||
        fail "docs/events.md: the request's span should be the parentSpanId; got $(jq -c '.[1].trace' "$T/events.json")"
}

@test "messages: bad mode, bad content, non-JSON, wrong content type, unknown session" {
    new_chat
    n0=$(n_events "$SID")
    post "/v1/sessions/$SID/messages" '{"content": "x", "mode": "shout"}'
    assert_status 400
    assert_json_error bad_mode
    post "/v1/sessions/$SID/messages" '{"content": "x", "mode": 1}'
    assert_status 400
    assert_json_error bad_mode
    post "/v1/sessions/$SID/messages" '{"content": ""}'
    assert_status 400
    assert_json_error bad_content
    post "/v1/sessions/$SID/messages" '{"content": {"text": "x"}}'
    assert_status 400
    assert_json_error bad_content
    post "/v1/sessions/$SID/messages" '{}'
    assert_status 400
    post "/v1/sessions/$SID/messages" 'content=x'
    assert_status 400
    assert_json_error invalid_json
    req POST "/v1/sessions/$SID/messages" -H 'Content-Type: text/plain' --data-binary '{"content": "x"}'
    assert_status 415
    assert_json_error unsupported_media_type
    [ "$(n_events "$SID")" = "$n0" ] || fail "a refused message was written"
    post /v1/sessions/no-such-session/messages '{"content": "x"}'
    assert_status 404
    assert_json_error not_found
}

@test "input: an answer for a checkpoint of the workflow is kept early; twice is 409" {
    new_blog
    post "/v1/sessions/$SID/input" '{"interactionId": "publish-ok", "response": true}'
    assert_status 202
    off=$(jbody .offset)
    req GET "/v1/sessions/$SID"
    assert_body_json '.earlyAnswers == {"publish-ok": true} and .pendingInput == null and .status == "pending"'
    events_of "$SID"
    jq -e --arg o "$off" '.[-1] | .type == "input:received" and .offset == $o and .actor == "user"
        and .payload == {"interactionId": "publish-ok", "response": true}' "$T/events.json" >/dev/null ||
        fail "event: $(jq -c '.[-1]' "$T/events.json")"
    n=$(n_events "$SID")

    post "/v1/sessions/$SID/input" '{"interactionId": "publish-ok", "response": false}'
    assert_status 409
    assert_json_error input_answered
    post "/v1/sessions/$SID/input" '{"interactionId": "not-in-the-workflow", "response": true}'
    assert_status 409
    assert_json_error input_not_requested
    [ "$(n_events "$SID")" = "$n" ] || fail "a refused answer was written"

    # The answer must fit the checkpoint's kind (approval: a boolean).
    new_blog
    post "/v1/sessions/$SID/input" '{"interactionId": "publish-ok", "response": "yes"}'
    assert_status 400
    assert_json_error bad_response
    post "/v1/sessions/$SID/input" '{"interactionId": "publish-ok"}'
    assert_status 400
    post "/v1/sessions/$SID/input" '{"response": true}'
    assert_status 400
    post "/v1/sessions/$SID/input" '{"interactionId": 7, "response": true}'
    assert_status 400
    req POST "/v1/sessions/$SID/input" -H 'Content-Type: text/plain' --data-binary '{"interactionId": "publish-ok", "response": true}'
    assert_status 415
    req GET "/v1/sessions/$SID"
    assert_body_json '.earlyAnswers == {}'

    # A chat session has no checkpoints: nothing was requested.
    new_chat
    post "/v1/sessions/$SID/input" '{"interactionId": "publish-ok", "response": true}'
    assert_status 409
    assert_json_error input_not_requested
    post /v1/sessions/no-such-session/input '{"interactionId": "publish-ok", "response": true}'
    assert_status 404
}

@test "cancel: 202 and cancelRequested; a second cancel is 202 without a new event" {
    new_blog
    req POST "/v1/sessions/$SID/cancel"
    assert_status 202
    off=$(jbody .offset)
    req GET "/v1/sessions/$SID"
    assert_body_json '.cancelRequested == true'
    events_of "$SID"
    jq -e --arg o "$off" 'length == 2 and .[1].type == "cancel:requested" and .[1].offset == $o and .[1].actor == "user"' \
        "$T/events.json" >/dev/null || fail "events: $(cat "$T/events.json")"
    req POST "/v1/sessions/$SID/cancel"
    assert_status 202
    [ "$(n_events "$SID")" = 2 ] || fail "a second cancel:requested was written"
    req GET "/v1/sessions/$SID/cancel"
    assert_status 405
    assert_header Allow POST
    req POST /v1/sessions/no-such-session/cancel
    assert_status 404
}

@test "fork: at a past offset the fork's history ends there" {
    new_chat
    parent=$SID
    for m in one two three; do
        post "/v1/sessions/$parent/messages" "{\"content\": \"$m\"}"
        assert_status 202
    done
    events_of "$parent"
    at=$(jq -r '.[2].offset' "$T/events.json")   # keeps session:created and "one"
    post "/v1/sessions/$parent/fork" "{\"at\": \"$at\"}"
    assert_status 201
    fork=$(jbody .id)
    assert_header Location "/v1/sessions/$fork"
    assert_body_json ".parent == \"$parent\" and .forkOffset == \"$at\" and .agent == \"writer\""
    assert_body_json '[.messages[].content] == ["one"] and .eventCount == 3'

    req GET "/v1/sessions/$fork/events?offset=-1"
    assert_status 200
    cp "$DS_BODY" "$T/fork.json"
    jq -e --argjson p "$(jq -c '.[0:2]' "$T/events.json")" '.[0:2] == $p' "$T/fork.json" >/dev/null ||
        fail "the fork's history differs from the parent's before $at: $(cat "$T/fork.json")"
    jq -e --arg p "$parent" --arg at "$at" 'length == 3 and .[2].type == "session:forked"
        and .[2].payload == {"from": $p, "at": $at} and .[2].offset == $at' "$T/fork.json" >/dev/null ||
        fail "fork events: $(cat "$T/fork.json")"

    # The fork goes its own way; the parent is unchanged.
    post "/v1/sessions/$fork/messages" '{"content": "other two"}'
    assert_status 202
    req GET "/v1/sessions/$fork"
    assert_body_json '[.messages[].content] == ["one", "other two"]'
    req GET "/v1/sessions/$parent"
    assert_body_json '[.messages[].content] == ["one", "two", "three"] and .eventCount == 4'

    # The fork's state at the fork point is the parent's there.
    req GET "/v1/sessions/$fork/state?at=$at"
    assert_status 200
    assert_body_json '[.messages[].content] == ["one"]'

    # Without `at`: the whole history.
    post "/v1/sessions/$parent/fork" '{}'
    assert_status 201
    assert_body_json '[.messages[].content] == ["one", "two", "three"] and .eventCount == 5'
    # A chosen id, and one that is taken.
    fid=f-$RANDOM$RANDOM
    post "/v1/sessions/$parent/fork" "{\"at\": \"$at\", \"id\": \"$fid\"}"
    assert_status 201
    assert_body_json ".id == \"$fid\""
    post "/v1/sessions/$parent/fork" "{\"at\": \"$at\", \"id\": \"$fid\"}"
    assert_status 409
    assert_json_error session_exists
    # Deleting the parent leaves the fork readable.
    req DELETE "/v1/sessions/$parent"
    assert_status 204
    req GET "/v1/sessions/$fork/events?offset=-1"
    assert_status 200
    assert_body_json 'length == 4'
}

@test "fork: a bad at is 400, an unknown session 404" {
    new_chat
    post "/v1/sessions/$SID/messages" '{"content": "one"}'
    tail=$(jbody .offset)
    for at in '"garbage"' '"now"' '5' 'true' '"0000000000000099_0000000000009999"'; do
        post "/v1/sessions/$SID/fork" "{\"at\": $at}"
        assert_status 400
        assert_json_error bad_offset
    done
    post /v1/sessions/no-such-session/fork "{\"at\": \"$tail\"}"
    assert_status 404
    post "/v1/sessions/$SID/fork" '{"id": "bad/id"}'
    assert_status 400
    req POST "/v1/sessions/$SID/fork" -H 'Content-Type: text/plain' --data-binary '{}'
    assert_status 415
}

# ---- state at offsets ------------------------------------------------------------------

@test "state: read at three offsets, it changes with the position" {
    new_chat
    for m in one two three; do
        post "/v1/sessions/$SID/messages" "{\"content\": \"$m\"}"
        assert_status 202
    done
    req GET "/v1/sessions/$SID/events?offset=-1"
    assert_status 200
    tail=$(header Stream-Next-Offset)
    cp "$DS_BODY" "$T/events.json"
    [ "$(jq length "$T/events.json")" = 4 ] || fail "events: $body"
    # The state at X covers the events before X: after message N is at the next
    # event's offset (the tail after the last).
    after1=$(jq -r '.[2].offset' "$T/events.json")
    after2=$(jq -r '.[3].offset' "$T/events.json")
    after3=$tail
    req GET "/v1/sessions/$SID/state?at=$after1"
    assert_status 200
    assert_body_json "[.messages[].content] == [\"one\"] and .eventCount == 2 and .at == \"$after1\" and .position == \"$after1\""
    req GET "/v1/sessions/$SID/state?at=$after2"
    assert_status 200
    assert_body_json "[.messages[].content] == [\"one\", \"two\"] and .eventCount == 3 and .position == \"$after2\""
    req GET "/v1/sessions/$SID/state?at=$after3"
    assert_status 200
    assert_body_json "[.messages[].content] == [\"one\", \"two\", \"three\"] and .eventCount == 4 and .position == \"$after3\""
    # Before everything, and without `at` (the tail).
    req GET "/v1/sessions/$SID/state?at=-1"
    assert_status 200
    assert_body_json '.messages == [] and .eventCount == 0'
    req GET "/v1/sessions/$SID/state"
    assert_status 200
    assert_body_json "[.messages[].content] == [\"one\", \"two\", \"three\"] and .position == \"$tail\""

    # Answers and cancels show in the state from their offset on.
    new_blog
    post "/v1/sessions/$SID/input" '{"interactionId": "publish-ok", "response": false}'
    a=$(jbody .offset)
    req POST "/v1/sessions/$SID/cancel"
    c=$(jbody .offset)
    req GET "/v1/sessions/$SID/state?at=$a"
    assert_body_json '.earlyAnswers == {} and .cancelRequested == false'
    req GET "/v1/sessions/$SID/state?at=$c"
    assert_body_json '.earlyAnswers == {"publish-ok": false} and .cancelRequested == false'
    req GET "/v1/sessions/$SID/state"
    assert_body_json '.earlyAnswers == {"publish-ok": false} and .cancelRequested == true'
}

@test "state: a bad at is 400, an unknown session 404" {
    new_chat
    for at in garbage now 0000000000000099_0000000000000000 '' 12; do
        req GET "/v1/sessions/$SID/state?at=$at"
        assert_status 400
        assert_json_error bad_offset
    done
    req GET /v1/sessions/no-such-session/state
    assert_status 404
    req GET "/v1/sessions/no-such-session/state?at=-1"
    assert_status 404
    req POST "/v1/sessions/$SID/state"
    assert_status 405
    assert_header Allow GET
}

# ---- events: catch-up, SSE, resume -----------------------------------------------------

@test "events: SSE names each event after its type and resumes with Last-Event-ID" {
    new_chat
    for m in one two three; do
        post "/v1/sessions/$SID/messages" "{\"content\": \"$m\"}"
        assert_status 202
    done
    events_of "$SID"
    spawn "$T/sse1" curl -sS -N --max-time 60 "$DS_URL/v1/sessions/$SID/events?offset=-1&live=sse"
    ds_poll 10 sse_has "$T/sse1" 4 || fail "4 events did not arrive: $(cat "$T/sse1")"
    kill "$LAST_PID" 2>/dev/null || true
    for i in 1 2 3 4; do
        want_type=$(jq -r ".[$((i - 1))].type" "$T/events.json")
        [ "$(sse_field "$T/sse1" "$i" event)" = "$want_type" ] || fail "event $i is named $(sse_field "$T/sse1" "$i" event), not $want_type"
        # id: the offset after the event (the next one's, or the tail)
        want_id=$(jq -r ".[$i].offset // empty" "$T/events.json")
        [ "$i" -lt 4 ] || want_id=$(header Stream-Next-Offset)
        [ "$(sse_field "$T/sse1" "$i" id)" = "$want_id" ] || fail "event $i has id $(sse_field "$T/sse1" "$i" id), not $want_id"
        sse_field "$T/sse1" "$i" data | jq -e --argjson e "$(jq -c ".[$((i - 1))]" "$T/events.json")" '. == $e' >/dev/null ||
            fail "event $i data differs from the catch-up: $(sse_field "$T/sse1" "$i" data)"
    done

    # Reconnect as an EventSource does: Last-Event-ID of the first event, no offset.
    first_id=$(sse_field "$T/sse1" 1 id)
    spawn "$T/sse2" curl -sS -N --max-time 60 -H "Last-Event-ID: $first_id" "$DS_URL/v1/sessions/$SID/events?live=sse"
    ds_poll 10 sse_has "$T/sse2" 3 || fail "3 events did not arrive after resuming: $(cat "$T/sse2")"
    sse_field "$T/sse2" 1 data | jq -e --arg o "$first_id" '.offset == $o and .type == "message:user" and .payload.content == "one"' \
        >/dev/null || fail "the first event after resuming is not the second one: $(sse_field "$T/sse2" 1 data)"
    [ "$(sse_field "$T/sse2" 1 id)" = "$(sse_field "$T/sse1" 2 id)" ] || fail "ids after resuming differ"

    # A new command reaches the live reader.
    post "/v1/sessions/$SID/messages" '{"content": "four", "mode": "background"}'
    assert_status 202
    ds_poll 10 sse_has "$T/sse2" 4 || fail "the live event did not arrive: $(cat "$T/sse2")"
    sse_field "$T/sse2" 4 data | jq -e '.payload.content == "four"' >/dev/null || fail "live event: $(sse_field "$T/sse2" 4 data)"

    # A Last-Event-ID that is not an offset is refused.
    req GET "/v1/sessions/$SID/events?live=sse" -H 'Last-Event-ID: nonsense'
    assert_status 400
    assert_json_error bad_offset
}

@test "events: catch-up from an offset, long-poll, bad requests" {
    new_chat
    post "/v1/sessions/$SID/messages" '{"content": "one"}'
    o1=$(jbody .offset)
    req GET "/v1/sessions/$SID/events?offset=$o1"
    assert_status 200
    assert_header Content-Type application/json
    assert_header Stream-Up-To-Date true
    tail=$(header Stream-Next-Offset)
    assert_body_json "length == 1 and .[0].offset == \"$o1\" and .[0].payload.content == \"one\""
    # A long-poll at the tail is answered by the next command.
    spawn "$T/lp" curl -sS --max-time 30 -D "$T/lp.h" "$DS_URL/v1/sessions/$SID/events?offset=$tail&live=long-poll"
    lp=$LAST_PID
    post "/v1/sessions/$SID/messages" '{"content": "two"}'
    assert_status 202
    ds_poll 15 grep -q '"two"' "$T/lp" || fail "long-poll: $(cat "$T/lp")"
    jq -e 'length == 1 and .[0].payload.content == "two"' "$T/lp" >/dev/null || fail "long-poll body: $(cat "$T/lp")"
    req GET "/v1/sessions/$SID/events?offset=garbage"
    assert_status 400
    req GET "/v1/sessions/$SID/events?live=forever"
    assert_status 400
    req GET /v1/sessions/no-such-session/events
    assert_status 404
    req POST "/v1/sessions/$SID/events"
    assert_status 405
}

# ---- the rest of the error codes --------------------------------------------------------

@test "errors: unknown sessions are 404 on every route" {
    for path in /v1/sessions/no-such-session /v1/sessions/no-such-session/state /v1/sessions/no-such-session/events; do
        req GET "$path"
        assert_status 404
        assert_json_error not_found
    done
    req DELETE /v1/sessions/no-such-session
    assert_status 404
    req GET "/v1/sessions/bad%20id"
    assert_status 404
    new_chat
    req GET "/v1/sessions/$SID/nothing-here"
    assert_status 404
}

@test "errors: session streams are read-only over the stream API (403)" {
    new_chat
    req POST "/v1/stream/sessions/$SID" -H 'Content-Type: application/json' --data-binary '{"type": "session:cancelled", "payload": {}}'
    assert_status 403
    assert_json_error read_only
    req PUT "/v1/stream/sessions/new-$RANDOM" -H 'Content-Type: application/json'
    assert_status 403
    req DELETE "/v1/stream/sessions/$SID"
    assert_status 403
    req GET "/v1/stream/sessions/$SID?offset=-1"
    assert_status 200
    assert_body_json 'length == 1'
    req HEAD "/v1/stream/sessions/$SID"
    assert_status 200
}

@test "errors: methods a route does not take are 405 with Allow" {
    new_chat
    req PUT /v1/sessions
    assert_status 405
    assert_header Allow "GET, POST"
    assert_json_error method_not_allowed
    req POST "/v1/sessions/$SID"
    assert_status 405
    assert_header Allow "GET, DELETE"
    for sub in messages input cancel fork; do
        req GET "/v1/sessions/$SID/$sub"
        assert_status 405
        assert_header Allow POST
    done
    req DELETE "/v1/sessions/$SID/events"
    assert_status 405
    assert_header Allow GET
    req PUT /v1/agents
    assert_status 405
    req DELETE /v1/workflows
    assert_status 405
}
