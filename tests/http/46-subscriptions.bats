#!/usr/bin/env bats
# Subscriptions as an operator meets them (docs/subscriptions.md): a webhook wake
# delivered signed with the key of the JWK Set and acked by {"done": true}; the
# runner killed (kill -9) between a stream change and its delivery, in three ways,
# and the delivery still made by the next runner; the webhook URLs the operator's
# DSTREAM_WEBHOOK_ALLOW refuses (special addresses however spelt, http off loopback,
# hosts not listed), a name resolving to a refused address refused when the runner
# connects, a redirect not followed; a receiver whose lease runs out woken again; a
# pull-wake change made while the runner is down announced on the wake stream once it
# is back, then claimed and acked.
#
# The receivers (tests/http/tools/webhook-receiver.mjs) listen on 127.0.0.2, the only
# loopback address the stack allows (with this machine's host name, for the
# connection-time test); a trap on 127.0.0.1 must never see a connection. Waits are
# polls with deadlines.

load runner-helpers

RECEIVER=$DS_ROOT/tests/http/tools/webhook-receiver.mjs

setup_file() {
    command -v node >/dev/null || { echo "node is not installed (make deps)" >&2; return 1; }
    ds_stack_start DSTREAM_WEBHOOK_ALLOW="127.0.0.2,$(hostname)" DSTREAM_WEBHOOK_TIMEOUT_MS=1500 || return 1
    rn_runner_wait_started 1
}
teardown_file() { ds_stack_stop; }

setup() {
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
    rn_runner_alive || rn_runner_start
}
teardown() { ds_bg_stop; }

# ---- helpers ------------------------------------------------------------------------

# receiver NAME HOST [PORT]: start a receiver with its files in $T/NAME; its URL in
# $T/NAME/url.
receiver() {
    mkdir -p "$T/$1"
    spawn "$T/$1/log" node "$RECEIVER" "$2" "$T/$1" ${3:+"$3"}
    eval "${1}_PID=$LAST_PID"
    ds_poll 10 test -s "$T/$1/url"
}

# answer NAME JSON: what receiver NAME answers from now on.
answer() { printf '%s\n' "$2" >"$T/$1/response.json"; }

received() { [ -f "$T/$1/requests.jsonl" ] && wc -l <"$T/$1/requests.jsonl" || echo 0; }
_received_ge() { [ "$(received "$1")" -ge "$2" ]; }

# sub_put ID JSON: PUT the subscription.
sub_put() { req PUT "/v1/stream/__ds/subscriptions/$1" -H 'Content-Type: application/json' --data-binary "$2"; }

# sub_is ID JQ: GET the subscription and test it (for ds_poll).
sub_is() {
    req GET "/v1/stream/__ds/subscriptions/$1"
    [ "$status_code" = 200 ] && jq -e "$2" <<<"$body" >/dev/null
}

# tail_of PATH: the stream's Stream-Next-Offset.
tail_of() {
    req HEAD "/v1/stream/$1"
    header Stream-Next-Offset
}

# body_of NAME N: the JSON body of receiver NAME's Nth request (1-based).
body_of() { sed -n "${2}p" "$T/$1/requests.jsonl" | jq -r .body; }

# ---- tests --------------------------------------------------------------------------

# First in the file: no subscription exists yet. The runner, finding none when streams
# change, believes it for a while without asking again (runner/deliver.c); a
# subscription made meanwhile, and a change made right after it and then none, still
# get their wake: the look after that while looks at every subscription.
@test "a subscription made just after the runner found none, then one change: its wake comes" {
    req PUT /v1/stream/nw/other -H 'Content-Type: application/json' --data-binary '{"n": 0}'
    assert_status 201
    req POST /v1/stream/nw/other -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    assert_status 204
    req PUT /v1/stream/nw/jobs/1 -H 'Content-Type: application/json' --data-binary '{"n": 0}'
    assert_status 201
    req PUT /v1/stream/nw/wake -H 'Content-Type: application/json' --data-binary '[]'
    assert_status 201
    sub_put n1 '{"type": "pull-wake", "pattern": "nw/jobs/*", "wake_stream": "nw/wake", "lease_ttl_ms": 5000}'
    assert_status 201
    req POST /v1/stream/nw/jobs/1 -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    assert_status 204
    _woken() { req GET "/v1/stream/nw/wake?offset=-1" && jq -e 'map(select(.subscription_id == "n1" and .type == "wake" and .stream == "nw/jobs/1")) | length == 1' <<<"$body" >/dev/null; }
    ds_poll 10 _woken || fail "no wake; runner log: $(tail -5 "$DS_DIR/logs/runner.log")"
    req DELETE /v1/stream/__ds/subscriptions/n1
    [ "$status_code" = 200 ] || [ "$status_code" = 204 ]
}

@test "a webhook wake is signed with the key of the JWK Set; {\"done\": true} acks its snapshot" {
    receiver r 127.0.0.2
    answer r '{"body": {"done": true}}'
    sub_put t1 "$(jq -nc --arg u "$(cat "$T/r/url")/hook" '{type: "webhook", pattern: "t1/*", webhook: {url: $u}}')"
    assert_status 201
    assert_body_json '.webhook.signing.alg == "ed25519" and (.webhook.signing.kid | startswith("ds_"))'
    req PUT /v1/stream/t1/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    assert_status 201
    ds_poll 10 _received_ge r 1 || fail "no delivery; runner log: $(tail -5 "$DS_DIR/logs/runner.log")"
    sed -n 1p "$T/r/requests.jsonl" >"$T/req.json"
    jq -e '.path == "/hook" and (.signature | test("^t=[0-9]+,kid=ds_[^,]+,ed25519=[A-Za-z0-9_-]+$"))' "$T/req.json"
    body_of r 1 | jq -e '.subscription_id == "t1" and .generation == 1 and (.wake_id | startswith("w_"))
        and (.streams[] | select(.path == "t1/a") | .has_pending)
        and (.callback_url | endswith("/v1/stream/__ds/subscriptions/t1/callback"))' >/dev/null
    req GET /v1/stream/__ds/jwks.json
    assert_status 200
    printf '%s' "$body" >"$T/jwks.json"
    node -e '
        const fs = require("fs"), crypto = require("crypto");
        const jwks = JSON.parse(fs.readFileSync(process.argv[1])), r = JSON.parse(fs.readFileSync(process.argv[2]));
        const [, t, kid, sig] = r.signature.match(/^t=(\d+),kid=([^,]+),ed25519=(.+)$/);
        const key = crypto.createPublicKey({ key: jwks.keys.find((k) => k.kid === kid), format: "jwk" });
        const ok = crypto.verify(null, Buffer.from(t + "." + r.body), key, Buffer.from(sig, "base64url"));
        const tampered = crypto.verify(null, Buffer.from(t + "." + r.body + " "), key, Buffer.from(sig, "base64url"));
        process.exit(ok && !tampered && Math.abs(Date.now() / 1000 - t) < 300 ? 0 : 1);
    ' "$T/jwks.json" "$T/req.json"
    tail=$(tail_of t1/a)
    ds_poll 10 sub_is t1 "[.streams[] | select(.path == \"t1/a\") | .acked_offset == \"$tail\"] | any"
}

@test "webhook URLs the operator does not allow are refused (400 WEBHOOK_URL_REJECTED)" {
    local u
    for u in http://10.0.0.1/hook https://169.254.169.254/latest http://127.0.0.1:9/x http://2130706433:9/x \
        http://0x7f000001:9/x http://127.1:9/x "http://[::1]:9/x" "https://[::ffff:127.0.0.1]:9/x" \
        http://localhost:9/x https://192.168.1.10/x https://example.com/x http://example.com/x \
        ftp://127.0.0.2/x http://user:pw@127.0.0.2:9/x "http://$(hostname):9/x" not-a-url; do
        sub_put refused "$(jq -nc --arg u "$u" '{type: "webhook", pattern: "r/*", webhook: {url: $u}}')"
        [ "$status_code" = 400 ] || fail "$u -> $status_code $body"
        assert_body_json '.error.code == "WEBHOOK_URL_REJECTED"'
    done
    req GET /v1/stream/__ds/subscriptions/refused
    assert_status 404
    # What the list allows: the listed loopback address (http, its development
    # exception) and the listed name over https.
    sub_put ok1 '{"type": "webhook", "pattern": "r/*", "webhook": {"url": "http://127.0.0.2:9/x"}}'
    assert_status 201
    sub_put ok2 "$(jq -nc --arg u "https://$(hostname):9/x" '{type: "webhook", pattern: "r/*", webhook: {url: $u}}')"
    assert_status 201
    req DELETE /v1/stream/__ds/subscriptions/ok1
    req DELETE /v1/stream/__ds/subscriptions/ok2
}

@test "a name resolving to a refused address is refused when the runner connects; redirects are not followed" {
    local addr
    receiver trap 127.0.0.1
    receiver hop 127.0.0.2
    answer hop "$(jq -nc --arg l "$(cat "$T/trap/url")/stolen" '{status: 302, location: $l}')"
    sub_put redirect "$(jq -nc --arg u "$(cat "$T/hop/url")/hook" '{type: "webhook", pattern: "rd/*", webhook: {url: $u}}')"
    assert_status 201
    req PUT /v1/stream/rd/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    ds_poll 10 _received_ge hop 1
    ds_poll 10 sub_is redirect '.status == "failed"'
    addr=$(getent ahosts "$(hostname)" | awk 'NR == 1 { print $1 }')
    case $addr in
    127.0.0.1)
        # A name, so the pool cannot judge it; the runner checks the address it resolved.
        sub_put named "$(jq -nc --arg u "https://$(hostname):$(cut -d: -f3 "$T/trap/url")/hook" \
            '{type: "webhook", pattern: "nm/*", webhook: {url: $u}}')"
        assert_status 201
        req PUT /v1/stream/nm/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
        ds_poll 10 sub_is named '.status == "failed"'
        ds_poll 10 grep -q "subscription named: webhook delivery failed: refused: .*loopback" "$DS_DIR/logs/runner.log"
        ;;
    *) echo "# $(hostname) resolves to $addr, not 127.0.0.1: the connection-time check is not exercised" >&3 ;;
    esac
    [ ! -e "$T/trap/connections" ] || fail "the trap was reached: $(cat "$T/trap/requests.jsonl" 2>/dev/null)"
    req DELETE /v1/stream/__ds/subscriptions/redirect
    req DELETE /v1/stream/__ds/subscriptions/named
}

@test "kill -9 with the change made while the runner is down: the next runner delivers it" {
    receiver r 127.0.0.2
    answer r '{"body": {"done": true}}'
    sub_put k1 "$(jq -nc --arg u "$(cat "$T/r/url")/hook" '{type: "webhook", pattern: "k1/*", webhook: {url: $u}}')"
    assert_status 201
    rn_runner_signal KILL
    req PUT /v1/stream/k1/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    assert_status 201
    [ "$(received r)" = 0 ]
    rn_runner_start
    ds_poll 10 _received_ge r 1
    body_of r 1 | jq -e '.subscription_id == "k1" and ([.streams[] | select(.path == "k1/a")] | length == 1)' >/dev/null
    tail=$(tail_of k1/a)
    ds_poll 10 sub_is k1 "[.streams[] | select(.path == \"k1/a\") | .acked_offset == \"$tail\"] | any"
}

@test "kill -9 while a delivery is in flight: the next runner makes the same wake again" {
    receiver r 127.0.0.2
    answer r '{"hold": true}'
    sub_put k2 "$(jq -nc --arg u "$(cat "$T/r/url")/hook" '{type: "webhook", pattern: "k2/*", webhook: {url: $u}}')"
    assert_status 201
    req PUT /v1/stream/k2/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    ds_poll 10 _received_ge r 1
    rn_runner_signal KILL                  # the receiver holds the request: no answer came
    answer r '{"body": {"done": true}}'
    rn_runner_start
    ds_poll 15 _received_ge r 2
    [ "$(body_of r 1 | jq -r .wake_id)" = "$(body_of r 2 | jq -r .wake_id)" ]
    [ "$(body_of r 2 | jq .generation)" = 1 ]
    tail=$(tail_of k2/a)
    ds_poll 10 sub_is k2 "[.streams[] | select(.path == \"k2/a\") | .acked_offset == \"$tail\"] | any"
}

@test "kill -9 after a failed delivery: its retry schedule is kept and the next runner delivers" {
    local port
    receiver gone 127.0.0.2
    port=$(cut -d: -f3 "$T/gone/url")
    kill "$gone_PID"
    ds_poll 10 rn_gone "$gone_PID"
    sub_put k3 "$(jq -nc --arg u "$(cat "$T/gone/url")/hook" '{type: "webhook", pattern: "k3/*", webhook: {url: $u}}')"
    assert_status 201
    req PUT /v1/stream/k3/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    ds_poll 10 sub_is k3 '.status == "failed"'
    rn_runner_signal KILL
    receiver back 127.0.0.2 "$port"
    answer back '{"body": {"done": true}}'
    rn_runner_start
    ds_poll 15 _received_ge back 1
    ds_poll 10 sub_is k3 '.status == "active" and ([.streams[] | select(.path == "k3/a") | .acked_offset != "0000000000000000_0000000000000000"] | any)'
}

@test "a receiver that takes the wake but never finishes it loses it when its lease runs out; a new wake follows" {
    receiver r 127.0.0.2
    answer r '{"body": {}}'
    sub_put l1 "$(jq -nc --arg u "$(cat "$T/r/url")/hook" '{type: "webhook", pattern: "l1/*", webhook: {url: $u}, lease_ttl_ms: 1000}')"
    assert_status 201
    req PUT /v1/stream/l1/a -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    ds_poll 10 _received_ge r 2
    [ "$(body_of r 1 | jq .generation)" = 1 ]
    [ "$(body_of r 2 | jq .generation)" = 2 ]
    # The first wake's token is fenced now.
    body_of r 1 >"$T/b1.json"
    req POST "/v1/stream/__ds/subscriptions/l1/callback" -H 'Content-Type: application/json' \
        -H "Authorization: Bearer $(jq -r .callback_token "$T/b1.json")" \
        --data-binary "$(jq -c '{wake_id, generation, done: true}' "$T/b1.json")"
    assert_status 409
    assert_body_json '.error.code == "FENCED"'
    req DELETE /v1/stream/__ds/subscriptions/l1
    assert_status 204
}

@test "pull-wake: a change made while the runner is down gets its wake message when the runner is back; claim, ack" {
    local tok wake gen tail
    req PUT /v1/stream/pw/wake -H 'Content-Type: application/json' --data-binary '[]'
    assert_status 201
    sub_put p1 '{"type": "pull-wake", "pattern": "pw/jobs/*", "wake_stream": "pw/wake", "lease_ttl_ms": 5000}'
    assert_status 201
    rn_runner_signal KILL
    req PUT /v1/stream/pw/jobs/1 -H 'Content-Type: application/json' --data-binary '{"n": 1}'
    assert_status 201
    req GET "/v1/stream/pw/wake?offset=-1"
    assert_body '[]'
    rn_runner_start
    _woken() { req GET "/v1/stream/pw/wake?offset=-1" && jq -e 'map(select(.subscription_id == "p1" and .type == "wake" and .stream == "pw/jobs/1")) | length == 1' <<<"$body" >/dev/null; }
    ds_poll 10 _woken
    req POST /v1/stream/__ds/subscriptions/p1/claim -H 'Content-Type: application/json' --data-binary '{"worker": "w1"}'
    assert_status 200
    tok=$(jq -r .token <<<"$body")
    wake=$(jq -r .wake_id <<<"$body")
    gen=$(jq -r .generation <<<"$body")
    tail=$(jq -r '.streams[] | select(.path == "pw/jobs/1") | .tail_offset' <<<"$body")
    req POST /v1/stream/__ds/subscriptions/p1/claim -H 'Content-Type: application/json' --data-binary '{"worker": "w2"}'
    assert_status 409
    assert_body_json '.error.code == "ALREADY_CLAIMED" and .error.current_holder == "w1"'
    req POST /v1/stream/__ds/subscriptions/p1/ack -H 'Content-Type: application/json' -H "Authorization: Bearer $tok" \
        --data-binary "$(jq -nc --arg w "$wake" --argjson g "$gen" --arg o "$tail" \
            '{wake_id: $w, generation: $g, acks: [{stream: "pw/jobs/1", offset: $o}], done: true}')"
    assert_status 200
    assert_body_json '. == {"ok": true, "next_wake": false}'
    ds_poll 5 sub_is p1 "[.streams[] | select(.path == \"pw/jobs/1\") | .acked_offset == \"$tail\"] | any"
    req HEAD /v1/stream/__ds/subscriptions/p1
    assert_status 200
    [ ! -s "$DS_BODY" ]
    req HEAD /v1/stream/__ds/subscriptions/nope
    assert_status 404
}
