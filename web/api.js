// api.js: the dstream API from the page. The token stays in this tab's
// sessionStorage; it goes as "Authorization: Bearer" on fetch and as
// ?access_token= on EventSource (which cannot send headers).
const KEY = "dstream.token";

export function token() {
    return sessionStorage.getItem(KEY) || "";
}

export function setToken(t) {
    if (t) sessionStorage.setItem(KEY, t);
    else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
    constructor(status, code, message) {
        super(message || code || `HTTP ${status}`);
        this.status = status;
        this.code = code;
    }
}

// A read the server was too busy for (503, or 429 over a rate limit) is asked again
// after its Retry-After (at most 5 s), up to this many times: a busy moment does not
// leave the page with an error. Writes are never repeated.
const READ_RETRIES = 4;

export async function api(method, path, body) {
    const headers = {};
    const t = token();
    if (t) headers.Authorization = `Bearer ${t}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let res;
    for (let attempt = 0; ; attempt++) {
        res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                                  cache: "no-store", credentials: "omit" });
        if (method !== "GET" || (res.status !== 503 && res.status !== 429) || attempt === READ_RETRIES) break;
        const after = Number(res.headers.get("Retry-After"));
        await res.body?.cancel();
        await new Promise((r) => setTimeout(r, 1000 * (after > 0 && after <= 5 ? after : 1)));
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!res.ok) {
        const e = (data && data.error) || {};
        if (res.status === 401) document.dispatchEvent(new CustomEvent("dstream:unauthorized"));
        throw new ApiError(res.status, e.code, e.message || `HTTP ${res.status}`);
    }
    return data;
}

export const enc = encodeURIComponent;

// The URL of a session's events over SSE, from an offset (the stream's start: -1).
export function eventsUrl(id, offset) {
    const q = new URLSearchParams({ live: "sse", offset: offset || "-1" });
    const t = token();
    if (t) q.set("access_token", t);
    return `/v1/sessions/${enc(id)}/events?${q}`;
}
