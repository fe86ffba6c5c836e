#!/usr/bin/env bats
# What the shipped nginx snippets and the stack's nginx do on their own: the stack
# starts without a warning in nginx's error log (worker_connections sized to the
# open file limit); the access log masks every token a request line can carry; the
# per-token rate limit keys on the token the pool verifies, however the client
# spells its header.
#
# These requests go to the server's own URL (DIR/url-direct), not through the
# stack's token-adding proxy.

load helpers

setup_file() {
    ds_stack_start DSTREAM_RUNNER=0
    D=$(cat "$DS_DIR/url-direct")
    ADMIN=$(cat "$DS_DIR/admin.token")
    MAIN_DIR=$DS_DIR
    export D ADMIN MAIN_DIR
}
teardown_file() { ds_stack_stop; }

setup() { T=$BATS_TEST_TMPDIR; }

# A test that started a stack of its own stops it, whatever happened.
teardown() {
    if [ "${DS_DIR:-}" != "$MAIN_DIR" ]; then ds_stack_stop; fi
}

# no_start_warning DIR: nginx's error log in DIR has no warning (nor worse) from its start.
no_start_warning() {
    run grep -E '\[(warn|error|crit|alert|emerg)\]' "$1/logs/nginx-error.log"
    [ -z "$output" ] || { echo "$output"; return 1; }
}

@test "nginx starts clean: no 'worker_connections exceed open file resource limit', at this limit and at 4096" {
    no_start_warning "$DS_DIR"
    # The same stack under a low hard limit (as on a host whose limit is 4096): the
    # workers take no more connections than they may open files, and it serves.
    local dir=$T/low
    bash -c 'ulimit -Sn 4096 && ulimit -Hn 4096 && exec env DSTREAM_RUNNER=0 DSTREAM_LIVE_MAX=1024 \
        DSTREAM_DB="$1/dstream.db" B="$2" "$3" start "$1"' _ "$dir" "$DS_B" "$DS_STACK" >"$T/start.out" 2>&1 ||
        { cat "$T/start.out"; "$DS_STACK" stop "$dir"; return 1; }
    run curl -sS -o /dev/null -w '%{http_code}' "$(cat "$dir/url-direct")/v1/health"
    "$DS_STACK" stop "$dir"
    assert_output 200
    grep -q 'worker_connections 4096;' "$dir/nginx.conf"
    no_start_warning "$dir"
}
