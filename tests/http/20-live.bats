#!/usr/bin/env bats
# Live reads through nginx + the pool: SSE is not buffered anywhere on the way, a
# client that leaves is dropped at once, a commit by another process wakes live
# readers, 1,000 long-polls on one stream all get one append, readers beyond what
# the hubs hold are served by responder threads, nginx refuses what the pool cannot
# hold at once, and the long-poll and SSE end-of-stream rules.
#
# The file's stack has the default pool (1 process x 32 threads, its hub holding up
# to 16384 waiting readers) and a long long-poll timeout, so that no
# reader times out while a test waits on it. Tests that need a small pool or a
# short timeout start their own stack (own_stack) and teardown stops it.
#
# Where a test needs to know that its readers are in the server and waiting (not
# still on their way), it counts the connections the pool holds open
# (tools/pool-readers.sh). In the small pools, streams are created in CGI mode on
# the database (cgi_create) and appended to with the CLI, so that besides the
# stack's readiness probe the live reads are the only requests that go through
# nginx to the pool.

load helpers

setup_file() { ds_stack_start DSTREAM_LONGPOLL_MS=30000; }
teardown_file() { ds_stack_stop; }

TOOLS=$BATS_TEST_DIRNAME/tools

setup() {
    MAIN_DIR=$DS_DIR
    BG_PIDS=()
    T=$BATS_TEST_TMPDIR
}

# End the clients this test started (by PID), then its own stack if it has one.
teardown() {
    ds_bg_stop
    if [ "${DS_DIR:-}" != "$MAIN_DIR" ]; then ds_stack_stop; fi
}

# own_stack NAME=VALUE...: a stack with these settings for this test only.
own_stack() { ds_stack_start "$@" && ds_direct; }

# sse_open OUT PATH_AND_QUERY: an SSE client (curl -N, so that curl writes each
# event as it arrives) writing the event stream to OUT.
sse_open() { spawn "$1" curl -sS -N --max-time 120 "$DS_URL$2"; }

# sse_connected FILE: the first event (always a control event) has arrived.
sse_connected() { grep -q '^event: control$' "$1"; }

# sse_events FILE: the complete events in FILE, one a line: "NAME<TAB>DATA", with
# the data lines joined by \n; comments (heartbeats) are left out.
sse_events() {
    awk 'BEGIN { RS = ""; FS = "\n" }
        {
            name = "message"; data = ""; n = 0; any = 0
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^event:/) { name = substr($i, 7); sub(/^ /, "", name); any = 1 }
                else if ($i ~ /^data:/) { d = substr($i, 6); sub(/^ /, "", d); data = (n++ ? data "\\n" : "") d; any = 1 }
            }
            if (any) print name "\t" data
        }' "$1"
}

# not_running PID: the process has exited (for ds_poll).
not_running() { ! kill -0 "$1" 2>/dev/null; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# pool_readers: connections this test's pool holds open, i.e. waiting live readers
# (kept by a process's hub or, once the hub is full, by a responder thread).
pool_readers() { "$TOOLS/pool-readers.sh" "$DS_DIR"; }
pool_readers_atleast() { [ "$(pool_readers)" -ge "$1" ]; }
pool_readers_none() { [ "$(pool_readers)" -le 0 ]; }

# cgi_create NAME [CONTENT_TYPE]: create stream NAME by running dstream-fcgi in CGI
# mode on the stack's database (nothing goes through nginx); prints its tail offset.
cgi_create() {
    local out=$T/cgi-create.out
    env -i PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=PUT \
        REQUEST_URI="/v1/stream/$1" SERVER_PROTOCOL=HTTP/1.1 CONTENT_TYPE="${2:-text/plain}" \
        CONTENT_LENGTH=0 DSTREAM_DB="$DS_DB" HTTP_AUTHORIZATION="Bearer $(cat "$DS_DIR/admin.token")" \
        "$DS_BIN/dstream-fcgi" </dev/null >"$out" 2>&1
    grep -q '^Status: 201' "$out" || { echo "CGI PUT failed: $(cat "$out")" >&2; return 1; }
    tr -d '\r' <"$out" | awk -F': ' 'tolower($1) == "stream-next-offset" { print $2; f = 1 } END { exit !f }'
}

# cli_append NAME TEXT: append TEXT to stream NAME with the CLI (another process, not
# the pool); prints the new tail offset.
cli_append() { printf '%s' "$2" | "$DS_BIN/dstream" --db "$DS_DB" append "$1"; }

# ---- SSE is unbuffered --------------------------------------------------------------

@test "SSE: an event reaches the client before the next message is even written" {
    s=$(ds_stream sse)
    ds_create "$s" text/plain
    out=$T/sse.out
    sse_open "$out" "$s?offset=now&live=sse"
    ds_poll 5 sse_connected "$out" || fail "no first control event within 5 s: $(cat "$out")"

    a=alpha-$RANDOM$RANDOM
    b=bravo-$RANDOM$RANDOM
    ds_append "$s" text/plain "$a"
    off_a=$(header Stream-Next-Offset)
    # B is not written until A's event has been read from the client's socket: if
    # nginx or the pool held A back, this times out.
    ds_poll 5 grep -qx "data:$a" "$out" || fail "A's event did not arrive within 5 s (buffered?): $(cat "$out")"
    ds_append "$s" text/plain "$b"
    off_b=$(header Stream-Next-Offset)
    ds_poll 5 grep -qx "data:$b" "$out" || fail "B's event did not arrive within 5 s: $(cat "$out")"
    ds_poll 5 grep -q "\"streamNextOffset\":\"$off_b\"" "$out" || fail "no control event after B: $(cat "$out")"

    # control, data A, control at A's offset, data B, control at B's offset
    sse_events "$out" >"$T/events"
    run cut -f1 "$T/events"
    assert_output "$(printf 'control\ndata\ncontrol\ndata\ncontrol')"
    [ "$(sed -n 2p "$T/events" | cut -f2)" = "$a" ] || fail "second event: $(sed -n 2p "$T/events")"
    [ "$(sed -n 4p "$T/events" | cut -f2)" = "$b" ] || fail "fourth event: $(sed -n 4p "$T/events")"
    sed -n 3p "$T/events" | cut -f2 | jq -e --arg o "$off_a" \
        '.streamNextOffset == $o and .upToDate == true and (.streamCursor | test("^[0-9]+$"))' >/dev/null ||
        fail "control after A: $(sed -n 3p "$T/events")"
    sed -n 5p "$T/events" | cut -f2 | jq -e --arg o "$off_b" '.streamNextOffset == $o and .upToDate == true' >/dev/null ||
        fail "control after B: $(sed -n 5p "$T/events")"
}

@test "SSE readers of 60 streams, from the start and at the tail, each get every append to its stream in order" {
    # Appends to many streams at once wake many of the hub's groups in one turn: on
    # PostgreSQL their reads are fetched ahead together (log_read_ahead), each
    # reader then takes its own; two positions in each stream.
    base=$(ds_name many)
    for i in $(seq 60); do
        ds_create "/v1/stream/$base-$i" text/plain
        ds_append "/v1/stream/$base-$i" text/plain "m0."
    done
    for i in $(seq 60); do
        sse_open "$T/from-start.$i" "/v1/stream/$base-$i?offset=-1&live=sse"
        sse_open "$T/at-tail.$i" "/v1/stream/$base-$i?offset=now&live=sse"
    done
    connected() { [ "$(grep -l '^event: control$' "$T"/from-start.* "$T"/at-tail.* | wc -l)" -eq 120 ]; }
    ds_poll 30 connected || fail "readers connected: $(grep -l '^event: control$' "$T"/from-start.* "$T"/at-tail.* | wc -l) of 120"
    # Five rounds, each an append to every stream, 8 at a time.
    for round in 1 2 3 4 5; do
        seq 60 | xargs -P 8 -I{} curl -fsS -o /dev/null -H 'Content-Type: text/plain' \
            --data-binary "r$round." "$DS_URL/v1/stream/$base-{}" || fail "round $round: an append failed"
    done
    # Each reader's data, joined: the stream from where it began, in order.
    text_of() { sse_events "$1" | awk -F'\t' '$1 == "data" { printf "%s", $2 }'; }
    all_there() {
        local i
        for i in $(seq 60); do
            [ "$(text_of "$T/from-start.$i")" = "m0.r1.r2.r3.r4.r5." ] || return 1
            [ "$(text_of "$T/at-tail.$i")" = "r1.r2.r3.r4.r5." ] || return 1
        done
    }
    ds_poll 30 all_there || {
        for i in $(seq 60); do
            a=$(text_of "$T/from-start.$i") b=$(text_of "$T/at-tail.$i")
            [ "$a" = "m0.r1.r2.r3.r4.r5." ] && [ "$b" = "r1.r2.r3.r4.r5." ] || fail "stream $i: from the start '$a', at the tail '$b'"
        done
    }
    # On PostgreSQL some turns of the hub had several streams to read, fetched
    # together; SQLite reads each in process.
    req GET /metrics
    ahead=$(awk '$1 == "dstream_live_reads_ahead_total" { print $2 }' "$DS_BODY")
    if [ "${DSTREAM_TEST_ENGINE:-sqlite}" = pg ]; then
        [ "${ahead:-0}" -ge 2 ] || fail "dstream_live_reads_ahead_total: '${ahead:-}'"
    else
        [ "${ahead:-}" = 0 ] || fail "dstream_live_reads_ahead_total on SQLite: '${ahead:-}'"
    fi
}

# ---- disconnected clients -----------------------------------------------------------

@test "SSE clients that disconnect are dropped at once: a full pool serves 4 new readers" {
    # 2 readers on the hub, 2 on the threads: the pool is full.
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_LIVE_MAX=2 DSTREAM_HEARTBEAT_MS=60000 \
        DSTREAM_SSE_MAX_MS=600000 DSTREAM_LONGPOLL_MS=30000
    name=$(ds_name gone)
    s=/v1/stream/$name
    cgi_create "$name" >/dev/null

    pids=()
    for i in 1 2 3 4; do
        sse_open "$T/sse.$i" "$s?offset=now&live=sse"
        pids+=("$LAST_PID")
    done
    for i in 1 2 3 4; do
        ds_poll 5 sse_connected "$T/sse.$i" || fail "SSE reader $i not connected within 5 s: $(cat "$T/sse.$i")"
    done
    ds_poll 5 pool_readers_atleast 4 || fail "expected 4 readers held, there are $(pool_readers)"

    # No heartbeat is due for a minute: only noticing the hang-up can free them.
    kill "${pids[@]}"
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    ds_poll 10 pool_readers_none || fail "10 s after the clients left, the pool still holds $(pool_readers) readers"

    # 4 long-polls at the tail must all be waiting in the pool (a place still held
    # by a gone client would leave one in a queue or get a 503).
    for i in 1 2 3 4; do
        spawn "$T/lp.$i" curl -sS --max-time 20 -o "$T/lp.$i.body" -w '%{http_code}' \
            "$DS_URL$s?offset=now&live=long-poll"
        pids[i - 1]=$LAST_PID
    done
    ds_poll 10 pool_readers_atleast 4 || fail "only $(pool_readers) of 4 new long-polls waiting in the pool within 10 s"
    msg=after-$RANDOM
    cli_append "$name" "$msg" >/dev/null
    for i in 1 2 3 4; do
        wait "${pids[i - 1]}" || true
        [ "$(cat "$T/lp.$i")" = 200 ] || fail "long-poll $i: status '$(cat "$T/lp.$i")', want 200"
        [ "$(cat "$T/lp.$i.body")" = "$msg" ] || fail "long-poll $i: body '$(cat "$T/lp.$i.body")', want '$msg'"
    done
}

# ---- readers kept by the hub: timers, deletion, stopping ----------------------------

# sse_status FILE PATH_AND_QUERY: an SSE client whose exit status lands in FILE.status
# when it ends (0: the server ended the response properly).
sse_status() {
    spawn "$1" sh -c 'curl -sS -N --max-time 60 "$1"; echo $? > "$2.status"' sh "$DS_URL$2" "$1"
}

@test "a waiting SSE reader gets heartbeats and its response ends properly after DSTREAM_SSE_MAX_MS" {
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_HEARTBEAT_MS=200 DSTREAM_SSE_MAX_MS=1500
    s=$(ds_stream beat)
    ds_create "$s" text/plain
    t0=$(now_ms)
    sse_status "$T/sse" "$s?offset=now&live=sse"
    ds_poll 10 test -f "$T/sse.status" || fail "the response did not end within 10 s: $(cat "$T/sse")"
    ms=$(($(now_ms) - t0))
    [ "$(cat "$T/sse.status")" = 0 ] || fail "curl exit $(cat "$T/sse.status") (not a clean end): $(cat "$T/sse")"
    beats=$(grep -c '^: keep-alive$' "$T/sse" || true)
    echo "# ended after $ms ms with $beats heartbeats" >&3
    [ "$beats" -ge 3 ] || fail "$beats heartbeats in 1.5 s at one per 200 ms: $(cat "$T/sse")"
    [ "$ms" -ge 1400 ] || fail "ended after $ms ms, before DSTREAM_SSE_MAX_MS (1500)"
}

@test "deleting a stream ends its waiting SSE readers' responses" {
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_HEARTBEAT_MS=300 DSTREAM_SSE_MAX_MS=600000
    s=$(ds_stream del)
    ds_create "$s" text/plain
    for i in 1 2 3; do sse_status "$T/sse.$i" "$s?offset=now&live=sse"; done
    for i in 1 2 3; do ds_poll 5 sse_connected "$T/sse.$i" || fail "reader $i not connected: $(cat "$T/sse.$i")"; done
    req DELETE "$s"
    assert_status 204
    for i in 1 2 3; do
        ds_poll 10 test -f "$T/sse.$i.status" || fail "reader $i still open 10 s after the delete"
        [ "$(cat "$T/sse.$i.status")" = 0 ] || fail "reader $i: curl exit $(cat "$T/sse.$i.status")"
    done
}

@test "stopping the pool ends waiting readers properly: long-polls 204, SSE responses end" {
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_HEARTBEAT_MS=60000 DSTREAM_SSE_MAX_MS=600000 \
        DSTREAM_LONGPOLL_MS=60000
    name=$(ds_name stop)
    s=/v1/stream/$name
    tail=$(cgi_create "$name")
    for i in 1 2 3; do
        sse_status "$T/sse.$i" "$s?offset=now&live=sse"
        spawn "$T/lp.$i" curl -sS --max-time 60 -o /dev/null -w '%{http_code}' "$DS_URL$s?offset=$tail&live=long-poll"
    done
    ds_poll 10 pool_readers_atleast 6 || fail "only $(pool_readers) of 6 readers held"
    kill -TERM "$(cat "$DS_DIR/fcgi.pid")"
    for i in 1 2 3; do
        ds_poll 10 test -f "$T/sse.$i.status" || fail "SSE reader $i still open 10 s after SIGTERM"
        [ "$(cat "$T/sse.$i.status")" = 0 ] || fail "SSE reader $i: curl exit $(cat "$T/sse.$i.status"): $(cat "$T/sse.$i")"
        ds_poll 10 grep -q . "$T/lp.$i" || fail "long-poll $i not answered 10 s after SIGTERM"
        [ "$(cat "$T/lp.$i")" = 204 ] || fail "long-poll $i: $(cat "$T/lp.$i"), want 204"
    done
}

@test "a reader that does not keep up does not hold back the others, and leaves cleanly" {
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_HEARTBEAT_MS=60000 DSTREAM_SSE_MAX_MS=600000
    s=$(ds_stream slow)
    ds_create "$s" text/plain
    spawn "$T/slow" curl -sS -N --limit-rate 2k --max-time 120 "$DS_URL$s?offset=now&live=sse"
    slow=$LAST_PID
    sse_open "$T/fast" "$s?offset=now&live=sse"
    ds_poll 5 sse_connected "$T/fast" || fail "fast reader not connected: $(cat "$T/fast")"
    ds_poll 5 sse_connected "$T/slow" || fail "slow reader not connected: $(cat "$T/slow")"
    # 32 x 256 KiB: far more than the socket buffers between the hub and a client
    # that reads 2 KiB/s, so the hub must keep the slow one's rest aside.
    head -c 262144 /dev/zero | tr '\0' x > "$T/body"
    for i in $(seq 32); do
        req POST "$s" -H 'Content-Type: text/plain' --data-binary "@$T/body"
        assert_status 204
    done
    fast_bytes() { tr -cd x < "$T/fast" | wc -c; }
    fast_has_all() { [ "$(fast_bytes)" -ge $((32 * 262144)) ]; }
    ds_poll 20 fast_has_all ||
        fail "the fast reader has $(fast_bytes) of $((32 * 262144)) bytes"
    got=$(tr -cd x < "$T/slow" | wc -c)
    echo "# the slow reader had $got bytes when the fast one had all" >&3
    [ "$got" -lt $((32 * 262144)) ] || fail "the slow reader was not slow ($got bytes)"
    kill "$slow"
    one_reader() { [ "$(pool_readers)" -eq 1 ]; }
    ds_poll 5 one_reader ||
        fail "the pool holds $(pool_readers) readers after the slow one left (want 1)"
    # The hub still serves the fast reader.
    req POST "$s" -H 'Content-Type: text/plain' --data-binary "after-slow"
    ds_poll 5 grep -q "after-slow" "$T/fast" || fail "no event for the fast reader after the slow one left"
}

@test "beyond DSTREAM_LIVE_BUFFER_MAX the readers furthest behind are dropped, the others go on" {
    # Once the socket buffers between the hub and a client that reads 1 KiB/s are full
    # (a few MiB: nginx's send buffer grows to 4 MiB), the hub keeps at most one batch
    # for it (one 64 KiB message here); four such readers hold more than the 64 KiB
    # allowed. A reader that keeps up never leaves anything in the hub.
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_HEARTBEAT_MS=60000 DSTREAM_SSE_MAX_MS=600000 \
        DSTREAM_LIVE_BUFFER_MAX=65536
    s=$(ds_stream shed)
    ds_create "$s" text/plain
    for i in 1 2 3 4; do
        spawn "$T/slow.$i" curl -sS -N --limit-rate 1k --max-time 120 "$DS_URL$s?offset=now&live=sse"
    done
    sse_open "$T/fast" "$s?offset=now&live=sse"
    ds_poll 5 sse_connected "$T/fast" || fail "fast reader not connected: $(cat "$T/fast")"
    for i in 1 2 3 4; do
        ds_poll 5 sse_connected "$T/slow.$i" || fail "slow reader $i not connected: $(cat "$T/slow.$i")"
    done
    head -c 65536 /dev/zero | tr '\0' y > "$T/body"
    for i in $(seq 128); do
        req POST "$s" -H 'Content-Type: text/plain' --data-binary "@$T/body"
        assert_status 204
    done
    fast_has_all() { [ "$(tr -cd y < "$T/fast" | wc -c)" -ge $((128 * 65536)) ]; }
    ds_poll 20 fast_has_all || fail "the fast reader has $(tr -cd y < "$T/fast" | wc -c) of $((128 * 65536)) bytes"
    # A dropped client still gets what nginx had buffered for it (MiBs at 1 KiB/s), so
    # the drop shows in the pool's figures, not yet at the client.
    shed() { curl -sS --max-time 5 "$DS_URL/metrics" | awk '$1 == "dstream_live_readers_shed_total" {print $2}'; }
    some_shed() { [ "$(shed)" -ge 1 ]; }
    ds_poll 10 some_shed || fail "no slow reader was dropped (shed: $(shed))"
    hub() { curl -sS --max-time 5 "$DS_URL/metrics" | awk '$1 == "dstream_live_readers{held_by=\"hub\"}" {print $2}'; }
    [ "$(hub)" -eq $((5 - $(shed))) ] || fail "hub readers $(hub), shed $(shed), want 5 in all"
    # The fast reader is still served.
    req POST "$s" -H 'Content-Type: text/plain' --data-binary "after-shed"
    ds_poll 5 grep -q "after-shed" "$T/fast" || fail "no event for the fast reader after the drop"
}

# ---- wake-ups from another process --------------------------------------------------

@test "a long-poll waiting at the tail is answered by an append from the CLI, long before its timeout" {
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=4 DSTREAM_LONGPOLL_MS=20000
    name=$(ds_name cliwake)
    s=/v1/stream/$name
    tail=$(cgi_create "$name")
    DS_HDRS=$T/lp.headers
    spawn "$T/lp.status" curl -sS --max-time 30 -D "$DS_HDRS" -o "$T/lp.body" -w '%{http_code}' \
        "$DS_URL$s?offset=$tail&live=long-poll"
    lp=$LAST_PID
    # Append only once the long-poll waits in the server, so that it is the wake-up,
    # not the first read, that finds the message.
    ds_poll 5 pool_readers_atleast 1 || fail "the long-poll was not waiting in the pool within 5 s"
    kill -0 "$lp" 2>/dev/null || fail "the long-poll answered before anything was appended: $(cat "$T/lp.status")"

    t0=$(now_ms)
    msg=from-cli-$RANDOM
    off=$(cli_append "$name" "$msg")
    ds_poll 10 not_running "$lp" || fail "no answer 10 s after the CLI append (timeout is 20 s)"
    elapsed=$(($(now_ms) - t0))
    wait "$lp" || true
    status_code=$(cat "$T/lp.status")
    DS_BODY=$T/lp.body
    body=$(cat "$DS_BODY")
    assert_status 200
    assert_body "$msg"
    assert_header Stream-Next-Offset "$off"
    assert_header Stream-Up-To-Date true
    echo "# long-poll answered ${elapsed} ms after the CLI append" >&3
}

@test "an SSE reader at the tail gets an event for an append from the CLI" {
    name=$(ds_name cliwake)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    out=$T/sse.out
    sse_open "$out" "$s?offset=now&live=sse"
    ds_poll 5 sse_connected "$out" || fail "no first control event within 5 s: $(cat "$out")"

    msg=from-cli-$RANDOM
    off=$(cli_append "$name" "$msg")
    ds_poll 10 grep -qx "data:$msg" "$out" || fail "no data event 10 s after the CLI append: $(cat "$out")"
    ds_poll 5 grep -q "\"streamNextOffset\":\"$off\"" "$out" || fail "no control event with the CLI's offset $off: $(cat "$out")"
}

# ---- the pool's limit ---------------------------------------------------------------

@test "beyond the pool nginx answers 502/503 with a JSON error at once instead of queueing" {
    # The hub holds 2 readers, the 2 threads 2 more; nginx's max_conns is 1 x (2 + 2).
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_LIVE_MAX=2 DSTREAM_HEARTBEAT_MS=60000 \
        DSTREAM_SSE_MAX_MS=600000
    name=$(ds_name full)
    s=/v1/stream/$name
    cgi_create "$name" >/dev/null
    for i in 1 2 3 4; do sse_open "$T/sse.$i" "$s?offset=now&live=sse"; done
    for i in 1 2 3 4; do
        ds_poll 5 sse_connected "$T/sse.$i" || fail "SSE reader $i not connected within 5 s: $(cat "$T/sse.$i")"
    done
    ds_poll 5 pool_readers_atleast 4 || fail "expected 4 readers held, there are $(pool_readers)"

    # All four get an append: the two on the hub and the two on threads.
    msg=all-four-$RANDOM
    cli_append "$name" "$msg" >/dev/null
    for i in 1 2 3 4; do
        ds_poll 5 grep -qx "data:$msg" "$T/sse.$i" || fail "SSE reader $i got no event: $(cat "$T/sse.$i")"
    done

    # Each further live request, whichever nginx worker takes it, must be refused.
    bad=()
    for live in long-poll sse long-poll sse; do
        t0=$(now_ms)
        DS_CURL_MAX_TIME=3 req GET "$s?offset=now&live=$live"
        ms=$(($(now_ms) - t0))
        echo "# live=$live beyond the pool: $status_code after $ms ms" >&3
        if [[ $status_code != 50[23] ]] || [ "$ms" -ge 2000 ] ||
            ! jq -e '.error.code | type == "string"' "$DS_BODY" >/dev/null 2>&1; then
            bad+=("live=$live: status $status_code after $ms ms, body '$(head -c 200 "$DS_BODY")'")
        fi
    done
    [ ${#bad[@]} -eq 0 ] || fail "$(printf '%s\n' "expected 502/503 with a JSON error within 2 s:" "${bad[@]}")"
}

@test "150 SSE readers and 150 long-polls wait on a pool of 2 threads, and all get one append" {
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=2 DSTREAM_HEARTBEAT_MS=60000 DSTREAM_SSE_MAX_MS=600000 \
        DSTREAM_LONGPOLL_MS=60000
    name=$(ds_name hub)
    s=/v1/stream/$name
    tail=$(cgi_create "$name")
    for i in $(seq 150); do
        curl -sN --max-time 60 "$DS_URL$s?offset=$tail&live=sse" > "$T/sse.$i" 2>/dev/null &
        BG_PIDS+=($!)
        curl -s --max-time 60 -o "$T/lp.$i" "$DS_URL$s?offset=$tail&live=long-poll" 2>/dev/null &
        BG_PIDS+=($!)
    done
    ds_poll 30 pool_readers_atleast 300 || fail "only $(pool_readers) of 300 readers held within 30 s"
    # A request still gets a thread.
    req GET /v1/health
    assert_status 200
    msg=one-for-all-$RANDOM
    cli_append "$name" "$msg" >/dev/null
    got() { [ "$(grep -lx "data:$msg" "$T"/sse.* | wc -l)" -eq 150 ] && [ "$(grep -lx "$msg" "$T"/lp.* | wc -l)" -eq 150 ]; }
    ds_poll 30 got || fail "SSE readers with the message: $(grep -lx "data:$msg" "$T"/sse.* | wc -l) of 150, long-polls: $(grep -lx "$msg" "$T"/lp.* | wc -l) of 150"
}

# ---- long-poll and SSE semantics ----------------------------------------------------

@test "long-poll with nothing new: 204 after DSTREAM_LONGPOLL_MS with Stream-Cursor and the same offset" {
    own_stack DSTREAM_PROCS=1 DSTREAM_THREADS=4 DSTREAM_LONGPOLL_MS=500
    s=$(ds_stream lpto)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'x'
    tail=$(header Stream-Next-Offset)

    t0=$(now_ms)
    req GET "$s?offset=$tail&live=long-poll"
    ms=$(($(now_ms) - t0))
    assert_status 204
    assert_body ''
    assert_header Stream-Next-Offset "$tail"
    assert_header Stream-Up-To-Date true
    assert_header_matches Stream-Cursor '^[0-9]+$'
    refute_header Stream-Closed
    [ "$ms" -ge 450 ] || fail "204 after $ms ms, before the 500 ms timeout"
    [ "$ms" -lt 5000 ] || fail "204 only after $ms ms (timeout 500 ms)"

    # offset=now waits the same way
    req GET "$s?offset=now&live=long-poll"
    assert_status 204
    assert_header Stream-Next-Offset "$tail"
    cursor=$(header Stream-Cursor)

    # a client that echoes the cursor gets a strictly greater one (no cache loops)
    req GET "$s?offset=$tail&live=long-poll&cursor=$cursor"
    assert_status 204
    next=$(header Stream-Cursor)
    [ "$next" -gt "$cursor" ] || fail "echoed cursor $cursor, got $next back"
}

@test "long-poll on a closed stream: 204 with Stream-Closed at once at the tail, 200 with the rest before it" {
    s=$(ds_stream lpclosed)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'last words'
    req POST "$s" -H 'Stream-Closed: true'
    assert_status 204
    tail=$(header Stream-Next-Offset)

    # the long-poll timeout of this stack is 30 s: "at once" is well under it
    t0=$(now_ms)
    req GET "$s?offset=$tail&live=long-poll"
    ms=$(($(now_ms) - t0))
    assert_status 204
    assert_header Stream-Closed true
    assert_header Stream-Next-Offset "$tail"
    assert_body ''
    [ "$ms" -lt 2000 ] || fail "a long-poll at the tail of a closed stream took $ms ms"

    req GET "$s?offset=-1&live=long-poll"
    assert_status 200
    assert_body 'last words'
    assert_header Stream-Closed true
    assert_header Stream-Next-Offset "$tail"
}

@test "a long-poll waiting at the tail is answered 204 with Stream-Closed when the stream is closed" {
    s=$(ds_stream lpclose)
    ds_create "$s" text/plain
    tail=$(header Stream-Next-Offset)
    DS_HDRS=$T/lp.headers
    spawn "$T/lp.status" curl -sS --max-time 30 -D "$DS_HDRS" -o "$T/lp.body" -w '%{http_code}' \
        "$DS_URL$s?offset=$tail&live=long-poll"
    lp=$LAST_PID
    ds_poll 5 pool_readers_atleast 1 || fail "the long-poll was not waiting in the pool within 5 s"
    req POST "$s" -H 'Stream-Closed: true'
    assert_status 204
    ds_poll 10 not_running "$lp" || fail "the long-poll was not answered 10 s after the close (timeout 30 s)"
    wait "$lp" || true
    DS_HDRS=$T/lp.headers
    [ "$(cat "$T/lp.status")" = 204 ] || fail "status $(cat "$T/lp.status"), want 204: $(cat "$T/lp.body")"
    assert_header Stream-Closed true
    [ ! -s "$T/lp.body" ] || fail "a 204 with a body: $(cat "$T/lp.body")"
}

@test "SSE on a closed stream: the data, a control event with streamClosed, and the response ends" {
    s=$(ds_stream sseclosed)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'the end'
    req POST "$s" -H 'Stream-Closed: true'
    tail=$(header Stream-Next-Offset)

    # curl exits 0 only if the server ended the response (28 is its own time limit)
    run curl -sS -N --max-time 10 -o "$T/all.out" "$DS_URL$s?offset=-1&live=sse"
    assert_success
    sse_events "$T/all.out" >"$T/events"
    run cut -f1 "$T/events"
    assert_output "$(printf 'data\ncontrol')"
    [ "$(sed -n 1p "$T/events" | cut -f2)" = 'the end' ] || fail "data event: $(sed -n 1p "$T/events")"
    sed -n 2p "$T/events" | cut -f2 | jq -e --arg o "$tail" '.streamClosed == true and .streamNextOffset == $o' >/dev/null ||
        fail "control event: $(sed -n 2p "$T/events")"

    # at the tail: just the closing control event
    run curl -sS -N --max-time 10 -o "$T/tail.out" "$DS_URL$s?offset=$tail&live=sse"
    assert_success
    sse_events "$T/tail.out" >"$T/events"
    [ "$(wc -l <"$T/events")" -eq 1 ] || fail "expected one event: $(cat "$T/tail.out")"
    cut -f2 "$T/events" | jq -e --arg o "$tail" '.streamClosed == true and .streamNextOffset == $o' >/dev/null ||
        fail "control event: $(cat "$T/events")"
}

@test "an open SSE reader gets a control event with streamClosed when the stream is closed, and the response ends" {
    s=$(ds_stream sseclose)
    ds_create "$s" text/plain
    out=$T/sse.out
    sse_open "$out" "$s?offset=now&live=sse"
    sse=$LAST_PID
    ds_poll 5 sse_connected "$out" || fail "no first control event within 5 s: $(cat "$out")"
    req POST "$s" -H 'Content-Type: text/plain' -H 'Stream-Closed: true' --data-binary 'bye'
    assert_status 204
    tail=$(header Stream-Next-Offset)
    ds_poll 10 not_running "$sse" || fail "the SSE response did not end within 10 s of the close: $(cat "$out")"
    wait "$sse" || fail "curl failed: $(cat "$out")"
    sse_events "$out" >"$T/events"
    tail -n 1 "$T/events" | cut -f2 | jq -e --arg o "$tail" '.streamClosed == true and .streamNextOffset == $o' >/dev/null ||
        fail "last event: $(tail -n 1 "$T/events")"
    grep -q $'^data\tbye$' "$T/events" || fail "no data event for the final append: $(cat "$out")"
}

# ---- fan-out ------------------------------------------------------------------------

@test "1,000 concurrent long-poll readers of one stream all receive one append" {
    s=$(ds_stream fanout)
    ds_create "$s" text/plain
    tail=$(header Stream-Next-Offset)
    # The script appends once the pool holds all 1,000. Readers ask for the
    # tail offset (not offset=now), so that the count does not depend on timing.
    run --separate-stderr timeout 90 node "$TOOLS/fanout.mjs" --url "$DS_URL" --path "$s" \
        --offset "$tail" --n 1000 --message "one for all $RANDOM" --settle-ms 300 \
        --ready-cmd "[ \"\$('$TOOLS/pool-readers.sh' '$DS_DIR')\" -ge 1000 ]" --timeout-ms 60000
    printf '# %s\n' "${lines[@]}" >&3
    [ -z "$stderr" ] || echo "# stderr: $stderr" >&3
    assert_success
    assert_output --partial 'fanout: PASS n=1000'
}
