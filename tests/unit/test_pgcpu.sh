#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# tools/bench/pgcpu.py's reading of its own samples, on samples made here with known answers:
# only the seconds in which the flood generator's ticks moved count, a sample file in which it
# never ran is an error, and a bad command line says how to call it. No root, no network.
# Emits TAP.
. "$(dirname "$0")/../e2e/lib.sh"   # TAP (ok, finish) and TMP; nothing else of it is set up
trap 'rm -rf "$TMP"' EXIT

# 100 ticks a second; 4 samples 1 s apart: the flood runs in the 2nd and 3rd seconds only, 25
# and 35 ticks (0.30 vCPU over them); the host is busy 150 ticks a second throughout.
cat > "$TMP/s.txt" <<'S'
10.00 100 flood=0 l0=0 pg=0 busy=1000
11.00 100 flood=0 l0=20 pg=40 busy=1150
12.00 100 flood=25 l0=40 pg=80 busy=1300
13.00 100 flood=60 l0=60 pg=120 busy=1450
S
out=$(python3 tools/bench/pgcpu.py share "$TMP/s.txt" 2>&1); rc=$?
ok $rc "it reads the samples" "$out"
grep -q '^seconds with the flood: 2; vCPUs used: flood 0.300 l0 0.200 pg 0.400 busy 1.500$' <<<"$out"
ok $? "only the seconds the generator ran, each group's vCPUs over them" "$out"

head -2 "$TMP/s.txt" > "$TMP/none.txt"
out=$(python3 tools/bench/pgcpu.py share "$TMP/none.txt" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'never ran' <<<"$out"
ok $? "samples in which the generator never ran are an error" "rc $rc: $out"

out=$(python3 tools/bench/pgcpu.py hog 2 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'pgcpu.py hog DUTY SECONDS' <<<"$out"
ok $? "a duty above 1 is refused with the usage" "rc $rc: $out"
finish
