#!/usr/bin/env bash
# nonreader.sh URL SECONDS: a client that sends GET URL and then never reads its
# response, for SECONDS (its whole life, bounded), then leaves. Its socket's receive
# buffer fills and stays full: the server's writes to it would block.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: nonreader.sh http://HOST:PORT/PATH SECONDS" >&2; exit 2; }
rest=${1#http://}
hostport=${rest%%/*}
path=/${rest#*/}
host=${hostport%:*}
port=${hostport##*:}
exec 3<>"/dev/tcp/$host/$port"
printf 'GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n' \
    "$path" "$hostport" >&3
exec sleep "$2"   # the socket closes with it (also when it is killed)
