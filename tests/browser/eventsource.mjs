// eventsource.mjs URL: a browser's own EventSource on a plain Durable Stream resumes
// exactly across server-ended responses.
//
// Headless Chromium (Debian's, driven by playwright-core) opens
// new EventSource(URL/v1/stream/NAME?offset=-1&live=sse) on a JSON stream while this
// script appends 40 messages, one every 250 ms. The server ends each SSE response
// after DSTREAM_SSE_MAX_MS (about 1 s in the test), so the browser reconnects to the
// same URL several times, sending Last-Event-ID: the id of the last control event,
// which is the offset after it. The page must receive every message exactly once, in
// order, and the test waits for one more reconnection after the last message so that
// a replay would be seen. Prints "eventsource: PASS ..." or "eventsource: FAIL ...".
import { launch } from "./lib.mjs";

const base = process.argv[2];
if (!base) {
    console.error("usage: node eventsource.mjs BASE_URL");
    process.exit(2);
}
const N = 40;
const name = `es-${process.pid}-${Date.now()}`;
const url = `${base}/v1/stream/${name}`;

async function must(res, what) {
    if (!res.ok) throw new Error(`${what}: HTTP ${res.status} ${await res.text()}`);
}

function fail(msg) {
    console.log(`eventsource: FAIL ${msg}`);
    process.exitCode = 1;
}

const browser = await launch();
try {
    await must(await fetch(url, { method: "PUT", headers: { "Content-Type": "application/json" } }), "create");
    const page = await browser.newPage();
    // Same origin as the stream: the viewer's page (an API answer opened as a page is
    // a sandboxed document of no origin, docs/security.md).
    await page.goto(`${base}/web/`);
    await page.evaluate((src) => {
        window.got = [];
        window.opens = 0;
        window.es = new EventSource(src);
        window.es.addEventListener("open", () => { window.opens++; });
        window.es.addEventListener("data", (e) => { for (const m of JSON.parse(e.data)) window.got.push(m); });
    }, `${url}?offset=-1&live=sse`);
    await page.waitForFunction(() => window.opens >= 1, null, { timeout: 10000 });
    for (let i = 0; i < N; i++) {
        await must(await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" },
                                      body: JSON.stringify({ i }) }), `append ${i}`);
        await new Promise((r) => setTimeout(r, 250));
    }
    await page.waitForFunction((n) => window.got.length >= n, N, { timeout: 30000 });
    const opensAtEnd = await page.evaluate(() => window.opens);
    // One more server-ended response and reconnection: a replay would show now.
    await page.waitForFunction((k) => window.opens > k, opensAtEnd, { timeout: 15000 });
    const { got, opens } = await page.evaluate(() => ({ got: window.got, opens: window.opens }));
    const want = Array.from({ length: N }, (_, i) => i);
    const seen = got.map((m) => m.i);
    if (opens < 4) fail(`only ${opens} connections: the server did not end its responses`);
    else if (JSON.stringify(seen) !== JSON.stringify(want))
        fail(`received ${seen.length} messages over ${opens} connections: ${JSON.stringify(seen)}`);
    else console.log(`eventsource: PASS ${N} messages exactly once, in order, over ${opens} connections`);
} catch (e) {
    fail(e.stack || String(e));
} finally {
    await browser.close();
}
