#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, on a Unix socket only, in a directory.
#
#   tests/pg.sh start DIR [fast]   initdb (once) and start; prints the URI of its
#                                  database "dstream": postgresql:///dstream?host=DIR&user=postgres
#   tests/pg.sh db DIR NAME        a fresh database NAME (dropped first if there): prints its URI
#   tests/pg.sh stop DIR           stop it (the directory stays; remove it yourself)
#   tests/pg.sh crash DIR          stop it as a crash would (pg_ctl stop -m immediate:
#                                  no checkpoint; the next start recovers from the WAL)
#   tests/pg.sh tmp [PREFIX]       make and print a directory for clusters to live in:
#                                  /tmp/PREFIX.XXXXXX (dspg), short, mode 0711
#
# Debian's server binaries (postgresql-15, /usr/lib/postgresql/15/bin). As root, the
# cluster belongs to the postgres user (initdb refuses root): DIR is made theirs, so
# every directory above it must be one they may pass through (a mktemp -d needs
# chmod 711 first: tests/pg.sh tmp makes one so). Nothing listens on TCP: the socket is DIR/.s.PGSQL.5432, so DIR's path must
# be short (a socket path has at most 107 bytes). "fast" turns fsync off (unit tests
# only: a crash of the machine may lose the cluster; never for tests of durability).
# start is idempotent (a running cluster is left as it is) and takes about a second.
set -eu

bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
die() { echo "pg.sh: $*" >&2; exit 1; }
[ -x "$bin/initdb" ] || die "no PostgreSQL server binaries (apt-get install postgresql-15)"

export PGOPTIONS='-c client_min_messages=warning'

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

uri() { echo "postgresql:///$1?host=$dir&user=postgres"; }

if [ "${1:-}" = tmp ]; then
    d=$(mktemp -d "/tmp/${2:-dspg}.XXXXXX") && chmod 711 "$d" && echo "$d"
    exit
fi

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: pg.sh start|db|stop|crash DIR ... | tmp [PREFIX]"
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac
[ ${#dir} -le 90 ] || die "$dir: too long for a socket path"

case "$cmd" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir" && chmod 700 "$dir"
        as_pg test -x "$dir" || die "$dir: the postgres user cannot reach it (chmod o+x the directories above)"
    fi
    if [ ! -e "$dir/data/PG_VERSION" ]; then
        as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
            >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    fi
    if ! as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        opts="-c listen_addresses='' -k $dir -c max_connections=200 -c shared_buffers=32MB"
        [ "${3:-}" = fast ] && opts="$opts -c fsync=off -c full_page_writes=off"
        as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -o "$opts" start >/dev/null ||
            { tail -n 20 "$dir/server.log" >&2; die "the server did not start"; }
    fi
    if [ "$(as_pg "$bin/psql" -h "$dir" -U postgres -d postgres -Atqc \
            "SELECT 1 FROM pg_database WHERE datname = 'dstream'")" != 1 ]; then
        as_pg "$bin/psql" -h "$dir" -U postgres -d postgres -qc 'CREATE DATABASE dstream' >/dev/null
    fi
    uri dstream
    ;;
db)
    name=${3:-}
    [[ "$name" =~ ^[a-z_][a-z0-9_]*$ ]] || die "db: a database name of a-z, 0-9 and _"
    as_pg "$bin/psql" -h "$dir" -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null
    as_pg "$bin/psql" -h "$dir" -U postgres -d postgres -qc "CREATE DATABASE $name" >/dev/null
    uri "$name"
    ;;
stop)
    if [ -e "$dir/data/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        as_pg "$bin/pg_ctl" -D "$dir/data" -w -t 30 -m fast stop >/dev/null
    fi
    ;;
crash)
    as_pg "$bin/pg_ctl" -D "$dir/data" -w -t 30 -m immediate stop >/dev/null
    ;;
*) die "unknown command $cmd" ;;
esac
