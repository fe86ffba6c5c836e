// session.js: one session, live. Its events come over EventSource
// (/v1/sessions/{id}/events?live=sse): the browser resumes after a dropped or
// server-ended response with Last-Event-ID, and the page says so in the timeline.
// Every event is shown once: an offset seen twice is counted as a duplicate (the
// test asserts there are none), never shown twice.
import { api, enc, eventsUrl } from "./api.js";
import { age, append, clear, cost, h, json, short, statusBadge, toast, usd } from "./dom.js";
import { flowPicture } from "./flow.js";
import { lineageCard } from "./lineage.js";
import { sessionPictures } from "./pictures.js";

// The catalogue (docs/events.md): EventSource delivers a named event only to a
// listener for that name.
const TYPES = ["session:created", "session:forked", "session:cancelled", "session:budget_exceeded", "workflow:started", "workflow:completed",
    "workflow:failed", "phase:entered", "phase:exited", "step:started", "step:completed", "agent:started",
    "agent:completed", "provider:request_started", "provider:request_ended", "provider:request_cancelled",
    "provider:request_retried", "provider:failover", "reply:failed", "text:delta", "thinking:delta", "tool:called", "tool:result",
    "tool:approved", "tool:loop_stopped", "tool:server_failed", "state:updated", "input:requested", "input:received",
    "input:expired", "message:user", "cancel:requested", "stop:requested",
    "reply:stopped", "session:compacted", "compact:requested", "timer:set", "timer:fired", "signal:received", "message"];

const TIMELINE_MAX = 2000;

// A time in ms since the epoch, as the page's clock shows it.
function when(ms) {
    const d = new Date(Number(ms));
    return Number.isFinite(d.getTime()) ? d.toLocaleString() : String(ms);
}

export function sessionPage(main, id) {
    const conn = h("span", { class: "conn", role: "status", "aria-live": "polite" }, "connecting…");
    const counters = h("span", { class: "muted", id: "conn-counters" });
    const summary = h("dl", { class: "kv", "aria-label": "Summary" });
    const cancelBtn = h("button", { type: "button", class: "danger", onclick: cancel }, "Cancel session");
    const reconnectBtn = h("button", { type: "button", onclick: () => reconnect("by hand") }, "Reconnect");
    const chat = h("div", { class: "chat", id: "chat", "aria-label": "Conversation", role: "log" });
    // The conversation at the slider's position (hidden while the slider follows the tail).
    const pastNote = h("p", { class: "past-note", role: "status" });
    const pastChat = h("div", { class: "chat", id: "chat-at", "aria-label": "Conversation at that position" });
    const past = h("div", { class: "past", id: "past", hidden: true }, pastNote, pastChat);
    const checkpoint = h("section", { class: "card checkpoint", id: "checkpoint", hidden: true, "aria-label": "Waiting for you" });
    // A sleep or wait step: what the session waits for (a time, signals), and a signal to send.
    const waiting = h("section", { class: "card checkpoint", id: "waiting", hidden: true, "aria-label": "Waiting for" });
    const timeline = h("ol", { class: "timeline", id: "timeline", "aria-label": "Events" });
    const slider = h("input", { type: "range", id: "travel", min: "0", max: "0", value: "0", step: "1" });
    const travelLabel = h("output", { for: "travel", id: "travel-label" }, "");
    const travelView = h("pre", { id: "travel-state", "aria-label": "State at that position" });
    const forkBtn = h("button", { type: "button", id: "fork", disabled: true, onclick: fork }, "Fork here");
    const compose = composeForm();
    // A workflow session: its workflow drawn, the phase it is in marked (flow.js).
    const flowBox = h("div", { id: "flow" });
    const flowCard = h("section", { class: "card", "aria-label": "Phases", hidden: true }, h("h2", {}, "Phases"), flowBox);
    // The tree of forks it belongs to, each session a link (lineage.js).
    const lineage = lineageCard(id);
    // Its timeline and its tokens and cost over time, drawn from the same events
    // (pictures.js); a click on a bar shows its event in the list.
    const pictures = sessionPictures({ onPick: showEvent });

    main.append(
        h("h1", {}, "Session ", h("span", { id: "session-id" }, id)),
        h("div", { class: "row" }, conn, counters, reconnectBtn, cancelBtn,
          h("a", { href: "#/sessions" }, "All sessions")),
        h("section", { class: "card", "aria-label": "Session" }, summary),
        pictures.timelineCard, pictures.usageCard,
        h("div", { class: "session-grid" },
          h("div", {},
            checkpoint, waiting,
            h("h2", {}, "Conversation"), past, chat, compose),
          h("div", {},
            flowCard,
            lineage.el,
            h("section", { class: "card travel", "aria-label": "Time travel" },
              h("h2", {}, "Time travel"),
              h("label", { for: "travel" }, "Position (events)"), slider,
              h("div", { class: "row" }, travelLabel, forkBtn), travelView),
            h("h2", {}, "Events"), timeline)));

    // ---- the event stream -------------------------------------------------------
    const seen = new Set();
    const nextIds = []; // the SSE id of each event: the offset after it
    let events = 0, dups = 0, opens = 0, reconnects = 0, lastId = "", es = null, closed = false, retryTimer = 0;
    let following = true; // the slider follows the tail until moved
    let isWorkflow = false; // a workflow session takes no chat messages

    // A toast of this page; none once it is left (an answer that comes back later).
    function say(msg, opts) {
        if (!closed) toast(msg, opts);
    }
    function setConn(text, cls) {
        conn.textContent = text;
        conn.className = `conn ${cls || ""}`;
    }
    function showCounters() {
        counters.textContent = `${events} events · ${reconnects} reconnects · ${dups} duplicates`;
        counters.dataset.events = events;
        counters.dataset.reconnects = reconnects;
        counters.dataset.duplicates = dups;
        showPosition();
    }
    // The summary's position: where the page has read to, moved with every event
    // (deltas included, which do not refresh the rest of the summary); the API's
    // figures only until the first event comes.
    const position = h("dd", { id: "session-position" });
    function showPosition(s) {
        if (events) position.textContent = `${lastId} (${events} events)`;
        else if (s) position.textContent = `${s.position} (${s.eventCount} events)`;
    }
    function note(text) {
        timeline.append(h("li", { class: "reconnect" }, text));
        timeline.scrollTop = timeline.scrollHeight;
    }
    function connect(from) {
        if (closed) return;
        es = new EventSource(eventsUrl(id, from));
        es.addEventListener("open", () => {
            opens++;
            if (opens > 1) {
                reconnects++;
                note(`reconnected at ${new Date().toLocaleTimeString()}, resuming after ${lastId || "the start"}`);
            }
            setConn("● live", "conn-live");
            showCounters();
        });
        es.addEventListener("error", () => {
            if (closed) return;
            if (es.readyState === EventSource.CLOSED) {
                // Refused (401, 404...) or gone: try again from where we are, later.
                setConn("○ disconnected, retrying…", "conn-down");
                clearTimeout(retryTimer);
                retryTimer = setTimeout(() => connect(lastId || "-1"), 2000);
            } else {
                setConn("○ reconnecting…", "conn-down");
            }
        });
        for (const t of TYPES) es.addEventListener(t, onEvent);
    }
    function reconnect(why) {
        if (es) es.close();
        note(`connection closed ${why}`);
        setConn("○ reconnecting…", "conn-down");
        connect(lastId || "-1");
    }
    function onEvent(e) {
        let env;
        try { env = JSON.parse(e.data); } catch { return; }
        if (e.lastEventId) lastId = e.lastEventId;
        if (!env || !env.offset) return;
        if (seen.has(env.offset)) {
            dups++;
            showCounters();
            return;
        }
        seen.add(env.offset);
        nextIds.push(e.lastEventId || env.offset);
        events++;
        showCounters();
        addToTimeline(env);
        applyToChat(env);
        pictures.add(env);
        slider.max = String(events);
        if (following) {
            slider.value = String(events);
            travelLabel.textContent = `event ${events} of ${events} (live)`;
            forkBtn.disabled = false;
        } else {
            travelLabel.textContent = `event ${slider.value} of ${events}`;
        }
        if (env.type !== "text:delta" && env.type !== "thinking:delta") refreshSoon();
    }

    function addToTimeline(env) {
        const li = h("li", { "data-offset": env.offset },
            h("time", { datetime: env.createdAt, title: env.createdAt }, (env.createdAt || "").slice(11, 23)),
            h("span", { class: "type" }, env.type),
            h("span", { class: "payload", title: short(env.payload, 2000) }, short(env.payload)));
        const stick = timeline.scrollTop + timeline.clientHeight >= timeline.scrollHeight - 8;
        timeline.append(li);
        while (timeline.children.length > TIMELINE_MAX) timeline.removeChild(timeline.firstChild);
        if (stick) timeline.scrollTop = timeline.scrollHeight;
    }

    // The event at offset in the list, scrolled to and marked (a bar of the timeline
    // or a point of the usage chart was clicked).
    function showEvent(offset) {
        for (const li of timeline.querySelectorAll("li.picked")) li.classList.remove("picked");
        const li = [...timeline.children].find((x) => x.dataset.offset === offset);
        if (!li) { say(`That event is no longer in the list (the latest ${TIMELINE_MAX} are kept)`); return; }
        li.classList.add("picked");
        li.tabIndex = -1;
        li.scrollIntoView({ block: "center" });
        li.focus({ preventScroll: true });
    }

    // ---- the conversation, built from the events --------------------------------
    const replies = new Map(); // requestId -> {box, text, thinking, tools}
    const calls = new Map();   // callId -> element
    // A workflow's agent step: its replies are shown under the agent's name, and its
    // output (agent:completed) is its last reply: shown apart only if no reply of the
    // step had text (so it is never shown twice).
    let agentRun = null;       // {agent, replies: [r...]} between agent:started and agent:completed
    let failedOver = false;    // a provider:failover moved the request in progress to a fallback
    function stickChat(fn) {
        const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
        fn();
        if (atEnd && following) chat.lastElementChild?.scrollIntoView?.({ block: "end" });
    }
    function reply(rid) {
        let r = replies.get(rid);
        if (!r) {
            const text = h("div", { class: "text" });
            const thinkingText = h("div", { class: "text" });
            const thinking = h("details", { hidden: true }, h("summary", {}, "thinking"), thinkingText);
            const flags = h("span", { class: "flags" });
            const usage = h("div", { class: "usage" });
            const box = h("article", { class: "msg msg-assistant", "data-request": rid },
                h("div", { class: "who" }, agentRun ? `agent ${agentRun.agent}` : "assistant", flags), thinking, text, usage);
            r = { box, text, thinking, thinkingText, flags, usage };
            replies.set(rid, r);
            if (agentRun) agentRun.replies.push(r);
            chat.append(box);
        }
        return r;
    }
    // Keep the first n characters (code points) of el's text, dropping what follows
    // (its markers before that point stay).
    function keepChars(el, n) {
        let left = n;
        for (const node of [...el.childNodes]) {
            if (node.nodeType !== Node.TEXT_NODE) {
                if (left <= 0) node.remove();
                continue;
            }
            const cps = Array.from(node.data);
            if (left >= cps.length) left -= cps.length;
            else if (left > 0) { node.data = cps.slice(0, left).join(""); left = 0; }
            else node.remove();
        }
    }
    function message(role, content, flag, cls) {
        const text = typeof content === "string" ? content : json(content);
        chat.append(h("article", { class: `msg msg-${cls || role}` },
            h("div", { class: "who" }, role, flag ? h("span", { class: "flag" }, flag) : null),
            h("div", { class: "text" }, text)));
    }
    function applyToChat(env) {
        const p = env.payload || {};
        stickChat(() => {
            switch (env.type) {
            case "session:created":
                if (p.input && Object.keys(p.input).length) message("input", p.input, null, "user");
                break;
            case "message:user":
                message("user", p.content, p.mode && p.mode !== "interrupt" ? p.mode : null);
                break;
            case "provider:request_started": {
                // A compaction's summarization request is no reply: session:compacted shows it.
                if (p.purpose === "compaction") break;
                // A retry that continues a cut attempt (docs/events.md, "A reply
                // continued") goes on in that attempt's reply: its text kept up to
                // the characters it says, then a marker, then the continuation.
                const cont = p.continuedFrom && replies.get(p.continuedFrom.requestId);
                if (cont) {
                    keepChars(cont.text, p.continuedFrom.chars || 0);
                    cont.text.append(h("span", { class: "continued",
                        title: `continued after a cut: request ${p.requestId} goes on from ${p.continuedFrom.requestId}` }));
                    cont.flags.append(h("span", { class: "flag" }, `continued (attempt ${p.attempt})`));
                    cont.box.dataset.request = p.requestId;
                    replies.set(p.requestId, cont);
                    break;
                }
                const r = reply(p.requestId);
                if (p.attempt > 1) r.flags.append(h("span", { class: "flag" }, `attempt ${p.attempt}`));
                // After a failover, each attempt says which fallback serves it.
                if (failedOver) r.flags.append(h("span", { class: "flag failover" }, `via ${p.provider}/${p.model}`));
                break;
            }
            case "provider:failover": {
                const pair = (x) => `${(x || {}).provider || "?"}/${(x || {}).model || "?"}`;
                failedOver = true;
                message("system", `failed over from ${pair(p.from)} to ${pair(p.to)}: ${p.cause || ""}` +
                    (p.status ? ` (HTTP ${p.status})` : p.error ? ` (${p.error})` : ""), null, "assistant");
                break;
            }
            case "text:delta":
                reply(p.requestId).text.append(document.createTextNode(p.text || ""));
                break;
            case "thinking:delta": {
                const r = reply(p.requestId);
                r.thinking.hidden = false;
                r.thinkingText.append(document.createTextNode(p.text || ""));
                break;
            }
            case "tool:called": {
                const el = h("div", { class: "tool", "data-call": p.callId },
                    h("div", {}, h("strong", {}, "tool "), p.name || "", p.server ? h("span", { class: "muted" }, ` (${p.server})`) : null),
                    h("pre", {}, short(p.arguments, 4000)));
                calls.set(p.callId, el);
                (p.requestId ? reply(p.requestId).box : chat).append(el);
                break;
            }
            case "tool:result": {
                const el = calls.get(p.callId) || chat;
                if (p.isError || p.failed) el.classList.add("tool-error");
                el.append(h("div", {}, h("strong", {}, p.failed ? "failed" : p.isError ? "error" : "result"),
                    p.durationMs !== undefined ? h("span", { class: "muted" }, ` ${p.durationMs} ms`) : null),
                    h("pre", {}, short(p.result, 4000)));
                break;
            }
            case "provider:request_ended":
                failedOver = false;     /* the next request starts with the agent's own provider */
                if (replies.has(p.requestId)) {
                    const u = p.usage || {};
                    replies.get(p.requestId).usage.textContent =
                        `${u.inputTokens || 0} in · ${u.outputTokens || 0} out · ${usd(p.costUsd)}${p.stopReason ? ` · ${p.stopReason}` : ""}`;
                }
                break;
            case "provider:request_cancelled":
                if (replies.has(p.requestId))
                    replies.get(p.requestId).flags.append(h("span", { class: "flag" }, p.reason + (p.error ? `: ${p.error}` : "")));
                break;
            case "reply:failed":
                failedOver = false;
                message("system", `the reply failed: ${p.error || ""}`, null, "assistant");
                break;
            case "reply:stopped":
                message("system", "the reply was stopped", null, "assistant");
                break;
            case "session:compacted": {
                // The older history was summarized: the summary, collapsed, where it happened.
                const est = `${p.tokensBefore ?? "?"} → ${p.tokensAfter ?? "?"} tokens (estimated)`;
                const why = { budget: "over the context budget", overflow: "the provider said the prompt was too long",
                    request: "asked for" }[p.reason] || p.reason || "";
                const box = h("article", { class: "msg msg-compacted", "data-compacted": p.upTo || "" },
                    h("div", { class: "who" }, "compacted", h("span", { class: "flag" }, why)));
                if (p.summary !== undefined) {
                    box.append(h("div", { class: "usage" }, `the conversation before this point is summarized: ${est}`),
                        h("details", {}, h("summary", {}, "summary"), h("div", { class: "text" }, p.summary)));
                } else {
                    box.append(h("div", { class: "usage" }, `nothing compacted: ${p.error || ""}`));
                }
                chat.append(box);
                break;
            }
            case "session:budget_exceeded":
                message("system", `budget exceeded (${p.limit || "?"}: ${p.spent ?? "?"} of ${p.max ?? "?"}): ` +
                    (p.reason === "timeout" ? "no answer in time" : "the answer was no"), null, "assistant");
                break;
            case "agent:started":
                agentRun = { agent: p.agent || "", replies: [] };
                break;
            case "agent:completed": {
                const run = agentRun;
                agentRun = null;
                const last = run && [...run.replies].reverse().find((r) => r.text.textContent);
                if (last) last.box.dataset.output = "true";
                else if (p.output !== undefined) message(`agent ${p.agent || ""}`, p.output, null, "assistant");
                break;
            }
            case "phase:entered":
                phaseVisits.set(p.phase, (phaseVisits.get(p.phase) || 0) + 1);
                if (flow) flow.visit(p.phase);
                markPhase(p.phase, "running");
                break;
            case "input:requested":
                markPhase(phaseNow, "awaiting_input");
                break;
            case "timer:set":
                message("system", `${p.step !== undefined ? `step ${p.step}: ` : ""}waits until ${when(p.dueAt)}`, null, "assistant");
                break;
            case "timer:fired":
                message("system", `the timer due at ${when(p.dueAt)} fired`, null, "assistant");
                break;
            case "signal:received":
                message(`signal ${p.name || ""}`, p.payload === undefined ? null : p.payload, null, "user");
                break;
            case "input:received": case "input:expired":
                markPhase(phaseNow, "running");
                break;
            case "session:cancelled": case "workflow:completed": case "workflow:failed":
                markPhase(phaseNow, env.type === "session:cancelled" ? "cancelled" : env.type.slice(9));
                agentRun = null;
                message("system", env.type + (p.error ? `: ${p.error}` : p.reason ? `: ${p.reason}` : ""), null, "assistant");
                break;
            }
        });
    }

    // ---- the workflow's picture: the phase entered last marked, as events come -------
    const phaseVisits = new Map();
    let flow = null, flowAsked = false, phaseNow = "", phaseStatus = "";
    function markPhase(phase, status) {
        phaseNow = phase || "";
        phaseStatus = status;
        if (flow) flow.mark(phaseNow, phaseStatus);
    }
    async function loadFlow(s) {
        if (flowAsked || !s.workflow) return;
        flowAsked = true;
        flowCard.hidden = false;
        const v = s.workflowVersion ? `?version=${enc(s.workflowVersion)}` : "";
        try {
            const d = await api("GET", `/v1/workflows/${enc(s.workflow)}${v}`);
            if (closed) return;
            flow = flowPicture(d.document || {});
            for (const [ph, n] of phaseVisits) for (let i = 0; i < n; i++) flow.visit(ph);
            flow.mark(phaseNow, phaseStatus);
            clear(flowBox).append(flow.el);
        } catch (e) { clear(flowBox).append(h("p", { class: "forbidden" }, e.message)); }
    }

    // ---- summary and checkpoint (the session's derived state) --------------------
    let refreshTimer = 0, current = null, asked = 0, shown = 0;
    function refreshSoon() {
        // At most one refresh per 250 ms, however many events come (never postponed).
        if (refreshTimer) return;
        refreshTimer = setTimeout(() => { refreshTimer = 0; refresh(); }, 250);
    }
    async function refresh() {
        // Answers may come back out of order: an older one never replaces a newer.
        const n = ++asked;
        let s;
        try { s = await api("GET", `/v1/sessions/${enc(id)}`); } catch (e) {
            if (closed || n < shown) return;
            shown = n;
            clear(summary).append(h("dt", {}, "error"), h("dd", { class: "forbidden" }, e.message));
            return;
        }
        if (closed || n < shown) return;
        shown = n;
        current = s;
        const u = s.usage || {};
        append(clear(summary), [
            h("dt", {}, "status"), h("dd", { id: "session-status" }, statusBadge(s.status), s.error ? h("span", { class: "text" }, ` ${s.error}`) : ""),
            h("dt", {}, s.agent ? "agent" : "workflow"),
            h("dd", {}, h("a", { href: s.agent ? `#/agents/${enc(s.agent)}` : `#/workflows/${enc(s.workflow)}` }, s.agent || s.workflow),
              s.phase ? ` · phase ${s.phase}` : ""),
            s.parent ? [h("dt", {}, "forked from"), h("dd", {}, h("a", { href: `#/session/${enc(s.parent)}` }, s.parent), ` at ${s.forkOffset}`)] : null,
            h("dt", {}, "usage"), h("dd", { id: "session-usage" }, `${u.inputTokens || 0} in · ${u.outputTokens || 0} out · ${cost(s)}`),
            h("dt", {}, "position"), position,
            h("dt", {}, "age"), h("dd", {}, age(s.createdMs)),
            s.queued && s.queued.length ? [h("dt", {}, "queued"), h("dd", {}, `${s.queued.length} message(s)`)] : null]);
        showPosition(s);
        cancelBtn.disabled = ["completed", "failed", "cancelled"].includes(s.status) && !!s.workflow;
        isWorkflow = !!s.workflow;
        loadFlow(s);
        compose.hidden = isWorkflow || !past.hidden;   /* the past takes no messages */
        showCheckpoint(s.pendingInput);
        showWaiting(s);
    }

    // A sleep or wait step open: its timer and the signals it waits for (one button
    // each, the payload JSON from the field); the signals kept for a later wait.
    // Each pane is drawn again only when what it shows changed: a refresh of the
    // session (every event) must not wipe what somebody is typing into it.
    let waitingShown = "", checkpointShown = "";
    function showWaiting(s) {
        const names = Array.isArray(s.waitingFor) ? s.waitingFor : [];
        const kept = Array.isArray(s.signals) ? s.signals : [];
        const key = JSON.stringify([s.timerAt || 0, names, kept.map((k) => k.name)]);
        if (key === waitingShown) return;
        waitingShown = key;
        clear(waiting);
        waiting.hidden = !s.timerAt && !names.length && !kept.length;
        if (waiting.hidden) return;
        waiting.append(h("h2", {}, names.length ? "Waiting for a signal" : s.timerAt ? "Sleeping" : "Signals kept"));
        if (names.length) waiting.append(h("p", { id: "waiting-signals" }, "Signals: ", names.join(", ")));
        if (s.timerAt) waiting.append(h("p", { class: "muted" }, names.length ? "Times out " : "Until ",
            h("time", { datetime: new Date(s.timerAt).toISOString(), id: "waiting-until" }, when(s.timerAt))));
        if (kept.length) waiting.append(h("p", { class: "muted", id: "waiting-kept" },
            `Kept for a later wait: ${kept.map((k) => k.name).join(", ")}`));
        if (!names.length) return;
        const payload = h("input", { id: "signal-payload", placeholder: "payload (JSON, optional)" });
        const send = async (name) => {
            let body;
            try { body = payload.value.trim() ? JSON.parse(payload.value) : undefined; } catch { say("Not sent: the payload is not JSON"); return; }
            try {
                await api("POST", `/v1/sessions/${enc(id)}/signals/${enc(name)}`, body);
                say(`Signal ${name} sent`);
                refreshSoon();
            } catch (e) { say(`Not sent: ${e.message}`); }
        };
        waiting.append(h("div", { class: "row" }, h("label", { for: "signal-payload" }, "Payload"), payload),
            h("div", { class: "row", role: "group", "aria-label": "Send a signal" },
                names.map((n) => h("button", { type: "button", "data-signal": n, onclick: () => send(n) }, `Send ${n}`))));
    }

    function showCheckpoint(p) {
        const key = JSON.stringify(p || null);
        if (key === checkpointShown) return;
        checkpointShown = key;
        clear(checkpoint);
        checkpoint.hidden = !p;
        if (!p) return;
        const answer = async (response) => {
            try {
                await api("POST", `/v1/sessions/${enc(id)}/input`, { interactionId: p.interactionId, response });
                say("Answer sent");
                refreshSoon();
            } catch (e) { say(`Not sent: ${e.message}`); }
        };
        const exp = p.expiresAt ? new Date(p.expiresAt) : null;
        checkpoint.append(h("h2", {}, "Waiting for you: ", p.interactionId),
            h("p", { class: "text", id: "checkpoint-prompt" }, p.prompt || ""),
            exp ? h("p", { class: "muted" }, "Expires ", h("time", { datetime: p.expiresAt, id: "checkpoint-expiry" },
                `${exp.toLocaleString()} (in ${age(Date.now() - (exp - Date.now()))})`)) : null);
        if (p.input === "budget") {
            // A budget was reached: a new value for its limit goes on, "End session" says no.
            const b = p.budget || {};
            const inp = h("input", { id: "checkpoint-budget", type: "number", min: "0", step: "any", required: true,
                value: b.max ? String(b.max * 2) : "" });
            checkpoint.append(h("p", { class: "muted", id: "checkpoint-budget-used" },
                `${b.limit || "budget"}: ${b.spent ?? "?"} used of ${b.max ?? "?"}`),
            h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); answer(Number(inp.value)); } },
                h("label", { for: "checkpoint-budget" }, `New ${b.limit || "limit"}`), inp,
                h("button", { type: "submit", class: "primary" }, "Raise and go on"),
                h("button", { type: "button", class: "danger", onclick: () => answer(false) }, "End session")));
        } else if (p.input === "approval") {
            checkpoint.append(h("div", { class: "row" },
                h("button", { type: "button", class: "primary", onclick: () => answer(true) }, "Approve"),
                h("button", { type: "button", class: "danger", onclick: () => answer(false) }, "Reject")));
        } else if (p.input === "choice") {
            checkpoint.append(h("div", { class: "row", role: "group", "aria-label": "Choices" },
                (p.options || []).map((o) => h("button", { type: "button", onclick: () => answer(o) }, o))));
        } else {
            const inp = h("input", { id: "checkpoint-text", required: true });
            checkpoint.append(h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); answer(inp.value); } },
                h("label", { for: "checkpoint-text" }, "Answer"), inp, h("button", { type: "submit", class: "primary" }, "Answer")));
        }
    }

    // ---- talking, cancelling ----------------------------------------------------
    function composeForm() {
        const text = h("textarea", { id: "message", required: true, rows: 3 });
        const modes = ["interrupt", "queue", "background"].map((m) =>
            h("label", {}, h("input", { type: "radio", name: "mode", value: m, checked: m === "interrupt" }), ` ${m}`));
        const help = h("p", { class: "muted", id: "mode-help" },
            "interrupt: stop the reply in progress and answer this; queue: answer after it; background: add to the conversation, no reply.");
        const form = h("form", { class: "compose card", "aria-label": "Send a message", onsubmit: async (e) => {
            e.preventDefault();
            const mode = form.querySelector("input[name=mode]:checked").value;
            try {
                await api("POST", `/v1/sessions/${enc(id)}/messages`, { content: text.value, mode });
                text.value = "";
            } catch (err) { say(`Not sent: ${err.message}`); }
        } }, h("label", { for: "message" }, "Message"), text,
        h("fieldset", { "aria-describedby": "mode-help" }, h("legend", { class: "muted" }, "Mode"), modes), help,
        h("button", { type: "submit", class: "primary" }, "Send"));
        text.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit(); });
        return form;
    }
    async function cancel() {
        try {
            await api("POST", `/v1/sessions/${enc(id)}/cancel`);
            say("Cancel requested");
        } catch (e) { say(`Not cancelled: ${e.message}`); }
    }

    // ---- time travel ------------------------------------------------------------
    let travelTimer = 0, travelAt = "";
    slider.addEventListener("input", () => {
        const i = Number(slider.value);
        following = i >= events;
        travelLabel.textContent = following ? `event ${i} of ${events} (live)` : `event ${i} of ${events}`;
        forkBtn.disabled = i < 1;
        clearTimeout(travelTimer);
        if (following) { showLive(); return; }
        travelTimer = setTimeout(() => showAt(i), 150);
    });
    // Back to the live conversation (the slider at the tail).
    function showLive() {
        travelAt = "";
        past.hidden = true;
        chat.hidden = false;
        compose.hidden = isWorkflow;
        travelView.textContent = "";
        delete travelView.dataset.at;
    }
    // The conversation as it was at position i: the state's messages, as text.
    function showPast(i, s) {
        clear(pastChat);
        for (const m of s.messages || []) {
            const flag = m.interrupted ? "interrupted" : m.compacted ? "compacted" : null;
            const text = typeof m.content === "string" ? m.content : json(m.content);
            pastChat.append(h("article", { class: `msg msg-${m.role === "user" ? "user" : "assistant"}` },
                h("div", { class: "who" }, m.role, flag ? h("span", { class: "flag" }, flag) : null),
                h("div", { class: "text" }, text)));
        }
        if (!(s.messages || []).length) pastChat.append(h("p", { class: "muted" }, "No messages yet at this position."));
        clear(pastNote);
        pastNote.append(`The conversation at event ${i} of ${events} (${s.status}). `,
            h("button", { type: "button", onclick: () => {
                slider.value = String(events);
                following = true;
                travelLabel.textContent = `event ${events} of ${events} (live)`;
                showLive();
            } }, "Back to live"));
        past.hidden = false;
        chat.hidden = true;
        compose.hidden = true;
    }
    async function showAt(i) {
        if (i < 1) { travelView.textContent = ""; showPast(0, { status: "before its first event" }); return; }
        const at = nextIds[i - 1];
        travelAt = at;
        try {
            const s = await api("GET", `/v1/sessions/${enc(id)}/state?at=${enc(at)}`);
            if (travelAt !== at) return;
            const lines = [`at ${at}`, `status: ${s.status}${s.phase ? `, phase ${s.phase}` : ""}`,
                `usage: ${s.usage.inputTokens} in, ${s.usage.outputTokens} out, ${cost(s)}`];
            if (s.state && Object.keys(s.state).length) lines.push(`state: ${json(s.state)}`);
            if (s.pendingInput) lines.push(`waiting for: ${s.pendingInput.interactionId}`);
            if (s.waitingFor) lines.push(`waiting for a signal: ${s.waitingFor.join(", ")}`);
            if (s.timerAt) lines.push(`timer due: ${when(s.timerAt)}`);
            if (s.signals && s.signals.length) lines.push(`signals kept: ${s.signals.map((k) => k.name).join(", ")}`);
            for (const m of s.messages || [])
                lines.push(`${m.role}${m.interrupted ? " [interrupted]" : ""}: ${short(m.content ?? "", 400)}`);
            travelView.textContent = lines.join("\n");
            travelView.dataset.at = at;
            showPast(i, s);
        } catch (e) { travelView.textContent = e.message; }
    }
    async function fork() {
        const i = Number(slider.value);
        const at = nextIds[i - 1];
        if (!at) return;
        try {
            const s = await api("POST", `/v1/sessions/${enc(id)}/fork`, { at });
            say(`Forked as ${s.id}`, { next: true });
            location.hash = `#/session/${enc(s.id)}`;
        } catch (e) { say(`Not forked: ${e.message}`); }
    }

    showCounters();
    refresh();
    connect("-1");
    return {
        leave() {
            closed = true;
            clearTimeout(retryTimer);
            clearTimeout(refreshTimer);
            pictures.leave();
            if (es) es.close();
        },
    };
}
