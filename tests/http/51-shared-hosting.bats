#!/usr/bin/env bats
# Shared hosting: dstream installed under a home directory (make install
# PREFIX=$HOME/dstream) and served by a web server the account does not control,
# started here as an unprivileged user on a free loopback port:
#   - Apache (Debian's apache2) with the .htaccess of deploy/shared-hosting/: plain
#     CGI under mod_cgi (prefork) and mod_cgid (event), and FastCGI under mod_fcgid;
#   - spawn-fcgi behind nginx, from the crontab line of deploy/shared-hosting/;
#   - the runner from its crontab line, single-instance by its lock.
# The files of deploy/shared-hosting/ are used as they are, with /home/you replaced.

load helpers

SH=$DS_ROOT/deploy/shared-hosting

setup_file() {
    command -v /usr/sbin/apache2 >/dev/null || [ -x /usr/sbin/apache2 ] || skip "apache2 is not installed (make deps)"
    HOME_DIR=$(mktemp -d -t dstream-home.XXXXXX)
    export HOME_DIR
    make -s -C "$DS_ROOT" install PREFIX="$HOME_DIR/dstream" B="$DS_B" >"$HOME_DIR/install.out" 2>&1 ||
        { cat "$HOME_DIR/install.out" >&2; return 1; }
    mkdir -p "$HOME_DIR/dstream/var" "$HOME_DIR/run" "$HOME_DIR/logs"
    # The account: nobody when the tests run as root, else whoever runs them.
    as_user_init
    if [ "$(id -u)" = 0 ]; then
        chown -R nobody:nogroup "$HOME_DIR"
        chmod 0755 "$HOME_DIR"
    fi
    # A token when the build has them (an admin token made by the account's CLI).
    if "$HOME_DIR/dstream/bin/dstream" help 2>&1 | grep -qE '^ +token'; then
        as_user env DSTREAM_DB="$HOME_DIR/dstream/var/dstream.db" "$HOME_DIR/dstream/bin/dstream" \
            token create --name shared-hosting --scope admin >"$HOME_DIR/token.out" 2>&1 ||
            { cat "$HOME_DIR/token.out" >&2; return 1; }
        tail -n 1 "$HOME_DIR/token.out" >"$HOME_DIR/token"
    fi
}

teardown_file() {
    [ -n "${HOME_DIR:-}" ] && rm -rf "$HOME_DIR"
    return 0
}

# Each server runs in a process group of its own (setsid), so that teardown ends it
# with everything it started (Apache's children, mod_fcgid's processes, the pool's
# workers, a cron line's flock and shell), by that group's id.
spawn_group() {
    local out=$1
    shift
    setsid "$@" >"$out" 2>&1 3>&- &
    LAST_PID=$!
    GROUPS_STARTED+=("$LAST_PID")
}

stop_groups() {
    local g
    for g in "${GROUPS_STARTED[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
    for g in "${GROUPS_STARTED[@]}"; do
        ds_poll 10 group_gone "$g" || kill -KILL -- "-$g" 2>/dev/null || true
    done
    GROUPS_STARTED=()
}

group_gone() { ! kill -0 -- "-$1" 2>/dev/null; }

setup() {
    GROUPS_STARTED=()
    as_user_init
    # The account's own directory for this test (bats' is private to root).
    T=$HOME_DIR/test-$BATS_TEST_NUMBER
    mkdir -p "$T"
    [ "$(id -u)" != 0 ] || chown nobody:nogroup "$T"
    BG_PIDS=()
    TOKEN=$(cat "$HOME_DIR/token" 2>/dev/null || true)
}

teardown() {
    ds_bg_stop
    stop_groups
}

# AS_USER: the command prefix that runs a program as the account (it execs: the
# PID of "${AS_USER[@]}" prog is prog's).
as_user_init() {
    AS_USER=(env HOME="$HOME_DIR")
    [ "$(id -u)" != 0 ] ||
        AS_USER=(setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- env HOME="$HOME_DIR")
}

# as_user COMMAND...: run as the account.
as_user() { "${AS_USER[@]}" "$@"; }

# home_file SRC DEST [MODE]: SRC with /home/you replaced by the account's home.
home_file() {
    sed "s#/home/you#$HOME_DIR#g" "$1" >"$2"
    chmod "${3:-0644}" "$2"
    [ "$(id -u)" != 0 ] || chown nobody:nogroup "$2"
}

# sreq METHOD PATH [curl args...]: req with the account's token, if there is one.
sreq() {
    local m=$1 p=$2
    shift 2
    if [ -n "$TOKEN" ]; then req "$m" "$p" -H "Authorization: Bearer $TOKEN" "$@"; else req "$m" "$p" "$@"; fi
}

# apache_start MPM HANDLER_MODULE HTACCESS: a site at ~/public_html/<name> with that
# .htaccess; sets DS_URL. HANDLER_MODULE: cgi, cgid or fcgid.
apache_start() {
    local mpm=$1 mod=$2 htaccess=$3 port site
    site=$HOME_DIR/public_html-$mod
    mkdir -p "$site"
    home_file "$SH/$htaccess" "$site/.htaccess"
    case $mod in
    cgi | cgid) cp "$HOME_DIR/dstream/bin/dstream-fcgi" "$site/dstream.cgi" ;;
    fcgid) home_file "$SH/dstream.fcgi" "$site/dstream.fcgi" 0755 ;;
    esac
    [ "$(id -u)" != 0 ] || chown -R nobody:nogroup "$site"
    port=$("$DS_BIN/dstream" free-port)
    cat >"$T/httpd.conf" <<CONF
ServerRoot /usr/lib/apache2
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile $T/httpd.pid
DefaultRuntimeDir $HOME_DIR/run
ErrorLog $T/apache-error.log
LogLevel warn
LoadModule mpm_${mpm}_module modules/mod_mpm_${mpm}.so
LoadModule authz_core_module modules/mod_authz_core.so
LoadModule mime_module modules/mod_mime.so
TypesConfig /dev/null
LoadModule env_module modules/mod_env.so
LoadModule rewrite_module modules/mod_rewrite.so
LoadModule ${mod}_module modules/mod_${mod}.so
<IfModule cgid_module>
    ScriptSock $HOME_DIR/run/cgid-$port.sock
</IfModule>
<IfModule fcgid_module>
    FcgidIPCDir $HOME_DIR/run/fcgid-$port
    FcgidProcessTableFile $HOME_DIR/run/fcgid-$port.shm
</IfModule>
DocumentRoot $site
<Directory $site>
    AllowOverride All
    Require all granted
</Directory>
CONF
    chmod 0644 "$T/httpd.conf"
    [ "$(id -u)" != 0 ] || chown nobody:nogroup "$T/httpd.conf"
    spawn_group "$T/apache.out" "${AS_USER[@]}" /usr/sbin/apache2 -f "$T/httpd.conf" -DFOREGROUND
    DS_URL=http://127.0.0.1:$port
    ds_poll 20 curl -sS -o /dev/null --max-time 2 "$DS_URL/" 2>/dev/null ||
        fail "apache did not start: $(cat "$T/apache.out" "$T/apache-error.log" 2>/dev/null)"
}

# The stream checks every server passes: create, append (text and a JSON array),
# catch-up from the start and from an offset, HEAD, a JSON 404, delete.
streams_work() {
    local s=/v1/stream/$(ds_name sh) j=/v1/stream/$(ds_name shj) off
    sreq PUT "$s" -H 'Content-Type: text/plain'
    assert_status 201
    sreq POST "$s" -H 'Content-Type: text/plain' --data-binary 'first '
    assert_status 204
    off=$(header Stream-Next-Offset)
    sreq POST "$s" -H 'Content-Type: text/plain' --data-binary 'second'
    assert_status 204
    sreq GET "$s?offset=-1"
    assert_status 200
    assert_body 'first second'
    assert_header Stream-Up-To-Date true
    sreq GET "$s?offset=$off"
    assert_status 200
    assert_body second
    sreq HEAD "$s"
    assert_status 200
    assert_header Content-Type text/plain
    sreq PUT "$j" -H 'Content-Type: application/json'
    assert_status 201
    sreq POST "$j" -H 'Content-Type: application/json' --data-binary '[{"n":1},{"n":2}]'
    assert_status 204
    sreq GET "$j?offset=-1"
    assert_status 200
    assert_body_json '. == [{"n":1},{"n":2}]'
    sreq GET "/v1/stream/$(ds_name missing)?offset=-1"
    assert_status 404
    assert_json_error
    sreq DELETE "$s"
    assert_status 204
    sreq GET "$s?offset=-1"
    assert_status 404
}

# Under plain CGI nothing can wake a waiting request: a long-poll at the tail
# answers at once (204) and SSE sends what there is and ends.
live_answers_at_once() {
    local s=/v1/stream/$(ds_name shl) t0
    sreq PUT "$s" -H 'Content-Type: text/plain'
    sreq POST "$s" -H 'Content-Type: text/plain' --data-binary 'x'
    t0=$(date +%s%N)
    DS_CURL_MAX_TIME=20 sreq GET "$s?offset=now&live=long-poll"
    assert_status 204
    [ $(($(date +%s%N) - t0)) -lt 10000000000 ] || fail "the long-poll waited"
    DS_CURL_MAX_TIME=20 sreq GET "$s?offset=-1&live=sse"
    assert_status 200
    [[ $body == *"data:x"* ]] || fail "SSE body: $body"
}

@test "Apache mod_cgid (event MPM): appends and reads through the CGI program, long-poll answers at once" {
    apache_start event cgid cgi.htaccess
    streams_work
    live_answers_at_once
    [ -f "$HOME_DIR/dstream/var/dstream.db" ] || fail "the database is not where SetEnv put it"
}

@test "Apache mod_cgi (prefork MPM): appends and reads through the CGI program" {
    apache_start prefork cgi cgi.htaccess
    streams_work
    live_answers_at_once
}

# long_poll_woken URL_PATH: a long-poll from the stream's tail (its offset asked
# first, so an append that lands before the poll arrives is still what it returns)
# answers 200 with what the append wrote. With WAIT_CHECK set, the test first waits
# until that command sees the reader waiting.
long_poll_woken() {
    local s=$1 tail tok=() lp
    sreq GET "$s?offset=-1"
    tail=$(header Stream-Next-Offset)
    [ -z "$TOKEN" ] || tok=(-H "Authorization: Bearer $TOKEN")
    spawn "$T/lp.out" curl -sS --max-time 20 -D "$T/lp.headers" "${tok[@]}" "$DS_URL$s?offset=$tail&live=long-poll"
    lp=$LAST_PID
    if [ -n "${WAIT_CHECK:-}" ]; then
        ds_poll 10 $WAIT_CHECK || fail "the long-poll is not waiting"
    fi
    sreq POST "$s" -H 'Content-Type: text/plain' --data-binary 'woken'
    assert_status 204
    ds_poll 15 rn_exited "$lp" || fail "the long-poll did not end"
    grep -q '^HTTP/1.1 200' "$T/lp.headers" || fail "$(cat "$T/lp.headers")"
    [ "$(cat "$T/lp.out")" = woken ] || fail "long-poll body: $(cat "$T/lp.out")"
}

@test "Apache mod_fcgid: appends and reads, and a long-poll at the tail gets the next append" {
    [ -f /usr/lib/apache2/modules/mod_fcgid.so ] || skip "libapache2-mod-fcgid is not installed"
    apache_start event fcgid fcgid.htaccess
    streams_work
    s=/v1/stream/$(ds_name shw)
    sreq PUT "$s" -H 'Content-Type: text/plain'
    assert_status 201
    long_poll_woken "$s"
}

rn_exited() { ! kill -0 "$1" 2>/dev/null; }

# cron_line N: the Nth "* * * * *" command of deploy/shared-hosting/crontab, for the account.
cron_line() {
    sed "s#/home/you#$HOME_DIR#g" "$SH/crontab" | sed -n 's/^\* \* \* \* \* //p' | sed -n "${1}p"
}

cron_db() { sed -n 's#^DSTREAM_DB=##p' "$SH/crontab" | sed "s#/home/you#$HOME_DIR#g"; }

# run_cron N: run that line the way cron does (sh -c, with the crontab's variables).
run_cron() { as_user env DSTREAM_DB="$(cron_db)" PATH=/usr/bin:/bin sh -c "$(cron_line "$1")"; }

@test "spawn-fcgi behind nginx, started by its crontab line: appends, reads and live reads" {
    command -v spawn-fcgi >/dev/null || skip "spawn-fcgi is not installed"
    spawn_group "$T/cron-fcgi.out" "${AS_USER[@]}" env DSTREAM_DB="$(cron_db)" PATH=/usr/bin:/bin sh -c "$(cron_line 2)"
    ds_poll 10 test -S "$HOME_DIR/dstream/var/fcgi.sock" || fail "no socket: $(cat "$T/cron-fcgi.out" "$HOME_DIR/dstream/var/fcgi.log")"
    # A second start (the next minute) finds the lock taken and leaves at once.
    run run_cron 2
    assert_failure
    # nginx, as a site would configure it: the installed snippets, an upstream on the socket.
    port=$("$DS_BIN/dstream" free-port)
    mkdir -p "$T/nginx/tmp"
    cat >"$T/nginx/nginx.conf" <<CONF
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $T/nginx/tmp/body;
    fastcgi_temp_path $T/nginx/tmp/fastcgi;
    proxy_temp_path $T/nginx/tmp/proxy;
    uwsgi_temp_path $T/nginx/tmp/uwsgi;
    scgi_temp_path $T/nginx/tmp/scgi;
    include $HOME_DIR/dstream/share/dstream/nginx/dstream-http.conf;
    upstream dstream { zone dstream 64k; server unix:$HOME_DIR/dstream/var/fcgi.sock max_conns=16416; }
    server {
        listen 127.0.0.1:$port;
        client_max_body_size 66m;
        include $HOME_DIR/dstream/share/dstream/nginx/dstream.conf;
        include $HOME_DIR/dstream/share/dstream/nginx/dstream-errors.conf;
        include $HOME_DIR/dstream/share/dstream/nginx/dstream-metrics.conf;
    }
}
CONF
    [ "$(id -u)" != 0 ] || chown -R nobody:nogroup "$T/nginx" "$T"
    spawn_group "$T/nginx.out" "${AS_USER[@]}" "${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}" -p "$T/nginx" \
        -c "$T/nginx/nginx.conf" -e "$T/nginx/error.log" -g 'daemon off;'
    DS_URL=http://127.0.0.1:$port
    ds_poll 10 eval 'sreq GET /v1/health && [ "$status_code" = 200 ]' ||
        fail "nginx: $(cat "$T/nginx.out" "$T/nginx/error.log")"
    streams_work
    # A pool, not CGI: a long-poll waits on the hub until an append wakes it.
    s=/v1/stream/$(ds_name spl)
    sreq PUT "$s" -H 'Content-Type: text/plain'
    WAIT_CHECK=hub_holds_a_reader long_poll_woken "$s"
}

# hub_holds_a_reader: /metrics shows a live reader waiting on the hub.
hub_holds_a_reader() {
    curl -sS --max-time 5 "$DS_URL/metrics" ${TOKEN:+-H "Authorization: Bearer $TOKEN"} |
        grep -q '^dstream_live_readers{held_by="hub"} [1-9]'
}

@test "the runner from its crontab line: it runs, and the next minute's start leaves it alone" {
    spawn_group "$T/cron-runner.out" "${AS_USER[@]}" env DSTREAM_DB="$(cron_db)" PATH=/usr/bin:/bin sh -c "$(cron_line 1)"
    runner_started() { grep -q 'dstream-runner: started' "$HOME_DIR/dstream/var/runner.log" 2>/dev/null; }
    ds_poll 15 runner_started || fail "the runner did not start: $(cat "$T/cron-runner.out" "$HOME_DIR/dstream/var/runner.log" 2>/dev/null)"
    run run_cron 1
    assert_failure
    [ "$(grep -c 'dstream-runner: started' "$HOME_DIR/dstream/var/runner.log")" = 1 ]
    rn_exited "$LAST_PID" && fail "the first runner exited"
    true
}
