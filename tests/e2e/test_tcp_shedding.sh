#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Connection-level shedding end to end: a real TCP server in one namespace, sluiced
# on its veth, clients in another. More busy connections (a query sent, its answer not yet
# back: a tcp service's concurrency) than the limit allows: L3 is refused first (fast RST),
# L0 is still served; in-flight returns to exactly 0; a restarted
# sluiced adopts the pinned state without resetting in-flight; an invalid config is refused
# with its file:line errors and the old limit stays, through SIGHUP and through the file watch,
# each tested on its own (as is a valid reload by each); kill -9 of sluiced fails open after
# heartbeat_timeout; `sluicectl detach` removes everything. (Traffic across restarts:
# test_restart.sh.)
CLIENT_ADDRS="198.18.0.10 198.18.0.20"
TAG=tcp
source "$(dirname "$0")/lib.sh"
e2e_setup

# sluiced reads $CFG, a symlink in a directory of its own to the real file in $TMP/hidden:
# the config watch sees the directory of $CFG only, so an edit of the real file is picked up
# by SIGHUP alone, and replacing $CFG itself by the watch alone (the two reload paths are
# tested apart below).
mkdir -p "$TMP/etc" "$TMP/hidden"
CFG=$TMP/etc/sluice.yaml
HIDDEN=$TMP/hidden/sluice.yaml
ln -s "$HIDDEN" "$CFG"
write_config() { # write_config LIMIT [FILE]
	cat > "${2:-$HIDDEN}" <<Y
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
# The server answers a line after service_ms; the overload below sets it to 10 s through the
# mode file so that its connections stay busy (an idle connection holds no capacity).
MODE=$TMP/server.mode
echo "service_ms=1" > "$MODE"
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 96 --service-ms 1 --mode-file "$MODE"
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok 0 "sluiced attaches to the server veth and reports a heartbeat"

inflight() { status; json_get "$TMP/status.json" "d['services'][0]['in_flight']"; }
lg() { json_get "$1" "d['classes']['$2']['$3']"; }

# --- overload: 200 L3 connections and 8 L0 connections, each waiting 10 s for its answer -
echo "service_ms=10000" > "$MODE"
wait_for 5 "the server to take up service_ms=10000 from its mode file" \
	grep -q 'mode: service_ms=10000.000 ' "$TMP/server.log"
start_bg "$TMP/l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 100 --duration 2 --timeout-ms 13000 --quiet \
	--class L3:1:src=198.18.0.20
L3PID=$LAST_PID
start_bg "$TMP/l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 4 --duration 2 --timeout-ms 13000 --quiet \
	--class L0:1:src=198.18.0.10
L0PID=$LAST_PID
# 8 L0 + 10 L3 busy connections fit; the arrivals end after 2 s and each waits 10 s. The
# first answers come at 10 s, so the restart below (stop, start, adopt: about 1 s on an idle
# host, more on a loaded one) has 6 s in which no connection leaves by itself; with 6 s of
# service an idle host's restart saw 2 of 17 end on their own.
sleep 3.5   # part of the scenario: the connections have been quiet longer than the idle timeout
held=$(inflight)
l3_in=$(cls L3 in_flight)
ok $([ "$l3_in" -ge 1 ] && [ "$l3_in" -le 10 ] && [ "$held" -le 20 ] && echo 0 || echo 1) \
	"L3 stays within its 50% headroom while flooding: L3 $l3_in, total $held of 20"
ok $([ "$held" -ge 12 ] && echo 0 || echo 1) \
	"quiet connections outlive flow_idle_timeout_s (1 s): the GC asks the socket table first ($held still held after 3.5 s)"

# --- restart: SIGTERM leaves the data path; a new sluiced adopts it -------------------
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
after_stop=$(inflight)
start_sluiced "$CFG"; ok $? "sluiced starts again on the pinned data path"
adopted=$(inflight)
ok $([ "$held" -gt 10 ] && [ "$after_stop" -eq "$held" ] && [ "$adopted" -eq "$held" ] && echo 0 || echo 1) \
	"restart keeps pinned state: in-flight $held before, $after_stop stopped, $adopted adopted" \
	"$(cat "$TMP"/sluiced.*.log | tail -n 5)"

wait $L3PID $L0PID
echo "service_ms=1" > "$MODE"
l3_ok=$(lg "$TMP/l3.json" L3 ok); l3_ref=$(lg "$TMP/l3.json" L3 refused)
l3_sent=$(lg "$TMP/l3.json" L3 sent); l3_rej99=$(lg "$TMP/l3.json" L3 reject_p99_ms)
l0_ok=$(lg "$TMP/l0.json" L0 ok); l0_sent=$(lg "$TMP/l0.json" L0 sent)
ok $([ "$l3_sent" -ge 180 ] && [ "$l3_ok" -le 10 ] && [ "$l3_ref" -ge $((l3_sent - 10)) ] && echo 0 || echo 1) \
	"L3 over its headroom is refused: $l3_ok ok, $l3_ref refused of $l3_sent"
rej_fast() { python3 -c "import sys; sys.exit(0 if $l3_rej99 < 50 else 1)"; }
remeasure_rej() { # a second sample of refusal latency: L3 refused by a switch, same RST path
	local ctl="$BUILD/sluicectl --pin-dir $PIN --state-dir $TMP/state --config $CFG"
	$ctl switch set db L3 --shed 100 --reason "e2e refusal latency" --ttl 1m >/dev/null
	in_cli "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp --arrivals uniform --rate 100 \
		--duration 1 --timeout-ms 3000 --quiet --class L3:1:src=198.18.0.20 > "$TMP/rej2.json"
	$ctl switch clear db L3 >/dev/null
	l3_rej99=$(lg "$TMP/rej2.json" L3 reject_p99_ms)
	rej_fast
}
echo "# refusal p99 $l3_rej99 ms during the flood"
retry_once rej_fast remeasure_rej
ok $? "refusals are immediate RSTs (ECONNREFUSED): p99 $l3_rej99 ms (< 50)${RETRY_NOTE:-}"
ok $([ "$l0_sent" -ge 6 ] && [ "$l0_ok" -eq "$l0_sent" ] && echo 0 || echo 1) \
	"L0 is still served: $l0_ok of $l0_sent"

# --- all connections closed: in-flight back to exactly 0 -------------------------------
inflight_zero() { [ "$(inflight)" = 0 ]; }
wait_for 6 "in-flight of db to return to 0" inflight_zero
status
ok $([ "$(inflight)" = 0 ] && [ "$(cls L3 in_flight)" = 0 ] && [ "$(cls L0 in_flight)" = 0 ] && echo 0 || echo 1) \
	"in-flight returns to exactly 0 after the clients close" "$(cat "$TMP/status.json")"
ok $([ "$(cls L3 completed)" -eq "$(cls L3 admitted)" ] && echo 0 || echo 1) \
	"every admitted L3 connection completed: $(cls L3 completed)/$(cls L3 admitted)"
# The counters agreed with the flow table all along: the restarted sluiced's reconciliation
# swept it once a second while the busy connections sat still and after they closed, and
# corrected nothing.
mport=$(sed -n 's/.*metrics on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$SLUICED_LOG" | tail -1)
corr=$(in_srv curl -s "http://127.0.0.1:$mport/metrics" |
	awk '$1 ~ /^sluice_inflight_corrections_total\{service="db"/ { print $2 }')
ok $([ "$corr" = 0 ] && echo 0 || echo 1) \
	"the reconciliation with the flow table corrected nothing (sluice_inflight_corrections_total $corr)"

# --- config reloads: SIGHUP and the file watch, each on its own ------------------------
# An invalid config is refused with each error as file:line (the same lines as --check), a
# "config kept" event, and the running limit stays in the maps.
printf 'interface: s0\nservices:\n  - name: db\n    port: 99999\n    bogus: 1\n' > "$TMP/bad.yaml"
ERR4="$CFG:4:11: bad port '99999' in service 'db': must be an integer in 1..65535"
ERR5="$CFG:5:5: unknown key 'bogus' in service 'db'"
refusals() { cat "$TMP"/sluiced.*.log | grep -cxF "$ERR4"; }
kept_events() { cat "$TMP"/sluiced.*.log | grep -c '"machine":"config","from":"running","to":"kept"'; }
both_errors_since() { # both_errors_since N: the port error logged more than N times, with its neighbour
	[ "$(refusals)" -gt "$1" ] && [ "$(cat "$TMP"/sluiced.*.log | grep -cxF "$ERR5")" -gt "$1" ]
}
limit_is() { status; [ "$(json_get "$TMP/status.json" "d['services'][0]['limit']")" = "$1" ]; }
cur_limit() { json_get "$TMP/status.json" "d['services'][0]['limit']"; }

expect_refusal() { # expect_refusal LIMIT DESCRIPTION CMD...: CMD delivers the invalid config
	local r k seen lim=$1 what=$2
	shift 2
	r=$(refusals); k=$(kept_events)
	"$@"
	wait_for 3 "the refusal of the invalid config ($what)" both_errors_since "$r"; seen=$?
	status
	ok $([ $seen -eq 0 ] && [ "$(kept_events)" -gt "$k" ] && kill -0 "$SLUICED_PID" 2>/dev/null &&
		[ "$(cur_limit)" = "$lim" ] && echo 0 || echo 1) \
		"$what: refused with both errors as file:line (4: bad port, 5: unknown key) and a config-kept event; sluiced stays up with limit $(cur_limit) ($lim) in the maps" \
		"$(grep -h -e "$CFG" -e '"machine":"config"' "$TMP"/sluiced.*.log | tail -4)"
}
by_sighup() { cp "$TMP/bad.yaml" "$HIDDEN"; kill -HUP "$SLUICED_PID"; }
by_file() { cp "$TMP/bad.yaml" "$TMP/etc/.new" && mv -f "$TMP/etc/.new" "$CFG"; }

# SIGHUP: the real file changes where the watch cannot see it; only the signal reloads it.
expect_refusal 20 "SIGHUP with an invalid config" by_sighup
write_config 25
kill -HUP "$SLUICED_PID"
wait_for 3 "limit 25 after SIGHUP" limit_is 25
ok $? "SIGHUP with a valid config reloads it (limit 20 -> $(cur_limit))"

# The watch: $CFG itself is replaced (as an editor or a ConfigMap update does); no signal.
expect_refusal 25 "an invalid config written over the watched file, no signal" by_file
check_out=$("$BUILD/sluiced" --check "$TMP/bad.yaml" 2>&1); check_rc=$?
ok $([ $check_rc -eq 2 ] && echo "$check_out" | grep -qxF "$TMP/bad.yaml:4:11: ${ERR4#"$CFG":4:11: }" &&
	echo "$check_out" | grep -qxF "$TMP/bad.yaml:5:5: ${ERR5#"$CFG":5:5: }" && echo 0 || echo 1) \
	"sluiced --check names file:line of each error, exit 2" "$check_out"
write_config 30 "$TMP/etc/.new" && mv -f "$TMP/etc/.new" "$CFG"
wait_for 3 "limit 30 after the file was replaced" limit_is 30
ok $? "replacing the config file reloads it without a signal (limit 25 -> $(cur_limit))"

# --- kill -9: after heartbeat_timeout the data path admits everything ------------------
kill -KILL "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
controller_silent() { "$BUILD/sluicectl" --pin-dir "$PIN" status --json | grep -q '"controller_alive":false'; }
wait_for 3 "the data path to see the controller's heartbeat as stale (heartbeat_timeout_ms 1000)" controller_silent
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
