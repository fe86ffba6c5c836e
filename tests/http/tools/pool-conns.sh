#!/usr/bin/env bash
# pool-conns.sh SOCKET: print how many connections the dstream-fcgi pool has
# accepted on its listening socket SOCKET (a path) and still holds open. Each one
# is served by one responder thread. Connections still waiting in the listen
# queue are not counted (nobody has accepted them).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: pool-conns.sh SOCKET" >&2; exit 2; }
# An accepted unix stream socket is listed ESTAB with the listening path as its
# local address; nginx's ends of those connections have no local address ("*").
ss -xH | awk -v p="$1" '$1 == "u_str" && $2 == "ESTAB" && $5 == p { n++ } END { print n + 0 }'
