#!/usr/bin/env bats
# Idempotent producers: POST with Producer-Id, Producer-Epoch and Producer-Seq.

load helpers

setup_file() { ds_stack_start; }
teardown_file() { ds_stack_stop; }

# produce PATH ID EPOCH SEQ DATA [curl args...]: a text/plain POST with producer headers.
produce() {
    local path=$1 id=$2 epoch=$3 seq=$4 data=$5
    shift 5
    req POST "$path" -H 'Content-Type: text/plain' -H "Producer-Id: $id" \
        -H "Producer-Epoch: $epoch" -H "Producer-Seq: $seq" --data-binary "$data" "$@"
}

@test "first append (epoch 0, seq 0) is 200 with Producer-Epoch, Producer-Seq, Stream-Next-Offset" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p1 0 0 'a'
    assert_status 200
    assert_header Producer-Epoch 0
    assert_header Producer-Seq 0
    assert_header_matches Stream-Next-Offset '.'
    ds_read_all "$s"
    assert_body a
}

@test "sequential seqs are 200 each and echo the seq" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    for i in 0 1 2 3; do
        produce "$s" p1 0 "$i" "m$i "
        assert_status 200
        assert_header Producer-Seq "$i"
    done
    ds_read_all "$s"
    assert_body 'm0 m1 m2 m3 '
}

@test "a duplicate is 204 with the highest accepted seq and appends nothing" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p1 0 0 'zero '
    assert_status 200
    produce "$s" p1 0 1 'one '
    assert_status 200
    produce "$s" p1 0 2 'two'
    assert_status 200
    tail=$(header Stream-Next-Offset)

    produce "$s" p1 0 1 'one '
    assert_status 204
    assert_header Producer-Epoch 0
    assert_header Producer-Seq 2
    assert_header Stream-Next-Offset "$tail"

    # a different body under a seen seq is still a duplicate
    produce "$s" p1 0 0 'something else'
    assert_status 204
    assert_header Producer-Seq 2

    produce "$s" p1 0 2 'two'
    assert_status 204

    ds_read_all "$s"
    assert_body 'zero one two'
    assert_header Stream-Next-Offset "$tail"
}

@test "a seq gap is 409 with Producer-Expected-Seq and Producer-Received-Seq" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p1 0 0 'a'
    assert_status 200
    produce "$s" p1 0 1 'b'
    assert_status 200
    produce "$s" p1 0 3 'd'
    assert_status 409
    assert_header Producer-Expected-Seq 2
    assert_header Producer-Received-Seq 3
    # the gap did not advance the state: seq 2 is still the next one
    produce "$s" p1 0 2 'c'
    assert_status 200
    ds_read_all "$s"
    assert_body abc
}

@test "a stale epoch is 403 with the current Producer-Epoch" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p1 1 0 'a'
    assert_status 200
    assert_header Producer-Epoch 1
    produce "$s" p1 0 0 'zombie'
    assert_status 403
    assert_header Producer-Epoch 1
    produce "$s" p1 0 1 'zombie'
    assert_status 403
    ds_read_all "$s"
    assert_body a
}

@test "a new epoch starts at seq 0 (200); a new epoch with seq != 0 is 400" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p1 0 0 'a'
    assert_status 200
    produce "$s" p1 0 1 'b'
    assert_status 200

    produce "$s" p1 1 5 'x'
    assert_status 400
    assert_json_error

    produce "$s" p1 1 0 'c'
    assert_status 200
    assert_header Producer-Epoch 1
    assert_header Producer-Seq 0
    produce "$s" p1 1 1 'd'
    assert_status 200

    ds_read_all "$s"
    assert_body abcd
}

@test "partial producer headers are 400 and leave no state behind" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    ct=(-H 'Content-Type: text/plain' --data-binary x)
    req POST "$s" "${ct[@]}" -H 'Producer-Id: p1'
    assert_status 400
    assert_json_error
    req POST "$s" "${ct[@]}" -H 'Producer-Epoch: 0'
    assert_status 400
    req POST "$s" "${ct[@]}" -H 'Producer-Seq: 0'
    assert_status 400
    req POST "$s" "${ct[@]}" -H 'Producer-Id: p1' -H 'Producer-Epoch: 0'
    assert_status 400
    req POST "$s" "${ct[@]}" -H 'Producer-Id: p1' -H 'Producer-Seq: 0'
    assert_status 400
    req POST "$s" "${ct[@]}" -H 'Producer-Epoch: 0' -H 'Producer-Seq: 0'
    assert_status 400

    ds_read_all "$s"
    assert_body ''
    produce "$s" p1 0 0 'first'
    assert_status 200
}

@test "invalid producer numbers and an empty Producer-Id are 400" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    # an established producer, so that a seq that parses would be a gap (409), not 400
    produce "$s" ps 0 0 'base'
    assert_status 200
    problems=()
    # Epoch and Seq are ^(0|[1-9][0-9]*)$ and at most 2^53-1 (9007199254740991)
    i=0
    for v in 1abc 0xyz 1e3 -1 1.5 ' 1x' 9007199254740992 99999999999999999999999; do
        i=$((i + 1))
        produce "$s" "pe$i" "$v" 0 'x'
        [ "$status_code" = 400 ] || problems+=("Producer-Epoch '$v': expected 400, got $status_code")
        produce "$s" ps 0 "$v" 'x'
        [ "$status_code" = 400 ] || problems+=("Producer-Seq '$v': expected 400, got $status_code")
    done
    # an empty value must be sent as "Name;" with curl
    req POST "$s" -H 'Content-Type: text/plain' -H 'Producer-Id;' -H 'Producer-Epoch: 0' \
        -H 'Producer-Seq: 0' --data-binary x
    [ "$status_code" = 400 ] || problems+=("empty Producer-Id: expected 400, got $status_code")
    [ ${#problems[@]} -eq 0 ] || fail "$(printf '%s\n' "${problems[@]}")"

    ds_read_all "$s"
    assert_body base
    produce "$s" ps 0 1 'ok'
    assert_status 200
}

@test "producers have independent state" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" A 0 0 'A0'
    assert_status 200
    produce "$s" B 0 0 'B0'
    assert_status 200
    produce "$s" A 0 1 'A1'
    assert_status 200
    produce "$s" B 0 0 'B0'
    assert_status 204
    produce "$s" B 0 1 'B1'
    assert_status 200
    ds_read_all "$s"
    assert_body A0B0A1B1
}

@test "producer state is per stream" {
    s1=$(ds_stream)
    s2=$(ds_stream)
    ds_create "$s1" text/plain
    ds_create "$s2" text/plain
    produce "$s1" p 0 0 'x'
    assert_status 200
    produce "$s2" p 0 0 'y'
    assert_status 200
}

@test "producer POST to a missing stream is 404; content-type mismatch is 409" {
    produce "$(ds_stream missing)" p 0 0 'x'
    assert_status 404
    s=$(ds_stream)
    ds_create "$s" application/json
    produce "$s" p 0 0 'x'
    assert_status 409
}

@test "producer on a JSON stream: invalid JSON and [] are 400 without touching state" {
    s=$(ds_stream)
    ds_create "$s" application/json
    h=(-H 'Content-Type: application/json' -H 'Producer-Id: p' -H 'Producer-Epoch: 0' -H 'Producer-Seq: 0')
    req POST "$s" "${h[@]}" --data-binary '{ nope'
    assert_status 400
    req POST "$s" "${h[@]}" --data-binary '[]'
    assert_status 400
    req POST "$s" "${h[@]}" --data-binary ''
    assert_status 400
    req POST "$s" "${h[@]}" --data-binary '[{"a":1},{"b":2}]'
    assert_status 200
    assert_header Producer-Seq 0
    ds_read_all "$s"
    assert_body_json '. == [{"a":1},{"b":2}]'
}

@test "the producer check comes before Stream-Seq: a duplicate with a stale Stream-Seq is 204" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p 0 0 'a' -H 'Stream-Seq: 5'
    assert_status 200
    produce "$s" p 0 0 'a' -H 'Stream-Seq: 5'
    assert_status 204
    produce "$s" p 0 1 'b' -H 'Stream-Seq: 6'
    assert_status 200
    ds_read_all "$s"
    assert_body ab
}

@test "producers and close: append+close 200, duplicate 204, next seq 409 with Stream-Closed" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p 0 0 'body-A' -H 'Stream-Closed: true'
    assert_status 200
    assert_header Stream-Closed true
    assert_header Producer-Seq 0

    produce "$s" p 0 0 'body-B' -H 'Stream-Closed: true'
    assert_status 204
    assert_header Stream-Closed true

    produce "$s" p 0 1 'more'
    assert_status 409
    assert_header Stream-Closed true

    produce "$s" other 0 0 'more'
    assert_status 409
    assert_header Stream-Closed true

    ds_read_all "$s"
    assert_body body-A
}

@test "producer close-only (empty body, no Content-Type) is 204 and advances the seq" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    produce "$s" p 0 0 'data'
    assert_status 200
    req POST "$s" -H 'Producer-Id: p' -H 'Producer-Epoch: 0' -H 'Producer-Seq: 1' -H 'Stream-Closed: true'
    assert_status 204
    assert_header Stream-Closed true
    assert_header Producer-Seq 1
    ds_read_all "$s"
    assert_body data
    assert_header Stream-Closed true
}
