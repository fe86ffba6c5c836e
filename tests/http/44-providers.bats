#!/usr/bin/env bats
# Providers belong to the operator (docs/agents.md, "Providers"). An agent names a
# provider of the operator's DSTREAM_PROVIDERS file; the operator's key goes only to
# that provider's base URL; an agent's endpoint is refused unless the operator allows
# it, and never carries a key; loopback, link-local and private addresses are refused
# however they are written or resolved; redirects are not followed.
#
# A trap listens on a free loopback port: a second mock provider that records every
# request it gets, headers included. Every way an API client could steer the runner
# there is tried, and the planted keys must never arrive, while the configured
# provider still gets its own.

load runner-helpers

# ext: a public base URL, any endpoint host, nothing private. lab: endpoints on
# 127.0.0.1 only, which its allowPrivate names (so the trap is reachable, keyless).
# Both would send the planted key EXT_API_KEY to their own base URL.
setup_file() {
    command -v node >/dev/null || { echo "node is not installed (make deps)" >&2; return 1; }
    TRAP_DIR=$(mktemp -d -t dstream-trap.XXXXXX)
    rn_mock_spawn "$TRAP_DIR/trap" || return 1
    TRAP_PID=$RN_SPAWNED_PID
    TRAP=$RN_SPAWNED_URL
    TRAP_PORT=${TRAP##*:}
    EXT_KEY=sk-planted-$(_rn_hex 16)
    export TRAP_DIR TRAP_PID TRAP TRAP_PORT EXT_KEY
    # gw-*: keyless servers on the trap under path prefixes, each base URL in one of
    # the forms docs/agents.md names (ending in a version, in the whole endpoint, in
    # neither).
    RN_EXTRA_PROVIDERS=$(jq -nc --arg p "$TRAP_PORT" --arg t "$TRAP" '{
        ext: {kind: "openai", baseUrl: "https://llm.example.com", keyEnv: "EXT_API_KEY", allowEndpoints: true},
        lab: {kind: "anthropic", baseUrl: "$RN_MOCK_URL", keyEnv: "EXT_API_KEY",
              allowEndpoints: ["127.0.0.1"], allowPrivate: ["127.0.0.1"]},
        "gw-openai": {kind: "openai", baseUrl: ($t + "/team/openai/v1/"), allowPrivate: ["127.0.0.1"]},
        "gw-anthropic": {kind: "anthropic", baseUrl: ($t + "/anthropic/v1"), allowPrivate: ["127.0.0.1"]},
        "gw-beta": {kind: "openai", baseUrl: ($t + "/v1beta/openai/chat/completions"), allowPrivate: ["127.0.0.1"]},
        "gw-bare": {kind: "openai", baseUrl: $t, allowPrivate: ["127.0.0.1"]}}')
    export RN_EXTRA_PROVIDERS
    rn_start EXT_API_KEY="$EXT_KEY"
}

teardown_file() {
    rn_stop
    rn_mock_kill "${TRAP_PID:-}"
    [ -n "${TRAP_DIR:-}" ] && rm -rf "$TRAP_DIR"
    return 0
}

setup() {
    rn_test_setup
    curl -fsS -o /dev/null -X DELETE "$TRAP/__requests"
}

teardown() { rn_test_teardown; }

trap_requests() { curl -fsS "$TRAP/__requests"; }

# no_key_in FILE...: none of the planted keys is in any of the files.
no_key_in() {
    local k
    for k in "$RN_KEY" "$RN_OKEY" "$EXT_KEY"; do
        if grep -lF -- "$k" "$@" >&2; then fail "a planted key is in the file(s) above"; fi
    done
}

# put_agent NAME JSON_FIELDS: PUT /v1/agents/NAME with {"model": "m"} + JSON_FIELDS.
put_agent() {
    req PUT "/v1/agents/$1" -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --argjson f "$2" '{model: "claude-test-model"} + $f')"
}

# chat AGENT: a session with AGENT and one message; prints the session id.
chat() {
    local id
    id=$(rn_session "{\"agent\": \"$1\"}") || return 1
    rn_say "$id" "Where does this go?" || return 1
    echo "$id"
}

@test "an agent names a configured provider: another name is 400, named in error.details" {
    put_agent p-unknown '{"provider": "nope"}'
    assert_status 400
    assert_json_error invalid_agent
    assert_body_json '.error.details | index("provider: no provider named \"nope\" is configured") != null'
    put_agent p-known '{"provider": "ext"}'
    assert_status 201
    # The built-in names stay, so that the README's examples work on any server.
    put_agent p-builtin '{"provider": "anthropic"}'
    assert_status 201
}

@test "every refused endpoint form is 400 with the endpoint named, and nothing is stored" {
    local forms=(
        "http://127.0.0.1:$TRAP_PORT" "http://127.1:$TRAP_PORT" "http://2130706433:$TRAP_PORT"
        "http://0x7f000001:$TRAP_PORT" "http://017700000001:$TRAP_PORT" "http://0x7f.0.0.1:$TRAP_PORT"
        "http://[::1]:$TRAP_PORT" "http://[::ffff:127.0.0.1]:$TRAP_PORT" "http://localhost:$TRAP_PORT"
        "http://169.254.169.254/latest/meta-data" "http://[fe80::1]/" "http://10.0.0.1/" "http://192.168.1.1/"
        "http://0.0.0.0:$TRAP_PORT" "http://user:pass@example.com/" "http://example.com@127.0.0.1:$TRAP_PORT/"
        "ftp://example.com/" "http://example.com/?to=127.0.0.1" "file:///etc/passwd"
    ) problems=() f
    for f in "${forms[@]}"; do
        put_agent p-refused "$(jq -nc --arg e "$f" '{provider: "ext", endpoint: $e}')"
        if [ "$status_code" != 400 ] || ! jq -e '.error.code == "invalid_agent" and
                ([.error.details[] | select(startswith("endpoint: "))] | length == 1)' "$DS_BODY" >/dev/null; then
            problems+=("$f: $status_code $(head -c 300 "$DS_BODY")")
        fi
    done
    # Where the operator allows no endpoint at all (the built-ins), any is refused.
    put_agent p-refused "$(jq -nc --arg e "https://api.anthropic.com" '{provider: "anthropic", endpoint: $e}')"
    [ "$status_code" = 400 ] || problems+=("anthropic with an endpoint: $status_code")
    assert_body_json '.error.details | index("endpoint: provider anthropic does not let agents choose an endpoint (the operator'"'"'s allowEndpoints)") != null'
    [ ${#problems[@]} -eq 0 ] || fail "$(printf '%s\n' "${problems[@]}")"
    req GET /v1/agents/p-refused
    assert_status 404
}

@test "the configured provider gets the operator's key at its own base URL" {
    local a id
    a=$(rn_agent anthropic claude-test-model)
    id=$(chat "$a")
    rn_wait "$id" '.status == "completed"'
    rn_requests >"$BATS_TEST_TMPDIR/mock.json"
    jq -e --arg k "$RN_KEY" 'length == 1 and .[0].headers["x-api-key"] == $k' "$BATS_TEST_TMPDIR/mock.json" >/dev/null ||
        fail "the provider did not get its key: $(jq -c '[.[] | .headers | keys]' "$BATS_TEST_TMPDIR/mock.json")"
    [ "$(trap_requests | jq length)" = 0 ]
}

@test "an endpoint the operator allows gets the request, and no operator key with it" {
    local id
    put_agent p-lab "$(jq -nc --arg e "$TRAP" '{provider: "lab", endpoint: $e}')"
    assert_status 201
    id=$(chat p-lab)
    rn_wait "$id" '.status == "completed"'
    trap_requests >"$BATS_TEST_TMPDIR/trap.json"
    jq -e 'length == 1 and .[0].path == "/v1/messages" and
           (.[0].headers | has("x-api-key") or has("authorization") | not)' "$BATS_TEST_TMPDIR/trap.json" >/dev/null ||
        fail "$(jq -c '[.[] | {path, headers}]' "$BATS_TEST_TMPDIR/trap.json")"
    no_key_in "$BATS_TEST_TMPDIR/trap.json"
    [ "$(rn_request_count)" = 0 ]     # and nothing went to lab's own base URL
}

@test "a base URL under a path prefix: ending in /v1 (the SDKs' habit), in the endpoint, or bare; no key needs no keyEnv" {
    local p id got=()
    for p in gw-openai gw-anthropic gw-beta gw-bare; do
        curl -fsS -o /dev/null -X DELETE "$TRAP/__requests"
        put_agent "a-$p" "$(jq -nc --arg p "$p" '{provider: $p}')"
        assert_status 201
        id=$(chat "a-$p")
        rn_wait "$id" '.status == "completed"'
        trap_requests >"$BATS_TEST_TMPDIR/trap.json"
        # A provider without key or keyEnv sends no key header at all.
        jq -e 'length == 1 and (.[0].headers | has("x-api-key") or has("authorization") | not)' \
            "$BATS_TEST_TMPDIR/trap.json" >/dev/null || fail "$p: $(jq -c '[.[] | {path, headers}]' "$BATS_TEST_TMPDIR/trap.json")"
        got+=("$p $(jq -r '.[0].path' "$BATS_TEST_TMPDIR/trap.json")")
    done
    assert_equal "$(printf '%s\n' "${got[@]}")" "gw-openai /team/openai/v1/chat/completions
gw-anthropic /anthropic/v1/messages
gw-beta /v1beta/openai/chat/completions
gw-bare /v1/chat/completions"
    # dstream providers says where each provider's requests go.
    run --separate-stderr "$DS_BIN/dstream" providers "$RN_PROVIDERS"
    assert_success
    assert_line "  requests go to $TRAP/team/openai/v1/chat/completions"
    assert_line "  requests go to $TRAP/v1beta/openai/chat/completions"
    run --separate-stderr "$DS_BIN/dstream" providers "$RN_PROVIDERS" --json
    jq -e --arg u "$TRAP/anthropic/v1/messages" 'any(.providers[]; .name == "gw-anthropic" and .requestUrl == $u)' \
        <<<"$output" >/dev/null || fail "$output"
}

@test "a host name that resolves to loopback is refused when the runner connects (no retry)" {
    local name addr id
    name=$(hostname)
    addr=$(getent ahosts "$name" | awk 'NR == 1 { print $1 }')
    case $addr in
    127.* | ::1) ;;
    *) skip "the host name $name does not resolve to a loopback address here ($addr)" ;;
    esac
    # A name, so the pool cannot judge it; the runner checks the address it resolved.
    put_agent p-named "$(jq -nc --arg e "http://$name:$TRAP_PORT" '{provider: "ext", endpoint: $e}')"
    assert_status 201
    id=$(chat p-named)
    rn_wait "$id" '.status == "failed"'
    assert_body_json '.error | test("loopback address")'
    rn_events "$id" >"$BATS_TEST_TMPDIR/ev.json"
    jq -e '[.[] | select(.type == "reply:failed")] | length == 1 and .[0].payload.reason == "refused"' \
        "$BATS_TEST_TMPDIR/ev.json" >/dev/null || fail "$(jq -c '[.[] | {type, payload}]' "$BATS_TEST_TMPDIR/ev.json")"
    jq -e '[.[] | select(.type == "provider:request_retried")] | length == 0' "$BATS_TEST_TMPDIR/ev.json" >/dev/null
    [ "$(trap_requests | jq length)" = 0 ]
}

@test "a redirect from the configured provider is not followed: its key stays there" {
    local a id
    rn_script "$(jq -nc --arg l "$TRAP/v1/messages" '{status: 302, location: $l}')"
    a=$(rn_agent anthropic claude-test-model)
    id=$(chat "$a")
    rn_wait "$id" '.status == "failed"'
    [ "$(rn_request_count)" = 1 ]    # one request, not retried
    [ "$(trap_requests | jq length)" = 0 ]
}

@test "agents stored behind the pool's back are refused by the runner before anything is sent" {
    local id now
    now=$(date +%s000)
    # As if stored before the operator changed the file: an endpoint on a provider
    # that allows none, and a provider that no longer exists.
    local insert="INSERT OR REPLACE INTO agents" upsert=""
    ds_is_pg && insert="INSERT INTO agents" upsert=" ON CONFLICT (name) DO UPDATE SET doc = EXCLUDED.doc"
    ds_sql "$insert (name, doc, created_ms, updated_ms) VALUES
        ('p-sneaky', '{\"name\":\"p-sneaky\",\"provider\":\"anthropic\",\"model\":\"m\",\"endpoint\":\"$TRAP\"}', $now, $now),
        ('p-ghost', '{\"name\":\"p-ghost\",\"provider\":\"ghost\",\"model\":\"m\"}', $now, $now)$upsert"
    id=$(chat p-sneaky)
    rn_wait "$id" '.status == "failed"'
    assert_body_json '.error | test("does not let agents choose an endpoint")'
    id=$(chat p-ghost)
    rn_wait "$id" '.status == "failed"'
    assert_body_json '.error | test("no provider named \"ghost\" is configured")'
    [ "$(trap_requests | jq length)" = 0 ]
    [ "$(rn_request_count)" = 0 ]
}

@test "a session cannot carry an endpoint of its own" {
    local a
    a=$(rn_agent anthropic claude-test-model)
    req POST /v1/sessions -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg a "$a" --arg e "$TRAP" '{agent: $a, endpoint: $e, provider: "ext"}')"
    if [ "$status_code" = 201 ]; then
        id=$(jq -r .id "$DS_BODY")
        rn_say "$id" "hello"
        rn_wait "$id" '.status == "completed"'
    else
        assert_status_4xx
    fi
    [ "$(trap_requests | jq length)" = 0 ]
}

@test "the planted keys are in no response, event, log or error: only in the configured provider's headers" {
    local a id
    a=$(rn_agent openai gpt-test-model)
    id=$(chat "$a")
    rn_wait "$id" '.status == "completed"'
    rn_requests | jq -e --arg k "$RN_OKEY" 'any(.[]; .headers.authorization == "Bearer " + $k)' >/dev/null ||
        fail "the openai provider did not get its key"
    trap_requests >"$BATS_TEST_TMPDIR/trap.json"
    cp "$TRAP_DIR/trap.log" "$BATS_TEST_TMPDIR/trap.log" 2>/dev/null || : >"$BATS_TEST_TMPDIR/trap.log"
    req GET /v1/agents
    cp "$DS_BODY" "$BATS_TEST_TMPDIR/agents.json"
    rn_events "$id" >"$BATS_TEST_TMPDIR/events.json"
    put_agent p-err '{"provider": "ext", "endpoint": "http://127.0.0.1:1"}'
    cp "$DS_BODY" "$BATS_TEST_TMPDIR/error.json"
    no_key_in "$BATS_TEST_TMPDIR/trap.json" "$BATS_TEST_TMPDIR/trap.log" "$BATS_TEST_TMPDIR/agents.json" \
        "$BATS_TEST_TMPDIR/events.json" "$BATS_TEST_TMPDIR/error.json" "$DS_DIR"/logs/*.log "$DS_DB"*
}

@test "dstream providers checks the file as the servers read it, shows what it allows, never a key" {
    run --separate-stderr env EXT_API_KEY="$EXT_KEY" "$DS_BIN/dstream" providers "$RN_PROVIDERS"
    assert_success
    assert_line "$RN_PROVIDERS: 8 providers"
    assert_line --partial "lab: anthropic at $RN_MOCK, key from env EXT_API_KEY, agent endpoints (no key sent) on 127.0.0.1, may reach 127.0.0.1/32"
    assert_line --partial "ext: openai at https://llm.example.com, key from env EXT_API_KEY, agent endpoints (no key sent) on *"
    [[ $output != *"$EXT_KEY"* ]] || fail "a key was printed"
    # A key in a file others may read, a loopback base URL nobody allowed: refused,
    # each mistake named, the key not quoted.
    printf '{"providers": {"x": {"kind": "openai", "key": "%s", "baseUrl": "http://127.0.0.1:1"}}}' "$EXT_KEY" \
        >"$BATS_TEST_TMPDIR/bad.json"
    chmod 0644 "$BATS_TEST_TMPDIR/bad.json"
    run --separate-stderr "$DS_BIN/dstream" providers "$BATS_TEST_TMPDIR/bad.json"
    assert_failure 1
    [[ $stderr == *"providers.x.key: a key may be written in the file only when"* ]] || fail "$stderr"
    [[ $stderr == *"providers.x.baseUrl: 127.0.0.1 is a loopback address"* ]] || fail "$stderr"
    [[ $stderr$output != *"$EXT_KEY"* ]] || fail "a key was printed"
    chmod 0664 "$BATS_TEST_TMPDIR/bad.json"
    run --separate-stderr "$DS_BIN/dstream" providers "$BATS_TEST_TMPDIR/bad.json"
    assert_failure 1
    [[ $stderr == *"is writable by group or others"* ]] || fail "$stderr"
}
