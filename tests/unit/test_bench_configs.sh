#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Every sluice contender config of the benchmarks (tools/bench/sluice-*.yaml, and
# tools/bench/pg/sluice-*.yaml) passes `sluiced --check` once its placeholders are filled in
# as tools/bench.sh and tools/bench/pg.sh fill them: a typo in one would otherwise surface only
# half an hour into `make bench`. A placeholder this test does not know fails it, so a new one
# gets a value here too. No root, no network. Emits TAP.
. "$(dirname "$0")/../e2e/lib.sh"   # TAP (ok, finish), TMP and BUILD; nothing else of it is set up
trap 'rm -rf "$TMP"' EXIT

fill() { # fill IN OUT: the values the bench scripts give (16 workers, limit 2 x workers)
	sed "s|@STATE@|$TMP/state|g; s|@L0@|198.18.0.10|g; s|@MAXCONN@|36|g;
	     s|@LIMIT@|32|g; s|@WORKERS@|16|g" "$1" > "$2"
}

n=0
for f in tools/bench/sluice-*.yaml tools/bench/pg/sluice-*.yaml; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	out_file=$TMP/$(echo "$f" | tr / _)
	fill "$f" "$out_file"
	left=$(grep -o '@[A-Za-z0-9_]*@' "$out_file" | sort -u | tr '\n' ' ')
	[ -z "$left" ]
	ok $? "$f: every placeholder known" "left unfilled: $left"
	out=$("$BUILD/sluiced" --check "$out_file" 2>&1)
	ok $? "$f passes sluiced --check" "$out"
done
[ $n -ge 8 ]
ok $? "the contender configs were found (8 or more)" "found $n"
finish
