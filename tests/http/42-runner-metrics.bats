#!/usr/bin/env bats
# The runner's figures in GET /metrics: it publishes them through the database
# (runner_stats, lib/rstats) and the pool serves them with the sessions by status.

load runner-helpers

setup_file() { rn_start; }
teardown_file() { rn_stop; }
setup() {
    rn_test_setup
    T=$BATS_TEST_TMPDIR
}
teardown() { rn_test_teardown; }

# metric NAME_AND_LABELS: the value of one sample of the last scrape ($T/metrics).
metric() { awk -v k="$1" '$1 == k { print $2; found = 1 } END { exit !found }' "$T/metrics"; }

scrape() {
    curl -fsS --max-time 10 "$DS_URL/metrics" >"$T/metrics"
}

# figures_reach REQUESTS RETRIES FAILURES: the runner has published at least these.
figures_reach() {
    local id
    id=$(cat "$T/runner.id")
    scrape || return 1
    [ "$(metric "dstream_runner_requests_total{runner=\"$id\"}")" -ge "$1" ] &&
        [ "$(metric "dstream_runner_retries_total{runner=\"$id\"}")" -ge "$2" ] &&
        [ "$(metric "dstream_runner_request_failures_total{runner=\"$id\"}")" -ge "$3" ] &&
        [ "$(metric "dstream_runner_requests_in_flight{runner=\"$id\"}")" = 0 ]
}

@test "/metrics shows the runner alive, its attempts, retries and failures, and sessions by status" {
    # The runner's id: the stack's setting, or the host name.
    id=$(sed -n 's/.*started (owner \([^,]*\),.*/\1/p' "$DS_DIR/logs/runner.log" | tail -n 1)
    [ -n "$id" ] || fail "no start line in the runner log"
    echo "$id" >"$T/runner.id"
    ds_poll 10 eval 'scrape && metric "dstream_runner_up{runner=\"$id\"}" >/dev/null' ||
        fail "no runner figures: $(grep runner "$T/metrics")"
    [ "$(metric "dstream_runner_up{runner=\"$id\"}")" = 1 ]
    starts=$(metric "dstream_runner_starts_total{runner=\"$id\"}")
    [ "$starts" -ge 1 ]
    before_req=$(metric "dstream_runner_requests_total{runner=\"$id\"}")
    before_retry=$(metric "dstream_runner_retries_total{runner=\"$id\"}")
    before_fail=$(metric "dstream_runner_request_failures_total{runner=\"$id\"}")
    by_status() { metric "dstream_runner_retries_by_status_total{runner=\"$id\",status=\"$1\"}" || echo 0; }
    before_500=$(by_status 500)
    before_529=$(by_status 529)

    # A reply that fails with 500, then 529, and then completes: three attempts,
    # two retries (one for each status), two failures.
    agent=$(rn_agent anthropic claude-test-model)
    sid=$(rn_session "{\"agent\": \"$agent\"}")
    rn_script '{"replies": [{"status": 500}, {"status": 529}, {"text": "Fine now.", "usage": {"input": 3, "output": 2}}]}'
    rn_say "$sid" "Please answer."
    rn_wait "$sid" '.status == "completed" and .request == null and (.messages | length) == 2'
    ds_poll 10 figures_reach $((before_req + 3)) $((before_retry + 2)) $((before_fail + 2)) ||
        fail "figures: $(grep -E '^dstream_runner_(requests|retries|request_failures)' "$T/metrics")"
    ds_poll 10 eval 'scrape && [ "$(by_status 529)" = $((before_529 + 1)) ]' ||
        fail "by status: $(grep -E '^dstream_runner_retries_by_status' "$T/metrics")"
    [ "$(by_status 500)" = $((before_500 + 1)) ]
    grep -q '^# TYPE dstream_runner_retries_by_status_total counter$' "$T/metrics"
    grep -E '^dstream_runner_' "$T/metrics" | grep -v _bucket >&3 || true
    # By model (a file beside the database): the two attempts, the tokens and cost
    # of the one that completed (pricing: 3 and 15 USD per million), their durations
    # and the completed one's time to first output.
    m="runner=\"$id\",model=\"claude-test-model\""
    model_figures() {
        scrape && [ "$(metric "dstream_runner_model_requests_total{$m}")" -ge 2 ] &&
            [ "$(metric "dstream_runner_tokens_total{$m,kind=\"output\"}")" -ge 2 ] &&
            [ "$(metric "dstream_runner_request_seconds_count{$m}")" -ge 2 ] &&
            [ "$(metric "dstream_runner_first_token_seconds_count{$m}")" -ge 1 ]
    }
    ds_poll 10 model_figures || fail "by model: $(grep -E 'model=' "$T/metrics")"
    [ "$(metric "dstream_runner_model_failures_total{$m}")" -ge 1 ]
    awk -v c="$(metric "dstream_runner_cost_usd_total{$m}")" 'BEGIN { exit !(c > 0) }'
    [ "$(metric "dstream_runner_request_seconds_bucket{$m,le=\"+Inf\"}")" = "$(metric "dstream_runner_request_seconds_count{$m}")" ]
    [ "$(grep -c '^# TYPE dstream_runner_tokens_total counter$' "$T/metrics")" = 1 ]
    # The sessions by status, from the database.
    assert_equal "$(grep -c '^# TYPE dstream_sessions gauge$' "$T/metrics")" 1
    [ "$(metric 'dstream_sessions{status="completed"}')" -ge 1 ]
    # The loop's timestamp is recent. (The runner forgets a session once nothing is
    # in flight or scheduled for it, so the count of sessions it keeps is only there.)
    ts=$(metric "dstream_runner_last_loop_timestamp_seconds{runner=\"$id\"}")
    now=$(date +%s)
    [ "${ts%.*}" -ge $((now - 10)) ] || fail "last loop at $ts, now $now"
    [ "$(metric "dstream_runner_sessions{runner=\"$id\",state=\"known\"}")" -ge 0 ]
}

@test "a runner restart is counted and the stopped runner shows as down meanwhile" {
    id=$(sed -n 's/.*started (owner \([^,]*\),.*/\1/p' "$DS_DIR/logs/runner.log" | tail -n 1)
    echo "$id" >"$T/runner.id"
    ds_poll 10 eval 'scrape && metric "dstream_runner_starts_total{runner=\"$id\"}" >/dev/null'
    starts=$(metric "dstream_runner_starts_total{runner=\"$id\"}")
    rn_runner_signal TERM
    ds_poll 15 eval 'scrape && [ "$(metric "dstream_runner_up{runner=\"$id\"}")" = 0 ]' ||
        fail "still up: $(grep runner_up "$T/metrics")"
    rn_runner_start
    ds_poll 10 eval 'scrape && [ "$(metric "dstream_runner_starts_total{runner=\"$id\"}")" = $((starts + 1)) ] &&
        [ "$(metric "dstream_runner_up{runner=\"$id\"}")" = 1 ]' ||
        fail "after restart: $(grep -E 'runner_(up|starts)' "$T/metrics")"
}
