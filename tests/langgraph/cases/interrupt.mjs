// A workflow's human checkpoint as the SDK's interrupt, answered by a run resumed with
// the SDK's command.
import collect from "./collect.mjs";

export default async (client, workflow, answer) => {
    const thread = await client.threads.create();
    const first = await collect(client.runs.stream(thread.thread_id, workflow, {
        input: { topic: "tests" }, streamMode: ["values", "messages-tuple"] }));
    const waiting = await client.threads.get(thread.thread_id);
    const waitingState = await client.threads.getState(thread.thread_id);
    const resumed = await collect(client.runs.stream(thread.thread_id, workflow, {
        command: { resume: JSON.parse(answer) }, streamMode: ["values", "updates"] }));
    return { first, waiting, waitingState, resumed, done: await client.threads.get(thread.thread_id) };
};
