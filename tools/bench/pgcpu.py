#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""How much CPU the PostgreSQL bench's own flood generator takes from the host it measures, and
what that much CPU costs L0 alone (docs/BENCHMARKS.md section 4).

  tools/bench/pgcpu.py sample FILE SECONDS   once a second, the CPU ticks so far of the flood
                                             generator, L0's clients and PostgreSQL, and the
                                             host's busy ticks (one line each, appended)
  tools/bench/pgcpu.py share FILE            from those lines: the vCPUs each used over the
                                             seconds in which the generator ran
  tools/bench/pgcpu.py hog DUTY SECONDS      spin DUTY (0-1) of every 10 ms, to stand in for
                                             the generator beside L0 alone

A process that exits keeps its last reading (PostgreSQL forks a backend per connection). Run
`sample` in the background while tools/bench/pg.sh runs, e.g.
  python3 tools/bench/pgcpu.py sample /tmp/cpu.txt 600 & s=$!
  PG_CONTENDERS=sluice-dayone PG_MODES=persistent PG_RUNS=3 PG_DUR=6 tools/bench/pg.sh build /tmp/pg
  kill $s; python3 tools/bench/pgcpu.py share /tmp/cpu.txt
and `hog` beside a no-flood run, alternating with one without it:
  python3 tools/bench/pgcpu.py hog 0.27 200 & h=$!
  PG_CONTENDERS=none PG_MODES=persistent PG_RUNS=3 PG_DUR=6 tools/bench/pg.sh build /tmp/pg-hog
  kill $h"""
import os
import sys
import time

GROUPS = ("flood", "l0", "pg")


def group(cmd):
    if "pgload.py flood" in cmd:
        return "flood"
    if "pgbench" in cmd or "pgload.py l0" in cmd:
        return "l0"
    if "postgres" in cmd:
        return "pg"
    return None


def sample(path, seconds):
    hz = os.sysconf("SC_CLK_TCK")
    seen = {}  # (pid, start time) -> (group, ticks): an exited process keeps its last reading
    end = time.monotonic() + seconds
    with open(path, "a") as out:
        while time.monotonic() < end:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                    with open(f"/proc/{pid}/stat") as f:
                        st = f.read().rsplit(") ", 1)[1].split()
                except (OSError, IndexError):
                    continue
                g = group(cmd)
                if g:
                    seen[(pid, st[19])] = (g, int(st[11]) + int(st[12]))
            tot = dict.fromkeys(GROUPS, 0)
            for g, t in seen.values():
                tot[g] += t
            with open("/proc/stat") as f:
                cpu = f.readline().split()[1:]
            busy = sum(int(x) for i, x in enumerate(cpu) if i not in (3, 4))  # not idle, iowait
            out.write(f"{time.monotonic():.2f} {hz} " +
                      " ".join(f"{g}={tot[g]}" for g in GROUPS) + f" busy={busy}\n")
            out.flush()
            time.sleep(1)


def share(path):
    rows = []
    with open(path) as f:
        for line in f:
            a = line.split()
            rows.append((float(a[0]), int(a[1]), dict((k, int(v)) for k, v in
                                                       (x.split("=") for x in a[2:]))))
    used = dict.fromkeys(GROUPS + ("busy",), 0.0)
    secs = 0.0
    for (t0, hz, a), (t1, _, b) in zip(rows, rows[1:]):
        if b["flood"] > a["flood"]:          # the generator ran in this second
            secs += t1 - t0
            for k in used:
                used[k] += (b[k] - a[k]) / hz
    if secs <= 0:
        sys.exit(f"pgcpu: the flood generator never ran in {path}")
    print(f"seconds with the flood: {secs:.0f}; vCPUs used: " +
          " ".join(f"{k} {v / secs:.3f}" for k, v in used.items()))


def hog(duty, seconds):
    period = 0.010
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < duty * period:
            pass
        time.sleep(period * (1 - duty))


def main():
    a = sys.argv[1:]
    try:
        if len(a) == 3 and a[0] == "sample":
            return sample(a[1], float(a[2]))
        if len(a) == 2 and a[0] == "share":
            return share(a[1])
        if len(a) == 3 and a[0] == "hog" and 0 <= float(a[1]) <= 1:
            return hog(float(a[1]), float(a[2]))
    except ValueError:
        pass
    sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main()
