// An OTLP/HTTP trace receiver for tests/http/55-otlp.bats: it decodes each
// POST /v1/traces with the official OpenTelemetry protobuf definitions (the
// protobufjs code @opentelemetry/otlp-transformer generates from
// opentelemetry-proto, build/src/generated/root.js), not with dstream's own code.
//
//   node receiver.mjs --port-file PATH --out PATH [--port N] [--fail N] [--hold-file PATH]
//   node receiver.mjs --decode FILE      (a request body in a file: its JSON on stdout)
//
// Each request appends one JSON line to --out: {n, path, contentType, headers
// (their names), auth (the Authorization header), status, request (the decoded
// ExportTraceServiceRequest: ids as hex, 64-bit integers as strings), error}. The
// first --fail N requests are answered 503 (after they are recorded). While the
// --hold-file exists a request is recorded and then not answered until the file is
// removed (a runner killed meanwhile never sees the answer).
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Res = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

const arg = (name, def) => {
    const i = process.argv.indexOf(name);
    return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
};

const IDS = new Set(['traceId', 'spanId', 'parentSpanId']);
function hexIds(v) {
    if (Array.isArray(v)) return v.map(hexIds);
    if (v && typeof v === 'object') {
        const o = {};
        for (const [k, x] of Object.entries(v))
            o[k] = IDS.has(k) && typeof x === 'string' ? Buffer.from(x, 'base64').toString('hex') : hexIds(x);
        return o;
    }
    return v;
}

function decode(body) {
    // Strict: every byte must belong to a field of the message.
    const m = Req.decode(body);
    const err = Req.verify(m);
    if (err) throw new Error(err);
    return hexIds(Req.toObject(m, { longs: String, enums: Number, bytes: String, defaults: false, arrays: true }));
}

if (arg('--decode')) {
    process.stdout.write(JSON.stringify(decode(fs.readFileSync(arg('--decode')))) + '\n');
    process.exit(0);
}

const out = arg('--out');
let fail = Number(arg('--fail', '0'));
const hold = arg('--hold-file');
let n = 0;

const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
        const body = Buffer.concat(chunks);
        const rec = { n: ++n, method: req.method, path: req.url, contentType: req.headers['content-type'] || null,
                      headers: Object.keys(req.headers), auth: req.headers['authorization'] || null };
        let status = 200;
        if (req.method !== 'POST' || req.url !== '/v1/traces') status = 404;
        else {
            try {
                rec.request = decode(body);
            } catch (e) {
                rec.error = String(e);
                status = 400;
            }
        }
        if (status === 200 && fail > 0) {
            fail--;
            status = 503;
        }
        rec.status = status;
        fs.appendFileSync(out, JSON.stringify(rec) + '\n');
        const answer = () => {
            if (status === 200) {
                res.writeHead(200, { 'Content-Type': 'application/x-protobuf' });
                res.end(Res.encode(Res.create({})).finish());
            } else {
                res.writeHead(status, { 'Content-Type': 'text/plain' });
                res.end('no\n');
            }
        };
        const wait = () => (hold && fs.existsSync(hold) ? setTimeout(wait, 20) : answer());
        wait();
    });
});
server.listen(Number(arg('--port', '0')), '127.0.0.1', () => {
    const pf = arg('--port-file');
    fs.writeFileSync(pf + '.tmp', server.address().port + '\n');
    fs.renameSync(pf + '.tmp', pf);
});
for (const s of ['SIGTERM', 'SIGINT']) process.on(s, () => process.exit(0));
setTimeout(() => process.exit(0), 900 * 1000).unref();
