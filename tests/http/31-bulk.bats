#!/usr/bin/env bats
# Session labels and bulk operations through the real stack (nginx, the pool, the
# runner on the mock provider): labels set at creation, returned, filtered on in the
# list (and the CLI), refused when malformed; POST /v1/sessions/cancel, /delete and
# /retry on a filter (status, agent, workflow, labels, createdBefore/After): a dry
# run changes nothing, a cancel by label, a delete by status and creation time, a
# retry of failed chats and a failed workflow (the mock's 400) whose forks run and
# finish, a scoped token's call that touches only its sessions, limit with next, and
# every malformed filter a 400.
#
# One stack for the file; each test gives its sessions a label of its own (run=<name>)
# and filters on it, so that no test sees another's sessions.

load runner-helpers

setup_file() { rn_start DSTREAM_BULK_RATE=1000; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
    RUN=r$(_rn_hex 4)
}
teardown() { rn_test_teardown; }

# post PATH JSON [curl args...]: POST a JSON body (as the admin, through the proxy).
post() {
    local path=$1 data=$2
    shift 2
    req POST "$path" -H 'Content-Type: application/json' --data-binary "$data" "$@"
}

# as TOKEN METHOD PATH [curl args...]: a request straight to the pool with TOKEN.
as() {
    local tok=$1 method=$2 path=$3
    shift 3
    req "$method" "$(cat "$DS_DIR/url-direct")$path" -H "Authorization: Bearer $tok" "$@"
}

quick_reply() { jq -nc --arg t "$1" '{text: $t, usage: {input: 20, output: 5}}'; }

# jb FILTER: jq -r FILTER on the last body.
jb() { jq -r "$1" "$DS_BODY"; }

# labelled AGENT LABELS_JSON [ID]: a chat session with those labels; prints its id.
labelled() {
    local data
    data=$(jq -nc --arg a "$1" --argjson l "$2" --arg id "${3:-}" '{agent: $a, labels: $l} + (if $id == "" then {} else {id: $id} end)')
    rn_session "$data"
}

# ids: the ids of the last bulk answer's done list, sorted, space-separated.
done_ids() { jq -r '[.done[].id] | sort | join(" ")' "$DS_BODY"; }
skipped_ids() { jq -r '[.skipped[].id] | sort | join(" ")' "$DS_BODY"; }
sorted() { printf '%s\n' "$@" | sort | tr '\n' ' ' | sed 's/ $//'; }

@test "labels: set at creation, returned, filtered on in the list, kept by a fork, refused when malformed" {
    local agent a b c f
    agent=$(rn_agent anthropic claude-test-model)
    a=$(labelled "$agent" "{\"run\": \"$RUN\", \"team\": \"red\", \"env\": \"prod\"}")
    b=$(labelled "$agent" "{\"run\": \"$RUN\", \"team\": \"blue\"}")
    c=$(rn_session "{\"agent\": \"$agent\"}")
    # Returned by the creation, GET and the list.
    post /v1/sessions "{\"agent\": \"$agent\", \"labels\": {\"run\": \"$RUN\", \"k/x.y_z-1\": \"a:b@c+d/e.f\"}}"
    assert_status 201
    [ "$(jb '.labels | tojson')" = "{\"k/x.y_z-1\":\"a:b@c+d/e.f\",\"run\":\"$RUN\"}" ] || fail "$body"
    rn_get "$a"
    [ "$(jb '.labels.team + .labels.env')" = redprod ] || fail "$body"
    rn_get "$c"
    [ "$(jb '.labels | tojson')" = '{}' ] || fail "$body"
    req GET "/v1/sessions?label=run:$RUN,team:red"
    assert_status 200
    [ "$(jb '[.sessions[].id] | join(" ")')" = "$a" ] || fail "$body"
    [ "$(jb '.sessions[0].labels.env')" = prod ] || fail "$body"
    req GET "/v1/sessions?label=run:$RUN&agent=$agent&limit=100"
    [ "$(jb '.sessions | length')" = 3 ] || fail "$body"
    req GET "/v1/sessions?label=run:$RUN,team:green"
    [ "$(jb '.sessions | length')" = 0 ] || fail "$body"
    # A fork carries its source's labels.
    post "/v1/sessions/$b/fork" '{}'
    assert_status 201
    f=$(jb .id)
    [ "$(jb .labels.team)" = blue ] || fail "$body"
    req GET "/v1/sessions?label=run:$RUN,team:blue"
    [ "$(jb '[.sessions[].id] | sort | join(" ")')" = "$(sorted "$b" "$f")" ] || fail "$body"
    # Stored durably: in the log's session:created too.
    rn_events "$a" >"$T/ev.json"
    [ "$(jq -r '.[0].payload.labels.team' "$T/ev.json")" = red ] || fail "$(cat "$T/ev.json")"
    # Malformed labels: 400 bad_labels, nothing made.
    local bad
    for bad in '"x"' '[]' '{"a": 1}' '{"": "v"}' '{"a b": "v"}' '{"a": "v,w"}' '{"a": "v w"}' \
        "{\"$(printf 'k%.0s' $(seq 64))\": \"v\"}" "{\"a\": \"$(printf 'v%.0s' $(seq 64))\"}" \
        "$(jq -nc '[range(17) | {key: "k\(.)", value: "v"}] | from_entries')"; do
        post /v1/sessions "{\"agent\": \"$agent\", \"id\": \"$RUN-bad\", \"labels\": $bad}"
        [ "$status_code" = 400 ] && [ "$(jb .error.code)" = bad_labels ] || fail "labels $bad: $status_code $body"
    done
    req GET "/v1/sessions/$RUN-bad"
    assert_status 404
    # Sixteen are fine.
    post /v1/sessions "{\"agent\": \"$agent\", \"labels\": $(jq -nc '[range(16) | {key: "k\(.)", value: "v"}] | from_entries')}"
    assert_status 201
    # The list's label query: key:value pairs, each well-formed.
    for bad in 'run' 'run:a,b' 'a%20b:c' 'a:b%2Cc:d,a:e' ':v'; do
        req GET "/v1/sessions?label=$bad"
        [ "$status_code" = 400 ] && [ "$(jb .error.code)" = bad_label ] || fail "label=$bad: $status_code $body"
    done
    req GET "/v1/sessions?label=a:b&label=c:d"
    assert_status 400
    for bad in 'createdBefore=yesterday' 'createdAfter=-5' 'agent=' ; do
        req GET "/v1/sessions?$bad"
        [ "$status_code" = 400 ] && [ "$(jb .error.code)" = bad_filter ] || fail "$bad: $status_code $body"
    done
}

@test "labels: dstream sessions list --label filters over HTTP and on the database" {
    local agent a
    agent=$(rn_agent anthropic claude-test-model)
    a=$(labelled "$agent" "{\"run\": \"$RUN\", \"team\": \"red\"}")
    labelled "$agent" "{\"run\": \"$RUN\", \"team\": \"blue\"}" >/dev/null
    rn_cli_env
    run "$DS_BIN/dstream" sessions list --label "run:$RUN" --label team:red --json
    [ "$status" -eq 0 ] || fail "$output"
    [ "$(jq -rs 'map(.id) | join(" ")' <<<"$output")" = "$a" ] || fail "$output"
    run "$DS_BIN/dstream" --db "$DS_DB" sessions list --label "run:$RUN,team:red"
    [ "$status" -eq 0 ] || fail "$output"
    [[ $output == *"$a"* ]] && [ "$(grep -c . <<<"$output")" -eq 1 ] || fail "$output"
    run "$DS_BIN/dstream" sessions list --label "bad"
    [ "$status" -eq 5 ] && [[ $output == *bad_label* ]] || fail "$status $output"
    run "$DS_BIN/dstream" --db "$DS_DB" sessions list --label "bad"
    [ "$status" -eq 2 ] || fail "$status $output"
}

@test "bulk: a dry run says what would be done and changes nothing" {
    local agent a b
    agent=$(rn_agent anthropic claude-test-model)
    a=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    b=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    for op in cancel delete; do
        post "/v1/sessions/$op" "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}, \"dryRun\": true}"
        assert_status 200
        [ "$(jb .dryRun)" = true ] && [ "$(jb .action)" = "$op" ] || fail "$body"
        [ "$(done_ids)" = "$(sorted "$a" "$b")" ] || fail "$op: $body"
        [ "$(jb '.count.done')" = 2 ] && [ "$(jb '.next')" = null ] || fail "$body"
    done
    for id in "$a" "$b"; do
        rn_get "$id"
        [ "$(jb .status)" = pending ] || fail "$id: $body"
        rn_events "$id" >"$T/ev.json"
        [ "$(jq -r '[.[].type] | join(" ")' "$T/ev.json")" = session:created ] || fail "$(cat "$T/ev.json")"
    done
}

@test "bulk: cancel by label cancels those sessions only; again, each is skipped with its reason" {
    local agent a b other
    agent=$(rn_agent anthropic claude-test-model)
    a=$(labelled "$agent" "{\"run\": \"$RUN\", \"batch\": \"x\"}")
    b=$(labelled "$agent" "{\"run\": \"$RUN\", \"batch\": \"x\"}")
    other=$(labelled "$agent" "{\"run\": \"$RUN\", \"batch\": \"y\"}")
    post /v1/sessions/cancel "{\"filter\": {\"labels\": {\"run\": \"$RUN\", \"batch\": \"x\"}}}"
    assert_status 200
    [ "$(done_ids)" = "$(sorted "$a" "$b")" ] && [ "$(jb '.skipped | length')" = 0 ] || fail "$body"
    [ "$(jb '[.done[].offset | length > 0] | all')" = true ] || fail "$body"
    rn_wait "$a" '.status == "cancelled"'
    rn_wait "$b" '.status == "cancelled"'
    rn_get "$other"
    [ "$(jb .status)" = pending ] || fail "$body"
    # Again: nothing left to cancel, each skipped and why.
    post /v1/sessions/cancel "{\"filter\": {\"labels\": {\"run\": \"$RUN\", \"batch\": \"x\"}}}"
    assert_status 200
    [ "$(jb '.done | length')" = 0 ] && [ "$(skipped_ids)" = "$(sorted "$a" "$b")" ] || fail "$body"
    [ "$(jb '[.skipped[].reason] | unique | join(" ")')" = finished ] || fail "$body"
    # Through the CLI: the same filter, dry run.
    rn_cli_env
    run "$DS_BIN/dstream" sessions cancel --label "run:$RUN" --label batch:y --dry-run
    [ "$status" -eq 0 ] || fail "$output"
    [[ $output == *"$other"* ]] && [[ $output == *"dry run"* ]] || fail "$output"
    rn_get "$other"
    [ "$(jb .status)" = pending ] || fail "$body"
    run "$DS_BIN/dstream" sessions cancel --label "run:$RUN" --label batch:y
    [ "$status" -eq 0 ] || fail "$output"
    rn_wait "$other" '.status == "cancelled"'
}

@test "bulk: delete by status and createdBefore deletes exactly those" {
    local agent old1 old2 young pend cut
    agent=$(rn_agent anthropic claude-test-model)
    old1=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    pend=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    old2=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    for id in "$old1" "$old2"; do
        post "/v1/sessions/$id/cancel" '{}'
        rn_wait "$id" '.status == "cancelled"'
    done
    rn_get "$old2"
    cut=$(( $(jb .createdMs) + 1 ))
    _now_after() { [ "$(date +%s%3N)" -gt "$1" ]; }
    ds_poll 5 _now_after "$cut"
    young=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    post "/v1/sessions/$young/cancel" '{}'
    rn_wait "$young" '.status == "cancelled"'
    # createdBefore as an RFC 3339 time.
    local when
    when=$(date -u -d "@$((cut / 1000)).$(printf '%03d' $((cut % 1000)))" +%Y-%m-%dT%H:%M:%S.%3NZ)
    post /v1/sessions/delete "{\"filter\": {\"status\": \"cancelled\", \"createdBefore\": \"$when\", \"labels\": {\"run\": \"$RUN\"}}}"
    assert_status 200
    [ "$(done_ids)" = "$(sorted "$old1" "$old2")" ] || fail "$body"
    for id in "$old1" "$old2"; do
        req GET "/v1/sessions/$id"
        assert_status 404
    done
    for id in "$young" "$pend"; do
        req GET "/v1/sessions/$id"
        assert_status 200
    done
    # createdAfter (milliseconds) takes the young one only.
    post /v1/sessions/delete "{\"filter\": {\"createdAfter\": $((cut - 1)), \"labels\": {\"run\": \"$RUN\"}}, \"dryRun\": true}"
    [ "$(done_ids)" = "$young" ] || fail "$body"
    # The CLI: delete what is left of the run.
    rn_cli_env
    run "$DS_BIN/dstream" sessions delete --label "run:$RUN" --status cancelled --json
    [ "$status" -eq 0 ] || fail "$output"
    [ "$(jq -r '[.done[].id] | join(" ")' <<<"$output")" = "$young" ] || fail "$output"
    req GET "/v1/sessions/$young"
    assert_status 404
}

@test "bulk: retry forks each failed chat and workflow from before what failed; the forks run live and finish" {
    local agent wf a b w ok na nb nw
    agent=$(rn_agent anthropic claude-test-model)
    wf=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$wf" --arg a "$agent" '{name: $n, initialState: {},
        phases: [{name: "one", terminal: true, steps: [{kind: "agent", name: "Say", agent: $a,
            prompt: "Say hi.", update: {said: "$output"}}]}]}')"
    a=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    b=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    ok=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    # Three requests fail at once (400: not retried by the runner), one succeeds.
    rn_script '{"replies": [{"status": 400, "errorMessage": "bad one"}, {"status": 400, "errorMessage": "bad two"}, {"status": 400, "errorMessage": "bad three"}]}'
    rn_say "$a" "First question."
    rn_wait "$a" '.status == "failed"'
    rn_say "$b" "Second question."
    rn_wait "$b" '.status == "failed"'
    w=$(rn_session "$(jq -nc --arg w "$wf" --arg r "$RUN" '{workflow: $w, input: {}, labels: {run: $r}}')")
    rn_wait "$w" '.status == "failed"'
    rn_script "$(quick_reply "Fine now.")"
    rn_say "$ok" "Third question."
    rn_wait "$ok" '.status == "completed"'
    # A dry run names each and where it would fork.
    post /v1/sessions/retry "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}, \"dryRun\": true}"
    assert_status 200
    [ "$(done_ids)" = "$(sorted "$a" "$b" "$w")" ] || fail "$body"
    [ "$(jb '[.done[] | has("newId")] | any')" = false ] || fail "$body"
    # The retry: a fork of each, live; the default reply answers them now.
    post /v1/sessions/retry "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}}"
    assert_status 200
    [ "$(done_ids)" = "$(sorted "$a" "$b" "$w")" ] || fail "$body"
    na=$(jq -r --arg id "$a" '.done[] | select(.id == $id) | .newId' "$DS_BODY")
    nb=$(jq -r --arg id "$b" '.done[] | select(.id == $id) | .newId' "$DS_BODY")
    nw=$(jq -r --arg id "$w" '.done[] | select(.id == $id) | .newId' "$DS_BODY")
    rn_wait "$na" '.status == "completed"'
    rn_wait "$nb" '.status == "completed"'
    rn_wait "$nw" '.status == "completed"'
    rn_get "$na"
    [ "$(jb '[.messages[] | .role] | join(" ")')" = "user assistant" ] || fail "$body"
    [ "$(jb '.messages[0].content')" = "First question." ] || fail "$body"
    [ "$(jb '.messages[1].content')" = "Hello from the mock provider." ] || fail "$body"
    [ "$(jb .parent)" = "$a" ] && [ "$(jb .labels.run)" = "$RUN" ] || fail "$body"
    rn_get "$nw"
    [ "$(jb .state.said)" = "Hello from the mock provider." ] || fail "$body"
    # The sources stay failed; a retry again forks them again (they are still failed),
    # but the forks, completed, are not taken.
    rn_get "$a"
    [ "$(jb .status)" = failed ] || fail "$body"
    post /v1/sessions/retry "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}, \"agent\": \"$agent\"}, \"dryRun\": true}"
    [ "$(done_ids)" = "$(sorted "$a" "$b")" ] || fail "$body"
    # The CLI says the new ids.
    rn_cli_env
    run "$DS_BIN/dstream" sessions retry --label "run:$RUN" --workflow "$wf" --json
    [ "$status" -eq 0 ] || fail "$output"
    [ "$(jq -r '.done[0].id' <<<"$output")" = "$w" ] && [ "$(jq -r '.done[0].newId | length > 0' <<<"$output")" = true ] ||
        fail "$output"
    rn_wait "$(jq -r '.done[0].newId' <<<"$output")" '.status == "completed"'
}

@test "bulk: a retry may run another agent (a chat) or another workflow version; an unknown one is refused" {
    local a b wf c w doc nc nw
    a=$(rn_agent anthropic claude-test-model)
    b=$(rn_agent openai gpt-test-model)
    wf=$(ds_name wf)
    doc() { jq -nc --arg n "$wf" --arg a "$a" --arg p "$1" '{name: $n, phases: [{name: "one", terminal: true,
        steps: [{kind: "agent", name: "Say", agent: $a, prompt: $p, update: {said: "$output"}}]}]}'; }
    rn_workflow "$(doc "Version one.")"
    c=$(labelled "$a" "{\"run\": \"$RUN\"}")
    rn_script '{"replies": [{"status": 400}, {"status": 400}]}'
    rn_say "$c" "Which model?"
    rn_wait "$c" '.status == "failed"'
    w=$(rn_session "$(jq -nc --arg w "$wf" --arg r "$RUN" '{workflow: $w, input: {}, labels: {run: $r}}')")
    rn_wait "$w" '.status == "failed"'
    req PUT "/v1/workflows/$wf" -H 'Content-Type: application/json' --data-binary "$(doc "Version two." | jq -c 'del(.name)')"
    [ "$status_code" = 200 ] || [ "$status_code" = 201 ] || fail "PUT: $status_code $body"
    # Refused: an unknown agent or version, a version without the workflow, a malformed one.
    post /v1/sessions/retry "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}, \"agent\": \"no-such-agent\"}"
    [ "$status_code" = 422 ] && [ "$(jb .error.code)" = unknown_agent ] || fail "$status_code $body"
    post /v1/sessions/retry "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}, \"workflowVersion\": 2}"
    [ "$status_code" = 400 ] || fail "$status_code $body"
    post /v1/sessions/retry "{\"filter\": {\"workflow\": \"$wf\"}, \"workflowVersion\": 9}"
    [ "$status_code" = 422 ] && [ "$(jb .error.code)" = unknown_workflow ] || fail "$status_code $body"
    post /v1/sessions/retry "{\"filter\": {\"workflow\": \"$wf\"}, \"workflowVersion\": \"newest\"}"
    [ "$status_code" = 400 ] || fail "$status_code $body"
    post /v1/sessions/cancel "{\"filter\": {\"workflow\": \"$wf\"}, \"agent\": \"$b\"}"
    [ "$status_code" = 400 ] && [ "$(jb .error.code)" = bad_request ] || fail "$status_code $body"
    # Another agent: the chat's fork talks to it (OpenAI's route of the mock); the
    # workflow's session is skipped.
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    post /v1/sessions/retry "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}, \"agent\": \"$b\"}"
    assert_status 200
    [ "$(done_ids)" = "$c" ] && [ "$(jb '.done[0].agent')" = "$b" ] || fail "$body"
    [ "$(jb '.skipped[0].id + " " + .skipped[0].reason')" = "$w not_a_chat" ] || fail "$body"
    nc=$(jb '.done[0].newId')
    rn_wait "$nc" '.status == "completed"'
    rn_get "$nc"
    [ "$(jb .agent)" = "$b" ] && [ "$(jb '.messages[1].content')" = "Hello from the mock provider." ] || fail "$body"
    [ "$(rn_requests | jq -r '[.[].path] | join(" ")')" = /v1/chat/completions ] || fail "$(rn_requests | jq -c '[.[].path]')"
    # The latest version: the workflow's fork runs version 2's prompt.
    curl -fsS -o /dev/null -X DELETE "$RN_MOCK/__requests"
    post /v1/sessions/retry "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}, \"workflow\": \"$wf\"}, \"workflowVersion\": \"latest\"}"
    assert_status 200
    [ "$(done_ids)" = "$w" ] && [ "$(jb '.done[0].workflowVersion')" = 2 ] || fail "$body"
    nw=$(jb '.done[0].newId')
    rn_wait "$nw" '.status == "completed"'
    rn_get "$nw"
    [ "$(jb .workflowVersion)" = 2 ] || fail "$body"
    rn_requests | jq -e 'length == 1 and (.[0].body | tostring | contains("Version two."))' >/dev/null ||
        fail "$(rn_requests | jq -c '[.[].body.messages]')"
    rn_get "$w"
    [ "$(jb .workflowVersion)" = 1 ] || fail "the source changed: $body"    # The CLI: --to-agent (a dry run: the chat is still failed).
    rn_cli_env
    run "$DS_BIN/dstream" sessions retry --label "run:$RUN" --to-agent "$b" --dry-run --json
    [ "$status" -eq 0 ] || fail "$output"
    [ "$(jq -r '.done[0].id + " " + .done[0].agent' <<<"$output")" = "$c $b" ] || fail "$output"
}

@test "bulk: a scoped token's call touches only its own sessions, whatever the filter takes" {
    local agent tok ro a1 a2 b1 rb
    agent=$(rn_agent anthropic claude-test-model)
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "bulk-$RUN" --scope "sessions:write:$RUN-a" \
          --scope "sessions:read:$RUN-a" 2>/dev/null | tail -n 1)
    ro=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "bulkro-$RUN" --scope "sessions:read" 2>/dev/null | tail -n 1)
    a1=$(labelled "$agent" "{\"run\": \"$RUN\"}" "$RUN-a1")
    a2=$(labelled "$agent" "{\"run\": \"$RUN\"}" "$RUN-a2")
    b1=$(labelled "$agent" "{\"run\": \"$RUN\"}" "$RUN-b1")
    # Its dry run, cancel and delete see a1 and a2 only: b1 is neither done nor skipped.
    as "$tok" POST /v1/sessions/delete -H 'Content-Type: application/json' \
        -d "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}, \"dryRun\": true}"
    assert_status 200
    [ "$(done_ids)" = "$(sorted "$a1" "$a2")" ] && [ "$(jb '.skipped | length')" = 0 ] || fail "$body"
    as "$tok" POST /v1/sessions/cancel -H 'Content-Type: application/json' -d "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}}"
    assert_status 200
    [ "$(done_ids)" = "$(sorted "$a1" "$a2")" ] || fail "$body"
    rn_wait "$a1" '.status == "cancelled"'
    rn_get "$b1"
    [ "$(jb .status)" = pending ] || fail "$body"
    as "$tok" POST /v1/sessions/delete -H 'Content-Type: application/json' -d "{\"filter\": {\"status\": \"pending\"}}"
    assert_status 200
    [ "$(jb '[.done[].id, .skipped[].id] | map(startswith("'"$RUN"'-a")) | all')" = true ] || fail "$body"
    req GET "/v1/sessions/$b1"
    assert_status 200
    # A retry's fork gets an id under the token's prefix.
    rb=$(labelled "$agent" "{\"run\": \"$RUN\"}" "$RUN-a3")
    rn_script '{"status": 400}'
    rn_say "$rb" "Fail please."
    rn_wait "$rb" '.status == "failed"'
    as "$tok" POST /v1/sessions/retry -H 'Content-Type: application/json' -d "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}}"
    assert_status 200
    [ "$(done_ids)" = "$rb" ] && [[ $(jb '.done[0].newId') == "$RUN-a"* ]] || fail "$body"
    rn_wait "$(jb '.done[0].newId')" '.status == "completed"'
    # Without sessions:write at all: 403.
    for op in cancel delete retry; do
        as "$ro" POST "/v1/sessions/$op" -H 'Content-Type: application/json' -d "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}}"
        assert_status 403
    done
    # A session named like an operation is still read and deleted as a session.
    labelled "$agent" "{\"run\": \"$RUN\"}" retry >/dev/null
    req GET /v1/sessions/retry
    assert_status 200
    [ "$(jb .id)" = retry ] || fail "$body"
    req PUT /v1/sessions/retry
    assert_status 405
    [ "$(header Allow)" = "GET, DELETE, POST" ] || fail "Allow: $(header Allow)"
    req DELETE /v1/sessions/retry
    assert_status 204
}

@test "bulk: at most limit sessions a call; next goes on until every one was taken once" {
    local agent ids=() id seen="" next rounds=0
    agent=$(rn_agent anthropic claude-test-model)
    for _ in 1 2 3 4 5; do ids+=("$(labelled "$agent" "{\"run\": \"$RUN\"}")"); done
    next=null
    while :; do
        rounds=$((rounds + 1))
        [ "$rounds" -le 5 ] || fail "more rounds than sessions"
        local cur=""
        [ "$next" = null ] || cur=", \"cursor\": \"$next\""
        post /v1/sessions/cancel "{\"filter\": {\"labels\": {\"run\": \"$RUN\"}}, \"limit\": 2$cur}"
        assert_status 200
        [ "$(jb '.done | length')" -le 2 ] || fail "$body"
        [ "$(jb '.count.matched')" = "$(jb '.done | length')" ] || fail "$body"
        seen="$seen $(jb '[.done[].id] | join(" ")')"
        next=$(jb .next)
        [ "$next" != null ] || break
    done
    [ "$rounds" = 3 ] || fail "rounds: $rounds"
    # shellcheck disable=SC2086
    [ "$(sorted $seen)" = "$(sorted "${ids[@]}")" ] || fail "seen: $seen, made: ${ids[*]}"
    for id in "${ids[@]}"; do rn_wait "$id" '.status == "cancelled"'; done
}

@test "bulk: a malformed request is a 400 that names the mistake, and nothing is done" {
    local agent a
    agent=$(rn_agent anthropic claude-test-model)
    a=$(labelled "$agent" "{\"run\": \"$RUN\"}")
    local lab="\"labels\": {\"run\": \"$RUN\"}"
    check400() {
        post "/v1/sessions/$1" "$2"
        [ "$status_code" = 400 ] && [ "$(jb .error.code)" = "$3" ] || fail "$1 $2: $status_code $body"
    }
    check400 delete '{}' bad_filter
    check400 delete '{"filter": {}}' bad_filter
    check400 cancel '{"filter": "x"}' bad_filter
    check400 cancel "{\"filter\": {$lab, \"colour\": \"red\"}}" bad_filter
    check400 cancel "{\"filter\": {$lab, \"status\": \"asleep\"}}" bad_filter
    check400 cancel "{\"filter\": {$lab, \"status\": 3}}" bad_filter
    check400 cancel "{\"filter\": {$lab, \"agent\": \"\"}}" bad_filter
    check400 cancel "{\"filter\": {$lab, \"createdBefore\": \"yesterday\"}}" bad_filter
    check400 cancel "{\"filter\": {$lab, \"createdAfter\": -1}}" bad_filter
    check400 cancel "{\"filter\": {\"labels\": {\"run\": 5}}}" bad_filter
    check400 cancel "{\"filter\": {\"labels\": [\"run\"]}}" bad_filter
    check400 retry "{\"filter\": {$lab, \"status\": \"completed\"}}" bad_filter
    check400 cancel "{\"filter\": {$lab}, \"limit\": 0}" bad_limit
    check400 cancel "{\"filter\": {$lab}, \"limit\": 101}" bad_limit
    check400 cancel "{\"filter\": {$lab}, \"limit\": \"2\"}" bad_limit
    check400 cancel "{\"filter\": {$lab}, \"cursor\": \"garbage\"}" bad_cursor
    check400 cancel "{\"filter\": {$lab}, \"cursor\": 7}" bad_cursor
    check400 cancel "{\"filter\": {$lab}, \"dryRun\": \"yes\"}" bad_request
    check400 cancel "{\"filter\": {$lab}, \"force\": true}" bad_request
    post /v1/sessions/cancel 'not json'
    assert_status 400
    rn_get "$a"
    [ "$(jb .status)" = pending ] || fail "$body"
    rn_events "$a" >"$T/ev.json"
    [ "$(jq length "$T/ev.json")" = 1 ] || fail "$(cat "$T/ev.json")"
    # The CLI refuses a call without a filter, before asking.
    rn_cli_env
    run "$DS_BIN/dstream" sessions delete
    [ "$status" -eq 2 ] || fail "$status $output"
}
