#!/usr/bin/env node
// A scriptable mock LLM provider on loopback, for the runner's tests.
//
//   node tests/mock-provider/mock-provider.mjs [--port 0] [--port-file PATH]
//        [--log PATH] [--max-lifetime SECONDS]
//
// Speaks the two streaming wire formats lib/provider.h parses:
//   POST /v1/messages          Anthropic Messages, SSE "event:" + "data:" lines
//   POST /v1/chat/completions  OpenAI Chat Completions, SSE "data: {chunk}" ... [DONE]
//   (either under any path prefix: /gw/v1beta/chat/completions)
// and a control API for tests:
//   POST   /__script    append one reply object, or {"replies": [...]}, to the FIFO
//   GET    /__script    the queued replies
//   DELETE /__script    clear the queue
//   GET    /__requests  the provider requests received: [{method, path, headers, body, time}]
//   DELETE /__requests  forget them
//   PUT    /__default   the reply when the queue is empty (DELETE: the built-in one)
//   PUT    /__default/anthropic, /__default/openai: that wire format's own, before it
//   GET    /__health    {"ok": true}
// See README.md for the reply object. Only Node built-in modules are used.

import http from 'node:http';
import fs from 'node:fs';
import crypto from 'node:crypto';

// ---- options ------------------------------------------------------------------------

const USAGE = 'usage: mock-provider.mjs [--port N] [--port-file PATH] [--log PATH] ' +
    '[--max-lifetime SECONDS]';

function parseArgs(argv) {
    const opts = { port: 0, portFile: null, log: null, maxLifetime: 3600 };
    for (let i = 0; i < argv.length; i++) {
        let arg = argv[i];
        let value = null;
        const eq = arg.indexOf('=');
        if (arg.startsWith('--') && eq > 0) {
            value = arg.slice(eq + 1);
            arg = arg.slice(0, eq);
        }
        const need = () => {
            if (value !== null) return value;
            if (i + 1 >= argv.length) die(`${arg} needs a value`);
            return argv[++i];
        };
        switch (arg) {
        case '--port': opts.port = toInt(need(), arg, 0, 65535); break;
        case '--port-file': opts.portFile = need(); break;
        case '--log': opts.log = need(); break;
        case '--max-lifetime': opts.maxLifetime = toInt(need(), arg, 1, 7 * 24 * 3600); break;
        case '-h': case '--help': process.stdout.write(USAGE + '\n'); process.exit(0);
        default: die(`unknown argument: ${argv[i]}`);
        }
    }
    return opts;
}

function toInt(s, name, min, max) {
    if (!/^\d+$/.test(String(s))) die(`${name}: not a number: ${s}`);
    const n = Number(s);
    if (n < min || n > max) die(`${name}: out of range: ${s}`);
    return n;
}

function die(msg) {
    process.stderr.write(`mock-provider: ${msg}\n${USAGE}\n`);
    process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));

// ---- state --------------------------------------------------------------------------

const BODY_MAX = 8 * 1024 * 1024;
const DEFAULT_REPLY = Object.freeze({
    text: 'Hello from the mock provider.',
    usage: { input: 10, output: 7 },
});
const SECRET_HEADERS = new Set(['x-api-key', 'authorization', 'proxy-authorization',
    'api-key', 'cookie']);

const queue = [];     // scripted replies, shared by both endpoints
let defaultReply = DEFAULT_REPLY; // answered when the queue is empty (/__default)
// A wire format's own default (/__default/anthropic, /__default/openai), before the
// shared one: one format refusing while the other answers (a provider failover).
const kindDefault = { anthropic: null, openai: null };
let requests = [];    // provider requests received, headers as received
// The gate replies with holdAfter wait at (POST /__release opens it; DELETE /__script
// closes it again, for the next test). Open, it lets every hold through, those reached
// after the release too.
let gate = newGate();
let holding = 0;      // replies waiting at the gate now
function newGate() {
    let open;
    const promise = new Promise((resolve) => { open = resolve; });
    return { promise, open };
}
const live = new Set(); // open sockets, destroyed at shutdown

function redactHeaders(headers) {
    const out = {};
    for (const [k, v] of Object.entries(headers)) {
        out[k] = SECRET_HEADERS.has(k.toLowerCase()) ? '[redacted]' : v;
    }
    return out;
}

function logLine(obj) {
    if (!opts.log) return;
    try {
        fs.appendFileSync(opts.log, JSON.stringify(obj) + '\n');
    } catch (e) {
        process.stderr.write(`mock-provider: log: ${e.message}\n`);
    }
}

// ---- small helpers ------------------------------------------------------------------

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function sendJson(res, status, obj, extraHeaders = {}) {
    if (res.headersSent || res.destroyed) return;
    const body = JSON.stringify(obj);
    res.writeHead(status, {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        ...extraHeaders,
    });
    res.end(body);
}

// Split s into pieces of n code points (never inside a surrogate pair).
function splitChars(s, n) {
    const cps = Array.from(s);
    const out = [];
    for (let i = 0; i < cps.length; i += n) out.push(cps.slice(i, i + n).join(''));
    return out;
}

// Split s into about `parts` pieces (at least one, possibly empty).
function splitParts(s, parts) {
    const cps = Array.from(s);
    if (cps.length === 0) return [''];
    const size = Math.max(1, Math.ceil(cps.length / parts));
    return splitChars(s, size);
}

function nonNegInt(v, dflt) {
    return Number.isInteger(v) && v >= 0 ? v : dflt;
}

function normalizeReply(r) {
    const toolCalls = Array.isArray(r.toolCalls) ? r.toolCalls.map((t, i) => ({
        // id "": the call is sent without an id (as some OpenAI-compatible servers do)
        id: typeof t.id === 'string' ? (t.id === '' ? undefined : t.id) : `call_mock_${i + 1}`,
        name: typeof t.name === 'string' ? t.name : 'tool',
        // arguments: an object (serialized here) or a string sent verbatim.
        args: typeof t.arguments === 'string' ? t.arguments
            : JSON.stringify(t.arguments === undefined ? {} : t.arguments),
    })) : [];
    const usage = r.usage && typeof r.usage === 'object' ? r.usage : {};
    return {
        text: typeof r.text === 'string' ? r.text : '',
        thinking: typeof r.thinking === 'string' ? r.thinking : null,
        signature: typeof r.signature === 'string' ? r.signature : null,
        toolCalls,
        stopReason: typeof r.stopReason === 'string' ? r.stopReason : null,
        input: nonNegInt(usage.input, 10),
        output: nonNegInt(usage.output, 7),
        chunkSize: Number.isInteger(r.chunkSize) && r.chunkSize > 0 ? r.chunkSize : 4,
        delayMs: nonNegInt(r.delayMs, 0),
        status: r.overflow === true ? 400 : Number.isInteger(r.status) ? r.status : 200,
        retryAfter: r.retryAfter,
        location: typeof r.location === 'string' ? r.location : null,
        errorType: typeof r.errorType === 'string' ? r.errorType : null,
        errorMessage: typeof r.errorMessage === 'string' ? r.errorMessage : null,
        errorCode: typeof r.errorCode === 'string' ? r.errorCode : null,
        overflow: r.overflow === true,
        errorAfter: nonNegInt(r.errorAfter, null),
        cutAfter: nonNegInt(r.cutAfter, null),
        cutInTool: r.cutInTool === true,
        prefill: r.prefill !== false,
        ping: r.ping === true,
        hang: r.hang === true,
        raw: Array.isArray(r.raw) ? r.raw.map(String) : null,
        stamp: r.stamp === true,
        holdAfter: nonNegInt(r.holdAfter, null),
        deltas: Number.isInteger(r.deltas) && r.deltas > 0 ? Math.min(r.deltas, 100000) : 50,
    };
}

// The text of the last user message of a request body (both formats): a string
// content, or its text blocks joined.
function lastUserText(body) {
    const msgs = Array.isArray(body.messages) ? body.messages : [];
    for (let i = msgs.length - 1; i >= 0; i--) {
        const m = msgs[i];
        if (!m || m.role !== 'user') continue;
        if (typeof m.content === 'string') return m.content;
        if (Array.isArray(m.content)) {
            return m.content.filter((b) => b && typeof b.text === 'string').map((b) => b.text).join('');
        }
        return '';
    }
    return '';
}

// The text of a request's last message when it is the assistant's (a prefill: the
// reply is to continue it), else null. Both formats: a string, or text blocks.
function prefillText(body) {
    const msgs = Array.isArray(body.messages) ? body.messages : [];
    const m = msgs[msgs.length - 1];
    if (!m || m.role !== 'assistant') return null;
    if (typeof m.content === 'string') return m.content;
    if (Array.isArray(m.content)) {
        return m.content.filter((b) => b && b.type === 'text' && typeof b.text === 'string').map((b) => b.text).join('');
    }
    return null;
}

// The wall clock in microseconds (for stamped deltas).
function nowUs() {
    return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

// ---- error bodies -------------------------------------------------------------------

const ANTHROPIC_ERROR_TYPES = {
    400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error',
    404: 'not_found_error', 405: 'invalid_request_error', 413: 'request_too_large', 429: 'rate_limit_error',
    500: 'api_error', 529: 'overloaded_error',
};
const OPENAI_ERROR_TYPES = {
    400: 'invalid_request_error', 401: 'invalid_request_error', 403: 'permission_error',
    404: 'invalid_request_error', 405: 'invalid_request_error', 413: 'invalid_request_error', 429: 'rate_limit_error',
    500: 'server_error', 503: 'server_error', 529: 'overloaded_error',
};
const ERROR_MESSAGES = {
    400: 'Bad request', 401: 'Invalid API key', 403: 'Permission denied',
    404: 'Not found', 413: 'Request too large', 429: 'Rate limited', 500: 'Internal server error',
    503: 'Service unavailable', 529: 'Overloaded',
};

// A context-overflow error as each API words it: Anthropic's invalid_request_error
// "prompt is too long: N tokens > M maximum", OpenAI's error.code
// context_length_exceeded. N is the request body's bytes / 4.
function overflowBody(kind, bytes) {
    const n = Math.ceil(bytes / 4);
    if (kind === 'anthropic') {
        return errorBody(kind, 400, 'invalid_request_error', `prompt is too long: ${n + 200000} tokens > 200000 maximum`);
    }
    return errorBody(kind, 400, 'invalid_request_error',
        `This model's maximum context length is 8192 tokens. However, your messages resulted in ${n + 8192} tokens. ` +
        'Please reduce the length of the messages.', 'context_length_exceeded', 'messages');
}

function errorBody(kind, status, type, message, code = null, param = null) {
    const msg = message || ERROR_MESSAGES[status] || `HTTP ${status}`;
    if (kind === 'anthropic') {
        return {
            type: 'error',
            error: { type: type || ANTHROPIC_ERROR_TYPES[status] || 'api_error', message: msg },
            request_id: 'req_mock_' + crypto.randomBytes(6).toString('hex'),
        };
    }
    return {
        error: {
            message: msg,
            type: type || OPENAI_ERROR_TYPES[status] || 'server_error',
            param,
            code: code || (status === 429 ? 'rate_limit_exceeded' : null),
        },
    };
}

// ---- stream plans -------------------------------------------------------------------
//
// A plan is a list of steps {data, textDelta?, final?}: `data` is the exact bytes of
// one SSE event. The writer sends them one by one (delayMs apart) and applies
// errorAfter / cutAfter by counting the text deltas.

function sse(event, obj) {
    return `event: ${event}\ndata: ${JSON.stringify(obj)}\n\n`;
}

function anthropicPlan(r, model) {
    const steps = [];
    const msgId = 'msg_mock_' + crypto.randomBytes(8).toString('hex');
    steps.push({ data: sse('message_start', {
        type: 'message_start',
        message: {
            id: msgId, type: 'message', role: 'assistant', model, content: [],
            stop_reason: null, stop_sequence: null,
            usage: { input_tokens: r.input, output_tokens: Math.min(1, r.output) },
        },
    }), start: true });
    const ping = { data: sse('ping', { type: 'ping' }) };
    if (r.ping) steps.push(ping);
    let index = 0;
    let sinceP = 0;
    const content = (step) => {
        steps.push(step);
        if (r.ping && ++sinceP % 3 === 0) steps.push(ping);
    };
    if (r.thinking !== null) {
        content({ data: sse('content_block_start', {
            type: 'content_block_start', index,
            content_block: { type: 'thinking', thinking: '', signature: '' },
        }) });
        for (const piece of splitChars(r.thinking, r.chunkSize)) {
            content({ data: sse('content_block_delta', {
                type: 'content_block_delta', index,
                delta: { type: 'thinking_delta', thinking: piece },
            }) });
        }
        const sig = r.signature ||
            crypto.createHash('sha256').update(r.thinking).digest('base64');
        content({ data: sse('content_block_delta', {
            type: 'content_block_delta', index,
            delta: { type: 'signature_delta', signature: sig },
        }) });
        content({ data: sse('content_block_stop', { type: 'content_block_stop', index }) });
        index++;
    }
    if (r.text !== '' || r.stamp || r.toolCalls.length === 0) {
        content({ data: sse('content_block_start', {
            type: 'content_block_start', index, content_block: { type: 'text', text: '' },
        }) });
        if (r.stamp) {
            for (let i = 0; i < r.deltas; i++) {
                content({ data: () => sse('content_block_delta', {
                    type: 'content_block_delta', index, delta: { type: 'text_delta', text: `@ts${nowUs()} ` },
                }), textDelta: true });
            }
        }
        for (const piece of r.stamp ? [] : splitChars(r.text, r.chunkSize)) {
            content({ data: sse('content_block_delta', {
                type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece },
            }), textDelta: true });
        }
        content({ data: sse('content_block_stop', { type: 'content_block_stop', index }) });
        index++;
    }
    for (const t of r.toolCalls) {
        content({ data: sse('content_block_start', {
            type: 'content_block_start', index,
            content_block: { type: 'tool_use', id: t.id, name: t.name, input: {} },
        }) });
        for (const piece of splitParts(t.args, 3)) {
            content({ data: sse('content_block_delta', {
                type: 'content_block_delta', index,
                delta: { type: 'input_json_delta', partial_json: piece },
            }), toolDelta: true });
        }
        content({ data: sse('content_block_stop', { type: 'content_block_stop', index }) });
        index++;
    }
    const stop = r.stopReason || (r.toolCalls.length ? 'tool_use' : 'end_turn');
    steps.push({ data: sse('message_delta', {
        type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null },
        usage: { output_tokens: r.output },
    }), final: true });
    steps.push({ data: sse('message_stop', { type: 'message_stop' }) });
    return steps;
}

function anthropicStreamError(r) {
    return sse('error', { type: 'error', error: {
        type: r.errorType || 'overloaded_error', message: r.errorMessage || 'Overloaded',
    } });
}

function openaiPlan(r, model, includeUsage) {
    const steps = [];
    const id = 'chatcmpl-mock' + crypto.randomBytes(8).toString('hex');
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta, finish = null) => 'data: ' + JSON.stringify({
        id, object: 'chat.completion.chunk', created, model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    }) + '\n\n';
    steps.push({ data: chunk({ role: 'assistant', content: '' }), start: true });
    const ping = { data: ': ping\n\n' };
    if (r.ping) steps.push(ping);
    let sinceP = 0;
    const content = (step) => {
        steps.push(step);
        if (r.ping && ++sinceP % 3 === 0) steps.push(ping);
    };
    if (r.thinking !== null) {
        for (const piece of splitChars(r.thinking, r.chunkSize)) {
            content({ data: chunk({ reasoning_content: piece }) });
        }
    }
    if (r.stamp) {
        for (let i = 0; i < r.deltas; i++) {
            content({ data: () => chunk({ content: `@ts${nowUs()} ` }), textDelta: true });
        }
    }
    for (const piece of r.stamp ? [] : splitChars(r.text, r.chunkSize)) {
        content({ data: chunk({ content: piece }), textDelta: true });
    }
    r.toolCalls.forEach((t, i) => {
        content({ data: chunk({ tool_calls: [{
            index: i, id: t.id, type: 'function', function: { name: t.name, arguments: '' },
        }] }) });
        for (const piece of splitParts(t.args, 3)) {
            content({ data: chunk({ tool_calls: [{ index: i, function: { arguments: piece } }] }), toolDelta: true });
        }
    });
    const stop = r.stopReason || (r.toolCalls.length ? 'tool_calls' : 'stop');
    steps.push({ data: chunk({}, stop), final: true });
    if (includeUsage) {
        steps.push({ data: 'data: ' + JSON.stringify({
            id, object: 'chat.completion.chunk', created, model, choices: [],
            usage: { prompt_tokens: r.input, completion_tokens: r.output,
                total_tokens: r.input + r.output },
        }) + '\n\n' });
    }
    steps.push({ data: 'data: [DONE]\n\n' });
    return steps;
}

function openaiStreamError(r) {
    return 'data: ' + JSON.stringify({ error: {
        message: r.errorMessage || 'Overloaded', type: r.errorType || 'overloaded_error',
        param: null, code: null,
    } }) + '\n\n';
}

// ---- the provider endpoints -----------------------------------------------------------

// Write one chunk; resolves when it was handed to the kernel (or the client went away).
function write(res, data) {
    return new Promise((resolve) => {
        if (res.destroyed || res.writableEnded) return resolve(false);
        res.write(data, () => resolve(true));
    });
}

async function stream(req, res, kind, r, body) {
    const model = typeof body.model === 'string' ? body.model : 'mock-model';
    const gone = new Promise((resolve) => res.on('close', resolve));
    res.writeHead(200, {
        'Content-Type': 'text/event-stream; charset=utf-8',
        'Cache-Control': 'no-cache',
        ...(kind === 'anthropic'
            ? { 'request-id': 'req_mock_' + crypto.randomBytes(6).toString('hex') }
            : { 'x-request-id': crypto.randomBytes(8).toString('hex') }),
    });
    const alive = () => !res.destroyed && !res.writableEnded;

    if (r.raw) { // verbatim chunks, for parser edge cases
        for (let i = 0; i < r.raw.length && alive(); i++) {
            if (i > 0 && r.delayMs) await sleep(r.delayMs);
            await write(res, r.raw[i]);
        }
        if (alive()) res.end();
        return;
    }

    const includeUsage = !!(body.stream_options && body.stream_options.include_usage === true);
    const steps = kind === 'anthropic' ? anthropicPlan(r, model)
        : openaiPlan(r, model, includeUsage);
    const streamError = kind === 'anthropic' ? anthropicStreamError : openaiStreamError;

    // Returns true when the stream has been finished (error sent or socket cut).
    const trigger = async () => {
        if (r.cutAfter !== null) {
            res.socket?.destroy(); // no terminating chunk: a connection cut mid-stream
            return true;
        }
        if (r.errorAfter !== null) {
            await write(res, streamError(r));
            if (alive()) res.end();
            return true;
        }
        return false;
    };
    const limit = r.cutAfter !== null ? r.cutAfter : r.errorAfter;
    let deltas = 0;
    let first = true;
    for (const step of steps) {
        if (!alive()) return;
        if (limit !== null && (step.final || (step.textDelta && deltas >= limit))) {
            if (await trigger()) return;
        }
        if (!first && r.delayMs) {
            await sleep(r.delayMs);
            if (!alive()) return;
        }
        first = false;
        await write(res, typeof step.data === 'function' ? step.data() : step.data);
        if (step.start && r.hang) {
            await gone; // nothing more until the client disconnects
            return;
        }
        if (step.textDelta && ++deltas === limit) {
            if (await trigger()) return;
        }
        if (step.textDelta && deltas === r.holdAfter) {
            holding++;
            await Promise.race([gate.promise, gone]);
            holding--;
        }
        if (step.toolDelta && r.cutInTool) {
            res.socket?.destroy(); // cut inside a tool call's arguments
            return;
        }
    }
    if (alive()) res.end();
}

function handleProvider(req, res, kind, rawBody, record) {
    let body;
    try {
        body = JSON.parse(rawBody.toString('utf8'));
    } catch {
        return sendJson(res, 400, errorBody(kind, 400, null, 'Request body is not valid JSON'));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        return sendJson(res, 400, errorBody(kind, 400, null, 'Request body must be an object'));
    }
    if (body.stream !== true) {
        return sendJson(res, 400, errorBody(kind, 400, null,
            'The mock provider only answers streaming requests ("stream": true)'));
    }
    const r = normalizeReply(queue.length ? queue.shift() : kindDefault[kind] || defaultReply);
    if (r.text.includes('{{user}}')) r.text = r.text.split('{{user}}').join(lastUserText(body));
    // A prefill (the request ends with the assistant's text): Anthropic refuses one
    // that ends in whitespace; the reply continues it when the canned text begins
    // with it, as a model would (prefill: false ignores it, as OpenAI's API does).
    const prefill = r.prefill && r.status === 200 ? prefillText(body) : null;
    if (prefill !== null && kind === 'anthropic' && /\s$/.test(prefill)) {
        return sendJson(res, 400, errorBody(kind, 400, 'invalid_request_error',
            'messages: final assistant content cannot end with trailing whitespace'));
    }
    let continued = null;
    if (prefill !== null && prefill !== '' && r.text.startsWith(prefill)) {
        r.text = r.text.slice(prefill.length);
        continued = Array.from(prefill).length;
    }
    record.reply = r.status !== 200 ? { status: r.status, ...(r.overflow ? { overflow: true } : {}) } : {
        text: r.text.length, thinking: r.thinking !== null, toolCalls: r.toolCalls.length,
        ...(r.errorAfter !== null ? { errorAfter: r.errorAfter } : {}),
        ...(r.cutAfter !== null ? { cutAfter: r.cutAfter } : {}),
        ...(r.hang ? { hang: true } : {}),
        ...(r.cutInTool ? { cutInTool: true } : {}),
        ...(continued !== null ? { continued } : {}),
    };
    if (r.status !== 200) {
        const headers = {};
        if (r.retryAfter !== undefined && r.retryAfter !== null) {
            headers['Retry-After'] = String(r.retryAfter);
        }
        if (r.location !== null) headers['Location'] = r.location;
        if (kind === 'anthropic' && r.status === 529) headers['x-should-retry'] = 'true';
        return sendJson(res, r.status, r.overflow ? overflowBody(kind, rawBody.length)
            : errorBody(kind, r.status, r.errorType, r.errorMessage, r.errorCode), headers);
    }
    return stream(req, res, kind, r, body);
}

// ---- the control API ------------------------------------------------------------------

function handleControl(req, res, path, rawBody) {
    if (path === '/__health' && req.method === 'GET') {
        return sendJson(res, 200, { ok: true, queued: queue.length, requests: requests.length });
    }
    if (path === '/__release') {
        if (req.method !== 'POST') return sendJson(res, 405, { error: 'method not allowed' }, { Allow: 'POST' });
        const held = holding;
        gate.open();
        return sendJson(res, 200, { released: held });
    }
    if (path === '/__script') {
        if (req.method === 'GET') return sendJson(res, 200, { queued: queue.length, replies: queue, holding });
        if (req.method === 'DELETE') {
            const n = queue.length;
            queue.length = 0;
            gate.open(); // a reply still held from the last test goes on
            gate = newGate();
            return sendJson(res, 200, { cleared: n });
        }
        if (req.method === 'POST') {
            let obj;
            try {
                obj = JSON.parse(rawBody.toString('utf8'));
            } catch {
                return sendJson(res, 400, { error: 'body is not valid JSON' });
            }
            const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
            if (!isObj(obj)) return sendJson(res, 400, { error: 'body must be an object' });
            const list = Array.isArray(obj.replies) ? obj.replies : [obj];
            if (!list.every(isObj)) {
                return sendJson(res, 400, { error: 'each reply must be an object' });
            }
            queue.push(...list);
            return sendJson(res, 200, { added: list.length, queued: queue.length });
        }
        return sendJson(res, 405, { error: 'method not allowed' }, { Allow: 'GET, POST, DELETE' });
    }
    if (path === '/__default') {
        if (req.method === 'GET') return sendJson(res, 200, defaultReply);
        if (req.method === 'DELETE') {
            defaultReply = DEFAULT_REPLY;
            kindDefault.anthropic = kindDefault.openai = null;
            return sendJson(res, 200, { reset: true });
        }
        if (req.method === 'PUT' || req.method === 'POST') {
            let obj;
            try {
                obj = JSON.parse(rawBody.toString('utf8'));
            } catch {
                return sendJson(res, 400, { error: 'body is not valid JSON' });
            }
            if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
                return sendJson(res, 400, { error: 'body must be a reply object' });
            }
            defaultReply = obj;
            return sendJson(res, 200, { set: true });
        }
        return sendJson(res, 405, { error: 'method not allowed' }, { Allow: 'GET, PUT, POST, DELETE' });
    }
    const kd = /^\/__default\/(anthropic|openai)$/.exec(path);
    if (kd) {
        const k = kd[1];
        if (req.method === 'GET') return sendJson(res, 200, kindDefault[k]);
        if (req.method === 'DELETE') {
            kindDefault[k] = null;
            return sendJson(res, 200, { reset: true });
        }
        if (req.method === 'PUT' || req.method === 'POST') {
            let obj;
            try {
                obj = JSON.parse(rawBody.toString('utf8'));
            } catch {
                return sendJson(res, 400, { error: 'body is not valid JSON' });
            }
            if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
                return sendJson(res, 400, { error: 'body must be a reply object' });
            }
            kindDefault[k] = obj;
            return sendJson(res, 200, { set: true });
        }
        return sendJson(res, 405, { error: 'method not allowed' }, { Allow: 'GET, PUT, POST, DELETE' });
    }
    if (path === '/__requests') {
        if (req.method === 'GET') return sendJson(res, 200, requests);
        if (req.method === 'DELETE') {
            const n = requests.length;
            requests = [];
            return sendJson(res, 200, { cleared: n });
        }
        return sendJson(res, 405, { error: 'method not allowed' }, { Allow: 'GET, DELETE' });
    }
    return sendJson(res, 404, { error: 'not found', path });
}

// ---- the server -----------------------------------------------------------------------

// A provider path may sit under any prefix (a gateway's "/team/openai/v1/chat/completions"):
// the kind is told by how the path ends; /__ paths are the mock's own.
function providerKind(path) {
    if (path.startsWith('/__')) return undefined;
    if (path.endsWith('/messages')) return 'anthropic';
    if (path.endsWith('/chat/completions')) return 'openai';
    return undefined;
}

const server = http.createServer((req, res) => {
    req.on('error', () => {});
    res.on('error', () => {});
    const path = (req.url || '/').split('?')[0];
    const kind = providerKind(path);
    const time = new Date().toISOString();
    const chunks = [];
    let size = 0;
    let tooBig = false;

    let done = false;
    // Record and log the request once its body is in (or was refused), then answer.
    const finish = (rawBody) => {
        if (done) return;
        done = true;
        let logBody = null;
        if (rawBody && rawBody.length) {
            try { logBody = JSON.parse(rawBody.toString('utf8')); }
            catch { logBody = rawBody.toString('utf8'); }
        }
        const record = { method: req.method, path, headers: { ...req.headers }, body: logBody, time };
        if (tooBig) record.bodyBytes = size;
        try {
            if (tooBig) {
                // Answer now and close; the rest of the body is drained and dropped.
                const err = kind ? errorBody(kind, 413, null, `Request body over ${BODY_MAX} bytes`)
                    : { error: 'request body too large' };
                sendJson(res, 413, err, { Connection: 'close' });
            } else if (kind && req.method === 'POST') {
                const p = handleProvider(req, res, kind, rawBody, record);
                if (p && p.catch) {
                    p.catch((e) => {
                        process.stderr.write(`mock-provider: stream: ${e.stack || e}\n`);
                        res.destroy();
                    });
                }
            } else if (kind) {
                sendJson(res, 405, errorBody(kind, 405, null, 'Method not allowed'),
                    { Allow: 'POST' });
            } else {
                handleControl(req, res, path, rawBody);
            }
        } catch (e) {
            process.stderr.write(`mock-provider: ${e.stack || e}\n`);
            if (!res.headersSent) sendJson(res, 500, { error: 'mock-provider internal error' });
            else res.destroy();
        }
        if (kind) requests.push(record);
        logLine({ ...record, headers: redactHeaders(record.headers), status: res.statusCode });
    };

    req.on('data', (c) => {
        if (tooBig) return;
        size += c.length;
        if (size > BODY_MAX) {
            tooBig = true;
            chunks.length = 0;
            finish(null);
            return;
        }
        chunks.push(c);
    });
    req.on('end', () => finish(Buffer.concat(chunks)));
});

server.on('connection', (sock) => {
    live.add(sock);
    sock.on('close', () => live.delete(sock));
    sock.on('error', () => {});
});
server.on('clientError', (err, sock) => {
    if (sock.writable) sock.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else sock.destroy();
});

let stopping = false;
function shutdown(why, code = 0) {
    if (stopping) return;
    stopping = true;
    if (why) process.stderr.write(`mock-provider: ${why}, exiting\n`);
    server.close();
    for (const s of live) s.destroy();
    process.exit(code);
}
process.on('SIGTERM', () => shutdown(null));
process.on('SIGINT', () => shutdown(null));
setTimeout(() => shutdown(`max lifetime ${opts.maxLifetime}s reached`), opts.maxLifetime * 1000);

server.on('error', (e) => {
    process.stderr.write(`mock-provider: listen: ${e.message}\n`);
    process.exit(1);
});
server.listen(opts.port, '127.0.0.1', () => {
    const port = server.address().port;
    if (opts.portFile) {
        const tmp = `${opts.portFile}.tmp.${process.pid}`;
        try {
            fs.writeFileSync(tmp, `${port}\n`);
            fs.renameSync(tmp, opts.portFile);
        } catch (e) {
            process.stderr.write(`mock-provider: port file: ${e.message}\n`);
            process.exit(1);
        }
    }
    process.stdout.write(`listening ${port}\n`);
});
