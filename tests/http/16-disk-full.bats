#!/usr/bin/env bats
# A full database: with DSTREAM_DB_MAX_BYTES (SQLite's max_page_count) appends past
# the cap answer 507 with a JSON error, everything acknowledged before is there and
# sound, reads go on, and appends succeed again once space is freed.

load helpers

setup_file() { ds_stack_start DSTREAM_RUNNER=0 DSTREAM_DB_MAX_BYTES=1500000; }
teardown_file() { ds_stack_stop; }

setup() { T=$BATS_TEST_TMPDIR; }

# chunk I: 16 KiB that name their index (so order and loss both show).
chunk() { printf 'chunk %06d ' "$1"; head -c 16371 /dev/zero | tr '\0' x; }

# read_all PATH OUT: every byte of the stream into OUT, page by page (curl to files:
# req would put a megabyte into the environment).
read_all() {
    local off=-1 _ code
    : >"$2"
    for _ in $(seq 100); do
        code=$(curl -sS --max-time 10 -D "$T/h" -o "$T/page" -w '%{http_code}' "$DS_URL$1?offset=$off")
        [ "$code" = 200 ] || fail "GET $1?offset=$off: $code"
        cat "$T/page" >>"$2"
        grep -qi '^Stream-Up-To-Date:' "$T/h" && return 0
        off=$(sed -n 's/^Stream-Next-Offset: *\([^\r]*\).*/\1/Ip' "$T/h")
    done
    fail "no end to $1"
}

@test "past DSTREAM_DB_MAX_BYTES appends are 507 with a JSON error, nothing acknowledged is lost, and writing resumes when space returns" {
    ds_is_pg && skip "SQLite only: DSTREAM_DB_MAX_BYTES is SQLite's max_page_count; on PostgreSQL the server's disk is the limit (README.md)"
    filler=/v1/stream/$(ds_name filler)
    s=/v1/stream/$(ds_name full)
    ds_create "$filler" application/octet-stream
    head -c 300000 /dev/urandom >"$T/filler"
    req POST "$filler" -H 'Content-Type: application/octet-stream' --data-binary @"$T/filler"
    assert_status 204
    ds_create "$s" text/plain
    : >"$T/expected"
    acked=0
    for ((i = 0; i < 200; i++)); do
        chunk "$i" >"$T/chunk"
        req POST "$s" -H 'Content-Type: text/plain' --data-binary @"$T/chunk"
        [ "$status_code" = 204 ] || break
        cat "$T/chunk" >>"$T/expected"
        acked=$((acked + 1))
    done
    echo "# $acked appends of 16 KiB acknowledged before the cap" >&3
    [ "$acked" -gt 10 ] && [ "$acked" -lt 200 ] || fail "acked $acked"
    assert_status 507
    assert_json_error insufficient_storage
    # Refused again, the same way, and still nothing half-written.
    req POST "$s" -H 'Content-Type: text/plain' --data-binary @"$T/chunk"
    assert_status 507
    # Reads go on, and give exactly what was acknowledged, in order.
    read_all "$s" "$T/got"
    cmp -s "$T/expected" "$T/got" || fail "read $(stat -c %s "$T/got") bytes, acknowledged $(stat -c %s "$T/expected")"
    req GET /v1/health
    assert_status 200
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_success
    # Space returns (another stream deleted): the same append now succeeds.
    req DELETE "$filler"
    assert_status 204
    req POST "$s" -H 'Content-Type: text/plain' --data-binary @"$T/chunk"
    assert_status 204
    cat "$T/chunk" >>"$T/expected"
    read_all "$s" "$T/got"
    cmp -s "$T/expected" "$T/got" || fail "after the space returned: $(stat -c %s "$T/got") bytes"
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_success
}
