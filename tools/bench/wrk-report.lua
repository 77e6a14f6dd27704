-- wrk script of the bench: at the end, one JSON line with the counts and latency percentiles
-- (µs from wrk, written as ms) so tools/bench.sh reads numbers rather than wrk's text output.
done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        '{"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,' ..
        '"timeout":%d,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f}\n',
        summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
        latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
