#!/usr/bin/env bats
# OpenTelemetry traces rebuilt from the log (docs/otlp.md): dstream-runner pushes
# each session's spans to an OTLP/HTTP receiver on loopback, which decodes every
# POST with the official OpenTelemetry protobuf definitions (tests/otlp: the
# protobufjs code @opentelemetry/otlp-transformer generates from opentelemetry-proto),
# never with dstream's code. A chat with a tool call and a retried request becomes
# one trace: the session span, the turn, each attempt with the GenAI attributes, the
# tool call, with the log's own ids and parents (a workflow: its steps, the agent
# step's request under its step); with the receiver down, then held
# while the runner is SIGKILLed mid-export, every span still arrives and a span sent
# twice is sent the same both times; `dstream otlp` writes the same spans.

load runner-helpers

SECRET=otlp-secret-5ac7e19b

# recv_start [EXTRA...]: the receiver on $RECV_PORT (0: a free one, then kept),
# recording into $RECV_OUT; its PID in $RECV_DIR/pid (a test's restart included, for
# teardown_file).
recv_start() {
    rm -f "$RECV_DIR/port"
    node "$RECV_JS" --port "${RECV_PORT:-0}" --port-file "$RECV_DIR/port" --out "$RECV_OUT" "$@" \
        </dev/null >>"$RECV_DIR/receiver.log" 2>&1 3>&- &
    echo $! >"$RECV_DIR/pid"
    ds_poll 10 test -s "$RECV_DIR/port" || { cat "$RECV_DIR/receiver.log" >&2; return 1; }
    RECV_PORT=$(tr -d '\n' <"$RECV_DIR/port")
    export RECV_PORT
}

recv_stop() {
    local pid
    pid=$(cat "$RECV_DIR/pid" 2>/dev/null) && [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    ds_poll 5 rn_gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
    rm -f "$RECV_DIR/pid"
}

setup_file() {
    RECV_JS=$("$DS_ROOT/tests/otlp/install.sh") || return 1
    RECV_DIR=$(mktemp -d -t dstream-otlp.XXXXXX)
    RECV_OUT=$RECV_DIR/received.jsonl
    : >"$RECV_OUT"
    export RECV_JS RECV_DIR RECV_OUT
    recv_start || return 1
    jq -n --arg node "$(command -v node)" --arg ts "$DS_ROOT/tests/mcp/test-server.mjs" \
        '{mcpServers: {m: {command: $node, args: [$ts], timeoutMs: 5000}}}' >"$RECV_DIR/mcp.json"
    chmod 644 "$RECV_DIR/mcp.json"
    rn_start DSTREAM_MCP_CONFIG="$RECV_DIR/mcp.json" DSTREAM_OTLP_ENDPOINT="http://127.0.0.1:$RECV_PORT/" \
        DSTREAM_OTLP_HEADERS="Authorization=Bearer%20$SECRET" DSTREAM_OTLP_BATCH=4
    rn_cli_env
}
teardown_file() {
    rn_stop
    [ -n "${RECV_DIR:-}" ] || return 0
    recv_stop
    rm -rf "$RECV_DIR"
}
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# spans_of TRACE: every span the receiver accepted (a 200) of trace TRACE, one JSON
# document a line, in the order received (repeats kept).
spans_of() {
    jq -c --arg t "$1" 'select(.status == 200) | .request.resourceSpans[]?.scopeSpans[]?.spans[]?
        | select(.traceId == $t)' "$RECV_OUT"
}

# distinct_count TRACE: how many different span ids the receiver accepted of it.
distinct_count() { spans_of "$1" | jq -s 'map(.spanId) | unique | length'; }
has_spans() { [ "$(distinct_count "$1")" -ge "$2" ]; }

# chat_with_tool ID [TRACEPARENT]: the agent's reply asks for m__echo once after a
# 529, then answers (the message sent with the traceparent header when given).
chat_with_tool() {
    rn_script '{"replies": [{"status": 529},
        {"toolCalls": [{"id": "c1", "name": "m__echo", "arguments": {"text": "hi"}}], "usage": {"input": 12, "output": 5}},
        {"text": "done", "usage": {"input": 20, "output": 3}}]}'
    if [ -n "${2:-}" ]; then
        req POST "/v1/sessions/$1/messages" -H 'Content-Type: application/json' -H "traceparent: $2" \
            --data-binary '{"content": "use the tool"}'
        [ "$status_code" = 202 ] || return 1
    else
        rn_say "$1" "use the tool"
    fi
    rn_wait "$1" '.status == "completed" and (.messages | length) >= 3' 30
}

# The normalized spans (a JSON array sorted by span id) of a decoded request's spans
# on stdin, as the receiver or dstream otlp --json has them.
NORM='[.[] | {traceId, spanId, parentSpanId: (.parentSpanId // ""), name, kind,
    startTimeUnixNano, endTimeUnixNano, attributes: ((.attributes // []) | sort_by(.key)),
    events: ((.events // []) | map({name, timeUnixNano})), links: ((.links // []) | map({traceId, spanId})), status: (if .status then {code: .status.code, message: (.status.message // "")} else null end)}] | sort_by(.spanId)'

@test "a chat with a tool call and a retried request: one trace, the log's ids, parents and GenAI attributes" {
    agent=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary \
        "$(jq -nc --arg n "$agent" '{name: $n, provider: "anthropic", model: "claude-test-model", mcpServers: ["m"]}')"
    assert_status 201
    id=$(rn_session "$(jq -nc --arg a "$agent" '{agent: $a}')")
    # The message comes from a caller's trace: its turn links to the caller's span.
    chat_with_tool "$id" 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
    rn_events "$id" >"$T/ev.json"
    trace=$(jq -r '.[] | select(.type == "session:created") | .trace.traceId' "$T/ev.json")
    [ "$trace" != 0af7651916cd43dd8448eb211c80319c ]
    # session + turn + 3 attempts (the 529, the tool call, the answer) + the tool call
    ds_poll 20 has_spans "$trace" 6 || fail "spans received: $(spans_of "$trace")"
    spans_of "$trace" | jq -s "$NORM | unique | sort_by(.spanId)" >"$T/spans.json"
    [ "$(jq length "$T/spans.json")" = 6 ] || fail "$(cat "$T/spans.json")"
    ev() { jq -r "$1" "$T/ev.json"; }
    sp() { jq -r "$1" "$T/spans.json"; }
    # The ids are the log's: each span is the event that started it.
    root=$(ev '.[] | select(.type == "session:created") | .trace.spanId')
    turn=$(ev '.[] | select(.type == "message:user") | .trace.spanId')
    tool=$(ev '.[] | select(.type == "tool:called") | .trace.spanId')
    reqs=$(ev '[.[] | select(.type == "provider:request_started") | .trace.spanId] | sort | join(" ")')
    [ "$(sp "[.[] | select(.spanId == \"$root\" and .parentSpanId == \"\" and .name == \"session $agent\")] | length")" = 1 ]
    [ "$(sp "[.[] | select(.spanId == \"$turn\" and .parentSpanId == \"$root\")
        | select(.attributes | from_entries? // (map({(.key): .value}) | add) | .[\"gen_ai.operation.name\"].stringValue == \"invoke_agent\")] | length")" = 1 ]
    [ "$(spans_of "$trace" | jq -sr --arg s "$turn" '[.[] | select(.spanId == $s) | .links[0] | .traceId + "/" + .spanId] | unique | join(" ")')" = 0af7651916cd43dd8448eb211c80319c/b7ad6b7169203331 ]
    [ "$(sp "[.[] | select(.name | startswith(\"chat \")) | select(.parentSpanId == \"$turn\" and .kind == 3) | .spanId] | sort | join(\" \")")" = "$reqs" ]
    [ "$(sp "[.[] | select(.spanId == \"$tool\" and .parentSpanId == \"$turn\" and .name == \"execute_tool m__echo\")] | length")" = 1 ]
    # Attributes: a map per span.
    jq '[.[] | {key: .spanId, value: (.attributes | map({key, value: (.value | to_entries[0].value
        | if type == "object" and has("values") then (.values | map(.stringValue) | join(",")) else . end)}) | from_entries)}]
        | from_entries' "$T/spans.json" >"$T/attrs.json"
    at() { jq -r --arg s "$1" --arg k "$2" '.[$s][$k]' "$T/attrs.json"; }
    for r in $reqs; do
        [ "$(at "$r" gen_ai.operation.name)" = chat ]
        [ "$(at "$r" gen_ai.provider.name)" = anthropic ]
        [ "$(at "$r" gen_ai.system)" = anthropic ]
        [ "$(at "$r" gen_ai.request.model)" = claude-test-model ]
    done
    # The retried attempt: an error, with its cause; the others ended with usage and cost.
    first=$(ev '[.[] | select(.type == "provider:request_started")][0].trace.spanId')
    [ "$(sp ".[] | select(.spanId == \"$first\") | .status.code")" = 2 ]
    [ "$(at "$first" dstream.retry.status)" = 529 ]
    [ "$(at "$first" dstream.request.attempt)" = 1 ]
    last=$(ev '[.[] | select(.type == "provider:request_started")][-1].trace.spanId')
    [ "$(at "$last" gen_ai.usage.input_tokens)" = 20 ]
    [ "$(at "$last" gen_ai.usage.output_tokens)" = 3 ]
    [ "$(at "$last" gen_ai.response.model)" = claude-test-model ]
    [ "$(at "$last" gen_ai.response.finish_reasons)" = end_turn ]
    [ "$(at "$last" dstream.cost_usd)" != null ]
    [ "$(at "$last" dstream.request.attempt)" = 1 ] || [ "$(at "$last" dstream.request.attempt)" = 3 ]
    [ "$(at "$tool" gen_ai.tool.name)" = m__echo ]
    [ "$(at "$tool" gen_ai.tool.call.id)" = c1 ]
    [ "$(sp ".[] | select(.spanId == \"$tool\") | .status.code")" = 1 ]
    [ "$(at "$root" gen_ai.conversation.id)" = "$id" ]
    # Every span's time is within its parent's.
    jq -e 'INDEX(.spanId) as $by | all(.[]; (.parentSpanId == "") or
        (($by[.parentSpanId].startTimeUnixNano | tonumber) <= (.startTimeUnixNano | tonumber)
         and (.endTimeUnixNano | tonumber) <= ($by[.parentSpanId].endTimeUnixNano | tonumber)))' "$T/spans.json"
    # OTLP/HTTP as the receiver saw it: protobuf, /v1/traces, the operator's header,
    # at most DSTREAM_OTLP_BATCH spans a request; the secret never in the log.
    jq -s 'map(select(.status == 200))' "$RECV_OUT" >"$T/posts.json"
    jq -e 'length > 0' "$T/posts.json"
    jq -e --arg a "Bearer $SECRET" 'all(.[]; .contentType == "application/x-protobuf" and .path == "/v1/traces"
        and .auth == $a)' "$T/posts.json" || fail "$(jq -c 'map({contentType, path, auth})' "$T/posts.json")"
    jq -e 'all(.[]; [.request.resourceSpans[]?.scopeSpans[]?.spans[]?] | length <= 4)' "$T/posts.json"
    ! grep -q "$SECRET" "$DS_DIR"/logs/*.log
    # dstream otlp: the same spans, as protobuf (decoded by the official definitions)
    # and as OTLP JSON.
    "$DS_BIN/dstream" otlp "$id" >"$T/otlp.bin"
    node "$RECV_JS" --decode "$T/otlp.bin" | jq '[.resourceSpans[].scopeSpans[].spans[]]' | jq "$NORM" >"$T/cli.json"
    diff "$T/spans.json" "$T/cli.json"
    "$DS_BIN/dstream" otlp "$id" --json | jq '[.resourceSpans[].scopeSpans[].spans[]]' | jq "$NORM" >"$T/cli-json.json"
    diff "$T/spans.json" "$T/cli-json.json"
    "$DS_BIN/dstream" --db "$DS_DB" otlp "$id" --json | jq '[.resourceSpans[].scopeSpans[].spans[]]' | jq "$NORM" >"$T/cli-db.json"
    diff "$T/spans.json" "$T/cli-db.json"
}

# metric NAME: the sum of a metric's samples in a scrape of /metrics (0 if none).
metric() { curl -fsS --max-time 10 "$DS_URL/metrics" | awk -v k="$1" '$1 ~ "^"k"[{ ]" || $1 == k { s += $2 } END { print s + 0 }'; }
metric_ge() { [ "$(metric "$1")" -ge "$2" ]; }
recorded_for() { [ "$(jq -c --arg t "$1" 'select(.request.resourceSpans[]?.scopeSpans[]?.spans[]?.traceId == $t)' "$RECV_OUT" | wc -l)" -ge "$2" ]; }

@test "receiver down, then holding its answer while the runner is SIGKILLed mid-export: every span arrives, a repeat is the same span" {
    agent=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary \
        "$(jq -nc --arg n "$agent" '{name: $n, provider: "anthropic", model: "claude-test-model", mcpServers: ["m"]}')"
    assert_status 201
    failures=$(metric dstream_runner_otlp_export_failures_total)
    # The receiver is down while the session runs: the exports fail and are retried.
    recv_stop
    id=$(rn_session "$(jq -nc --arg a "$agent" '{agent: $a}')")
    chat_with_tool "$id"
    trace=$(rn_events "$id" | jq -r '.[] | select(.type == "session:created") | .trace.traceId')
    ds_poll 20 metric_ge dstream_runner_otlp_export_failures_total $((failures + 1)) ||
        fail "no failed export counted: $(curl -fsS "$DS_URL/metrics" | grep otlp)"
    [ "$(distinct_count "$trace")" = 0 ]
    # Up again, but holding its answers: what it receives is recorded, not acknowledged.
    touch "$RECV_DIR/hold"
    recv_start --hold-file "$RECV_DIR/hold"
    ds_poll 40 recorded_for "$trace" 1 || fail "no export after the receiver came back: $(tail -5 "$DS_DIR/logs/runner.log")"
    held=$(jq -c --arg t "$trace" 'select(.request.resourceSpans[]?.scopeSpans[]?.spans[]?.traceId == $t)
        | [.request.resourceSpans[].scopeSpans[].spans[].spanId]' "$RECV_OUT" | head -1)
    # The runner dies with the export unanswered; the answer then goes nowhere.
    rn_runner_signal KILL
    rm -f "$RECV_DIR/hold"
    rn_runner_start
    # Every span of the session arrives; the unacknowledged batch came again.
    ds_poll 30 has_spans "$trace" 6 || fail "spans received: $(spans_of "$trace" | jq -c '[.spanId, .name]')"
    spans_of "$trace" | jq -s "$NORM" >"$T/all.json"
    "$DS_BIN/dstream" otlp "$id" --json | jq '[.resourceSpans[].scopeSpans[].spans[]]' | jq "$NORM" >"$T/cli.json"
    [ "$(jq length "$T/cli.json")" = 6 ]
    jq -e --slurpfile cli "$T/cli.json" '($cli[0] | map(.spanId)) - map(.spanId) == []' "$T/all.json"
    for s in $(jq -r '.[]' <<<"$held"); do
        [ "$(jq --arg s "$s" '[.[] | select(.spanId == $s)] | length' "$T/all.json")" -ge 2 ] ||
            fail "the held span $s was not sent again"
    done
    # A span sent more than once was the same each time (same ids, same content).
    jq -e 'group_by(.spanId) | all(.[]; unique | length == 1)' "$T/all.json" ||
        fail "a repeat differs: $(jq -c 'group_by(.spanId) | map(select(unique | length > 1))' "$T/all.json")"
    # And it is the span dstream otlp writes.
    diff <(jq 'unique | sort_by(.spanId)' "$T/all.json") "$T/cli.json"
    ds_poll 10 metric_ge dstream_runner_otlp_spans_exported_total 6
}

@test "a workflow: its steps under the session span, the agent step's request under its step, the session OK at the end" {
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{name: $n, initialState: {},
        phases: [{name: "one", steps: [{kind: "agent", name: "Say", agent: $a, prompt: "Say hi.",
            update: {said: "$output"}}], transitions: [{to: "two"}]},
            {name: "two", terminal: true, steps: [{kind: "update", set: {finished: true}}]}]}')"
    rn_script '{"text": "hi", "usage": {"input": 4, "output": 2}}'
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w, input: {}}')")
    rn_wait "$id" '.status == "completed"'
    rn_events "$id" >"$T/ev.json"
    trace=$(jq -r '.[] | select(.type == "session:created") | .trace.traceId' "$T/ev.json")
    # session + 2 steps + 1 attempt
    ds_poll 20 has_spans "$trace" 4 || fail "spans received: $(spans_of "$trace" | jq -c '[.spanId, .name]')"
    spans_of "$trace" | jq -s "$NORM | unique | sort_by(.spanId)" >"$T/spans.json"
    [ "$(jq length "$T/spans.json")" = 4 ]
    root=$(jq -r '.[] | select(.type == "session:created") | .trace.spanId' "$T/ev.json")
    s0=$(jq -r '[.[] | select(.type == "step:started")][0].trace.spanId' "$T/ev.json")
    s1=$(jq -r '[.[] | select(.type == "step:started")][1].trace.spanId' "$T/ev.json")
    rq=$(jq -r '.[] | select(.type == "provider:request_started") | .trace.spanId' "$T/ev.json")
    sp() { jq -r "$1" "$T/spans.json"; }
    [ "$(sp ".[] | select(.spanId == \"$root\") | [.parentSpanId, .name, .status.code] | join(\" \")")" = " session $wf 1" ]
    [ "$(sp ".[] | select(.spanId == \"$s0\") | [.parentSpanId, .name] | join(\" \")")" = "$root step one Say" ]
    [ "$(sp ".[] | select(.spanId == \"$s1\") | .parentSpanId")" = "$root" ]
    [ "$(sp ".[] | select(.spanId == \"$rq\") | [.parentSpanId, .name] | join(\" \")")" = "$s0 chat claude-test-model" ]
    "$DS_BIN/dstream" otlp "$id" --json | jq '[.resourceSpans[].scopeSpans[].spans[]]' | jq "$NORM" >"$T/cli.json"
    diff "$T/spans.json" "$T/cli.json"
}
