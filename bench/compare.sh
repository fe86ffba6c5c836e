#!/usr/bin/env bash
# bench/compare.sh: dstream side by side with the Durable Streams reference server and
# with a bare FastCGI responder, in one run, on loopback; prints markdown.
#
#   B=build bench/compare.sh > out.md          (after `make`; about 13 minutes)
#   BENCH_SECONDS=3 BENCH_RUNS=1 bench/compare.sh   (a quick look)
#
# The three systems, started afresh for every run:
#   dstream   deploy/dstream-stack start DIR with DSTREAM_RUNNER=0: nginx + the pool
#             (DSTREAM_PROCS x DSTREAM_THREADS, defaults 1 x 32, each process's hub
#             keeping up to DSTREAM_LIVE_MAX [16384] waiting readers), synchronous=FULL
#   peer      @durable-streams/server (version pinned in bench/peer/package.json),
#             file-backed (fdatasync on every append), bench/peer/server.mjs
#   fcgi      bench/src/fcgi-hello.c: FCGX_Accept_r threads answering at once, with the
#             pool's process/thread layout, behind the very nginx.conf dstream-stack
#             wrote (copied, only the directory and port changed): the ceiling for any
#             FastCGI request on this machine
#   nchan     nginx's in-memory pub/sub module (Debian's libnginx-mod-nchan), nchan_pubsub
#             on the same /v1/stream/ paths with as many nginx workers as dstream's
#             nginx: the nginx-native limit for fan-out (not durable; fan-out only)
#
# The figures (each run measures every system back to back; cells are the median of
# BENCH_RUNS runs with min-max; ratios divide medians of the same runs):
#   1. appends: wrk -t1 -c BENCH_CONNS -d BENCH_SECONDS, POST of a 200-byte JSON
#      message (bench/lib/wrk-post.lua) to one stream, then spread over 100 streams
#   2. catch-up: wrk GET ?offset=-1 of a 1,000-message stream; each system is checked
#      to return the whole stream in one response (fcgi: as many bytes, ?bytes=N)
#   3. fan-out: bench/src/sse-client.c, N SSE readers on one stream while a writer
#      appends a timestamped message every 10 ms for BENCH_SECONDS; dstream, the peer
#      and nchan, in alternating order from run to run
#   4. idle live streams: N SSE readers held; RSS of the pool's processes (the peer's
#      node process) and their CPU over BENCH_IDLE_S
# and once per invocation: if BENCH_BIG (procs x threads) is set, 10,000 held by such a
# pool with DSTREAM_LIVE_MAX=0, a thread for each (what the hub saves), build/bench/wake-latency
# (commit-to-wake across processes) and bench/idle-cpu.sh (idle responder CPU); the
# header gives the disk's own write + fdatasync latency (bench/src/fsync-latency.c),
# the floor under every figure that waits for a durable commit.
#
# Environment: B [build], BENCH_SECONDS [10], BENCH_RUNS [3], BENCH_CONNS [50],
# BENCH_FANOUT ["100 1000"], BENCH_HOLD ["1000 10000"], BENCH_IDLE_S [5],
# BENCH_BIG [empty: skipped; 4x2560 fits the usual 20,000 descriptors: a thread needs 3],
# BENCH_WAKE [1], BENCH_IDLE_CPU [1], BENCH_HOLD_RUNS [1: the idle-stream figures
# (memory, nearly the same every run) only in the first runs], BENCH_FIGURES
# ["appends catchup fanout hold": the per-run figures to measure],
# BENCH_KEEP [0: delete the work directory; 1: keep it and say where],
# BENCH_QUIET_S [120: wait up to this long for the 1-minute load average to fall
# below 1 before starting; the load before and after is printed either way].
# Every load is bounded in time; every process it starts it stops by PID.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
export B
bin=$here/$B
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_RUNS=${BENCH_RUNS:-3}
BENCH_CONNS=${BENCH_CONNS:-50}
BENCH_FANOUT=${BENCH_FANOUT:-"100 1000"}
BENCH_HOLD=${BENCH_HOLD:-"1000 10000"}
BENCH_IDLE_S=${BENCH_IDLE_S:-5}
BENCH_BIG=${BENCH_BIG-}
BENCH_WAKE=${BENCH_WAKE:-1}
BENCH_IDLE_CPU=${BENCH_IDLE_CPU:-1}
BENCH_KEEP=${BENCH_KEEP:-0}
BENCH_HOLD_RUNS=${BENCH_HOLD_RUNS:-1}
BENCH_FIGURES=${BENCH_FIGURES:-"appends catchup fanout hold"}
BENCH_QUIET_S=${BENCH_QUIET_S:-120}
CATCHUP_MSGS=1000
FANOUT_INTERVAL_MS=10
SYSTEMS=(dstream peer fcgi)

BENCH_NAME=compare
# shellcheck source=bench/lib/common.sh
. "$here/bench/lib/common.sh"

# ---- processes we start (stopped by PID, never by name) ----------------------------------

dstream_dir="" fcgi_dir="" peer_pid="" hello_pid="" hello_nginx="" client_pid="" nchan_nginx=""
NCHAN_SO=/usr/lib/nginx/modules/ngx_nchan_module.so

stop_all() {
    stop_pid "$client_pid"; client_pid=""
    stack_stop dstream
    dstream_dir=""
    stop_pid "$hello_nginx"; hello_nginx=""
    stop_pid "$hello_pid"; hello_pid=""
    stop_pid "$peer_pid"; peer_pid=""
    stop_pid "$nchan_nginx"; nchan_nginx=""
}

cleanup() {
    stop_all
    work_done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_dstream() {   # DIR [extra env...]
    dstream_dir=$1; shift
    stack_start dstream "$here" "$dstream_dir" "$@"
}

# nginx + fcgi-hello, configured by the nginx.conf dstream-stack wrote for dstream.
start_fcgi() {
    local dir=$1 port
    fcgi_dir=$dir
    mkdir -p "$dir/logs" "$dir/tmp"
    port=$(free_port)
    "$bin/bench/fcgi-hello" --listen "$dir/fcgi.sock" </dev/null >>"$dir/logs/hello.log" 2>&1 &
    hello_pid=$!
    local deadline=$((SECONDS + 10))
    while [ ! -S "$dir/fcgi.sock" ]; do
        [ $SECONDS -lt $deadline ] || die "fcgi-hello did not start: $(cat "$dir/logs/hello.log")"
        sleep 0.02
    done
    sed -e "s|$dstream_dir|$dir|g" \
        -e "s|listen 127.0.0.1:$(port_of dstream) |listen 127.0.0.1:$port |" \
        "$dstream_dir/nginx.conf" > "$dir/nginx.conf"
    grep -q "listen 127.0.0.1:$port " "$dir/nginx.conf" || die "could not rewrite nginx.conf"
    "$(command -v nginx || echo /usr/sbin/nginx)" -p "$dir" -c "$dir/nginx.conf" \
        -e "$dir/logs/nginx-error.log" -g 'daemon off;' </dev/null >>"$dir/logs/nginx-error.log" 2>&1 &
    hello_nginx=$!
    url[fcgi]="http://127.0.0.1:$port"
    wait_http "${url[fcgi]}/v1/hello" 15 || die "fcgi-hello behind nginx is not answering"
}

start_peer() {
    local dir=$1 deadline
    mkdir -p "$dir"
    (cd "$here/bench/peer" && exec node server.mjs "$dir/data" 127.0.0.1 "$(free_port)") \
        </dev/null >"$dir/peer.log" 2>&1 &
    peer_pid=$!
    deadline=$((SECONDS + 20))
    until grep -q '^listening ' "$dir/peer.log" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || die "peer did not start: $(tail -5 "$dir/peer.log")"
        kill -0 "$peer_pid" 2>/dev/null || die "peer exited: $(tail -5 "$dir/peer.log")"
        sleep 0.05
    done
    url[peer]=$(awk '/^listening / {print $2; exit}' "$dir/peer.log")
}

# nginx with nchan_pubsub on /v1/stream/ (a channel per path), as many workers as
# the nginx in front of dstream.
start_nchan() {
    local dir=$1 port workers
    [ -e "$NCHAN_SO" ] || { say "no nchan ($NCHAN_SO): make bench installs libnginx-mod-nchan"; return 0; }
    mkdir -p "$dir/logs" "$dir/tmp"
    port=$(free_port)
    workers=$(awk '$1 == "worker_processes" {sub(/;/, "", $2); print $2; exit}' "$dstream_dir/nginx.conf")
    cat > "$dir/nginx.conf" <<CONF
load_module $NCHAN_SO;
$([ "$(id -u)" = 0 ] && echo "user root;")
worker_processes ${workers:-2};
worker_rlimit_nofile $(ulimit -Hn);
pid $dir/nginx.pid;
error_log $dir/logs/nginx-error.log warn;
events { worker_connections 32768; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    server {
        listen 127.0.0.1:$port reuseport;
        location = /v1/health { return 200 '{"status":"ok"}'; }
        location /v1/stream/ {
            nchan_pubsub;
            nchan_channel_id \$uri;
            nchan_subscriber_first_message newest;
        }
    }
}
CONF
    "$(command -v nginx || echo /usr/sbin/nginx)" -p "$dir" -c "$dir/nginx.conf" \
        -e "$dir/logs/nginx-error.log" -g 'daemon off;' </dev/null >>"$dir/logs/nginx-error.log" 2>&1 &
    nchan_nginx=$!
    url[nchan]="http://127.0.0.1:$port"
    wait_http "${url[nchan]}/v1/health" 15 || die "nginx with nchan is not answering"
}

start_all() {
    local d=$1
    start_dstream "$d/dstream"
    start_fcgi "$d/fcgi"
    start_peer "$d/peer"
    start_nchan "$d/nchan"
}

# ---- measurements ------------------------------------------------------------------------

bench_appends() {
    local sys
    for sys in dstream peer; do appends_prepare "$sys"; done
    for sys in "${SYSTEMS[@]}"; do append1_run "$sys"; done
    for sys in "${SYSTEMS[@]}"; do append100_run "$sys"; done
}

bench_catchup() {
    local sys bytes
    for sys in dstream peer; do catchup_prepare "$sys"; done
    for sys in dstream peer; do catchup_run "$sys"; done
    bytes=$(stat -c %s "$work/catchup-dstream.out")
    run_wrk fcgi catchup wrk-get.lua "${url[fcgi]}/v1/stream/catchup?bytes=$bytes"
}

FANOUT_RUN=0
bench_fanout() {
    local n sys order
    # Alternate the order from run to run, so that a drift of the machine weighs on
    # every system alike.
    FANOUT_RUN=$((FANOUT_RUN + 1))
    order="dstream peer"
    [ -n "${url[nchan]:-}" ] && order="dstream nchan peer"
    [ $((FANOUT_RUN % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$order" | tac | tr '\n' ' ')
    for n in $BENCH_FANOUT; do
        for sys in $order; do
            # nchan makes a channel on its first publish or subscriber.
            [ "$sys" = nchan ] || create "$sys" "/v1/stream/fan-$n"
            fanout_run "$sys" "$n" "fanout$n" "/v1/stream/fan-$n"
        done
    done
}

# The processes of a system: "pids" for CPU and RSS.
sys_pids() {
    case $1 in
    dstream) pool_pids "$dstream_dir" ;;
    peer) echo "$peer_pid" ;;
    esac
}

rss_kb() {   # PIDS...: summed VmRSS
    local p s=0 v
    for p in "$@"; do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
        s=$((s + ${v:-0}))
    done
    echo "$s"
}

# Hold N idle SSE readers on SYSTEM; file held, RSS and CPU under KEY.
hold_one() {   # SYSTEM N KEY
    local sys=$1 n=$2 key=$3 out line deadline pids rss0 rss t0 t1 c0 c1
    mapfile -t pids < <(sys_pids "$sys")
    rss0=$(rss_kb "${pids[@]}")
    create "$sys" "/v1/stream/idle-$n"
    out="$work/hold-$sys-$n.txt"
    rm -f "$out"        # else the check below may read the last run's before the truncation
    "$bin/bench/sse-client" hold --port "$(port_of "$sys")" --path "/v1/stream/idle-$n" \
        --readers "$n" --connect-s 90 --hold-s $((BENCH_IDLE_S + 60)) >"$out" 2>&1 &
    client_pid=$!
    deadline=$((SECONDS + 120))
    until grep -q '^mode=hold' "$out" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || { say "hold $sys $n: no answer in time"; break; }
        kill -0 "$client_pid" 2>/dev/null || { say "hold $sys $n: client exited: $(cat "$out")"; break; }
        sleep 0.1
    done
    line=$(grep '^mode=hold' "$out" || true)
    sleep 1                                 # let the last threads settle into poll()
    mapfile -t pids < <(sys_pids "$sys")
    rss=$(rss_kb "${pids[@]}")
    c0=$(ticks "${pids[@]}"); t0=$(date +%s%N)
    sleep "$BENCH_IDLE_S"
    c1=$(ticks "${pids[@]}"); t1=$(date +%s%N)
    stop_pid "$client_pid"; client_pid=""
    echo "$key $sys: $line rss_before_kb=$rss0 rss_kb=$rss procs=${#pids[@]} $(tail -1 "$out")" >> "$raw"
    local held
    held=$(kv "$line" held); held=${held:-0}
    put "$key.held" "$sys" "$held"
    put "$key.rss0" "$sys" "$(awk -v r="$rss0" 'BEGIN {printf "%.1f", r / 1024}')"
    put "$key.rss" "$sys" "$(awk -v r="$rss" 'BEGIN {printf "%.1f", r / 1024}')"
    # What a held stream costs: the increase over the idle server, and the whole
    # server divided by the streams it holds (the pool must be sized for them).
    put "$key.perstream" "$sys" "$(awk -v r="$rss" -v r0="$rss0" -v h="$held" \
        'BEGIN {printf "%.1f", h ? (r - r0) / h : 0}')"
    put "$key.pertotal" "$sys" "$(awk -v r="$rss" -v h="$held" 'BEGIN {printf "%.1f", h ? r / h : 0}')"
    put "$key.cpu" "$sys" "$(awk -v c=$((c1 - c0)) -v hz="$hz" -v dt=$((t1 - t0)) \
        'BEGIN {printf "%.2f", 100 * c / hz / (dt / 1e9)}')"
    # Let the server notice the hang-ups before the next measurement; then what the
    # load left behind: the RSS once the readers are gone, against before them.
    sleep 1
    mapfile -t pids < <(sys_pids "$sys")
    put "$key.rss_after" "$sys" "$(awk -v r="$(rss_kb "${pids[@]}")" 'BEGIN {printf "%.1f", r / 1024}')"
}

bench_hold() {
    local n sys
    for n in $BENCH_HOLD; do
        for sys in dstream peer; do hold_one "$sys" "$n" "hold$n"; done
    done
}

bench_big_pool() {   # once: a pool with a thread for each of 10,000 readers
    local d=$work/big n=10000
    [ -n "$BENCH_BIG" ] || return 0
    start_dstream "$d/dstream" DSTREAM_PROCS="${BENCH_BIG%x*}" DSTREAM_THREADS="${BENCH_BIG#*x}" \
        DSTREAM_LIVE_MAX=0
    hold_one dstream "$n" "big$n"
    stop_all
}

bench_wake() {
    local i out
    [ "$BENCH_WAKE" = 1 ] || return 0
    [ -x "$bin/bench/wake-latency" ] || make -s -C "$here" "$B/bench/wake-latency" >&2 || return 0
    for ((i = 1; i <= BENCH_RUNS; i++)); do
        out=$("$bin/bench/wake-latency" "$work/wake-$i.db" --mode inotify --count 500 \
            --interval-ms 5 2>&1 || true)
        printf 'wake run %d:\n%s\n' "$i" "$out" >> "$raw"
        put wake.p50 dstream "$(awk '$1 == "commit_to_wake_us" {for (i = 2; i <= NF; i++) if ($i ~ /^p50=/) print substr($i, 5)}' <<<"$out")"
        put wake.p99 dstream "$(awk '$1 == "commit_to_wake_us" {for (i = 2; i <= NF; i++) if ($i ~ /^p99=/) print substr($i, 5)}' <<<"$out")"
        local cpu
        cpu=$(tr ' ' '\n' <<<"$out" | awk -F= '$1 == "reader_cpu_pct" {print $2; exit}')
        [ -n "$cpu" ] && put wake.cpu dstream "$cpu"
    done
}

bench_idle_cpu() {
    local out
    [ "$BENCH_IDLE_CPU" = 1 ] && [ -x "$here/bench/idle-cpu.sh" ] || return 0
    out=$(DSTREAM_RUNNER=0 IDLE_S="$BENCH_IDLE_S" READERS=100 timeout 600 "$here/bench/idle-cpu.sh" 2>&1 || true)
    printf 'idle-cpu.sh:\n%s\n' "$out" >> "$raw"
    # Rows: | wake | readers | pid | CPU % (ticks) | CPU % (schedstat) | runs/s |; the
    # busiest worker of the inotify (default) configuration.
    awk -F'|' '$2 ~ /^ *inotify *$/ && $3+0 == 0 {print $6+0}' <<<"$out" | sort -g | tail -1 |
        while read -r v; do put idle0.cpu dstream "$v"; done
    awk -F'|' '$2 ~ /^ *inotify *$/ && $3+0 == 100 {print $6+0}' <<<"$out" | sort -g | tail -1 |
        while read -r v; do put idle100.cpu dstream "$v"; done
}

# ---- report ------------------------------------------------------------------------------

row() {   # LABEL KEY DIV FMT
    printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$(cell "$2" dstream "$3" "$4")" \
        "$(cell "$2" peer "$3" "$4")" "$(cell "$2" fcgi "$3" "$4")" \
        "$(ratio "$2" dstream peer)" "$(ratio "$2" dstream fcgi)"
}

verdict() { if [ "$1" = 1 ]; then echo "**holds**"; else echo "**fails**"; fi; }
cmp() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN { if (a == "" || b == "") { print 0; exit }
    print (op == ">=" ? a >= b : op == "<=" ? a <= b : a < b) ? 1 : 0 }'; }
all_ones() { local f="$vals/$1.$2"; [ -s "$f" ] && ! grep -qv '^1$' "$f" && echo 1 || echo 0; }

report_targets() {
    local a d p f c1 c2
    echo "## Targets"
    echo
    d=$(med append1.rps dstream); p=$(med append1.rps peer); f=$(med append1.rps fcgi)
    c1=$(cmp "$d" ">=" "$(awk -v f="$f" 'BEGIN {print 0.7 * f}')")
    c2=$(cmp "$d" ">=" "$(awk -v p="$p" 'BEGIN {print 15 * p}')")
    echo "- durable appends at c$BENCH_CONNS (one stream) >= 0.7x the bare-fcgi ceiling: $(ratio append1.rps dstream fcgi) $(verdict "$c1"); >= 15x the peer: $(ratio append1.rps dstream peer) $(verdict "$c2")"
    c1=$(cmp "$(med catchup.rps dstream)" ">=" "$(awk -v p="$(med catchup.rps peer)" 'BEGIN {print 10 * p}')")
    echo "- catch-up of $CATCHUP_MSGS messages >= 10x the peer: $(ratio catchup.rps dstream peer) $(verdict "$c1")"
    a=$(all_ones fanout1000.all dstream)
    c1=$(cmp "$(med fanout1000.p99 dstream)" "<=" 20000)
    echo "- 1,000 SSE readers, every message delivered in every run: $(verdict "$a") ($(cell fanout1000.pct dstream 1 %.2f) %); p99 <= 20 ms: $(cell fanout1000.p99 dstream 1000 %.1f) ms $(verdict "$c1")"
    c1=$(cmp "$(med fanout100.p99 dstream)" "<=" 5000)
    echo "- 100 SSE readers p99 <= 5 ms: $(cell fanout100.p99 dstream 1000 %.1f) ms $(verdict "$c1")"
    local n
    for n in $BENCH_FANOUT; do
        [ -s "$vals/fanout$n.p99.nchan" ] || continue
        c1=$(cmp "$(med "fanout$n.p99" dstream)" "<=" "$(awk -v x="$(med "fanout$n.p99" nchan)" 'BEGIN {print 1.25 * x}')")
        echo "- $n SSE readers p99 <= 1.25x nchan's: $(ratio "fanout$n.p99" dstream nchan) $(verdict "$c1"), every message delivered: $(verdict "$(all_ones "fanout$n.all" dstream)")"
    done
    # The live-read targets (as ratios to the bare responder behind the same nginx).
    f=$(med append1.rps fcgi)
    c1=$(cmp "$d" ">=" "$(awk -v f="$f" 'BEGIN {print 0.85 * f}')")
    c2=$(cmp "$(med append100.rps dstream)" ">=" "$(awk -v f="$(med append100.rps fcgi)" 'BEGIN {print 0.7 * f}')")
    echo "- appends >= 0.85x the ceiling on one stream: $(ratio append1.rps dstream fcgi) $(verdict "$c1"); >= 0.7x over 100 streams: $(ratio append100.rps dstream fcgi) $(verdict "$c2")"
    c1=$(cmp "$(med catchup.rps dstream)" ">=" "$(awk -v f="$(med catchup.rps fcgi)" 'BEGIN {print 0.8 * f}')")
    echo "- catch-up >= 0.8x the ceiling: $(ratio catchup.rps dstream fcgi) $(verdict "$c1")"
    for n in $BENCH_HOLD; do
        [ -s "$vals/hold$n.rss_after.dstream" ] || continue
        c1=$(cmp "$(med "hold$n.rss_after" dstream)" "<=" "$(awk -v r="$(med "hold$n.rss0" dstream)" 'BEGIN {print 1.2 * r}')")
        echo "- after $n readers leave, the pool's RSS within 20 % of its level before them: $(cell "hold$n.rss0" dstream 1 %.1f) MiB before, $(cell "hold$n.rss_after" dstream 1 %.1f) MiB after $(verdict "$c1")"
    done
    c1=$(cmp "$(med hold10000.held dstream)" ">=" 10000)
    c2=$(cmp "$(med hold10000.rss dstream)" "<" 1024)
    echo "- 10,000 idle SSE streams held by the default configuration: $(cell hold10000.held dstream 1 %.0f) held $(verdict "$c1"), pool RSS $(cell hold10000.rss dstream 1 %.0f) MiB $(verdict "$c2") (< 1 GiB)"
    if [ -s "$vals/big10000.held.dstream" ]; then
        echo "  - with pool $BENCH_BIG: $(cell big10000.held dstream 1 %.0f) held, pool RSS $(cell big10000.rss dstream 1 %.0f) MiB, $(cell big10000.pertotal dstream 1 %.1f) KiB per held stream"
    fi
    c1=$(cmp "$(med wake.p50 dstream)" "<=" 1000)
    c2=$(cmp "$(med idle0.cpu dstream)" "<=" 1)
    echo "- commit-to-wake p50 <= 1 ms: $(cell wake.p50 dstream 1000 %.3f) ms $(verdict "$c1"); idle responder <= 1% of a core: $(cell idle0.cpu dstream 1 %.3f) % $(verdict "$c2")"
    echo
}

# Fan-out against nchan: dstream's delivery latency as a multiple of nchan's.
report_nchan() {
    [ -s "$vals/fanout${BENCH_FANOUT%% *}.p99.nchan" ] || return 0
    local n
    echo "### Fan-out: dstream and nchan"
    echo
    echo "| figure | dstream | nchan | dstream / nchan |"
    echo "|---|---:|---:|---:|"
    for n in $BENCH_FANOUT; do
        for k in pct p50 p99; do
            local label div fmt
            case $k in
            pct) label="% of messages delivered"; div=1; fmt=%.2f ;;
            *) label="delivery $k ms"; div=1000; fmt=%.2f ;;
            esac
            printf '| %s readers: %s | %s | %s | %s |\n' "$n" "$label" "$(cell "fanout$n.$k" dstream $div $fmt)" \
                "$(cell "fanout$n.$k" nchan $div $fmt)" "$(ratio "fanout$n.$k" dstream nchan)"
        done
    done
    echo
}

report() {
    echo "## dstream, the reference server and the FastCGI ceiling"
    echo
    echo "Cells: median of $BENCH_RUNS runs (min-max); idle streams: $BENCH_HOLD_RUNS run(s). Ratios: dstream's median divided by the"
    echo "other's (for latencies and memory, lower is better). wrk -t1 -c$BENCH_CONNS -d${BENCH_SECONDS}s;"
    echo "fan-out: one append every $FANOUT_INTERVAL_MS ms for ${BENCH_SECONDS} s; idle CPU over ${BENCH_IDLE_S} s."
    echo "fcgi is a bare FastCGI responder with the same layout behind the same nginx config."
    echo
    echo "| figure | dstream | peer | bare fcgi | dstream / peer | dstream / fcgi |"
    echo "|---|---:|---:|---:|---:|---:|"
    row "appends/s, 1 stream, c$BENCH_CONNS" append1.rps 1 %.0f
    row "append latency p50 ms, 1 stream" append1.p50 1000 %.2f
    row "append latency p99 ms, 1 stream" append1.p99 1000 %.2f
    row "appends/s, 100 streams, c$BENCH_CONNS" append100.rps 1 %.0f
    row "append latency p50 ms, 100 streams" append100.p50 1000 %.2f
    row "append latency p99 ms, 100 streams" append100.p99 1000 %.2f
    row "catch-up reads/s, $CATCHUP_MSGS messages (KiB: $(cell catchup.bytes dstream 1024 %.0f))" catchup.rps 1 %.0f
    row "catch-up latency p50 ms" catchup.p50 1000 %.2f
    row "catch-up latency p99 ms" catchup.p99 1000 %.2f
    local n
    for n in $BENCH_FANOUT; do
        row "fan-out $n readers: % of messages delivered" "fanout$n.pct" 1 %.2f
        row "fan-out $n readers: delivery p50 ms" "fanout$n.p50" 1000 %.2f
        row "fan-out $n readers: delivery p99 ms" "fanout$n.p99" 1000 %.2f
    done
    for n in $BENCH_HOLD; do
        row "idle SSE: of $n held" "hold$n.held" 1 %.0f
        row "idle SSE $n: server RSS MiB before the readers" "hold$n.rss0" 1 %.1f
        row "idle SSE $n: server RSS MiB" "hold$n.rss" 1 %.1f
        row "idle SSE $n: RSS KiB per held stream, increase" "hold$n.perstream" 1 %.1f
        row "idle SSE $n: RSS KiB per held stream, total / held" "hold$n.pertotal" 1 %.1f
        row "idle SSE $n: server CPU % of a core" "hold$n.cpu" 1 %.2f
    done
    if [ -s "$vals/big10000.held.dstream" ]; then
        row "pool $BENCH_BIG: of 10000 held" big10000.held 1 %.0f
        row "pool $BENCH_BIG: pool RSS MiB before the readers" big10000.rss0 1 %.1f
        row "pool $BENCH_BIG: pool RSS MiB" big10000.rss 1 %.1f
        row "pool $BENCH_BIG: RSS KiB per held stream, total / held" big10000.pertotal 1 %.1f
        row "pool $BENCH_BIG: pool CPU % (10000 idle)" big10000.cpu 1 %.2f
    fi
    row "commit-to-wake p50 ms (wake-latency, inotify)" wake.p50 1000 %.3f
    row "commit-to-wake p99 ms" wake.p99 1000 %.3f
    [ -s "$vals/wake.cpu.dstream" ] && row "waiting process CPU % (wake-latency)" wake.cpu 1 %.2f
    row "idle responder CPU % (idle-cpu.sh, busiest worker, no reader)" idle0.cpu 1 %.3f
    row "idle responder CPU % (idle-cpu.sh, 100 idle SSE readers)" idle100.cpu 1 %.3f
    echo
    echo "Errors (wrk socket errors + non-2xx, summed over runs):" \
        "$(wrk_errors "${SYSTEMS[@]}")"
    echo
    report_nchan
    report_targets
    raw_details
}

# ---- main --------------------------------------------------------------------------------

main() {
    [ -x "$bin/dstream-fcgi" ] && [ -x "$bin/dstream" ] || die "build first: make"
    need_tools
    tool_build fcgi-hello -lfcgi -lpthread
    tool_build sse-client -lpthread
    # npm install --no-save, not npm ci: the lock pins every version, but npm 11's ci
    # wants the optional packages of other platforms listed in it (msgpackr-extract's
    # darwin and win32 builds), which no npm writes on Linux; install takes the lock
    # as it is with npm 9 (Debian's) and 11 alike and leaves it unchanged.
    [ -d "$here/bench/peer/node_modules/@durable-streams/server" ] ||
        (cd "$here/bench/peer" && npm install --no-save --no-audit --no-fund >&2)
    # 10,000 readers need descriptors: the client's and nginx's (worker_rlimit_nofile
    # is the hard limit); the pool raises its own soft limit.
    ulimit -Sn "$(ulimit -Hn)"

    local peer_version sqlite_version
    wait_quiet "$BENCH_QUIET_S"
    peer_version=$(node -p 'require(process.argv[1]).version' \
        "$here/bench/peer/node_modules/@durable-streams/server/package.json")
    sqlite_version=$(sqlite3 --version 2>/dev/null | awk '{print $1}')
    echo "# dstream compared, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(machine)"
    echo "- dstream commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown), build $B, pool ${DSTREAM_PROCS:-1} x ${DSTREAM_THREADS:-32}, hubs of ${DSTREAM_LIVE_MAX:-16384}, synchronous=${DSTREAM_SYNC:-full}"
    echo "- $(nginx -v 2>&1 | sed 's/^nginx version: //'), nchan $(dpkg-query -W -f='${Version}' libnginx-mod-nchan 2>/dev/null || echo none), SQLite $sqlite_version, node $(node --version), @durable-streams/server $peer_version, $(wrk --version 2>&1 | head -1 | awk '{print $1, $2}')"
    echo "- command: \`B=$B BENCH_SECONDS=$BENCH_SECONDS BENCH_RUNS=$BENCH_RUNS BENCH_CONNS=$BENCH_CONNS BENCH_HOLD_RUNS=$BENCH_HOLD_RUNS BENCH_FIGURES=\"$BENCH_FIGURES\" BENCH_BIG=$BENCH_BIG bench/compare.sh\`"
    echo "- descriptor limit (hard): $(ulimit -Hn)"
    echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    # The floor under every figure that waits for a durable commit (dstream's appends
    # and deliveries; nchan and the bare responder commit nothing): the disk's own
    # write + fdatasync, where the databases live, at the fan-out writer's pace.
    echo "- disk where the databases are: $(fsync_floor "$work")"
    echo
    local r fig t0=$SECONDS
    for ((r = 1; r <= BENCH_RUNS; r++)); do
        say "run $r of $BENCH_RUNS"
        start_all "$work/run$r"
        echo "run $r: dstream ${url[dstream]} peer ${url[peer]} fcgi ${url[fcgi]}" >> "$raw"
        for fig in $BENCH_FIGURES; do
            [ "$fig" = hold ] && [ "$r" -gt "$BENCH_HOLD_RUNS" ] && continue
            say "$fig ($((SECONDS - t0)) s)"
            "bench_$fig"
        done
        stop_all
        rm -rf "$work/run$r"
    done
    say "pool of $BENCH_BIG ($((SECONDS - t0)) s)"; bench_big_pool
    say "commit-to-wake ($((SECONDS - t0)) s)"; bench_wake
    say "idle CPU ($((SECONDS - t0)) s)"; bench_idle_cpu
    say "done in $((SECONDS - t0)) s"
    report
    echo
    echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg); took $((SECONDS - t0)) s."
}

main "$@"
