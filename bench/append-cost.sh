#!/usr/bin/env bash
# bench/append-cost.sh: the instructions one append costs lib/log and the SQLite
# engine, counted by valgrind's callgrind for two built trees, A (before) and B (this
# one); prints markdown. A count of instructions does not move with the load of a
# shared machine, as the time of an HTTP benchmark does (bench/seam.sh).
#
#   ROOT_A=/tmp/before bench/append-cost.sh          (each tree built: make all)
#
# bench/src/append-cost.c is compiled against each tree's lib/ and $B/libdstream.a;
# each count is callgrind's total for N appends minus the one for none (opening,
# migrating, creating the streams), over N, on a file in /dev/shm, 1 and 100 streams.
# valgrind's CPU has no SHA extensions: lib/sha256 runs its portable code there, so
# a tree whose appends hash (the hash chain) is counted at the portable code's cost,
# more than it costs where the CPU has them (bench/RESULTS.md).
# Environment: ROOT_A (required), ROOT_B [this tree], B [build], N [3000].
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
N=${N:-3000}
ROOT_A=$(cd "${ROOT_A:?ROOT_A: the tree measured as before, built}" && pwd)
ROOT_B=$(cd "${ROOT_B:-$here}" && pwd)
command -v valgrind >/dev/null || { echo "append-cost: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d /dev/shm/append-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT

# count BIN K NUM: callgrind's instructions for NUM appends to K streams (its profile
# in $work/cg).
count() {
    rm -f "$work/db"*
    valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$1" "$work/db" "$3" "$2" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

# hashing: the instructions of the profile in $work/cg spent in chain_link (lib/chain:
# SHA-256 of the previous digest, the offset and the message), inclusive.
hashing() {
    callgrind_annotate --inclusive=yes "$work/cg" >"$work/cg.txt" 2>/dev/null || true
    awk '/:chain_link / && !found { gsub(",", "", $1); print $1; found = 1 } END { if (!found) print 0 }' "$work/cg.txt"
}

declare -A per
for t in A B; do
    root=ROOT_$t
    cc -O2 -pthread -I"${!root}/lib" -o "$work/cost-$t" "$here/bench/src/append-cost.c" \
        "${!root}/$B/libdstream.a" -ljansson -lsqlite3 -lpq -lcrypto -lpthread
    for k in 1 100; do
        full=$(count "$work/cost-$t" "$k" "$N")
        hash=$(hashing)
        none=$(count "$work/cost-$t" "$k" 0)
        per[$t$k]=$(( (full - none) / N ))
        per[h$t$k]=$(( hash / N ))
    done
done
echo "| streams | A: instructions per append | B | B / A | B's hash chain links (chain_link) | B without them / A |"
echo "|---:|---:|---:|---:|---:|---:|"
for k in 1 100; do
    awk -v k="$k" -v a="${per[A$k]}" -v b="${per[B$k]}" -v h="${per[hB$k]}" \
        'BEGIN { printf "| %d | %d | %d | %.3fx | %d | %.3fx |\n", k, a, b, b / a, h, (b - h) / a }'
done
echo
echo "A: $ROOT_A ($(git -C "$ROOT_A" rev-parse --short HEAD)), B: $ROOT_B ($(git -C "$ROOT_B" rev-parse --short HEAD)); N=$N appends of 200 bytes, valgrind $(valgrind --version)"
