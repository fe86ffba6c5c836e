// lineage.js: a session's tree of forks (GET /v1/sessions/{id}/lineage) as nested
// lists you can click through, and two sessions side by side from where they part
// (GET /v1/sessions/{a}/diff?with={b}), the first difference marked. Everything from
// the API is inserted as text (dom.js).
import { api, enc } from "./api.js";
import { append, clear, h, short, statusBadge } from "./dom.js";

// The number of events an offset stands for (its first 16 digits).
const eventNo = (off) => (typeof off === "string" && /^\d{16}_/.test(off) ? Number(off.slice(0, 16)) : null);

// The lineage card of session id: the tree from its root; each session a link that
// opens it, the one shown marked, every other one with "compare" (the diff page).
// Returns {el, load()}: load asks the API again (a fork made since).
export function lineageCard(id) {
    const tree = h("div", { id: "lineage-tree" });
    const state = h("p", { class: "muted", role: "status" });
    const el = h("section", { class: "card", "aria-label": "Lineage", id: "lineage" }, h("h2", {}, "Lineage"), state, tree);
    function node(n) {
        const li = h("li", {});
        if (n.hidden) {
            li.className = "lin-hidden";
            li.append(h("span", { class: "lin-node muted", title: "a session your token may not read" }, "(hidden)"));
        } else {
            const me = n.id === id;
            li.dataset.session = n.id;
            li.append(h("span", { class: `lin-node${me ? " lin-current" : ""}` },
                me ? h("strong", { class: "lin-id", "aria-current": "page" }, n.id)
                   : h("a", { class: "lin-id", href: `#/session/${enc(n.id)}` }, n.id),
                statusBadge(n.status),
                n.forkedAt ? h("span", { class: "muted lin-at", title: n.forkedAt }, `forked at event ${n.forkedAtEvent}`) : null,
                n.deleted ? h("span", { class: "forbidden" }, "deleted") : null,
                !me && !n.deleted ? h("a", { class: "lin-compare", href: `#/diff/${enc(id)}/${enc(n.id)}`,
                                             title: `compare ${id} with ${n.id}` }, "compare") : null));
        }
        if (n.truncated) li.append(h("span", { class: "muted" }, " (more forks not shown)"));
        if (n.children && n.children.length) li.append(h("ul", {}, n.children.map(node)));
        return li;
    }
    async function load() {
        state.textContent = "loading…";
        try {
            const l = await api("GET", `/v1/sessions/${enc(id)}/lineage`);
            clear(tree).append(h("ul", { class: "lineage", "aria-label": "Forks" }, node(l.root)));
            const forks = l.sessions - 1;
            state.textContent = (forks ? `${l.sessions} sessions in this tree` : "No forks.") +
                (l.truncated ? ` (cut at ${l.limit} looked at)` : "");
        } catch (e) { state.className = "forbidden"; state.textContent = e.message; }
    }
    load();
    return { el, load };
}

// One event of a side, as a line: where, type, payload.
function eventItem(ev, first) {
    const payload = ev.payload !== undefined ? short(ev.payload, 200) : `(${ev.payloadBytes} bytes)`;
    return h("li", { class: first ? "diff-first" : "", "data-offset": ev.offset },
        first ? h("span", { class: "diff-mark" }, "first difference") : null,
        h("span", { class: "muted" }, `event ${eventNo(ev.offset)}`), " ",
        h("span", { class: "type" }, ev.type), h("div", { class: "payload text" }, payload));
}

// The diff page: #/diff/A/B[?at=X&withAt=Y]. The two sessions side by side from
// where they part, each side's first event after the agreement marked; then the
// paths where their states differ.
export function diffPage(main, a, b, params) {
    const q = new URLSearchParams({ with: b, context: "10" });
    if (params.get("at")) q.set("at", params.get("at"));
    if (params.get("withAt")) q.set("withAt", params.get("withAt"));
    const state = h("p", { class: "muted", role: "status" }, "loading…");
    const body = h("div", {});
    main.append(h("h1", {}, "Compare ", h("a", { href: `#/session/${enc(a)}` }, a), " with ",
                  h("a", { href: `#/session/${enc(b)}` }, b)), state, body);
    api("GET", `/v1/sessions/${enc(a)}/diff?${q}`).then((d) => {
        const shared = d.shared ? `${eventNo(d.shared)} events stored once for both (up to ${d.shared})` : "no stored history in common";
        state.textContent = `${shared}; then ${d.compared} more agree.` +
            (d.truncated ? " The comparison stopped there (10000 events)." : "");
        const side = (s, name) => h("section", { class: "card diff-side", "aria-label": `${name}: ${s.id}`, "data-side": name },
            h("h2", {}, `${name}: `, h("a", { href: `#/session/${enc(s.id)}` }, s.id)),
            h("p", { class: "muted" }, `compared up to event ${eventNo(s.at)}; agrees before event ${eventNo(s.until)}`),
            s.first.length ? h("ol", { class: "timeline diff-events" }, s.first.map((ev, i) => eventItem(ev, i === 0 && !d.same)))
                           : h("p", { class: "muted" }, "Nothing after the agreement."));
        const sameNote = d.same ? h("p", { class: "diff-same", role: "note" }, "The events agree to the end of both.") : null;
        const rows = d.state.changes.map((c) => h("tr", {},
            h("td", {}, h("code", {}, c.path)),
            h("td", { class: "text" }, "before" in c ? short(c.before, 300) : c.beforeBytes ? `(${c.beforeBytes} bytes)` : "—"),
            h("td", { class: "text" }, "after" in c ? short(c.after, 300) : c.afterBytes ? `(${c.afterBytes} bytes)` : "—")));
        append(clear(body), [sameNote,
            h("div", { class: "diff-grid" }, side(d.a, "a"), side(d.b, "b")),
            h("h2", {}, "State"),
            h("div", { class: "scroll" }, h("table", { "aria-label": "State differences", id: "diff-state" },
                h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Path"), h("th", { scope: "col" }, a),
                                    h("th", { scope: "col" }, b))),
                h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 3, class: "muted" }, "The states are the same."))))),
            d.state.truncated ? h("p", { class: "muted" }, "More paths differ: the first 200 are shown.") : null]);
    }, (e) => { state.className = "forbidden"; state.textContent = e.message; });
    return {};
}
