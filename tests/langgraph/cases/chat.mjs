// A chat through threads and runs: threads.create, runs.stream with messages-tuple and
// values, then threads.get / getState / getHistory and threads.search.
import collect from "./collect.mjs";

export default async (client, agent, first, second) => {
    const thread = await client.threads.create();
    const streamMode = ["messages-tuple", "values"];
    const one = await collect(client.runs.stream(thread.thread_id, agent, {
        input: { messages: [{ role: "user", content: first }] }, streamMode }));
    const two = await collect(client.runs.stream(thread.thread_id, agent, {
        input: { messages: [{ type: "human", content: second }] }, streamMode: [...streamMode, "updates"] }));
    const state = await client.threads.getState(thread.thread_id);
    const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
    const earlier = await client.threads.getState(thread.thread_id, history[1].checkpoint.checkpoint_id);
    return {
        created: thread, one, two, state, history, earlier,
        got: await client.threads.get(thread.thread_id),
        found: await client.threads.search({ ids: [thread.thread_id] }),
    };
};
