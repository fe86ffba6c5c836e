#!/usr/bin/env bash
# bench/engines.sh: dstream on PostgreSQL next to dstream on SQLite, same build, same
# client, same run, on loopback; and PostgreSQL's own ceiling for the append
# transaction (pgbench); prints markdown for bench/RESULTS.md.
#
#   B=build bench/engines.sh > out.md                  (after `make`; about 10 minutes)
#   RUNS=1 BENCH_SECONDS=2 BENCH_FANOUT=100 SESSIONS=5 DELTAS=20 bench/engines.sh
#                                                       (a quick look: ~2 minutes)
#
# One throwaway PostgreSQL cluster (tests/pg.sh: Debian's postgresql-15, Unix socket
# only, fsync on, max_connections 200, shared_buffers 32MB, the rest initdb's
# defaults) in the work directory, a fresh database in it for every stack; dstream's
# connections set synchronous_commit on (DSTREAM_SYNC=full, the default), as SQLite
# runs synchronous=FULL. The systems, started afresh every run (nginx + pool, no
# runner, auth off; bench/lib/common.sh's stack_start):
#   sqlite   DSTREAM_DB=DIR/dstream.db
#   pg       DSTREAM_DB=postgresql:///runN?host=...
#   pg2      a second host (its own nginx + pool) on pg's database: the cross-host wake
# Per run, SQLite and PostgreSQL alternate figure by figure (sqlite pg in odd runs, pg
# sqlite in even ones, so that a drift of the machine weighs on both alike):
#   appends    bench/compare.sh's: wrk -t1 -c BENCH_CONNS -d BENCH_SECONDS, POST of a
#              200-byte JSON message to one stream, then spread over 100 streams
#   catch-up   bench/compare.sh's: wrk GET ?offset=-1 of a 1,000-message stream (each
#              checked to come back whole in one response; on PostgreSQL the pool's
#              history cache serves all but the first read of each pool process:
#              DSTREAM_READ_CACHE_KB=0 measures the reads without it)
#              (with each, the CPU per request of the stack, pool and nginx, and of
#              PostgreSQL's processes: utime + stime from /proc over the wrk run)
#   pgbench    PostgreSQL's ceiling for that append: pgbench -n -M prepared -j 1
#              -c BENCH_CONNS -T BENCH_SECONDS on pg's database, each transaction the
#              tail update of a stream's row (UPDATE streams ... RETURNING) and the
#              insert of a 200-byte message, on one stream, then on 100 (streams made
#              through dstream's API, so the rows are dstream's); PostgreSQL's CPU per
#              transaction likewise
#   fanout     bench/compare.sh's: bench/src/sse-client.c, N SSE readers of one stream
#              while a writer appends a timestamped message every 10 ms for
#              BENCH_SECONDS, N in BENCH_FANOUT
#   wake       the same with one reader: on the writer's host (sqlite, pg), and on pg2
#              while the writer appends through pg (cross-host: append on host A,
#              commit, NOTIFY, host B's LISTEN, its hub, its nginx, the reader); the
#              figure is the whole way, from the writer's request to the reader's read
#   tokens     bench/token-latency.sh (nginx + pool + runner, a stamping provider) at
#              each count of SESSIONS, DELTAS deltas INTERVAL_MS apart, on a SQLite file
#              and on a fresh PostgreSQL database
# Cells are the median of RUNS runs (min-max); PG / SQLite divides the medians.
#
# Environment: B [build], RUNS [3], BENCH_SECONDS [5], BENCH_CONNS [50], BENCH_FANOUT
# ["100 1000"], SESSIONS ["20 200"], DELTAS [150], INTERVAL_MS [20], FIGURES ["appends
# catchup pgbench fanout wake tokens"], BENCH_QUIET_S [0: wait up to this long for the
# 1-minute load average to fall below 1], BENCH_KEEP [0; 1: keep the work directory].
# Every load is bounded in count and time; every process it starts it stops by PID
# (the stacks by the PIDs their dstream-stack recorded, the cluster by pg_ctl).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
export B
bin=$here/$B
RUNS=${RUNS:-3}
BENCH_SECONDS=${BENCH_SECONDS:-5}
BENCH_CONNS=${BENCH_CONNS:-50}
BENCH_FANOUT=${BENCH_FANOUT:-"100 1000"}
SESSIONS=${SESSIONS:-"20 200"}
DELTAS=${DELTAS:-150}
INTERVAL_MS=${INTERVAL_MS:-20}
FIGURES=${FIGURES:-"appends catchup pgbench fanout wake tokens"}
BENCH_QUIET_S=${BENCH_QUIET_S:-0}
BENCH_KEEP=${BENCH_KEEP:-0}
CATCHUP_MSGS=1000
FANOUT_INTERVAL_MS=10
pgbin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}

BENCH_NAME=engines
# shellcheck source=bench/lib/common.sh
. "$here/bench/lib/common.sh"

pg_dir=$work/pg
pg_up=0
cleanup() {
    stack_stop sqlite
    stack_stop pg
    stack_stop pg2
    [ "$pg_up" = 1 ] && "$here/tests/pg.sh" stop "$pg_dir" >/dev/null 2>&1
    work_done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

psql_pg() { "$pgbin/psql" -h "$pg_dir" -U postgres -Atq "$@"; }
# The CPU ticks PostgreSQL's processes have spent so far: the postmaster's and its
# children's (backends, checkpointer, walwriter...), and those of its children that
# have exited (cutime + cstime: pgbench's backends end with it).
pg_ticks() {
    local pm st procs
    pm=$(head -1 "$pg_dir/data/postmaster.pid")
    mapfile -t procs < <(family "$pm")
    st=$(cat "/proc/$pm/stat"); st=${st##*) }
    set -- $st
    echo $(($(ticks "${procs[@]}") + ${14} + ${15}))
}
dbticks[pg]=pg_ticks

# ---- pgbench: the append transaction alone -----------------------------------------------

# The streams pgbench appends to, made through dstream's API on pg: /v1/stream/pgb and
# /v1/stream/pgb-m-0 .. 99 (their ids contiguous: one curl makes them in order).
pgbench_prepare() {   # DBNAME
    local i urls=()
    create pg /v1/stream/pgb
    for ((i = 0; i < 100; i++)); do urls+=("${url[pg]}/v1/stream/pgb-m-$i"); done
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "${urls[@]}"
    cat > "$work/append.sql" <<'SQL'
\set s random(:lo, :hi)
BEGIN;
UPDATE streams SET tail_seq = tail_seq + 1, tail_pos = tail_pos + 200, access_ms = 0,
    xid = pg_current_xact_id() WHERE id = :s RETURNING tail_seq - 1 AS seq, tail_pos - 200 AS pos \gset
INSERT INTO messages (stream, seq, pos, rec, data)
    VALUES (:s, :seq, :pos, :seq, convert_to(repeat('x', 200), 'UTF8'));
END;
SQL
}

pgbench_run() {   # DBNAME KEY PATH-PATTERN: the streams whose path is LIKE it
    local db=$1 key=$2 like=$3 range lo hi n out tps lat tx c0 c1 nproc0 i
    range=$(psql_pg -d "$db" -F ' ' -c "SELECT min(id), max(id), count(*) FROM streams WHERE path LIKE '$like'")
    read -r lo hi n <<<"$range"
    [ -n "$n" ] && [ "$n" -gt 0 ] && [ $((hi - lo + 1)) = "$n" ] || die "pgbench: streams $like: $range"
    nproc0=$(family "$(head -1 "$pg_dir/data/postmaster.pid")" | wc -l)
    c0=$(pg_ticks)
    out=$(PGOPTIONS='-c synchronous_commit=on' timeout $((BENCH_SECONDS + 60)) "$pgbin/pgbench" -n \
        -M prepared -j 1 -c "$BENCH_CONNS" -T "$BENCH_SECONDS" -D lo="$lo" -D hi="$hi" \
        -f "$work/append.sql" -h "$pg_dir" -U postgres "$db" 2>&1 || true)
    # Until pgbench's backends have exited and been reaped (at most 5 s).
    for ((i = 0; i < 100; i++)); do
        [ "$(family "$(head -1 "$pg_dir/data/postmaster.pid")" | wc -l)" -le "$nproc0" ] && break
        sleep 0.05
    done
    c1=$(pg_ticks)
    tps=$(awk '/^tps = / {print $3; exit}' <<<"$out")
    tx=$(awk -F': ' '/^number of transactions actually processed/ {print $2 + 0; exit}' <<<"$out")
    lat=$(awk '/^latency average = / {print $4 * 1000; exit}' <<<"$out")
    echo "$key pgbench ($n streams): tps=$tps latency_avg_us=$lat $(grep -E '^number of (failed|transactions actually)' <<<"$out" | tr '\n' ' ')" >> "$raw"
    [ -n "$tps" ] || { say "$key pgbench: no tps: $(tail -3 <<<"$out")"; return 0; }
    put "$key.rps" pgbench "$tps"
    put "$key.avg" pgbench "$lat"
    # PostgreSQL's CPU per transaction (pgbench's own process excluded).
    put "$key.dbcpu" pgbench "$(per_request $((c1 - c0)) "${tx:-0}")"
}

# ---- one run -----------------------------------------------------------------------------

run_stacks() {   # RUN ORDER
    local r=$1 order=$2 sys n uri
    uri=$("$here/tests/pg.sh" db "$pg_dir" "run$r")
    for sys in $order; do
        case $sys in
        sqlite) stack_start sqlite "$here" "$work/run$r-sqlite" ;;
        pg) stack_start pg "$here" "$work/run$r-pg" DSTREAM_DB="$uri" ;;
        esac
    done
    has wake && stack_start pg2 "$here" "$work/run$r-pg2" DSTREAM_DB="$uri"
    echo "run $r: sqlite ${url[sqlite]} pg ${url[pg]} pg2 ${url[pg2]:-} ($uri)" >> "$raw"
    wrk_figures "$order"
    if has pgbench; then
        say "pgbench run $r"
        pgbench_prepare "run$r"
        pgbench_run "run$r" append1 '%pgb'
        pgbench_run "run$r" append100 '%pgb-m-%'
    fi
    if has fanout; then
        for n in $BENCH_FANOUT; do
            for sys in $order; do
                say "fan-out $n $sys"
                create "$sys" "/v1/stream/fan-$n"
                fanout_run "$sys" "$n" "fanout$n" "/v1/stream/fan-$n"
            done
        done
    fi
    if has wake; then
        for sys in $order; do
            create "$sys" "/v1/stream/wake-$sys"
            fanout_run "$sys" 1 wake "/v1/stream/wake-$sys"
        done
        # Host B's reader, host A's writer, one database.
        create pg /v1/stream/wake-x
        fanout_run pg2 1 wakex /v1/stream/wake-x pg
    fi
    stack_stop sqlite; stack_stop pg; stack_stop pg2
    rm -rf "$work/run$r-sqlite" "$work/run$r-pg" "$work/run$r-pg2"
}

run_tokens() {   # RUN ORDER
    local r=$1 order=$2 n sys
    for n in $SESSIONS; do
        for sys in $order; do
            say "tokens $n $sys"
            case $sys in
            sqlite) tokens_run sqlite "$n" "$here" ;;
            pg) tokens_run pg "$n" "$here" DB="$("$here/tests/pg.sh" db "$pg_dir" "tok${n}_$r")" \
                    PG_PID="$(head -1 "$pg_dir/data/postmaster.pid")" ;;
            esac
        done
    done
}

# ---- report ------------------------------------------------------------------------------

verdict() { if [ "$1" = 1 ]; then echo "**met**"; else echo "**not met**"; fi; }
cmp() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN { if (a == "" || b == "") { print 0; exit }
    print (op == ">=" ? a >= b : a <= b) ? 1 : 0 }'; }

# A row: SQLite, PostgreSQL, PG / SQLite; a target on the ratio (">= 0.6") if given.
row() {   # LABEL KEY DIV FMT [OP BOUND]
    local t="" r
    if [ -n "${5:-}" ]; then
        r=$(awk -v a="$(med "$2" pg)" -v b="$(med "$2" sqlite)" 'BEGIN { if (a != "" && b > 0) print a / b }')
        t="$5 $6x: $(verdict "$(cmp "$r" "$5" "$6")")"
    fi
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$(cell "$2" sqlite "$3" "$4")" "$(cell "$2" pg "$3" "$4")" \
        "$(ratio "$2" pg sqlite)" "$t"
}

report() {
    local n k
    echo "Cells: median of $RUNS runs (min-max). wrk -t1 -c$BENCH_CONNS -d${BENCH_SECONDS}s;"
    echo "fan-out and wake: one append every $FANOUT_INTERVAL_MS ms for ${BENCH_SECONDS} s, latency from the"
    echo "writer's request to the reader's read; tokens: $DELTAS deltas per reply, $INTERVAL_MS ms apart."
    echo
    echo "| figure | SQLite | PostgreSQL | PG / SQLite | target |"
    echo "|---|---:|---:|---:|---|"
    if has appends; then
        row "appends/s, 1 stream, c$BENCH_CONNS" append1.rps 1 %.0f ">=" 0.6
        row "append latency p50 ms, 1 stream" append1.p50 1000 %.2f
        row "append latency p99 ms, 1 stream" append1.p99 1000 %.2f
        row "server CPU us per append (pool + nginx), 1 stream" append1.cpu 1 %.1f
        row "PostgreSQL's CPU us per append, 1 stream" append1.dbcpu 1 %.1f
        row "appends/s, 100 streams, c$BENCH_CONNS" append100.rps 1 %.0f ">=" 0.6
        row "append latency p50 ms, 100 streams" append100.p50 1000 %.2f
        row "append latency p99 ms, 100 streams" append100.p99 1000 %.2f
        row "server CPU us per append (pool + nginx), 100 streams" append100.cpu 1 %.1f
        row "PostgreSQL's CPU us per append, 100 streams" append100.dbcpu 1 %.1f
    fi
    if has catchup; then
        row "catch-up reads/s, $CATCHUP_MSGS messages" catchup.rps 1 %.0f ">=" 0.6
        row "catch-up latency p50 ms" catchup.p50 1000 %.2f
        row "catch-up latency p99 ms" catchup.p99 1000 %.2f
        row "server CPU us per catch-up read (pool + nginx)" catchup.cpu 1 %.1f
        row "PostgreSQL's CPU us per catch-up read" catchup.dbcpu 1 %.1f
    fi
    if has fanout; then
        for n in $BENCH_FANOUT; do
            row "fan-out $n readers: % of messages delivered" "fanout$n.pct" 1 %.2f
            row "fan-out $n readers: delivery p50 ms" "fanout$n.p50" 1000 %.2f
            row "fan-out $n readers: delivery p99 ms" "fanout$n.p99" 1000 %.2f "<=" 1.5
            row "fan-out $n readers: the writer's append p50 ms" "fanout$n.ap50" 1000 %.2f
        done
    fi
    if has wake; then
        row "wake, reader on the writer's host: p50 ms" wake.p50 1000 %.2f
        row "wake, reader on the writer's host: p99 ms" wake.p99 1000 %.2f
        row "wake: the writer's append p50 ms" wake.ap50 1000 %.2f
    fi
    if has tokens; then
        for n in $SESSIONS; do
            row "$n sessions: delta latency p50 ms" "tokens$n.p50" 1 %.1f
            row "$n sessions: delta latency p99 ms" "tokens$n.p99" 1 %.1f
            row "$n sessions: runner CPU us per delta" "tokens$n.cpu" 1 %.1f
            row "$n sessions: pool + nginx CPU us per delta" "tokens$n.stack" 1 %.1f
            row "$n sessions: PostgreSQL's CPU us per delta" "tokens$n.dbcpu" 1 %.1f
        done
    fi
    echo
    if has wake; then
        local c
        c=$(cmp "$(med wakex.p50 pg2)" "<=" 2000)
        echo "Cross-host wake (PostgreSQL; the writer appends through host A, the reader reads from"
        echo "host B): p50 $(cell wakex.p50 pg2 1000 %.2f) ms, p99 $(cell wakex.p99 pg2 1000 %.2f) ms, the"
        echo "append itself p50 $(cell wakex.ap50 pg2 1000 %.2f) ms; every message delivered:"
        echo "$(all_of wakex.all pg2). Target p50 <= 2 ms: $(verdict "$c")."
        echo
    fi
    if has pgbench; then
        echo "PostgreSQL's own ceiling for the append (pgbench, same client count, same cluster,"
        echo "same run; latency: pgbench's average):"
        echo
        echo "| figure | dstream on PG | pgbench | dstream / pgbench | dstream on SQLite / pgbench |"
        echo "|---|---:|---:|---:|---:|"
        for k in append1 append100; do
            printf '| %s | %s | %s | %s | %s |\n' "appends/s, ${k#append} stream(s), c$BENCH_CONNS" \
                "$(cell "$k.rps" pg 1 %.0f)" "$(cell "$k.rps" pgbench 1 %.0f)" \
                "$(ratio "$k.rps" pg pgbench)" "$(ratio "$k.rps" sqlite pgbench)"
            printf '| %s | %s | %s | | |\n' "latency ms, ${k#append} stream(s) (dstream p50; pgbench average)" \
                "$(cell "$k.p50" pg 1000 %.2f)" "$(cell "$k.avg" pgbench 1000 %.2f)"
            printf '| %s | %s | %s | %s | |\n' "PostgreSQL's CPU us per append, ${k#append} stream(s)" \
                "$(cell "$k.dbcpu" pg 1 %.1f)" "$(cell "$k.dbcpu" pgbench 1 %.1f)" "$(ratio "$k.dbcpu" pg pgbench)"
        done
        echo
    fi
    has catchup && echo "Whole catch-up in one response: SQLite $(all_of catchup.whole sqlite), PostgreSQL $(all_of catchup.whole pg)."
    has fanout && echo "Every message delivered: $(for n in $BENCH_FANOUT; do printf '%s readers SQLite %s, PostgreSQL %s; ' "$n" \
        "$(all_of "fanout$n.all" sqlite)" "$(all_of "fanout$n.all" pg)"; done)"
    has tokens && echo "Every delta delivered: $(for n in $SESSIONS; do printf '%s sessions SQLite %s, PostgreSQL %s; ' "$n" \
        "$(all_of "tokens$n.all" sqlite)" "$(all_of "tokens$n.all" pg)"; done)"
    echo "wrk errors (socket errors + non-2xx, summed over runs):" "$(wrk_errors sqlite pg)"
    echo
    raw_details
}

main() {
    [ -x "$bin/dstream-fcgi" ] && [ -x "$bin/dstream-runner" ] && [ -x "$bin/dstream" ] ||
        die "build first: make"
    [ -x "$pgbin/pgbench" ] || die "no PostgreSQL binaries (make deps installs postgresql-15)"
    need_tools
    tool_build sse-client -lpthread
    ulimit -Sn "$(ulimit -Hn)"
    # The cluster belongs to the postgres user when run as root: it must pass $work.
    [ "$(id -u)" = 0 ] && chmod 711 "$work"
    "$here/tests/pg.sh" start "$pg_dir" >/dev/null
    pg_up=1
    wait_quiet "$BENCH_QUIET_S"
    echo "# SQLite and PostgreSQL, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(machine)"
    echo "- dstream commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown), build $B, pool ${DSTREAM_PROCS:-1} x ${DSTREAM_THREADS:-32}, synchronous=${DSTREAM_SYNC:-full}"
    echo "- SQLite $(sqlite3 --version 2>/dev/null | awk '{print $1}'); $(psql_pg -d postgres -c 'SELECT version()' | cut -d, -f1): $(psql_pg -d postgres -F ' ' -c "SELECT string_agg(name || '=' || setting || coalesce(unit, ''), ', ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'full_page_writes', 'shared_buffers', 'max_connections', 'commit_delay', 'wal_level', 'max_wal_size')") (synchronous_commit=on on dstream's connections and pgbench's)"
    echo "- $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(wrk --version 2>&1 | head -1 | awk '{print $1, $2}'), $("$pgbin/pgbench" --version)"
    echo "- command: \`B=$B RUNS=$RUNS BENCH_SECONDS=$BENCH_SECONDS BENCH_CONNS=$BENCH_CONNS BENCH_FANOUT=\"$BENCH_FANOUT\" SESSIONS=\"$SESSIONS\" DELTAS=$DELTAS INTERVAL_MS=$INTERVAL_MS FIGURES=\"$FIGURES\" bench/engines.sh\`"
    echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- disk where both databases are: $(fsync_floor "$work")"
    echo
    local r order t0=$SECONDS
    for ((r = 1; r <= RUNS; r++)); do
        order=$(run_order "$r" sqlite pg)
        say "run $r of $RUNS ($order, $((SECONDS - t0)) s)"
        if has appends || has catchup || has pgbench || has fanout || has wake; then
            run_stacks "$r" "$order"
        fi
        has tokens && run_tokens "$r" "$order"
    done
    say "done in $((SECONDS - t0)) s"
    report
    echo
    echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg); took $((SECONDS - t0)) s."
}

main "$@"
