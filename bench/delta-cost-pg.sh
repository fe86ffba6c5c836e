#!/usr/bin/env bash
# bench/delta-cost-pg.sh: what a busy runner's group commit costs PostgreSQL per delta,
# for two built trees, A (before) and B (this one): bench/src/delta-cost.c's groups mode
# (N commits of one delta to each of K of S chat sessions, as runner/outbox.c's op_commit
# makes them in each tree) against a throwaway cluster of tests/pg.sh with
# pg_stat_statements loaded; per delta:
#
#   statements    the server's (pg_stat_statements' calls), COMMITS commits less none
#   round trips   the client's sendto calls (strace -c), COMMITS commits less none
#   backend CPU   the run time of the backends serving the client (/proc/PID/schedstat,
#                 in ns: no clock-tick rounding; sampled every 2 ms until they exit; the
#                 backends of its database, not autovacuum's workers),
#                 CPU_COMMITS commits less none, RUNS runs each, A and B interleaved;
#                 median and min-max in us
#
# The statements and round trips do not move with the load of a shared machine; the
# backend's CPU moves little (it is CPU time, not wall time). Prints markdown.
#
#   ROOT_A=/tmp/before bench/delta-cost-pg.sh        (each tree built: make all)
#
# Environment: ROOT_A (required), ROOT_B [this tree], B [build], S [200], K [20],
# COMMITS [100], CPU_COMMITS [1000], RUNS [5].
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
S=${S:-200}
K=${K:-20}
COMMITS=${COMMITS:-100}
CPU_COMMITS=${CPU_COMMITS:-1000}
RUNS=${RUNS:-5}
ROOT_A=$(cd "${ROOT_A:?ROOT_A: the tree measured as before, built}" && pwd)
ROOT_B=$(cd "${ROOT_B:-$here}" && pwd)
command -v strace >/dev/null || { echo "delta-cost-pg: strace is needed" >&2; exit 2; }
work=$(mktemp -d /tmp/dcpg.XXXXXX)
pgdir=$("$here/tests/pg.sh" tmp dcpg)
cleanup() {
    "$here/tests/pg.sh" stop "$pgdir/c" >/dev/null 2>&1 || true
    rm -rf "$work" "$pgdir"
}
trap cleanup EXIT

"$here/tests/pg.sh" start "$pgdir/c" >/dev/null
admin="postgresql:///postgres?host=$pgdir/c&user=postgres"
psql -qX "$admin" -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null
"$here/tests/pg.sh" stop "$pgdir/c"
"$here/tests/pg.sh" start "$pgdir/c" >/dev/null
postmaster=$(head -n 1 "$pgdir/c/data/postmaster.pid")

fresh() {   # a new database: its URI
    local name=dc_$RANDOM$RANDOM
    psql -qX "$admin" -c "CREATE DATABASE $name" >/dev/null
    psql -qX "postgresql:///$name?host=$pgdir/c&user=postgres" -c "CREATE EXTENSION pg_stat_statements" >/dev/null
    echo "postgresql:///$name?host=$pgdir/c&user=postgres"
}

for t in A B; do
    root=ROOT_$t
    cc -O2 -pthread -I"${!root}/lib" -o "$work/cost-$t" "$here/bench/src/delta-cost.c" \
        "${!root}/$B/libdstream.a" -ljansson -lsqlite3 -lpq -lcrypto -lpthread
done

statements() {   # T N: the server's statements for the run (its database's, this bench's connection)
    local db
    db=$(fresh)
    psql -qX "$db" -c "SELECT pg_stat_statements_reset()" >/dev/null
    "$work/cost-$1" groups "$db" "$2" "$S" "$K" >/dev/null
    psql -AtqX "$db" -c "SELECT sum(calls) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
                         WHERE d.datname = current_database() AND query NOT LIKE '%pg_stat_statements%'"
}
sends() {   # T N: the client's sendto calls
    strace -f -c -e trace=sendto -o "$work/st" "$work/cost-$1" groups "$(fresh)" "$2" "$S" "$K" >/dev/null
    awk '$NF == "sendto" { n += $4 } END { print n + 0 }' "$work/st"
}
backend_ns() {   # T N: the run time of the backends the client made (ns)
    local db
    db=$(fresh)
    python3 - "$postmaster" "${db#postgresql:///}" "$work/cost-$1" groups "$db" "$2" "$S" "$K" <<'EOF'
import os, subprocess, sys, time
pm, name = sys.argv[1], sys.argv[2].split('?')[0]
def kids():
    out = set()
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % p) as f:
                st = f.read()
            with open('/proc/%s/cmdline' % p, 'rb') as f:
                cmd = f.read().decode(errors='replace')
        except OSError:
            continue
        # "postgres: USER DB [local] ...": a backend of the client's database
        if st[st.rindex(')') + 2:].split()[1] == pm and (' %s ' % name) in cmd:
            out.add(p)
    return out
before = kids()
last = {}
child = subprocess.Popen(sys.argv[3:], stdout=subprocess.DEVNULL)
while True:
    done = child.poll() is not None
    for p in kids() - before:
        try:
            with open('/proc/%s/schedstat' % p) as f:
                last[p] = int(f.read().split()[0])
        except OSError:
            pass
    if done:
        break
    time.sleep(0.002)
if child.returncode:
    sys.exit("delta-cost-pg: the client failed")
print(sum(last.values()))
EOF
}

declare -A per
for t in A B; do
    per[st$t]=$(awk -v a="$(statements $t "$COMMITS")" -v b="$(statements $t 0)" -v n=$((COMMITS * K)) \
        'BEGIN { printf "%.2f", (a - b) / n }')
    per[rt$t]=$(awk -v a="$(sends $t "$COMMITS")" -v b="$(sends $t 0)" -v n=$((COMMITS * K)) \
        'BEGIN { printf "%.2f", (a - b) / n }')
done
for r in $(seq "$RUNS"); do
    for t in A B; do
        full=$(backend_ns $t "$CPU_COMMITS")
        none=$(backend_ns $t 0)
        per[cpu$t]+="$(awk -v a="$full" -v b="$none" -v n=$((CPU_COMMITS * K)) 'BEGIN { printf "%.1f", (a - b) / n / 1000 }') "
    done
done
summary() {   # values: median (min-max)
    tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g |
        awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                  printf "%.1f (%.1f-%.1f)", m, v[1], v[NR] }'
}
echo "| per delta, a group commit of $K of $S sessions | A | B | B / A |"
echo "|---|---:|---:|---:|"
awk -v a="${per[stA]}" -v b="${per[stB]}" 'BEGIN { printf "| statements (pg_stat_statements) | %s | %s | %.2fx |\n", a, b, b / a }'
awk -v a="${per[rtA]}" -v b="${per[rtB]}" 'BEGIN { printf "| round trips (the client'"'"'s sendto calls) | %s | %s | %.2fx |\n", a, b, b / a }'
ma=$(summary "${per[cpuA]}")
mb=$(summary "${per[cpuB]}")
awk -v a="$ma" -v b="$mb" -v x="${ma%% *}" -v y="${mb%% *}" \
    'BEGIN { printf "| the backend'"'"'s CPU us (median of '"$RUNS"', min-max) | %s | %s | %.2fx |\n", a, b, y / x }'
echo
echo "A: $ROOT_A ($(git -C "$ROOT_A" rev-parse --short HEAD)), B: $ROOT_B ($(git -C "$ROOT_B" rev-parse --short HEAD));" \
     "COMMITS=$COMMITS CPU_COMMITS=$CPU_COMMITS RUNS=$RUNS; load average $(cut -d' ' -f1-3 /proc/loadavg)"
