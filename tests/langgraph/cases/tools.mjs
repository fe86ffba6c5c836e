// A reply with a tool call through runs.stream: the call as a chunk with
// tool_call_chunks, its result as a tool message, the next turn's text; the values
// hold the ai message's tool_calls and the tool message.
import collect from "./collect.mjs";

export default async (client, agent, text) => {
    const thread = await client.threads.create();
    const run = await collect(client.runs.stream(thread.thread_id, agent, {
        input: { messages: [{ role: "user", content: text }] }, streamMode: ["messages-tuple", "values"] }));
    return { run, state: await client.threads.getState(thread.thread_id) };
};
