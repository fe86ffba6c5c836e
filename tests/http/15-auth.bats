#!/usr/bin/env bats
# The trust boundary on the HTTP side (docs/security.md): every route refuses a
# request without a token (401, WWW-Authenticate: Bearer) or with a token whose
# scopes do not cover it (403), and serves one that does; prefixes restrict scopes;
# ?access_token= works for GET only; expired and revoked tokens stop working; CORS
# only for the origins the operator lists; auth off only on loopback; nginx's own
# errors are JSON without a version; the rate limit answers 429 with Retry-After;
# and no token ever reaches a log.
#
# These requests go to the server's own URL (DIR/url-direct), not through the
# stack's token-adding proxy.

load helpers

setup_file() {
    ds_stack_start DSTREAM_RUNNER=0 DSTREAM_LONGPOLL_MS=1000
    D=$(cat "$DS_DIR/url-direct")
    ADMIN=$(cat "$DS_DIR/admin.token")
    MAIN_DIR=$DS_DIR
    export D ADMIN MAIN_DIR
    mk() { "$DS_BIN/dstream" --db "$DS_DB" token create --name "$1" "${@:2}" 2>/dev/null | tail -n 1; }
    TOK_SR=$(mk sr --scope streams:read:pub/)
    TOK_SW=$(mk sw --scope streams:write:pub/ --scope streams:read:pub/)
    TOK_XR=$(mk xr --scope sessions:read:team1-)
    TOK_XW=$(mk xw --scope sessions:write:team1-)
    TOK_OTHER=$(mk other --scope streams:read:elsewhere/)
    export TOK_SR TOK_SW TOK_XR TOK_XW TOK_OTHER
    # Fixtures made with the admin token.
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' "$D/v1/stream/pub/a"
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' "$D/v1/stream/priv/a"
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
        -d '{"provider":"anthropic","model":"m"}' "$D/v1/agents/helper"
    for id in team1-s team2-s; do
        curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
            -d "{\"agent\":\"helper\",\"id\":\"$id\"}" "$D/v1/sessions"
    done
}
teardown_file() { ds_stack_stop; }

setup() { T=$BATS_TEST_TMPDIR; }

# A test that started a stack of its own stops it, whatever happened.
teardown() {
    ds_bg_stop
    if [ "${DS_DIR:-}" != "$MAIN_DIR" ]; then ds_stack_stop; fi
}

# as TOKEN METHOD PATH [curl args]: a request to the server's own URL with TOKEN ("" none).
as() {
    local tok=$1 method=$2 path=$3
    shift 3
    if [ -n "$tok" ]; then req "$method" "$D$path" -H "Authorization: Bearer $tok" "$@"
    else req "$method" "$D$path" "$@"; fi
}

# Every route: METHOD PATH BODY. The bodies are valid enough to get past parsing.
ROUTES=(
    "GET /v1/stream/pub/a?offset=-1"
    "HEAD /v1/stream/pub/a"
    "PUT /v1/stream/pub/new"
    "POST /v1/stream/pub/a {}"
    "DELETE /v1/stream/pub/zzz"
    "GET /v1/stream/sessions/team1-s?offset=-1"
    "GET /v1/agents"
    "POST /v1/agents {\"name\":\"a2\",\"provider\":\"anthropic\",\"model\":\"m\"}"
    "GET /v1/agents/helper"
    "PUT /v1/agents/helper {\"provider\":\"anthropic\",\"model\":\"m\"}"
    "DELETE /v1/agents/nope"
    "GET /v1/workflows"
    "POST /v1/workflows {}"
    "GET /v1/workflows/nope"
    "PUT /v1/workflows/nope {}"
    "GET /v1/sessions"
    "POST /v1/sessions {\"agent\":\"helper\"}"
    "GET /v1/sessions/team1-s"
    "DELETE /v1/sessions/team1-nope"
    "GET /v1/sessions/team1-s/state"
    "GET /v1/sessions/team1-s/events?offset=-1"
    "GET /v1/sessions/team1-s/drift"
    "POST /v1/sessions/team1-s/messages {\"content\":\"hi\",\"mode\":\"background\"}"
    "POST /v1/sessions/team1-s/input {\"interactionId\":\"x\",\"response\":1}"
    "POST /v1/sessions/team1-nope/cancel {}"
    "POST /v1/sessions/team1-s/stop {}"
    "POST /v1/sessions/team1-s/fork {}"
    "PUT /v1/stream/__ds/subscriptions/s1 {\"type\":\"pull-wake\",\"pattern\":\"pub/*\",\"wake_stream\":\"pub/w\"}"
    "GET /v1/stream/__ds/subscriptions/s1"
    "POST /v1/stream/__ds/subscriptions/s1/streams {\"streams\":[\"pub/a\"]}"
    "DELETE /v1/stream/__ds/subscriptions/s1/streams/pub%2Fa"
    "POST /v1/stream/__ds/subscriptions/s1/claim {\"worker\":\"w\"}"
    "DELETE /v1/stream/__ds/subscriptions/nope"
    "GET /v1/recordings"
    "GET /v1/recordings/0000000000000000000000000000000000000000000000000000000000000000"
    "DELETE /v1/recordings/0000000000000000000000000000000000000000000000000000000000000000"
    "GET /v1/mcp/servers"
    "GET /v1/mcp/servers/fs"
    "POST /v1/aisdk/chat/helper {\"id\":\"team1-c\",\"messages\":[]}"
    "GET /v1/aisdk/chat/helper/team1-s/stream"
    "POST /v1/aisdk/chat/helper/team1-nope/stop {}"
    "POST /v1/langgraph/assistants/search {}"
    "GET /v1/langgraph/assistants/helper"
    "POST /v1/langgraph/threads {}"
    "POST /v1/langgraph/threads/search {}"
    "GET /v1/langgraph/threads/team1-s"
    "DELETE /v1/langgraph/threads/team1-nope"
    "GET /v1/langgraph/threads/team1-s/state"
    "GET /v1/langgraph/threads/team1-s/state/0000000000000001_0000000000000001"
    "POST /v1/langgraph/threads/team1-s/history {}"
    "POST /v1/langgraph/threads/team1-s/copy"
    "POST /v1/langgraph/threads/team1-s/runs {\"assistant_id\":\"helper\"}"
    "POST /v1/langgraph/threads/team1-s/runs/stream {\"assistant_id\":\"helper\"}"
    "POST /v1/langgraph/threads/team1-s/runs/wait {\"assistant_id\":\"helper\"}"
    "GET /v1/langgraph/threads/team1-s/runs"
    "GET /v1/langgraph/threads/team1-s/runs/0000000000000001_0000000000000001"
    "GET /v1/langgraph/threads/team1-s/runs/0000000000000001_0000000000000001/join"
    "GET /v1/langgraph/threads/team1-s/runs/0000000000000001_0000000000000001/stream"
    "POST /v1/langgraph/threads/team1-nope/runs/0000000000000001_0000000000000001/cancel"
    "GET /metrics"
    "GET /v1/metrics"
    "GET /v1/nothing-here"
)

route_req() {
    local tok=$1 method path data
    read -r method path data <<<"$2"
    if [ -n "$data" ]; then as "$tok" "$method" "$path" -H 'Content-Type: application/json' --data-binary "$data"
    else as "$tok" "$method" "$path"; fi
}

@test "auth: every route without a token is 401 with WWW-Authenticate: Bearer and a JSON error" {
    for r in "${ROUTES[@]}"; do
        route_req "" "$r"
        [ "$status_code" = 401 ] || { echo "$r -> $status_code $body"; false; }
        assert_header_matches WWW-Authenticate '^Bearer'
        [ "${r%% *}" = HEAD ] || assert_body_json '.error.code == "unauthorized"'
    done
}

@test "auth: every route with a malformed, unknown or tampered token is 401 invalid_token" {
    local bad=("not-a-token" "dst_0000000000000000_$(printf '0%.0s' {1..64})" "${TOK_SR%?}x")
    for tok in "${bad[@]}"; do
        for r in "GET /v1/stream/pub/a?offset=-1" "POST /v1/sessions {}" "GET /metrics"; do
            route_req "$tok" "$r"
            [ "$status_code" = 401 ] || { echo "$tok $r -> $status_code"; false; }
            assert_header_matches WWW-Authenticate 'error="invalid_token"'
        done
    done
    as "" GET /v1/stream/pub/a -H "Authorization: Basic YTpi"
    assert_status 401
}

@test "auth: every route with a token of another scope is 403 forbidden" {
    for r in "${ROUTES[@]}"; do
        route_req "$TOK_OTHER" "$r"
        case "$r" in
        "GET /v1/nothing-here") [ "$status_code" = 404 ] || { echo "$r -> $status_code"; false; } ;;
        *) [ "$status_code" = 403 ] || { echo "$r -> $status_code $body"; false; }
           [ "${r%% *}" = HEAD ] || assert_body_json '.error.code == "forbidden"' ;;
        esac
    done
}

@test "auth: the admin token passes every route (whatever the route then answers, never 401/403)" {
    for r in "${ROUTES[@]}"; do
        route_req "$ADMIN" "$r"
        case $status_code in 401 | 403 | 5??) echo "$r -> $status_code $body"; false ;; esac
    done
}

@test "auth: stream scopes: read and write are separate, and a prefix bounds them" {
    as "$TOK_SR" GET "/v1/stream/pub/a?offset=-1";   assert_status 200
    as "$TOK_SR" HEAD /v1/stream/pub/a;               assert_status 200
    as "$TOK_SR" GET "/v1/stream/priv/a?offset=-1";  assert_status 403
    as "$TOK_SR" GET "/v1/stream/pubx?offset=-1";    assert_status 403
    as "$TOK_SR" POST /v1/stream/pub/a -H 'Content-Type: application/json' -d '{}'; assert_status 403
    as "$TOK_SW" PUT /v1/stream/pub/w1 -H 'Content-Type: application/json';        assert_status 201
    as "$TOK_SW" POST /v1/stream/pub/w1 -H 'Content-Type: application/json' -d '{"x":1}'; assert_status 204
    as "$TOK_SW" PUT /v1/stream/priv/w1 -H 'Content-Type: application/json';       assert_status 403
    as "$TOK_SW" DELETE /v1/stream/pub/w1;            assert_status 204
    # A fork reads its source: writing pub/ does not give priv/.
    as "$TOK_SW" PUT /v1/stream/pub/f1 -H 'Content-Type: application/json' -H 'Stream-Forked-From: /v1/stream/priv/a'
    assert_status 403
    as "$TOK_SW" PUT /v1/stream/pub/f2 -H 'Content-Type: application/json' -H 'Stream-Forked-From: /v1/stream/pub/a'
    assert_status 201
    # Stream scopes never reach session streams, nor session scopes plain streams.
    as "$TOK_SR" GET "/v1/stream/sessions/team1-s?offset=-1"; assert_status 403
    as "$TOK_XR" GET "/v1/stream/sessions/team1-s?offset=-1"; assert_status 200
    as "$TOK_XR" GET "/v1/stream/sessions/team2-s?offset=-1"; assert_status 403
    as "$TOK_XR" GET "/v1/stream/pub/a?offset=-1";            assert_status 403
}

@test "auth: session scopes: prefixes, new ids under the prefix, a list of what the token may read" {
    as "$TOK_XR" GET /v1/sessions/team1-s;       assert_status 200
    as "$TOK_XR" GET /v1/sessions/team2-s;       assert_status 403
    as "$TOK_XR" GET "/v1/sessions/team1-s/events?offset=-1"; assert_status 200
    as "$TOK_XR" POST /v1/sessions/team1-s/cancel -H 'Content-Type: application/json' -d '{}'; assert_status 403
    as "$TOK_XR" GET /v1/sessions;               assert_status 200
    assert_body_json '[.sessions[].id] | index("team1-s") != null and index("team2-s") == null'
    as "$TOK_XW" POST /v1/sessions -H 'Content-Type: application/json' -d '{"agent":"helper"}'
    assert_status 201
    assert_body_json '.id | startswith("team1-")'
    as "$TOK_XW" POST /v1/sessions -H 'Content-Type: application/json' -d '{"agent":"helper","id":"team2-x"}'
    assert_status 403
    as "$TOK_XW" POST /v1/sessions -H 'Content-Type: application/json' -d '{"agent":"helper","id":"team1-x"}'
    assert_status 201
    as "$TOK_XW" POST /v1/sessions/team1-x/messages -H 'Content-Type: application/json' -d '{"content":"hi"}'
    assert_status 202
    # Forking needs read on the source (write alone is not enough) and write on the new id.
    as "$TOK_XW" POST /v1/sessions/team1-x/fork -H 'Content-Type: application/json' -d '{"id":"team1-f"}'
    assert_status 403
    local both
    both=$("$DS_BIN/dstream" --db "$DS_DB" token create --name xrw --scope sessions:read:team1- \
           --scope sessions:write:team1- 2>/dev/null | tail -n 1)
    as "$both" POST /v1/sessions/team1-x/fork -H 'Content-Type: application/json' -d '{"id":"team1-f"}'
    assert_status 201
    as "$both" POST /v1/sessions/team1-x/fork -H 'Content-Type: application/json' -d '{"id":"team2-f"}'
    assert_status 403
    as "$both" POST /v1/sessions/team2-s/fork -H 'Content-Type: application/json' -d '{"id":"team1-g"}'
    assert_status 403
    # Agents and workflows: readable with a session scope, changed by admin only.
    as "$TOK_XR" GET /v1/agents/helper;          assert_status 200
    as "$TOK_XW" PUT /v1/agents/helper -H 'Content-Type: application/json' -d '{"provider":"anthropic","model":"m"}'
    assert_status 403
    as "$TOK_SR" GET /v1/agents;                 assert_status 403
}

@test "auth: ?access_token= is accepted on GET (EventSource) and nowhere else" {
    as "" GET "/v1/stream/pub/a?offset=-1&access_token=$TOK_SR"
    assert_status 200
    as "" GET "/v1/sessions/team1-s/events?offset=-1&live=sse&access_token=$TOK_XR" --max-time 2
    [ "$status_code" = 200 ] || [ "$status_code" = 000 ]    # SSE: cut by --max-time
    grep -q "^event: session:created" "$DS_BODY"
    as "" POST "/v1/stream/pub/a?access_token=$TOK_SW" -H 'Content-Type: application/json' -d '{}'
    assert_status 401
}

@test "auth: an expired token and a revoked one stop working" {
    local tok
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name short --scope streams:read --expires 2s 2>/dev/null | tail -n 1)
    as "$tok" GET "/v1/stream/pub/a?offset=-1"
    assert_status 200
    local deadline=$((SECONDS + 10))
    while as "$tok" GET "/v1/stream/pub/a?offset=-1"; [ "$status_code" = 200 ] && [ $SECONDS -lt $deadline ]; do
        sleep 0.2
    done
    assert_status 401
    assert_body_json '.error.message | test("expired")'
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name gone --scope streams:read 2>/dev/null | tail -n 1)
    as "$tok" GET "/v1/stream/pub/a?offset=-1"
    assert_status 200
    run "$DS_BIN/dstream" --db "$DS_DB" token revoke gone
    assert_success
    deadline=$((SECONDS + 10))
    while as "$tok" GET "/v1/stream/pub/a?offset=-1"; [ "$status_code" = 200 ] && [ $SECONDS -lt $deadline ]; do
        sleep 0.2
    done
    assert_status 401
}

# live_readers_are N URL ADMIN: the pool holds N live readers (hub and threads).
live_readers_are() {
    [ "$(curl -sS -H "Authorization: Bearer $3" "$2/metrics" |
        awk '/^dstream_live_readers\{/ { n += $2 } END { print n + 0 }')" = "$1" ]
}

# live_revoked NAME: on the current stack, an SSE reader and a long-poll reader that
# came with token NAME (streams:read) wait at the tail; the token is revoked; both
# responses end (long before DSTREAM_SSE_MAX_MS and DSTREAM_LONGPOLL_MS, 120 s here),
# and the readers' next requests are 401.
live_revoked() {
    local d tok admin sse lp i code
    d=$(cat "$DS_DIR/url-direct")
    admin=$(cat "$DS_DIR/admin.token")
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $admin" -H 'Content-Type: text/plain' "$d/v1/stream/pub/live-$1"
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $admin" -H 'Content-Type: text/plain' "$d/v1/stream/pub/quiet-$1"
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "$1" --scope streams:read:pub/ 2>/dev/null | tail -n 1)
    spawn "$T/$1.sse.code" curl -sS -N --max-time 100 -o "$T/$1.sse" -w '%{http_code}' \
        -H "Authorization: Bearer $tok" "$d/v1/stream/pub/live-$1?offset=-1&live=sse"
    sse=$LAST_PID
    # The long-poll waits on a stream nothing is appended to.
    spawn "$T/$1.lp.code" curl -sS --max-time 100 -o "$T/$1.lp" -w '%{http_code}' \
        -H "Authorization: Bearer $tok" "$d/v1/stream/pub/quiet-$1?offset=now&live=long-poll"
    lp=$LAST_PID
    # The SSE reader (from the start: the append may come before it is served) is live.
    curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $admin" -H 'Content-Type: text/plain' \
        --data-binary "hello-$1" "$d/v1/stream/pub/live-$1"
    ds_poll 10 grep -q "hello-$1" "$T/$1.sse" || fail "the SSE reader did not get the append: $(cat "$T/$1.sse")"
    # Both wait at the tail, in the hub or on their threads (/metrics counts them).
    ds_poll 15 live_readers_are 2 "$d" "$admin" || fail "the two readers are not waiting: $(curl -sS -H "Authorization: Bearer $admin" "$d/metrics" | grep live_readers)"
    kill -0 "$sse" && kill -0 "$lp" || fail "a reader ended before the revocation"
    run "$DS_BIN/dstream" --db "$DS_DB" token revoke "$1"
    assert_success
    ds_poll 15 eval '! kill -0 '"$sse"' 2>/dev/null && ! kill -0 '"$lp"' 2>/dev/null' ||
        fail "a reader of a revoked token still streams 15 s after the revocation"
    [ "$(cat "$T/$1.sse.code")" = 200 ] || fail "SSE: $(cat "$T/$1.sse.code")"
    [ "$(cat "$T/$1.lp.code")" = 204 ] || fail "long-poll: $(cat "$T/$1.lp.code") $(cat "$T/$1.lp")"
    for i in sse long-poll; do
        code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $tok" \
            "$d/v1/stream/pub/live-$1?offset=now&live=$i")
        [ "$code" = 401 ] || fail "$i after the revocation: $code"
    done
}

@test "auth: a live reader whose token is revoked has its response ended, by the hub and by a thread" {
    ds_stack_start DSTREAM_RUNNER=0 DSTREAM_LONGPOLL_MS=120000 DSTREAM_SSE_MAX_MS=120000
    live_revoked hub
    ds_stack_stop
    # DSTREAM_LIVE_MAX=0: the hub takes no reader, each waits on its responder thread.
    ds_stack_start DSTREAM_RUNNER=0 DSTREAM_LONGPOLL_MS=120000 DSTREAM_SSE_MAX_MS=120000 DSTREAM_LIVE_MAX=0
    live_revoked thread
}

@test "auth: 30 live readers on 5 tokens, 2 tokens revoked: exactly their 12 readers end, the other 18 get the next append" {
    ds_stack_start DSTREAM_RUNNER=0 DSTREAM_SSE_MAX_MS=120000
    local d admin i k tok pids=() toks=()
    d=$(cat "$DS_DIR/url-direct")
    admin=$(cat "$DS_DIR/admin.token")
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $admin" -H 'Content-Type: text/plain' "$d/v1/stream/pub/many"
    for k in 0 1 2 3 4; do
        toks[k]=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "many$k" --scope streams:read:pub/ 2>/dev/null | tail -n 1)
    done
    for i in $(seq 0 29); do
        k=$((i % 5))
        spawn "$T/many.$i.code" curl -sS -N --max-time 100 -o "$T/many.$i" -w '%{http_code}' \
            -H "Authorization: Bearer ${toks[k]}" "$d/v1/stream/pub/many?offset=-1&live=sse"
        pids[i]=$LAST_PID
    done
    curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $admin" -H 'Content-Type: text/plain' \
        --data-binary "one" "$d/v1/stream/pub/many"
    for i in $(seq 0 29); do ds_poll 15 grep -q one "$T/many.$i" || fail "reader $i did not get the first append"; done
    ds_poll 15 live_readers_are 30 "$d" "$admin" || fail "not 30 readers waiting"
    "$DS_BIN/dstream" --db "$DS_DB" token revoke many1 >/dev/null
    "$DS_BIN/dstream" --db "$DS_DB" token revoke many3 >/dev/null
    for i in $(seq 0 29); do
        k=$((i % 5))
        if [ "$k" = 1 ] || [ "$k" = 3 ]; then
            ds_poll 15 eval '! kill -0 '"${pids[i]}"' 2>/dev/null' || fail "reader $i (token many$k, revoked) still streams"
            [ "$(cat "$T/many.$i.code")" = 200 ] || fail "reader $i: $(cat "$T/many.$i.code")"
        fi
    done
    ds_poll 15 live_readers_are 18 "$d" "$admin" || fail "not 18 readers left"
    curl -fsS -o /dev/null -X POST -H "Authorization: Bearer $admin" -H 'Content-Type: text/plain' \
        --data-binary "two" "$d/v1/stream/pub/many"
    for i in $(seq 0 29); do
        k=$((i % 5))
        [ "$k" = 1 ] || [ "$k" = 3 ] && continue
        ds_poll 15 grep -q two "$T/many.$i" || fail "reader $i (token many$k) did not get the next append"
        kill -0 "${pids[i]}" || fail "reader $i ended"
    done
}

@test "auth: dstream token prints the token alone on its last line; only its hash is stored" {
    run --separate-stderr "$DS_BIN/dstream" --db "$DS_DB" token create --name cli1 --scope streams:read:x/ --scope admin
    assert_success
    [ "${#lines[@]}" = 1 ]
    [[ ${lines[0]} =~ ^dst_[0-9a-f]{16}_[0-9a-f]{64}$ ]]
    local tok=${lines[0]} secret=${lines[0]:21}
    run "$DS_BIN/dstream" --db "$DS_DB" token list
    assert_success
    assert_output --partial "cli1"
    assert_output --partial "streams:read:x/ admin"
    refute_output --partial "$secret"
    # Nowhere in the database's bytes (a bare "! grep" would not fail a bats test).
    mapfile -t dbfiles < <(ds_db_files)
    [ ${#dbfiles[@]} -gt 0 ]
    run grep -qaF -- "$secret" "${dbfiles[@]}"
    [ "$status" = 1 ]
    run "$DS_BIN/dstream" --db "$DS_DB" token create --name cli1 --scope admin
    assert_failure
    run "$DS_BIN/dstream" --db "$DS_DB" token create --name cli2 --scope streams:erase
    assert_failure 2
    run "$DS_BIN/dstream" --db "$DS_DB" token create --name cli3 --scope admin --expires 5x
    assert_failure 2
    echo "$tok" | "$DS_BIN/dstream" --db "$DS_DB" token check
    run "$DS_BIN/dstream" --db "$DS_DB" token revoke cli1
    assert_success
    ! echo "$tok" | "$DS_BIN/dstream" --db "$DS_DB" token check
}

@test "cors: no CORS headers and no preflight unless DSTREAM_CORS_ORIGINS lists the origin" {
    as "$ADMIN" GET "/v1/stream/pub/a?offset=-1" -H 'Origin: https://evil.example'
    assert_status 200
    refute_header Access-Control-Allow-Origin
    as "" OPTIONS /v1/stream/pub/a -H 'Origin: https://evil.example' -H 'Access-Control-Request-Method: DELETE'
    assert_status 403
    refute_header Access-Control-Allow-Origin
    refute_header Access-Control-Allow-Methods
    assert_body_json '.error.code == "cors_origin_not_allowed"'
}

@test "cors: a listed origin is echoed (never *), others get nothing; preflight allows Authorization" {
    local d tok
    ds_stack_start DSTREAM_RUNNER=0 DSTREAM_LONGPOLL_MS=500 "DSTREAM_CORS_ORIGINS=https://app.example,https://b.example:8443"
    d=$(cat "$DS_DIR/url-direct")
    tok=$(cat "$DS_DIR/admin.token")
    req OPTIONS "$d/v1/stream/x" -H 'Origin: https://app.example' -H 'Access-Control-Request-Method: PUT' \
        -H 'Access-Control-Request-Headers: authorization, content-type'
    assert_status 204
    assert_header Access-Control-Allow-Origin https://app.example
    assert_header_matches Access-Control-Allow-Headers 'Authorization'
    assert_header_matches Access-Control-Allow-Methods 'PUT'
    refute_header Access-Control-Allow-Credentials
    req PUT "$d/v1/stream/x" -H "Authorization: Bearer $tok" -H 'Origin: https://b.example:8443' \
        -H 'Content-Type: text/plain'
    assert_status 201
    assert_header Access-Control-Allow-Origin https://b.example:8443
    assert_header Vary Origin
    req GET "$d/v1/stream/x?offset=-1" -H "Authorization: Bearer $tok" -H 'Origin: https://app.example.evil'
    assert_status 200
    refute_header Access-Control-Allow-Origin
    # A long-poll answered later by the hub keeps the origin's headers.
    req GET "$d/v1/stream/x?offset=now&live=long-poll" -H "Authorization: Bearer $tok" -H 'Origin: https://app.example'
    assert_status 204
    assert_header Access-Control-Allow-Origin https://app.example
    # The 401 of a cross-origin request is readable by the page too.
    req GET "$d/v1/stream/x?offset=-1" -H 'Origin: https://app.example'
    assert_status 401
    assert_header Access-Control-Allow-Origin https://app.example
}

@test "auth off: refused on a non-loopback listen address and for non-loopback clients" {
    run env DSTREAM_AUTH=off DSTREAM_DB="$T/off.db" "$DS_BIN/dstream-fcgi" --listen 0.0.0.0:1
    assert_failure 2
    assert_output --partial "only allowed on a Unix socket or a loopback address"
    # A socket it is given (spawn-fcgi, systemd) is checked the same way.
    if command -v spawn-fcgi >/dev/null; then
        run env DSTREAM_AUTH=off DSTREAM_DB="$T/off.db" timeout 10 spawn-fcgi -n -a 0.0.0.0 \
            -p "$("$DS_BIN/dstream" free-port)" -- "$DS_BIN/dstream-fcgi"
        assert_failure
        assert_output --partial "only allowed on a Unix socket or a loopback address, not 0.0.0.0"
    fi
    run env DSTREAM_AUTH=maybe DSTREAM_DB="$T/off.db" "$DS_BIN/dstream-fcgi" --listen 127.0.0.1:1
    assert_failure 2
    run env DSTREAM_AUTH=off DSTREAM_HOST=0.0.0.0 DSTREAM_DB="$T/off2.db" B="$DS_B" "$DS_STACK" start "$T/off2"
    assert_failure
    assert_output --partial "only allowed on a loopback address"
    # A CGI request (one process) from a remote address with auth off: refused.
    run env -i DSTREAM_AUTH=off DSTREAM_DB="$T/off.db" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=GET \
        REQUEST_URI=/v1/stream/a REMOTE_ADDR=203.0.113.9 "$DS_BIN/dstream-fcgi"
    assert_output --partial "Status: 403"
    assert_output --partial '"auth_off"'
    run env -i DSTREAM_AUTH=off DSTREAM_DB="$T/off.db" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=GET \
        REQUEST_URI=/v1/stream/a REMOTE_ADDR=127.0.0.1 "$DS_BIN/dstream-fcgi"
    assert_output --partial "Status: 404"
    # Auth on (the default) in CGI too: no token, 401.
    run env -i DSTREAM_DB="$T/off.db" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=GET \
        REQUEST_URI=/v1/stream/a REMOTE_ADDR=127.0.0.1 "$DS_BIN/dstream-fcgi"
    assert_output --partial "Status: 401"
}

@test "nginx: its own errors are JSON and name no version (414, 405 TRACE, 501, 505, 400)" {
    local long
    long=$(head -c 20000 /dev/zero | tr '\0' a)
    req GET "$D/v1/stream/$long"
    assert_status 414
    assert_body_json '.error.code == "uri_too_long"'
    assert_header Server nginx
    req TRACE "$D/v1/stream/x"
    assert_status 405
    assert_body_json '.error.code'
    req POST "$D/v1/stream/x" -H 'Transfer-Encoding: gzip, chunked' -d 'x'
    assert_status 501
    assert_body_json '.error.code == "not_implemented"'
    local port=${D##*:} resp
    resp=$(printf 'GET /v1/health HTTP/3.0\r\nHost: x\r\n\r\n' | timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; cat <&3")
    [[ $resp == *" 505 "* ]]
    [[ $resp == *'"http_version_not_supported"'* ]]
    [[ $resp != *"nginx/"* ]]
    resp=$(printf 'GET /v1/health HTTP/1.1\r\nHost: x\r\nX: %s\r\n\r\n' "$(head -c 20000 /dev/zero | tr '\0' b)" |
           timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; cat <&3")
    [[ $resp == *" 400 "* ]]
    [[ $resp == *'"error"'* ]]
    [[ $resp != *"nginx/"* ]]
}

@test "rate limit: past its burst a client gets 429 JSON with Retry-After; loopback (a local proxy) is not limited" {
    # The stack takes the client's address from X-Forwarded-For (a site with its
    # proxy on this host): these requests come from 192.0.2.x. /v1/health needs no
    # token but counts against the address and the token it is sent with. Each
    # response's status, Retry-After and body file are kept (-w, -o per URL).
    local got=0 deadline=$((SECONDS + 30)) tok tok2 n
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name rate1 --scope streams:read:r/ 2>/dev/null | tail -n 1)
    tok2=$("$DS_BIN/dstream" --db "$DS_DB" token create --name rate2 --scope streams:read:r/ 2>/dev/null | tail -n 1)
    mkdir -p "$T/rl"
    while [ $SECONDS -lt $deadline ]; do
        curl -s --parallel --parallel-max 64 -H "Authorization: Bearer $tok" -H 'X-Forwarded-For: 192.0.2.7' \
            -w '%{http_code} %header{retry-after} %{filename_effective}\n' -o "$T/rl/b_#1" \
            "$D/v1/health?n=[1-2000]" >"$T/codes"
        if grep -q '^429 ' "$T/codes"; then got=1; break; fi
    done
    [ "$got" = 1 ]
    n=$(grep -c '^200 ' "$T/codes")
    echo "# $n of 2000 passed, $(grep -c '^429 ' "$T/codes") refused" >&3
    # Every refusal is JSON with Retry-After.
    ! grep '^429 ' "$T/codes" | grep -v '^429 1 '
    read -r _ _ f < <(grep '^429 ' "$T/codes" | head -n 1)
    jq -e '.error.code == "rate_limited"' "$f"
    # Another client with another token is not held back by that one's use.
    req GET "$D/v1/health" -H "Authorization: Bearer $tok2" -H 'X-Forwarded-For: 192.0.2.8'
    assert_status 200
    # Loopback clients (the stack's proxy, a site's own) are not limited: as many
    # requests again from 127.0.0.1 with the same token all pass.
    curl -s --parallel --parallel-max 64 -H "Authorization: Bearer $tok" \
        -w '%{http_code}\n' -o /dev/null "$D/v1/health?n=[1-2000]" >"$T/codes2"
    [ "$(grep -c '^200$' "$T/codes2")" = 2000 ]
}

@test "auth: no token (header or query) ever reaches a log" {
    # Put every token through requests that log (errors, SSE, query tokens), then look.
    as "" GET "/v1/stream/nope?offset=-1&access_token=$TOK_SR"
    as "" GET "/v1/stream/pub/a?offset=-1&live=sse&access_token=$TOK_SR" --max-time 1
    as "$TOK_OTHER" DELETE /v1/stream/pub/a
    # nginx writes its buffered access log within a second.
    local deadline=$((SECONDS + 10)) logs=("$DS_DIR"/logs/*)
    until grep -qF 'access_token=-' "$DS_DIR/logs/access.log" || [ $SECONDS -gt $deadline ]; do sleep 0.1; done
    for tok in "$ADMIN" "$TOK_SR" "$TOK_SW" "$TOK_XR" "$TOK_XW" "$TOK_OTHER"; do
        ! grep -qF "${tok:21}" "${logs[@]}"
    done
    grep -qF 'access_token=-' "$DS_DIR/logs/access.log"
}

@test "auth: subscriptions: the JWK Set is public; callback, ack and release take the wake's token, never a dstream token" {
    as "" GET /v1/stream/__ds/jwks.json
    assert_status 200
    assert_header_matches Content-Type '^application/jwk-set\+json'
    assert_body_json '.keys | length >= 1'
    assert_body_json '[.keys[] | has("d")] | any | not'
    as "$ADMIN" PUT /v1/stream/__ds/subscriptions/auth-pull -H 'Content-Type: application/json' \
        --data-binary '{"type":"pull-wake","pattern":"pub/*","wake_stream":"pub/w"}'
    assert_status 201
    for a in callback ack release; do
        as "" POST "/v1/stream/__ds/subscriptions/auth-pull/$a" -H 'Content-Type: application/json' \
            --data-binary '{"wake_id":"w","generation":1}'
        assert_status 401
        assert_header_matches WWW-Authenticate '^Bearer'
        assert_body_json '.error.code == "TOKEN_INVALID"'
        # An admin token is not a wake's token.
        as "$ADMIN" POST "/v1/stream/__ds/subscriptions/auth-pull/$a" -H 'Content-Type: application/json' \
            --data-binary '{"wake_id":"w","generation":1}'
        case $a in
        callback) assert_status 400 ;;   # a pull-wake subscription has no callback
        *) assert_status 401; assert_body_json '.error.code == "TOKEN_INVALID"' ;;
        esac
    done
    # The reserved prefix holds no application stream.
    as "$ADMIN" PUT /v1/stream/__ds/mine -H 'Content-Type: application/json'
    assert_status 404
    assert_body_json '.error.code == "SUBSCRIPTION_NOT_FOUND"'
    as "$ADMIN" DELETE /v1/stream/__ds/subscriptions/auth-pull
    assert_status 204
}
