#!/usr/bin/env bash
# Static checks of the sources and docs (`make check`; also a suite of `make test`).
#
#   tests/check.sh
#
# - banned: no sprintf strcpy strcat strncat strtok atoi atol gets sscanf in C code
# - settings: every DSTREAM_* variable a program reads is named in README.md
# - self-contained: nothing in the repository points at files outside it (../shared)
# Each check prints "ok" or what is wrong; the last line is "check: N passed, N failed".
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
passed=0
failed=0

result() {
    if [ "$2" -eq 0 ]; then
        echo "check $1: ok"
        passed=$((passed + 1))
    else
        echo "check $1: FAILED"
        failed=$((failed + 1))
    fi
}

bad=$(grep -nE '\b(sprintf|vsprintf|strcpy|strcat|strncat|strtok|atoi|atol|gets|sscanf)\s*\(' \
    -r --include='*.c' --include='*.h' lib fcgi cli runner | grep -v snprintf)
[ -z "$bad" ] || printf '%s\n' "$bad"
result banned-functions "$([ -z "$bad" ] && echo 0 || echo 1)"

missing=""
for v in $(grep -rhoE '"DSTREAM_[A-Z0-9_]+"' lib fcgi runner cli | tr -d '"' | sort -u); do
    grep -q "\`$v\`" README.md || missing="$missing $v"
done
[ -z "$missing" ] || echo "settings read by the programs but not in README.md:$missing"
result settings-documented "$([ -z "$missing" ] && echo 0 || echo 1)"

outside=$(git ls-files -co --exclude-standard 2>/dev/null | grep -v '^tests/check.sh$' |
    xargs -r grep -lE '\.\./shared/|shared/(DESIGN|CONVENTIONS)\.md' 2>/dev/null)
[ -z "$outside" ] || echo "files that refer to ../shared (outside the repository): $outside"
result self-contained "$([ -z "$outside" ] && echo 0 || echo 1)"

echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
