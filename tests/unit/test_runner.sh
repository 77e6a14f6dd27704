#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# tests/run.sh counted against fake suites: each case writes one suite's output (and exit
# code), runs run.sh on it alone, and checks run.sh's closing line, its exit status and the
# line that explains a failure. Speaks TAP (ok/finish of tests/e2e/lib.sh; no namespaces are
# set up). Everything lives in lib.sh's mktemp directory, removed on exit.
TAG=runner
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh" || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM

# case DESCRIPTION EXPECTED_CLOSING_LINE EXPECTED_RC EXPECTED_TEXT SUITE_EXIT OUTPUT
# EXPECTED_TEXT ("" for none) must appear in run.sh's output; OUTPUT is the fake suite's.
case_() {
	local desc=$1 want=$2 want_rc=$3 text=$4 exit_code=$5 output=$6
	local dir=$TMP/$((N + 1)) out rc last
	mkdir -p "$dir/build/tests" "$dir/scripts"
	printf '%s\n' "$output" > "$dir/out.txt"
	printf 'cat %q\nexit %d\n' "$dir/out.txt" "$exit_code" > "$dir/scripts/test_fake.sh"
	out=$(SUITE= TEST_SCRIPT_DIRS=$dir/scripts tests/run.sh "$dir/build" 2>&1); rc=$?
	last=$(tail -n1 <<<"$out")
	[ "$last" = "$want" ] && [ "$rc" -eq "$want_rc" ] &&
		{ [ -z "$text" ] || grep -qF -- "$text" <<<"$out"; }
	ok $? "$desc" "want '$want' rc $want_rc${text:+ and '$text'}, got '$last' rc $rc" \
		"$(sed 's/^/  /' <<<"$out")"
}

case_ "plan first, all pass" "2 passed, 0 failed, 0 skipped" 0 "" 0 \
	$'1..2\nok 1 - a\nok 2 - b'
case_ "plan last, all pass" "2 passed, 0 failed, 0 skipped" 0 "" 0 \
	$'ok 1 - a\nok 2 - b\n1..2'
case_ "TAP ok N with a SKIP directive (needs root) is a skip, not a pass" "1 passed, 0 failed, 1 skipped" 0 "" 0 \
	$'1..2\nok 1 - a\nok 2 - b # SKIP needs root (BPF)'
case_ "cmocka's not-ok SKIP line with an allowed reason is a skip, not a failure" \
	"1 passed, 0 failed, 1 skipped" 0 "" 0 \
	$'1..2\nok 1 - test_a\n# skip reason: no IPv6 on this host\nnot ok 2 # SKIP test_b'
case_ "an ok line with a lower-case skip directive and an allowed reason is a skip" "1 passed, 0 failed, 1 skipped" 0 "" 0 \
	$'1..2\nok 1 - test_a\n# skip reason: needs root\nok 2 # skip test_b'
case_ "a skip because a tool make test installs is missing fails" "1 passed, 1 failed, 0 skipped" 1 \
	"not in ALLOWED_SKIPS" 0 $'1..2\nok 1 - a\nok 2 - b # SKIP tmux not installed'
case_ "a cmocka skip that gives no reason fails" "0 passed, 1 failed, 0 skipped" 1 \
	"not in ALLOWED_SKIPS" 0 $'1..1\nnot ok 1 # SKIP test_x'
case_ "plan 1..0 with SKIP needs root is one skipped suite" "0 passed, 0 failed, 1 skipped" 0 "" 0 \
	$'1..0 # SKIP needs root'
case_ "plan 1..0 with SKIP prometheus not installed fails" "0 passed, 1 failed, 0 skipped" 1 \
	"suite skipped for a reason not in ALLOWED_SKIPS" 0 $'1..0 # SKIP prometheus not installed'
case_ "plan larger than the tests seen fails" "2 passed, 1 failed, 0 skipped" 1 \
	"plan says 1..3 but 2 test lines were seen" 0 $'1..3\nok 1 - a\nok 2 - b'
case_ "plan smaller than the tests seen fails" "2 passed, 1 failed, 0 skipped" 1 \
	"plan says 1..1 but 2 test lines were seen" 0 $'ok 1 - a\nok 2 - b\n1..1'
case_ "no plan fails" "2 passed, 1 failed, 0 skipped" 1 "no TAP plan" 0 $'ok 1 - a\nok 2 - b'
case_ "two plans fail" "1 passed, 1 failed, 0 skipped" 1 "2 TAP plans" 0 $'1..1\nok 1 - a\n1..1'
case_ "a plan between the tests fails" "2 passed, 1 failed, 0 skipped" 1 "in the middle" 0 \
	$'ok 1 - a\n1..2\nok 2 - b'
case_ "a reported failure fails the run" "1 passed, 1 failed, 0 skipped" 1 "" 1 \
	$'1..2\nok 1 - a\nnot ok 2 - b'
case_ "a crash that reports no failure is a failure" "1 passed, 1 failed, 0 skipped" 1 \
	"test_fake.sh exited 3 without reporting a failure" 3 $'1..1\nok 1 - a'
case_ "a suite that ran nothing fails" "0 passed, 1 failed, 0 skipped" 1 "ran no tests" 0 '1..0'
case_ "a suite that printed nothing fails" "0 passed, 1 failed, 0 skipped" 1 "no TAP plan" 0 ''

# A compiled suite killed by a signal after a complete-looking report: still a failure.
dir=$TMP/crash
mkdir -p "$dir/build/tests" "$dir/scripts"
printf '#!/bin/sh\necho 1..1\necho "ok 1 - a"\nkill -SEGV $$\n' > "$dir/build/tests/test_crash"
chmod +x "$dir/build/tests/test_crash"
out=$(SUITE= TEST_SCRIPT_DIRS=$dir/scripts tests/run.sh "$dir/build" 2>&1); rc=$?
[ "$(tail -n1 <<<"$out")" = "1 passed, 1 failed, 0 skipped" ] && [ "$rc" -ne 0 ] &&
	grep -q "test_crash exited 139 without reporting a failure" <<<"$out"
ok $? "an executable suite killed by SIGSEGV is a failure" "rc $rc" "$(sed 's/^/  /' <<<"$out")"

# A run in which no suite ran is no pass: a filter that matches nothing, or a build and script
# folder without suites; a script folder that is not there (run.sh started elsewhere) fails.
dir=$TMP/none
mkdir -p "$dir/build/tests" "$dir/scripts"
out=$(SUITE= TEST_SCRIPT_DIRS=$dir/scripts tests/run.sh "$dir/build" 2>&1); rc=$?
[ "$(tail -n1 <<<"$out")" = "0 passed, 1 failed, 0 skipped" ] && [ "$rc" -ne 0 ] &&
	grep -q "no suite ran" <<<"$out"
ok $? "a run with no suite at all fails" "rc $rc" "$(sed 's/^/  /' <<<"$out")"
printf '1..1\nok 1 - a\n' > "$dir/out.txt"
printf 'cat %q\n' "$dir/out.txt" > "$dir/scripts/test_fake.sh"
out=$(SUITE= TEST_SCRIPT_DIRS=$dir/scripts tests/run.sh "$dir/build" test_no_such_suite 2>&1); rc=$?
[ "$(tail -n1 <<<"$out")" = "0 passed, 1 failed, 0 skipped" ] && [ "$rc" -ne 0 ] &&
	grep -q "no suite ran (filter 'test_no_such_suite'" <<<"$out"
ok $? "a filter that matches no suite fails" "rc $rc" "$(sed 's/^/  /' <<<"$out")"
out=$(SUITE= TEST_SCRIPT_DIRS="$dir/scripts $dir/not-there" tests/run.sh "$dir/build" 2>&1); rc=$?
[ "$(tail -n1 <<<"$out")" = "1 passed, 1 failed, 0 skipped" ] && [ "$rc" -ne 0 ] &&
	grep -q "suite folder $dir/not-there not found" <<<"$out"
ok $? "a suite folder that is not there fails" "rc $rc" "$(sed 's/^/  /' <<<"$out")"

finish
