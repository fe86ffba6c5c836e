#!/usr/bin/env bash
# idle-cpu: CPU used by idle dstream-fcgi workers for each wake-up mechanism.
#
#   bench/idle-cpu.sh    (env: B=build dir [build], IDLE_S [10], READERS [100],
#                         DSTREAM_RUNNER [0: the runner is not started])
#
# For each mechanism (inotify; poll every 1000 us; poll every 100 us) it starts the
# real stack (deploy/dstream-stack) in a temporary directory, lets it sit idle for
# IDLE_S seconds and reads, before and after, each worker's CPU time: utime+stime
# from /proc/PID/stat (clock ticks) and, finer, the run time and number of times
# scheduled summed over the worker's threads (/proc/PID/task/*/schedstat). Then it
# connects READERS idle SSE readers (curl -N on one stream nobody writes), waits
# until each has its first event, and measures again: waiting readers block in
# poll() and should cost nothing. Readers are killed and the stack stopped after
# each mechanism. Prints one markdown table row per worker and measurement.
#
# SSE responses end after DSTREAM_SSE_MAX_MS (60 s by default): keep IDLE_S below.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
export B
IDLE_S=${IDLE_S:-10}
READERS=${READERS:-100}
SETTLE_S=${SETTLE_S:-1}
stack=$here/deploy/dstream-stack
hz=$(getconf CLK_TCK)

dir=""
reader_pids=()

cleanup() {
    local p
    for p in "${reader_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${reader_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    reader_pids=()
    if [ -n "$dir" ]; then
        "$stack" stop "$dir" >/dev/null 2>&1 || true
        rm -rf "$dir"
        dir=""
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The worker processes: children of the pool's supervisor.
workers() {
    local ppid=$1 f pid rest
    for f in /proc/[0-9]*/stat; do
        { read -r pid rest < "$f"; } 2>/dev/null || continue
        rest=${rest##*) }               # after the command name
        set -- $rest                    # state ppid ...
        [ "$2" = "$ppid" ] && echo "$pid"
    done
    return 0
}

# "ticks run_ns runs" of one process.
sample() {
    local pid=$1 stat ticks
    stat=$(cat "/proc/$pid/stat")
    stat=${stat##*) }
    set -- $stat                        # field 3 of the file is $1 here
    ticks=$(( ${12} + ${13} ))          # utime (14) + stime (15)
    cat /proc/"$pid"/task/*/schedstat 2>/dev/null |
        awk -v t="$ticks" '{ns += $1; runs += $3} END {printf "%d %.0f %.0f\n", t, ns, runs}'
}

# Measure every worker over IDLE_S seconds; print table rows.
measure() {
    local label=$1 readers=$2 pid i
    local -a pids before after
    mapfile -t pids < <(workers "$(cat "$dir/fcgi.pid")")
    [ ${#pids[@]} -gt 0 ] || { echo "idle-cpu: no workers found" >&2; return 1; }
    for i in "${!pids[@]}"; do before[i]=$(sample "${pids[i]}"); done
    local t0 t1
    t0=$(date +%s%N)
    sleep "$IDLE_S"
    t1=$(date +%s%N)
    for i in "${!pids[@]}"; do after[i]=$(sample "${pids[i]}"); done
    for i in "${!pids[@]}"; do
        # shellcheck disable=SC2086
        awk -v l="$label" -v r="$readers" -v p="${pids[i]}" -v hz="$hz" -v dt="$((t1 - t0))" \
            -v b="${before[i]}" -v a="${after[i]}" 'BEGIN {
                split(b, x, " "); split(a, y, " ");
                s = dt / 1e9;
                printf "| %s | %d | %s | %.2f | %.3f | %.0f |\n", l, r, p,
                    100 * (y[1] - x[1]) / hz / s, 100 * (y[2] - x[2]) / 1e9 / s,
                    (y[3] - x[3]) / s }'
    done
}

start_readers() {
    local url=$1 n=$2 i deadline
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: text/plain' "$url/v1/stream/idle-cpu"
    mkdir -p "$dir/readers"
    for ((i = 0; i < n; i++)); do
        curl -sN -o "$dir/readers/$i" "$url/v1/stream/idle-cpu?offset=now&live=sse" \
            </dev/null 2>/dev/null &
        reader_pids+=($!)
    done
    # Ready when every reader has its first (control) event.
    deadline=$((SECONDS + 30))
    while :; do
        local ready
        # (curl creates its output file only when the first bytes arrive)
        ready=$({ grep -l '^event: *control' "$dir"/readers/* 2>/dev/null || true; } | wc -l)
        [ "$ready" -ge "$n" ] && break
        if [ $SECONDS -ge $deadline ]; then
            echo "idle-cpu: only $ready of $n readers connected" >&2
            return 1
        fi
        sleep 0.1
    done
}

stop_readers() {
    local p
    for p in "${reader_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${reader_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    reader_pids=()
}

run_one() {
    local label=$1 mode=$2 poll_us=$3 url
    dir=$(mktemp -d "${TMPDIR:-/tmp}/dstream-idle.XXXXXX")
    # Only the pool: the runner (started by default in newer stacks) has a watcher of
    # its own and would be measured separately.
    url=$(DSTREAM_RUNNER=${DSTREAM_RUNNER:-0} DSTREAM_AUTH=off DSTREAM_WAKE=$mode DSTREAM_WAKE_POLL_US=$poll_us \
        "$stack" start "$dir")
    sleep "$SETTLE_S"                   # let start-up work finish
    measure "$label" 0
    start_readers "$url" "$READERS"
    sleep "$SETTLE_S"
    measure "$label" "$READERS"
    stop_readers
    cleanup
}

echo "| wake | SSE readers | worker pid | CPU % of a core (utime+stime) | CPU % (schedstat) | thread runs/s |"
echo "|---|---:|---:|---:|---:|---:|"
run_one "inotify" inotify 1000
run_one "poll 1000 us" poll 1000
run_one "poll 100 us" poll 100
