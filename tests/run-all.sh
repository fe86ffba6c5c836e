#!/usr/bin/env bash
# Run every suite (static checks, unit, fuzz smoke, HTTP on SQLite and on PostgreSQL,
# conformance on SQLite and on PostgreSQL) and print one total.
#
#   B=build tests/run-all.sh build/tests/test_buf build/tests/test_json ...
#
# The arguments are the unit test binaries. Each suite runs even when one before
# it failed; its output is echoed and its last line ("<suite>: N passed, N failed")
# is collected. The run ends with each suite's summary and then exactly one line
# "N passed, N failed" totalled over them all; the exit status is 0 only if every
# suite succeeded and nothing failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
export B=${B:-build}

total_passed=0
total_failed=0
status=0
summaries=()

# count NAME OUTPUT RC: keep a suite's summary line from its output, add its counts.
count() {
    local name=$1 out=$2 rc=$3 line p f
    line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n 1)
    if [ -z "$line" ]; then
        line="$name: 0 passed, 1 failed (no summary line, exit status $rc)"
        p=0
        f=1
    else
        p=${line#"$name: "}
        p=${p%% passed*}
        f=${line#*passed, }
        f=${f%% failed*}
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            line="$line (but exit status $rc: counted as one failure)"
            f=1
        fi
    fi
    [ "$rc" -eq 0 ] || status=1
    summaries+=("$line")
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
}

# run_suite NAME COMMAND...: run a suite, its output shown as it goes, then count it.
run_suite() {
    local name=$1 out rc
    shift
    out=$(mktemp)
    "$@" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    count "$name" "$out" "$rc"
    rm -f "$out"
}

run_suite check "$here/check.sh"
run_suite unit "$here/run-unit.sh" "$@"
# Every fuzz harness builds and runs a few seconds from its kept corpus.
run_suite fuzz "$here/fuzz/run.sh" "${FUZZ_SMOKE_SECONDS:-3}"
# The conformance suite on SQLite, alone (its npm packages installed before the
# PostgreSQL lane runs it too).
run_suite conformance "$here/conformance/run.sh"
# The PostgreSQL lane: the HTTP suites that exercise storage again on PostgreSQL
# (tests/run-http.sh says which), then the conformance suite on one stack on
# PostgreSQL (73-hosts-conformance.bats, in http, runs it through two hosts on one
# cluster), at the same time as the HTTP suite on SQLite: each bats file and the
# conformance run have a stack of their own on ports of their own, and the suites
# spend most of their time waiting (for a runner, a provider's pace, a poll's
# deadline), so on 2 cores the pair takes little more than the longer of the two.
# The lane's output is shown when it ends.
# The npm packages the HTTP suites' clients come from, installed before the two
# lanes start (each file installs what it needs on first use: two at once in one
# directory would race).
for inst in "$here"/*/install.sh; do
    "$inst" >/dev/null || echo "tests: $inst failed (the suites that need it will say so)"
done
lane=$(mktemp -d)
(
    env DSTREAM_TEST_ENGINE=pg "$here/run-http.sh" >"$lane/http-pg" 2>&1
    echo $? >"$lane/http-pg.rc"
    env DSTREAM_TEST_ENGINE=pg "$here/conformance/run.sh" >"$lane/conformance-pg" 2>&1
    echo $? >"$lane/conformance-pg.rc"
) &
lane_pid=$!
run_suite http "$here/run-http.sh"
wait "$lane_pid"
for s in http-pg conformance-pg; do
    cat "$lane/$s" 2>/dev/null
    count "$s" "$lane/$s" "$(cat "$lane/$s.rc" 2>/dev/null || echo 1)"
done
rm -rf "$lane"

echo
for s in "${summaries[@]}"; do echo "$s"; done
echo "$total_passed passed, $total_failed failed"
[ "$status" -eq 0 ] && [ "$total_failed" -eq 0 ]
