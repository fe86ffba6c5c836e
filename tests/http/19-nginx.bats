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

# mk NAME SCOPE: a new token (printed).
mk() { "$DS_BIN/dstream" --db "$DS_DB" token create --name "$1" --scope "$2" 2>/dev/null | tail -n 1; }

# raw REQUEST-LINE [HEADER...]: send a request line as is (curl would drop a "#")
# to the server's own port; prints the status line.
raw() {
    local line=$1 port=${D##*:} h=""
    shift
    for x in "$@"; do h+="$x"$'\r\n'; done
    printf '%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n' "$line" "$h" |
        timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; cat <&3" | head -n 1
}

# log_count STRING N: N lines of the stack's access log hold STRING.
log_count() { [ "$(grep -cF "$1" "$DS_DIR/logs/access.log")" = "$2" ]; }

@test "the access log and the error log hold no token, however a request line carries it" {
    local toks=() i t s=/v1/stream/pub-log/a enc
    for i in $(seq 0 11); do toks+=("$(mk "log$i" streams:read:pub-log/)"); done
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $ADMIN" -H 'Content-Type: text/plain' "$D$s"
    # A "#" before it (the issue's case: the old pattern stopped at "#").
    raw "GET $s?offset=-1&x=#&access_token=${toks[0]}" | grep -q ' 200 '
    raw "GET $s?x=#y&offset=-1&access_token=${toks[1]}#frag"
    # Twice (the pool refuses it, 401; both are logged).
    raw "GET $s?access_token=${toks[2]}&offset=-1&access_token=${toks[3]}" | grep -q ' 401 '
    # Another case, percent-encoded name or value, the underscore escaped.
    raw "GET $s?offset=-1&ACCESS_TOKEN=${toks[4]}"
    raw "GET $s?offset=-1&%61ccess_token=${toks[5]}"
    enc=$(printf '%s' "${toks[6]}" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
    raw "GET $s?offset=-1&access_token=$enc" | grep -q ' 401 '
    raw "GET $s?access_token=-&offset=-1&access%5Ftoken=$enc"
    raw "GET $s?offset=-1&x=${toks[7]/_/%5F}"
    # In the path, in the User-Agent.
    raw "GET /v1/stream/pub-log/${toks[8]}?offset=-1" "Authorization: Bearer ${toks[9]}"
    raw "GET $s?offset=-1" "Authorization: Bearer ${toks[9]}" "User-Agent: client/1 ${toks[10]}" | grep -q ' 200 '
    # Refused by the rate limit (from an address that is limited: X-Forwarded-For),
    # with the token in the query: nginx's error log would quote the request line.
    # Rounds of 400 (twice the burst) until one is refused.
    local round deadline=$((SECONDS + 30))
    for round in $(seq 10); do
        curl -s --parallel --parallel-max 32 -H 'X-Forwarded-For: 192.0.2.77' -w '%{http_code}\n' -o /dev/null \
            "$D$s?offset=-1&access_token=${toks[11]}&n=[1-400]" >"$T/codes"
        grep -q '^429$' "$T/codes" || [ $SECONDS -gt $deadline ] && break
    done
    grep -q '^429$' "$T/codes"
    # The last request, then wait for the buffered access log (flushed every second).
    # Each nginx worker has a buffer of its own: the mark's line, written by one, does
    # not mean the other's are. Wait for all of this test's lines: the token in the
    # path, and the 9 raw GETs and the rounds of 400 of the stream.
    curl -sS -o /dev/null "$D/v1/health?log-mark=$BATS_TEST_NUMBER"
    ds_poll 10 grep -qF "log-mark=$BATS_TEST_NUMBER" "$DS_DIR/logs/access.log"
    ds_poll 10 grep -qF '"GET - HTTP/1.1"' "$DS_DIR/logs/access.log"
    ds_poll 10 log_count "GET $s?" $((9 + 400 * round))
    for i in "${!toks[@]}"; do
        t=${toks[$i]}
        ! grep -F "${t:21}" "$DS_DIR"/logs/* || { echo "token $i is in a log"; return 1; }
    done
    # What is logged of those lines: the request, with "-" where a token was.
    grep -qF "GET $s?offset=-1&x=#&access_token=- HTTP/1.1" "$DS_DIR/logs/access.log"
    grep -qF "GET $s?-" "$DS_DIR/logs/access.log"
    grep -qF '"GET - HTTP/1.1"' "$DS_DIR/logs/access.log"
    ! grep -qF 'client/1' "$DS_DIR/logs/access.log"
}

@test "rate limit per token: 100 spellings of one Authorization header the pool accepts share one budget" {
    # "Bearer" in 25 cases, followed by 1 to 4 spaces: the pool takes each as the
    # token. Each request comes from its own address of 198.18.0.0/16 (through
    # X-Forwarded-For) so that only the per-token limit can refuse it: 500/s, bursts
    # of 1,000. As 100 keys, each would get 20 requests a round and none would be
    # refused; as one key, a round of 2,000 goes past its burst.
    local tok spellings=() base=bearer w c i m n round=0 got=0 deadline=$((SECONDS + 60))
    tok=$(mk rate-spell streams:read:rl/)
    curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $ADMIN" -H 'Content-Type: text/plain' "$D/v1/stream/rl/a"
    for m in $(seq 0 24); do
        w=""
        for i in 0 1 2 3 4 5; do
            c=${base:$i:1}
            if (( m >> i & 1 )); then w+=${c^}; else w+=$c; fi
        done
        for c in 1 2 3 4; do spellings+=("$w$(printf '%*s' "$c" '')$tok"); done
    done
    [ "$(printf '%s\n' "${spellings[@]}" | sort -u | wc -l)" = 100 ]
    # Every spelling is the token to the pool (loopback: no limit applies).
    for i in "${!spellings[@]}"; do
        printf 'next\nurl = "%s/v1/stream/rl/a"\nhead\nheader = "Authorization: %s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' \
            "$D" "${spellings[$i]}"
    done | tail -n +2 >"$T/check.cfg"
    curl -s --no-progress-meter --parallel --parallel-max 32 -K "$T/check.cfg" >"$T/check"
    [ "$(grep -c '^200$' "$T/check")" = 100 ] || { sort "$T/check" | uniq -c; return 1; }
    # Rounds of 2,000 (20 per spelling) until one is refused.
    for i in $(seq 0 1999); do
        printf 'next\nurl = "%s/v1/health?n=%d"\nheader = "Authorization: %s"\nheader = "X-Forwarded-For: 198.18.%d.%d"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' \
            "$D" "$i" "${spellings[$((i % 100))]}" "$((i / 200))" "$((i % 200 + 1))"
    done | tail -n +2 >"$T/flood.cfg"
    while [ $SECONDS -lt $deadline ] && [ $round -lt 20 ]; do
        round=$((round + 1))
        curl -s --no-progress-meter --parallel --parallel-max 64 -K "$T/flood.cfg" >"$T/codes"
        if grep -q '^429$' "$T/codes"; then got=1; break; fi
    done
    n=$(grep -c '^429$' "$T/codes") || true
    echo "# round $round: $(grep -c '^200$' "$T/codes") passed, $n refused" >&3
    [ "$got" = 1 ]
}

@test "rate limit per token: ?access_token= is the pool's token as sent; an escaped one is refused (401)" {
    local tok enc
    tok=$(mk rate-query streams:read:rl/)
    run curl -s -o /dev/null -w '%{http_code}' "$D/v1/stream/rl/a?access_token=$tok"
    assert_output 200
    enc=$(printf '%s' "$tok" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
    run curl -s -o /dev/null -w '%{http_code}' "$D/v1/stream/rl/a?access_token=$enc"
    assert_output 401
    run curl -s -o /dev/null -w '%{http_code}' "$D/v1/stream/rl/a?access_token=${tok/_/%5F}"
    assert_output 401
}
