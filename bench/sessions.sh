#!/usr/bin/env bash
# bench/sessions.sh: how many streaming sessions the runner sustains, what an active
# session costs it in memory, and how several runner processes share the sessions.
#
#   B=build bench/sessions.sh                              (make bench runs it; it builds nothing)
#   DB=postgresql:///NAME?host=DIR&user=postgres B=build bench/sessions.sh    (on PostgreSQL)
#   ENGINE=pg B=build bench/sessions.sh                    (on a throwaway cluster of its own)
#   RUNNERS=2 B=build bench/sessions.sh                    (two runner processes)
#
# The real stack (nginx + pool + runner, authentication off: no proxy in front) on a
# temporary SQLite database or DB (a postgresql:// URI of an empty database, as
# bench/engines.sh makes; with ENGINE=pg and no DB, a throwaway cluster of its own,
# tests/pg.sh, fsync on), the runner's provider the C stamping provider
# (bench/src/stamp-provider.c: every text delta carries the wall clock at which it was
# written), RUNNERS runner processes on the one database, each with its own
# DSTREAM_RUNNER_ID (bench-r1, bench-r2, ...: the first is the stack's own).
#
# Sessions sustained: for each count N of STEPS, N new chat sessions, one SSE reader
# each on /v1/sessions/{id}/events (one process, bench/src/sse-client.c "tokens"), then
# a message to each: every reply is DELTAS deltas INTERVAL_MS apart (50 a second each
# at the default 20 ms). A step meets the bar when every delta was delivered and the
# p99 of delta latency (provider write -> reader read) is under P99_MS. The steps stop
# at the first that misses it (all of them with STEPS_ALL=1); the last line names the
# largest count that met it. Each step's row: the latencies, the runners' CPU per
# delivered delta (utime + stime from /proc over the step, all runners together), each
# runner's share of a core and the provider requests it made (the split between
# runners: dstream_runner_requests_total of /metrics before and after), the load
# generators' own shares of a core (the reader, the provider: if either is near a
# whole core, it is the bottleneck, not the runner), the stack's (pool + nginx),
# PostgreSQL's (its own cluster only), and the load average when the step ended.
#
# Memory (MEM_SESSIONS > 0, first, on the fresh stack): the first runner's RSS and heap
# (VmRSS and RssAnon of /proc/PID/status; [heap] of /proc/PID/smaps: the main arena)
# idle, with MEM_SESSIONS sessions streaming at once (MEM_DELTAS deltas MEM_INTERVAL_MS
# apart, no reader: the runner's cost, not the hub's; the sample taken when the most
# requests were in flight, by /metrics), and MEM_AFTER_S seconds after the runners
# keep no session any more (every one ended and forgotten).
# Per active session = (RSS with them - idle) / requests in flight then.
#
# Environment: B [build], ROOT [this tree: whose binaries and deploy/dstream-stack run],
# DB [a SQLite file in the work directory], ENGINE [sqlite; pg], RUNNERS [1], STEPS ["100 200 400 800 1200
# 1600"; "" for none], STEPS_ALL [0], DELTAS [150], INTERVAL_MS [20], P99_MS [50],
# MEM_SESSIONS [0; e.g. 2000], MEM_DELTAS [30], MEM_INTERVAL_MS [1000], MEM_AFTER_S [5], MEM_FORGET_S [60],
# BENCH_KEEP [0], MEM_STATS [0; 1: glibc's malloc_stats of the first runner after the
# memory run, through gdb, in the raw output], RUNNER_WRAP [none: a command the first runner runs under, e.g.
# "heaptrack -o FILE": its figures are then the wrapper's].
# Every phase is bounded in count and time; every process started is stopped by PID.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${ROOT:-$here}
B=${B:-build}
bin=$here/$B
RUNNERS=${RUNNERS:-1}
STEPS=${STEPS-"100 200 400 800 1200 1600"}
STEPS_ALL=${STEPS_ALL:-0}
DELTAS=${DELTAS:-150}
INTERVAL_MS=${INTERVAL_MS:-20}
P99_MS=${P99_MS:-50}
MEM_SESSIONS=${MEM_SESSIONS:-0}
MEM_DELTAS=${MEM_DELTAS:-30}
MEM_INTERVAL_MS=${MEM_INTERVAL_MS:-1000}
MEM_AFTER_S=${MEM_AFTER_S:-5}
MEM_FORGET_S=${MEM_FORGET_S:-60}

BENCH_NAME=sessions
# shellcheck source=bench/lib/common.sh
. "$here/bench/lib/common.sh"

stack=$work/stack
pg_dir=
prov_pids=()
runner_pids=()
reader_pid=
cleanup() {
    [ -n "$reader_pid" ] && stop_pid "$reader_pid"
    local p
    # A runner under RUNNER_WRAP is the wrapper's child: stopped first, by PID.
    for p in "${runner_pids[@]}"; do
        for c in $(family "$p" | tail -n +2); do stop_pid "$c"; done
        stop_pid "$p"
    done
    [ -d "$stack" ] && "$ROOT/deploy/dstream-stack" stop "$stack" >/dev/null 2>&1
    for p in "${prov_pids[@]}"; do stop_pid "$p"; done
    [ -n "$pg_dir" ] && { "$here/tests/pg.sh" stop "$pg_dir/c" >/dev/null 2>&1; rm -rf "$pg_dir"; }
    work_done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tool_build sse-client -lpthread
tool_build stamp-provider
[ -x "$ROOT/$B/dstream-runner" ] || die "build $ROOT/$B first"
[ "$RUNNERS" -ge 1 ] && [ "$RUNNERS" -le 8 ] || die "RUNNERS: 1 to 8"

# Two providers: "steps" for the sessions sustained, "mem" for the memory run.
provider() {   # NAME DELTAS INTERVAL_MS: start one, its URL in $work/NAME.url
    "$bin/bench/stamp-provider" --port-file "$work/$1.port" --deltas "$2" --interval-ms "$3" --seconds 3600 \
        </dev/null >"$work/$1.out" 2>&1 &
    prov_pids+=($!)
    local i
    for ((i = 0; i < 100; i++)); do [ -s "$work/$1.port" ] && break; sleep 0.05; done
    [ -s "$work/$1.port" ] || die "stamp-provider $1 did not start"
    echo "http://127.0.0.1:$(cat "$work/$1.port")" >"$work/$1.url"
}
provider steps "$DELTAS" "$INTERVAL_MS"
provider mem "$MEM_DELTAS" "$MEM_INTERVAL_MS"
printf '{"providers": {"steps": {"kind": "anthropic", "baseUrl": "%s", "keyEnv": "ANTHROPIC_API_KEY", "allowPrivate": ["127.0.0.1"]}, "mem": {"kind": "anthropic", "baseUrl": "%s", "keyEnv": "ANTHROPIC_API_KEY", "allowPrivate": ["127.0.0.1"]}}}\n' \
    "$(cat "$work/steps.url")" "$(cat "$work/mem.url")" >"$work/providers.json"

if [ -z "${DB:-}" ] && [ "${ENGINE:-sqlite}" = pg ]; then
    pg_dir=$("$here/tests/pg.sh" tmp dssess)
    "$here/tests/pg.sh" start "$pg_dir/c" >/dev/null || die "no PostgreSQL cluster"
    DB=$("$here/tests/pg.sh" db "$pg_dir/c" sessions)
fi
export DSTREAM_DB=${DB:-$stack/dstream.db} DSTREAM_PROVIDERS=$work/providers.json ANTHROPIC_API_KEY=sk-bench
mkdir -p "$stack"
u=$(DSTREAM_RUNNER=0 DSTREAM_AUTH=off B=$B "$ROOT/deploy/dstream-stack" start "$stack" 2>"$work/start.err") ||
    { cat "$work/start.err" >&2; die "the stack did not start"; }
url[s]=$u
# The runners (RUNNER_WRAP: a command to run the first under, e.g. "heaptrack -o FILE";
# its figures are then the wrapper's).
for ((r = 1; r <= RUNNERS; r++)); do
    wrap=; [ "$r" = 1 ] && wrap=${RUNNER_WRAP:-}
    # shellcheck disable=SC2086
    DSTREAM_RUNNER_ID=bench-r$r $wrap "$ROOT/$B/dstream-runner" \
        </dev/null >>"$stack/logs/runner-$r.log" 2>&1 &
    runner_pids+=($!)
done
port=${u##*:}
sleep 1
for p in "${runner_pids[@]}"; do kill -0 "$p" 2>/dev/null || die "a runner exited: $(tail -3 "$stack"/logs/runner*.log)"; done

api() { curl -fsS -o /dev/null -H 'Content-Type: application/json' "$@"; }
api -X PUT "$u/v1/agents/bench" --data-binary '{"provider": "steps", "model": "bench-model"}'
api -X PUT "$u/v1/agents/membench" --data-binary '{"provider": "mem", "model": "bench-model"}'

# curl's configuration for one transfer per url line on stdin (the lines after it
# belong to it): each its own request, "next" between them.
curl_cfg() {
    awk '/^url = / && NR > 1 { print "next" }
         /^url = / { print; print "header = \"Content-Type: application/json\""; print "output = \"/dev/null\""
                     print "silent"; print "show-error"; print "fail"; next } { print }'
}

# POST a user message to every path of FILE (one a line), 16 at a time, through one curl.
post_all() {   # FILE
    local path
    while read -r path; do
        printf 'url = "%s%s"\ndata-binary = "{\\"content\\": \\"Go.\\"}"\n' "$u" "$path"
    done <"$1" | curl_cfg >"$work/post.cfg"
    curl -s --parallel --parallel-max 16 -K "$work/post.cfg" 2>"$work/curl.err" ||
        say "some of $(wc -l <"$1") POSTs failed: $(sort "$work/curl.err" | uniq -c | head -3)"
}

# N sessions of AGENT, ids PREFIX-1..N: their events' paths in FILE.
make_sessions() {   # AGENT PREFIX N FILE
    local i
    : >"$4"
    for ((i = 1; i <= $3; i++)); do
        printf 'url = "%s/v1/sessions"\ndata-binary = "{\\"agent\\": \\"%s\\", \\"id\\": \\"%s-%d\\"}"\n' \
            "$u" "$1" "$2" "$i"
        echo "/v1/sessions/$2-$i/events" >>"$4"
    done | curl_cfg >"$work/create.cfg"
    curl -s --parallel --parallel-max 16 -K "$work/create.cfg" 2>"$work/curl.err" ||
        say "some session creations failed: $(sort "$work/curl.err" | uniq -c | head -3)"
}

metrics() { curl -fsS "$u/metrics" 2>/dev/null || true; }
# Provider requests made so far by each runner: "bench-r1 N" lines.
requests_by_runner() {
    metrics | awk '/^dstream_runner_requests_total\{/ { match($0, /runner="[^"]*"/); r = substr($0, RSTART + 8, RLENGTH - 9); print r, $NF }' | sort
}
known() { metrics | awk '/^dstream_runner_sessions\{/ && /state="known"/ { s += $NF } END { print s + 0 }'; }
in_flight() { metrics | awk '/^dstream_runner_requests_in_flight\{/ { s += $NF } END { print s + 0 }'; }
# Until no request is in flight (at most S seconds).
wait_idle() {   # S
    local deadline=$((SECONDS + $1))
    sleep 1.5   # the runners publish their figures once a second
    while [ $SECONDS -lt $deadline ] && [ "$(in_flight)" != 0 ]; do sleep 1; done
}
# The CPU ticks of PostgreSQL's processes (its own cluster: ENGINE=pg without DB),
# or 0: the postmaster's children and what its exited children spent.
db_ticks() {
    [ -n "$pg_dir" ] && [ -s "$pg_dir/c/data/postmaster.pid" ] || { echo 0; return; }
    local pm st
    pm=$(head -1 "$pg_dir/c/data/postmaster.pid")
    mapfile -t procs < <(family "$pm")
    st=$(cat "/proc/$pm/stat"); st=${st##*) }
    set -- $st
    echo $(($(ticks "${procs[@]}") + ${14} + ${15}))
}
pct_core() { awk -v t="$1" -v hz="$hz" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? 100 * t / hz / s : 0) }'; }   # TICKS SECONDS
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }   # PID FIELD
heap_kib() { awk '/\[heap\]/ {h = 1; next} /^[0-9a-f]+-/ {h = 0} h && /^Rss:/ {s += $2} END {print s + 0}' "/proc/$1/smaps"; }
mem_line() {   # PID: "rss_kib anon_kib heap_kib"
    echo "$(status_kib "$1" VmRSS) $(status_kib "$1" RssAnon) $(heap_kib "$1")"
}

echo "Stack: $ROOT ($B), database ${DB:+PostgreSQL }${DB:-SQLite}, $RUNNERS runner process(es), $(machine)."
echo

# ---- memory ------------------------------------------------------------------------------
if [ "$MEM_SESSIONS" -gt 0 ]; then
    r1=${runner_pids[0]}
    say "memory: $MEM_SESSIONS sessions"
    read -r idle_rss idle_anon idle_heap <<<"$(mem_line "$r1")"
    make_sessions membench mem "$MEM_SESSIONS" "$work/mem.paths"
    wait_idle 60
    read -r made_rss made_anon made_heap <<<"$(mem_line "$r1")"
    sed 's|/events$|/messages|' "$work/mem.paths" >"$work/mem.msgs"
    post_all "$work/mem.msgs" &
    poster=$!
    # Every half second: requests in flight (the runners' figures, published once a
    # second) and the first runner's memory. The peak: the highest RSS among the
    # samples with the most requests in flight.
    peak_n=0 peak_rss=0 peak_anon=0 peak_heap=0 max_rss=0
    deadline=$((SECONDS + MEM_DELTAS * MEM_INTERVAL_MS / 1000 + 120))
    seen=0 t_mem=$SECONDS
    while [ $SECONDS -lt $deadline ]; do
        sleep 0.5
        n=$(in_flight)
        read -r rss anon heap <<<"$(mem_line "$r1")"
        echo "memory t=$((SECONDS - t_mem)) in_flight=$n rss_kib=$rss anon_kib=$anon heap_kib=$heap" >>"$raw"
        [ "$rss" -gt "$max_rss" ] && max_rss=$rss
        if [ "$n" -gt "$peak_n" ] || { [ "$n" = "$peak_n" ] && [ "$rss" -gt "$peak_rss" ]; }; then
            peak_n=$n peak_rss=$rss peak_anon=$anon peak_heap=$heap
        fi
        [ "$n" -gt 0 ] && seen=1
        [ "$seen" = 1 ] && [ "$n" = 0 ] && ! kill -0 "$poster" 2>/dev/null && break
    done
    wait "$poster" || true
    # Until the runners keep no session (each finished one is forgotten by its last
    # drive: on a loaded machine seconds after its request ended), at most MEM_FORGET_S.
    for _ in $(seq $((MEM_FORGET_S * 2))); do [ "$(known)" = 0 ] && break; sleep 0.5; done
    sleep "$MEM_AFTER_S"
    read -r after_rss after_anon after_heap <<<"$(mem_line "$r1")"
    after_known=$(known)
    if [ "${MEM_STATS:-0}" = 1 ]; then     # glibc's own account (malloc_stats, to the runner's log)
        gdb -p "$r1" -batch -ex 'call (void) malloc_stats()' >/dev/null 2>&1 || say "gdb could not attach"
        sleep 0.5
        tail -n 12 "$stack/logs/runner-1.log" | sed 's/^/malloc_stats: /' >>"$raw"
    fi
    echo "### Runner memory, $MEM_SESSIONS sessions streaming ($MEM_DELTAS deltas ${MEM_INTERVAL_MS} ms apart)"
    echo
    echo "| moment | requests in flight | VmRSS KiB | RssAnon KiB | [heap] KiB |"
    echo "|---|---:|---:|---:|---:|"
    echo "| idle | 0 | $idle_rss | $idle_anon | $idle_heap |"
    echo "| $MEM_SESSIONS sessions made, none active | 0 | $made_rss | $made_anon | $made_heap |"
    echo "| most requests in flight | $peak_n | $peak_rss | $peak_anon | $peak_heap |"
    echo "| ${MEM_AFTER_S} s after the last was forgotten ($after_known still kept by the runners) | 0 | $after_rss | $after_anon | $after_heap |"
    echo
    awk -v i="$idle_rss" -v p="$peak_rss" -v n="$peak_n" -v a="$after_rss" -v m="$max_rss" 'BEGIN {
        printf "Per active session: %.1f KiB of RSS ((%d - %d) / %d); highest RSS seen %d KiB; after: %.0f %% of idle.\n",
            n ? (p - i) / n : 0, p, i, n, m, 100 * a / i }'
    echo
fi

# ---- sessions sustained ------------------------------------------------------------------
echo "### Sessions sustained: $DELTAS deltas ${INTERVAL_MS} ms apart each, bar: every delta delivered and p99 < $P99_MS ms"
echo
echo "| sessions | deltas/s | delivered | p50 ms | p90 ms | p99 ms | max ms | runners' CPU us/delta | CPU % of a core by runner | requests by runner | reader % | provider % | pool+nginx % | PostgreSQL % | load avg | bar |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---|---|"
best=0
for n in $STEPS; do
    say "step $n"
    make_sessions bench "s$n" "$n" "$work/paths"
    timeout $((DELTAS * INTERVAL_MS / 1000 + 180)) "$bin/bench/sse-client" tokens --port "$port" \
        --paths "$work/paths" --expect "$DELTAS" --seconds $((DELTAS * INTERVAL_MS / 1000 + 60)) \
        >"$work/out" 2>"$work/err" &
    reader_pid=$!
    for _ in $(seq 1200); do grep -qs '^mode=tokens ready=' "$work/out" && break; sleep 0.05; done
    mapfile -t spids < <(stack_pids "$stack")
    req0=$(requests_by_runner)
    c0=(); for p in "${runner_pids[@]}"; do c0+=("$(ticks "$p")"); done
    pv0=$(ticks "${prov_pids[0]}"); st0=$(ticks "${spids[@]}"); db0=$(db_ticks)
    t0=$(date +%s.%N)
    sed 's|/events$|/messages|' "$work/paths" >"$work/msgs"
    post_all "$work/msgs"
    wait "$reader_pid" || true
    t1=$(date +%s.%N)
    c1=(); for p in "${runner_pids[@]}"; do c1+=("$(ticks "$p")"); done
    pv1=$(ticks "${prov_pids[0]}"); st1=$(ticks "${spids[@]}"); db1=$(db_ticks)
    reader_pid=
    la=$(loadavg)
    wait_idle 60
    req1=$(requests_by_runner)
    line=$(grep '^mode=tokens readers' "$work/out" || echo "mode=tokens failed")
    echo "step $n: $line" >>"$raw"
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')
    cpu_tot=0; shares=""
    for i in "${!runner_pids[@]}"; do
        d=$((c1[i] - c0[i])); cpu_tot=$((cpu_tot + d))
        shares+="${shares:+ / }$(pct_core "$d" "$secs")"
    done
    split=$(join -a 2 -e 0 -o 2.1,1.2,2.2 <(echo "$req0") <(echo "$req1") 2>/dev/null |
        awk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), $1, $3 - $2 }')
    del=$(kv "$line" delivered); exp=$(kv "$line" expected)
    p99=$(kv "$line" p99_us)
    ok=no
    [ -n "$del" ] && [ "$del" = "$exp" ] && [ "${p99:--1}" -ge 0 ] && [ "$p99" -lt $((P99_MS * 1000)) ] && ok=yes
    printf '| %d | %d | %s/%s | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
        "$n" $((n * 1000 / INTERVAL_MS)) "${del:-0}" "${exp:-0}" \
        "$(awk -v v="$(kv "$line" p50_us)" 'BEGIN {print v / 1000}')" \
        "$(awk -v v="$(kv "$line" p90_us)" 'BEGIN {print v / 1000}')" \
        "$(awk -v v="${p99:-0}" 'BEGIN {print v / 1000}')" \
        "$(awk -v v="$(kv "$line" max_us)" 'BEGIN {print v / 1000}')" \
        "$(awk -v c="$cpu_tot" -v hz="$hz" -v d="${del:-0}" 'BEGIN {print d ? c * 1e6 / hz / d : 0}')" \
        "$shares" "${split:-?}" "$(awk -v c="$(kv "$line" cpu_ms)" -v s="$secs" 'BEGIN {printf "%.0f", (s > 0 ? c / 10 / s : 0)}')" "$(pct_core $((pv1 - pv0)) "$secs")" \
        "$(pct_core $((st1 - st0)) "$secs")" "$([ -n "$pg_dir" ] && pct_core $((db1 - db0)) "$secs" || echo -)" "$la" "$ok"
    if [ "$ok" = yes ]; then
        [ "$n" -gt "$best" ] && best=$n
    elif [ "$STEPS_ALL" != 1 ]; then
        break
    fi
done
echo
echo "Largest count meeting the bar: $best sessions ($RUNNERS runner process(es))."
echo
raw_details
