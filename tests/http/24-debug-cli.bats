#!/usr/bin/env bats
# The dstream CLI as a debug tool (docs/cli.md): every command against the real stack
# (the server's own URL, auth on: DSTREAM_URL and DSTREAM_TOKEN), the runner and the
# mock provider; `streams list` offline on the database file. Output is plain when
# piped (as here); --json gives one JSON document a line; exit codes are documented.

load runner-helpers

setup_file() { rn_start && rn_cli_env; }
teardown_file() { rn_stop; }
setup() { rn_test_setup && D=$DS_BIN/dstream; }
teardown() { rn_test_teardown; }

# a chat session of a new agent; prints its id.
chat_session() {
    local agent
    agent=$(rn_agent anthropic claude-test-model)
    "$D" sessions create --agent "$agent" --id "${1:-$(ds_name chat)}"
}

@test "--help on every command: usage, exit 0; a wrong use: exit 2" {
    for c in sessions chat cancel answer events convo requests export search streams; do
        run --separate-stderr "$D" "$c" --help
        assert_success
        [[ "$output" == usage:* ]] || fail "$c --help: $output"
    done
    run "$D" chat
    assert_failure 2
    run "$D" events
    assert_failure 2
    run "$D" export x --format xml
    assert_failure 2
    run "$D" --help
    assert_success
}

@test "sessions create, list (status filter, pages, --json), show, state --at, fork --at, delete" {
    id=$(chat_session)
    run "$D" sessions
    assert_success
    assert_line --regexp "^$id +pending +agent-"
    [[ "$output" != *$'\033'* ]] || fail "colour when piped"
    run "$D" sessions list --status completed --json
    assert_success
    refute_output --partial "\"$id\""
    rn_script '{"text": "Hi there.", "usage": {"input": 4, "output": 2}}'
    run "$D" chat "$id" "hello"
    assert_success
    assert_output "Hi there."
    run "$D" sessions show "$id"
    assert_success
    assert_line --regexp '^status +completed$'
    assert_line --regexp '^usage +4 in, 2 out, \$'
    run "$D" sessions show "$id" --json
    jq -e '.status == "completed" and (.messages | length) == 2' <<<"$output"
    # Paged: one a page, --all follows the cursor.
    id2=$(chat_session)
    run --separate-stderr "$D" sessions --limit 1
    assert_success
    [ "${#lines[@]}" -eq 1 ]
    [ "$stderr" = "(more: --all)" ]
    run "$D" sessions --limit 1 --all --json
    assert_success
    jq -se "map(.id) | index(\"$id\") != null and index(\"$id2\") != null" <<<"$output"
    # The state after the user message only: no reply yet.
    at=$("$D" events "$id" --json | jq -r 'select(.type == "provider:request_started") | .offset')
    run "$D" sessions state "$id" --at "$at" --json
    assert_success
    jq -e '(.messages | length) == 1 and .messages[0].role == "user"' <<<"$output"
    run "$D" sessions fork "$id" --at "$at" --id "$(ds_name fork)"
    assert_success
    fork=$output
    run "$D" sessions show "$fork" --json
    jq -e --arg p "$id" --arg at "$at" '.parent == $p and .forkOffset == $at' <<<"$output"
    run "$D" sessions delete "$fork"
    assert_success
    run "$D" sessions show "$fork"
    assert_failure 3
}

@test "chat: the streamed answer printed; --queue answered after; --background no reply" {
    id=$(chat_session)
    rn_script '{"text": "Streaming <b>text</b> in small pieces.", "chunkSize": 3, "delayMs": 20, "thinking": "hm"}'
    run --separate-stderr "$D" chat "$id" "first"
    assert_success
    assert_output "Streaming <b>text</b> in small pieces."
    run "$D" chat "$id" "aside" --background
    assert_success
    assert_output --regexp '^[0-9]{16}_[0-9]{16}$'
    rn_script '{"text": "Queued answer."}'
    run "$D" chat "$id" "later" --queue
    assert_success
    assert_output "Queued answer."
    [ "$(rn_request_count)" = 2 ]
}

@test "chat: an interrupted reply exits 1; convo shows roles and markers" {
    id=$(chat_session)
    # The first reply waits after 3 deltas until the second chat interrupts it (which
    # ends the transfer and so the hold): it is still under way when that chat comes,
    # however slowly the CLI starts on a loaded machine.
    rn_script '{"replies": [{"text": "a slow reply that will be cut", "chunkSize": 1, "delayMs": 100, "holdAfter": 3}, {"text": "The second answer."}]}'
    "$D" chat "$id" "one" >"$BATS_TEST_TMPDIR/one.out" 2>"$BATS_TEST_TMPDIR/one.err" &
    pid=$!
    RN_BG_PIDS+=("$pid")
    ds_poll 10 rn_has_event "$id" '.type == "text:delta"'
    run "$D" chat "$id" "two"
    assert_success
    assert_output "The second answer."
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" = 1 ] || fail "the interrupted chat exited $rc: $(cat "$BATS_TEST_TMPDIR/one.err")"
    grep -q interrupted "$BATS_TEST_TMPDIR/one.err"
    "$D" chat "$id" "noted" --background >/dev/null
    run "$D" convo "$id"
    assert_success
    assert_line "user:"
    assert_line "one"
    assert_line --regexp '^assistant \[interrupted(: interrupted)?\]:$'
    assert_line "The second answer."
    assert_line "user [background]:"
    run "$D" convo "$id" --json
    jq -e '(.messages | length) == 5' <<<"$output"
}

# followed TEXT: the deltas captured by the --follow below add up to TEXT.
followed() { [ "$(jq -rsj 'map(.payload.text) | add // ""' "$BATS_TEST_TMPDIR/f")" = "$1" ]; }

@test "events: --type, --last, --around, --json, --follow" {
    id=$(chat_session)
    rn_script '{"text": "abcdefghij", "chunkSize": 2}'
    "$D" chat "$id" "go" >/dev/null
    run "$D" events "$id"
    assert_success
    assert_line --index 0 --regexp '^0000000000000000_0000000000000000 [0-9:.]+Z session:created'
    n=${#lines[@]}
    # Deltas written together may be one event: their text is what counts.
    run "$D" events "$id" --type text:delta --json
    assert_success
    jq -se 'length >= 1 and all(.type == "text:delta") and (map(.payload.text) | add) == "abcdefghij"' <<<"$output"
    run "$D" events "$id" --type text:delta
    assert_line --index 0 --regexp '^[0-9_]+ [0-9:.]+Z text:delta +\{"requestId":"req_'
    run "$D" events "$id" --type provider --json
    assert_success
    jq -se 'all(.type | startswith("provider:")) and length == 2' <<<"$output"
    run "$D" events "$id" --last 2 --json
    jq -se 'length == 2 and .[1].type == "provider:request_ended"' <<<"$output"
    mid=$("$D" events "$id" --json | jq -rs '.[2].offset')
    run "$D" events "$id" --around "$mid" --context 1 --json
    jq -se --arg m "$mid" 'length == 3 and .[1].offset == $m' <<<"$output"
    # --follow: what is already there, then the next reply as it comes.
    "$D" events "$id" --follow --type text:delta --json >"$BATS_TEST_TMPDIR/f" 2>/dev/null &
    RN_BG_PIDS+=("$!")
    ds_poll 10 followed abcdefghij
    rn_script '{"text": "KLMNOP", "chunkSize": 2}'
    rn_say "$id" "more"
    ds_poll 15 followed abcdefghijKLMNOP
    [ "$n" -ge 5 ]
}

@test "requests: attempts, outcome, tokens and cost; export jsonl and yaml; search" {
    id=$(chat_session)
    rn_script '{"replies": [{"status": 500}, {"text": "needle-in-reply", "chunkSize": 100, "usage": {"input": 100, "output": 10}}]}'
    run "$D" chat "$id" "find the haystack-word"
    assert_success
    run "$D" requests "$id"
    assert_success
    assert_line --index 0 --regexp '^req_[a-z0-9]+ +1 +anthropic +claude-test-model +retried '
    assert_line --index 1 --regexp '^req_[a-z0-9]+ +2 +anthropic +claude-test-model +ended +[0-9]+ +100 +10 +0\.000450$'
    assert_line --index 2 "2 requests, \$0.000450"
    run "$D" requests "$id" --json
    jq -se 'length == 2 and .[1].usage.inputTokens == 100 and .[0].cause == "server_error"' <<<"$output"
    "$D" export "$id" >"$BATS_TEST_TMPDIR/e.jsonl"
    [ "$(wc -l <"$BATS_TEST_TMPDIR/e.jsonl")" = "$(rn_events "$id" | jq length)" ]
    jq -se "(.[0].type == \"session:created\") and all(.offset | test(\"^[0-9]{16}_[0-9]{16}$\"))" "$BATS_TEST_TMPDIR/e.jsonl"
    "$D" export "$id" --format yaml >"$BATS_TEST_TMPDIR/e.yaml"
    python3 -c 'import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]
want = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if docs == want else 1)' "$BATS_TEST_TMPDIR/e.yaml" "$BATS_TEST_TMPDIR/e.jsonl"
    run "$D" search haystack-word
    assert_success
    assert_line --regexp "^$id [0-9_]+ [0-9:.]+Z message:user"
    run "$D" search needle-in-reply --json
    jq -se --arg id "$id" 'length == 1 and .[0].session == $id and .[0].event.type == "text:delta"' <<<"$output"
    run "$D" search "no-such-text-anywhere-$$"
    assert_failure 3
}

@test "answer: a human checkpoint; cancel: a running session" {
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, phases: [
        {name: "ask", steps: [{kind: "human", id: "pick", input: "choice", options: ["red", "blue"],
            prompt: "Which?", update: {colour: "$response"}}], transitions: [{to: "done"}]},
        {name: "done", terminal: true, steps: [{kind: "update", set: {finished: true}}]}]}')"
    id=$("$D" sessions create --workflow "$wf")
    rn_wait "$id" '.status == "awaiting_input"'
    run "$D" sessions show "$id"
    assert_line --partial '"interactionId":"pick"'
    run "$D" answer "$id" pick purple
    assert_failure 5
    run "$D" answer "$id" pick '"blue"'
    assert_success
    rn_wait "$id" '.status == "completed" and .state.colour == "blue"'
    id=$(chat_session)
    # The reply waits after 3 deltas until the cancel ends the transfer (and so the
    # hold): it is still running when the cancel comes.
    rn_script '{"text": "slow slow slow slow slow", "chunkSize": 1, "delayMs": 200, "holdAfter": 3}'
    rn_say "$id" "talk"
    ds_poll 10 rn_has_event "$id" '.type == "text:delta"'
    run "$D" cancel "$id"
    assert_success
    rn_wait "$id" '.status == "cancelled"'
}

@test "chat: a tool call waiting for approval ends the wait, saying how to answer; answer false goes on" {
    agent=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$agent" '{name: $n,
        provider: "anthropic", model: "claude-test-model", approval: {word_count: "required"},
        tools: [{name: "word_count", inputSchema: {type: "object"}}]}')"
    assert_status 201
    id=$("$D" sessions create --agent "$agent")
    rn_script '{"replies": [{"text": "Counting.", "toolCalls": [{"id": "call_wc", "name": "word_count", "arguments": {"text": "a b"}}],
        "usage": {"input": 1, "output": 1}}, {"text": "Not counted.", "usage": {"input": 1, "output": 1}}]}'
    run --separate-stderr timeout 30 "$D" chat "$id" "count a b"
    assert_success
    assert_output "Counting."
    [[ "$stderr" == *"Run the tool word_count with {\"text\":\"a b\"}?"* ]]
    [[ "$stderr" == *"dstream answer $id call_wc true|false"* ]]
    rn_wait "$id" '.status == "awaiting_input" and .pendingInput.interactionId == "call_wc"'
    run "$D" sessions show "$id"
    assert_line --partial '"interactionId":"call_wc"'
    run "$D" answer "$id" call_wc '"yes"'
    assert_failure 5
    run "$D" answer "$id" call_wc false
    assert_success
    rn_wait "$id" '.status == "completed" and .messages[-1].content == "Not counted."'
}

@test "streams: list offline on the database, head and delete over HTTP" {
    s=$(ds_name plain)
    req PUT "/v1/stream/$s" -H 'Content-Type: text/plain'
    ds_append "/v1/stream/$s" text/plain 'hello'
    run "$D" --db "$DS_DB" streams list --prefix "$s"
    assert_success
    assert_output --regexp "^$s +text/plain +1 +5 *$"
    run "$D" --db "$DS_DB" streams --json --prefix "$s"
    jq -e '.messages == 1 and .bytes == 5 and .closed == false' <<<"$output"
    run "$D" streams head "$s"
    assert_success
    assert_output --regexp "^$s next offset [0-9]{16}_[0-9]{16}$"
    run "$D" streams delete "$s"
    assert_success
    run "$D" streams head "$s"
    assert_failure 3
}

@test "one rule: with DSTREAM_TOKEN and DSTREAM_URL, and a DSTREAM_DB that is not there, every command asks the server; --db reads the database" {
    id=$(chat_session)
    rn_script '{"text": "both-ways", "chunkSize": 64}'   # one delta: search matches within an event
    "$D" chat "$id" "hello" >/dev/null
    s=$(ds_name both)
    req PUT "/v1/stream/$s" -H 'Content-Type: application/json'
    export DSTREAM_DB=$BATS_TEST_TMPDIR/not-there.db
    # Over HTTP: none of these looks for a database (main: "no such database ... migrate").
    run --separate-stderr "$D" sessions --json
    assert_success
    jq -se --arg id "$id" 'map(.id) | index($id) != null' <<<"$output" || fail "sessions: $output"
    run --separate-stderr "$D" sessions list --status completed --json
    jq -se --arg id "$id" 'map(.id) | index($id) != null' <<<"$output" || fail "sessions list: $output $stderr"
    run --separate-stderr "$D" sessions show "$id" --json
    assert_success
    jq -e --arg id "$id" '.id == $id' <<<"$output"
    run --separate-stderr "$D" append "$s" <<<'{"a":1}'
    assert_success
    run --separate-stderr "$D" tail --no-follow "$s"
    assert_success
    assert_output '{"a":1}'
    for args in "events $id" "convo $id" "requests $id" "export $id" "streams head $s" "search both-ways"; do
        # shellcheck disable=SC2086 # args is words
        run --separate-stderr "$D" $args
        assert_success
        [ -n "$output" ] || fail "$args: nothing"
    done
    [ ! -e "$DSTREAM_DB" ] || fail "a database was made"
    # streams list has no HTTP form: it says --db.
    run --separate-stderr "$D" streams list
    assert_failure 2
    [[ $stderr == *"--db"* ]] || fail "$stderr"
    # With --db: the database, the same answers (sessions list, show, tail, append).
    run --separate-stderr "$D" --db "$DS_DB" sessions --json
    assert_success
    jq -se --arg id "$id" 'map(.id) | index($id) != null' <<<"$output" || fail "--db sessions: $output"
    run --separate-stderr "$D" --db "$DS_DB" sessions show "$id" --json
    jq -e --arg id "$id" '.id == $id' <<<"$output"
    echo '{"a":2}' | "$D" --db "$DS_DB" append "$s" >/dev/null
    run "$D" --db "$DS_DB" tail --no-follow "$s"
    assert_output $'{"a":1}\n{"a":2}'
    run "$D" tail --no-follow "$s"
    assert_output $'{"a":1}\n{"a":2}'
    run --separate-stderr "$D" --db "$DS_DB" streams list --prefix "$s"
    assert_success
    [[ $output == "$s "* ]] || fail "$output"
    # And an offline --db that is not there is the database's error, not the server's.
    run --separate-stderr "$D" --db sessions
    assert_failure 1
    [[ $stderr == *"not-there.db: no such database"* ]] || fail "$stderr"
}

@test "exit codes: 4 without a valid token, 4 for a scope that does not allow it, 1 when nothing answers" {
    run env DSTREAM_TOKEN= "$D" sessions
    assert_failure 4
    assert_output --partial "HTTP 401"
    rt=$("$D" --db "$DS_DB" token create --name "cli-ro-$$" --scope sessions:read | tail -n 1)
    run env DSTREAM_TOKEN="$rt" "$D" sessions create --agent nobody
    assert_failure 4
    assert_output --partial "HTTP 403"
    port=$("$D" free-port)
    run env DSTREAM_URL="http://127.0.0.1:$port" "$D" sessions
    assert_failure 1
    run "$D" --url "http://127.0.0.1:$port" --token x sessions
    assert_failure 1
    run "$D" sessions --url "http://127.0.0.1:$port" --token x
    assert_failure 1
}

@test "offline on the database (--db): events, requests and export as over HTTP, also of a fork" {
    id=$(chat_session)
    rn_script '{"text": "offline check", "usage": {"input": 3, "output": 2}}'
    "$D" chat "$id" "hi" >/dev/null
    at=$("$D" events "$id" --json | jq -r 'select(.type == "provider:request_started") | .offset')
    fork=$("$D" sessions fork "$id" --at "$at")
    rn_wait "$fork" '.status == "completed"'   # the runner answers the fork's message
    for s in "$id" "$fork"; do
        "$D" export "$s" >"$BATS_TEST_TMPDIR/http"
        env -u DSTREAM_URL "$D" --db "$DS_DB" export "$s" >"$BATS_TEST_TMPDIR/db"
        diff "$BATS_TEST_TMPDIR/http" "$BATS_TEST_TMPDIR/db"
    done
    run "$D" --db "$DS_DB" requests "$id"
    assert_success
    assert_line "1 requests, \$0.000039"
    run "$D" --db "$DS_DB" events "$id" --type text:delta --json
    jq -se '(map(.payload.text) | add) == "offline check"' <<<"$output"
    run "$D" --db "$DS_DB" events "no-such-$$"
    assert_failure 3
    run "$D" --db "$DS_DB" convo "no-such-$$"
    assert_failure 3
}

@test "offline on the database (--db): sessions show and state --at, search and streams head say what the server says" {
    id=$(chat_session)
    rn_script '{"text": "offline-needle answer", "chunkSize": 100}'
    "$D" chat "$id" "hi" >/dev/null
    # The reply printed, the runner may still commit the session's end: compare after it.
    rn_wait "$id" '.status == "completed"'
    at=$("$D" events "$id" --json | jq -r 'select(.type == "provider:request_started") | .offset')
    for args in "sessions show $id" "sessions state $id --at $at" "sessions state $id" "search offline-needle" \
        "streams head sessions/$id"; do
        # shellcheck disable=SC2086 # args is words
        "$D" $args --json | jq -S . >"$BATS_TEST_TMPDIR/http"
        # shellcheck disable=SC2086
        env -u DSTREAM_URL "$D" --db "$DS_DB" $args --json 2>"$BATS_TEST_TMPDIR/err" | jq -S . >"$BATS_TEST_TMPDIR/db"
        [ -s "$BATS_TEST_TMPDIR/db" ] && diff "$BATS_TEST_TMPDIR/http" "$BATS_TEST_TMPDIR/db" ||
            fail "$args differs: $(cat "$BATS_TEST_TMPDIR/http") / $(cat "$BATS_TEST_TMPDIR/db" "$BATS_TEST_TMPDIR/err")"
        # shellcheck disable=SC2086
        "$D" $args >"$BATS_TEST_TMPDIR/http"
        # shellcheck disable=SC2086
        env -u DSTREAM_URL "$D" --db "$DS_DB" $args >"$BATS_TEST_TMPDIR/db"
        diff "$BATS_TEST_TMPDIR/http" "$BATS_TEST_TMPDIR/db" || fail "$args differs as text"
    done
    run env -u DSTREAM_URL "$D" --db "$DS_DB" sessions state "$id" --at "$at" --json
    jq -e '(.messages | length) == 1 and .messages[0].role == "user"' <<<"$output"
    # --db alone is $DSTREAM_DB's database.
    run env -u DSTREAM_URL DSTREAM_DB="$DS_DB" "$D" --db sessions show "$id" --json
    assert_success
    jq -e --arg id "$id" '.id == $id and .status == "completed"' <<<"$output"
    # Without --db it asks the server, $DSTREAM_DB or not (this test said before that
    # sessions show read $DSTREAM_DB without a DSTREAM_URL: the rule is now one, --db
    # alone is offline); a server not there is said so, not "dstream migrate".
    run --separate-stderr env DSTREAM_URL="http://127.0.0.1:$("$D" free-port)" DSTREAM_DB="$DS_DB" "$D" sessions show "$id"
    assert_failure 1
    [[ $stderr == *"cannot reach the server at http://127.0.0.1:"*"--db"* && $stderr != *migrate* ]] || fail "$stderr"
    # The server's mistakes, the same offline: an offset beyond the events is 5, an
    # unknown session 3, search with no match 3; create/fork/delete ask the server.
    run env -u DSTREAM_URL "$D" --db "$DS_DB" sessions state "$id" --at 0000000000009999_0000000000099999
    assert_failure 5
    run env -u DSTREAM_URL "$D" --db "$DS_DB" sessions show "no-such-$$"
    assert_failure 3
    run env -u DSTREAM_URL "$D" --db "$DS_DB" search "no-such-text-$$"
    assert_failure 3
    run env -u DSTREAM_URL "$D" --db "$DS_DB" sessions delete "$id"
    assert_failure 2
    run "$D" sessions show "$id"
    assert_success
}

@test "offline on the database (--db): convo as over HTTP; events --follow sees new events as they are committed" {
    id=$(chat_session)
    # The first reply waits after 3 deltas until the second chat interrupts it (which
    # ends the hold): it is still under way when that chat comes.
    rn_script '{"replies": [{"text": "a slow reply that will be cut", "chunkSize": 1, "delayMs": 100, "holdAfter": 3}, {"text": "The second answer."}]}'
    "$D" chat "$id" "one" >/dev/null 2>&1 &
    RN_BG_PIDS+=("$!")
    ds_poll 10 rn_has_event "$id" '.type == "text:delta"'
    "$D" chat "$id" "two" >/dev/null || true
    "$D" chat "$id" "noted" --background >/dev/null
    rn_wait "$id" '.status == "completed"'
    "$D" convo "$id" >"$BATS_TEST_TMPDIR/http"
    env -u DSTREAM_URL "$D" --db "$DS_DB" convo "$id" >"$BATS_TEST_TMPDIR/db"
    diff "$BATS_TEST_TMPDIR/http" "$BATS_TEST_TMPDIR/db"
    grep -qx 'user \[background\]:' "$BATS_TEST_TMPDIR/db"
    grep -Eqx 'assistant \[interrupted(: interrupted)?\]:' "$BATS_TEST_TMPDIR/db"
    run env -u DSTREAM_URL "$D" --db "$DS_DB" convo "$id" --json
    assert_success
    jq -e '(.messages | length) == 5 and (.queued | length) == 0' <<<"$output"
    # --follow on the file: what is there, then each event as the runner commits it,
    # with no server asked (DSTREAM_URL points at nothing).
    port=$("$D" free-port)
    env DSTREAM_URL="http://127.0.0.1:$port" "$D" --db "$DS_DB" events "$id" --follow --type text:delta --json \
        >"$BATS_TEST_TMPDIR/f" 2>"$BATS_TEST_TMPDIR/f.err" &
    fpid=$!
    RN_BG_PIDS+=("$fpid")
    n0() { [ "$(jq -rsj 'map(.payload.text) | add // ""' "$BATS_TEST_TMPDIR/f")" = "$1" ]; }
    before=$("$D" events "$id" --type text:delta --json | jq -rsj 'map(.payload.text) | add')
    ds_poll 10 n0 "$before"
    rn_script '{"text": "FOLLOWED-OFFLINE", "chunkSize": 4}'
    rn_say "$id" "more"
    ds_poll 15 n0 "${before}FOLLOWED-OFFLINE" || fail "followed: $(cat "$BATS_TEST_TMPDIR/f" "$BATS_TEST_TMPDIR/f.err")"
    # Ctrl-C ends it with exit 0.
    kill -INT "$fpid"
    rc=0
    wait "$fpid" || rc=$?
    [ "$rc" = 0 ] || fail "events --follow exited $rc after SIGINT: $(cat "$BATS_TEST_TMPDIR/f.err")"
}
