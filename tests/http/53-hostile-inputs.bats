#!/usr/bin/env bats
# Hostile inputs over the HTTP surface (docs/security.md, "Paths and text"): stream
# paths that are not UTF-8 refused at creation, and a database that already holds
# one (made with sqlite3 directly) served by the runner and the pool, its wake
# claimed and acked; error bodies that echo a path or a header valid JSON; request
# paths too long for the pool answered 414 path_too_long; then a fuzz pass over every
# route the router knows (tools/hostile.mjs: each path segment, header, query
# parameter and JSON field with invalid UTF-8, NUL, overlong and deeply nested
# values), after which every body parsed as JSON, no process exited (the pool's
# workers, the runner, nginx: same pids, nothing in the logs) and the runner starts
# again on the database.

load runner-helpers

setup_file() {
    command -v node >/dev/null || { echo "node is not installed (make deps)" >&2; return 1; }
    ds_stack_start DSTREAM_LONGPOLL_MS=300 DSTREAM_SSE_MAX_MS=500 || return 1
    rn_runner_wait_started 1
    export SCOPED
    SCOPED=$("$DS_BIN/dstream" --db "$DS_DB" token create --name pubw --scope streams:write:pub/ \
        --scope streams:read:pub/ 2>/dev/null | tail -n 1)
}
teardown_file() { ds_stack_stop; }

setup() { rn_runner_alive || rn_runner_start; }

# as TOKEN METHOD PATH [curl args]: req with another token than the admin's.
as() {
    local tok=$1
    shift
    DS_URL=$(cat "$DS_DIR/url-direct") req "$@" -H "Authorization: Bearer $tok"
}

# body_is_json: the last body is UTF-8 (iconv refuses anything else; jq alone would
# put U+FFFD in place of bad bytes) and an error document.
body_is_json() {
    iconv -f UTF-8 -t UTF-8 "$DS_BODY" >/dev/null || { echo "not UTF-8: $(od -c "$DS_BODY" | head -3)" >&2; return 1; }
    jq -e '.error.code | type == "string"' "$DS_BODY" >/dev/null || { echo "not an error: $body" >&2; return 1; }
}

# pids: nginx's master and workers, the pool's parent and workers, the runner.
pids() {
    local n f
    n=$(cat "$DS_DIR/nginx.master.pid")
    f=$(cat "$DS_DIR/fcgi.pid")
    echo "$n $(pgrep -P "$n" | sort -n | tr '\n' ' ') $f $(pgrep -P "$f" | sort -n | tr '\n' ' ') $(rn_runner_pid)"
}

# pool_exits: how many times the pool logged a worker's exit.
pool_exits() { grep -c 'exited' "$DS_DIR/logs/fcgi.log" || true; }

_wake_for() {
    req GET "/v1/stream/$1?offset=-1" &&
        jq -e --arg s "$2" 'map(select(.type == "wake" and .stream == $s)) | length >= 1' <<<"$body" >/dev/null
}

@test "a stream path that is not UTF-8 is refused at creation (400 bad_path); the runner and the pool stay up" {
    local before exits
    req PUT /v1/stream/pub-wake -H 'Content-Type: application/json' --data-binary '[]'
    assert_status 201
    req PUT /v1/stream/__ds/subscriptions/pubsub -H 'Content-Type: application/json' \
        --data-binary '{"type": "pull-wake", "pattern": "pub/*", "wake_stream": "pub-wake"}'
    assert_status 201
    before=$(pids)
    exits=$(pool_exits)
    for p in %ff %c0%af %ed%a0%80 %f4%90%80%80 a%e2%82 %fe%ff; do
        as "$SCOPED" PUT "/v1/stream/pub/$p" -H 'Content-Type: text/plain'
        assert_status 400
        assert_json_error bad_path
        body_is_json
    done
    # Valid UTF-8 is a path like any other, and its wake names it.
    as "$SCOPED" PUT "/v1/stream/pub/%c3%a9t%c3%a9" -H 'Content-Type: text/plain' --data-binary x
    assert_status 201
    ds_poll 10 _wake_for pub-wake "pub/été"
    req POST /v1/stream/__ds/subscriptions/pubsub/claim -H 'Content-Type: application/json' --data-binary '{"worker": "w"}'
    assert_status 200
    jq -e '.streams | map(.path) | index("pub/été") != null' <<<"$body"
    [ "$(pids)" = "$before" ]
    [ "$(pool_exits)" = "$exits" ]
    req DELETE /v1/stream/__ds/subscriptions/pubsub
    assert_status 204
}

@test "a database that already holds a stream path not UTF-8: the runner starts and stays up, the wake is claimed and acked" {
    ds_is_pg && skip "SQLite only: a PostgreSQL database (UTF8) cannot hold text that is not UTF-8, so no such path can be there"
    local now tok wake gen tail starts exits
    req PUT /v1/stream/old-wake -H 'Content-Type: application/json' --data-binary '[]'
    assert_status 201
    req PUT /v1/stream/__ds/subscriptions/oldsub -H 'Content-Type: application/json' \
        --data-binary '{"type": "pull-wake", "pattern": "old/*", "wake_stream": "old-wake"}'
    assert_status 201
    rn_runner_signal TERM
    # As a release before the rule made it: "old/\xff\xfe" with one 5-byte message.
    now=$(($(date +%s) * 1000))
    sqlite3 "$DS_DB" "PRAGMA busy_timeout = 5000;
        INSERT INTO streams (path, content_type, created_ms, access_ms, tail_seq, tail_pos)
        VALUES (CAST(X'6f6c642ffffe' AS TEXT), 'text/plain', $now, $now, 1, 5);"
    starts=$(rn_runner_starts)
    exits=$(pool_exits)
    rn_runner_start
    # The wake names the path with U+FFFD for each bad byte.
    ds_poll 10 _wake_for old-wake $'old/\uFFFD\uFFFD'
    iconv -f UTF-8 -t UTF-8 "$DS_BODY" >/dev/null
    req GET /v1/stream/__ds/subscriptions/oldsub
    assert_status 200
    iconv -f UTF-8 -t UTF-8 "$DS_BODY" >/dev/null
    jq -e '.streams | map(.path) | index("old/\ufffd\ufffd") != null' <<<"$body"
    # Done without acking it: the pool makes the next wake itself (it died there).
    req POST /v1/stream/__ds/subscriptions/oldsub/claim -H 'Content-Type: application/json' --data-binary '{"worker": "w0"}'
    assert_status 200
    iconv -f UTF-8 -t UTF-8 "$DS_BODY" >/dev/null
    req POST /v1/stream/__ds/subscriptions/oldsub/ack -H 'Content-Type: application/json' \
        -H "Authorization: Bearer $(jq -r .token <<<"$body")" \
        --data-binary "$(jq -c '{wake_id, generation, done: true}' <<<"$body")"
    assert_status 200
    assert_body_json '. == {"ok": true, "next_wake": true}'
    _two_wakes() { req GET "/v1/stream/old-wake?offset=-1" && jq -e 'map(select(.type == "wake")) | length >= 2' <<<"$body" >/dev/null; }
    ds_poll 10 _two_wakes
    req POST /v1/stream/__ds/subscriptions/oldsub/claim -H 'Content-Type: application/json' --data-binary '{"worker": "w1"}'
    assert_status 200
    iconv -f UTF-8 -t UTF-8 "$DS_BODY" >/dev/null
    tok=$(jq -r .token <<<"$body")
    wake=$(jq -r .wake_id <<<"$body")
    gen=$(jq -r .generation <<<"$body")
    tail=$(jq -r '.streams[] | select(.path == "old/\ufffd\ufffd") | .tail_offset' <<<"$body")
    [ -n "$tail" ]
    req POST /v1/stream/__ds/subscriptions/oldsub/ack -H 'Content-Type: application/json' -H "Authorization: Bearer $tok" \
        --data-binary "$(jq -nc --arg w "$wake" --argjson g "$gen" --arg o "$tail" \
            '{wake_id: $w, generation: $g, acks: [{stream: "old/\ufffd\ufffd", offset: $o}], done: true}')"
    assert_status 200
    assert_body_json '. == {"ok": true, "next_wake": false}'
    ds_poll 5 eval 'req GET /v1/stream/__ds/subscriptions/oldsub && jq -e --arg t "$tail" ".streams[] | select(.path == \"old/\ufffd\ufffd\") | .acked_offset == \$t" <<<"$body" >/dev/null'
    # The stream made before the rule can still be read and deleted.
    req HEAD "/v1/stream/old/%ff%fe"
    assert_status 200
    assert_header Stream-Next-Offset
    rn_runner_alive
    [ "$(rn_runner_starts)" = $((starts + 1)) ]
    [ "$(pool_exits)" = "$exits" ]      # no worker died on the claim or the ack
    req DELETE "/v1/stream/old/%ff%fe"
    assert_status 204
    req DELETE /v1/stream/__ds/subscriptions/oldsub
    assert_status 204
}

@test "a Producer-Id or Stream-Seq that is not UTF-8 is refused (400) and writes nothing; a path not UTF-8 is not found (404), on either engine" {
    req PUT /v1/stream/u8-hdr -H 'Content-Type: text/plain' --data-binary a
    assert_status 201
    for h in $'Producer-Id: \xff' $'Producer-Id: w\xed\xa0\x80'; do
        req POST /v1/stream/u8-hdr -H 'Content-Type: text/plain' -H "$h" -H 'Producer-Epoch: 0' \
            -H 'Producer-Seq: 0' --data-binary b
        assert_status 400
        assert_json_error
        body_is_json
    done
    req POST /v1/stream/u8-hdr -H 'Content-Type: text/plain' -H $'Stream-Seq: 1\xfe' --data-binary b
    assert_status 400
    assert_json_error
    body_is_json
    # Nothing was written: one message, no Stream-Seq, and a producer's seq 0 still starts it.
    req GET "/v1/stream/u8-hdr?offset=-1"
    assert_status 200
    [ "$body" = a ]
    req POST /v1/stream/u8-hdr -H 'Content-Type: text/plain' -H 'Stream-Seq: 1' -H $'Producer-Id: w\xc3\xa9' \
        -H 'Producer-Epoch: 0' -H 'Producer-Seq: 0' --data-binary b
    assert_status 200
    for m in GET HEAD DELETE; do
        req "$m" "/v1/stream/u8-hdr/%ff%fe"
        assert_status 404
    done
    req POST "/v1/stream/u8-hdr/%c0%af" -H 'Content-Type: text/plain' --data-binary x
    assert_status 404
    body_is_json
}

@test "error bodies that name a path or a header are valid JSON (U+FFFD for bytes that are not UTF-8)" {
    local nobody
    nobody=$("$DS_BIN/dstream" --db "$DS_DB" token create --name nobody --scope streams:read:elsewhere/ 2>/dev/null | tail -n 1)
    as "$nobody" GET /v1/stream/secret/%ff
    assert_status 403
    body_is_json
    for p in /v1/nothing/%ff /v1/sessions/%ff /v1/mcp/servers/%ff /v1/agents/%ff /v1/workflows/%c0%af \
             /v1/recordings/%ff /v1/stream/__ds/subscriptions/%ff /v1/stream/__ds/%ff /v1/sessions/x/%ff \
             /v1/stream/nope/%ff%fe; do
        req GET "$p"
        [[ "$status_code" =~ ^4 ]]
        body_is_json
    done
    req POST /v1/stream/nope/x -H 'Content-Type: text/plain' -H $'Producer-Id: \xff' -H 'Producer-Epoch: 0' \
        -H 'Producer-Seq: x' --data-binary x
    [[ "$status_code" =~ ^4 ]]
    body_is_json
    req GET "/v1/stream/nope/x?offset=%ff"
    assert_status 400
    body_is_json
}

@test "request paths of 2,048 to 8,000 bytes get 414 path_too_long" {
    for n in 1100 2100 4000 6000 8000; do
        req GET "/v1/stream/$(head -c "$n" /dev/zero | tr '\0' a)"
        assert_status 414
        body_is_json
        jq -e '.error.code == "path_too_long" or .error.code == "uri_too_long"' "$DS_BODY"
    done
    # Percent-escapes count decoded: 1,500 of them fit.
    req PUT "/v1/stream/$(printf '%%41%.0s' $(seq 1000))" -H 'Content-Type: text/plain'
    assert_status 201
}

# The routes, read from the router's source so that a new one is not forgotten: the
# paths fcgi/router.c names, each collection with an item ({x}), the session
# sub-resources (fcgi/sessions.c's table) and the subscription actions
# (fcgi/subscriptions.c's table); the headers and query parameters the resources
# read; every JSON field name lib/ and fcgi/ look up.
write_plan() {
    local src=$DS_ROOT/fcgi routes=() p
    for p in $(grep -oE '"/(v1|metrics)[^"{]*"' "$src/router.c" | tr -d '"' | sort -u); do
        case $p in
        */) routes+=("${p}{x}" "${p}{x}/{x}") ;;
        /v1/health | /metrics | /v1/metrics | /v1/mcp) routes+=("$p") ;;
        *) routes+=("$p" "$p/{x}") ;;
        esac
    done
    for p in $(grep -oE '\{"[a-z]+", "(GET|POST)"' "$src/sessions.c" | cut -d'"' -f2) \
             $(grep -oE 'strcmp\(sub, "[a-z]+"\)' "$src/sessions.c" | cut -d'"' -f2); do
        routes+=("/v1/sessions/{x}/$p")
    done
    p=$(sed -n 's/^#define SUBS_PREFIX "\(.*\)"$/\1/p' "$src/subscriptions.c")
    routes+=("/v1/stream/__ds/jwks.json" "/v1/stream/$p{x}" "/v1/stream/$p{x}/streams" "/v1/stream/$p{x}/streams/{x}")
    for a in $(grep -oE '\{"[a-z]+", (-1|SUB_[A-Z]+)\}' "$src/subscriptions.c" | cut -d'"' -f2); do
        routes+=("/v1/stream/$p{x}/$a")
    done
    jq -n --args '$ARGS.positional' "${routes[@]}" >"$BATS_FILE_TMPDIR/routes.json"
    grep -rhoE 'req_header\(r, "[A-Za-z-]+"\)' "$src" | cut -d'"' -f2 | sort -u | jq -R . | jq -s . >"$BATS_FILE_TMPDIR/headers.json"
    grep -rhoE 'req_query\(r, "[a-z_]+"' "$src" | cut -d'"' -f2 | sort -u | jq -R . | jq -s . >"$BATS_FILE_TMPDIR/queries.json"
    grep -rhoE 'json_object_get\([a-z_>.-]+, "[A-Za-z_]+"\)' "$src" "$DS_ROOT/lib" | cut -d'"' -f2 | sort -u |
        jq -R . | jq -s . >"$BATS_FILE_TMPDIR/fields.json"
    jq -n --slurpfile r "$BATS_FILE_TMPDIR/routes.json" --slurpfile h "$BATS_FILE_TMPDIR/headers.json" \
        --slurpfile q "$BATS_FILE_TMPDIR/queries.json" --slurpfile f "$BATS_FILE_TMPDIR/fields.json" \
        --arg admin "$(cat "$DS_DIR/admin.token")" --arg scoped "$SCOPED" \
        '{routes: $r[0], headers: $h[0], queries: $q[0], fields: $f[0], tokens: {admin: $admin, scoped: $scoped}}' \
        >"$BATS_FILE_TMPDIR/plan.json"
}

@test "fuzz: every route with hostile path segments, headers, query values and JSON; every body JSON, no process exits, the runner restarts" {
    local before exits starts report=$BATS_FILE_TMPDIR/report.json
    write_plan
    # The plan found what the router serves (a grep that broke would find nothing).
    jq -e '(.routes | length) >= 25 and (.routes | index("/v1/sessions/{x}/messages") != null)
        and (.routes | index("/v1/stream/__ds/subscriptions/{x}/ack") != null)
        and (.headers | length) >= 10 and (.queries | length) >= 5 and (.fields | length) >= 50' \
        "$BATS_FILE_TMPDIR/plan.json"
    # Something for the runner to wake on while the fuzz runs.
    req PUT /v1/stream/fz-wake -H 'Content-Type: application/json' --data-binary '[]'
    req PUT /v1/stream/__ds/subscriptions/fzsub -H 'Content-Type: application/json' \
        --data-binary '{"type": "pull-wake", "pattern": "fz*/*", "wake_stream": "fz-wake"}'
    assert_status 201
    before=$(pids)
    exits=$(pool_exits)
    starts=$(rn_runner_starts)
    run timeout 120 node "$DS_ROOT/tests/http/tools/hostile.mjs" "$(cat "$DS_DIR/url-direct")" \
        "$BATS_FILE_TMPDIR/plan.json" "$report"
    assert_success
    jq -c '{requests, statuses, nfailures}' "$report"
    # About 7,000 with the LangGraph routes and their fields (4,477 when it was written).
    jq -e '.requests >= 2000 and .requests <= 10000' "$report"
    jq -e '.nfailures == 0' "$report" || { jq '.failures[:20]' "$report" >&2; false; }
    # Nothing exited: the same processes, no worker restarted, no runner restarted.
    [ "$(pids)" = "$before" ]
    [ "$(pool_exits)" = "$exits" ]
    [ "$(rn_runner_starts)" = "$starts" ]
    req GET /v1/health
    assert_status 200
    # The runner starts again on what the fuzz left in the database, and stays.
    rn_runner_signal TERM
    rn_runner_start
    req PUT /v1/stream/after-wake -H 'Content-Type: application/json' --data-binary '[]'
    req PUT /v1/stream/__ds/subscriptions/aftersub -H 'Content-Type: application/json' \
        --data-binary '{"type": "pull-wake", "pattern": "after/*", "wake_stream": "after-wake"}'
    assert_status 201
    req PUT /v1/stream/after/x -H 'Content-Type: text/plain' --data-binary x
    assert_status 201
    ds_poll 10 _wake_for after-wake after/x
    rn_runner_alive
    [ "$(rn_runner_starts)" = $((starts + 1)) ]
}
