#!/usr/bin/env bash
# Run unit test binaries and total their "N passed, N failed" lines.
#
#   tests/run-unit.sh build/tests/test_buf build/tests/test_json ...
#   DSTREAM_TEST_PG=URI|off tests/run-unit.sh ...
#
# Each binary's output is echoed as it comes. A binary that dies (signal, or a
# non-zero exit with no failures reported) or prints no summary counts as one
# failure. The last line is "unit: N passed, N failed"; the exit status is 1 if
# anything failed.
set -u

# The tests of a database run on PostgreSQL too (tests/unit/test_db.h) when
# DSTREAM_TEST_PG names a cluster. Unset: a throwaway one is started here for the
# run when the server binaries are installed (tests/pg.sh), and stopped after;
# "off": SQLite only.
pgdir=""
if [ "${DSTREAM_TEST_PG-}" = off ]; then
    unset DSTREAM_TEST_PG
elif [ -z "${DSTREAM_TEST_PG-}" ]; then
    here=$(cd "$(dirname "$0")" && pwd)
    if ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
        pgdir=$("$here/pg.sh" tmp dstream-pg)
        if uri=$("$here/pg.sh" start "$pgdir/c" fast); then
            export DSTREAM_TEST_PG=$uri
            trap '"$here/pg.sh" stop "$pgdir/c"; rm -rf "$pgdir"' EXIT
            echo "unit: on SQLite, and on PostgreSQL ($uri)"
        else
            echo "unit: no PostgreSQL cluster could start: SQLite only"
            rm -rf "$pgdir"
        fi
    else
        echo "unit: no PostgreSQL server binaries (make deps): SQLite only"
    fi
fi

passed=0
failed=0
for bin in "$@"; do
    name=$(basename "$bin")
    echo "== $name"
    out=$(mktemp)
    "$bin" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    rm -f "$out"
    if [ -z "$line" ]; then
        echo "$name: no summary line (exit status $rc): counted as one failure"
        failed=$((failed + 1))
        continue
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
done

echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
