#!/usr/bin/env bats
# make install / make uninstall into a temporary prefix, the installed systemd units
# checked by systemd itself (systemd-analyze verify, and security with its exposure
# score), and the pool's socket activation: it serves the listening socket passed
# the way systemd passes it (LISTEN_FDS/LISTEN_PID, via systemd-socket-activate).

load helpers

setup_file() {
    P=$(mktemp -d -t dstream-install.XXXXXX)
    export P
    make -s -C "$DS_ROOT" install PREFIX="$P/prefix" B="$DS_B" $DS_MAKE_SAN >"$P/install.out" 2>&1 ||
        { cat "$P/install.out" >&2; return 1; }
}

teardown_file() { rm -rf "$P"; }

setup() {
    T=$BATS_TEST_TMPDIR
    BG_PIDS=()
}

teardown() { ds_bg_stop; }

UNITS=(dstream-fcgi.socket dstream-fcgi.service dstream-runner.service)

@test "make install puts programs, man pages, snippets, units and the example configuration in place" {
    for f in bin/dstream bin/dstream-fcgi bin/dstream-runner; do
        [ -x "$P/prefix/$f" ] || fail "$f missing"
    done
    for f in share/man/man1/dstream.1 share/man/man8/dstream-fcgi.8 share/man/man8/dstream-runner.8 \
        share/dstream/nginx/dstream.conf share/dstream/nginx/example.conf \
        share/dstream/examples/etc/dstream.env etc/dstream/dstream.env etc/dstream/credentials.json \
        etc/dstream/providers.json etc/dstream/mcp.json; do
        [ -f "$P/prefix/$f" ] || fail "$f missing"
    done
    for u in "${UNITS[@]}"; do [ -f "$P/prefix/lib/systemd/system/$u" ] || fail "$u missing"; done
    if [ -d "$DS_ROOT/web" ]; then [ -d "$P/prefix/share/dstream/web" ] || fail "web/ not installed"; fi
    # The units name the installed programs and configuration.
    run grep -h '^ExecStart=' "$P/prefix/lib/systemd/system/dstream-fcgi.service" "$P/prefix/lib/systemd/system/dstream-runner.service"
    assert_output "ExecStart=$P/prefix/bin/dstream-fcgi
ExecStart=$P/prefix/bin/dstream-runner"
    grep -q "^EnvironmentFile=-$P/prefix/etc/dstream/dstream.env\$" "$P/prefix/lib/systemd/system/dstream-runner.service"
    # Secrets: the owner only. The man pages render without warnings.
    [ "$(stat -c %a "$P/prefix/etc/dstream/credentials.json")" = 600 ]
    for m in man1/dstream.1 man8/dstream-fcgi.8 man8/dstream-runner.8; do
        run --separate-stderr man --warnings -l "$P/prefix/share/man/$m"
        assert_success
        [ -z "$stderr" ] || fail "man $m: $stderr"
    done
    run man -l "$P/prefix/share/man/man1/dstream.1"
    assert_output --partial "backup [--no-check] FILE"
}

@test "the installed units pass systemd-analyze verify" {
    command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
    cd "$P/prefix/lib/systemd/system"
    run --separate-stderr env MANPATH="$P/prefix/share/man" systemd-analyze verify "${UNITS[@]/#/./}"
    [ "$status" = 0 ] && [ -z "$output$stderr" ] || fail "verify (status $status): $output $stderr"
    # It does catch mistakes: a misspelt directive and a missing program.
    sed 's/^NoNewPrivileges=/NoNewPrivilege=/' dstream-fcgi.service >"$T/dstream-fcgi.service"
    sed "s#^ExecStart=.*#ExecStart=$T/none#" dstream-runner.service >"$T/dstream-runner.service"
    cp dstream-fcgi.socket "$T/"
    cd "$T"
    run --separate-stderr env MANPATH="$P/prefix/share/man" systemd-analyze verify ./dstream-fcgi.service ./dstream-runner.service
    [[ $stderr == *"Unknown key 'NoNewPrivilege'"* ]] || fail "not caught: $stderr"
    [[ $stderr == *"$T/none"* ]] || fail "not caught: $stderr"
}

@test "systemd-analyze security: the units' exposure scores stay low" {
    command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
    cd "$P/prefix/lib/systemd/system"
    for u in dstream-fcgi.service dstream-runner.service; do
        run systemd-analyze security --offline=true --no-pager "./$u"
        line=$(grep 'Overall exposure level' <<<"$output")
        echo "# $line" >&3
        score=$(sed -n 's/.*: \([0-9.]*\) .*/\1/p' <<<"$line")
        [ -n "$score" ] || fail "no score: $output"
        # 0 is the best, 10 the worst; 2.0 and below is what systemd calls SAFE or OK.
        awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "$u exposure $score"
    done
}

@test "socket activation: the installed pool serves the socket passed as LISTEN_FDS" {
    command -v systemd-socket-activate >/dev/null || skip "systemd-socket-activate is not installed"
    command -v cgi-fcgi >/dev/null || skip "cgi-fcgi (libfcgi-bin) is not installed"
    sock=$T/fcgi.sock
    # As systemd does: bind, listen, then start the program with the socket as fd 3.
    spawn "$T/pool.log" systemd-socket-activate -l "$sock" -E DSTREAM_DB="$T/db" \
        -E DSTREAM_THREADS=2 -E DSTREAM_LIVE_MAX=16 "$P/prefix/bin/dstream-fcgi"
    ds_poll 10 test -S "$sock" || fail "no socket: $(cat "$T/pool.log")"
    # A token when the build has them (an admin token made with the installed CLI).
    auth=""
    if "$P/prefix/bin/dstream" help 2>&1 | grep -qE '^ +token'; then
        auth="Bearer $(DSTREAM_DB="$T/db" "$P/prefix/bin/dstream" token create --name t --scope admin | tail -n 1)"
    fi
    fcgi() {  # fcgi METHOD URI [BODY]: one request over FastCGI, the raw response
        local q="" hdr=()
        [[ $2 == *\?* ]] && q=${2#*\?}
        [ -z "$auth" ] || hdr=(HTTP_AUTHORIZATION="$auth")
        printf '%s' "${3:-}" | env -i REQUEST_METHOD="$1" REQUEST_URI="$2" SCRIPT_NAME="${2%%\?*}" \
            QUERY_STRING="$q" CONTENT_TYPE=text/plain CONTENT_LENGTH="${#3}" "${hdr[@]}" \
            cgi-fcgi -bind -connect "$sock"
    }
    run fcgi PUT /v1/stream/act
    assert_line --partial "Status: 201"
    run fcgi POST /v1/stream/act "hello"
    assert_line --partial "Status: 204"
    run fcgi GET "/v1/stream/act?offset=-1"
    assert_line --partial "Status: 200"
    assert_line "hello"
    grep -q 'on the socket systemd passed' "$T/pool.log" || fail "$(cat "$T/pool.log")"
}

@test "make uninstall removes what install put, keeps the configuration; install never overwrites it" {
    cp -R "$P/prefix" "$T/prefix"
    echo "DSTREAM_THREADS=8" >"$T/prefix/etc/dstream/dstream.env"
    make -s -C "$DS_ROOT" install PREFIX="$T/prefix" B="$DS_B" $DS_MAKE_SAN >/dev/null
    [ "$(cat "$T/prefix/etc/dstream/dstream.env")" = DSTREAM_THREADS=8 ]
    run make -s -C "$DS_ROOT" uninstall PREFIX="$T/prefix"
    assert_success
    run find "$T/prefix" -type f
    assert_output --regexp "^($T/prefix/etc/dstream/[a-z.]+
?)+\$"
}
