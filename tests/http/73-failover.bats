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
# with deadlines, loops bounded in count and time. HOSTS_KEEP=1 keeps the file's
# directory (logs, clusters) for a look after a failure. The hosts, writers,
# read-back and tally: hosts-helpers.bash.

load hosts-helpers

FO_HOSTS=2
FO_WRITERS=4

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

setup_file() {
    FO_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -x "${FO_BIN:-/nonexistent}/pg_basebackup" ] || { echo "no PostgreSQL server (make deps)" >&2; return 1; }
    hosts_tmp ds73 || return 1
    FO_A=$HOSTS_TMP/a
    FO_B=$HOSTS_TMP/b
    export FO_BIN FO_A FO_B
    "$DS_ROOT/tests/pg.sh" start "$FO_A" >/dev/null || return 1
    mkdir -p "$FO_B"
    [ "$(id -u)" != 0 ] || chown postgres: "$FO_B"
    chmod 700 "$FO_B"
    fo_standby "$FO_A" "$FO_B" || return 1
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
    local d
    hosts_down
    for d in "${FO_A:-}" "${FO_B:-}"; do
        [ -n "$d" ] && [ -s "$d/data/postmaster.pid" ] &&
            as_pg "$FO_BIN/pg_ctl" -D "$d/data" -w -t 30 -m immediate stop >/dev/null 2>&1
    done
    hosts_rm
}

setup() {
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
}

teardown() {
    ds_bg_stop
}

psql_a() { psql -X -q -At -h "$FO_A" -U postgres -d postgres "$@"; }
psql_b() { psql -X -q -At -h "$FO_B" -U postgres -d postgres "$@"; }
# _sync_standby_of PSQL: the server PSQL reaches has a synchronous standby streaming.
_sync_standby_of() { [ "$("$1" -c "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'")" = sync ]; }
_sync_standby() { _sync_standby_of psql_a; }
_promoted() { [ "$(psql_b -c 'SELECT pg_is_in_recovery()')" = f ]; }

# fo_standby PRIMARY DIR: a standby of the cluster whose socket is in PRIMARY, in
# DIR: a base backup over that socket, -R (standby.signal, primary_conninfo naming
# it), started with DIR as its own socket directory.
fo_standby() {
    as_pg "$FO_BIN/pg_basebackup" -h "$1" -U postgres -D "$2/data" -R -X stream \
        --checkpoint=fast >"$2/basebackup.log" 2>&1 || { cat "$2/basebackup.log" >&2; return 1; }
    as_pg "$FO_BIN/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 30 \
        -o "-c listen_addresses='' -k $2 -c max_connections=200 -c shared_buffers=32MB" start >/dev/null ||
        { tail -n 20 "$2/server.log" >&2; return 1; }
}

# fo_up N: host N's stack (nginx, pool, runner) in $HOSTS_TMP/hN on the multi-host URI.
fo_up() { hosts_up "$1" DSTREAM_DB="$FO_URI" DSTREAM_STACK_TOKEN_NAME="host-$1" DSTREAM_RUNNER_ID="host-$1"; }

# fo_writer_url K: writer K appends to $s on host (K - 1) % 2 + 1.
fo_writer_url() { echo "$(hosts_url $((($1 - 1) % FO_HOSTS + 1)))$s"; }

# fo_streams: the stream s the writers append to and p the probes go to, made on
# host 1 (s and p are the test's locals).
fo_streams() {
    local x
    s=$(ds_stream "$1")
    p=$(ds_stream probe)
    for x in "$s" "$p"; do
        req PUT "$(hosts_url 1)$x" -H 'Content-Type: text/plain'
        assert_status 201
    done
}

# fo_writers WHAT: a live reader of s on host 2 from the start ($T/sse: its feed's
# LISTEN connection is cut too) and FO_WRITERS writers on both hosts; returns once
# they have 100 appends acknowledged (before WHAT).
fo_writers() {
    spawn "$T/sse.err" curl -N -sS --max-time 150 -o "$T/sse" "$(hosts_url 2)$s?offset=-1&live=sse"
    writers_start $FO_WRITERS 100000 fo_writer_url
    ds_poll 30 _acks_ge 100 || fail "no progress before $1 ($(acks) acknowledged)"
}

# fo_back WHILE: every writer (so both hosts' pools) appends again since
# writers_mark, on the new primary; T_BACK is when the last of them did. The
# writers stopped, s is read back from host 2 into $T/final, and the reader on host
# 2 must have seen all of it, in order (its feed found the new primary).
fo_back() {
    ds_poll 30 _each_acked_after $FO_WRITERS || fail "a writer has no acknowledgement since the promotion$1"
    T_BACK=$(writers_back_at $FO_WRITERS)
    writers_stop
    read_all "$(hosts_url 2)$s" "$T/final"
    ds_poll 30 eval '[ "$(sse_text "$T/sse")" = "$(cat "$T/final")" ]' ||
        fail "SSE on host 2 stopped at $(sse_text "$T/sse" | tr -cd ';' | wc -c) of $(tr -cd ';' <"$T/final" | wc -c) appends$1"
}

# fo_judge LABEL WHAT BEFORE T0 T_PROMOTE T_PROMOTED: the writers' acknowledged
# appends are all in $T/final, once, each at its offset; every refusal was a 503
# with Retry-After and a JSON error; nothing was restarted. Prints the figures
# (BEFORE: acknowledged before WHAT at T0) to fd 3 under LABEL.
fo_judge() {
    local a lost dup bad refused not503
    read -r a lost dup bad < <(tally "$T/final" "$T"/w?)
    refused=$(writers_refused)
    not503=$(writers_refused_bad)
    echo "# $1: writers=$FO_WRITERS acknowledged=$a (before the $2: $3) lost=$lost duplicated=$dup misplaced=$bad refused=$refused not_503_with_retry_after=$not503 $2->every writer acknowledged again: $(((T_BACK - $4) / 1000000)) ms, promote->: $(((T_BACK - $5) / 1000000)) ms (the promotion itself: $((($6 - $5) / 1000000)) ms)" >&3
    [ "$lost" = 0 ]
    [ "$dup" = 0 ]
    [ "$bad" = 0 ]
    [ "$not503" = 0 ]
    if grep -h ' 503 ' "$T"/w*.refused 2>/dev/null | grep -qv '"error"'; then
        fail "a 503 without a JSON error: $(grep -h ' 503 ' "$T"/w*.refused | grep -v '"error"' | head -3)"
    fi
    hosts_same_pids $(seq 1 $FO_HOSTS)
}

_append_refused() {
    req POST "$(hosts_url "$1")$2" -H 'Content-Type: text/plain' --data-binary "probe;"
    [ "$status_code" != 204 ]
}

@test "failover: the primary killed under 4 writers on 2 hosts, the synchronous standby promoted: every host finds it by itself, 0 acknowledged appends lost, 503 + Retry-After meanwhile" {
    local h s p t_kill t_promote t_promoted before
    fo_streams fo
    fo_writers "the kill"
    _sync_standby || fail "the standby is not synchronous"

    t_kill=$(date +%s%N)
    as_pg "$FO_BIN/pg_ctl" -D "$FO_A/data" -w -t 30 -m immediate stop >/dev/null
    before=$(acks)
    # No primary: the standby is there but read-only, so no host may write.
    for h in $(seq 1 $FO_HOSTS); do probe_refused "$(hosts_url "$h")" "$p" || fail "host $h with the primary down"; done
    writers_mark $FO_WRITERS
    t_promote=$(date +%s%N)
    as_pg "$FO_BIN/pg_ctl" -D "$FO_B/data" -w -t 30 promote >/dev/null
    ds_poll 30 _promoted || fail "the standby was not promoted"
    t_promoted=$(date +%s%N)
    fo_back ""
    fo_judge failover kill "$before" "$t_kill" "$t_promote" "$t_promoted"
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
    local h s p t_fence t_promote t_promoted before
    fo_streams sw
    # a again, as b's standby: a new base backup (its old data diverged at the kill).
    as_pg rm -rf "$FO_A/data"
    fo_standby "$FO_B" "$FO_A" || fail "a did not start as b's standby"
    psql_b -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
    ds_poll 30 _sync_standby_of psql_b || fail "a is not b's synchronous standby"
    fo_writers "the fence"

    t_fence=$(date +%s%N)
    psql_b -c "ALTER SYSTEM SET default_transaction_read_only = on" -c "SELECT pg_reload_conf()" >/dev/null
    before=$(acks)
    ds_poll 10 eval '[ "$(psql_b -c "SHOW default_transaction_read_only")" = on ]'
    # The fence reaches each open session at its next statement once the server's
    # SIGHUP got to it: until then an append may still be acknowledged (and is).
    for h in $(seq 1 $FO_HOSTS); do
        ds_poll 10 _append_refused "$h" "$p" || fail "host $h: appends still acknowledged 10 s after the fence"
        probe_refused "$(hosts_url "$h")" "$p" appends || fail "host $h with the primary fenced"
    done
    # a has everything b acknowledged (synchronous): promote it.
    writers_mark $FO_WRITERS
    t_promote=$(date +%s%N)
    as_pg "$FO_BIN/pg_ctl" -D "$FO_A/data" -w -t 30 promote >/dev/null
    ds_poll 30 eval '[ "$(psql_a -c "SELECT pg_is_in_recovery()")" = f ]' || fail "a was not promoted"
    t_promoted=$(date +%s%N)
    # b still runs (fenced): every writer appends again, on a, and the reader follows.
    fo_back " (b still fenced)"
    as_pg "$FO_BIN/pg_ctl" -D "$FO_B/data" -w -t 30 -m fast stop >/dev/null
    fo_judge switchover fence "$before" "$t_fence" "$t_promote" "$t_promoted"
}
