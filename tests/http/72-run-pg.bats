#!/usr/bin/env bats
# make run-pg (deploy/dstream-stack run-pg): the whole stack on a private PostgreSQL
# cluster in DSTREAM_VAR/pg, made once (initdb) and kept between runs, reached on its
# Unix socket only; SIGINT to the supervisor's group (Ctrl-C) stops the stack and the
# cluster, exit 0, nothing left; the next run finds the cluster and its data again.
# The supervisor runs as 19-stack-run's does: a session of its own, SIGINT at its
# default.

load helpers

setup() {
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -x "${PG_BIN:-/nonexistent}/initdb" ] || skip "no PostgreSQL server binaries (apt-get install postgresql-15)"
    RUN_DIR=$("$DS_ROOT/tests/pg.sh" tmp dsrp)    # the postgres user passes through to RUN_DIR/pg
    RUN_PORT=$("$DS_BIN/dstream" free-port)
}

# Whatever a failed test left: the supervisor's session, the stack's, the cluster.
teardown() {
    [ -n "${RUN_DIR:-}" ] || return 0
    local f
    for f in sup fcgi.pid runner.pid nginx.master.pid; do
        [ -s "$RUN_DIR/$f" ] && kill -KILL -- "-$(cat "$RUN_DIR/$f")" 2>/dev/null
    done
    if [ -e "$RUN_DIR/pg/data/PG_VERSION" ]; then
        runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$RUN_DIR/pg/data" -m immediate stop >/dev/null 2>&1 ||
            "$PG_BIN/pg_ctl" -D "$RUN_DIR/pg/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    wait || true
    rm -rf "$RUN_DIR"
}

# run_start: run-pg in the background; its PID in RUN_DIR/sup, its output in
# RUN_DIR/out.N, its exit status in RUN_DIR/rc.N.
run_start() {
    rm -f "$RUN_DIR/sup"
    ( rc=0
      env --default-signal=INT DSTREAM_VAR="$RUN_DIR" DSTREAM_PORT="$RUN_PORT" B="$DS_B" DSTREAM_RUNNER=0 \
          setsid "$DS_STACK" run-pg </dev/null >"$RUN_DIR/out.$1" 2>&1 &
      echo $! >"$RUN_DIR/sup"
      wait $! || rc=$?
      echo "$rc" >"$RUN_DIR/rc.$1" ) 3>&- &
    ds_poll 10 test -s "$RUN_DIR/sup"
}

ready() {
    grep -q "^dstream is running at" "$RUN_DIR/out.$1" &&
        curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$RUN_PORT/v1/health"
}

# server_up: the cluster's postmaster runs (its pid file names a live process).
server_up() {
    [ -s "$RUN_DIR/pg/data/postmaster.pid" ] && kill -0 "$(head -1 "$RUN_DIR/pg/data/postmaster.pid")" 2>/dev/null
}

# ctrl_c N: SIGINT to the supervisor's group; it exits 0, and neither the stack nor
# the cluster is left.
ctrl_c() {
    kill -INT -- "-$(cat "$RUN_DIR/sup")"
    ds_poll 60 test -s "$RUN_DIR/rc.$1" || fail "still running 60 s after SIGINT: $(cat "$RUN_DIR/out.$1")"
    [ "$(cat "$RUN_DIR/rc.$1")" = 0 ] || fail "exit $(cat "$RUN_DIR/rc.$1"): $(cat "$RUN_DIR/out.$1")"
    grep -q "dstream-stack: stopping PostgreSQL ($RUN_DIR/pg)" "$RUN_DIR/out.$1" ||
        fail "the cluster's stop was not said: $(cat "$RUN_DIR/out.$1")"
    ! server_up || fail "PostgreSQL still runs"
    [ ! -e "$RUN_DIR/pg/.s.PGSQL.5432" ]
    for f in fcgi.pid nginx.master.pid; do
        [ ! -s "$RUN_DIR/$f" ] || ! kill -0 "$(cat "$RUN_DIR/$f")" 2>/dev/null || fail "$f still runs"
    done
}

@test "make run-pg: the stack on a private cluster in ./var/pg, kept between runs; Ctrl-C stops both" {
    uri="postgresql:///dstream?host=$RUN_DIR/pg&user=postgres"
    run_start 1
    ds_poll 60 ready 1 || fail "not ready: $(cat "$RUN_DIR/out.1")"
    grep -q "initdb: a PostgreSQL cluster in $RUN_DIR/pg/data" "$RUN_DIR/out.1"
    grep -qF "database: $uri," "$RUN_DIR/out.1"
    # Only a Unix socket, in the cluster's directory, which only its owner enters.
    [ -S "$RUN_DIR/pg/.s.PGSQL.5432" ]
    [ "$(stat -c %a "$RUN_DIR/pg")" = 700 ]
    grep -q "^listen_addresses = ''" <(runuser -u postgres -- "$PG_BIN/psql" -h "$RUN_DIR/pg" -U postgres -d dstream \
        -Atc "SELECT 'listen_addresses = ''' || setting || '''' FROM pg_settings WHERE name = 'listen_addresses'")
    tok=$(cat "$RUN_DIR/admin.token")
    run curl -sS -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $tok" \
        -H 'Content-Type: text/plain' --data-binary kept "http://127.0.0.1:$RUN_PORT/v1/stream/kept"
    assert_output 201
    run "$DS_BIN/dstream" --db "$uri" streams
    assert_success
    assert_output --partial kept
    ctrl_c 1
    # Again: the cluster is there, not made anew, with what the first run wrote.
    run_start 2
    ds_poll 60 ready 2 || fail "not ready: $(cat "$RUN_DIR/out.2")"
    ! grep -q initdb "$RUN_DIR/out.2"
    run curl -sS -H "Authorization: Bearer $tok" "http://127.0.0.1:$RUN_PORT/v1/stream/kept?offset=-1"
    assert_output kept
    ctrl_c 2
}
