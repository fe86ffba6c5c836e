# shellcheck shell=bash disable=SC2154 # status_code, body, DS_HDRS: set by req (helpers.bash)
# Helpers for the files that run several complete stacks (nginx + pool + runner
# each, own ports and directories) on PostgreSQL clusters of their own: 70-hosts,
# 73-failover, 73-hosts-conformance.
#
#     load hosts-helpers
#     setup_file() {
#         hosts_tmp ds70 || return 1           # HOSTS_TMP, short: sockets live in it
#         HOSTS_URI=$("$DS_ROOT/tests/pg.sh" start "$HOSTS_TMP/pg") || return 1
#         hosts_up 1 DSTREAM_DB="$HOSTS_URI" ... || return 1
#     }
#     teardown_file() { hosts_down; "$DS_ROOT/tests/pg.sh" stop "$HOSTS_TMP/pg"; hosts_rm; }
#
# Host N lives in $HOSTS_TMP/hN (dstream-stack's directory; its URL in hN/url); the
# stacks are stopped by the PIDs their start recorded. The writers, read-back and
# tally below are the ones every file of several hosts judges its appends with:
# each acknowledged append is in the stream once, at the offset it was
# acknowledged with. HOSTS_KEEP=1 keeps $HOSTS_TMP (logs, clusters) for a look after
# a failure.

load runner-helpers

# ---- hosts --------------------------------------------------------------------------

# hosts_need_pg: the PostgreSQL server binaries and node are installed.
hosts_need_pg() {
    command -v node >/dev/null || { echo "node is not installed (make deps)" >&2; return 1; }
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "no PostgreSQL server (make deps)" >&2; return 1; }
}

# hosts_tmp PREFIX: make HOSTS_TMP (tests/pg.sh tmp: short, since the clusters'
# sockets live in it, and one the postgres user may pass through).
hosts_tmp() {
    HOSTS_TMP=$("$DS_ROOT/tests/pg.sh" tmp "$1") || return 1
    export HOSTS_TMP
}

# hosts_up N NAME=VALUE...: start host N's stack in $HOSTS_TMP/hN with the settings
# given (B is added); its output in hN.start, shown when it fails.
hosts_up() {
    local dir=$HOSTS_TMP/h$1
    shift
    mkdir -p "$dir"
    if ! env "$@" B="$DS_B" "$DS_STACK" start "$dir" >"$dir.start" 2>&1; then
        echo "host ${dir##*/h} did not start:" >&2
        cat "$dir.start" >&2
        return 1
    fi
}

# hosts_down: stop every host's stack (for teardown_file).
hosts_down() {
    local d
    for d in "${HOSTS_TMP:-/nonexistent}"/h[0-9]*; do
        [ -d "$d" ] && "$DS_STACK" stop "$d" >/dev/null 2>&1
    done
    return 0
}

# hosts_rm: remove $HOSTS_TMP unless HOSTS_KEEP is set (for teardown_file).
hosts_rm() {
    [ -n "${HOSTS_TMP:-}" ] && [ -z "${HOSTS_KEEP:-}" ] && rm -rf "$HOSTS_TMP"
    return 0
}

hosts_url() { cat "$HOSTS_TMP/h$1/url"; }

# hosts_same_pids N...: the processes each host's stack started (pool, runner, nginx)
# all still run: nothing was restarted.
hosts_same_pids() {
    local h f
    for h in "$@"; do
        for f in fcgi.pid runner.pid nginx.master.pid; do
            kill -0 "$(cat "$HOSTS_TMP/h$h/$f")" 2>/dev/null || { echo "host $h: $f is gone" >&2; return 1; }
        done
    done
}

# ---- writers ------------------------------------------------------------------------

# writer URL OUT TAG COUNT STOPFILE: append "TAG-i;" for i = 1 .. COUNT (or until
# STOPFILE exists, or 120 s), one request each; "i status next-offset nanoseconds"
# per attempt to OUT; each refusal's status, Retry-After and body to OUT.refused.
writer() {
    local url=$1 out=$2 tag=$3 n=$4 stop=$5 i code next end=$((SECONDS + 120))
    : >"$out"
    for i in $(seq 1 "$n"); do
        [ -e "$stop" ] && break
        [ $SECONDS -lt $end ] || break
        code=$(curl -sS --max-time 10 -o "$out.body" -D "$out.h" -w '%{http_code}' -X POST \
            -H 'Content-Type: text/plain' --data-binary "$tag-$i;" "$url" 2>/dev/null) || code=000
        next=$(tr -d '\r' <"$out.h" | sed -n 's/^[Ss]tream-[Nn]ext-[Oo]ffset: *//p')
        echo "$i $code ${next:--} $(date +%s%N)" >>"$out"
        if [ "$code" != 204 ]; then
            # Every refusal is kept for the test to judge (status, Retry-After, body).
            echo "$i $code $(tr -d '\r' <"$out.h" | sed -n 's/^[Rr]etry-[Aa]fter: */retry-after=/p') $(head -c 200 "$out.body")" >>"$out.refused"
            sleep 0.05
        fi
    done
}

# writers_start N COUNT URL_FUNCTION: start writers 1 .. N, writer k appending to the
# URL that "URL_FUNCTION k" prints, into $T/wk (its tag wk), until $T/stop exists;
# their PIDs in W_PIDS.
writers_start() {
    local k
    W_PIDS=()
    for k in $(seq 1 "$1"); do
        spawn "$T/w$k.err" writer "$("$3" "$k")" "$T/w$k" "w$k" "$2" "$T/stop"
        W_PIDS+=("$LAST_PID")
    done
}

# writers_stop: tell the writers to stop and wait (20 s at most each) until they have.
writers_stop() {
    local p
    touch "$T/stop"
    for p in "${W_PIDS[@]}"; do ds_poll 20 eval "! kill -0 $p 2>/dev/null" || return 1; done
}

# acks: how many appends the writers of $T/w1 .. $T/w9 had acknowledged.
acks() { cat "$T"/w? 2>/dev/null | awk '$2 == 204' | wc -l; }
_acks_ge() { [ "$(acks)" -ge "$1" ]; }

# writers_mark N: note how far each of writers 1 .. N has got (in $T/marks).
writers_mark() {
    local k
    for k in $(seq 1 "$1"); do wc -l <"$T/w$k"; done >"$T/marks"
}

# _each_acked_after N: every writer 1 .. N has an acknowledgement since writers_mark.
_each_acked_after() {
    local k m
    for k in $(seq 1 "$1"); do
        m=$(sed -n "${k}p" "$T/marks")
        tail -n +$((m + 1)) "$T/w$k" | awk '$2 == 204 { f = 1 } END { exit !f }' || return 1
    done
}

# writers_back_at N: when (nanoseconds) the last of writers 1 .. N had its first
# acknowledgement since writers_mark.
writers_back_at() {
    local k first back=0
    for k in $(seq 1 "$1"); do
        first=$(tail -n +$(($(sed -n "${k}p" "$T/marks") + 1)) "$T/w$k" | awk '$2 == 204 { print $4; exit }')
        [ "${first:-0}" -gt "$back" ] && back=$first
    done
    echo "$back"
}

# writers_refused: how many refusals the writers met; writers_refused_bad: how many
# of them were not a 503 with Retry-After (printed to stderr, the first ten).
writers_refused() { cat "$T"/w*.refused 2>/dev/null | wc -l; }
writers_refused_bad() {
    cat "$T"/w*.refused 2>/dev/null | grep -v ' 503 retry-after=' | head >&2
    cat "$T"/w*.refused 2>/dev/null | grep -vc ' 503 retry-after=' || true
}

# ---- reading back -------------------------------------------------------------------

# read_all URL FILE: the stream's whole content (every page) into FILE.
read_all() {
    local off=-1 i
    : >"$2"
    for i in $(seq 1000); do
        req GET "$1?offset=$off"
        [ "$status_code" = 200 ] || { echo "read $1: $status_code $body" >&2; return 1; }
        cat "$DS_BODY" >>"$2"
        header Stream-Up-To-Date >/dev/null && return 0
        off=$(header Stream-Next-Offset)
    done
    return 1
}

# tally FINAL WRITER_FILES...: "acked lost duplicated misplaced" of the writers'
# acknowledged appends in FINAL (the stream's content, read back), the writer's tag
# being its file's name: lost, not in it; duplicated, in it more than once;
# misplaced, the content up to the append's acknowledged offset (its byte position)
# does not end with it, or two acknowledgements gave one offset. One pass of awk:
# each offending append is named on stderr.
tally() {
    local final=$1
    shift
    LC_ALL=C awk -v final="$final" '
        BEGIN {
            RS = ";"; pos = 0
            while ((getline tok < final) > 0) {
                pos += length(tok) + 1
                if (tok == "") continue
                count[tok]++; at[tok, pos] = 1
            }
            close(final); RS = "\n"
        }
        FNR == 1 { tag = FILENAME; sub(/.*\//, "", tag) }
        $2 != 204 { next }
        {
            tok = tag "-" $1; a++
            if (!(tok in count)) { lost++; print "lost: " tok > "/dev/stderr" }
            else if (count[tok] > 1) { dup++; print "duplicated: " tok > "/dev/stderr" }
            if ($3 == "-") next
            p = $3; sub(/.*_/, "", p); p += 0
            if (!((tok, p) in at)) { bad++; print "misplaced: " tok " at " $3 > "/dev/stderr" }
            if (offs[$3]++ == 1) { bad++; print "offset acknowledged twice: " $3 > "/dev/stderr" }
        }
        END { printf "%d %d %d %d\n", a, lost, dup, bad }' "$@"
}

# sse_text FILE: the data of an SSE capture's data events, concatenated.
sse_text() { [ -e "$1" ] && rn_sse_data "$1" data | tr -d '\n'; }

# probe_refused URL PATH [appends]: an append to PATH on URL, and a read, are refused
# with 503, Retry-After and a JSON error (no primary to write to, or no database);
# "appends": only the append (a fenced primary still answers reads).
probe_refused() {
    req POST "$1$2" -H 'Content-Type: text/plain' --data-binary "probe;"
    [ "$status_code" = 503 ] || { echo "$1 append: $status_code $body" >&2; return 1; }
    header Retry-After >/dev/null || { echo "$1: no Retry-After: $(cat "$DS_HDRS") $body" >&2; return 1; }
    assert_json_error || return 1
    [ "${3:-}" != appends ] || return 0
    req GET "$1$2?offset=-1"
    [ "$status_code" = 503 ] || { echo "$1 read: $status_code $body" >&2; return 1; }
    header Retry-After >/dev/null || { echo "$1: no Retry-After on a read" >&2; return 1; }
    assert_json_error
}
