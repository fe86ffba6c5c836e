#!/usr/bin/env bats
# The session viewer (web/): served by the stack's nginx at /web/ through the shipped
# snippet (nginx/dstream-web.conf) with a strict Content-Security-Policy and no
# token needed for the static files; then driven in headless Chromium with auth on
# (tests/browser/viewer.mjs: the server's own URL, the token pasted into the page).
# Screenshots of each page are kept in $DSTREAM_ARTIFACTS/web (default
# build/artifacts/web), not committed.

load runner-helpers

# SSE responses end every 1.5 s: the page must resume them (Last-Event-ID). One MCP
# server, t (tests/mcp/test-server.mjs), with an environment value no page may show.
setup_file() {
    MCP_TMP=$(mktemp -d -t dstream-web-mcp.XXXXXX)
    jq -n --arg node "$(command -v node)" --arg ts "$DS_ROOT/tests/mcp/test-server.mjs" \
        '{mcpServers: {t: {command: $node, args: [$ts], env: {TEST_SECRET: "s3cret-env-value"}}}}' >"$MCP_TMP/mcp.json"
    chmod 644 "$MCP_TMP/mcp.json"
    export MCP_TMP
    rn_start DSTREAM_SSE_MAX_MS=1500 DSTREAM_MCP_CONFIG="$MCP_TMP/mcp.json"
}
teardown_file() {
    rn_stop
    [ -n "${MCP_TMP:-}" ] && rm -rf "$MCP_TMP"
    return 0
}
setup() { rn_test_setup; }
teardown() { rn_test_teardown; }

@test "the viewer's files: served without a token, a strict CSP, JavaScript modules typed" {
    direct=$(cat "$DS_DIR/url-direct")
    run curl -sS -D "$BATS_TEST_TMPDIR/h" -o "$BATS_TEST_TMPDIR/b" -w '%{http_code}' "$direct/web/"
    assert_output 200
    grep -qi "^content-type: text/html" "$BATS_TEST_TMPDIR/h"
    grep -qi "^content-security-policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'" "$BATS_TEST_TMPDIR/h"
    grep -qi "^x-content-type-options: nosniff" "$BATS_TEST_TMPDIR/h"
    grep -q '<script type="module" src="app.js">' "$BATS_TEST_TMPDIR/b"
    for f in app.js api.js dom.js flow.js lineage.js overview.js pictures.js session.js; do
        run curl -sS -o /dev/null -w '%{http_code} %{content_type}' "$direct/web/$f"
        assert_output "200 text/javascript"
    done
    run curl -sS -o /dev/null -w '%{http_code} %{content_type}' "$direct/web/style.css"
    assert_output "200 text/css"
    # /web redirects to /web/ (a relative Location), the API still needs its token.
    run curl -sS -o /dev/null -w '%{http_code} %{redirect_url}' "$direct/web"
    assert_output --regexp '^301 .*/web/$'
    run curl -sS -o /dev/null -w '%{http_code}' "$direct/v1/sessions"
    assert_output 401
}

@test "the viewer's sources: no external URL, no inline script, no HTML sink" {
    cd "$DS_ROOT/web"
    # The SVG namespace (an identifier the DOM needs to make SVG elements, never fetched)
    # is the one URL allowed, as that exact string.
    run bash -c "sed 's|\"http://www.w3.org/2000/svg\"||g' ./*.html ./*.js ./*.css | grep -nE 'https?://'"
    assert_failure
    [ "$(grep -l 'http://www.w3.org/2000/svg' ./*.js)" = "./pictures.js" ]
    run grep -nE 'innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function' ./*.js
    assert_failure
    run grep -nE '<script>|<style>| on[a-z]+=' index.html
    assert_failure
}

@test "headless Chromium: list, live session, reconnect without gap or duplicate, checkpoint, slider, fork, cancel, 403" {
    command -v chromium >/dev/null || skip "no chromium (make deps installs it)"
    out=${DSTREAM_ARTIFACTS:-$DS_ROOT/$DS_B/artifacts}/web
    mkdir -p "$out"
    rt=$("$DS_BIN/dstream" --db "$DS_DB" token create --name "web-rw-$$" --scope sessions:read --scope sessions:write | tail -n 1)
    run "$DS_ROOT/tests/browser/run.sh" viewer.mjs "$(cat "$DS_DIR/url-direct")" "$(cat "$DS_DIR/admin.token")" "$RN_MOCK" "$out" "$rt"
    echo "# ${lines[-1]} (screenshots in $out)" >&3
    assert_success
    assert_output --partial "viewer: PASS"
    for p in sessions session-streaming time-travel checkpoint session-phone agent-403 workflow mcp; do
        [ -s "$out/$p.png" ] || fail "no screenshot $p.png"
    done
}

# One behaviour each (tests/browser/viewer-details.mjs CASE), screenshots in the same place.
details() {
    command -v chromium >/dev/null || skip "no chromium (make deps installs it)"
    out=${DSTREAM_ARTIFACTS:-$DS_ROOT/$DS_B/artifacts}/web
    mkdir -p "$out"
    run "$DS_ROOT/tests/browser/run.sh" viewer-details.mjs "$1" "$(cat "$DS_DIR/url-direct")" "$(cat "$DS_DIR/admin.token")" "$RN_MOCK" "$out"
    echo "# ${lines[-1]}" >&3
    assert_success
    assert_output --partial "viewer-details $1: PASS"
}

@test "headless Chromium: the summary's event count moves with the counter while a reply streams" {
    details summary
}

@test "headless Chromium: a reply cut off and continued is one reply, with a marker where it was continued" {
    details continued
}

@test "headless Chromium: a checkpoint's prompt keeps its line breaks" {
    details prompt
}

@test "headless Chromium: a workflow agent's output is shown once, under the agent's name" {
    details agent-output
}

@test "headless Chromium: a budget's checkpoint asks for a new limit and the reply goes on with it" {
    details budget
}

@test "headless Chromium: a provider failover is said in the conversation and flags the fallback's attempt" {
    details failover
}

@test "headless Chromium: a toast stays on its page (an answer's), or goes to the next when meant to (a fork's)" {
    details toast
}

@test "headless Chromium: the sessions list shows labels and filters on them; a chat started from the AI SDK is listed and shown as any other" {
    details labels
}

@test "headless Chromium: a chat's compaction is shown where it happened, the summary collapsed" {
    details compaction
}

@test "headless Chromium: a sleeping and a waiting session: timers and signals in the timeline, what it waits for, a signal sent from the page" {
    details timers
}

@test "headless Chromium: each workflow drawn (phases, steps, transitions, loops); a session's current phase marked live" {
    details workflow-picture
}

# A case of viewer-details.mjs whose screenshots go to the test's own directory (kept
# in the artifacts' directory too): NAME.png for each NAME given after the case.
details_here() {
    command -v chromium >/dev/null || skip "no chromium (make deps installs it)"
    local case=$1 p
    shift
    run "$DS_ROOT/tests/browser/run.sh" viewer-details.mjs "$case" "$(cat "$DS_DIR/url-direct")" "$(cat "$DS_DIR/admin.token")" "$RN_MOCK" "$BATS_TEST_TMPDIR"
    echo "# ${lines[-1]}" >&3
    out=${DSTREAM_ARTIFACTS:-$DS_ROOT/$DS_B/artifacts}/web
    mkdir -p "$out"
    # (a failure's screenshot kept with the artifacts)
    [ ! -s "$BATS_TEST_TMPDIR/details-$case-failed.png" ] || cp "$BATS_TEST_TMPDIR/details-$case-failed.png" "$out/"
    assert_success
    assert_output --partial "viewer-details $case: PASS"
    for p in "$@"; do
        [ -s "$BATS_TEST_TMPDIR/$p.png" ] || fail "no screenshot $p.png"
        cp "$BATS_TEST_TMPDIR/$p.png" "$out/details-$p.png"
    done
}

@test "headless Chromium: a session's lineage is a tree of its forks with their positions; a click opens a session" {
    details_here lineage lineage lineage-clicked
}

@test "headless Chromium: two sessions side by side from where they part, the first difference marked" {
    details_here diff diff
}

@test "headless Chromium: a session's timeline (attempts, retries, cuts, tool calls, waits), its tokens and cost over time, the overview" {
    details_here pictures timeline timeline-picked usage overview
}
