// A webhook receiver for the subscription tests: node webhook-receiver.mjs HOST DIR [PORT]
//
// Listens on HOST (port PORT, or a free one), writes its base URL to DIR/url, and
// appends one JSON line per request to DIR/requests.jsonl: {method, path,
// signature, body} (body: the raw text). Every accepted connection adds a line to
// DIR/connections. What it answers is read from DIR/response.json at each request
// ({"status": 200, "body": {...}, "location": "...", "hold": true}; default 200
// {}): "hold" never answers (until the process ends). Stops on SIGTERM.
import { createServer } from "node:http"
import { appendFileSync, readFileSync, renameSync, writeFileSync } from "node:fs"

const [host, dir, port] = process.argv.slice(2)
if (!host || !dir) {
  console.error("usage: webhook-receiver.mjs HOST DIR [PORT]")
  process.exit(2)
}

function answer() {
  try {
    return JSON.parse(readFileSync(`${dir}/response.json`, "utf8"))
  } catch {
    return {}
  }
}

const server = createServer((req, res) => {
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8")
    appendFileSync(
      `${dir}/requests.jsonl`,
      JSON.stringify({
        method: req.method,
        path: req.url,
        signature: req.headers["webhook-signature"] ?? null,
        body,
      }) + "\n"
    )
    const a = answer()
    if (a.hold) return
    const headers = { "content-type": "application/json" }
    if (a.location) headers.location = a.location
    res.writeHead(a.status ?? 200, headers)
    res.end(JSON.stringify(a.body ?? {}))
  })
})
server.on("connection", () => appendFileSync(`${dir}/connections`, "1\n"))
server.listen(Number(port ?? 0), host, () => {
  const { port: p } = server.address()
  writeFileSync(`${dir}/url.tmp`, `http://${host}:${p}`)
  renameSync(`${dir}/url.tmp`, `${dir}/url`)
})
process.on("SIGTERM", () => process.exit(0))
