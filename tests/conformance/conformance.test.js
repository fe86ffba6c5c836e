// The Durable Streams conformance suite, against the stack whose URL is in
// DSTREAM_URL (tests/conformance/run.sh starts it).
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.DSTREAM_URL
if (!baseUrl) throw new Error("DSTREAM_URL is not set: run tests/conformance/run.sh")

runConformanceTests({
  baseUrl,
  longPollTimeoutMs: Number(process.env.DSTREAM_LONGPOLL_MS || 1000),
  subscriptions: true,
})
