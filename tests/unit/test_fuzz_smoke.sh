#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# A short run of what `make fuzz` runs long, so the harnesses cannot rot: 20,000 generated and
# mutated frames through the data path (and 60,000 with a flow table that fills), and each
# parser's libFuzzer harness for a second over its committed corpus.
. "$(dirname "$0")/../e2e/lib.sh"
work=$TMP                       # lib.sh made it; nothing else of lib.sh is set up here
trap 'rm -rf "$TMP"' EXIT

if [ "$(id -u)" -eq 0 ]; then
	out=$("$BUILD/fuzz/fuzz_datapath" -n 20000 2>&1); rc=$?
	ok $rc "data path: 20000 frames, every invariant held" "$out"
	# 12 epochs of a table that fills (about 4 s: make test has ten minutes in all). A flow
	# revived after its connection's end showed at frames 300,000 to 950,000 of million-frame
	# runs: finding such things is the long run's job (`make fuzz`); this one keeps a table
	# that fills in every `make test`.
	out=$("$BUILD/fuzz/fuzz_datapath" -n 60000 -f 32 -s 7 2>&1); rc=$?
	ok $rc "data path: 60000 frames with a 32-entry flow table" "$out"
else
	skip "data path fuzz" "needs root"
fi
for p in config switches plan budget; do
	mkdir -p "$work/$p"
	out=$("$BUILD/fuzz/fuzz_$p" -max_total_time=1 -timeout=10 -artifact_prefix="$work/" \
		"$work/$p" "tests/fuzz/corpus/$p" 2>&1); rc=$?
	n=$(ls "tests/fuzz/corpus/$p" | wc -l)
	ok $rc "parser $p: 1 s of libFuzzer from $n corpus files, no crash" \
		"$(echo "$out" | grep -E 'ERROR|SUMMARY|Done' | head -5)"
done
finish
