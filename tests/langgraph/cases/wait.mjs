// runs.wait, runs.create then runs.join, runs.get and runs.list, on one thread.
export default async (client, agent, first, second) => {
    const thread = await client.threads.create({ graphId: agent });
    const waited = await client.runs.wait(thread.thread_id, agent, {
        input: { messages: [{ role: "user", content: first }] } });
    const run = await client.runs.create(thread.thread_id, agent, {
        input: { messages: [{ role: "user", content: second }] } });
    const joined = await client.runs.join(thread.thread_id, run.run_id);
    return { thread, waited, run, joined, got: await client.runs.get(thread.thread_id, run.run_id),
        list: await client.runs.list(thread.thread_id), older: await client.runs.list(thread.thread_id, { offset: 1 }) };
};
