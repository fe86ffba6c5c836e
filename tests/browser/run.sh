#!/usr/bin/env bash
# run.sh SCRIPT.mjs ARGS...: run a browser test of this directory with the pinned playwright-core
# (npm ci on first use, or when the lock changed) and Debian's Chromium.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
command -v chromium >/dev/null || { echo "browser: no chromium (make deps installs it)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then
    # playwright-core needs Node 20; Debian 12's is 18: take Node 20 from npm, as
    # the conformance suite does.
    if [ ! -x .node20/node_modules/.bin/node ]; then
        npm install --no-save --no-audit --no-fund --prefix .node20 node@20 >npm-node.log 2>&1 ||
            { cat npm-node.log >&2; exit 1; }
    fi
    export PATH="$here/.node20/node_modules/.bin:$PATH"
fi
if [ ! -d node_modules/playwright-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
fi
exec node "$@"
