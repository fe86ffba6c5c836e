#!/usr/bin/env bats
# The runner under systemd's notification protocol: READY=1 once it runs, WATCHDOG=1
# at half the watchdog interval, STOPPING=1 on SIGTERM, and a clean exit. A Unix
# datagram socket stands in for systemd (python3 listens on it).

load helpers

setup() {
    command -v python3 >/dev/null || skip "python3 is needed to listen on the notify socket"
    T=$BATS_TEST_TMPDIR
    DB=$T/dstream.db
    "$DS_BIN/dstream" --db "$DB" migrate >/dev/null
}

teardown() {
    [ -n "${RUNNER_PID:-}" ] && kill -KILL "$RUNNER_PID" 2>/dev/null || true
    [ -n "${LISTENER_PID:-}" ] && kill "$LISTENER_PID" 2>/dev/null || true
}

watchdogs_at_least() { [ "$(grep -c '^WATCHDOG=1' "$T/notify.log")" -ge "$1" ]; }

@test "runner: READY=1, WATCHDOG=1 and STOPPING=1 over NOTIFY_SOCKET, exit 0 on SIGTERM" {
    python3 - "$T/notify.sock" "$T/notify.log" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(0.5)
end = time.time() + 20
with open(sys.argv[2], "a", buffering=1) as log:
    while time.time() < end:
        try:
            log.write(s.recv(4096).decode() + "\n")
        except socket.timeout:
            pass
PY
    LISTENER_PID=$!
    ds_poll 5 test -S "$T/notify.sock"
    NOTIFY_SOCKET=$T/notify.sock WATCHDOG_USEC=200000 DSTREAM_DB=$DB \
        "$DS_BIN/dstream-runner" 2>"$T/runner.log" &
    RUNNER_PID=$!
    ds_poll 10 grep -q '^READY=1' "$T/notify.log"
    ds_poll 10 watchdogs_at_least 2
    kill -TERM "$RUNNER_PID"
    wait "$RUNNER_PID"
    status=$?
    RUNNER_PID=
    [ "$status" -eq 0 ]
    ds_poll 5 grep -q '^STOPPING=1' "$T/notify.log"
    grep -q 'dstream-runner: stopped' "$T/runner.log"
}
