-- wrk script for bench/compare.sh: POST a ~200-byte JSON message.
--
--   BENCH_PATH=/v1/stream/bench [BENCH_STREAMS=N] wrk -s bench/lib/wrk-post.lua URL
--
-- With BENCH_STREAMS=N each request goes to a random one of BENCH_PATH-0 ..
-- BENCH_PATH-(N-1) (created beforehand); otherwise every request goes to BENCH_PATH.
-- done() prints one line the script parses (latencies in µs; errors counts socket
-- errors and non-2xx/3xx statuses).
local path = os.getenv("BENCH_PATH") or "/v1/stream/bench"
local streams = tonumber(os.getenv("BENCH_STREAMS") or "0")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
-- 200 bytes: a typical small event.
wrk.body = '{"type":"bench.event","source":"wrk","seq":12345,"at":"2026-01-01T00:00:00.000Z",'
    .. '"data":{"user":"u-000042","action":"append","tags":["a","b","c"],"note":"'
    .. string.rep("x", 200 - 157) .. '"}}'

function setup(thread)
    thread:set("seed", math.random(1, 1000000))
end

function init(args)
    math.randomseed(seed or os.time())
end

function request()
    if streams > 0 then
        return wrk.format(nil, path .. "-" .. math.random(0, streams - 1))
    end
    return wrk.format(nil, path)
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "wrk requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d errors=%d bytes=%d\n",
        summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
        e.connect + e.read + e.write + e.timeout + e.status, summary.bytes))
end
