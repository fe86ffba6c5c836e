#!/usr/bin/env bash
# Run the HTTP suites (tests/http/*.bats) and summarise their TAP output.
#
#   B=build tests/run-http.sh
#
# The TAP is echoed as it comes. "ok" lines count as passed, "not ok" as failed,
# and an "ok ... # skip" as skipped. The last line is
# "http: N passed, N failed" (", N skipped" appended when any were); the exit
# status is 1 on any failure or if bats itself failed without reporting one.
set -u

here=$(cd "$(dirname "$0")" && pwd)
export B=${B:-build}

shopt -s nullglob
files=("$here"/http/*.bats)
shopt -u nullglob
if [ ${#files[@]} -eq 0 ]; then
    echo "http: 0 passed, 0 failed"
    exit 0
fi
if ! command -v bats >/dev/null 2>&1; then
    echo "bats not found (apt-get install bats)"
    echo "http: 0 passed, 1 failed"
    exit 1
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
bats --tap "${files[@]}" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}

passed=0
failed=0
skipped=0
while IFS= read -r line; do
    case $line in
    "not ok "*) failed=$((failed + 1)) ;;
    "ok "*" # skip"* | "ok "*" # SKIP"*) skipped=$((skipped + 1)) ;;
    "ok "*) passed=$((passed + 1)) ;;
    esac
done < "$out"

if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "bats exited with status $rc without a failing test: counted as one failure"
    failed=1
fi

summary="http: $passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
