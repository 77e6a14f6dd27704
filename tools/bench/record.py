#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""One measured step of tools/bench.sh -> one JSON line on stdout.

usage: record.py STEPDIR WHO SCENARIO LOAD RUN DUR CAPACITY RC0 RC3 "CPU0" "CPU1" COMMIT DIRTY DATE

STEPDIR holds what the load tools wrote: l0 and l3 (wrk, closed loop; the last line of each is
the JSON of tools/bench/wrk-report.lua) or lg (tools/loadgen, open loop). CPU0/CPU1 are the
whole-host "busy total" jiffies from /proc/stat before and after. Every class is reduced to the
same fields: attempts, ok, rejected, errors, ok_rps, p50_ms, p99_ms. Exits 1 (the record then
carries "error") when a load tool failed or its output cannot be read.
"""
import json
import os
import re
import sys

(d, who, scen, load, run, dur, cap, rc0, rc3, cpu0, cpu1, commit, dirty,
 date) = sys.argv[1:15]
clk = os.sysconf("SC_CLK_TCK")
b0, t0 = (int(x) for x in cpu0.split())
b1, t1 = (int(x) for x in cpu1.split())
rec = {"kind": "step", "who": who, "scenario": scen, "load": float(load), "run": int(run),
       "dur_s": float(dur), "capacity_rps": float(cap), "commit": commit, "dirty": dirty,
       "date": date, "cpu_busy_s": (b1 - b0) / clk, "cpu_total_s": (t1 - t0) / clk,
       "error": None}


def wrk(path):
    """wrk counts completed responses (requests; non-2xx/3xx also in status), connect errors,
    read/write errors and requests older than its timeout. A connection refused with an RST
    shows up as a read error (the connect itself is nonblocking), indistinguishable from a
    keep-alive connection the server closed; either way wrk reconnects and sends the request
    again, so these count as rejections (of a connection) but not as failed requests."""
    lines = [l for l in open(path) if l.startswith("{")]
    if not lines:
        raise ValueError("no result line in %s: %s" % (path, open(path).read()[-300:]))
    j = json.loads(lines[-1])
    secs = j["duration_us"] / 1e6
    ok = j["requests"] - j["status"]
    return {"attempts": j["requests"] + j["connect"] + j["timeout"], "ok": ok,
            "rejected": j["status"] + j["connect"] + j["read"] + j["write"],
            "errors": j["timeout"],
            "conn_lost": j["read"] + j["write"], "ok_rps": ok / secs if secs else 0.0,
            "p50_ms": j["p50_ms"], "p99_ms": j["p99_ms"], "secs": secs,
            "latency_of": "all responses"}


def lg_class(c, secs):
    return {"attempts": c["sent"], "ok": c["ok"], "rejected": c["rejected"],
            "errors": c["errors"], "ok_rps": c["ok"] / secs if secs else 0.0,
            "p50_ms": c.get("p50_ms"), "p99_ms": c.get("p99_ms"), "secs": secs,
            "latency_of": "successes",
            "detail": {k: c.get(k, 0) for k in ("http_429", "http_503", "refused", "reset", "eof",
                                                "timeout", "other_status", "other_error",
                                                "unfinished", "retried", "lost_on_retry",
                                                "lost_on_fresh", "stale_dropped",
                                                "ok_new_conn")},
            # successes answered on a connection opened for them (no idle keep-alive one)
            "new_conn_p50_ms": c.get("new_conn_p50_ms"),
            "new_conn_p99_ms": c.get("new_conn_p99_ms")}


try:
    if scen == "http-closed":
        if rc0 != "0" or rc3 != "0":
            raise ValueError("wrk exit %s/%s: %s" % (rc0, rc3, open(os.path.join(d, "l0")).read()[-200:]))
        rec["L0"] = wrk(os.path.join(d, "l0"))
        if who != "L0-alone":
            rec["L3"] = wrk(os.path.join(d, "l3"))
    else:
        if rc0 != "0":
            raise ValueError("loadgen exit %s: %s" % (rc0, open(os.path.join(d, "lg.err")).read()[-300:]))
        j = json.load(open(os.path.join(d, "lg")))
        secs = j["duration_s"]
        for k, v in j["classes"].items():
            rec[k] = lg_class(v, secs)
    cls = [rec[k] for k in ("L0", "L3") if k in rec]
    secs = max(c["secs"] for c in cls)
    rec["ok"] = sum(c["ok"] for c in cls)
    rec["rejected"] = sum(c["rejected"] for c in cls)
    rec["errors"] = sum(c["errors"] for c in cls)
    rec["goodput_rps"] = rec["ok"] / secs if secs else 0.0
    if scen == "http-open":
        # loadgen's totals include the responses that came in while it drained after the
        # arrival window; goodput is read from its progress line at the window's end instead.
        last = None
        for line in open(os.path.join(d, "lg.err")):
            m = re.search(r"t=([\d.]+)s sent=\d+ ok=(\d+)", line)
            if m and float(m.group(1)) <= float(dur) + 0.05:
                last = (float(m.group(1)), int(m.group(2)))
        if last and last[0] > 0:
            rec["goodput_rps"] = last[1] / last[0]
except Exception as e:  # reported, and the bench fails
    rec["error"] = str(e)[:400]
print(json.dumps(rec))
sys.exit(1 if rec["error"] else 0)
