#!/usr/bin/env bats
# dstream backup, check and restore against a live stack: a backup taken while
# clients append over HTTP is sound and holds every append acknowledged before it
# began; check finds a broken invariant; restore brings a backup back.

load helpers

setup_file() { ds_stack_start; }
teardown_file() { ds_stack_stop; }

setup() {
    T=$BATS_TEST_TMPDIR
    CLI=$DS_BIN/dstream
    BG_PIDS=()
}

teardown() { ds_bg_stop; }

# appender URL N OUT: POST "i" for i in 1..N, one request each; after each 204 the
# acknowledged count goes to OUT (written whole, then renamed: never half a line).
appender() {
    local url=$1 n=$2 out=$3 i code
    for ((i = 1; i <= n; i++)); do
        code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 -X POST \
            -H 'Content-Type: text/plain' --data-binary "$i" "$url") || break
        [ "$code" = 204 ] || break
        echo "$i" >"$out.tmp" && mv "$out.tmp" "$out"
    done
    echo done >"$out.done"
}

# acked_at_least FILE N: the appender writing FILE has N acknowledged (for ds_poll).
acked_at_least() { [ -s "$1" ] && [ "$(cat "$1")" -ge "$2" ]; }

@test "a backup taken during appends is sound and holds every acknowledged append" {
    ds_is_pg && skip "SQLite only: dstream backup and restore copy a SQLite file; on PostgreSQL they name pg_dump and pg_restore (17-check-live-data)"
    local names=() acked_before=() i n
    for i in 1 2 3; do
        names[i]=$(ds_name bk)
        ds_create "/v1/stream/${names[i]}" text/plain
        spawn "$T/appender$i.log" appender "$DS_URL/v1/stream/${names[i]}" 3000 "$T/acked$i"
    done
    # Appends are flowing on every stream, a few hundred made, before the backup starts.
    for i in 1 2 3; do
        ds_poll 60 acked_at_least "$T/acked$i" 200 || fail "appender $i: $(cat "$T/appender$i.log")"
    done
    for i in 1 2 3; do acked_before[i]=$(cat "$T/acked$i"); done
    run "$CLI" --db "$DS_DB" backup "$T/backup.db"
    assert_success
    assert_line --partial "backup: $T/backup.db:"
    assert_line "check: $T/backup.db: ok"
    echo "$output" >&3
    # The appenders were still going when the backup ended (it did not stop them).
    local moved=0
    for i in 1 2 3; do
        [ "$(cat "$T/acked$i")" -gt "${acked_before[i]}" ] && moved=1
    done
    [ "$moved" = 1 ] || [ -e "$T/acked1.done" ] || fail "no append completed during the backup"
    # The backup opens with sqlite3, passes integrity_check, and each stream is
    # 1..n with n at least what was acknowledged before the backup began.
    run sqlite3 "$T/backup.db" 'PRAGMA integrity_check'
    assert_output ok
    for i in 1 2 3; do
        n=$(sqlite3 "$T/backup.db" "SELECT count(*) FROM messages m JOIN streams s ON s.id = m.stream WHERE s.path = '${names[i]}'")
        [ "$n" -ge "${acked_before[i]}" ] || fail "stream $i: $n messages in the backup, ${acked_before[i]} acknowledged before it"
        bad=$(sqlite3 "$T/backup.db" "SELECT count(*) FROM messages m JOIN streams s ON s.id = m.stream WHERE s.path = '${names[i]}' AND CAST(m.data AS TEXT) != CAST(m.seq + 1 AS TEXT)")
        [ "$bad" = 0 ] || fail "stream $i: $bad messages out of place"
        echo "# stream $i: ${acked_before[i]} acknowledged before, $n in the backup" >&3
    done
    ds_bg_stop
    # The live database is sound too, after all that.
    run "$CLI" --db "$DS_DB" check
    assert_success
    assert_output "check: $DS_DB: ok"
}

@test "backup refuses to overwrite a file and to back up a database that is not there" {
    echo keep >"$T/exists"
    run "$CLI" --db "$DS_DB" backup "$T/exists"
    assert_failure
    assert_output --partial "exists"
    [ "$(cat "$T/exists")" = keep ]
    run "$CLI" --db "$T/none.db" backup "$T/b.db"
    assert_failure 2
    [ ! -e "$T/none.db" ] && [ ! -e "$T/b.db" ]
}

@test "check names a broken invariant and exits non-zero; restore brings a backup back" {
    ds_is_pg && skip "SQLite only: dstream backup and restore copy a SQLite file; on PostgreSQL they name pg_dump and pg_restore (17-check-live-data)"
    name=$(ds_name chk)
    s=/v1/stream/$name
    ds_create "$s" text/plain
    ds_append "$s" text/plain one
    ds_append "$s" text/plain two
    run "$CLI" --db "$DS_DB" backup "$T/good.db"
    assert_success
    # Break a copy by hand: a message position that does not follow.
    cp "$T/good.db" "$T/bad.db"
    sqlite3 "$T/bad.db" "UPDATE messages SET pos = pos + 5 WHERE seq = 1 AND stream = (SELECT id FROM streams WHERE path = '$name')"
    run "$CLI" check "$T/bad.db"
    assert_failure 1
    assert_line --partial "problem: message position does not follow the one before: path=$name"
    assert_line --regexp "^check: $T/bad.db: [0-9]+ problems?\$"
    # Restore refuses the broken one and takes the good one, into a fresh database.
    run "$CLI" --db "$T/restored.db" restore "$T/bad.db"
    assert_failure
    run "$CLI" --db "$T/restored.db" restore "$T/good.db"
    assert_success
    run "$CLI" --db "$T/restored.db" tail --no-follow "$name"
    assert_success
    assert_output $'one\ntwo'
    run "$CLI" --db "$T/restored.db" check
    assert_success
    [ "$(sqlite3 "$T/restored.db" 'PRAGMA journal_mode')" = wal ]
}
