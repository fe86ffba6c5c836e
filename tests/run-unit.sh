#!/usr/bin/env bash
# Run unit test binaries and total their "N passed, N failed" lines.
#
#   tests/run-unit.sh build/tests/test_buf build/tests/test_json ...
#
# Each binary's output is echoed as it comes. A binary that dies (signal, or a
# non-zero exit with no failures reported) or prints no summary counts as one
# failure. The last line is "unit: N passed, N failed"; the exit status is 1 if
# anything failed.
#
# Both engines: the binaries whose source names DSTREAM_TEST_PG (the test_pg_*
# ones, and those whose database tests run on either engine through test_db.h)
# run a second time against a throwaway PostgreSQL cluster (tests/pg.sh, fsync
# off, removed at the end), or against the cluster DSTREAM_TEST_PG names if it is
# set. Without PostgreSQL's server binaries that pass is skipped, with a line
# saying so.
set -u

here=$(cd "$(dirname "$0")" && pwd)

passed=0
failed=0

# run_one BIN LABEL: run a binary, add its counts.
run_one() {
    local bin=$1 name
    name=$(basename "$bin")
    echo "== $name$2"
    out=$(mktemp)
    "$bin" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    rm -f "$out"
    if [ -z "$line" ]; then
        echo "$name: no summary line (exit status $rc): counted as one failure"
        failed=$((failed + 1))
        return
    fi
    p=${line%% passed*}
    f=${line#*passed, }
    f=${f%% failed*}
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$name: exit status $rc with no failed check: counted as one failure"
        failed=$((failed + 1))
    fi
}

pg_bins=()
for bin in "$@"; do
    # The PostgreSQL-only binaries run in the PostgreSQL pass only.
    case $(basename "$bin") in test_pg_*) ;; *) DSTREAM_TEST_PG= run_one "$bin" "" ;; esac
    src=$here/unit/$(basename "$bin").c
    if [ -f "$src" ] && grep -q DSTREAM_TEST_PG "$src"; then pg_bins+=("$bin"); fi
done

if [ ${#pg_bins[@]} -gt 0 ]; then
    pgdir=
    if [ -z "${DSTREAM_TEST_PG:-}" ] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
        pgdir=$(mktemp -d /tmp/dspg.XXXXXX)
        trap '"$here/pg.sh" stop "$pgdir" >/dev/null 2>&1; rm -rf "$pgdir"' EXIT
        if "$here/pg.sh" start "$pgdir" fast >/dev/null; then
            export DSTREAM_TEST_PG=$pgdir
        else
            echo "unit: the PostgreSQL cluster did not start: counted as one failure"
            failed=$((failed + 1))
        fi
    fi
    if [ -n "${DSTREAM_TEST_PG:-}" ]; then
        for bin in "${pg_bins[@]}"; do run_one "$bin" " (postgresql)"; done
    else
        echo "skipped: the PostgreSQL pass (${#pg_bins[@]} binaries): no PostgreSQL server binaries (make deps)"
    fi
fi

echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
