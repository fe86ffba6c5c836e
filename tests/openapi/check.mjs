// Checks of docs/openapi.json (tests/http/60-openapi.bats runs them).
//
//   node check.mjs validate SPEC             a valid OpenAPI 3.1 document (@apidevtools/swagger-parser),
//                                            every path parameter declared, every operationId unique
//   node check.mjs routes SPEC ROUTES        the spec's paths and methods are exactly the
//                                            router's (ROUTES: `dstream-fcgi --routes`, "METHOD PATH")
//   node check.mjs responses SPEC LOG [NO_SUCCESS]  each answer recorded in LOG (JSON Lines of
//                                            {method, template, status, headers, body}) is one
//                                            the spec documents for that operation: its status,
//                                            its content type, its body (JSON Schema 2020-12)
//                                            and the headers the spec describes; and every
//                                            operation of the spec was exercised, with a 2xx
//                                            or 304 unless named in NO_SUCCESS ("METHOD PATH,...")
//
// Each prints what is wrong, one line each, and exits 1 if anything is; else prints "ok".
import { readFileSync } from "node:fs";
import SwaggerParser from "@apidevtools/swagger-parser";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const METHODS = ["get", "head", "put", "post", "delete", "options", "patch", "trace"];
const [cmd, specFile, arg] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specFile, "utf8"));
const problems = [];

function operations() {
    const ops = [];
    for (const [path, item] of Object.entries(spec.paths || {}))
        for (const m of METHODS) if (item[m]) ops.push({ path, method: m.toUpperCase(), op: item[m], item });
    return ops;
}

// A local "#/components/..." reference, resolved (one level at a time).
function deref(o) {
    while (o && o.$ref) {
        const parts = o.$ref.replace(/^#\//, "").split("/");
        o = parts.reduce((x, k) => (x ? x[k.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined), spec);
    }
    return o;
}

async function validate() {
    try {
        // A copy: the parser dereferences in place.
        await SwaggerParser.validate(structuredClone(spec));
    } catch (e) {
        problems.push(`not a valid OpenAPI document: ${e.message}`);
    }
    if (!/^3\.1\.\d+$/.test(spec.openapi || "")) problems.push(`openapi is ${spec.openapi}, not 3.1.x`);
    const ids = new Map();
    for (const { path, method, op, item } of operations()) {
        const where = `${method} ${path}`;
        if (!op.operationId) problems.push(`${where}: no operationId`);
        else if (ids.has(op.operationId)) problems.push(`${where}: operationId ${op.operationId} also on ${ids.get(op.operationId)}`);
        else ids.set(op.operationId, where);
        const declared = new Set([...(item.parameters || []), ...(op.parameters || [])]
            .map(deref).filter((p) => p.in === "path").map((p) => p.name));
        for (const m of path.matchAll(/\{([^}]+)\}/g))
            if (!declared.has(m[1])) problems.push(`${where}: path parameter {${m[1]}} is not declared`);
        for (const name of declared)
            if (!path.includes(`{${name}}`)) problems.push(`${where}: declares path parameter ${name} not in the path`);
        for (const [status, r] of Object.entries(op.responses || {})) {
            const resp = deref(r);
            for (const [type, media] of Object.entries(resp.content || {}))
                if (type.includes("json") && !media.schema) problems.push(`${where} ${status} ${type}: no schema`);
        }
    }
}

function routes() {
    const served = new Set(readFileSync(arg, "utf8").split("\n").map((l) => l.trim()).filter(Boolean));
    const described = new Set(operations().map(({ method, path }) => `${method} ${path}`));
    if (served.size === 0) problems.push(`${arg}: no routes (did dstream-fcgi --routes run?)`);
    for (const r of served) if (!described.has(r)) problems.push(`served by the router but not in the spec: ${r}`);
    for (const r of described) if (!served.has(r)) problems.push(`in the spec but not served by the router: ${r}`);
}

// The spec's media type entry for a response Content-Type: exact, then type/*, then */*.
function mediaFor(content, ct) {
    const base = (ct || "").split(";")[0].trim().toLowerCase();
    if (content[base]) return [base, content[base]];
    const star = base.split("/")[0] + "/*";
    if (content[star]) return [star, content[star]];
    if (content["*/*"]) return ["*/*", content["*/*"]];
    return [null, null];
}

// A JSON Pointer token.
const esc = (s) => s.replace(/~/g, "~0").replace(/\//g, "~1");

function responses() {
    // Operations the test cannot bring to success (named "METHOD PATH", comma-separated).
    const noSuccess = new Set((process.argv[5] || "").split(",").map((s) => s.trim()).filter(Boolean));
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats(ajv);
    // The whole document under an id, so that "#/components/..." references resolve.
    ajv.addSchema({ ...spec, $id: "openapi.json" });
    const compiled = new Map();
    const check = (schemaRef, value) => {
        if (!compiled.has(schemaRef)) {
            compiled.set(schemaRef, ajv.getSchema(`openapi.json#${schemaRef}`));
        }
        const v = compiled.get(schemaRef);
        if (!v) return [`no schema at ${schemaRef}`];
        return v(value) ? [] : v.errors.map((e) => `${e.instancePath || "/"} ${e.message}`);
    };
    const seen = new Map();
    const lines = readFileSync(arg, "utf8").split("\n").filter(Boolean);
    for (const line of lines) {
        const x = JSON.parse(line);
        const where = `${x.method} ${x.url} (${x.template}) -> ${x.status}`;
        const item = spec.paths[x.template];
        const op = item && item[x.method.toLowerCase()];
        if (!op) {
            problems.push(`${where}: no such operation in the spec`);
            continue;
        }
        const key = `${x.method} ${x.template}`;
        if (!seen.has(key)) seen.set(key, new Set());
        seen.get(key).add(String(x.status));
        const r = op.responses[String(x.status)];
        if (!r) {
            problems.push(`${where}: status ${x.status} is not documented (${Object.keys(op.responses).join(", ")})`);
            continue;
        }
        const resp = deref(r);
        const at = `/paths/${esc(x.template)}/${x.method.toLowerCase()}/responses/${x.status}`;
        const h = Object.fromEntries(Object.entries(x.headers || {}).map(([k, v]) => [k.toLowerCase(), v]));
        // Headers the response documents: when sent, their values fit their schemas.
        for (const [name, hr] of Object.entries(resp.headers || {})) {
            const v = h[name.toLowerCase()];
            if (v === undefined) continue;
            const ref = hr.$ref ? `${hr.$ref.slice(1)}/schema` : `${at}/headers/${esc(name)}/schema`;
            for (const e of check(ref, v)) problems.push(`${where}: header ${name}: ${v}: ${e}`);
        }
        const hasBody = x.body !== undefined && x.body !== null && x.body.length > 0 && x.method !== "HEAD";
        if (!hasBody) continue;
        if (!resp.content) {
            problems.push(`${where}: a body was sent but the spec documents none`);
            continue;
        }
        const [type, media] = mediaFor(resp.content, h["content-type"]);
        if (!type) {
            problems.push(`${where}: content type ${h["content-type"]} is not documented (${Object.keys(resp.content).join(", ")})`);
            continue;
        }
        if (!/json/.test(type)) continue;
        let value;
        try {
            value = JSON.parse(x.body);
        } catch (e) {
            problems.push(`${where}: the ${type} body is not JSON: ${e.message}`);
            continue;
        }
        const base = r.$ref ? r.$ref.slice(1) : at;
        const errs = check(`${base}/content/${esc(type)}/schema`, value);
        if (errs.length)
            problems.push(`${where}: body ${errs.slice(0, 5).join("; ")}${errs.length > 5 ? ` (and ${errs.length - 5} more)` : ""}: ${x.body.slice(0, 300)}`);
    }
    for (const { method, path } of operations()) {
        const got = seen.get(`${method} ${path}`);
        if (!got) problems.push(`${method} ${path}: not exercised`);
        else if (![...got].some((s) => s.startsWith("2") || s === "304") && !noSuccess.has(`${method} ${path}`))
            problems.push(`${method} ${path}: no successful answer exercised (only ${[...got].join(", ")})`);
    }
    console.log(`${lines.length} answers, ${seen.size} operations`);
}

if (cmd === "validate") await validate();
else if (cmd === "routes") routes();
else if (cmd === "responses") responses();
else {
    console.error("usage: node check.mjs validate|routes|responses SPEC [FILE]");
    process.exit(2);
}
for (const p of problems) console.log(p);
if (problems.length) process.exit(1);
console.log("ok");
