#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Where one bench_pktcost path spends its time: perf samples (with call chains) of the bench
# timing only that path, taken inside the named program, as
#   - the program's own time and each helper or kernel function it calls (inclusive), and
#   - the program's own samples by source line (tests/bench/jitlines: a sample lands on the
#     instruction after the one that waited, so a load that missed shows as its line or the
#     next one).
# Samples of other processes (other tests running the same programs) are left out.
#   tests/bench/pktprof.sh [BUILD] PATH PROGRAM [RUNS] [FUNCTION]
#   e.g. tests/bench/pktprof.sh build xdp.new-syn-admitted sluice_xdp_ingress 12
# With FUNCTION (a subprogram of PROGRAM: a global function such as classify_payload, or a
# bpf_loop callback), the lines are that function's own samples instead of the program's; with
# caller:FUNCTION (a helper or kernel function it calls, e.g. caller:lookup_nulls_elem_raw),
# that function's samples by the program's line that called it.
# Needs perf (linux-perf) and root. A look while working, not a test.
set -euo pipefail
BUILD=${1:-build}
PATH_NAME=${2:?path name, as bench_pktcost prints it}
PROG=${3:?program name: sluice_xdp_ingress, sluice_tc_ingress or sluice_tc_egress}
RUNS=${4:-12}
FOCUS=${5:-}
OUT=$(mktemp -d /tmp/pktprof.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

bench() {
	BENCH_ONLY=$PATH_NAME BENCH_FAMILIES=1 BENCH_NO_INVARIANCE=1 \
		"$BUILD/bench/bench_pktcost" "$BUILD/bench/empty_xdp.bpf.o" 1000000 20000
}

# The line table of the program as the bench loads it (the same code JITs to the same
# offsets on every load): read while the bench waits for its clock's next second.
bench >/dev/null & pid=$!
for _ in $(seq 1 40); do
	sleep 0.05
	"$BUILD/bench/jitlines" "$PROG" >"$OUT/lines" 2>/dev/null && [ -s "$OUT/lines" ] && break
done
wait $pid
[ -s "$OUT/lines" ] || { echo "pktprof: could not read $PROG's line table" >&2; exit 1; }

cat >"$OUT/runs.sh" <<RUNS
for i in \$(seq 1 $RUNS); do
	BENCH_ONLY='$PATH_NAME' BENCH_FAMILIES=1 BENCH_NO_INVARIANCE=1 \
		'$BUILD/bench/bench_pktcost' '$BUILD/bench/empty_xdp.bpf.o' 1000000 20000 >/dev/null
done
RUNS
perf record -q -g -a -F 20000 -o "$OUT/perf.data" -- bash "$OUT/runs.sh" 2>/dev/null
perf script -i "$OUT/perf.data" -F comm,ip,sym,symoff 2>/dev/null >"$OUT/script"
# Without hardware counters (a VM that exposes none) perf samples on a timer (cpu-clock): the
# shares below then say where timer ticks landed, which need not be where the time went (on
# the 2-vCPU PVM guest the flow lookup read 52 % of a request start that removing it showed
# to be 33-208 ns of 163-390, by run: docs/BENCHMARKS.md, "The same stream by removal").
EVENT=$(perf evlist -i "$OUT/perf.data" 2>/dev/null | head -1)
case $EVENT in
cpu-clock*|task-clock*)
	echo "# sampled by $EVENT (no hardware counters here): the shares are where timer ticks landed; confirm by removal" ;;
esac

python3 - "$OUT/lines" "$OUT/script" "$PROG" "$FOCUS" <<'EOF'
import bisect, collections, re, sys
lines_path, script_path, prog, focus = sys.argv[1:5]
table = collections.defaultdict(list)
for l in open(lines_path):
    tag, off, line, *src = l.rstrip("\n").split(" ", 3)
    table[tag].append((int(off, 16), line, src[0] if src else ""))
for t in table.values():
    t.sort()
short = prog[:15]
callee, by_line, total = collections.Counter(), collections.Counter(), 0

def sample(frames):
    global total
    idx = [i for i, f in enumerate(frames) if "_" + short in f[0]]
    if not idx:
        return
    i = idx[0]
    total += 1
    callee["(own)" if i == 0 else frames[i - 1][0]] += 1
    at = frames[0]
    if focus.startswith("caller:"):
        # samples inside a kernel function or helper, put on the program's line that called it
        if i == 0 or frames[i - 1][0] != focus[7:]:
            return
        at = (frames[i][0], frames[i][1] - 1)
    elif focus:
        if not frames[0][0].endswith("_" + focus):
            return
    elif i:
        return
    m = re.match(r"bpf_prog_([0-9a-f]{16})_\w+", at[0])
    t = table.get(m.group(1)) if m else None
    if not t:
        by_line["(no line table for %s)" % at[0]] += 1
        return
    k = bisect.bisect_right([r[0] for r in t], at[1]) - 1
    by_line["%s %s" % (t[k][1], t[k][2].strip()[:90]) if k >= 0 else "?"] += 1

frames, comm = [], None
for l in open(script_path):
    l = l.strip()
    if not l:
        if comm and comm.startswith("bench_pktcost"):
            sample(frames)
        frames, comm = [], None
    elif comm is None:
        comm = l.split()[0]
    else:
        parts = l.split(None, 1)
        sym = parts[1] if len(parts) > 1 else "?"
        name, _, off = sym.partition("+0x")
        frames.append((name, int(off, 16) if off else 0))
if total == 0:
    sys.exit("pktprof: no samples inside " + prog)
print("# %d samples inside %s (bench_pktcost only), by what the program was running" % (total, prog))
for k, v in callee.most_common(15):
    print("%6.1f%%  %s" % (100.0 * v / total, k))
own = sum(by_line.values())
print("# %s's own samples (%.1f%% of the above) by source line" %
      (focus or "the program", 100.0 * own / total))
for k, v in by_line.most_common(25):
    print("%6.1f%%  %s" % (100.0 * v / own, k))
EOF
