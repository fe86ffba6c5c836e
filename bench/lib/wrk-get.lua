-- wrk script for bench/compare.sh: GET one URL (the catch-up read), one summary line.
--
--   wrk -s bench/lib/wrk-get.lua 'URL?offset=-1'
function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "wrk requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d errors=%d bytes=%d\n",
        summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
        e.connect + e.read + e.write + e.timeout + e.status, summary.bytes))
end
