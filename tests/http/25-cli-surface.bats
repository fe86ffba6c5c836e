#!/usr/bin/env bats
# The dstream CLI's surface, command by command, from its own list (`dstream --help`,
# which cli/dstream.c prints from the table it dispatches with): every command and
# subcommand answers --help (usage on stdout, exit 0) and refuses an option it does
# not take (usage on stderr, exit 2); every command that prints data prints JSON
# with --json, one document a line, and no colour when piped; colour on a terminal
# only without NO_COLOR; the exit codes of cli/http.h are the documented ones; the
# man page and docs/cli.md name every command. A new command without its --help,
# its --json case here or its man entry fails this file.

load runner-helpers

setup_file() { rn_start && rn_cli_env; }
teardown_file() { rn_stop; }
setup() { rn_test_setup && D=$DS_BIN/dstream; }
teardown() {
    # A throwaway PostgreSQL cluster a test started (tests/pg.sh).
    if [ -n "${PGDIR:-}" ]; then
        "$DS_ROOT/tests/pg.sh" stop "$PGDIR/c" >/dev/null 2>&1
        rm -rf "$PGDIR"
    fi
    rn_test_teardown
}

# The commands, from dstream --help's "Commands:" list.
commands() { "$D" --help | sed -n '/^Commands:/,/^[^ ]/s/^  \([a-z-][a-z-]*\) .*/\1/p'; }

# The subcommands of command $1, from its usage: `dstream [--db PATH] CMD SUB ...`.
subcommands() {
    "$D" "$1" --help | sed -n "s/^\(usage:\)\? *dstream \(\[\?--db PATH\]\? \)\?$1 \[\?\([a-z][a-z-]*\).*/\3/p" | sort -u
}

@test "the commands dstream --help lists are the table cli/dstream.c dispatches with" {
    run --separate-stderr "$D" --help
    assert_success
    [ -z "$stderr" ]
    listed=$(commands | sort)
    table=$(sed -n 's/^    {"\([a-z-]*\)", .*/\1/p' "$DS_ROOT/cli/dstream.c" | sort)
    [ -n "$listed" ] && [ "$listed" = "$table" ] || fail "help lists: $listed; the table: $table"
    [ "$(commands | wc -l)" -ge 24 ]
    # No command: the list on stderr, exit 2; an unknown one too.
    run --separate-stderr "$D"
    assert_failure 2
    [[ $stderr == *Commands:* ]]
    run --separate-stderr "$D" no-such-command
    assert_failure 2
    [[ $stderr == *"no command no-such-command"* ]]
    [ -z "$output" ]
}

@test "--help on every command and subcommand: its usage on stdout, nothing on stderr, exit 0" {
    n=0
    for c in $(commands); do
        for form in "$c --help" "$c -h" "help $c"; do
            # shellcheck disable=SC2086 # form is words
            run --separate-stderr "$D" $form
            [ "$status" = 0 ] || fail "dstream $form: exit $status: $stderr"
            [[ $output == usage:* ]] || fail "dstream $form: stdout: $output"
            [[ $output == *"dstream"*"$c"* ]] || fail "dstream $form: not $c's usage: $output"
            [ -z "$stderr" ] || fail "dstream $form: stderr: $stderr"
        done
        for s in $(subcommands "$c"); do
            run --separate-stderr "$D" "$c" "$s" --help
            [ "$status" = 0 ] && [[ $output == usage:* ]] && [ -z "$stderr" ] ||
                fail "dstream $c $s --help: exit $status, stdout $output, stderr $stderr"
            n=$((n + 1))
        done
    done
    # token, recordings, sessions, streams and skills have subcommands.
    [ "$n" -ge 16 ] || fail "only $n subcommands found"
    run --separate-stderr "$D" --db "$DS_DB" --help
    assert_success
    [[ $output == usage:* ]]
}

@test "an option a command does not take: exit 2, the usage on stderr, nothing done" {
    for c in $(commands); do
        run --separate-stderr "$D" --db "$DS_DB" "$c" --no-such-option
        [ "$status" = 2 ] || fail "dstream $c --no-such-option: exit $status: $output $stderr"
        [[ $stderr == *"unknown option --no-such-option"*usage:* ]] || fail "dstream $c: stderr: $stderr"
        [ -z "$output" ] || fail "dstream $c: stdout: $output"
        for s in $(subcommands "$c"); do
            run --separate-stderr "$D" --db "$DS_DB" "$c" "$s" x --bogus
            [ "$status" = 2 ] && [[ $stderr == *usage:* ]] || fail "dstream $c $s x --bogus: exit $status: $stderr"
        done
    done
    # Nothing was done: no backup file named after the option, no stream appended to.
    run "$D" --db "$DS_DB" backup --to "$BATS_TEST_TMPDIR/b.db"
    assert_failure 2
    [ ! -e "$BATS_TEST_TMPDIR/b.db" ] && [ ! -e ./--to ]
    # A negative number and "-" are arguments, not options; after "--" everything is.
    run "$D" --db "$DS_DB" tail --from -1 --no-follow "no-such-$$"
    assert_failure 1
    s=$(ds_name dash)
    req PUT "/v1/stream/$s" -H 'Content-Type: text/plain'
    run "$D" --db "$DS_DB" append -- --bogus <<<"x"
    assert_failure 1
    assert_output --partial "append to --bogus"
    echo -n "-v" | "$D" --db "$DS_DB" append -- "$s" >/dev/null
    run "$D" --db "$DS_DB" tail --no-follow -- "$s"
    assert_success
    assert_output "-v"
}

# ---- --json ---------------------------------------------------------------------------

# Each case: "COMMAND|shell words", run with $J set to --json (and, for the piped
# check, to nothing). $N is unique per run; $ID a completed chat session, $S a
# stream, $WF a workflow, $AG an agent with a skill.
json_cases() {
    cat <<'EOF'
migrate|"$D" --db "$DS_DB" migrate $J
append|echo "{\"m\": $N}" | "$D" --db "$DS_DB" append "$S" $J
tail|"$D" --db "$DS_DB" tail --no-follow "$S" $J
append|echo "{\"m\": $N}" | "$D" append "$S" $J
tail|"$D" tail --no-follow "$S" $J
token|"$D" --db "$DS_DB" token create --name "t$N" --scope sessions:read $J 2>/dev/null
token|"$D" --db "$DS_DB" token list $J
token|"$D" --db "$DS_DB" token create --name "r$N" --scope admin >/dev/null 2>&1 && "$D" --db "$DS_DB" token revoke "r$N" $J 2>/dev/null
token|"$D" --db "$DS_DB" token check $J <"$DS_DIR/admin.token" 2>/dev/null
free-port|"$D" free-port $J
backup|"$D" --db "$DS_DB" backup $J "$BATS_TEST_TMPDIR/b$N.db"
restore|"$D" --db "$DS_DB" backup --no-check "$BATS_TEST_TMPDIR/rb$N.db" >/dev/null && "$D" --db "$BATS_TEST_TMPDIR/r$N.db" restore $J "$BATS_TEST_TMPDIR/rb$N.db"
check|"$D" --db "$DS_DB" check $J
copy|"$D" --db "$DS_DB" copy --to "$BATS_TEST_TMPDIR/copy$N.db" $J
skills|"$D" --db "$DS_DB" skills export "$BATS_TEST_TMPDIR/skills$N" "$AG" $J 2>/dev/null
providers|"$D" providers "$RN_PROVIDERS" $J
mcp|"$D" mcp "$BATS_TEST_TMPDIR/mcp.json" $J
recordings|"$D" --db "$DS_DB" recordings prune --older-than 30d --dry-run $J
gc|printf '{"policies": [{"prefix": "%s", "keep": 0}]}' "$S" >"$BATS_TEST_TMPDIR/ret.json" && "$D" --db "$DS_DB" gc --dry-run --policy "$BATS_TEST_TMPDIR/ret.json" $J
recordings|"$D" --db "$DS_DB" recordings import /dev/null $J
recordings|"$D" --db "$DS_DB" recordings export "$BATS_TEST_TMPDIR/rec.jsonl" $J && { [ -z "$J" ] || jq -e ".exported >= 0" "$BATS_TEST_TMPDIR/out" >/dev/null; }
session|"$D" --db "$DS_DB" session "$ID" $J
sessions|"$D" --db "$DS_DB" sessions $J
sessions|"$D" sessions list $J
sessions|"$D" sessions show "$ID" $J
sessions|"$D" sessions state "$ID" $J
sessions|"$D" --db "$DS_DB" sessions show "$ID" $J
sessions|"$D" --db "$DS_DB" sessions state "$ID" --at "$AT" $J
sessions|"$D" sessions create --agent "$AG" --id "c$N" $J
sessions|"$D" sessions fork "$ID" --at "$AT" --id "f$N" $J
sessions|"$D" sessions delete "c2$N" $J
chat|rn_script '{"text": "json chat"}' >/dev/null && "$D" chat "$ID" "again $N" $J
chat|"$D" chat "$ID" "aside $N" --background $J
cancel|"$D" cancel "c2$N" $J
answer|"$D" answer "$WID" pick '"blue"' $J
events|"$D" events "$ID" $J
events|"$D" --db "$DS_DB" events "$ID" --last 3 $J
convo|"$D" convo "$ID" $J
convo|"$D" --db "$DS_DB" convo "$ID" $J
requests|"$D" requests "$ID" $J
export|"$D" export "$ID" $J
otlp|"$D" otlp "$ID" $J >"$BATS_TEST_TMPDIR/otlp$N" && if [ -n "$J" ]; then cat "$BATS_TEST_TMPDIR/otlp$N"; else [ -s "$BATS_TEST_TMPDIR/otlp$N" ]; fi
otlp|"$D" --db "$DS_DB" otlp "$ID" $J >"$BATS_TEST_TMPDIR/otlpdb$N" && if [ -n "$J" ]; then cat "$BATS_TEST_TMPDIR/otlpdb$N"; else [ -s "$BATS_TEST_TMPDIR/otlpdb$N" ]; fi
search|"$D" search "needle-$ID" $J
search|"$D" --db "$DS_DB" search "needle-$ID" $J
lineage|"$D" lineage "$ID" $J
lineage|"$D" --db "$DS_DB" lineage "$ID" --limit 5 $J
diff|"$D" diff "$ID" "$ID" --at "$AT" $J
diff|"$D" --db "$DS_DB" diff "$ID" "$ID" --with-at "$AT" --context 1 $J
streams|"$D" --db "$DS_DB" streams list --prefix "$S" $J
streams|"$D" streams head "$S" $J
streams|"$D" --db "$DS_DB" streams head "$S" $J
streams|"$D" streams delete "$S2" $J
EOF
}

# Commands that print no data: --help's usage is text.
NO_DATA=" help "

# lines_are_json FILE: at least one line, each one JSON document.
lines_are_json() {
    [ -s "$1" ] || return 1
    while IFS= read -r l; do
        jq -e . >/dev/null 2>&1 <<<"$l" || { echo "not JSON: $l" >&2; return 1; }
    done <"$1"
}

@test "--json on every command that prints data: one JSON document a line; piped without --json: no colour" {
    AG=$(ds_name agent)
    req POST /v1/agents -H 'Content-Type: application/json' --data-binary "$(jq -nc --arg n "$AG" \
        '{name: $n, provider: "anthropic", model: "claude-test-model", skills: [{name: "brief", instructions: "Be brief."}]}')"
    assert_status 201
    ID=$("$D" sessions create --agent "$AG" --id "$(ds_name chat)")
    rn_script '{"text": "first answer"}'
    "$D" chat "$ID" "needle-$ID" >/dev/null
    AT=$("$D" events "$ID" --json | jq -r 'select(.type == "provider:request_started") | .offset')
    WF=$(ds_name wf)
    rn_workflow "$(jq -nc --arg n "$WF" '{name: $n, phases: [
        {name: "ask", steps: [{kind: "human", id: "pick", input: "choice", options: ["red", "blue"],
            prompt: "Which?", update: {colour: "$response"}}], transitions: [{to: "done"}]},
        {name: "done", terminal: true, steps: [{kind: "update", set: {finished: true}}]}]}')"
    printf '{"mcpServers": {"t": {"command": "/bin/cat"}}}' >"$BATS_TEST_TMPDIR/mcp.json"
    chmod 644 "$BATS_TEST_TMPDIR/mcp.json"
    S=$(ds_name s)
    req PUT "/v1/stream/$S" -H 'Content-Type: application/json'
    ds_append "/v1/stream/$S" application/json '{"a": 1}'
    N=0
    declare -A covered
    while IFS='|' read -r name cmd; do
        # dstream backup and restore copy a SQLite file; on PostgreSQL they name
        # pg_dump and pg_restore and exit 1 (17-check-live-data).
        if ds_is_pg && { [ "$name" = backup ] || [ "$name" = restore ]; }; then
            covered[$name]=1
            continue
        fi
        for J in --json ""; do
            N=$((N + 1))
            # What a case consumes, made for the cases that name it: a stream to
            # delete; a session to delete or cancel (with nothing to do yet); a
            # fresh checkpoint to answer.
            case $cmd in *'$S2'*)
                S2=$(ds_name del)
                req PUT "/v1/stream/$S2" -H 'Content-Type: text/plain'
                ;;
            esac
            case $cmd in *'c2$N'*) "$D" sessions create --agent "$AG" --id "c2$N" >/dev/null ;; esac
            if [ "$name" = answer ]; then
                WID=$("$D" sessions create --workflow "$WF")
                rn_wait "$WID" '.status == "awaiting_input"'
            fi
            rc=0
            eval "$cmd" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" || rc=$?
            [ "$rc" = 0 ] || fail "$cmd (J=$J): exit $rc: $(cat "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/err")"
            if [ -n "$J" ]; then
                lines_are_json "$BATS_TEST_TMPDIR/out" || fail "$cmd --json: $(cat "$BATS_TEST_TMPDIR/out")"
            fi
            ! grep -q $'\033' "$BATS_TEST_TMPDIR/out" || fail "$cmd (J=$J): colour when piped"
        done
        covered[$name]=1
    done < <(json_cases)
    for c in $(commands); do
        [[ $NO_DATA == *" $c "* ]] || [ -n "${covered[$c]:-}" ] || fail "no --json case for dstream $c"
    done
}

# ---- colour ---------------------------------------------------------------------------

@test "colour on a terminal only, and not with NO_COLOR; piped output is plain" {
    command -v script >/dev/null || skip "no script(1) to give the command a terminal"
    s=$(ds_name colour)
    req PUT "/v1/stream/$s" -H 'Content-Type: text/plain'
    id=$("$D" sessions create --agent "$(rn_agent anthropic claude-test-model)")
    for cmd in "--db $DS_DB streams list --prefix $s" "--db $DS_DB events $id" "sessions show $id" "sessions list"; do
        # shellcheck disable=SC2086 # cmd is words
        "$D" $cmd >"$BATS_TEST_TMPDIR/piped"
        ! grep -q $'\033' "$BATS_TEST_TMPDIR/piped" || fail "$cmd: colour when piped"
        # The words quoted for script's shell (a postgresql:// URI has & and ?).
        # shellcheck disable=SC2086 # cmd is words
        line=$(printf '%q ' "$D" $cmd)
        env -u NO_COLOR script -qec "$line" /dev/null >"$BATS_TEST_TMPDIR/tty" </dev/null
        grep -q $'\033\\[' "$BATS_TEST_TMPDIR/tty" || fail "$cmd: no colour on a terminal: $(cat -v "$BATS_TEST_TMPDIR/tty")"
        NO_COLOR=1 script -qec "$line" /dev/null >"$BATS_TEST_TMPDIR/nc" </dev/null
        ! grep -q $'\033\\[' "$BATS_TEST_TMPDIR/nc" || fail "$cmd: colour with NO_COLOR: $(cat -v "$BATS_TEST_TMPDIR/nc")"
    done
    # chat: the thinking, dimmed, on stderr only when stderr is a terminal.
    rn_script '{"text": "plain answer", "thinking": "pondering"}'
    script -qec "$D chat $id hello 2>$BATS_TEST_TMPDIR/chat.err" /dev/null >"$BATS_TEST_TMPDIR/chat.tty" </dev/null
    grep -q 'plain answer' "$BATS_TEST_TMPDIR/chat.tty" || fail "chat on a terminal: $(cat -v "$BATS_TEST_TMPDIR/chat.tty")"
    ! grep -q $'\033' "$BATS_TEST_TMPDIR/chat.err" || fail "chat: colour into a file: $(cat -v "$BATS_TEST_TMPDIR/chat.err")"
    ! grep -q pondering "$BATS_TEST_TMPDIR/chat.err"
    rn_script '{"text": "plain answer", "thinking": "pondering", "chunkSize": 2, "delayMs": 30}'
    env -u NO_COLOR script -qec "$D chat $id again" /dev/null >"$BATS_TEST_TMPDIR/chat2.tty" </dev/null
    grep -q $'\033\\[2mpondering' "$BATS_TEST_TMPDIR/chat2.tty" || fail "no dimmed thinking: $(cat -v "$BATS_TEST_TMPDIR/chat2.tty")"
    # one dimmed run for all the thinking deltas (the mock sends them in pieces), ended before the answer
    grep -q $'\033\\[2mpondering\033\\[0mplain answer' "$BATS_TEST_TMPDIR/chat2.tty" || fail "thinking not one run: $(cat -v "$BATS_TEST_TMPDIR/chat2.tty")"
}

# ---- over HTTP or on the database ----------------------------------------------------------

# The commands that need neither a server nor a database.
LOCAL=" free-port providers mcp help "

@test "the rule in dstream --help and in every usage: over HTTP by default, --db the offline mode, database-only said so" {
    run --separate-stderr "$D" --help
    [[ $output == *"Every command that can work over HTTP does so by default"* ]] || fail "dstream --help: $output"
    [[ $output == *"--db [PATH] before the command is the offline mode"* ]] || fail "dstream --help: $output"
    n=0
    while read -r c; do
        [[ $LOCAL == *" $c "* ]] && continue
        usage=$("$D" "$c" --help)
        if "$D" --help | grep -Eq "^  $c .*\(database only\)$"; then
            [[ $usage == *"on the database only"* ]] || fail "$c --help does not say it is on the database only: $usage"
        elif [[ $usage == *"over HTTP only"* ]]; then
            n=$((n + 1))
        else
            [[ $usage == *"over HTTP"* && $usage == *"--db [PATH]"*"offline"* ]] ||
                fail "$c --help does not state the rule (over HTTP, --db offline): $usage"
            n=$((n + 1))
        fi
    done < <(commands)
    [ "$n" -ge 12 ] || fail "only $n commands over HTTP"
    # docs/cli.md states it too.
    grep -q "Every command that can work over HTTP does so by default" "$DS_ROOT/docs/cli.md" || fail "docs/cli.md"
}

# ---- exit codes and documentation -------------------------------------------------------

@test "the exit codes of cli/http.h are those docs/cli.md, the man page and dstream --help give" {
    declare -A word=([OK]=done [FAIL]=failed [USAGE]=usage [NOTFOUND]="not found" [REFUSED]=refused [REJECTED]=rejected)
    n=0
    while read -r name code; do
        w=${word[$name]:-}
        [ -n "$w" ] || fail "EXIT_$name ($code) is not documented by this test: add it here, in docs/cli.md and the man page"
        grep -Eq "^\| $code \| $w" "$DS_ROOT/docs/cli.md" || fail "docs/cli.md: no row '| $code | $w'"
        awk '/^\.SH EXIT STATUS/{f=1;next} /^\.SH/{f=0} f' "$DS_ROOT/deploy/man/dstream.1" | grep -Eq "^\.B $code$" -A1 ||
            fail "the man page's EXIT STATUS has no .B $code"
        awk '/^\.SH EXIT STATUS/{f=1;next} /^\.SH/{f=0} f' "$DS_ROOT/deploy/man/dstream.1" | grep -A1 -E "^\.B $code$" |
            grep -qi "$w" || fail "the man page's exit $code is not '$w'"
        "$D" --help | grep -q "$code $w" || fail "dstream --help: no '$code $w'"
        n=$((n + 1))
    done < <(sed -n 's/^#define EXIT_\([A-Z]*\) \([0-9]\+\)$/\1 \2/p' "$DS_ROOT/cli/http.h")
    [ "$n" = 6 ]
    # And they are what the commands do: 2 usage, 3 not found (offline too).
    run "$D" --db "$DS_DB" session "no-such-$$"
    assert_failure 3
    run "$D" --db "$DS_DB" convo "no-such-$$"
    assert_failure 3
    run "$D" sessions show "no-such-$$"
    assert_failure 3
}

@test "a database that is not there: the commands that read it exit 1 and do not make one" {
    db=$BATS_TEST_TMPDIR/typo.db
    for args in "sessions" "sessions show x" "session x" "tail x" "streams list" "streams head x" "events x" \
        "convo x" "requests x" "export x" "search x" "skills export $BATS_TEST_TMPDIR/sk"; do
        # shellcheck disable=SC2086 # args is words
        run --separate-stderr env -u DSTREAM_URL "$D" --db "$db" $args
        [ "$status" = 1 ] || fail "dstream --db typo.db $args: exit $status: $stderr"
        [ ! -e "$db" ] || fail "dstream --db typo.db $args made the database"
    done
    run --separate-stderr env -u DSTREAM_URL "$D" --db "$db" sessions
    [[ $stderr == *"no such database"* ]]
    # migrate makes it.
    run "$D" --db "$db" migrate
    assert_success
    run env -u DSTREAM_URL "$D" --db "$db" sessions
    assert_success
}

@test "a server's database (a postgresql:// URI): the commands that read it open it, no file check" {
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || skip "no PostgreSQL server binaries (make deps)"
    PGDIR=$("$DS_ROOT/tests/pg.sh" tmp dstream-pgcli)
    uri=$("$DS_ROOT/tests/pg.sh" start "$PGDIR/c" fast)
    run "$D" --db "$uri" migrate
    assert_success
    for args in "sessions" "streams list" "streams head x" "events x" "tail x" "session x"; do
        # shellcheck disable=SC2086 # args is words
        run --separate-stderr env -u DSTREAM_URL "$D" --db "$uri" $args
        [[ $stderr != *"no such database"* && $stderr != *"cannot read"* ]] ||
            fail "dstream --db URI $args: exit $status: $stderr"
    done
    run --separate-stderr env -u DSTREAM_URL "$D" --db "$uri" streams list
    assert_success
    # A database the server does not have: exit 1, the server's own words.
    run --separate-stderr env -u DSTREAM_URL "$D" --db "${uri/\/dstream\?//nosuchdb?}" streams list
    assert_failure 1
    [[ $stderr == *nosuchdb* ]] || fail "stderr: $stderr"
}

# The man page as text: fonts and escapes taken out.
man_text() { sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\(em/-/g' "$DS_ROOT/deploy/man/dstream.1"; }

@test "the man page and docs/cli.md name every command and subcommand" {
    man_text >"$BATS_TEST_TMPDIR/man"
    for c in $(commands); do
        # An entry: a line of its own that begins with the command (.TP's tag).
        grep -Eq "^(\.BI? )?$c( |$)" "$BATS_TEST_TMPDIR/man" || fail "the man page has no entry for $c"
        grep -q "\`$c" "$DS_ROOT/docs/cli.md" || fail "docs/cli.md does not name $c"
        for s in $(subcommands "$c"); do
            grep -Eq "^(\.BI? )?$c( [^ ]*)*[ |[]$s([] |]|$)" "$BATS_TEST_TMPDIR/man" || fail "the man page does not name $c $s"
            grep -Eq "\`$c ([^\`]*[ |[])?$s([] |\`]|$)" "$DS_ROOT/docs/cli.md" || fail "docs/cli.md does not name $c $s"
        done
    done
    # man(1) reads it without a warning.
    if command -v groff >/dev/null; then
        run groff -man -Tutf8 -ww -z "$DS_ROOT/deploy/man/dstream.1"
        assert_success
        [ -z "$output" ] || fail "groff: $output"
    fi
}
