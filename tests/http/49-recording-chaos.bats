#!/usr/bin/env bats
# Recording under chaos (docs/recording.md, "Crash safety"): many chat sessions in
# record mode stream slow replies while the runner is SIGKILLed and restarted at
# varying moments, several times (then the same with two runners, one of them
# killed again and again). Afterwards every session holds its reply exactly once;
# its recordings are one complete row for the request that succeeded and one
# incomplete row per attempt a kill cut off (no more, no less), every row the
# recording of a request the session's log started, and no complete recording
# misses a chunk. Then, with the mock frozen (SIGSTOP: a request sent to it would
# hang until the deadline), one playback session per recorded one, asking the same
# question, gets the same reply in the same deltas from the recordings alone.
#
# One stack and one mock for the file, a short lease (DSTREAM_LEASE_MS=1500) so that
# take-overs are quick. The mock's default reply names the question ({{user}}), so
# each session's reply is its own. Waits are polls with deadlines; the kills come
# after a random amount of streaming, not after fixed sleeps.

load runner-helpers

setup_file() { rn_start DSTREAM_RUNNER_ID=runner-a DSTREAM_LEASE_MS=1500; }
teardown_file() {
    [ -n "${RN_MOCK_PID:-}" ] && kill -CONT "$RN_MOCK_PID" 2>/dev/null
    rn_stop
}
setup() { rn_crash_setup; }
teardown() { rn_crash_teardown; }

# ---- helpers ------------------------------------------------------------------------

# A reply of about 55 deltas, 30 ms apart, naming the question.
FILL="every chunk of this reply is recorded while the runner is killed"
slow_default() {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" --data-binary \
        "$(jq -nc --arg t "Reply to [{{user}}]: $FILL, $FILL, $FILL." \
            '{text: $t, chunkSize: 4, delayMs: 30, usage: {input: 10, output: 55}}')"
}
# q I: session I's question, its test's own (the key does not name the agent).
q() { printf 'test %s question %s' "$BATS_TEST_NUMBER" "$1"; }
expected() { printf 'Reply to [%s]: %s, %s, %s.' "$1" "$FILL" "$FILL" "$FILL"; }

sql() { ds_sql "$1"; }
msg_count() { sql 'SELECT count(*) FROM messages'; }
_grown() { [ "$(msg_count)" -ge "$1" ]; }

# cut_logged: how many requests cut off by a restart the runners' logs name.
cut_logged() { cat "$DS_DIR"/logs/runner*.log | grep -c 'was cut off by a restart' || true; }

# kill_b: SIGKILL the second runner and wait until it has exited.
kill_b() {
    kill -KILL "$B_PID"
    ds_poll 10 rn_gone "$B_PID"
}

# streaming_or_done COUNT: the log holds COUNT events, or every session of WATCH
# has ended (a kill after the last reply leaves nothing to wait for).
streaming_or_done() {
    _grown "$1" || [ "$(sql "SELECT count(*) FROM sessions WHERE status NOT IN ('completed', 'failed')
        AND id IN ($(printf "'%s'," "${WATCH[@]}")'')")" = 0 ]
}

# holder: the runner whose leases hold most of WATCH's sessions now (none: empty).
holder() {
    sql "SELECT owner FROM leases WHERE session IN ($(printf "'%s'," "${WATCH[@]}")'')
         GROUP BY owner ORDER BY count(*) DESC, owner LIMIT 1"
}

# chaos N KILLS TWO: N record sessions of one agent each ask their own question (reply
# streaming slowly); KILLS times, once the log has grown by one event per session
# (or every session is done) and a random moment (0 to 1.6 s) later, a runner is SIGKILLed and started again
# (TWO=1: runner-b runs too, and the two are killed in turn, the first one the
# runner holding most of the sessions at that moment). Sets AGENT, IDS, KILLED (the
# runners killed, in order) and CUT_MARK.
chaos() {
    local n=$1 kills=$2 two=$3 i k base victim
    CUT_MARK=$(cut_logged)
    AGENT=$(rn_agent anthropic claude-test-model)
    slow_default
    [ "$two" = 1 ] && rn_runner_b runner-b
    IDS=()
    for i in $(seq 1 "$n"); do IDS+=("$(rn_session "{\"agent\": \"$AGENT\", \"mode\": \"record\"}")"); done
    for i in $(seq 1 "$n"); do rn_say "${IDS[$((i - 1))]}" "$(q "$i")"; done
    WATCH=("${IDS[@]}")
    KILLED=""
    victim=a
    for k in $(seq 1 "$kills"); do
        # Streaming (the log grew by one event per session), then a random moment
        # up to about a reply's length later: the kill may cut replies anywhere
        # from their first delta to their end, or fall after some have ended.
        base=$(msg_count)
        ds_poll 30 streaming_or_done $((base + n)) || { tail -20 "$DS_DIR/logs/runner.log" >&2; return 1; }
        sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
        [ $((RANDOM % 2)) = 1 ] && sleep 0.6
        # Two runners: the first victim is the one holding most of the sessions then
        # (either may hold them all: one that held none would cut nothing).
        [ "$two" = 1 ] && [ "$k" = 1 ] && [ "$(holder)" = runner-b ] && victim=b
        if [ "$victim" = a ]; then
            rn_runner_signal KILL
            rn_runner_start
        else
            kill_b
            rn_runner_b runner-b
        fi
        KILLED="$KILLED$victim"
        # Two runners: the other one next time.
        if [ "$two" = 1 ]; then
            if [ "$victim" = a ]; then victim=b; else victim=a; fi
        fi
    done
}

# check_recorded N: every session completed with its reply once; its events and its
# recordings agree (see the file's comment); sets CUTS, INCOMPLETE, COMPLETE and
# prints them with the file's other figures to fd 3 under LABEL.
check_recorded() {
    local n=$1 label=$2 i id stuck=0 bad=0 cuts rows logged
    CUTS=0
    for i in $(seq 1 "$n"); do
        id=${IDS[$((i - 1))]}
        if ! rn_wait "$id" '.status == "completed" and .request == null' 60; then
            stuck=$((stuck + 1))
            continue
        fi
        cp "$DS_BODY" "$T/s-$i.json"
        rn_one_reply "$T/s-$i.json" "$(expected "$(q "$i")")" || {
            bad=$((bad + 1))
            jq -c '{status, messages: [.messages[] | {role, interrupted, content: (.content | tostring | .[0:50])}]}' "$T/s-$i.json" >&2
            continue
        }
        rn_events "$id" >"$T/ev-$i.json"
        # What the log says of the session's requests: each one started is either
        # cut by a restart (cancelled, reason restart) or the one that ended; each
        # has its recording:request (recorded), the occurrences 0, 1, ... in order.
        jq -c '{started: [.[] | select(.type == "provider:request_started") | .payload.requestId],
                cut: [.[] | select(.type == "provider:request_cancelled" and .payload.reason == "restart") | .payload.requestId],
                ended: [.[] | select(.type == "provider:request_ended") | .payload.requestId],
                rec: [.[] | select(.type == "recording:request") | .payload | {requestId, occurrence, outcome}],
                deltas: [.[] | select(.type == "text:delta") | {r: .payload.requestId, t: .payload.text}]}' \
            "$T/ev-$i.json" >"$T/log-$i.json"
        jq -e '(.ended | length) == 1 and ((.cut + .ended) | sort) == (.started | sort)
               and ([.rec[].requestId] == .started) and ([.rec[].outcome] | unique) == ["recorded"]
               and ([.rec[].occurrence] == [range(.started | length)])' "$T/log-$i.json" >/dev/null ||
            { echo "session $i ($id): its requests:" >&2; jq -c 'del(.deltas)' "$T/log-$i.json" >&2; bad=$((bad + 1)); continue; }
        # The ended request's deltas make the reply.
        jq -e --arg e "$(expected "$(q "$i")")" '.ended[0] as $r | [.deltas[] | select(.r == $r) | .t] | add == $e' \
            "$T/log-$i.json" >/dev/null || { echo "session $i: the ended request's deltas are not the reply" >&2; bad=$((bad + 1)); continue; }
        cuts=$(jq '.cut | length' "$T/log-$i.json")
        CUTS=$((CUTS + cuts))
        # Its recordings: one row per request started, under the request's id and
        # occurrence; the ended one complete (HTTP 200, the first answer: ordinal
        # 0), the cut ones incomplete.
        sql "SELECT request_id || ' ' || occurrence || ' ' || complete || ' ' || coalesce(CAST(status AS text), '-') || ' '
             || coalesce($(ds_sql_json meta ordinal), '-') FROM recordings
             WHERE session = '$id' AND kind = 'provider' ORDER BY occurrence" >"$T/rows-$i.txt"
        jq -r '.ended[0] as $e | .rec[] | "\(.requestId) \(.occurrence) \(if .requestId == $e then "1 200 0" else "0 - -" end)"' \
            "$T/log-$i.json" >"$T/want-$i.txt"
        diff "$T/want-$i.txt" "$T/rows-$i.txt" >&2 ||
            { echo "session $i ($id): recordings (rid occ complete status ordinal) differ from its log (<)" >&2; bad=$((bad + 1)); continue; }
        [ "$(sql "SELECT count(DISTINCT key) FROM recordings WHERE session = '$id'")" = 1 ] ||
            { echo "session $i: more than one key" >&2; bad=$((bad + 1)); }
    done
    # No complete recording misses a chunk: its seqs are 0 .. count-1, and it ends
    # with the stream's end.
    rows=$(sql "SELECT r.session || ' #' || r.occurrence || ': ' || count(c.seq) || ' chunks, seq ' || coalesce(CAST(min(c.seq) AS text), '-') || '..' || coalesce(CAST(max(c.seq) AS text), '-')
                FROM recordings r LEFT JOIN recording_chunks c ON c.recording = r.id
                WHERE r.complete = 1 AND r.kind = 'provider' GROUP BY r.id
                HAVING count(c.seq) = 0 OR min(c.seq) != 0 OR max(c.seq) + 1 != count(c.seq)")
    [ -z "$rows" ] || { echo "complete recordings with gaps: $rows" >&2; bad=$((bad + 1)); }
    local has_end="instr(CAST(c.data AS TEXT), 'message_stop') > 0"
    ds_is_pg && has_end="position('message_stop'::bytea IN c.data) > 0"
    rows=$(sql "SELECT r.session || ' #' || r.occurrence FROM recordings r WHERE r.complete = 1 AND r.kind = 'provider'
                AND NOT EXISTS (SELECT 1 FROM recording_chunks c WHERE c.recording = r.id
                                AND c.seq = (SELECT max(seq) FROM recording_chunks WHERE recording = r.id)
                                AND $has_end)")
    [ -z "$rows" ] || { echo "complete recordings without the stream's end in their last chunk: $rows" >&2; bad=$((bad + 1)); }
    # Every request a kill cut off was found by the runner that then held the session.
    logged=$(($(cut_logged) - CUT_MARK))
    INCOMPLETE=$(sql "SELECT count(*) FROM recordings WHERE kind = 'provider' AND complete = 0 AND session IN ($(printf "'%s'," "${IDS[@]}")'')")
    COMPLETE=$(sql "SELECT count(*) FROM recordings WHERE kind = 'provider' AND complete = 1 AND session IN ($(printf "'%s'," "${IDS[@]}")'')")
    echo "# $label: sessions=$n kills=${#KILLED} ($KILLED) stuck=$stuck bad=$bad cut_attempts=$CUTS cut_found_in_logs=$logged incomplete_rows=$INCOMPLETE complete_rows=$COMPLETE" >&3
    [ "$stuck" = 0 ]
    [ "$bad" = 0 ]
    [ "$COMPLETE" = "$n" ]
    [ "$INCOMPLETE" = "$CUTS" ]
    [ "$CUTS" -ge 1 ]
    [ "$logged" -ge "$CUTS" ]
}

# playback_sessions [TIMING]: with the mock frozen (kill -CONT it after), one
# playback session per session of IDS, each asked the same question; their ids
# in PLAYS.
playback_sessions() {
    local i timing=${1:-fast}
    kill -STOP "$RN_MOCK_PID"
    PLAYS=()
    for i in $(seq 1 "${#IDS[@]}"); do
        PLAYS+=("$(rn_session "{\"agent\": \"$AGENT\", \"mode\": \"playback\", \"timing\": \"$timing\"}")")
    done
    for i in $(seq 1 "${#IDS[@]}"); do rn_say "${PLAYS[$((i - 1))]}" "$(q "$i")"; done
}

# played I FILE: playback session I ended with the reply of recorded session I,
# every request of it answered by a recording (a hit) and one of them ended; its
# events in FILE. (Settled: neither running nor pending, which a session is from
# its message until the runner's request begins, with no request either.)
played() {
    local id=${PLAYS[$(($1 - 1))]}
    rn_wait "$id" '(.status | IN("running", "pending") | not) and .request == null' 60 || return 1
    rn_one_reply "$DS_BODY" "$(expected "$(q "$1")")" ||
        { echo "playback $1 ($id):" >&2; jq -c '{status, error, messages}' "$DS_BODY" >&2; return 1; }
    rn_events "$id" >"$2"
    jq -e '([.[] | select(.type == "recording:request") | .payload.outcome] | unique) == ["hit"]
           and ([.[] | select(.type == "provider:request_ended")] | length) == 1' "$2" >/dev/null ||
        { echo "playback $1: not every request a hit" >&2; return 1; }
}

# check_playback N LABEL: with the mock frozen, a playback session per recorded one
# asks the same question and gets the same reply, in the same deltas, in one
# request answered by a recording.
check_playback() {
    local n=$1 label=$2 i ok=0
    rn_requests >"$T/requests-before.json"
    playback_sessions fast
    for i in $(seq 1 "$n"); do
        played "$i" "$T/pev-$i.json" || continue
        [ "$(jq '[.[] | select(.type == "provider:request_started")] | length' "$T/pev-$i.json")" = 1 ] ||
            { echo "playback $i: more than one request" >&2; continue; }
        # The same deltas as the recorded session's request that ended, cut alike.
        jq -c '.ended[0] as $r | [.deltas[] | select(.r == $r) | .t]' "$T/log-$i.json" >"$T/rd-$i.json"
        jq -c '[.[] | select(.type == "text:delta") | .payload.text]' "$T/pev-$i.json" >"$T/pd-$i.json"
        diff "$T/rd-$i.json" "$T/pd-$i.json" >&2 || { echo "playback $i: other deltas" >&2; continue; }
        jq -e --arg e "$(expected "$(q "$i")")" 'add == $e' "$T/pd-$i.json" >/dev/null ||
            { echo "playback $i: its deltas are not the reply" >&2; continue; }
        ok=$((ok + 1))
    done
    kill -CONT "$RN_MOCK_PID"
    echo "# $label: playback sessions=$n same_reply_and_deltas=$ok" >&3
    [ "$ok" = "$n" ]
    # The provider saw nothing of them.
    rn_requests >"$T/requests-after.json"
    [ "$(jq length "$T/requests-before.json")" = "$(jq length "$T/requests-after.json")" ]
}

# check_playback_killed N LABEL: the same with the mock frozen, in real time (each
# reply at its recorded pace), while the runner (of two, the one holding most of
# the sessions) is SIGKILLed and restarted twice:
# a playback request cut off is retried and answered by the same recording again.
check_playback_killed() {
    local n=$1 label=$2 i k base ok=0 cuts=0
    playback_sessions realtime
    for k in 1 2; do
        base=$(msg_count)
        WATCH=("${PLAYS[@]}")
        ds_poll 30 streaming_or_done $((base + n)) || { tail -20 "$DS_DIR/logs/runner.log" >&2; return 1; }
        sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
        # (with two runners, the one holding most of them)
        if [ "$(holder)" = runner-b ]; then
            kill_b
            rn_runner_b runner-b
        else
            rn_runner_signal KILL
            rn_runner_start
        fi
    done
    for i in $(seq 1 "$n"); do
        played "$i" "$T/kev-$i.json" || continue
        cuts=$((cuts + $(jq '[.[] | select(.type == "provider:request_cancelled" and .payload.reason == "restart")] | length' "$T/kev-$i.json")))
        ok=$((ok + 1))
    done
    kill -CONT "$RN_MOCK_PID"
    echo "# $label: killed playback sessions=$n kills=2 cut_attempts=$cuts same_reply=$ok" >&3
    [ "$ok" = "$n" ]
    [ "$cuts" -ge 1 ]
}

# ---- the tests ------------------------------------------------------------------------

@test "recording chaos: 16 record sessions stream while the runner is SIGKILLed and restarted 4 times; one complete gapless recording each, an incomplete one per cut attempt; playback with the mock frozen gives every reply" {
    chaos 16 4 0
    check_recorded 16 "recording chaos (one runner)"
    check_playback 16 "recording chaos (one runner)"
    check_playback_killed 16 "recording chaos (one runner)"
}

@test "recording chaos with two runners: one of them SIGKILLed and restarted 4 times; the same recordings and the same playback" {
    chaos 16 4 1
    check_recorded 16 "recording chaos (two runners)"
    check_playback 16 "recording chaos (two runners)"
    check_playback_killed 16 "recording chaos (two runners)"
}

@test "recording chaos: a request cut off by a kill, then a 529, then the 200: playback answers the 529 once, then the 200" {
    local rec play slow
    AGENT=$(rn_agent anthropic claude-test-model)
    # The slow reply waits after 5 deltas (holdAfter) until the kill below closes its
    # connection: the kill lands mid-reply, however slowly the poll before it runs.
    slow=$(jq -nc --arg t "$(seq -s ' ' 1 120)" '{text: $t, chunkSize: 4, delayMs: 40, holdAfter: 5, usage: {input: 40, output: 60}}')
    rn_script "{\"replies\": [$slow, {\"status\": 529}, $(jq -nc '{text: "After the cut and the storm.", chunkSize: 3, delayMs: 10, usage: {input: 5, output: 7}}')]}"
    rec=$(rn_session "{\"agent\": \"$AGENT\", \"mode\": \"record\"}")
    rn_say "$rec" "Cut, storm, answer"
    ds_poll 20 rn_has_event "$rec" '.type == "text:delta"'
    rn_runner_signal KILL
    rn_runner_start
    rn_wait "$rec" '.status == "completed" and .request == null and .messages[-1].content == "After the cut and the storm."' 30
    [ "$(sql "SELECT $(ds_sql_agg "occurrence || ':' || complete || ':' || coalesce(CAST(status AS text), '-')" ' ' id) FROM recordings WHERE session = '$rec'")" = "0:0:- 1:1:529 2:1:200" ]
    # The answers they are: the 529 the first, the 200 the second (the cut one none).
    [ "$(sql "SELECT $(ds_sql_agg "coalesce($(ds_sql_json meta ordinal), '-')" ' ' id) FROM recordings WHERE session = '$rec'")" = "- 0 1" ]
    kill -STOP "$RN_MOCK_PID"
    play=$(rn_session "{\"agent\": \"$AGENT\", \"mode\": \"playback\"}")
    rn_say "$play" "Cut, storm, answer"
    rn_wait "$play" '(.status | IN("running", "pending") | not) and .request == null' 30
    kill -CONT "$RN_MOCK_PID"
    rn_get "$play"
    rn_one_reply "$DS_BODY" "After the cut and the storm." || { jq -c '{status, error, messages}' "$DS_BODY" >&2; return 1; }
    rn_events "$play" >"$T/play.json"
    # As the recorded session answered (its cut attempt aside): a 529, then the 200.
    jq -e '[.[] | select(.type == "recording:request") | .payload.recording.occurrence] == [1, 2]' "$T/play.json" >/dev/null ||
        { jq -c '.[] | select(.type == "recording:request" or .type == "provider:request_retried") | .payload' "$T/play.json" >&2; return 1; }
    jq -e '[.[] | select(.type == "provider:request_retried") | .payload.status] == [529]' "$T/play.json" >/dev/null
}
