#!/usr/bin/env bash
# pool-waiters.sh STACK_DIR: print how many responder threads of the dstream-fcgi
# pool started in STACK_DIR are blocked in poll(), that is, holding a live reader
# (long-poll or SSE) that waits for data.
#
# A live reader is the only request that makes a responder poll(); the other
# threads block in accept() or read(). Each pool process also has one watcher
# thread (lib/wake.c) that sits in poll() while idle and is subtracted here;
# during the 50 ms after a commit it polls without blocking, so the count can read
# one low per process then, never high. The pool processes are the children of
# the PID in STACK_DIR/fcgi.pid; a thread's kernel wait channel (/proc/.../wchan)
# says where it is blocked.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: pool-waiters.sh STACK_DIR" >&2; exit 2; }
parent=$(cat "$1/fcgi.pid")
n=0 procs=0
for child in $(pgrep -P "$parent"); do
    procs=$((procs + 1))
    k=$(grep -l '^poll_schedule_timeout' /proc/"$child"/task/*/wchan 2>/dev/null | wc -l) || true
    n=$((n + k))
done
echo $((n - procs))
