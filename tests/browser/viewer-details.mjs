// viewer-details.mjs: one behaviour of the session viewer (web/) in headless Chromium
// against the real stack with authentication on, chosen by its case name:
//
//   node viewer-details.mjs CASE BASE_URL ADMIN_TOKEN MOCK_URL OUT_DIR
//
//   summary        the summary card's event count moves with every event, as the
//                  counter above it does (deltas included), while a reply streams in
//   prompt         a checkpoint's prompt keeps its line breaks (and stays text)
//   agent-output   a workflow agent's output is shown once, under the agent's name
//                  (its streamed reply; also when its output is JSON)
//   toast          a toast stays on the page it belongs to: "Answer sent" is gone on
//                  the next page, also when the answer comes back after leaving; the
//                  fork's "Forked as" is shown on the fork's page
//   labels         the sessions list shows each session's labels and filters on them
//                  (the Labels box, key:value pairs; kept in the page's address); a
//                  chat started from the AI SDK (POST /v1/aisdk/chat/{agent}) is in the
//                  list, and its page shows the user's message and the reply
//   continued      a reply cut off and continued (docs/events.md, "A reply continued")
//                  is one reply: the text kept, a marker, the continuation, each word
//                  once
//   workflow-picture
//                  the Workflows page draws each workflow's phases, steps and
//                  transitions (a loop included), names and conditions as text; a
//                  workflow session's page draws it with the current phase marked,
//                  moved live as the session goes round the loop
//   compaction     a chat's context compaction is shown where it happened, the summary
//                  collapsed, and its summarization request is not shown as a reply
//   lineage        a session's lineage card draws the tree of forks from its root (a
//                  fork of a fork included), the session shown marked, each fork's
//                  event; clicking a session opens it, its card marking it in turn
//   diff           "compare" in the lineage opens two sessions side by side from where
//                  they part, each side's first difference marked, and the paths where
//                  their states differ
//   pictures       a session's timeline (a bar for each attempt of each request, the
//                  retried ones and the cut ones marked, the delays before retries
//                  hatched, a bar for each tool call; a click on a bar marks its event
//                  in the list) and its tokens and cost over time (a point after each
//                  request, at its event's sums); a workflow's checkpoint as a wait;
//                  the overview page of those sessions (by their label): by status,
//                  requests and failed attempts over time, cost per agent
//   budget         a budget's checkpoint (limits.onExceed "ask") says which limit and
//                  what was used of it; a new limit given in its field lets the reply
//                  go on, and the pane closes
//   failover       a provider failover is said in the conversation (from, to, cause)
//                  and the fallback's attempt is flagged with the pair that served it
//   timers         a workflow session in a sleep, then a wait: its timer:set,
//                  timer:fired and signal:received in the timeline and the
//                  conversation, what it waits for (the signals, the timeout), a
//                  signal sent from the page with its payload taking its branch
//
// Screenshots go to OUT_DIR. Prints "viewer-details CASE: PASS ..." or "... FAIL ...".
import { apiOf, assert, checks, launch, ok, scriptOf, watch } from "./lib.mjs";

const [which, base, admin, mock, out] = process.argv.slice(2);
if (!which || !base || !admin || !mock || !out) {
    console.error("usage: node viewer-details.mjs CASE BASE_URL ADMIN_TOKEN MOCK_URL OUT_DIR");
    process.exit(2);
}
const tag = `${process.pid}-${Date.now().toString(36)}`;
const api = apiOf(base, admin);
const script = scriptOf(mock);
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

// A chat of a new agent with one exchange (the mock echoes the message); its id.
async function chatWith(name, words) {
    const agent = `details-lin-agent-${tag}`;
    await api("POST", "/v1/agents", agentDoc(agent)).catch(() => {});
    const id = (await api("POST", "/v1/sessions", { agent, id: name })).id;
    for (const w of words) await say(id, w);
    return id;
}
// Post a message, the mock answering "echo: MESSAGE"; wait for the reply.
async function say(id, words) {
    const n = (await api("GET", `/v1/sessions/${id}`)).messages.length;
    await script({ text: `echo: ${words}` });
    await api("POST", `/v1/sessions/${id}/messages`, { content: words });
    for (let i = 0; i < 300; i++) {
        const s = await api("GET", `/v1/sessions/${id}`);
        if (s.status === "completed" && s.messages.length === n + 2) return s;
        await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`no reply to ${words} in ${id}`);
}
// The lineage card's tree as the page shows it: [{id, current, at, kids: [...]}].
const shownTree = () => {
    const walk = (li) => ({
        id: li.dataset.session || null,
        current: !!li.querySelector(":scope > .lin-node [aria-current]"),
        at: li.querySelector(":scope > .lin-node .lin-at")?.textContent.trim() || null,
        kids: [...li.querySelectorAll(":scope > ul > li")].map(walk),
    });
    const root = document.querySelector("#lineage-tree > ul.lineage > li");
    return root ? walk(root) : null;
};

// Every event of a session, read with the API (pages of the events route).
async function eventsOf(id) {
    const all = [];
    let offset = "-1";
    for (let i = 0; i < 50; i++) {
        const res = await fetch(`${base}/v1/sessions/${id}/events?offset=${offset}`, { headers: { Authorization: `Bearer ${admin}` } });
        if (!res.ok) throw new Error(`events of ${id}: HTTP ${res.status}`);
        const page = await res.json();
        all.push(...page);
        offset = res.headers.get("stream-next-offset") || offset;
        if (res.headers.get("stream-up-to-date") === "true" || !page.length) return all;
    }
    throw new Error(`events of ${id}: more than 50 pages`);
}

const cases = {
    async pictures(page) {
        // A chat whose first request fails once (HTTP 500, retried), asks for a tool (an
        // MCP server's), then answers; a second message whose reply is cut after two
        // deltas and continued.
        const agent = `details-pic-${tag}`;
        await api("POST", "/v1/agents", { ...agentDoc(agent), mcpServers: ["t"] });
        const id = (await api("POST", "/v1/sessions", { agent, id: `details-pic-${tag}`, labels: { run: tag } })).id;
        await script({ replies: [{ status: 500 },
            { text: "Let me echo.", toolCalls: [{ id: `pc-${tag}`, name: "t__echo", arguments: { text: "hi" } }], usage: { input: 120, output: 20 } },
            { text: "Echoed.", usage: { input: 180, output: 9 } }] });
        await api("POST", `/v1/sessions/${id}/messages`, { content: "echo hi" });
        await statusIs(id, ["completed"]);
        await script({ replies: [{ text: "Part one, part two and part three.", chunkSize: 5, cutAfter: 2 },
            { text: "Part one, part two and part three.", chunkSize: 5, usage: { input: 260, output: 31 } }] });
        const n = (await api("GET", `/v1/sessions/${id}`)).messages.length;
        await api("POST", `/v1/sessions/${id}/messages`, { content: "go on" });
        for (let i = 0; i < 300 && (await api("GET", `/v1/sessions/${id}`)).messages.length < n + 2; i++)
            await new Promise((r) => setTimeout(r, 100));
        const s = await statusIs(id, ["completed"]);
        const evs = await eventsOf(id);
        const of = (type) => evs.filter((e) => e.type === type);
        const starts = of("provider:request_started"), retried = of("provider:request_retried");
        assert(starts.length === 5 && retried.length === 2 && of("tool:called").length === 1 &&
               starts.filter((e) => e.payload.continuedFrom).length === 1,
               `the session's events: ${evs.map((e) => e.type).filter((t) => !/delta/.test(t)).join(" ")}`);

        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForFunction((k) => document.querySelectorAll("#tl-chart .tl-bar").length === k &&
            document.querySelectorAll("#usage-chart .usage-point").length === 3, 5 + 2 + 1, { timeout: 15000 })
            .catch(async (e) => {
                const n = await page.evaluate(() => [document.querySelectorAll("#tl-chart .tl-bar").length,
                    document.querySelectorAll("#usage-chart .usage-point").length, document.getElementById("tl-summary")?.textContent,
                    location.hash, document.querySelector("main").textContent.slice(0, 300)]);
                throw new Error(`the pictures: ${JSON.stringify(n)}: ${e.message}`);
            });
        const got = await page.evaluate(() => ({
            bars: [...document.querySelectorAll("#tl-chart .tl-bar")].map((b) => ({
                kind: b.dataset.kind, offset: b.dataset.offset, request: b.dataset.request || null, attempt: b.dataset.attempt || null,
                row: b.dataset.row, cls: b.getAttribute("class"), title: b.querySelector("title").textContent,
                w: b.getBoundingClientRect().width })),
            cuts: [...document.querySelectorAll("#tl-chart .tl-mark-cut")].map((m) => m.dataset.offset),
            continued: [...document.querySelectorAll("#tl-chart .tl-mark-continued")].map((m) => m.dataset.offset),
            rows: [...document.querySelectorAll("#tl-chart .tl-row")].map((r) => r.querySelector(".tl-label").firstChild.textContent),
            summary: document.getElementById("tl-summary").textContent,
            points: [...document.querySelectorAll("#usage-chart .usage-point")].map((p) => ({
                offset: p.dataset.offset, in: Number(p.dataset.in), out: Number(p.dataset.out), usd: Number(p.dataset.usd),
                title: p.querySelector("title").textContent })),
        }));
        // One bar for each attempt (its provider:request_started), each retry's delay
        // (its provider:request_retried) and the tool call (tool:called).
        const want = [...starts.map((e) => `attempt ${e.offset} ${e.payload.requestId} ${e.payload.attempt}`),
                      ...retried.map((e) => `retry ${e.offset}`), ...of("tool:called").map((e) => `tool ${e.offset}`)].sort();
        const have = got.bars.map((b) => (b.kind === "attempt" ? `attempt ${b.offset} ${b.request} ${b.attempt}` : `${b.kind} ${b.offset}`)).sort();
        assert(JSON.stringify(have) === JSON.stringify(want), `the bars: ${JSON.stringify(have)}, the events: ${JSON.stringify(want)}`);
        assert(got.bars.every((b) => b.w >= 2), `a bar not drawn: ${JSON.stringify(got.bars)}`);
        // A retried attempt is on its request's row and looks apart; the cut ones are marked.
        const barOf = (e) => got.bars.find((b) => b.offset === e.offset && b.kind === "attempt");
        for (const r of retried) {
            const over = got.bars.find((b) => b.kind === "attempt" && b.request === r.payload.requestId);
            const next = evs.find((e) => e.type === "provider:request_started" && e.offset > r.offset);
            const b = next && barOf(next);
            assert(over && /tl-cut/.test(over.cls) && next.payload.attempt === r.payload.attempt && b && /tl-retried/.test(b.cls) &&
                   b.row === over.row, `the retried attempt after ${r.payload.requestId}: ${JSON.stringify(over)} then ${JSON.stringify(b)}`);
        }
        assert(JSON.stringify(got.cuts.sort()) === JSON.stringify(retried.map((e) => e.offset).sort()),
               `the cuts marked: ${JSON.stringify(got.cuts)}`);
        const cont = starts.find((e) => e.payload.continuedFrom);
        assert(got.continued.length === 1 && got.continued[0] === cont.offset && /tl-continued/.test(barOf(cont).cls) &&
               barOf(cont).title.includes(`continues ${cont.payload.continuedFrom.requestId}`), `the continuation: ${JSON.stringify(got.continued)}`);
        const causes = retried.map((e) => e.payload.cause).sort().join();
        assert(got.bars.filter((b) => b.kind === "retry").every((b) => /waiting .* before attempt 2/.test(b.title)), "the retry delays' titles");
        assert(got.rows.length === 4 && got.rows.filter((r) => r === "tool t__echo").length === 1, `the rows: ${JSON.stringify(got.rows)}`);
        assert(/^3 requests \(5 attempts, 2 retried, 2 cut\), 1 tool call, 0 waits/.test(got.summary), `the summary: ${got.summary}`);
        await page.locator("#tl-card").screenshot({ path: `${out}/timeline.png` });
        ok(`the timeline: 3 requests, 5 attempts (2 retried: ${causes}; the cut ones marked, one continued), 2 delays, 1 tool call`);

        // A click on the retried attempt's bar marks its event in the list, in view.
        const second = starts.find((e) => e.payload.attempt === 2);
        await page.locator(`#tl-chart .tl-bar[data-offset="${second.offset}"]`).click();
        await page.waitForSelector(`#timeline li.picked[data-offset="${second.offset}"]`, { timeout: 5000 });
        const picked = await page.evaluate((o) => {
            const li = document.querySelector(`#timeline li[data-offset="${o}"]`);
            const box = li.getBoundingClientRect(), list = document.getElementById("timeline").getBoundingClientRect();
            return { n: document.querySelectorAll("#timeline li.picked").length, type: li.querySelector(".type").textContent,
                     inList: box.top >= list.top - 1 && box.bottom <= list.bottom + 1, inView: box.top >= 0 && box.bottom <= innerHeight,
                     selected: document.querySelectorAll("#tl-chart .tl-selected").length };
        }, second.offset);
        assert(picked.n === 1 && picked.type === "provider:request_started" && picked.inList && picked.inView && picked.selected === 1,
               `the event picked: ${JSON.stringify(picked)}`);
        // And by keyboard: the tool call's bar, Enter.
        const call = of("tool:called")[0];
        await page.locator(`#tl-chart .tl-bar[data-offset="${call.offset}"]`).focus();
        await page.keyboard.press("Enter");
        await page.waitForSelector(`#timeline li.picked[data-offset="${call.offset}"]`, { timeout: 5000 });
        await page.screenshot({ path: `${out}/timeline-picked.png` });
        ok("a click on a bar (or Enter on it) marks its event in the list and scrolls it into view");

        // Tokens and cost: a point after each request that ended, at the sums of the events' usage.
        let sin = 0, sout = 0, susd = 0;
        const wantPts = of("provider:request_ended").map((e) => {
            sin += e.payload.usage.inputTokens; sout += e.payload.usage.outputTokens; susd += e.payload.costUsd;
            return { offset: e.offset, in: sin, out: sout, usd: susd };
        });
        const pts = got.points.map(({ offset, in: i, out: o, usd: u }) => ({ offset, in: i, out: o, usd: u }));
        assert(wantPts.length === 3 && pts.length === 3 && pts.every((p, i) => p.offset === wantPts[i].offset && p.in === wantPts[i].in &&
               p.out === wantPts[i].out && Math.abs(p.usd - wantPts[i].usd) < 1e-12), `the points: ${JSON.stringify(pts)}, the events: ${JSON.stringify(wantPts)}`);
        assert(sin === 120 + 180 + 260 && sout === 20 + 9 + 31 && Math.abs(susd - s.costUsd) < 1e-9 &&
               s.usage.inputTokens === sin, `the sums against the session's: ${sin} ${sout} ${susd} ${JSON.stringify(s.usage)} ${s.costUsd}`);
        assert(got.points[2].title.includes(`${sin} input tokens, ${sout} output tokens`), `a point's title: ${got.points[2].title}`);
        // The points go up left to right (the step lines are drawn through them).
        const xs = await page.evaluate(() => [...document.querySelectorAll("#usage-chart .usage-point circle.usage-in")].map((c) => [Number(c.getAttribute("cx")), Number(c.getAttribute("cy"))]));
        assert(xs.every((p, i) => i === 0 || (p[0] >= xs[i - 1][0] && p[1] < xs[i - 1][1])), `the input points' places: ${JSON.stringify(xs)}`);
        await page.locator("#usage-card").screenshot({ path: `${out}/usage.png` });
        ok(`tokens and cost: 3 points at ${sin} in, ${sout} out, $${susd.toFixed(6)} (the events' sums, the session's usage)`);

        // A workflow session waiting for a person: its timeline has the wait, hatched.
        const wf = `details-pic-wf-${tag}`;
        await api("POST", "/v1/workflows", { name: wf, phases: [
            { name: "ask", steps: [{ kind: "human", id: "ok", input: "approval", prompt: "Go?", timeoutMs: 3600000 }], transitions: [{ to: "done" }] },
            { name: "done", terminal: true, steps: [] }] });
        const waiting = (await api("POST", "/v1/sessions", { workflow: wf, labels: { run: tag } })).id;
        await statusIs(waiting, ["awaiting_input"]);
        await page.goto(`${base}/web/#/session/${waiting}`);
        await page.waitForSelector("#tl-chart .tl-bar.tl-wait", { timeout: 15000 });
        const wait = await page.evaluate(() => [...document.querySelectorAll("#tl-chart .tl-bar")].map((b) =>
            ({ kind: b.dataset.kind, open: b.classList.contains("tl-open"), title: b.querySelector("title").textContent,
               fill: getComputedStyle(b.querySelector("rect")).fill })));
        const asked = (await eventsOf(waiting)).find((e) => e.type === "input:requested");
        assert(wait.length === 1 && wait[0].kind === "wait" && wait[0].open && wait[0].title.includes("waiting for a person: ok") &&
               /url\(.*tl-hatch/.test(wait[0].fill) && asked, `the checkpoint's wait: ${JSON.stringify(wait)}`);
        await page.locator("#tl-chart .tl-bar.tl-wait").click();
        await page.waitForSelector(`#timeline li.picked[data-offset="${asked.offset}"]`, { timeout: 5000 });
        ok("a workflow's checkpoint is a hatched wait bar, under way; a click marks its input:requested");

        // A chat whose reply fails for good (HTTP 400 is not retried): failed.
        const failing = (await api("POST", "/v1/sessions", { agent, labels: { run: tag } })).id;
        await script({ status: 400 });
        await api("POST", `/v1/sessions/${failing}/messages`, { content: "fail" });
        await statusIs(failing, ["failed"]);

        // The overview of the sessions with this run's label: by status, requests and
        // failed attempts (from their events), what each agent or workflow spent.
        const mine = [id, waiting, failing];
        let nReq = 0, nFail = 0, spentAgent = 0;
        for (const sid of mine) {
            for (const e of await eventsOf(sid)) {
                if (e.type === "provider:request_started") nReq++;
                if (/^provider:request_(retried|cancelled)$/.test(e.type) && e.payload.reason === "failed") nFail++;
            }
            const row = await api("GET", `/v1/sessions/${sid}`);
            if (row.agent) spentAgent += row.cost.spentUsd;
        }
        assert(nReq === 6 && nFail >= 2, `the run's requests: ${nReq}, failed ${nFail}`);
        await page.locator("nav").getByRole("link", { name: "Overview" }).click();
        await page.waitForSelector("#ov-since", { timeout: 10000 });
        await page.fill("#ov-label", `run:${tag}`);
        await page.press("#ov-label", "Enter");
        // The page of that filter (not the one before it, still in place until the hash
        // change is handled), done.
        await page.waitForFunction((t) => document.getElementById("ov-state")?.dataset.label === `run:${t}` &&
            document.getElementById("ov-state").dataset.done === "true", tag, { timeout: 20000 });
        const ov = await page.evaluate(() => ({
            sessions: Number(document.getElementById("ov-state").dataset.sessions),
            status: Object.fromEntries([...document.querySelectorAll("#ov-status .ov-bar")].map((b) => [b.dataset.key, Number(b.dataset.value)])),
            cost: Object.fromEntries([...document.querySelectorAll("#ov-cost .ov-bar")].map((b) => [b.dataset.key, Number(b.dataset.value)])),
            requests: Number(document.getElementById("ov-requests").dataset.requests),
            failures: Number(document.getElementById("ov-requests").dataset.failures),
            buckets: [...document.querySelectorAll("#ov-requests .ov-bucket")].map((b) => [Number(b.dataset.requests), Number(b.dataset.failures)]),
            current: document.querySelector('nav a[aria-current="page"]')?.textContent,
        }));
        assert(ov.sessions === 3 && JSON.stringify(ov.status) ===
               JSON.stringify({ pending: 0, running: 0, awaiting_input: 1, completed: 1, failed: 1, cancelled: 0 }),
               `the sessions by status: ${JSON.stringify(ov)}`);
        assert(ov.requests === nReq && ov.failures === nFail && ov.buckets.length === 24 &&
               ov.buckets.reduce((n, b) => n + b[0], 0) === nReq && ov.buckets.reduce((n, b) => n + b[1], 0) === nFail,
               `the requests (${nReq}, ${nFail} failed): ${JSON.stringify(ov)}`);
        assert(Object.keys(ov.cost).sort().join() === [`agent ${agent}`, `workflow ${wf}`].sort().join() &&
               Math.abs(ov.cost[`agent ${agent}`] - spentAgent) < 1e-12 && ov.cost[`workflow ${wf}`] === 0 && spentAgent > 0,
               `the cost per agent (${spentAgent}): ${JSON.stringify(ov.cost)}`);
        assert(ov.current === "Overview", `the nav: ${ov.current}`);
        await page.screenshot({ path: `${out}/overview.png`, fullPage: true });
        ok(`the overview of 3 sessions: by status, ${nReq} requests and ${nFail} failed in the buckets, $${spentAgent.toFixed(6)} by the agent`);
    },

    async compaction(page) {
        const agent = `details-compact-${tag}`;
        await api("POST", "/v1/agents", { ...agentDoc(agent), limits: { contextTokens: 200 } });
        const id = (await api("POST", "/v1/sessions", { agent, id: `details-compact-${tag}` })).id;
        const say = async (content, reply) => {
            await script(reply);
            const before = (await api("GET", `/v1/sessions/${id}`)).messages.length;
            await api("POST", `/v1/sessions/${id}/messages`, { content });
            for (let i = 0; i < 300; i++) {
                const s = await api("GET", `/v1/sessions/${id}`);
                if (s.status === "completed" && s.messages.length > before + 1) return s;
                await new Promise((r) => setTimeout(r, 100));
            }
            throw new Error("no reply");
        };
        await say("A".repeat(300), { text: "first reply" });
        await say("B".repeat(300), { text: "second reply" });
        const s = await say("C".repeat(300), { replies: [{ text: "SUMMARY-SHOWN <b>x</b>" }, { text: "third reply" }] });
        assert(s.compacted && s.compacted.summary === "SUMMARY-SHOWN <b>x</b>", `not compacted: ${JSON.stringify(s.compacted)}`);
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForFunction(() => /third reply/.test(document.getElementById("chat")?.textContent), null, { timeout: 15000 });
        const got = await page.evaluate(() => {
            const chat = document.getElementById("chat");
            const box = chat.querySelector(".msg-compacted");
            const details = box?.querySelector("details");
            const msgs = [...chat.querySelectorAll(".msg")];
            return {
                box: !!box, open: details ? details.open : null, summary: details?.querySelector(".text")?.textContent,
                bold: box ? box.querySelectorAll("b").length : -1, text: box?.textContent || "",
                // Where it is: after the second reply, before the third.
                at: msgs.indexOf(box), second: msgs.findIndex((m) => m.textContent.includes("second reply")),
                third: msgs.findIndex((m) => m.textContent.includes("third reply")),
                replies: msgs.filter((m) => m.classList.contains("msg-assistant")).length,
            };
        });
        assert(got.box && got.open === false && got.summary === "SUMMARY-SHOWN <b>x</b>" && got.bold === 0,
               `the compaction: ${JSON.stringify(got)}`);
        assert(/over the context budget/.test(got.text) && /tokens \(estimated\)/.test(got.text), `its words: ${got.text}`);
        assert(got.second < got.at && got.at < got.third, `its place: ${JSON.stringify(got)}`);
        assert(got.replies === 3, `the summarization request shown as a reply: ${got.replies} replies`);
        await page.click(".msg-compacted details summary");
        await page.screenshot({ path: `${out}/details-compaction.png`, fullPage: true });
        ok("the compaction is shown between the replies, its summary collapsed (as text), and no fourth reply");
    },

    async lineage(page) {
        const r = await chatWith(`lin-r-${tag}`, ["one"]);
        const f1 = (await api("POST", `/v1/sessions/${r}/fork`, { id: `lin-f1-${tag}` })).id;
        const f2 = (await api("POST", `/v1/sessions/${r}/fork`, { id: `lin-f2-${tag}` })).id;
        const f1a = (await api("POST", `/v1/sessions/${f1}/fork`, { id: `lin-f1a-${tag}` })).id;
        const rAt = (await api("GET", `/v1/sessions/${f1}`)).forkOffset;
        await page.goto(`${base}/web/#/session/${f1a}`);
        await page.waitForSelector(`#lineage-tree li[data-session="${f1a}"]`, { timeout: 10000 });
        let t = await page.evaluate(`(${shownTree})()`);
        const ev = Number(rAt.slice(0, 16));
        assert(t.id === r && !t.current && t.at === null && t.kids.map((k) => k.id).join() === `${f1},${f2}`,
               `the root and its forks: ${JSON.stringify(t)}`);
        assert(t.kids[0].at === `forked at event ${ev}` && t.kids[1].at === `forked at event ${ev}`,
               `the forks' positions: ${JSON.stringify(t.kids)}`);
        const leaf = t.kids[0].kids[0];
        assert(t.kids[0].kids.length === 1 && leaf.id === f1a && leaf.current && !t.kids[0].current,
               `the fork of the fork, marked as the session shown: ${JSON.stringify(t.kids[0])}`);
        assert(await page.locator("#lineage-tree").getByRole("link", { name: f1a, exact: true }).count() === 0,
               "the session shown is no link");
        await page.locator("#lineage").screenshot({ path: `${out}/lineage.png` });
        ok(`the lineage of ${f1a}: ${r} with ${f1} (with ${f1a}, marked) and ${f2}, forked at event ${ev}`);

        // Click through: the root, then a fork; each page's card marks its session.
        await page.locator("#lineage-tree").getByRole("link", { name: r, exact: true }).click();
        await page.waitForFunction((id) => document.getElementById("session-id")?.textContent === id, r, { timeout: 10000 });
        await page.waitForSelector(`#lineage-tree li[data-session="${r}"] > .lin-node [aria-current]`, { timeout: 10000 });
        t = await page.evaluate(`(${shownTree})()`);
        assert(t.current && t.kids[0].kids[0].id === f1a && !t.kids[0].kids[0].current, `after the click: ${JSON.stringify(t)}`);
        await page.locator("#lineage-tree").getByRole("link", { name: f2, exact: true }).click();
        await page.waitForFunction((id) => document.getElementById("session-id")?.textContent === id, f2, { timeout: 10000 });
        await page.waitForSelector(`#lineage-tree li[data-session="${f2}"] > .lin-node [aria-current]`, { timeout: 10000 });
        assert(page.url().endsWith(`#/session/${f2}`), `the URL: ${page.url()}`);
        await page.screenshot({ path: `${out}/lineage-clicked.png`, fullPage: true });
        ok(`clicking ${r}, then ${f2} in the tree opens each, marked in its own tree`);
    },

    async diff(page) {
        const r = await chatWith(`dif-r-${tag}`, ["one"]);
        const f1 = (await api("POST", `/v1/sessions/${r}/fork`, { id: `dif-f1-${tag}` })).id;
        await say(r, "two");
        await say(f1, "three");
        await page.goto(`${base}/web/#/session/${f1}`);
        await page.locator("#lineage-tree").getByRole("link", { name: "compare" }).first().click();
        await page.waitForSelector(".diff-side[data-side=b] .diff-first", { timeout: 10000 });
        assert(page.url().endsWith(`#/diff/${f1}/${r}`), `the URL: ${page.url()}`);
        const d = await page.evaluate(() => {
            const side = (n) => {
                const el = document.querySelector(`.diff-side[data-side=${n}]`);
                const first = el.querySelectorAll(".diff-first");
                return { title: el.querySelector("h2").textContent, marked: first.length,
                         mark: first[0]?.querySelector(".diff-mark")?.textContent,
                         type: first[0]?.querySelector(".type")?.textContent,
                         payload: first[0]?.querySelector(".payload")?.textContent,
                         isFirst: el.querySelector(".diff-events li") === first[0] };
            };
            const rows = [...document.querySelectorAll("#diff-state tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent));
            // Nothing stray: no text "null" where an optional part was left out.
            const stray = [...document.querySelectorAll("main, main *")].some((el) =>
                [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() === "null"));
            return { a: side("a"), b: side("b"), rows, stray, state: document.querySelector("main [role=status]").textContent };
        });
        for (const [n, id, word] of [["a", f1, "three"], ["b", r, "two"]]) {
            const s = d[n];
            assert(s.title === `${n}: ${id}` && s.marked === 1 && s.isFirst && s.mark === "first difference" &&
                   s.type === "message:user" && s.payload.includes(`"content":"${word}"`), `side ${n}: ${JSON.stringify(s)}`);
        }
        assert(/^\d+ events stored once for both \(up to \d{16}_\d{16}\); then 0 more agree\.$/.test(d.state), `the summary: ${d.state}`);
        assert(!d.stray, "a stray null on the page");
        const row = d.rows.find((x) => x[0] === "messages[2].content");
        assert(row && row[1] === "three" && row[2] === "two", `the state's rows: ${JSON.stringify(d.rows)}`);
        const reply = d.rows.find((x) => x[0] === "messages[3].content");
        assert(reply && reply[1] === "echo: three" && reply[2] === "echo: two", `the replies: ${JSON.stringify(d.rows)}`);
        await page.screenshot({ path: `${out}/diff.png`, fullPage: true });
        ok(`${f1} and ${r} side by side: "three" and "two" marked as the first difference, messages[2].content listed`);

        // The same session against itself: nothing differs, said so. The server is busy
        // for the page's first two reads of it (503 with Retry-After, as the pool answers
        // when all its workers are taken): the page asks again and shows the answer.
        let busy = 0;
        const diffUrl = (u) => u.pathname === `/v1/sessions/${r}/diff`;
        await page.route(diffUrl, (route) => {
            if (busy++ < 2) return route.fulfill({ status: 503, headers: { "Retry-After": "1", "Content-Type": "application/json" },
                                                    body: JSON.stringify({ error: { code: "busy", message: "busy" } }) });
            return route.continue();
        });
        await page.goto(`${base}/web/#/diff/${r}/${r}`);
        await page.waitForSelector(".diff-same", { timeout: 15000 });
        await page.unroute(diffUrl);
        assert(busy === 3, `the page read the diff ${busy} times, not 3`);
        assert(await page.locator(".diff-first").count() === 0, "a first difference marked where there is none");
        assert((await page.locator("#diff-state tbody").textContent()) === "The states are the same.", "the state rows");
        ok("a session against itself, the server busy for the first two reads: the events agree to the end, the states are the same");
    },

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

    async continued(page) {
        const agent = `details-cont-${tag}`;
        await api("POST", "/v1/agents", agentDoc(agent));
        // Cut after "abcd efgh ijkl " (the mock drops the connection); the retry
        // continues from "abcd efgh ijkl" and the mock goes on from there.
        const text = "abcd efgh ijkl mnop qrst uvwx yz.";
        await script({ replies: [{ text, chunkSize: 5, cutAfter: 3, delayMs: 10 }, { text, chunkSize: 5 }] });
        const id = (await api("POST", "/v1/sessions", { agent, id: `details-cont-${tag}` })).id;
        await api("POST", `/v1/sessions/${id}/messages`, { content: "Letters?" });
        await statusIs(id, ["completed"]);
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForFunction(() => /yz\./.test(document.getElementById("chat")?.textContent), null, { timeout: 15000 });
        const got = await page.evaluate(() => {
            const boxes = [...document.querySelectorAll("#chat .msg-assistant")];
            const b = boxes[0];
            return { boxes: boxes.length, text: b?.querySelector(".text:not(details .text)")?.textContent,
                     markers: b ? b.querySelectorAll(".continued").length : 0, flags: b?.querySelector(".flags")?.textContent };
        });
        assert(got.boxes === 1 && got.text === text && got.markers === 1 && /continued/.test(got.flags),
               `one reply, continued once: ${JSON.stringify(got)}`);
        await page.screenshot({ path: `${out}/details-continued.png`, fullPage: true });
        ok("a continued reply is one reply with a marker where it was continued, each word once");
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

    async "agent-output"(page) {
        const writer = `details-writer-${tag}`, editor = `details-editor-${tag}`, wf = `details-agents-${tag}`;
        await api("POST", "/v1/agents", agentDoc(writer));
        await api("POST", "/v1/agents", agentDoc(editor));
        await api("POST", "/v1/workflows", { name: wf, phases: [
            { name: "draft", steps: [
                { kind: "agent", name: "Write", agent: writer, prompt: "Write", update: { draft: "$output" } },
                { kind: "agent", name: "Review", agent: editor, prompt: "Review {{state.draft}}",
                  outputSchema: { type: "object", properties: { score: { type: "integer" }, notes: { type: "string" } },
                                  required: ["score", "notes"] },
                  update: { review: "$output" } }],
              transitions: [{ to: "done" }] },
            { name: "done", terminal: true, steps: [] }] });
        await script({ replies: [
            { text: "The draft <b>once</b> DRAFT-MARK", chunkSize: 5, delayMs: 10 },
            { text: '{"score": 8, "notes": "NOTES-MARK"}', chunkSize: 5, delayMs: 10 }] });
        const id = (await api("POST", "/v1/sessions", { workflow: wf })).id;
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForFunction(() => document.getElementById("session-status")?.textContent.startsWith("completed"), null, { timeout: 20000 });
        await page.waitForFunction(() => /workflow:completed/.test(document.getElementById("chat")?.textContent), null, { timeout: 10000 });
        const got = await page.evaluate(() => {
            const chat = document.getElementById("chat");
            const count = (s) => chat.textContent.split(s).length - 1;
            const who = (s) => [...chat.querySelectorAll(".msg")].filter((m) => m.textContent.includes(s))
                .map((m) => m.querySelector(".who").textContent);
            return { draft: count("DRAFT-MARK"), notes: count("NOTES-MARK"), draftWho: who("DRAFT-MARK"),
                     notesWho: who("NOTES-MARK"), bold: chat.querySelectorAll("b").length };
        });
        assert(got.draft === 1 && got.notes === 1, `each output once: ${JSON.stringify(got)}`);
        assert(got.draftWho.length === 1 && got.draftWho[0].toLowerCase().includes(`agent ${writer}`) &&
               got.notesWho.length === 1 && got.notesWho[0].toLowerCase().includes(`agent ${editor}`),
               `under the agent's name: ${JSON.stringify(got)}`);
        assert(got.bold === 0, "markup in an agent's output made an element");
        await page.screenshot({ path: `${out}/details-agent-output.png`, fullPage: true });
        ok("each workflow agent's output is shown once, under its agent's name (text and JSON)");
    },

    async toast(page) {
        const wf = `details-toast-${tag}`;
        await api("POST", "/v1/workflows", { name: wf, phases: [
            { name: "gate", steps: [{ kind: "human", id: "ok", input: "approval", prompt: "Go?", timeoutMs: 3600000,
              update: { ok: "$response" } }], transitions: [{ to: "again" }] },
            { name: "again", steps: [{ kind: "human", id: "ok2", input: "approval", prompt: "Sure?", timeoutMs: 3600000,
              update: { ok2: "$response" } }], transitions: [{ to: "done" }] },
            { name: "done", terminal: true, steps: [] }] });
        const id = (await api("POST", "/v1/sessions", { workflow: wf })).id;
        const toastText = () => page.evaluate(() => document.getElementById("toast").textContent);
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForSelector("#checkpoint:not([hidden]) #checkpoint-prompt", { timeout: 15000 });
        await page.getByRole("button", { name: "Approve" }).click();
        await page.waitForFunction(() => document.getElementById("toast").textContent === "Answer sent", null, { timeout: 10000 });
        await page.locator("nav").getByRole("link", { name: "Sessions" }).click();
        await page.waitForSelector("#status-filter", { timeout: 10000 });
        assert(await toastText() === "", `the next page shows the toast "${await toastText()}"`);
        ok("the answer's toast is gone on the next page");
        // The answer's reply comes back after the page was left: no toast either.
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForFunction(() => document.getElementById("checkpoint-prompt")?.textContent === "Sure?", null, { timeout: 15000 });
        let release;
        const held = new Promise((r) => { release = r; });
        await page.route("**/input", async (route) => { await held; await route.continue(); });
        const answered = page.waitForResponse((r) => r.url().endsWith("/input"), { timeout: 15000 });
        await page.getByRole("button", { name: "Approve" }).click();
        await page.locator("nav").getByRole("link", { name: "Workflows" }).click();
        await page.waitForSelector("main h1", { timeout: 10000 });
        const finished = page.waitForEvent("requestfinished", { predicate: (r) => r.url().endsWith("/input"), timeout: 15000 });
        release();
        assert((await answered).ok(), "the answer was not accepted");
        await finished;
        // Nothing may appear once the answer is in: looked at for half a second.
        for (let i = 0; i < 10; i++) {
            assert(await toastText() === "", `an answer sent from the page left shows "${await toastText()}" on the next one`);
            await new Promise((r) => setTimeout(r, 50));
        }
        await page.unroute("**/input");
        ok("an answer that comes back after the page was left shows no toast");
        // A toast meant for the next page is shown there: the fork's.
        await statusIs(id, ["completed"]);
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForFunction(() => !document.getElementById("fork").disabled, null, { timeout: 15000 });
        await page.getByRole("button", { name: "Fork here" }).click();
        await page.waitForFunction((i) => location.hash.startsWith("#/session/") && !location.hash.endsWith(i), id, { timeout: 10000 });
        await page.waitForSelector("#session-id", { timeout: 10000 });
        const forkToast = await toastText();
        assert(/^Forked as /.test(forkToast), `the fork's page shows "${forkToast}"`);
        ok("the fork's toast is shown on the fork's page");
    },

    async labels(page) {
        const agent = `details-labels-${tag}`;
        await api("POST", "/v1/agents", agentDoc(agent));
        const red = (await api("POST", "/v1/sessions", { agent, labels: { run: tag, team: "red" } })).id;
        const blue = (await api("POST", "/v1/sessions", { agent, labels: { run: tag, team: "blue" } })).id;
        const rows = () => page.evaluate(() => [...document.querySelectorAll("tr[data-session]")].map((r) => ({
            id: r.dataset.session, labels: [...r.querySelectorAll(".label")].map((l) => l.textContent) })));
        await page.goto(`${base}/web/#/sessions?label=run:${tag}`);
        await page.waitForFunction((n) => document.querySelectorAll("tr[data-session]").length === n, 2, { timeout: 10000 });
        let got = await rows();
        assert(got.map((r) => r.id).sort().join() === [red, blue].sort().join(), `the run's sessions: ${JSON.stringify(got)}`);
        const redRow = got.find((r) => r.id === red);
        assert(redRow.labels.includes("team:red") && redRow.labels.includes(`run:${tag}`), `its labels: ${JSON.stringify(redRow)}`);
        ok("the list filtered by a label shows the sessions with it, each with its labels");
        await page.fill("#label-filter", `run:${tag},team:red`);
        await page.press("#label-filter", "Enter");
        await page.waitForFunction(() => document.querySelectorAll("tr[data-session]").length === 1, null, { timeout: 10000 });
        got = await rows();
        assert(got[0].id === red, `filtered on two labels: ${JSON.stringify(got)}`);
        assert(decodeURIComponent(await page.evaluate(() => location.hash)).includes(`label=run:${tag},team:red`),
               "the filter is not in the page's address");
        await page.screenshot({ path: `${out}/details-labels.png`, fullPage: true });
        ok("typing key:value pairs in the Labels box filters the list on all of them");

        // A chat started from the AI SDK's transport (POST /v1/aisdk/chat/{agent}, its
        // body as DefaultChatTransport sends it) is in the list and its page as any other.
        const chat = `details-aisdk-${tag}`;
        await script({ text: "echo: from the SDK" });
        const res = await fetch(`${base}/v1/aisdk/chat/${agent}`, {
            method: "POST", headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
            body: JSON.stringify({ id: chat, trigger: "submit-message", messageId: null,
                                   messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "from the SDK" }] }] }) });
        const stream = await res.text();     /* the reply's UI message stream, to its [DONE] */
        assert(res.ok && stream.includes("data: [DONE]"), `the AI SDK's POST: HTTP ${res.status} ${stream.slice(0, 300)}`);
        await page.goto(`${base}/web/#/sessions`);
        await page.waitForFunction((id) => !!document.querySelector(`tr[data-session="${id}"]`), chat, { timeout: 10000 });
        ok("a chat started from the AI SDK is in the sessions list");
        await page.click(`tr[data-session="${chat}"] a`);
        await page.waitForFunction(() => /echo: from the SDK/.test(document.querySelector("#chat .msg-assistant")?.textContent || ""),
                                   null, { timeout: 15000 });
        const shown = await page.evaluate(() => ({ hash: location.hash,
            user: [...document.querySelectorAll("#chat .msg-user")].map((m) => m.textContent),
            assistant: [...document.querySelectorAll("#chat .msg-assistant")].length }));
        assert(shown.hash === `#/session/${chat}` && shown.user.length === 1 && shown.user[0].includes("from the SDK") &&
               shown.assistant === 1, `the AI SDK chat's page: ${JSON.stringify(shown)}`);
        await page.screenshot({ path: `${out}/details-aisdk.png`, fullPage: true });
        ok("its page shows the user's message and the reply");
    },

    async "workflow-picture"(page) {
        const wf = `details-flow-${tag}`;
        const evil = "<img src=x onerror=\"window.__pwned('step')\">";
        await api("POST", "/v1/workflows", { name: wf, description: "Draft, approve, publish", initialPhase: "draft", phases: [
            { name: "draft", steps: [{ kind: "update", name: `Write ${evil}`, set: { n: 1 } }],
              transitions: [{ when: `state.title != "${evil.replace(/"/g, "\\\"")}"`, to: "approve" }, { to: "draft" }] },
            { name: "approve", steps: [{ kind: "human", id: "publish-ok", input: "approval", prompt: "Publish?",
              timeoutMs: 3600000, update: { approved: "$response" } }],
              transitions: [{ when: "state.approved == true", to: "publish" }, { to: "revise" }] },
            { name: "revise", steps: [{ kind: "update", set: { feedback: "more" } }], transitions: [{ to: "draft" }] },
            { name: "publish", terminal: true, steps: [{ kind: "update", name: "Mark as published", set: { published: true } }] }] });
        const picture = (name) => page.evaluate((n) => {
            const fig = [...document.querySelectorAll("figure.flow")].find((f) => f.dataset.workflow === n);
            if (!fig) return null;
            const phases = [...fig.querySelectorAll(".flow-phase")].map((p) => ({
                name: p.dataset.phase, steps: p.querySelectorAll(".flow-steps > li").length,
                next: [...p.querySelectorAll(".flow-next > li")].map((t) => `${t.textContent}`),
                start: p.classList.contains("flow-start"), end: p.classList.contains("flow-end"),
                current: p.getAttribute("aria-current"), visits: Number(p.dataset.visits || 0) }));
            const edges = [...fig.querySelectorAll(".flow-edges .flow-edge")].map((e) => ({
                from: e.dataset.from, to: e.dataset.to, back: e.classList.contains("flow-back"),
                drawn: e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0 }));
            return { phases, edges, text: fig.textContent, imgs: fig.querySelectorAll("img").length };
        }, name);
        const checkShape = (p, where) => {
            assert(p, `${where}: no picture of ${wf}`);
            assert(JSON.stringify(p.phases.map((x) => x.name)) === '["draft","approve","revise","publish"]', `${where}: phases ${JSON.stringify(p.phases)}`);
            assert(p.phases[0].start && p.phases[3].end && !p.phases[1].start && !p.phases[1].end, `${where}: start and end ${JSON.stringify(p.phases)}`);
            assert(p.phases.map((x) => x.steps).join() === "1,1,1,1", `${where}: steps ${JSON.stringify(p.phases)}`);
            const e = p.edges.map((x) => `${x.from}>${x.to}${x.back ? " back" : ""}`).sort().join(", ");
            assert(e === "approve>publish, approve>revise, draft>approve, draft>draft back, revise>draft back",
                   `${where}: edges ${e}`);
            assert(p.edges.every((x) => x.drawn), `${where}: an edge is not drawn`);
            assert(p.text.includes(`Write ${evil}`) && p.text.includes(`state.title != "${evil.replace(/"/g, "\\\"")}"`) &&
                   p.text.includes("state.approved == true") && p.text.includes("publish-ok"), `${where}: text ${p.text}`);
            assert(p.imgs === 0, `${where}: an element was made from a workflow's text`);
            const nx = p.phases[1].next.join(" | ");
            assert(/if state\.approved == true.*publish/.test(nx) && /otherwise.*revise/.test(nx), `${where}: transitions ${nx}`);
            assert(/always.*draft/.test(p.phases[2].next.join()), `${where}: revise ${p.phases[2].next}`);
        };

        await page.goto(`${base}/web/#/workflows`);
        await page.waitForFunction((n) => [...document.querySelectorAll("figure.flow")].some((f) => f.dataset.workflow === n &&
            f.querySelector(".flow-edges .flow-edge")), wf, { timeout: 15000 });
        checkShape(await picture(wf), "the Workflows page");
        await page.locator(`figure.flow[data-workflow="${wf}"]`).screenshot({ path: `${out}/details-workflows.png` });
        await page.screenshot({ path: `${out}/details-workflows-page.png`, fullPage: true });
        ok("the Workflows page draws each workflow: phases, steps, transitions and loops, text as text");

        await page.goto(`${base}/web/#/workflows/${wf}`);
        await page.waitForFunction(() => document.getElementById("doc")?.value.includes("\"approve\"") &&
                                         document.querySelector("figure.flow .flow-edges .flow-edge"), null, { timeout: 10000 });
        checkShape(await picture(wf), "a workflow's page");
        ok("a workflow's own page draws it above its document");

        // A session: draft, then approve waits for a person. Rejected, it goes round the
        // loop (revise, draft) and waits at approve again; approved, it ends in publish.
        const id = (await api("POST", "/v1/sessions", { workflow: wf })).id;
        await page.goto(`${base}/web/#/session/${id}`);
        const marked = (phase, visits) => page.waitForFunction(([n, ph, v]) => {
            const fig = [...document.querySelectorAll("figure.flow")].find((f) => f.dataset.workflow === n);
            const cur = fig && fig.querySelectorAll(".flow-phase[aria-current]");
            return cur && cur.length === 1 && cur[0].dataset.phase === ph && Number(cur[0].dataset.visits) === v &&
                   fig.querySelector(".flow-edges .flow-edge");
        }, [wf, phase, visits], { timeout: 15000 });
        await marked("approve", 1);
        let p = await picture(wf);
        checkShape(p, "the session's page");
        assert(p.phases[0].visits === 1 && p.phases[2].visits === 0, `visits: ${JSON.stringify(p.phases)}`);
        await page.screenshot({ path: `${out}/details-session-flow.png`, fullPage: true });
        ok("a workflow session's page draws its workflow, the current phase marked");
        const loads = [];
        page.on("framenavigated", () => loads.push(page.url()));
        await page.getByRole("button", { name: "Reject" }).click();
        await marked("approve", 2);
        p = await picture(wf);
        assert(p.phases[0].visits === 2 && p.phases[2].visits === 1, `after the loop: ${JSON.stringify(p.phases)}`);
        await page.getByRole("button", { name: "Approve" }).click();
        await marked("publish", 1);
        p = await picture(wf);
        assert(p.phases[3].current === "step", `the end: ${JSON.stringify(p.phases[3])}`);
        await page.waitForFunction(() => document.getElementById("session-status")?.textContent.startsWith("completed"), null, { timeout: 15000 });
        assert(loads.length === 0, `the page was reloaded: ${loads}`);
        await page.locator("figure.flow").screenshot({ path: `${out}/details-session-flow-end.png` });
        ok("the marked phase follows the session live, round the loop to the end");

        // A phone-sized screen: the picture fits.
        await page.setViewportSize({ width: 390, height: 844 });
        const fits = await page.waitForFunction(() => document.documentElement.scrollWidth - window.innerWidth <= 1,
                                                null, { timeout: 5000 }).then(() => true, () => false);
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert(fits, `the page is ${overflow}px wider than a phone`);
        await page.screenshot({ path: `${out}/details-session-flow-phone.png`, fullPage: true });
        ok("the picture fits a phone-sized screen");
    },

    async budget(page) {
        const agent = `details-budget-${tag}`;
        await api("POST", "/v1/agents", { ...agentDoc(agent), limits: { maxRequests: 1, onExceed: "ask" } });
        const id = (await api("POST", "/v1/sessions", { agent, id: `details-budget-${tag}` })).id;
        await api("POST", `/v1/sessions/${id}/messages`, { content: "first" });
        await statusIs(id, ["completed"]);
        await api("POST", `/v1/sessions/${id}/messages`, { content: "second" });
        await statusIs(id, ["awaiting_input"]);
        await page.goto(`${base}/web/#/session/${id}`);
        await page.waitForSelector("#checkpoint:not([hidden]) #checkpoint-budget", { timeout: 15000 });
        const used = await page.textContent("#checkpoint-budget-used");
        assert(used === "maxRequests: 1 used of 1", `the pane says "${used}"`);
        const prompt = await page.textContent("#checkpoint-prompt");
        assert(/request budget: 1 used of 1/.test(prompt), `the prompt is "${prompt}"`);
        await page.screenshot({ path: `${out}/details-budget.png`, fullPage: true });
        ok("a budget's checkpoint says which limit was reached and what was used of it");
        await page.fill("#checkpoint-budget", "3");
        await page.getByRole("button", { name: "Raise and go on" }).click();
        const done = await statusIs(id, ["completed"]);
        assert(done.budget?.limits?.maxRequests === 3, `the session's limits are ${JSON.stringify(done.budget)}`);
        await page.waitForSelector("#checkpoint", { state: "hidden", timeout: 15000 });
        ok("a new limit given in the pane lets the reply go on; the pane closes");
    },

    async failover(page) {
        const agent = `details-failover-${tag}`;
        await api("POST", "/v1/agents", { ...agentDoc(agent), fallbacks: [{ provider: "openai", model: "gpt-test-model" }] });
        const id = (await api("POST", "/v1/sessions", { agent, id: `details-failover-${tag}` })).id;
        const r = await fetch(`${mock}/__default/anthropic`, { method: "PUT", body: JSON.stringify({ status: 529 }) });
        assert(r.ok, "the mock took the Anthropic default");
        try {
            await page.goto(`${base}/web/#/session/${id}`);
            await page.waitForSelector(".conn-live", { timeout: 10000 });
            await api("POST", `/v1/sessions/${id}/messages`, { content: "anyone?" });
            await statusIs(id, ["completed"]);
            await page.waitForFunction(() => /failed over from anthropic\/claude-test-model to openai\/gpt-test-model: overloaded \(HTTP 529\)/
                .test(document.getElementById("chat")?.textContent), null, { timeout: 15000 });
            await page.waitForFunction(() => [...document.querySelectorAll("#chat .flag.failover")]
                .some((f) => f.textContent === "via openai/gpt-test-model"), null, { timeout: 15000 });
            await page.screenshot({ path: `${out}/details-failover.png`, fullPage: true });
            ok("the failover is said in the conversation, the fallback's attempt flagged with its pair");
            // The timeline: a diamond on the request's row where it failed over, its
            // title naming the pairs; the fallback's attempt on the same row.
            const fo = (await eventsOf(id)).filter((e) => e.type === "provider:failover");
            await page.waitForFunction((n) => document.querySelectorAll("#tl-chart .tl-mark-failover").length === n, fo.length, { timeout: 10000 });
            const marks = await page.evaluate(() => [...document.querySelectorAll("#tl-chart .tl-mark-failover")].map((m) =>
                ({ offset: m.dataset.offset, title: m.querySelector("title").textContent, row: m.closest(".tl-row").dataset.row,
                   rows: document.querySelectorAll("#tl-chart .tl-row-request").length })));
            assert(fo.length >= 1 && marks.every((m, i) => m.offset === fo[i].offset && m.row === marks[0].row && m.rows === 1 &&
                   m.title.includes("anthropic/claude-test-model → openai/gpt-test-model")), `the timeline's failovers: ${JSON.stringify(marks)}`);
            ok("the timeline marks the failover on the request's row");
        } finally {
            await fetch(`${mock}/__default/anthropic`, { method: "DELETE" });
        }
    },
};

cases.timers = async (page) => {
    const wf = `details-timers-${tag}`;
    await api("POST", "/v1/workflows", { name: wf, phases: [
        { name: "nap", steps: [{ kind: "sleep", name: "Nap", duration: "1500ms" },
            { kind: "wait", name: "Approval", signals: { approve: { to: "yes", update: { approval: "$payload" } }, reject: {} },
              timeout: "1h", onTimeout: {} }], transitions: [{ to: "yes" }] },
        { name: "yes", terminal: true }] });
    const id = (await api("POST", "/v1/sessions", { workflow: wf })).id;
    await page.goto(`${base}/web/#/session/${id}`);
    // The sleep: its timer in the timeline and the waiting card.
    await page.waitForSelector("#waiting:not([hidden]) #waiting-until", { timeout: 15000 });
    await page.waitForFunction(() => [...document.querySelectorAll("#timeline .type")].some((t) => t.textContent === "timer:set"),
                               null, { timeout: 15000 });
    ok("the sleep's timer:set is in the timeline and the page says until when");
    // The wait: the signals it waits for, each a button.
    await page.waitForSelector("#waiting-signals", { timeout: 15000 });
    const shown = await page.evaluate(() => ({ signals: document.getElementById("waiting-signals").textContent,
        buttons: [...document.querySelectorAll("#waiting button[data-signal]")].map((b) => b.dataset.signal),
        fired: [...document.querySelectorAll("#timeline .type")].filter((t) => t.textContent === "timer:fired").length }));
    assert(shown.signals === "Signals: approve, reject" && shown.buttons.join() === "approve,reject" && shown.fired === 1,
           `waiting: ${JSON.stringify(shown)}`);
    await page.screenshot({ path: `${out}/details-timers-waiting.png`, fullPage: true });
    ok("the wait shows the signals it waits for, one button each; the sleep's timer fired once");
    // A signal from the page, with a payload whose text is markup: it takes its branch.
    await page.getByLabel("Payload").fill('{"by": "<b>ann</b>"}');
    await page.getByRole("button", { name: "Send approve" }).click();
    const done = await statusIs(id, ["completed"]);
    assert(JSON.stringify(done.state) === JSON.stringify({ approval: { by: "<b>ann</b>" } }), `state: ${JSON.stringify(done.state)}`);
    await page.waitForFunction(() => [...document.querySelectorAll("#timeline .type")].some((t) => t.textContent === "signal:received"),
                               null, { timeout: 15000 });
    await page.waitForSelector("#waiting[hidden]", { state: "attached", timeout: 15000 });
    const chat = await page.evaluate(() => ({ text: document.getElementById("chat").textContent,
                                              bold: document.querySelectorAll("#chat b").length }));
    assert(chat.text.includes("signal approve") && chat.text.includes("<b>ann</b>") && chat.bold === 0, `chat: ${JSON.stringify(chat)}`);
    await page.screenshot({ path: `${out}/details-timers-done.png`, fullPage: true });
    ok("a signal sent from the page took its branch; its payload is shown as text, the waiting card is gone");
    // The pictures' timeline: the sleep and the wait, each a hatched bar from its step's
    // start to its end (the timer fired; the signal taken), the signal a diamond.
    const evs = await eventsOf(id);
    const started = evs.filter((e) => e.type === "step:started" && (e.payload.kind === "sleep" || e.payload.kind === "wait"));
    const sig = evs.find((e) => e.type === "signal:received");
    await page.waitForFunction(() => document.querySelectorAll("#tl-chart .tl-bar.tl-wait:not(.tl-open)").length === 2 &&
                               document.querySelector("#tl-chart .tl-mark-signal"), null, { timeout: 15000 });
    const bars = await page.evaluate(() => [...document.querySelectorAll("#tl-chart .tl-bar")].map((b) => ({
        kind: b.dataset.kind, offset: b.dataset.offset, label: b.closest(".tl-row").querySelector(".tl-label").firstChild.textContent,
        title: b.querySelector("title").textContent,
        signal: [...b.closest(".tl-row").querySelectorAll(".tl-mark-signal")].map((m) => m.dataset.offset) })));
    assert(started.length === 2 && bars.length === 2 && bars.every((b, i) => b.kind === "wait" && b.offset === started[i].offset) &&
           bars[0].label === "sleep Nap" && /the timer fired/.test(bars[0].title) && /due /.test(bars[0].title) &&
           bars[1].label === "wait Approval" && /signal approve/.test(bars[1].title) && bars[1].signal.join() === sig.offset &&
           bars[0].signal.length === 0, `the timeline's waits: ${JSON.stringify(bars)}`);
    await page.locator("#tl-card").screenshot({ path: `${out}/details-timers-timeline.png` });
    ok("the timeline draws the sleep (to its timer) and the wait (to its signal, a diamond) as hatched bars");
};

const run = cases[which];
if (!run) { console.error(`viewer-details: no case ${which}`); process.exit(2); }
const browser = await launch();
let failed = false, page = null;
try {
    await fetch(`${mock}/__script`, { method: "DELETE" });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await ctx.newPage();
    const clean = watch(page, base);
    page.on("pageerror", (e) => console.log(`# page error: ${e}`));
    await page.exposeFunction("__pwned", (what) => { throw new Error(`script ran: ${what}`); });
    await page.goto(`${base}/web/#/sessions`);
    await page.getByLabel("API token").fill(admin);
    await page.getByRole("button", { name: "Use" }).click();
    await page.waitForSelector("tr[data-session], td.muted", { timeout: 10000 });
    await run(page);
    clean();
} catch (e) {
    failed = true;
    console.log(`viewer-details ${which}: FAIL ${e.stack || e}`);
    if (page) {
        // Where the page was and what it said (a status line, an error), for the log.
        const at = await page.evaluate(() => `${location.hash}: ` +
            (document.querySelector("main")?.innerText || "").replace(/\s+/g, " ").slice(0, 800)).catch((x) => `${x}`);
        console.log(`# the page at the failure: ${at}`);
        await page.screenshot({ path: `${out}/details-${which}-failed.png`, fullPage: true }).catch(() => {});
    }
} finally {
    await browser.close();
}
if (!failed) console.log(`viewer-details ${which}: PASS ${checks.length} checks`);
process.exitCode = failed ? 1 : 0;
