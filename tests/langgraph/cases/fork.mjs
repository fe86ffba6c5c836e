// A fork by threads.copy: the copy has the source's history and goes on alone.
import collect from "./collect.mjs";

export default async (client, thread, agent, text) => {
    const copy = await client.threads.copy(thread);
    const run = await collect(client.runs.stream(copy.thread_id, agent, {
        input: { messages: [{ role: "user", content: text }] }, streamMode: "values" }));
    return { copy, run, source: await client.threads.getState(thread), fork: await client.threads.getState(copy.thread_id) };
};
