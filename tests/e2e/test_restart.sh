#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# A controller restart does not disturb traffic: load on a TCP and an HTTP service runs across
# a SIGTERM + start of sluiced and across a kill -9 + start. Both gaps are shorter than
# heartbeat_timeout_ms, so the data path keeps deciding with the pinned state all along:
# every admitted connection and request succeeds (0 errors, 0 timeouts, 0 resets), the
# classes over their headroom keep being refused during the restarts, and nothing is admitted
# by fail-open (the per-class fail_open counters and the heartbeat age the data path sees,
# sampled every 50 ms throughout), and the in-flight counts stay the flow table's (no
# correction by the daemon's reconciliation).
CLIENT_ADDRS="198.18.0.10 198.18.0.20"
TAG=rst
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
heartbeat_timeout_ms: 1000
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: db
    port: 7000
    protocol: tcp
    reject: rst
    limit: { fixed: 40 }
    headroom: { L0: 100, L1: 90, L2: 75, L3: 25 }
    headroom_mode: fixed
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
  - name: web
    port: 8080
    protocol: http
    limit: { fixed: 8 }
    headroom: { L0: 100, L1: 90, L2: 75, L3: 25 }
    headroom_mode: fixed
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y
start_bg "$TMP/tcpserver.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 96 --service-ms 300
start_bg "$TMP/httpserver.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 16 --service-ms 20
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
LOGS=("$SLUICED_LOG")
ok 0 "sluiced starts with a TCP and an HTTP service"
STATUS="$BUILD/sluicectl --pin-dir $PIN status --json"
lg() { json_get "$1" "d['classes']['$2']['$3']"; }

# The heartbeat as the data path sees it (the globals map against CLOCK_MONOTONIC, the
# programs' clock), every 50 ms while the load runs; stops on a file or after 20 s.
cat > "$TMP/sampler.py" <<'PY'
import json, os, subprocess, sys, time
end = time.monotonic() + 20
while time.monotonic() < end and not os.path.exists(sys.argv[2]):
    try:
        out = subprocess.run(['bpftool', '-j', 'map', 'dump', 'pinned', sys.argv[1]],
                             capture_output=True, text=True, timeout=2).stdout
        now = time.monotonic_ns()
        e = json.loads(out)[0]
        v = e['formatted']['value'] if 'formatted' in e else e['value']
        age = (now - v['heartbeat_ns']) / 1e9
        print('%s %.3f' % ('fresh' if age * 1e9 <= v['heartbeat_timeout_ns'] else 'STALE', age), flush=True)
    except Exception as ex:
        print('error', repr(ex)[:200], flush=True)
    time.sleep(0.05)
PY
start_bg "$TMP/alive.log" python3 "$TMP/sampler.py" "$PIN/globals" "$TMP/stop-sampler"
SAMPLER=$LAST_PID

# --- load: 6 s of arrivals on both services, L0 within its share, L3 well over ------------
# tcp: L3 100/s, each connection's query answered after 300 ms (busy that long) = ~30
# wanting 10 slots (25 % of 40); L0 10/s, about 3 busy. L0's room is the whole limit: a tcp
# connection is decided at its SYN and counts once its query is under way, so L3 connections
# admitted while their clients lag (a sluiced starting takes the 2 CPUs for a moment) start
# their turns together and overshoot L3's 10 (docs/RELIABILITY.md); with a limit of 20 one L0
# connection in 60 was refused in one CI run of 2026-12-05 that way. This test is about the
# restarts, so L0 keeps room beyond any such overshoot.
# http: keep-alive, L3 250/s of 20 ms requests against 2 slots; L0 20/s.
LOAD=""
run_load() { # run_load OUT ARGS...
	local out=$1; shift
	start_bg "$out" $IN_CLI "$BUILD/tools/loadgen" --seed 9 --quiet --timeout-ms 3000 "$@"
	LOAD="$LOAD $LAST_PID"
}
run_load "$TMP/t3.json" --target $SRV_IP:7000 --mode tcp --arrivals uniform --rate 100 --duration 6 \
	--class L3:1:src=198.18.0.20
run_load "$TMP/t0.json" --target $SRV_IP:7000 --mode tcp --arrivals uniform --rate 10 --duration 6 \
	--class L0:1:src=198.18.0.10
run_load "$TMP/h3.json" --target $SRV_IP:8080 --mode http-keepalive --rate 250 --duration 6 \
	--class L3:1:src=198.18.0.20
run_load "$TMP/h0.json" --target $SRV_IP:8080 --mode http-keepalive --rate 20 --duration 6 \
	--class L0:1:src=198.18.0.10
loads_running() { ! none_alive $LOAD; }

sleep 1.5   # part of the scenario: the restarts happen while the load is in full swing
t0=$(now_ms)
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null; term_rc=$?
start_sluiced "$CFG"; up1=$?
LOGS+=("$SLUICED_LOG")
gap1=$(($(now_ms) - t0))
ok $([ $term_rc -eq 0 ] && [ $up1 -eq 0 ] && grep -q 'xdp adopted' "$SLUICED_LOG" && echo 0 || echo 1) \
	"under load: SIGTERM (exit $term_rc) and a new sluiced adopts the pinned data path after $gap1 ms" \
	"$(tail -3 "$SLUICED_LOG")"
sleep 1.5   # part of the scenario: the new controller runs a while before it is killed
t0=$(now_ms)
kill -KILL "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
start_sluiced "$CFG"; up2=$?
LOGS+=("$SLUICED_LOG")
gap2=$(($(now_ms) - t0))
ok $([ $up2 -eq 0 ] && grep -q 'xdp adopted' "$SLUICED_LOG" && echo 0 || echo 1) \
	"under load: kill -9 and a new sluiced adopts the pinned data path after $gap2 ms" \
	"$(tail -3 "$SLUICED_LOG")"
still=$(loads_running && echo yes || echo no)
wait $LOAD
touch "$TMP/stop-sampler"; wait "$SAMPLER" 2>/dev/null
ok $([ "$still" = yes ] && echo 0 || echo 1) "the load was still running when both restarts were done"

# --- every admitted unit succeeded; refusals kept coming -----------------------------------
$STATUS > "$TMP/status.json"
# why a class was refused, for the diagnostics: service index, class
why_refused() { json_get "$TMP/status.json" "[c for c in d['services'][$1]['classes'] if c['class']=='$2'][0]['rejected_by']"; }
for f in t0:L0 t3:L3 h0:L0 h3:L3; do
	j=$TMP/${f%%:*}.json c=${f##*:}
	sent=$(lg "$j" "$c" sent) okn=$(lg "$j" "$c" ok) rej=$(lg "$j" "$c" rejected)
	err=$(lg "$j" "$c" errors) retr=$(lg "$j" "$c" retried)
	case $f in   # L0 is within its share: all of it is admitted. At least 80% of rate x 6 s.
	t0*) want_rej=0 min=48 ;;
	h0*) want_rej=0 min=96 ;;
	t3*) want_rej=1 min=480 ;;
	h3*) want_rej=1 min=1200 ;;
	esac
	ok $([ "$sent" -ge $min ] && [ "$err" = 0 ] && [ "$retr" = 0 ] && [ $((okn + rej)) -eq "$sent" ] &&
		if [ $want_rej = 1 ]; then [ "$rej" -ge $((sent / 4)) ] && [ "$okn" -ge 20 ]
		else [ "$rej" = 0 ]; fi && echo 0 || echo 1) \
		"${f%%:*} $c across both restarts: $okn ok, $rej refused, $err failed ($retr retried) of $sent" \
		"$(cat "$j")" "sluice's reasons: $(why_refused $([ "${f:0:1}" = t ] && echo 0 || echo 1) "$c")"
done

# --- no fail-open: the data path never saw a stale heartbeat ------------------------------
$STATUS > "$TMP/status.json"
fo=$(json_get "$TMP/status.json" "sum(c['fail_open'] for s in d['services'] for c in s['classes'])")
adm=$(json_get "$TMP/status.json" "sum(c['admitted'] for s in d['services'] for c in s['classes'])")
samples=$(grep -c '^fresh' "$TMP/alive.log")
stale=$(grep -vc '^fresh' "$TMP/alive.log")
max_age=$(awk '$1 == "fresh" && $2 > m { m = $2 } END { printf "%.3f", m }' "$TMP/alive.log")
ok $([ "$fo" = 0 ] && [ "$adm" -gt 0 ] && echo 0 || echo 1) \
	"no unit was admitted by fail-open: fail_open $fo of $adm admitted (all classes, both services)" \
	"$(cat "$TMP/status.json")"
ok $([ "$stale" = 0 ] && [ "$samples" -ge 50 ] && awk "BEGIN { exit !($max_age < 1.0) }" && echo 0 || echo 1) \
	"the heartbeat stayed fresh through both gaps: $samples samples, oldest ${max_age} s (< heartbeat_timeout 1 s), $stale stale or failed" \
	"$(grep -v '^fresh' "$TMP/alive.log" | head -3)"
t0_ok=$(lg "$TMP/t0.json" L0 ok); h0_ok=$(lg "$TMP/h0.json" L0 ok)
db_l0=$(json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='L0'][0]['admitted']")
web_l0=$(json_get "$TMP/status.json" "[c for c in d['services'][1]['classes'] if c['class']=='L0'][0]['admitted']")
ok $([ "$db_l0" = "$t0_ok" ] && [ "$web_l0" = "$h0_ok" ] && echo 0 || echo 1) \
	"the counters survive both restarts: L0 admitted db $db_l0 (clients $t0_ok ok), web $web_l0 (clients $h0_ok ok)"
# The count the restarts left must be the flow table's: a difference that stood still would
# be corrected by the daemon's reconciliation (every second) with an alert, and the check
# below would then pass on the corrected count.
corrected=$(cat "${LOGS[@]}" | grep -c '"to":"corrected"')
ok $([ "$corrected" = 0 ] && echo 0 || echo 1) \
	"no in-flight correction from the flow table in the three sluiceds' logs ($corrected)" \
	"$(cat "${LOGS[@]}" | grep '"to":"corrected"' | head -3)"
inflight_zero() { $STATUS > "$TMP/st.json" && json_get "$TMP/st.json" \
	"0 if all(s['in_flight'] == 0 for s in d['services']) else 1" | grep -qx 0; }
wait_for 5 "in-flight of both services to return to 0" inflight_zero
ok $? "in-flight returns to 0 on both services after the load" "$(cat "$TMP/st.json")"
finish
