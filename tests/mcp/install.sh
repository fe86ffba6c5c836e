#!/usr/bin/env bash
# Install the MCP servers the runner's tests use (pinned in package.json and
# package-lock.json) into tests/mcp/node_modules with `npm ci`, once, or again when
# the lock file changed. Prints the filesystem server's entry point on success.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 1
entry=node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
if [ ! -f "$entry" ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
fi
[ -f "$entry" ] || { echo "tests/mcp: $entry missing after npm ci" >&2; exit 1; }
echo "$here/$entry"
