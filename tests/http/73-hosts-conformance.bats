#!/usr/bin/env bats
# The Durable Streams conformance suite through an nginx that round-robins between
# two hosts (issue 23, docs/scale-out.md): two complete stacks (nginx + pool +
# runner each, own ports, directories, admin tokens and runner ids) on one
# throwaway PostgreSQL cluster (tests/pg.sh, Unix socket only), and in front of
# them one more nginx whose upstream is both stacks' proxies, taken in turn request
# by request. A client's consecutive requests (create, append, read, long-poll, SSE)
# then land on different hosts: every answer must hold whichever host gives it. The
# suite runs as tests/conformance/run.sh runs it (its long-poll timeout 1.5 s, under
# the suite's 5 s limit; loopback webhooks allowed) and must pass all of its tests;
# both hosts must have answered some of them.
#
# Every process is stopped by the PID recorded when it was started; HOSTS_KEEP=1
# keeps the file's directory (logs, cluster) for a look after a failure. The hosts:
# hosts-helpers.bash.

load hosts-helpers

HC_HOSTS=2

setup_file() {
    hosts_need_pg || return 1
    hosts_tmp ds73 || return 1
    HC_URI=$("$DS_ROOT/tests/pg.sh" start "$HOSTS_TMP/pg") || return 1
    HC_PORT=$("$DS_BIN/dstream" free-port)
    export HC_URI HC_PORT
    local h
    for h in $(seq 1 $HC_HOSTS); do hc_up "$h" || return 1; done
    hc_front || return 1
}

teardown_file() {
    [ -s "${HOSTS_TMP:-/nonexistent}/front/nginx.master.pid" ] && kill -TERM "$(cat "$HOSTS_TMP/front/nginx.master.pid")" 2>/dev/null
    hosts_down
    [ -n "${HOSTS_TMP:-}" ] && "$DS_ROOT/tests/pg.sh" stop "$HOSTS_TMP/pg" >/dev/null 2>&1
    hosts_rm
}

# The settings tests/conformance/run.sh gives its stack, for both hosts; Location
# headers name the front's URL.
hc_env() {
    printf '%s\n' DSTREAM_DB="$HC_URI" DSTREAM_RUNNER_ID="host-$1" DSTREAM_STACK_TOKEN_NAME="host-$1" \
        DSTREAM_AUTH=on DSTREAM_LONGPOLL_MS=1500 DSTREAM_CORS_ORIGINS=https://example.com \
        DSTREAM_WEBHOOK_ALLOW=127.0.0.1 DSTREAM_PUBLIC_URL="http://127.0.0.1:$HC_PORT"
}

# hc_up N: start host N's stack in $HOSTS_TMP/hN.
hc_up() {
    local env_
    mapfile -t env_ < <(hc_env "$1")
    hosts_up "$1" "${env_[@]}"
}

# hc_front: the round-robin nginx on HC_PORT, upstream of every host's proxy (which
# adds that host's admin token, as a site's authenticating proxy would).
hc_front() {
    local dir=$HOSTS_TMP/front h hp servers="" user=""
    mkdir -p "$dir/tmp" "$dir/logs"
    for h in $(seq 1 $HC_HOSTS); do
        hp=$(hosts_url "$h")
        servers="$servers        server ${hp#http://};"$'\n'
    done
    [ "$(id -u)" = 0 ] && user="user root;"
    cat >"$dir/nginx.conf" <<CONF
$user
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    log_format hc '\$upstream_addr \$status \$request_method \$uri';
    access_log $dir/logs/access.log hc;
    upstream hosts {
$servers        keepalive 32;
    }
    server {
        listen 127.0.0.1:$HC_PORT;
        client_max_body_size 0;
        location / {
            proxy_pass http://hosts;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$http_host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 300s;
            proxy_next_upstream off;
        }
    }
}
CONF
    "${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}" -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" \
        -g 'daemon off;' </dev/null >>"$dir/logs/error.log" 2>&1 3>&- &
    echo $! >"$dir/nginx.master.pid"
    ds_poll 15 curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$HC_PORT/v1/health" ||
        { cat "$dir/logs/error.log" >&2; return 1; }
}

# answered_by N: how many requests the front sent to host N's proxy.
answered_by() {
    local hp
    hp=$(hosts_url "$1")
    grep -c "^${hp#http://} " "$HOSTS_TMP/front/logs/access.log" || true
}

@test "conformance through an nginx that round-robins between two hosts on one PostgreSQL: every test passes" {
    run env CONFORMANCE_URL="http://127.0.0.1:$HC_PORT" B="$DS_B" timeout 240 "$DS_ROOT/tests/conformance/run.sh"
    echo "$output" | tail -n 40
    summary=$(echo "$output" | grep '^conformance: [0-9]* passed' | tail -n 1)
    echo "$summary" "(host 1: $(answered_by 1) requests, host 2: $(answered_by 2))" >&3
    [[ "$summary" =~ ^conformance:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]
    [ "${BASH_REMATCH[2]}" = 0 ]
    [ "${BASH_REMATCH[1]}" -ge 338 ]
    [ "$status" = 0 ]
    # Round-robin: both hosts answered a fair share.
    [ "$(answered_by 1)" -ge 100 ]
    [ "$(answered_by 2)" -ge 100 ]
}
