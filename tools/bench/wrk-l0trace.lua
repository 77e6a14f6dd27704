-- wrk script of the bench's closed-loop L0 client when BENCH_L0_TRACE is set: the same JSON
-- summary line as wrk-report.lua at the end, and one line per response in a file of its own
-- per wrk thread: "<sent µs> <latency µs> <status>", sent on CLOCK_MONOTONIC. Each of L0's
-- connections is a thread of its own (wrk -t as many as -c), so a request's latency is from
-- the request() call that wrk makes when the connection may write to the next response.
-- Why: the bench's L0 p99 is the third-slowest of about 270 requests in a run; which ones
-- they are and when in the run they came is what the summary cannot say
-- (tools/bench/l0trace.py reads the files). Needs wrk built with LuaJIT (Debian's is).
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } sluice_timespec;
int clock_gettime(int clk, sluice_timespec *ts);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("sluice_timespec")

local function now_us()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
end

local threads = 0
setup = function(thread)
    threads = threads + 1
    thread:set("thread_no", threads)
end

local out, sent
init = function(args)
    local prefix = args[1]
    if not prefix then error("wrk-l0trace.lua: the trace file prefix is its first argument") end
    out = assert(io.open(string.format("%s-%d.txt", prefix, thread_no), "w"))
end

request = function()
    sent = now_us()
    return wrk.format()
end

response = function(status, headers, body)
    if sent then
        out:write(string.format("%.0f %.0f %d\n", sent, now_us() - sent, status))
        out:flush()
    end
    sent = nil
end
-- the summary line: wrk-report.lua's own, from beside this script (tools/bench.sh copies both
-- into its directory, that one as report.lua; in the repository it is wrk-report.lua)
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local beside = io.open(dir .. "report.lua")
if beside then beside:close() end
dofile(dir .. (beside and "report.lua" or "wrk-report.lua"))
