#!/usr/bin/env bash
# Static checks of the sources and docs (`make check`; also a suite of `make test`).
#
#   tests/check.sh
#
# - banned: no sprintf strcpy strcat strncat strtok atoi atol gets sscanf in C code
# - settings: every DSTREAM_* variable a program reads is named in README.md
# - self-contained: nothing in the repository points at files outside it (../shared)
# - includes-acyclic: in each of lib/ fcgi/ runner/ cli/, includes point down or
#   sideways, never in a circle (module X includes Y.h of module Y: Y comes first)
# - calls-acyclic: the same for calls, from the built objects ($B, default build):
#   no module calls into a module that calls back into it, however far round
#   (lib/ fcgi/ runner/ cli/)
# - sqlite-confined: SQLite is the SQLite engine's alone. No C file outside
#   lib/store/sqlite/ names it: no <sqlite3.h>, no sqlite3 type or call (no
#   "sqlite3" at all), no include of the engine's headers (store/sqlite/...) apart
#   from store/sqlite/sq_engine.h, the engine's table (nothing of SQLite), which
#   lib/log.c's store_engine_for picks;
#   only the engine's own unit tests, tests/unit/test_sqlite_*.c, look at its rows
#   (tests/unit/test_db.h runs the sqlite3 command-line program, as it runs psql,
#   for the tests of both engines that change rows by hand: its one #define of the
#   program's name is let through).
# - libpq-confined: only the PostgreSQL engine (lib/store/pg/) and its own tests
#   (tests/unit/test_pg_*.c) include libpq's header or the engine's headers, but
#   for store/pg/pg_engine.h (its table), which lib/log.c's store_engine_for picks
# - event-keys: event payload keys are spelled once, by the PK_* catalogue in
#   lib/session.h: lib/event.c (the constructors) quotes no key, and the reducer
#   (lib/session.c, its "the reducer" section) reads none by a quoted name from a
#   payload (p, its usage u, an open call c, the pending request, the created
#   payload). Other JSON (the view, its messages) keeps its literal keys.
# - migrations-numbered: no two migrations of one engine (sql/sqlite/, sql/pg/)
#   share a version number (its file name's leading digits): the second would be
#   taken for applied and silently skipped (branches pick numbers on their own)
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

loops=""
for d in lib lib/store/* fcgi runner cli; do
    [ -d "$d" ] || continue
    edges=$(for f in "$d"/*.c "$d"/*.h; do
        [ -e "$f" ] || continue
        m=$(basename "${f%.*}")
        sed -nE 's/^#include "([a-z0-9_]+)\.h".*/\1/p' "$f" | while read -r h; do
            if [ "$h" != "$m" ] && [ -e "$d/$h.c" ]; then echo "$h $m"; fi
        done
    done)
    out=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null)
    [ -z "$out" ] || loops="$loops$d: $out
"
done
[ -z "$loops" ] || printf 'include circles:\n%s' "$loops"
result includes-acyclic "$([ -z "$loops" ] && echo 0 || echo 1)"

B=${B:-build}
calls=""
for d in lib fcgi runner cli; do
    ls "$B/$d"/*.o >/dev/null 2>&1 || continue
    # lib/ with its engines (lib/store/<engine>/): one graph, so that an engine that
    # called back up into the log (or a module above it) would show as a circle.
    edges=$(find "$B/$d" -name '*.o' | sort | while read -r o; do
        m=${o#"$B/$d/"}
        m=${m%.o}
        [ -e "$d/$m.c" ] || continue   # left over from a file renamed or removed
        nm --defined-only -g "$o" | awk -v m="$m" 'NF == 3 { print "D", $3, m }'
        nm -u "$o" | awk -v m="$m" '{ print "U", $NF, m }'
    done | awk '$1 == "D" { def[$2] = $3; next }
                { use[NR] = $2; by[NR] = $3 }
                END { for (i in use) if ((use[i] in def) && def[use[i]] != by[i]) print def[use[i]], by[i] }' |
        sort -u)
    out=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null)
    [ -z "$out" ] || calls="$calls$d: $out
"
done
[ -z "$calls" ] || printf 'call circles between modules:\n%s' "$calls"
result calls-acyclic "$([ -z "$calls" ] && echo 0 || echo 1)"

# confined NAME DIR TESTS PATTERN TABLE [ALLOWED]: no C file outside DIR and the
# engine's own unit tests (TESTS, an ERE) matches PATTERN (an ERE), but for the
# include of the engine's table TABLE, which lib/log.c's store_engine_for picks, and
# the lines ALLOWED (an ERE of grep -Hn's "file:line:text"). The check NAME-confined.
confined() {
    local bad
    bad=$(git ls-files -co --exclude-standard -- '*.c' '*.h' 2>/dev/null |
        grep -vE "^($2|$3)" |
        while read -r f; do
            [ -e "$f" ] || continue
            grep -HnE "$4" "$f" | grep -vE "^[^:]+:[0-9]+:#include \"$5\"" |
                grep -vE "${6:-^\$}"
        done)
    [ -z "$bad" ] || printf '%s outside its engine (%s, %s):\n%s\n' "$1" "$2" "$3" "$bad"
    result "$1-confined" "$([ -z "$bad" ] && echo 0 || echo 1)"
}
confined sqlite lib/store/sqlite/ 'tests/unit/test_sqlite_[^/]*\.c$' 'sqlite3|^#include .*store/sqlite/' 'store/sqlite/sq_engine\.h' \
    '^tests/unit/test_db\.h:[0-9]+:#define TEST_DB_SQLITE_CLI "sqlite3"$'
confined libpq lib/store/pg/ 'tests/unit/test_pg_[^/]*\.c$' '<libpq-fe\.h>|^#include .*store/pg/' 'store/pg/pg_engine\.h'

quoted=$(sed -E 's://.*$::' lib/event.c | grep -nE '"[a-z][A-Za-z]*"' |
    grep -vE '^[0-9]+:#include|actor = "(runner|user|system)";|json_string\("[a-z]+"\)')
reads=$(awk '/^\/\* ---- the reducer/ { on = 1 } /^\/\* ---- \(de\)serialisation/ { on = 0 } on { print FILENAME ":" FNR ": " $0 }' \
    lib/session.c | grep -E '\b(str|int_of|json_object_get)\((p|u|c|v->pending|v->created), *"')
[ -z "$quoted" ] || printf 'lib/event.c quotes payload keys (use the PK_* of lib/session.h):\n%s\n' "$quoted"
[ -z "$reads" ] || printf 'the reducer reads payload keys by quoted names (use PK_*):\n%s\n' "$reads"
result event-keys "$([ -z "$quoted$reads" ] && echo 0 || echo 1)"

dups=""
for d in sql/*/; do
    v=$(ls "$d" | sed -n 's/^0*\([0-9][0-9]*\)_.*\.sql$/\1/p' | sort | uniq -d)
    for n in $v; do dups="$dups $d: version $n in $(ls "$d" | grep -E "^0*${n}_" | tr '\n' ' ')
"; done
done
[ -z "$dups" ] || printf 'migrations sharing a version:\n%s' "$dups"
result migrations-numbered "$([ -z "$dups" ] && echo 0 || echo 1)"

echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
