#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The connection cap of an http service's lower classes end to end: under a keep-alive L3
# flood whose requests are refused for room, sluiced caps L3's open connections at its room,
# a new L3 connection past the cap is refused at its SYN (connection refused, counted under
# `connections` in status and /metrics) while L0's requests on its own connections all
# succeed; the cap is lifted within a few seconds of the flood's end, the open-connection
# counts come back to 0, and `connection_cap: off` by a reload mid-flood lifts it at once.
# With the key left out (the default, churn): a flood refused at 200/s (about 10 refusals per
# response) sets no cap, one at 4000/s (each 429 a connection the server accepted and lost,
# hundreds per response) does, and L0 is served throughout.
CLIENT_ADDRS="198.18.0.10"
TAG=ccap
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
write_cfg() { # write_cfg auto|off|churn|default (the key left out)
	local key="connection_cap: $1"
	[ "$1" = default ] && key="# connection_cap: the default"
	cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    limit: { fixed: 20 }
    headroom: { L0: 100, L1: 100, L2: 100, L3: 10 }
    headroom_mode: fixed
    default_class: L3
    $key
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y
}
write_cfg auto
# Slow answers: an admitted L3 request holds its connection 200 ms, so a flood of new
# arrivals needs new connections while L3's two places are taken.
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 16 --service-ms 200
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
CTL="$BUILD/sluicectl --pin-dir $PIN --state-dir $TMP/state --config $CFG"
status() { $CTL status --json > "$TMP/status.json"; }
cls() { json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='$1'][0]$2"; }
lg() { json_get "$1" "d['classes']['$2']['$3']"; }
flood() { # flood OUT [S] [RATE]: L3 at RATE (200)/s for S (3) s and L0 at 10/s, keep-alive, in
	   # the background. L0's arrivals are Poisson from a fixed seed: the tests below count on
	   # at least 20 of them (29 in 3 s, 44 in 4 s with --seed 1; an unseeded count of mean 30 fell
	   # under 20 in about one run of fifty), and evenly spaced ones (one every 100 ms, each
	   # answered in 200 ms) would keep exactly L3's room of 2 in flight, so L3 would never be
	   # admitted and never hold a connection for the cap to count.
	start_bg "$1.l3" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive \
		--rate "${3:-200}" --duration "${2:-3}" --timeout-ms 3000 --quiet --class L3:1
	L3PID=$LAST_PID
	start_bg "$1.l0" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive \
		--seed 1 --rate 10 --duration "${2:-3}" --timeout-ms 3000 --quiet \
		--class L0:1:src=198.18.0.10
	L0PID=$LAST_PID
}
# The cap is set at L3's room (2: a tenth of 20), never above it, at least 2.
# (Fixed headroom compares every class with the service's total, so L0's own bursts -- 10/s of
# 200 ms, 2 in flight on average -- must never reach the limit: with a limit of 8, one L0
# request in 30-40 was refused in about one run of five, most likely on meeting 6 of its own
# and L3's 2; the reason was not recorded then, it is now.)
l3_capped() { status; [ "$(cls L3 "['connection_cap']")" != None ] && [ "$(cls L3 "['connection_cap']")" -ge 2 ] &&
	[ "$(cls L3 "['rejected_by']['connections']")" -ge 1 ]; }

# --- the flood: L3's requests refused for room, then its connections capped -----------------
flood "$TMP/on"
wait_for 3 "L3's connections capped at 2 and a SYN refused" l3_capped
ok $? "under the L3 flood the controller caps L3's connections at its room (cap $(cls L3 "['connection_cap']"), SYNs refused $(cls L3 "['rejected_by']['connections']"), open $(cls L3 "['open_connections']")); L0 uncapped ($(cls L0 "['connection_cap']"))" \
	"$($CTL status)"
mport=$(sed -n 's/.*metrics on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$SLUICED_LOG" | tail -1)
metric=$(in_srv curl -s "http://127.0.0.1:$mport/metrics" | grep '^sluice_connection_cap{service="web",class="L3"}')
wait $L3PID $L0PID
refused=$(lg "$TMP/on.l3" L3 refused); h429=$(lg "$TMP/on.l3" L3 http_429); l3err=$(lg "$TMP/on.l3" L3 errors)
l0ok=$(lg "$TMP/on.l0" L0 ok); l0sent=$(lg "$TMP/on.l0" L0 sent)
ok $([ "$refused" -ge 1 ] && [ "$l3err" = 0 ] && echo 0 || echo 1) \
	"an L3 connection past the cap is refused at its SYN, cleanly: $refused refused, $h429 answered 429, $l3err errors" \
	"$(cat "$TMP/on.l3")"
ok $([ "$l0sent" -ge 20 ] && [ "$l0ok" = "$l0sent" ] && echo 0 || echo 1) \
	"L0's requests all succeed meanwhile: $l0ok of $l0sent" "$(cat "$TMP/on.l0")" \
	"L0 refused by: $($CTL status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print([c["rejected_by"] for c in d["services"][0]["classes"] if c["class"]=="L0"][0])')"
ok $(echo "$metric" | grep -Eq ' [1-9][0-9]*$' && echo 0 || echo 1) "/metrics shows the cap: $metric"

# --- the flood ends: the cap is lifted, every connection given back ---------------------------
lifted() { status; [ "$(cls L3 "['connection_cap']")" = None ] && [ "$(cls L3 "['open_connections']")" = 0 ] &&
	[ "$(cls L0 "['open_connections']")" = 0 ]; }
wait_for 5 "the cap lifted and no connection open" lifted
ok $? "after the flood the cap is lifted within ${WAITED_MS} ms and the open-connection counts are back to 0" \
	"$($CTL status --json)"

# --- connection_cap: off ----------------------------------------------------------------------
# Turned off while a cap is in force (sluiced reloads a changed config file by itself; the
# HUP makes it sure): the cap goes at the reload, and the rest of the same flood is refused per
# request only.
flood "$TMP/off" 8
wait_for 3 "L3's connections capped again" l3_capped
capped_before=$?
write_cfg off
kill -HUP "$SLUICED_PID"
wait_for 3 "the reloaded config" grep -q "config reloaded" "$SLUICED_LOG"
no_cap() { status; [ "$(cls L3 "['connection_cap']")" = None ]; }
wait_for 2 "the cap lifted by the reload" no_cap
lifted=$?
conn_before=$(cls L3 "['rejected_by']['connections']"); head_before=$(cls L3 "['rejected_by']['headroom']")
wait $L3PID $L0PID
status
conn_d=$(( $(cls L3 "['rejected_by']['connections']") - conn_before ))
head_d=$(( $(cls L3 "['rejected_by']['headroom']") - head_before ))
ok $([ "$capped_before" = 0 ] && [ "$lifted" = 0 ] && [ "$conn_d" = 0 ] && [ "$head_d" -ge 1 ] &&
	[ "$(cls L3 "['connection_cap']")" = None ] && echo 0 || echo 1) \
	"connection_cap: off by a reload mid-flood lifts the cap at once; from then on the flood is refused per request only ($head_d answered 429, $conn_d connections refused)"

# --- the default (churn): a cap only while the refusals churn connections --------------------
reload_to() { # reload_to MODE
	local n
	n=$(grep -c "config reloaded" "$SLUICED_LOG")
	write_cfg "$1"
	kill -HUP "$SLUICED_PID"
	wait_for 3 "the reloaded config" eval '[ "$(grep -c "config reloaded" "$SLUICED_LOG")" -gt "$n" ]'
}
reload_to default
status
conn_before=$(cls L3 "['rejected_by']['connections']"); head_before=$(cls L3 "['rejected_by']['headroom']")
gate_event() { grep '"machine":"connection_cap"' "$SLUICED_LOG" | grep -c "\"to\":\"$1\""; }
flood "$TMP/calm" 3 200
wait $L3PID $L0PID
status
# every opening of the churn gate is an event line: none means no cap was set at any tick
opened=$(gate_event churn)
conn_d=$(( $(cls L3 "['rejected_by']['connections']") - conn_before ))
head_d=$(( $(cls L3 "['rejected_by']['headroom']") - head_before ))
ok $([ "$opened" = 0 ] && [ "$conn_d" = 0 ] && [ "$head_d" -ge 100 ] && echo 0 || echo 1) \
	"default (churn): L3 refused at 200/s ($head_d answered 429) is never capped ($opened gate openings, $conn_d SYNs refused)"
flood "$TMP/churn" 4 4000
capped_churn() { l3_capped && [ "$(gate_event churn)" -ge 1 ]; }
wait_for 3 "L3's connections capped under churn, and the event that says why" capped_churn
ok $? "default (churn): L3 refused at 4000/s is capped, an event says why ($(grep '"machine":"connection_cap"' "$SLUICED_LOG" | head -1)) (cap $(cls L3 "['connection_cap']"), SYNs refused $(cls L3 "['rejected_by']['connections']"))" \
	"$($CTL status)"
wait $L3PID $L0PID
l0ok=$(lg "$TMP/churn.l0" L0 ok); l0sent=$(lg "$TMP/churn.l0" L0 sent); l3err=$(lg "$TMP/churn.l3" L3 errors)
ok $([ "$l0sent" -ge 20 ] && [ "$l0ok" = "$l0sent" ] && [ "$l3err" = 0 ] && echo 0 || echo 1) \
	"default (churn): L0's requests all succeed meanwhile ($l0ok of $l0sent), L3's refusals are clean ($l3err errors)" \
	"$(cat "$TMP/churn.l0")" "$(cat "$TMP/churn.l3")"
lifted_gated() { lifted && [ "$(gate_event gated)" -ge 1 ]; }
wait_for 5 "the cap lifted, no connection open, the gate's closing reported" lifted_gated
ok $? "default (churn): the cap is lifted within ${WAITED_MS} ms of the flood's end, every count back to 0" \
	"$($CTL status --json)"
ok $(kill -0 "$SLUICED_PID" && echo 0 || echo 1) "sluiced is still running"
finish
