// The AI SDK's own chat client, unchanged, against dstream (tests/http/27-aisdk.bats):
// the `ai` package's AbstractChat (what @ai-sdk/react's useChat and the other
// frameworks' Chat wrap) with its DefaultChatTransport pointed at
// /v1/aisdk/chat/{agent}. The only code of ours is the chat's state holder, the
// interface each UI framework implements (an array here).
//
//   node chat.mjs API CHAT_ID send TEXT [ABORT_AT]  send TEXT; with ABORT_AT, stop the
//                                                   client (chat.stop(): the fetch is
//                                                   aborted) once the reply's text has
//                                                   that many characters
//   node chat.mjs API CHAT_ID resume [FILE]         a reload: a new Chat holding the
//                                                   messages in FILE (JSON) resumes
//                                                   (GET {api}/{id}/stream)
//   node chat.mjs API CHAT_ID regenerate FILE       regenerate the last reply of FILE's chat
//                                                   (AISDK_REGENERATE_ID: the reply with that id)
//   node chat.mjs API CHAT_ID approve FILE yes|no [REASON]
//                                                   a new Chat holding FILE's messages answers
//                                                   each tool call waiting for approval
//                                                   (addToolApprovalResponse); the SDK sends the
//                                                   answers itself (sendAutomaticallyWhen)
//
// With AISDK_APPROVE=yes|no (AISDK_REASON), send answers the approvals its reply asks
// for in the same Chat, as a page would.
//
// AISDK_LAST_ONLY=1 sends only the new message (below); AISDK_READY=FILE gets each
// response's status as it arrives. Prints {status, error,
// resumed, messages} as JSON once the chat is done.
import { readFileSync, writeFileSync } from "node:fs";
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

const [api, chatId, command, arg, abortAt, reason] = process.argv.slice(2);

class ArrayState {
    constructor(messages, onChange) {
        this.messages = messages;
        this.status = "ready";
        this.error = undefined;
        this.onChange = onChange;
    }
    pushMessage(m) { this.messages = this.messages.concat(m); this.onChange(); }
    popMessage() { this.messages = this.messages.slice(0, -1); this.onChange(); }
    replaceMessage(i, m) {
        this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)];
        this.onChange();
    }
    snapshot(x) { return structuredClone(x); }
}

class Chat extends AbstractChat {
    constructor({ messages = [], onChange = () => {}, ...init }) {
        super({ ...init, state: new ArrayState(messages, () => onChange(this)) });
    }
}

const text = (m) => (m?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join("");

const initial = command !== "send" && arg ? JSON.parse(readFileSync(arg, "utf8")) : [];
let stopping = false;
const chat = new Chat({
    id: chatId,
    messages: initial,
    // AISDK_LAST_ONLY=1: send only the new message, as the SDK's guide to persisting
    // chats shows (prepareSendMessagesRequest).
    transport: new DefaultChatTransport({
        api,
        // AISDK_READY=FILE: each response's status is written to FILE as it arrives (a
        // test holding the reply knows when the client is reading it).
        ...(process.env.AISDK_READY && {
            fetch: async (...a) => {
                const r = await fetch(...a);
                writeFileSync(process.env.AISDK_READY, `${r.status}\n`);
                return r;
            },
        }),
        ...(process.env.AISDK_LAST_ONLY === "1" && {
            prepareSendMessagesRequest: ({ id, messages, trigger }) => ({ body: { id, trigger, message: messages.at(-1) } }),
        }),
    }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onChange: (c) => {
        const last = c.messages.at(-1);
        if (abortAt && !stopping && last?.role === "assistant" && text(last).length >= Number(abortAt)) {
            stopping = true;
            c.stop();
        }
    },
});

// The tool parts of the last message waiting for approval.
const asking = () => (chat.messages.at(-1)?.parts ?? []).filter((p) => p.state === "approval-requested");
// Answer each (approved: yes), then wait until the request the SDK sends by itself is done.
async function answer(approved, why) {
    const ids = asking().map((p) => p.approval.id);
    for (const id of ids) await chat.addToolApprovalResponse({ id, approved, ...(why && { reason: why }) });
    const until = Date.now() + 30000;
    const busy = () => chat.status === "submitted" || chat.status === "streaming" ||
        (chat.messages.at(-1)?.parts ?? []).some((p) => p.state === "approval-responded");
    while (ids.length && busy() && chat.status !== "error" && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    return ids;
}

let resumed = null, answered = null;
if (command === "send") {
    await chat.sendMessage({ text: arg });
    if (process.env.AISDK_APPROVE) answered = await answer(process.env.AISDK_APPROVE === "yes", process.env.AISDK_REASON);
} else if (command === "approve") answered = await answer(abortAt === "yes", reason);
else if (command === "resume") {
    const before = chat.messages.length;
    await chat.resumeStream();
    resumed = chat.messages.length !== before || JSON.stringify(chat.messages) !== JSON.stringify(initial);
} else if (command === "regenerate")
    await chat.regenerate(process.env.AISDK_REGENERATE_ID ? { messageId: process.env.AISDK_REGENERATE_ID } : {});
else throw new Error(`unknown command ${command}`);

console.log(JSON.stringify({ status: chat.status, error: chat.error?.message ?? null, resumed, answered, messages: chat.messages }));
