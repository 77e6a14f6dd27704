#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The controller end to end, in network namespaces with a real server:
#  1. 3x overload of mixed classes (L0..L3 by X-Priority) on an AIMD-limited service with
#     adaptive headroom: L0 success >= 99.9%, classes shed in order L3 first, p99 of admitted
#     requests <= 2x the latency target.
#  2. a backend whose service time jumps 5 ms -> 500 ms: the breaker opens within 2 s on slow
#     calls, clients get 503 fast; when the backend recovers, half-open steps 10 -> 30 -> 60 ->
#     100% up to closed.
#  1b. after the overload, light traffic: status shows how long the ladder shed, then how long
#     its recovery took, the same as the `recovered` event.
TAG=ctl
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: shop
    port: 8080
    protocol: http
    limit: { min: 2, max: 32 }
    target_latency_ms: 40
    aimd_window_ms: 500
    headroom_mode: adaptive
    default_class: L3
    trust_from: [198.18.0.0/15]          # the test clients may set X-Priority
    classify:
      - { header: X-Priority, class: from-header }
  - name: api
    port: 8081
    protocol: http
    limit: { fixed: 32 }
    default_class: L2
    breaker: { min_calls: 10, error_rate: 0.5, slow_call_ms: 200, slow_call_rate: 0.6,
               open_s: 2, half_open_steps: [10, 30, 60, 100], step_s: 1, window_s: 1 }
Y
echo "service_ms=5" > "$TMP/mode"
start_bg "$TMP/shop.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 8 --service-ms 20 --backlog 4096
start_bg "$TMP/api.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8081 --mode http \
	--workers 32 --service-ms 5 --mode-file "$TMP/mode"
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
LOG=$(ls "$TMP"/sluiced.*.log)

# --- 1. 3x overload: capacity 8 workers x 20 ms = 400/s; offered 1200/s ---------------
overload() { # 8 s of the four classes at once
	local c LG=""
	for c in L0:120 L1:240 L2:360 L3:480; do
		start_bg "$TMP/${c%%:*}.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 \
			--mode http-keepalive --rate ${c##*:} --duration 8 --timeout-ms 2000 --quiet \
			--class ${c%%:*}:1:header
		LG="$LG $LAST_PID"
	done
	wait $LG
}
overload
succ() { json_get "$TMP/$1.json" "100.0 * d['classes']['$1']['ok'] / d['classes']['$1']['sent']"; }
s0=$(succ L0); s1=$(succ L1); s2=$(succ L2); s3=$(succ L3)
l0_lost() { json_get "$TMP/L0.json" "'sent %d: 429 %d, 503 %d, refused %d, reset %d, timeout %d, other %d' % tuple(d['classes']['L0'][k] for k in ('sent', 'http_429', 'http_503', 'refused', 'reset', 'timeout', 'errors'))"; }
ok $(python3 -c "import sys; sys.exit(0 if $s0 >= 99.9 else 1)" && echo 0 || echo 1) \
	"3x overload: L0 success $s0% (>= 99.9%)" "L0 $(l0_lost)"
# which step refused L0, if any (the data path's own counts): a refusal is explained, not guessed
"$BUILD/sluicectl" --pin-dir "$PIN" status --json > "$TMP/st.json" 2>/dev/null
echo "# L0 refused by: $(json_get "$TMP/st.json" "[c['rejected_by'] for c in [s for s in d['services'] if s['name'] == 'shop'][0]['classes'] if c['class'] == 'L0'][0]" 2>&1)"
echo "# L0 $(l0_lost); the limit's lowest: $(grep '"service":"shop","machine":"aimd"' "$LOG" |
	grep -o '"limit_to":[0-9]*' | cut -d: -f2 | sort -n | head -1)"   # every run
ok $(python3 -c "import sys; sys.exit(0 if $s3 <= $s2 <= $s1 <= $s0 and $s3 < 10 else 1)" && echo 0 || echo 1) \
	"classes shed in priority order: L0 $s0% >= L1 $s1% >= L2 $s2% >= L3 $s3%"
p99_ok() {
	p99=$(python3 -c "
import json
print(max(json.load(open('$TMP/%s.json' % c))['classes'][c]['p99_ms'] or 0 for c in ('L0','L1','L2','L3')))")
	python3 -c "import sys; sys.exit(0 if $p99 <= 80 else 1)"
}
overload_again() { overload; p99_ok; }
retry_once p99_ok overload_again
ok $? "p99 of admitted requests $p99 ms <= 2x the 40 ms target$RETRY_NOTE"
good=$(python3 -c "
import json
print(round(sum(json.load(open('$TMP/%s.json' % c))['classes'][c]['ok'] for c in ('L0','L1','L2','L3')) / 8 / 400 * 100, 1))")
echo "# goodput $good% of capacity"
ok $(grep -q '"machine":"ladder","class":"L3","from":"full"' "$LOG" && echo 0 || echo 1) \
	"the ladder's first cut is L3, as a JSON event"

# --- 1b. recovery reported: light traffic of every class until all are admitted in full ---
shop_recovery() { # the shop's recovery object from status --json, as JSON
	"$BUILD/sluicectl" --pin-dir "$PIN" status --json | python3 -c "
import json, sys; d = json.load(sys.stdin)
print(json.dumps([s for s in d['services'] if s['name'] == 'shop'][0]['recovery']))"; }
REC_BEFORE=$(shop_recovery)
LG=""
for c in L0:40 L1:40 L2:40 L3:40; do     # 160/s against 400/s of capacity, for at most 20 s
	start_bg "$TMP/rec${c%%:*}.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 \
		--mode http-keepalive --rate ${c##*:} --duration 20 --timeout-ms 2000 --quiet \
		--class ${c%%:*}:1:header
	LG="$LG $LAST_PID"
done
REC=""
recovered() { # status says every class is admitted in full again after a recovery
	REC=$(shop_recovery)
	python3 -c "import json, sys; r = json.loads(sys.argv[1]); sys.exit(0 if r['shedding_s'] is None and r['last_recovery_s'] is not None else 1)" "$REC"
}
wait_for 20 "status to show the ladder recovered (every class admitted in full)" recovered
kill $LG 2>/dev/null; wait $LG 2>/dev/null
EV=$(grep '"machine":"ladder"' "$LOG" | grep '"why":"recovered"' | tail -n 1 | grep -o '"recovery_s":[0-9.e+-]*' | cut -d: -f2)
echo "# recovery: shedding right after the overload: $REC_BEFORE; after the light load: $REC; the event's recovery_s: ${EV:-none}"
ok $(python3 -c "
import json, sys
b, a, ev = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
ok = b['shedding_s'] is not None and b['shedding_s'] > 0 and b['since_overload_s'] is not None
ok = ok and a['shedding_s'] is None and ev != '' and abs(a['last_recovery_s'] - float(ev)) < 0.011
ok = ok and a['recovered_ago_s'] is not None and a['last_episode_s'] >= a['last_recovery_s']
sys.exit(0 if ok else 1)" "$REC_BEFORE" "$REC" "$EV" && echo 0 || echo 1) \
	"status shows the ladder shedding after the overload, then the recovery's time, as the event says"

# --- 2. slow downstream: breaker opens, 503s, half-open recovery ------------------------
mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }   # the events' t_ns clock
api_breaker() { "$BUILD/sluicectl" --pin-dir "$PIN" status --json | python3 -c "
import json, sys; d = json.load(sys.stdin); print([s for s in d['services'] if s['name'] == 'api'][0]['breaker']['state'])"; }
breaker_closed() { [ "$(api_breaker)" = closed ]; }
breaker_run() { # healthy 2 s, slow 4 s, healthy until the breaker is closed again (or 20 s);
	# sets react_ms, n503, r50, r99. The load runs until then: half-open steps need calls to pass,
	# so a fixed-length load could end before the last step on a slow host.
	local from lg opened t_slow t_open
	from=$(($(wc -l < "$LOG") + 1))
	start_bg "$TMP/api.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8081 \
		--mode http-keepalive --rate 40 --duration 60 --timeout-ms 3000 --quiet --class L2:1
	lg=$LAST_PID
	sleep 2   # part of the scenario: 2 s of a healthy backend first
	t_slow=$(mono_ns)
	echo "service_ms=500" > "$TMP/mode"
	sleep 4   # part of the scenario: the backend stays slow for 4 s
	echo "service_ms=5" > "$TMP/mode"
	sleep 1   # part of the scenario: the breaker is still open when the backend recovers
	wait_for 20 "the api breaker to close again under load" breaker_closed
	kill -INT $lg; wait $lg   # SIGINT: stop arrivals, drain, print the report
	opened=$(tail -n +"$from" "$LOG" | grep '"service":"api","machine":"breaker","from":"closed","to":"open"' | head -1)
	t_open=$(python3 -c "import json, sys; print(json.loads(sys.argv[1])['t_ns'])" "$opened" 2>/dev/null || echo 0)
	react_ms=$(( (t_open - t_slow) / 1000000 ))
	OPENED=$opened
	n503=$(json_get "$TMP/api.json" "d['classes']['L2']['http_503']")
	r50=$(json_get "$TMP/api.json" "d['classes']['L2']['reject_p50_ms']")
	r99=$(json_get "$TMP/api.json" "d['classes']['L2']['reject_p99_ms']")
}
# A 503 is fast when the typical one takes under 5 ms and the slowest ones under 100 ms, a fifth
# of the 500 ms a call to the slow backend takes: the tail is the load generator's own
# scheduling, which read 14-50 ms for the p99 on this 2-CPU VM while builds ran beside it
# (under 10 ms when idle).
fast_503() { python3 -c "import sys; sys.exit(0 if $r50 < 5 and $r99 < 100 else 1)"; }
breaker_fast() { # the timing thresholds: opens within 2 s, 503s fast
	echo "# breaker opened after ${react_ms} ms; 503 p50 ${r50} ms, p99 ${r99} ms ($n503 answers)"
	[ -n "$OPENED" ] && [ "$react_ms" -gt 0 ] && [ "$react_ms" -le 2000 ] && fast_503
}
breaker_again() { breaker_run; breaker_fast; }
breaker_run
retry_once breaker_fast breaker_again
ok $([ -n "$OPENED" ] && [ "$react_ms" -gt 0 ] && [ "$react_ms" -le 2000 ] && echo 0 || echo 1) \
	"service time 5 -> 500 ms: the breaker opens on slow calls after $react_ms ms$RETRY_NOTE" "$OPENED"
ok $([ "$n503" -ge 20 ] && fast_503 && echo 0 || echo 1) \
	"clients get 503 fast while it is open: $n503 answers, p50 $r50 ms, p99 $r99 ms$RETRY_NOTE"
steps=$(grep '"service":"api","machine":"breaker"' "$LOG" | python3 -c "
import json, sys
ev = [json.loads(l) for l in sys.stdin]
last_open = max(i for i, e in enumerate(ev) if e['to'] == 'open')
print(' '.join('%s:%s' % (e['to'], e.get('admit_pct', e.get('step', ''))) for e in ev[last_open:]))")
ok $(echo "$steps" | grep -q "half_open.*half_open.*half_open.*closed" && echo 0 || echo 1) \
	"backend recovered: half-open walks its steps up to closed ($steps)"
status_state=$(api_breaker)
ok $([ "$status_state" = closed ] && echo 0 || echo 1) "sluicectl status shows the breaker closed again"
finish
