#!/usr/bin/env bash
# bench/curl-loop.sh: the runner's way of waiting on its provider transfers, alone
# (bench/src/curl-loop.c): N streaming requests to bench/src/stamp-provider on one
# curl multi handle, driven as the loop did before runner/curlev.c (curl_multi_poll +
# curl_multi_perform: "perform") and as it does now (an epoll set of libcurl's sockets,
# curl_multi_socket_action for the ready ones: "socket"), interleaved.
#
#   B=build N=200 DELTAS=300 RUNS=3 bench/curl-loop.sh
#
# Per run and mode: this process's CPU per delta (getrusage) and loop turns; then,
# once per mode, its system calls per delta (strace -c -f) and valgrind callgrind's
# instructions per delta, whole and in libcurl's entry points (curl_multi_perform +
# curl_multi_poll, or curl_multi_socket_action), the write callback's own (it only
# counts the deltas) taken out. Environment: B [build], N [200], DELTAS [300],
# INTERVAL_MS [20], RUNS [3], TOOLS [1: the strace and callgrind runs; 0: not].
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
N=${N:-200}
DELTAS=${DELTAS:-300}
INTERVAL_MS=${INTERVAL_MS:-20}
RUNS=${RUNS:-3}
TOOLS=${TOOLS:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/dstream-curl-loop.XXXXXX")
sp_pid=
cleanup() {
    [ -n "$sp_pid" ] && kill "$sp_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$here/$B/bench"
loop=$here/$B/bench/curl-loop
[ -x "$loop" ] && [ "$loop" -nt "$here/bench/src/curl-loop.c" ] && [ "$loop" -nt "$here/runner/curlev.c" ] ||
    cc -O2 -g -Wall -Wextra -Werror -std=gnu11 -o "$loop" "$here/bench/src/curl-loop.c" -lcurl
stamper=$here/$B/bench/stamp-provider
[ -x "$stamper" ] && [ "$stamper" -nt "$here/bench/src/stamp-provider.c" ] ||
    cc -O2 -Wall -Wextra -Werror -o "$stamper" "$here/bench/src/stamp-provider.c"
"$stamper" --port-file "$work/port" --deltas "$DELTAS" --interval-ms "$INTERVAL_MS" --seconds 1800 \
    </dev/null >"$work/sp.out" 2>&1 &
sp_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url=http://127.0.0.1:$(cat "$work/port")/v1/messages

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| run | mode | deltas | turns | CPU us per delta |"
echo "|---:|---|---:|---:|---:|"
for ((run = 1; run <= RUNS; run++)); do
    modes="perform socket"
    [ $((run % 2)) = 0 ] && modes="socket perform"
    for m in $modes; do
        "$loop" "$m" "$url" "$N" | awk -v r="$run" '{
            for (i = 1; i <= NF; i++) { split($i, p, "="); v[p[1]] = p[2] }
            printf "| %d | %s | %d | %d | %.2f |\n", r, v["mode"], v["deltas"], v["turns"], v["cpu_us"] / v["deltas"] }'
    done
done
[ "$TOOLS" = 1 ] || exit 0
echo
echo "| mode | system calls per delta (poll, epoll_wait, recvfrom) | turns | instructions per delta (callgrind) | in libcurl's entry points, less the callback |"
echo "|---|---|---:|---:|---:|"
for m in perform socket; do
    strace -c -f -o "$work/st.$m" "$loop" "$m" "$url" "$N" >"$work/st.out.$m"
    sc=$(awk -v d="$((N * DELTAS))" '$NF == "poll" || $NF == "epoll_wait" || $NF == "recvfrom" { c[$NF] = $4 }
        $NF == "total" { t = $4 }
        END { printf "%.2f (%.2f, %.3f, %.2f)", t / d, c["poll"] / d, c["epoll_wait"] / d, c["recvfrom"] / d }' "$work/st.$m")
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.$m" "$loop" "$m" "$url" "$N" >"$work/cg.out.$m" 2>&1
    turns=$(grep -o 'turns=[0-9]*' "$work/cg.out.$m" | cut -d= -f2)
    callgrind_annotate --inclusive=yes "$work/cg.$m" >"$work/cg.txt.$m" 2>/dev/null
    awk -v d="$((N * DELTAS))" -v m="$m" -v sc="$sc" -v turns="$turns" '
        function num(s) { gsub(/,/, "", s); return s + 0 }
        / Collected/ { }
        /PROGRAM TOTALS/ { total = num($1) }
        /curl_multi_perform \[|curl_multi_poll \[|curl_multi_socket_action \[/ { curl += num($1) }
        /:on_body \[/ { cb = num($1) }
        END { printf "| %s | %s | %d | %.0f | %.0f |\n", m, sc, turns, total / d, (curl - cb) / d }' "$work/cg.txt.$m"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
