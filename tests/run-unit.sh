#!/usr/bin/env bash
# Run unit test binaries and total their "N passed, N failed" lines.
#
#   tests/run-unit.sh build/tests/test_buf build/tests/test_json ...
#
# Each binary's output is echoed as it comes. A binary that dies (signal, or a
# non-zero exit with no failures reported) or prints no summary counts as one
# failure. The last line is "unit: N passed, N failed"; the exit status is 1 if
# anything failed.
set -u

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
