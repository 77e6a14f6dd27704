#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# make fuzz: the data path under generated and mutated packets (tests/fuzz/fuzz_datapath.c),
# then every userspace parser under libFuzzer for a bounded time (tests/fuzz/fuzz_parsers.c).
# Fails on the first broken invariant or crash; a crash's input is kept under
# $BUILD/fuzz/crashes/PARSER/ (add it to tests/fuzz/corpus/PARSER/ with the fix).
#
# Knobs: FUZZ_PACKETS (default 1000000 frames), FUZZ_SEED (default: the harness's fixed
# seed; printed either way), FUZZ_SECONDS (per parser, default 60).
# Usage: tests/fuzz/run.sh BUILD_DIR
set -u
BUILD=${1:-build}
PACKETS=${FUZZ_PACKETS:-1000000}
SECONDS_EACH=${FUZZ_SECONDS:-60}
PARSERS="config switches plan budget"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "/tmp/sluice-fuzz.$$.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0

seed_args=()
[ -n "${FUZZ_SEED:-}" ] && seed_args=(-s "$FUZZ_SEED")

if [ "$(id -u)" -ne 0 ]; then
	echo "fuzz: the data path needs root (BPF_PROG_TEST_RUN): skipped"
else
	# The full table, then a 32-entry one that fills (admission goes on untracked).
	"$BUILD/fuzz/fuzz_datapath" -n "$PACKETS" "${seed_args[@]}" || failed=1
	"$BUILD/fuzz/fuzz_datapath" -n $((PACKETS / 5)) -f 32 "${seed_args[@]}" || failed=1
fi

for p in $PARSERS; do
	# New inputs go to a scratch copy; the corpus in the repository stays as committed.
	mkdir -p "$work/$p" "$BUILD/fuzz/crashes/$p"
	echo "fuzz: parser $p for ${SECONDS_EACH}s"
	if ! "$BUILD/fuzz/fuzz_$p" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix="$BUILD/fuzz/crashes/$p/" "$work/$p" "$here/corpus/$p" \
		>"$work/$p.log" 2>&1; then
		failed=1
		grep -E "ERROR|SUMMARY|Test unit written" "$work/$p.log" | head -20
		echo "fuzz: parser $p FAILED (full log above, input under $BUILD/fuzz/crashes/$p/)"
	else
		tail -n 1 "$work/$p.log" | sed "s/^/fuzz: parser $p: /"
	fi
done
[ "$failed" -eq 0 ] && echo "fuzz: all passed" || echo "fuzz: FAILED"
exit "$failed"
