#!/usr/bin/env bats
# Clients that do not read: no responder thread waits on them. A response whose
# socket would block goes to the process's hub with what waits (catch-up, long-poll
# and SSE alike), so a pool of 32 threads keeps answering everyone else while more
# readers than it has threads sit on megabytes they never read.

load helpers

TOOLS=$BATS_TEST_DIRNAME/tools

setup_file() { ds_stack_start DSTREAM_SSE_MAX_MS=600000 DSTREAM_HEARTBEAT_MS=60000; }
teardown_file() { ds_stack_stop; }

setup() {
    BG_PIDS=()
    T=$BATS_TEST_TMPDIR
}
teardown() { ds_bg_stop; }

pool_readers() { "$TOOLS/pool-readers.sh" "$DS_DIR"; }
pool_readers_atleast() { [ "$(pool_readers)" -ge "$1" ]; }
metric() { curl -sS --max-time 5 "$DS_URL/metrics" | awk -v k="$1" '$1 == k {print $2}'; }

@test "33 SSE readers that never read 30 MB do not hold the 32 threads: health and other requests answer" {
    s=$(ds_stream big)
    ds_create "$s" text/plain
    head -c 1048576 /dev/zero | tr '\0' z > "$T/mb"
    for i in $(seq 30); do
        req POST "$s" -H 'Content-Type: text/plain' --data-binary "@$T/mb"
        assert_status 204
    done
    for i in $(seq 33); do
        spawn "$T/nr.$i" "$TOOLS/nonreader.sh" "$DS_URL$s?offset=-1&live=sse" 60
    done
    # All 33 are in the pool at once: more than it has threads.
    ds_poll 20 pool_readers_atleast 33 || fail "the pool holds $(pool_readers) of the 33 readers"
    # Everyone else is answered while they sit there.
    run curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$DS_URL/v1/health"
    assert_output 200
    o=$(ds_stream other)
    ds_create "$o" text/plain
    ds_append "$o" text/plain "hello"
    DS_CURL_MAX_TIME=5 ds_read_all "$o"
    assert_body hello
    spawn "$T/sse" curl -sS -N --max-time 30 "$DS_URL$o?offset=now&live=sse"
    ds_poll 5 grep -q '^event: control' "$T/sse" || fail "no SSE response: $(cat "$T/sse")"
    ds_append "$o" text/plain "to-the-live-reader"
    ds_poll 5 grep -q "to-the-live-reader" "$T/sse" || fail "the live reader got nothing: $(cat "$T/sse")"
    DS_CURL_MAX_TIME=5 req GET "$o?offset=-1&live=long-poll"
    assert_status 200
    # The 33 are still there, held by the hub, not by threads.
    pool_readers_atleast 33 || fail "only $(pool_readers) readers left"
    [ "$(metric 'dstream_live_readers{held_by="hub"}')" -ge 33 ] ||
        fail "the hub holds $(metric 'dstream_live_readers{held_by="hub"}') readers"
    [ "$(metric 'dstream_live_readers{held_by="thread"}')" -eq 0 ] ||
        fail "$(metric 'dstream_live_readers{held_by="thread"}') readers wait on threads"
}

@test "33 catch-up reads of 1 MB that are never read leave the threads free" {
    s=$(ds_stream cu)
    ds_create "$s" text/plain
    head -c 1048576 /dev/zero | tr '\0' c > "$T/mb"
    for i in $(seq 4); do
        req POST "$s" -H 'Content-Type: text/plain' --data-binary "@$T/mb"
        assert_status 204
    done
    for i in $(seq 33); do
        spawn "$T/nr.$i" "$TOOLS/nonreader.sh" "$DS_URL$s?offset=-1" 60
    done
    run curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$DS_URL/v1/health"
    assert_output 200
    run curl -sS -o "$T/read" -w '%{http_code}' --max-time 5 "$DS_URL$s?offset=-1"
    assert_output 200
    [ "$(stat -c %s "$T/read")" -eq 1048576 ] || fail "a reader that reads got $(stat -c %s "$T/read") bytes"
}

@test "after 33 non-reading readers leave, the pool's memory returns to its level before them" {
    s=$(ds_stream mem)
    ds_create "$s" text/plain
    head -c 1048576 /dev/zero | tr '\0' m > "$T/mb"
    for i in $(seq 30); do
        req POST "$s" -H 'Content-Type: text/plain' --data-binary "@$T/mb"
        assert_status 204
    done
    pool=$(pgrep -P "$(cat "$DS_DIR/fcgi.pid")" | head -1)
    rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pool/status"; }
    # The level the pool has settled at once these appends (1 MiB bodies) are in.
    before=$(rss)
    base=$(pool_readers)
    for i in $(seq 33); do
        spawn "$T/nr.$i" "$TOOLS/nonreader.sh" "$DS_URL$s?offset=-1&live=sse" 6
    done
    ds_poll 20 pool_readers_atleast $((base + 33)) || fail "the pool holds $(pool_readers) readers, $base before"
    peak=$(rss)
    no_readers() { [ "$(pool_readers)" -le "$base" ]; }
    ds_poll 30 no_readers || fail "$(pool_readers) readers still held after their clients left"
    back() { [ "$(rss)" -le $((before * 12 / 10)) ]; }
    ds_poll 10 back || fail "RSS $(rss) KiB after the readers left; $before before them, $peak with them"
    echo "# RSS KiB: $before before, $peak with 33 non-readers, $(rss) after" >&3
}
