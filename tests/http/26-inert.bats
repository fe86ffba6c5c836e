#!/usr/bin/env bats
# A stream's body is a client's bytes, served on the API's origin under the
# Content-Type its writer chose; the viewer keeps its token in that origin's
# sessionStorage. Every answer (every route and status, catch-up, long-poll, SSE,
# HEAD, the pool's errors, nginx's own, the CGI backend's) is inert in a browser:
# X-Content-Type-Options: nosniff and Content-Security-Policy: sandbox (docs/security.md).
# Then headless Chromium opens script-bearing documents of four types on the stack's
# authenticating proxy (tests/browser/inert.mjs) and their scripts do not run.

load helpers

CSP="sandbox; default-src 'none'; frame-ancestors 'none'"

setup_file() {
    ds_stack_start DSTREAM_RUNNER=0 DSTREAM_LONGPOLL_MS=500 DSTREAM_SSE_MAX_MS=500
    D=$(cat "$DS_DIR/url-direct")
    ADMIN=$(cat "$DS_DIR/admin.token")
    export D ADMIN
}
teardown_file() { ds_stack_stop; }

setup() { T=$BATS_TEST_TMPDIR; }

# inert WHAT: the last response carried both headers, exactly once each.
inert() {
    local n
    n=$(grep -ci '^x-content-type-options: nosniff' "$DS_HDRS") || true
    [ "$n" = 1 ] || { echo "$1: $n nosniff headers (status $status_code)"; cat "$DS_HDRS"; return 1; }
    n=$(grep -ci "^content-security-policy: $CSP"$'\r'"\?$" "$DS_HDRS") || true
    [ "$n" = 1 ] || { echo "$1: $n sandbox CSP headers (status $status_code)"; cat "$DS_HDRS"; return 1; }
}

# adm METHOD PATH [curl args]: a request to the server's own URL with the admin token.
adm() { req "$1" "$D$2" -H "Authorization: Bearer $ADMIN" "${@:3}"; }

@test "every answer is inert: nosniff and a sandbox CSP on every route, status and transport" {
    local s=/v1/stream/inert/page etag
    adm PUT "$s" -H 'Content-Type: text/html'
    assert_status 201; inert "PUT 201"
    adm POST "$s" -H 'Content-Type: text/html' --data-binary '<script>alert(1)</script>'
    assert_status 204; inert "POST 204"
    adm GET "$s?offset=-1"
    assert_status 200; assert_header Content-Type text/html; inert "catch-up 200"
    etag=$(header ETag)
    adm GET "$s?offset=-1" -H "If-None-Match: $etag"
    assert_status 304; inert "catch-up 304"
    adm HEAD "$s"
    assert_status 200; inert "HEAD 200"
    adm GET "$s?offset=-1&live=long-poll"
    assert_status 200; assert_header Content-Type text/html; inert "long-poll 200"
    adm GET "$s?offset=now&live=long-poll"
    assert_status 204; inert "long-poll 204"
    # A long-poll that waits (in the hub) and is woken by an append: appends go on
    # until it has answered, at most 100 of them.
    curl -sS -D "$T/lp.h" -o /dev/null -H "Authorization: Bearer $ADMIN" "$D$s?offset=now&live=long-poll" &
    local lp=$! i
    for i in $(seq 100); do
        kill -0 "$lp" 2>/dev/null || break
        curl -sS -o /dev/null -H "Authorization: Bearer $ADMIN" -H 'Content-Type: text/html' --data-binary '<b>' "$D$s"
        sleep 0.1
    done
    wait "$lp"
    DS_HDRS=$T/lp.h status_code=woken
    grep -q '^HTTP/1.1 200' "$T/lp.h"; inert "woken long-poll 200"
    adm GET "$s?offset=-1&live=sse"
    assert_status 200; assert_header Content-Type text/event-stream; inert "SSE"
    adm GET "$s?offset=-1&access_token=$ADMIN" -H 'Authorization:'
    assert_status 200; inert "?access_token="
    # The pool's errors, which echo a client's path or body now and then.
    adm GET "/v1/stream/inert/%3Cscript%3E?offset=-1"
    assert_status 404; inert "404"
    adm HEAD "/v1/stream/inert/nope"
    assert_status 404; inert "HEAD 404"
    adm GET "$s?offset=<svg>"
    assert_status 400; inert "400"
    adm POST "$s" -H 'Content-Type: image/svg+xml' --data-binary '<svg/>'
    assert_status 409; inert "409"
    req GET "$D$s?offset=-1"
    assert_status 401; inert "401"
    req GET "$D$s?offset=-1" -H 'Authorization: Bearer dst_0000000000000000_<script>'
    assert_status 401; inert "401 invalid_token"
    adm OPTIONS "$s"
    inert "OPTIONS $status_code"
    adm GET /v1/health
    assert_status 200; inert "health"
    adm GET /metrics
    assert_status 200; inert "metrics"
    adm GET /v1/agents
    assert_status 200; inert "agents"
    adm GET /v1/sessions/nope
    assert_status 404; inert "session 404"
    adm GET /v1/nothing-here
    assert_status 404; inert "route 404"
    # Through the stack's proxy (the origin of the issue's attack) the same.
    req GET "$DS_URL$s?offset=-1"
    assert_status 200; inert "proxy catch-up"
    # nginx's own answers (nginx/dstream-errors.conf, the stack's catch-all).
    req GET "$D/nothing"
    assert_status 404; inert "nginx 404"
    req GET "$D/v1/stream/$(head -c 20000 /dev/zero | tr '\0' a)"
    assert_status 414; inert "nginx 414"
    req TRACE "$D/v1/stream/x"
    assert_status 405; inert "nginx 405"
    req POST "$D/v1/stream/x" -H 'Transfer-Encoding: gzip, chunked' -d 'x'
    assert_status 501; inert "nginx 501"
}

@test "the CGI backend's answers are inert too, its 503 without a database included" {
    local cgi=(env -i GATEWAY_INTERFACE=CGI/1.1 REMOTE_ADDR=127.0.0.1 DSTREAM_DB="$DS_DB")
    run "${cgi[@]}" REQUEST_METHOD=GET REQUEST_URI="/v1/stream/inert/page?offset=-1" \
        QUERY_STRING=offset=-1 HTTP_AUTHORIZATION="Bearer $ADMIN" "$DS_BIN/dstream-fcgi"
    assert_output --partial "Content-Type: text/html"
    assert_output --partial "X-Content-Type-Options: nosniff"
    assert_output --partial "Content-Security-Policy: $CSP"
    run "${cgi[@]}" REQUEST_METHOD=GET REQUEST_URI=/v1/stream/inert/page "$DS_BIN/dstream-fcgi"
    assert_output --partial "Status: 401"
    assert_output --partial "Content-Security-Policy: $CSP"
    mkdir "$T/ro" && chmod 500 "$T/ro"
    run env -i GATEWAY_INTERFACE=CGI/1.1 REMOTE_ADDR=127.0.0.1 DSTREAM_DB="$T/ro/sub/x.db" \
        REQUEST_METHOD=GET REQUEST_URI=/v1/health "$DS_BIN/dstream-fcgi"
    assert_output --partial "Status: 503"
    assert_output --partial "X-Content-Type-Options: nosniff"
    assert_output --partial "Content-Security-Policy: $CSP"
}

@test "headless Chromium: HTML, SVG, XHTML and XML documents with a script, opened on the API's origin, do not run it" {
    command -v chromium >/dev/null || skip "no chromium (make deps installs it)"
    # The victim's viewer token: it may create streams under xss-marker/ (what a
    # running script would do with it).
    local tok kind mode ct doc urls=() script
    tok=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "xss-victim" --scope streams:write:xss-marker/ | tail -n 1)
    for kind in html svg xhtml xml; do
        case $kind in
        html) ct=text/html ;;
        svg) ct=image/svg+xml ;;
        xhtml) ct=application/xhtml+xml ;;
        xml) ct=text/xml ;;
        esac
        for mode in catchup longpoll; do
            script='var x=new XMLHttpRequest();x.open("PUT","/v1/stream/xss-marker/'$kind-$mode'",false);'
            script+='x.setRequestHeader("Authorization","Bearer "+sessionStorage.getItem("dstream.token"));'
            script+='x.setRequestHeader("Content-Type","text/plain");x.send();'
            case $kind in
            html) doc="<!doctype html><html><body><p>stored</p><script>$script</script></body></html>" ;;
            svg) doc="<svg xmlns=\"http://www.w3.org/2000/svg\"><script>$script</script></svg>" ;;
            xhtml) doc="<html xmlns=\"http://www.w3.org/1999/xhtml\"><body><script>$script</script></body></html>" ;;
            xml) doc="<?xml version=\"1.0\"?><doc><script xmlns=\"http://www.w3.org/1999/xhtml\">$script</script></doc>" ;;
            esac
            adm PUT "/v1/stream/xss/$kind-$mode" -H "Content-Type: $ct"
            assert_status 201
            adm POST "/v1/stream/xss/$kind-$mode" -H "Content-Type: $ct" --data-binary "$doc"
            assert_status 204
            if [ "$mode" = catchup ]; then urls+=("$DS_URL/v1/stream/xss/$kind-$mode?offset=-1")
            else urls+=("$DS_URL/v1/stream/xss/$kind-$mode?offset=-1&live=long-poll"); fi
        done
    done
    run "$DS_ROOT/tests/browser/run.sh" inert.mjs "$DS_URL" "$tok" "${urls[@]}"
    echo "$output" | grep '^#' >&3 || true
    assert_success
    assert_output --partial "inert: PASS (8 documents opened)"
    # The harness sees a script that runs (the control, run by DevTools on the origin).
    adm HEAD /v1/stream/xss-marker/control
    assert_status 200
    # None of the documents' scripts ran.
    local ran=()
    for kind in html svg xhtml xml; do
        for mode in catchup longpoll; do
            adm HEAD "/v1/stream/xss-marker/$kind-$mode"
            [ "$status_code" = 404 ] || ran+=("$kind-$mode:$status_code")
        done
    done
    [ ${#ran[@]} -eq 0 ] || { echo "scripts ran: ${ran[*]}"; return 1; }
}
