#!/usr/bin/env bats
# GET /metrics: the pool's counters in the Prometheus text format, through nginx.

load helpers

setup_file() { ds_stack_start; }
teardown_file() { ds_stack_stop; }

setup() {
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
}

teardown() { ds_bg_stop; }

# metric NAME_WITH_LABELS: its value in a fresh scrape (empty if absent).
metric() {
    curl -sS --max-time 5 "$DS_URL/metrics" | awk -v k="$1" '$1 == k {print $2; exit}'
}
metric_atleast() { local v; v=$(metric "$1"); [ -n "$v" ] && [ "$v" -ge "$2" ]; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }

@test "metrics: text format 0.0.4, every sample a name, optional labels and a number, every family typed" {
    # Once the runner has published, its figures are checked too (not a wait for
    # anything the test needs: without them the pool's own are checked).
    ds_poll 10 eval 'req GET /metrics && grep -q "^dstream_runner_up" "$DS_BODY"' || true
    req GET /metrics
    assert_status 200
    assert_header_matches Content-Type '^text/plain; version=0\.0\.4'
    # (The runner's figures have two labels and some are seconds with a fraction.)
    bad=$(grep -vE '^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9]+(\.[0-9]+)?)$' "$DS_BODY" || true)
    [ -z "$bad" ] || fail "lines not in the text format: $bad"
    for name in $(grep -v '^#' "$DS_BODY" | sed 's/[{ ].*//' | sort -u); do
        # A histogram's samples are its name with _bucket, _sum and _count.
        base=${name%_bucket}
        base=${base%_sum}
        base=${base%_count}
        if [ "$base" != "$name" ] && grep -q "^# TYPE $base histogram$" "$DS_BODY"; then name=$base; fi
        grep -q "^# TYPE $name \(counter\|gauge\|histogram\)$" "$DS_BODY" || fail "no TYPE line for $name"
        grep -q "^# HELP $name " "$DS_BODY" || fail "no HELP line for $name"
    done
    for name in dstream_processes 'dstream_threads{state="all"}' 'dstream_live_readers{held_by="hub"}' \
        dstream_writes_total dstream_commit_groups_total 'dstream_db_bytes{file="db"}'; do
        grep -qF "$name " "$DS_BODY" || fail "no sample $name"
    done
    req GET /v1/metrics
    assert_status 200
}

@test "metrics: writes, group commits and 4xx responses count up" {
    w0=$(metric dstream_writes_total)
    g0=$(metric dstream_commit_groups_total)
    e0=$(metric 'dstream_http_responses_total{code="4xx"}')
    s=$(ds_stream m)
    ds_create "$s" text/plain
    for i in 1 2 3; do
        req POST "$s" -H 'Content-Type: text/plain' --data-binary "m$i"
        assert_status 204
    done
    req GET "$s?offset=bogus"
    assert_status 400
    ds_poll 5 metric_atleast dstream_writes_total $((w0 + 4)) ||
        fail "writes $(metric dstream_writes_total), want at least $((w0 + 4))"
    metric_atleast dstream_commit_groups_total $((g0 + 1)) || fail "no group commit counted"
    metric_atleast 'dstream_http_responses_total{code="4xx"}' $((e0 + 1)) || fail "the 400 was not counted"
}

@test "metrics: SSE readers waiting on the hub are counted, and their leaving too" {
    s=$(ds_stream live)
    ds_create "$s" text/plain
    h0=$(metric 'dstream_live_readers{held_by="hub"}')
    g0=$(metric dstream_clients_gone_total)
    for i in 1 2 3; do
        spawn "$T/sse.$i" curl -sS -N --max-time 60 "$DS_URL$s?offset=now&live=sse"
    done
    ds_poll 10 metric_atleast 'dstream_live_readers{held_by="hub"}' $((h0 + 3)) ||
        fail "hub readers $(metric 'dstream_live_readers{held_by="hub"}'), want $((h0 + 3))"
    kill "${BG_PIDS[@]}"
    ds_poll 10 metric_is 'dstream_live_readers{held_by="hub"}' "$h0" ||
        fail "hub readers $(metric 'dstream_live_readers{held_by="hub"}') after the clients left, want $h0"
    metric_atleast dstream_clients_gone_total $((g0 + 3)) || fail "clients gone $(metric dstream_clients_gone_total), want $((g0 + 3))"
}

@test "metrics: only GET and HEAD" {
    req POST /metrics -H 'Content-Type: text/plain' --data-binary x
    assert_status 405
    assert_header Allow 'GET, HEAD'
    jq -e '.error.code == "method_not_allowed"' "$DS_BODY" >/dev/null || fail "body: $(cat "$DS_BODY")"
}
