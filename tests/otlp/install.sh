#!/usr/bin/env bash
# Install the OpenTelemetry protobuf definitions the OTLP receiver decodes with
# (@opentelemetry/otlp-transformer and protobufjs, pinned in package.json and
# package-lock.json) into tests/otlp/node_modules with `npm ci`, once, or again
# when the lock file changed. Prints the receiver's path on success.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 1
gen=node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js
if [ ! -f "$gen" ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
fi
[ -f "$gen" ] || { echo "tests/otlp: $gen missing after npm ci" >&2; exit 1; }
echo "$here/receiver.mjs"
