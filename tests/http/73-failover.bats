#!/usr/bin/env bats
# Failover (issue 23, docs/scale-out.md "HA with a standby"): a primary cluster and
# a synchronous standby made from it with pg_basebackup (streaming replication over
# the primary's Unix socket, synchronous_standby_names = '*', synchronous_commit on:
# a commit returns once the standby has its WAL); two stacks (nginx + pool + runner
# each) on a multi-host DSTREAM_DB naming both sockets with
# target_session_attrs=read-write. Writers append on both hosts; the primary is
# killed (pg_ctl stop -m immediate), then the standby promoted (pg_ctl promote).
# Nothing of dstream is restarted: every process finds the new primary by itself.
# Every acknowledged append is read back from the new primary (0 lost, none twice,
# each at the offset it was acknowledged with); every refusal meanwhile is a 503
# with Retry-After and a JSON error.
#
# Unix sockets only; every process is stopped by the PID recorded when it was
# started (the stacks by their pid files, the clusters by pg_ctl); waits are polls
# with deadlines, loops bounded in count and time. FO_KEEP=1 keeps the file's
# directory (logs, clusters) for a look after a failure.

load helpers

FO_HOSTS=2

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

setup_file() {
    FO_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -x "${FO_BIN:-/nonexistent}/pg_basebackup" ] || { echo "no PostgreSQL server (make deps)" >&2; return 1; }
    # Short: the clusters' sockets live in it. The postgres user passes through.
    FO_TMP=$(mktemp -d /tmp/ds73.XXXXXX)
    chmod 711 "$FO_TMP"
    FO_A=$FO_TMP/a
    FO_B=$FO_TMP/b
    export FO_BIN FO_TMP FO_A FO_B
    "$DS_ROOT/tests/pg.sh" start "$FO_A" >/dev/null || return 1
    # The standby: a base backup of the primary over its socket, -R (standby.signal,
    # primary_conninfo naming that socket), its own socket directory.
    mkdir -p "$FO_B"
    [ "$(id -u)" != 0 ] || chown postgres: "$FO_B"
    chmod 700 "$FO_B"
    as_pg "$FO_BIN/pg_basebackup" -h "$FO_A" -U postgres -D "$FO_B/data" -R -X stream \
        --checkpoint=fast >"$FO_TMP/basebackup.log" 2>&1 || { cat "$FO_TMP/basebackup.log" >&2; return 1; }
    as_pg "$FO_BIN/pg_ctl" -D "$FO_B/data" -l "$FO_B/server.log" -w -t 30 \
        -o "-c listen_addresses='' -k $FO_B -c max_connections=200 -c shared_buffers=32MB" start >/dev/null ||
        { tail -n 20 "$FO_B/server.log" >&2; return 1; }
    # Synchronous from now on: a commit waits for the standby's flush.
    psql_a -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null || return 1
    ds_poll 30 _sync_standby || { echo "the standby is not synchronous: $(psql_a -c 'TABLE pg_stat_replication')" >&2; return 1; }
    # Both sockets, the primary first; libpq takes the one that accepts writes.
    FO_URI="postgresql:///dstream?host=$FO_A,$FO_B&user=postgres&target_session_attrs=read-write"
    export FO_URI
    local h
    for h in $(seq 1 $FO_HOSTS); do fo_up "$h" || return 1; done
}

teardown_file() {
    local h d
    for h in $(seq 1 $FO_HOSTS); do
        [ -d "$FO_TMP/h$h" ] && "$DS_STACK" stop "$FO_TMP/h$h" >/dev/null 2>&1
    done
    for d in "${FO_A:-}" "${FO_B:-}"; do
        [ -n "$d" ] && [ -s "$d/data/postmaster.pid" ] &&
            as_pg "$FO_BIN/pg_ctl" -D "$d/data" -w -t 30 -m immediate stop >/dev/null 2>&1
    done
    [ -n "${FO_TMP:-}" ] && [ -z "${FO_KEEP:-}" ] && rm -rf "$FO_TMP"
    return 0
}

setup() {
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
}

teardown() {
    ds_bg_stop
}

# sse_text FILE: the data of an SSE capture's data events, concatenated.
sse_text() {
    [ -e "$1" ] || return 0
    awk '{ sub(/\r$/, "") }
         /^event:/ { t = $0; sub(/^event: */, "", t); next }
         /^data:/  { if (t == "data") { d = $0; sub(/^data: ?/, "", d); print d }; next }
         /^$/      { t = "" }' "$1" | tr -d '\n'
}

psql_a() { psql -X -q -At -h "$FO_A" -U postgres -d postgres "$@"; }
psql_b() { psql -X -q -At -h "$FO_B" -U postgres -d postgres "$@"; }
# _sync_standby_of PSQL: the server PSQL reaches has a synchronous standby streaming.
_sync_standby_of() { [ "$("$1" -c "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'")" = sync ]; }
_sync_standby() { _sync_standby_of psql_a; }
_promoted() { [ "$(psql_b -c 'SELECT pg_is_in_recovery()')" = f ]; }

# fo_up N: host N's stack (nginx, pool, runner) in $FO_TMP/hN on the multi-host URI.
fo_up() {
    local dir=$FO_TMP/h$1
    mkdir -p "$dir"
    if ! env DSTREAM_DB="$FO_URI" DSTREAM_STACK_TOKEN_NAME="host-$1" DSTREAM_RUNNER_ID="host-$1" \
        B="$DS_B" "$DS_STACK" start "$dir" >"$dir.start" 2>&1; then
        echo "host $1 did not start:" >&2
        cat "$dir.start" >&2
        return 1
    fi
}

fo_url() { cat "$FO_TMP/h$1/url"; }

# writer URL OUT TAG COUNT STOPFILE: append "TAG-i;" for i = 1 .. COUNT (or until
# STOPFILE exists, or 120 s), one request each; "i status next-offset" per attempt
# to OUT; each refusal's status, Retry-After and body to OUT.refused.
writer() {
    local url=$1 out=$2 tag=$3 n=$4 stop=$5 i code next end=$((SECONDS + 120))
    : >"$out"
    for i in $(seq 1 "$n"); do
        [ -e "$stop" ] && break
        [ $SECONDS -lt $end ] || break
        code=$(curl -sS --max-time 10 -o "$out.body" -D "$out.h" -w '%{http_code}' -X POST \
            -H 'Content-Type: text/plain' --data-binary "$tag-$i;" "$url" 2>/dev/null) || code=000
        next=$(tr -d '\r' <"$out.h" | sed -n 's/^[Ss]tream-[Nn]ext-[Oo]ffset: *//p')
        echo "$i $code ${next:--} $(date +%s%N)" >>"$out"
        if [ "$code" != 204 ]; then
            { echo "$i $code $(tr -d '\r' <"$out.h" | sed -n 's/^[Rr]etry-[Aa]fter: */retry-after=/p') $(head -c 200 "$out.body")"; } >>"$out.refused"
            sleep 0.05
        fi
    done
}

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

# tally FINAL WRITER_FILES...: "acked lost duplicated misplaced" of the writers'
# acknowledged appends in FINAL (the stream's content, read back): lost, not in it;
# duplicated, in it more than once; misplaced, the content up to the append's
# acknowledged offset (its byte position) does not end with it, or two
# acknowledgements gave one offset.
tally() {
    local final=$1 f a=0 lost=0 dup=0 bad=0 c tok i code next pos
    shift
    tr ';' '\n' <"$final" | sed '/^$/d' | sort >"$final.sorted"
    for f in "$@"; do
        while read -r i code next _; do
            [ "$code" = 204 ] || continue
            tok=$(basename "$f")-$i
            a=$((a + 1))
            c=$(grep -cx -- "$tok" "$final.sorted" || true)
            [ "$c" = 0 ] && { lost=$((lost + 1)); echo "lost: $tok" >&2; }
            [ "$c" -gt 1 ] && { dup=$((dup + 1)); echo "duplicated: $tok" >&2; }
            pos=$((10#${next#*_}))
            [ "$(head -c "$pos" "$final" | tail -c $((${#tok} + 1)))" = "$tok;" ] ||
                { bad=$((bad + 1)); echo "misplaced: $tok at $next" >&2; }
            echo "$next" >>"$final.offsets"
        done <"$f"
    done
    c=$(sort "$final.offsets" | uniq -d | wc -l)
    echo "$a $lost $dup $((bad + c))"
}

acks() { cat "$T"/w? 2>/dev/null | awk '$2 == 204' | wc -l; }
_acks_ge() { [ "$(acks)" -ge "$1" ]; }
# _each_acked_after: every writer has an acknowledgement after its line in $T/marks.
_each_acked_after() {
    local k m
    for k in $(seq 1 "$1"); do
        m=$(sed -n "${k}p" "$T/marks")
        tail -n +$((m + 1)) "$T/w$k" | awk '$2 == 204 { f = 1 } END { exit !f }' || return 1
    done
}

# probe_refused HOST PATH [appends]: an append and a read on HOST are refused with
# 503, Retry-After and a JSON error (no primary to connect to); "appends": only
# the append (a fenced primary still answers reads, with what it has: all that was
# acknowledged, nothing being written anywhere meanwhile).
probe_refused() {
    req POST "$(fo_url "$1")$2" -H 'Content-Type: text/plain' --data-binary "probe;"
    [ "$status_code" = 503 ] || { echo "host $1 append with no primary: $status_code $body" >&2; return 1; }
    header Retry-After >/dev/null || { echo "host $1: no Retry-After: $(cat "$DS_HDRS")" >&2; return 1; }
    assert_json_error || return 1
    [ "${3:-}" != appends ] || return 0
    req GET "$(fo_url "$1")$2?offset=-1"
    [ "$status_code" = 503 ] || { echo "host $1 read with no primary: $status_code $body" >&2; return 1; }
    header Retry-After >/dev/null || { echo "host $1: no Retry-After on a read" >&2; return 1; }
    assert_json_error
}

_append_refused() {
    req POST "$(fo_url "$1")$2" -H 'Content-Type: text/plain' --data-binary "probe;"
    [ "$status_code" != 204 ]
}

@test "failover: the primary killed under 4 writers on 2 hosts, the synchronous standby promoted: every host finds it by itself, 0 acknowledged appends lost, 503 + Retry-After meanwhile" {
    local nw=4 k h s p w=() t_kill t_promote
    s=$(ds_stream fo)
    p=$(ds_stream probe)
    for x in "$s" "$p"; do
        req PUT "$(fo_url 1)$x" -H 'Content-Type: text/plain'
        assert_status 201
    done
    # A live reader on host 2 from the start: its feed's LISTEN connection is cut too.
    spawn "$T/sse.err" curl -N -sS --max-time 150 -o "$T/sse" "$(fo_url 2)$s?offset=-1&live=sse"
    for k in $(seq 1 $nw); do
        spawn "$T/w$k.err" writer "$(fo_url $(((k - 1) % FO_HOSTS + 1)))$s" "$T/w$k" "w$k" 100000 "$T/stop"
        w+=("$T/w$k")
    done
    ds_poll 30 _acks_ge 100 || fail "no progress before the kill ($(acks) acknowledged)"
    _sync_standby || fail "the standby is not synchronous"

    t_kill=$(date +%s%N)
    as_pg "$FO_BIN/pg_ctl" -D "$FO_A/data" -w -t 30 -m immediate stop >/dev/null
    local before=$(acks)
    # No primary: the standby is there but read-only, so no host may write.
    for h in $(seq 1 $FO_HOSTS); do probe_refused "$h" "$p" || fail "host $h with the primary down"; done
    for k in $(seq 1 $nw); do wc -l <"$T/w$k"; done >"$T/marks"
    t_promote=$(date +%s%N)
    as_pg "$FO_BIN/pg_ctl" -D "$FO_B/data" -w -t 30 promote >/dev/null
    ds_poll 30 _promoted || fail "the standby was not promoted"
    local t_promoted=$(date +%s%N)
    # Every writer (so both hosts' pools) appends again, on the new primary.
    ds_poll 30 _each_acked_after $nw || fail "a writer has no acknowledgement since the promotion"
    local t_back=0 first
    for k in $(seq 1 $nw); do
        first=$(tail -n +$(($(sed -n "${k}p" "$T/marks") + 1)) "$T/w$k" | awk '$2 == 204 { print $4; exit }')
        [ "$first" -gt "$t_back" ] && t_back=$first
    done
    touch "$T/stop"
    for k in $(seq 1 $nw); do ds_poll 20 eval "! kill -0 ${BG_PIDS[$k]} 2>/dev/null"; done

    read_all "$(fo_url 2)$s" "$T/final"
    read -r a lost dup bad < <(tally "$T/final" "${w[@]}")
    local refused not503
    refused=$(cat "$T"/w*.refused 2>/dev/null | wc -l)
    not503=$(cat "$T"/w*.refused 2>/dev/null | grep -vc ' 503 retry-after=' || true)
    echo "# failover: writers=$nw acknowledged=$a (before the kill: $before) lost=$lost duplicated=$dup misplaced=$bad refused=$refused not_503_with_retry_after=$not503 kill->every writer acknowledged again: $(((t_back - t_kill) / 1000000)) ms, promote->: $(((t_back - t_promote) / 1000000)) ms (the promotion itself: $(((t_promoted - t_promote) / 1000000)) ms)" >&3
    [ "$lost" = 0 ]
    [ "$dup" = 0 ]
    [ "$bad" = 0 ]
    [ "$not503" = 0 ] || { grep -hv ' 503 retry-after=' "$T"/w*.refused | head >&2; return 1; }
    grep -h ' 503 ' "$T"/w*.refused | grep -qv '"error"' && fail "a 503 without a JSON error: $(grep -h ' 503 ' "$T"/w*.refused | grep -v '"error"' | head -3)"
    # The reader on host 2 saw everything, in order (its feed found the new primary).
    ds_poll 30 eval '[ "$(sse_text "$T/sse")" = "$(cat "$T/final")" ]' ||
        fail "SSE on host 2 stopped at $(sse_text "$T/sse" | tr -cd ';' | wc -c) of $(tr -cd ';' <"$T/final" | wc -c) appends"
    # Nothing was restarted: the processes the stacks started are the ones running.
    for h in $(seq 1 $FO_HOSTS); do
        for f in fcgi.pid runner.pid nginx.master.pid; do
            kill -0 "$(cat "$FO_TMP/h$h/$f")" 2>/dev/null || fail "host $h: $f is gone"
        done
    done
}

# A planned switchover back, as an operator makes it: the old primary (a, killed by
# the test above) re-made as a synchronous standby of the new one (b); b fenced
# (default_transaction_read_only = on, reloaded: every session of it, the open ones
# too, refuses writes from its next transaction: SQLSTATE 25006), a promoted while
# b still runs, b stopped last. While b is fenced an append is refused with 503,
# Retry-After and a JSON error (never 500); once a is promoted every host writes to
# it, b still running (connections that b refuses a write are dropped, and libpq's
# target_session_attrs=read-write skips b).
@test "switchover: the primary fenced read-only (25006) while the standby is promoted: 503 + Retry-After, never 500; every host moves to the new primary while the old one still runs; 0 acknowledged appends lost" {
    _promoted || skip "needs the failover test before it"
    local nw=4 k h s p w=() t_fence t_promote
    s=$(ds_stream sw)
    p=$(ds_stream probe)
    for x in "$s" "$p"; do
        req PUT "$(fo_url 1)$x" -H 'Content-Type: text/plain'
        assert_status 201
    done
    # a again, as b's standby: a new base backup (its old data diverged at the kill).
    as_pg rm -rf "$FO_A/data"
    as_pg "$FO_BIN/pg_basebackup" -h "$FO_B" -U postgres -D "$FO_A/data" -R -X stream \
        --checkpoint=fast >"$FO_TMP/basebackup2.log" 2>&1 || fail "base backup of b: $(cat "$FO_TMP/basebackup2.log")"
    as_pg "$FO_BIN/pg_ctl" -D "$FO_A/data" -l "$FO_A/server.log" -w -t 30 \
        -o "-c listen_addresses='' -k $FO_A -c max_connections=200 -c shared_buffers=32MB" start >/dev/null ||
        fail "a did not start: $(tail -n 20 "$FO_A/server.log")"
    psql_b -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
    ds_poll 30 _sync_standby_of psql_b || fail "a is not b's synchronous standby"

    spawn "$T/sse.err" curl -N -sS --max-time 150 -o "$T/sse" "$(fo_url 2)$s?offset=-1&live=sse"
    for k in $(seq 1 $nw); do
        spawn "$T/w$k.err" writer "$(fo_url $(((k - 1) % FO_HOSTS + 1)))$s" "$T/w$k" "w$k" 100000 "$T/stop"
        w+=("$T/w$k")
    done
    ds_poll 30 _acks_ge 100 || fail "no progress before the fence ($(acks) acknowledged)"

    t_fence=$(date +%s%N)
    psql_b -c "ALTER SYSTEM SET default_transaction_read_only = on" -c "SELECT pg_reload_conf()" >/dev/null
    local before=$(acks)
    ds_poll 10 eval '[ "$(psql_b -c "SHOW default_transaction_read_only")" = on ]'
    # The fence reaches each open session at its next statement once the server's
    # SIGHUP got to it: until then an append may still be acknowledged (and is).
    for h in $(seq 1 $FO_HOSTS); do
        ds_poll 10 _append_refused "$h" "$p" || fail "host $h: appends still acknowledged 10 s after the fence"
        probe_refused "$h" "$p" appends || fail "host $h with the primary fenced"
    done
    # a has everything b acknowledged (synchronous): promote it.
    for k in $(seq 1 $nw); do wc -l <"$T/w$k"; done >"$T/marks"
    t_promote=$(date +%s%N)
    as_pg "$FO_BIN/pg_ctl" -D "$FO_A/data" -w -t 30 promote >/dev/null
    ds_poll 30 eval '[ "$(psql_a -c "SELECT pg_is_in_recovery()")" = f ]' || fail "a was not promoted"
    local t_promoted=$(date +%s%N)
    # b still runs (fenced): every writer appends again, on a.
    ds_poll 30 _each_acked_after $nw || fail "a writer has no acknowledgement since the promotion (b still fenced)"
    local t_back=0 first
    for k in $(seq 1 $nw); do
        first=$(tail -n +$(($(sed -n "${k}p" "$T/marks") + 1)) "$T/w$k" | awk '$2 == 204 { print $4; exit }')
        [ "$first" -gt "$t_back" ] && t_back=$first
    done
    touch "$T/stop"
    for k in $(seq 1 $nw); do ds_poll 20 eval "! kill -0 ${BG_PIDS[$k]} 2>/dev/null"; done
    # The reader on host 2 follows a as well, b still running.
    read_all "$(fo_url 2)$s" "$T/final"
    ds_poll 30 eval '[ "$(sse_text "$T/sse")" = "$(cat "$T/final")" ]' ||
        fail "SSE on host 2 stopped at $(sse_text "$T/sse" | tr -cd ';' | wc -c) of $(tr -cd ';' <"$T/final" | wc -c) appends (b still fenced)"
    as_pg "$FO_BIN/pg_ctl" -D "$FO_B/data" -w -t 30 -m fast stop >/dev/null

    read -r a lost dup bad < <(tally "$T/final" "${w[@]}")
    local refused not503
    refused=$(cat "$T"/w*.refused 2>/dev/null | wc -l)
    not503=$(cat "$T"/w*.refused 2>/dev/null | grep -vc ' 503 retry-after=' || true)
    echo "# switchover: writers=$nw acknowledged=$a (before the fence: $before) lost=$lost duplicated=$dup misplaced=$bad refused=$refused not_503_with_retry_after=$not503 fence->every writer acknowledged again: $(((t_back - t_fence) / 1000000)) ms, promote->: $(((t_back - t_promote) / 1000000)) ms (the promotion itself: $(((t_promoted - t_promote) / 1000000)) ms)" >&3
    [ "$lost" = 0 ]
    [ "$dup" = 0 ]
    [ "$bad" = 0 ]
    [ "$not503" = 0 ] || { grep -hv ' 503 retry-after=' "$T"/w*.refused | head >&2; return 1; }
    for h in $(seq 1 $FO_HOSTS); do
        for f in fcgi.pid runner.pid nginx.master.pid; do
            kill -0 "$(cat "$FO_TMP/h$h/$f")" 2>/dev/null || fail "host $h: $f is gone"
        done
    done
}
