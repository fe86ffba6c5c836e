#!/usr/bin/env bash
# timers: what sleeping workflow sessions cost the runner, and how late they wake.
#
#   bench/timers.sh    (env: B=build dir [build], SESSIONS [10000], IDLE_S [60],
#                       WAKE_SPAN_S [100], LEAD_S [300], RESTART [1], BUSY_S [20],
#                       KIND [sleep], ROOT [this tree])
#
# Starts the real stack (deploy/dstream-stack, SQLite, authentication off, the
# runner on) in a temporary directory and measures the runner's CPU (utime+stime
# from /proc/PID/stat) over IDLE_S seconds with no session: the baseline. Then it
# stores a workflow of one step, {"kind": "sleep", "until": "{{input.at}}"}, and
# creates SESSIONS sessions of it (curl --parallel), session i due at
# T0 + LEAD_S + i * WAKE_SPAN_S / SESSIONS (ms), T0 the start of the creation: every
# one is due after the measurement. Once the runner's /metrics say it keeps them all
# and holds no lease (each has set its timer and is parked), it measures the runner's
# CPU again over IDLE_S seconds while they sleep, and its resident memory. Both
# times it also measures the runner's CPU over BUSY_S seconds while a plain stream
# takes appends one after another (each commit wakes the runner's loop, which then
# turns hundreds of times a second: what a loop turn costs is what shows). With
# RESTART=1 it then kills the runner (SIGKILL) and starts another on the same
# database, and times how long it takes to find every sleeping session in the log
# and park it again (the wakes below are then all after a restart). Then it
# waits until each has fired (at most LEAD_S + WAKE_SPAN_S + 120 s after T0) and
# reads every timer:fired from the database: its lateness is its createdAt (the time
# of the commit that wrote it) less its dueAt. Prints a markdown table; the stack is
# stopped and the directory removed at the end (BENCH_KEEP=1 keeps it).
#
# KIND=human makes the sessions wait at a human checkpoint with timeoutMs instead
# (the same timer, a step every version has) and stops after the CPU figures: with
# ROOT=another tree (its deploy/dstream-stack and ROOT/$B binaries) it measures an
# older version against the same load, e.g. one whose loop walks every session.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
export B
SESSIONS=${SESSIONS:-10000}
IDLE_S=${IDLE_S:-60}
WAKE_SPAN_S=${WAKE_SPAN_S:-100}
LEAD_S=${LEAD_S:-300}
ROOT=${ROOT:-$here}
KIND=${KIND:-sleep}
BUSY_S=${BUSY_S:-20}
stack=$ROOT/deploy/dstream-stack
hz=$(getconf CLK_TCK)
dir=$(mktemp -d "${TMPDIR:-/tmp}/dstream-timers.XXXXXX")

cleanup() {
    "$stack" stop "$dir" >/dev/null 2>&1 || true
    if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "timers: kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { echo "timers: $*" >&2; }

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# CPU % of one core used by PID over IDLE_S seconds.
cpu_over() {
    local pid=$1 a b t0 t1
    a=$(ticks "$pid")
    t0=$(date +%s%N)
    sleep "$IDLE_S"
    b=$(ticks "$pid")
    t1=$(date +%s%N)
    awk -v d=$((b - a)) -v hz="$hz" -v ns=$((t1 - t0)) 'BEGIN {printf "%.3f", 100 * d / hz / (ns / 1e9)}'
}

# CPU % of one core used by PID over BUSY_S seconds while a stream takes appends
# (one curl, one request after another); prints "CPU% APPENDS".
busy_cpu() {
    local pid=$1 a b t0 t1 cpid n
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$url/v1/stream/bench-busy" || true
    awk -v u="$url" 'BEGIN {for (i = 0; i < 200000; i++)
        printf "url = \"%s/v1/stream/bench-busy\"\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\ndata = \"{\\\"i\\\": %d}\"\noutput = \"/dev/null\"\n%s", u, i, i < 199999 ? "next\n" : ""}' >"$dir/busy.cfg"
    a=$(ticks "$pid")
    t0=$(date +%s%N)
    curl -sS -K "$dir/busy.cfg" 2>/dev/null &
    cpid=$!
    sleep "$BUSY_S"
    kill "$cpid" 2>/dev/null || true
    wait "$cpid" 2>/dev/null || true
    b=$(ticks "$pid")
    t1=$(date +%s%N)
    n=$(curl -fsS -I "$url/v1/stream/bench-busy" | awk -F'[_ \r]' 'tolower($1) == "stream-next-offset:" {print $2 + 0}')
    curl -fsS -o /dev/null -X DELETE "$url/v1/stream/bench-busy" || true
    awk -v d=$((b - a)) -v hz="$hz" -v ns=$((t1 - t0)) -v n="${n:-0}" 'BEGIN {printf "%.3f %d", 100 * d / hz / (ns / 1e9), n}'
}

# The runner's /metrics: sessions it keeps (known) and leases (leased).
runner_gauge() {
    curl -fsS "$url/metrics" | awk -v s="$1" '$1 ~ /^dstream_runner_sessions\{/ && $1 ~ "state=\"" s "\"" {print $2}'
}

url=$(env DSTREAM_AUTH=off "$stack" start "$dir") || { say "the stack did not start (logs in $dir/logs)"; exit 1; }
runner=$(cat "$dir/runner.pid")
db=$dir/dstream.db
[ -f "$db" ] || db=$(ls "$dir"/*.db | head -1)
say "stack at $url, runner pid $runner; baseline: ${IDLE_S}s with no session"
base_cpu=$(cpu_over "$runner")
base_rss=$(rss_kb "$runner")
say "baseline: ${BUSY_S}s of appends to a stream"
read -r base_busy base_appends <<<"$(busy_cpu "$runner")"

wf=bench-sleep
t0=$(date +%s%3N)
if [ "$KIND" = human ]; then
    step="{\"kind\": \"human\", \"id\": \"q\", \"input\": \"text\", \"prompt\": \"?\", \"timeoutMs\": $((LEAD_S * 1000))}"
else
    step='{"kind": "sleep", "until": "{{input.at}}"}'
fi
curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$url/v1/workflows/$wf" \
    --data-binary "{\"phases\": [{\"name\": \"nap\", \"terminal\": true, \"steps\": [$step]}]}"
first_due=$((t0 + LEAD_S * 1000))
awk -v n="$SESSIONS" -v first="$first_due" -v span=$((WAKE_SPAN_S * 1000)) -v u="$url" 'BEGIN {
    for (i = 0; i < n; i++) {
        printf "url = \"%s/v1/sessions\"\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\n", u
        printf "data = \"{\\\"workflow\\\": \\\"bench-sleep\\\", \\\"id\\\": \\\"t%05d\\\", \\\"input\\\": {\\\"at\\\": %.0f}}\"\n", i, first + int(i * span / n)
        printf "output = \"/dev/null\"\n%s", i < n - 1 ? "next\n" : ""
    }
}' >"$dir/create.cfg"
say "creating $SESSIONS sessions (due from +${LEAD_S}s over ${WAKE_SPAN_S}s)"
curl -sS --no-progress-meter --parallel --parallel-max 8 -K "$dir/create.cfg"
created_ms=$(($(date +%s%3N) - t0))
deadline=$((SECONDS + LEAD_S))
until [ "$(runner_gauge known)" = "$SESSIONS" ] && [ "$(runner_gauge leased)" = 0 ]; do
    [ $SECONDS -lt $deadline ] || { say "the runner never parked them all: known=$(runner_gauge known)"; exit 1; }
    sleep 1
done
parked_ms=$(($(date +%s%3N) - t0))
say "created in ${created_ms} ms, all parked after ${parked_ms} ms; measuring ${IDLE_S}s while they sleep"
sleep_cpu=$(cpu_over "$runner")
sleep_rss=$(rss_kb "$runner")
say "${BUSY_S}s of appends to a stream while they sleep"
read -r sleep_busy sleep_appends <<<"$(busy_cpu "$runner")"
end_ms=$(($(date +%s%3N) - t0))
[ "$end_ms" -lt $((LEAD_S * 1000)) ] || say "warning: the measurement ran into the first due time (raise LEAD_S)"

restart_ms=-
figures() {
    echo
    echo "| figure | value |"
    echo "|---|---:|"
    echo "| runner CPU, no session, ${IDLE_S} s (baseline) | ${base_cpu} % of a core |"
    echo "| runner CPU, ${SESSIONS} sleeping sessions (${KIND}), ${IDLE_S} s | ${sleep_cpu} % of a core |"
    echo "| runner CPU while a stream takes appends, ${BUSY_S} s: no session / ${SESSIONS} sleeping | ${base_busy} % (${base_appends} appends) / ${sleep_busy} % (${sleep_appends} appends) |"
    echo "| runner RSS, no session / ${SESSIONS} sleeping | $((base_rss / 1024)) / $((sleep_rss / 1024)) MiB |"
    echo "| ${SESSIONS} sessions created / all parked after | ${created_ms} / ${parked_ms} ms |"
}
if [ "$KIND" = human ]; then figures; exit 0; fi
if [ "${RESTART:-1}" = 1 ]; then
    kill -KILL "$runner"
    while kill -0 "$runner" 2>/dev/null; do sleep 0.05; done
    r0=$(date +%s%3N)
    env DSTREAM_DB="$db" "$ROOT/$B/dstream-runner" </dev/null >>"$dir/logs/runner.log" 2>&1 &
    runner=$!
    echo "$runner" >"$dir/runner.pid"
    # Its start-up work (the scan, a read of each session, parking it) is over when
    # its CPU time stops moving: two 250 ms windows in a row with under 5 ms of it.
    # (/metrics would say too soon: the killed runner's last figures stay until the
    # new one publishes its own, and those count a session it has yet to park.)
    deadline=$((SECONDS + LEAD_S))
    quiet=0 busy_end=$r0
    while [ $quiet -lt 2 ] && [ $SECONDS -lt $deadline ]; do
        a=$(ticks "$runner")
        sleep 0.25
        b=$(ticks "$runner")
        if [ $(((b - a) * 1000 / hz)) -lt 5 ]; then quiet=$((quiet + 1)); else quiet=0; busy_end=$(date +%s%3N); fi
    done
    until [ "$(runner_gauge known)" = "$SESSIONS" ] && [ "$(runner_gauge leased)" = 0 ]; do
        [ $SECONDS -lt $deadline ] || { say "the restarted runner never parked them all"; break; }
        sleep 0.2
    done
    restart_ms=$((busy_end - r0))
    say "killed and restarted the runner: its start-up work (all parked again) took ${restart_ms} ms"
    [ $(($(date +%s%3N) - t0)) -lt $((LEAD_S * 1000)) ] || say "warning: the restart ran into the first due time"
fi

say "waiting for every timer to fire"
deadline=$((SECONDS + LEAD_S + WAKE_SPAN_S + 120))
fired=0
while :; do
    fired=$(sqlite3 "$db" "SELECT count(*) FROM messages WHERE CAST(data AS TEXT) LIKE '{\"type\":\"timer:fired\"%'")
    [ "$fired" -ge "$SESSIONS" ] && break
    [ $SECONDS -lt $deadline ] || { say "only $fired of $SESSIONS fired in time"; break; }
    sleep 2
done
sqlite3 "$db" "SELECT CAST(data AS TEXT) FROM messages WHERE CAST(data AS TEXT) LIKE '{\"type\":\"timer:fired\"%'" |
    jq -r 'def ms: (.[0:19] + "Z" | fromdateiso8601) * 1000 + (.[20:23] | tonumber);
           (.createdAt | ms) - .payload.dueAt' | sort -n >"$dir/late.txt"
pct() { awk -v p="$1" '{v[NR] = $1} END {if (!NR) {print "-"; exit} i = int((NR - 1) * p / 100) + 1; print v[i]}' "$dir/late.txt"; }
n=$(wc -l <"$dir/late.txt")
over=$(awk '$1 > 100' "$dir/late.txt" | wc -l)
early=$(awk '$1 < 0' "$dir/late.txt" | wc -l)

figures
echo "| after a kill -9 and a restart: all parked again after (its CPU busy until) | ${restart_ms} ms |"
echo "| timers fired (of ${SESSIONS}), due over ${WAKE_SPAN_S} s | ${n} |"
echo "| wake lateness p50 / p99 / max | $(pct 50) / $(pct 99) / $(pct 100) ms |"
echo "| fired more than 100 ms late / before their time | ${over} / ${early} |"
