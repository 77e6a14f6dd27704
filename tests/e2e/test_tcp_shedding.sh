#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Connection-level shedding end to end: a real TCP server in one namespace, sluiced
# on its veth, clients in another. More concurrent connections than the limit allows: L3 is
# refused first (fast RST), L0 is still served; in-flight returns to exactly 0; a restarted
# sluiced adopts the pinned state without resetting in-flight; an invalid config reload is
# refused and the old one stays; kill -9 of sluiced fails open after heartbeat_timeout;
# `sluicectl detach` removes everything.
CLIENT_ADDRS="198.18.0.10 198.18.0.20"
TAG=tcp
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
write_config() { # write_config LIMIT
	cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
heartbeat_timeout_ms: 1000
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
flow_idle_timeout_s: 1          # short, to exercise the flow GC within the test
syn_timeout_s: 1
services:
  - name: db
    port: 7000
    protocol: tcp
    reject: rst
    limit: { fixed: $1 }
    headroom: { L0: 100, L1: 90, L2: 75, L3: 50 }
    headroom_mode: fixed
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y
}
write_config 20
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 96 --service-ms 1
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok 0 "sluiced attaches to the server veth and reports a heartbeat"

status() { "$BUILD/sluicectl" --pin-dir "$PIN" status --json > "$TMP/status.json"; }
inflight() { status; json_get "$TMP/status.json" "d['services'][0]['in_flight']"; }
cls() { json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='$1'][0]['$2']"; }
lg() { json_get "$1" "d['classes']['$2']['$3']"; }

# --- overload: 200 L3 connections and 8 L0 connections, all held 6 s --------------------
start_bg "$TMP/l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 100 --duration 2 --hold-ms 6000 --timeout-ms 3000 --quiet \
	--class L3:1:src=198.18.0.20
L3PID=$LAST_PID
start_bg "$TMP/l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 4 --duration 2 --hold-ms 6000 --timeout-ms 3000 --quiet \
	--class L0:1:src=198.18.0.10
L0PID=$LAST_PID
sleep 3.5
held=$(inflight)
l3_in=$(cls L3 in_flight)
ok $([ "$l3_in" -ge 1 ] && [ "$l3_in" -le 10 ] && [ "$held" -le 20 ] && echo 0 || echo 1) \
	"L3 stays within its 50% headroom while flooding: L3 $l3_in, total $held of 20"
ok $([ "$held" -ge 12 ] && echo 0 || echo 1) \
	"quiet connections outlive flow_idle_timeout_s (1 s): the GC asks the socket table first ($held still held after 3.5 s)"

# --- restart: SIGTERM leaves the data path; a new sluiced adopts it -------------------
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
after_stop=$(inflight)
start_sluiced "$CFG"
adopted=$(inflight)
ok $([ "$held" -gt 10 ] && [ "$after_stop" -eq "$held" ] && [ "$adopted" -eq "$held" ] && echo 0 || echo 1) \
	"restart keeps pinned state: in-flight $held before, $after_stop stopped, $adopted adopted" \
	"$(cat "$TMP"/sluiced.*.log | tail -n 5)"

wait $L3PID $L0PID
l3_ok=$(lg "$TMP/l3.json" L3 ok); l3_ref=$(lg "$TMP/l3.json" L3 refused)
l3_sent=$(lg "$TMP/l3.json" L3 sent); l3_rej99=$(lg "$TMP/l3.json" L3 reject_p99_ms)
l0_ok=$(lg "$TMP/l0.json" L0 ok); l0_sent=$(lg "$TMP/l0.json" L0 sent)
ok $([ "$l3_ok" -le 10 ] && [ "$l3_ref" -ge $((l3_sent - 10)) ] && echo 0 || echo 1) \
	"L3 over its headroom is refused: $l3_ok ok, $l3_ref refused of $l3_sent"
ok $(python3 -c "import sys; sys.exit(0 if $l3_rej99 < 50 else 1)" && echo 0 || echo 1) \
	"refusals are immediate RSTs (ECONNREFUSED): p99 $l3_rej99 ms"
ok $([ "$l0_sent" -ge 6 ] && [ "$l0_ok" -eq "$l0_sent" ] && echo 0 || echo 1) \
	"L0 is still served: $l0_ok of $l0_sent"

# --- all connections closed: in-flight back to exactly 0 -------------------------------
for i in $(seq 30); do [ "$(inflight)" = 0 ] && break; sleep 0.2; done
status
ok $([ "$(inflight)" = 0 ] && [ "$(cls L3 in_flight)" = 0 ] && [ "$(cls L0 in_flight)" = 0 ] && echo 0 || echo 1) \
	"in-flight returns to exactly 0 after the clients close" "$(cat "$TMP/status.json")"
ok $([ "$(cls L3 completed)" -eq "$(cls L3 admitted)" ] && echo 0 || echo 1) \
	"every admitted L3 connection completed: $(cls L3 completed)/$(cls L3 admitted)"

# --- invalid config reload: refused, old config stays ----------------------------------
cp "$CFG" "$TMP/good.yaml"
printf 'interface: s0\nservices:\n  - name: db\n    port: 99999\n    bogus: 1\n' > "$CFG"
kill -HUP "$SLUICED_PID"
sleep 0.5
status
ok $(kill -0 "$SLUICED_PID" 2>/dev/null && [ "$(json_get "$TMP/status.json" "d['services'][0]['limit']")" = 20 ] &&
	grep -q "port" "$TMP"/sluiced.*.log && echo 0 || echo 1) \
	"an invalid config on SIGHUP is refused with its errors; sluiced keeps limit 20" \
	"$(grep -h sluice.yaml "$TMP"/sluiced.*.log | head -3)"
check_out=$("$BUILD/sluiced" --check "$CFG" 2>&1); check_rc=$?
ok $([ $check_rc -eq 2 ] && echo "$check_out" | grep -q "sluice.yaml:4:.*port" &&
	echo "$check_out" | grep -q "sluice.yaml:5:.*bogus" && echo 0 || echo 1) \
	"sluiced --check names file:line of each error, exit 2" "$check_out"

# --- a valid change of the file (no signal) is picked up by the watch ------------------
write_config 30
for i in $(seq 30); do
	status; [ "$(json_get "$TMP/status.json" "d['services'][0]['limit']")" = 30 ] && break; sleep 0.1
done
ok $([ "$(json_get "$TMP/status.json" "d['services'][0]['limit']")" = 30 ] && echo 0 || echo 1) \
	"editing the config file reloads it without a signal (limit 20 -> 30)"

# --- kill -9: after heartbeat_timeout the data path admits everything ------------------
kill -KILL "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
sleep 1.5
in_cli "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp --arrivals uniform --rate 100 \
	--duration 0.5 --hold-ms 2500 --timeout-ms 3000 --quiet --class L3:1:src=198.18.0.20 > "$TMP/fo.json"
fo_ok=$(lg "$TMP/fo.json" L3 ok); fo_sent=$(lg "$TMP/fo.json" L3 sent)
status
ok $([ "$fo_sent" -ge 30 ] && [ "$fo_ok" -eq "$fo_sent" ] && [ "$(cls L3 fail_open)" -ge 30 ] && echo 0 || echo 1) \
	"controller killed: fail-open admits all $fo_ok/$fo_sent L3 (over its 15 slots), counted as fail_open"

# --- detach removes everything --------------------------------------------------------
out=$("$BUILD/sluicectl" --pin-dir "$PIN" detach 2>&1); rc=$?
ok $([ $rc -eq 1 ] && echo "$out" | grep -q "another network namespace" && [ -e "$PIN" ] && echo 0 || echo 1) \
	"detach from another network namespace is refused and changes nothing" "$out"
in_srv "$BUILD/sluicectl" --pin-dir "$PIN" detach > "$TMP/detach.out" 2>&1; d_rc=$?
xdp_left=$(in_srv ip link show s0 | grep -c "xdp")
tc_left=$(in_srv tc filter show dev s0 egress 2>/dev/null | grep -c bpf)
ok $([ $d_rc -eq 0 ] && [ ! -e "$PIN" ] && [ "$xdp_left" = 0 ] && [ "$tc_left" = 0 ] && echo 0 || echo 1) \
	"sluicectl detach removes programs, links and pins" "rc $d_rc xdp $xdp_left tc $tc_left"
out=$("$BUILD/sluicectl" --pin-dir "$PIN" status 2>&1); rc=$?
ok $([ $rc -eq 1 ] && echo "$out" | grep -q "nothing attached" && echo 0 || echo 1) \
	"sluicectl on a host with nothing attached says so and exits 1" "$out"
finish
