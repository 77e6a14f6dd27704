#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# End-to-end test of the operator commands of build/sluicectl that need no BPF and no daemon:
# switch ls/log on files, every changing command refused with exit 1 when no sluiced runs (and
# bad input refused with exit 2 before that), plan check/show, budget check, `top` with
# nothing attached, and the command line itself (help of every command, both option forms,
# -v/-q). The changes against a running sluiced are tests/e2e/test_operator.sh. Everything
# happens in a mktemp directory (state dir, config, pin dir and run dir that do not exist);
# removed on exit. Speaks TAP.
# Usage: tests/e2e/test_cli_switch.sh   (BUILD=build by default)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
CTL=$BUILD/sluicectl
FIX=tests/unit/fixtures
TMP=$(mktemp -d /tmp/sluice-test-cli.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
export SLUICE_RUN_DIR=$TMP/run   # no sluiced publishes itself here

STATE=$TMP/state
SW=$STATE/switches.json
AUDIT=$STATE/audit.log
GROUP=root
[ "$(id -u)" -eq 0 ] || GROUP=$(id -gn)
cat > "$TMP/sluice.yaml" <<EOF
interface: lo
state_dir: $STATE
pin_dir: $TMP/pins
switch_group: $GROUP
services:
  - name: web
    port: 8080
    protocol: http
  - name: api
    port: 9000
EOF

N=0
FAILED=0
ok() { # ok STATUS DESCRIPTION [DIAGNOSTIC...]
	N=$((N + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $N - $2"
	else
		echo "not ok $N - $2"
		FAILED=$((FAILED + 1))
		shift 2
		for d in "$@"; do printf '%s\n' "$d" | sed 's/^/#   /'; done
	fi
}
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP $2"; }

OUT= ERR= RC=
ctl() { # run sluicectl with the test's directories; sets OUT, ERR, RC
	OUT=$("$CTL" --pin-dir "$TMP/pins" --state-dir "$STATE" --config "$TMP/sluice.yaml" "$@" \
		2>"$TMP/stderr")
	RC=$?
	ERR=$(cat "$TMP/stderr")
}
expect() { # expect RC DESCRIPTION: last command's exit code
	[ "$RC" -eq "$1" ]
	ok $? "$2" "exit $RC, expected $1" "stdout: $OUT" "stderr: $ERR"
}
has() { # has TEXT IN DESCRIPTION
	case "$2" in *"$1"*) ok 0 "$3" ;; *) ok 1 "$3" "missing: $1" "got: $2" ;; esac
}
snap() { cat "$SW" "$AUDIT" 2>/dev/null | sha256sum; }

if [ ! -x "$CTL" ]; then
	echo "1..1"
	echo "not ok 1 - $CTL not built"
	exit 1
fi
echo "1..52"

# ---- no daemon: every change is refused, nothing is written ----
ctl switch ls
expect 0 "switch ls with no file: exit 0"
has "no switches in force" "$OUT" "switch ls with no file says all normal"
nodaemon=
for cmd in "switch set web L3 --shed 50 --reason INC-42 --ttl 10m" "switch clear web L3" \
	"switch renew web L3 --ttl 5m" "breaker reset web --reason INC-1" "cascade clear" \
	"plan apply $FIX/plan_order_api.yaml L1 --reason INC-44 --ttl 30m --force" \
	"plan revert $FIX/plan_order_api.yaml"; do
	ctl $cmd
	{ [ "$RC" -eq 1 ] && [[ "$ERR" == *"no sluiced is running to apply it"*"nothing changed"* ]] &&
		[ ! -e "$SW" ] && [ ! -e "$AUDIT" ]; } || nodaemon="$nodaemon [$cmd: $RC $ERR]"
done
ok $([ -z "$nodaemon" ] && echo 0 || echo 1) \
	"with no sluiced running every changing command exits 1 saying so, and writes nothing" "$nodaemon"
# A reason that is not UTF-8 cannot go into the request's JSON: refused as bad input (exit
# 2), before any daemon is looked for, for every verb that carries one.
notext=
for cmd in "switch set web L3 --shed 50 --ttl 10m --reason" "switch clear web L3 --reason" \
	"switch renew web L3 --ttl 5m --reason" "breaker reset web --reason" "cascade clear --reason"; do
	ctl $cmd $'INC\xff'
	{ [ "$RC" -eq 2 ] && [[ "$ERR" == *"not valid UTF-8"* ]] && [ ! -e "$SW" ]; } ||
		notext="$notext [$cmd: $RC $ERR]"
done
ok $([ -z "$notext" ] && echo 0 || echo 1) \
	"a --reason that is not UTF-8 exits 2 naming it, for every verb that takes one" "$notext"

# ---- switch ls and switch log read the files ----
mkdir -p "$STATE"
now=$(date +%s)
cat > "$SW" <<J
{"version": 1, "switches": [
 {"service": "web", "class": "L2", "shed_pct": 30, "reason": "INC-42", "owner": "alice",
  "set_at": $((now - 60)), "expires_at": $((now + 5400))},
 {"service": "web", "class": "L3", "shed_pct": 100, "reason": "INC-42 worse", "owner": "bob",
  "set_at": $((now - 60)), "expires_at": $((now + 3600)), "kind": "release",
  "runbook": "https://rb/web", "renewals": 2}]}
J
ctl switch ls
expect 0 "switch ls: exit 0"
has "alice" "$OUT" "switch ls shows the owner"
has "INC-42 worse" "$OUT" "switch ls shows the reason"
echo "$OUT" | grep -Eq "^web +L2 .* 1h(29|30)m"
ok $? "switch ls shows the time left" "$OUT"
echo "$OUT" | grep -q "^web *L3 *100% *release *bob .* 2  INC-42 worse  runbook https://rb/web$"
ok $? "switch ls shows kind, renewals and runbook (a file without them means ops, 0)" "$OUT"
ctl switch ls --json
expect 0 "switch ls --json: exit 0"
echo "$OUT" | python3 -c '
import json, sys
a = json.load(sys.stdin)
assert isinstance(a, list) and len(a) == 2, a
w = {(x["service"], x["class"]): x for x in a}
assert w[("web", "L2")]["shed_pct"] == 30 and w[("web", "L2")]["owner"] == "alice"
assert w[("web", "L2")]["kind"] == "ops" and w[("web", "L2")]["renewals"] == 0
assert w[("web", "L3")]["shed_pct"] == 100 and w[("web", "L3")]["left_s"] > 3500
assert w[("web", "L3")]["kind"] == "release" and w[("web", "L3")]["renewals"] == 2
for x in a:
    assert x["expires_at"] > x["set_at"] and x["expired"] is False and "age_s" in x
' 2>"$TMP/py"
ok $? "switch ls --json is an array with both switches and their ledger fields" "$OUT" "$(cat "$TMP/py")"

cat > "$AUDIT" <<J
{"time":"2026-01-01T10:00:00Z","uid":0,"user":"alice","command":"switch set","service":"web","class":"L3","old":null,"new":{"shed_pct":50,"reason":"INC-42","owner":"alice","expires_at":"2026-01-01T11:00:00Z"},"reason":"INC-42"}
{"time":"2026-01-01T10:05:00Z","uid":0,"user":"file","command":"file edit","service":"web","class":"L3","old":{"shed_pct":50,"reason":"INC-42","owner":"alice","expires_at":"2026-01-01T11:00:00Z"},"new":{"shed_pct":100,"reason":"INC-42","owner":"alice","expires_at":"2026-01-01T11:00:00Z","kind":"ops","runbook":"","renewals":0},"reason":"INC-42"}
{"time":"2026-01-01T10:06:00Z","uid":0,"user":"root","command":"breaker reset","service":"web","class":null,"old":null,"new":null,"reason":"INC-43"}
J
ctl switch log
expect 0 "switch log: exit 0 (records with and without the ledger fields, class null)"
has "normal -> shed 50%" "$OUT" "switch log shows old -> new"
has "file(0) file edit web/L3: shed 50%" "$OUT" "switch log shows a direct edit as a diff"
ctl switch log --last 1
[ "$RC" -eq 0 ] && [ "$(echo "$OUT" | wc -l)" -eq 1 ] && [[ "$OUT" == *"breaker reset web -- reason: INC-43"* ]]
ok $? "switch log --last 1 shows only the last change" "$OUT"

# ---- bad input: exit 2, nothing changed ----
before=$(snap)
bad() { # bad DESCRIPTION ARGS...: exit 2 and files byte-identical
	local d=$1; shift
	ctl "$@"
	[ "$RC" -eq 2 ] && [ "$(snap)" = "$before" ]
	ok $? "$d: exit 2, nothing changed" "exit $RC" "stderr: $ERR"
}
bad "unknown service" switch set nosuch L3 --shed 50 --reason x --ttl 1m
has 'nosuch' "$ERR" "unknown service is named in the error"
bad "class L5" switch set web L5 --shed 50 --reason x --ttl 1m
bad "--shed 101" switch set web L3 --shed 101 --reason x --ttl 1m
bad "--shed -1" switch set web L3 --shed -1 --reason x --ttl 1m
bad "missing --reason" switch set web L3 --shed 50 --ttl 1m
has '--reason' "$ERR" "missing --reason is named"
bad "missing --ttl" switch set web L3 --shed 50 --reason x
bad "--ttl 0" switch set web L3 --shed 50 --reason x --ttl 0
bad "--ttl 5x" switch set web L3 --shed 50 --reason x --ttl 5x
bad "blank --reason" switch set web L3 --shed 50 --reason "   " --ttl 1m
bad "clear of an unknown class" switch clear web L9
bad "switch log --last 0" switch log --last 0

# ---- damaged switch file ----
printf '{"version": 1, "switches": [ {"service": "web"' > "$SW"
ctl switch ls
[ "$RC" -eq 1 ] && [[ "$ERR" == *"ERROR: switch file"* ]] && [[ "$ERR" == *"NO switches are in force"* ]]
ok $? "corrupt switches.json: switch ls prints a loud error and exits 1" "exit $RC" "$ERR"
ctl switch ls --json
[ "$RC" -eq 1 ] && [ "$OUT" = "[]" ]
ok $? "corrupt switches.json: switch ls --json prints an empty array and exits 1" "exit $RC" "$OUT"

# ---- plans ----
today=$(date -u +%F)
cat > "$TMP/plan_clean.yaml" <<EOF
levels:
  - name: L1
    actions:
      - { service: web, class: L3, shed: 100 }
    expected_saving: "10% CPU"
    reversible: true
    verified_at: $today
EOF
ctl plan check "$TMP/plan_clean.yaml"
expect 0 "plan check of a clean plan: exit 0"
ctl plan check $FIX/plan_order_api.yaml
[ "$RC" -eq 1 ] && [[ "$OUT" == *"plan_order_api.yaml:"*"[never-verified]"* ]]
ok $? "plan check with findings: file:line findings, exit 1" "exit $RC" "$OUT"
ctl plan check $FIX/plan_syntax.yaml
expect 2 "plan check of an invalid plan: exit 2"
ctl plan show $FIX/plan_order_api.yaml
[ "$RC" -eq 0 ] && [[ "$OUT" == *"applying L2 sets"* ]]
ok $? "plan show lists the cumulative effect of each level" "$OUT"

before=$(snap)
bad "plan apply of an unknown level" plan apply $FIX/plan_order_api.yaml L9 --reason INC-44 --ttl 30m
has "L1, L2, L3" "$ERR" "unknown level error lists the plan's levels"
bad "plan apply of an irreversible level without approver" \
	plan apply $FIX/plan_no_approver.yaml L2 --reason INC-44 --ttl 30m
bad "plan apply without --ttl" plan apply $FIX/plan_order_api.yaml L2 --reason INC-44

ctl plan apply $FIX/plan_order_api.yaml L2 --reason INC-44 --ttl 30m
[ "$RC" -eq 2 ] && [[ "$ERR" == *"level L2 was "*"drilled"*"(--force to apply anyway)"* ]] && [ "$(snap)" = "$before" ]
ok $? "plan apply of a level not drilled recently, without --force: exit 2 before asking any daemon" "exit $RC" "$ERR"

# ---- budget ----
ctl budget check $FIX/order_api_chains.yaml
[ "$RC" -eq 1 ] && [[ "$OUT" == *9540* ]]
ok $? "budget check of the order-api chain prints 9540 and exits 1" "exit $RC" "$OUT"
ctl budget check $FIX/budget_ok.yaml
expect 0 "budget check within budget: exit 0"
ctl budget check $FIX/budget_bad.yaml
expect 2 "budget check of an invalid file: exit 2"

# ---- top ----
ctl top --iterations 1
[ "$RC" -eq 1 ] && [[ "$ERR" == *"nothing attached at $TMP/pins (is sluiced running?)"* ]]
ok $? "top with nothing attached: exit 1 with a clear message" "exit $RC" "$ERR"

# ---- help, option forms, log levels (both programs parse from one table each) ----
missing=
for verb in status top hist "switch set" "switch clear" "switch renew" "switch ls" "switch log" \
	"plan check" "plan show" "plan apply" "plan revert" "budget check" "breaker reset" \
	"cascade clear" detach; do
	ctl $verb --help
	{ [ "$RC" -eq 0 ] && [[ "$OUT" == "usage: sluicectl $verb"* ]] &&
		[[ "$OUT" == *$'\nexample'*$'\n  sluicectl '"$verb"* ]]; } || missing="$missing [$verb]"
done
ok $([ -z "$missing" ] && echo 0 || echo 1) "every command's --help: exit 0, its usage line and an example" "no help:$missing"
ctl --help
[ "$RC" -eq 0 ] && [[ "$OUT" == *"  switch set SERVICE CLASS"* ]] && [[ "$OUT" == *"  cascade clear"* ]] &&
	[[ "$OUT" == *"  breaker reset SERVICE"* ]] && [[ "$OUT" == *"--run-dir"* ]] && [[ "$OUT" == *"-v, --verbose"* ]]
ok $? "sluicectl --help lists the commands and -v/-q" "exit $RC" "$OUT"
ctl switch
r1=$RC; ctl switch --help; r2=$RC; ctl nosuch; r3=$RC
[ "$r1" -eq 2 ] && [ "$r2" -eq 0 ] && [ "$r3" -eq 2 ] && [[ "$ERR" == *"unknown command 'nosuch'"* ]]
ok $? "a bare group lists its commands (exit 2, 0 with --help); an unknown command is exit 2" "$r1 $r2 $r3" "$ERR"
ctl plan apply $FIX/plan_order_api.yaml L1 --reason=INC-45 --ttl=5m --force
[ "$RC" -eq 1 ] && [[ "$ERR" == *"no sluiced is running"* ]]
ok $? "plan apply accepts --opt=VALUE (it gets as far as looking for the daemon)" "exit $RC" "$ERR"
ctl switch set web L3 --shed=10 --reason x --ttl
[ "$RC" -eq 2 ] && [[ "$ERR" == *"option --ttl needs a value"* ]]
ok $? "a value option at the end: exit 2 naming it" "exit $RC" "$ERR"
OUT=$("$CTL" -q --config "$TMP/none.yaml" --pin-dir "$TMP/pins" plan check $FIX/plan_order_api.yaml 2>&1 >/dev/null)
w=$OUT
OUT=$("$CTL" -qq --config "$TMP/none.yaml" --pin-dir "$TMP/pins" plan check $FIX/plan_order_api.yaml 2>&1 >/dev/null)
RC=$?; ERR=$OUT
[ "$RC" -eq 1 ] && [[ "$w" == *"sluicectl: warning: no service list"* ]] && [ -z "$ERR" ]
ok $? "-qq silences warnings (-q still shows them)" "with -q: $w" "with -qq: $ERR"
OUT=$("$CTL" --config "$TMP/none.yaml" --state-dir "$STATE" switch ls -v 2>&1 >/dev/null)
[[ "$OUT" == *"sluicectl: debug: no sluiced publishes itself"* ]]
ok $? "-v after the command shows debug messages" "$OUT"
[[ "$OUT" == *"sluicectl: warning: config $TMP/none.yaml not used (1 error, the first: cannot open"* ]]
ok $? "a config named by --config that cannot be used is a warning naming why, not a debug line" "$OUT"
OUT=$("$BUILD/sluiced" --help); r1=$?
ERR=$("$BUILD/sluiced" --bogus 2>&1); r2=$?
"$BUILD/sluiced" --check="$TMP/sluice.yaml" >/dev/null 2>&1; r3=$?
"$BUILD/sluiced" 2>/dev/null; r4=$?
[ "$r1" -eq 0 ] && [[ "$OUT" == *"sluiced --config /etc/sluice/sluice.yaml"* ]] && [ "$r2" -eq 2 ] &&
	[[ "$ERR" == *"unknown option '--bogus'"* ]] && [ "$r3" -eq 0 ] && [ "$r4" -eq 2 ]
ok $? "sluiced: --help with an example (0), --bogus (2), --check=FILE (0), no config (2)" "$r1 $r2 $r3 $r4" "$OUT" "$ERR"

[ "$FAILED" -eq 0 ]
