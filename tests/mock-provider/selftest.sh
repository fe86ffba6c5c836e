#!/usr/bin/env bash
# Self-test of the mock provider: start it on a free loopback port, script replies,
# and check both wire formats and the failure modes with curl. Prints one line per
# check and ends with "mock-provider: N passed, N failed"; exit status 0 iff none failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d -t mock-provider.XXXXXX)
pid=
KEY="sk-ant-selftest-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
ok()   { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/     /'; }
check() { # check NAME COMMAND...: pass if the command succeeds
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then ok "$name"; else fail "$name" "$out"; fi
}

# ---- start ----------------------------------------------------------------------------

node "$here/mock-provider.mjs" --port 0 --port-file "$dir/port" --log "$dir/log" \
    --max-lifetime 300 >"$dir/stdout" 2>"$dir/stderr" &
pid=$!
for _ in $(seq 1 100); do
    [ -s "$dir/port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if ! [ -s "$dir/port" ]; then
    echo "mock provider did not start:"; cat "$dir/stderr"
    echo "mock-provider: 0 passed, 1 failed"; exit 1
fi
PORT=$(cat "$dir/port")
U="http://127.0.0.1:$PORT"
check "prints 'listening <port>'" grep -qx "listening $PORT" "$dir/stdout"

script() { curl -sS -f -X POST "$U/__script" -H 'Content-Type: application/json' -d "$1" >/dev/null; }
anthropic() { # anthropic OUTFILE [curl args...]: a streaming Messages request
    local out=$1; shift
    curl -sS -N -o "$out" -w '%{http_code}' "$@" "$U/v1/messages" \
        -H "x-api-key: $KEY" -H 'anthropic-version: 2023-06-01' \
        -H 'Content-Type: application/json' \
        -d '{"model":"claude-test","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"hi there"}]}'
}
openai() {
    local out=$1; shift
    curl -sS -N -o "$out" -w '%{http_code}' "$@" "$U/v1/chat/completions" \
        -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
        -d '{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}'
}

# A small SSE checker: node sse-check.mjs anthropic|openai FILE EXPECTED_JSON
# prints what it assembled and fails on a mismatch.
cat >"$dir/sse-check.mjs" <<'EOF'
import fs from 'node:fs';
const [kind, file, want] = process.argv.slice(2);
const text = fs.readFileSync(file, 'utf8');
const expect = JSON.parse(want);
const got = { text: '', thinking: '', tools: [], events: [], pings: 0 };
const blocks = text.split('\n\n').filter((b) => b.length);
for (const b of blocks) {
    const lines = b.split('\n');
    if (lines.every((l) => l.startsWith(':'))) { got.pings++; continue; }
    const ev = lines.find((l) => l.startsWith('event: '))?.slice(7);
    const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
    if (kind === 'anthropic') {
        const d = JSON.parse(data);
        if (d.type !== ev) throw new Error(`event ${ev} has data type ${d.type}`);
        got.events.push(ev);
        if (ev === 'ping') got.pings++;
        if (ev === 'message_start') got.input = d.message.usage.input_tokens;
        if (ev === 'content_block_start' && d.content_block.type === 'tool_use')
            got.tools[d.index] = { id: d.content_block.id, name: d.content_block.name, args: '' };
        if (ev === 'content_block_delta') {
            const x = d.delta;
            if (x.type === 'text_delta') got.text += x.text;
            if (x.type === 'thinking_delta') got.thinking += x.thinking;
            if (x.type === 'signature_delta') got.signature = x.signature;
            if (x.type === 'input_json_delta') { got.tools[d.index].args += x.partial_json; got.tools[d.index].pieces = (got.tools[d.index].pieces || 0) + 1; }
        }
        if (ev === 'message_delta') { got.stop = d.delta.stop_reason; got.output = d.usage.output_tokens; }
        if (ev === 'error') got.error = d.error.type;
    } else {
        if (data === '[DONE]') { got.events.push('[DONE]'); continue; }
        const d = JSON.parse(data);
        if (d.error) { got.events.push('error'); got.error = d.error.type; continue; }
        if (d.choices.length === 0 && d.usage) {
            got.events.push('usage'); got.input = d.usage.prompt_tokens; got.output = d.usage.completion_tokens; continue;
        }
        const c = d.choices[0];
        got.events.push(c.finish_reason ? 'finish' : 'chunk');
        if (c.finish_reason) got.stop = c.finish_reason;
        if (c.delta.content) got.text += c.delta.content;
        if (c.delta.reasoning_content) got.thinking += c.delta.reasoning_content;
        for (const t of c.delta.tool_calls || []) {
            if (t.id) got.tools[t.index] = { id: t.id, name: t.function.name, args: '' };
            else { got.tools[t.index].args += t.function.arguments; got.tools[t.index].pieces = (got.tools[t.index].pieces || 0) + 1; }
        }
    }
}
got.tools = got.tools.filter(Boolean); // anthropic indexes count every block
for (const t of got.tools) { t.args = JSON.parse(t.args); }
got.first = got.events[0];
got.last = got.events[got.events.length - 1];
let bad = [];
for (const [k, v] of Object.entries(expect)) {
    if (k === 'minPieces') { if (!got.tools.every((t) => t.pieces >= v)) bad.push(k); continue; }
    if (k === 'minPings') { if (got.pings < v) bad.push(k); continue; }
    if (k === 'has') { for (const e of v) if (!got.events.includes(e)) bad.push(`has ${e}`); continue; }
    if (k === 'lacks') { for (const e of v) if (got.events.includes(e)) bad.push(`lacks ${e}`); continue; }
    if (JSON.stringify(got[k]) !== JSON.stringify(v)) bad.push(`${k}: got ${JSON.stringify(got[k])}, want ${JSON.stringify(v)}`);
}
if (bad.length) { console.log(bad.join('\n')); console.log(JSON.stringify(got)); process.exit(1); }
EOF
sse() { node "$dir/sse-check.mjs" "$@"; }

# ---- anthropic --------------------------------------------------------------------------

script '{"text":"Hello, streaming world!","usage":{"input":12,"output":5}}'
code=$(anthropic "$dir/a1")
check "anthropic: 200" test "$code" = 200
check "anthropic: message_start ... message_stop with the text deltas" \
    sse anthropic "$dir/a1" '{"first":"message_start","last":"message_stop","text":"Hello, streaming world!","input":12,"output":5,"stop":"end_turn","has":["content_block_start","content_block_delta","content_block_stop","message_delta"]}'
check "anthropic: text split into 4-char deltas" \
    test "$(grep -c '"text_delta"' "$dir/a1")" = 6

script '{"thinking":"Let me think.","text":"Listing.","toolCalls":[{"id":"toolu_1","name":"list_files","arguments":{"path":"/tmp","recursive":true}}],"ping":true}'
anthropic "$dir/a2" >/dev/null
check "anthropic: thinking, tool_use (args in pieces), pings, stop tool_use" \
    sse anthropic "$dir/a2" '{"thinking":"Let me think.","text":"Listing.","tools":[{"id":"toolu_1","name":"list_files","args":{"path":"/tmp","recursive":true},"pieces":3}],"stop":"tool_use","minPings":1,"last":"message_stop"}'
check "anthropic: signature_delta sent" grep -q '"signature_delta"' "$dir/a2"

script '{"text":"abcdefghijkl","chunkSize":2,"errorAfter":2}'
anthropic "$dir/a3" >/dev/null; rc=$?
check "anthropic: errorAfter sends event: error (overloaded_error) and ends cleanly" \
    sse anthropic "$dir/a3" '{"text":"abcd","error":"overloaded_error","last":"error","lacks":["message_stop"]}'
check "anthropic: errorAfter: curl exit 0" test "$rc" = 0

# ---- openai ---------------------------------------------------------------------------

script '{"text":"Hi from OpenAI land.","usage":{"input":21,"output":9}}'
code=$(openai "$dir/o1")
check "openai: 200" test "$code" = 200
check "openai: chunks, finish_reason, usage chunk, [DONE] last" \
    sse openai "$dir/o1" '{"text":"Hi from OpenAI land.","stop":"stop","input":21,"output":9,"last":"[DONE]","has":["usage","finish"]}'
check "openai: ends with data: [DONE]" test "$(tail -c 15 "$dir/o1" | tr -d '\n')" = "data: [DONE]"

script '{"thinking":"hmm","text":"","toolCalls":[{"id":"call_a","name":"f","arguments":{"x":1}},{"id":"call_b","name":"g","arguments":{"y":"two"}}]}'
openai "$dir/o2" >/dev/null
check "openai: reasoning_content and two tool_calls, finish tool_calls" \
    sse openai "$dir/o2" '{"thinking":"hmm","text":"","tools":[{"id":"call_a","name":"f","args":{"x":1},"pieces":3},{"id":"call_b","name":"g","args":{"y":"two"},"pieces":3}],"stop":"tool_calls","last":"[DONE]"}'

curl -sS -N -o "$dir/o3" "$U/v1/chat/completions" -d '{"model":"m","stream":true}'
check "openai: no usage chunk without include_usage; default reply when queue empty" \
    sse openai "$dir/o3" '{"text":"Hello from the mock provider.","lacks":["usage"],"last":"[DONE]"}'

script '{"text":"abcdefgh","errorAfter":1}'
openai "$dir/o4" >/dev/null
check "openai: errorAfter sends data: {error} without [DONE]" \
    sse openai "$dir/o4" '{"text":"abcd","error":"overloaded_error","last":"error","lacks":["[DONE]"]}'

# ---- status replies ---------------------------------------------------------------------

script '{"status":429,"retryAfter":7}'
code=$(curl -sS -o "$dir/s1" -D "$dir/s1h" -w '%{http_code}' "$U/v1/messages" \
    -H "x-api-key: $KEY" -d '{"model":"m","stream":true}')
check "429: status" test "$code" = 429
check "429: Retry-After: 7" grep -qi '^retry-after: 7' "$dir/s1h"
check "429: anthropic error body" grep -q '"type":"error","error":{"type":"rate_limit_error"' "$dir/s1"

script '{"status":529}'
code=$(curl -sS -o "$dir/s2" -w '%{http_code}' "$U/v1/messages" -d '{"model":"m","stream":true}')
check "529: overloaded_error" sh -c "test '$code' = 529 && grep -q overloaded_error '$dir/s2'"

script '{"status":500,"errorMessage":"boom"}'
code=$(curl -sS -o "$dir/s3" -w '%{http_code}' "$U/v1/chat/completions" -d '{"model":"m","stream":true}')
check "500: openai error body" sh -c "test '$code' = 500 && grep -q '\"error\":{\"message\":\"boom\"' '$dir/s3'"

script '{"overflow":true}'
code=$(curl -sS -o "$dir/o1" -w '%{http_code}' "$U/v1/messages" -d '{"model":"m","stream":true}')
check "overflow: anthropic's prompt is too long" sh -c "test '$code' = 400 && grep -q '\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: [0-9]* tokens > 200000 maximum\"' '$dir/o1'"
script '{"overflow":true}'
code=$(curl -sS -o "$dir/o2" -w '%{http_code}' "$U/v1/chat/completions" -d '{"model":"m","stream":true}')
check "overflow: openai's context_length_exceeded" sh -c "test '$code' = 400 && grep -q '\"code\":\"context_length_exceeded\"' '$dir/o2'"
script '{"status":400,"errorCode":"custom_code"}'
code=$(curl -sS -o "$dir/o3" -w '%{http_code}' "$U/v1/chat/completions" -d '{"model":"m","stream":true}')
check "errorCode: openai error.code" sh -c "test '$code' = 400 && grep -q '\"code\":\"custom_code\"' '$dir/o3'"

# A wire format's own default: Anthropic refuses, OpenAI still gets the shared one;
# the queue still comes first; DELETE /__default clears it.
curl -sS -f -o /dev/null -X PUT "$U/__default/anthropic" -d '{"status":529}'
code=$(curl -sS -o "$dir/k1" -w '%{http_code}' "$U/v1/messages" -d '{"model":"m","stream":true}')
check "__default/anthropic: Anthropic gets its own default (529)" test "$code" = 529
curl -sS -N -o "$dir/k2" "$U/v1/chat/completions" -d '{"model":"m","stream":true}'
check "__default/anthropic: OpenAI still gets the shared default" \
    sse openai "$dir/k2" '{"text":"Hello from the mock provider.","last":"[DONE]"}'
script '{"text":"queued first"}'
code=$(curl -sS -o "$dir/k3" -w '%{http_code}' "$U/v1/messages" -d '{"model":"m","stream":true}')
check "__default/anthropic: the queue comes first" test "$code" = 200
check "__default/anthropic: GET returns it" \
    sh -c "curl -sS '$U/__default/anthropic' | grep -q 529"
curl -sS -f -o /dev/null -X DELETE "$U/__default"
code=$(curl -sS -o "$dir/k4" -w '%{http_code}' "$U/v1/messages" -d '{"model":"m","stream":true}')
check "DELETE /__default clears a wire format's own default" test "$code" = 200

# ---- connection cut, hang, client going away ---------------------------------------------

script '{"text":"one two three four five six","cutAfter":2,"delayMs":20}'
anthropic "$dir/c1" >/dev/null 2>"$dir/c1err"; rc=$?
check "cutAfter: curl exits non-zero (got $rc)" test "$rc" -ne 0
check "cutAfter: partial body has exactly 2 text deltas, no message_stop" \
    sh -c "test \$(grep -c '\"text_delta\"' '$dir/c1') = 2 && ! grep -q message_stop '$dir/c1'"

script '{"text":"one two three","cutAfter":1}'
openai "$dir/c2" >/dev/null 2>&1; rc=$?
check "cutAfter (openai): non-zero exit, partial body, no [DONE]" \
    sh -c "test $rc -ne 0 && grep -q '\"content\":\"one \"' '$dir/c2' && ! grep -q DONE '$dir/c2'"

script '{"hang":true}'
anthropic "$dir/h1" --max-time 1 >/dev/null 2>&1; rc=$?
check "hang: message_start then nothing (curl timed out: exit 28, got $rc)" \
    sh -c "test $rc = 28 && grep -q message_start '$dir/h1' && ! grep -q content_block '$dir/h1'"

script '{"text":"a slow reply that the client will abandon halfway through","chunkSize":1,"delayMs":50}'
anthropic "$dir/d1" --max-time 0.4 >/dev/null 2>&1
sleep 0.3
check "client leaving mid-delay: server still answers" \
    curl -sS -f -o /dev/null "$U/__health"
check "client leaving mid-delay: server process alive" kill -0 "$pid"

script '{"text":"one two three four","chunkSize":4,"holdAfter":2}'
anthropic "$dir/g1" >/dev/null 2>&1 &
gp=$!
for _ in $(seq 1 100); do
    [ "$(curl -sS "$U/__script" | jq .holding)" = 1 ] && break
    sleep 0.05
done
check "holdAfter: the reply waits after 2 text deltas" \
    sh -c "test \$(curl -sS '$U/__script' | jq .holding) = 1 && test \$(grep -c '\"text_delta\"' '$dir/g1') = 2 && ! grep -q message_stop '$dir/g1'"
check "POST /__release: the held reply goes on to its end" \
    sh -c "curl -sS -f -X POST '$U/__release' | jq -e '.released == 1' >/dev/null && for _ in \$(seq 1 100); do grep -q message_stop '$dir/g1' && exit 0; sleep 0.05; done; exit 1"
wait "$gp" 2>/dev/null
script '{"text":"one two","chunkSize":4,"holdAfter":1}'
anthropic "$dir/g2" --max-time 5 >/dev/null 2>&1
check "an open gate lets a later hold through; DELETE /__script closes it" \
    sh -c "grep -q message_stop '$dir/g2' && curl -sS -f -o /dev/null -X DELETE '$U/__script'"
script '{"text":"one two","chunkSize":4,"holdAfter":1}'
anthropic "$dir/g3" --max-time 1 >/dev/null 2>&1; rc=$?
check "the gate closed again: the next hold waits (curl timed out: exit 28, got $rc)" \
    sh -c "test $rc = 28 && ! grep -q message_stop '$dir/g3'"
curl -sS -f -o /dev/null -X DELETE "$U/__script"

# ---- prefill (a reply continued), a cut inside a tool call ------------------------------------

script '{"text":"Hello there, general reader."}'
curl -sS -N -o "$dir/p1" "$U/v1/messages" -H 'Content-Type: application/json' \
    -d '{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello there,"}]}'
check "prefill: the reply continues after it" \
    sh -c "grep -o '\"text\":\"[^\"]*\"' '$dir/p1' | sed 's/\"text\":\"//; s/\"\$//' | tr -d '\n' | grep -qx ' general reader.'"
script '{"text":"Hello there, general reader."}'
code=$(curl -sS -o "$dir/p2" -w '%{http_code}' "$U/v1/messages" -H 'Content-Type: application/json' \
    -d '{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"Hello there, "}]}]}')
check "prefill ending in whitespace (anthropic): 400" sh -c "test '$code' = 400 && grep -q 'trailing whitespace' '$dir/p2'"
script '{"text":"Hello there, general reader.","prefill":false}'
curl -sS -N -o "$dir/p3" "$U/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello there,"}]}'
check "prefill: false ignores it (the whole text)" grep -q '"content":"Hell"' "$dir/p3"
script '{"text":"Hello there, general reader."}'
curl -sS -N -o "$dir/p4" "$U/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello there,"}]}'
check "prefill (openai): the reply continues after it" sh -c "grep -q '\"content\":\" gen\"' '$dir/p4' && ! grep -q Hell '$dir/p4'"
script '{"text":"Let me call.","toolCalls":[{"name":"t","arguments":{"q":"a long argument"}}],"cutInTool":true}'
anthropic "$dir/p5" >/dev/null 2>&1; rc=$?
check "cutInTool: cut after the first argument piece" \
    sh -c "test $rc -ne 0 && test \$(grep -c input_json_delta '$dir/p5') = 1 && ! grep -q message_stop '$dir/p5'"

# ---- robustness -------------------------------------------------------------------------

code=$(curl -sS -o "$dir/r1" -w '%{http_code}' "$U/v1/messages" -d '{"model":"m"}')
check "stream missing: 400 JSON" sh -c "test '$code' = 400 && grep -q invalid_request_error '$dir/r1'"
code=$(curl -sS -o "$dir/r2" -w '%{http_code}' "$U/v1/nope")
check "unknown path: 404 JSON" sh -c "test '$code' = 404 && grep -q '\"error\"' '$dir/r2'"
head -c $((9 * 1024 * 1024)) /dev/zero | tr '\0' 'a' >"$dir/big"
code=$(curl -sS -o /dev/null -w '%{http_code}' "$U/v1/messages" --data-binary @"$dir/big" 2>/dev/null)
check "body over 8 MiB: 413 (got $code)" test "$code" = 413

# ---- recorded requests and the log ---------------------------------------------------------

curl -sS "$U/__requests" >"$dir/reqs"
check "/__requests records requests with path, headers, body, time" node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const key = process.argv[2];
    const a = r.find((x) => x.path === "/v1/messages" && x.body && x.body.model === "claude-test");
    const o = r.find((x) => x.path === "/v1/chat/completions" && x.body && x.body.model === "gpt-test");
    if (!a || !o) throw new Error("missing requests: " + r.length);
    if (a.headers["x-api-key"] !== key) throw new Error("x-api-key not as received");
    if (o.headers["authorization"] !== "Bearer " + key) throw new Error("authorization not as received");
    if (a.body.messages[0].content !== "hi there") throw new Error("body not recorded");
    if (!a.time || r.length < 15) throw new Error("time/count: " + r.length);
    if (r.some((x) => x.path.startsWith("/__"))) throw new Error("control requests recorded");
' "$dir/reqs" "$KEY"
curl -sS -f -X DELETE "$U/__requests" >/dev/null
check "DELETE /__requests clears" test "$(curl -sS "$U/__requests")" = "[]"
script '{"replies":[{"text":"x"},{"text":"y"}]}'
check "GET /__script shows 2 queued" sh -c "curl -sS '$U/__script' | grep -q '\"queued\":2'"
curl -sS -f -X DELETE "$U/__script" >/dev/null
check "DELETE /__script clears the queue" sh -c "curl -sS '$U/__script' | grep -q '\"queued\":0'"

check "log: one JSON line per request" node -e '
    const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n");
    const recs = lines.map((l) => JSON.parse(l));
    if (!recs.some((x) => x.path === "/v1/messages" && x.headers["x-api-key"] === "[redacted]"))
        throw new Error("no redacted x-api-key line");
    if (!recs.some((x) => x.path === "/v1/chat/completions" && x.headers["authorization"] === "[redacted]"))
        throw new Error("no redacted authorization line");
' "$dir/log"
check "log, stdout, stderr: the API key never appears" \
    sh -c "! grep -rqF '$KEY' '$dir/log' '$dir/stdout' '$dir/stderr'"

# ---- stop -------------------------------------------------------------------------------

kill "$pid"
stopped=no
for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || { stopped=yes; break; }
    sleep 0.05
done
wait "$pid" 2>/dev/null
check "exits on SIGTERM" test "$stopped" = yes
pid=

# --max-lifetime: a second instance exits by itself.
node "$here/mock-provider.mjs" --port 0 --max-lifetime 1 >/dev/null 2>&1 &
pid=$!
stopped=no
for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || { stopped=yes; break; }
    sleep 0.05
done
check "exits by itself after --max-lifetime" test "$stopped" = yes

echo "mock-provider: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
