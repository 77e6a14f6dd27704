#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Request-level shedding for HTTP/1.x end to end: per-request admission on
# keep-alive connections, classification by source / header / path, the kernel's 429 with
# Retry-After (curl exits 0), a manual switch taking effect within a tick, latency histogram
# against the server's known service time, no leaked server sockets, in-flight back to 0,
# and bad input (binary payloads, a client vanishing mid-request) passing cleanly. A client
# outside trust_from setting X-Priority is classified as if it had not, and counted (status,
# /metrics), the count kept across a restart.
CLIENT_ADDRS="198.18.0.10 198.18.0.77"
TAG=http
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    retry_after_s: 3
    limit: { fixed: 8 }
    headroom: { L0: 100, L1: 90, L2: 75, L3: 25 }
    headroom_mode: fixed
    default_class: L3
    trust_from: [198.18.0.0/28]          # the test clients may set X-Priority (not .77)
    classify:
      - { source: 198.18.0.10/32, class: L0 }
      - { header: X-Priority, class: from-header }
      - { path_prefix: /report, class: L3 }
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 16 --service-ms 20
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
CTL="$BUILD/sluicectl --pin-dir $PIN --state-dir $TMP/state --config $CFG"
status() { $CTL status --json > "$TMP/status.json"; }
cls() { json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='$1'][0]['$2']"; }
lg() { json_get "$1" "d['classes']['$2']['$3']"; }
shed_is() { # shed_is CLASS RATIO: the verdict map holds this switch shed ratio for the class
	status; json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='$1'][0]['switch_shed'] == $2" | grep -qx True
}
web_idle() { status; [ "$(json_get "$TMP/status.json" "d['services'][0]['in_flight']")" = 0 ]; }

# --- classification of single requests -------------------------------------------------
c1=$(in_cli curl -s -o /dev/null -w "%{http_code}" http://$SRV_IP:8080/x)
c2=$(in_cli curl -s -o /dev/null -w "%{http_code}" -H "X-Priority: L1" http://$SRV_IP:8080/x)
c3=$(in_cli curl -s -o /dev/null -w "%{http_code}" --interface 198.18.0.10 http://$SRV_IP:8080/report)
status
ok $([ "$c1$c2$c3" = 200200200 ] && [ "$(cls L3 arrivals)" = 1 ] && [ "$(cls L1 arrivals)" = 1 ] &&
	[ "$(cls L0 arrivals)" = 1 ] && echo 0 || echo 1) \
	"requests classified by default, X-Priority header and source (first rule wins over path)" \
	"codes $c1 $c2 $c3; L0 $(cls L0 arrivals) L1 $(cls L1 arrivals) L3 $(cls L3 arrivals)"

# --- X-Priority from outside trust_from: ignored (the default class), counted -----------
untrusted() { json_get "$TMP/status.json" "d['services'][0]['untrusted_priority']"; }
c6=$(in_cli curl -s -o /dev/null -w "%{http_code}" --interface 198.18.0.77 -H "X-Priority: L0" http://$SRV_IP:8080/x)
status
ok $([ "$c6" = 200 ] && [ "$(cls L3 arrivals)" = 2 ] && [ "$(cls L0 arrivals)" = 1 ] &&
	[ "$(untrusted)" = 1 ] && echo 0 || echo 1) \
	"X-Priority: L0 from outside trust_from is classified L3 (the default) and counted: untrusted_priority $(untrusted)" \
	"code $c6; L0 $(cls L0 arrivals) L3 $(cls L3 arrivals)"

# --- a switch sheds a class within a few ticks; the refused curl gets a clean 429 ---------
$CTL switch set web L2 --shed 100 --reason "e2e test" --ttl 1m >/dev/null
wait_for 2 "the L2 switch in the verdict map" shed_is L2 1
ok $? "the switch is in the verdict map ${WAITED_MS} ms after switch set (each status read takes 250 ms)"
t0=$(now_ms)
out=$(in_cli curl -s -i -H "X-Priority: L2" http://$SRV_IP:8080/x); rc=$?
t1=$(now_ms)
ok $([ $rc -eq 0 ] && echo "$out" | grep -q "^HTTP/1.1 429 Too Many Requests" &&
	echo "$out" | grep -q "^Retry-After: 3" && echo "$out" | grep -q "^Connection: close" && echo 0 || echo 1) \
	"a shed request gets a complete 429 with Retry-After and curl exits 0 ($((t1 - t0)) ms)" "rc $rc" "$out"
status
ok $([ "$(cls L2 rejected)" -ge 1 ] && [ "$(json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='L2'][0]['rejected_by']['switch']")" -ge 1 ] && echo 0 || echo 1) \
	"the rejection is counted under reason switch"
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
start_sluiced "$CFG"; ok $? "sluiced starts again after SIGTERM"
c5=$(in_cli curl -s -o /dev/null -w "%{http_code}" -H "X-Priority: L2" http://$SRV_IP:8080/x)
ok $([ "$c5" = 429 ] && echo 0 || echo 1) "the switch survives a restart of sluiced ($c5)"
status
ok $([ "$(untrusted)" = 1 ] && echo 0 || echo 1) "the count of ignored priority marks survives the restart ($(untrusted))"
$CTL switch clear web L2 >/dev/null
wait_for 3 "the L2 switch gone from the verdict map" shed_is L2 0
c4=$(in_cli curl -s -o /dev/null -w "%{http_code}" -H "X-Priority: L2" http://$SRV_IP:8080/x)
ok $([ "$c4" = 200 ] && echo 0 || echo 1) "after switch clear the class is served again ($c4)" \
	"$($CTL status)" "$($CTL switch ls)" "$(cat "$TMP"/sluiced.*.log | tail -n 6)"

# --- keep-alive overload: L3 flood gets 429s per request, L0 is served -----------------
start_bg "$TMP/l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive \
	--rate 300 --duration 3 --quiet --class L3:1:path=/report
L3PID=$LAST_PID
# (L0's Poisson arrivals from a fixed seed: 54 in the 3 s, against the floor of 40 below, which
# an unseeded count of mean 60 missed in about one run of three hundred.)
start_bg "$TMP/l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive \
	--seed 3 --rate 20 --duration 3 --quiet --class L0:1:src=198.18.0.10
L0PID=$LAST_PID
sleep 1.5   # part of the scenario: sample the rate in the middle of the 3 s flood
# The rate comes from two snapshots 250 ms apart: a short window on a busy machine, so the
# check gets one more measurement (still inside the flood) before it fails.
rate_ok() {
	$CTL status --json > "$TMP/status.json"
	rate3=$(cls L3 rate_per_s)
	python3 -c "import sys; sys.exit(0 if 200 <= $rate3 <= 400 else 1)"
}
retry_once rate_ok
ok $? "sluicectl status reports the L3 request rate while it runs: $rate3/s (offered 300/s)$RETRY_NOTE"
# --no-rates answers from one snapshot: the counters as ever, no rate (-1, the table's "-").
$CTL status --json --no-rates > "$TMP/status.json"
nr3=$(cls L3 rate_per_s); arr3=$(cls L3 arrivals)
$CTL status --no-rates > "$TMP/norates.txt"
ok $([ "$nr3" = -1.0 ] && [ "$arr3" -gt 0 ] &&
     awk '$1 == "L3" { found = 1; exit !($2 == "-") } END { exit !found }' "$TMP/norates.txt" &&
     echo 0 || echo 1) \
	"sluicectl status --no-rates during the flood: L3 rate_per_s $nr3, arrivals $arr3 counted, req/s '-' in the table" \
	"$(cat "$TMP/norates.txt")"
wait $L3PID $L0PID
l3_429=$(lg "$TMP/l3.json" L3 http_429); l3_ok=$(lg "$TMP/l3.json" L3 ok); l3_sent=$(lg "$TMP/l3.json" L3 sent)
l3_err=$(lg "$TMP/l3.json" L3 errors); rej99=$(lg "$TMP/l3.json" L3 reject_p99_ms)
l0_ok=$(lg "$TMP/l0.json" L0 ok); l0_sent=$(lg "$TMP/l0.json" L0 sent); l0_err=$(lg "$TMP/l0.json" L0 errors)
ok $([ "$l3_429" -ge 300 ] && [ "$l3_ok" -ge 50 ] && [ "$l3_err" = 0 ] && echo 0 || echo 1) \
	"L3 keep-alive flood: $l3_ok ok, $l3_429 answered 429, $l3_err errors of $l3_sent"
rej_fast() { python3 -c "import sys; sys.exit(0 if $rej99 < 10 else 1)"; }
remeasure_rej() { # a 1 s L3 flood alone: its 429s
	in_cli "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive --rate 300 \
		--duration 1 --quiet --class L3:1:path=/report > "$TMP/l3b.json"
	rej99=$(lg "$TMP/l3b.json" L3 reject_p99_ms)
	rej_fast
}
retry_once rej_fast remeasure_rej
ok $? "429s arrive fast: p99 $rej99 ms (< 10)$RETRY_NOTE"
ok $([ "$l0_sent" -ge 40 ] && [ "$l0_ok" -eq "$l0_sent" ] && [ "$l0_err" = 0 ] && echo 0 || echo 1) \
	"L0 requests all succeed under the flood: $l0_ok of $l0_sent"

# --- measurements ---------------------------------------------------------------------
wait_for 3 "in-flight of web to return to 0 after the flood" web_idle
ok $? "in-flight returns to 0 after the flood"
status
p50=$(cls L0 p50_us)
p50_ok() { python3 -c "import sys; sys.exit(0 if 16000 <= $p50 <= 24000 else 1)"; }
remeasure_p50() { # 2 s more of L0 alone; the histogram is cumulative, so this dilutes the first run
	in_cli "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive --rate 40 \
		--duration 2 --quiet --class L0:1:src=198.18.0.10 > /dev/null
	status; p50=$(cls L0 p50_us)
	p50_ok
}
retry_once p50_ok remeasure_p50
ok $? "wire latency p50 of L0 ($p50 us) is within 20% of the 20 ms service time$RETRY_NOTE"
hist=$($CTL hist web L0)
ok $(echo "$hist" | grep -q "16384 -> 20479" && echo 0 || echo 1) "sluicectl hist prints the histogram" "$hist"

# --- bad input: binary payload, client vanishing mid-request -----------------------------
in_cli python3 - "$SRV_IP" <<'PY'
import socket, sys, time
ip = sys.argv[1]
s = socket.create_connection((ip, 8080)); s.sendall(bytes(range(256)) * 4); s.settimeout(2)
try: s.recv(4096)
except Exception: pass
s.close()
for i in range(20):   # partial requests, then the client goes away
    s = socket.create_connection((ip, 8080)); s.sendall(b"GET /x HTTP/1.1\r\nHost: a\r\nX-Pri"); s.close()
s = socket.create_connection((ip, 8080)); s.sendall(b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"); s.close()  # RST
PY
web_clean() { web_idle && [ "$(json_get "$TMP/status.json" "d['flows']")" = 0 ]; }
wait_for 5 "in-flight 0 and an empty flow table after the bad input" web_clean
ok $? \
	"binary payloads and vanished clients end cleanly: in-flight 0, flow table empty" \
	"$(cat "$TMP/status.json")"
# The counters agreed with the flow table all along: the reconciliation (a sweep after every
# GC pass, once a second, through the flood, the restart and the bad input) corrected nothing,
# and two more sweeps at rest correct nothing either.
mport=$(sed -n 's/.*metrics on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$SLUICED_LOG" | tail -1)
sleep 2.5 # part of the scenario: two more sweeps (one a second) at rest; a correction is an event, nothing to poll for
corr=$(in_srv curl -s "http://127.0.0.1:$mport/metrics" |
	awk '$1 ~ /^sluice_inflight_corrections_total\{service="web"/ { print $2 }')
ok $([ "$corr" = 0 ] && echo 0 || echo 1) \
	"the reconciliation with the flow table corrected nothing (sluice_inflight_corrections_total $corr)"
umark=$(in_srv curl -s "http://127.0.0.1:$mport/metrics" |
	awk '$1 == "sluice_untrusted_priority_total{service=\"web\"}" { print $2 }')
ok $([ "$umark" = 1 ] && echo 0 || echo 1) "/metrics: sluice_untrusted_priority_total{service=\"web\"} $umark"
leaked=$(in_srv ss -Htn state established state close-wait '( sport = :8080 )' | wc -l)
ok $([ "$leaked" = 0 ] && echo 0 || echo 1) "no ESTABLISHED or CLOSE-WAIT server sockets left ($leaked)" \
	"$(in_srv ss -tan)"
ok $(grep -q 'in-flight estimate on ([0-9]* CPUs)' "$SLUICED_LOG" && echo 0 || echo 1) \
	"sluiced turned the in-flight estimate on after attaching" "$(grep -i estimate "$SLUICED_LOG")"
ok $(kill -0 $SLUICED_PID && echo 0 || echo 1) "sluiced is still running"
finish
