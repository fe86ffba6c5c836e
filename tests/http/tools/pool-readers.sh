#!/usr/bin/env bash
# pool-readers.sh STACK_DIR: print how many connections from nginx the dstream-fcgi
# pool started in STACK_DIR holds open, that is, live readers (long-poll or SSE)
# waiting for data, whether a process's hub keeps them or a responder thread does.
#
# A pool process holds the listening socket and one socket per connection it
# serves: ordinary requests hold theirs for a few milliseconds, live readers until
# they are answered or their client leaves. The pool processes are the children of
# the PID in STACK_DIR/fcgi.pid.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: pool-readers.sh STACK_DIR" >&2; exit 2; }
parent=$(cat "$1/fcgi.pid")
n=0
for child in $(pgrep -P "$parent"); do
    k=$(find /proc/"$child"/fd -lname 'socket:*' 2>/dev/null | wc -l) || true
    [ "$k" -gt 0 ] && n=$((n + k - 1))
done
echo "$n"
