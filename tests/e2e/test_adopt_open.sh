#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Connections already open when sluiced attaches are shed like new ones. An operator reaches
# for sluice while a service drowns under keep-alive clients: those clients opened their
# connections before, and never open new ones while the old ones serve. Their next request
# is taken on (the server's stack holds the connection established and expects exactly that
# byte) and decided: counted, measured, and refused by a switch with a 429 on the connection
# it came on; nothing is broken by the attach itself, and every count is back to 0 after.
CLIENT_ADDRS="198.18.0.10"
TAG=adopt
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    limit: { fixed: 64 }
    default_class: L3
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 16 --service-ms 30
# Four keep-alive connections, all open within the first bursts and then reused (up to 15 s,
# stopped once the checks are done; SIGINT makes it drain and report): 100
# requests/s of 30 ms need 3 at a time, and the client never opens a fifth, so no connection
# sluiced could see the handshake of is made while they serve.
start_bg "$TMP/lg.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive \
	--rate 100 --duration 15 --max-conns 4 --timeout-ms 3000 --quiet --class L3:1
LGPID=$LAST_PID
conns() { in_srv ss -Htn state established "( sport = :8080 )" | awk '{print $3, $4}' | sort; }
conns_open() { [ "$(conns | wc -l)" -ge 4 ]; }
wait_for 3 "the client's four connections open" conns_open
before=$(conns)

start_sluiced "$CFG" || { ok 1 "sluiced starts"; kill $LGPID 2>/dev/null; finish; exit 1; }
CTL="$BUILD/sluicectl --pin-dir $PIN --state-dir $TMP/state --config $CFG"
status() { $CTL status --json > "$TMP/status.json"; }
l3() { json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='L3'][0]$1"; }
decided() { status; [ "$(l3 "['arrivals']")" -ge 20 ] && [ "$(l3 "['completed']")" -ge 20 ]; }
wait_for 3 "requests on the open connections decided" decided
rc=$?
# the very connections that were open before the attach, and no other, carried them
[ "$(conns)" = "$before" ] || rc=1
ok $rc "requests on the $(echo "$before" | wc -l) connections open before the attach (and no other) are decided: $(l3 "['arrivals']") arrivals, $(l3 "['completed']") completed, $(json_get "$TMP/status.json" "d['flows']") flows, $(l3 "['open_connections']") open" \
	"$($CTL status)" "before: $before" "now: $(conns)"

# A switch shedding all of L3: the next request on an open connection gets its 429.
$CTL switch set web L3 --shed 100 --reason adopt-test --ttl 1m >/dev/null 2>&1
refused() { status; [ "$(l3 "['rejected_by']['switch']")" -ge 1 ]; }
wait_for 3 "an L3 request refused by the switch" refused
ok $? "a switch refuses requests on those connections: $(l3 "['rejected_by']['switch']") refused" "$($CTL status)"
$CTL switch clear web L3 --reason adopt-test >/dev/null 2>&1
served_again() { status; [ "$(l3 "['completed']")" -ge "$1" ]; }
done_before=$(l3 "['completed']")
wait_for 3 "requests served again once the switch is cleared" served_again $((done_before + 20))

kill -INT $LGPID 2>/dev/null
wait $LGPID
h429=$(json_get "$TMP/lg.json" "d['classes']['L3']['http_429']")
errs=$(json_get "$TMP/lg.json" "d['classes']['L3']['errors']")
okn=$(json_get "$TMP/lg.json" "d['classes']['L3']['ok']")
ok $([ "$h429" -ge 1 ] && [ "$errs" = 0 ] && [ "$okn" -ge 100 ] && echo 0 || echo 1) \
	"the client saw the refusals as 429s and no error: $okn ok, $h429 answered 429, $errs errors" \
	"$(cat "$TMP/lg.json")"

drained() { status; [ "$(json_get "$TMP/status.json" "d['services'][0]['in_flight']")" = 0 ] &&
	[ "$(l3 "['open_connections']")" = 0 ]; }
wait_for 5 "in-flight and open connections back to 0" drained
ok $? "after the client is done, in-flight and the open connections are back to 0" "$($CTL status --json)"
finish
