#!/usr/bin/env bash
# Run the Durable Streams conformance suite (pinned in package.json) against a fresh
# nginx + dstream-fcgi stack on a free loopback port. Prints its summary last:
#   conformance: N passed, N failed
# CONFORMANCE_SKIP: a regex of test names to leave out (set by the Makefile).
# CONFORMANCE_URL: the base URL of a server already running (for example several
# stacks behind one proxy, tests/http/73-hosts-conformance.bats) to test instead of
# a fresh stack; it must allow what this script's stack allows (below).
# DSTREAM_TEST_ENGINE=pg: the fresh stack's database is on PostgreSQL, a throwaway
# cluster (tests/pg.sh, fsync on) in the run's temporary directory, stopped and
# removed at the end; the summary then begins "conformance-pg:".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"
name=conformance
pg=""
[ "${DSTREAM_TEST_ENGINE:-sqlite}" = pg ] && [ -z "${CONFORMANCE_URL:-}" ] && pg=1 && name=conformance-pg

# vitest 4 needs Node 20 or newer; Debian 12's own nodejs is 18. Then take Node 20
# from the npm registry (the "node" package ships the binary) for this suite only.
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then
    if [ ! -x .node20/node_modules/.bin/node ]; then
        echo "conformance: Node $major is too old for vitest; installing Node 20 from npm"
        npm install --no-save --no-audit --no-fund --prefix .node20 node@20 >npm-node.log 2>&1 ||
            { cat npm-node.log; echo "$name: 0 passed, 1 failed"; exit 1; }
    fi
    export PATH="$here/.node20/node_modules/.bin:$PATH"
fi

if [ ! -d node_modules/@durable-streams/server-conformance-tests ] ||
   [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "conformance: installing the suite (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 ||
        { cat npm.log; echo "$name: 0 passed, 1 failed"; exit 1; }
fi

dir=$(mktemp -d /tmp/dstream-conf.XXXXXX)
cleanup() {
    "$root/deploy/dstream-stack" stop "$dir" >/dev/null 2>&1
    [ -n "$pg" ] && "$root/tests/pg.sh" stop "$dir/pg" >/dev/null 2>&1
    rm -rf "$dir"
}
trap cleanup EXIT
if [ -n "$pg" ]; then
    chmod 711 "$dir"    # the postgres user passes through to the cluster's directory
    DSTREAM_DB=$("$root/tests/pg.sh" start "$dir/pg") ||
        { echo "$name: 0 passed, 1 failed (the PostgreSQL cluster did not start)"; exit 1; }
    export DSTREAM_DB
fi
# Long-polls answer 204 well inside the suite's 5 s per-test limit.
export DSTREAM_LONGPOLL_MS=${DSTREAM_LONGPOLL_MS:-1500}
# Auth is on, as deployed: the suite reaches the server through the stack's proxy,
# which adds an admin token the way a site's own authenticating proxy would. The
# suite's preflight test comes from https://example.com: the operator allows it.
export DSTREAM_AUTH=on DSTREAM_CORS_ORIGINS=${DSTREAM_CORS_ORIGINS:-https://example.com}
# The subscription group's webhook receivers listen on 127.0.0.1: a test
# configuration that allows loopback webhook targets, which a deployment does not
# (docs/subscriptions.md). Its "unsafe URL" test (10.0.0.1) is refused all the same.
export DSTREAM_WEBHOOK_ALLOW=${DSTREAM_WEBHOOK_ALLOW:-127.0.0.1}
if [ -n "${CONFORMANCE_URL:-}" ]; then
    url=$CONFORMANCE_URL
    echo "conformance: the server at $url"
else
    url=$("$root/deploy/dstream-stack" start "$dir") ||
        { echo "$name: 0 passed, 1 failed"; exit 1; }
    echo "$name: stack at $url${pg:+ on PostgreSQL ($DSTREAM_DB)}"
fi

args=(run --reporter=default --reporter=json --outputFile.json="$dir/results.json")
if [ -n "${CONFORMANCE_SKIP:-}" ]; then
    args+=(--testNamePattern "^(?!.*(${CONFORMANCE_SKIP})).*\$")
    echo "conformance: leaving out tests matching: $CONFORMANCE_SKIP"
fi
DSTREAM_URL=$url npx vitest "${args[@]}"
status=$?
if [ ! -f "$dir/results.json" ]; then
    echo "$name: 0 passed, 1 failed"
    exit 1
fi
node -e '
const r = require(process.argv[1]);
console.log(`${process.argv[2]}: ${r.numPassedTests} passed, ${r.numFailedTests} failed` +
            (r.numPendingTests ? `, ${r.numPendingTests} skipped` : ""));
' "$dir/results.json" "$name"
exit $status
