#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Node-wide arbitration end to end: a tcp service with light L3 traffic, sluiced with
# `node: { arbitration: psi }`, and a CPU hog (busy loops, four per CPU, in the server
# namespace and in a cgroup of the test's own, each bounded to HOG_S seconds and killed on
# exit). While the hog runs the CPU pressure is above the threshold: sluiced cuts L3 across
# the services (a "node" event), L2 only once L3 is off, and the data path refuses L3
# connections. After the hog ends the pressure falls and, with traffic showing calm, L3 is
# restored in full.
# The pressure read is the test cgroup's cpu.pressure (same format as /proc/pressure/cpu, the
# default): on a host shared with other work the node's own pressure may sit above any
# threshold before the hog starts and after it ends, and the test would show nothing.
# On a kernel without pressure stall information the arbitration must turn itself off with
# a warning and an event instead; that is what is checked there.
CLIENT_ADDRS="198.18.0.20"
TAG=node
source "$(dirname "$0")/lib.sh"
e2e_setup
HOG_S=20
CG2=$(findmnt -t cgroup2 -n -o TARGET | head -1)
CG=${CG2:-/nonexistent}/sluice-node-$$
mkdir "$CG" 2>/dev/null
PRESSURE=$CG/cpu.pressure
[ -r "$PRESSURE" ] || PRESSURE=/proc/pressure/cpu
HOGS=()
test_cleanup() {
	local p
	for p in "${HOGS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait "${HOGS[@]}" 2>/dev/null
	[ -d "$CG" ] && rmdir "$CG" 2>/dev/null
}
CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
node: { arbitration: psi, cpu_pressure_pct: 50, step_s: 1, recover_s: 1,
        pressure_file: $PRESSURE }
services:
  - name: db
    port: 7000
    protocol: tcp
    limit: { fixed: 100 }
    default_class: L3
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 64 --service-ms 1
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
LOG=$SLUICED_LOG

if [ ! -r "$PRESSURE" ]; then
	ok $(grep -q '"machine":"node".*"to":"disabled".*node arbitration disabled: cannot read' "$LOG" &&
		echo 0 || echo 1) "no pressure stall information here: node arbitration is off, with an event saying so" \
		"$(cat "$LOG")"
	finish
	exit
fi

node_ev() { grep '"machine":"node"' "$LOG"; }
# L3 traffic all along (the calm after the hog is evidence only while there is traffic).
start_bg "$TMP/l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 40 --duration $((HOG_S + 25)) --timeout-ms 2000 --quiet \
	--class L3:1:src=198.18.0.20
LG=$LAST_PID
l3_flowing() {
	"$BUILD/sluicectl" --pin-dir "$PIN" status --json > "$TMP/status.json" 2>/dev/null &&
		[ "$(json_get "$TMP/status.json" "d['services'][0]['classes'][3]['admitted']")" -gt 0 ]
}
wait_for 5 "L3 connections admitted before the hog" l3_flowing
hog() { # one busy loop, bounded, in the test's cgroup
	$IN_SRV bash -c "echo \$\$ > '$CG/cgroup.procs' 2>/dev/null; end=\$((SECONDS + $HOG_S)); while [ \$SECONDS -lt \$end ]; do :; done" &
	PIDS+=($!)
	HOGS+=($!)
}
l3_cut() { node_ev | grep -q '"class":"L3","from":"full","to":"partial"'; }
# The cut must be the hog's: none before it. Reading the node's own pressure (no cgroup2 here),
# other work may hold it above the threshold already; then the test can show nothing.
if l3_cut; then
	[ "$PRESSURE" = /proc/pressure/cpu ] &&
		skip_all "the node's CPU pressure was above 50 % before the hog: $(head -1 "$PRESSURE")"
	ok 1 "no node cut of L3 before the hog (the test cgroup's pressure)" "$(node_ev)" "$(cat "$PRESSURE")"
	finish
	exit 1
fi
for _ in $(seq $((4 * $(nproc)))); do hog; done
wait_for 15 "a node cut of L3 under the CPU hog" l3_cut
ok $? "under the CPU hog sluiced cuts L3 across the node (a node event after ${WAITED_MS} ms)" \
	"$(node_ev)" "$(cat "$PRESSURE")"
sleep 4 # part of the scenario: pressure goes on for a few more observations before the hog ends
for p in "${HOGS[@]}"; do kill "$p" 2>/dev/null; done
wait "${HOGS[@]}" 2>/dev/null
# The order: no L2 cut before L3 is off (the arbiter's rule, seen in its events).
order=$(node_ev | python3 -c '
import json, sys
l3_off = False
for line in sys.stdin:
    e = json.loads(line)
    if e.get("class") == "L3" and e.get("to") == "off": l3_off = True
    if e.get("class") == "L3" and e.get("to") != "off": l3_off = False
    if e.get("class") == "L2" and e.get("to") in ("partial", "off") and e.get("from") == "full" and not l3_off:
        print("L2 cut while L3 admitted:", line.strip()); sys.exit(1)
    if e.get("class") in ("L0", "L1"): print("node event for", e["class"]); sys.exit(1)
print("ok")')
ok $([ "$order" = ok ] && echo 0 || echo 1) "L2 is never cut while L3 is admitted; L0 and L1 never" \
	"$order" "$(node_ev)"
l3_full() { node_ev | tail -n 4 | grep -q '"class":"L3","from":"partial","to":"full"'; }
wait_for 30 "L3 restored in full after the hog ended" l3_full
ok $? "after the hog the pressure falls and L3 is restored step by step to full (${WAITED_MS} ms)" \
	"$(node_ev)" "$(cat "$PRESSURE")"
kill "$LG" 2>/dev/null
wait "$LG" 2>/dev/null
refused=$(json_get "$TMP/l3.json" "d['classes']['L3']['refused'] + d['classes']['L3']['reset']" 2>/dev/null)
okd=$(json_get "$TMP/l3.json" "d['classes']['L3']['ok']" 2>/dev/null)
ok $([ "${refused:-0}" -gt 0 ] && [ "${okd:-0}" -gt 0 ] && echo 0 || echo 1) \
	"the data path refused L3 connections while the node shed them ($refused refused, $okd served)" \
	"$(cat "$TMP/l3.json" 2>/dev/null)"
finish
