#!/usr/bin/env bats
# Several hosts on one PostgreSQL (issue 23, docs/scale-out.md): three complete
# stacks (nginx + pool + runner each, own ports and directories, runner ids host-1
# .. host-3) on one throwaway cluster (tests/pg.sh, Unix socket only, fsync on):
# live readers of one host see the appends of another in order; a runner killed
# with many chats streaming, each chat finished exactly once by another host; a
# stream's row lock held 5 s by psql while two hosts append and two tail (the gap
# hunter); PostgreSQL killed and restarted under writers of every host (503 with
# Retry-After while it is down, no acknowledged append lost, every process back by
# itself); a stream one host's pool keeps in its history cache while another host
# appends to it, deletes it and makes it again.
#
# One cluster, one mock provider and the three stacks for the file; a short lease
# (DSTREAM_LEASE_MS=1500) so that take-overs are quick. Every process is stopped by
# the PID recorded when it was started. Waits are polls with deadlines; loops are
# bounded in count and time. HS_CHATS sets the chats of the kill test (50),
# HS_PG_KILLS the restarts of PostgreSQL (4); HOSTS_KEEP=1 keeps the file's directory
# (logs, cluster) for a look after a failure. The hosts, writers, read-back and
# tally: hosts-helpers.bash.

load hosts-helpers

HS_HOSTS=3
DS_ENGINE=pg

setup_file() {
    hosts_need_pg || return 1
    hosts_tmp ds70 || return 1
    HS_PG=$HOSTS_TMP/pg
    export HS_PG
    HS_URI=$("$DS_ROOT/tests/pg.sh" start "$HS_PG") || return 1
    # ds_sql (and rn_msg_count) query the hosts' database.
    DS_DB=$HS_URI
    export HS_URI DS_DB
    RN_TMP=$HOSTS_TMP/rn
    mkdir -p "$RN_TMP"
    rn_mock_start || return 1
    local h
    for h in $(seq 1 $HS_HOSTS); do hs_up "$h" || return 1; done
    hs_use 1
}

teardown_file() {
    hosts_down
    rn_mock_kill "${RN_MOCK_PID:-}"
    [ -n "${HS_PG:-}" ] && "$DS_ROOT/tests/pg.sh" stop "$HS_PG" >/dev/null 2>&1
    hosts_rm
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
        DSTREAM_PRICING="$RN_PRICING" ANTHROPIC_API_KEY="$RN_KEY" DSTREAM_RETRY_BASE_MS=100
}

# hs_up N: start host N's stack (nginx, pool, runner) in $HOSTS_TMP/hN.
hs_up() {
    mapfile -t env_ < <(hs_env "$1")
    hosts_up "$1" "${env_[@]}" || return 1
    ds_poll 20 _hs_starts_ge "$1" 1
}


# hs_use N: the rn_* and req helpers talk to host N.
hs_use() {
    DS_DIR=$HOSTS_TMP/h$1
    DS_URL=$(hosts_url "$1")
    export DS_DIR DS_URL
}

hs_runner_pid() { cat "$HOSTS_TMP/h$1/runner.pid" 2>/dev/null; }
hs_runner_alive() { local p; p=$(hs_runner_pid "$1") && [ -n "$p" ] && ! rn_gone "$p"; }
hs_starts() { grep -c 'dstream-runner: started' "$HOSTS_TMP/h$1/logs/runner.log" 2>/dev/null || true; }
_hs_starts_ge() { [ "$(hs_starts "$1")" -ge "$2" ]; }

# hs_runner_start N: start host N's runner again (its PID where the stack's stop finds it).
hs_runner_start() {
    local before
    before=$(hs_starts "$1")
    mapfile -t env_ < <(hs_env "$1")
    env "${env_[@]}" "$DS_BIN/dstream-runner" </dev/null >>"$HOSTS_TMP/h$1/logs/runner.log" 2>&1 3>&- &
    echo $! >"$HOSTS_TMP/h$1/runner.pid"
    ds_poll 20 _hs_starts_ge "$1" $((before + 1)) || { tail -5 "$HOSTS_TMP/h$1/logs/runner.log" >&2; return 1; }
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

# ---- live readers across hosts ---------------------------------------------------------

@test "live readers on host 2 (SSE and long-poll) see the appends made on hosts 1 and 3, in order, none skipped" {
    local n=200 s i want
    s=$(ds_stream live)
    req PUT "$(hosts_url 1)$s" -H 'Content-Type: text/plain'
    assert_status 201
    spawn "$T/sse.err" curl -N -sS --max-time 60 -o "$T/sse" "$(hosts_url 2)$s?offset=-1&live=sse"
    spawn "$T/lp.err" lp_reader "$(hosts_url 2)$s" "$T/lp" 60
    for i in $(seq 1 $n); do
        req POST "$(hosts_url $((i % 2 ? 1 : 3)))$s" -H 'Content-Type: text/plain' --data-binary "m$i;"
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

# ---- the pools' history caches ----------------------------------------------------------

@test "a stream host 1 reads again and again (its pool keeps the history) while host 2 appends, deletes it and makes it again with other bytes: each read on host 1 is what the database holds" {
    local s want round h1 h2
    h1=$(hosts_url 1) h2=$(hosts_url 2)
    s=$(ds_stream kept)
    req PUT "$h2$s" -H 'Content-Type: text/plain'
    assert_status 201
    ds_append_texts "$h2$s" a 1 200
    want=$DS_TEXTS
    for round in 1 2 3 4; do
        ds_reads_are "$h1$s?offset=-1" 3 "$want" "round $round on host 1"
        ds_append_texts "$h2$s" "r$round." 1 20
        want+=$DS_TEXTS
    done
    # Deleted and made again on host 2, the same lengths at the same offsets.
    req DELETE "$h2$s"
    assert_status 204
    req PUT "$h2$s" -H 'Content-Type: text/plain'
    assert_status 201
    ds_append_texts "$h2$s" b 1 200
    ds_reads_are "$h1$s?offset=-1" 3 "$DS_TEXTS" "after the delete, on host 1"
    # Deleted for good on host 2: host 1 says so.
    req DELETE "$h2$s"
    assert_status 204
    req GET "$h1$s?offset=-1"
    assert_status 404
    # Host 1's pool served some of them from what it kept (published once a second).
    _hits_ge() { [ "$(ds_metric dstream_read_cache_hits_total "$h1")" -ge "$1" ] 2>/dev/null; }
    ds_poll 5 _hits_ge 8 || fail "dstream_read_cache_hits_total on host 1: '$(ds_metric dstream_read_cache_hits_total "$h1")'"
}

# ---- a runner killed with chats in flight ------------------------------------------------

_held_by() { [ "$(psql_ -c "SELECT count(*) FROM leases WHERE owner = '$1'")" -ge "$2" ]; }
# Every one of the N chats is either held by host 1 or already finished (on a busy
# machine the first replies can end before the last chat is asked), and host 1 holds
# at least one: what the kill then cuts off.
_h1_has_all() {
    [ "$(psql_ -c "SELECT count(*) FROM leases WHERE owner = 'host-1'")" -ge 1 ] &&
        [ "$(psql_ -c "SELECT (SELECT count(*) FROM leases WHERE owner = 'host-1')
            + (SELECT count(*) FROM sessions WHERE status = 'completed' AND deleted = 0)")" -ge "$1" ]
}

# mock_holding: the replies waiting at the mock's gate now; _mock_holding_ge N: at least N.
mock_holding() { curl -fsS "$RN_MOCK/__script" | jq .holding; }
_mock_holding_ge() { [ "$(mock_holding)" -ge "$1" ]; }

@test "host 1's runner is SIGKILLed with many chats streaming: hosts 2 and 3 take them after the lease, each finished exactly once" {
    local n=${HS_CHATS:-50} agent i id exact=0 stuck=0 dup=0 took2 took3 ids=()
    # Host 1's runner alone drives them: the others are stopped until the kill.
    hs_runner_stop 2 TERM
    hs_runner_stop 3 TERM
    agent=$(rn_agent anthropic claude-test-model)
    # Replies of about 60 deltas 150 ms apart (9 s), each held by the mock after 10
    # deltas until the release after the kill: every chat is still streaming when the
    # last one has been asked and when host 1 is killed, however slowly a loaded
    # machine asks them.
    rn_slow_default 150
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" --data-binary \
        "$(curl -fsS "$RN_MOCK/__default" | jq -c '.holdAfter = 10')"
    for i in $(seq 1 "$n"); do
        hs_use $(((i - 1) % HS_HOSTS + 1))
        ids+=("$(rn_session "{\"agent\": \"$agent\"}")")
    done
    for i in $(seq 1 "$n"); do
        hs_use $(((i - 1) % HS_HOSTS + 1))
        rn_say "${ids[$((i - 1))]}" "question $i"
    done
    hs_use 1
    ds_poll 60 _h1_has_all "$n" || fail "host-1 holds $(psql_ -c "SELECT count(*) FROM leases WHERE owner = 'host-1'") of $n leases"
    # Mid-stream: every chat's reply waits at its hold (the mock holds n), its first
    # deltas in the chat's log.
    ds_poll 60 _mock_holding_ge "$n" || { tail -20 "$HOSTS_TMP/h1/logs/runner.log" >&2; fail "the mock holds $(mock_holding) of $n replies"; }
    for id in "${ids[@]}"; do
        ds_poll 30 rn_has_event "$id" '.type == "text:delta"' || fail "chat $id has no text:delta in its log"
    done
    hs_runner_start 2
    hs_runner_start 3
    hs_runner_stop 1 KILL
    # The kill ended the held replies; the retries on hosts 2 and 3 pass the gate.
    curl -fsS -o /dev/null -X POST "$RN_MOCK/__release"
    for i in $(seq 1 "$n"); do
        id=${ids[$((i - 1))]}
        if ! rn_wait "$id" '.status == "completed" and .request == null' 120; then
            stuck=$((stuck + 1))
            continue
        fi
        cp "$DS_BODY" "$T/s-$i.json"
        rn_events "$id" >"$T/ev-$i.json"
        if rn_one_reply "$T/s-$i.json" "$(rn_slow_expected "question $i")" &&
            jq -e '([.[] | select(.type == "provider:request_ended")] | length) == 1
                and ([.[] | select(.type == "reply:failed")] | length) == 0' "$T/ev-$i.json" >/dev/null; then
            exact=$((exact + 1))
        else
            jq -c '{status, messages: [.messages[] | {role, interrupted, content: (.content | tostring | .[0:40])}]}' "$T/s-$i.json" >&2
        fi
        [ "$(jq --arg e "$(rn_slow_expected "question $i")" '[.messages[] | select(.content == $e)] | length' "$T/s-$i.json")" -le 1 ] ||
            dup=$((dup + 1))
    done
    took2=$(grep -c 'was cut off by a restart' "$HOSTS_TMP/h2/logs/runner.log" || true)
    took3=$(grep -c 'was cut off by a restart' "$HOSTS_TMP/h3/logs/runner.log" || true)
    echo "# runner kill: chats=$n finished_exactly_once=$exact stuck=$stuck duplicated=$dup cut_taken_by_host2=$took2 host3=$took3" >&3
    [ "$stuck" = 0 ]
    [ "$dup" = 0 ]
    [ "$exact" = "$n" ]
    # The chats in flight on host 1 were found cut off by the hosts that took them.
    [ $((took2 + took3)) -ge 1 ]
}

# ---- the gap hunter --------------------------------------------------------------------

@test "gap hunter: psql holds a stream's row lock 5 s while hosts 1 and 2 append and hosts 2 and 3 tail: contiguous offsets, none skipped, nothing acknowledged lost" {
    local s name k a lost dup bad
    name=$(ds_name gap)
    s=/v1/stream/$name
    req PUT "$(hosts_url 1)$s" -H 'Content-Type: text/plain'
    assert_status 201
    req POST "$(hosts_url 1)$s" -H 'Content-Type: text/plain' --data-binary "first;"
    assert_status 204
    spawn "$T/sse.err" curl -N -sS --max-time 60 -o "$T/sse" "$(hosts_url 3)$s?offset=-1&live=sse"
    spawn "$T/lp.err" lp_reader "$(hosts_url 2)$s" "$T/lp" 60
    [ "$(psql_ -c "SELECT count(*) FROM streams WHERE path LIKE '%$name'")" = 1 ]
    # The lock, held in an open transaction; the file appears once it is taken.
    spawn "$T/psql.out" psql_ -v ON_ERROR_STOP=1 -c "BEGIN" \
        -c "SELECT id FROM streams WHERE path LIKE '%$name' FOR UPDATE" \
        -c "\\! touch $T/locked" -c "SELECT pg_sleep(5)" -c "COMMIT"
    local holder=$LAST_PID
    ds_poll 10 test -e "$T/locked" || fail "psql did not take the lock: $(cat "$T/psql.out")"
    _gap_url() { echo "$(hosts_url $(($1 % 2 + 1)))$s"; }
    writers_start 4 40 _gap_url
    ds_poll 30 rn_gone "$holder" || fail "psql still holds the lock"
    for k in 1 2 3 4; do ds_poll 90 eval "[ \$(wc -l <'$T/w$k') -ge 40 ]" || fail "writer $k: $(wc -l <"$T/w$k") of 40"; done
    read_all "$(hosts_url 3)$s" "$T/final"
    read -r a lost dup bad < <(tally "$T/final" "$T"/w?)
    ds_poll 30 eval '[ "$(sse_text "$T/sse")" = "$(cat "$T/final")" ]' ||
        fail "SSE on host 3 differs from the stream: $(sse_text "$T/sse" | head -c 300) / $(head -c 300 "$T/final")"
    ds_poll 30 eval '[ "$(cat "$T/lp")" = "$(cat "$T/final")" ]' ||
        fail "long-poll on host 2 differs from the stream: $(head -c 300 "$T/lp")"
    local refused
    refused=$(writers_refused)
    echo "# gap hunter: acknowledged=$a lost=$lost duplicated=$dup misplaced=$bad refused=$refused (503 after the lock timeout)" >&3
    [ "$lost" = 0 ]
    [ "$dup" = 0 ]
    [ "$bad" = 0 ]
    [ "$a" -ge 1 ]
    # A refusal is a 503 with Retry-After, never a 500.
    [ "$(writers_refused_bad)" = 0 ] || fail "refusals other than 503 + Retry-After"
    # Each reader's offsets were contiguous: every long-poll went on from the last one's next.
    awk 'NR > 1 && $1 != prev { print "skipped: " prev " -> " $1; bad = 1 } { prev = $2 } END { exit bad }' "$T/lp.offsets"
}

# ---- a live reader through an outage -----------------------------------------------------

# pool_pids N: host N's pool: the process the stack started and its children.
pool_pids() {
    local p
    p=$(cat "$HOSTS_TMP/h$1/fcgi.pid")
    echo "$p"
    cat /proc/"$p"/task/*/children 2>/dev/null | tr ' ' '\n' | sed '/^$/d'
}

@test "an SSE reader on host 3 woken while PostgreSQL is down stays open, and gets the append once the database is back" {
    local s p pids
    s=$(ds_stream outage)
    req PUT "$(hosts_url 1)$s" -H 'Content-Type: text/plain'
    assert_status 201
    req POST "$(hosts_url 1)$s" -H 'Content-Type: text/plain' --data-binary "a;"
    assert_status 204
    spawn "$T/sse.err" curl -N -sS --max-time 60 -o "$T/sse" "$(hosts_url 3)$s?offset=-1&live=sse"
    local reader=$LAST_PID
    ds_poll 10 _sse_tokens_ge "$T/sse" 1 || fail "SSE on host 3 did not start"
    # Host 3's pool is stopped while an append's notification reaches its feed and
    # PostgreSQL goes down: it then wakes its reader with the database gone.
    pids=$(pool_pids 3)
    for p in $pids; do kill -STOP "$p"; done
    req POST "$(hosts_url 1)$s" -H 'Content-Type: text/plain' --data-binary "b;"
    assert_status 204
    "$DS_ROOT/tests/pg.sh" crash "$HS_PG"
    for p in $pids; do kill -CONT "$p"; done
    # The reader's read fails at least once (the pool's connection is gone): the
    # response must not end. Health answers 503 meanwhile.
    ds_poll 10 eval 'req GET "$(hosts_url 3)/v1/health"; [ "$status_code" = 503 ]'
    assert_header Retry-After
    if ds_poll 3 rn_gone "$reader"; then fail "the SSE response ended while the database was down: $(cat "$T/sse")"; fi
    "$DS_ROOT/tests/pg.sh" start "$HS_PG" >/dev/null
    ds_poll 20 _sse_tokens_ge "$T/sse" 2 || fail "SSE on host 3 after the restart: $(cat "$T/sse.txt")"
    req POST "$(hosts_url 2)$s" -H 'Content-Type: text/plain' --data-binary "c;"
    assert_status 204
    ds_poll 20 _sse_tokens_ge "$T/sse" 3 || fail "SSE on host 3: $(cat "$T/sse.txt")"
    [ "$(cat "$T/sse.txt")" = "a;b;c;" ]
    if rn_gone "$reader"; then fail "the SSE response ended"; fi
}

# ---- PostgreSQL killed under writers -----------------------------------------------------

@test "PostgreSQL killed (immediate) and restarted 4 times under 8 writers on 3 hosts: 503 + Retry-After while down, 0 acknowledged appends lost, every host back by itself" {
    local kills=${HS_PG_KILLS:-4} nw=8 k s1 s2 base h p
    s1=$(ds_stream pga)
    s2=$(ds_stream pgb)
    p=$(ds_stream probe)
    for s in "$s1" "$s2" "$p"; do
        req PUT "$(hosts_url 1)$s" -H 'Content-Type: text/plain'
        assert_status 201
    done
    # A live reader on host 3 from the start: its feed's LISTEN connection is cut too.
    spawn "$T/sse.err" curl -N -sS --max-time 170 -o "$T/sse" "$(hosts_url 3)$s1?offset=-1&live=sse"
    # Writer k on host (k - 1) % 3 + 1, the odd ones to s1, the even ones to s2.
    _pg_url() { echo "$(hosts_url $((($1 - 1) % HS_HOSTS + 1)))$([ $(($1 % 2)) = 1 ] && echo "$s1" || echo "$s2")"; }
    writers_start $nw 100000 _pg_url
    local per_kill=""
    for k in $(seq 1 "$kills"); do
        base=$(acks)
        ds_poll 30 _acks_ge $((base + 40)) || fail "no progress before kill $k ($(acks) acknowledged)"
        per_kill="$per_kill $(acks)"
        "$DS_ROOT/tests/pg.sh" crash "$HS_PG"
        for h in $(seq 1 $HS_HOSTS); do probe_refused "$(hosts_url "$h")" "$p" || fail "kill $k, host $h"; done
        "$DS_ROOT/tests/pg.sh" start "$HS_PG" >/dev/null
    done
    # Every writer (so every host's pool) has appended again since the last restart.
    writers_mark $nw
    ds_poll 30 _each_acked_after $nw || fail "a writer has no acknowledgement after the last restart"
    writers_stop
    read_all "$(hosts_url 2)$s1" "$T/final1"
    read_all "$(hosts_url 2)$s2" "$T/final2"
    read -r a1 lost1 dup1 mis1 < <(tally "$T/final1" "$T"/w1 "$T"/w3 "$T"/w5 "$T"/w7)
    read -r a2 lost2 dup2 mis2 < <(tally "$T/final2" "$T"/w2 "$T"/w4 "$T"/w6 "$T"/w8)
    local refused bad
    refused=$(writers_refused)
    bad=$(writers_refused_bad)
    echo "# postgres kills=$kills writers=$nw acknowledged=$((a1 + a2)) (before each kill:$per_kill) lost=$((lost1 + lost2)) duplicated=$((dup1 + dup2)) misplaced=$((mis1 + mis2)) refused=$refused not_503_with_retry_after=$bad" >&3
    [ "$((lost1 + lost2))" = 0 ]
    [ "$((dup1 + dup2))" = 0 ]
    [ "$((mis1 + mis2))" = 0 ]
    [ "$bad" = 0 ]
    # The reader of host 3 saw everything (its feed reconnected and woke it).
    ds_poll 30 eval '[ "$(sse_text "$T/sse")" = "$(cat "$T/final1")" ]' ||
        fail "SSE on host 3 stopped at $(sse_text "$T/sse" | tr -cd ';' | wc -c) of $(tr -cd ';' <"$T/final1" | wc -c)"
    # Every runner is alive and drives a chat again: each in turn, the others stopped.
    for h in $(seq 1 $HS_HOSTS); do
        hs_runner_alive "$h" || fail "host $h's runner exited: $(tail -5 "$HOSTS_TMP/h$h/logs/runner.log")"
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
