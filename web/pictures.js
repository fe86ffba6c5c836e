// pictures.js: a session's events drawn (SVG, no library): its timeline, each provider
// request's attempts, retries, cuts and continuations, each tool call and each wait
// (a human checkpoint or a tool call's approval, a workflow's sleep or wait for a
// signal, the delay before a retry) as a bar on one time axis; and its tokens and
// cost over time, summed from each request's usage. Both are built from the events
// the session page reads (add(env) for each, in order), and redrawn as they come.
// Every text from a session goes in as a text node or an attribute (never markup).
import { h, short, usd } from "./dom.js";

const NS = "http://www.w3.org/2000/svg";
const LABEL_W = 150;      // the rows' labels, left of the axis
const ROW_H = 22, BAR_H = 14, AXIS_H = 22;
const ROWS_MAX = 200;     // rows drawn: the latest ones
const POINTS_MAX = 300;   // usage points drawn as markers: the latest ones
const GAP_W = 26;         // an idle stretch left out of the axis, drawn this wide
const IDLE_MIN_MS = 2000; // a stretch with nothing under way, longer than this and than
const IDLE_PART = 0.15;   // this part of the session's span, is left out (marked)

// An SVG element (the overview page draws with it too), as dom.js h makes HTML ones.
export function s(tag, attrs, ...children) {
    const el = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, String(v));
    }
    for (const c of children.flat(Infinity)) {
        if (c === undefined || c === null || c === false) continue;
        el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
}
const title = (text) => s("title", {}, text);

// A duration in words: 850 ms, 2.4 s, 3m 05s, 2h 10m.
export function dur(ms) {
    if (!(ms >= 0)) return "?";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
    const m = Math.floor(ms / 60000), sec = Math.round((ms % 60000) / 1000);
    if (m < 60) return `${m}m ${String(sec).padStart(2, "0")}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}

// The x axis shared by both pictures: time from the first event to the last, its idle
// stretches (nothing under way for long) cut out and drawn GAP_W wide, marked.
// busy: [[t0, t1]...]; returns {x(t), gaps: [{x, t0, t1}], ticks: [{x, label}]}.
function timeScale(t0, t1, busy, width) {
    const span = Math.max(1, t1 - t0);
    const merged = [];
    for (const [a, b] of busy.map(([a, b]) => [Math.max(t0, a), Math.min(t1, Math.max(a, b))]).sort((p, q) => p[0] - q[0])) {
        const last = merged[merged.length - 1];
        if (last && a <= last[1]) last[1] = Math.max(last[1], b);
        else merged.push([a, b]);
    }
    const cut = [];
    let prev = t0;
    for (const [a, b] of [...merged, [t1, t1]]) {
        if (a - prev > IDLE_MIN_MS && a - prev > span * IDLE_PART) cut.push([prev, a]);
        prev = Math.max(prev, b);
    }
    const kept = span - cut.reduce((n, [a, b]) => n + (b - a), 0);
    const px = Math.max(1, width - cut.length * GAP_W) / Math.max(1, kept);
    const x = (t) => {
        let off = 0, left = 0;
        for (const [a, b] of cut) {
            if (t >= b) { off += GAP_W; left += b - a; continue; }
            if (t > a) return (a - t0 - left) * px + off + ((t - a) / (b - a)) * GAP_W;
            break;
        }
        return (t - t0 - left) * px + off;
    };
    const gaps = cut.map(([a, b]) => ({ x: x(a), t0: a, t1: b }));
    // Ticks every 1, 2 or 5 times a power of ten of ms, about 90 px apart, none in a gap.
    const want = (kept / Math.max(1, width - cut.length * GAP_W)) * 90;
    let step = 1;
    while (step * 5 < want) step *= 10;
    step = step * 2 >= want ? step * 2 : step * 5 >= want ? step * 5 : step * 10;
    if (step < want / 2) step *= 10;
    const ticks = [];
    for (let t = 0; t <= span && ticks.length < 60; t += step) {
        if (cut.some(([a, b]) => t0 + t > a && t0 + t < b)) continue;
        ticks.push({ x: x(t0 + t), label: t === 0 ? "0" : `+${dur(t)}` });
    }
    return { x, gaps, ticks };
}

// The model: rows of segments, built from the events one by one.
//   row: {id, kind ("request", "tool", "wait"), label, segs: [seg], marks: [{t, cls, text, offset}]}
//   seg: {kind ("attempt", "tool", "wait", "retry"), t0, t1 (null: under way), offset (its
//         first event's), endOffset, text (its title), cls (extra classes)}
export function sessionPictures(opts) {
    const onPick = (opts && opts.onPick) || (() => {});
    const rows = [];
    const attempts = new Map(); // requestId -> {row, seg}
    const calls = new Map();    // callId -> {row, seg}
    const waits = new Map();    // interactionId, or "phase/step" of a sleep or wait -> {row, seg}
    const points = [];          // usage after each request: {t, in, out, usd, requestId, offset}
    let retryNext = null;       // the row whose attempt was retried: its next attempt joins it
    let first = null, last = null, nRequests = 0, selected = "";
    const sum = { in: 0, out: 0, usd: 0 };

    const row = (kind, label, offset) => {
        const r = { id: `r${rows.length}`, kind, label, segs: [], marks: [], offset };
        rows.push(r);
        return r;
    };
    const open = (r, kind, t, offset, text, cls) => {
        const seg = { kind, t0: t, t1: null, offset, endOffset: null, text, cls: cls || "" };
        r.segs.push(seg);
        return seg;
    };
    const close = (seg, t, offset, more, cls) => {
        if (!seg || seg.t1 !== null) return;
        seg.t1 = Math.max(seg.t0, t);
        seg.endOffset = offset;
        if (more) seg.text += `\n${more}`;
        if (cls) seg.cls += ` ${cls}`;
    };

    function fold(env) {
        const t = Date.parse(env.createdAt);
        if (!Number.isFinite(t)) return false;
        if (first === null) first = t;
        last = Math.max(last ?? t, t);
        const p = env.payload || {};
        const off = env.offset;
        switch (env.type) {
        case "provider:request_started": {
            let r = retryNext && p.attempt > 1 ? retryNext.row : null;
            if (retryNext) close(retryNext.seg, t, off);
            retryNext = null;
            if (!r) {
                nRequests++;
                r = row("request", p.purpose === "compaction" ? `compaction ${nRequests}` : `request ${nRequests}`, off);
            }
            const cont = p.continuedFrom ? `\ncontinues ${p.continuedFrom.requestId} after ${p.continuedFrom.chars} characters` :
                p.continued === false ? `\nstarts over (${p.reason || "not continued"})` : "";
            const seg = open(r, "attempt", t, off,
                `${r.label}, attempt ${p.attempt || 1}: ${p.provider || ""} ${p.model || ""}\nrequest ${p.requestId}${cont}`,
                `${(p.attempt || 1) > 1 ? "tl-retried" : ""}${p.continuedFrom ? " tl-continued" : ""}`);
            seg.attempt = p.attempt || 1;
            seg.requestId = p.requestId;
            seg.continued = !!p.continuedFrom;
            if (p.continuedFrom) r.marks.push({ t, cls: "tl-mark-continued", text: `continued from ${p.continuedFrom.requestId}`, offset: off });
            attempts.set(p.requestId, { row: r, seg });
            return true;
        }
        case "provider:request_ended": {
            const a = attempts.get(p.requestId);
            const u = p.usage || {};
            if (a) close(a.seg, t, off, `ended: ${p.stopReason || ""}, ${u.inputTokens || 0} in, ${u.outputTokens || 0} out, ${usd(p.costUsd)}`);
            sum.in += u.inputTokens || 0;
            sum.out += u.outputTokens || 0;
            sum.usd += typeof p.costUsd === "number" ? p.costUsd : 0;
            points.push({ t, in: sum.in, out: sum.out, usd: sum.usd, requestId: p.requestId, offset: off,
                          label: a ? a.row.label : p.requestId });
            return true;
        }
        case "provider:request_cancelled": {
            const a = attempts.get(p.requestId);
            if (a) {
                close(a.seg, t, off, `cut: ${p.reason || ""}${p.error ? `: ${p.error}` : ""}`, `tl-cut tl-cut-${p.reason || "x"}`);
                a.row.marks.push({ t, cls: "tl-mark-cut", text: `cut (${p.reason || ""})${p.error ? `: ${p.error}` : ""}`, offset: off });
            }
            return true;
        }
        case "provider:request_retried": {
            const a = attempts.get(p.requestId);
            if (!a) return true;
            const why = `${p.cause || p.reason || ""}${p.status ? ` (HTTP ${p.status})` : ""}${p.error ? `: ${p.error}` : ""}`;
            if (a.seg.t1 === null) {
                close(a.seg, t, off, `retried: ${why}`, "tl-cut");
                a.row.marks.push({ t, cls: "tl-mark-cut", text: `retried: ${why}`, offset: off });
            }
            const seg = open(a.row, "retry", t, off, `${a.row.label}: waiting ${dur(p.delayMs)} before attempt ${p.attempt}: ${why}`);
            if (Number.isFinite(p.retryAt)) seg.due = p.retryAt;
            retryNext = { row: a.row, seg };
            return true;
        }
        case "provider:failover": {
            // The request goes on with the agent's next fallback: a diamond where it did.
            const a = attempts.get(p.requestId);
            const pair = (x) => (x ? `${x.provider || "?"}/${x.model || "?"}` : "?");
            if (a) a.row.marks.push({ t, cls: "tl-mark-failover", text: `failover: ${pair(p.from)} → ${pair(p.to)} (${p.cause || ""})`, offset: off });
            return true;
        }
        case "reply:failed":
            for (let i = rows.length - 1; i >= 0; i--) if (rows[i].kind === "request") {
                rows[i].marks.push({ t, cls: "tl-mark-cut", text: `the reply failed: ${p.error || ""}`, offset: off });
                break;
            }
            if (retryNext) { close(retryNext.seg, t, off); retryNext = null; }
            return true;
        case "tool:called": {
            const r = row("tool", `tool ${p.name || "?"}`, off);
            const seg = open(r, "tool", t, off, `tool ${p.name || "?"}${p.server ? ` (${p.server})` : ""}: call ${p.callId}\n${short(p.arguments ?? "", 300)}`);
            calls.set(p.callId, { row: r, seg });
            return true;
        }
        case "tool:approved": {
            const c = calls.get(p.callId);
            if (c && c.seg.t1 === null) { c.seg.t0 = t; c.seg.offset = off; }
            return true;
        }
        case "tool:result": {
            const c = calls.get(p.callId);
            if (c) {
                const what = p.denied ? "denied" : p.failed ? "failed" : p.isError ? "error" : "result";
                close(c.seg, t, off, `${what}${p.durationMs !== undefined ? ` after ${p.durationMs} ms` : ""}: ${short(p.result ?? "", 300)}`,
                      what === "result" ? "" : "tl-error");
                if (p.denied) c.seg.kind = "denied";
            }
            return true;
        }
        case "input:requested": {
            const c = p.callId && calls.get(p.callId);
            const r = c ? c.row : row("wait", `checkpoint ${p.interactionId || ""}`, off);
            const seg = open(r, "wait", t, off, `waiting for a person: ${p.interactionId || ""} (${p.input || ""})\n${short(p.prompt ?? "", 300)}`);
            if (c) { c.seg.t0 = null; c.waiting = true; }
            waits.set(`i:${p.interactionId}`, { row: r, seg });
            return true;
        }
        case "input:received": case "input:expired": {
            const w = waits.get(`i:${p.interactionId}`);
            if (w) close(w.seg, t, off, env.type === "input:expired" ? "expired" : `answered: ${short(p.response ?? "", 200)}`,
                         env.type === "input:expired" ? "tl-cut" : "");
            const c = calls.get(p.interactionId);
            if (c && c.seg.t0 === null) c.seg.t0 = t;
            return true;
        }
        case "step:started":
            if (p.kind === "sleep" || p.kind === "wait") {
                const r = row("wait", `${p.kind} ${p.name || `${p.phase}/${p.step}`}`, off);
                const seg = open(r, "wait", t, off, `${p.kind}: phase ${p.phase}, step ${p.step}${p.name ? ` (${p.name})` : ""}`);
                waits.set(`s:${p.phase}/${p.step}`, { row: r, seg });
            }
            return true;
        case "timer:set": {
            let w = waits.get(`s:${p.phase}/${p.step}`);
            if (!w || w.seg.t1 !== null) {
                const r = row("wait", `timer ${p.phase}/${p.step}`, off);
                w = { row: r, seg: open(r, "wait", t, off, `timer: phase ${p.phase}, step ${p.step}`) };
                waits.set(`s:${p.phase}/${p.step}`, w);
            }
            if (Number.isFinite(p.dueAt)) { w.seg.due = p.dueAt; w.seg.text += `\ndue ${new Date(p.dueAt).toISOString()}`; }
            return true;
        }
        case "timer:fired": case "step:completed": {
            const w = waits.get(`s:${p.phase}/${p.step}`);
            if (w) close(w.seg, t, off, env.type === "timer:fired" ? "the timer fired" : p.signal ? `signal ${p.signal}` : "done");
            return true;
        }
        case "signal:received":
            for (const w of waits.values()) if (w.seg.t1 === null && w.row.label.startsWith("wait")) {
                w.row.marks.push({ t, cls: "tl-mark-signal", text: `signal ${p.name || ""}`, offset: off });
                break;
            }
            return true;
        case "session:cancelled": case "workflow:completed": case "workflow:failed":
            // Nothing is under way after the end: what was open is closed there.
            for (const r of rows) for (const g of r.segs) if (g.t1 === null && g.t0 !== null) close(g, t, off, "(open at the end)", "tl-cut");
            return true;
        default:
            return false;
        }
    }

    // ---- drawing --------------------------------------------------------------------
    const chartBox = h("div", { class: "tl-box", id: "tl-chart" });
    const tlNote = h("p", { class: "muted", id: "tl-summary", role: "status" }, "No events yet.");
    const legend = h("ul", { class: "tl-legend", "aria-label": "Legend" },
        [["attempt", "request (an attempt)"], ["retried", "an attempt that followed a retry"], ["cut", "cut: failed, dropped or stopped (a red cross at its end)"],
         ["retry", "delay before a retry"], ["tool", "tool call"], ["wait", "waiting (a person, a timer, a signal)"]]
        .map(([k, v]) => h("li", {}, h("span", { class: `tl-key tl-key-${k}`, "aria-hidden": "true" }), v)));
    const timelineCard = h("section", { class: "card", "aria-label": "Timeline", id: "tl-card" },
        h("h2", {}, "Timeline"), tlNote, chartBox, legend);
    const usageBox = h("div", { class: "tl-box", id: "usage-chart" });
    const usageNote = h("p", { class: "muted", id: "usage-summary", role: "status" }, "No requests yet.");
    const usageCard = h("section", { class: "card", "aria-label": "Tokens and cost", id: "usage-card" },
        h("h2", {}, "Tokens and cost"), usageNote, usageBox,
        h("ul", { class: "tl-legend", "aria-label": "Legend" },
          h("li", {}, h("span", { class: "tl-key tl-key-in", "aria-hidden": "true" }), "input tokens"),
          h("li", {}, h("span", { class: "tl-key tl-key-out", "aria-hidden": "true" }), "output tokens"),
          h("li", {}, h("span", { class: "tl-key tl-key-usd", "aria-hidden": "true" }), "cost (USD, right axis)")));

    let timer = 0;
    function soon() {
        if (timer) return;
        timer = setTimeout(() => { timer = 0; draw(); }, 200);
    }

    function scale(width) {
        // The end: the latest event, or the next attempt's time of a retry waiting (a
        // minute at most past it). A wait still open reaches the latest event (when its
        // timer is due is in its title).
        let end = last ?? 0;
        for (const r of rows) for (const g of r.segs) {
            const v = g.t1 ?? (g.kind === "retry" ? g.due ?? 0 : 0);
            if (v > end && v <= (last ?? 0) + 60000) end = v;
        }
        const busy = rows.flatMap((r) => r.segs.filter((g) => g.t0 !== null).map((g) => [g.t0, g.t1 ?? end]));
        for (const q of points) busy.push([q.t, q.t]);
        return { ...timeScale(first, end, busy, width), end };
    }
    function axis(sc, y, h0, w) {
        const g = s("g", { class: "tl-axis", "aria-hidden": "true" });
        for (const tk of sc.ticks) {
            g.append(s("line", { x1: LABEL_W + tk.x, x2: LABEL_W + tk.x, y1: y, y2: y + h0, class: "tl-grid" }),
                     s("text", { x: LABEL_W + tk.x + 2, y: y - 6, class: "tl-tick" }, tk.label));
        }
        for (const gp of sc.gaps) {
            g.append(s("rect", { x: LABEL_W + gp.x, y, width: GAP_W, height: h0, class: "tl-gap" },
                       title(`${dur(gp.t1 - gp.t0)} with nothing under way, left out`)),
                     s("text", { x: LABEL_W + gp.x + GAP_W / 2, y: y - 6, class: "tl-tick tl-gap-text", "text-anchor": "middle" }, "≈"));
        }
        g.append(s("line", { x1: LABEL_W, x2: LABEL_W + w, y1: y, y2: y, class: "tl-axisline" }));
        return g;
    }

    function drawTimeline(width) {
        const shown = rows.slice(-ROWS_MAX);
        const w = Math.max(80, width - LABEL_W - 8);
        const sc = scale(w);
        const height = AXIS_H + shown.length * ROW_H + 6;
        const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "tl-svg", role: "group",
                               "aria-label": "Timeline of requests, tool calls and waits" },
            s("defs", {}, s("pattern", { id: "tl-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
                s("rect", { width: 6, height: 6, class: "tl-hatch-bg" }), s("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "tl-hatch-line" }))),
            axis(sc, AXIS_H, shown.length * ROW_H, w));
        shown.forEach((r, i) => {
            const y = AXIS_H + i * ROW_H;
            const g = s("g", { class: `tl-row tl-row-${r.kind}`, "data-row": r.id });
            g.append(s("text", { x: LABEL_W - 6, y: y + ROW_H / 2 + 4, "text-anchor": "end", class: "tl-label" },
                       short(r.label, 22), title(r.label)));
            for (const seg of r.segs) {
                if (seg.t0 === null) continue;
                const x0 = sc.x(seg.t0), x1 = sc.x(seg.t1 ?? (seg.kind === "retry" ? Math.min(seg.due ?? sc.end, sc.end) : sc.end));
                const bw = Math.max(3, x1 - x0);
                const open = seg.t1 === null;
                const text = `${seg.text}\n${open ? "under way" : dur(seg.t1 - seg.t0)} (from ${new Date(seg.t0).toISOString().slice(11, 23)})`;
                const bar = s("g", { class: `tl-bar tl-${seg.kind} ${seg.cls}${open ? " tl-open" : ""}${seg.offset === selected ? " tl-selected" : ""}`,
                                     tabindex: 0, role: "button", "aria-label": text.replace(/\n/g, "; "),
                                     "data-offset": seg.offset, "data-kind": seg.kind, "data-request": seg.requestId,
                                     "data-attempt": seg.attempt, "data-row": r.id,
                                     onclick: () => pick(seg.offset),
                                     onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(seg.offset); } } },
                    title(text),
                    s("rect", { x: LABEL_W + x0, y: y + (ROW_H - BAR_H) / 2, width: bw, height: BAR_H, rx: 2 }));
                g.append(bar);
            }
            for (const m of r.marks) {
                const x = LABEL_W + sc.x(m.t), cy = y + ROW_H / 2;
                // A cut: a cross over the bar's end; a continuation: a notch at its
                // start; a signal: a diamond. Drawn, not a glyph (no font needed).
                const d = m.cls === "tl-mark-cut" ? `M${x - 5},${cy - 9} L${x + 5},${cy + 9} M${x + 5},${cy - 9} L${x - 5},${cy + 9}`
                    : m.cls === "tl-mark-continued" ? `M${x},${cy - 4} L${x + 5},${cy} L${x},${cy + 4} Z`
                    : `M${x},${cy - 6} L${x + 6},${cy} L${x},${cy + 6} L${x - 6},${cy} Z`;
                g.append(s("path", { d, class: `tl-mark ${m.cls}`, "data-offset": m.offset }, title(m.text)));
            }
            svg.append(g);
        });
        chartBox.replaceChildren(svg);
        const n = (k) => rows.reduce((c, r) => c + r.segs.filter((g) => g.kind === k).length, 0);
        const cut = rows.reduce((c, r) => c + r.marks.filter((m) => m.cls === "tl-mark-cut").length, 0);
        tlNote.textContent = rows.length
            ? `${nRequests} request${nRequests === 1 ? "" : "s"} (${n("attempt")} attempt${n("attempt") === 1 ? "" : "s"}, ${n("retry")} retried, ${cut} cut), ` +
              `${n("tool") + n("denied")} tool call${n("tool") + n("denied") === 1 ? "" : "s"}, ${n("wait")} wait${n("wait") === 1 ? "" : "s"}` +
              (rows.length > ROWS_MAX ? `; the latest ${ROWS_MAX} rows of ${rows.length} shown` : "") +
              `. Click a bar to see its event.`
            : "No requests, tool calls or waits yet.";
    }

    function drawUsage(width) {
        if (!points.length) { usageBox.replaceChildren(); usageNote.textContent = "No requests have ended yet."; return; }
        const right = 84;
        const w = Math.max(80, width - LABEL_W - right);
        const sc = scale(w);
        const height = 170, top = AXIS_H, ph = height - top - 20;
        // The sums only grow: the last point is the highest.
        const maxTok = Math.max(1, sum.in, sum.out);
        const maxUsd = Math.max(1e-9, sum.usd);
        const yT = (v) => top + ph - (v / maxTok) * ph;
        const yU = (v) => top + ph - (v / maxUsd) * ph;
        const X = (t) => LABEL_W + sc.x(t);
        const x0 = X(first), xEnd = X(sc.end);
        const step = (key, y) => {
            let d = `M${x0},${y(0)}`;
            for (const q of points) d += ` H${X(q.t)} V${y(q[key])}`;
            return `${d} H${xEnd}`;
        };
        const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "tl-svg usage-svg", role: "group",
                               "aria-label": `Cumulative tokens and cost: ${sum.in} input tokens, ${sum.out} output tokens, ${usd(sum.usd)} after ${points.length} requests` },
            axis(sc, top, ph, w),
            s("text", { x: LABEL_W - 6, y: top + 4, "text-anchor": "end", class: "tl-tick" }, `${maxTok} tok`),
            s("text", { x: LABEL_W - 6, y: top + ph, "text-anchor": "end", class: "tl-tick" }, "0"),
            s("text", { x: LABEL_W + w + 6, y: top + 4, class: "tl-tick" }, usd(maxUsd)),
            s("text", { x: LABEL_W + w + 6, y: top + ph, class: "tl-tick" }, "$0"),
            s("line", { x1: LABEL_W, x2: LABEL_W + w, y1: top + ph, y2: top + ph, class: "tl-axisline" }),
            s("path", { d: step("in", yT), class: "usage-line usage-in" }),
            s("path", { d: step("out", yT), class: "usage-line usage-out" }),
            s("path", { d: step("usd", yU), class: "usage-line usage-usd" }));
        // A marker for each of the latest POINTS_MAX requests (the lines go through all).
        for (const q of points.slice(-POINTS_MAX)) {
            const text = `after ${q.label} (${q.requestId}), ${new Date(q.t).toISOString().slice(11, 23)}: ` +
                         `${q.in} input tokens, ${q.out} output tokens, ${usd(q.usd)}`;
            const g = s("g", { class: "usage-point", tabindex: 0, role: "button", "aria-label": text, "data-offset": q.offset,
                               "data-request": q.requestId, "data-in": q.in, "data-out": q.out, "data-usd": q.usd,
                               onclick: () => pick(q.offset),
                               onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(q.offset); } } },
                title(text),
                s("circle", { cx: X(q.t), cy: yT(q.in), r: 3.5, class: "usage-dot usage-in" }),
                s("circle", { cx: X(q.t), cy: yT(q.out), r: 3.5, class: "usage-dot usage-out" }),
                s("rect", { x: X(q.t) - 3, y: yU(q.usd) - 3, width: 6, height: 6, class: "usage-dot usage-usd" }));
            svg.append(g);
        }
        usageBox.replaceChildren(svg);
        usageNote.textContent = `${sum.in} input tokens, ${sum.out} output tokens, ${usd(sum.usd)} over ${points.length} request${points.length === 1 ? "" : "s"}` +
            " (each request's usage as it ended, a fork's source's before the fork included).";
    }

    function draw() {
        if (first === null) return;
        const width = Math.max(320, Math.floor(timelineCard.clientWidth - 26) || 640);
        drawTimeline(width);
        drawUsage(width);
    }

    function pick(offset) {
        selected = offset;
        for (const el of timelineCard.querySelectorAll(".tl-selected")) el.classList.remove("tl-selected");
        for (const el of timelineCard.querySelectorAll(`.tl-bar[data-offset="${CSS.escape(offset)}"]`)) el.classList.add("tl-selected");
        onPick(offset);
    }

    // Redrawn when the cards' width changes (a narrower window, the phone layout).
    let lastWidth = 0;
    const ro = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
        const wd = timelineCard.clientWidth;
        if (wd && wd !== lastWidth) { lastWidth = wd; soon(); }
    }) : null;
    if (ro) ro.observe(timelineCard);

    return {
        timelineCard, usageCard,
        add(env) { if (fold(env)) soon(); },
        leave() { clearTimeout(timer); if (ro) ro.disconnect(); },
    };
}
