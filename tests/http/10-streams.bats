#!/usr/bin/env bats
# The Durable Streams protocol without live modes, through nginx + the pool:
# create, append, read (with paging), JSON mode, HEAD, DELETE, close, ETags, CORS,
# security headers, TTL and the body limit.

load helpers

# Small limits so that paging and the 413 are reachable with small bodies. nginx's
# client_max_body_size stays above DSTREAM_BODY_MAX, so the pool's JSON 413 is seen.
# DSTREAM_TTL_TOUCH_MS=60000: a read records a sliding TTL's access at most once
# a minute (or a tenth of the TTL, when that is shorter).
setup_file() {
    ds_stack_start DSTREAM_READ_MAX=1000 DSTREAM_BODY_MAX=65536 DSTREAM_CORS_ORIGINS=http://example.com \
        DSTREAM_TTL_TOUCH_MS=60000
}
teardown_file() { ds_stack_stop; }

# ---- PUT ----------------------------------------------------------------------------

@test "PUT creates a stream: 201, Content-Type, Stream-Next-Offset, absolute Location" {
    s=$(ds_stream)
    req PUT "$s" -H 'Content-Type: text/plain'
    assert_status 201
    assert_header Content-Type text/plain
    assert_header_matches Stream-Next-Offset '^[^ ]+$'
    assert_header_matches Location "^http://127\.0\.0\.1:[0-9]+$s\$"
    assert_header X-Content-Type-Options nosniff
    refute_header Stream-Closed
}

@test "Location never comes from the client's Host and is percent-encoded" {
    n=$(ds_name loc)
    req PUT "/v1/stream/$n%3Fx%23y%20z" -H 'Content-Type: text/plain' -H 'Host: evil.example:666'
    assert_status 201
    # DSTREAM_PUBLIC_URL (the stack sets it to its own address) and the encoded path.
    assert_header_matches Location "^http://127\.0\.0\.1:[0-9]+/v1/stream/$n%3Fx%23y%20z\$"
    # The stream is the one named by the decoded path, and Location reads it back.
    ds_append "$(header Location)" text/plain 'hello'
    req GET "/v1/stream/$n%3Fx%23y%20z"
    assert_status 200
    assert_body hello
}

@test "without DSTREAM_PUBLIC_URL the Location is relative (CGI, Host ignored)" {
    out=$(env -i GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=PUT "REQUEST_URI=/v1/stream/a%23b%20c" \
        HTTP_HOST=evil.example:666 REQUEST_SCHEME=http CONTENT_TYPE=text/plain \
        DSTREAM_AUTH=off DSTREAM_DB="$BATS_TEST_TMPDIR/cgi.db" "$DS_BIN/dstream-fcgi" </dev/null | tr -d '\r')
    [[ $out == *$'\nLocation: /v1/stream/a%23b%20c\n'* ]] || fail "$out"
    [[ $out != *evil* ]] || fail "$out"
}

@test "a Content-Type with control characters is 400 and never echoed" {
    s=$(ds_stream)
    for ct in $'text/plain\x01evil' $'text/plain\x7f' $'text/plain\x1b[31m'; do
        req PUT "$s" -H "Content-Type: $ct"
        assert_status 400
        assert_json_error
        assert_body_json '.error.code == "bad_content_type"'
        if grep -aq 'evil\|\x7f\|\x1b' "$DS_HDRS" "$DS_BODY"; then fail "the Content-Type was echoed"; fi
    done
    req HEAD "$s"
    assert_status 404
    ds_create "$s" text/plain
    req POST "$s" -H $'Content-Type: text/plain\x01evil' --data-binary x
    assert_status 400
    assert_body_json '.error.code == "bad_content_type"'
    if grep -aq evil "$DS_HDRS" "$DS_BODY"; then fail "the Content-Type was echoed"; fi
    req GET "$s?offset=-1"
    assert_status 200
    assert_body ''
}

@test "PUT on an existing stream with the same config is 200, a different one 409" {
    s=$(ds_stream)
    ds_create "$s" application/json
    tail=$(header Stream-Next-Offset)

    req PUT "$s" -H 'Content-Type: application/json'
    assert_status 200
    assert_header Content-Type application/json
    assert_header Stream-Next-Offset "$tail"

    # the media type compares case-insensitively
    req PUT "$s" -H 'Content-Type: APPLICATION/JSON'
    assert_status 200

    req PUT "$s" -H 'Content-Type: text/plain'
    assert_status 409
    assert_json_error
}

@test "PUT with a different TTL than the existing stream is 409, the same TTL 200" {
    s=$(ds_stream)
    ds_create "$s" text/plain -H 'Stream-TTL: 3600'
    req PUT "$s" -H 'Content-Type: text/plain' -H 'Stream-TTL: 3600'
    assert_status 200
    req PUT "$s" -H 'Content-Type: text/plain' -H 'Stream-TTL: 7200'
    assert_status 409
}

@test "PUT without Content-Type creates an application/octet-stream stream" {
    s=$(ds_stream)
    req PUT "$s"
    assert_status 201
    assert_header Content-Type application/octet-stream
}

@test "PUT with an initial body stores it" {
    s=$(ds_stream)
    req PUT "$s" -H 'Content-Type: text/plain' --data-binary 'initial'
    assert_status 201
    tail=$(header Stream-Next-Offset)
    ds_read_all "$s"
    assert_body initial
    assert_header Stream-Next-Offset "$tail"
}

# ---- POST and byte-exact reads ------------------------------------------------------

@test "POST appends: 204 with a strictly greater Stream-Next-Offset; GET reads it back" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    o0=$(header Stream-Next-Offset)
    ds_append "$s" text/plain 'hello '
    o1=$(header Stream-Next-Offset)
    ds_append "$s" text/plain 'world'
    o2=$(header Stream-Next-Offset)
    [[ $o1 > $o0 ]] || fail "offset after first append ($o1) is not > $o0"
    [[ $o2 > $o1 ]] || fail "offset after second append ($o2) is not > $o1"

    ds_read_all "$s"
    assert_body 'hello world'
    assert_header Content-Type text/plain
    assert_header Stream-Next-Offset "$o2"
    assert_header Stream-Up-To-Date true
    assert_header_matches ETag '.'

    # resume from the offset after the first append
    req GET "$s?offset=$o1"
    assert_status 200
    assert_body world

    # no offset means the start
    req GET "$s"
    assert_status 200
    assert_body 'hello world'

    # reading at the tail: empty, up to date
    req GET "$s?offset=$o2"
    assert_status 200
    assert_body ''
    assert_header Stream-Up-To-Date true
    assert_header Stream-Next-Offset "$o2"
}

@test "binary data with NUL bytes (all 256 byte values) round-trips byte-exact" {
    s=$(ds_stream)
    f=$BATS_TEST_TMPDIR/bytes
    for i in $(seq 0 255); do printf "\\$(printf '%03o' "$i")"; done >"$f"
    printf '\0\0\0tail\0' >>"$f"
    [ "$(stat -c %s "$f")" -eq 264 ]

    ds_create "$s" application/octet-stream
    req POST "$s" -H 'Content-Type: application/octet-stream' --data-binary "@$f"
    assert_status 204
    req POST "$s" -H 'Content-Type: application/octet-stream' --data-binary "@$f"
    assert_status 204
    cat "$f" "$f" >"$BATS_TEST_TMPDIR/expected"

    ds_read_all "$s"
    assert_header Content-Type application/octet-stream
    assert_body_file "$BATS_TEST_TMPDIR/expected"
}

@test "Content-Type of an append matches the stream's case-insensitively, ignoring parameters" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" TEXT/PLAIN 'a'
    ds_append "$s" 'text/plain; charset=utf-8' 'b'
    ds_read_all "$s"
    assert_body ab
}

@test "POST with a different Content-Type is 409" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    req POST "$s" -H 'Content-Type: application/json' --data-binary '{"a":1}'
    assert_status 409
    assert_json_error
    ds_read_all "$s"
    assert_body ''
}

@test "POST without Content-Type is 400" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    # curl adds application/x-www-form-urlencoded to -d bodies unless told not to
    req POST "$s" -H 'Content-Type:' --data-binary 'data'
    assert_status 400
    assert_json_error
}

@test "POST with an empty body and no Stream-Closed is 400" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    req POST "$s" -H 'Content-Type: text/plain' --data-binary ''
    assert_status 400
    assert_json_error
}

@test "POST to a stream that does not exist is 404" {
    req POST "$(ds_stream missing)" -H 'Content-Type: text/plain' --data-binary 'x'
    assert_status 404
    assert_json_error
}

# ---- JSON mode ----------------------------------------------------------------------

@test "JSON mode: a top-level array is flattened one level; GET returns one JSON array" {
    s=$(ds_stream)
    ds_create "$s" application/json
    ds_append "$s" application/json '[1,2]'
    ds_append "$s" application/json '{"message":"hello"}'
    ds_append "$s" application/json '[[3,4],"five",null]'
    ds_append "$s" application/json '"string value"'

    ds_read_all "$s"
    assert_header Content-Type application/json
    assert_body_json '. == [1,2,{"message":"hello"},[3,4],"five",null,"string value"]'
}

@test "JSON mode: an empty stream and offset=now read as []" {
    s=$(ds_stream)
    ds_create "$s" application/json
    ds_read_all "$s"
    assert_body_json '. == []'
    ds_append "$s" application/json '{"a":1}'
    req GET "$s?offset=now"
    assert_status 200
    assert_body_json '. == []'
}

@test "JSON mode: PUT with [] creates an empty stream" {
    s=$(ds_stream)
    req PUT "$s" -H 'Content-Type: application/json' --data-binary '[]'
    assert_status 201
    ds_read_all "$s"
    assert_body_json '. == []'
    assert_header Stream-Up-To-Date true
}

@test "JSON mode: invalid JSON is 400 and appends nothing" {
    s=$(ds_stream)
    ds_create "$s" application/json
    req POST "$s" -H 'Content-Type: application/json' --data-binary '{ invalid json }'
    assert_status 400
    assert_json_error
    req POST "$s" -H 'Content-Type: application/json' --data-binary '[1,2'
    assert_status 400
    req POST "$s" -H 'Content-Type: application/json' --data-binary '{"a":1} {"b":2}'
    assert_status 400
    ds_read_all "$s"
    assert_body_json '. == []'
}

@test "JSON mode: POST with an empty array is 400" {
    s=$(ds_stream)
    ds_create "$s" application/json
    req POST "$s" -H 'Content-Type: application/json' --data-binary '[]'
    assert_status 400
    assert_json_error
    req POST "$s" -H 'Content-Type: application/json' --data-binary '  [ ]  '
    assert_status 400
}

@test "JSON mode: strings with escapes and unicode survive" {
    s=$(ds_stream)
    ds_create "$s" application/json
    ds_append "$s" application/json '{"s":"a\"b\\c\n\u00e9\ud83d\ude00","n":-1.5e3}'
    ds_read_all "$s"
    assert_body_json '.[0].s == "a\"b\\c\n\u00e9\ud83d\ude00" and .[0].n == -1500'
}

# ---- Stream-Seq ---------------------------------------------------------------------

@test "Stream-Seq must increase: a lower or equal value is 409" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'a' -H 'Stream-Seq: 0001'
    ds_append "$s" text/plain 'b' -H 'Stream-Seq: 0002'
    req POST "$s" -H 'Content-Type: text/plain' -H 'Stream-Seq: 0001' --data-binary 'c'
    assert_status 409
    req POST "$s" -H 'Content-Type: text/plain' -H 'Stream-Seq: 0002' --data-binary 'd'
    assert_status 409
    ds_append "$s" text/plain 'e' -H 'Stream-Seq: 0010'
    ds_read_all "$s"
    assert_body abe
}

# ---- paging -------------------------------------------------------------------------

# follow_pages PATH: GET from -1, following Stream-Next-Offset until Stream-Up-To-Date;
# the pages' bodies go to $BATS_TEST_TMPDIR/page.N, their count to $pages. Fails when a
# page before the last says Up-To-Date, or when the reads do not reach the tail.
follow_pages() {
    local off=-1 n=0
    pages=0
    while [ $n -lt 100 ]; do
        req GET "$1?offset=$off"
        assert_status 200 || return
        n=$((n + 1))
        cp "$DS_BODY" "$BATS_TEST_TMPDIR/page.$n"
        pages=$n
        if header Stream-Up-To-Date >/dev/null; then
            assert_header Stream-Up-To-Date true
            return
        fi
        local next
        next=$(header Stream-Next-Offset) || { assert_header Stream-Next-Offset; return; }
        [ "$next" != "$off" ] || fail "page $n did not advance past offset $off and is not up to date"
        off=$next
    done
    fail "no Stream-Up-To-Date after 100 pages"
}

@test "GET pages at DSTREAM_READ_MAX; following Stream-Next-Offset returns all data, Up-To-Date only on the last page" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    : >"$BATS_TEST_TMPDIR/expected"
    for i in $(seq 1 12); do
        rec=$(printf 'r%02d' "$i")$(head -c 297 /dev/zero | tr '\0' "$(printf "\\$(printf '%03o' $((96 + i)))")")
        ds_append "$s" text/plain "$rec"
        printf '%s' "$rec" >>"$BATS_TEST_TMPDIR/expected"
    done
    tail=$(header Stream-Next-Offset)

    # One GET from the start must not return everything (3600 bytes > 1000). The cap
    # is soft (lib/log.h: a page stops after the record that reaches it), so a page is
    # at most DSTREAM_READ_MAX plus one record.
    req GET "$s?offset=-1"
    assert_status 200
    refute_header Stream-Up-To-Date
    [ "$(stat -c %s "$DS_BODY")" -lt 1300 ] || fail "first page is $(stat -c %s "$DS_BODY") bytes, over DSTREAM_READ_MAX=1000 plus one 300-byte record"

    follow_pages "$s"
    [ "$pages" -ge 3 ] || fail "expected at least 3 pages (4 records each at most), got $pages"
    assert_header Stream-Next-Offset "$tail"
    for n in $(seq 1 "$pages"); do cat "$BATS_TEST_TMPDIR/page.$n"; done >"$BATS_TEST_TMPDIR/all"
    cmp "$BATS_TEST_TMPDIR/expected" "$BATS_TEST_TMPDIR/all" || fail "pages concatenated differ from what was appended"
}

@test "GET paging never splits a record: a record larger than DSTREAM_READ_MAX comes whole" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    small=abc
    big=$(head -c 2500 /dev/zero | tr '\0' 'B')
    ds_append "$s" text/plain "$small"
    ds_append "$s" text/plain "$big"
    ds_append "$s" text/plain "$small"
    follow_pages "$s"
    for n in $(seq 1 "$pages"); do cat "$BATS_TEST_TMPDIR/page.$n"; done >"$BATS_TEST_TMPDIR/all"
    [ "$(cat "$BATS_TEST_TMPDIR/all")" = "$small$big$small" ] || fail "data read across pages differs"
    # the big record is exactly one page's body (or part of one), never cut
    found=0
    for n in $(seq 1 "$pages"); do grep -q "$big" "$BATS_TEST_TMPDIR/page.$n" && found=1; done
    [ $found = 1 ] || fail "the 2500-byte record was split across pages"
}

@test "GET paging on a JSON stream: every page is a complete JSON array" {
    s=$(ds_stream)
    ds_create "$s" application/json
    pad=$(head -c 200 /dev/zero | tr '\0' 'x')
    for i in $(seq 1 10); do ds_append "$s" application/json "{\"n\":$i,\"pad\":\"$pad\"}"; done
    follow_pages "$s"
    [ "$pages" -ge 2 ] || fail "expected several pages, got $pages"
    for n in $(seq 1 "$pages"); do
        jq -e 'type == "array"' "$BATS_TEST_TMPDIR/page.$n" >/dev/null || fail "page $n is not a JSON array: $(head -c 200 "$BATS_TEST_TMPDIR/page.$n")"
    done
    got=$(for n in $(seq 1 "$pages"); do jq -c '.[].n' "$BATS_TEST_TMPDIR/page.$n"; done | tr '\n' ' ')
    [ "$got" = "1 2 3 4 5 6 7 8 9 10 " ] || fail "messages read across pages: $got"
}

# ---- offsets ------------------------------------------------------------------------

@test "offset=now returns an empty body, the tail, Up-To-Date and Cache-Control: no-store" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'historical'
    tail=$(header Stream-Next-Offset)
    req GET "$s?offset=now"
    assert_status 200
    assert_body ''
    assert_header Content-Type text/plain
    assert_header Stream-Next-Offset "$tail"
    assert_header Stream-Up-To-Date true
    assert_header_matches Cache-Control 'no-store'

    ds_append "$s" text/plain 'new'
    req GET "$s?offset=$tail"
    assert_status 200
    assert_body new
}

@test "offset=now on an empty stream gives a real offset, not -1 or now" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    created=$(header Stream-Next-Offset)
    req GET "$s?offset=now"
    assert_status 200
    assert_header Stream-Next-Offset "$created"
    off=$(header Stream-Next-Offset)
    [ "$off" != -1 ] && [ "$off" != now ]
}

@test "bad offsets are 400 with a JSON error body" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'data'
    good=$(header Stream-Next-Offset)
    problems=()
    for q in 'offset=abc' 'offset=' "offset=-1&offset=$good" 'offset=0,1' 'offset=0%201' \
        'offset=-2' "offset=${good}x" 'offset=..%2F..%2Fetc' 'offset=%00' 'offset=nowx'; do
        req GET "$s?$q"
        if [ "$status_code" != 400 ]; then
            problems+=("GET ?$q: expected 400, got $status_code: $(head -c 100 "$DS_BODY")")
            continue
        fi
        assert_json_error
        assert_header X-Content-Type-Options nosniff
    done
    [ ${#problems[@]} -eq 0 ] || fail "$(printf '%s\n' "${problems[@]}")"
}

@test "an offset that names no position of this stream is 400, not a read from elsewhere" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'aaaa'
    ds_append "$s" text/plain 'bb'
    other=$(ds_stream)
    ds_create "$other" text/plain
    ds_append "$other" text/plain 'x'
    ds_append "$other" text/plain 'yyyyyy'
    foreign=$(header Stream-Next-Offset)      # 0000000000000002_0000000000000007
    for off in 0000000000000001_9999999999999999 0000000000000001_0000000000000000 \
        0000000000000000_0000000000000001 "$foreign"; do
        req GET "$s?offset=$off"
        assert_status 400
        assert_body_json '.error.code == "bad_offset"'
        req GET "$s?offset=$off&live=long-poll"
        assert_status 400
    done
    # A fork offset is checked the same way against its source.
    req PUT "$(ds_stream)" -H "Stream-Forked-From: $s" -H "Stream-Fork-Offset: $foreign"
    assert_status 400
    assert_body_json '.error.code == "bad_offset"'
    req PUT "$(ds_stream)" -H "Stream-Forked-From: $s" -H 'Stream-Fork-Offset: 0000000000000001_0000000000000004'
    assert_status 201
    # The real positions still read.
    req GET "$s?offset=0000000000000001_0000000000000004"
    assert_status 200
    assert_body bb
    req GET "$s?offset=0000000000000002_0000000000000006"
    assert_status 200
    assert_body ''
}

@test "unknown query parameters are ignored" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'x'
    req GET "$s?offset=-1&foo=bar&baz=qux"
    assert_status 200
    assert_body x
}

# ---- HEAD ---------------------------------------------------------------------------

@test "HEAD: 200, no body, Content-Type, tail offset, Cache-Control no-store, TTL" {
    s=$(ds_stream)
    ds_create "$s" text/plain -H 'Stream-TTL: 3600'
    req HEAD "$s"
    assert_status 200
    assert_header Content-Type text/plain
    assert_header Stream-TTL 3600
    assert_header_matches Cache-Control 'no-store'
    refute_header Stream-Closed
    before=$(header Stream-Next-Offset)

    ds_append "$s" text/plain 'abc'
    appended=$(header Stream-Next-Offset)
    req HEAD "$s"
    assert_header Stream-Next-Offset "$appended"
    [ "$appended" != "$before" ]
}

@test "HEAD shows Stream-Expires-At when the stream has one" {
    s=$(ds_stream)
    at=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%S.000Z)
    ds_create "$s" text/plain -H "Stream-Expires-At: $at"
    req HEAD "$s"
    assert_status 200
    assert_header_matches Stream-Expires-At '^[0-9]{4}-[0-9]{2}-[0-9]{2}T'
}

@test "HEAD on a missing stream is 404" {
    req HEAD "$(ds_stream missing)"
    assert_status 404
    assert_header X-Content-Type-Options nosniff
}

# ---- DELETE -------------------------------------------------------------------------

@test "DELETE is 204; the stream is then 404 and PUT recreates it empty" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'old data'
    req DELETE "$s"
    assert_status 204
    req HEAD "$s"
    assert_status 404
    req GET "$s?offset=-1"
    assert_status 404
    assert_json_error
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'x'
    assert_status 404
    req DELETE "$s"
    assert_status 404

    req PUT "$s" -H 'Content-Type: application/json'
    assert_status 201
    ds_read_all "$s"
    assert_body_json '. == []'
}

# ---- close --------------------------------------------------------------------------

@test "close: Stream-Closed: true on an empty POST is 204; later appends are 409 with Stream-Closed" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'last words'
    tail=$(header Stream-Next-Offset)

    req POST "$s" -H 'Stream-Closed: true'
    assert_status 204
    assert_header Stream-Closed true
    assert_header Stream-Next-Offset "$tail"

    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'more'
    assert_status 409
    assert_header Stream-Closed true
    assert_header Stream-Next-Offset "$tail"

    # closing again is idempotent
    req POST "$s" -H 'Stream-Closed: true'
    assert_status 204
    assert_header Stream-Closed true

    req HEAD "$s"
    assert_header Stream-Closed true

    ds_read_all "$s"
    assert_body 'last words'
    assert_header Stream-Closed true
    assert_header Stream-Up-To-Date true
}

@test "close with a final append stores the data and closes atomically" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'first '
    req POST "$s" -H 'Content-Type: text/plain' -H 'Stream-Closed: true' --data-binary 'final'
    assert_status 204
    assert_header Stream-Closed true
    req POST "$s" -H 'Content-Type: text/plain' -H 'Stream-Closed: true' --data-binary 'again'
    assert_status 409
    assert_header Stream-Closed true
    ds_read_all "$s"
    assert_body 'first final'
}

@test "PUT with Stream-Closed: true creates a closed stream" {
    s=$(ds_stream)
    req PUT "$s" -H 'Content-Type: text/plain' -H 'Stream-Closed: true' --data-binary 'only'
    assert_status 201
    assert_header Stream-Closed true
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'x'
    assert_status 409
    ds_read_all "$s"
    assert_body only
}

# ---- ETag ---------------------------------------------------------------------------

@test "ETag: If-None-Match with the same ETag is 304 with no body; it changes after an append" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'v1'
    ds_read_all "$s"
    etag=$(header ETag)
    [ -n "$etag" ]

    req GET "$s?offset=-1" -H "If-None-Match: $etag"
    assert_status 304
    [ "$(stat -c %s "$DS_BODY")" -eq 0 ]
    assert_header X-Content-Type-Options nosniff

    req GET "$s?offset=-1" -H 'If-None-Match: "wrong-etag"'
    assert_status 200
    assert_body v1

    ds_append "$s" text/plain 'v2'
    req GET "$s?offset=-1" -H "If-None-Match: $etag"
    assert_status 200
    assert_body v1v2
    [ "$(header ETag)" != "$etag" ] || fail "ETag did not change after an append"
}

@test "ETag changes when the stream is closed" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_append "$s" text/plain 'x'
    ds_read_all "$s"
    etag=$(header ETag)
    req POST "$s" -H 'Stream-Closed: true'
    assert_status 204
    req GET "$s?offset=-1" -H "If-None-Match: $etag"
    assert_status 200
    assert_header Stream-Closed true
}

# ---- CORS and security headers ------------------------------------------------------

# The stack allows the origin http://example.com (DSTREAM_CORS_ORIGINS); the rest of
# CORS, and its absence by default, is in 15-auth.bats.
@test "OPTIONS preflight is 204 with CORS headers allowing If-None-Match" {
    s=$(ds_stream)
    req OPTIONS "$s" -H 'Origin: http://example.com' -H 'Access-Control-Request-Method: GET' \
        -H 'Access-Control-Request-Headers: if-none-match'
    assert_status 204
    assert_header Access-Control-Allow-Origin 'http://example.com'
    v=$(header Access-Control-Allow-Headers)
    [[ ${v,,} =~ if-none-match|\* ]] || fail "Access-Control-Allow-Headers is '$v'"
    assert_header_matches Access-Control-Allow-Methods 'PUT'
    assert_header_matches Access-Control-Allow-Methods 'POST'
    assert_header X-Content-Type-Options nosniff
}

@test "CORS and security headers are on successful responses" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ds_read_all "$s" -H 'Origin: http://example.com'
    assert_header Access-Control-Allow-Origin 'http://example.com'
    assert_header_matches Access-Control-Expose-Headers 'Stream-Next-Offset'
    assert_header X-Content-Type-Options nosniff
    assert_header_matches Cross-Origin-Resource-Policy '^(cross-origin|same-origin|same-site)$'
}

@test "error responses carry X-Content-Type-Options: nosniff and a JSON error body" {
    req GET "$(ds_stream missing)?offset=-1"
    assert_status 404
    assert_header X-Content-Type-Options nosniff
    assert_header_matches Cross-Origin-Resource-Policy '.'
    assert_header Content-Type application/json
    assert_json_error
}

# ---- TTL and expiry -----------------------------------------------------------------

@test "Stream-TTL: 1 expires the stream (HEAD 404); PUT then creates a fresh one" {
    s=$(ds_stream)
    ds_create "$s" text/plain -H 'Stream-TTL: 1'
    ds_append "$s" text/plain 'doomed'
    req HEAD "$s"
    assert_status 200
    assert_header Stream-TTL 1
    # The TTL has to run out before anything can be observed: this sleep is the
    # inherent part; then poll HEAD (which must not refresh the TTL) with a deadline.
    sleep 1
    ds_poll 4 ds_head_is "$s" 404 || fail "HEAD still $status_code 5 s after a 1 s TTL"
    req GET "$s?offset=-1"
    assert_status 404
    req POST "$s" -H 'Content-Type: text/plain' --data-binary 'x'
    assert_status 404

    req PUT "$s" -H 'Content-Type: application/json' -H 'Stream-TTL: 60'
    assert_status 201
    ds_read_all "$s"
    assert_body_json '. == []'
}

commit_groups() {
    req GET /metrics
    awk '$1 == "dstream_commit_groups_total" {print $2; exit}' "$DS_BODY"
}

@test "Stream-TTL: reads keep the stream alive without a commit each; left alone it expires" {
    s=$(ds_stream)
    ds_create "$s" text/plain -H 'Stream-TTL: 3600'
    ds_append "$s" text/plain 'kept'
    # 20 reads well within min(3600 s / 10, DSTREAM_TTL_TOUCH_MS): none is a write.
    g0=$(commit_groups)
    [ -n "$g0" ] || fail "no dstream_commit_groups_total in /metrics"
    for _ in $(seq 20); do
        ds_read_all "$s"
        assert_body kept
    done
    g1=$(commit_groups)
    [ $((g1 - g0)) -lt 5 ] || fail "20 reads of a TTL stream cost $((g1 - g0)) commit groups"

    # A 2 s TTL read continuously for 5 s (three TTLs) stays alive: a read records
    # the access once the recorded one is 200 ms (a tenth of the TTL) old.
    t=$(ds_stream)
    ds_create "$t" text/plain -H 'Stream-TTL: 2'
    ds_append "$t" text/plain 'alive'
    u=$(ds_stream)
    ds_create "$u" text/plain -H 'Stream-TTL: 2'
    end=$(($(date +%s%N) + 5000000000))
    n=0
    while [ "$(date +%s%N)" -lt "$end" ] && [ $n -lt 500 ]; do
        ds_read_all "$t"
        assert_body alive
        n=$((n + 1))
        sleep 0.1
    done
    # The one left alone for as long has expired (HEAD does not touch).
    ds_poll 4 ds_head_is "$u" 404 || fail "the unread 2 s TTL stream is still $status_code"
    # The one read is still there, and still expires once reads stop.
    req HEAD "$t"
    assert_status 200
    ds_poll 6 ds_head_is "$t" 404 || fail "the 2 s TTL stream is still $status_code 6 s after reads stopped"
}

@test "invalid Stream-TTL values are 400" {
    for ttl in abc -1 00060 +60 60.5 1e3 '1 2' 99999999999999999999999; do
        s=$(ds_stream)
        req PUT "$s" -H 'Content-Type: text/plain' -H "Stream-TTL: $ttl"
        [ "$status_code" = 400 ] || fail "Stream-TTL '$ttl': expected 400, got $status_code"
        assert_json_error
        req HEAD "$s"
        assert_status 404
    done
}

@test "invalid Stream-Expires-At is 400; TTL together with Expires-At is 400" {
    s=$(ds_stream)
    req PUT "$s" -H 'Content-Type: text/plain' -H 'Stream-Expires-At: not-a-timestamp'
    assert_status 400
    assert_json_error
    at=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
    req PUT "$s" -H 'Content-Type: text/plain' -H 'Stream-TTL: 60' -H "Stream-Expires-At: $at"
    assert_status 400
    assert_json_error
    req HEAD "$s"
    assert_status 404
}

@test "PUT with a past Stream-Expires-At and a body is 400 and writes nothing" {
    s=$(ds_stream)
    at=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
    req PUT "$s" -H 'Content-Type: text/plain' -H "Stream-Expires-At: $at" --data-binary 'lost'
    assert_status 400
    assert_body_json '.error.code == "bad_expires_at"'
    req HEAD "$s"
    assert_status 404
}

@test "Stream-Expires-At accepts Z and numeric offsets" {
    at=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%S.123Z)
    ds_create "$(ds_stream)" text/plain -H "Stream-Expires-At: $at"
    at=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%S+00:00)
    ds_create "$(ds_stream)" text/plain -H "Stream-Expires-At: $at"
}

# ---- body limit ---------------------------------------------------------------------

@test "a body at DSTREAM_BODY_MAX is accepted; one byte over is 413 with a JSON error" {
    s=$(ds_stream)
    ds_create "$s" application/octet-stream
    head -c 65536 /dev/urandom >"$BATS_TEST_TMPDIR/max"
    head -c 65537 /dev/urandom >"$BATS_TEST_TMPDIR/over"

    req POST "$s" -H 'Content-Type: application/octet-stream' --data-binary "@$BATS_TEST_TMPDIR/over"
    assert_status 413
    assert_json_error
    assert_header X-Content-Type-Options nosniff

    req POST "$s" -H 'Content-Type: application/octet-stream' --data-binary "@$BATS_TEST_TMPDIR/max"
    assert_status 204
    ds_read_all "$s"
    assert_body_file "$BATS_TEST_TMPDIR/max"
}

@test "a PUT body over DSTREAM_BODY_MAX is 413 and creates nothing" {
    s=$(ds_stream)
    head -c 100000 /dev/zero >"$BATS_TEST_TMPDIR/over"
    req PUT "$s" -H 'Content-Type: application/octet-stream' --data-binary "@$BATS_TEST_TMPDIR/over"
    assert_status 413
    assert_json_error
    req HEAD "$s"
    assert_status 404
}

# ---- catch-up reads of the same history -------------------------------------------------

@test "a stream read from the start and the middle again and again as it grows, then deleted and made again with other bytes: every read what was written; on PostgreSQL the pool's history cache served them" {
    local s want round mid
    s=$(ds_stream again)
    ds_create "$s" text/plain
    ds_append_texts "$s" a 1 100
    want=$DS_TEXTS
    for round in 1 2 3 4 5; do
        ds_reads_are "$s?offset=-1" 3 "$want" "round $round"
        # Appended since: from the start, all of it; from where the last read
        # ended (as a client goes on), the new ones alone.
        mid=$(header Stream-Next-Offset)
        ds_append_texts "$s" "r$round." 1 10
        want+=$DS_TEXTS
        ds_reads_are "$s?offset=$mid" 1 "$DS_TEXTS" "round $round, from $mid"
    done
    # Deleted and made again: bytes of the same lengths at the same offsets.
    req DELETE "$s"
    assert_status 204
    ds_create "$s" text/plain
    ds_append_texts "$s" b 1 100
    ds_reads_are "$s?offset=-1" 3 "$DS_TEXTS" "after the delete"
    # The pool publishes its figures once a second.
    if [ "${DSTREAM_TEST_ENGINE:-sqlite}" = pg ]; then
        _hits_ge() { [ "$(ds_metric dstream_read_cache_hits_total)" -ge "$1" ] 2>/dev/null; }
        ds_poll 5 _hits_ge 10 || fail "dstream_read_cache_hits_total: '$(ds_metric dstream_read_cache_hits_total)'"
    else
        sleep 1.2
        [ "$(ds_metric dstream_read_cache_hits_total)" = 0 ] ||
            fail "dstream_read_cache_hits_total on SQLite: '$(ds_metric dstream_read_cache_hits_total)'"
    fi
}
