#!/usr/bin/env bash
# pool-readers.sh STACK_DIR: print how many connections from nginx the dstream-fcgi
# pool started in STACK_DIR holds open, that is, live readers (long-poll or SSE)
# waiting for data, whether a process's hub keeps them or a responder thread does.
#
# A pool process holds the listening socket STACK_DIR/fcgi.sock and one socket per
# connection it serves: ordinary requests hold theirs for a few milliseconds, live
# readers until they are answered or their client leaves. The pool processes are
# the children of the PID in STACK_DIR/fcgi.pid. Only the sockets accepted on
# fcgi.sock count (/proc/net/unix names that path for them): the pool's own
# connections to a PostgreSQL server are sockets too, and are not readers.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: pool-readers.sh STACK_DIR" >&2; exit 2; }
parent=$(cat "$1/fcgi.pid")
sock=$1/fcgi.sock
inodes=$(for child in $(pgrep -P "$parent"); do
    find /proc/"$child"/fd -lname 'socket:*' -printf '%l\n' 2>/dev/null || true
done | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
# /proc/net/unix: Num RefCount Protocol Flags Type St Inode Path; the listening
# socket has the flag __SO_ACCEPTCON (00010000).
awk -v sock="$sock" -v list="$inodes" '
    BEGIN { n = split(list, a, "\n"); for (i = 1; i <= n; i++) if (a[i] != "") mine[a[i]] = 1 }
    NR > 1 && ($7 in mine) && $8 == sock && $4 != "00010000" { count++ }
    END { print count + 0 }' /proc/net/unix
