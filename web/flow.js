// flow.js: a workflow document drawn as a picture (docs/workflows.md): its phases in
// the document's order, top to bottom, each a box with its steps and its transitions
// ("if CONDITION → phase", "otherwise → phase", "always → phase"); then an arrow
// from each transition to the phase it leads to, in lanes right of the boxes (a
// transition back to an earlier phase, or to its own, is a loop: dashed). An arrow
// is a bracket (a box with its top, right and bottom borders) from the transition's
// line to the phase's head, and a CSS triangle; both placed by the CSSOM, which the
// viewer's CSP allows (no style attribute, no markup).
// The boxes and their text are the picture's readable content (the arrows are
// decoration, hidden from screen readers); every name, condition and step text is a
// text node, since documents come from API clients.
import { h, short } from "./dom.js";

const str = (v) => (typeof v === "string" ? v : "");

// One step as a line: its kind, what it runs, and its name.
function stepLine(st) {
    const kind = str(st && st.kind) || "?";
    let what = "";
    if (kind === "agent") what = str(st.agent);
    else if (kind === "tool") what = `${str(st.server)} · ${str(st.tool)}`;
    else if (kind === "update") what = st.set && typeof st.set === "object" ? `sets ${Object.keys(st.set).join(", ")}` : "";
    else if (kind === "human") what = `${str(st.id)} (${str(st.input)})`;
    else if (kind === "sleep") what = st.until !== undefined ? `until ${str(st.until)}` : `for ${str(String(st.duration))}`;
    else if (kind === "wait") what = st.signals && typeof st.signals === "object"
        ? `for ${Object.keys(st.signals).join(" or ")}${st.timeout !== undefined ? `, ${String(st.timeout)} at most` : ""}` : "";
    const name = str(st && st.name);
    const text = what && name ? `${what}: ${name}` : what || name;
    return h("li", { "data-kind": kind }, h("span", { class: "flow-kind" }, kind), " ",
             h("span", { title: text.length > 90 ? text : null }, short(text, 90)));
}

// The picture of doc (a workflow document). Returns {el, mark(phase, status),
// visit(phase)}: mark sets the phase a session is in (status: the session's), visit
// counts an entry into a phase. el redraws its arrows whenever its size changes.
export function flowPicture(doc) {
    const phases = Array.isArray(doc && doc.phases) ? doc.phases.filter((p) => p && typeof p === "object") : [];
    const index = new Map();
    phases.forEach((p, i) => { if (!index.has(str(p.name))) index.set(str(p.name), i); });
    const initial = index.has(str(doc.initialPhase)) ? str(doc.initialPhase) : str(phases[0] && phases[0].name);
    const list = h("ol", { class: "flow-phases" });
    const boxes = [], edges = [];
    phases.forEach((p, i) => {
        const name = str(p.name);
        const steps = Array.isArray(p.steps) ? p.steps : [];
        const trans = Array.isArray(p.transitions) ? p.transitions : [];
        const now = h("span", { class: "flow-now", hidden: true });
        const visits = h("span", { class: "flow-visits muted" });
        const head = h("div", { class: "flow-head" }, h("span", { class: "flow-name" }, name),
            name === initial ? h("span", { class: "flow-badge" }, "start") : null,
            p.terminal ? h("span", { class: "flow-badge flow-badge-end" }, "end") : null, visits, now);
        const next = h("ul", { class: "flow-next" });
        let caught = false;
        trans.forEach((t) => {
            const to = str(t && t.to);
            const when = str(t && t.when);
            const label = when ? `if ${when}` : trans.length === 1 ? "always" : "otherwise";
            const row = h("li", { "data-to": to, class: caught ? "flow-unreached" : null },
                h("span", { class: "flow-when", title: label.length > 120 ? label : null }, short(label, 120)),
                " → ", h("span", { class: "flow-to" }, to),
                !index.has(to) ? h("span", { class: "forbidden" }, " (no such phase)") : null,
                caught ? h("span", { class: "muted" }, " (never tried: an earlier one always matches)") : null);
            if (!when) caught = true;
            next.append(row);
            if (index.has(to)) edges.push({ from: i, to: index.get(to), row });
        });
        const box = h("li", { class: `flow-phase${name === initial ? " flow-start" : ""}${p.terminal ? " flow-end" : ""}`,
                               "data-phase": name, "data-visits": "0" }, head,
            steps.length ? h("ol", { class: "flow-steps" }, steps.map(stepLine)) : h("p", { class: "flow-none muted" }, "no steps"),
            trans.length ? next : null,
            p.terminal ? h("p", { class: "flow-none muted" }, "then the workflow completes") : null);
        boxes.push({ box, head, now, visits });
        list.append(box);
    });
    if (!phases.length) list.append(h("li", { class: "muted" }, "No phases."));

    // Lanes: each arrow runs up or down in a lane of its own wherever it would overlap
    // another; the shortest get the lanes nearest the boxes. Decided from the phases'
    // order (a transition leaves from the lower half of its box, arrives at the head).
    const lanes = [];
    for (const e of [...edges].sort((a, b) => Math.abs(a.to - a.from) - Math.abs(b.to - b.from))) {
        const k = [...e.row.parentNode.children].indexOf(e.row);
        const y0 = e.from + 0.5 + k / 64, y1 = e.to;
        const lo = Math.min(y0, y1), hi = Math.max(y0, y1);
        let l = lanes.findIndex((spans) => spans.every(([a, b]) => hi < a || lo > b));
        if (l < 0) { l = lanes.length; lanes.push([]); }
        lanes[l].push([lo, hi]);
        e.lane = l;
    }
    const pic = h("div", { class: "flow-edges", "aria-hidden": "true" });
    const body = h("div", { class: "flow-body" }, list, pic);
    const el = h("figure", { class: "flow", "data-workflow": str(doc.name), "aria-label": `Workflow ${str(doc.name)}: phases and transitions` },
        body);

    let pending = 0;
    function draw() {
        pending = 0;
        const width = body.clientWidth;
        if (!width) return;
        const room = Math.min(16 + lanes.length * 14, Math.max(40, width * 0.35));
        const gap = lanes.length ? (room - 16) / lanes.length : 0;
        const pad = `${Math.round(room)}px`;
        if (list.style.paddingRight !== pad) list.style.paddingRight = pad;
        const at = body.getBoundingClientRect();
        while (pic.firstChild) pic.removeChild(pic.firstChild);
        const px = (n) => `${Math.round(n)}px`;
        for (const e of edges) {
            // The boxes share their right edge (one column): the bracket starts there.
            const from = boxes[e.from].box.getBoundingClientRect(), to = boxes[e.to].head.getBoundingClientRect();
            const row = e.row.getBoundingClientRect();
            const x = from.right - at.left, y0 = row.top + row.height / 2 - at.top;
            const y1 = to.top + to.height / 2 - at.top;
            const lane = 10 + gap * (e.lane + 0.5);
            const back = e.to <= e.from;
            const line = h("div", { class: `flow-edge${back ? " flow-back" : ""}`,
                                    "data-from": str(phases[e.from].name), "data-to": str(phases[e.to].name) });
            line.style.left = px(x);
            line.style.top = px(Math.min(y0, y1) - 1);
            line.style.width = px(lane);
            line.style.height = px(Math.abs(y1 - y0) + 2);
            const head = h("div", { class: `flow-arrow${back ? " flow-back" : ""}` });
            head.style.left = px(x);
            head.style.top = px(y1 - 5);
            pic.append(line, head);
        }
    }
    const later = () => { if (!pending) pending = requestAnimationFrame(draw); };
    new ResizeObserver(later).observe(body);

    const byName = (name) => (index.has(name) ? boxes[index.get(name)] : null);
    const NOW = { completed: "ended here", failed: "failed here", cancelled: "cancelled here", awaiting_input: "waiting here" };
    return {
        el,
        mark(phase, status) {
            for (const b of boxes) {
                b.box.classList.remove("flow-current");
                b.box.removeAttribute("aria-current");
                b.now.hidden = true;
            }
            const b = byName(phase);
            if (!b) return;
            b.box.classList.add("flow-current");
            b.box.setAttribute("aria-current", "step");
            b.now.textContent = NOW[status] || "now";
            b.now.hidden = false;
        },
        visit(phase) {
            const b = byName(phase);
            if (!b) return;
            const n = Number(b.box.dataset.visits) + 1;
            b.box.dataset.visits = String(n);
            b.box.classList.add("flow-visited");
            b.visits.textContent = n > 1 ? `entered ${n}×` : "";
            later();
        },
    };
}
