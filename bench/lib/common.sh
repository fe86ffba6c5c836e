# bench/lib/common.sh: what bench/compare.sh, bench/seam.sh and bench/engines.sh share,
# sourced by each.
# shellcheck shell=bash
#
# The sourcing script sets here (the repository: its bench/lib and $B/dstream are
# used), bin ($here/$B) and BENCH_NAME (its name, the prefix of its messages) before
# sourcing this, and BENCH_SECONDS, BENCH_CONNS and CATCHUP_MSGS before measuring;
# it removes $work when done. Sourcing makes:
#   work    a temporary directory, dstream-$BENCH_NAME.XXXXXX
#   vals    $work/vals: a file of numbers per KEY.SYSTEM, a line a run (put)
#   raw     $work/raw.txt: the load generators' own lines, for the report
#   url     an associative array, SYSTEM -> base URL of the system under test
# Every process a function here starts is stopped by PID (stop_pid) or by the
# dstream-stack that started it (stack_stop); every load is bounded in time.

work=$(mktemp -d "${TMPDIR:-/tmp}/dstream-${BENCH_NAME:-bench}.XXXXXX")
vals=$work/vals
raw=$work/raw.txt
mkdir -p "$vals"
: > "$raw"
hz=$(getconf CLK_TCK)

declare -A url=()          # system -> base URL
declare -A stack_dir=()    # system -> directory of the dstream-stack serving it
declare -A stack_root=()   # system -> the tree whose deploy/dstream-stack started it

say() { echo "${BENCH_NAME:-bench}: $*" >&2; }
die() { say "$*"; exit 1; }

has() { [[ " ${FIGURES:-} " == *" $1 "* ]]; }   # FIGURE: is it in FIGURES, to be measured?

# The systems of run R in the order they are measured: A B in odd runs, B A in even
# ones, so that a drift of the machine weighs on both alike.
run_order() {   # R A B
    if [ $(($1 % 2)) = 1 ]; then echo "$2 $3"; else echo "$3 $2"; fi
}

work_done() {   # for the EXIT trap: remove $work, or keep it (BENCH_KEEP=1) and say where
    if [ "${BENCH_KEEP:-0}" = 1 ]; then say "work directory kept: $work"; else rm -rf "$work"; fi
}

# bench/src/NAME.c built into $bin/bench/NAME when it is missing or older than its source.
tool_build() {   # NAME [LIBS...]
    local name=$1; shift
    mkdir -p "$bin/bench"
    [ -x "$bin/bench/$name" ] && [ "$bin/bench/$name" -nt "$here/bench/src/$name.c" ] ||
        cc -O2 -Wall -Wextra -Werror -o "$bin/bench/$name" "$here/bench/src/$name.c" "$@"
}

# ---- processes ---------------------------------------------------------------------------

stop_pid() {   # PID: TERM, then KILL after 5 s
    local pid=$1 i
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
}

free_port() { "$bin/dstream" free-port 127.0.0.1; }
port_of() { local u=${url[$1]}; echo "${u##*:}"; }

wait_http() {   # URL, seconds: until it answers 200
    local u=$1 deadline=$((SECONDS + $2))
    while [ $SECONDS -lt "$deadline" ]; do
        curl -fsS -o /dev/null --max-time 1 "$u" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# Wait up to SECONDS for the 1-minute load average to fall below 1.
wait_quiet() {   # SECONDS
    local until=$((SECONDS + $1))
    while [ $SECONDS -lt $until ] && awk '{exit !($1 >= 1)}' /proc/loadavg; do sleep 2; done
}

family() {   # PID: it and its children
    local parent=$1 pid rest f
    echo "$parent"
    for f in /proc/[0-9]*/stat; do
        { read -r pid rest < "$f"; } 2>/dev/null || continue
        rest=${rest##*) }
        set -- $rest
        [ "$2" = "$parent" ] && echo "$pid"
    done
    return 0
}

pool_pids() { family "$(cat "$1/fcgi.pid")"; }   # DIR of a dstream-stack: the pool's processes

# DIR of a dstream-stack: the pool's processes and nginx's (master and workers).
stack_pids() { pool_pids "$1"; family "$(cat "$1/nginx.master.pid")"; }

ticks() {   # PIDS...: summed utime+stime
    local p s=0 st
    for p in "$@"; do
        st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        st=${st##*) }
        set -- $st
        s=$((s + ${12} + ${13}))
    done
    echo "$s"
}

# nginx + the pool of ROOT's build (its deploy/dstream-stack, $B), no runner, auth off
# (loopback only: no proxy hop), serving SYSTEM from DIR.
stack_start() {   # SYSTEM ROOT DIR [extra env...]
    local sys=$1 root=$2 dir=$3; shift 3
    stack_root[$sys]=$root
    stack_dir[$sys]=$dir
    url[$sys]=$(env DSTREAM_RUNNER=0 DSTREAM_AUTH=off "$@" "$root/deploy/dstream-stack" start "$dir") ||
        die "dstream-stack of $root did not start (logs in $dir/logs)"
    # The pool answers before every thread has opened its connection (thousands take
    # seconds): wait until it has been idle for two seconds in a row.
    local quiet=0 a b deadline=$((SECONDS + 120)) pids
    mapfile -t pids < <(pool_pids "$dir")
    a=$(ticks "${pids[@]}")
    while [ $quiet -lt 2 ] && [ $SECONDS -lt $deadline ]; do
        sleep 1
        b=$(ticks "${pids[@]}")
        if [ $((b - a)) -lt $((hz / 5)) ]; then quiet=$((quiet + 1)); else quiet=0; fi
        a=$b
    done
}

stack_stop() {   # SYSTEM: stop what stack_start started (by the PIDs the stack recorded)
    local sys=$1
    [ -n "${stack_dir[$sys]:-}" ] || return 0
    "${stack_root[$sys]}/deploy/dstream-stack" stop "${stack_dir[$sys]}" >/dev/null 2>&1 || true
    stack_dir[$sys]=""
}

# ---- measurements ------------------------------------------------------------------------

put() { echo "$3" >> "$vals/$1.$2"; }                  # KEY SYSTEM VALUE
kv() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k {print $2; exit}'; }

create() {   # SYSTEM PATH
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
        "${url[$1]}$2")
    case $code in 200|201|204) ;; *) die "$1: PUT $2 answered $code" ;; esac
}

run_wrk() {   # SYSTEM KEY LUA URL [env...]: one wrk run, its numbers filed under KEY
    local sys=$1 key=$2 lua=$3 u=$4 out; shift 4
    out=$(env "$@" timeout $((BENCH_SECONDS + 30)) wrk -t1 -c"$BENCH_CONNS" -d"${BENCH_SECONDS}s" \
        --timeout 10s -s "$here/bench/lib/$lua" "$u" 2>&1 | grep '^wrk ' || true)
    echo "$key $sys: $out" >> "$raw"
    [ -n "$out" ] || { say "$key $sys: wrk printed nothing"; return 0; }
    put "$key.rps" "$sys" "$(kv "$out" rps)"
    put "$key.p50" "$sys" "$(kv "$out" p50_us)"
    put "$key.p99" "$sys" "$(kv "$out" p99_us)"
    put "$key.err" "$sys" "$(kv "$out" errors)"
    put "$key.n" "$sys" "$(kv "$out" requests)"
}

# The appends' streams on SYSTEM: /v1/stream/bench, and bench-m-0 .. bench-m-99.
appends_prepare() {   # SYSTEM
    local sys=$1 i urls=()
    create "$sys" /v1/stream/bench
    for ((i = 0; i < 100; i++)); do urls+=("${url[$sys]}/v1/stream/bench-m-$i"); done
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "${urls[@]}"
}

# wrk POST of a 200-byte message (bench/lib/wrk-post.lua) to one stream...
append1_run() { run_wrk "$1" append1 wrk-post.lua "${url[$1]}" BENCH_PATH=/v1/stream/bench; }
# ... and spread over 100.
append100_run() {
    run_wrk "$1" append100 wrk-post.lua "${url[$1]}" BENCH_PATH=/v1/stream/bench-m BENCH_STREAMS=100
}

# The catch-up stream on SYSTEM: /v1/stream/catchup holds CATCHUP_MSGS times the
# appends' 200-byte message (one array POST: one message per element), checked to come
# back whole in one response (catchup.whole 1, and catchup.bytes); the body is kept in
# $work/catchup-SYSTEM.out.
catchup_prepare() {   # SYSTEM
    local sys=$1 body=$work/catchup-body.json n bytes hdr
    [ -s "$body" ] || node -e '
        const m = {type:"bench.event",source:"wrk",seq:12345,at:"2026-01-01T00:00:00.000Z",
                   data:{user:"u-000042",action:"append",tags:["a","b","c"],note:"x".repeat(43)}};
        process.stdout.write(JSON.stringify(Array.from({length: +process.argv[1]}, () => m)));
    ' "$CATCHUP_MSGS" > "$body"
    create "$sys" /v1/stream/catchup
    curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' \
        --data-binary "@$body" "${url[$sys]}/v1/stream/catchup"
    hdr=$(curl -fsS -D - -o "$work/catchup-$sys.out" "${url[$sys]}/v1/stream/catchup?offset=-1")
    n=$(jq length "$work/catchup-$sys.out")
    bytes=$(stat -c %s "$work/catchup-$sys.out")
    # Whole stream in one response: every message, and the tail reached.
    if [ "$n" != "$CATCHUP_MSGS" ] || ! grep -qi '^stream-up-to-date: *true' <<<"$hdr"; then
        say "catch-up $sys: $n messages, up-to-date: $(grep -i up-to-date <<<"$hdr" || echo no)"
        put catchup.whole "$sys" 0
    else
        put catchup.whole "$sys" 1
    fi
    put catchup.bytes "$sys" "$bytes"
    echo "catchup $sys: messages=$n bytes=$bytes" >> "$raw"
}

# wrk GET of the whole catch-up stream.
catchup_run() { run_wrk "$1" catchup wrk-get.lua "${url[$1]}/v1/stream/catchup?offset=-1"; }

# FIGURE's run on SYSTEM (FIGURE_run), and the CPU its stack (pool and nginx) spent per
# request, in us (FIGURE.cpu): less sensitive to the other load on the machine than the
# rate; with DBTICKS (a command printing a database server's ticks so far), the
# server's too (FIGURE.dbcpu).
with_cpu() {   # FIGURE SYSTEM [DBTICKS]
    local fig=$1 sys=$2 db=${3:-} pids c0 c1 d0=0 d1=0 n
    mapfile -t pids < <(stack_pids "${stack_dir[$sys]}")
    c0=$(ticks "${pids[@]}")
    [ -z "$db" ] || d0=$($db)
    "${fig}_run" "$sys"
    c1=$(ticks "${pids[@]}")
    [ -z "$db" ] || d1=$($db)
    n=$(tail -1 "$vals/$fig.n.$sys" 2>/dev/null || echo 0)
    put "$fig.cpu" "$sys" "$(per_request $((c1 - c0)) "${n:-0}")"
    [ -z "$db" ] || put "$fig.dbcpu" "$sys" "$(per_request $((d1 - d0)) "${n:-0}")"
}

# The appends' and catch-up's figures on each SYSTEM of ORDER (those of FIGURES):
# every system's streams prepared first, then each figure measured on one system
# after the other, with its CPU (with_cpu; a system's DBTICKS from dbticks[SYSTEM]).
declare -A dbticks=()
wrk_figures() {   # ORDER
    local fig sys
    for fig in appends catchup; do
        has "$fig" || continue
        for sys in $1; do "${fig}_prepare" "$sys"; done
    done
    for fig in append1 append100 catchup; do
        case $fig in append*) has appends ;; *) has catchup ;; esac || continue
        for sys in $1; do with_cpu "$fig" "$sys" "${dbticks[$sys]:-}"; done
    done
}

per_request() { awk -v c="$1" -v hz="$hz" -v n="$2" 'BEGIN {printf "%.1f", n ? c * 1e6 / hz / n : 0}'; }   # TICKS N: us each

# bench/src/sse-client.c fanout: N SSE readers of SYSTEM on PATH while a writer appends a
# timestamped message every FANOUT_INTERVAL_MS ms for BENCH_SECONDS, to WRITER's server
# (default SYSTEM: another host on the same database measures the cross-host wake-up);
# filed under KEY (.pct, .all: every message delivered, .p50, .p99, .ap50: the append's
# own latency). PATH must exist.
fanout_run() {   # SYSTEM N KEY PATH [WRITER]
    local sys=$1 n=$2 key=$3 path=$4 writer=${5:-$1} out exp del
    out=$(timeout $((BENCH_SECONDS + 120)) "$bin/bench/sse-client" fanout \
        --port "$(port_of "$sys")" --write-port "$(port_of "$writer")" --path "$path" --readers "$n" \
        --interval-ms "$FANOUT_INTERVAL_MS" --seconds "$BENCH_SECONDS" --connect-s 60 \
        --linger-s 2 || true)
    echo "$key $sys: $out" >> "$raw"
    [ -n "$out" ] || { say "$key $sys: no result"; return 0; }
    exp=$(kv "$out" expected); del=$(kv "$out" delivered)
    put "$key.pct" "$sys" "$(awk -v d="$del" -v e="$exp" 'BEGIN {printf "%.2f", e ? 100 * d / e : 0}')"
    put "$key.all" "$sys" "$([ "$del" = "$exp" ] && [ "$exp" -gt 0 ] && echo 1 || echo 0)"
    put "$key.p50" "$sys" "$(kv "$out" p50_us)"
    put "$key.p99" "$sys" "$(kv "$out" p99_us)"
    put "$key.ap50" "$sys" "$(kv "$out" append_p50_us)"
}

# bench/token-latency.sh on ROOT's tree with N sessions, DELTAS deltas INTERVAL_MS apart
# (ENV: more of its settings, DB=... for its database), filed under tokensN (.p50 and
# .p99 in ms, .cpu: the runner's us per delta, .all: every delta delivered).
tokens_run() {   # SYSTEM N ROOT [ENV...]
    local sys=$1 n=$2 tree=$3 out row; shift 3
    out=$(env ROOT="$tree" B="$B" SESSIONS="$n" RUNS=1 DELTAS="$DELTAS" INTERVAL_MS="$INTERVAL_MS" "$@" \
        timeout $((DELTAS * INTERVAL_MS / 1000 + 240)) "$here/bench/token-latency.sh" 2>&1 || true)
    # | sessions | deltas/s | delivered/expected | p50 | p90 | p99 | max | CPU ms | CPU us/delta |
    #   pool + nginx us/delta | PostgreSQL us/delta ("-": not measured) |
    row=$(awk -F'|' -v n="$n" '$2 + 0 == n && $4 ~ /\// {print; exit}' <<<"$out")
    echo "tokens$n $sys: ${row:-$(tail -3 <<<"$out" | tr '\n' ' ')}" >> "$raw"
    [ -n "$row" ] || { say "tokens $n $sys: token-latency.sh printed no row"; return 0; }
    awk -F'|' '{ split($4, d, "/"); gsub(/ /, "", $5); gsub(/ /, "", $7); gsub(/ /, "", $9)
        gsub(/ /, "", $11); gsub(/ /, "", $12)
        print d[1] + 0, d[2] + 0, $5, $7, $9, ($11 == "" ? "-" : $11), ($12 == "" ? "-" : $12) }' <<<"$row" | {
        local del exp p50 p99 cpu stack dbc
        read -r del exp p50 p99 cpu stack dbc
        put "tokens$n.p50" "$sys" "$p50"
        put "tokens$n.p99" "$sys" "$p99"
        put "tokens$n.cpu" "$sys" "$(awk -v c="$cpu" -v d="$del" 'BEGIN {printf "%.2f", d ? c * 1000 / d : 0}')"
        [ "$stack" != - ] && put "tokens$n.stack" "$sys" "$stack"
        [ "$dbc" != - ] && put "tokens$n.dbcpu" "$sys" "$dbc"
        put "tokens$n.all" "$sys" "$([ "$del" = "$exp" ] && [ "$exp" -gt 0 ] && echo 1 || echo 0)"
    }
}

# ---- report ------------------------------------------------------------------------------

median() {
    sort -g | awk '{v[NR] = $1} END { if (!NR) { print ""; exit }
        print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# "median (min-max)" of KEY for SYSTEM, scaled by DIV and printed with FMT.
cell() {   # KEY SYSTEM DIV FMT
    local f="$vals/$1.$2"
    [ -s "$f" ] || { echo "n/a"; return; }
    sort -g "$f" | awk -v d="$3" -v fmt="$4" '{v[NR] = $1 / d} END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        if (NR == 1) printf fmt "\n", m;
        else printf fmt " (" fmt "-" fmt ")\n", m, v[1], v[NR] }'
}

med() { local f="$vals/$1.$2"; [ -s "$f" ] && median < "$f" || echo ""; }

all_of() {   # KEY SYSTEM: "every run" when every run's value is 1
    local f="$vals/$1.$2"
    [ -s "$f" ] || { echo "n/a"; return; }
    if grep -qv '^1$' "$f"; then echo "not every run"; else echo "every run"; fi
}

ratio() {   # KEY A B: median(A) / median(B)
    local a b
    a=$(med "$1" "$2"); b=$(med "$1" "$3")
    [ -n "$a" ] && [ -n "$b" ] || { echo "n/a"; return; }
    awk -v a="$a" -v b="$b" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2fx\n", a / b }'
}

# The disk's own write + fdatasync latency in DIR (bench/src/fsync-latency.c, 300
# samples 10 ms apart): the floor under every figure that waits for a durable commit.
fsync_floor() {   # DIR
    tool_build fsync-latency
    echo "$("$bin/bench/fsync-latency" "$1" 300 10 | sed 's/^fdatasync: //') (8 KiB write + fdatasync every 10 ms)"
}

machine() {   # one line: CPUs, model, memory, kernel
    echo "$(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), kernel $(uname -r)"
}

need_tools() {   # the load generators' tools
    command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"
    command -v node >/dev/null || die "node is not installed (make deps)"
    command -v jq >/dev/null || die "jq is not installed (make deps)"
}

# wrk's errors (socket errors + non-2xx) of each figure, summed over runs: "KEY SYSTEM N; ".
wrk_errors() {   # SYSTEM...
    local k s
    for k in append1 append100 catchup; do
        for s in "$@"; do
            [ -s "$vals/$k.err.$s" ] || continue
            printf '%s %s %s; ' "$k" "$s" "$(awk '{s += $1} END {print s}' "$vals/$k.err.$s")"
        done
    done
}

raw_details() {   # the raw lines, folded away at the end of a report
    echo "<details><summary>Raw output</summary>"
    echo
    echo '```'
    cat "$raw"
    echo '```'
    echo
    echo "</details>"
}
