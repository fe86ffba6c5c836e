#!/usr/bin/env bats
# Several hosts on one PostgreSQL (issue 23, docs/scale-out.md): three complete
# stacks (nginx + pool + runner each, own ports and directories, runner ids host-1
# .. host-3) on one throwaway cluster (tests/pg.sh, Unix socket only, fsync on):
# live readers of one host see the appends of another in order; a runner killed
# with many chats streaming, each chat finished exactly once by another host; a
# stream's row lock held 5 s by psql while two hosts append and two tail (the gap
# hunter); PostgreSQL killed and restarted under writers of every host (503 with
# Retry-After while it is down, no acknowledged append lost, every process back by
# itself).
#
# One cluster, one mock provider and the three stacks for the file; a short lease
# (DSTREAM_LEASE_MS=1500) so that take-overs are quick. Every process is stopped by
# the PID recorded when it was started. Waits are polls with deadlines; loops are
# bounded in count and time. HS_CHATS sets the chats of the kill test (50),
# HS_PG_KILLS the restarts of PostgreSQL (4); HS_KEEP=1 keeps the file's directory
# (logs, cluster) for a look after a failure.

load runner-helpers

HS_HOSTS=3

setup_file() {
    command -v node >/dev/null || { echo "node is not installed (make deps)" >&2; return 1; }
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "no PostgreSQL server (make deps)" >&2; return 1; }
    # Short: the cluster's socket lives in it. The postgres user passes through.
    HS_TMP=$(mktemp -d /tmp/ds70.XXXXXX)
    chmod 711 "$HS_TMP"
    HS_PG=$HS_TMP/pg
    export HS_TMP HS_PG
    HS_URI=$("$DS_ROOT/tests/pg.sh" start "$HS_PG") || return 1
    export HS_URI
    RN_TMP=$HS_TMP/rn
    mkdir -p "$RN_TMP"
    export RN_TMP
    rn_mock_spawn "$RN_TMP/mock" || return 1
    RN_MOCK_PID=$RN_SPAWNED_PID
    RN_MOCK=$RN_SPAWNED_URL
    RN_KEY=sk-test-$(_rn_hex 16)
    RN_PRICING=$RN_TMP/pricing.json
    printf '%s\n' "$RN_PRICES" >"$RN_PRICING"
    RN_PROVIDERS=$RN_TMP/providers.json
    rn_providers_file >"$RN_PROVIDERS"
    export RN_MOCK_PID RN_MOCK RN_KEY RN_PRICING RN_PROVIDERS
    local h
    for h in $(seq 1 $HS_HOSTS); do hs_up "$h" || return 1; done
    hs_use 1
}

teardown_file() {
    local h
    for h in $(seq 1 $HS_HOSTS); do
        [ -d "$HS_TMP/h$h" ] && "$DS_STACK" stop "$HS_TMP/h$h" >/dev/null 2>&1
    done
    rn_mock_kill "${RN_MOCK_PID:-}"
    [ -n "${HS_PG:-}" ] && "$DS_ROOT/tests/pg.sh" stop "$HS_PG" >/dev/null 2>&1
    [ -n "${HS_TMP:-}" ] && [ -z "${HS_KEEP:-}" ] && rm -rf "$HS_TMP"
    return 0
}

setup() {
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
    RN_BG_PIDS=()
    hs_use 1
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__script"
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__default"
    # A test that stopped PostgreSQL or a runner and failed leaves them running again.
    "$DS_ROOT/tests/pg.sh" start "$HS_PG" >/dev/null
    local h
    for h in $(seq 1 $HS_HOSTS); do hs_runner_alive "$h" || hs_runner_start "$h"; done
}

teardown() {
    ds_bg_stop
    rn_test_teardown
}

# ---- hosts --------------------------------------------------------------------------

# The settings every host shares; its own runner id and token name are added.
hs_env() {
    printf '%s\n' DSTREAM_DB="$HS_URI" DSTREAM_RUNNER_ID="host-$1" DSTREAM_LEASE_MS=1500 \
        DSTREAM_STACK_TOKEN_NAME="host-$1" DSTREAM_PROVIDERS="$RN_PROVIDERS" \
        DSTREAM_PRICING="$RN_PRICING" ANTHROPIC_API_KEY="$RN_KEY" DSTREAM_RETRY_BASE_MS=100 B="$DS_B"
}

# hs_up N: start host N's stack (nginx, pool, runner) in $HS_TMP/hN.
hs_up() {
    local dir=$HS_TMP/h$1
    mkdir -p "$dir"
    mapfile -t env_ < <(hs_env "$1")
    if ! env "${env_[@]}" "$DS_STACK" start "$dir" >"$dir.start" 2>&1; then
        echo "host $1 did not start:" >&2
        cat "$dir.start" >&2
        return 1
    fi
    ds_poll 20 _hs_starts_ge "$1" 1
}

hs_url() { cat "$HS_TMP/h$1/url"; }

# hs_use N: the rn_* and req helpers talk to host N.
hs_use() {
    DS_DIR=$HS_TMP/h$1
    DS_URL=$(hs_url "$1")
    export DS_DIR DS_URL
}

hs_runner_pid() { cat "$HS_TMP/h$1/runner.pid" 2>/dev/null; }
hs_runner_alive() { local p; p=$(hs_runner_pid "$1") && [ -n "$p" ] && ! rn_gone "$p"; }
hs_starts() { grep -c 'dstream-runner: started' "$HS_TMP/h$1/logs/runner.log" 2>/dev/null || true; }
_hs_starts_ge() { [ "$(hs_starts "$1")" -ge "$2" ]; }

# hs_runner_start N: start host N's runner again (its PID where the stack's stop finds it).
hs_runner_start() {
    local before
    before=$(hs_starts "$1")
    mapfile -t env_ < <(hs_env "$1")
    env "${env_[@]}" "$DS_BIN/dstream-runner" </dev/null >>"$HS_TMP/h$1/logs/runner.log" 2>&1 3>&- &
    echo $! >"$HS_TMP/h$1/runner.pid"
    ds_poll 20 _hs_starts_ge "$1" $((before + 1)) || { tail -5 "$HS_TMP/h$1/logs/runner.log" >&2; return 1; }
}

# hs_runner_stop N SIG: signal host N's runner and wait until it is gone.
hs_runner_stop() {
    local pid
    pid=$(hs_runner_pid "$1")
    kill "-$2" "$pid"
    ds_poll 10 rn_gone "$pid"
}

psql_() { psql -X -q -At "$HS_URI" "$@"; }

# ---- readers and writers ---------------------------------------------------------------

# sse_text FILE: the data of the data events of an SSE capture, concatenated.
sse_text() { [ -e "$1" ] && rn_sse_data "$1" data | tr -d '\n'; }

# tokens_in TEXT_FILE: how many ';'-ended tokens the file holds.
tokens_in() { tr -cd ';' <"$1" | wc -c; }
_tokens_ge() { [ "$(tokens_in "$1")" -ge "$2" ]; }
_sse_tokens_ge() { sse_text "$1" >"$1.txt"; _tokens_ge "$1.txt" "$2"; }

# lp_reader URL OUT SECONDS: follow URL with long-polls from the start, appending
# each body to OUT; every response's request and next offsets to OUT.offsets.
# Stops after SECONDS or 5,000 requests.
lp_reader() {
    local url=$1 out=$2 off=-1 end=$((SECONDS + $3)) i code next
    : >"$out"
    : >"$out.offsets"
    for i in $(seq 5000); do
        [ $SECONDS -lt $end ] || break
        code=$(curl -sS --max-time 15 -D "$out.h" -o "$out.b" -w '%{http_code}' "$url?offset=$off&live=long-poll" 2>/dev/null) || code=000
        next=$(sed -n 's/^[Ss]tream-[Nn]ext-[Oo]ffset: *//p' "$out.h" | tr -d '\r')
        case $code in
        200) cat "$out.b" >>"$out" ;;
        204) ;;
        *) echo "$off $code" >>"$out.errors"; sleep 0.1; continue ;;
        esac
        echo "$off $next" >>"$out.offsets"
        [ -n "$next" ] && off=$next
    done
}

# writer URL OUT TAG COUNT STOPFILE: append "TAG-i;" for i = 1 .. COUNT (or until
# STOPFILE exists, or 120 s), one request each; "i status" per attempt to OUT.
writer() {
    local url=$1 out=$2 tag=$3 n=$4 stop=$5 i code end=$((SECONDS + 120))
    : >"$out"
    for i in $(seq 1 "$n"); do
        [ -e "$stop" ] && break
        [ $SECONDS -lt $end ] || break
        code=$(curl -sS --max-time 10 -o "$out.body" -D "$out.h" -w '%{http_code}' -X POST \
            -H 'Content-Type: text/plain' --data-binary "$tag-$i;" "$url" 2>/dev/null) || code=000
        echo "$i $code" >>"$out"
        if [ "$code" != 204 ]; then
            # Every refusal is kept for the test to judge (status, Retry-After, body).
            { echo "$i $code $(tr -d '\r' <"$out.h" | sed -n 's/^[Rr]etry-[Aa]fter: */retry-after=/p') $(head -c 200 "$out.body")"; } >>"$out.refused"
            sleep 0.05
        fi
    done
}

# acked OUT: the tokens a writer's file says were acknowledged, one per line.
acked() { awk -v t="$2" '$2 == 204 { print t "-" $1 }' "$1"; }

# read_all URL FILE: the stream's whole content (every page) into FILE.
read_all() {
    local off=-1 i
    : >"$2"
    for i in $(seq 1000); do
        req GET "$1?offset=$off"
        [ "$status_code" = 200 ] || { echo "read $1: $status_code $body" >&2; return 1; }
        cat "$DS_BODY" >>"$2"
        header Stream-Up-To-Date >/dev/null && return 0
        off=$(header Stream-Next-Offset)
    done
    return 1
}

# tally FINAL WRITER_FILES...: "acked lost duplicated" of the writers' acknowledged
# tokens in FINAL (a stream's content), the writer's tag being its file's name.
tally() {
    local final=$1 f a=0 lost=0 dup=0 c tok
    shift
    tr ';' '\n' <"$final" | sed '/^$/d' | sort >"$final.sorted"
    for f in "$@"; do
        while read -r tok; do
            a=$((a + 1))
            c=$(grep -cx -- "$tok" "$final.sorted" || true)
            [ "$c" = 0 ] && { lost=$((lost + 1)); echo "lost: $tok" >&2; }
            [ "$c" -gt 1 ] && { dup=$((dup + 1)); echo "duplicated: $tok" >&2; }
        done < <(acked "$f" "$(basename "$f")")
    done
    echo "$a $lost $dup"
}

# ---- live readers across hosts ---------------------------------------------------------

@test "live readers on host 2 (SSE and long-poll) see the appends made on hosts 1 and 3, in order, none skipped" {
    local n=200 s i want
    s=$(ds_stream live)
    req PUT "$(hs_url 1)$s" -H 'Content-Type: text/plain'
    assert_status 201
    spawn "$T/sse.err" curl -N -sS --max-time 60 -o "$T/sse" "$(hs_url 2)$s?offset=-1&live=sse"
    spawn "$T/lp.err" lp_reader "$(hs_url 2)$s" "$T/lp" 60
    for i in $(seq 1 $n); do
        req POST "$(hs_url $((i % 2 ? 1 : 3)))$s" -H 'Content-Type: text/plain' --data-binary "m$i;"
        assert_status 204
    done
    want=$(for i in $(seq 1 $n); do printf 'm%s;' "$i"; done)
    ds_poll 30 _sse_tokens_ge "$T/sse" $n || fail "SSE on host 2: $(tokens_in "$T/sse.txt") of $n"
    ds_poll 30 _tokens_ge "$T/lp" $n || fail "long-poll on host 2: $(tokens_in "$T/lp") of $n"
    [ "$(cat "$T/sse.txt")" = "$want" ] || fail "SSE on host 2 saw: $(head -c 300 "$T/sse.txt")"
    [ "$(cat "$T/lp")" = "$want" ] || fail "long-poll on host 2 saw: $(head -c 300 "$T/lp")"
    # Each long-poll went on from where the last one ended.
    [ ! -e "$T/lp.errors" ] || fail "long-poll errors: $(cat "$T/lp.errors")"
}

# ---- a runner killed with chats in flight ------------------------------------------------

FILL="the quick brown fox jumps over the lazy dog while the runner restarts"
slow_default() {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" --data-binary \
        "$(jq -nc --arg t "Answer to [{{user}}]: $FILL, $FILL, $FILL." --argjson d "${1:-40}" \
            '{text: $t, chunkSize: 4, delayMs: $d, usage: {input: 10, output: 60}}')"
}
expected() { printf 'Answer to [%s]: %s, %s, %s.' "$1" "$FILL" "$FILL" "$FILL"; }
msg_count() { psql_ -c 'SELECT count(*) FROM messages'; }
_grown() { [ "$(msg_count)" -ge "$1" ]; }
_held_by() { [ "$(psql_ -c "SELECT count(*) FROM leases WHERE owner = '$1'")" -ge "$2" ]; }

@test "host 1's runner is SIGKILLed with many chats streaming: hosts 2 and 3 take them after the lease, each finished exactly once" {
    local n=${HS_CHATS:-50} agent i id exact=0 stuck=0 dup=0 took2 took3 ids=()
    # Host 1's runner alone drives them: the others are stopped until the kill.
    hs_runner_stop 2 TERM
    hs_runner_stop 3 TERM
    agent=$(rn_agent anthropic claude-test-model)
    # Replies of about 60 deltas 150 ms apart (9 s): every chat is still streaming
    # when the last one has been asked.
    slow_default 150
    for i in $(seq 1 "$n"); do
        hs_use $(((i - 1) % HS_HOSTS + 1))
        ids+=("$(rn_session "{\"agent\": \"$agent\"}")")
    done
    for i in $(seq 1 "$n"); do
        hs_use $(((i - 1) % HS_HOSTS + 1))
        rn_say "${ids[$((i - 1))]}" "question $i"
    done
    hs_use 1
    ds_poll 60 _held_by host-1 "$n" || fail "host-1 holds $(psql_ -c "SELECT count(*) FROM leases WHERE owner = 'host-1'") of $n leases"
    # Mid-stream: deltas are arriving for every chat (the log grew by 2n events).
    base=$(msg_count)
    ds_poll 60 _grown $((base + 2 * n)) || { tail -20 "$HS_TMP/h1/logs/runner.log" >&2; return 1; }
    hs_runner_start 2
    hs_runner_start 3
    hs_runner_stop 1 KILL
    for i in $(seq 1 "$n"); do
        id=${ids[$((i - 1))]}
        if ! rn_wait "$id" '.status == "completed" and .request == null' 120; then
            stuck=$((stuck + 1))
            continue
        fi
        cp "$DS_BODY" "$T/s-$i.json"
        rn_events "$id" >"$T/ev-$i.json"
        if rn_one_reply "$T/s-$i.json" "$(expected "question $i")" &&
            jq -e '([.[] | select(.type == "provider:request_ended")] | length) == 1
                and ([.[] | select(.type == "reply:failed")] | length) == 0' "$T/ev-$i.json" >/dev/null; then
            exact=$((exact + 1))
        else
            jq -c '{status, messages: [.messages[] | {role, interrupted, content: (.content | tostring | .[0:40])}]}' "$T/s-$i.json" >&2
        fi
        [ "$(jq --arg e "$(expected "question $i")" '[.messages[] | select(.content == $e)] | length' "$T/s-$i.json")" -le 1 ] ||
            dup=$((dup + 1))
    done
    took2=$(grep -c 'was cut off by a restart' "$HS_TMP/h2/logs/runner.log" || true)
    took3=$(grep -c 'was cut off by a restart' "$HS_TMP/h3/logs/runner.log" || true)
    echo "# runner kill: chats=$n finished_exactly_once=$exact stuck=$stuck duplicated=$dup cut_taken_by_host2=$took2 host3=$took3" >&3
    [ "$stuck" = 0 ]
    [ "$dup" = 0 ]
    [ "$exact" = "$n" ]
    # The chats in flight on host 1 were found cut off by the hosts that took them.
    [ $((took2 + took3)) -ge 1 ]
}

# ---- the gap hunter --------------------------------------------------------------------

@test "gap hunter: psql holds a stream's row lock 5 s while hosts 1 and 2 append and hosts 2 and 3 tail: contiguous offsets, none skipped, nothing acknowledged lost" {
    local s name k w=() a lost dup
    name=$(ds_name gap)
    s=/v1/stream/$name
    req PUT "$(hs_url 1)$s" -H 'Content-Type: text/plain'
    assert_status 201
    req POST "$(hs_url 1)$s" -H 'Content-Type: text/plain' --data-binary "first;"
    assert_status 204
    spawn "$T/sse.err" curl -N -sS --max-time 60 -o "$T/sse" "$(hs_url 3)$s?offset=-1&live=sse"
    spawn "$T/lp.err" lp_reader "$(hs_url 2)$s" "$T/lp" 60
    [ "$(psql_ -c "SELECT count(*) FROM streams WHERE path LIKE '%$name'")" = 1 ]
    # The lock, held in an open transaction; the file appears once it is taken.
    spawn "$T/psql.out" psql_ -v ON_ERROR_STOP=1 -c "BEGIN" \
        -c "SELECT id FROM streams WHERE path LIKE '%$name' FOR UPDATE" \
        -c "\\! touch $T/locked" -c "SELECT pg_sleep(5)" -c "COMMIT"
    local holder=$LAST_PID
    ds_poll 10 test -e "$T/locked" || fail "psql did not take the lock: $(cat "$T/psql.out")"
    for k in 1 2 3 4; do
        spawn "$T/w$k.err" writer "$(hs_url $((k % 2 + 1)))$s" "$T/w$k" "w$k" 40 "$T/stop"
        w+=("$T/w$k")
    done
    ds_poll 30 rn_gone "$holder" || fail "psql still holds the lock"
    for k in 1 2 3 4; do ds_poll 90 eval "[ \$(wc -l <'$T/w$k') -ge 40 ]" || fail "writer $k: $(wc -l <"$T/w$k") of 40"; done
    read_all "$(hs_url 3)$s" "$T/final"
    read -r a lost dup < <(tally "$T/final" "${w[@]}")
    ds_poll 30 eval '[ "$(sse_text "$T/sse")" = "$(cat "$T/final")" ]' ||
        fail "SSE on host 3 differs from the stream: $(sse_text "$T/sse" | head -c 300) / $(head -c 300 "$T/final")"
    ds_poll 30 eval '[ "$(cat "$T/lp")" = "$(cat "$T/final")" ]' ||
        fail "long-poll on host 2 differs from the stream: $(head -c 300 "$T/lp")"
    local refused
    refused=$(cat "$T"/w*.refused 2>/dev/null | wc -l)
    echo "# gap hunter: acknowledged=$a lost=$lost duplicated=$dup refused=$refused (503 after the lock timeout)" >&3
    [ "$lost" = 0 ]
    [ "$dup" = 0 ]
    [ "$a" -ge 1 ]
    # A refusal is a 503 with Retry-After, never a 500.
    if [ "$refused" -gt 0 ]; then
        if grep -v ' 503 retry-after=' "$T"/w*.refused; then fail "refusals other than 503 + Retry-After"; fi
    fi
    # Each reader's offsets were contiguous: every long-poll went on from the last one's next.
    awk 'NR > 1 && $1 != prev { print "skipped: " prev " -> " $1; bad = 1 } { prev = $2 } END { exit bad }' "$T/lp.offsets"
}

# ---- a live reader through an outage -----------------------------------------------------

# pool_pids N: host N's pool: the process the stack started and its children.
pool_pids() {
    local p
    p=$(cat "$HS_TMP/h$1/fcgi.pid")
    echo "$p"
    cat /proc/"$p"/task/*/children 2>/dev/null | tr ' ' '\n' | sed '/^$/d'
}

@test "an SSE reader on host 3 woken while PostgreSQL is down stays open, and gets the append once the database is back" {
    local s p pids
    s=$(ds_stream outage)
    req PUT "$(hs_url 1)$s" -H 'Content-Type: text/plain'
    assert_status 201
    req POST "$(hs_url 1)$s" -H 'Content-Type: text/plain' --data-binary "a;"
    assert_status 204
    spawn "$T/sse.err" curl -N -sS --max-time 60 -o "$T/sse" "$(hs_url 3)$s?offset=-1&live=sse"
    local reader=$LAST_PID
    ds_poll 10 _sse_tokens_ge "$T/sse" 1 || fail "SSE on host 3 did not start"
    # Host 3's pool is stopped while an append's notification reaches its feed and
    # PostgreSQL goes down: it then wakes its reader with the database gone.
    pids=$(pool_pids 3)
    for p in $pids; do kill -STOP "$p"; done
    req POST "$(hs_url 1)$s" -H 'Content-Type: text/plain' --data-binary "b;"
    assert_status 204
    "$DS_ROOT/tests/pg.sh" crash "$HS_PG"
    for p in $pids; do kill -CONT "$p"; done
    # The reader's read fails at least once (the pool's connection is gone): the
    # response must not end. Health answers 503 meanwhile.
    ds_poll 10 eval 'req GET "$(hs_url 3)/v1/health"; [ "$status_code" = 503 ]'
    assert_header Retry-After
    if ds_poll 3 rn_gone "$reader"; then fail "the SSE response ended while the database was down: $(cat "$T/sse")"; fi
    "$DS_ROOT/tests/pg.sh" start "$HS_PG" >/dev/null
    ds_poll 20 _sse_tokens_ge "$T/sse" 2 || fail "SSE on host 3 after the restart: $(cat "$T/sse.txt")"
    req POST "$(hs_url 2)$s" -H 'Content-Type: text/plain' --data-binary "c;"
    assert_status 204
    ds_poll 20 _sse_tokens_ge "$T/sse" 3 || fail "SSE on host 3: $(cat "$T/sse.txt")"
    [ "$(cat "$T/sse.txt")" = "a;b;c;" ]
    if rn_gone "$reader"; then fail "the SSE response ended"; fi
}

# ---- PostgreSQL killed under writers -----------------------------------------------------

# probe HOST: while PostgreSQL is down, an append and a read on HOST are refused
# with 503, Retry-After and a JSON error.
probe_down() {
    req POST "$(hs_url "$1")$2" -H 'Content-Type: text/plain' --data-binary "probe;"
    [ "$status_code" = 503 ] || { echo "host $1 append while down: $status_code $body" >&2; return 1; }
    header Retry-After >/dev/null || { echo "host $1: no Retry-After: $(cat "$DS_HDRS") $body" >&2; return 1; }
    assert_json_error || return 1
    req GET "$(hs_url "$1")$2?offset=-1"
    [ "$status_code" = 503 ] || { echo "host $1 read while down: $status_code $body" >&2; return 1; }
    header Retry-After >/dev/null || { echo "host $1: no Retry-After on a read" >&2; return 1; }
    assert_json_error
}

acks() { cat "$T"/w? 2>/dev/null | awk '$2 == 204' | wc -l; }
_acks_ge() { [ "$(acks)" -ge "$1" ]; }
# _each_acked_after N: every writer has an acknowledgement after its line N_k (the
# per-writer line counts in $T/marks).
_each_acked_after() {
    local k m
    for k in $(seq 1 "$1"); do
        m=$(sed -n "${k}p" "$T/marks")
        tail -n +$((m + 1)) "$T/w$k" | awk '$2 == 204 { f = 1 } END { exit !f }' || return 1
    done
}

@test "PostgreSQL killed (immediate) and restarted 4 times under 8 writers on 3 hosts: 503 + Retry-After while down, 0 acknowledged appends lost, every host back by itself" {
    local kills=${HS_PG_KILLS:-4} nw=8 k s1 s2 a lost dup base h w=() p
    s1=$(ds_stream pga)
    s2=$(ds_stream pgb)
    p=$(ds_stream probe)
    for s in "$s1" "$s2" "$p"; do
        req PUT "$(hs_url 1)$s" -H 'Content-Type: text/plain'
        assert_status 201
    done
    # A live reader on host 3 from the start: its feed's LISTEN connection is cut too.
    spawn "$T/sse.err" curl -N -sS --max-time 170 -o "$T/sse" "$(hs_url 3)$s1?offset=-1&live=sse"
    for k in $(seq 1 $nw); do
        spawn "$T/w$k.err" writer "$(hs_url $(((k - 1) % HS_HOSTS + 1)))$([ $((k % 2)) = 1 ] && echo "$s1" || echo "$s2")" \
            "$T/w$k" "w$k" 100000 "$T/stop"
        w+=("$T/w$k")
    done
    local per_kill=""
    for k in $(seq 1 "$kills"); do
        base=$(acks)
        ds_poll 30 _acks_ge $((base + 40)) || fail "no progress before kill $k ($(acks) acknowledged)"
        per_kill="$per_kill $(acks)"
        "$DS_ROOT/tests/pg.sh" crash "$HS_PG"
        for h in $(seq 1 $HS_HOSTS); do probe_down "$h" "$p" || fail "kill $k, host $h"; done
        "$DS_ROOT/tests/pg.sh" start "$HS_PG" >/dev/null
    done
    # Every writer (so every host's pool) has appended again since the last restart.
    for k in $(seq 1 $nw); do wc -l <"$T/w$k"; done >"$T/marks"
    ds_poll 30 _each_acked_after $nw || fail "a writer has no acknowledgement after the last restart"
    touch "$T/stop"
    for k in $(seq 1 $nw); do ds_poll 20 eval "! kill -0 ${BG_PIDS[$k]} 2>/dev/null"; done
    read_all "$(hs_url 2)$s1" "$T/final1"
    read_all "$(hs_url 2)$s2" "$T/final2"
    read -r a1 lost1 dup1 < <(tally "$T/final1" "$T"/w1 "$T"/w3 "$T"/w5 "$T"/w7)
    read -r a2 lost2 dup2 < <(tally "$T/final2" "$T"/w2 "$T"/w4 "$T"/w6 "$T"/w8)
    local refused bad
    refused=$(cat "$T"/w*.refused 2>/dev/null | wc -l)
    bad=$(cat "$T"/w*.refused 2>/dev/null | grep -vc ' 503 retry-after=' || true)
    echo "# postgres kills=$kills writers=$nw acknowledged=$((a1 + a2)) (before each kill:$per_kill) lost=$((lost1 + lost2)) duplicated=$((dup1 + dup2)) refused=$refused not_503_with_retry_after=$bad" >&3
    [ "$((lost1 + lost2))" = 0 ]
    [ "$((dup1 + dup2))" = 0 ]
    [ "$bad" = 0 ] || { grep -hv ' 503 retry-after=' "$T"/w*.refused | head >&2; return 1; }
    # The reader of host 3 saw everything (its feed reconnected and woke it).
    ds_poll 30 eval '[ "$(sse_text "$T/sse")" = "$(cat "$T/final1")" ]' ||
        fail "SSE on host 3 stopped at $(sse_text "$T/sse" | tr -cd ';' | wc -c) of $(tr -cd ';' <"$T/final1" | wc -c)"
    # Every runner is alive and drives a chat again: each in turn, the others stopped.
    for h in $(seq 1 $HS_HOSTS); do
        hs_runner_alive "$h" || fail "host $h's runner exited: $(tail -5 "$HS_TMP/h$h/logs/runner.log")"
    done
    local agent id o
    agent=$(rn_agent anthropic claude-test-model)
    for h in $(seq 1 $HS_HOSTS); do
        for o in $(seq 1 $HS_HOSTS); do [ "$o" = "$h" ] || hs_runner_stop "$o" TERM; done
        hs_use "$h"
        id=$(rn_session "{\"agent\": \"$agent\"}")
        rn_script "$(jq -nc --arg t "Back on $h." '{text: $t, usage: {input: 1, output: 1}}')"
        rn_say "$id" "Are you back?"
        rn_wait "$id" '.status == "completed" and .messages[-1].content == "Back on '"$h"'."' 30
        for o in $(seq 1 $HS_HOSTS); do [ "$o" = "$h" ] || hs_runner_start "$o"; done
    done
}
