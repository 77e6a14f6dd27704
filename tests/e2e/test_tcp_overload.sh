#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The adaptive loop of a tcp service through an overload, end to end, with the day-one limit
# and a learned objective. A real request/response server (testserver's tcp mode: a line in,
# 20 ms, "ok" out; 8 workers, so about 400 queries/s) behind sluiced; clients connect per
# query (loadgen --mode tcp), so the limit acts on every query at its SYN.
#  - calm, 3 s: L3 at 100 queries/s teaches the baseline (the server's 20 ms);
#  - overload, 6 s: L3 at 1400/s (3.5x what the server answers), L0 at 40/s beside it.
# Checked: the baseline is the service time; the limit is cut from where the calm left it;
# L3 is shed by sluice while the server stays busy; every L0 query is answered, none
# refused, at a median within 1.5x the service time (without sluice, L0 waits behind L3's
# backlog in the listen queue: seconds); afterwards nothing is in flight.
CLIENT_ADDRS="198.18.0.10 198.18.0.20"
TAG=tov
source "$(dirname "$0")/lib.sh"
e2e_setup

SERVICE_MS=20
WORKERS=8
CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: db
    port: 7000
    protocol: tcp
    reject: rst
    limit: { min: 4, max: 256 }
    target_latency_ms: auto
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers $WORKERS --service-ms $SERVICE_MS
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok 0 "sluiced attaches with a tcp service, the day-one limit and a learned objective"

lg() { json_get "$1" "d['classes']['$2']['$3']"; }

# L3: 100/s for 3 s, then 1400/s for 6 s. L0 beside it from the same start, at 1/s in the calm
# and 40/s from the surge on (loadgen's --rate-step: both step at the same moment).
start_bg "$TMP/l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 100 --rate-step 3:1400 --duration 9 --timeout-ms 3000 \
	--quiet --seed 1 --class L3:1:src=198.18.0.20
L3PID=$LAST_PID
start_bg "$TMP/l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 1 --rate-step 3:40 --duration 9 --timeout-ms 3000 --quiet \
	--seed 2 --class L0:1:src=198.18.0.10
L0PID=$LAST_PID
# The surge has begun once sluice refuses L3 (the calm's 2 in flight never meet its limit):
# what the calm left is read then.
surge_on() { status && [ "$(cls L3 rejected)" -gt 0 ]; }
wait_for 8 "sluice's first refusals of the surge" surge_on
calm_limit=$(svc limit)
base_us=$(svc baseline_us)
min_limit=$(lowest_limit 20 $L0PID $L3PID)
wait $L0PID $L3PID
status

ok $([ "${base_us:-0}" -ge $((SERVICE_MS * 800)) ] && [ "${base_us:-0}" -le $((SERVICE_MS * 1300)) ] &&
	echo 0 || echo 1) \
	"the calm taught the baseline: ${base_us} us for ${SERVICE_MS} ms queries" "$(cat "$TMP/status.json")"
# the limit's cuts on the overload's latency (a calm limit may already be near the knee: the
# cut is what says the loop saw the overload): those whose window read above the objective,
# whenever they came (the first can come before the poll above sees the first refusal: in one
# CI run the only cut, 16 -> 15 at 31 ms against 22 ms, did, and no cut was counted)
surge_cuts=$(grep '"aimd"' "$SLUICED_LOG" | python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("limit_to", 0) < e.get("limit_from", 0) and e.get("latency_us", 0) > e.get("objective_us", 1e18):
        n += 1
print(n)')
ok $([ "$surge_cuts" -ge 1 ] && [ "$min_limit" -le $((WORKERS * 3)) ] && echo 0 || echo 1) \
	"the overload cut the limit: ${calm_limit} when the first refusal was seen, lowest ${min_limit} (${WORKERS} workers), $surge_cuts cuts on a latency above the objective" \
	"$(grep -h '"aimd"' "$SLUICED_LOG" | tail -n 8)"
l3_ok=$(lg "$TMP/l3.json" L3 ok); l3_sent=$(lg "$TMP/l3.json" L3 sent)
l3_rej=$(cls L3 rejected)
# The server answers WORKERS x 1000 / SERVICE_MS = 400/s; the run's 300 calm queries plus
# at least 60 % of the surge's 6 s at that rate.
l3_floor=$((300 + 6 * WORKERS * 1000 / SERVICE_MS * 6 / 10))
ok $([ "$l3_rej" -gt 0 ] && [ "$l3_ok" -ge "$l3_floor" ] && echo 0 || echo 1) \
	"L3 is shed and the server kept busy: $l3_rej refused by sluice, $l3_ok ok of $l3_sent (at least $l3_floor)" \
	"$(cat "$TMP/l3.json")"
l0_ok=$(lg "$TMP/l0.json" L0 ok); l0_sent=$(lg "$TMP/l0.json" L0 sent)
l0_p50=$(lg "$TMP/l0.json" L0 p50_ms); l0_p99=$(lg "$TMP/l0.json" L0 p99_ms)
l0_rej=$(cls L0 rejected)
ok $([ "$l0_sent" -ge 230 ] && [ "$l0_ok" = "$l0_sent" ] && [ "$l0_rej" = 0 ] && echo 0 || echo 1) \
	"every L0 query answered through the overload: $l0_ok ok of $l0_sent, $l0_rej refused" \
	"$(cat "$TMP/l0.json")"
ok $(python3 -c "import sys; sys.exit(not float('${l0_p50:-1e9}') <= 1.5 * $SERVICE_MS)" && echo 0 || echo 1) \
	"L0's median through the overload: ${l0_p50} ms (p99 ${l0_p99} ms) for ${SERVICE_MS} ms queries" \
	"$(cat "$TMP/l0.json")"
# what the objective was judged on, through the pinned record to `status --json`: L0's latency
top_us=$(svc top_class_latency_us)
ok $([ "${top_us:-0}" != None ] && [ "${top_us:-0}" -ge $((SERVICE_MS * 800)) ] && echo 0 || echo 1) \
	"status shows the top class's latency the objective is judged on: ${top_us} us" \
	"$(cat "$TMP/status.json")"
idle() { status && [ "$(svc in_flight)" = 0 ] && [ "$(svc connections)" = 0 ]; }
wait_for 5 "in_flight and connections 0 after the clients closed" idle
ok $? "afterwards: in_flight $(svc in_flight), connections $(svc connections)"
ok $(kill -0 "$SLUICED_PID" 2>/dev/null && echo 0 || echo 1) "sluiced still runs"
finish
