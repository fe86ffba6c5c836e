#!/usr/bin/env bats
# Lineage and diff of sessions (docs/events.md "Lineage and diff") through the real
# stack: the runner answers chats from the mock provider, each reply naming the
# message it answers. A chat (r) is forked twice (f1 after its first reply, f2 at its
# end) and f1 again (f1a, a fork of a fork):
#
#     r ── f1 (at r's first reply; says "three") ── f1a (at f1's end)
#       └─ f2 (at r's end)
#
# GET /v1/sessions/{id}/lineage shows the whole tree with each fork's position from
# any of its sessions, bounded; GET /v1/sessions/{a}/diff?with={b} names where two
# sessions (or two positions) agree, their first events after it and the difference of
# their states; a token scoped to a prefix sees no other session's id; every mistake
# is a 4xx. The CLI's `dstream lineage` and `dstream diff` print the same.

load runner-helpers

# tree: the chats above, their ids and positions exported for the tests.
tree() {
    curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "$RN_MOCK/__default" \
        --data-binary '{"text": "echo: {{user}}", "usage": {"input": 3, "output": 2}}'
    P=lin$(_rn_hex 3)-
    AGENT=$(rn_agent anthropic claude-test-model)
    R=$(rn_session "{\"agent\": \"$AGENT\", \"id\": \"${P}r\"}") || return 1
    rn_say "$R" one && rn_wait "$R" '.status == "completed" and (.messages | length) == 2' || return 1
    POS1=$(jq -r .position "$DS_BODY")
    rn_say "$R" two && rn_wait "$R" '.status == "completed" and (.messages | length) == 4' || return 1
    RTAIL=$(jq -r .position "$DS_BODY")
    fork "$R" "{\"at\": \"$POS1\", \"id\": \"${P}f1\"}" && F1=${P}f1 || return 1
    rn_say "$F1" three && rn_wait "$F1" '.status == "completed" and (.messages | length) == 4' || return 1
    F1TAIL=$(jq -r .position "$DS_BODY")
    fork "$R" "{\"id\": \"${P}f2\"}" && F2=${P}f2 || return 1
    fork "$F1" "{\"id\": \"${P}f1a\"}" && F1A=${P}f1a || return 1
    export P AGENT R F1 F2 F1A POS1 RTAIL F1TAIL
}

# fork ID BODY: POST /v1/sessions/ID/fork (201 or fail).
fork() {
    req POST "/v1/sessions/$1/fork" -H 'Content-Type: application/json' --data-binary "$2"
    [ "$status_code" = 201 ] || { echo "fork: $status_code $body" >&2; return 1; }
}

# The requests of setup_file keep their answers in the file's own directory.
setup_file() {
    BATS_TEST_TMPDIR=$BATS_FILE_TMPDIR
    rn_start && rn_test_setup && tree
}
teardown_file() { rn_stop; }
setup() { rn_test_setup; T=$BATS_TEST_TMPDIR; }
teardown() { rn_test_teardown; }

# check FILTER [jq args...]: the last response body satisfies FILTER.
check() {
    local f=$1
    shift
    jq -e "$@" "$f" "$DS_BODY" >/dev/null || fail "$(printf 'not: %s\nbody: %s' "$f" "$(cat "$DS_BODY")")"
}

# err STATUS CODE: the last response is STATUS with the JSON error CODE.
err() { assert_status "$1" && assert_json_error "$2"; }

@test "lineage: the whole tree from any of its sessions, with each fork's position" {
    for id in "$R" "$F1" "$F2" "$F1A"; do
        req GET "/v1/sessions/$id/lineage"
        assert_status 200
        check '.id == $id and .sessions == 4 and .truncated == false and .limit == 200' --arg id "$id"
        check '.root.id == $r and .root.forkedAt == null and .root.status == "completed" and .root.agent == $agent
            and ([.root.children[].id] == [$f1, $f2])' \
            --arg r "$R" --arg f1 "$F1" --arg f2 "$F2" --arg agent "$AGENT"
        check '.root.children[0] | .forkedAt == $pos1 and .forkedAtEvent == ($pos1[0:16] | tonumber)
            and .status == "completed" and (.createdAt | test("^20[0-9-]+T"))
            and ([.children[].id] == [$f1a]) and .children[0].forkedAt == $f1tail and .children[0].children == []' \
            --arg pos1 "$POS1" --arg f1a "$F1A" --arg f1tail "$F1TAIL"
        check '.root.children[1] | .forkedAt == $rtail and .children == []' --arg rtail "$RTAIL"
        check '[.. | objects | select(has("hidden") or has("deleted"))] == []'
    done

    # Bounded: two sessions looked at, from the fork of the fork: its walk up stops at
    # f1, which is shown as the top (a fork: forkedAt set), marked cut.
    req GET "/v1/sessions/$F1A/lineage?limit=2"
    assert_status 200
    check '.truncated == true and .sessions == 2 and .root.id == $f1 and .root.forkedAt == $pos1
        and .root.children[0].id == $f1a and .root.children[0].truncated == true' \
        --arg f1 "$F1" --arg f1a "$F1A" --arg pos1 "$POS1"
    # From the root, limit 3: r, f1, f2 (f1a not looked at): f1 says its forks were not.
    req GET "/v1/sessions/$R/lineage?limit=3"
    assert_status 200
    check '.truncated == true and .sessions == 3 and ([.root.children[].id] == [$f1, $f2])
        and .root.children[0].truncated == true and .root.children[0].children == []' --arg f1 "$F1" --arg f2 "$F2"
}

@test "lineage: a deleted session whose forks remain is marked deleted; errors" {
    mid=${P}mid
    fork "$F2" "{\"id\": \"$mid\"}"
    fork "$mid" "{\"id\": \"${P}leaf\"}"
    req DELETE "/v1/sessions/$mid"
    assert_status 204
    req GET "/v1/sessions/${P}leaf/lineage"
    assert_status 200
    check '.root.id == $r and .sessions == 6' --arg r "$R"
    check '.root.children[1].children[0] | .id == $mid and .deleted == true and .children[0].id == $leaf' \
        --arg mid "$mid" --arg leaf "${P}leaf"
    # A deleted session has no lineage of its own; an unknown one neither.
    req GET "/v1/sessions/$mid/lineage"
    err 404 not_found
    req GET "/v1/sessions/${P}nosuch/lineage"
    err 404 not_found
    for l in 0 1001 x 1.5 ''; do
        req GET "/v1/sessions/$R/lineage?limit=$l"
        err 400 bad_limit
    done
    req GET "/v1/sessions/$R/lineage?limit=1&limit=2"
    err 400 bad_limit
    req POST "/v1/sessions/$R/lineage"
    assert_status 405
    req DELETE "/v1/sessions/${P}leaf"
    assert_status 204
}

@test "diff: a fork against its parent names the fork point, the first differing events and the state paths" {
    req GET "/v1/sessions/$F1/diff?with=$R"
    assert_status 200
    # They agree up to the fork point (their shared history) and part at once: f1's
    # "three" against r's "two".
    check '.shared == $pos1 and .compared == 0 and .same == false and .truncated == false' --arg pos1 "$POS1"
    check '.a.id == $f1 and .a.at == $f1tail and .b.id == $r and .b.at == $rtail and .b.until == $pos1' \
        --arg f1 "$F1" --arg r "$R" --arg f1tail "$F1TAIL" --arg rtail "$RTAIL" --arg pos1 "$POS1"
    # f1's first event after it is its message (its session:forked, at the fork
    # point, is the fork's own marker: not compared).
    check '.a.until == .a.first[0].offset and (.a.until[0:16] | tonumber) == ($pos1[0:16] | tonumber) + 1' --arg pos1 "$POS1"
    check '.a.first[0].type == "message:user" and .a.first[0].payload.content == "three"
        and .b.first[0].type == "message:user" and .b.first[0].payload.content == "two"
        and .b.first[0].offset == $pos1 and (.a.first | length) == 3 and (.b.first | length) == 3' --arg pos1 "$POS1"
    # The states: the second exchange differs, path by path.
    check '.state.truncated == false and (.state.changes | map(select(.path == "messages[2].content"))
        == [{"path": "messages[2].content", "before": "three", "after": "two"}])'
    check '.state.changes | map(select(.path == "messages[3].content")) | .[0].before == "echo: three" and .[0].after == "echo: two"'
    # Ids and positions are not differences: no message's offset or requestId.
    check '[.state.changes[].path | select(test("[.](offset|requestId)$"))] == []'
    # The other way round: the sides swap.
    req GET "/v1/sessions/$R/diff?with=$F1&context=1"
    assert_status 200
    check '.shared == $pos1 and .a.until == $pos1 and (.a.first | length) == 1 and .a.first[0].payload.content == "two"
        and (.state.changes | map(select(.path == "messages[2].content")) | .[0].before == "two")' --arg pos1 "$POS1"

    # A fork at the end with nothing of its own: the histories are the same.
    req GET "/v1/sessions/$F2/diff?with=$R"
    assert_status 200
    check '.same == true and .shared == $rtail and .a.first == [] and .b.first == [] and .b.until == $rtail' --arg rtail "$RTAIL"
    # Cousins (f1a under f1, f2 under r) share r's history up to f1's fork point.
    req GET "/v1/sessions/$F1A/diff?with=$F2&context=0"
    assert_status 200
    check '.shared == $pos1 and .same == false and .a.first == [] and .b.first == []' --arg pos1 "$POS1"
}

@test "diff: at positions of one session and of two" {
    # r at its first reply against r at its end: the second exchange is all b has more.
    req GET "/v1/sessions/$R/diff?with=$R&at=$POS1"
    assert_status 200
    check '.shared == $pos1 and .a.at == $pos1 and .a.until == $pos1 and .a.first == []
        and .b.until == $pos1 and .b.first[0].payload.content == "two" and .same == false' --arg pos1 "$POS1"
    check '.state.changes | map(select(.path == "messages[2]")) | length == 1 and (.[0] | has("before") | not)
        and .[0].after.content == "two"'
    check '.state.changes | map(select(.path == "messages[3]")) | .[0].after.content == "echo: two"'
    # The same position on both sides: nothing differs.
    req GET "/v1/sessions/$R/diff?with=$R&at=$POS1&withAt=$POS1"
    assert_status 200
    check '.same == true and .state.changes == [] and .a.first == [] and .b.first == []'
    # f1 at the fork point against r there: the same state (f1's own marker apart).
    req GET "/v1/sessions/$F1/diff?with=$R&at=$POS1&withAt=$POS1"
    assert_status 200
    check '.same == true and .shared == $pos1 and (.state.changes | map(.path) | map(select(startswith("messages"))) == [])' \
        --arg pos1 "$POS1"
    # -1: the start of both.
    req GET "/v1/sessions/$F1/diff?with=$R&at=-1&withAt=-1"
    assert_status 200
    check '.same == true and .shared == null and .a.at == .b.at'
}

@test "diff: errors are 4xx with the JSON error" {
    req GET "/v1/sessions/$R/diff"
    err 400 bad_with
    for w in '' 'a%2Fb' "$(printf 'x%.0s' {1..64})"; do
        req GET "/v1/sessions/$R/diff?with=$w"
        err 400 bad_with
    done
    req GET "/v1/sessions/$R/diff?with=$F1&with=$F2"
    err 400 bad_with
    req GET "/v1/sessions/$R/diff?with=${P}nosuch"
    err 404 not_found
    check '.error.message | contains($id)' --arg id "${P}nosuch"
    req GET "/v1/sessions/${P}nosuch/diff?with=$R"
    err 404 not_found
    for at in now garbage 0000000000000001 ''; do
        req GET "/v1/sessions/$R/diff?with=$F1&at=$at"
        err 400 bad_offset
        req GET "/v1/sessions/$R/diff?with=$F1&withAt=$at"
        err 400 bad_offset
    done
    # Beyond the last event; a position of another stream (its byte part differs).
    req GET "/v1/sessions/$R/diff?with=$F1&at=9999999999999999_0000000000000000"
    err 400 bad_offset
    check '.error.message | contains("at is beyond")'
    req GET "/v1/sessions/$R/diff?with=$F1&withAt=$RTAIL"
    err 400 bad_offset
    check '.error.message | startswith("withAt")'
    for c in -1 21 x; do
        req GET "/v1/sessions/$R/diff?with=$F1&context=$c"
        err 400 bad_context
    done
}

@test "scopes: a token scoped to a prefix sees no other session's id in a lineage or a diff" {
    # Under prefix ${P}s: sr (root, hidden), sf1 (readable), sx2 (hidden) with its fork
    # sf2a (readable), sy3 (hidden, nothing readable below: left out).
    local s=${P}s
    rn_session "{\"agent\": \"$AGENT\", \"id\": \"${s}r\"}" >/dev/null
    fork "${s}r" "{\"id\": \"${s}f1\"}"
    fork "${s}r" "{\"id\": \"${s}x2\"}"
    fork "${s}r" "{\"id\": \"${s}y3\"}"
    fork "${s}x2" "{\"id\": \"${s}f2a\"}"
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "lin$(_rn_hex 3)" --scope "sessions:read:${s}f" 2>/dev/null | tail -n 1)
    direct=$(cat "$DS_DIR/url-direct")
    req GET "$direct/v1/sessions/${s}f1/lineage" -H "Authorization: Bearer $tok"
    assert_status 200
    for hidden in "${s}r" "${s}x2" "${s}y3"; do
        ! grep -q "$hidden\"" "$DS_BODY" || fail "the lineage names $hidden: $(cat "$DS_BODY")"
    done
    check '.sessions == 2 and (.root | keys) == ["children", "hidden"] and (.root.children | length) == 2
        and (.root.children[0] | keys == ["agent", "children", "createdAt", "forkedAt", "forkedAtEvent", "id",
                                          "status", "workflow"] and .id == $f1 and .agent == $agent)
        and .root.children[1] == {"hidden": true, "children": [.root.children[1].children[0]]}
        and (.root.children[1].children[0] | .id == $f2a and (.forkedAt | type) == "string")' \
        --arg f1 "${s}f1" --arg f2a "${s}f2a" --arg agent "$AGENT"
    # The admin sees all five.
    req GET "$direct/v1/sessions/${s}f1/lineage" -H "Authorization: Bearer $(cat "$DS_DIR/admin.token")"
    check '.sessions == 5 and .root.id == $r' --arg r "${s}r"

    # A diff needs read on both: a session out of scope is 403 whether it exists or not.
    req GET "$direct/v1/sessions/${s}f1/diff?with=${s}f2a" -H "Authorization: Bearer $tok"
    assert_status 200
    ! grep -q "${s}r\"\\|${s}x2\"" "$DS_BODY" || fail "the diff names a hidden session: $(cat "$DS_BODY")"
    req GET "$direct/v1/sessions/${s}f1/diff?with=${s}r" -H "Authorization: Bearer $tok"
    err 403 forbidden
    req GET "$direct/v1/sessions/${s}f1/diff?with=${s}nosuch" -H "Authorization: Bearer $tok"
    err 403 forbidden
    req GET "$direct/v1/sessions/${s}fnosuch/diff?with=${s}f1" -H "Authorization: Bearer $tok"
    err 404 not_found
    req GET "$direct/v1/sessions/${s}r/diff?with=${s}f1" -H "Authorization: Bearer $tok"
    err 403 forbidden
    req GET "$direct/v1/sessions/${s}r/lineage" -H "Authorization: Bearer $tok"
    err 403 forbidden
    req GET "$direct/v1/sessions/${s}f1/lineage"
    assert_status 401
}

@test "cli: dstream lineage and dstream diff, over HTTP and with --db, as the API says" {
    rn_cli_env
    D=$DS_BIN/dstream
    run --separate-stderr "$D" lineage "$F1A"
    assert_success
    # The tree from the root, the session asked about marked, each fork's event.
    [ "${lines[0]%%  *}" = "$R" ] || fail "first line: ${lines[0]}"
    [[ ${lines[1]} == "|- $F1  completed  "*"forked at event $((10#${POS1:0:16})) ($POS1)" ]] || fail "f1: ${lines[1]}"
    [[ ${lines[2]} == "|  \`- $F1A  "*"forked at event $((10#${F1TAIL:0:16})) ($F1TAIL)  <-" ]] || fail "f1a: ${lines[2]}"
    [[ ${lines[3]} == "\`- $F2  "* ]] || fail "f2: ${lines[3]}"
    run --separate-stderr "$D" lineage "$F1A" --json
    assert_success
    req GET "/v1/sessions/$F1A/lineage"
    [ "$(jq -cS . <<<"$output")" = "$(jq -cS . "$DS_BODY")" ] || fail "--json differs from the API: $output"
    run --separate-stderr "$D" --db "$DS_DB" lineage "$F1A" --json
    assert_success
    [ "$(jq -cS . <<<"$output")" = "$(jq -cS . "$DS_BODY")" ] || fail "--db differs from the API: $output"
    run --separate-stderr "$D" lineage "$R" --limit 2
    assert_success
    assert_output --partial "(cut at 2 sessions looked at: --limit)"

    run --separate-stderr "$D" diff "$F1" "$R"
    assert_success
    assert_line "shared history: $POS1; then 0 events agree"
    assert_line --regexp '^  a [0-9_]+ message:user \{"content":"three"'
    assert_line --regexp '^  b [0-9_]+ message:user \{"content":"two"'
    assert_line '  messages[2].content: "three" -> "two"'
    run --separate-stderr "$D" diff "$F2" "$R"
    assert_success
    assert_line "the events agree to the end of both"
    for db in "" "--db $DS_DB"; do
        # shellcheck disable=SC2086 # db is words
        run --separate-stderr "$D" $db diff "$R" "$R" --at "$POS1" --context 1 --json
        assert_success
        req GET "/v1/sessions/$R/diff?with=$R&at=$POS1&context=1"
        [ "$(jq -cS . <<<"$output")" = "$(jq -cS . "$DS_BODY")" ] || fail "diff ${db:-over HTTP} differs from the API: $output"
        # shellcheck disable=SC2086
        run --separate-stderr "$D" $db diff "$R" "${P}nosuch"
        assert_failure 3
        # shellcheck disable=SC2086
        run --separate-stderr "$D" $db diff "$R" "$F1" --with-at 9999999999999999_0000000000000000
        assert_failure 5
        # shellcheck disable=SC2086
        run --separate-stderr "$D" $db lineage "${P}nosuch"
        assert_failure 3
    done
    run --separate-stderr "$D" diff "$R"
    assert_failure 2
    run --separate-stderr "$D" lineage "$R" --limit 0
    assert_failure 2
}
