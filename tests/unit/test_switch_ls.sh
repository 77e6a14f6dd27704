#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# `sluicectl switch ls`: every row stays under the headings, with a service name of the longest
# length (31 characters), a 14-day switch (its time left, "13d22h56m13s", is longer than the
# 10 columns a short one needs) and an owner of 40 characters. Reads a switch file in a temporary
# state directory: no daemon, no maps, no root. Emits TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
CTL=$BUILD/sluicectl
if [ ! -x "$CTL" ]; then
	echo "1..0 # SKIP $CTL not built"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
now=$(date +%s)
cat > "$dir/switches.json" <<JSON
{"version":1,"switches":[
{"service":"web","class":"L3","shed_pct":50,"reason":"INC-1","owner":"alice",
 "set_at":$((now - 3700)),"expires_at":$((now + 14 * 86400 - 3777)),"kind":"ops","runbook":"",
 "renewals":0},
{"service":"a-service-name-of-31-characters","class":"L2","shed_pct":100,"reason":"INC-2",
 "owner":"an-owner-name-of-forty-characters-long-x","set_at":$((now - 60)),
 "expires_at":$((now + 3600)),"kind":"ops","runbook":"","renewals":0}
]}
JSON
echo "1..2"
out=$("$CTL" --pin-dir "$dir" --state-dir "$dir" switch ls 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 3 ]; then
	echo "ok 1 - switch ls lists both switches"
else
	echo "not ok 1 - switch ls: exit $rc"
	printf '%s\n' "$out" | sed 's/^/# /'
fi
# Where each heading starts, each row's cell starts: CLASS, EXPIRES (the year) and REASON.
bad=$(printf '%s\n' "$out" | awk '
	NR == 1 { c = index($0, "CLASS"); e = index($0, "EXPIRES"); r = index($0, "REASON"); next }
	{
		if (substr($0, c, 1) != "L") print "CLASS at " c ": " $0
		if (substr($0, e, 2) != "20") print "EXPIRES at " e ": " $0
		if (substr($0, r, 3) != "INC") print "REASON at " r ": " $0
	}')
if [ -z "$bad" ]; then
	echo "ok 2 - every row is under its headings"
else
	echo "not ok 2 - rows out of their columns"
	printf '%s\n' "$out" "$bad" | sed 's/^/# /'
fi
