#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Run every test suite and print the closing line "N passed, N failed, N skipped".
# Each suite speaks TAP ("ok N - name" / "not ok N - name", a plan "1..N" first or last):
# cmocka binaries via CMOCKA_MESSAGE_OUTPUT=TAP, shell suites via tests/e2e/lib.sh.
#
# How a suite's output is counted:
#  - "ok N" passes, "not ok N" fails;
#  - a test line with a "# SKIP" directive is a skip, whether the line says ok (TAP) or
#    not ok (cmocka): never a pass, never a failure -- unless its reason is not one of
#    ALLOWED_SKIPS below, then it is a failure;
#  - "1..0 # SKIP reason" (the whole suite skipped) is one skip, under the same rule;
#  - the plan must be there exactly once, first or last, and must equal the number of test
#    lines seen; a missing, repeated, misplaced or wrong plan is one more failure;
#  - a suite that exits non-zero without reporting a failure (a crash) is a failure, and so
#    is a suite that ran nothing;
#  - a run in which no suite ran at all (a filter that matches none, a build without tests)
#    is a failure, and so is a suite folder that is not there (relative folders are the
#    repository's: run this from its top).
# Every failure that no "not ok" line explains is printed as a "not ok - ..." line saying why.
# The exit status is non-zero when anything failed.
#
# Usage: tests/run.sh BUILD_DIR [SUITE_FILTER]
# Suites: the executables $BUILD/tests/test_* and the scripts test_*.sh in TEST_SCRIPT_DIRS
# (default: tests/unit tests/e2e). tests/unit/test_runner.sh proves the rules above by
# running this script on fake suites.
set -u
BUILD=${1:-build}
FILTER=${2:-${SUITE:-}}
TEST_SCRIPT_DIRS=${TEST_SCRIPT_DIRS:-tests/unit tests/e2e}
export BUILD CMOCKA_MESSAGE_OUTPUT=TAP
# Debian's own tools first (what tools/install-deps.sh installs): a python3 found earlier on
# PATH may be a version-manager shim that costs 0.1-2 s per start (hundreds of starts per run)
# and lacks python3-yaml.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

# The only reasons a skip may give (the start of the text after "# SKIP", any case). A skip
# stands only for what `make test` cannot provide: root, a tool Debian 12 does not package,
# a host without IPv6, a second CPU. Any other reason -- above all "X not installed" for a tool
# tools/install-deps.sh installs, or "not built" for something `make test` builds -- is a
# failure, because a skip there would hide a broken setup behind a green run.
ALLOWED_SKIPS=(
	"needs root"              # BPF, namespaces, other users: a non-root run cannot do them
	"kubectl not packaged"    # Debian 12 has no kubectl package
	"no IPv6"                 # the host's kernel has IPv6 off; nothing to install
	"one CPU"                 # two CPUs racing on one flow need two CPUs; nothing to install
)

passed=0 failed=0 skipped=0
failed_names=()

# Count one suite's TAP output (stdin): prints "PASSED FAILED SKIPPED" on the first line,
# then one "not ok - ..." line for every failure that no test line of the suite reported.
# cmocka's skip line carries the test's name, not a reason: a cmocka test gives its reason
# on a line "# skip reason: TEXT" printed just before it skips.
tally() {
	local allowed
	allowed=$(printf '%s\n' "${ALLOWED_SKIPS[@]}")
	awk -v allowed="$allowed" '
	function is_allowed(r,   n, i, pats) {
		r = tolower(r)
		sub(/^[ \t]+/, "", r)
		n = split(allowed, pats, "\n")
		for (i = 1; i <= n; i++)
			if (pats[i] != "" && index(r, tolower(pats[i])) == 1)
				return 1
		return 0
	}
	function note(msg) { notes = notes "not ok - " msg "\n"; f++ }
	BEGIN { p = 0; f = 0; s = 0; seen = 0; plans = 0; plan = -1; plan_at = 0; prev = "" }
	/^1\.\.[0-9]+/ {
		plans++
		plan = substr($0, 4) + 0
		plan_at = seen
		if (plan == 0 && match($0, /#[ \t]*[Ss][Kk][Ii][Pp]/))
			skip_all = substr($0, RSTART + RLENGTH) ""
		else if (plan == 0)
			skip_all = ""
		prev = $0
		next
	}
	/^(not )?ok([ \t]|$)/ {
		if (plans && plan_at > 0)
			misplaced = 1      # tests both before and after the plan
		seen++
		bad = ($0 ~ /^not /)
		if (match($0, /#[ \t]*[Ss][Kk][Ii][Pp]([ \t]|$)/)) {
			reason = substr($0, RSTART + RLENGTH)
			if (prev ~ /^# skip reason: /)
				reason = substr(prev, 16)
			if (is_allowed(reason))
				s++
			else
				note("skip for a reason not in ALLOWED_SKIPS of tests/run.sh (" $0 "): make test installs and builds everything else")
		} else if (bad)
			f++
		else
			p++
		prev = $0
		next
	}
	{ prev = $0 }
	END {
		if (plans == 0)
			note("no TAP plan (1..N): the suite stopped early or does not count its tests (" seen " test lines seen)")
		else if (plans > 1)
			note(plans " TAP plans: a suite has exactly one")
		else if (plan != seen)
			note("plan says 1.." plan " but " seen " test lines were seen")
		else if (misplaced)
			note("TAP plan in the middle of the tests: it must come first or last")
		if (plans == 1 && plan == 0 && seen == 0 && skip_all != "") {
			if (is_allowed(skip_all))
				s++
			else
				note("suite skipped for a reason not in ALLOWED_SKIPS of tests/run.sh (" skip_all ")")
		}
		printf "%d %d %d\n%s", p, f, s, notes
	}'
}

ran=0
run_suite() {
	local name=$1; shift
	[ -n "$FILTER" ] && [[ "$name" != *"$FILTER"* ]] && return
	ran=$((ran + 1))
	echo "# suite: $name"
	local out rc counts p f s t0=$SECONDS
	out=$(timeout 300 "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/    /'
	echo "    # $name took $((SECONDS - t0)) s"
	counts=$(printf '%s\n' "$out" | tally)
	read -r p f s <<<"$(head -n1 <<<"$counts")"
	tail -n +2 <<<"$counts" | sed 's/^/    /'
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1; echo "    not ok - $name exited $rc without reporting a failure"
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
		f=1; echo "    not ok - $name ran no tests"
	fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	[ "$f" -gt 0 ] && failed_names+=("$name")
}

# Suites that pin maps need a BPF file system. A host (a fresh VM, a CI runner) may have none
# mounted: mount one for the run and take it away again afterwards if nothing but the
# kernel's own iterators is left in it, so the run leaves /sys/fs/bpf as it found it.
BPFFS_MOUNTED=0
if [ "$(id -u)" = 0 ] && ! mountpoint -q /sys/fs/bpf 2>/dev/null; then
	mount -t bpf bpf /sys/fs/bpf && BPFFS_MOUNTED=1
fi
unmount_bpffs() {
	if [ "$BPFFS_MOUNTED" = 1 ] && [ -z "$(ls /sys/fs/bpf | grep -v '\.debug$')" ]; then
		umount /sys/fs/bpf 2>/dev/null
	fi
}
trap unmount_bpffs EXIT

# The container image's suite (tests/e2e/test_image.sh) builds deploy/Dockerfile, which on a
# machine that never built it takes minutes of apt-get and compiling (a Debian base, the
# toolchain), most of it waiting on one CPU. That build starts here, at the lowest CPU and I/O
# priority, while the unit and BPF suites run (deterministic, they do not time the host), and
# every end-to-end suite waits for it to end: none of them shares the host with it. The suite
# then builds the same recipe from buildah's layer cache and checks the image as always; a
# failed head start only leaves it to build (and report) on its own.
IMAGE_HEAD_START_PID=""
start_image_head_start() {
	[ "$(id -u)" = 0 ] || return
	[[ " $TEST_SCRIPT_DIRS " == *" tests/e2e "* ]] && [ -f tests/e2e/test_image.sh ] || return
	[ -z "$FILTER" ] || [[ "test_image.sh" == *"$FILTER"* ]] || return
	mkdir -p "$BUILD/image"
	IMAGE_HEAD_START_LOG=$BUILD/image/head-start.log
	IMAGE=localhost/sluice:head-start-$$ IMAGE_ENV=$BUILD/image/head-start.env \
		setsid nice -n 19 ionice -c 3 tools/image.sh "$BUILD" >"$IMAGE_HEAD_START_LOG" 2>&1 &
	IMAGE_HEAD_START_PID=$!
	echo "# the container image's build started in the background (pid $IMAGE_HEAD_START_PID, log $IMAGE_HEAD_START_LOG)"
}
wait_image_head_start() {
	[ -n "$IMAGE_HEAD_START_PID" ] || return
	local t0=$SECONDS rc
	wait "$IMAGE_HEAD_START_PID"; rc=$?
	IMAGE_HEAD_START_PID=""
	echo "# the container image's background build ended (exit $rc), waited $((SECONDS - t0)) s for it"
	buildah rmi "localhost/sluice:head-start-$$" >/dev/null 2>&1 # its layers stay cached
}
stop_image_head_start() {
	[ -n "$IMAGE_HEAD_START_PID" ] || return
	kill -TERM -- "-$IMAGE_HEAD_START_PID" 2>/dev/null
	wait "$IMAGE_HEAD_START_PID" 2>/dev/null
	buildah rmi "localhost/sluice:head-start-$$" >/dev/null 2>&1
}
trap 'stop_image_head_start; unmount_bpffs' EXIT
start_image_head_start

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] && [ -f "$t" ] || continue
	run_suite "$(basename "$t")" "$t"
done
for d in $TEST_SCRIPT_DIRS; do
	# a relative path is the repository's: run from elsewhere, the suites would silently go
	if [ ! -d "$d" ]; then
		echo "not ok - suite folder $d not found (run tests/run.sh from the repository's top)"
		failed=$((failed + 1)); failed_names+=("$d")
		continue
	fi
	for t in "$d"/test_*.sh; do
		[ -f "$t" ] || continue
		[[ "$t" == */e2e/* ]] && wait_image_head_start
		run_suite "$(basename "$t")" bash "$t"
	done
done

# A run that ran nothing (a filter that matches no suite, a build without tests) is no pass.
if [ "$ran" -eq 0 ]; then
	echo "not ok - no suite ran (filter '${FILTER}', $BUILD/tests, $TEST_SCRIPT_DIRS)"
	failed=$((failed + 1))
fi
[ ${#failed_names[@]} -gt 0 ] && echo "failed suites: ${failed_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
