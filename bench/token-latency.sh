#!/usr/bin/env bash
# bench/token-latency.sh: how fast a provider's tokens reach the readers of a
# session, and what the runner spends per token.
#
#   B=build bench/token-latency.sh            (make bench runs it; it builds nothing)
#
# The real stack (nginx + pool + runner) on a temporary database, the runner
# pointed at a stamping provider: every text delta is "@ts<µs> ", the wall clock
# when the provider wrote it. The provider is bench/src/stamp-provider.c (C, one
# thread: the load generator costs little next to the stack), or with
# PROVIDER=node tests/mock-provider's stamp mode (the same wire format; what the
# first measurements used). For each count of concurrent
# chat sessions, one SSE reader per session on /v1/sessions/{id}/events (all in
# one C process, bench/src/sse-client.c "tokens"), then one message to every
# session, POSTed by that process too over 16 kept-alive connections (ASK=curl: by
# a curl process each, 16 at a time, as bench/RESULTS.md's figures before its
# section of 2026-11-27 12:13 UTC were taken: the 200 processes' start-up took most
# of a core during the sessions' start, on the machine the stack runs on); each
# reply is DELTAS deltas INTERVAL_MS apart. A delta's latency is
# read time minus its stamp: provider chunk -> runner -> log -> hub -> nginx ->
# client. Runner CPU: utime + stime of dstream-runner over the run (from
# /proc/PID/stat) divided by the deltas delivered. The last column leaves out the
# deltas written in the first second of a run (the sessions all starting at once):
# the steady state's p50 and p99.
#
# Environment: B, SESSIONS ("1 20 200"), DELTAS (100), INTERVAL_MS (20), RUNS (1),
# PROVIDER (c or node: c), ASK (reader or curl: reader; who POSTs the messages, above),
# PERF_OUT (if set: perf record of the runner during each run, to PERF_OUT.N;
# PERF_CG: perf record's call-graph option [-g], e.g. "--call-graph dwarf,16384 -F 499"),
# STRACE_OUT (if set: strace -c -f of the runner during each run, to STRACE_OUT.N:
# its system calls per delta; the CPU figures of such a run are strace's, not the runner's),
# HOPS_OUT (if set: strace -f -ttt -T -y of the runner, the pool, nginx's workers and the
# reader during each run, to HOPS_OUT.N.{runner,fcgi,nginx,client}, and bench/hops.py's
# split of each delta's latency into its hops printed after the table; strace slows every
# traced call, so such a run's latencies are strace's: it shows where the time goes;
# with HOPS_SYNC_ONLY=1 only the runner's fdatasync/fsync calls are traced, with
# --seccomp-bpf, so that nothing else stops: their durations beside the run's latencies;
# PG_PID, the postmaster's PID of DB's cluster: its processes' syncs too; without
# HOPS_OUT, PG_PID adds the cluster's CPU per delta to the table: its processes' utime +
# stime and the postmaster's children that ended, from /proc),
# TIMELINE_OUT (if set: each delta's provider stamp and latency in µs, a line each, to
# TIMELINE_OUT.N: when the slow ones were written),
# POOL_SYSCALLS_OUT (if set: the same of the pool's processes together, to
# POOL_SYSCALLS_OUT.N: all, write, pread64, fcntl, sendmsg, and their task-clock),
# SYSCALLS_OUT (if set: perf stat of the runner's system calls during each run, to
# SYSCALLS_OUT.N: all of them, and poll, epoll_wait and recvfrom, counted by the kernel's
# tracepoints, which cost the runner little, unlike strace; with the runner's loop turns
# from /metrics, dstream_runner_loops_total, before and after), RUNNER_NICE (if set:
# renice the runner to it, e.g. -10, for both trees alike: on a machine others load, the
# runner then gets the CPU as on a quiet one, and its loop turns as often),
# ROOT (the tree whose binaries and deploy/dstream-stack are measured: default this
# one; the mock and the reader always come from this one), DB (the stack's database:
# default a SQLite file in the work directory; a postgresql:// URI of an empty
# database puts the stack on PostgreSQL, as bench/engines.sh does).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${ROOT:-$here}
B=${B:-build}
SESSIONS=${SESSIONS:-"1 20 200"}
DELTAS=${DELTAS:-100}
INTERVAL_MS=${INTERVAL_MS:-20}
RUNS=${RUNS:-1}
PROVIDER=${PROVIDER:-c}
ASK=${ASK:-reader}
ask_args=()
[ "$ASK" = curl ] || ask_args=(--ask '{"content": "Go."}')
bin=$ROOT/$B
reader=$here/$B/bench/sse-client

work=$(mktemp -d "${TMPDIR:-/tmp}/dstream-tokens.XXXXXX")
mock_pid=
cleanup() {
    "$ROOT/deploy/dstream-stack" stop "$work/stack" >/dev/null 2>&1 || true
    [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM    # so that a timeout or Ctrl-C still stops the stack

mkdir -p "$(dirname "$reader")"
[ -x "$reader" ] && [ "$reader" -nt "$here/bench/src/sse-client.c" ] ||
    cc -O2 -Wall -Wextra -Werror -o "$reader" "$here/bench/src/sse-client.c" -lpthread
[ -x "$bin/dstream-runner" ] || { echo "token-latency: build $bin first" >&2; exit 1; }

if [ "$PROVIDER" = node ]; then
    node "$here/tests/mock-provider/mock-provider.mjs" --port 0 --port-file "$work/mock.port" \
        --max-lifetime 3600 </dev/null >"$work/mock.out" 2>&1 &
else
    stamper=$here/$B/bench/stamp-provider
    [ -x "$stamper" ] && [ "$stamper" -nt "$here/bench/src/stamp-provider.c" ] ||
        cc -O2 -Wall -Wextra -Werror -o "$stamper" "$here/bench/src/stamp-provider.c"
    "$stamper" --port-file "$work/mock.port" --deltas "$DELTAS" --interval-ms "$INTERVAL_MS" \
        </dev/null >"$work/mock.out" 2>&1 &
fi
mock_pid=$!
for _ in $(seq 100); do [ -s "$work/mock.port" ] && break; sleep 0.05; done
mock=http://127.0.0.1:$(cat "$work/mock.port")

mkdir -p "$work/stack"
# The provider "anthropic" is the mock (a providers file; DSTREAM_PROVIDER_URL for
# runners from before there were provider files).
printf '{"providers": {"anthropic": {"kind": "anthropic", "baseUrl": "%s", "keyEnv": "ANTHROPIC_API_KEY", "allowPrivate": ["127.0.0.1"]}}}\n' \
    "$mock" >"$work/providers.json"
DSTREAM_DB=${DB:-$work/stack/dstream.db} DSTREAM_PROVIDERS=$work/providers.json DSTREAM_PROVIDER_URL=$mock \
    ANTHROPIC_API_KEY=sk-bench B=$B "$ROOT/deploy/dstream-stack" start "$work/stack" >"$work/start.out" 2>&1 ||
    { cat "$work/start.out" >&2; exit 1; }
url=$(cat "$work/stack/url")
port=${url##*:}
runner_pid=$(cat "$work/stack/runner.pid")
[ -n "${RUNNER_NICE:-}" ] && renice -n "$RUNNER_NICE" -p "$runner_pid" >/dev/null
tck=$(getconf CLK_TCK)

api() { curl -fsS -o /dev/null -H 'Content-Type: application/json' "$@"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$runner_pid/stat"; }
# The pool's and nginx's processes (the stack but the runner), and the PostgreSQL
# cluster's (PG_PID: the postmaster with its children, those that ended included).
stack_ticks() {
    local p t=0
    for p in $(cat "$work/stack/fcgi.pid" "$work/stack/nginx.master.pid" 2>/dev/null); do
        t=$((t + $(tree_ticks "$p")))
    done
    echo "$t"
}
tree_ticks() {      # PID: its and its children's utime + stime, and its ended children's
    local p t
    t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat" 2>/dev/null || echo 0)
    for p in $(pgrep -P "$1"); do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "$t"
}
pg_ticks() { if [ -n "${PG_PID:-}" ]; then tree_ticks "$PG_PID"; else echo 0; fi; }

api -X PUT "$url/v1/agents/bench" --data-binary '{"provider": "anthropic", "model": "bench-model"}'
[ "$PROVIDER" = node ] && api -X PUT "$mock/__default" --data-binary \
    "{\"stamp\": true, \"deltas\": $DELTAS, \"delayMs\": $INTERVAL_MS, \"usage\": {\"input\": 10, \"output\": $DELTAS}}"

echo "| sessions | deltas/s (all) | delivered | p50 ms | p90 ms | p99 ms | max ms | runner CPU ms | runner CPU us/delta | pool + nginx CPU us/delta | PostgreSQL CPU us/delta | after the first second: p50 / p99 ms |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $SESSIONS; do
    for ((run = 1; run <= RUNS; run++)); do
        : >"$work/paths"
        for i in $(seq 1 "$n"); do
            id=tok-$n-$run-$i
            api -X POST "$url/v1/sessions" --data-binary "{\"agent\": \"bench\", \"id\": \"$id\"}"
            echo "/v1/sessions/$id/events" >>"$work/paths"
        done
        "$reader" tokens --port "$port" --paths "$work/paths" --expect "$DELTAS" \
            --seconds $((DELTAS * INTERVAL_MS / 1000 + 60)) ${TIMELINE_OUT:+--timeline "$TIMELINE_OUT.$n"} \
            "${ask_args[@]}" \
            >"$work/out" 2>"$work/err" &
        rpid=$!
        for _ in $(seq 600); do grep -q '^mode=tokens ready=' "$work/out" && break; sleep 0.05; done
        hpids=
        if [ -n "${HOPS_OUT:-}" ]; then     # every hop's system calls, with times
            kids() { pgrep -P "$1" | sed 's/^/-p /' | tr '\n' ' '; }   # (the pool's and nginx's workers)
            if [ "${HOPS_SYNC_ONLY:-0}" = 1 ]; then
                # The runner's syncs alone, stopping at nothing else (--seccomp-bpf).
                strace -f -ttt -T -y --seccomp-bpf -e trace=fdatasync,fsync -o "$HOPS_OUT.$n.runner" \
                    -p "$runner_pid" 2>/dev/null &
                hpids=$!
            else
                # The runner's reads and frames at 256 bytes (its stamps come in short
                # reads); the others' at 4096, with the pool's locks, page reads and the
                # sleeps of SQLite's busy handler.
                trace='trace=read,readv,recvfrom,recvmsg,write,writev,sendto,sendmsg,pwrite64,fdatasync,fsync'
                for who in runner:$runner_pid "fcgi:$(kids "$(cat "$work/stack/fcgi.pid")")" client:$rpid \
                    "nginx:$(kids "$(cat "$work/stack/nginx.master.pid")")"; do
                    pids=${who#*:}
                    case $pids in -p*) ;; *) pids="-p $pids" ;; esac
                    sl=4096 extra=,pread64,fcntl,nanosleep,clock_nanosleep
                    [ "${who%%:*}" = runner ] && sl=256 extra=
                    # shellcheck disable=SC2086
                    strace -f -ttt -T -y -s "$sl" -e "$trace$extra" -o "$HOPS_OUT.$n.${who%%:*}" $pids 2>/dev/null &
                    hpids="$hpids $!"
                done
            fi
            if [ -n "${PG_PID:-}" ]; then   # PostgreSQL's own syncs (its backends and WAL writer)
                # shellcheck disable=SC2046
                strace -f -ttt -T -y --seccomp-bpf -e trace=fdatasync,fsync -o "$HOPS_OUT.$n.postgres" \
                    $(kids "$PG_PID") 2>/dev/null &
                hpids="$hpids $!"
            fi
            sleep 1
        fi
        c0=$(cpu_ticks) s0=$(stack_ticks) g0=$(pg_ticks)
        ppid=
        if [ -n "${PERF_OUT:-}" ]; then     # a profile of the runner during the run
            perf record -q ${PERF_CG:--g} -o "$PERF_OUT.$n" -p "$runner_pid" >/dev/null 2>&1 &
            ppid=$!
        fi
        tpid=
        if [ -n "${SYSCALLS_OUT:-}" ]; then  # system calls counted by tracepoints
            curl -fsS "$url/metrics" | grep '^dstream_runner_loops_total' | sed 's/^/before: /' >"$SYSCALLS_OUT.$n.loops" || true
            perf stat -x, -o "$SYSCALLS_OUT.$n" -e raw_syscalls:sys_enter,syscalls:sys_enter_poll,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_recvfrom,syscalls:sys_enter_pwrite64,syscalls:sys_enter_fdatasync,syscalls:sys_enter_pread64 \
                -p "$runner_pid" >/dev/null 2>&1 &
            tpid=$!
        fi
        qpid=
        if [ -n "${POOL_SYSCALLS_OUT:-}" ]; then     # the pool's processes, together
            perf stat -x, -o "$POOL_SYSCALLS_OUT.$n" -e raw_syscalls:sys_enter,syscalls:sys_enter_write,syscalls:sys_enter_pread64,syscalls:sys_enter_fcntl,syscalls:sys_enter_sendmsg,task-clock \
                -p "$({ cat "$work/stack/fcgi.pid"; pgrep -P "$(cat "$work/stack/fcgi.pid")"; } | paste -sd,)" >/dev/null 2>&1 &
            qpid=$!
        fi
        spid=
        if [ -n "${STRACE_OUT:-}" ]; then   # system calls of the runner during the run
            strace -c -f -o "$STRACE_OUT.$n" -p "$runner_pid" 2>/dev/null &
            spid=$!
            sleep 0.5
        fi
        if [ "$ASK" = curl ]; then
            sed 's|/events$|/messages|' "$work/paths" |
                xargs -P 16 -I{} curl -fsS -o /dev/null -H 'Content-Type: application/json' \
                    --data-binary '{"content": "Go."}' "$url{}"
        fi
        wait "$rpid" || true
        c1=$(cpu_ticks) s1=$(stack_ticks) g1=$(pg_ticks)
        [ -n "$ppid" ] && { kill -INT "$ppid"; wait "$ppid" || true; }
        for p in $spid $qpid $hpids; do kill -INT "$p" 2>/dev/null || true; wait "$p" || true; done
        if [ -n "$tpid" ]; then
            kill -INT "$tpid"; wait "$tpid" || true
            curl -fsS "$url/metrics" | grep '^dstream_runner_loops_total' | sed 's/^/after: /' >>"$SYSCALLS_OUT.$n.loops" || true
        fi
        line=$(grep '^mode=tokens readers' "$work/out" || echo "mode=tokens failed")
        echo "$line" >>"$work/raw"
        pgc=-1
        [ -n "${PG_PID:-}" ] && [ -z "${HOPS_OUT:-}" ] && pgc=$((g1 - g0))
        awk -v l="$line" -v n="$n" -v c="$((c1 - c0))" -v s="$((s1 - s0))" -v g="$pgc" -v tck="$tck" \
            -v rate=$((1000 / INTERVAL_MS)) 'BEGIN {
            split(l, kv, " "); for (i in kv) { split(kv[i], p, "="); v[p[1]] = p[2] }
            ms = c * 1000 / tck
            d = v["delivered"] > 0 ? v["delivered"] : 0
            printf "| %d | %d | %s/%s | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %s | %s | %s |\n", n, n * rate,
                v["delivered"], v["expected"], v["p50_us"] / 1000, v["p90_us"] / 1000, v["p99_us"] / 1000,
                v["max_us"] / 1000, ms, (d ? ms * 1000 / d : 0),
                (d ? sprintf("%.1f", s * 1e6 / tck / d) : "-"),
                (d && g >= 0 ? sprintf("%.1f", g * 1e6 / tck / d) : "-"),
                (v["steady"] > 0 ? sprintf("%.1f / %.1f", v["steady_p50_us"] / 1000, v["steady_p99_us"] / 1000) : "-") }'
    done
done
if [ -n "${HOPS_OUT:-}" ]; then
    for n in $SESSIONS; do
        echo
        echo "Hops at $n sessions (HOPS_OUT=$HOPS_OUT.$n.*):"
        echo
        python3 "$here/bench/hops.py" "$HOPS_OUT.$n"
    done
fi
echo
echo "<details><summary>Raw output</summary>"
echo
echo '```'
cat "$work/raw"
echo '```'
echo
echo "</details>"
