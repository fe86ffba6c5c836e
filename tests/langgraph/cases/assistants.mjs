// assistants.search and assistants.get: the agents and workflows, read-only.
export default async (client, agent, workflow) => ({
    search: await client.assistants.search({ limit: 100 }),
    agent: await client.assistants.get(agent),
    workflow: await client.assistants.get(workflow),
    byGraph: await client.assistants.search({ graphId: agent }),
});
