#!/usr/bin/env bats
# The runner's failure handling as an operator meets it (issue 11): many chat
# sessions streaming while the runner is SIGKILLed and restarted several times; a
# second runner with the same id (refused) and with another id (each session driven
# by one; a killed or paused runner's sessions taken over once its lease expires, a
# paused runner's late events dropped); a provider 400 (one request, the reply
# failed, the next message tries again); a stream that stops without its terminal
# event (retried, then one complete reply).
#
# One stack and one mock for the file, a short lease (DSTREAM_LEASE_MS=1500) so that
# take-overs are quick. Each test sets the mock's default reply (every request gets
# it, whatever the order), with {{user}} standing for the question, so each session's
# expected reply is its own. Waits are polls with deadlines.

load runner-helpers

setup_file() { rn_start DSTREAM_RUNNER_ID=runner-a DSTREAM_LEASE_MS=1500; }
teardown_file() { rn_stop; }
setup() { rn_crash_setup; }
teardown() { rn_crash_teardown; }

# ---- helpers ------------------------------------------------------------------------

# jq: last_user, the text of a provider request's last user message.
LAST_USER='def last_user: [.body.messages[] | select(.role == "user")] | last | .content
    | if type == "string" then . else ([.[]? | .text? // ""] | join("")) end; .'

sql() { ds_sql "$1"; }

# hold_default N: the mock's default reply (rn_slow_default) waits after N text deltas
# until release (or until the runner reading it is gone); release: the held replies go
# on, and those that come to their hold later pass it (until the next test's setup).
# holding_ge N: at least N replies wait at their hold.
hold_default() {
    curl -fsS "$RN_MOCK/__default" | jq -c --argjson n "$1" '.holdAfter = $n' |
        curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' --data-binary @- "$RN_MOCK/__default"
}
release() { curl -fsS -o /dev/null -X POST "$RN_MOCK/__release"; }
holding_ge() { [ "$(curl -fsS "$RN_MOCK/__script" | jq .holding)" -ge "$1" ]; }

# request_discipline FILE: the session's events (a JSON array) never show a request
# doing anything after it was closed: every delta, tool call and end belongs to a
# request in flight (started and not yet ended, cancelled or retried), and no
# request id starts twice. Prints the offending events and fails otherwise.
request_discipline() {
    jq -e 'reduce .[] as $e ({open: {}, seen: {}, bad: []};
        ($e.payload.requestId // "") as $r |
        if $e.type == "provider:request_started" then
            (if .seen[$r] then .bad += [$e] else . end) | .open[$r] = true | .seen[$r] = true
        elif $e.type == "text:delta" or $e.type == "thinking:delta" or $e.type == "tool:called" then
            (if .open[$r] then . else .bad += [$e] end)
        elif $e.type == "provider:request_ended" or $e.type == "provider:request_cancelled" then
            (if .open[$r] then .open |= del(.[$r]) else .bad += [$e] end)
        elif $e.type == "provider:request_retried" then .open |= del(.[$r])
        else . end) | if (.bad | length) == 0 then true else (.bad | tostring | halt_error) end' "$1" >/dev/null
}

# ---- the chaos test --------------------------------------------------------------------

# _chaos_ready N: the database holds at least N messages, or no session is pending or
# running any more.
_chaos_ready() {
    _rn_msgs_ge "$1" ||
        [ "$(sql "SELECT count(*) FROM sessions WHERE status IN ('pending', 'running') AND deleted = 0")" = 0 ]
}

@test "chaos: 24 chat sessions stream while the runner is SIGKILLed and restarted 4 times; every session completes with its reply exactly once" {
    local n=24 kills=4 agent i k id base cuts=0 logged exact=0 stuck=0 dup=0 ids=()
    agent=$(rn_agent anthropic claude-test-model)
    rn_slow_default 40
    for i in $(seq 1 $n); do ids+=("$(rn_session "{\"agent\": \"$agent\"}")"); done
    for i in $(seq 1 $n); do rn_say "${ids[$((i - 1))]}" "question $i"; done
    for k in $(seq 1 $kills); do
        # Mid-stream: deltas are arriving for this runner (the log grew by 2n events),
        # or, on a machine slow enough that the replies (each continuation shorter
        # than the last) have all ended, nothing is left to cut: the kill goes on.
        base=$(rn_msg_count)
        ds_poll 30 _chaos_ready $((base + 2 * n)) || { tail -20 "$DS_DIR/logs/runner.log" >&2; return 1; }
        rn_runner_signal KILL
        rn_runner_start
    done
    for i in $(seq 1 $n); do
        id=${ids[$((i - 1))]}
        if ! rn_wait "$id" '.status == "completed" and .request == null' 60; then
            stuck=$((stuck + 1))
            continue
        fi
        cp "$DS_BODY" "$T/s-$i.json"
        rn_events "$id" >"$T/ev-$i.json"
        if rn_one_reply "$T/s-$i.json" "$(rn_slow_expected "question $i")"; then
            exact=$((exact + 1))
        else
            jq -c '{status, messages: [.messages[] | {role, interrupted, reason, content: (.content | tostring | .[0:40])}]}' "$T/s-$i.json" >&2
        fi
        if [ "$(jq --arg e "$(rn_slow_expected "question $i")" '[.messages[] | select(.content == $e)] | length' "$T/s-$i.json")" -gt 1 ]; then
            dup=$((dup + 1))
            jq -c '.[] | select(.type != "text:delta") | [.offset, .type, .payload.requestId, .payload.reason, .payload.attempt]' "$T/ev-$i.json" >&2
        fi
        # No event from a process that had lost the request (or the lease).
        request_discipline "$T/ev-$i.json"
        # Restarts: each cut request was closed (reason restart) and retried on the
        # restart budget; every retry started a request; one of them ended.
        jq -e '([.[] | select(.type == "provider:request_cancelled" and .payload.reason == "restart")] | length) as $c
            | ([.[] | select(.type == "provider:request_retried")] | length) as $r
            | ([.[] | select(.type == "provider:request_retried" and .payload.reason == "restart")] | length) == $c
              and $r == $c
              and ([.[] | select(.type == "provider:request_started")] | length) == $c + 1
              and ([.[] | select(.type == "provider:request_ended")] | length) == 1
              and ([.[] | select(.type == "reply:failed")] | length) == 0' "$T/ev-$i.json" >/dev/null ||
            { jq -c '.[] | select(.type != "text:delta") | [.type, .payload.requestId, .payload.reason]' "$T/ev-$i.json" >&2; return 1; }
        cuts=$((cuts + $(jq '[.[] | select(.type == "provider:request_cancelled" and .payload.reason == "restart")] | length' "$T/ev-$i.json")))
    done
    # Every request cut off by a restart was found by a runner that then held the
    # lease, and logged as such (a killed runner logs nothing of its own).
    logged=$(grep -c 'was cut off by a restart' "$DS_DIR/logs/runner.log" || true)
    echo "# chaos: sessions=$n kills=$kills completed_exactly_once=$exact stuck=$stuck duplicated=$dup requests_cut=$cuts cut_found_in_log=$logged" >&3
    [ "$stuck" = 0 ]
    [ "$dup" = 0 ]
    [ "$exact" = "$n" ]
    [ "$cuts" -ge 1 ]
    [ "$logged" -ge "$cuts" ]
    # The mock saw exactly one request per attempt: n first attempts plus one per cut.
    # The provider saw no request the log does not know of: per session at most one
    # per request_started (fewer when a runner died between recording a request and
    # sending it).
    rn_requests >"$T/requests.json"
    for i in $(seq 1 $n); do
        local made started
        made=$(jq --arg q "question $i" "$LAST_USER"' | map(select(last_user == $q)) | length' "$T/requests.json")
        started=$(jq '[.[] | select(.type == "provider:request_started")] | length' "$T/ev-$i.json")
        [ "$made" -ge 1 ] && [ "$made" -le "$started" ] ||
            { echo "session $i: $made requests made, $started started" >&2; return 1; }
    done
}

# ---- two runners ------------------------------------------------------------------------

@test "a second runner with the same id on the same database refuses to start and says why; the first goes on" {
    local agent id pid
    pid=$(rn_runner_pid)
    # shellcheck disable=SC2086 # DS_SETTINGS is a list of NAME=VALUE words
    run env $DS_SETTINGS DSTREAM_DB="$DS_DB" timeout 10 "$DS_BIN/dstream-runner"
    [ "$status" = 1 ]
    # SQLite's lock names the pid; PostgreSQL's row the host and the pid (README.md,
    # DSTREAM_RUNNER_ID).
    if ds_is_pg; then
        [[ "$output" == *"refusing to start: another runner with id \"runner-a\" is running on this database (on $(hostname) pid $pid;"* ]] ||
            { echo "$output" >&2; return 1; }
    else
        [[ "$output" == *"refusing to start: another runner with id \"runner-a\" is running on this database (pid $pid)"* ]] ||
            { echo "$output" >&2; return 1; }
    fi
    [[ "$output" == *DSTREAM_RUNNER_ID* ]]
    rn_runner_alive
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "$(jq -nc '{text: "Still here.", usage: {input: 1, output: 1}}')"
    rn_say "$id" "Are you there?"
    rn_wait "$id" '.status == "completed" and .messages[-1].content == "Still here."'
}

@test "two runners, two ids: each session is driven by one; after one is killed the other takes its sessions once the lease expires" {
    local agent i id a_sessions owners b_cuts=0 ids=()
    agent=$(rn_agent anthropic claude-test-model)
    rn_slow_default 80
    # Every reply waits after 10 deltas until runner-a is killed: runner-a's are still
    # in flight at the kill, however slowly runner-b and the sessions below come.
    hold_default 10
    # Four sessions that only runner-a can have, streaming ...
    for i in 1 2 3 4; do ids+=("$(rn_session "{\"agent\": \"$agent\"}")"); rn_say "${ids[$((i - 1))]}" "question $i"; done
    # Every session's holder is noted as it shows (a lease lasts while a reply
    # streams).
    ds_poll 20 eval 'sql "SELECT session, owner FROM leases" >>"$T/owners"; [ "$(sql "SELECT count(*) FROM leases WHERE owner = '"'"'runner-a'"'"'")" -ge 4 ]'
    # ... then runner-b, and four more sessions that either may take.
    rn_runner_b runner-b
    for i in 5 6 7 8; do ids+=("$(rn_session "{\"agent\": \"$agent\"}")"); rn_say "${ids[$((i - 1))]}" "question $i"; done
    printf '%s\n' "${ids[@]}" | sort >"$T/ids"
    ds_poll 20 eval 'sql "SELECT session, owner FROM leases" >>"$T/owners"; [ "$(cut -d"|" -f1 "$T/owners" | sort -u | comm -12 - "$T/ids" | wc -l)" = 8 ]'
    # Each session had one holder at a time; runner-a's in flight now are cut by the kill.
    a_sessions=$(sql "SELECT session FROM leases WHERE owner = 'runner-a'")
    rn_runner_signal KILL
    # The replies go on: runner-b's own, and its retries of runner-a's.
    release
    for i in $(seq 1 8); do
        id=${ids[$((i - 1))]}
        rn_wait "$id" '.status == "completed" and .request == null' 60
        cp "$DS_BODY" "$T/s-$i.json"
        rn_one_reply "$T/s-$i.json" "$(rn_slow_expected "question $i")" || { cat "$T/owners" >&2; return 1; }
        rn_events "$id" >"$T/ev-$i.json"
        request_discipline "$T/ev-$i.json"
        # One request, and one more for each time a runner found the session's
        # request cut off (by the kill: runner-b, for runner-a's sessions; on a
        # starved machine also runner-a itself, back from a pause past its lease
        # that nobody used: the request it dropped is closed and retried).
        local cuts want
        cuts=$(cat "$DS_DIR/logs/runner.log" "$DS_DIR/logs/runner-runner-b.log" |
            grep -c "session $id: request .* was cut off by a restart" || true)
        want=$((1 + cuts))
        [ "$(rn_requests | jq --arg q "question $i" "$LAST_USER"' | map(select(last_user == $q)) | length')" = "$want" ] ||
            { echo "session $i ($id): not $want request(s) ($cuts cut off); owners:" >&2; cat "$T/owners" >&2
              grep "session $id" "$DS_DIR/logs/runner.log" "$DS_DIR/logs/runner-runner-b.log" >&2; return 1; }
        # A session of runner-a's at the kill that was still streaming was taken
        # by runner-b, which found the request cut off.
        grep -qx "$id" <<<"$a_sessions" && grep -q "session $id: request .* was cut off by a restart" \
            "$DS_DIR/logs/runner-runner-b.log" && b_cuts=$((b_cuts + 1))
    done
    # runner-b found runner-a's requests cut off: every one in flight at the kill
    # (all of them, their replies waiting at the hold, unless runner-a had only just
    # claimed one and not started its request yet).
    [ -n "$a_sessions" ]
    echo "# two runners: runner-a held $(wc -w <<<"$a_sessions") at the kill; runner-b found $b_cuts of them cut off" >&3
    [ "$b_cuts" -ge 1 ]
}

# leased ID: a runner holds the session's lease.
leased() { [ -n "$(sql "SELECT owner FROM leases WHERE session = '$1'")" ]; }

# started_in LOG IDS_FILE: how many of the sessions listed started a provider request
# in that runner's log.
started_in() {
    sed -n 's/.*session \([^ ]*\): request .* started (.*/\1/p' "$1" | sort -u | comm -12 - "$2" | wc -l
}

@test "two runners, two ids, 20 streaming sessions, one runner busy for a moment as each comes: each runner drives at least 5 (the other leaves it the sessions that fall to it), each reply exactly once" {
    local n=20 agent i id a c ids=()
    agent=$(rn_agent anthropic claude-test-model)
    rn_slow_default 80
    rn_runner_b runner-c
    # Both runners know of each other: runner-c's row has been published twice
    # (each runner reads the others' rows once a second).
    ds_poll 20 eval '[ "$(sql "SELECT count(*) FROM runner_stats WHERE owner = '"'"'runner-c'"'"' AND updated_ms >= started_ms + 2000")" = 1 ]'
    for i in $(seq 1 $n); do ids+=("$(rn_session "{\"agent\": \"$agent\"}")"); done
    # Their messages, each while runner-c's loop is busy for a moment (stopped, out
    # of a commit, until 50 ms after the message is in: less than the time runner-a
    # leaves it, more than runner-a needs to win the race for it). runner-c is not
    # stopped again for the next one before one of them has taken this one: it has
    # the rest of the time runner-a leaves it, not the instant before the next stop.
    for i in $(seq 1 $n); do
        stop_between_commits "$B_PID"
        rn_say "${ids[$((i - 1))]}" "question $i" || { kill -CONT "$B_PID"; return 1; }
        sleep 0.05
        kill -CONT "$B_PID"
        ds_poll 20 leased "${ids[$((i - 1))]}"
    done
    printf '%s\n' "${ids[@]}" | sort >"$T/ids"
    for i in $(seq 1 $n); do
        id=${ids[$((i - 1))]}
        rn_wait "$id" '.status == "completed" and .request == null' 60
        cp "$DS_BODY" "$T/s-$i.json"
        rn_one_reply "$T/s-$i.json" "$(rn_slow_expected "question $i")"
        # One request each: no session was driven by both runners.
        [ "$(rn_requests | jq --arg q "question $i" "$LAST_USER"' | map(select(last_user == $q)) | length')" = 1 ]
    done
    a=$(started_in "$DS_DIR/logs/runner.log" "$T/ids")
    c=$(started_in "$DS_DIR/logs/runner-runner-c.log" "$T/ids")
    echo "runner-a drove $a, runner-c $c" >&3
    [ $((a + c)) = "$n" ]
    [ "$a" -ge 5 ] && [ "$c" -ge 5 ]
}

@test "two runners, 30 sessions asked 3 times in a row: the leases given up go in the commits while the other runner claims, with no commit failed or lock cycle, each reply once" {
    local n=30 agent i r id ids=() from_a from_c list
    agent=$(rn_agent anthropic claude-test-model)
    rn_slow_default 2       # a reply in about 0.15 s: sessions end and start again all the time
    from_a=$(($(wc -l <"$DS_DIR/logs/runner.log") + 1))
    rn_runner_b runner-c
    from_c=$(($(wc -l <"$DS_DIR/logs/runner-runner-c.log") + 1))
    for i in $(seq 1 $n); do ids+=("$(rn_session "{\"agent\": \"$agent\"}")"); done
    for r in 1 2 3; do
        for i in $(seq 1 $n); do rn_say "${ids[$((i - 1))]}" "s$i r$r"; done
        for i in $(seq 1 $n); do
            rn_wait "${ids[$((i - 1))]}" ".status == \"completed\" and .request == null and (.messages | length) == $((2 * r))" 60
        done
    done
    rn_requests >"$T/requests.json"
    for i in $(seq 1 $n); do
        for r in 1 2 3; do
            [ "$(jq --arg q "s$i r$r" "$LAST_USER"' | map(select(last_user == $q)) | length' "$T/requests.json")" = 1 ] ||
                { echo "s$i r$r: not one request" >&2; return 1; }
        done
    done
    rn_runner_b_stop
    # No commit undone (a lock cycle on PostgreSQL is one: "deadlock detected"), no
    # events dropped, in either runner.
    ! tail -n "+$from_a" "$DS_DIR/logs/runner.log" | grep -E 'cannot commit|deadlock|dropped \(' >&2
    ! tail -n "+$from_c" "$DS_DIR/logs/runner-runner-c.log" | grep -E 'cannot commit|deadlock|dropped \(' >&2
    grep 'dstream-runner: stopped (' "$DS_DIR/logs/runner-runner-c.log" | tail -1 | grep -oE '[0-9]+ leases given up in commits' >&3
    # Every lease of these sessions given back (an expired one stays a row): none left.
    list=$(printf "'%s'," "${ids[@]}")
    list=${list%,}
    ds_poll 5 eval '[ "$(sql "SELECT count(*) FROM leases WHERE session IN ($list)")" = 0 ]' ||
        { echo "leases left: $(sql "SELECT session, owner, expires_ms FROM leases WHERE session IN ($list)")" >&2; return 1; }
}

# stop_between_commits PID: SIGSTOP the process at a moment it holds no write lock
# (neither the writers' lock nor SQLite's): a writer stopped inside its commit
# would stop every writer until it goes on, which is SQLite's rule and not what
# the test is about. Tries again a little later until such a moment comes. On
# PostgreSQL: a moment no other session of the database is inside a transaction
# (the rows a stopped transaction locks would stop the writers of those rows).
no_write_lock() {
    if ds_is_pg; then
        [ "$(ds_sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                     AND pid <> pg_backend_pid() AND xact_start IS NOT NULL")" = 0 ]
    else
        flock -n "$DS_DB-wlock" true &&
            sqlite3 -cmd '.timeout 100' "$DS_DB" 'BEGIN IMMEDIATE; ROLLBACK;' >/dev/null 2>&1
    fi
}
stop_between_commits() {
    local n
    for n in $(seq 100); do
        kill -STOP "$1"
        if no_write_lock; then
            return 0
        fi
        kill -CONT "$1"
        sleep 0.05
    done
    echo "could not stop $1 outside a commit" >&2
    return 1
}

# runner-a's dropped-events counter in /metrics (empty until published).
dropped_metric() {
    curl -fsS --max-time 10 "$DS_URL/metrics" |
        awk '$1 == "dstream_runner_dropped_events_total{runner=\"runner-a\"}" { print $2 }'
}

@test "a runner paused past its lease writes nothing more into the sessions another runner took over (late events dropped)" {
    local agent i id a_pid before after mark dropped0 ids=()
    agent=$(rn_agent anthropic claude-test-model)
    rn_slow_default 50
    # Every reply waits after 10 deltas until runner-a is stopped: runner-a is still
    # reading the three then, however slowly runner-b and the metric below come.
    hold_default 10
    for i in 1 2 3; do ids+=("$(rn_session "{\"agent\": \"$agent\"}")"); rn_say "${ids[$((i - 1))]}" "question $i"; done
    ds_poll 20 eval '[ "$(sql "SELECT count(*) FROM leases WHERE owner = '"'"'runner-a'"'"'")" -ge 3 ]'
    # Mid-stream: the three replies are at their hold.
    ds_poll 20 holding_ge 3
    rn_runner_b runner-b
    a_pid=$(rn_runner_pid)
    ds_poll 10 eval '[ -n "$(dropped_metric)" ]'
    dropped0=$(dropped_metric)
    mark=$(wc -l <"$DS_DIR/logs/runner.log")
    stop_between_commits "$a_pid"
    # The rest of runner-a's replies comes while it is stopped (it reads them when it
    # goes on: the late events); runner-b's retries, once it takes over, pass too.
    release
    for i in 1 2 3; do
        rn_wait "${ids[$((i - 1))]}" '.status == "completed" and .request == null' 60
    done
    before=$(rn_msg_count)
    kill -CONT "$a_pid"
    # runner-a finds out (at its next look at each session, or when its commit's
    # lease check fails) and writes nothing.
    ds_poll 20 grep -qE 'lease expired while this runner was away|lease lost' "$DS_DIR/logs/runner.log"
    # Once runner-a is back to waiting, nothing it had has reached the log.
    ds_poll 20 eval '[ "$(grep -cE "lease expired while this runner was away|lease lost" "$DS_DIR/logs/runner.log")" -ge 3 ]' || true
    after=$(rn_msg_count)
    [ "$before" = "$after" ] || { tail -20 "$DS_DIR/logs/runner.log" >&2; return 1; }
    # What runner-a dropped is counted where an operator sees it: /metrics grew by
    # what its log says it dropped since the pause (0 when it found out at a look,
    # before a commit of its own).
    local logged
    logged=$(tail -n +"$((mark + 1))" "$DS_DIR/logs/runner.log" |
        grep -oE 'lease lost to another runner: [0-9]+ event' | awk '{ n += $6 } END { print n + 0 }')
    echo "# runner-a dropped $logged event(s) after the pause" >&3
    ds_poll 10 eval '[ "$(dropped_metric)" = "$((dropped0 + logged))" ]' ||
        { echo "metric $(dropped_metric), before $dropped0, logged $logged" >&2; grep dropped "$DS_DIR/logs/runner.log" >&2; return 1; }
    for i in 1 2 3; do
        id=${ids[$((i - 1))]}
        rn_get "$id"
        rn_one_reply "$DS_BODY" "$(rn_slow_expected "question $i")"
        rn_events "$id" >"$T/ev-$i.json"
        request_discipline "$T/ev-$i.json"
    done
    kill -0 "$a_pid"
}

# ---- the runner's own commits -----------------------------------------------------------

# stop_figure NAME: a figure of the runner's last "stopped (...)" line: commits, views
# (decided on), kept (of them from the view kept), own (changes that were its own
# deltas), renewed (leases renewed in commits), by_drive (renewed by drives).
stop_figure() {
    grep 'dstream-runner: stopped (' "$DS_DIR/logs/runner.log" | tail -1 | sed -E \
        's/.*\(([0-9]+) commits, [0-9]+ events dropped after a lost lease; ([0-9]+) views decided on, ([0-9]+) of them kept across commits; ([0-9]+) changes that were this process.s own deltas; leases renewed ([0-9]+) times in commits, ([0-9]+) by drives[;)].*/commits=\1 views=\2 kept=\3 own=\4 renewed=\5 by_drive=\6/' |
        tr ' ' '\n' | sed -n "s/^$1=//p"
}

@test "a streaming reply: the runner does not look again at a session for its own deltas, decides from the view it keeps, and renews the lease in the commits of the deltas" {
    local agent id deltas views
    # A runner of its own (its figures are counted from its start).
    rn_runner_signal TERM
    rn_runner_start
    agent=$(rn_agent anthropic claude-test-model)
    rn_slow_default 40       # ~60 deltas over ~2.4 s: the lease (1500 ms) is due for renewal every 500 ms
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$id" "own commits"
    rn_wait "$id" '.status == "completed" and .request == null' 60
    rn_get "$id"
    rn_one_reply "$DS_BODY" "$(rn_slow_expected "own commits")"
    rn_runner_signal TERM
    deltas=$(rn_events "$id" | jq '[.[] | select(.type == "text:delta")] | length')
    grep 'dstream-runner: stopped (' "$DS_DIR/logs/runner.log" | tail -1 >&3
    views=$(stop_figure views)
    echo "# $deltas deltas; $(stop_figure commits) commits, $views views, $(stop_figure kept) kept, $(stop_figure own) own, renewed $(stop_figure renewed) in commits, $(stop_figure by_drive) by drives" >&3
    rn_runner_start
    [ "$deltas" -ge 20 ]
    # Each commit of deltas woke the runner (its own change): it did not look again.
    [ "$(stop_figure own)" -ge 10 ]
    # It looked at the session for what was not only deltas (the message, its own
    # request started and ended): a few views, not one per commit.
    [ "$views" -ge 1 ] && [ "$views" -le 10 ]
    # After its own commits the view it keeps was the log's tail: no replay.
    [ "$(stop_figure kept)" -ge 1 ]
    # The lease was renewed with the deltas, in the loop's commits.
    [ "$(stop_figure renewed)" -ge 1 ]
}

@test "replies that end give their leases back in the loop's commits: none left held, none with a commit of its own" {
    local agent ids=() id i given from
    # A runner of its own whose leases last a minute: a lease found gone was released.
    rn_runner_signal TERM
    from=$(($(wc -l <"$DS_DIR/logs/runner.log") + 1))
    DS_SETTINGS="$DS_SETTINGS DSTREAM_LEASE_MS=60000" rn_runner_start
    agent=$(rn_agent anthropic claude-test-model)
    for i in 1 2 3 4 5 6; do
        id=$(rn_session "{\"agent\": \"$agent\"}")
        ids+=("$id")
        rn_say "$id" "give it back $i"
    done
    for id in "${ids[@]}"; do rn_wait "$id" '.status == "completed" and .request == null'; done
    # Released within a commit or two, long before the minute was up (15 s: a loaded
    # machine's runner can be that late, which a lease left to run out never is).
    # These sessions' leases only: a runner an earlier test killed -9 left its lease
    # rows behind, expired, until someone takes them (one made this fail in a full run).
    local mine
    mine=$(printf "'%s'," "${ids[@]}")
    mine="session IN (${mine%,})"
    ds_poll 15 eval '[ "$(sql "SELECT count(*) FROM leases WHERE $mine")" = 0 ]' || {
        echo "leases still held: $(sql "SELECT session, owner, expires_ms FROM leases WHERE $mine")" >&2
        for id in $(sql "SELECT session FROM leases WHERE $mine"); do
            rn_events "$id" | jq -c '.[] | select(.type != "text:delta") | [.offset, .type]' >&2
            grep -F "$id" "$DS_DIR/logs/runner.log" | tail -20 >&2
        done
        tail -n "+$from" "$DS_DIR/logs/runner.log" | tail -30 >&2
        return 1
    }
    # A session given up and asked again at once: its lease is taken again (the
    # release, if still queued, taken back) and the next reply runs under it.
    rn_say "${ids[0]}" "and again"
    rn_wait "${ids[0]}" '.status == "completed" and .request == null and (.messages | length) == 4'
    rn_runner_signal TERM
    line=$(grep 'dstream-runner: stopped (' "$DS_DIR/logs/runner.log" | tail -1)
    [[ "$line" =~ \ ([0-9]+)\ leases\ given\ up\ in\ commits ]] || { echo "no count in: $line" >&2; return 1; }
    given=${BASH_REMATCH[1]}
    rn_runner_start
    [ "$given" -ge 7 ] || { echo "$given leases given up in commits: $line" >&2; return 1; }
    ! tail -n "+$from" "$DS_DIR/logs/runner.log" | grep 'lease lost' >&2
}

# ---- provider failures ----------------------------------------------------------------

@test "a provider 400: exactly one request, the reply fails with the error and attempts; the next message tries again" {
    local agent id other
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script '{"status": 400, "errorMessage": "max_tokens: too large"}'
    rn_say "$id" "A bad request."
    rn_wait "$id" '.status == "failed"'
    jq -e '.error | contains("HTTP 400") and contains("rejected")' "$DS_BODY" >/dev/null
    jq -e '.attempts == 1 and .request == null and .retryAt == null' "$DS_BODY" >/dev/null
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "reply:failed")][0].payload | .reason == "rejected" and .attempts == 1' "$T/ev.json" >/dev/null
    jq -e '[.[] | select(.type == "provider:request_cancelled")][0].payload | .reason == "failed" and (.error | contains("400"))' "$T/ev.json" >/dev/null
    jq -e '[.[] | select(.type == "provider:request_retried")] == []' "$T/ev.json" >/dev/null
    # The dstream tool shows the same, on the server.
    run "$DS_BIN/dstream" --db "$DS_DB" session "$id"
    [ "$status" = 0 ]
    [[ "$output" == *"status    failed"* && "$output" == *"attempts  1 "* && "$output" == *"error     HTTP 400"* ]] ||
        { echo "$output" >&2; return 1; }
    run "$DS_BIN/dstream" --db "$DS_DB" sessions --status failed
    [ "$status" = 0 ]
    grep -q "^$id  *failed  *attempts=1 error=HTTP 400" <<<"$output" || { echo "$output" >&2; return 1; }
    # Nothing more happens by itself: another session's round trip goes by, and the
    # mock saw exactly one request for this one.
    other=$(rn_session "{\"agent\": \"$agent\"}")
    rn_say "$other" "Sentinel."
    rn_wait "$other" '.status == "completed"'
    [ "$(rn_requests | jq '[.[] | select(.body | tostring | contains("A bad request."))] | length')" = 1 ]
    rn_get "$id"
    jq -e '.status == "failed"' "$DS_BODY" >/dev/null
    # The next message tries again, and succeeds.
    rn_script "$(jq -nc '{text: "Better now.", usage: {input: 1, output: 1}}')"
    rn_say "$id" "A good request."
    rn_wait "$id" '.status == "completed" and .messages[-1].content == "Better now." and .error == null'
}

@test "a stream that stops without its terminal event is retried (continued from its text), then one complete reply" {
    local agent id
    agent=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$agent\"}")
    # A well-formed stream that just ends after two deltas: no message_delta, no message_stop.
    rn_script "$(jq -nc '{raw: [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test-model\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Half an \"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"answer\"}}\n\n"],
        delayMs: 20}')"
    # The retry continues the text the log holds (docs/agents.md): the mock goes on
    # from where that prefill ends.
    rn_script "$(jq -nc '{text: "Half an answer, and then a whole one.", usage: {input: 5, output: 3}}')"
    rn_say "$id" "Answer me."
    rn_wait "$id" '.status == "completed" and .request == null and .messages[-1].content == "Half an answer, and then a whole one."'
    jq -e '[.messages[] | select(.role == "assistant" and (.interrupted | not)) | .content] == ["Half an answer, and then a whole one."]' "$DS_BODY" >/dev/null
    jq -e '[.messages[] | .role] == ["user", "assistant"]' "$DS_BODY" >/dev/null
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "text:delta") | .payload.text] | add == "Half an answer, and then a whole one."' "$T/ev.json" >/dev/null
    rn_requests | jq -e '(.[1].body.messages | last) == {role: "assistant", content: "Half an answer"}' >/dev/null
    request_discipline "$T/ev.json"
    jq -e '[.[] | select(.type == "provider:request_retried") | .payload | {reason, cause, attempt}] == [{reason: "failed", cause: "stream_cut", attempt: 2}]' "$T/ev.json" >/dev/null
    jq -e '[.[] | select(.type == "provider:request_ended")] | length == 1' "$T/ev.json" >/dev/null
    [ "$(rn_request_count)" = 2 ]
}

# ---- limits ---------------------------------------------------------------------------

# rn_runner_with NAME=VALUE...: replace the stack's runner by one with these settings
# added (the next test's setup starts the usual one again if this one is gone).
rn_runner_with() {
    local before
    rn_runner_signal TERM
    before=$(rn_runner_starts)
    # shellcheck disable=SC2086 # DS_SETTINGS is a list of NAME=VALUE words
    env $DS_SETTINGS DSTREAM_DB="$DS_DB" "$@" "$DS_BIN/dstream-runner" \
        </dev/null >>"$DS_DIR/logs/runner.log" 2>&1 3>&- &
    echo $! >"$DS_DIR/runner.pid"
    rn_runner_wait_started $((before + 1))
}

@test "limits: provider requests per message and per session, events per session, workflow steps (maxSteps) each end with an explicit event" {
    local agent id wf
    rn_runner_with DSTREAM_MESSAGE_REQUESTS_MAX=2 DSTREAM_SESSION_REQUESTS_MAX=3 DSTREAM_SESSION_EVENTS_MAX=40
    agent=$(rn_agent anthropic claude-test-model)

    # Per message: two attempts (429, 429), then the third is not made.
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script '{"replies": [{"status": 429}, {"status": 429}]}'
    rn_say "$id" "Limited question."
    rn_wait "$id" '.status == "failed"'
    jq -e '.error | contains("DSTREAM_MESSAGE_REQUESTS_MAX")' "$DS_BODY" >/dev/null
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "reply:failed")][0].payload.reason == "message_request_limit"' "$T/ev.json" >/dev/null
    [ "$(rn_request_count)" = 2 ]
    # Per session: the next message gets one more request (3 in all), the one after none.
    rn_script "$(jq -nc '{text: "One more.", usage: {input: 1, output: 1}}')"
    rn_say "$id" "Again."
    rn_wait "$id" '.status == "completed" and .messages[-1].content == "One more."'
    rn_say "$id" "And again."
    rn_wait "$id" '.status == "failed"'
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "reply:failed")][-1].payload.reason == "session_request_limit"' "$T/ev.json" >/dev/null
    [ "$(rn_request_count)" = 3 ]

    # Events: a reply of 60 deltas in a session allowed 40 events ends the session.
    id=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script "$(jq -nc --arg t "$(printf 'word %.0s' $(seq 60))" '{text: $t, chunkSize: 5, delayMs: 30, usage: {input: 1, output: 60}}')"
    rn_say "$id" "A long one."
    rn_wait "$id" '.status == "cancelled"' 30
    rn_events "$id" >"$T/ev.json"
    jq -e '.[-1].type == "session:cancelled" and (.[-1].payload.reason | contains("limit of 40 events"))' "$T/ev.json" >/dev/null
    jq -e 'length < 60' "$T/ev.json" >/dev/null
    req POST "/v1/sessions/$id/messages" -H 'Content-Type: application/json' --data-binary '{"content": "more?"}'
    assert_status 409

    # Steps: a loop that would go on for ever stops after maxSteps steps.
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" '{name: $n, maxSteps: 5, initialState: {n: 0},
        phases: [{name: "loop", steps: [{kind: "update", set: {n: "{{state.n}}1"}}],
                  transitions: [{when: "state.n == \"never\"", to: "end"}, {to: "loop"}]},
                 {name: "end", terminal: true}]}')"
    id=$(rn_session "$(jq -nc --arg w "$wf" '{workflow: $w}')")
    rn_wait "$id" '.status == "failed"' 30
    jq -e '.error | contains("maxSteps")' "$DS_BODY" >/dev/null
    rn_events "$id" >"$T/ev.json"
    jq -e '[.[] | select(.type == "step:started")] | length == 5' "$T/ev.json" >/dev/null
    jq -e '.[-1].type == "workflow:failed" and .[-1].payload.reason == "step_limit"' "$T/ev.json" >/dev/null
    # Back to the usual runner for what follows.
    rn_runner_signal TERM
    rn_runner_start
}
