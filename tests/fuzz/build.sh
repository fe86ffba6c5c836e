#!/usr/bin/env bash
# Build the libFuzzer harnesses of tests/fuzz/ into build-fuzz/ (or $FUZZ_OUT).
#
#   tests/fuzz/build.sh [NAME...]      e.g. tests/fuzz/build.sh json offset
#
# The library is built once into $FUZZ_OUT/lib/libdstream.a by the Makefile's own
# rules (every lib/ and store source, so no harness's list of sources can miss one),
# with clang and -fsanitize=fuzzer-no-link,address,undefined so that the library code
# carries the instrumentation; each harness is linked against it with
# -fsanitize=fuzzer,address,undefined, taking what it calls. Prints one line per
# harness; exits non-zero if any fails to build.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${FUZZ_OUT:-$root/build-fuzz}
cc=${FUZZ_CC:-clang}

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: $cc not found (apt-get install clang)" >&2
    exit 1
fi

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$here"/fuzz_*.c; do
        n=$(basename "$f" .c)
        names+=("${n#fuzz_}")
    done
fi

mkdir -p "$out"
cd "$root" || exit 1
warn="-Wall -Wextra -Werror -Wno-unused-parameter"
make -s -j2 CC="$cc" OPT=-O1 B="$out/lib" WARN="$warn" \
    "SANITIZER=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
    "$out/lib/libdstream.a" >"$out/lib.log" 2>&1 ||
    { grep -v '^  CC ' "$out/lib.log"; echo "fuzz: building the library failed" >&2; exit 1; }
status=0
for n in "${names[@]}"; do
    if [ ! -f "tests/fuzz/fuzz_$n.c" ]; then
        echo "fuzz: no harness named $n" >&2
        status=1
        continue
    fi
    # shellcheck disable=SC2086  # $warn is a list of flags
    if "$cc" -std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer $warn -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Ilib -I/usr/include/postgresql -o "$out/fuzz_$n" "tests/fuzz/fuzz_$n.c" "$out/lib/libdstream.a" \
        -ljansson -lsqlite3 -lpq -lcrypto -lpthread; then
        echo "  FUZZ $out/fuzz_$n"
    else
        echo "fuzz: building fuzz_$n failed" >&2
        status=1
    fi
done
exit $status
