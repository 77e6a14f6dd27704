#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The closed loop's L0 trace reader (tools/bench/l0trace.py) on traces made here with known
# answers: the p99 as wrk gives it (of 280 requests, the third-slowest), the slow
# ones counted at the start, in the rest of the first 2 s and after, times from the run's first
# request on either connection; an empty directory is an error. No root, no network. Emits TAP.
. "$(dirname "$0")/../e2e/lib.sh"   # TAP (ok, finish) and TMP; nothing else of it is set up
trap 'rm -rf "$TMP"' EXIT

# Two connections of 140 requests 50 ms apart from t0 (µs), every one answered in 52 ms, but
# for SLOW (connection:index:ms ...).
make_run() {
	python3 - "$@" <<'PY'
import sys
prefix, t0, slow = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
lat = {}
for s in slow:
    c, i, ms = s.split(":")
    lat[(int(c), int(i))] = float(ms)
for c in (1, 2):
    with open("%s-%d.txt" % (prefix, c), "w") as f:
        for i in range(140):
            sent = t0 + (c - 1) * 1000 + i * 50000
            f.write("%.0f %.0f 200\n" % (sent, lat.get((c, i), 52.0) * 1000))
PY
}

D=$TMP/trace
mkdir -p "$D"
make_run "$D/L0-alone-3.5-1" 1000000000
# the first request of both connections at ~100 ms, one at 0.5 s, one at 3 s
make_run "$D/sluice-dayone-3.5-1" 2000000000 1:0:100 2:0:98 1:10:90 2:60:80
out=$(tools/bench/l0trace.py --top 4 "$D" 2>&1); rc=$?
line=$(grep '^sluice-dayone 3.5 1:' <<<"$out")
ok $rc "it reads the directory" "$out"
grep -q 'n 280, p99 90.0 (1.73x)' <<<"$line"
ok $? "the p99 (of 280: the third-slowest) against L0 alone's (52 ms)" "$line"
grep -q 'slow 2 / 1 / 1;' <<<"$line"
ok $? "slow at the start / in the first 2 s / after" "$line"
grep -q '0.00:100 0.00:98 0.50:90 3.00:80' <<<"$line"
ok $? "the slowest with their time in the run" "$line"
grep -q '^L0-alone 3.5 1: n 280, p99 52.0$' <<<"$out"
ok $? "L0 alone's run said with its own p99" "$out"

mkdir -p "$TMP/empty"
out=$(tools/bench/l0trace.py "$TMP/empty" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'no trace files' <<<"$out"
ok $? "an empty directory is an error" "rc $rc: $out"

finish
