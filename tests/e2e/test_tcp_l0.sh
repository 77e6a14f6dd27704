#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# L0 of a tcp service with the day-one adaptive limit is not held to the limit at its SYN.
# A real request/response server (testserver's tcp mode: a line in, 20 ms, "ok" out; 32
# workers, so nothing queues) behind sluiced, with an absolute objective of 5 ms that it
# misses at every concurrency: the limit is cut below the concurrency L0 brings by itself
# (clients that connect per query, about 12 busy), which is the case where refusing L0 cannot
# make L0 faster. Checked: sluice refuses none of L0's connections and every L0 query is
# answered, while an L3 flood beside it is refused (its threshold counts L0's busy
# connections). With L0 held to the limit, L0 connections were refused at the SYN.
CLIENT_ADDRS="198.18.0.10 198.18.0.20"
TAG=tl0
source "$(dirname "$0")/lib.sh"
e2e_setup

SERVICE_MS=20
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
    limit: { min: 4, max: 256 }
    latency_slo: 5ms
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 32 --service-ms $SERVICE_MS
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok 0 "sluiced attaches with a tcp service and an adaptive limit"

lg() { json_get "$1" "d['classes']['$2']['$3']"; }

# L0: 600 connections per second, one 20 ms query each (about 12 busy); L3: 300 per second
# beside it (the first cut is to half the peak in-flight, so L0 must be more than half of it). 6 s: the limit is decided on 1 s windows, the first cuts come within 2 s.
start_bg "$TMP/l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 600 --duration 6 --timeout-ms 3000 --quiet \
	--class L0:1:src=198.18.0.10
L0PID=$LAST_PID
start_bg "$TMP/l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 300 --duration 6 --timeout-ms 3000 --quiet \
	--class L3:1:src=198.18.0.20
L3PID=$LAST_PID
min_limit=$(lowest_limit 20 $L0PID $L3PID)
wait $L0PID $L3PID
status
l0_ok=$(lg "$TMP/l0.json" L0 ok); l0_sent=$(lg "$TMP/l0.json" L0 sent)
l3_ok=$(lg "$TMP/l3.json" L3 ok); l3_sent=$(lg "$TMP/l3.json" L3 sent)
l0_rej=$(cls L0 rejected); l3_rej=$(cls L3 rejected)
ok $([ "$min_limit" -lt 12 ] && echo 0 || echo 1) \
	"the objective is missed throughout: the limit went below L0's 12 busy connections (lowest $min_limit)" \
	"$(grep -h '"aimd"' "$SLUICED_LOG" | tail -n 5)"
ok $([ "$l0_rej" = 0 ] && echo 0 || echo 1) \
	"sluice refused none of L0's connections ($l0_rej refused; L0 threshold $(cls L0 threshold), limit $(svc limit))" \
	"$(cat "$TMP/status.json")"
ok $([ "$l0_sent" -ge 2500 ] && [ "$l0_ok" = "$l0_sent" ] && echo 0 || echo 1) \
	"every L0 query was answered: $l0_ok ok of $l0_sent" "$(cat "$TMP/l0.json")"
ok $([ "$l3_rej" -gt 0 ] && [ "$l3_ok" -lt "$l3_sent" ] && echo 0 || echo 1) \
	"the L3 flood beside it is shed: $l3_rej refused by sluice, $l3_ok ok of $l3_sent" \
	"$(cat "$TMP/l3.json")"
finish
