// lib.mjs: what the browser tests of this directory share: their list of checks, the
// API and the mock provider reached with fetch, Debian's Chromium launched headless,
// and a page watched for script errors and for requests that leave the origin.
import { chromium } from "playwright-core";

export const checks = [];
export const ok = (what) => { checks.push(what); console.log(`# ok ${what}`); };
export function assert(cond, msg) { if (!cond) throw new Error(msg); }

// apiOf(BASE, TOKEN): api(method, path, body, tok = TOKEN), a request to the server
// answering its parsed JSON (null when empty); a status that is not 2xx throws.
export function apiOf(base, token) {
    return async (method, path, body, tok = token) => {
        const res = await fetch(base + path, {
            method, headers: { Authorization: `Bearer ${tok}`, ...(body ? { "Content-Type": "application/json" } : {}) },
            body: body ? JSON.stringify(body) : undefined,
        });
        const text = await res.text();
        if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
        return text ? JSON.parse(text) : null;
    };
}

// scriptOf(MOCK): script(reply), queue a reply on the mock provider.
export function scriptOf(mock) {
    return async (reply) => {
        const res = await fetch(`${mock}/__script`, { method: "POST", body: JSON.stringify(reply) });
        if (!res.ok) throw new Error(`mock: ${res.status}`);
    };
}

export function launch() {
    return chromium.launch({
        executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
        args: ["--no-sandbox", "--headless=new"],
    });
}

// watch(PAGE, BASE): collect the page's script errors and its requests to other
// origins than BASE; the function returned checks there were none (a failed load,
// a 401 and an EventSource's reconnection aside).
export function watch(page, base) {
    const pageErrors = [], external = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") pageErrors.push(m.text()); });
    page.on("request", (r) => { if (!r.url().startsWith(base)) external.push(r.url()); });
    return () => {
        assert(external.length === 0, `requests to other origins: ${external.join(" ")}`);
        const bad = pageErrors.filter((e) => !/Failed to load resource|401|EventSource/.test(e));
        assert(bad.length === 0, `page errors: ${bad.join(" | ")}`);
        ok("no request left the origin, no script error");
    };
}
