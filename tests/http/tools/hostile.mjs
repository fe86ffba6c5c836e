// Hostile inputs over the HTTP surface: node hostile.mjs URL PLAN.json REPORT.json
//
// PLAN.json (written by 53-hostile-inputs.bats from the router's source):
//   {"routes": ["/v1/sessions/{x}/messages", ...], "headers": [...], "queries": [...],
//    "fields": [...], "tokens": {"admin": "...", "scoped": "..."}}
// Every route is sent, over raw TCP (so that bytes no HTTP client would send go out as
// they are) and with the admin token unless said:
//   - each of its own path segments (its {x} and its last name) replaced by each
//     hostile value (invalid UTF-8, NUL, bad escapes) by GET, PUT, POST and DELETE,
//     and by overlong ones (1,100 to 9,000 bytes) by GET and PUT;
//   - every request header the resources read, all at once, with each hostile value
//     (by GET and POST), and one at a time on the stream and session routes;
//   - every query parameter the resources read, all at once with each hostile value,
//     then each alone;
//   - (POST; PUT too on items) hostile JSON texts as the body (invalid UTF-8, escaped
//     NUL, lone surrogates, 100,000 open brackets, 3,000 nested objects, 600 KB
//     strings), every known field name at once set to each of them, and to values
//     that parse (500 deep, long, huge numbers, every other type);
//   - the last segment not UTF-8 with a scoped token and with none (401, 403).
// The order is fixed and nothing is random: a run is the same requests every time.
//
// Every response is checked: a body that says it is JSON (Content-Type) or comes
// with a 4xx or 5xx status must be UTF-8 (strictly: JSON.parse alone would replace
// bad bytes) and parse as JSON, an error as {"error":{"code","message"}}; a 5xx is
// a finding too (hostile input is the client's error). REPORT.json gets
// {"requests": N, "statuses": {...}, "failures": [first 50 of them]}; the exit
// status is 0 even with failures (the test reads the report). DRY=1: print how many
// requests the plan makes, send none.
import { connect } from "node:net"
import { readFileSync, writeFileSync } from "node:fs"

const [base, planFile, reportFile] = process.argv.slice(2)
const plan = JSON.parse(readFileSync(planFile, "utf8"))
const u = new URL(base)
const HOST = u.hostname, PORT = Number(u.port)
const CONCURRENCY = 6
const TIMEOUT_MS = 8000

const latin1 = (s) => Buffer.from(s, "latin1")

// Path segment values, as they go on the request line (already escaped, or raw bytes).
const SEGMENTS = [
  "%ff", "%c0%af", "%ed%a0%80", "%f4%90%80%80", "%e2%82", "a%00b", "%zz", latin1("\xff\xfe"), "%2e%2e",
]
// Header values (raw bytes; nginx refuses a NUL or a bare CR/LF itself).
const HEADER_VALUES = [latin1("\xff\xfe\xc0\xaf"), latin1("a\x00b"), "x".repeat(7000), latin1("\xe9t\xe9"), "%ff"]
// Query values (escaped).
const QUERY_VALUES = ["%ff", "%00", "%c0%af", "q".repeat(5000), "%"]
// JSON values that are not UTF-8 or not allowed (bytes that go in the body as they are).
const BAD_JSON = [
  latin1('"\xff\xfe"'), '"\\u0000"', '"\\ud800"', '"\\udc00x"', latin1('"\xc0\xaf"'),
  "[".repeat(100000), '{"a":'.repeat(3000) + "1" + "}".repeat(3000), JSON.stringify("\u00e9".repeat(300000)),
]
const DEEP = "[".repeat(500) + "]".repeat(500)          // parses, deeper than any document needs
const LONG = JSON.stringify("\uffff\u00e9\u{1f600}".repeat(400))

const METHODS = ["GET", "PUT", "POST", "DELETE"]
const LONG_SEGMENTS = ["a".repeat(1100), "b".repeat(3000), "c".repeat(6000), "d".repeat(9000)]

function toBuf(x) { return Buffer.isBuffer(x) ? x : Buffer.from(x, "utf8") }
function join(bufs, sep) { return Buffer.concat(bufs.flatMap((b, i) => (i ? [Buffer.from(sep), toBuf(b)] : [toBuf(b)]))) }

// A route's segments after the first ("v1", or "metrics" alone): which to replace are
// its {x} and its last literal one (the segments before it belong to a parent route).
function segments(route) {
  const parts = route.split("/").slice(1)
  const first = parts[0] === "v1" ? 1 : 0
  let lastLit = -1
  parts.forEach((p, i) => { if (i >= first && p !== "{x}") lastLit = i })
  const own = parts.map((p, i) => i >= first && (p === "{x}" || i === lastLit))
  return { parts, own }
}
// The path with segment i set to v (or none), the others plain ({x}: "fzN").
function render(route, i = -1, v = null) {
  const { parts } = segments(route)
  return Buffer.concat([Buffer.from("/"), join(parts.map((p, k) => (k === i ? v : p === "{x}" ? `fz${k}` : p)), "/")])
}

const reqs = []
function add(method, path, { headers = [], body = null, token = "admin", query = null } = {}) {
  reqs.push({ method, path, headers, body, token, query })
}

const itemRoute = (r) => r.endsWith("{x}")
const wide = (r) => r === "/v1/stream/{x}/{x}" || r === "/v1/sessions"
for (const route of plan.routes) {
  const { own } = segments(route)
  const path = render(route)
  // Path segments: each of the route's own, every hostile value, by every method
  // (lengths by GET and PUT: the limit is the same for all).
  own.forEach((mine, i) => {
    if (!mine) return
    for (const v of SEGMENTS) for (const m of METHODS) add(m, render(route, i, v))
    for (const v of LONG_SEGMENTS) for (const m of ["GET", "PUT"]) add(m, render(route, i, v))
  })
  // Headers: every one the resources read at once with each value, by GET and POST;
  // one at a time too on the stream and session routes (which read most of them).
  for (const v of HEADER_VALUES)
    for (const m of ["GET", "POST"]) add(m, path, { headers: plan.headers.map((h) => [h, v]), body: m === "POST" ? "{}" : null })
  if (wide(route))
    for (const h of plan.headers) for (const v of HEADER_VALUES) for (const m of ["GET", "POST"]) add(m, path, { headers: [[h, v]], body: m === "GET" ? null : "{}" })
  // Query parameters: all at once with each value, then each alone.
  for (const v of QUERY_VALUES) add("GET", path, { query: plan.queries.map((q) => `${q}=${v}`).join("&") })
  for (const q of plan.queries) add("GET", path, { query: `${q}=%ff` })
  // JSON bodies: a hostile text as the body, and every known field at once set to it;
  // then values that parse (too deep, too long, every other type), every field at once.
  for (const m of itemRoute(route) ? ["PUT", "POST"] : ["POST"]) {
    for (const v of BAD_JSON) add(m, path, { body: toBuf(v) })
    for (const v of BAD_JSON.slice(0, 5)) add(m, path, { body: Buffer.concat([Buffer.from("{"), join(plan.fields.map((f) => Buffer.concat([Buffer.from(`"${f}":`), toBuf(v)])), ","), Buffer.from("}")]) })
    for (const v of [DEEP, LONG, "12345678901234567890", "-1e999", "null", "{}", "[]", "true"])
      add(m, path, { body: "{" + plan.fields.map((f) => `"${f}":${v}`).join(",") + "}" })
  }
  // Without the admin token: a scoped one, none.
  const last = own.lastIndexOf(true)
  for (const tok of ["scoped", "none"])
    for (const v of ["%ff", "%c0%af"])
      for (const m of ["GET", "PUT"]) add(m, render(route, last, v), { token: tok })
}

function head(r) {
  const lines = []
  const target = r.query ? Buffer.concat([r.path, Buffer.from("?" + r.query)]) : r.path
  lines.push(Buffer.concat([Buffer.from(`${r.method} `), target, Buffer.from(" HTTP/1.1")]))
  lines.push(Buffer.from(`Host: ${HOST}:${PORT}`))
  lines.push(Buffer.from("Connection: close"))
  if (r.token !== "none") lines.push(Buffer.from(`Authorization: Bearer ${plan.tokens[r.token]}`))
  const hasCt = r.headers.some(([h]) => h.toLowerCase() === "content-type")
  if (r.body !== null && !hasCt) lines.push(Buffer.from("Content-Type: application/json"))
  for (const [h, v] of r.headers) lines.push(Buffer.concat([Buffer.from(`${h}: `), toBuf(v)]))
  const body = r.body === null ? Buffer.alloc(0) : toBuf(r.body)
  if (r.body !== null) lines.push(Buffer.from(`Content-Length: ${body.length}`))
  return Buffer.concat([...lines.flatMap((l) => [l, Buffer.from("\r\n")]), Buffer.from("\r\n"), body])
}

function dechunk(b) {
  const out = []
  let i = 0
  for (;;) {
    const e = b.indexOf("\r\n", i)
    if (e < 0) return null
    const n = parseInt(b.subarray(i, e).toString("latin1"), 16)
    if (Number.isNaN(n)) return null
    if (n === 0) return Buffer.concat(out)
    out.push(b.subarray(e + 2, e + 2 + n))
    i = e + 2 + n + 2
  }
}

function send(r) {
  return new Promise((resolve) => {
    const chunks = []
    const sock = connect(PORT, HOST)
    const timer = setTimeout(() => { sock.destroy(); resolve({ error: "timeout" }) }, TIMEOUT_MS)
    sock.on("connect", () => sock.write(head(r)))  // no half-close: nginx would take it for a client gone
    sock.on("data", (c) => chunks.push(c))
    sock.on("error", (e) => { clearTimeout(timer); resolve({ error: String(e.code || e) }) })
    sock.on("close", () => {
      clearTimeout(timer)
      const all = Buffer.concat(chunks)
      const sep = all.indexOf("\r\n\r\n")
      if (sep < 0) return resolve({ error: "no response head" })
      const lines = all.subarray(0, sep).toString("latin1").split("\r\n")
      const status = Number(lines[0].split(" ")[1])
      const hdrs = {}
      for (const l of lines.slice(1)) {
        const c = l.indexOf(":")
        if (c > 0) hdrs[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim()
      }
      let body = all.subarray(sep + 4)
      if ((hdrs["transfer-encoding"] || "").includes("chunked")) body = dechunk(body) ?? body
      resolve({ status, hdrs, body })
    })
  })
}

const strict = new TextDecoder("utf-8", { fatal: true })
function check(r, res) {
  if (res.error) return res.error
  if (res.status >= 500) return `status ${res.status}`
  const ct = res.hdrs["content-type"] || ""
  if (r.method === "HEAD" || res.body.length === 0) return res.status >= 400 && res.status !== 405 ? "error without a body" : null
  if (!(ct.includes("json") || res.status >= 400)) return null
  let text, doc
  try { text = strict.decode(res.body) } catch { return "body is not UTF-8" }
  try { doc = JSON.parse(text) } catch { return "body is not JSON" }
  if (res.status >= 400 && !(doc && doc.error && typeof doc.error.code === "string" && typeof doc.error.message === "string"))
    return "error body is not {error:{code,message}}"
  return null
}

const statuses = {}
const failures = []
let next = 0
async function worker() {
  while (next < reqs.length) {
    const r = reqs[next++]
    const res = await send(r)
    const why = check(r, res)
    const key = res.error ? res.error : String(res.status)
    statuses[key] = (statuses[key] || 0) + 1
    if (why)
      failures.push({
        why, method: r.method, path: r.path.toString("latin1").slice(0, 120), query: r.query && r.query.slice(0, 60),
        headers: r.headers.map(([h, v]) => `${h}: ${toBuf(v).toString("latin1").slice(0, 40)}`),
        body: r.body === null ? null : toBuf(r.body).toString("latin1").slice(0, 80), token: r.token,
        status: res.status, response: res.body ? res.body.toString("latin1").slice(0, 160) : null,
      })
  }
}
if (process.env.DRY) {
  console.log(reqs.length)
  process.exit(0)
}
await Promise.all(Array.from({ length: CONCURRENCY }, worker))
writeFileSync(reportFile, JSON.stringify({ requests: reqs.length, statuses, nfailures: failures.length, failures: failures.slice(0, 50) }, null, 1))
