// app.js: the viewer's pages, chosen by the URL's fragment:
//   #/sessions[?status=S&label=K:V,...&limit=N]   #/session/ID   #/diff/A/B[?at=X&withAt=Y]
//   #/overview[?since=24h&label=K:V,...]   #/agents[/NAME]   #/workflows[/NAME]   #/mcp
import { api, enc, setToken, token } from "./api.js";
import { age, clear, cost as costText, h, json, statusBadge, toast, toastPageChanged, usd } from "./dom.js";
import { flowPicture } from "./flow.js";
import { diffPage } from "./lineage.js";
import { overviewPage } from "./overview.js";
import { sessionPage } from "./session.js";

const main = document.getElementById("main");
let leave = null; // the current page's cleanup (closes its EventSource)

function route() {
    if (leave) { leave(); leave = null; }
    toastPageChanged();
    const hash = location.hash.replace(/^#\/?/, "") || "sessions";
    const [pathPart, query] = hash.split("?");
    const parts = pathPart.split("/").map(decodeURIComponent);
    const params = new URLSearchParams(query || "");
    for (const a of document.querySelectorAll("[data-nav]"))
        a.toggleAttribute("aria-current", a.dataset.nav === parts[0] || ((parts[0] === "session" || parts[0] === "diff") && a.dataset.nav === "sessions"));
    for (const a of document.querySelectorAll("[data-nav][aria-current]")) a.setAttribute("aria-current", "page");
    clear(main);
    let page;
    if (parts[0] === "session" && parts[1]) page = sessionPage(main, parts[1]);
    else if (parts[0] === "diff" && parts[1] && parts[2]) page = diffPage(main, parts[1], parts[2], params);
    else if (parts[0] === "agents" || parts[0] === "workflows") page = docsPage(parts[0], parts[1]);
    else if (parts[0] === "mcp") page = mcpPage();
    else if (parts[0] === "overview") page = overviewPage(main, params);
    else page = sessionsPage(params);
    leave = page && page.leave;
    main.focus({ preventScroll: true });
}

// ---- the sessions list -----------------------------------------------------------

function sessionsPage(params) {
    const status = params.get("status") || "";
    const label = params.get("label") || "";
    const limit = /^[1-9][0-9]{0,2}$/.test(params.get("limit") || "") ? params.get("limit") : "20";
    const cursors = [""]; // the cursor of each page seen, for "Previous"
    let page = 0;
    // The filter is the page's address: status and labels (key:value pairs, commas).
    const go = () => {
        const q = new URLSearchParams();
        if (select.value) q.set("status", select.value);
        if (labels.value.trim()) q.set("label", labels.value.trim());
        location.hash = q.toString() ? `#/sessions?${q}` : "#/sessions";
    };
    const select = h("select", { id: "status-filter", onchange: go },
        ["", "pending", "running", "awaiting_input", "completed", "failed", "cancelled"].map((s) =>
            h("option", { value: s, selected: s === status }, s || "all")));
    const labels = h("input", { id: "label-filter", value: label, placeholder: "team:red,env:prod",
        onkeydown: (e) => { if (e.key === "Enter") go(); }, onchange: go });
    const body = h("tbody");
    const prev = h("button", { type: "button", disabled: true, onclick: () => { page--; load(); } }, "Previous");
    const next = h("button", { type: "button", disabled: true, onclick: () => { page++; load(); } }, "Next");
    const info = h("span", { class: "muted", role: "status" });
    const create = newSessionForm();
    main.append(h("h1", {}, "Sessions"),
        h("div", { class: "row" }, h("label", { for: "status-filter" }, "Status"), select,
          h("label", { for: "label-filter" }, "Labels"), labels, prev, next, info),
        h("table", { "aria-label": "Sessions" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Session"), h("th", { scope: "col" }, "Status"),
            h("th", { scope: "col" }, "Agent or workflow"), h("th", { scope: "col", class: "num" }, "Age"),
            h("th", { scope: "col", class: "num" }, "Spent"))), body),
        create);
    async function load() {
        info.textContent = "loading…";
        const q = new URLSearchParams({ limit });
        if (status) q.set("status", status);
        if (label) q.set("label", label);
        if (cursors[page]) q.set("cursor", cursors[page]);
        let res;
        try { res = await api("GET", `/v1/sessions?${q}`); } catch (e) { info.textContent = e.message; return; }
        clear(body);
        for (const s of res.sessions) {
            const cost = h("td", { class: "num" }, "…");
            body.append(h("tr", { "data-session": s.id },
                h("td", {}, h("a", { href: `#/session/${enc(s.id)}` }, s.id), s.parent ? h("span", { class: "muted" }, ` (fork of ${s.parent})`) : null,
                  ...Object.entries(s.labels || {}).map(([k, v]) => h("span", { class: "label", "data-label": k }, `${k}:${v}`))),
                h("td", {}, statusBadge(s.status)),
                h("td", {}, s.agent ? `agent ${s.agent}` : s.workflow ? `workflow ${s.workflow}` : ""),
                h("td", { class: "num" }, h("time", { datetime: new Date(s.createdMs).toISOString(), title: new Date(s.createdMs).toLocaleString() }, age(s.createdMs))),
                cost));
            // What the session spent itself (a fork's inherited cost is its source's row);
            // the breakdown in the title. A server without it: each row asks its session.
            const show = (d) => {
                cost.textContent = d.cost ? usd(d.cost.spentUsd) : usd(d.costUsd);
                cost.title = costText(d);
            };
            if (s.cost) show(s);
            else api("GET", `/v1/sessions/${enc(s.id)}`).then(show, () => { cost.textContent = "?"; });
        }
        if (!res.sessions.length) body.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No sessions.")));
        cursors[page + 1] = res.nextCursor || "";
        prev.disabled = page === 0;
        next.disabled = !res.nextCursor;
        info.textContent = `page ${page + 1}`;
    }
    load();
    return {};
}

function newSessionForm() {
    const kind = h("select", { id: "new-kind" }, h("option", { value: "agent" }, "agent"), h("option", { value: "workflow" }, "workflow"));
    const name = h("input", { id: "new-name", required: true });
    const input = h("input", { id: "new-input", placeholder: "{}" });
    return h("form", { class: "card", "aria-label": "New session", onsubmit: async (e) => {
        e.preventDefault();
        let inp;
        try { inp = input.value.trim() ? JSON.parse(input.value) : undefined; } catch { toast("The input is not JSON"); return; }
        const body = { [kind.value]: name.value };
        if (inp !== undefined) body.input = inp;
        try {
            const s = await api("POST", "/v1/sessions", body);
            location.hash = `#/session/${enc(s.id)}`;
        } catch (err) { toast(`Cannot start: ${err.message}`); }
    } }, h("h2", {}, "New session"),
    h("div", { class: "row" }, h("label", { for: "new-kind" }, "Kind"), kind, h("label", { for: "new-name" }, "Name"), name,
      h("label", { for: "new-input" }, "Input (JSON)"), input, h("button", { type: "submit", class: "primary" }, "Start")));
}

// ---- agents and workflows: read-only documents (admin can edit) ------------------------

function docsPage(kind, name) {
    const single = kind === "agents" ? "agent" : "workflow";
    if (!name && kind === "workflows") return workflowsPage();
    if (!name) {
        const list = h("ul");
        main.append(h("h1", {}, kind === "agents" ? "Agents" : "Workflows"), list);
        api("GET", `/v1/${kind}`).then((res) => {
            const items = res[kind] || [];
            if (!items.length) list.append(h("li", { class: "muted" }, `No ${kind}.`));
            for (const it of items)
                list.append(h("li", {}, h("a", { href: `#/${kind}/${enc(it.name)}` }, it.name),
                    h("span", { class: "muted" }, it.model ? ` ${it.provider}/${it.model}` : it.version ? ` v${it.version}` : "")));
        }, (e) => list.append(h("li", { class: "forbidden" }, e.message)));
        return {};
    }
    const area = h("textarea", { id: "doc", class: "doc", readonly: true, spellcheck: "false" });
    const state = h("p", { role: "status", class: "muted" });
    const edit = h("button", { type: "button", onclick: () => {
        area.readOnly = false;
        area.focus();
        save.disabled = false;
        state.textContent = "Editing: saving needs an admin token.";
    } }, "Edit");
    const save = h("button", { type: "button", class: "primary", disabled: true, onclick: async () => {
        let doc;
        try { doc = JSON.parse(area.value); } catch { state.textContent = "Not valid JSON."; return; }
        try {
            await api("PUT", `/v1/${kind}/${enc(name)}`, doc);
            state.textContent = "Saved.";
            area.readOnly = true;
            save.disabled = true;
        } catch (e) {
            state.className = "forbidden";
            state.textContent = e.status === 403 ? `Not allowed (403): editing ${kind} needs an admin token. ${e.message}`
                                                 : `Not saved (${e.status}): ${e.message}`;
        }
    } }, "Save");
    const picture = h("div", { id: "picture" });
    main.append(h("h1", {}, `${single} ${name}`), kind === "workflows" ? picture : null,
                h("label", { for: "doc" }, `The ${single}'s document (JSON)`), area,
                h("div", { class: "row" }, edit, save), state);
    api("GET", `/v1/${kind}/${enc(name)}`).then((d) => {
        area.value = json(d);
        if (kind === "workflows" && d && d.document) clear(picture).append(flowPicture(d.document).el);
    }, (e) => { state.textContent = e.message; });
    return {};
}

// The workflows, each drawn (flow.js): its documents are asked 4 at a time.
function workflowsPage() {
    const list = h("ul", { class: "wf-list" });
    const state = h("p", { role: "status", class: "muted" }, "loading…");
    main.append(h("h1", {}, "Workflows"), state, list);
    let gone = false;
    api("GET", "/v1/workflows").then(async (res) => {
        const items = res.workflows || [];
        state.textContent = items.length ? `${items.length} workflow${items.length === 1 ? "" : "s"}` : "No workflows.";
        const slots = items.map((it) => {
            const slot = h("div", {}, h("p", { class: "muted" }, "loading…"));
            list.append(h("li", { class: "card", "data-workflow": it.name },
                h("h2", {}, h("a", { href: `#/workflows/${enc(it.name)}` }, it.name), h("span", { class: "muted" }, ` v${it.latestVersion}`)),
                slot));
            return slot;
        });
        let next = 0;
        const worker = async () => {
            while (!gone && next < items.length) {
                const i = next++;
                try {
                    const d = await api("GET", `/v1/workflows/${enc(items[i].name)}?version=${enc(items[i].latestVersion)}`);
                    const doc = d.document || {};
                    clear(slots[i]).append(doc.description ? h("p", { class: "text" }, doc.description) : null, flowPicture(doc).el);
                } catch (e) { clear(slots[i]).append(h("p", { class: "forbidden" }, e.message)); }
            }
        };
        await Promise.all([worker(), worker(), worker(), worker()]);
    }, (e) => { state.className = "forbidden"; state.textContent = e.message; });
    return { leave() { gone = true; } };
}

// ---- the operator's MCP servers: read-only (admin), with what the runners count ----------

function mcpPage() {
    const body = h("tbody");
    const state = h("p", { role: "status", class: "muted" }, "loading…");
    const bindings = h("ul", { "aria-label": "Bindings" });
    main.append(h("h1", {}, "MCP servers"),
        h("p", { class: "muted" }, "The operator's servers (configured on the machine, never over HTTP); environment values are not shown."),
        h("div", { class: "scroll" }, h("table", { "aria-label": "MCP servers" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Server"), h("th", { scope: "col" }, "Runs"),
            h("th", { scope: "col" }, "Limits"), h("th", { scope: "col", class: "num" }, "Calls"),
            h("th", { scope: "col" }, "Failures"), h("th", { scope: "col", class: "num" }, "Starts"))), body)),
        state, h("h2", {}, "Bindings"), bindings);
    api("GET", "/v1/mcp/servers").then((res) => {
        state.textContent = res.configured ? "" : "No MCP configuration is loaded (DSTREAM_MCP_CONFIG).";
        for (const s of res.servers) {
            const sum = (f) => s.figures.reduce((n, x) => n + f(x), 0);
            const failed = {};
            for (const x of s.figures) for (const [k, v] of Object.entries(x.failures)) failed[k] = (failed[k] || 0) + v;
            const failures = Object.entries(failed).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(", ") || "none";
            const tools = Object.entries(s.tools).map(([k, v]) => `${k}: ${v}`).join(", ");
            body.append(h("tr", { "data-server": s.name },
                h("td", {}, h("strong", {}, s.name)),
                h("td", {}, h("code", {}, [s.command, ...s.args].join(" ")),
                  s.env.length ? h("div", { class: "muted" }, `env: ${s.env.join(", ")} (values not shown)`) : null,
                  tools ? h("div", { class: "muted" }, `tools: ${tools}`) : null),
                h("td", {}, `${s.timeoutMs} ms a call, ${s.concurrency} at once, stopped after ${s.idleStopMs} ms idle`),
                h("td", { class: "num" }, String(sum((x) => x.calls))),
                h("td", {}, failures),
                h("td", { class: "num" }, String(sum((x) => x.starts)))));
        }
        if (!res.servers.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No servers.")));
        const b = Object.entries(res.bindings || {});
        for (const [k, v] of b) bindings.append(h("li", {}, `${k} → ${v.tool} on ${v.server}`));
        if (!b.length) bindings.append(h("li", { class: "muted" }, "No bindings."));
    }, (e) => {
        state.className = "forbidden";
        state.textContent = e.status === 403 ? `Not allowed (403): the MCP servers are shown to admin tokens only. ${e.message}`
                                             : e.message;
    });
    return {};
}

// ---- the token ---------------------------------------------------------------------

function tokenUi() {
    const form = document.getElementById("token-form");
    const input = document.getElementById("token-input");
    const st = document.getElementById("token-state");
    const show = () => { st.textContent = token() ? "token set" : "no token"; };
    form.addEventListener("submit", (e) => {
        e.preventDefault();
        setToken(input.value.trim());
        input.value = "";
        show();
        route();
    });
    document.getElementById("token-forget").addEventListener("click", () => { setToken(""); show(); route(); });
    document.addEventListener("dstream:unauthorized", () => {
        st.textContent = token() ? "token refused (401)" : "a token is needed (401)";
        input.focus();
    });
    show();
}

tokenUi();
window.addEventListener("hashchange", route);
route();
