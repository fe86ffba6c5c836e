// viewer.mjs: the session viewer (web/) in headless Chromium against the real stack,
// with authentication on (the server's own URL, not the token-adding proxy).
//
//   node viewer.mjs BASE_URL ADMIN_TOKEN MOCK_URL OUT_DIR [READ_TOKEN]
//
// The page is given the token through its form, then: the sessions list; a chat
// session whose streamed reply (scripted on the mock provider, slow) is seen arriving
// and contains <img src=x onerror=...>, which must stay text; the connection is lost
// (the server ends its SSE responses every DSTREAM_SSE_MAX_MS, and the page's
// Reconnect button drops it by hand) and resumes without a gap or a duplicate; a
// human checkpoint answered with its button (a choice; then an approval rejected and a
// text answer); the time-travel slider moved and the
// session forked there; the operator's MCP servers with the call just made (no
// environment value); an agent's document, edited and saved with the admin token,
// which a token without admin cannot change (403 shown), and the MCP page it may not
// see. Screenshots of every page go to OUT_DIR. Prints
// "viewer: PASS ..." or "viewer: FAIL ...".
import { apiOf, assert, checks, launch, ok, scriptOf, watch } from "./lib.mjs";

const [base, admin, mock, out, readToken] = process.argv.slice(2);
if (!base || !admin || !mock || !out) {
    console.error("usage: node viewer.mjs BASE_URL ADMIN_TOKEN MOCK_URL OUT_DIR [READ_TOKEN]");
    process.exit(2);
}
const tag = `${process.pid}-${Date.now().toString(36)}`;
const api = apiOf(base, admin);
const script = scriptOf(mock);
async function allEvents(id) {
    let off = "-1", all = [];
    for (let i = 0; i < 1000; i++) {
        const res = await fetch(`${base}/v1/sessions/${id}/events?offset=${off}`, { headers: { Authorization: `Bearer ${admin}` } });
        all = all.concat(await res.json());
        if (res.headers.get("stream-up-to-date")) break;
        off = res.headers.get("stream-next-offset");
    }
    return all;
}

const browser = await launch();
let failed = false;
try {
    await fetch(`${mock}/__script`, { method: "DELETE" });
    const agent = `viewer-agent-${tag}`;
    await api("POST", "/v1/agents", { name: agent, provider: "anthropic", model: "claude-test-model" });
    const chatId = (await api("POST", "/v1/sessions", { agent, id: `viewer-chat-${tag}` })).id;

    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    const clean = watch(page, base);
    await page.exposeFunction("__pwned", (what) => { throw new Error(`script ran: ${what}`); });

    // ---- no token: the API says 401 and the page asks for one ------------------------
    await page.goto(`${base}/web/#/sessions`);
    await page.waitForFunction(() => /401/.test(document.getElementById("token-state")?.textContent), null, { timeout: 10000 });
    ok("without a token the page reports 401");
    await page.getByLabel("API token").fill(admin);
    await page.getByRole("button", { name: "Use" }).click();
    await page.waitForSelector(`tr[data-session="${chatId}"]`, { timeout: 10000 });
    assert(await page.evaluate(() => sessionStorage.getItem("dstream.token")) === admin, "the token is not in sessionStorage");
    await page.waitForFunction((id) => {
        const c = document.querySelector(`tr[data-session="${id}"] td:last-child`);
        return c && c.textContent.startsWith("$");
    }, chatId, { timeout: 10000 });
    await page.screenshot({ path: `${out}/sessions.png`, fullPage: true });
    ok("sessions list with status, agent, age and cost");
    await page.selectOption("#status-filter", "completed");
    await page.waitForFunction(() => location.hash === "#/sessions?status=completed");
    await page.waitForFunction((id) => !document.querySelector(`tr[data-session="${id}"]`) &&
                                       /page 1/.test(document.body.textContent), chatId, { timeout: 10000 });
    ok("filter by status");
    // Pages: one session a page, following the API's cursor and back.
    const older = (await api("POST", "/v1/sessions", { agent, id: `viewer-older-${tag}` })).id;
    const newer = (await api("POST", "/v1/sessions", { agent, id: `viewer-newer-${tag}` })).id;
    await page.goto(`${base}/web/#/sessions?limit=1`);
    const rowIs = (id) => page.waitForFunction((i) => {
        const rows = document.querySelectorAll("tr[data-session]");
        return rows.length === 1 && rows[0].dataset.session === i;
    }, id, { timeout: 10000 });
    await rowIs(newer);
    await page.getByRole("button", { name: "Next" }).click();
    await rowIs(older);
    await page.getByRole("button", { name: "Previous" }).click();
    await rowIs(newer);
    ok("paged with the API's cursor (Next, Previous)");

    // ---- a chat session: streamed text, thinking, tool-free reply with markup ---------
    const evil = `<img src=x onerror="window.__pwned('img')"><script>window.__pwned('script')</script>`;
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ");
    // The mock holds the reply after 20 of its 85 deltas ("word1 " is in the 18th) until
    // the release below: it is still streaming when the page is looked at mid-reply,
    // however slowly a loaded Chromium shows it.
    await script({ thinking: "Let me think about <b>this</b>.", text: `Here: ${evil} ${words} THE-END`, chunkSize: 6,
                   delayMs: 60, holdAfter: 20, usage: { input: 12, output: 34 } });
    await page.goto(`${base}/web/#/session/${chatId}`);
    await page.waitForSelector(".conn-live", { timeout: 10000 });
    await page.getByLabel("Message", { exact: true }).fill("Tell me something <b>bold</b>");
    await page.getByLabel("queue", { exact: true }).check();
    await page.getByLabel("interrupt", { exact: true }).check();
    await page.getByRole("button", { name: "Send", exact: true }).click();
    await page.waitForFunction(() => /word1\b/.test(document.getElementById("chat")?.textContent), null, { timeout: 15000 });
    const mid = await page.evaluate(() => document.getElementById("chat").textContent);
    assert(!mid.includes("THE-END"), "the reply was complete before it was seen streaming");
    await page.screenshot({ path: `${out}/session-streaming.png`, fullPage: true });
    ok("streamed text seen arriving (mid-stream screenshot)");
    // The reply goes on to its end.
    assert((await fetch(`${mock}/__release`, { method: "POST" })).ok, "mock: the release failed");
    await page.waitForFunction(() => document.getElementById("chat")?.textContent.includes("THE-END"), null, { timeout: 30000 });
    const chat = await page.evaluate(() => ({
        text: document.getElementById("chat").textContent,
        imgs: document.querySelectorAll("#chat img, #timeline img").length,
        scripts: document.querySelectorAll("main script").length,
        details: [...document.querySelectorAll("#chat details")].map((d) => ({ open: d.open, text: d.textContent })),
        user: document.querySelector(".msg-user .text").textContent,
    }));
    assert(chat.text.includes("<img src=x onerror="), "the markup is not shown as text");
    assert(chat.imgs === 0 && chat.scripts === 0, "an element was made from event text");
    assert(chat.user === "Tell me something <b>bold</b>", `user text: ${chat.user}`);
    assert(chat.details.length === 1 && !chat.details[0].open && chat.details[0].text.includes("<b>this</b>"),
           `thinking: ${JSON.stringify(chat.details)}`);
    await page.waitForFunction(() => /12 in · 34 out/.test(document.getElementById("session-usage")?.textContent), null, { timeout: 10000 });
    ok("markup in a reply stays text, nothing executed; thinking collapsed; usage and cost shown");

    // ---- the connection lost and resumed ------------------------------------------------
    const before = await page.evaluate(() => Number(document.getElementById("conn-counters").dataset.reconnects));
    await page.waitForFunction((n) => Number(document.getElementById("conn-counters")?.dataset.reconnects) > n, before, { timeout: 20000 });
    ok("the server ended the stream and the page reconnected (Last-Event-ID)");
    await script({ text: "After the drop: second reply.", chunkSize: 3, delayMs: 30 });
    await page.getByRole("button", { name: "Reconnect" }).click();
    await api("POST", `/v1/sessions/${chatId}/messages`, { content: "again", mode: "queue" });
    await page.waitForFunction(() => document.getElementById("chat")?.textContent.includes("second reply."), null, { timeout: 20000 });
    // Every event written: the reply has ended (its last event may follow its text).
    for (let i = 0; i < 200 && (await api("GET", `/v1/sessions/${chatId}`)).status !== "completed"; i++)
        await new Promise((r) => setTimeout(r, 100));
    const want = (await allEvents(chatId)).map((e) => e.offset);
    await page.waitForFunction((n) => Number(document.getElementById("conn-counters")?.dataset.events) >= n, want.length, { timeout: 10000 });
    const got = await page.evaluate(() => [...document.querySelectorAll("#timeline li[data-offset]")].map((li) => li.dataset.offset));
    const dups = await page.evaluate(() => Number(document.getElementById("conn-counters").dataset.duplicates));
    assert(JSON.stringify(got) === JSON.stringify(want), `timeline ${got.length} events vs ${want.length}`);
    assert(dups === 0, `${dups} duplicates`);
    const notes = await page.evaluate(() => document.querySelectorAll("#timeline li.reconnect").length);
    assert(notes >= 2, "the reconnections are not shown");
    ok(`resumed without a gap or a duplicate (${want.length} events, ${notes} reconnection notes)`);

    // ---- time travel and fork ------------------------------------------------------
    await page.focus("#travel");
    await page.keyboard.press("Home");
    for (let i = 0; i < 2; i++) await page.keyboard.press("ArrowRight");
    await page.waitForFunction((at) => document.getElementById("travel-state")?.dataset.at === at, want[2], { timeout: 10000 });
    const travel = await page.evaluate(() => document.getElementById("travel-state").textContent);
    assert(/user: Tell me something <b>bold<\/b>/.test(travel) && !travel.includes("assistant"), `state at 2: ${travel}`);
    // The conversation pane rewinds with it: only the first message, the live one hidden.
    const shown = (sel) => `getComputedStyle(document.querySelector("${sel}")).display !== "none"`;
    const pastChat = await page.evaluate(`({
        past: ${shown("#past")}, live: ${shown("#chat")}, compose: ${shown("form.compose")},
        text: document.getElementById("chat-at").textContent,
        msgs: document.querySelectorAll("#chat-at .msg").length })`);
    assert(pastChat.past && !pastChat.live && !pastChat.compose && pastChat.msgs === 1 && pastChat.text.includes("Tell me something <b>bold</b>"),
           `conversation at 2: ${JSON.stringify(pastChat)}`);
    // A new event while in the past (a background message) refreshes the page; it
    // stays in the past, still without the message box.
    const summaryBefore = await page.textContent("dl.kv");
    await api("POST", `/v1/sessions/${chatId}/messages`, { content: "noted in the background", mode: "background" });
    await page.waitForFunction((b) => document.querySelector("dl.kv").textContent !== b, summaryBefore, { timeout: 10000 });
    const after = await page.evaluate(`({ past: ${shown("#past")}, compose: ${shown("form.compose")} })`);
    assert(after.past && !after.compose, `after a refresh in the past: ${JSON.stringify(after)}`);
    await page.screenshot({ path: `${out}/time-travel.png`, fullPage: true });
    ok("the slider shows the state and the conversation at an offset, and stays there as events come");
    await page.getByRole("button", { name: "Back to live" }).click();
    await page.waitForFunction(`!(${shown("#past")}) && ${shown("#chat")} &&
                                /\\(live\\)/.test(document.getElementById("travel-label").textContent)`, null, { timeout: 10000 });
    await page.focus("#travel");
    await page.keyboard.press("Home");
    for (let i = 0; i < 2; i++) await page.keyboard.press("ArrowRight");
    await page.waitForFunction((at) => document.getElementById("travel-state")?.dataset.at === at, want[2], { timeout: 10000 });
    ok("back to live, and to the same position again");
    await page.getByRole("button", { name: "Fork here" }).click();
    await page.waitForFunction((id) => location.hash.startsWith("#/session/") && !location.hash.endsWith(id), chatId, { timeout: 10000 });
    const forkId = decodeURIComponent(await page.evaluate(() => location.hash.slice("#/session/".length)));
    const fork = await api("GET", `/v1/sessions/${encodeURIComponent(forkId)}`);
    assert(fork.parent === chatId && fork.forkOffset === want[2], `fork: ${JSON.stringify({ parent: fork.parent, at: fork.forkOffset })}`);
    await page.waitForFunction(() => /forked from/.test(document.querySelector("main")?.textContent), null, { timeout: 10000 });
    ok("fork here");

    // ---- a human checkpoint ----------------------------------------------------------
    const wf = `viewer-wf-${tag}`;
    await api("POST", "/v1/workflows", { name: wf, phases: [
        { name: "ask", steps: [{ kind: "human", id: "go", input: "choice", options: ["ship <it>", "wait"],
          prompt: "Ship it? <img src=x onerror=\"window.__pwned('prompt')\">", timeoutMs: 3600000,
          onTimeout: { response: "wait" }, update: { decision: "$response" } }], transitions: [{ to: "done" }] },
        { name: "done", terminal: true, steps: [{ kind: "update", set: { finished: true } }] }] });
    const wfId = (await api("POST", "/v1/sessions", { workflow: wf })).id;
    await page.goto(`${base}/web/#/session/${wfId}`);
    await page.waitForSelector("#checkpoint:not([hidden]) #checkpoint-expiry", { timeout: 15000 });
    const prompt = await page.textContent("#checkpoint-prompt");
    assert(prompt.includes("<img src=x"), `prompt: ${prompt}`);
    await page.screenshot({ path: `${out}/checkpoint.png`, fullPage: true });
    await page.getByRole("button", { name: "ship <it>" }).click();
    await page.waitForFunction(() => document.getElementById("session-status")?.textContent.startsWith("completed"), null, { timeout: 15000 });
    const done = await api("GET", `/v1/sessions/${wfId}`);
    assert(done.state.decision === "ship <it>" && done.state.finished === true, `state: ${JSON.stringify(done.state)}`);
    ok("a human checkpoint answered from the page, its expiry shown");

    // Approve / reject, then a free answer: each kind of checkpoint from its own controls.
    const wf2 = `viewer-wf2-${tag}`;
    await api("POST", "/v1/workflows", { name: wf2, phases: [
        { name: "gate", steps: [{ kind: "human", id: "ok", input: "approval", prompt: "Deploy?", timeoutMs: 3600000,
          update: { approved: "$response" } }], transitions: [{ to: "why" }] },
        { name: "why", steps: [{ kind: "human", id: "reason", input: "text", prompt: "Why not?", timeoutMs: 3600000,
          update: { reason: "$response" } }], transitions: [{ to: "done" }] },
        { name: "done", terminal: true, steps: [{ kind: "update", set: { finished: true } }] }] });
    const wf2Id = (await api("POST", "/v1/sessions", { workflow: wf2 })).id;
    await page.goto(`${base}/web/#/session/${wf2Id}`);
    await page.waitForSelector("#checkpoint:not([hidden]) #checkpoint-expiry", { timeout: 15000 });
    await page.getByRole("button", { name: "Reject" }).click();
    await page.waitForSelector("#checkpoint:not([hidden]) #checkpoint-text", { timeout: 15000 });
    await page.fill("#checkpoint-text", "<b>not yet</b>");
    await page.locator("#checkpoint").getByRole("button", { name: "Answer" }).click();
    await page.waitForFunction(() => document.getElementById("session-status")?.textContent.startsWith("completed"), null, { timeout: 15000 });
    const done2 = await api("GET", `/v1/sessions/${wf2Id}`);
    assert(done2.state.approved === false && done2.state.reason === "<b>not yet</b>" && done2.state.finished === true,
           `state: ${JSON.stringify(done2.state)}`);
    ok("an approval rejected and a text answer given from the page");

    // ---- tool calls and their results ----------------------------------------------
    // A tool no MCP server offers: the call is recorded, its result is a failure, and
    // the model is asked again with it.
    const toolId = (await api("POST", "/v1/sessions", { agent, id: `viewer-tools-${tag}` })).id;
    await script({ replies: [
        { text: "Let me look.", toolCalls: [{ id: "call-1", name: "lookup", arguments: { q: "<b>otters</b>" } }] },
        { text: "No tool, but here is the answer." }] });
    await page.goto(`${base}/web/#/session/${toolId}`);
    await page.waitForSelector(".conn-live", { timeout: 10000 });
    await api("POST", `/v1/sessions/${toolId}/messages`, { content: "use a tool" });
    await page.waitForFunction(() => document.getElementById("chat")?.textContent.includes("here is the answer"), null, { timeout: 20000 });
    const tool = await page.evaluate(() => {
        const el = document.querySelector('#chat .tool[data-call="call-1"]');
        return el && { text: el.textContent, error: el.classList.contains("tool-error") };
    });
    assert(tool && tool.text.includes("lookup") && tool.text.includes("<b>otters</b>") && /failed/.test(tool.text) && tool.error,
           `tool call: ${JSON.stringify(tool)}`);
    await page.waitForFunction(() => document.getElementById("session-status")?.textContent.startsWith("completed"), null, { timeout: 15000 });
    await page.screenshot({ path: `${out}/tools.png`, fullPage: true });
    ok("a tool call with its arguments and its (failed) result");

    // ---- cancel ------------------------------------------------------------------------
    await script({ text: "slow ".repeat(200), chunkSize: 5, delayMs: 50 });
    await page.goto(`${base}/web/#/session/${chatId}`);
    await page.waitForSelector(".conn-live", { timeout: 10000 });
    await api("POST", `/v1/sessions/${chatId}/messages`, { content: "a long one" });
    await page.waitForFunction(() => /slow slow/.test(document.getElementById("chat")?.textContent), null, { timeout: 15000 });
    await page.getByRole("button", { name: "Cancel session" }).click();
    await page.waitForFunction(() => document.getElementById("session-status")?.textContent.startsWith("cancelled"), null, { timeout: 15000 });
    ok("cancel");

    // ---- a phone-sized screen ---------------------------------------------------------
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 1, `the page is ${overflow}px wider than a phone`);
    await page.screenshot({ path: `${out}/session-phone.png`, fullPage: false });
    ok("usable on a phone-sized screen (no horizontal scroll)");
    await page.setViewportSize({ width: 1280, height: 900 });

    // ---- the operator's MCP servers (the stack's configuration has server "t") -----------
    const mcpAgent = `viewer-mcp-${tag}`;
    await api("POST", "/v1/agents", { name: mcpAgent, provider: "anthropic", model: "claude-test-model", mcpServers: ["t"] });
    const mcpId = (await api("POST", "/v1/sessions", { agent: mcpAgent, id: `viewer-mcp-${tag}` })).id;
    await script({ replies: [{ toolCalls: [{ id: "m1", name: "t__echo", arguments: { text: "hi" } }] }, { text: "Echoed." }] });
    await api("POST", `/v1/sessions/${mcpId}/messages`, { content: "echo" });
    for (let i = 0; i < 200 && (await api("GET", `/v1/sessions/${mcpId}`)).status !== "completed"; i++)
        await new Promise((r) => setTimeout(r, 100));
    // The runner publishes its figures once a second: look until the call shows.
    let calls = "0";
    for (let i = 0; i < 20 && calls === "0"; i++) {
        await page.goto(`${base}/web/#/sessions`);
        await page.goto(`${base}/web/#/mcp`);
        await page.waitForSelector('tr[data-server="t"]', { timeout: 10000 });
        calls = await page.evaluate(() => document.querySelector('tr[data-server="t"] td:nth-child(4)').textContent);
        if (calls === "0") await new Promise((r) => setTimeout(r, 500));
    }
    const row = await page.evaluate(() => document.querySelector('tr[data-server="t"]').textContent);
    assert(calls === "1", `MCP page: calls ${calls}`);
    assert(row.includes("TEST_SECRET") && !(await page.content()).includes("s3cret-env-value") && row.includes("test-server.mjs"),
           `MCP page row: ${row}`);
    await page.screenshot({ path: `${out}/mcp.png`, fullPage: true });
    ok("the MCP servers page: what each runs, its limits, its calls; no environment value");

    // ---- agents: read-only, edits refused without admin ----------------------------------
    await page.goto(`${base}/web/#/agents`);
    // the list's link (not the session page's link to the same agent, which stays until
    // the hashchange has been handled)
    await page.locator("main ul").getByRole("link", { name: agent, exact: true }).click();
    await page.waitForFunction(() => document.getElementById("doc")?.value.includes("claude-test-model"), null, { timeout: 10000 });
    assert(await page.evaluate(() => document.getElementById("doc").readOnly), "the document is editable before Edit");
    // With the admin token, an edit is saved.
    await page.getByRole("button", { name: "Edit" }).click();
    await page.fill("#doc", JSON.stringify({ ...JSON.parse(await page.inputValue("#doc")), system: "edited <here>" }));
    await page.getByRole("button", { name: "Save" }).click();
    await page.waitForFunction(() => /^(Saved|Not saved)/.test(document.querySelector("main [role=status]")?.textContent), null, { timeout: 10000 });
    const saved = await page.evaluate(() => document.querySelector("main [role=status]").textContent);
    assert(saved === "Saved.", `admin edit: ${saved}`);
    assert((await api("GET", `/v1/agents/${agent}`)).system === "edited <here>", "the edit was not saved");
    ok("an agent's document edited and saved with an admin token");
    await page.reload();
    await page.waitForFunction(() => document.getElementById("doc")?.value.includes("edited <here>"), null, { timeout: 10000 });
    if (readToken) {
        await page.getByLabel("API token").fill(readToken);
        await page.getByRole("button", { name: "Use" }).click();
        await page.waitForFunction(() => document.getElementById("doc")?.value.includes("claude-test-model"), null, { timeout: 10000 });
        await page.getByRole("button", { name: "Edit" }).click();
        await page.fill("#doc", (await page.inputValue("#doc")).replace("claude-test-model", "other-model"));
        await page.getByRole("button", { name: "Save" }).click();
        await page.waitForFunction(() => /403/.test(document.querySelector("main [role=status]")?.textContent), null, { timeout: 10000 });
        await page.screenshot({ path: `${out}/agent-403.png`, fullPage: true });
        ok("an agent's document; saving without admin shows the 403");
        await page.goto(`${base}/web/#/mcp`);
        await page.waitForFunction(() => /403|admin/.test(document.querySelector("main .forbidden")?.textContent || ""), null, { timeout: 10000 });
        ok("the MCP servers page without admin: refused");
    }
    await page.goto(`${base}/web/#/workflows/${wf}`);
    await page.waitForFunction(() => document.getElementById("doc")?.value.includes("\"ask\""), null, { timeout: 10000 });
    await page.screenshot({ path: `${out}/workflow.png`, fullPage: true });
    ok("a workflow's document");

    clean();
} catch (e) {
    failed = true;
    console.log(`viewer: FAIL ${e.stack || e}`);
} finally {
    await browser.close();
}
if (!failed) console.log(`viewer: PASS ${checks.length} checks`);
process.exitCode = failed ? 1 : 0;
