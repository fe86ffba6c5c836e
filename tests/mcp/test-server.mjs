#!/usr/bin/env node
// A small MCP server over stdio for the runner's tests (Node built-ins only).
//
//   node tests/mcp/test-server.mjs [--state DIR] [--exit-at-start] [--page-size N] [--grow]
//
// Newline-delimited JSON-RPC 2.0 on stdin/stdout; diagnostics on stderr. Its tools
// list comes in pages of --page-size (default 3) with nextCursor, so clients must
// follow cursors. Every message received is appended to DIR/received.jsonl and
// every side-effecting call is counted in DIR/count (both with --state), so tests
// can check what reached the server and how often.
//
// Tools:
//   echo {text}            readOnly: answers text
//   count {delayMs}        side-effecting: adds 1 to DIR/count, answers the new
//                          value after delayMs (the count is written first)
//   count_get              readOnly: the current count
//   tick                   readOnly (a clock read): adds 1 to DIR/ticks and answers
//                          "tick N"; while DIR/hold exists it never answers
//   crash                  exits with status 3 while the call is in flight
//   hang                   never answers
//   fail                   answers isError: true
//   notify                 sends notifications/message and a ping request of its
//                          own, answers once the ping was answered
//   big {bytes}            answers a text of that many bytes
//   ask                    sends a sampling/createMessage request of its own and
//                          answers with what the client said to it
// --exit-at-start: writes a line to stderr and exits with status 3 at once.
// --grow: at its first tools/call it adds the tool `grown` {text} (readOnly: answers
// "grown: " and the text) and sends notifications/tools/list_changed, before it
// answers that call, so the client knows of the change before it sees the result.

import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
const stateDir = opt('--state', null);
const pageSize = Number(opt('--page-size', '3'));
const grow = args.includes('--grow');
let grown = false;

if (args.includes('--exit-at-start')) {
    process.stderr.write('test-server: asked to exit at start\n');
    process.exit(3);
}

const send = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const record = (obj) => {
    if (stateDir) fs.appendFileSync(path.join(stateDir, 'received.jsonl'), JSON.stringify(obj) + '\n');
};
const countFile = stateDir ? path.join(stateDir, 'count') : null;
const readCount = () => {
    try { return Number(fs.readFileSync(countFile, 'utf8')) || 0; } catch { return 0; }
};

const obj = (props, required = []) => ({ type: 'object', properties: props, required });
const TOOLS = [
    { name: 'echo', description: 'Answer the text given', inputSchema: obj({ text: { type: 'string' } }, ['text']),
      annotations: { readOnlyHint: true } },
    { name: 'count', description: 'Add one to the counter', inputSchema: obj({ delayMs: { type: 'integer' } }),
      annotations: { readOnlyHint: false, destructiveHint: false } },
    { name: 'count_get', description: 'Read the counter', inputSchema: obj({}), annotations: { readOnlyHint: true } },
    { name: 'tick', description: 'Read the clock', inputSchema: obj({}), annotations: { readOnlyHint: true } },
    { name: 'crash', description: 'Exit mid-call', inputSchema: obj({}) },
    { name: 'hang', description: 'Never answer', inputSchema: obj({}), annotations: { readOnlyHint: true } },
    { name: 'fail', description: 'Answer an error', inputSchema: obj({}), annotations: { readOnlyHint: true } },
    { name: 'notify', description: 'Notify, ping, then answer', inputSchema: obj({}), annotations: { readOnlyHint: true } },
    { name: 'ask', description: 'Ask the client to sample', inputSchema: obj({}), annotations: { readOnlyHint: true } },
    { name: 'big', description: 'Answer a long text', inputSchema: obj({ bytes: { type: 'integer' } }),
      annotations: { readOnlyHint: true } },
];

const text = (t, isError = false) => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });
const pendingPings = new Map();   // our ping id -> the call to answer after it
let nextOwnId = 1;

function call(id, name, a) {
    switch (name) {
    case 'echo': return send({ jsonrpc: '2.0', id, result: text(String(a.text ?? '')) });
    case 'grown':
        if (!grown) break;
        return send({ jsonrpc: '2.0', id, result: text(`grown: ${String(a.text ?? '')}`) });
    case 'count': {
        const n = readCount() + 1;
        fs.writeFileSync(countFile, String(n));
        process.stderr.write(`test-server: count is now ${n}\n`);
        setTimeout(() => send({ jsonrpc: '2.0', id, result: text(`count ${n}`) }), Number(a.delayMs) || 0);
        return;
    }
    case 'count_get': return send({ jsonrpc: '2.0', id, result: text(`count ${readCount()}`) });
    case 'tick': {
        if (!stateDir || fs.existsSync(path.join(stateDir, 'hold'))) return;
        const f = path.join(stateDir, 'ticks');
        let n = 0;
        try { n = Number(fs.readFileSync(f, 'utf8')) || 0; } catch { /* none yet */ }
        fs.writeFileSync(f, String(n + 1));
        return send({ jsonrpc: '2.0', id, result: text(`tick ${n + 1}`) });
    }
    case 'crash':
        process.stderr.write('test-server: crashing mid-call\n');
        return process.exit(3);
    case 'hang': return;
    case 'fail': return send({ jsonrpc: '2.0', id, result: text('the tool failed on purpose', true) });
    case 'notify': {
        send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'notify tool says hello' } });
        const pid = `srv-${nextOwnId++}`;
        pendingPings.set(pid, id);
        return send({ jsonrpc: '2.0', id: pid, method: 'ping' });
    }
    case 'ask': {
        const pid = `srv-${nextOwnId++}`;
        pendingPings.set(pid, { id, ask: true });
        return send({ jsonrpc: '2.0', id: pid, method: 'sampling/createMessage',
            params: { messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }], maxTokens: 5 } });
    }
    case 'big': {
        const n = Math.max(0, Math.min(Number(a.bytes) || 0, 8 << 20));
        let s = '';
        const line = 'the quick brown fox jumps over the lazy dog 0123456789\n';
        while (s.length < n) s += line;
        return send({ jsonrpc: '2.0', id, result: text(s.slice(0, n)) });
    }
    }
    return send({ jsonrpc: '2.0', id, error: { code: -32602, message: `unknown tool ${name}` } });
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
    if (!line.trim()) return;
    let m;
    try { m = JSON.parse(line); } catch {
        return send({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } });
    }
    record(m);
    if (m.method === undefined) {          // an answer to our ping
        const pending = pendingPings.get(m.id);
        if (pending === undefined) return;
        pendingPings.delete(m.id);
        if (pending.ask) {
            const said = m.error ? `refused ${m.error.code}: ${m.error.message}` : 'accepted';
            return send({ jsonrpc: '2.0', id: pending.id, result: text(said) });
        }
        return send({ jsonrpc: '2.0', id: pending, result: text('notified and pinged') });
    }
    if (m.id === undefined) return;         // notifications: initialized, cancelled
    switch (m.method) {
    case 'initialize':
        return send({ jsonrpc: '2.0', id: m.id, result: {
            protocolVersion: '2025-06-18', capabilities: { tools: { listChanged: grow } },
            serverInfo: { name: 'dstream-test-server', version: '1.0.0' } } });
    case 'tools/list': {
        const start = Number(m.params?.cursor ?? 0) || 0;
        const page = TOOLS.slice(start, start + pageSize);
        const next = start + pageSize < TOOLS.length ? String(start + pageSize) : undefined;
        return send({ jsonrpc: '2.0', id: m.id, result: { tools: page, ...(next ? { nextCursor: next } : {}) } });
    }
    case 'tools/call':
        if (grow && !grown) {
            grown = true;
            TOOLS.push({ name: 'grown', description: 'A tool added after the first call',
                         inputSchema: obj({ text: { type: 'string' } }, ['text']), annotations: { readOnlyHint: true } });
            send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
        }
        return call(m.id, m.params?.name, m.params?.arguments ?? {});
    case 'ping': return send({ jsonrpc: '2.0', id: m.id, result: {} });
    default: return send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'method not found' } });
    }
});
rl.on('close', () => process.exit(0));
