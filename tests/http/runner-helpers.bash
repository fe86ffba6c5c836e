# shellcheck shell=bash disable=SC2154 # status_code, body: set by req (helpers.bash)
# Helpers for the runner suites: a mock provider (tests/mock-provider) and the stack
# (nginx + pool + dstream-runner) with the runner pointed at it.
#
# In a .bats file:
#
#     load runner-helpers
#     setup_file()    { rn_start; }
#     teardown_file() { rn_stop; }
#     setup()         { rn_test_setup; }
#     teardown()      { rn_test_teardown; }
#
# rn_start exports RN_MOCK (the mock's base URL), RN_KEY / RN_OKEY (distinctive
# Anthropic / OpenAI keys the runner was given), RN_PRICING (the pricing file),
# RN_PROVIDERS (the operator's providers file: both built-in names on the mock) and
# everything ds_stack_start exports. Processes are stopped by the PIDs recorded
# when they were started, never by name.

load helpers

RN_MOCK_JS=$DS_ROOT/tests/mock-provider/mock-provider.mjs

# Prices (USD per million tokens) of the models the suites use.
RN_PRICES='{"claude-test-model": {"input": 3, "output": 15}, "gpt-test-model": {"input": 2.5, "output": 10}}'

_rn_hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }

# rn_start [NAME=VALUE ...]: start the mock provider, then the stack with the runner
# using it (extra settings are passed to ds_stack_start). RN_EXTRA_PROVIDERS, if set,
# is a JSON object of more providers for the file (it may use the mock's URL as
# $RN_MOCK_URL, replaced when the file is written).
rn_start() {
    command -v node >/dev/null || { echo "node is not installed (make deps)" >&2; return 1; }
    [ -x "$DS_BIN/dstream-runner" ] || { echo "build first: make (B=$DS_B)" >&2; return 1; }
    RN_TMP=$(mktemp -d -t dstream-runner.XXXXXX)
    export RN_TMP
    rn_mock_start || return 1
    # A short retry base: a delay of about 1000 ms can only come from Retry-After.
    ds_stack_start DSTREAM_PROVIDERS="$RN_PROVIDERS" DSTREAM_PRICING="$RN_PRICING" \
        ANTHROPIC_API_KEY="$RN_KEY" OPENAI_API_KEY="$RN_OKEY" DSTREAM_RETRY_BASE_MS=100 "$@" || return 1
    rn_runner_wait_started 1
}

# rn_mock_start: start the mock provider in $RN_TMP and write the files a runner
# using it reads; exports RN_MOCK_PID, RN_MOCK, RN_KEY, RN_OKEY, RN_PRICING and
# RN_PROVIDERS (see rn_start; 70-hosts gives them to several stacks).
rn_mock_start() {
    rn_mock_spawn "$RN_TMP/mock" || return 1
    RN_MOCK_PID=$RN_SPAWNED_PID
    RN_MOCK=$RN_SPAWNED_URL
    export RN_MOCK_PID RN_MOCK
    RN_KEY=sk-test-$(_rn_hex 16)
    RN_OKEY=sk-test-oai-$(_rn_hex 16)
    RN_PRICING=$RN_TMP/pricing.json
    printf '%s\n' "$RN_PRICES" >"$RN_PRICING"
    export RN_KEY RN_OKEY RN_PRICING
    # The operator's providers: both built-in names on the mock, whose loopback
    # address the file names explicitly (nothing private is reachable otherwise).
    RN_PROVIDERS=$RN_TMP/providers.json
    rn_providers_file "${RN_EXTRA_PROVIDERS:-}" >"$RN_PROVIDERS"
    export RN_PROVIDERS
}

# rn_providers_file [EXTRA_PROVIDERS_JSON]: the providers file of rn_start on stdout,
# with the providers of the given JSON object added.
rn_providers_file() {
    local extra=${1:-'{}'}
    jq -n --arg mock "$RN_MOCK" --argjson extra "${extra//\$RN_MOCK_URL/$RN_MOCK}" '{providers: ({
        anthropic: {kind: "anthropic", baseUrl: $mock, keyEnv: "ANTHROPIC_API_KEY", allowPrivate: ["127.0.0.1"]},
        openai: {kind: "openai", baseUrl: $mock, keyEnv: "OPENAI_API_KEY", allowPrivate: ["127.0.0.1"]}
    } + $extra)}'
}

# rn_mock_spawn PREFIX: start a mock provider on a free loopback port, writing
# PREFIX.port, PREFIX.log and PREFIX.out; sets RN_SPAWNED_PID and RN_SPAWNED_URL
# once it answers.
rn_mock_spawn() {
    node "$RN_MOCK_JS" --port 0 --port-file "$1.port" --log "$1.log" \
        --max-lifetime 900 </dev/null >"$1.out" 2>&1 3>&- &
    RN_SPAWNED_PID=$!
    if ! ds_poll 10 test -s "$1.port"; then
        echo "the mock provider did not start: $(cat "$1.out")" >&2
        return 1
    fi
    RN_SPAWNED_URL=http://127.0.0.1:$(tr -d '\n' <"$1.port")
    ds_poll 10 curl -fsS -o /dev/null --max-time 1 "$RN_SPAWNED_URL/__health" || {
        echo "the mock provider does not answer" >&2
        return 1
    }
}

# rn_mock_kill PID: stop a mock rn_mock_spawn started (TERM, then KILL if it lingers).
rn_mock_kill() {
    [ -n "${1:-}" ] || return 0
    kill -TERM "$1" 2>/dev/null || true
    ds_poll 5 rn_gone "$1" || kill -KILL "$1" 2>/dev/null || true
}

# rn_cli_env: the dstream CLI's debug commands talk to the server itself, with the
# admin token (DSTREAM_URL, DSTREAM_TOKEN exported).
rn_cli_env() {
    export DSTREAM_URL DSTREAM_TOKEN
    DSTREAM_URL=$(cat "$DS_DIR/url-direct")
    DSTREAM_TOKEN=$(cat "$DS_DIR/admin.token")
}

# rn_stop: stop the stack and the mock provider, remove their directories.
rn_stop() {
    ds_stack_stop
    rn_mock_kill "${RN_MOCK_PID:-}"
    [ -n "${RN_TMP:-}" ] && rm -rf "$RN_TMP"
    return 0
}

# rn_test_setup: an empty mock (no scripted replies, no recorded requests) and a
# running runner (an earlier test may have failed while it was stopped).
rn_test_setup() {
    RN_BG_PIDS=()
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__script"
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    rn_runner_alive || rn_runner_start
}

# rn_test_teardown: stop the background readers this test started (by PID).
rn_test_teardown() {
    local pid
    for pid in "${RN_BG_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    return 0
}

# ---- processes ----------------------------------------------------------------------

# rn_gone PID: the process has exited (a zombie counts as exited).
rn_gone() {
    [ -e "/proc/$1" ] || return 0
    local state
    state=$(sed -n 's/^[0-9]* (.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$state" ] && return 0
    # A zombie whose other threads still run has not let go of its files (the
    # runner's owner lock) yet: gone only once it is its last thread.
    [ "$state" = Z ] && [ "$(ls "/proc/$1/task" 2>/dev/null | wc -l)" -le 1 ]
}

rn_runner_pid() { cat "$DS_DIR/runner.pid" 2>/dev/null; }

rn_runner_alive() {
    local pid
    pid=$(rn_runner_pid) && [ -n "$pid" ] && ! rn_gone "$pid"
}

# rn_runner_starts: how many times a runner has logged its start in this stack.
rn_runner_starts() { grep -c 'dstream-runner: started' "$DS_DIR/logs/runner.log" 2>/dev/null || true; }

_rn_starts_ge() { [ "$(rn_runner_starts)" -ge "$1" ]; }

# rn_runner_wait_started N: wait until the runner log shows N starts.
rn_runner_wait_started() {
    ds_poll 10 _rn_starts_ge "$1" || {
        echo "the runner did not start; its log:" >&2
        tail -20 "$DS_DIR/logs/runner.log" >&2
        return 1
    }
}

# rn_runner_start: start the runner as the stack does (same settings, same database),
# record its PID in $DS_DIR/runner.pid (so the stack's stop ends it) and wait until it
# has logged its start.
rn_runner_start() {
    local before
    before=$(rn_runner_starts)
    # shellcheck disable=SC2086 # DS_SETTINGS is a list of NAME=VALUE words
    env $DS_SETTINGS DSTREAM_DB="$DS_DB" "$DS_BIN/dstream-runner" \
        </dev/null >>"$DS_DIR/logs/runner.log" 2>&1 3>&- &
    echo $! >"$DS_DIR/runner.pid"
    rn_runner_wait_started $((before + 1))
}

# rn_runner_signal SIG: send SIG to the runner and wait until it has exited.
rn_runner_signal() {
    local pid
    pid=$(rn_runner_pid)
    kill "-$1" "$pid"
    ds_poll 10 rn_gone "$pid"
}

# rn_runner_b ID: start a second runner with another id (same settings, same
# database); its PID in B_PID (rn_runner_b_stop stops it), its log in
# $DS_DIR/logs/runner-ID.log.
rn_runner_b() {
    local log=$DS_DIR/logs/runner-$1.log before
    before=$(grep -c 'dstream-runner: started' "$log" 2>/dev/null || true)
    # shellcheck disable=SC2086 # DS_SETTINGS is a list of NAME=VALUE words
    env $DS_SETTINGS DSTREAM_DB="$DS_DB" DSTREAM_RUNNER_ID="$1" "$DS_BIN/dstream-runner" \
        </dev/null >>"$log" 2>&1 3>&- &
    B_PID=$!
    ds_poll 20 eval '[ "$(grep -c "dstream-runner: started" "$log")" -gt "${before:-0}" ]' ||
        { tail -5 "$log" >&2; return 1; }
}

# rn_runner_b_stop: stop the runner rn_runner_b started, if any (even a stopped one:
# CONT, TERM, then KILL if it lingers).
rn_runner_b_stop() {
    [ -n "${B_PID:-}" ] || return 0
    kill -CONT "$B_PID" 2>/dev/null || true
    kill -TERM "$B_PID" 2>/dev/null || true
    ds_poll 10 rn_gone "$B_PID" || kill -KILL "$B_PID" 2>/dev/null || true
}

# rn_crash_setup / rn_crash_teardown: setup and teardown of the suites that kill, stop
# and add runners (43, 49): no default reply on the mock (T is the test's directory);
# at the end a second runner (B_PID) is stopped, and a runner or mock left stopped
# (SIGSTOP) goes on.
rn_crash_setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default"
    B_PID=
}
rn_crash_teardown() {
    kill -CONT "$RN_MOCK_PID" 2>/dev/null || true
    rn_test_teardown
    rn_runner_b_stop
    kill -CONT "$(rn_runner_pid)" 2>/dev/null || true
}

# ---- the mock provider --------------------------------------------------------------

# rn_script JSON: queue one reply object or {"replies": [...]} on the mock.
rn_script() {
    curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary "$1" "$RN_MOCK/__script"
}

# rn_requests: the provider requests the mock received (JSON array) on stdout.
rn_requests() { curl -fsS "$RN_MOCK/__requests"; }

rn_request_count() { rn_requests | jq length; }

# ---- definitions and sessions -------------------------------------------------------

# rn_agent PROVIDER MODEL: store a new agent; prints its name.
rn_agent() {
    local name
    name=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' \
        --data-binary "$(jq -nc --arg n "$name" --arg p "$1" --arg m "$2" '{name: $n, provider: $p, model: $m}')"
    [ "$status_code" = 201 ] || { echo "agent: $status_code $body" >&2; return 1; }
    echo "$name"
}

# rn_workflow JSON: store a workflow document (201 or fail).
rn_workflow() {
    req POST /v1/workflows -H 'Content-Type: application/json' --data-binary "$1"
    [ "$status_code" = 201 ] || { echo "workflow: $status_code $body" >&2; return 1; }
}

# rn_session JSON: create a session; prints its id.
rn_session() {
    req POST /v1/sessions -H 'Content-Type: application/json' --data-binary "$1"
    [ "$status_code" = 201 ] || { echo "session: $status_code $body" >&2; return 1; }
    jq -r .id "$DS_BODY"
}

# rn_say ID CONTENT [MODE]: post a user message (202 or fail).
rn_say() {
    local data
    if [ $# -ge 3 ]; then
        data=$(jq -nc --arg c "$2" --arg m "$3" '{content: $c, mode: $m}')
    else
        data=$(jq -nc --arg c "$2" '{content: $c}')
    fi
    req POST "/v1/sessions/$1/messages" -H 'Content-Type: application/json' --data-binary "$data"
    [ "$status_code" = 202 ] || { echo "message: $status_code $body" >&2; return 1; }
}

# rn_get ID: GET the session; its JSON is in $DS_BODY (and $body).
rn_get() {
    req GET "/v1/sessions/$1"
    [ "$status_code" = 200 ]
}

# rn_holds ID JQ_FILTER: the session's current JSON satisfies the filter (for ds_poll).
rn_holds() {
    rn_get "$1" && jq -e "$2" "$DS_BODY" >/dev/null 2>&1
}

# rn_wait ID JQ_FILTER [SECONDS]: poll the session until the filter holds; on a timeout
# print the session and the end of the runner log, and fail.
rn_wait() {
    ds_poll "${3:-20}" rn_holds "$1" "$2" && return 0
    {
        echo "session $1 never satisfied: $2"
        jq -c '{status, request, error, pendingInput, queued, messages}' "$DS_BODY" 2>/dev/null || cat "$DS_BODY"
        echo "--- runner log (last 15 lines)"
        tail -15 "$DS_DIR/logs/runner.log"
        for l in "$DS_DIR"/logs/runner-*.log; do
            [ -f "$l" ] || continue
            echo "--- ${l##*/} (last 15 lines)"
            tail -15 "$l"
        done
        echo "--- what the runners' logs say of session $1"
        grep -h "$1" "$DS_DIR/logs/runner.log" "$DS_DIR"/logs/runner-*.log 2>/dev/null | tail -30
    } >&2
    return 1
}

# rn_events ID: every event of the session (a JSON array) on stdout, read page by
# page until Stream-Up-To-Date.
rn_events() {
    local off=-1 acc=$BATS_TEST_TMPDIR/events.acc _
    echo '[]' >"$acc"
    for _ in $(seq 1000); do
        req GET "/v1/sessions/$1/events?offset=$off"
        [ "$status_code" = 200 ] || { echo "events: $status_code $body" >&2; return 1; }
        jq -s '.[0] + .[1]' "$acc" "$DS_BODY" >"$acc.new" && mv "$acc.new" "$acc"
        header Stream-Up-To-Date >/dev/null && break
        off=$(header Stream-Next-Offset)
    done
    cat "$acc"
}

# rn_one_reply FILE EXPECTED: the session (GET body in FILE) is completed and holds the
# reply exactly once: its messages are the question and the reply (cut attempts
# left the history when their retry replaced them).
rn_one_reply() {
    jq -e --arg e "$2" '.status == "completed" and .request == null
        and ([.messages[] | .role] == ["user", "assistant"]) and .messages[1].content == $e
        and (.messages[1].interrupted | not)' "$1" >/dev/null
}

# rn_has_event ID JQ_FILTER: some event satisfies the filter (for ds_poll). A session
# that cannot be read (not created yet) has none: jq -e on no input would succeed.
rn_has_event() {
    local events
    events=$(rn_events "$1") && jq -e "any(.[]; $2)" >/dev/null 2>&1 <<<"$events"
}

# rn_sse_start ID FILE: read the session's events over SSE into FILE in the
# background (curl -N); stopped by PID in teardown.
rn_sse_start() {
    curl -N -sS --max-time 120 "$DS_URL/v1/sessions/$1/events?live=sse" >"$2" 2>/dev/null 3>&- &
    RN_BG_PIDS+=("$!")
}

# rn_sse_events FILE: the `event:` names of an SSE capture, one per line, in order.
rn_sse_events() { sed -n 's/^event: *//p' "$1" | tr -d '\r'; }

# rn_slow_default [DELAY]: the mock's default reply, about 60 deltas DELAY ms apart
# (40), naming the question ({{user}}); rn_slow_expected QUESTION: that reply's text.
# For the files that kill runners with chats in flight (43-runner-crash, 70-hosts).
RN_FILL="the quick brown fox jumps over the lazy dog while the runner restarts"
rn_slow_default() {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" --data-binary \
        "$(jq -nc --arg t "Answer to [{{user}}]: $RN_FILL, $RN_FILL, $RN_FILL." --argjson d "${1:-40}" \
            '{text: $t, chunkSize: 4, delayMs: $d, usage: {input: 10, output: 60}}')"
}
rn_slow_expected() { printf 'Answer to [%s]: %s, %s, %s.' "$1" "$RN_FILL" "$RN_FILL" "$RN_FILL"; }

# rn_msg_count: the messages the database holds; _rn_msgs_ge N: at least N (for ds_poll).
rn_msg_count() { ds_sql 'SELECT count(*) FROM messages'; }
_rn_msgs_ge() { [ "$(rn_msg_count)" -ge "$1" ]; }

# rn_sse_data FILE TYPE: the data of every SSE event named TYPE, one JSON per line.
rn_sse_data() {
    awk -v want="$2" '
        { sub(/\r$/, "") }
        /^event:/ { t = $0; sub(/^event: */, "", t); next }
        /^data:/  { if (t == want) { d = $0; sub(/^data: ?/, "", d); print d } ; next }
        /^$/      { t = "" }' "$1"
}
