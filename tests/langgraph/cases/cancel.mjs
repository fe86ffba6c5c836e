// runs.create, then runs.cancel while its reply streams: the reply stops, the thread
// goes on.
export default async (client, agent, text) => {
    const thread = await client.threads.create({ graphId: agent });
    const run = await client.runs.create(thread.thread_id, agent, {
        input: { messages: [{ role: "user", content: text }] } });
    for (let i = 0; i < 100; i++) {
        const s = await client.threads.getState(thread.thread_id);
        const last = s.values.messages.at(-1);
        if (last?.type === "ai" && last.content.length > 0) break;
        await new Promise((r) => setTimeout(r, 50));
    }
    await client.runs.cancel(thread.thread_id, run.run_id);
    const joined = await client.runs.join(thread.thread_id, run.run_id);
    return { thread, run, joined, status: (await client.runs.get(thread.thread_id, run.run_id)).status };
};
