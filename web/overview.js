// overview.js: the overview page, #/overview[?since=1h|24h|7d|30d&label=K:V,...]: the
// sessions created in that window (that the token may read, with those labels) by
// status, their provider requests and failed attempts over time, and what they spent
// by agent or workflow. Drawn in SVG from the API the other pages use: the sessions
// list (GET /v1/sessions?createdAfter=, its rows' status and cost), and the events of
// the newest of them (GET /v1/sessions/{id}/events), both bounded; the page says when
// a bound left sessions out.
import { api, enc, token } from "./api.js";
import { h, usd } from "./dom.js";
import { dur, s } from "./pictures.js";

const WINDOWS = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3, "30d": 30 * 86400e3 };
const SESSIONS_MAX = 1000;   // sessions listed (10 pages of 100)
const EVENTS_SESSIONS = 100; // the newest ones whose events are read
const EVENT_PAGES = 10;      // pages of events read of each
const BUCKETS = 24;
const STATUSES = ["pending", "running", "awaiting_input", "completed", "failed", "cancelled"];
const COLOURS = { pending: "#5f6368", running: "#8a5a00", awaiting_input: "#b7791f", completed: "#1e7b34",
                  failed: "#b3261e", cancelled: "#7b4fc4" };

// Horizontal bars: rows [{key, label, value, text}], value drawn to the widest.
function barChart(rows, opts) {
    const width = opts.width, labelW = 150, valueW = 90, rowH = 24;
    const max = Math.max(1e-12, ...rows.map((r) => r.value));
    const w = Math.max(40, width - labelW - valueW);
    const height = rows.length * rowH + 4;
    const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "tl-svg ov-bars", role: "img",
                           "aria-label": `${opts.label}: ${rows.map((r) => `${r.label} ${r.text}`).join(", ")}` });
    rows.forEach((r, i) => {
        const y = i * rowH + 2;
        const bw = r.value > 0 ? Math.max(2, (r.value / max) * w) : 0;
        svg.append(s("g", { class: "ov-bar", "data-key": r.key, "data-value": r.value },
            s("title", {}, `${r.label}: ${r.text}`),
            s("text", { x: labelW - 6, y: y + 15, "text-anchor": "end", class: "tl-label" }, r.label.length > 22 ? `${r.label.slice(0, 21)}…` : r.label),
            s("rect", { x: labelW, y: y + 3, width: bw, height: rowH - 8, rx: 2, fill: r.colour || "#1a5fb4" }),
            s("text", { x: labelW + bw + 6, y: y + 15, class: "tl-tick ov-value" }, r.text)));
    });
    return svg;
}

// Requests and failed attempts in each bucket of the window: two bars a bucket.
function bucketChart(buckets, t0, span, width) {
    const left = 40, top = 10, ph = 120, height = top + ph + 24;
    const w = Math.max(80, width - left - 8), bw = w / buckets.length;
    const max = Math.max(1, ...buckets.map((b) => b.requests));
    const y = (v) => top + ph - (v / max) * ph;
    const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "tl-svg ov-buckets", role: "group",
                           "aria-label": "Provider requests and failed attempts over time" },
        s("line", { x1: left, x2: left + w, y1: top + ph, y2: top + ph, class: "tl-axisline" }),
        s("text", { x: left - 4, y: top + 4, "text-anchor": "end", class: "tl-tick" }, String(max)),
        s("text", { x: left - 4, y: top + ph, "text-anchor": "end", class: "tl-tick" }, "0"));
    const step = span / buckets.length;
    buckets.forEach((b, i) => {
        const x = left + i * bw;
        const from = new Date(t0 + i * step), to = new Date(t0 + (i + 1) * step);
        const text = `${from.toLocaleString()} to ${to.toLocaleTimeString()}: ${b.requests} request attempt${b.requests === 1 ? "" : "s"}, ${b.failures} failed`;
        const g = s("g", { class: "ov-bucket", "data-requests": b.requests, "data-failures": b.failures, role: "img", "aria-label": text },
            s("title", {}, text));
        if (b.requests) g.append(s("rect", { x: x + 1, y: y(b.requests), width: Math.max(1, bw * 0.6 - 1), height: top + ph - y(b.requests), class: "ov-req" }));
        if (b.failures) g.append(s("rect", { x: x + bw * 0.6, y: y(b.failures), width: Math.max(1, bw * 0.4 - 1), height: top + ph - y(b.failures), class: "ov-fail" }));
        g.append(s("rect", { x, y: top, width: bw, height: ph, class: "ov-hit" }));
        svg.append(g);
        if (i % Math.ceil(buckets.length / 6) === 0)
            svg.append(s("text", { x: x + 1, y: top + ph + 16, class: "tl-tick", "aria-hidden": "true" },
                         `-${dur(span - i * step)}`));
    });
    svg.append(s("text", { x: left + w, y: top + ph + 16, "text-anchor": "end", class: "tl-tick", "aria-hidden": "true" }, "now"));
    return svg;
}

export function overviewPage(main, params) {
    const since = WINDOWS[params.get("since")] ? params.get("since") : "24h";
    const label = params.get("label") || "";
    const go = () => {
        const q = new URLSearchParams({ since: win.value });
        if (labels.value.trim()) q.set("label", labels.value.trim());
        location.hash = `#/overview?${q}`;
    };
    const win = h("select", { id: "ov-since", onchange: go },
        Object.keys(WINDOWS).map((k) => h("option", { value: k, selected: k === since }, `the last ${k}`)));
    const labels = h("input", { id: "ov-label", value: label, placeholder: "team:red,env:prod",
        onkeydown: (e) => { if (e.key === "Enter") go(); }, onchange: go });
    const state = h("p", { class: "muted", role: "status", id: "ov-state", "data-since": since, "data-label": label }, "loading…");
    const statusBox = h("div", { class: "tl-box", id: "ov-status" });
    const reqBox = h("div", { class: "tl-box", id: "ov-requests" });
    const reqNote = h("p", { class: "muted", id: "ov-requests-note" });
    const costBox = h("div", { class: "tl-box", id: "ov-cost" });
    const costNote = h("p", { class: "muted", id: "ov-cost-note" });
    const statusCard = h("section", { class: "card", "aria-label": "Sessions by status" }, h("h2", {}, "Sessions by status"), statusBox);
    main.append(h("h1", {}, "Overview"),
        h("div", { class: "row" }, h("label", { for: "ov-since" }, "Created in"), win,
          h("label", { for: "ov-label" }, "Labels"), labels), state,
        statusCard,
        h("section", { class: "card", "aria-label": "Requests and failures over time" }, h("h2", {}, "Requests and failures over time"),
          reqNote, reqBox,
          h("ul", { class: "tl-legend", "aria-label": "Legend" },
            h("li", {}, h("span", { class: "tl-key ov-key-req", "aria-hidden": "true" }), "provider request attempts"),
            h("li", {}, h("span", { class: "tl-key ov-key-fail", "aria-hidden": "true" }), "failed attempts (retried or not)"))),
        h("section", { class: "card", "aria-label": "Cost per agent" }, h("h2", {}, "Cost per agent or workflow"), costNote, costBox));
    let gone = false;
    const width = () => Math.max(300, Math.floor(statusCard.clientWidth - 26) || 640);

    (async () => {
        const now = Date.now(), span = WINDOWS[since], t0 = now - span;
        const rows = [];
        let cursor = "", more = false;
        try {
            for (let i = 0; i < SESSIONS_MAX / 100; i++) {
                const q = new URLSearchParams({ limit: "100", createdAfter: String(t0) });
                if (label) q.set("label", label);
                if (cursor) q.set("cursor", cursor);
                const res = await api("GET", `/v1/sessions?${q}`);
                if (gone) return;
                rows.push(...res.sessions);
                cursor = res.nextCursor || "";
                if (!cursor) break;
            }
            more = !!cursor;
        } catch (e) { state.className = "forbidden"; state.textContent = e.message; return; }
        state.textContent = `${rows.length}${more ? "+" : ""} session${rows.length === 1 ? "" : "s"} created in the last ${since}` +
            `${label ? ` with ${label}` : ""}` + (more ? ` (the newest ${SESSIONS_MAX} are counted)` : "") + ".";
        state.dataset.sessions = rows.length;

        // By status.
        const by = Object.fromEntries(STATUSES.map((k) => [k, 0]));
        for (const r of rows) by[r.status] = (by[r.status] || 0) + 1;
        statusBox.replaceChildren(barChart(Object.entries(by).map(([k, v]) => ({ key: k, label: k, value: v, text: String(v), colour: COLOURS[k] })),
                                           { width: width(), label: "Sessions by status" }));

        // What each agent or workflow spent (its sessions' own spending: a fork's
        // inherited cost is its source's).
        const spent = new Map();
        for (const r of rows) {
            const k = r.agent ? `agent ${r.agent}` : r.workflow ? `workflow ${r.workflow}` : "?";
            const v = r.cost ? r.cost.spentUsd : r.costUsd || 0;
            spent.set(k, (spent.get(k) || 0) + (v || 0));
        }
        const top = [...spent].sort((a, b) => b[1] - a[1]);
        costBox.replaceChildren(top.length ? barChart(top.slice(0, 15).map(([k, v]) => ({ key: k, label: k, value: v, text: usd(v), colour: "#1e7b34" })),
                                                       { width: width(), label: "Spent per agent or workflow" }) : h("p", { class: "muted" }, "No sessions."));
        costNote.textContent = `${usd(top.reduce((n, [, v]) => n + v, 0))} spent by ${top.length} agent${top.length === 1 ? "" : "s"} or workflow${top.length === 1 ? "" : "s"}` +
            (top.length > 15 ? "; the 15 that spent most are drawn" : "") + ".";

        // Requests and failed attempts over time, from the events of the newest sessions
        // (4 read at a time; a fork's events before its own start are its source's).
        const buckets = Array.from({ length: BUCKETS }, () => ({ requests: 0, failures: 0 }));
        const read = rows.slice(0, EVENTS_SESSIONS);
        let cut = 0, next = 0, nReq = 0, nFail = 0;
        const put = (t, k) => {
            const i = Math.floor(((t - t0) / span) * BUCKETS);
            if (i >= 0 && i < BUCKETS) buckets[i][k]++;
        };
        const worker = async () => {
            while (!gone && next < read.length) {
                const row = read[next++];
                let offset = "-1", own = !row.parent;
                for (let p = 0; ; p++) {
                    if (p === EVENT_PAGES) { cut++; break; }
                    let evs, res;
                    try {
                        res = await fetchEvents(row.id, offset);
                        evs = res.events;
                    } catch { cut++; break; }
                    for (const e of evs) {
                        if (e.type === "session:forked") own = true;
                        if (!own) continue;
                        const t = Date.parse(e.createdAt), pl = e.payload || {};
                        if (e.type === "provider:request_started") { put(t, "requests"); nReq++; }
                        else if ((e.type === "provider:request_retried" || e.type === "provider:request_cancelled") && pl.reason === "failed") {
                            put(t, "failures"); nFail++;
                        }
                    }
                    if (res.upToDate || !evs.length) break;
                    offset = res.next;
                }
            }
        };
        await Promise.all([worker(), worker(), worker(), worker()]);
        if (gone) return;
        reqBox.replaceChildren(bucketChart(buckets, t0, span, width()));
        reqBox.dataset.requests = nReq;
        reqBox.dataset.failures = nFail;
        reqNote.textContent = `${nReq} request attempt${nReq === 1 ? "" : "s"}, ${nFail} failed, in ${BUCKETS} buckets of ${dur(span / BUCKETS)}` +
            (rows.length > read.length ? `, from the newest ${read.length} sessions` : "") +
            (cut ? `; ${cut} session${cut === 1 ? "" : "s"} not read to the end` : "") + ".";
        state.dataset.done = "true";
    })();
    return { leave() { gone = true; } };
}

// One page of a session's events from offset: {events, next, upToDate}.
async function fetchEvents(id, offset) {
    const headers = {};
    const t = token();
    if (t) headers.Authorization = `Bearer ${t}`;
    const res = await fetch(`/v1/sessions/${enc(id)}/events?offset=${enc(offset)}`, { headers, cache: "no-store", credentials: "omit" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const events = await res.json();
    return { events: Array.isArray(events) ? events : [], next: res.headers.get("Stream-Next-Offset") || offset,
             upToDate: res.headers.get("Stream-Up-To-Date") === "true" };
}
