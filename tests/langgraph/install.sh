#!/usr/bin/env bash
# Install the LangGraph SDK (@langchain/langgraph-sdk, pinned in package.json and
# package-lock.json) into tests/langgraph/node_modules with `npm ci`, once, or again
# when the lock file changed, and print the node that runs it (18 or newer).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 1
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge 18 ] || { echo "tests/langgraph: node 18 or newer is needed (found ${major})" >&2; exit 1; }
if [ ! -d node_modules/@langchain/langgraph-sdk ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
fi
[ -f node_modules/@langchain/langgraph-sdk/package.json ] || { echo "tests/langgraph: the SDK is missing after npm ci" >&2; exit 1; }
command -v node
