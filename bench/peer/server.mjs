// The Durable Streams reference server (@durable-streams/server, pinned in
// package.json), file-backed, for bench/compare.sh.
//
//   node server.mjs DATADIR [HOST] [PORT]      (PORT 0: any free port)
//
// Prints "listening URL" on stdout once it listens, then runs until SIGTERM/SIGINT.
// File-backed: each stream is a log file under DATADIR/streams, fdatasync'ed on
// every append (concurrent appends share one fdatasync); metadata in LMDB.
import { DurableStreamTestServer } from "@durable-streams/server"

const [dataDir, host = "127.0.0.1", port = "0"] = process.argv.slice(2)
if (!dataDir) {
  console.error("usage: node server.mjs DATADIR [HOST] [PORT]")
  process.exit(2)
}

const server = new DurableStreamTestServer({
  dataDir,
  host,
  port: Number(port),
  // Same long-poll wait as dstream's default; SSE sends a keep-alive control then.
  longPollTimeout: Number(process.env.PEER_LONGPOLL_MS ?? 30000),
})
const url = await server.start()
console.log(`listening ${url}`)

let stopping = false
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, async () => {
    if (stopping) return
    stopping = true
    const force = setTimeout(() => process.exit(0), 3000)
    force.unref()
    await server.stop().catch(() => {})
    process.exit(0)
  })
}
