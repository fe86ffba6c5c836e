#!/usr/bin/env bats
# The hash chain through the real stack (docs/events.md, "The hash chain"): the
# Stream-Digest of HEAD, reads and appends is the digest this file recomputes on its
# own with Python's hashlib from the documented formula and the bytes it wrote or read
# back; GET /v1/sessions/{id}/proof says a session's and a fork's; and dstream check
# names the first broken link of a stream whose row was altered in the database
# behind dstream's back (sqlite3, or psql on PostgreSQL), then the next link once the
# altered row's digest is recomputed, while an untouched database checks clean.

load helpers

# A read limit small enough that a read of three 2,500-byte messages stops after two;
# long-polls that time out within a second.
setup_file() { ds_stack_start DSTREAM_RUNNER=0 DSTREAM_READ_MAX=4000 DSTREAM_LONGPOLL_MS=1000; }
teardown_file() { ds_stack_stop; }

setup() { T=$BATS_TEST_TMPDIR; }

DOCS=$BATS_TEST_DIRNAME/../../docs

# chain START_HEX MSGS_FILE: the digest after the messages of MSGS_FILE (a JSON array
# of [offset, base64 of the bytes]), chained from START_HEX, by the formula of
# docs/events.md: SHA-256(previous digest || offset || bytes).
chain() {
    python3 - "$1" "$2" <<'EOF'
import base64, hashlib, json, sys
d = bytes.fromhex(sys.argv[1])
for off, b64 in json.load(open(sys.argv[2])):
    d = hashlib.sha256(d + off.encode("ascii") + base64.b64decode(b64)).digest()
print(d.hex())
EOF
}

ZERO=0000000000000000000000000000000000000000000000000000000000000000

# offset SEQ POS: the server's spelling of an offset.
offset() { printf '%016d_%016d' "$1" "$2"; }

# split_json BODY_FILE OFFSETS... TAIL: the messages of a JSON stream's read (its
# array, each element as stored) as chain's input, cut by their offsets.
split_json() {
    python3 - "$@" <<'EOF'
import base64, json, sys
body = open(sys.argv[1], "rb").read()
offs = sys.argv[2:]
pos = [int(o.split("_")[1]) for o in offs]
out, at = [], 1                   # after "["
for i in range(len(offs) - 1):
    n = pos[i + 1] - pos[i]
    out.append([offs[i], base64.b64encode(body[at:at + n]).decode()])
    at += n + 1                   # the "," between them
print(json.dumps(out))
EOF
}

@test "Stream-Digest on PUT, HEAD and reads is the documented formula over the bytes" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    assert_header Stream-Digest "$ZERO"
    printf 'one' >"$T/m0"
    printf 'two\0bytes' >"$T/m1"
    printf '' >"$T/none"
    req POST "$s" -H 'Content-Type: text/plain' --data-binary @"$T/m0"
    assert_status 204
    echo "[[\"$(offset 0 0)\", \"$(base64 -w0 "$T/m0")\"]]" >"$T/c1.json"
    d1=$(chain "$ZERO" "$T/c1.json")
    refute_header Stream-Digest         # an append's answer does not carry it
    req HEAD "$s"
    assert_header Stream-Digest "$d1"
    req POST "$s" -H 'Content-Type: text/plain' --data-binary @"$T/m1"
    assert_status 204
    echo "[[\"$(offset 1 3)\", \"$(base64 -w0 "$T/m1")\"]]" >"$T/c2.json"
    d2=$(chain "$d1" "$T/c2.json")
    req HEAD "$s"
    assert_header Stream-Digest "$d2"
    # The same bytes by hand, with sha256sum: the previous digest's 32 bytes, the
    # offset, the message.
    by_sum=$({ printf '%s' "$d1" | xxd -r -p; printf '%s' "$(offset 1 3)"; cat "$T/m1"; } | sha256sum | cut -d' ' -f1)
    [ "$by_sum" = "$d2" ] || fail "sha256sum says $by_sum, the server $d2"

    req HEAD "$s"
    assert_status 200
    assert_header Stream-Digest "$d2"
    ds_read_all "$s"
    assert_header Stream-Digest "$d2"
    assert_header Stream-Next-Offset "$(offset 2 12)"
    # A read from the middle ends at the tail: the same digest; a read at the tail too.
    req GET "$s?offset=$(offset 1 3)"
    assert_status 200
    assert_header Stream-Digest "$d2"
    req GET "$s?offset=$(offset 2 12)"
    assert_status 200
    assert_header Stream-Digest "$d2"
    # A long-poll that gets data says the digest at its end; one that waited in vain
    # (its 204, from the process's hub of waiting readers) the tail's, where it stands.
    req GET "$s?offset=$(offset 1 3)&live=long-poll"
    assert_status 200
    assert_header Stream-Digest "$d2"
    req GET "$s?offset=$(offset 2 12)&live=long-poll"
    assert_status 204
    assert_header Stream-Next-Offset "$(offset 2 12)"
    assert_header Stream-Digest "$d2"
}

@test "a read cut short by the read limit says the digest where it stopped" {
    s=$(ds_stream)
    ds_create "$s" text/plain
    big=$(head -c 2500 /dev/zero | tr '\0' a)
    for i in 0 1 2; do
        printf '%s%d' "${big:1}" "$i" >"$T/a$i"
        req POST "$s" -H 'Content-Type: text/plain' --data-binary @"$T/a$i"
        assert_status 204
    done
    echo "[[\"$(offset 0 0)\", \"$(base64 -w0 "$T/a0")\"], [\"$(offset 1 2500)\", \"$(base64 -w0 "$T/a1")\"]]" >"$T/c.json"
    d2=$(chain "$ZERO" "$T/c.json")
    echo "[[\"$(offset 2 5000)\", \"$(base64 -w0 "$T/a2")\"]]" >"$T/c.json"
    d3=$(chain "$d2" "$T/c.json")
    ds_read_all "$s"
    assert_header Stream-Next-Offset "$(offset 2 5000)"
    refute_header Stream-Up-To-Date
    assert_header Stream-Digest "$d2"
    req GET "$s?offset=$(offset 2 5000)"
    assert_status 200
    assert_header Stream-Up-To-Date true
    assert_header Stream-Digest "$d3"
}

@test "GET /v1/sessions/{id}/proof: the session's tail and digest, a fork's parent's digest at the fork point" {
    first_json_block() { awk '/^```json$/ { f = 1; next } f && /^```$/ { exit } f' "$1"; }
    req GET /v1/agents/writer
    if [ "$status_code" != 200 ]; then
        first_json_block "$DOCS/agents.md" >"$T/agent.json"
        req POST /v1/agents -H 'Content-Type: application/json' --data-binary @"$T/agent.json"
        [ "$status_code" = 201 ] || [ "$status_code" = 409 ] || assert_status 201
    fi
    req POST /v1/sessions -H 'Content-Type: application/json' --data-binary '{"agent": "writer", "input": "hi"}'
    assert_status 201
    id=$(jq -r .id "$DS_BODY")
    for m in one two; do
        req POST "/v1/sessions/$id/messages" -H 'Content-Type: application/json' --data-binary "{\"content\": \"$m\"}"
        assert_status 202
    done
    req GET "/v1/sessions/$id/events?offset=-1"
    assert_status 200
    mapfile -t offs < <(jq -r '.[].offset' "$DS_BODY")
    req GET "/v1/stream/sessions/$id?offset=-1"
    assert_status 200
    tail=$(header Stream-Next-Offset)
    split_json "$DS_BODY" "${offs[@]}" "$tail" >"$T/all.json"
    want=$(chain "$ZERO" "$T/all.json")
    assert_header Stream-Digest "$want"
    req GET "/v1/sessions/$id/proof"
    assert_status 200
    assert_header Content-Type application/json
    assert_body_json ".session == \"$id\" and .stream == \"sessions/$id\" and .algorithm == \"sha256\"
        and .offset == \"$tail\" and .digest == \"$want\" and .fork == null"

    # A fork after the first message event: its chain starts from the parent's digest there.
    at=${offs[2]}
    req POST "/v1/sessions/$id/fork" -H 'Content-Type: application/json' --data-binary "{\"at\": \"$at\"}"
    assert_status 201
    fork=$(jq -r .id "$DS_BODY")
    jq -c '.[0:2]' "$T/all.json" >"$T/prefix.json"
    at_digest=$(chain "$ZERO" "$T/prefix.json")
    req GET "/v1/sessions/$fork/events?offset=-1"
    mapfile -t foffs < <(jq -r '.[].offset' "$DS_BODY")
    req GET "/v1/stream/sessions/$fork?offset=-1"
    ftail=$(header Stream-Next-Offset)
    split_json "$DS_BODY" "${foffs[@]}" "$ftail" >"$T/fork.json"
    jq -c '.[2:]' "$T/fork.json" >"$T/own.json"
    fwant=$(chain "$at_digest" "$T/own.json")
    assert_header Stream-Digest "$fwant"
    req GET "/v1/sessions/$fork/proof"
    assert_status 200
    assert_body_json ".offset == \"$ftail\" and .digest == \"$fwant\"
        and .fork == {\"from\": \"$id\", \"offset\": \"$at\", \"digest\": \"$at_digest\"}"
    # Not found, and only GET.
    req GET /v1/sessions/no-such-session/proof
    assert_status 404
    assert_json_error
    req POST "/v1/sessions/$id/proof"
    assert_status 405
    assert_header Allow GET
}

# alter SQL: run SQL on the stack's database behind dstream's back.
alter() { ds_sql "$1" >/dev/null; }

# bytes_sql TEXT / digest_sql HEX: literals of the engine at hand.
bytes_sql() { if ds_is_pg; then printf "convert_to('%s', 'UTF8')" "$1"; else printf "CAST('%s' AS BLOB)" "$1"; fi; }
digest_sql() { if ds_is_pg; then printf "decode('%s', 'hex')" "$1"; else printf "x'%s'" "$1"; fi; }

@test "dstream check: clean when untouched; an altered message names its stream and offset; a recomputed digest breaks the next link" {
    name=$(ds_name t)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    for m in aaa bbb ccc ddd; do ds_append "$s" text/plain "$m"; done
    other=$(ds_stream)
    ds_create "$other" text/plain
    ds_append "$other" text/plain zzz
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_success
    assert_output "check: $DS_DB: ok"

    where="stream = (SELECT id FROM streams WHERE path = '$name')"
    alter "UPDATE messages SET data = $(bytes_sql cXc) WHERE $where AND seq = 2"
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_failure 1
    assert_line "problem: hash chain broken: path=$name offset=$(offset 2 6)"
    assert_line "check: $DS_DB: 1 problem"

    # Its digest recomputed from the one before it: that link holds, the next breaks.
    printf 'aaa' >"$T/a"
    printf 'bbb' >"$T/b"
    printf 'cXc' >"$T/c"
    echo "[[\"$(offset 0 0)\", \"$(base64 -w0 "$T/a")\"], [\"$(offset 1 3)\", \"$(base64 -w0 "$T/b")\"],
           [\"$(offset 2 6)\", \"$(base64 -w0 "$T/c")\"]]" >"$T/c.json"
    forged=$(chain "$ZERO" "$T/c.json")
    alter "UPDATE messages SET digest = $(digest_sql "$forged") WHERE $where AND seq = 2"
    run "$DS_BIN/dstream" --db "$DS_DB" check
    assert_failure 1
    assert_line "problem: hash chain broken: path=$name offset=$(offset 3 9)"
    assert_line "check: $DS_DB: 1 problem"
    run "$DS_BIN/dstream" --db "$DS_DB" --json check
    assert_failure 1
    jq -e --arg p "hash chain broken: path=$name offset=$(offset 3 9)" '.ok == false and .problems == [$p]' \
        <<<"$output" >/dev/null || fail "json: $output"
    # A reader of the altered stream sees the forged digest where it stops: the chain
    # it recomputes from what it read differs from the server's at the tail.
    ds_read_all "$s"
    printf 'ddd' >"$T/d"
    echo "[[\"$(offset 0 0)\", \"$(base64 -w0 "$T/a")\"], [\"$(offset 1 3)\", \"$(base64 -w0 "$T/b")\"],
           [\"$(offset 2 6)\", \"$(base64 -w0 "$T/c")\"], [\"$(offset 3 9)\", \"$(base64 -w0 "$T/d")\"]]" >"$T/r.json"
    [ "$body" = aaabbbcXcddd ] || fail "read: $body"
    [ "$(header Stream-Digest)" != "$(chain "$ZERO" "$T/r.json")" ] || fail "the forged chain verified"
}
