#!/usr/bin/env bash
# Run the HTTP suites (tests/http/*.bats) and summarise their TAP output.
#
#   B=build tests/run-http.sh [FILE.bats ...]
#   DSTREAM_TEST_ENGINE=pg B=build tests/run-http.sh [FILE.bats ...]
#
# The TAP is echoed as it comes. "ok" lines count as passed, "not ok" as failed,
# and an "ok ... # skip" as skipped. The last line is
# "http: N passed, N failed" (", N skipped" appended when any were); the exit
# status is 1 on any failure or if bats itself failed without reporting one.
#
# DSTREAM_TEST_ENGINE=pg runs them on PostgreSQL: one throwaway cluster (tests/pg.sh,
# in a temporary directory, removed at the end) on which each test stack gets a
# database of its own (tests/http/helpers.bash); the last line then begins "http-pg:".
# Without FILE arguments it runs the files that exercise storage (PG_FILES below):
# streams, producers, durability, the CLI on the database (tail, the offline
# commands), tokens, backup and check, the hash chain, the disk-full cap (skipped: SQLite's), the
# live readers (the change feed), sessions, their lineage and diff (the engine's
# walk of the fork rows), retention (the engine's scan and deletes, a kill mid-pass),
# the AI SDK's chat routes (a reply read
# live from the log, resumed mid-reply), the runner (leases, owner locks, its loop
# with many sessions at once and its drive budget, its figures, crashes, a reply continued after one, a compaction's course: time travel,
# forks, its recording), provider failover (its events, figures and recordings),
# budgets that ask (their checkpoints across a runner's kill), subscriptions,
# recording, and hostile inputs (names that are
# not UTF-8 reach the engine). Not the others: nginx's configuration, the web UI,
# MCP and providers, the CLI's surface, installing and systemd go through the same
# engine calls as these and do not depend on the engine (each may be named here as
# an argument to run on PostgreSQL), and the whole set twice would not fit `make
# test`'s budget on 2 cores. The files that start clusters of their own (70-hosts,
# 71-copy, 72-run-pg, 73-failover, 73-hosts-conformance) choose their engines
# themselves and run in the SQLite pass only.
set -u

here=$(cd "$(dirname "$0")" && pwd)
export B=${B:-build}
engine=${DSTREAM_TEST_ENGINE:-sqlite}
name=http
PG_FILES="10-streams 11-producers 12-durability 14-cli 15-auth 15-backup 16-disk-full
17-chain 17-check-live-data 20-live 24-debug-cli 27-aisdk 28-langgraph 30-sessions 31-bulk 31-lineage 32-retention 40-runner 40-runner-loop 42-runner-metrics
43-runner-crash 43-compaction 43-reply-continued 44-budget-ask 44-provider-failover 44-timers 46-subscriptions 47-recording 49-recording-chaos 53-hostile-inputs 55-otlp"

files=()
if [ $# -gt 0 ]; then
    files=("$@")
elif [ "$engine" = pg ]; then
    for f in $PG_FILES; do files+=("$here/http/$f.bats"); done
else
    shopt -s nullglob
    files=("$here"/http/*.bats)
    shopt -u nullglob
fi

if [ "$engine" = pg ]; then
    name=http-pg
    export DSTREAM_TEST_ENGINE=pg
    # A short path: the cluster's socket lives in it. The postgres user must reach it.
    DS_PG_DIR=$("$here/pg.sh" tmp dspg)
    export DS_PG_DIR
    pg_cleanup() { "$here/pg.sh" stop "$DS_PG_DIR" >/dev/null 2>&1; rm -rf "$DS_PG_DIR"; }
    if ! "$here/pg.sh" start "$DS_PG_DIR" >/dev/null; then
        pg_cleanup
        echo "$name: 0 passed, 1 failed (the PostgreSQL cluster did not start)"
        exit 1
    fi
fi

if [ ${#files[@]} -eq 0 ]; then
    echo "$name: 0 passed, 0 failed"
    exit 0
fi
if ! command -v bats >/dev/null 2>&1; then
    echo "bats not found (apt-get install bats)"
    echo "$name: 0 passed, 1 failed"
    exit 1
fi

out=$(mktemp)
trap 'rm -f "$out"; [ "$engine" = pg ] && pg_cleanup' EXIT
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

summary="$name: $passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
