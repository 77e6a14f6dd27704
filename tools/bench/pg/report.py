#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""Turn tools/bench/pg.sh's run records into OUTDIR/pg.jsonl (meta line, the run lines,
summary lines) and OUTDIR/pg.txt (the table).

usage: report.py RAW.jsonl OUT.jsonl OUT.txt COMMIT DIRTY RUNS DUR HOLDERS CHURNERS L0_CLIENTS
                 ELAPSED_S KERNEL CPUS FAILED
"""
import json
import sys
import time

(raw, out_jsonl, out_txt, commit, dirty, runs, dur, holders, churners, l0_clients, elapsed,
 kernel, cpus, failed) = sys.argv[1:]
recs = [json.loads(l) for l in open(raw) if l.strip()]
ORDER = ["none", "iptables", "pgbouncer", "sluice-dayone", "sluice-tuned"]
MODES = ["persistent", "connect"]


def median(v):
    v = sorted(v)
    n = len(v)
    if not n:
        return None
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def stat(v):
    v = [x for x in v if x is not None]
    if not v:
        return None
    return {"median": round(median(v), 3), "min": round(min(v), 3), "max": round(max(v), 3),
            "n": len(v)}


def g(r, *path):
    x = r
    for p in path:
        if not isinstance(x, dict):
            return None
        x = x.get(p)
    return x


def order_key(k):
    who, mode, flood = k
    return (0 if not flood else 1, MODES.index(mode) if mode in MODES else 9,
            ORDER.index(who) if who in ORDER else 99, who)


groups = {}
for r in recs:
    groups.setdefault((r["contender"], r["mode"], r["flood"]), []).append(r)

# the baseline: L0 alone with no protection, per mode (median over the runs)
base = {}
for mode in MODES:
    rs = groups.get(("none", mode, False), [])
    if rs:
        base[mode] = {k: median([g(r, "l0", k) for r in rs if g(r, "l0", k) is not None] or [0])
                      for k in ("tps", "p50_ms", "p99_ms")}


def ratio(x, b, scale=1.0):
    return None if x is None or not b else scale * x / b


# each contender's own L0-alone throughput (its overhead with no flood), per mode
own = {}
for (who, mode, flood), rs in groups.items():
    if not flood:
        own[(who, mode)] = median([g(r, "l0", "tps") or 0 for r in rs])

summaries = []
for k in sorted(groups, key=order_key):
    who, mode, flood = k
    rs = groups[k]
    b = base.get(mode, {})
    o = own.get((who, mode))
    s = {"type": "summary", "contender": who, "mode": mode, "flood": flood, "runs": len(rs),
         "l0_success_pct": stat([g(r, "l0", "success_pct") for r in rs]),
         "l0_tps": stat([g(r, "l0", "tps") for r in rs]),
         "l0_tps_pct_of_baseline": stat([ratio(g(r, "l0", "tps"), b.get("tps"), 100) for r in rs]),
         "l0_tps_pct_of_own_alone":
             stat([ratio(g(r, "l0", "tps"), o, 100) for r in rs]) if flood else None,
         "l0_p50_ms": stat([g(r, "l0", "p50_ms") for r in rs]),
         "l0_p99_ms": stat([g(r, "l0", "p99_ms") for r in rs]),
         "l0_p50_x_baseline": stat([ratio(g(r, "l0", "p50_ms"), b.get("p50_ms")) for r in rs]),
         "l0_p99_x_baseline": stat([ratio(g(r, "l0", "p99_ms"), b.get("p99_ms")) for r in rs]),
         "l0_conn_errors": stat([g(r, "l0", "conn_errors") for r in rs]),
         "l0_failed": stat([g(r, "l0", "failed") for r in rs]),
         "l3_admitted": stat([g(r, "l3", "admitted") for r in rs]),
         "l3_refused": stat([g(r, "l3", "refused") for r in rs]),
         "l3_backends_mean": stat([g(r, "backends", "l3_mean") for r in rs]),
         "host_cpu_s": stat([r.get("host_cpu_s") for r in rs]),
         "cpu_us_per_rejection": stat([r.get("cpu_us_per_rejection") for r in rs]),
         "flood_only_cpu_us_per_rejection":
             stat([g(r, "flood_only", "cpu_us_per_rejection") for r in rs]),
         "pooled_backends_mean": stat([g(r, "backends", "other_mean") for r in rs]),
         "baseline": b}
    summaries.append(s)

meta = {"type": "meta", "bench": "postgresql", "commit": commit, "dirty": dirty == "true",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "kernel": kernel,
        "cpus": int(cpus), "runs": int(runs), "dur_s": float(dur), "l0_clients": int(l0_clients),
        "flood_holders": int(holders), "flood_churners": int(churners),
        "elapsed_s": int(elapsed), "failed_to_start": failed.split()}
with open(out_jsonl, "w") as f:
    for x in [meta] + recs + summaries:
        f.write(json.dumps(x) + "\n")


def f_stat(s, fmt="%.0f", suffix=""):
    if not s:
        return "-"
    m = fmt % s["median"] + suffix
    if s["n"] > 1 and (s["min"] != s["max"]):
        return "%s [%s-%s]" % (m, fmt % s["min"], fmt % s["max"])
    return m


lines = []
lines.append("# PostgreSQL 15 under a connection flood, %s, commit %s%s, kernel %s, %s CPUs"
             % (meta["date"], commit[:12], " (dirty)" if meta["dirty"] else "", kernel, cpus))
lines.append("# tools/bench/pg.sh: PG_RUNS=%s PG_DUR=%s s, %s s in all; 36 usable connections;"
             % (runs, dur, elapsed))
lines.append("# L0: %s pgbench clients (tools/bench/pg/l0.sql), persistent connections or -C;"
             " L3 flood: %s idle holders + %s connect/query/disconnect churners"
             % (l0_clients, holders, churners))
for mode in MODES:
    b = base.get(mode)
    if b:
        lines.append("# baseline %-10s (L0 alone, no protection): %.0f TPS, p50 %.2f ms, "
                     "p99 %.2f ms" % (mode, b["tps"], b["p50_ms"] or 0, b["p99_ms"] or 0))
lines.append("# median [min-max] over runs. L0 ok = completed / (completed + failed + refused "
             "connections); TPS % = of the baseline;")
lines.append("# own % = of the same contender's L0-alone TPS; p50x/p99x = L0 latency / baseline "
             "latency (-C: connect + transaction + disconnect);")
lines.append("# CPU/rej = host CPU (/proc/stat, all processes) / rejections (L3 + L0): 'flood' = "
             "the 2 s of flood before L0 starts, 'run' = the whole run;")
lines.append("# L3 conns = backends held by L3 (mean of 1 s samples; pgbouncer: its pool's "
             "backends, any class)")
lines.append("")
cols = [("mode", 10), ("flood", 5), ("contender", 13), ("L0 ok %", 17), ("TPS %", 13),
        ("own %", 13), ("p50 x", 16), ("p99 x", 16), ("L3 admitted", 18),
        ("L3 refused", 18), ("CPU/rej flood", 17), ("CPU/rej run", 17), ("L3 conns", 10)]
fmt = " ".join("%%-%ds" % w for _, w in cols)
hdr = fmt % tuple(c for c, _ in cols)
lines.append(hdr)
lines.append("-" * len(hdr))
for s in summaries:
    conns = f_stat(s["l3_backends_mean"], "%.1f")
    if s["contender"] == "pgbouncer":
        conns = "pool " + f_stat(s["pooled_backends_mean"], "%.1f")
    lines.append(fmt % (
        s["mode"], "yes" if s["flood"] else "no", s["contender"],
        f_stat(s["l0_success_pct"], "%.1f"), f_stat(s["l0_tps_pct_of_baseline"], "%.0f"),
        f_stat(s["l0_tps_pct_of_own_alone"], "%.0f"),
        f_stat(s["l0_p50_x_baseline"], "%.2f"), f_stat(s["l0_p99_x_baseline"], "%.2f"),
        f_stat(s["l3_admitted"]), f_stat(s["l3_refused"]),
        f_stat(s["flood_only_cpu_us_per_rejection"]), f_stat(s["cpu_us_per_rejection"]), conns))
if failed.split():
    lines.append("")
    lines.append("# FAILED to start (no numbers): %s" % failed)
lines.append("")
with open(out_txt, "w") as f:
    f.write("\n".join(lines))
