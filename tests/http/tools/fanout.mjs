#!/usr/bin/env node
// fanout.mjs: N concurrent long-poll readers on one stream all receive one append.
//
//   node fanout.mjs --url http://127.0.0.1:PORT --path /v1/stream/NAME --offset OFF
//                   [--n 1000] [--message TEXT] [--content-type text/plain]
//                   [--settle-ms 1000] [--ready-cmd 'shell command'] [--timeout-ms 60000]
//
// Opens N long-poll GETs of PATH?offset=OFF&live=long-poll at once, each on its own
// connection (no keep-alive, no socket limit). It waits until every request has
// been written to its socket and settle-ms have passed since the last one was, and,
// when --ready-cmd is given, until that command exits 0 (polled every 50 ms; the
// caller can use it to check that the server holds N readers). Then it POSTs
// MESSAGE to PATH (expecting 204) and waits for every reader to answer.
//
// It passes (exit 0) only if all N answered 200 with exactly MESSAGE as the body.
// It prints one summary line of counts either way; exit 1 on any wrong answer or
// error, 2 if the readers were not ready or did not all answer before timeout-ms.
// Only node's built-in modules are used.
import http from 'node:http';
import { spawnSync } from 'node:child_process';

function parseArgs(argv) {
    const o = {
        n: 1000, message: `fanout-${process.pid}-${Date.now()}`, 'content-type': 'text/plain',
        'settle-ms': 1000, 'timeout-ms': 60000,
    };
    for (let i = 0; i < argv.length; i += 2) {
        const k = argv[i].replace(/^--/, '');
        if (i + 1 >= argv.length) throw new Error(`missing value for --${k}`);
        o[k] = argv[i + 1];
    }
    for (const k of ['url', 'path', 'offset'])
        if (!o[k]) throw new Error(`--${k} is required`);
    for (const k of ['n', 'settle-ms', 'timeout-ms']) {
        o[k] = Number(o[k]);
        if (!Number.isInteger(o[k]) || o[k] < 0) throw new Error(`--${k} must be a whole number`);
    }
    return o;
}

const opt = parseArgs(process.argv.slice(2));
const t0 = Date.now();
const ms = () => Date.now() - t0;
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const readUrl = `${opt.url}${opt.path}?offset=${encodeURIComponent(opt.offset)}&live=long-poll`;

const statuses = new Map();     // status code -> count
let written = 0, lastWritten = 0, answered = 0, good = 0, wrongBody = 0, errors = 0;
let earlyAnswers = 0, appendedAt = -1, slowest = 0;
const firstErrors = [];

function count(status) { statuses.set(status, (statuses.get(status) || 0) + 1); }

function summary(verdict) {
    const st = [...statuses.entries()].sort().map(([k, v]) => `${k}:${v}`).join(',') || '-';
    console.log(`fanout: ${verdict} n=${opt.n} written=${written} answered=${answered} ` +
        `ok=${good} statuses=${st} wrong_body=${wrongBody} errors=${errors} ` +
        `answered_before_append=${earlyAnswers} slowest_after_append_ms=${slowest} ` +
        `total_ms=${ms()}`);
    if (firstErrors.length) console.log(`fanout: first errors: ${firstErrors.join(' | ')}`);
}

function finish() {
    const pass = good === opt.n && earlyAnswers === 0;
    summary(pass ? 'PASS' : 'FAIL');
    process.exit(pass ? 0 : 1);
}

const overall = setTimeout(() => {
    summary(appendedAt < 0 ? 'TIMEOUT(before append)' : 'TIMEOUT');
    process.exit(2);
}, opt['timeout-ms']);

function noteError(what) {
    errors++;
    if (firstErrors.length < 5) firstErrors.push(what);
}

function reader(i) {
    const req = http.get(readUrl, { agent }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
            answered++;
            count(res.statusCode);
            if (appendedAt < 0) earlyAnswers++;
            else slowest = Math.max(slowest, ms() - appendedAt);
            const body = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode === 200 && body === opt.message) good++;
            else if (res.statusCode === 200) wrongBody++;
            if (answered + errors === opt.n) finish();
        });
        res.on('error', (e) => {
            noteError(`reader ${i} response: ${e.message}`);
            if (answered + errors === opt.n) finish();
        });
    });
    req.on('finish', () => { written++; lastWritten = ms(); });
    req.on('error', (e) => {
        noteError(`reader ${i}: ${e.code || e.message}`);
        if (answered + errors === opt.n) finish();
    });
}

function append() {
    return new Promise((resolve, reject) => {
        const body = Buffer.from(opt.message);
        const req = http.request(`${opt.url}${opt.path}`, {
            method: 'POST', agent,
            headers: { 'Content-Type': opt['content-type'], 'Content-Length': body.length },
        }, (res) => {
            res.resume();
            res.on('end', () => res.statusCode === 204 ? resolve()
                : reject(new Error(`append answered ${res.statusCode}`)));
        });
        req.on('error', reject);
        req.end(body);
    });
}

const wait = (t) => new Promise((r) => setTimeout(r, t));

function readyCmdOk() {
    if (!opt['ready-cmd']) return true;
    return spawnSync('sh', ['-c', opt['ready-cmd']], { stdio: 'ignore' }).status === 0;
}

for (let i = 0; i < opt.n; i++) reader(i);

// Every request on the wire, quiet for settle-ms, and the caller's check holds.
for (;;) {
    if (errors > 0 || earlyAnswers > 0) break;  // no point appending; report below
    if (written === opt.n && ms() - lastWritten >= opt['settle-ms'] && readyCmdOk()) break;
    await wait(50);
}
if (errors > 0 || earlyAnswers > 0) {
    summary('FAIL(before append)');
    process.exit(1);
}
console.log(`fanout: ${opt.n} readers waiting after ${ms()} ms; appending`);
appendedAt = ms();
try {
    await append();
} catch (e) {
    noteError(`append: ${e.message}`);
    summary('FAIL(append)');
    process.exit(1);
}
if (answered + errors === opt.n) finish();
void overall;
