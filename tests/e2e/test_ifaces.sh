#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Several interfaces: sluiced attaches to every interface a pattern selects, attaches one that
# appears later (hot-plug) without a restart, shows them in status and /metrics, and counts a
# unit exactly once when its packets arrive on one interface and leave by another
# (asymmetric routing over two veth pairs); detach removes the programs from all of them.
# A bridge and its port both matching: the bridge only (a packet meets the programs once).
# Two services on one port at two server addresses are counted apart.
TAG=ifc
source "$(dirname "$0")/lib.sh"
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interfaces: ["s*"]
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    limit: { fixed: 64 }
  - name: echo
    port: 9090
    protocol: tcp
    limit: { fixed: 64 }
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 8 --service-ms 2
start_bg "$TMP/echo.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:9090 --mode tcp \
	--workers 8 --service-ms 2
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
CTL="$BUILD/sluicectl --pin-dir $PIN --state-dir $TMP/state --config $CFG"
status() { $IN_SRV $CTL status --json --no-rates > "$TMP/status.json"; }
ifaces() { status; json_get "$TMP/status.json" "','.join(d['interfaces'])"; }
svc() { json_get "$TMP/status.json" "[s for s in d['services'] if s['name']=='$1'][0]$2"; }
arrivals() { svc "$1" "['classes'][2]['arrivals']"; }
port() { grep -o 'metrics on [^ ]* (port [0-9]*' "$SLUICED_LOG" | grep -o '[0-9]*$'; }
metrics() { $IN_SRV curl -s "http://127.0.0.1:$(port)/metrics"; }

got=$(ifaces)
ok $([ "$got" = s0 ] && echo 0 || echo 1) "the pattern s* selects s0 at start (status: $got)"

# --- hot-plug: a second veth pair; its server end matches the pattern --------------------
ip link add vs1-$$ netns "$NS_S" type veth peer name vc1-$$ netns "$NS_C" || exit 1
in_srv ip link set vs1-$$ name s1
in_cli ip link set vc1-$$ name c1
in_srv ip addr add 198.18.1.1/24 dev s1
in_cli ip addr add 198.18.1.2/24 dev c1
in_srv ethtool -K s1 tx off >/dev/null 2>&1
in_cli ethtool -K c1 tx off >/dev/null 2>&1
in_cli ip link set dev c1 xdpdrv obj "$BUILD/tests/xdp_pass.bpf.o" sec xdp
in_srv ip link set s1 up
in_cli ip link set c1 up
both() { [ "$(ifaces)" = "s0,s1" ]; }
wait_for 5 "status to list s0 and s1" both
ok $? "the new interface s1 is attached without a restart (${WAITED_MS} ms)" "$(ifaces)" \
	"$(tail -n 5 "$SLUICED_LOG")"
host_view=$($CTL status --json --no-rates | python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["interfaces"]))')
ok $(echo "$host_view" | grep -Eqx '#[0-9]+,#[0-9]+' && echo 0 || echo 1) \
	"status outside sluiced's namespace lists ifindexes, not this namespace's names ($host_view)"
m=$(metrics)
ok $(echo "$m" | grep -q '^sluice_interface_attached{interface="s0"} 1' &&
	echo "$m" | grep -q '^sluice_interface_attached{interface="s1"} 1' && echo 0 || echo 1) \
	"/metrics shows both attached interfaces" "$(echo "$m" | grep interface_attached)"
# How XDP runs, for each interface: status (table and JSON) and sluice_xdp_mode.
xdp_json=$(json_get "$TMP/status.json" "','.join(x['interface'] + ':' + str(x['mode']) for x in d['xdp'])")
xdp_table=$($IN_SRV $CTL status | grep '^xdp:' | tr '\n' ';')
ok $([ "$xdp_json" = "s0:native,s1:native" ] &&
	[ "$xdp_table" = "xdp: native on s0;xdp: native on s1;" ] &&
	echo "$m" | grep -qx 'sluice_xdp_mode{interface="s0",mode="native"} 1' &&
	echo "$m" | grep -qx 'sluice_xdp_mode{interface="s1",mode="native"} 1' &&
	echo "$m" | grep -qx 'sluice_xdp_mode{interface="s1",mode="generic"} 0' && echo 0 || echo 1) \
	"the XDP mode of each interface: status $xdp_json, $xdp_table /metrics" \
	"$(echo "$m" | grep xdp_mode)"
host_xdp=$($CTL status --json --no-rates | python3 -c 'import json,sys; print(",".join(str(x["mode"]) for x in json.load(sys.stdin)["xdp"]))')
ok $([ "$host_xdp" = "None,None" ] && echo 0 || echo 1) \
	"outside sluiced's namespace the XDP modes are unknown (null), not another interface's ($host_xdp)"

# --- asymmetric routing: requests reach the server over s0, replies leave over s1 --------
# The server answers the client's address through s1; neither side drops packets that come
# in on the "wrong" interface (reverse-path filtering off).
for ns in "$IN_SRV" "$IN_CLI"; do
	$ns sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
	for d in s0 s1 c0 c1; do $ns sysctl -qw net.ipv4.conf.$d.rp_filter=0 2>/dev/null; done
done
in_srv ip route add $CLI_IP/32 dev s1
route=$(in_srv ip route get $CLI_IP)
ok $(echo "$route" | grep -q "dev s1" && echo 0 || echo 1) "the server's route to the client is s1" "$route"
tx0=$(in_srv ip -s -j link show s1 | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['tx']['packets'])")
N_REQ=200
in_cli "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-new --rate 200 \
	--max-requests $N_REQ --quiet > "$TMP/new.json"
in_cli "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive --rate 200 \
	--max-requests $N_REQ --max-conns 4 --quiet > "$TMP/ka.json"
in_cli "$BUILD/tools/loadgen" --target $SRV_IP:9090 --mode tcp --rate 200 \
	--max-requests $N_REQ --quiet > "$TMP/tcp.json"
tx1=$(in_srv ip -s -j link show s1 | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['tx']['packets'])")
lg_ok() { json_get "$1" "d['classes']['L2']['ok']"; }
ok_new=$(lg_ok "$TMP/new.json"); ok_ka=$(lg_ok "$TMP/ka.json"); ok_tcp=$(lg_ok "$TMP/tcp.json")
ok $([ "$ok_new" = $N_REQ ] && [ "$ok_ka" = $N_REQ ] && [ "$ok_tcp" = $N_REQ ] &&
	[ $((tx1 - tx0)) -ge $((3 * N_REQ)) ] && echo 0 || echo 1) \
	"every request answered, the answers over s1 ($((tx1 - tx0)) packets out of s1)" \
	"ok: new $ok_new keep-alive $ok_ka tcp $ok_tcp"
idle() { status; [ "$(svc web "['in_flight']")" = 0 ] && [ "$(svc echo "['in_flight']")" = 0 ]; }
wait_for 3 "in-flight of both services back to 0" idle
ok $? "in-flight of both services returns to exactly 0 after the asymmetric runs" \
	"web $(svc web "['in_flight']") echo $(svc echo "['in_flight']")"
status
web_arr=$(arrivals web); web_adm=$(svc web "['classes'][2]['admitted']")
web_done=$(svc web "['classes'][2]['completed']")
ok $([ "$web_arr" = $((2 * N_REQ)) ] && [ "$web_adm" = $((2 * N_REQ)) ] &&
	[ "$web_done" = $((2 * N_REQ)) ] && echo 0 || echo 1) \
	"each http request counted once: $web_arr arrivals, $web_adm admitted, $web_done completed of $((2 * N_REQ))"
echo_arr=$(arrivals echo); echo_done=$(svc echo "['classes'][2]['completed']")
ok $([ "$echo_arr" = $N_REQ ] && [ "$echo_done" = $N_REQ ] && echo 0 || echo 1) \
	"each tcp connection counted once: $echo_arr arrivals, $echo_done completed of $N_REQ"

# --- a bridge and its port both match: only the bridge is attached, a packet counted once --
# (This kernel has no bonding or 8021q; a bridge port has a master like a bond's port does.)
ip link add vs2-$$ netns "$NS_S" type veth peer name vc2-$$ netns "$NS_C" || exit 1
in_srv ip link set vs2-$$ name s2
in_cli ip link set vc2-$$ name c2
# s2 alone first (attached), then it becomes the bridge's port: its programs must come off.
with_s2() { [ "$(ifaces)" = "s0,s1,s2" ]; }
wait_for 5 "status to list s0, s1 and s2" with_s2
ok $? "a third interface s2 is attached" "$(ifaces)"
in_srv ip link add sbr type bridge
in_srv ip link set s2 master sbr
in_srv ip addr add 198.18.2.1/24 dev sbr
in_cli ip addr add 198.18.2.2/24 dev c2
in_srv ethtool -K s2 tx off >/dev/null 2>&1
in_srv ethtool -K sbr tx off >/dev/null 2>&1
in_cli ethtool -K c2 tx off >/dev/null 2>&1
in_cli ip link set dev c2 xdpdrv obj "$BUILD/tests/xdp_pass.bpf.o" sec xdp
for d in s2 sbr; do in_srv ip link set $d up; done
in_cli ip link set c2 up
with_bridge() { [ "$(ifaces)" = "s0,s1,sbr" ]; }
wait_for 5 "status to list s0, s1 and sbr (not its port s2)" with_bridge
ok $? "s2 made the port of a new bridge sbr (both match s*): sbr is attached, s2 detached" \
	"$(ifaces)" "$(in_srv ip -br link show s2)"
# A bridge has no native XDP: the one hot-plugged is warned about as the ones at start are.
br_mode=$(json_get "$TMP/status.json" "[x['mode'] for x in d['xdp'] if x['interface']=='sbr'][0]")
ok $([ "$br_mode" = generic ] && grep -q '^sluiced: warning: FELL BACK TO GENERIC XDP on sbr' "$SLUICED_LOG" &&
	grep -q '"to":"generic".*"sbr"\|"sbr".*"to":"generic"' "$SLUICED_LOG" && echo 0 || echo 1) \
	"the hot-plugged bridge sbr runs generic XDP: status says so ($br_mode), a warning and an event" \
	"$(grep -i 'generic' "$SLUICED_LOG")"
start_bg "$TMP/echo2.log" $IN_SRV "$BUILD/tools/testserver" --listen 198.18.2.1:9090 --mode tcp \
	--workers 8 --service-ms 2
wait_for 3 "198.18.2.1:9090 to listen" in_srv sh -c "ss -ltn | grep -q 198.18.2.1:9090"
status
e_arr0=$(arrivals echo); e_done0=$(svc echo "['classes'][2]['completed']")
e_re0=$(svc echo "['classes'][2]['retransmits']")
in_cli "$BUILD/tools/loadgen" --target 198.18.2.1:9090 --mode tcp --rate 200 \
	--max-requests 100 --quiet > "$TMP/br.json"
wait_for 3 "in-flight back to 0 after the bridge run" idle
status
e_arr=$(( $(arrivals echo) - e_arr0 )); e_done=$(( $(svc echo "['classes'][2]['completed']") - e_done0 ))
e_re=$(( $(svc echo "['classes'][2]['retransmits']") - e_re0 ))
ok $([ "$(lg_ok "$TMP/br.json")" = 100 ] && [ "$e_arr" = 100 ] && [ "$e_done" = 100 ] &&
	[ "$e_re" = 0 ] && echo 0 || echo 1) \
	"100 connections through the bridge: $e_arr arrivals, $e_done completed, $e_re SYNs seen twice, in-flight $(svc echo "['in_flight']")"

# --- two services on one port at two server addresses: kept apart -------------------------
in_srv ip addr add 198.18.0.3/24 dev s0
start_bg "$TMP/server3.log" $IN_SRV "$BUILD/tools/testserver" --listen 198.18.0.3:8080 --mode http \
	--workers 8 --service-ms 2
cat >> "$CFG" <<Y
  - name: web3
    port: "198.18.0.3:8080"
    protocol: http
    limit: { fixed: 64 }
Y
kill -HUP "$SLUICED_PID"
has_web3() { status; json_get "$TMP/status.json" "[s['name'] for s in d['services']]" | grep -q web3; }
wait_for 5 "the service web3 after the reload" has_web3
wait_for 3 "198.18.0.3:8080 to listen" in_cli curl -s -o /dev/null http://198.18.0.3:8080/
status; w_before=$(arrivals web); w3_before=$(arrivals web3)
ok $([ "$(svc web3 "['address']")" = 198.18.0.3 ] && $IN_SRV $CTL status | grep -q "^web3  http/198.18.0.3:8080 " &&
	echo 0 || echo 1) "status shows web3 at its address (198.18.0.3:8080)" "$($IN_SRV $CTL status | grep web3)"
in_cli "$BUILD/tools/loadgen" --target 198.18.0.3:8080 --mode http-new --rate 200 \
	--max-requests 50 --quiet > "$TMP/w3.json"
in_cli "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-new --rate 200 \
	--max-requests 30 --quiet > "$TMP/w1.json"
status; w_d=$(( $(arrivals web) - w_before )); w3_d=$(( $(arrivals web3) - w3_before ))
ok $([ "$w3_d" = 50 ] && [ "$w_d" = 30 ] && [ "$(lg_ok "$TMP/w3.json")" = 50 ] && echo 0 || echo 1) \
	"port 8080 at 198.18.0.3 is service web3 (50 of 50 requests), at $SRV_IP the port-only web (30 of 30)" \
	"web3 +$w3_d web +$w_d ok $(lg_ok "$TMP/w3.json") $(lg_ok "$TMP/w1.json")"

# --- detach takes the programs off every interface ---------------------------------------
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
$IN_SRV $CTL detach >/dev/null 2>&1
left=""
for d in s0 s1 sbr; do
	in_srv ip link show $d | grep -q "xdp" && left="$left $d:xdp"
	in_srv tc filter show dev $d ingress | grep -q sluice && left="$left $d:tc-in"
	in_srv tc filter show dev $d egress | grep -q sluice && left="$left $d:tc-out"
done
ok $([ -z "$left" ] && [ ! -d "$PIN" ] && echo 0 || echo 1) \
	"detach removes XDP and both TC programs from s0, s1 and sbr and the pins" "left:$left"
finish
