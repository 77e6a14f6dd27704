#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# End-to-end test of the operator commands of build/sluicectl that need no BPF: switch
# set/clear/ls/log, the writer protocol (damaged file, permission), plan check/show/apply,
# budget check, cascade clear, `top` with nothing attached, and the command line itself (help
# of every command, both option forms, -v/-q). Everything happens in a
# mktemp directory (state dir, config, pin dir that does not exist); removed on exit.
# Speaks TAP. Needs root for the "unprivileged user" case (skipped otherwise).
# Usage: tests/e2e/test_cli_switch.sh   (BUILD=build by default)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
CTL=$BUILD/sluicectl
FIX=tests/unit/fixtures
TMP=$(mktemp -d /tmp/sluice-test-cli.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
chmod 755 "$TMP"   # the unprivileged case must be able to read the config

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
echo "1..65"

# ---- happy path ----
ctl switch ls
expect 0 "switch ls with no file: exit 0"
has "no switches in force" "$OUT" "switch ls with no file says all normal"

ctl switch set web L3 --shed 50 --reason "INC-42 payment slow" --ttl 10m
expect 0 "switch set web L3 50% 10m"
has "switch set: web L3 shed 50% for 10m (reason INC-42 payment slow)" "$OUT" "switch set confirmation line"
ctl switch set web L2 --shed 30% --reason "INC-42" --ttl 1h30m --owner alice
expect 0 "switch set with PCT% and --owner"
ctl switch set web L3 --shed 100 --reason "INC-42 worse" --ttl 1h
expect 0 "switch set replaces an existing switch"
has "replaces shed 50%" "$OUT" "replacement names the old switch"

[ "$(stat -c %a "$STATE")" = 755 ] && [ "$(stat -c %a "$SW")" = 644 ] && [ "$(stat -c %a "$AUDIT")" = 640 ]
ok $? "modes: state dir 0755, switch file 0644, audit log 0640" "$(ls -la "$STATE")"

ctl switch ls
expect 0 "switch ls: exit 0"
has "alice" "$OUT" "switch ls shows the owner"
has "INC-42 worse" "$OUT" "switch ls shows the reason"
has "1h30m" "$OUT" "switch ls shows the time left"
ctl switch ls --json
expect 0 "switch ls --json: exit 0"
echo "$OUT" | python3 -c '
import json, sys
a = json.load(sys.stdin)
assert isinstance(a, list) and len(a) == 2, a
w = {(x["service"], x["class"]): x for x in a}
assert w[("web", "L2")]["shed_pct"] == 30 and w[("web", "L2")]["owner"] == "alice"
assert w[("web", "L3")]["shed_pct"] == 100 and w[("web", "L3")]["left_s"] > 3500
for x in a:
    assert x["expires_at"] > x["set_at"] and x["expired"] is False and "age_s" in x
' 2>"$TMP/py"
ok $? "switch ls --json is an array with both switches" "$OUT" "$(cat "$TMP/py")"

ctl switch clear web L2 --reason "INC-42 resolved"
expect 0 "switch clear web L2"
has "back to normal" "$OUT" "switch clear confirmation"
ctl switch ls --json
[ "$(echo "$OUT" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ]
ok $? "one switch left after clear" "$OUT"
ctl switch clear web L2
expect 0 "clearing a switch that is not there: exit 0"

ctl switch log
expect 0 "switch log: exit 0"
[ "$(echo "$OUT" | grep -c ' switch set web/')" -eq 3 ] && [ "$(echo "$OUT" | grep -c ' switch clear web/L2')" -eq 1 ]
ok $? "switch log: three sets and one clear" "$OUT"
has "normal -> shed 50%" "$OUT" "switch log shows old -> new"
ctl switch log --last 1
[ "$RC" -eq 0 ] && [ "$(echo "$OUT" | wc -l)" -eq 1 ] && [[ "$OUT" == *"switch clear"* ]]
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

# ---- unprivileged user ----
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
	if command -v setpriv >/dev/null && setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
		AS_NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
	else
		AS_NOBODY=(runuser -u nobody --)
	fi
	OUT=$("${AS_NOBODY[@]}" "$CTL" --pin-dir "$TMP/pins" --state-dir "$STATE" \
		--config "$TMP/sluice.yaml" switch set web L1 --shed 10 --reason x --ttl 1m 2>"$TMP/stderr")
	RC=$?; ERR=$(cat "$TMP/stderr")
	[ "$RC" -eq 1 ] && [ "$(snap)" = "$before" ]
	ok $? "unprivileged user: switch set refused with exit 1, nothing changed" "exit $RC" "$ERR"
	has "permission denied" "$ERR" "unprivileged user gets 'permission denied'"
	OUT=$("${AS_NOBODY[@]}" "$CTL" --pin-dir "$TMP/pins" --state-dir "$STATE" \
		--config "$TMP/sluice.yaml" switch clear web L3 2>"$TMP/stderr")
	RC=$?; ERR=$(cat "$TMP/stderr")
	[ "$RC" -eq 1 ] && [ "$(snap)" = "$before" ]
	ok $? "unprivileged user: switch clear refused with exit 1, nothing changed" "exit $RC" "$ERR"
else
	skip "unprivileged user: switch set refused" "needs root"
	skip "unprivileged user gets 'permission denied'" "needs root"
	skip "unprivileged user: switch clear refused" "needs root"
fi

# ---- damaged switch file ----
printf '{"version": 1, "switches": [ {"service": "web"' > "$SW"
ctl switch ls
[ "$RC" -eq 1 ] && [[ "$ERR" == *"ERROR: switch file"* ]] && [[ "$ERR" == *"NO switches are in force"* ]]
ok $? "corrupt switches.json: switch ls prints a loud error and exits 1" "exit $RC" "$ERR"
ctl switch set api L3 --shed 100 --reason "INC-43" --ttl 5m
[ "$RC" -eq 0 ] && ls "$SW".corrupt.* >/dev/null 2>&1 && [[ "$ERR" == *"moved aside"* ]]
ok $? "a writer moves the damaged file aside and writes a fresh one" "exit $RC" "$ERR" "$(ls "$STATE")"
ctl switch ls --json
[ "$RC" -eq 0 ] && [ "$(echo "$OUT" | python3 -c 'import json,sys; a=json.load(sys.stdin); print(len(a), a[0]["service"])')" = "1 api" ]
ok $? "after the rewrite only the new switch is in force" "$OUT" "$ERR"

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

lines_before=$(wc -l < "$AUDIT")
ctl plan apply $FIX/plan_order_api.yaml L2 --reason INC-44 --ttl 30m
expect 0 "plan apply L2: exit 0"
ctl switch ls --json
echo "$OUT" | python3 -c '
import json, sys
a = {(x["service"], x["class"]): x for x in json.load(sys.stdin)}
assert a[("web", "L3")]["shed_pct"] == 100, a
assert a[("web", "L2")]["shed_pct"] == 100, a   # L2 overrides L1 50%
assert a[("api", "L3")]["shed_pct"] == 100, a
assert a[("web", "L3")]["reason"] == "plan L2: INC-44", a
' 2>"$TMP/py"
ok $? "plan apply L2 sets the cumulative switches (later level wins)" "$OUT" "$(cat "$TMP/py")"
[ $(( $(wc -l < "$AUDIT") - lines_before )) -eq 3 ] && [ "$(tail -n 3 "$AUDIT" | grep -c '"command":"plan apply L2"')" -eq 3 ]
ok $? "plan apply writes one audit record per switch" "$(tail -n 3 "$AUDIT")"

# ---- budget ----
ctl budget check $FIX/order_api_chains.yaml
[ "$RC" -eq 1 ] && [[ "$OUT" == *9540* ]]
ok $? "budget check of the order-api chain prints 9540 and exits 1" "exit $RC" "$OUT"
ctl budget check $FIX/budget_ok.yaml
expect 0 "budget check within budget: exit 0"
ctl budget check $FIX/budget_bad.yaml
expect 2 "budget check of an invalid file: exit 2"

# ---- cascade clear, top ----
ctl cascade clear
[ "$RC" -eq 0 ] && grep -q "^user .* uid $(id -u) time " "$STATE/cascade-clear"
ok $? "cascade clear writes the request file for sluiced" "exit $RC" "$OUT" "$ERR"
ctl top --iterations 1
[ "$RC" -eq 1 ] && [[ "$ERR" == *"nothing attached at $TMP/pins (is sluiced running?)"* ]]
ok $? "top with nothing attached: exit 1 with a clear message" "exit $RC" "$ERR"

# ---- help, option forms, log levels (both programs parse from one table each) ----
missing=
for verb in status top hist "switch set" "switch clear" "switch ls" "switch log" "plan check" \
	"plan show" "plan apply" "budget check" "cascade clear" detach; do
	ctl $verb --help
	{ [ "$RC" -eq 0 ] && [[ "$OUT" == "usage: sluicectl $verb"* ]] &&
		[[ "$OUT" == *$'\nexample'*$'\n  sluicectl '"$verb"* ]]; } || missing="$missing [$verb]"
done
ok $([ -z "$missing" ] && echo 0 || echo 1) "every command's --help: exit 0, its usage line and an example" "no help:$missing"
ctl --help
[ "$RC" -eq 0 ] && [[ "$OUT" == *"  switch set SERVICE CLASS"* ]] && [[ "$OUT" == *"  cascade clear"* ]] && [[ "$OUT" == *"-v, --verbose"* ]]
ok $? "sluicectl --help lists the commands and -v/-q" "exit $RC" "$OUT"
ctl switch
r1=$RC; ctl switch --help; r2=$RC; ctl nosuch; r3=$RC
[ "$r1" -eq 2 ] && [ "$r2" -eq 0 ] && [ "$r3" -eq 2 ] && [[ "$ERR" == *"unknown command 'nosuch'"* ]]
ok $? "a bare group lists its commands (exit 2, 0 with --help); an unknown command is exit 2" "$r1 $r2 $r3" "$ERR"
ctl plan apply $FIX/plan_order_api.yaml L1 --reason=INC-45 --ttl=5m
expect 0 "plan apply accepts --opt=VALUE"
ctl switch set web L3 --shed=10 --reason x --ttl
[ "$RC" -eq 2 ] && [[ "$ERR" == *"option --ttl needs a value"* ]]
ok $? "a value option at the end: exit 2 naming it" "exit $RC" "$ERR"
ctl -q cascade clear
w=$ERR
ctl -qq cascade clear
[ "$RC" -eq 0 ] && [[ "$w" == *"sluicectl: warning: nothing attached"* ]] && [ -z "$ERR" ]
ok $? "-qq silences warnings (-q still shows them)" "with -q: $w" "with -qq: $ERR"
OUT=$("$CTL" --config "$TMP/none.yaml" --state-dir "$STATE" switch ls -v 2>&1 >/dev/null)
[[ "$OUT" == *"sluicectl: debug: config $TMP/none.yaml not used"* ]]
ok $? "-v after the command shows debug messages" "$OUT"
OUT=$("$BUILD/sluiced" --help); r1=$?
ERR=$("$BUILD/sluiced" --bogus 2>&1); r2=$?
"$BUILD/sluiced" --check="$TMP/sluice.yaml" >/dev/null 2>&1; r3=$?
"$BUILD/sluiced" 2>/dev/null; r4=$?
[ "$r1" -eq 0 ] && [[ "$OUT" == *"sluiced --config /etc/sluice/sluice.yaml"* ]] && [ "$r2" -eq 2 ] &&
	[[ "$ERR" == *"unknown option '--bogus'"* ]] && [ "$r3" -eq 0 ] && [ "$r4" -eq 2 ]
ok $? "sluiced: --help with an example (0), --bogus (2), --check=FILE (0), no config (2)" "$r1 $r2 $r3 $r4" "$OUT" "$ERR"

[ "$FAILED" -eq 0 ]
