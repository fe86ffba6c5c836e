#!/usr/bin/env bats
# make run (deploy/dstream-stack run): the foreground supervisor. A program of the
# stack that exits is started again and said in the log; Ctrl-C stops everything
# with exit 0 and leaves no process; a second start in the same directory refuses,
# or waits while the first one stops; a port in use is said plainly.
#
# Each test runs the supervisor in a temp directory (DSTREAM_VAR) on a free port
# (DSTREAM_PORT), in a session of its own (setsid) with SIGINT at its default, so
# that a SIGINT to its process group comes as a terminal's Ctrl-C does. `make run`
# itself runs on a pseudo-terminal (script) and gets a real ^C typed there. The
# runner's provider is the mock (a session's reply shows the runner serves).

load runner-helpers

setup_file() {
    command -v node >/dev/null || { echo "node is not installed (make deps)" >&2; return 1; }
    command -v script >/dev/null || { echo "script (util-linux) is not installed" >&2; return 1; }
    RN_TMP=$(mktemp -d -t dstream-run-mock.XXXXXX)
    rn_mock_spawn "$RN_TMP/mock" || return 1
    RN_MOCK_PID=$RN_SPAWNED_PID
    RN_MOCK=$RN_SPAWNED_URL
    RN_KEY=sk-test-$(_rn_hex 16)
    RN_PROVIDERS=$RN_TMP/providers.json
    rn_providers_file >"$RN_PROVIDERS"
    export RN_TMP RN_MOCK_PID RN_MOCK RN_KEY RN_PROVIDERS
}

teardown_file() { rn_stop; }

setup() {
    RUN_DIR=$(mktemp -d -t dstream-run.XXXXXX)
    RUN_PORT=$("$DS_BIN/dstream" free-port)
    : >"$RUN_DIR/seen"
    export RUN_DIR RUN_PORT
}

# Whatever a failed test left: every session it saw (supervisors, programs, nginx's
# workers) is killed; then the directory goes.
teardown() {
    local id
    seen
    for id in $(sort -u "$RUN_DIR/seen"); do kill -KILL -- "-$id" 2>/dev/null || true; done
    wait || true    # the subshells that note an exit status
    rm -rf "$RUN_DIR"
}

# seen: note the sessions of the supervisor and of the programs now running (each
# leads a session of its own), for left and teardown.
seen() {
    local f
    for f in run.pid fcgi.pid runner.pid nginx.master.pid; do
        [ -s "$RUN_DIR/$f" ] && cat "$RUN_DIR/$f" >>"$RUN_DIR/seen"
    done
    return 0
}

# left: the processes of any session seen, one a line (none: empty).
left() {
    ps -eo pid=,sid=,args= | awk -v ids=" $(sort -u "$RUN_DIR/seen" | tr '\n' ' ') " \
        'index(ids, " " $2 " ") && $3 != "ps" && $3 != "awk"'
}

# run_env: the environment of a supervisor of this test (a command, not a function:
# $! of "${run_env[@]}" ... & is the supervisor itself).
run_env() {
    RUN_ENV=(env --default-signal=INT DSTREAM_VAR="$RUN_DIR" DSTREAM_PORT="$RUN_PORT" B="$DS_B"
             DSTREAM_PROVIDERS="$RN_PROVIDERS" ANTHROPIC_API_KEY="$RN_KEY")
}

# run_start: dstream-stack run, in a session of its own, in the background; its PID
# in RUN_DIR/sup, its output in RUN_DIR/out (an earlier one's moves to out.old), its
# exit status in RUN_DIR/rc at its end.
run_start() {
    run_env
    rm -f "$RUN_DIR/rc" "$RUN_DIR/sup"
    [ ! -f "$RUN_DIR/out" ] || mv "$RUN_DIR/out" "$RUN_DIR/out.old"
    # setsid does not fork here (its caller leads no group): $! is the supervisor.
    ( rc=0
      "${RUN_ENV[@]}" setsid "$DS_STACK" run </dev/null >"$RUN_DIR/out" 2>&1 &
      echo $! >>"$RUN_DIR/seen"
      echo $! >"$RUN_DIR/sup"
      wait $! || rc=$?
      echo "$rc" >"$RUN_DIR/rc" ) 3>&- &
    ds_poll 10 test -s "$RUN_DIR/sup"
}

sup() { cat "$RUN_DIR/sup"; }

make_ready() {
    grep -q "dstream is running at" "$RUN_DIR/out" &&
        curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$RUN_PORT/v1/health"
}

# ready: the supervisor started last runs and said that its stack runs, and the
# stack answers.
ready() {
    kill -0 "$(sup)" 2>/dev/null && grep -q "^dstream is running at" "$RUN_DIR/out" &&
        curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$RUN_PORT/v1/health"
}

run_ready() {
    ds_poll 30 ready || fail "the stack did not become ready: $(cat "$RUN_DIR/out")"
    seen
}

# replaced FILE OLD: FILE names a live process other than OLD (started again).
replaced() {
    local new
    new=$(cat "$RUN_DIR/$1" 2>/dev/null) && [ -n "$new" ] && [ "$new" != "$2" ] && kill -0 "$new" 2>/dev/null
}

# kill9 FILE NAME: SIGKILL the program of FILE; wait until it runs again and the
# log said so.
kill9() {
    local old
    old=$(cat "$RUN_DIR/$1")
    kill -KILL "$old"
    ds_poll 30 replaced "$1" "$old" || fail "$2 (pid $old) was not started again: $(cat "$RUN_DIR/out")"
    seen
    grep -q "dstream-stack: $2 (pid $old) was killed by SIGKILL; starting it again in" "$RUN_DIR/logs/stack.log" ||
        fail "the restart of $2 was not logged: $(cat "$RUN_DIR/logs/stack.log")"
    grep -q "dstream-stack: $2 started again (pid $(cat "$RUN_DIR/$1"))" "$RUN_DIR/out" ||
        fail "the restart of $2 was not said: $(cat "$RUN_DIR/out")"
}

# talk: through the stack's own URL with its admin token (req, rn_*).
talk() {
    DS_DIR=$RUN_DIR
    ds_direct
}

# ctrl_c: SIGINT to the supervisor's process group, as a terminal sends it; wait for
# its end; it exited 0 and nothing of the stack is left.
ctrl_c() {
    kill -INT -- "-$(sup)"
    ds_poll 30 test -s "$RUN_DIR/rc" || fail "still running 30 s after SIGINT: $(left)"
    assert_equal "$(cat "$RUN_DIR/rc")" 0
    no_process_left
}

gone() { [ -z "$(left)" ]; }

no_process_left() {
    ds_poll 10 gone || fail "processes left: $(left)"
    ! (exec 3<>"/dev/tcp/127.0.0.1/$RUN_PORT") 2>/dev/null || fail "something still listens on $RUN_PORT"
    [ ! -e "$RUN_DIR/run.pid" ] || fail "run.pid left behind"
}

@test "run: the runner (5 times), the pool and nginx killed with SIGKILL come back, logged, and serve; SIGINT exits 0, nothing left" {
    local i a id old
    run_start
    run_ready
    for i in 1 2 3 4 5; do kill9 runner.pid runner; done
    talk
    a=$(rn_agent anthropic claude-test-model)
    id=$(rn_session "{\"agent\": \"$a\"}")
    rn_say "$id" "still there?"
    rn_wait "$id" '.status == "completed"' 30
    kill9 fcgi.pid fcgi
    req PUT "/v1/stream/$(ds_name run)" -H 'Content-Type: text/plain'
    assert_status 201
    old=$(cat "$RUN_DIR/nginx.master.pid")
    kill9 nginx.master.pid nginx
    ds_poll 10 ready
    # The killed master's workers went with it: no second nginx on the port.
    ds_poll 10 eval '[ -z "$(ps -eo sid=,args= | awk -v s='"$old"' '"'"'$1 == s'"'"')" ]' ||
        fail "the killed nginx left: $(ps -eo pid,sid,args | awk -v s="$old" '$2 == s')"
    req GET /v1/health
    assert_status 200
    ctrl_c
    grep -q "dstream-stack: stopping" "$RUN_DIR/out"
    # It said where the API and the viewer are.
    grep -q "dstream is running at http://127.0.0.1:$RUN_PORT " "$RUN_DIR/out"
    grep -q "The session viewer: http://127.0.0.1:$RUN_PORT/web/" "$RUN_DIR/out"
}

# tty_session PID: the child of PID's child (script's session on the terminal).
tty_session() {
    local child
    child=$(ps -o pid= --ppid "$1" 2>/dev/null | head -1 | tr -d ' ') && [ -n "$child" ] &&
        ps -o pid= --ppid "$child" 2>/dev/null | head -1 | tr -d ' ' | grep .
}

@test "make run: a ^C typed on its terminal stops the stack, and make exits 0" {
    mkfifo "$RUN_DIR/tty-in"
    # script gives make a terminal of its own; what is written to the FIFO is typed there.
    run_env
    ( "${RUN_ENV[@]}" script -qec "make -s -C '$DS_ROOT' run B='$DS_B' $DS_MAKE_SAN; echo \"make-exit=\$?\" >'$RUN_DIR/make.rc'" /dev/null \
        <"$RUN_DIR/tty-in" >"$RUN_DIR/out" 2>&1 || true ) 3>&- &
    local sub=$!
    exec 4>"$RUN_DIR/tty-in"
    # The session script starts on the terminal (a child of script, itself a
    # child of the subshell), for teardown.
    ds_poll 10 tty_session "$sub" || fail "script did not start: $(cat "$RUN_DIR/out")"
    tty_session "$sub" >>"$RUN_DIR/seen"
    ds_poll 60 make_ready || { exec 4>&-; fail "make run did not become ready: $(cat "$RUN_DIR/out")"; }
    seen
    printf '\003' >&4
    ds_poll 30 test -s "$RUN_DIR/make.rc" || { exec 4>&-; fail "make run still running after ^C: $(cat "$RUN_DIR/out")"; }
    exec 4>&-
    assert_equal "$(cat "$RUN_DIR/make.rc")" make-exit=0
    ! grep -E "make: \*\*\*|Interrupt|Error" "$RUN_DIR/out" || fail "make reported a failure"
    grep -q "dstream-stack: stopping" "$RUN_DIR/out"
    no_process_left
}

@test "run: a second start refuses while one runs, waits while one stops; a port in use is said plainly" {
    local other
    run_start
    run_ready
    # (timeout: a start that does not refuse runs in the foreground.)
    run timeout 30 "${RUN_ENV[@]}" "$DS_STACK" run </dev/null
    assert_failure 1
    assert_output "dstream-stack: a stack already runs in $RUN_DIR (supervisor pid $(sup)): stop it first (Ctrl-C where it runs, or deploy/dstream-stack stop $RUN_DIR), or set DSTREAM_VAR to another directory"
    # Another directory, the same port.
    other=$(mktemp -d -t dstream-run.XXXXXX)
    run timeout 30 "${RUN_ENV[@]}" DSTREAM_VAR="$other" "$DS_STACK" run </dev/null
    rm -rf "$other"
    assert_failure 1
    assert_output --partial "dstream-stack: port $RUN_PORT on 127.0.0.1 is in use by another program"
    # A start while the first one stops: the stopped runner makes its stop last about
    # 5 s (TERM, then KILL); the second waits for it, then starts.
    kill -STOP "$(cat "$RUN_DIR/runner.pid")"
    kill -INT -- "-$(sup)"
    ds_poll 10 grep -q "dstream-stack: stopping" "$RUN_DIR/out"
    assert_equal "$(cat "$RUN_DIR/rc" 2>/dev/null)" ""
    run_start
    ds_poll 10 grep -q "is stopping; waiting for it" "$RUN_DIR/out" || fail "$(cat "$RUN_DIR/out")"
    run_ready
    talk
    req PUT "/v1/stream/$(ds_name run)" -H 'Content-Type: text/plain'
    assert_status 201
    ctrl_c
}

@test "run: after a supervisor killed with SIGKILL, the next run stops what it left (no second nginx) and serves" {
    local first
    run_start
    run_ready
    first=$(cat "$RUN_DIR/nginx.master.pid")
    kill -KILL "$(sup)"
    ds_poll 10 test -s "$RUN_DIR/rc"
    kill -0 "$first"    # its programs still run (nothing can stop them at that moment)
    run_start
    run_ready
    grep -q "dstream-stack: stopping what an earlier run left in $RUN_DIR" "$RUN_DIR/out"
    [ -z "$(ps -eo pid=,sid= | awk -v s="$first" '$2 == s')" ] || fail "the first nginx is still there"
    talk
    req GET /v1/health
    assert_status 200
    ctrl_c
}
