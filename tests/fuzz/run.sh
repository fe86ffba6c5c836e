#!/usr/bin/env bash
# Build every fuzz harness and run each for SECONDS (default 10).
#
#   tests/fuzz/run.sh [SECONDS]
#
# Each harness starts from its seeds in tests/fuzz/corpus/<name>/ and grows a
# working corpus in build-fuzz/corpus/<name>/ (kept between runs; the seeds are
# never written to). A crashing input is saved as build-fuzz/crash/<name>-crash-*
# and the fuzzer's report is printed. The last line is
# "fuzz: N passed, N failed"; the exit status is 1 if any harness failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${FUZZ_OUT:-$root/build-fuzz}
secs=${1:-10}
case $secs in
'' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

"$here/build.sh" || { echo "fuzz: 0 passed, 1 failed"; exit 1; }

passed=0
failed=0
for f in "$here"/fuzz_*.c; do
    n=$(basename "$f" .c)
    n=${n#fuzz_}
    mkdir -p "$out/corpus/$n" "$out/crash"
    log="$out/fuzz_$n.log"
    "$out/fuzz_$n" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="$out/crash/$n-" "$out/corpus/$n" "$here/corpus/$n" >"$log" 2>&1
    rc=$?
    runs=$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}')
    if [ "$rc" -eq 0 ]; then
        echo "fuzz_$n: ok, ${runs:-?} runs in ${secs}s, corpus $(find "$out/corpus/$n" -type f | wc -l) inputs"
        passed=$((passed + 1))
    else
        echo "fuzz_$n: FAILED (exit status $rc); report from $log:"
        grep -vE '^(#[0-9]+|INFO:|stat::)' "$log" | head -n 60
        failed=$((failed + 1))
    fi
done

echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
