#!/usr/bin/env bats
# Budgets that ask (docs/agents.md, "Budgets"): an agent's or a session's budget
# (costBudgetUsd, maxTokens, maxRequests) with onExceed "ask" opens a human
# checkpoint when it is reached (input:requested, input "budget"), through the same
# answer route as a workflow's human step: a new limit goes on, a no or no answer by
# its expiry ends the session with session:budget_exceeded and session:cancelled; a
# runner killed -9 while it waits leaves it open. Through the real stack with the
# mock provider (its default reply: 10 in / 7 out tokens, $0.000135 at the test
# pricing of claude-test-model).

load runner-helpers

setup_file() { rn_start; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default"
}
teardown() { rn_test_teardown; }

# budget_agent LIMITS_JSON: an Anthropic agent with these limits; prints its name.
budget_agent() {
    local name
    name=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$name" \
        --argjson l "$1" '{name: $n, provider: "anthropic", model: "claude-test-model", limits: $l}')"
    [ "$status_code" = 201 ] || { echo "agent: $status_code $body" >&2; return 1; }
    echo "$name"
}

# answer ID INTERACTION RESPONSE_JSON: POST the answer (202 or fail).
answer() {
    req POST "/v1/sessions/$1/input" -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg i "$2" --argjson r "$3" '{interactionId: $i, response: $r}')"
    [ "$status_code" = 202 ] || { echo "answer: $status_code $body" >&2; return 1; }
}

# asked ID: the session waits on its first budget checkpoint.
asked() {
    rn_wait "$1" '.status == "awaiting_input" and .pendingInput.input == "budget"
        and .pendingInput.interactionId == "budget:1"'
}

@test "limits and answers are checked: onExceed, askTimeoutMs, a session's limits (400 bad_limits), a budget's answer (400 bad_response)" {
    local name agent id
    name=$(ds_name agent)
    req PUT "/v1/agents/$name" -H 'Content-Type: application/json' --data-binary \
        '{"provider": "anthropic", "model": "m", "limits": {"onExceed": "beg", "askTimeoutMs": 0, "maxRequests": 1.5}}'
    assert_status 400
    assert_json_error invalid_agent
    jq -e '.error.details | index("limits.onExceed: must be \"fail\" or \"ask\"") and
        index("limits.askTimeoutMs: must be an integer > 0") and index("limits.maxRequests: must be an integer > 0")' "$DS_BODY"
    agent=$(budget_agent '{"maxRequests": 1, "onExceed": "ask"}')
    req POST /v1/sessions -H 'Content-Type: application/json' \
        --data-binary "{\"agent\": \"$agent\", \"limits\": {\"maxTurns\": 3}}"
    assert_status 400
    assert_json_error bad_limits
    jq -e '.error.message == "limits.maxTurns: unknown key"' "$DS_BODY"
    req POST /v1/sessions -H 'Content-Type: application/json' \
        --data-binary "{\"agent\": \"$agent\", \"limits\": {\"costBudgetUsd\": -1}}"
    assert_status 400
    assert_json_error bad_limits
    req POST /v1/sessions -H 'Content-Type: application/json' --data-binary "{\"agent\": \"$agent\", \"limits\": 5}"
    assert_status 400
    assert_json_error bad_limits
    # The budget's question takes false, a number > 0 or an object of limits only.
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "One."
    rn_wait "$id" '.status == "completed"'
    rn_say "$id" "Two."
    asked "$id"
    for bad in true '"more"' 0 -3 '{"maxTurns": 4}' '{}' '{"maxTokens": "many"}'; do
        req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' \
            --data-binary "{\"interactionId\": \"budget:1\", \"response\": $bad}"
        assert_status 400
        assert_json_error bad_response
    done
    rn_get "$id"
    jq -e '.status == "awaiting_input"' "$DS_BODY"
}

@test "ask, then a higher limit: the cost budget's checkpoint opens, a new limit is given, the reply goes on and finishes" {
    local agent id ev
    agent=$(budget_agent '{"costBudgetUsd": 0.0001, "onExceed": "ask"}')
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "First question."
    rn_wait "$id" '.status == "completed" and .costUsd > 0.0001'
    rn_say "$id" "Second question."
    asked "$id"
    jq -e '.pendingInput.budget == {limit: "costBudgetUsd", max: 0.0001, spent: 0.000135}
        and (.pendingInput.prompt | test("cost budget: \\$0.0001 spent of \\$0.0001"))' "$DS_BODY"
    [ "$(rn_request_count)" = 1 ]
    answer "$id" budget:1 0.01
    rn_wait "$id" '.status == "completed" and (.messages | length) == 4'
    jq -e '.budget.limits == {costBudgetUsd: 0.01} and .budget.asks == 1 and .pendingInput == null' "$DS_BODY"
    ev=$(rn_events "$id")
    jq -e '[.[] | .type | select(startswith("input:") or . == "provider:request_started" or startswith("session:"))]
        == ["session:created", "provider:request_started", "input:requested", "input:received", "provider:request_started"]' <<<"$ev"
    [ "$(rn_request_count)" = 2 ]
}

@test "ask, then no: the session ends with session:budget_exceeded (rejected) and session:cancelled" {
    local agent id ev
    agent=$(budget_agent '{"maxTokens": 10, "onExceed": "ask"}')
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "First question."
    rn_wait "$id" '.status == "completed"'
    rn_say "$id" "Second question."
    asked "$id"
    jq -e '.pendingInput.budget == {limit: "maxTokens", max: 10, spent: 17}' "$DS_BODY"
    answer "$id" budget:1 false
    rn_wait "$id" '.status == "cancelled"'
    ev=$(rn_events "$id")
    jq -e '[.[] | select(.type == "session:budget_exceeded") | .payload]
        == [{interactionId: "budget:1", limit: "maxTokens", max: 10, spent: 17, reason: "rejected"}]' <<<"$ev"
    jq -e '[.[] | select(.type == "session:cancelled") | .payload.reason]
        == ["budget exceeded (limits.maxTokens): the answer was no"]' <<<"$ev"
    jq -e '.[-1].type == "session:cancelled" and .[-2].type == "session:budget_exceeded"' <<<"$ev"
    [ "$(rn_request_count)" = 1 ]
}

@test "ask, then no answer by its expiry: input:expired, session:budget_exceeded (timeout), session:cancelled" {
    local agent id ev
    # Long enough for the poll below to see the checkpoint open on a busy machine.
    agent=$(budget_agent '{"maxRequests": 1, "onExceed": "ask", "askTimeoutMs": 5000}')
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "First question."
    rn_wait "$id" '.status == "completed"'
    rn_say "$id" "Second question."
    asked "$id"
    jq -e '.pendingInput.expiresAt | type == "string"' "$DS_BODY"
    rn_wait "$id" '.status == "cancelled"' 20
    ev=$(rn_events "$id")
    jq -e '[.[] | .type] | .[-3:] == ["input:expired", "session:budget_exceeded", "session:cancelled"]' <<<"$ev"
    jq -e '[.[] | select(.type == "session:budget_exceeded") | .payload | [.reason, .limit, .max, .spent]]
        == [["timeout", "maxRequests", 1, 1]]' <<<"$ev"
    # An answer after the end is refused.
    req POST "/v1/sessions/$id/input" -H 'Content-Type: application/json' \
        --data-binary '{"interactionId": "budget:1", "response": 5}'
    assert_status 409
}

@test "a runner killed -9 while the budget's checkpoint is open: still open after its restart, then answered, the reply finishes" {
    local agent id
    agent=$(budget_agent '{"maxRequests": 1, "onExceed": "ask"}')
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "First question."
    rn_wait "$id" '.status == "completed"'
    rn_say "$id" "Second question."
    asked "$id"
    rn_runner_signal KILL
    rn_runner_start
    # Still asking: nothing was sent, nothing asked twice.
    asked "$id"
    rn_events "$id" | jq -e '[.[] | select(.type == "input:requested")] | length == 1'
    [ "$(rn_request_count)" = 1 ]
    answer "$id" budget:1 '{"maxRequests": 5}'
    rn_wait "$id" '.status == "completed" and (.messages | length) == 4' 30
    jq -e '.budget.limits == {maxRequests: 5} and .messages[3].content == "Hello from the mock provider."' "$DS_BODY"
    [ "$(rn_request_count)" = 2 ]
}

@test "a workflow session's own budget asks before its agent step; a new limit lets the workflow complete" {
    local agent wf id ev
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{name: $n, initialState: {a: null, b: null}, phases: [
        {name: "work", terminal: true, steps: [
            {kind: "agent", name: "First", agent: $a, prompt: "one", update: {a: "$output"}},
            {kind: "agent", name: "Second", agent: $a, prompt: "two", update: {b: "$output"}}]}]}')"
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w, limits: {maxRequests: 1, onExceed: "ask"}}')")
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.interactionId == "budget:1"'
    jq -e '.state.a == "Hello from the mock provider." and .state.b == null
        and .created.limits == {maxRequests: 1, onExceed: "ask"}' "$DS_BODY"
    answer "$id" budget:1 2
    rn_wait "$id" '.status == "completed"'
    jq -e '.state.b == "Hello from the mock provider."' "$DS_BODY"
    ev=$(rn_events "$id")
    jq -e '[.[] | select(.type == "input:requested") | .payload.budget] == [{limit: "maxRequests", max: 1, spent: 1}]' <<<"$ev"
}
