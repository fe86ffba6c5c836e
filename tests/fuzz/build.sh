#!/usr/bin/env bash
# Build the libFuzzer harnesses of tests/fuzz/ into build-fuzz/ (or $FUZZ_OUT).
#
#   tests/fuzz/build.sh [NAME...]      e.g. tests/fuzz/build.sh json offset
#
# Each harness is compiled with clang and -fsanitize=fuzzer,address,undefined
# together with the lib/*.c sources it exercises (compiled directly, not taken from
# the archive, so that the library code carries the sanitizer instrumentation).
# Prints one line per harness; exits non-zero if any fails to build.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${FUZZ_OUT:-$root/build-fuzz}
cc=${FUZZ_CC:-clang}

# The store: the log, the engine seam and every engine's files.
STORE="lib/log.c $(cd "$root" && echo lib/store/*/*.c)"

# The lib sources each harness needs.
sources() {
    case $1 in
    json) echo lib/json.c lib/buf.c lib/utf8.c -ljansson ;;
    offset) echo lib/offset.c ;;
    timefmt) echo lib/timefmt.c ;;
    workflow) echo lib/workflow.c lib/wfexpr.c lib/wfschema.c lib/agent.c lib/mcp.c lib/opfile.c lib/jcheck.c lib/buf.c lib/utf8.c -ljansson ;;
    provider) echo lib/provider.c lib/provevent.c lib/anthropic.c lib/openai.c lib/chathist.c lib/json.c lib/buf.c lib/utf8.c -ljansson ;;
    mcp) echo lib/mcp.c lib/opfile.c lib/agent.c lib/jcheck.c lib/buf.c lib/utf8.c -ljansson ;;
    # (the store is linked in, never called: the parser touches no database)
    recorder) echo lib/recorder.c lib/jdiff.c lib/sse.c $STORE lib/offset.c lib/sha256.c lib/timefmt.c lib/json.c \
                   lib/buf.c lib/utf8.c "$out/migrations.c" "$out/pg_migrations.c" -ljansson -lsqlite3 -lpq -lcrypto -lpthread ;;
    url) echo lib/url.c lib/provcfg.c lib/opfile.c lib/agent.c lib/jcheck.c lib/provider.c lib/provevent.c lib/anthropic.c lib/openai.c lib/chathist.c lib/json.c lib/buf.c lib/utf8.c -ljansson ;;
    subscription) echo lib/subrule.c lib/webhook.c lib/url.c lib/sha256.c lib/json.c lib/buf.c lib/utf8.c \
                       -ljansson -lcrypto ;;
    auth) echo lib/auth.c $STORE lib/offset.c lib/sha256.c lib/timefmt.c lib/json.c lib/buf.c lib/utf8.c \
               "$out/migrations.c" "$out/pg_migrations.c" -ljansson -lsqlite3 -lpq -lcrypto -lpthread ;;
    *) return 1 ;;
    esac
}

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
sh tools/sql2c.sh db sql/sqlite/*.sql >"$out/migrations.c"
sh tools/sql2c.sh pg sql/pg/*.sql >"$out/pg_migrations.c"
status=0
for n in "${names[@]}"; do
    if ! src=$(sources "$n"); then
        echo "fuzz: no harness named $n" >&2
        status=1
        continue
    fi
    # shellcheck disable=SC2086  # $src is a list of paths without spaces
    if "$cc" -std=gnu11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
        -Wall -Wextra -Werror -Wno-unused-parameter \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Ilib -I/usr/include/postgresql -o "$out/fuzz_$n" "tests/fuzz/fuzz_$n.c" $src; then
        echo "  FUZZ $out/fuzz_$n"
    else
        echo "fuzz: building fuzz_$n failed" >&2
        status=1
    fi
done
exit $status
