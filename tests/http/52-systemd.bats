#!/usr/bin/env bats
# deploy/install.sh and the units it installs under a real systemd. This machine's
# PID 1 is not systemd, so the test boots one: systemd as PID 1 of new PID, mount,
# cgroup and UTS namespaces (unshare), with private /run, /var/lib and /usr/local and
# a private copy of /etc (so the dstream user that install.sh adds, /etc/dstream and
# the enabled units stay in there), and a unit path of /etc/systemd/system,
# /usr/local/lib/systemd/system and empty stand-ins for the targets the units name.
# install.sh then runs inside as it would on a server: make install, the user, the
# directories, the database, systemctl enable --now. The units are as installed;
# one drop-in shortens the runner's watchdog so that the test sees it fed.
# Skipped, saying why, where namespaces or systemd are not available.

load helpers

setup_file() {
    S=$(mktemp -d -t dstream-systemd.XXXXXX)
    export S
    : >"$S/skip"
    if [ "$(id -u)" != 0 ]; then echo "needs root (namespaces, systemd as PID 1)" >"$S/skip"; return 0; fi
    [ -x /lib/systemd/systemd ] && command -v unshare >/dev/null && command -v nsenter >/dev/null ||
        { echo "systemd or util-linux (unshare, nsenter) is not installed" >"$S/skip"; return 0; }
    cp -a /etc "$S/etc"
    mkdir -p "$S/usr-local" "$S/etc/systemd/system/dstream-runner.service.d"
    printf '[Service]\nWatchdogSec=4\n' >"$S/etc/systemd/system/dstream-runner.service.d/test-watchdog.conf"
    # A sanitizer build (B=build-address...): LeakSanitizer stops the world with
    # ptrace at exit, which the units' seccomp filter forbids, so it would fail the
    # clean stop; leaks are looked for by every other suite.
    case $DS_B in
    build-*)
        for u in dstream-runner dstream-fcgi; do
            mkdir -p "$S/etc/systemd/system/$u.service.d"
            printf '[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0\n' \
                >"$S/etc/systemd/system/$u.service.d/test-sanitizer.conf"
        done
        ;;
    esac
    U=$S/units
    mkdir -p "$U"
    for t in sysinit basic shutdown sockets multi-user network network-online; do
        printf '[Unit]\nDescription=%s (stand-in)\n' "$t" >"$U/$t.target"
    done
    printf '[Unit]\nDescription=system slice (stand-in)\n' >"$U/system.slice"
    printf '[Unit]\nDescription=dstream install test\n' >"$U/dstream-test.target"
    cat >"$S/boot.sh" <<BOOT
#!/bin/bash
set -e
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=0755 tmpfs /var/lib
mount --bind "$S/usr-local" /usr/local
mount --bind "$S/etc" /etc
# cgroup file systems mounted inside the cgroup namespace are rooted at its cgroup.
if [ -d /sys/fs/cgroup/systemd ]; then
    mount -t tmpfs -o mode=0755 tmpfs /sys/fs/cgroup
    mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
    mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
    mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
fi
hostname dstream-systemd-test
exec env -i container=dstream-test SYSTEMD_UNIT_PATH="$U:/etc/systemd/system:/usr/local/lib/systemd/system" PATH=/usr/sbin:/usr/bin:/sbin:/bin \\
    /lib/systemd/systemd --system --unit=dstream-test.target --show-status=no \\
    --default-standard-output=inherit --default-standard-error=inherit --log-target=console
BOOT
    chmod +x "$S/boot.sh"
    # --kill-child: when unshare goes (teardown ends it by its PID), so does the
    # namespace's PID 1, and with it everything inside.
    # A cgroup of its own in each hierarchy, the root of the namespace's: what systemd
    # creates there is removed with it in teardown_file.
    CG=dstream-test-$$
    echo "$CG" >"$S/cgroup"
    for h in systemd unified; do [ ! -d "/sys/fs/cgroup/$h" ] || mkdir -p "/sys/fs/cgroup/$h/$CG"; done
    timeout -s KILL 600 sh -c 'for h in systemd unified; do
            [ ! -d "/sys/fs/cgroup/$h/$1" ] || echo $$ >"/sys/fs/cgroup/$h/$1/cgroup.procs"; done
        exec unshare --pid --fork --kill-child=SIGKILL --mount --mount-proc --cgroup --uts "$2"' \
        sh "$CG" "$S/boot.sh" </dev/null >"$S/boot.log" 2>&1 3>&- &
    echo $! >"$S/timeout.pid"
    if ! ds_poll 20 sd_booted; then
        echo "systemd did not come up in a namespace here: $(tail -5 "$S/boot.log")" >"$S/skip"
        return 0
    fi
    # As an operator would, as root, on the server.
    nsenter -t "$(cat "$S/sd.pid")" -m -p -- env B="$DS_B" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        "$DS_ROOT/deploy/install.sh" >"$S/install.out" 2>&1 || { cat "$S/install.out" >&2; return 1; }
}

teardown_file() {
    local u
    u=$(cat "$S/unshare.pid" 2>/dev/null) && kill -TERM "$u" 2>/dev/null
    if [ -n "$(cat "$S/sd.pid" 2>/dev/null)" ]; then
        ds_poll 10 eval '! kill -0 "$(cat "$S/sd.pid")" 2>/dev/null' ||
            kill -KILL "$(cat "$S/sd.pid")" 2>/dev/null
    fi
    local cg h
    cg=$(cat "$S/cgroup" 2>/dev/null)
    if [ -n "$cg" ]; then
        for h in systemd unified; do
            [ -d "/sys/fs/cgroup/$h/$cg" ] || continue
            ds_poll 10 eval "find /sys/fs/cgroup/$h/$cg -depth -type d -exec rmdir {} + 2>/dev/null; [ ! -d /sys/fs/cgroup/$h/$cg ]" ||
                echo "could not remove the test's cgroup /sys/fs/cgroup/$h/$cg" >&2
        done
    fi
    rm -rf "$S"
    return 0
}

# sd_booted: the namespace's systemd (the child of unshare) answers systemctl.
sd_booted() {
    local t u sd
    t=$(cat "$S/timeout.pid") || return 1
    u=$(cat "/proc/$t/task/$t/children" 2>/dev/null | awk '{print $1}') && [ -n "$u" ] || return 1
    sd=$(cat "/proc/$u/task/$u/children" 2>/dev/null | awk '{print $1}') && [ -n "$sd" ] || return 1
    [ "$(cat "/proc/$sd/comm" 2>/dev/null)" = systemd ] || return 1
    echo "$u" >"$S/unshare.pid"
    echo "$sd" >"$S/sd.pid"
    sctl show -P Version >/dev/null 2>&1
}

setup() {
    [ ! -s "$S/skip" ] || skip "$(cat "$S/skip")"
    T=$BATS_TEST_TMPDIR
    SD=$(cat "$S/sd.pid")
    SOCK=/proc/$SD/root/run/dstream/fcgi.sock
}

# sctl ARGS...: systemctl inside the namespace.
sctl() { nsenter -t "$(cat "$S/sd.pid")" -m -p -- systemctl --no-pager "$@"; }

# auth: "Bearer <admin token>" when the build has tokens (made once, as the
# services' user, in the namespace's database), else empty.
auth() {
    "$S/usr-local/bin/dstream" help 2>&1 | grep -qE '^ +token' || return 0
    if [ ! -s "$S/token" ]; then
        # Inside the namespace (its /var/lib), as the services' user: they may not
        # go through /proc/PID/root from outside.
        nsenter -t "$(cat "$S/sd.pid")" -m -p -- runuser -u dstream -- \
            /usr/local/bin/dstream --db /var/lib/dstream/dstream.db token create --name systemd-test \
            --scope admin 2>/dev/null | tail -n 1 >"$S/token"
    fi
    echo "Bearer $(cat "$S/token")"
}

# fcgi METHOD URI [BODY]: one request over the socket systemd listens on.
fcgi() {
    local q="" a
    [[ $2 == *\?* ]] && q=${2#*\?}
    a=$(auth)
    local hdr=()
    [ -z "$a" ] || hdr=(HTTP_AUTHORIZATION="$a")
    printf '%s' "${3:-}" | env -i REQUEST_METHOD="$1" REQUEST_URI="$2" SCRIPT_NAME="${2%%\?*}" \
        QUERY_STRING="$q" CONTENT_TYPE=text/plain CONTENT_LENGTH="${#3}" "${hdr[@]}" \
        cgi-fcgi -bind -connect "$SOCK"
}

active() { [ "$(sctl show -P ActiveState "$1")" = active ]; }

# uid_of NAME: the user's id in the namespace's /etc/passwd.
uid_of() { awk -F: -v n="$1" '$1 == n { print $3 }' "$S/etc/passwd"; }

@test "install.sh under systemd: the dstream user, its directories, the units enabled and running" {
    grep -q 'installed and started' "$S/install.out" || fail "$(cat "$S/install.out")"
    [ -n "$(uid_of dstream)" ] || fail "no dstream user"
    ! grep -q '^dstream:' /etc/passwd || fail "the host's /etc/passwd was changed"
    [ "$(stat -c '%u %a' "/proc/$SD/root/var/lib/dstream")" = "$(uid_of dstream) 750" ]
    [ "$(stat -c '%u %a' "$S/etc/dstream/credentials.json")" = "$(uid_of dstream) 600" ]
    for u in dstream-fcgi.socket dstream-fcgi.service dstream-runner.service; do
        [ "$(sctl is-enabled "$u")" = enabled ] || fail "$u: $(sctl is-enabled "$u")"
    done
    ds_poll 20 active dstream-runner.service || fail "$(sctl status dstream-runner.service 2>&1)"
    [ "$(sctl show -P StatusText dstream-runner.service)" = "running sessions" ]
    ds_poll 10 active dstream-fcgi.socket || fail "$(sctl status dstream-fcgi.socket 2>&1)"
    ds_poll 10 active dstream-fcgi.service || fail "$(sctl status dstream-fcgi.service 2>&1)"
    [ "$(sctl show -P TriggeredBy dstream-fcgi.service)" = dstream-fcgi.socket ]
    # nginx (www-data) may connect; nobody else.
    [ "$(stat -c '%u %G %a' "$SOCK")" = "$(uid_of dstream) www-data 660" ]
}

@test "systemd: the pool answers on the socket systemd passed; appends and reads work" {
    command -v cgi-fcgi >/dev/null || skip "cgi-fcgi (libfcgi-bin) is not installed"
    run fcgi PUT /v1/stream/sd
    assert_line --partial "Status: 201"
    run fcgi POST /v1/stream/sd "under systemd"
    assert_line --partial "Status: 204"
    run fcgi GET "/v1/stream/sd?offset=-1"
    assert_line --partial "Status: 200"
    assert_line "under systemd"
    active dstream-fcgi.service
    [ "$(sctl show -P TriggeredBy dstream-fcgi.service)" = dstream-fcgi.socket ]
}

@test "systemd: the hardening is in force on the running pool and runner" {
    ds_poll 10 active dstream-fcgi.service || run fcgi GET /v1/health
    ds_poll 10 active dstream-fcgi.service
    for unit in dstream-fcgi.service dstream-runner.service; do
        pid=$(sctl show -P MainPID "$unit")
        [ "$pid" -gt 0 ] || fail "$unit has no main PID"
        # Its status as the namespace's own /proc shows it.
        st=/proc/$SD/root/proc/$pid/status
        [ -r "$st" ] || fail "$unit: no $st"
        grep -qE '^NoNewPrivs:[[:space:]]+1$' "$st" || fail "$unit: NoNewPrivs: $(grep NoNewPrivs "$st")"
        grep -qE '^Seccomp:[[:space:]]+2$' "$st" || fail "$unit: no seccomp filter"
        grep -qE '^CapEff:[[:space:]]+0+$' "$st" || fail "$unit: capabilities $(grep CapEff "$st")"
        grep -qE "^Uid:[[:space:]]+$(uid_of dstream)[[:space:]]" "$st" || fail "$unit: $(grep Uid "$st")"
        echo "# $unit: NoNewPrivs 1, seccomp filter, no capabilities, user dstream" >&3
    done
}

@test "systemd: a restart of the pool keeps the socket and the data; the watchdog is fed; stop is clean" {
    command -v cgi-fcgi >/dev/null || skip "cgi-fcgi (libfcgi-bin) is not installed"
    run fcgi PUT /v1/stream/sd2
    run fcgi POST /v1/stream/sd2 "kept"
    sctl restart dstream-fcgi.service
    run fcgi GET "/v1/stream/sd2?offset=-1"
    assert_line --partial "Status: 200"
    assert_line kept
    # WatchdogSec=4 (drop-in): the runner pings every 2 s; a missed ping would have
    # restarted it (NRestarts would grow).
    n0=$(sctl show -P NRestarts dstream-runner.service)
    ts0=$(sctl show -P ActiveEnterTimestampMonotonic dstream-runner.service)
    watchdog_passed() { [ $(($(sctl show -P WatchdogTimestampMonotonic dstream-runner.service) - ts0)) -gt 5000000 ]; }
    ds_poll 15 watchdog_passed || fail "no watchdog ping after 5 s: $(sctl show -p WatchdogTimestampMonotonic dstream-runner.service)"
    [ "$(sctl show -P NRestarts dstream-runner.service)" = "$n0" ]
    active dstream-runner.service
    sctl stop dstream-runner.service dstream-fcgi.service dstream-fcgi.socket
    for unit in dstream-runner.service dstream-fcgi.service; do
        [ "$(sctl show -P Result "$unit")" = success ] || fail "$unit: $(sctl show -p Result -p ExecMainStatus "$unit")"
        [ "$(sctl show -P ExecMainStatus "$unit")" = 0 ]
    done
}
