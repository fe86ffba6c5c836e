// dom.js: build elements. Text is always a text node (never parsed as HTML): the
// viewer shows model output and tool results, which may contain anything.
export function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
        else if (k === "class") el.className = v;
        else if (k === "value") el.value = v;
        else if (k === "checked" || k === "disabled" || k === "open") el[k] = !!v;
        else el.setAttribute(k, v === true ? "" : String(v));
    }
    append(el, children);
    return el;
}

export function append(el, children) {
    for (const c of children.flat(Infinity)) {
        if (c === undefined || c === null || c === false) continue;
        el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
}

export function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
}

export function json(v) {
    return JSON.stringify(v, null, 2);
}

export function short(v, n = 160) {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    return s.length > n ? s.slice(0, n) + "…" : s;
}

export function age(ms) {
    if (!ms) return "";
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 120) return `${s}s`;
    if (s < 7200) return `${Math.round(s / 60)}m`;
    if (s < 172800) return `${Math.round(s / 3600)}h`;
    return `${Math.round(s / 86400)}d`;
}

export function usd(x) {
    return typeof x === "number" ? `$${x.toFixed(x < 0.01 ? 6 : 4)}` : "";
}

// A session's cost (GET /v1/sessions/{id}, or a row of the list): what it spent
// itself first, then what a fork inherited and what recordings answered, apart, so
// that nothing reads as spent twice. Without the breakdown (an older server), costUsd.
export function cost(s) {
    const c = s && s.cost;
    if (!c) return usd(s && s.costUsd);
    const parts = [`${usd(c.spentUsd)} spent`];
    if (c.inheritedUsd > 0) parts.push(`${usd(c.inheritedUsd)} inherited`);
    if (c.recordedUsd > 0) parts.push(`${usd(c.recordedUsd)} from recordings`);
    return parts.join(" · ");
}

// A short message at the bottom of the page, for 6 s or until the page changes;
// with {next: true} it is for the page about to open (kept across one change).
let toastTimer, toastNext = false;
export function toast(msg, opts) {
    const t = document.getElementById("toast");
    t.textContent = msg;
    toastNext = !!(opts && opts.next);
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.textContent = ""; }, 6000);
}

// The page changed: its toast goes, unless it was given for the new page.
export function toastPageChanged() {
    if (toastNext) { toastNext = false; return; }
    clearTimeout(toastTimer);
    document.getElementById("toast").textContent = "";
}

export function statusBadge(st) {
    return h("span", { class: `status status-${st || "unknown"}` }, st || "?");
}
