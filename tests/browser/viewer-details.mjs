// viewer-details.mjs: one behaviour of the session viewer (web/) in headless Chromium
// against the real stack with authentication on, chosen by its case name:
//
//   node viewer-details.mjs CASE BASE_URL ADMIN_TOKEN MOCK_URL OUT_DIR
//
//   summary        the summary card's event count moves with every event, as the
//                  counter above it does (deltas included), while a reply streams in
//   prompt         a checkpoint's prompt keeps its line breaks (and stays text)
//
// Screenshots go to OUT_DIR. Prints "viewer-details CASE: PASS ..." or "... FAIL ...".
import { chromium } from "playwright-core";

const [which, base, admin, mock, out] = process.argv.slice(2);
if (!which || !base || !admin || !mock || !out) {
    console.error("usage: node viewer-details.mjs CASE BASE_URL ADMIN_TOKEN MOCK_URL OUT_DIR");
    process.exit(2);
}
const tag = `${process.pid}-${Date.now().toString(36)}`;
const checks = [];
const ok = (what) => { checks.push(what); console.log(`# ok ${what}`); };
function assert(cond, msg) { if (!cond) throw new Error(msg); }

async function api(method, path, body) {
    const res = await fetch(base + path, {
        method, headers: { Authorization: `Bearer ${admin}`, ...(body ? { "Content-Type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
}
async function script(reply) {
    const res = await fetch(`${mock}/__script`, { method: "POST", body: JSON.stringify(reply) });
    if (!res.ok) throw new Error(`mock: ${res.status}`);
}
async function statusIs(id, want) {
    for (let i = 0; i < 300; i++) {
        const s = await api("GET", `/v1/sessions/${id}`);
        if (want.includes(s.status)) return s;
        await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`session ${id} never reached ${want}`);
}
const agentDoc = (name) => ({ name, provider: "anthropic", model: "claude-test-model" });

// The number in the summary's "position (N events)", or null.
const summaryEvents = () => {
    const m = /\((\d+) events\)/.exec(document.querySelector("dl.kv")?.textContent || "");
    return m ? Number(m[1]) : null;
};

const cases = {
    async summary(page) {
        const agent = `details-agent-${tag}`;
        await api("POST", "/v1/agents", agentDoc(agent));
        const id = (await api("POST", "/v1/sessions", { agent, id: `details-summary-${tag}` })).id;
        // Long enough to outlast a few of the stack's SSE responses (1.5 s each): some
        // deltas come one by one, some in a burst after a reconnection.
        const words = Array.from({ length: 300 }, (_, i) => `w${i}`).join(" ");
        await script({ text: `${words} THE-END`, chunkSize: 4, delayMs: 25 });
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForSelector(".conn-live", { timeout: 10000 });
        await page.waitForFunction(`(${summaryEvents})() !== null`, null, { timeout: 10000 });
        await api("POST", `/v1/sessions/${id}/messages`, { content: "stream something" });
        // Mid-stream, the counter and the summary read at the same instant.
        await page.waitForFunction(() => /\bw30\b/.test(document.getElementById("chat")?.textContent), null, { timeout: 20000 });
        const mid = await page.evaluate(`({ counter: Number(document.getElementById("conn-counters").dataset.events),
                                            summary: (${summaryEvents})(),
                                            done: document.getElementById("chat").textContent.includes("THE-END") })`);
        assert(!mid.done, `the reply was complete before it was seen streaming ${JSON.stringify(mid)}`);
        assert(mid.summary === mid.counter, `mid-stream: the summary says ${mid.summary} events, the counter ${mid.counter}`);
        await page.screenshot({ path: `${out}/details-summary.png`, fullPage: true });
        ok(`mid-stream the summary counts what the counter counts (${mid.counter} events)`);
        const done = await statusIs(id, ["completed"]);
        await page.waitForFunction((n) => Number(document.getElementById("conn-counters")?.dataset.events) === n,
                                   done.eventCount, { timeout: 10000 });
        const end = await page.evaluate(`(${summaryEvents})()`);
        assert(end === done.eventCount, `at the end: the summary says ${end} events, the session has ${done.eventCount}`);
        ok(`at the end both say ${end}, as the API does`);
    },

    async prompt(page) {
        const wf = `details-prompt-${tag}`;
        const text = "Line one\nLine two <b>bold</b>\n\nLine four";
        await api("POST", "/v1/workflows", { name: wf, phases: [
            { name: "ask", terminal: true, steps: [{ kind: "human", id: "q", input: "text", prompt: text,
              timeoutMs: 3600000, update: { a: "$response" } }] }] });
        const id = (await api("POST", "/v1/sessions", { workflow: wf })).id;
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForSelector("#checkpoint:not([hidden]) #checkpoint-prompt", { timeout: 15000 });
        const got = await page.evaluate(() => {
            const p = document.getElementById("checkpoint-prompt");
            return { text: p.textContent, shown: p.innerText, bold: p.querySelectorAll("b").length };
        });
        assert(got.text === text && got.bold === 0, `prompt: ${JSON.stringify(got)}`);
        assert(got.shown.includes("Line one\nLine two <b>bold</b>\n\nLine four"), `the prompt as displayed: ${JSON.stringify(got.shown)}`);
        await page.screenshot({ path: `${out}/details-prompt.png`, fullPage: true });
        ok("the checkpoint's prompt is displayed with its line breaks, as text");
    },

};

const run = cases[which];
if (!run) { console.error(`viewer-details: no case ${which}`); process.exit(2); }
const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--headless=new"],
});
let failed = false;
try {
    await fetch(`${mock}/__script`, { method: "DELETE" });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    const pageErrors = [], external = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") pageErrors.push(m.text()); });
    page.on("request", (r) => { if (!r.url().startsWith(base)) external.push(r.url()); });
    await page.exposeFunction("__pwned", (what) => { throw new Error(`script ran: ${what}`); });
    await page.goto(`${base}/web/#/sessions`);
    await page.getByLabel("API token").fill(admin);
    await page.getByRole("button", { name: "Use" }).click();
    await page.waitForSelector("tr[data-session], td.muted", { timeout: 10000 });
    await run(page);
    assert(external.length === 0, `requests to other origins: ${external.join(" ")}`);
    const bad = pageErrors.filter((e) => !/Failed to load resource|401|EventSource/.test(e));
    assert(bad.length === 0, `page errors: ${bad.join(" | ")}`);
    ok("no request left the origin, no script error");
} catch (e) {
    failed = true;
    console.log(`viewer-details ${which}: FAIL ${e.stack || e}`);
} finally {
    await browser.close();
}
if (!failed) console.log(`viewer-details ${which}: PASS ${checks.length} checks`);
process.exitCode = failed ? 1 : 0;
