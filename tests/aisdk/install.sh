#!/usr/bin/env bash
# Install the AI SDK (the `ai` package, pinned in package.json and package-lock.json)
# into tests/aisdk/node_modules with `npm ci`, once, or again when the lock file
# changed, and print the node that runs it: ai 7 needs Node 22 or newer; with an
# older node (Debian 12's is 18) Node 22 comes from the npm registry (the "node"
# package ships the binary) into tests/aisdk/.node22, for these tests only.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 1
node=node
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 22 ]; then
    if [ ! -x .node22/node_modules/.bin/node ]; then
        npm install --no-save --no-audit --no-fund --prefix .node22 node@22 >npm-node.log 2>&1 ||
            { cat npm-node.log >&2; exit 1; }
    fi
    node=$here/.node22/node_modules/.bin/node
fi
if [ ! -d node_modules/ai ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
fi
[ -f node_modules/ai/package.json ] || { echo "tests/aisdk: ai missing after npm ci" >&2; exit 1; }
command -v "$node"
