#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""Read the closed loop's L0 traces (BENCH_L0_TRACE=DIR tools/bench.sh): per run of each
contender, L0's slowest requests and when in the run they were sent.

Usage: tools/bench/l0trace.py DIR [--slow-x 1.3] [--top 6]

A request is slow when its latency is above SLOW_X times the p99 of L0 alone in the same run
and load (the bench's baseline). The p99 is wrk's (the ceil(0.99 n)-th smallest latency: of
about 270 requests, the third-slowest). Times are from the run's first L0 request. Its counts are
given at the start (the first 50 ms: the requests L0's connections send as the surge's clients
all connect), in the rest of the first 2 s, and after."""
import argparse
import math
import collections
import os
import re
import sys

NAME = re.compile(r"^(?P<who>.+)-(?P<load>[0-9.]+)-(?P<run>\d+)-(?P<conn>\d+)\.txt$")


def read_runs(d):
    runs = collections.defaultdict(list)
    for f in sorted(os.listdir(d)):
        m = NAME.match(f)
        if not m:
            continue
        with open(os.path.join(d, f)) as fh:
            for line in fh:
                a = line.split()
                if len(a) == 3:
                    runs[(m["who"], m["load"], int(m["run"]))].append(
                        (float(a[0]) / 1e6, float(a[1]) / 1e3, int(a[2])))
    return runs


def p99(lat):
    """wrk's percentile: the smallest latency that 99 % of the requests do not exceed (the
    ceil(0.99 n)-th smallest; of about 270, the third-slowest)."""
    s = sorted(lat)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)] if s else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--slow-x", type=float, default=1.3)
    ap.add_argument("--top", type=int, default=6)
    a = ap.parse_args()
    runs = read_runs(a.dir)
    if not runs:
        sys.exit(f"l0trace: no trace files in {a.dir}")
    print("who load run: n, p99 ms (x alone's), slow at start / 0.05-2 s / after 2 s;"
          " the slowest as t s:ms")
    for (who, load, run), rows in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][2],
                                                                        kv[0][0] != "L0-alone",
                                                                        kv[0][0])):
        alone = runs.get(("L0-alone", load, run))
        base = p99([r[1] for r in alone]) if alone else 0
        t0 = min(r[0] for r in rows)
        lat = [r[1] for r in rows]
        q = p99(lat)
        line = f"{who} {load} {run}: n {len(rows)}, p99 {q:.1f}"
        if who != "L0-alone" and base:
            slow = [(r[0] - t0, r[1]) for r in rows if r[1] > a.slow_x * base]
            start = sum(1 for t, _ in slow if t < 0.05)
            first = sum(1 for t, _ in slow if 0.05 <= t < 2)
            line += (f" ({q / base:.2f}x), slow {start} / {first} / "
                     f"{len(slow) - start - first}; ")
            top = sorted(((r[0] - t0, r[1]) for r in rows), key=lambda x: -x[1])[:a.top]
            line += " ".join(f"{t:.2f}:{ms:.0f}" for t, ms in sorted(top))
        print(line)


if __name__ == "__main__":
    main()
