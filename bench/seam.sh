#!/usr/bin/env bash
# bench/seam.sh: two builds of dstream, A (before) and B (after), measured interleaved
# in one sitting on loopback; prints markdown for bench/RESULTS.md.
#
#   git worktree add --detach /tmp/before REV && make -C /tmp/before -j2 all
#   ROOT_A=/tmp/before B=build bench/seam.sh > out.md        (B: this tree, built)
#   ROOT_A=/tmp/before BENCH_SECONDS=2 RUNS=1 SESSIONS="2 5" DELTAS=20 bench/seam.sh
#                                                             (a quick look: ~1 minute)
#
# Each tree is run from its own deploy/dstream-stack and $B binaries; the load
# generators (wrk and bench/lib/*.lua, bench/src/sse-client.c and stamp-provider.c)
# are this tree's, the same for both. Per run, A and B alternate figure by figure (A B
# in odd runs, B A in even ones, so that a drift of the machine weighs on both alike):
#   appends    bench/compare.sh's: wrk -t1 -c BENCH_CONNS -d BENCH_SECONDS, POST of a
#              200-byte JSON message to one stream, then spread over 100 streams
#   catch-up   bench/compare.sh's: wrk GET ?offset=-1 of a 1,000-message stream (each
#              tree checked to return it whole in one response)
#              (with each, the CPU the stack's processes, pool and nginx, spent per
#              request: utime + stime from /proc over the wrk run)
#   tokens     bench/token-latency.sh at each count of SESSIONS, ROOT=the tree: the
#              runner's CPU per delta and the delta latency p50/p99 (a fresh stack and
#              runner each time), the pool's and nginx's CPU per delta, and on
#              PostgreSQL the cluster's
# The appends and catch-up use two fresh stacks per run (nginx + pool, no runner, auth
# off, synchronous=FULL), both up while either is measured. Cells are the median of
# RUNS runs (min-max); B / A divides the medians; "B's speed" is B / A for rates and
# A / B for latencies and CPU, so that 1.00x is no change and >= 0.95x is what the
# verdict column checks.
#
# Environment: ROOT_A (required), ROOT_B [this tree], B [build: both trees' build
# directory], RUNS [3], BENCH_SECONDS [10], BENCH_CONNS [50], SESSIONS ["20 200"],
# DELTAS [300: deltas per reply; with 20 sessions, 6,000 per run, so the runner's CPU
# is ~100 clock ticks, not the ~10 of token-latency.sh's 100], INTERVAL_MS [20],
# FIGURES ["appends catchup tokens"], BENCH_QUIET_S [0: wait up to this long for the
# 1-minute load average to fall below 1; the load before and after is printed either
# way], BENCH_KEEP [0; 1: keep the work directory and say where], ENGINE [sqlite; pg:
# the tokens figure on PostgreSQL: one throwaway cluster of tests/pg.sh in the work
# directory, a fresh database for every token run of either tree; the appends and
# catch-up stay on SQLite: bench/engines.sh measures PostgreSQL's].
# Every load is bounded in count and time; every process it starts it stops by PID
# (the stacks by the PIDs their dstream-stack recorded).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
export B
bin=$here/$B
ROOT_A=${ROOT_A:?ROOT_A: the tree measured as before (built, with deploy/dstream-stack)}
ROOT_B=${ROOT_B:-$here}
RUNS=${RUNS:-3}
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_CONNS=${BENCH_CONNS:-50}
SESSIONS=${SESSIONS:-"20 200"}
DELTAS=${DELTAS:-300}
INTERVAL_MS=${INTERVAL_MS:-20}
FIGURES=${FIGURES:-"appends catchup tokens"}
BENCH_QUIET_S=${BENCH_QUIET_S:-0}
BENCH_KEEP=${BENCH_KEEP:-0}
CATCHUP_MSGS=1000
ROOT_A=$(cd "$ROOT_A" && pwd)
ROOT_B=$(cd "$ROOT_B" && pwd)
declare -A root=([A]=$ROOT_A [B]=$ROOT_B)

BENCH_NAME=seam
# shellcheck source=bench/lib/common.sh
. "$here/bench/lib/common.sh"

ENGINE=${ENGINE:-sqlite}
case $ENGINE in sqlite | pg) ;; *) die "ENGINE: sqlite or pg, not $ENGINE" ;; esac
pg_dir=$work/pg
pg_up=0
cleanup() {
    stack_stop A
    stack_stop B
    [ "$pg_up" = 1 ] && "$here/tests/pg.sh" stop "$pg_dir" >/dev/null 2>&1
    work_done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

commit_of() {   # TREE: its commit, and whether files git tracks differ from it
    local c
    c=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo unknown)
    [ -n "$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)" ] && c="$c (with uncommitted changes)"
    echo "$c"
}

# A row: the two cells, B / A, B's speed against A (HIGHER is 1 for rates, 0 for
# latencies and CPU) and whether that speed is at least 0.95x.
row() {   # LABEL KEY DIV FMT HIGHER
    local a b speed
    a=$(med "$2" A); b=$(med "$2" B)
    speed=$(awk -v a="$a" -v b="$b" -v h="$5" 'BEGIN { if (a == "" || b == "" || a == 0 || b == 0) print "";
        else printf "%.2f\n", h ? b / a : a / b }')
    printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$(cell "$2" A "$3" "$4")" "$(cell "$2" B "$3" "$4")" \
        "$(ratio "$2" B A)" "${speed:+${speed}x}" \
        "$(if [ -z "$speed" ]; then echo n/a; elif awk -v s="$speed" 'BEGIN {exit !(s >= 0.95)}'; then echo yes; else echo "**no**"; fi)"
}

kib() { awk -v b="$(med catchup.bytes "$1")" 'BEGIN {printf "%.0f", b / 1024}'; }   # SYSTEM: catch-up size

report() {
    local n
    echo "Cells: median of $RUNS runs (min-max). B / A: the medians' ratio; B's speed: B / A for"
    echo "rates, A / B for latencies and CPU (1.00x: no change; the verdict is >= 0.95x)."
    echo "wrk -t1 -c$BENCH_CONNS -d${BENCH_SECONDS}s; tokens: $DELTAS deltas per reply, $INTERVAL_MS ms apart."
    echo
    echo "| figure | A (before) | B (after) | B / A | B's speed | >= 0.95x |"
    echo "|---|---:|---:|---:|---:|:---:|"
    if has appends; then
        row "appends/s, 1 stream, c$BENCH_CONNS" append1.rps 1 %.0f 1
        row "append latency p50 ms, 1 stream" append1.p50 1000 %.2f 0
        row "append latency p99 ms, 1 stream" append1.p99 1000 %.2f 0
        row "server CPU us per append (pool + nginx), 1 stream" append1.cpu 1 %.1f 0
        row "appends/s, 100 streams, c$BENCH_CONNS" append100.rps 1 %.0f 1
        row "append latency p50 ms, 100 streams" append100.p50 1000 %.2f 0
        row "append latency p99 ms, 100 streams" append100.p99 1000 %.2f 0
        row "server CPU us per append (pool + nginx), 100 streams" append100.cpu 1 %.1f 0
    fi
    if has catchup; then
        row "catch-up reads/s, $CATCHUP_MSGS messages (KiB: $(kib A) / $(kib B))" catchup.rps 1 %.0f 1
        row "catch-up latency p50 ms" catchup.p50 1000 %.2f 0
        row "catch-up latency p99 ms" catchup.p99 1000 %.2f 0
        row "server CPU us per catch-up read (pool + nginx)" catchup.cpu 1 %.1f 0
    fi
    if has tokens; then
        for n in $SESSIONS; do
            row "$n sessions: runner CPU us per delta" "tokens$n.cpu" 1 %.1f 0
            row "$n sessions: delta latency p50 ms" "tokens$n.p50" 1 %.1f 0
            row "$n sessions: delta latency p99 ms" "tokens$n.p99" 1 %.1f 0
            row "$n sessions: pool + nginx CPU us per delta" "tokens$n.stack" 1 %.1f 0
            [ "$ENGINE" = pg ] && row "$n sessions: PostgreSQL's CPU us per delta" "tokens$n.dbcpu" 1 %.1f 0
        done
    fi
    echo
    has catchup && echo "Whole catch-up in one response: A $(all_of catchup.whole A), B $(all_of catchup.whole B)."
    has tokens && echo "Every delta delivered: $(for n in $SESSIONS; do printf '%s sessions A %s, B %s; ' "$n" \
        "$(all_of "tokens$n.all" A)" "$(all_of "tokens$n.all" B)"; done)"
    echo "wrk errors (socket errors + non-2xx, summed over runs):" \
        "$(wrk_errors A B)"
    echo
    raw_details
}

main() {
    local sys
    for sys in A B; do
        [ -x "${root[$sys]}/$B/dstream-fcgi" ] && [ -x "${root[$sys]}/$B/dstream-runner" ] &&
            [ -x "${root[$sys]}/deploy/dstream-stack" ] || die "build ${root[$sys]} first: make -C ${root[$sys]} all"
    done
    [ -x "$bin/dstream" ] || die "build this tree first: make"
    need_tools
    if [ "$ENGINE" = pg ]; then
        # The cluster belongs to the postgres user when run as root: it must pass $work.
        [ "$(id -u)" = 0 ] && chmod 711 "$work"
        "$here/tests/pg.sh" start "$pg_dir" >/dev/null
        pg_up=1
    fi
    wait_quiet "$BENCH_QUIET_S"
    echo "# Two builds interleaved, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(machine)"
    echo "- A (before): $ROOT_A, commit $(commit_of "$ROOT_A"); B (after): $ROOT_B, commit $(commit_of "$ROOT_B"); each tree's $B/"
    echo "- pool ${DSTREAM_PROCS:-1} x ${DSTREAM_THREADS:-32}, synchronous=${DSTREAM_SYNC:-full}; SQLite $(sqlite3 --version 2>/dev/null | awk '{print $1}'), $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(wrk --version 2>&1 | head -1 | awk '{print $1, $2}')"
    echo "- command: \`ROOT_A=$ROOT_A ROOT_B=$ROOT_B B=$B RUNS=$RUNS BENCH_SECONDS=$BENCH_SECONDS BENCH_CONNS=$BENCH_CONNS SESSIONS=\"$SESSIONS\" DELTAS=$DELTAS INTERVAL_MS=$INTERVAL_MS FIGURES=\"$FIGURES\" ENGINE=$ENGINE bench/seam.sh\`"
    echo "- tokens on: $([ "$ENGINE" = pg ] && echo "PostgreSQL (a fresh database of one throwaway cluster per run)" || echo SQLite)"
    echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- disk where the databases are: $(fsync_floor "$work")"
    echo
    local r order n t0=$SECONDS
    for ((r = 1; r <= RUNS; r++)); do
        order=$(run_order "$r" A B)
        say "run $r of $RUNS ($order, $((SECONDS - t0)) s)"
        if has appends || has catchup; then
            for sys in $order; do stack_start "$sys" "${root[$sys]}" "$work/run$r-$sys"; done
            echo "run $r: A ${url[A]} B ${url[B]}" >> "$raw"
            wrk_figures "$order"
            for sys in $order; do stack_stop "$sys"; done
            rm -rf "$work/run$r-A" "$work/run$r-B"
        fi
        if has tokens; then
            for n in $SESSIONS; do
                for sys in $order; do
                    say "tokens $n $sys ($((SECONDS - t0)) s)"
                    if [ "$ENGINE" = pg ]; then
                        tokens_run "$sys" "$n" "${root[$sys]}" DB="$("$here/tests/pg.sh" db "$pg_dir" "tok${n}_${sys,,}_$r")" \
                            PG_PID="$(head -1 "$pg_dir/data/postmaster.pid")"
                    else
                        tokens_run "$sys" "$n" "${root[$sys]}"
                    fi
                done
            done
        fi
    done
    say "done in $((SECONDS - t0)) s"
    report
    echo
    echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg); took $((SECONDS - t0)) s."
}

main "$@"
