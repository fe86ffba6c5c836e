#!/usr/bin/env bats
# Provider failover (docs/agents.md, "Provider failover"): an agent's fallbacks serve
# its request when its own provider refuses for good (its retries spent) or is
# overloaded (at once). Through the real stack with the mock provider speaking both
# wire formats: an Anthropic primary that answers 500 or 529 to every request
# (PUT /__default/anthropic) and an OpenAI-compatible fallback that answers. The log
# says who served each attempt and why it failed over (provider:failover), so
# /metrics counts it, a runner killed during the fallback's request goes on there,
# and a recorded session plays back with the same failover; when every provider
# fails, the reply fails with its explicit event; a workflow's agent step fails over as
# a chat's reply does; bad fallbacks are 400.

load runner-helpers

# Two provider-error retries (each 100 ms or so) before a 500 fails over.
setup_file() { rn_start DSTREAM_PROVIDER_RETRIES=2; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default"
}
teardown() {
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default" || true
    rn_test_teardown
}

# refuse KIND REPLY: every request of the wire format KIND gets REPLY (a status).
refuse() {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' --data-binary "$2" "$RN_MOCK/__default/$1"
}

# fo_agent [FALLBACKS_JSON]: an Anthropic agent falling back to OpenAI's gpt-test-model
# (or to FALLBACKS_JSON); prints its name.
fo_agent() {
    local name fb=${1:-'[{"provider": "openai", "model": "gpt-test-model"}]'}
    name=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$name" \
        --argjson f "$fb" '{name: $n, provider: "anthropic", model: "claude-test-model", fallbacks: $f}')"
    [ "$status_code" = 201 ] || { echo "agent: $status_code $body" >&2; return 1; }
    echo "$name"
}

# failovers_counted LABELS: a scrape of /metrics ($T/metrics) counts at least one
# failover of the pair LABELS (from="...",to="...").
failovers_counted() {
    curl -fsS --max-time 10 "$DS_URL/metrics" >"$T/metrics" || return 1
    grep -qE "^dstream_runner_provider_failovers_total\{runner=\"[^\"]*\",$1\} [1-9]" "$T/metrics"
}

@test "fallbacks are checked when the agent is stored: shape, bound, duplicates, and only the operator's providers" {
    local name
    name=$(ds_name agent)
    put() {
        req PUT "/v1/agents/$name" -H 'Content-Type: application/json' --data-binary \
            "$(jq -nc --argjson f "$1" '{provider: "anthropic", model: "claude-test-model", fallbacks: $f}')"
    }
    put '[{"provider": "google", "model": "gemini"}]'
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.details | index("fallbacks[0].provider: no provider named \"google\" is configured")' "$DS_BODY"
    put '[{"provider": "openai", "model": "gpt-test-model"}, {"provider": "nope", "model": "x"}]'
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.details == ["fallbacks[1].provider: no provider named \"nope\" is configured"]' "$DS_BODY"
    put '[{"provider": "anthropic", "model": "claude-test-model"}]'
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.message == "fallbacks[0]: is the agent'"'"'s own provider and model"' "$DS_BODY"
    put '[{"provider": "openai", "model": "m"}, {"provider": "openai", "model": "m"}]'
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.details | index("fallbacks[1]: duplicate fallback (also [0])")' "$DS_BODY"
    put '[{"provider": "openai"}]'
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.details | index("fallbacks[0].model: missing")' "$DS_BODY"
    put '[{"provider": "openai", "model": "m", "endpoint": "http://127.0.0.1:1"}]'
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.details | index("fallbacks[0].endpoint: unknown key")' "$DS_BODY"
    put '{"provider": "openai", "model": "m"}'
    assert_status 400
    assert_json_error invalid_agent
    put "$(jq -nc '[range(5) | {provider: "openai", model: "m\(.)"}]')"
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.details | index("fallbacks: must be an array of at most 4")' "$DS_BODY"
    put '["openai"]'
    assert_status 400
    assert_json_error invalid_agent
    # A good one is stored and read back as it was given.
    put '[{"provider": "openai", "model": "gpt-test-model"}]'
    assert_status 201
    req GET "/v1/agents/$name"
    assert_status 200
    jq -e '.fallbacks == [{"provider": "openai", "model": "gpt-test-model"}]' "$DS_BODY"
}

@test "a primary that answers 500 for ever: its retries spent, the OpenAI fallback serves; the events name each pair, /metrics counts it" {
    local agent id ev
    refuse anthropic '{"status": 500}'
    agent=$(fo_agent)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "Are you there?"
    rn_wait "$id" '.status == "completed"'
    jq -e '.messages | map(.role) == ["user", "assistant"] and .[1].content == "Hello from the mock provider."' "$DS_BODY"
    ev=$(rn_events "$id")
    # Three attempts on the primary (1 + 2 retries), then the failover, then the fallback's.
    jq -e '[.[] | select(.type == "provider:request_started") | [.payload.provider, .payload.model, .payload.attempt]]
        == [["anthropic", "claude-test-model", 1], ["anthropic", "claude-test-model", 2],
            ["anthropic", "claude-test-model", 3], ["openai", "gpt-test-model", 4]]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:failover") | .payload] | length == 1 and
        (.[0] | .from == {provider: "anthropic", model: "claude-test-model"}
            and .to == {provider: "openai", model: "gpt-test-model"} and .fallback == 0
            and .cause == "server_error" and .status == 500 and .error == "HTTP 500")' <<<"$ev"
    # The attempt that failed over is closed by a retry of reason failover, in the same place.
    jq -e '[.[] | select(.type == "provider:request_retried") | .payload.reason] == ["failed", "failed", "failover"]' <<<"$ev"
    jq -e '[.[] | .type] | (index("provider:failover") - rindex("provider:request_retried")) == 1' <<<"$ev"
    # The mock got three Messages requests, then one Chat Completions request.
    rn_requests | jq -e '[.[] | .path] == ["/v1/messages", "/v1/messages", "/v1/messages", "/v1/chat/completions"]'
    rn_requests | jq -e '.[3].body.model == "gpt-test-model"'
    # dstream requests: each attempt with the pair that served it, the failed-over one marked.
    rn_cli_env
    "$DS_BIN/dstream" requests "$id" --json | jq -se 'map([.provider, .model, .outcome])
        == [["anthropic", "claude-test-model", "retried"], ["anthropic", "claude-test-model", "retried"],
            ["anthropic", "claude-test-model", "failover"], ["openai", "gpt-test-model", "ended"]]'
    # The next message starts with the primary again (now answering).
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default/anthropic"
    rn_say "$id" "And now?"
    rn_wait "$id" '.status == "completed" and (.messages | length) == 4'
    rn_events "$id" | jq -e '[.[] | select(.type == "provider:request_started")] | last | .payload.provider == "anthropic"'
    # GET /metrics counts the failover by pair.
    ds_poll 10 failovers_counted 'from="anthropic/claude-test-model",to="openai/gpt-test-model"' ||
        { grep failover "$T/metrics" >&2; false; }
}

@test "an overloaded primary (529) fails over at once, spending no retry; so does an overloaded_error in the stream" {
    local agent id ev
    refuse anthropic '{"status": 529}'
    agent=$(fo_agent)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "Busy?"
    rn_wait "$id" '.status == "completed"'
    ev=$(rn_events "$id")
    jq -e '[.[] | select(.type == "provider:request_started") | .payload.provider] == ["anthropic", "openai"]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:request_retried") | .payload.reason] == ["failover"]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:failover") | .payload | [.cause, .status]] == [["overloaded", 529]]' <<<"$ev"
    # In the stream: an overloaded_error after one delta.
    refuse anthropic '{"text": "partial answer", "errorAfter": 1}'
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "Busy in the stream?"
    rn_wait "$id" '.status == "completed"'
    jq -e '.messages[1].content == "Hello from the mock provider."' "$DS_BODY"
    rn_events "$id" | jq -e '[.[] | select(.type == "provider:failover") | .payload | [.cause, .status]] == [["overloaded", 0]]'
}

@test "every provider fails: the reply fails as without fallbacks, its error saying the last fallback failed too" {
    local agent id ev
    refuse anthropic '{"status": 529}'
    refuse openai '{"status": 503}'
    agent=$(fo_agent '[{"provider": "openai", "model": "gpt-test-model"}, {"provider": "openai", "model": "gpt-other"}]')
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "Anyone?"
    rn_wait "$id" '.status == "failed"'
    jq -e '.error | test("HTTP 503 \\(server_error\\); gave up after .* on openai/gpt-other, the agent.s last fallback: every provider failed")' "$DS_BODY"
    ev=$(rn_events "$id")
    jq -e '[.[] | select(.type == "provider:failover") | .payload | [.from.model, .to.model, .cause]]
        == [["claude-test-model", "gpt-test-model", "overloaded"], ["gpt-test-model", "gpt-other", "server_error"]]' <<<"$ev"
    jq -e '[.[] | select(.type == "reply:failed")] | length == 1 and (.[0].payload.reason == "retries")' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:request_cancelled") | .payload.reason] == ["failed"]' <<<"$ev"
    # 1 on the primary, 3 on each fallback (1 + 2 retries).
    jq -e '[.[] | select(.type == "provider:request_started") | .payload.model]
        == ["claude-test-model", "gpt-test-model", "gpt-test-model", "gpt-test-model", "gpt-other", "gpt-other", "gpt-other"]' <<<"$ev"
}

@test "a runner killed -9 while the fallback streams goes on with the fallback after its restart" {
    local agent id ev
    refuse anthropic '{"status": 529}'
    # The fallback's reply waits after 4 deltas until released: it still streams when
    # the kill comes, however long the poll below takes. The kill ends that hold; the
    # retry after the restart gets the same reply, released once the runner is back.
    refuse openai '{"text": "slow fallback answer in many small pieces", "chunkSize": 2, "delayMs": 150, "holdAfter": 4}'
    agent=$(fo_agent)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "Slowly?"
    ds_poll 20 rn_has_event "$id" '.type == "text:delta"'
    rn_runner_signal KILL
    rn_runner_start
    curl -fsS -o /dev/null -X POST "$RN_MOCK/__release"
    rn_wait "$id" '.status == "completed"' 60
    jq -e '.messages | map(.role) == ["user", "assistant"] and .[1].content == "slow fallback answer in many small pieces"' "$DS_BODY"
    ev=$(rn_events "$id")
    # The cut attempt was the fallback's, and so was its retry after the restart.
    jq -e '[.[] | select(.type == "provider:request_cancelled") | .payload.reason] == ["restart"]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:request_started") | .payload.provider] == ["anthropic", "openai", "openai"]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:failover")] | length == 1' <<<"$ev"
    rn_requests | jq -e '[.[] | .path] | .[0] == "/v1/messages" and (.[1:] | all(. == "/v1/chat/completions"))'
}

@test "a recorded failover plays back for the pair that served it: the primary's 529 first, then the fallback's reply, the provider never asked" {
    local agent rec play ev
    refuse anthropic '{"status": 529}'
    refuse openai '{"text": "recorded by the fallback"}'
    agent=$(fo_agent)
    rec=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"record\"}")
    rn_say "$rec" "Record me"
    rn_wait "$rec" '.status == "completed"'
    # The provider now answers differently: playback must not ask it.
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default"
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    play=$(rn_session "{\"agent\": \"$agent\", \"mode\": \"playback\"}")
    rn_say "$play" "Record me"
    rn_wait "$play" '.status == "completed"'
    jq -e '.messages[1].content == "recorded by the fallback"' "$DS_BODY"
    ev=$(rn_events "$play")
    jq -e '[.[] | select(.type == "recording:request") | .payload.outcome] == ["hit", "hit"]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:request_started") | [.payload.provider, .payload.model]]
        == [["anthropic", "claude-test-model"], ["openai", "gpt-test-model"]]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:failover") | .payload | [.from.provider, .to.provider, .cause]]
        == [["anthropic", "openai", "overloaded"]]' <<<"$ev"
    [ "$(rn_request_count)" = 0 ]
    # Each recording is filed under the pair that served it.
    req GET "/v1/recordings?session=$rec"
    assert_status 200
    jq -e '[.recordings[] | [.provider, .model]] | sort == [["anthropic", "claude-test-model"], ["openai", "gpt-test-model"]]' "$DS_BODY"
}

@test "a workflow's agent step fails over too: the step's output is the fallback's, the next step starts with the primary again" {
    local agent wf id ev
    refuse anthropic '{"status": 529}'
    refuse openai '{"text": "from the fallback"}'
    agent=$(fo_agent)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{name: $n, initialState: {a: null, b: null}, phases: [
        {name: "work", terminal: true, steps: [
            {kind: "agent", name: "First", agent: $a, prompt: "one", update: {a: "$output"}},
            {kind: "agent", name: "Second", agent: $a, prompt: "two", update: {b: "$output"}}]}]}')"
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w}')")
    rn_wait "$id" '.status == "completed"'
    jq -e '.state == {a: "from the fallback", b: "from the fallback"}' "$DS_BODY"
    ev=$(rn_events "$id")
    # Each step's request starts on the primary and fails over on its own.
    jq -e '[.[] | select(.type == "provider:request_started") | .payload.provider]
        == ["anthropic", "openai", "anthropic", "openai"]' <<<"$ev"
    jq -e '[.[] | select(.type == "provider:failover")] | length == 2' <<<"$ev"
}
