#!/usr/bin/env bash
# bench/run.sh: run every benchmark and print markdown for bench/RESULTS.md.
#
#   make bench                  builds first, then runs this with B set
#   B=build bench/run.sh        (it builds nothing itself)
#
# Environment: B (build directory, default build), RUNS (repetitions of each
# latency measurement, default 3), WAKE_COUNT (messages per run, 500),
# WAKE_INTERVAL_MS (5), WAKE_RATES (sparser runs, "interval_ms:count ..."), IDLE_S
# and READERS (see idle-cpu.sh), SESSIONS, DELTAS and INTERVAL_MS (token-latency.sh;
# bench/engines.sh takes them too, and its own: see its header).
#
# One function per benchmark (bench_*); main calls them in order. A benchmark
# prints its own section: a heading, the command, a table.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
export B
bin=$here/$B
RUNS=${RUNS:-3}
WAKE_COUNT=${WAKE_COUNT:-500}
WAKE_INTERVAL_MS=${WAKE_INTERVAL_MS:-5}
WAKE_RATES=${WAKE_RATES:-"20:250 100:50 500:10"}    # interval_ms:count

work=$(mktemp -d "${TMPDIR:-/tmp}/dstream-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The mechanisms compared, as "label|mode|poll_us". The first poll entry is the
# baseline for ratios: plain polling at the code's default interval.
MECHANISMS=("inotify|inotify|0" "poll 1000 us|poll|1000" "poll 100 us|poll|100")
BASELINE="poll 1000 us"

need() { [ -x "$1" ] || { echo "run.sh: $1 is missing: run make bench" >&2; exit 1; }; }

# Median and spread of numbers on stdin: "median (min-max)" with one decimal.
# Median of an even count is the mean of the two middle values.
median_spread() {
    sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) { print "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        printf "%.0f (%.0f-%.0f)\n", m, v[1], v[NR] }'
}

median() {
    sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) { print "nan"; exit }
        print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# The value of key (p50, p90, ...) on the line whose first word is name (or name=...),
# in each file.
values() {
    local name=$1 key=$2; shift 2
    awk -v n="$name" -v k="$key" '$1 == n || index($1, n "=") == 1 {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$@"
}

bench_wake_latency() {
    need "$bin/bench/wake-latency"
    local m label mode poll_us run args files
    echo "## Commit-to-wake latency"
    echo
    echo "One writer process appends $WAKE_COUNT messages, one every $WAKE_INTERVAL_MS ms"
    echo "(synchronous=FULL); a waiter in another process is woken by lib/wake. $RUNS runs per"
    echo "mechanism, interleaved, each on a fresh database. Cells: median of the runs (min-max),"
    echo "microseconds. commit-to-wake starts when log_append has returned in the writer;"
    echo "append-to-wake when it was called. Reader CPU: the waiting process (watcher thread"
    echo "and reads) as % of one core over the run."
    echo
    echo '```'
    echo "$B/bench/wake-latency DB --mode inotify --count $WAKE_COUNT --interval-ms $WAKE_INTERVAL_MS"
    echo "$B/bench/wake-latency DB --mode poll --poll-us 1000 --count $WAKE_COUNT --interval-ms $WAKE_INTERVAL_MS"
    echo "$B/bench/wake-latency DB --mode poll --poll-us 100 --count $WAKE_COUNT --interval-ms $WAKE_INTERVAL_MS"
    echo '```'
    echo
    for ((run = 1; run <= RUNS; run++)); do
        for m in "${MECHANISMS[@]}"; do
            IFS='|' read -r label mode poll_us <<<"$m"
            args=(--mode "$mode" --count "$WAKE_COUNT" --interval-ms "$WAKE_INTERVAL_MS")
            [ "$mode" = poll ] && args+=(--poll-us "$poll_us")
            local out="$work/wake-${label// /_}-$run.txt"
            if ! "$bin/bench/wake-latency" "$work/wake-${label// /_}-$run.db" "${args[@]}" \
                >"$out" 2>"$out.err"; then
                echo "run.sh: wake-latency $label run $run failed: $(cat "$out.err")" >&2
            fi
        done
    done
    local base_p50
    base_p50=$(values commit_to_wake_us p50 "$work"/wake-"${BASELINE// /_}"-*.txt | median)
    echo "| wake | commit-to-wake p50 | p90 | p99 | max | p50 vs $BASELINE | append-to-wake p50 | p99 | append (commit) p50 | reader CPU % | received |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for m in "${MECHANISMS[@]}"; do
        IFS='|' read -r label mode poll_us <<<"$m"
        files=("$work"/wake-"${label// /_}"-*.txt)
        local c50 c90 c99 cmax ratio a50 a99 ap50 cpu recv
        c50=$(values commit_to_wake_us p50 "${files[@]}" | median_spread)
        c90=$(values commit_to_wake_us p90 "${files[@]}" | median_spread)
        c99=$(values commit_to_wake_us p99 "${files[@]}" | median_spread)
        cmax=$(values commit_to_wake_us max "${files[@]}" | median_spread)
        ratio=$(values commit_to_wake_us p50 "${files[@]}" | median |
            awk -v b="$base_p50" '{ printf (b > 0 ? "%.2fx" : "-"), $1 / b }')
        a50=$(values append_to_wake_us p50 "${files[@]}" | median_spread)
        a99=$(values append_to_wake_us p99 "${files[@]}" | median_spread)
        ap50=$(values append_us p50 "${files[@]}" | median_spread)
        cpu=$(values mode reader_cpu_pct "${files[@]}" | sort -g |
            awk '{v[NR] = $1} END { if (NR) printf "%.1f (%.1f-%.1f)", \
                (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }')
        recv=$(values mode received "${files[@]}" | awk '{s += $1} END {print s}')
        echo "| $label | $c50 | $c90 | $c99 | $cmax | $ratio | $a50 | $a99 | $ap50 | $cpu | $recv/$((RUNS * WAKE_COUNT)) |"
    done
    echo
    echo "<details><summary>Raw output</summary>"
    echo
    echo '```'
    for ((run = 1; run <= RUNS; run++)); do
        for m in "${MECHANISMS[@]}"; do
            IFS='|' read -r label mode poll_us <<<"$m"
            cat "$work/wake-${label// /_}-$run.txt"
        done
    done
    echo '```'
    echo
    echo "</details>"
    echo
}

bench_wake_by_rate() {
    need "$bin/bench/wake-latency"
    local spec interval count m label mode poll_us args out
    echo "## Watcher CPU and latency by write rate"
    echo
    echo "The same program with sparser writes (one run each, about 5 s): how the waiting"
    echo "process's CPU (reader CPU, % of one core) and the commit-to-wake latency (us) depend"
    echo "on how often commits arrive."
    echo
    echo '```'
    for spec in $WAKE_RATES; do
        IFS=: read -r interval count <<<"$spec"
        echo "$B/bench/wake-latency DB --mode inotify|poll [--poll-us N] --count $count --interval-ms $interval"
    done
    echo '```'
    echo
    echo "| wake | interval ms | commit-to-wake p50 | p90 | p99 | reader CPU % |"
    echo "|---|---:|---:|---:|---:|---:|"
    for m in "${MECHANISMS[@]}"; do
        IFS='|' read -r label mode poll_us <<<"$m"
        for spec in $WAKE_RATES; do
            IFS=: read -r interval count <<<"$spec"
            args=(--mode "$mode" --count "$count" --interval-ms "$interval")
            [ "$mode" = poll ] && args+=(--poll-us "$poll_us")
            out="$work/rate-${label// /_}-$interval.txt"
            "$bin/bench/wake-latency" "$work/rate-${label// /_}-$interval.db" "${args[@]}" \
                >"$out" 2>"$out.err" || echo "run.sh: wake-latency $label $interval ms failed" >&2
            printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$interval" \
                "$(values commit_to_wake_us p50 "$out")" "$(values commit_to_wake_us p90 "$out")" \
                "$(values commit_to_wake_us p99 "$out")" "$(values mode reader_cpu_pct "$out")"
        done
    done
    echo
}

bench_idle_cpu() {
    echo "## CPU of an idle worker"
    echo
    echo "The real stack (nginx + dstream-fcgi pool, ${DSTREAM_PROCS:-2} workers) idle for"
    echo "${IDLE_S:-10} s, then again with ${READERS:-100} idle SSE readers connected to one stream."
    echo "Per worker process: CPU from utime+stime (/proc/PID/stat, 10 ms ticks), from the"
    echo "threads' run time (/proc/PID/task/*/schedstat, ns), and how often its threads ran."
    echo
    echo '```'
    echo "B=$B bench/idle-cpu.sh"
    echo '```'
    echo
    "$here/bench/idle-cpu.sh"
    echo
}

bench_token_latency() {
    echo "## Token latency through the runner"
    echo
    echo "Chat sessions streaming replies from tests/mock-provider in stamp mode (each delta"
    echo "carries the time the provider wrote it), one SSE reader per session on"
    echo "/v1/sessions/{id}/events in one C process; ${DELTAS:-100} deltas per reply,"
    echo "${INTERVAL_MS:-20} ms apart. Latency: provider write to client read. Runner CPU: its"
    echo "utime + stime over the run, per delivered delta."
    echo
    echo '```'
    echo "B=$B bench/token-latency.sh"
    echo '```'
    echo
    "$here/bench/token-latency.sh"
    echo
}

# Sessions one runner sustains, its memory per active session, and two runners
# sharing the sessions, on SQLite and PostgreSQL (bench/sessions.sh).
bench_sessions() {
    local engine runners
    echo "## Sessions sustained, memory per session, runners side by side"
    echo
    for engine in sqlite pg; do
        for runners in 1 2; do
            echo "#### $engine, $runners runner process(es)"
            echo
            echo '```'
            echo "ENGINE=$engine RUNNERS=$runners MEM_SESSIONS=$([ "$runners" = 1 ] && echo 2000 || echo 0) B=$B bench/sessions.sh"
            echo '```'
            echo
            ENGINE=$engine RUNNERS=$runners MEM_SESSIONS=$([ "$runners" = 1 ] && echo 2000 || echo 0) \
                "$here/bench/sessions.sh"
            echo
        done
    done
}

# dstream side by side with the reference server and a bare FastCGI responder
# behind the same nginx (bench/compare.sh: installs wrk and the peer if missing).
bench_compare() {
    echo "## dstream, the Durable Streams reference server and the FastCGI ceiling"
    echo
    echo '```'
    echo "B=$B bench/compare.sh"
    echo '```'
    echo
    "$here/bench/compare.sh"
}

# dstream on PostgreSQL next to SQLite, and pgbench's ceiling for the append
# (bench/engines.sh: a throwaway cluster of its own).
bench_engines() {
    echo "## PostgreSQL next to SQLite"
    echo
    echo '```'
    echo "B=$B bench/engines.sh"
    echo '```'
    echo
    "$here/bench/engines.sh"
}

main() {
    need "$bin/dstream-fcgi"
    echo "# Benchmark run $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
    echo "- SQLite $(sqlite3 --version 2>/dev/null | awk '{print $1}') (library the build links: $(ldd "$bin/dstream-fcgi" | awk '/libsqlite3/ {print $3}'))"
    echo "- commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown), build $B"
    echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    bench_wake_latency
    bench_wake_by_rate
    bench_idle_cpu
    bench_token_latency
    bench_sessions
    bench_compare
    bench_engines
    echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

main "$@"
