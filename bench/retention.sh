#!/usr/bin/env bash
# retention: a long run under retention policies reaches a steady database size.
#
#   bench/retention.sh   (env: B=build dir [build], HOURS [48], STREAMS [40],
#                         MSGS [20], SESSIONS [20], KEEP_H [6])
#
# Starts the real stack (deploy/dstream-stack: nginx, pool, runner) on SQLite in a
# temporary directory with a policy file (DSTREAM_RETENTION) that deletes streams
# under load/ and sessions under sessions/load- older than KEEP_H hours, a pass every
# second. Each simulated hour it creates STREAMS streams of MSGS messages (1 KiB each)
# and SESSIONS workflow sessions (they finish at once: one update step, no provider),
# then moves every existing item's creation and activity times an hour back (the
# database's clock for them: hours pass in a second), and waits for the runner's
# pass. One row per simulated hour: the live streams and sessions, the session rows
# (deleted ones included), messages, the
# database's pages in use and its files' size (the database and its WAL); the totals from /metrics at the end.
# Bounded: HOURS rounds, each waiting at most 30 s for the runner.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${B:-build}
export B
HOURS=${HOURS:-48}
STREAMS=${STREAMS:-40}
MSGS=${MSGS:-20}
SESSIONS=${SESSIONS:-20}
KEEP_H=${KEEP_H:-6}
stack=$here/deploy/dstream-stack
dir=$(mktemp -d -t dstream-retention.XXXXXX)
cleanup() {
    "$stack" stop "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

printf '{"policies": [{"prefix": "load/", "maxAge": "%sh"}, {"prefix": "sessions/load-", "maxAge": "%sh"}]}\n' \
    "$KEEP_H" "$KEEP_H" >"$dir/retention.json"
chmod 644 "$dir/retention.json"
db=$dir/dstream.db
DSTREAM_DB=$db DSTREAM_RETENTION=$dir/retention.json DSTREAM_SWEEP_MS=1000 \
    "$stack" start "$dir" >"$dir/start.out" 2>&1 || { cat "$dir/start.out"; exit 1; }
url=$(cat "$dir/url")
sql() { sqlite3 -cmd '.timeout 5000' "$db" "$1"; }

curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' "$url/v1/workflows" \
    --data-binary '{"name": "load", "phases": [{"name": "done", "terminal": true, "steps": [{"kind": "update", "set": {"x": 1}}]}]}'
body=$(head -c 1024 /dev/zero | tr '\0' x)
msgs=$(for _ in $(seq 1 "$MSGS"); do printf '"%s",' "$body"; done)
msgs="[${msgs%,}]"
passes() { curl -fsS "$url/metrics" | awk '$1 == "dstream_retention_passes_total" {print $2}'; }

echo "| simulated hour | streams | sessions | session rows | messages | pages in use | file + WAL (KiB) |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
start=$SECONDS
for h in $(seq 1 "$HOURS"); do
    for i in $(seq 1 "$STREAMS"); do
        curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' --data-binary "$msgs" \
            "$url/v1/stream/load/h$h-$i"
    done
    for i in $(seq 1 "$SESSIONS"); do
        curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' \
            --data-binary "{\"workflow\": \"load\", \"id\": \"load-$h-$i\"}" "$url/v1/sessions"
    done
    # Every item an hour older; then one whole pass of the runner after that.
    sql "UPDATE streams SET created_ms = created_ms - 3600000, access_ms = access_ms - 3600000
         WHERE path LIKE 'load/%' OR path LIKE 'sessions/load-%'"
    p0=$(passes); p0=${p0:-0}
    end=$((SECONDS + 30))
    while p=$(passes) && [ "${p:-0}" -lt $((p0 + 2)) ] && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
    printf '| %d | %s | %s | %s | %s | %s | %d |\n' "$h" \
        "$(sql "SELECT count(*) FROM streams WHERE deleted = 0 AND path LIKE 'load/%'")" \
        "$(sql "SELECT count(*) FROM sessions WHERE deleted = 0 AND id LIKE 'load-%'")" \
        "$(sql "SELECT count(*) FROM sessions")" \
        "$(sql "SELECT count(*) FROM messages")" \
        "$(sql "SELECT (SELECT page_count FROM pragma_page_count) - (SELECT freelist_count FROM pragma_freelist_count)")" \
        $(( ($(stat -c %s "$db") + $(stat -c %s "$db-wal" 2>/dev/null || echo 0)) / 1024 ))
done
echo
echo "$HOURS simulated hours in $((SECONDS - start)) s; /metrics:"
curl -fsS "$url/metrics" | grep '^dstream_retention_'
