#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""Turn tools/bench.sh's raw records (one JSON line per loadgen run) into the results table,
the goals summary and the gnuplot data file.

usage: report.py RAW.jsonl CAPACITY GOODPUT.dat SLOW_PRE SLOW_S
"""
import json
import sys

raw, cap, datfile, slow_pre, slow_s = sys.argv[1], float(sys.argv[2]), sys.argv[3], \
    float(sys.argv[4]), float(sys.argv[5])
recs = [json.loads(l) for l in open(raw) if l.strip()]
PROXIES = ("haproxy", "nginx")


def cls(r, name):
    return r["loadgen"].get("classes", {}).get(name, {})


def tot(r):
    return r["loadgen"].get("total", {})


def pct(a, b):
    return 100.0 * a / b if b else float("nan")


def fmt(x, f="%.1f"):
    if x is None or x != x:
        return "-"
    return f % x


def protection_cpu(r):
    """CPU (ns) spent by the protection during the run: the proxy's processes, or the sluice
    BPF programs' run time (kernel.bpf_stats) -- sluiced's own CPU is reported apart."""
    if r["who"].startswith("sluice"):
        return r["bpf_ns"]
    if r["who"] in PROXIES:
        return r["prot_cpu_ns"]
    return None


base = {}  # (who) -> CPU per ok request at the lowest load (no rejections expected)
for r in recs:
    if r["scenario"] != "load":
        continue
    c = protection_cpu(r)
    ok = tot(r).get("ok", 0)
    if c is not None and ok and (r["who"] not in base or r["load"] < base[r["who"]][0]):
        base[r["who"]] = (r["load"], c / ok)

unloaded_p99 = None
for r in recs:
    if r["who"] == "none" and r["scenario"] == "load" and r["load"] <= 0.5:
        unloaded_p99 = tot(r).get("p99_ms")

print("## under load: goodput = successful responses (200 within the client timeout) / s as % of")
print("## capacity; L0 ok = L0 successes / L0 arrivals; p99 of successful requests;")
print("## CPU/rej = protection CPU per rejected request, raw (all CPU / rejections) and marginal")
print("## (minus CPU per served request measured at 0.5x times the requests served)")
hdr = "%-16s %5s %9s %8s %9s %9s %8s %8s %8s %9s %19s" % (
    "contender", "load", "goodput%", "L0 ok%", "L0 p99ms", "all p99ms", "rejected", "errors",
    "L0 sent", "prot CPU ms", "CPU/rej us raw/marg")
print(hdr)
print("-" * len(hdr))
dat = {}
goals = []
for r in recs:
    if r["scenario"] != "load":
        continue
    t, l0 = tot(r), cls(r, "L0")
    if not t:
        print("%-16s %5.1fx  loadgen failed: %s" % (r["who"], r["load"], r["loadgen"].get("error")))
        continue
    good = pct(t["ok"] / r["loadgen"]["duration_s"], cap)
    l0ok = pct(l0.get("ok", 0), l0.get("sent", 0))
    c = protection_cpu(r)
    rej = t.get("rejected", 0)
    raw_c = marg = None
    if c is not None and rej:
        raw_c = c / rej / 1000.0
        if r["who"] in base:
            marg = max(0.0, (c - base[r["who"]][1] * t["ok"])) / rej / 1000.0
    cpu_s = "%s/%s" % (fmt(raw_c, "%.2f"), fmt(marg, "%.2f")) if raw_c is not None else \
        ("n/m" if r["who"] == "iptables" and rej else "-")
    print("%-16s %4.1fx %9.1f %8.2f %9s %9s %8d %8d %8d %11s %19s" % (
        r["who"], r["load"], good, l0ok, fmt(l0.get("p99_ms")), fmt(t.get("p99_ms")), rej,
        t.get("errors", 0), l0.get("sent", 0), fmt(c / 1e6 if c is not None else None),
        cpu_s))
    dat.setdefault(r["who"], []).append((r["load"], good, l0ok))
    if r["who"].startswith("sluice") and r["sluice_admitted"] + r["sluice_rejected"]:
        # cross-check: what sluice counted vs what the clients saw
        if abs(r["sluice_rejected"] - (t.get("http_429", 0) + t.get("http_503", 0))) > \
                max(5, 0.01 * rej):
            goals.append("  COUNT MISMATCH %s %.1fx: sluice counted %d rejected, clients saw "
                         "%d 429/503" % (r["who"], r["load"], r["sluice_rejected"],
                                         t.get("http_429", 0) + t.get("http_503", 0)))
    r["_good"], r["_l0ok"], r["_raw"], r["_marg"] = good, l0ok, raw_c, marg

print()
print("## slow-downstream episode: %.0f s normal, %.0f s with service time x20, then recovery." %
      (slow_pre, slow_s))
print("## react = from the episode's start until the share of rejections rises by >= 20 points;")
print("## recover = from the episode's end until successes/arrivals per 0.5 s are back to >= 90%")
print("## of the pre-episode value with < 2% errors (both read from 0.5 s progress lines)")
hdr2 = "%-16s %5s %9s %8s %9s %8s %8s %9s %9s" % (
    "contender", "load", "goodput%", "L0 ok%", "L0 p99ms", "rejected", "errors", "react s",
    "recover s")
print(hdr2)
print("-" * len(hdr2))
for r in recs:
    if r["scenario"] != "slow":
        continue
    t, l0 = tot(r), cls(r, "L0")
    if not t:
        print("%-16s loadgen failed" % r["who"])
        continue
    s = r["series"]
    iv = []  # (t_end, sent, ok, rej, err)
    prev = [0.0, 0, 0, 0, 0]
    for p in s:
        iv.append((p[0], p[1] - prev[1], p[2] - prev[2], p[3] - prev[3], p[4] - prev[4]))
        prev = p
    pre = [x for x in iv if 1.0 <= x[0] <= slow_pre]
    ps, po, pr = sum(x[1] for x in pre), sum(x[2] for x in pre), sum(x[3] for x in pre)
    pre_ok, pre_rej = (po / ps if ps else 1.0), (pr / ps if ps else 0.0)
    react = recover = None
    for x in iv:
        if x[0] > slow_pre and x[1] and x[3] / x[1] >= pre_rej + 0.2:
            react = x[0] - 0.25 - slow_pre  # middle of the interval
            break
    end = slow_pre + slow_s
    for x in iv:
        if x[0] > end + 0.5 and x[1] and x[2] / x[1] >= 0.9 * pre_ok and x[4] / x[1] < 0.02:
            recover = x[0] - 0.25 - end
            break
    good = pct(t["ok"] / r["loadgen"]["duration_s"], cap)
    print("%-16s %4.1fx %9.1f %8.2f %9s %8d %8d %9s %9s" % (
        r["who"], r["load"], good, pct(l0.get("ok", 0), l0.get("sent", 0)),
        fmt(l0.get("p99_ms")), t.get("rejected", 0), t.get("errors", 0),
        fmt(react, "%.2f") if react is not None else "never",
        fmt(max(recover, 0.0), "%.2f") if recover is not None else "not in run"))

print()
print("## goals")
if unloaded_p99:
    print("unloaded p99 (no protection, 0.5x): %.2f ms" % unloaded_p99)
for r in recs:
    if r["scenario"] == "load" and r["load"] >= 4 and "_good" in r:
        p99 = tot(r).get("p99_ms") or float("nan")
        l0p99 = cls(r, "L0").get("p99_ms") or float("nan")
        ok = r["_good"] >= 90 and r["_l0ok"] >= 99.9 and unloaded_p99 and p99 <= 2 * unloaded_p99
        print("4x %-16s goodput %.1f%% (>=90), L0 ok %.2f%% (>=99.9), p99 %.1f ms / L0 p99 "
              "%.1f ms (<= %.1f): %s" % (r["who"], r["_good"], r["_l0ok"], p99, l0p99,
                                        2 * (unloaded_p99 or 0), "MET" if ok else "not met"))
half = {r["who"]: r for r in recs if r["scenario"] == "load" and r["load"] <= 0.5 and tot(r)}
if "none" in half:
    n = tot(half["none"])
    for who, r in half.items():
        if who == "none":
            continue
        t = tot(r)
        print("0.5x overhead %-16s p50 %.2f ms vs %.2f, p99 %.2f ms vs %.2f (no protection), "
              "ok %d vs %d" % (who, t.get("p50_ms") or 0, n.get("p50_ms") or 0,
                               t.get("p99_ms") or 0, n.get("p99_ms") or 0, t["ok"], n["ok"]))
for r in recs:
    if r["scenario"] == "load" and r["load"] >= 4 and r["who"].startswith("sluice") and \
            r.get("_raw"):
        for p in recs:
            if p["scenario"] == "load" and p["load"] == r["load"] and p["who"] in PROXIES \
                    and p.get("_marg"):
                print("rejection CPU at 4x: %s %.2f us (marginal) / %s %.2f us (raw, all BPF "
                      "time) = %.1fx (goal >= 20x)" % (p["who"], p["_marg"], r["who"],
                                                       r["_raw"], p["_marg"] / r["_raw"]))
for g in goals:
    print(g)

with open(datfile, "w") as f:
    for who, rows in dat.items():
        f.write("# %s\n" % who)
        for load, good, l0ok in sorted(rows):
            f.write("%g %.2f %.3f\n" % (load, good, l0ok))
        f.write("\n\n")
