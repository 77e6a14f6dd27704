#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""The step scenario of tools/bench.sh: offered load 0.5x -> 4x -> 0.5x capacity.

  surge.py record TRACE STATUS T0 PRE SURGE POST CAP WHO RUN COMMIT DIRTY DATE
      one JSON record (kind "surge") from loadgen's --trace file and the status samples
      ("EPOCH_S JSON" lines of `sluicectl status --json`, empty for a peer), T0 the epoch
      second loadgen started at
  surge.py poll ADDR:PORT SECONDS OUT
      sluiced's /metrics every 100 ms for SECONDS: "EPOCH_S JSON" lines (limit, in-flight,
      the ladder's admit ratio per class, objective) in OUT
  surge.py table RAW.jsonl [--md FILE]
      the table over the runs (median [min-max]), text on stdout, markdown in FILE

Times come from the requests as the clients saw them, in slices of BIN_MS by arrival time:
  objective  1.2 x the p99 of the requests admitted in the last 2 s before the step (the
             same contender's unloaded p99, measured in the same run);
  p99 back   from the step to the start of the first slice from which the p99 of the
             requests admitted in the next second is within the objective (none: no such
             second in the surge); "p99 after" is the p99 of everything admitted from then to
             the end of the surge (does it stay within?), "slices over" counts the surge's
             slices whose own p99 is above the objective (a slice holds about 80 admitted
             requests: its p99 is its slowest);
  full       from the end of the surge to the start of the first slice after which every
             request of every slice was answered with success (none: the last one was not);
             "no refusal" the same counting only the contender's refusals (429, 503, refused,
             reset): Apache closing an idle keep-alive connection as loadgen reuses it (an EOF)
             is not one.
For sluice also, from the status samples: when the ladder admitted every class again after
the surge, and the limit in force at the end of the surge.
"""
import json
import math
import statistics
import sys

BIN_MS = 250
OBJ_RATIO = 1.2


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[max(1, math.ceil(q * len(v))) - 1]


def record(a):
    trace, status, t0, pre, surge, post, cap, who, run, commit, dirty, date = a  # noqa
    t0, pre, surge, post, cap = float(t0), float(pre), float(surge), float(post), float(cap)
    step_ms, end_ms, all_ms = 1000 * pre, 1000 * (pre + surge), 1000 * (pre + surge + post)
    reqs, newc = [], []
    for line in open(trace):
        f = line.split()
        if len(f) >= 5:
            reqs.append((float(f[0]), f[1], int(f[2]), int(f[4]) / 1000.0))
            # whether it went on a connection opened for it (traces before that field: None)
            newc.append(int(f[5]) if len(f) >= 6 else None)
    base = [lat for t, c, o, lat in reqs if o == 0 and step_ms - 2000 <= t < step_ms]
    base_l0 = [lat for t, c, o, lat in reqs if o == 0 and c == "L0" and t < step_ms]
    obj = OBJ_RATIO * pct(base, 0.99) if base else None
    nb = int(math.ceil((all_ms - step_ms) / BIN_MS))
    ok = [[] for _ in range(nb)]
    bad = [0] * nb
    for t, c, o, lat in reqs:
        if t < step_ms or t >= all_ms:
            continue
        b = int((t - step_ms) // BIN_MS)
        if o == 0:
            ok[b].append(lat)
        else:
            bad[b] += 1
    ns = int(round((end_ms - step_ms) / BIN_MS))
    settle, rest99, w = None, None, int(1000 / BIN_MS)
    if obj is not None:
        for b in range(ns - w + 1):
            nxt = [lat for x in ok[b:b + w] for lat in x]
            if nxt and pct(nxt, 0.99) <= obj:
                settle = b * BIN_MS / 1000.0
                rest99 = pct([lat for x in ok[b:ns] for lat in x], 0.99)
                break
    full = None
    for b in range(nb - 1, ns - 1, -1):
        if bad[b]:
            break
        full = (b - ns) * BIN_MS / 1000.0
    # the same, counting only the contender's refusals (a 429 or 503, a connection refused or
    # reset): a server that closes an idle keep-alive connection as a request is sent on it
    # (an EOF) or answers late (a timeout) is not a refusal
    refused = [0] * nb
    for t, c, o, lat in reqs:
        if step_ms <= t < all_ms and o in (1, 2, 4, 5):
            refused[int((t - step_ms) // BIN_MS)] += 1
    admit = None
    for b in range(nb - 1, ns - 1, -1):
        if refused[b]:
            break
        admit = (b - ns) * BIN_MS / 1000.0
    surge_ok = [lat for t, c, o, lat in reqs if o == 0 and step_ms <= t < end_ms]
    # the surge's admitted requests by the connection they went on: one opened for them, or
    # an idle keep-alive one (a server may serve these in a different order)
    by_conn = {0: [], 1: []}
    for (t, c, o, lat), n in zip(reqs, newc):
        if o == 0 and step_ms <= t < end_ms and n is not None:
            by_conn[n].append(lat)
    l0 = [(o, lat) for t, c, o, lat in reqs if c == "L0" and step_ms <= t < end_ms]
    l0_ok = [lat for o, lat in l0 if o == 0]
    rec = {"kind": "surge", "who": who, "run": int(run), "pre_s": pre, "surge_s": surge,
           "post_s": post, "bin_ms": BIN_MS, "capacity_rps": cap,
           "objective_ms": obj, "p99_back_s": settle, "p99_rest_ms": rest99, "full_s": full,
           "no_refusal_s": admit,
           "surge_p99_ms": pct(surge_ok, 0.99),
           "surge_p99_reused_ms": pct(by_conn[0], 0.99),
           "surge_p99_new_conn_ms": pct(by_conn[1], 0.99),
           "surge_new_conn_pct": (100.0 * len(by_conn[1]) / (len(by_conn[0]) + len(by_conn[1]))
                                  if by_conn[0] or by_conn[1] else None),
           "surge_goodput_pct": 100.0 * len(surge_ok) / surge / cap if cap else None,
           "surge_l0_ok_pct": 100.0 * len(l0_ok) / len(l0) if l0 else None,
           "surge_l0_p99_x": (pct(l0_ok, 0.99) / pct(base_l0, 0.99)) if l0_ok and base_l0 else None,
           "slices_over": sum(1 for b in range(ns) if obj is None or pct(ok[b], 0.99) is None
                              or pct(ok[b], 0.99) > obj),
           "surge_l0_outcomes": {str(k): sum(1 for o, lat in l0 if o == k)
                                 for k in sorted(set(o for o, lat in l0))},
           "slices": ns,
           "slice_p99_ms": [round(pct(x, 0.99), 1) if x else None for x in ok],
           "slice_not_ok": bad,
           # what the failures after the surge were (loadgen's outcome codes: 1 a 429, 6 the
           # server closed a keep-alive connection, 7 a timeout ...), each as [s after the
           # surge's end, class, outcome]: full admission waits for the last of them
           "post_not_ok": [[round((t - end_ms) / 1000.0, 3), c, o] for t, c, o, lat in reqs
                           if o != 0 and end_ms <= t < all_ms],
           "commit": commit, "dirty": dirty, "date": date}
    # sluice's own view, sampled from `sluicectl status --json`
    samples = []
    for line in open(status):
        sp = line.find(" ")
        try:
            t = (float(line[:sp]) - t0) * 1000
            m = json.loads(line[sp + 1:])
        except ValueError:
            continue
        samples.append((t, m.get("limit"), m.get("in_flight"),
                        all(float(x) >= 1 for x in m.get("admit", [0])),
                        m.get("objective_us")))
    if samples:
        at_end = [s for s in samples if s[0] <= end_ms]
        rec["limit_end"] = at_end[-1][1] if at_end else None
        rec["limit_min"] = min((s[1] for s in samples if step_ms <= s[0] <= end_ms), default=None)
        rec["sluice_objective_ms"] = (at_end[-1][4] or 0) / 1000.0 if at_end else None
        lf = None
        for s in reversed([s for s in samples if s[0] >= end_ms]):
            if not s[3]:
                break
            lf = (s[0] - end_ms) / 1000.0
        rec["ladder_full_s"] = lf
        rec["status_samples"] = len(samples)
        rec["limit_trace"] = [[round(s[0] / 1000, 2), s[1], s[2], int(s[3])] for s in samples]
    print(json.dumps(rec))


def poll(a):
    import time
    import urllib.request
    addr, secs, out = a[0], float(a[1]), a[2]
    end = time.time() + secs
    with open(out, "a") as f:
        while time.time() < end:
            t = time.time()
            try:
                body = urllib.request.urlopen("http://%s/metrics" % addr, timeout=1).read().decode()
            except OSError:
                time.sleep(0.1)
                continue
            m = {"admit": []}
            for line in body.splitlines():
                if line.startswith("#") or " " not in line:
                    continue
                name, val = line.rsplit(" ", 1)
                base = name.split("{", 1)[0]
                if base == "sluice_concurrency_limit":
                    m["limit"] = int(float(val))
                elif base == "sluice_in_flight":
                    m["in_flight"] = m.get("in_flight", 0) + int(float(val))
                elif base == "sluice_ladder_admit_ratio":
                    m["admit"].append(float(val))
                elif base == "sluice_latency_objective_seconds":
                    m["objective_us"] = float(val) * 1e6
            f.write("%.3f %s\n" % (t, json.dumps(m)))
            f.flush()
            time.sleep(max(0.0, 0.1 - (time.time() - t)))


def agg(vals, fmt):
    """median [min-max]; a run that never got there is said, not left out"""
    v = [x for x in vals if x is not None]
    miss = len(vals) - len(v)
    if not v:
        return "never (%d/%d)" % (miss, len(vals))
    out = (fmt % statistics.median(v)) + " [" + (fmt % min(v)) + "-" + (fmt % max(v)) + "]"
    return out + (", %d never" % miss if miss else "")


def agg_known(vals, fmt):
    """agg() of a figure older records do not have (or no request of the kind): '-' then"""
    return "-" if all(x is None for x in vals) else agg(vals, fmt)


# What the project aims for after the step (medians over the runs, a run that never got there
# counted as never): the admitted p99 back within the objective, and full admission after it.
STEP_GOALS = [("p99_back_s", 1.0, "p99 back s"), ("full_s", 10.0, "full admission s")]


def goal_lines(recs, who):
    """One line per contender: met, or NOT met and by what."""
    lines = []
    for w in who:
        rs = [r for r in recs if r["who"] == w]
        miss = []
        for k, v, name in STEP_GOALS:
            vals = sorted(float("inf") if r.get(k) is None else r[k] for r in rs)
            med = statistics.median(vals)
            if med > v:
                miss.append("%s %s <= %g" % (name, "never" if med == float("inf") else "%.2f" % med, v))
        lines.append("step %s: %s%s" % (w, "met" if not miss else "NOT met",
                                        " (" + "; ".join(miss) + ")" if miss else ""))
    return lines


def table(a):
    recs = [json.loads(l) for l in open(a[0]) if l.startswith("{")]
    recs = [r for r in recs if r.get("kind") == "surge"]
    md = a[a.index("--md") + 1] if "--md" in a else None
    if not recs:
        return
    who = []
    for r in recs:
        if r["who"] not in who:
            who.append(r["who"])
    r0 = recs[0]
    head = ("step: offered load 0.5x for %.0f s -> 4x for %.0f s -> 0.5x for %.0f s (loadgen, open "
            "loop, keep-alive, L0 4 %%), %s; %d slices of %d ms; median [min-max] over the runs"
            % (r0["pre_s"], r0["surge_s"], r0["post_s"],
               "commit " + r0["commit"] + (" (dirty)" if r0.get("dirty") == "true" else ""),
               r0["slices"], r0["bin_ms"]))
    cols = ["contender", "objective ms", "p99 back s (goal <= 1)", "p99 after ms",
            "full admission s (goal <= 10)", "no refusal s", "surge p99 ms",
            "surge p99 reused / new conn ms", "on new conn %", "slices over", "surge goodput %", "L0 ok %", "L0 p99 x", "limit end",
            "ladder full s"]
    rows = []
    for w in who:
        rs = [r for r in recs if r["who"] == w]
        sl = w.startswith("sluice") and any("limit_end" in r for r in rs)
        rows.append([w, agg([r["objective_ms"] for r in rs], "%.1f"),
                     agg([r["p99_back_s"] for r in rs], "%.2f"),
                     agg([r.get("p99_rest_ms") for r in rs], "%.1f"),
                     agg([r["full_s"] for r in rs], "%.2f"),
                     agg([r.get("no_refusal_s") for r in rs], "%.2f"),
                     agg([r["surge_p99_ms"] for r in rs], "%.1f"),
                     agg_known([r.get("surge_p99_reused_ms") for r in rs], "%.1f") + " / " +
                     agg_known([r.get("surge_p99_new_conn_ms") for r in rs], "%.1f"),
                     agg_known([r.get("surge_new_conn_pct") for r in rs], "%.0f"),
                     agg([r["slices_over"] for r in rs], "%.0f"),
                     agg([r["surge_goodput_pct"] for r in rs], "%.1f"),
                     agg([r["surge_l0_ok_pct"] for r in rs], "%.2f"),
                     agg([r["surge_l0_p99_x"] for r in rs], "%.2f"),
                     agg([r.get("limit_end") for r in rs], "%.0f") if sl else "n/a",
                     agg([r.get("ladder_full_s") for r in rs], "%.2f") if sl else "n/a"])
    print("# " + head)
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    for row in [cols] + rows:
        print("  ".join(str(x).ljust(wd) for x, wd in zip(row, widths)))
    goals = goal_lines(recs, who)
    print("## goals: p99 back within the objective <= 1 s after the step, full admission <= 10 s "
          "after the surge (medians)")
    for g in goals:
        print("  " + g)
    if md:
        with open(md, "w") as f:
            f.write("#### HTTP, step 0.5× → 4× → 0.5× (`BENCH_SCENARIOS=step`)\n\n" + head + ".\n\n")
            f.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
            for row in rows:
                f.write("| " + " | ".join(row) + " |\n")
            f.write("\np99 back: from the step to the first 250 ms slice from which the p99 of "
                    "the requests admitted in the next second is within 1.2x the p99 of the 2 s "
                    "before the step (the same contender, the same run); p99 after: of everything "
                    "admitted from then to the end of the surge; full admission: from "
                    "the end of the surge to the first slice after which every request succeeds; "
                    "no refusal: the same for the contender's refusals only (429, 503, connection "
                    "refused or reset; not the server's EOFs on idle keep-alive connections or "
                    "timeouts); surge p99 reused / new conn: the surge's admitted requests that "
                    "went on an idle keep-alive connection / on one opened for them, and the "
                    "share of the latter; "
                    "'never': not within the run; n/a: the peer has no adaptive limit or "
                    "ladder.\n")
            f.write("\nGoals (medians, a run that never got there counted as never): the "
                    "admitted p99 back within the objective ≤ 1 s after the step, full admission "
                    "≤ 10 s after the surge.\n\n")
            f.writelines("- " + g + "\n" for g in goals)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "record" and len(sys.argv) == 14:
        record(sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "poll":
        poll(sys.argv[2:])
    elif len(sys.argv) > 2 and sys.argv[1] == "table":
        table(sys.argv[2:])
    else:
        sys.exit(__doc__)
