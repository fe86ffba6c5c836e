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
//
// AISDK_LAST_ONLY=1 sends only the new message (below). Prints {status, error,
// resumed, messages} as JSON once the chat is done.
import { readFileSync } from "node:fs";
import { AbstractChat, DefaultChatTransport } from "ai";

const [api, chatId, command, arg, abortAt] = process.argv.slice(2);

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
        ...(process.env.AISDK_LAST_ONLY === "1" && {
            prepareSendMessagesRequest: ({ id, messages, trigger }) => ({ body: { id, trigger, message: messages.at(-1) } }),
        }),
    }),
    onChange: (c) => {
        const last = c.messages.at(-1);
        if (abortAt && !stopping && last?.role === "assistant" && text(last).length >= Number(abortAt)) {
            stopping = true;
            c.stop();
        }
    },
});

let resumed = null;
if (command === "send") await chat.sendMessage({ text: arg });
else if (command === "resume") {
    const before = chat.messages.length;
    await chat.resumeStream();
    resumed = chat.messages.length !== before || JSON.stringify(chat.messages) !== JSON.stringify(initial);
} else if (command === "regenerate")
    await chat.regenerate(process.env.AISDK_REGENERATE_ID ? { messageId: process.env.AISDK_REGENERATE_ID } : {});
else throw new Error(`unknown command ${command}`);

console.log(JSON.stringify({ status: chat.status, error: chat.error?.message ?? null, resumed, messages: chat.messages }));
