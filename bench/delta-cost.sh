#!/usr/bin/env bash
# bench/delta-cost.sh: what one text delta costs the runner outside its loop, for two
# built trees, A (before) and B (this one): a provider chunk read (provider_feed, both
# formats), one session commit of a delta (sstore_tx_append_cached with a kept
# view, as runner/outbox.c does), and a busy runner's group commit (one delta to
# each of 20 of 200 sessions: op_commit's shape, each session in its nested
# savepoint after its lease check in a tree without lease_tx_held_many, every lease
# in one statement and no savepoint per session in a tree with it; figures per delta; on SQLite also its file system calls, which
# no load moves), in instructions (valgrind's callgrind) and heap
# allocations (memcheck's "total heap usage"); prints markdown. Neither moves with
# the load of a shared machine, as the CPU per delta of bench/token-latency.sh does.
#
#   ROOT_A=/tmp/before bench/delta-cost.sh           (each tree built: make all)
#   ROOT_A=/tmp/before DB=postgresql:///NAME?host=DIR&user=postgres bench/delta-cost.sh
#       (the commits on PostgreSQL: DB a URI of an existing cluster; a database per
#        count is created in it and dropped)
#
# bench/src/delta-cost.c is compiled against each tree's lib/ and $B/libdstream.a;
# each figure is the count for N operations minus the count for none, over N. The
# commits go to a SQLite file in /dev/shm (synchronous=NORMAL: the work, not the disk)
# unless DB is given. valgrind's CPU has no SHA extensions: the hash chain's links
# are counted at the portable code's cost (bench/append-cost.sh says how much).
# Environment: ROOT_A (required), ROOT_B [this tree], B [build], N [1000], DB [SQLite],
# COMMITS [100: group commits counted].
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
N=${N:-1000}
COMMITS=${COMMITS:-100}
ROOT_A=$(cd "${ROOT_A:?ROOT_A: the tree measured as before, built}" && pwd)
ROOT_B=$(cd "${ROOT_B:-$here}" && pwd)
command -v valgrind >/dev/null || { echo "delta-cost: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d /dev/shm/delta-cost.XXXXXX)
admin=${DB:+${DB/\/\/\/*\?/\/\/\/postgres?}}
cleanup() {
    local d
    # The databases target made (it runs in a subshell: their names are in a file).
    [ -f "$work/dbs" ] && while read -r d; do psql -q "$admin" -c "DROP DATABASE IF EXISTS $d" >/dev/null 2>&1 || true; done <"$work/dbs"
    rm -rf "$work"
}
trap cleanup EXIT

# target: a fresh database for the commit figures (a file, or a new PostgreSQL database).
target() {
    if [ -z "${DB:-}" ]; then
        rm -f "$work/db"*
        echo "$work/db"
        return
    fi
    local name=delta_cost_$RANDOM$RANDOM
    psql -q "$admin" -c "CREATE DATABASE $name" >/dev/null
    echo "$name" >>"$work/dbs"
    echo "${DB/\/\/\/*\?/\/\/\/$name?}"
}

instr() {   # ARGS...: callgrind's total instructions
    valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$@" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
allocs() {   # ARGS...: memcheck's count of heap allocations
    valgrind --tool=memcheck "$@" 2>&1 | sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' | tr -d ,
}

declare -A per
for t in A B; do
    root=ROOT_$t
    cc -O2 -pthread -I"${!root}/lib" -o "$work/cost-$t" "$here/bench/src/delta-cost.c" \
        "${!root}/$B/libdstream.a" -ljansson -lsqlite3 -lpq -lcrypto -lpthread
    for f in anthropic openai; do
        per[i$t$f]=$(( ($(instr "$work/cost-$t" feed $f "$N") - $(instr "$work/cost-$t" feed $f 0)) / N ))
        per[a$t$f]=$(awk -v a="$(allocs "$work/cost-$t" feed $f "$N")" -v b="$(allocs "$work/cost-$t" feed $f 0)" -v n="$N" \
            'BEGIN { printf "%.1f", (a - b) / n }')
    done
    # shellcheck disable=SC2046 # target prints one word
    per[i${t}commit]=$(( ($(instr "$work/cost-$t" commit $(target) "$N") - $(instr "$work/cost-$t" commit $(target) 0)) / N ))
    # shellcheck disable=SC2046
    per[a${t}commit]=$(awk -v a="$(allocs "$work/cost-$t" commit $(target) "$N")" -v b="$(allocs "$work/cost-$t" commit $(target) 0)" \
        -v n="$N" 'BEGIN { printf "%.1f", (a - b) / n }')
    # The group commits: instructions, and the file system calls (strace) per delta.
    # shellcheck disable=SC2046
    per[i${t}groups]=$(( ($(instr "$work/cost-$t" groups $(target) "$COMMITS" 200 20) -
                         $(instr "$work/cost-$t" groups $(target) 0 200 20)) / (COMMITS * 20) ))
    if [ -z "${DB:-}" ] && command -v strace >/dev/null; then
        calls() {   # N: pread64 + pwrite64 + fdatasync calls of N group commits and their setup
            local db
            db=$(target)
            strace -f -c -e trace=pread64,pwrite64,fdatasync -o "$work/st" "$work/cost-$t" groups "$db" "$1" 200 20 >/dev/null
            awk '$NF ~ /^(pread64|pwrite64|fdatasync)$/ { n += $4 } END { print n + 0 }' "$work/st"
        }
        per[s${t}groups]=$(awk -v a="$(calls "$COMMITS")" -v b="$(calls 0)" -v n=$((COMMITS * 20)) 'BEGIN { printf "%.2f", (a - b) / n }')
    fi
done
echo "| per operation | A: instructions | B: instructions | B / A | A: allocations | B: allocations |"
echo "|---|---:|---:|---:|---:|---:|"
for k in anthropic openai commit; do
    label="a provider chunk, $k"
    [ "$k" = commit ] && label="a session commit of one delta ($([ -n "${DB:-}" ] && echo PostgreSQL || echo SQLite))"
    awk -v l="$label" -v a="${per[iA$k]}" -v b="${per[iB$k]}" -v x="${per[aA$k]}" -v y="${per[aB$k]}" \
        'BEGIN { printf "| %s | %d | %d | %.2fx | %s | %s |\n", l, a, b, b / a, x, y }'
done
awk -v a="${per[iAgroups]}" -v b="${per[iBgroups]}" -v e="$([ -n "${DB:-}" ] && echo PostgreSQL || echo SQLite)" \
    'BEGIN { printf "| a delta in a group commit over 200 sessions (%s) | %d | %d | %.2fx | | |\n", e, a, b, b / a }'
[ -n "${per[sAgroups]:-}" ] && echo "| its file system calls (pread64, pwrite64, fdatasync) per delta | ${per[sAgroups]} | ${per[sBgroups]} | | | |"
echo
echo "A: $ROOT_A ($(git -C "$ROOT_A" rev-parse --short HEAD)), B: $ROOT_B ($(git -C "$ROOT_B" rev-parse --short HEAD)); N=$N, valgrind $(valgrind --version)"
