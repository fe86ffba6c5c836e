#!/usr/bin/env bats
# Context compaction (docs/agents.md, "Context compaction"; docs/events.md): a chat
# over its agent's contextTokens is compacted before its next request is sent (the
# summarization request is a provider request in the log, its summary in
# session:compacted, and the next request carries the summary and not the turns it
# summarized); a provider's context-overflow error (Anthropic's "prompt is too
# long", OpenAI's context_length_exceeded) compacts and retries once, a second one
# fails the reply; POST /v1/sessions/{id}/compact and `dstream sessions compact`;
# the state before a compaction and a fork from before it keep the whole history;
# a runner killed during the summarization request compacts once, after its restart.
# Each over both wire formats where the format matters. One stack and one mock.

load runner-helpers

# A provider of the operator's with a context window for its model "gpt-small".
setup_file() {
    export RN_EXTRA_PROVIDERS='{"small": {"kind": "openai", "baseUrl": "$RN_MOCK_URL", "keyEnv": "OPENAI_API_KEY",
        "allowPrivate": ["127.0.0.1"], "models": {"gpt-small": {"contextTokens": 400}}}}'
    rn_start
}
teardown_file() { rn_stop; }
setup() { rn_crash_setup; }
teardown() { rn_crash_teardown; }

A300=$(printf 'A%.0s' $(seq 300))
B300=$(printf 'B%.0s' $(seq 300))
C300=$(printf 'C%.0s' $(seq 300))

# agent PROVIDER [LIMITS_JSON]: a new agent of the mock's model for PROVIDER; its name.
agent() {
    local name model=claude-test-model
    [ "$1" = openai ] && model=gpt-test-model
    name=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary \
        "$(jq -nc --arg n "$name" --arg p "$1" --arg m "$model" --argjson l "${2:-null}" \
            '{name: $n, provider: $p, model: $m} + (if $l then {limits: $l} else {} end)')"
    [ "$status_code" = 201 ] || { echo "agent: $status_code $body" >&2; return 1; }
    echo "$name"
}

# exchange ID TEXT REPLY: the mock answers REPLY to the user message TEXT; wait for it.
exchange() {
    rn_script "$(jq -nc --arg t "$3" '{text: $t}')"
    rn_say "$1" "$2"
    rn_wait "$1" ".status == \"completed\" and .messages[-1].content == \"$3\""
}

# two_exchanges PROVIDER [LIMITS]: a chat with two answered messages (A..., B...); its id.
two_exchanges() {
    local id
    id=$(rn_session "{\"agent\": \"$(agent "$@")\"}") || return 1
    exchange "$id" "$A300" "first reply" >&2 || return 1
    exchange "$id" "$B300" "second reply" >&2 || return 1
    echo "$id"
}

# last_body: the body of the mock's last request, as compact JSON text.
last_body() { rn_requests | jq -c '.[-1].body'; }

@test "a chat over its contextTokens is compacted before the request: session:compacted, and the next request holds the summary and not the old turns (both wire formats)" {
    local p id ev req
    for p in anthropic openai; do
        curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
        id=$(two_exchanges "$p" '{"contextTokens": 200}')
        # The third message: about 250 tokens estimated (bytes / 4): over 200.
        rn_script '{"replies": [{"text": "SUMMARY-OF-A-AND-B", "usage": {"input": 40, "output": 5}}, {"text": "third reply"}]}'
        rn_say "$id" "$C300"
        rn_wait "$id" '.status == "completed" and .messages[-1].content == "third reply"'
        rn_events "$id" >"$T/ev.json"
        # One compaction, its reason, where the kept part starts (the third message),
        # its summary and the estimates.
        jq -e '[.[] | select(.type == "session:compacted")] | length == 1' "$T/ev.json"
        ev=$(jq -c '[.[] | select(.type == "session:compacted")][0].payload' "$T/ev.json")
        jq -e --arg up "$(jq -r '[.[] | select(.type == "message:user")][2].offset' "$T/ev.json")" \
            '.reason == "budget" and .upTo == $up and .summary == "SUMMARY-OF-A-AND-B"
             and .tokensBefore > 200 and .tokensAfter < .tokensBefore and (.requestId | length > 0)' <<<"$ev"
        # The summarization request is a provider request of the log, purpose compaction.
        jq -e '[.[] | select(.type == "provider:request_started" and .payload.purpose == "compaction"
             and .payload.reason == "budget")] | length == 1' "$T/ev.json"
        jq -e '[.[] | select(.type == "text:delta") | .payload.text] | all(contains("SUMMARY") | not)' "$T/ev.json"
        # What the mock was sent: the summarization request had the old turns...
        rn_requests >"$T/req.json"
        jq -e 'length == 4' "$T/req.json"
        req=$(jq -c '.[2].body' "$T/req.json")
        [[ $req == *"$A300"* && $req == *"$B300"* && $req == *"first reply"* && $req != *"$C300"* && $req == *Summarize* ]]
        # ... and the request after it the summary, the third message, none of the old turns.
        req=$(jq -c '.[3].body' "$T/req.json")
        [[ $req == *SUMMARY-OF-A-AND-B* && $req == *"$C300"* && $req != *"$A300"* && $req != *"$B300"* && $req != *"first reply"* ]]
        # The state: every message is still there, the summarized ones marked.
        rn_get "$id"
        jq -e '[.messages[] | .compacted == true] == [true, true, true, true, false, false]
            and .compacted.summary == "SUMMARY-OF-A-AND-B" and .usage.inputTokens >= 40' "$DS_BODY"
        # The next message goes on from the summary (no compaction again: it fits).
        exchange "$id" "a short one" "fourth reply"
        req=$(last_body)
        [[ $req == *SUMMARY-OF-A-AND-B* && $req != *"$A300"* ]]
        rn_events "$id" | jq -e '[.[] | select(.type == "session:compacted")] | length == 1'
    done
    # Past a snapshot (every 64 events) with the compaction in it: dstream check
    # replays the log and finds each snapshot equal to its replay.
    # (The mock's default reply answers them, and the summaries of the compactions
    # they bring.)
    local n
    for i in $(seq 1 12); do
        [ "$(rn_events "$id" | jq length)" -gt 70 ] && break
        rn_get "$id"
        n=$(jq '.messages | length' "$DS_BODY")
        rn_say "$id" "more $i"
        rn_wait "$id" ".status == \"completed\" and .request == null and (.messages | length) == $((n + 2))"
    done
    [ "$(rn_events "$id" | jq length)" -gt 64 ]
    run "$DS_BIN/dstream" --db "$DS_DB" check
    [ "$status" -eq 0 ] || { echo "$output" >&2; false; }
}

@test "a provider's context-overflow error compacts and retries once: the reply succeeds (both wire formats)" {
    local p id req
    for p in anthropic openai; do
        curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
        id=$(two_exchanges "$p")
        rn_script '{"replies": [{"overflow": true}, {"text": "SUMMARY-OVER"}, {"text": "third reply"}]}'
        rn_say "$id" "$C300"
        rn_wait "$id" '.status == "completed" and .messages[-1].content == "third reply"'
        rn_events "$id" >"$T/ev.json"
        # The window the error names (the mock's: 200000, 8192) bounds what is kept:
        # here all but the first exchange.
        jq -e '[.[] | select(.type == "provider:request_retried")] | length == 1 and
            (.[0].payload | .cause == "context_overflow" and .status == 400 and (.contextTokens == 200000 or .contextTokens == 8192))' "$T/ev.json"
        jq -e '[.[] | select(.type == "session:compacted")] | length == 1 and
            (.[0].payload | .reason == "overflow" and .summary == "SUMMARY-OVER")' "$T/ev.json"
        jq -e '[.[] | select(.type == "reply:failed")] | length == 0' "$T/ev.json"
        req=$(last_body)
        [[ $req == *SUMMARY-OVER* && $req == *"$C300"* && $req == *"$B300"* && $req != *"$A300"* ]]
        rn_get "$id"
        jq -e '.error == null and ([.messages[] | .compacted == true] == [true, true, false, false, false, false])' "$DS_BODY"
    done
}

@test "overflow twice fails the reply with reason context_overflow; an overflow with nothing to compact fails at once (both wire formats)" {
    local p id n
    for p in anthropic openai; do
        id=$(two_exchanges "$p")
        rn_script '{"replies": [{"overflow": true}, {"text": "SUMMARY-TWICE"}, {"overflow": true}]}'
        rn_say "$id" "$C300"
        rn_wait "$id" '.status == "failed"'
        jq -e '.error | test("even after it was compacted: (prompt is too long|This model.s maximum context length)")' "$DS_BODY"
        rn_events "$id" >"$T/ev.json"
        jq -e '[.[] | select(.type == "reply:failed")] | length == 1 and (.[0].payload.reason == "context_overflow")' "$T/ev.json"
        jq -e '[.[] | select(.type == "session:compacted")] | length == 1' "$T/ev.json"
        jq -e '[.[] | select(.type == "provider:request_cancelled" and .payload.reason == "failed")] | length == 1' "$T/ev.json"
        # A chat that failed so takes the next message (which fits now).
        exchange "$id" "short" "fine again"
        # A first message over the window: nothing to compact, the reply fails.
        id=$(rn_session "{\"agent\": \"$(agent "$p")\"}")
        n=$(rn_request_count)
        rn_script '{"overflow": true}'
        rn_say "$id" "$A300"
        rn_wait "$id" '.status == "failed"'
        jq -e '.error | test("nothing left to compact")' "$DS_BODY"
        [ "$(rn_request_count)" = $((n + 1)) ]
        rn_events "$id" | jq -e '[.[] | select(.type == "reply:failed")][0].payload.reason == "context_overflow"'
    done
}

@test "POST /v1/sessions/{id}/compact compacts on demand (202, what was queued); busy, nothing to compact, a workflow and no session are clear errors; dstream sessions compact" {
    local id one wf req
    id=$(two_exchanges anthropic)
    rn_script '{"text": "SUMMARY-ASKED"}'
    req POST "/v1/sessions/$id/compact"
    assert_status 202
    jq -e --arg id "$id" '.id == $id and .queued == "compact:requested" and .messages == 2
        and (.offset | length > 0) and (.upTo | length > 0)' "$DS_BODY"
    rn_wait "$id" '.compacted.summary == "SUMMARY-ASKED" and .status == "completed"'
    jq -e '[.messages[] | .compacted == true] == [true, true, false, false]' "$DS_BODY"
    rn_events "$id" | jq -e '[.[] | select(.type == "session:compacted")][0].payload.reason == "request"'
    # The last exchange is always kept: nothing more to compact now.
    req POST "/v1/sessions/$id/compact"
    assert_status 409; assert_json_error nothing_to_compact
    one=$(rn_session "{\"agent\": \"$(agent anthropic)\"}")
    req POST "/v1/sessions/$one/compact"
    assert_status 409; assert_json_error nothing_to_compact
    req POST "/v1/sessions/no-such-session/compact"
    assert_status 404; assert_json_error not_found
    req GET "/v1/sessions/$id/compact"
    assert_status 405
    # Busy: a reply under way (the mock holds it after its first delta until released,
    # so it is still running when the compaction is asked, however loaded the machine),
    # and a compaction already queued.
    id=$(two_exchanges openai)
    rn_script '{"text": "slow", "delayMs": 300, "chunkSize": 1, "holdAfter": 1}'
    rn_say "$id" "third"
    rn_wait "$id" '.status == "running"'
    req POST "/v1/sessions/$id/compact"
    assert_status 409; assert_json_error busy
    curl -fsS -o /dev/null -X POST "$RN_MOCK/__release"
    rn_wait "$id" '.status == "completed"'
    kill -STOP "$(rn_runner_pid)"
    req POST "/v1/sessions/$id/compact"
    assert_status 202
    req POST "/v1/sessions/$id/compact"
    assert_status 409; assert_json_error busy
    jq -e '.error.message | test("compaction")' "$DS_BODY"
    rn_script '{"text": "SUMMARY-QUEUED"}'
    kill -CONT "$(rn_runner_pid)"
    rn_wait "$id" '.compacted.summary == "SUMMARY-QUEUED"'
    # A workflow's session has no chat to compact.
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, initialState: {ok: null}, phases: [
        {name: "ask", steps: [{kind: "human", id: "go", input: "approval", prompt: "Go?", update: {ok: "$response"}}],
         transitions: [{to: "done"}]}, {name: "done", terminal: true}]}')"
    one=$(rn_session "{\"workflow\": \"$wf\", \"input\": {}}")
    req POST "/v1/sessions/$one/compact"
    assert_status 409; assert_json_error not_a_chat
    # The CLI: dstream sessions compact ID.
    rn_cli_env
    id=$(two_exchanges anthropic)
    rn_script '{"text": "SUMMARY-CLI"}'
    run "$DS_BIN/dstream" sessions compact "$id"
    [ "$status" -eq 0 ]
    [[ $output == *"compact:requested"* ]]
    rn_wait "$id" '.compacted.summary == "SUMMARY-CLI"'
    run "$DS_BIN/dstream" requests "$id"
    [ "$status" -eq 0 ]
    [ "$(grep -c '(compaction)' <<<"$output")" = 1 ]
    run "$DS_BIN/dstream" sessions compact "$id"
    [ "$status" -ne 0 ]
    [[ $output == *nothing_to_compact* || $output == *"nothing to compact"* ]]
}

@test "the state before a compaction has the whole history, and a fork from before it keeps it" {
    local id at fork req
    id=$(two_exchanges anthropic)
    rn_script '{"replies": [{"overflow": true}, {"text": "SUMMARY-TT"}, {"text": "third reply"}]}'
    rn_say "$id" "$C300"
    rn_wait "$id" '.status == "completed" and .messages[-1].content == "third reply"'
    at=$(rn_events "$id" | jq -r '[.[] | select(.type == "session:compacted")][0].offset')
    req GET "/v1/sessions/$id/state?at=$at"
    assert_status 200
    jq -e '(.compacted | not) and ([.messages[] | select(.compacted)] | length == 0)
        and ([.messages[] | select(.role == "user")] | length == 3)' "$DS_BODY"
    # After it: the summarized messages are marked.
    req GET "/v1/sessions/$id/state"
    jq -e '.compacted.summary == "SUMMARY-TT" and ([.messages[] | select(.compacted)] | length == 2)' "$DS_BODY"
    # A fork from before the compaction (before the message it came with): the
    # whole history, sent whole.
    at=$(rn_events "$id" | jq -r '[.[] | select(.type == "message:user")][2].offset')
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary "{\"at\": \"$at\"}"
    assert_status 201
    fork=$(jq -r .id "$DS_BODY")
    rn_get "$fork"
    jq -e '(.compacted | not) and ([.messages[] | select(.compacted)] | length == 0)' "$DS_BODY"
    rn_wait "$fork" '.status != "running" and .request == null'
    exchange "$fork" "and now?" "fork reply"
    req=$(last_body)
    [[ $req == *"$A300"* && $req == *"$B300"* && $req != *SUMMARY-TT* ]]
}

@test "a runner killed during the summarization request: restarted, it compacts once and the reply completes" {
    local id ev
    id=$(two_exchanges anthropic '{"contextTokens": 200}')
    rn_script '{"hang": true}'
    rn_say "$id" "$C300"
    ds_poll 20 rn_has_event "$id" '.type == "provider:request_started" and .payload.purpose == "compaction"'
    ds_poll 10 eval '[ "$(rn_request_count)" -ge 3 ]'
    rn_runner_signal KILL
    rn_script '{"replies": [{"text": "SUMMARY-AFTER-KILL"}, {"text": "third reply"}]}'
    rn_runner_start
    rn_wait "$id" '.status == "completed" and .messages[-1].content == "third reply"' 30
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "session:compacted")] | length == 1 and (.[0].payload.summary == "SUMMARY-AFTER-KILL")' "$T/ev.json"
    jq -e '[.[] | select(.type == "provider:request_started" and .payload.purpose == "compaction") | .payload.attempt] == [1, 2]' "$T/ev.json"
    jq -e '[.[] | select(.type == "provider:request_cancelled" and .payload.purpose == "compaction") | .payload.reason] == ["restart"]' "$T/ev.json"
    [[ $(last_body) == *SUMMARY-AFTER-KILL* ]]
    [[ $(last_body) != *"$A300"* ]]
}

@test "a stop during the summarization request abandons the compaction; the next message compacts and is answered" {
    local id
    id=$(two_exchanges openai '{"contextTokens": 200}')
    rn_script '{"hang": true}'
    rn_say "$id" "$C300"
    ds_poll 20 rn_has_event "$id" '.type == "provider:request_started" and .payload.purpose == "compaction"'
    req POST "/v1/sessions/$id/stop"
    assert_status 202
    rn_wait "$id" '.status == "completed" and .request == null'
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "provider:request_cancelled") | [.payload.reason, .payload.purpose]] == [["stopped", "compaction"]]' "$T/ev.json"
    jq -e '[.[] | select(.type == "reply:stopped")] | length == 1' "$T/ev.json"
    jq -e '[.[] | select(.type == "session:compacted")] | length == 0' "$T/ev.json"
    rn_get "$id"
    jq -e '(.compacted | not) and (.compaction | not) and .attempts == 0' "$DS_BODY"
    rn_script '{"replies": [{"text": "SUMMARY-AFTER-STOP"}, {"text": "answered"}]}'
    rn_say "$id" "again"
    rn_wait "$id" '.status == "completed" and .compacted.summary == "SUMMARY-AFTER-STOP" and .messages[-1].content == "answered"'
}

@test "a compaction recorded is played back: its summarization request is answered from the recording, the same summary" {
    local ag rec play
    ag=$(agent anthropic '{"contextTokens": 200}')
    rec=$(rn_session "{\"agent\": \"$ag\", \"mode\": \"record\"}")
    exchange "$rec" "$A300" "first reply"
    exchange "$rec" "$B300" "second reply"
    rn_script '{"replies": [{"text": "SUMMARY-RECORDED"}, {"text": "third reply"}]}'
    rn_say "$rec" "$C300"
    rn_wait "$rec" '.status == "completed" and .compacted.summary == "SUMMARY-RECORDED" and .messages[-1].content == "third reply"'
    # Played back: nothing reaches the mock; the four requests and the summary come
    # from the recording.
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    play=$(rn_session "{\"agent\": \"$ag\", \"mode\": \"playback\"}")
    for m in "$A300" "$B300" "$C300"; do
        rn_say "$play" "$m"
        rn_wait "$play" '.status == "completed" or .status == "failed"'
    done
    rn_wait "$play" '.status == "completed" and .compacted.summary == "SUMMARY-RECORDED" and .messages[-1].content == "third reply"'
    [ "$(rn_request_count)" = 0 ]
    rn_events "$play" >"$T/play.json"
    jq -e '[.[] | select(.type == "recording:request") | .payload.outcome] == ["hit", "hit", "hit", "hit"]' "$T/play.json"
    jq -e '[.[] | select(.type == "session:compacted")] | length == 1' "$T/play.json"
}

@test "the AI SDK's stream, the LangGraph SDK's run stream and dstream chat show the reply after a compaction, not the summary, and end with the reply" {
    local ag id types text
    ag=$(agent anthropic '{"contextTokens": 200}')
    id=$(rn_session "{\"agent\": \"$ag\"}")
    exchange "$id" "$A300" "first reply"
    exchange "$id" "$B300" "second reply"
    rn_script '{"replies": [{"text": "SUMMARY-NOT-A-REPLY"}, {"text": "third reply", "chunkSize": 3}]}'
    curl -sS --max-time 30 -o "$T/raw" -H 'Content-Type: application/json' "$DS_URL/v1/aisdk/chat/$ag" \
        --data-binary "$(jq -nc --arg id "$id" --arg c "$C300" '{id: $id, trigger: "submit-message", messageId: null,
            messages: [{id: "u3", role: "user", parts: [{type: "text", text: $c}]}]}')"
    sed -n 's/^data: //p' "$T/raw" | tr -d '\r' | sed '$d' >"$T/chunks"
    types=$(jq -r .type "$T/chunks" | uniq | tr '\n' ' ')
    [ "$types" = "start start-step text-start text-delta text-end finish-step finish " ] || { cat "$T/chunks" >&2; false; }
    text=$(jq -rj 'select(.type == "text-delta") | .delta' "$T/chunks")
    [ "$text" = "third reply" ]
    rn_wait "$id" '.compacted.summary == "SUMMARY-NOT-A-REPLY" and .status == "completed"'
    # dstream chat: the next compaction's summary is not printed as the reply.
    rn_cli_env
    exchange "$id" "short" "fourth reply"
    rn_script '{"replies": [{"text": "SUMMARY-TWO"}, {"text": "fifth reply"}]}'
    run "$DS_BIN/dstream" chat "$id" "$B300"
    [ "$status" -eq 0 ]
    [ "$output" = "fifth reply" ] || { echo "output: $output" >&2; false; }
    rn_wait "$id" '.compacted.summary == "SUMMARY-TWO"'
    # The LangGraph SDK's run stream: neither messages nor events of the summarization
    # request, one model request (the reply's), the reply's text.
    rn_script '{"replies": [{"text": "SUMMARY-THREE"}, {"text": "sixth reply", "chunkSize": 3}]}'
    curl -sS --max-time 30 -o "$T/lg" -H 'Content-Type: application/json' "$DS_URL/v1/langgraph/threads/$id/runs/stream" \
        --data-binary "$(jq -nc --arg a "$ag" --arg c "$C300" '{assistant_id: $a, input: {messages: [{role: "user", content: $c}]},
            stream_mode: ["messages-tuple", "events"]}')"
    tr -d '\r' <"$T/lg" | awk '/^event:/{e=$0; sub(/^event: ?/, "", e)} /^data:/{d=$0; sub(/^data: ?/, "", d); if (e == "messages" || e == "events") print d}' >"$T/lgd"
    jq -se '([.[] | arrays | .[0].content] | join("")) == "sixth reply" and
        ([.[] | objects | select(.event == "on_chat_model_start")] | length) == 1 and
        ([.[] | objects | select(.event == "on_chat_model_end")] | length) == 1 and
        ([.[] | objects | select(.event == "on_chat_model_stream") | .data.chunk.content] | join("")) == "sixth reply"' \
        "$T/lgd" >/dev/null || { cat "$T/lg" >&2; false; }
    rn_wait "$id" '.compacted.summary == "SUMMARY-THREE"'
}

@test "the operator's window for a model compacts its chats, and the model the operator names for compaction summarizes them; dstream providers says both" {
    local ag id
    # The runner reads the file when it starts: with a compaction model, then without.
    cp "$RN_PROVIDERS" "$T/providers.keep"
    jq '. + {compaction: {provider: "anthropic", model: "claude-summarizer"}}' "$T/providers.keep" >"$RN_PROVIDERS"
    rn_runner_signal TERM
    rn_runner_start
    run "$DS_BIN/dstream" providers "$RN_PROVIDERS"
    [ "$status" -eq 0 ]
    [[ $output == *"model gpt-small: a context window of 400 tokens"* ]]
    [[ $output == *"compaction: chats are summarized by claude-summarizer of provider anthropic"* ]]
    # No contextTokens in the agent: the window (400, less the reply's room, at least
    # half of it: 200) decides.
    ag=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary \
        "$(jq -nc --arg n "$ag" '{name: $n, provider: "small", model: "gpt-small"}')"
    assert_status 201
    id=$(rn_session "{\"agent\": \"$ag\"}")
    exchange "$id" "$A300" "first reply"
    exchange "$id" "$B300" "second reply"
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    rn_script '{"replies": [{"text": "SUMMARY-BY-OPERATOR"}, {"text": "third reply"}]}'
    rn_say "$id" "$C300"
    rn_wait "$id" '.status == "completed" and .compacted.summary == "SUMMARY-BY-OPERATOR" and .messages[-1].content == "third reply"'
    rn_requests >"$T/req.json"
    jq -e '[.[] | [(.path | test("/messages$")), .body.model]] == [[true, "claude-summarizer"], [false, "gpt-small"]]' "$T/req.json"
    rn_events "$id" | jq -e '[.[] | select(.type == "session:compacted")][0].payload.reason == "budget"'
    cp "$T/providers.keep" "$RN_PROVIDERS"
    rn_runner_signal TERM
    rn_runner_start
}
