#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Restarts are invisible to the loop: an HTTP service is overloaded until its limit has moved
# from its start value and its baseline is learned; then sluiced is stopped with SIGTERM and
# started again, and later killed with kill -9 and started again. Each new sluiced adopts the
# controller's state the last one left in the pinned map ctl_state (its "adopted" event carries
# the limit, baseline, ladder and breaker it took, compared here with the entry read while no
# sluiced ran), and `status` shows the baseline at once. Between the kill and the third start
# the backend fails every request: the third sluiced's first tick takes those errors as a
# snapshot, so its breaker (error_rate 0.02) does not open. Finally `sluicectl baseline reset`
# forgets the baseline (status counts the reset), and fails with exit 1 once sluiced is gone.
CLIENT_ADDRS="198.18.0.10 198.18.0.20"
TAG=cst
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
MODE=$TMP/mode
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
heartbeat_timeout_ms: 5000
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    limit: { min: 8, max: 64 }
    default_class: L3
    connection_cap: off     # the L3 flood must reach the ladder, whose state is under test
    breaker: { error_rate: 0.02, min_calls: 20, slow_call_ms: 10000, window_s: 5 }
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y
start_bg "$TMP/httpserver.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 4 --service-ms 20 --mode-file "$MODE" --stats-file "$TMP/server.stats" \
	--stats-interval-ms 100 --quiet
# server_fail_rate RATE: the server has taken up fail_rate RATE from its mode file
server_fail_rate() { grep -q "\"fail_rate\":$1[,}]" "$TMP/server.stats" 2>/dev/null; }
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok 0 "sluiced starts"
LOGS=("$SLUICED_LOG")
ST="$BUILD/sluicectl --pin-dir $PIN"
status_json() { $ST status --json > "$1"; }
svc() { json_get "$1" "d['services'][0]$2"; }

# L0 all along (40/s, under the 200/s the 4 x 20 ms backend serves); L3 4x the capacity
# from 3 s on, when the baseline has been learned from L0 alone. The limit's floor (8 on 4
# workers) queues more than the objective allows, so the ladder takes over and cuts L3.
# Both loads run until the end of the test, which kills them; their durations are only an upper
# bound, long enough that a slow host never reaches the later phases without load.
LOAD=""
run_load() { # run_load OUT ARGS...
	local out=$1; shift
	start_bg "$out" $IN_CLI "$BUILD/tools/loadgen" --seed 5 --quiet --timeout-ms 3000 "$@"
	LOAD="$LOAD $LAST_PID"
}
run_load "$TMP/l0.json" --target $SRV_IP:8080 --mode http-keepalive --rate 40 --duration 120 \
	--class L0:1:src=198.18.0.10
learned() { status_json "$TMP/base.json" && [ "$(svc "$TMP/base.json" "['baseline_us'] or 0")" -gt 0 ]; }
wait_for 10 "a baseline learned from L0 alone" learned
run_load "$TMP/l3.json" --target $SRV_IP:8080 --mode http-keepalive --rate 800 --duration 116 \
	--class L3:1:src=198.18.0.20
moved() { status_json "$TMP/pre.json" && [ "$(svc "$TMP/pre.json" "['limit']")" -lt 19 ] &&
	[ "$(svc "$TMP/pre.json" "['baseline_us'] or 0")" -gt 0 ] &&
	[ "$(svc "$TMP/pre.json" "['ladder']['L3']")" != full ]; }
wait_for 12 "the limit to move below its start (19), a baseline learned, the ladder cutting L3" moved
ok $? "under overload the limit moved from its start value 19 to $(svc "$TMP/pre.json" "['limit']"), the baseline is $(svc "$TMP/pre.json" "['baseline_us']") us (signal $(svc "$TMP/pre.json" "['signal']")), the ladder has L3 $(svc "$TMP/pre.json" "['ladder']['L3']")" \
	"$(cat "$TMP/pre.json")"

# entry FILE: what the pinned entry says while no sluiced runs (status reads the maps)
entry() { status_json "$1"; echo "limit=$(svc "$1" "['limit']") baseline=$(svc "$1" "['baseline_us']") ladder=$(svc "$1" "['ladder']")"; }
# adopted LOG FILE: the new sluiced's "adopted" event agrees with the entry in FILE
adopted() {
	python3 - "$1" "$2" > "$TMP/adopted.txt" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
ad = [e for e in ev if e.get('to') == 'adopted' and e.get('service') == 'web']
st = json.load(open(sys.argv[2]))['services'][0]
if not ad:
    print('# no adopted event'); sys.exit(1)
a = ad[0]
state = {0: 'off', 1: 'full'}
ok = a['limit'] == st['limit'] and abs(a['baseline_us'] - (st['baseline_us'] or 0)) <= 1
for c in ('L0', 'L1', 'L2', 'L3'):
    f = a['admit_' + c]
    want = 'off' if f == 0 else 'full' if f >= 1 else 'partial'
    ok = ok and want == st['ladder'][c]
print('# adopted: limit %s baseline_us %.0f ladder %s breaker %s; entry: limit %s baseline_us %s ladder %s'
      % (a['limit'], a['baseline_us'], [a['admit_' + c] for c in ('L0', 'L1', 'L2', 'L3')],
         a['breaker'], st['limit'], st['baseline_us'], st['ladder']))
sys.exit(0 if ok else 1)
PY
}

# --- SIGTERM + start ------------------------------------------------------------------------
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null; term_rc=$?
e1=$(entry "$TMP/term.json")
echo "# the entry at SIGTERM: $e1"
start_sluiced "$CFG"; up=$?
LOGS+=("$SLUICED_LOG")
status_json "$TMP/after1.json"
ok $([ $term_rc = 0 ] && [ $up = 0 ] && adopted "$SLUICED_LOG" "$TMP/term.json" && echo 0 || echo 1) \
	"SIGTERM + start: the new sluiced adopted the entry the last one wrote ($e1)" \
	"$(cat "$TMP/adopted.txt"; grep -E 'adopted|fresh' "$SLUICED_LOG")"
ok $([ "$(svc "$TMP/after1.json" "['baseline_us'] or 0")" -gt 0 ] &&
	[ "$(svc "$TMP/after1.json" "['limit']")" -lt 19 ] && echo 0 || echo 1) \
	"right after the start status shows the baseline $(svc "$TMP/after1.json" "['baseline_us']") us and limit $(svc "$TMP/after1.json" "['limit']") (not the start value 19)" \
	"$(cat "$TMP/after1.json")"
# The ladder's shedding is read from the entry too: shown while no sluiced runs, and the
# episode the new sluiced adopted goes on from the same first cut (or has ended in a recovery).
sh_term=$(svc "$TMP/term.json" "['recovery']['shedding_s']")
sh_after=$(svc "$TMP/after1.json" "['recovery']['shedding_s']")
rec_after=$(svc "$TMP/after1.json" "['recovery']['last_recovery_s']")
ok $(python3 -c "
import sys
t, a, r = sys.argv[1:]
sys.exit(0 if t != 'None' and float(t) > 0 and (a != 'None' and float(a) >= float(t) or r != 'None') else 1)" \
	"$sh_term" "$sh_after" "$rec_after" && echo 0 || echo 1) \
	"status shows the ladder shedding for ${sh_term}s with no sluiced running, then ${sh_after}s after the restart (last recovery: $rec_after)"

# --- kill -9, a backend failing everything while no sluiced runs, start ---------------------
sleep 1.5 # part of the scenario: the new sluiced controls the overload a while before it is killed
kill -KILL "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
e2=$(entry "$TMP/kill.json")
echo "fail_rate=1" > "$MODE"
wait_for 5 "the server to fail everything (fail_rate 1 in its stats)" server_fail_rate 1.000000
sleep 2 # part of the scenario: 2 s of a backend failing everything while no sluiced runs
echo "fail_rate=0" > "$MODE"
wait_for 5 "the server to serve again (fail_rate 0 in its stats)" server_fail_rate 0.000000
status_json "$TMP/errs.json"
errs=$(json_get "$TMP/errs.json" "sum(c['errors'] for c in d['services'][0]['classes'])")
calls=$(json_get "$TMP/errs.json" "sum(c['completed'] - c['http_429'] for c in d['services'][0]['classes'])")
start_sluiced "$CFG"; up=$?
LOGS+=("$SLUICED_LOG")
ok $([ $up = 0 ] && adopted "$SLUICED_LOG" "$TMP/kill.json" && echo 0 || echo 1) \
	"kill -9 + start: the new sluiced adopted the last entry written ($e2)" \
	"$(cat "$TMP/adopted.txt"; grep -E 'adopted|fresh' "$SLUICED_LOG")"
sleep 2 # part of the scenario: the window in which no breaker may open (an absence: nothing to poll for)
status_json "$TMP/after2.json"
opened=$(grep -c '"machine":"breaker".*"to":"open"' "$SLUICED_LOG")
ok $([ "$opened" = 0 ] && [ "$(svc "$TMP/after2.json" "['breaker']['state']")" = closed ] &&
	awk "BEGIN { exit !($errs * 1.0 / $calls >= 0.02) }" && echo 0 || echo 1) \
	"the first tick is a snapshot: $errs errors of $calls calls in the counters (over the breaker's 0.02) opened no breaker in 2 s" \
	"$(grep '"machine":"breaker"' "$SLUICED_LOG" | head -3)"

# --- baseline reset ------------------------------------------------------------------------
$ST baseline reset web > "$TMP/reset.out" 2>&1; rc=$?
status_json "$TMP/after3.json"
$ST status > "$TMP/table.txt"
ok $([ $rc = 0 ] && [ "$(svc "$TMP/after3.json" "['baseline_resets']")" = 1 ] &&
	grep -q '"operator baseline reset"' "$SLUICED_LOG" && grep -q '^  baseline ' "$TMP/table.txt" &&
	echo 0 || echo 1) \
	"sluicectl baseline reset web: exit $rc, '$(head -1 "$TMP/reset.out")', status counts $(svc "$TMP/after3.json" "['baseline_resets']") reset" \
	"$(cat "$TMP/reset.out" "$TMP/table.txt")"
# sluiced gone: its heartbeat stays fresh for heartbeat_timeout (5 s), so the CLI waits for
# two ticks that never come, then withdraws the request
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
$ST baseline reset web > "$TMP/reset2.out" 2>&1; rc=$?
status_json "$TMP/after4.json"
ok $([ $rc = 1 ] && grep -qE 'did not tick|not running' "$TMP/reset2.out" &&
	[ "$(svc "$TMP/after4.json" "['baseline_resets']")" = 1 ] && echo 0 || echo 1) \
	"with sluiced stopped, baseline reset exits $rc: $(head -1 "$TMP/reset2.out")" \
	"$(cat "$TMP/after4.json")"
kill $LOAD 2>/dev/null; wait $LOAD 2>/dev/null
finish
