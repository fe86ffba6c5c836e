#!/usr/bin/env bash
# Install the OpenAPI checks' packages (pinned in package.json and package-lock.json:
# @apidevtools/swagger-parser, ajv, ajv-formats) into tests/openapi/node_modules with
# `npm ci`, once, or again when the lock file changed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 1
if [ ! -d node_modules/@apidevtools/swagger-parser ] || [ ! -d node_modules/ajv-formats ] ||
   [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
fi
[ -d node_modules/@apidevtools/swagger-parser ] || { echo "tests/openapi: swagger-parser missing after npm ci" >&2; exit 1; }
