#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Run every test suite and print the closing line "N passed, N failed".
# Each suite speaks TAP ("ok N - name" / "not ok N - name"): cmocka binaries via
# CMOCKA_MESSAGE_OUTPUT=TAP, shell suites via tests/lib.sh. A suite that exits non-zero
# without reporting a failure counts as one failure, so a crash is never silent.
# Usage: tests/run.sh BUILD_DIR [SUITE_FILTER]
set -u
BUILD=${1:-build}
FILTER=${2:-${SUITE:-}}
export BUILD CMOCKA_MESSAGE_OUTPUT=TAP
passed=0 failed=0
failed_names=()

run_suite() {
	local name=$1; shift
	[ -n "$FILTER" ] && [[ "$name" != *"$FILTER"* ]] && return
	echo "# suite: $name"
	local out rc
	out=$(timeout 300 "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/    /'
	local p f
	p=$(echo "$out" | grep -cE '^ok [0-9]+')
	f=$(echo "$out" | grep -cE '^not ok [0-9]+')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1; echo "    not ok - $name exited $rc without reporting a failure"
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		f=1; echo "    not ok - $name ran no tests"
	fi
	passed=$((passed + p)); failed=$((failed + f))
	[ "$f" -gt 0 ] && failed_names+=("$name")
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_suite "$(basename "$t")" "$t"
done
for t in tests/unit/test_*.sh; do
	[ -f "$t" ] || continue
	run_suite "$(basename "$t")" bash "$t"
done
for t in tests/e2e/test_*.sh; do
	[ -f "$t" ] || continue
	run_suite "$(basename "$t")" bash "$t"
done

[ ${#failed_names[@]} -gt 0 ] && echo "failed suites: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
