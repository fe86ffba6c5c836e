// A reply with a tool call through runs.stream with streamMode ["events"]: LangChain's
// callback events (on_chat_model_start / _stream / _end, on_tool_start / _end).
import collect from "./collect.mjs";

export default async (client, agent, text) => {
    const thread = await client.threads.create();
    return collect(client.runs.stream(thread.thread_id, agent, {
        input: { messages: [{ role: "user", content: text }] }, streamMode: ["events"] }));
};
