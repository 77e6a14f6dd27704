#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# sluicectl's changing commands with bad arguments and no daemon: each must be refused by
# sluicectl itself, exit 2 with the bad field named, before it looks for sluiced (which would
# be exit 1, "no sluiced is running"), and an argument must never be cut to fit and sent.
# A config in a temporary directory names the service; no daemon, no maps, no root. Emits TAP.
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
cat > "$dir/sluice.yaml" <<YAML
interface: lo
state_dir: $dir/state
pin_dir: $dir/pin
services:
  - name: web
    port: 8080
YAML
cat > "$dir/plan.yaml" <<YAML
levels:
  - name: level-1
    description: shed reporting
    actions:
      - { service: web, class: L3, shed: 100 }
    expected_saving: "10% CPU"
    reversible: true
    verified_at: $(date -u +%Y-%m-%d)
YAML
owner64=$(printf 'o%.0s' $(seq 64))
reason256=$(printf 'r%.0s' $(seq 256))

n=0
# expect NAME PATTERN ARGS...: exit 2 and PATTERN on stderr.
expect() {
	local name=$1 pat=$2 out rc
	shift 2
	n=$((n + 1))
	out=$("$CTL" --run-dir "$dir/run" --config "$dir/sluice.yaml" "$@" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && printf '%s\n' "$out" | grep -q -- "$pat"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name: exit $rc"
		printf '%s\n' "$out" | sed 's/^/# /'
	fi
}

expect "switch set: an --owner of 64 bytes is refused, not cut to 63" \
	"--owner: longer than 63 bytes" \
	switch set web L3 --shed 50 --reason INC-1 --ttl 5m --owner "$owner64"
expect "plan apply: an --owner of 64 bytes is refused, not cut to 63" \
	"--owner: longer than 63 bytes" \
	plan apply "$dir/plan.yaml" level-1 --reason INC-1 --ttl 5m --owner "$owner64"
# A --reason given to any changing command: not blank, at most 255 bytes (sluiced refuses a
# longer one too, but that is exit 1, "refused", and it would audit a blank one).
expect "switch renew: a --reason of 256 bytes" "--reason is longer than 255 bytes" \
	switch renew web L3 --ttl 5m --reason "$reason256"
expect "switch renew: a blank --reason" "--reason must not be blank" \
	switch renew web L3 --ttl 5m --reason "  "
expect "switch clear: a blank --reason" "--reason must not be blank" \
	switch clear web L3 --reason ""
expect "cascade clear: a --reason of 256 bytes" "--reason is longer than 255 bytes" \
	cascade clear --reason "$reason256"
expect "cascade clear: an empty --reason" "--reason must not be blank" \
	cascade clear --reason ""
expect "plan revert: a --reason of 256 bytes" "--reason is longer than 255 bytes" \
	plan revert "$dir/plan.yaml" --reason "$reason256"
expect "breaker reset: a --reason of 256 bytes" "--reason is longer than 255 bytes" \
	breaker reset web --reason "$reason256"
# A renew needs a configured service (sluiced refuses one it does not run): a typo is exit 2.
expect "switch renew: a service the config does not name" "unknown service" \
	switch renew wbe L3 --ttl 5m
expect "plan apply: a blank --reason" "--reason: required and must not be empty" \
	plan apply "$dir/plan.yaml" level-1 --reason "   " --ttl 5m
# An empty directory names nothing: as a flag it is refused; as an environment variable
# ($SLUICE_STATE_DIR=$UNSET) it is unset. Taken as "", the paths were "/switches.json" and
# `switch ls` said "no switches in force: all traffic normal".
expect "switch ls --state-dir \"\"" "--state-dir: must not be empty" switch ls --state-dir ""
expect "--pin-dir \"\" status" "--pin-dir: must not be empty" --pin-dir "" status
n=$((n + 1))
out=$(SLUICE_STATE_DIR= "$CTL" --run-dir "$dir/run" --config "$dir/sluice.yaml" switch ls 2>&1)
if printf '%s\n' "$out" | grep -q "($dir/state/switches.json)"; then
	echo "ok $n - an empty \$SLUICE_STATE_DIR is unset: the config's state dir is read"
else
	echo "not ok $n - an empty \$SLUICE_STATE_DIR: not the config's state dir"
	printf '%s\n' "$out" | sed 's/^/# /'
fi

# --json is a contract for scripts: stdout is one JSON document and nothing else (messages
# on stderr), with the documented exit code.
# expect_json NAME RC CHECK ARGS...: exit RC, stdout one JSON document d for which the
# Python expression CHECK holds.
expect_json() {
	local name=$1 want=$2 check=$3 rc
	shift 3
	n=$((n + 1))
	"$CTL" --run-dir "$dir/run" --config "$dir/sluice.yaml" "$@" >"$dir/out" 2>"$dir/err"
	rc=$?
	if [ $rc -eq "$want" ] && python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$dir/out" "$check" 2>/dev/null; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name: exit $rc"
		sed 's/^/# stdout: /' "$dir/out"
		sed 's/^/# stderr: /' "$dir/err"
	fi
}
mkdir -p "$dir/state"
expect_json "switch log --json, no log yet: []" 0 'd == []' switch log --json
printf '%s\n' '{"time":"2024-05-01T12:00:00Z","uid":1000,"user":"alice","command":"switch set","service":"web","class":"L3","old":null,"new":{"shed_pct":100,"reason":"INC-42","owner":"alice","expires_at":"2024-05-01T13:00:00Z"},"reason":"INC-42"}' \
	'{"time":"2024-05-01T12:05:00Z","uid":1000,"user":"alice","command":"switch clear","service":"web","class":"L3","old":{"shed_pct":100,"reason":"INC-42","owner":"alice","expires_at":"2024-05-01T13:00:00Z"},"new":null,"reason":"done"}' \
	> "$dir/state/audit.log"
expect_json "switch log --json: the records, as in the log" 0 \
	'[r["command"] for r in d] == ["switch set", "switch clear"] and d[0]["new"]["shed_pct"] == 100' \
	switch log --json
expect_json "--json switch log --last 1 (the global option)" 0 \
	'len(d) == 1 and d[0]["reason"] == "done" and d[0]["new"] is None' --json switch log --last 1
echo '{damaged' >> "$dir/state/audit.log"
expect_json "switch log --json, a damaged record: the rest, exit 1" 1 'len(d) == 2' \
	switch log --json
rm -f "$dir/state/audit.log"
# A command with no JSON form refuses --json (exit 2, nothing on stdout, nothing done) rather
# than print its text where a script expects JSON.
printf 'chains: [ ]\n' > "$dir/chains.yaml"
for cmd in "top --iterations 1" "hist web L0" "plan check $dir/plan.yaml" \
	   "plan show $dir/plan.yaml" "budget check $dir/chains.yaml" "baseline reset web" \
	   "detach"; do
	# shellcheck disable=SC2086  # the command's words
	expect "$cmd --json: refused" "--json: this command has no JSON output" $cmd --json
	n=$((n + 1))
	# shellcheck disable=SC2086
	if [ -z "$("$CTL" --run-dir "$dir/run" --config "$dir/sluice.yaml" --json $cmd 2>/dev/null)" ]
	then
		echo "ok $n - --json $cmd: nothing on stdout"
	else
		echo "not ok $n - --json $cmd: printed on stdout"
	fi
done
# detach with a pin dir where nothing of sluice is pinned (a typo, the state dir): nothing
# can be pinned outside a BPF filesystem, so nothing there is removed, and it is exit 1,
# "nothing attached" -- not every file of the directory unlinked and exit 0, "detached".
mkdir -p "$dir/notpins"
echo keep > "$dir/notpins/switches.json"
n=$((n + 1))
"$CTL" --run-dir "$dir/run" --config "$dir/sluice.yaml" --pin-dir "$dir/notpins" detach \
	>"$dir/out" 2>"$dir/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "nothing attached" "$dir/err" && [ ! -s "$dir/out" ] &&
   [ "$(cat "$dir/notpins/switches.json" 2>/dev/null)" = keep ]; then
	echo "ok $n - detach: a directory that is not a BPF filesystem is left as it is, exit 1"
else
	echo "not ok $n - detach: a directory that is not a BPF filesystem: exit $rc"
	sed 's/^/# stdout: /' "$dir/out"
	sed 's/^/# stderr: /' "$dir/err"
	ls -la "$dir/notpins" 2>&1 | sed 's/^/# /'
fi
n=$((n + 1))
rm -rf "$dir/notpins"
mkdir "$dir/notpins"
"$CTL" --run-dir "$dir/run" --config "$dir/sluice.yaml" --pin-dir "$dir/notpins" detach \
	>/dev/null 2>&1
rc=$?
if [ $rc -eq 1 ] && [ -d "$dir/notpins" ]; then
	echo "ok $n - detach: an empty directory that is not a BPF filesystem stays, exit 1"
else
	echo "not ok $n - detach: an empty directory that is not a BPF filesystem: exit $rc"
fi
# detach pointed at the root of a BPF file system (--pin-dir /sys/fs/bpf, say), where other
# tools pin their maps and links: it takes nothing off and unlinks nothing, exit 1 naming
# why. Before, every pin at that root was unlinked and every pinned link taken off. Root
# only: the test mounts a BPF file system of its own on a temporary directory, with a map of
# "another tool" pinned in it, and unmounts it again.
if [ "$(id -u)" = 0 ]; then   # bpftool is one of the packages make test installs
	n=$((n + 1))
	mkdir -p "$dir/bpfroot"
	trap 'umount "$dir/bpfroot" 2>/dev/null; rm -rf "$dir"' EXIT
	if mount -t bpf bpf "$dir/bpfroot" &&
	   bpftool map create "$dir/bpfroot/other_tool" type array key 4 value 4 entries 1 \
		name other_tool; then
		"$CTL" --run-dir "$dir/run" --config "$dir/sluice.yaml" --pin-dir "$dir/bpfroot" \
			detach >"$dir/out" 2>"$dir/err"
		rc=$?
		if [ $rc -eq 1 ] && grep -q "root of a mounted file system" "$dir/err" &&
		   [ -e "$dir/bpfroot/other_tool" ] && [ ! -s "$dir/out" ]; then
			echo "ok $n - detach: the root of a BPF file system is refused, another tool's pin stays, exit 1"
		else
			echo "not ok $n - detach: the root of a BPF file system: exit $rc"
			sed 's/^/# stderr: /' "$dir/err"
			ls -la "$dir/bpfroot" 2>&1 | sed 's/^/# /'
		fi
	else
		echo "not ok $n - detach: could not mount a BPF file system with a pin to try it on"
	fi
	rm -f "$dir/bpfroot/other_tool"
	umount "$dir/bpfroot" 2>/dev/null
fi
# Numbers on the command line are plain decimals, as in the config: strtod took "0x10" for
# 16 seconds and " 5" (a leading blank) for 5.
expect "top --interval 0x10: not a hex number" "--interval must be 0.1..3600 seconds, not '0x10'" \
	top --interval 0x10
expect "top --interval ' 1': no leading blank" "--interval must be 0.1..3600 seconds" \
	top --interval " 1"
expect "top --iterations ' 5': no leading blank" "--iterations must be a whole number" \
	top --iterations " 5"
expect "switch log --last ' 5': no leading blank" "--last must be a whole number" \
	switch log --last " 5"

# sluiced publishes its pin dir and socket for sluicectl, which resolves them from its own
# working directory: a relative --pin-dir or --run-dir is refused (exit 2), --check included.
for opt in --pin-dir --run-dir; do
	n=$((n + 1))
	"$BUILD/sluiced" --check "$dir/sluice.yaml" "$opt" rel/dir >"$dir/out" 2>"$dir/err"
	rc=$?
	if [ $rc -eq 2 ] && grep -q -- "$opt rel/dir: must be an absolute path" "$dir/err"; then
		echo "ok $n - sluiced $opt rel/dir: refused, exit 2"
	else
		echo "not ok $n - sluiced $opt rel/dir: exit $rc"
		sed 's/^/# stdout: /' "$dir/out"
		sed 's/^/# stderr: /' "$dir/err"
	fi
done
echo "1..$n"
