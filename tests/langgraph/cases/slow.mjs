// A slow reply read twice: by the run's own stream (runs.stream) and, once it is under
// way, by a second reader joining it from its start (runs.joinStream: a reload). Both
// read the whole reply from the log, each word once, reconnecting (as the SDK does by
// itself) when a response ends before the run.
import collect from "./collect.mjs";

export default async (client, agent, text) => {
    const thread = await client.threads.create({ graphId: agent });
    let runId, seen = 0;
    const began = Date.now();
    const own = collect(client.runs.stream(thread.thread_id, agent, {
        input: { messages: [{ role: "user", content: text }] }, streamMode: ["messages-tuple", "values"],
        onRunCreated: ({ run_id }) => { runId = run_id; } }));
    for (let i = 0; i < 200; i++) {
        const s = await client.threads.getState(thread.thread_id);
        seen = s.values.messages.at(-1)?.type === "ai" ? s.values.messages.at(-1).content.length : 0;
        if (runId && seen > 0) break;
        await new Promise((r) => setTimeout(r, 25));
    }
    const joined = await collect(client.runs.joinStream(thread.thread_id, runId));
    const ownEvents = await own;
    return { runId, seen, elapsed: Date.now() - began, own: ownEvents, joined, midway: (await client.runs.get(thread.thread_id, runId)).status };
};
