// The LangGraph SDK's Client, unchanged, against dstream (tests/http/28-langgraph.bats):
// `node run.mjs API CASE [ARGS...]` runs cases/CASE.mjs, whose default export gets a
// Client pointed at API (dstream's /v1/langgraph) and ARGS, and prints what it returns
// as JSON. LG_TOKEN: a bearer token sent with every request (else none: the test
// stack's proxy adds the admin's).
import { Client } from "@langchain/langgraph-sdk";

const [apiUrl, name, ...args] = process.argv.slice(2);
const defaultHeaders = process.env.LG_TOKEN ? { Authorization: `Bearer ${process.env.LG_TOKEN}` } : {};
const client = new Client({ apiUrl, defaultHeaders, callerOptions: { maxRetries: 0 } });
const { default: run } = await import(`./cases/${name}.mjs`);
try {
    process.stdout.write(JSON.stringify(await run(client, ...args)) + "\n");
} catch (e) {
    process.stdout.write(JSON.stringify({ thrown: String(e?.message ?? e), status: e?.status ?? null }) + "\n");
    process.exitCode = 1;
}
