#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# What real NICs and neighbours on the hook do to sluice, end to end:
#  - headers outside the linear part: a tap whose frames arrive as page fragments (linear part
#    = the Ethernet header only, GRO off) -- TC pulls the headers in, so requests are still
#    decided: one admitted (200), one refused (sluice's 429);
#  - another clsact filter on the same hooks, before and after sluice's, attached before and
#    after sluiced: sluice hands what it lets through on (the later filter sees the traffic),
#    and detaching sluice leaves the other filters in place;
#  - a jumbo MTU (9000) veth: `auto` gets native XDP (the program takes multi-buffer frames),
#    and a transfer in 9000-byte frames goes through it intact;
#  - VLAN tags stripped on receive (a VLAN-filtering bridge on each end of a veth carries VLAN
#    100 tagged; veth moves the tag as skb metadata, so XDP sees untagged frames): the RST
#    for a refused SYN still reaches the client's VLAN (answered from TC, which has the tag);
#  - a device whose driver has no native XDP (a bridge): `auto` falls back to generic XDP loudly (a
#    warning in the log, an alert event, sluice_xdp_mode, `sluicectl status`).
TAG=nic
source "$(dirname "$0")/lib.sh"
e2e_setup

TAP=tp$$
TAP_SRV=198.18.2.1
TAP_CLI=198.18.2.2
CTL="$BUILD/sluicectl --pin-dir $PIN --state-dir $TMP/state"
COUNT_OBJ=$BUILD/tests/tc_count.bpf.o

write_cfg() { # write_cfg FILE INTERFACE [XDP_MODE]
	cat > "$1" <<Y
interface: $2
xdp_mode: ${3:-auto}
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    limit: { fixed: 8 }
    headroom: { L0: 100, L1: 90, L2: 75, L3: 50 }
    headroom_mode: fixed
    default_class: L3
    classify:
      - { header: X-Priority, class: from-header }
    trust_from: [198.18.0.0/15]
  - name: bulk
    port: 7000
    protocol: tcp
    reject: rst
    default_class: L3
    limit: { fixed: 8 }
Y
}
stop_sluiced() {
	kill -TERM "$SLUICED_PID" 2>/dev/null
	wait "$SLUICED_PID" 2>/dev/null
	$IN_SRV $CTL detach >/dev/null 2>&1
}
status() { $IN_SRV $CTL status --json --no-rates > "$TMP/status.json"; }
cls() { json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='$1'][0]['$2']"; }
metrics() { # the daemon's /metrics (its port is in the log)
	local port
	port=$(grep -o 'metrics on 127.0.0.1:0 (port [0-9]*' "$SLUICED_LOG" | grep -o '[0-9]*$')
	$IN_SRV curl -s "http://127.0.0.1:$port/metrics"
}
# count DEV DIR PREF INDEX: counter INDEX of the tc_count filter at preference PREF.
count() {
	local id map
	id=$(in_srv tc filter show dev "$1" "$2" pref "$3" | grep -o ' id [0-9]*' | head -1 | grep -o '[0-9]*')
	[ -n "$id" ] || { echo -1; return; }
	map=$(bpftool prog show id "$id" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['map_ids'][0])")
	bpftool map lookup id "$map" key $4 0 0 0 --json |
		python3 -c "import json,sys; d=json.load(sys.stdin); print(d['formatted']['value'] if 'formatted' in d else int.from_bytes(bytes(int(x,16) for x in d['value']),'little'))"
}
# xdp_mode_of IF: how status --json --no-rates says XDP runs on IF.
xdp_mode_of() { json_get "$TMP/status.json" "[x['mode'] for x in d['xdp'] if x['interface']=='$1'][0]"; }
prefs() { in_srv tc filter show dev "$1" "$2" | grep -o 'pref [0-9]*' | sort -u | tr '\n' ' '; }

# --- headers in page fragments, and neighbours on the hooks (a tap device) ----------------
start_bg "$TMP/tap.log" $IN_SRV python3 tests/e2e/tapclient.py "$TAP" $TAP_CLI $TAP_SRV 8080 \
	"$TMP/go" "$TMP/answers.json" \
	'GET /a HTTP/1.1\nHost: t\nX-Priority: L0\n\n' 'GET /b HTTP/1.1\nHost: t\n\n'
tap_ready() { grep -q ready "$TMP/tap.log"; }
wait_for 5 "the tap device" tap_ready || { ok 1 "tap device created" "$(cat "$TMP/tap.log")"; finish; exit 1; }
in_srv ip addr add $TAP_SRV/24 dev "$TAP"
in_srv ip link set "$TAP" up
in_srv ethtool -K "$TAP" gro off >/dev/null
in_srv ip neigh replace $TAP_CLI lladdr 02:00:00:00:0e:12 dev "$TAP" nud permanent
# Two counting filters there before sluice: one in front of it (pref 1), one behind (pref 160).
in_srv tc qdisc add dev "$TAP" clsact
in_srv tc filter add dev "$TAP" ingress pref 1 bpf da obj "$COUNT_OBJ" sec tc
in_srv tc filter add dev "$TAP" ingress pref 160 bpf da obj "$COUNT_OBJ" sec tc
start_bg "$TMP/web.log" $IN_SRV "$BUILD/tools/testserver" --listen $TAP_SRV:8080 --mode http \
	--workers 4 --service-ms 1
write_cfg "$TMP/tap.yaml" "$TAP" native
start_sluiced "$TMP/tap.yaml" || { ok 1 "sluiced starts on the tap"; finish; exit 1; }
# One more behind sluice's egress filter, added after sluiced attached.
in_srv tc filter add dev "$TAP" egress pref 160 bpf da obj "$COUNT_OBJ" sec tc
p_in=$(prefs "$TAP" ingress); p_eg=$(prefs "$TAP" egress)
ok $([ "$p_in" = "pref 1 pref 160 pref 81 " ] && [ "$p_eg" = "pref 160 pref 81 " ] && echo 0 || echo 1) \
	"sluice attaches beside the other filters without touching them (ingress: $p_in; egress: $p_eg)"
$IN_SRV $CTL --config "$TMP/tap.yaml" switch set web L3 --shed 100 --reason "e2e test" --ttl 1m >/dev/null
shed_l3() { status; [ "$(json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='L3'][0]['switch_shed']")" = 1.0 ]; }
wait_for 3 "the L3 switch in the verdict map" shed_l3
# Handshakes through sluice's XDP (it records them); then XDP goes from the tap, because tun
# linearizes every frame for an XDP program, and the requests arrive in page fragments.
touch "$TMP/go"
tap_open() { grep -q open "$TMP/tap.log"; }
wait_for 10 "the tap client's handshakes" tap_open
bpftool link detach pinned "$PIN/link_xdp_$(in_srv ip -o link show "$TAP" | cut -d: -f1)"
touch "$TMP/go.2"
wait_for 10 "the tap client's answers" test -f "$TMP/answers.json"
answers=$(json_get "$TMP/answers.json" "' | '.join(d['answers'])")
short=$(count "$TAP" ingress 1 1)
ok $([ "$short" -ge 2 ] && echo 0 || echo 1) \
	"the requests reached TC with the headers outside the linear part ($short such packets)"
status
ok $([[ "$answers" == "HTTP/1.1 200 "*" | HTTP/1.1 429 "* ]] && [ "$(cls L0 arrivals)" = 1 ] &&
	[ "$(cls L3 arrivals)" = 1 ] && [ "$(cls L3 admitted)" = 0 ] && echo 0 || echo 1) \
	"requests in page fragments are decided: L0 admitted, L3 refused by sluice ($answers)" \
	"L0 arrivals $(cls L0 arrivals), L3 arrivals $(cls L3 arrivals) admitted $(cls L3 admitted)" \
	"$(cat "$TMP/tap.log")"
before=$(count "$TAP" ingress 1 0); after=$(count "$TAP" ingress 160 0); after_eg=$(count "$TAP" egress 160 0)
# Each connection sent SYN, ACK, request and RST: 8 frames, all seen by the filter behind.
ok $([ "$after" -ge 8 ] && [ "$after" -ge "$before" ] && [ "$after_eg" -ge 2 ] && echo 0 || echo 1) \
	"the filters behind sluice's see the traffic: ingress $after (in front: $before), egress $after_eg"
stop_sluiced
p_in=$(prefs "$TAP" ingress); p_eg=$(prefs "$TAP" egress)
ok $([ "$p_in" = "pref 1 pref 160 " ] && [ "$p_eg" = "pref 160 " ] && echo 0 || echo 1) \
	"detaching sluice leaves the other filters (ingress: $p_in; egress: $p_eg)"

# --- jumbo MTU: native XDP, 9000-byte frames through it -----------------------------------
# The client veth's own pass-through XDP must take multi-buffer frames too (veth refuses a
# program that does not beside a peer MTU above a page).
in_cli ip link set dev c0 xdpdrv off
in_cli ip link set dev c0 xdpdrv obj "$BUILD/tests/xdp_pass.bpf.o" sec xdp.frags
in_srv ip link set dev s0 mtu 9000
in_cli ip link set dev c0 mtu 9000
write_cfg "$TMP/jumbo.yaml" s0 auto
start_sluiced "$TMP/jumbo.yaml" || { ok 1 "sluiced starts on s0"; finish; exit 1; }
status
mode=$(xdp_mode_of s0)
link=$(in_srv ip -d link show s0 | grep -o 'xdpgeneric\|prog/xdp ' | head -1)
ok $([ "$mode" = native ] && [ "$link" = "prog/xdp " ] && grep -q "xdp native" "$SLUICED_LOG" &&
	! grep -q GENERIC "$SLUICED_LOG" && echo 0 || echo 1) \
	"auto mode on a 9000-MTU veth attaches native XDP (status: $mode; ip link: $link)" "$(cat "$SLUICED_LOG")"
# A SYN of bulk's L3, shed by a switch, must be refused by sluice (its RST count moves: nothing
# listens on 7000 yet, so the kernel would refuse it as well) without sluiced having chosen TC
# to answer.
bulk_shed_is() { status; [ "$(json_get "$TMP/status.json" "d['services'][1]['classes'][3]['switch_shed'] == $1")" = True ]; }
$IN_SRV $CTL --config "$TMP/jumbo.yaml" switch set bulk L3 --shed 100 --reason "e2e test" --ttl 1m >/dev/null
wait_for 3 "the bulk L3 switch in the verdict map" bulk_shed_is 1
status; rst0=$(json_get "$TMP/status.json" "d['packets']['rst_sent']")
syn_end=$(in_cli python3 -c "
import socket
try:
    socket.create_connection(('$SRV_IP', 7000), timeout=3).close(); print('connected')
except ConnectionRefusedError: print('refused')
except OSError as e: print(type(e).__name__)")
status; rst1=$(json_get "$TMP/status.json" "d['packets']['rst_sent']")
$IN_SRV $CTL --config "$TMP/jumbo.yaml" switch clear bulk L3 --reason "e2e test" >/dev/null
wait_for 3 "the bulk L3 switch cleared" bulk_shed_is 0
ok $([ "$syn_end" = refused ] && [ $((rst1 - rst0)) -ge 1 ] && ! grep -q "answered from TC" "$SLUICED_LOG" &&
	echo 0 || echo 1) \
	"with nothing on top of s0, XDP itself answers a refused SYN ($syn_end; rst_sent $rst0 -> $rst1)"
# A bulk transfer from the client to a tcp service, 1 MiB in frames up to 9000 bytes.
start_bg "$TMP/sink.log" $IN_SRV python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$SRV_IP', 7000)); s.listen(1); print('listening', flush=True)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    n += len(b)
c.sendall(str(n).encode()); c.close()"
sink_up() { grep -q listening "$TMP/sink.log"; }
wait_for 5 "the sink to listen" sink_up
json_rx() { python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['rx']['$1'])"; }
malformed() { metrics | awk '$1 == "sluice_packets_malformed_total" { print $2 }'; }
mal0=$(malformed)
rxp0=$(in_srv ip -s -j link show s0 | json_rx packets); rxb0=$(in_srv ip -s -j link show s0 | json_rx bytes)
got=$(in_cli timeout 10 python3 -c "
import socket
c = socket.create_connection(('$SRV_IP', 7000), timeout=5)
c.sendall(b'x' * 1048576); c.shutdown(socket.SHUT_WR)
print(c.recv(64).decode())")
rxp=$(($(in_srv ip -s -j link show s0 | json_rx packets) - rxp0))
rxb=$(($(in_srv ip -s -j link show s0 | json_rx bytes) - rxb0))
avg=$((rxb / (rxp > 0 ? rxp : 1)))
mal1=$(malformed)
status
# Multi-buffer frames are longer than their first buffer: their IP length is checked against
# the whole frame, so none is taken for a truncated one.
ok $([ -n "$mal0" ] && [ "$mal0" = "$mal1" ] && echo 0 || echo 1) \
	"no jumbo frame counts as malformed (sluice_packets_malformed_total $mal0 -> $mal1)"
ok $([ "$got" = 1048576 ] && [ "$avg" -gt 4096 ] &&
	[ "$(json_get "$TMP/status.json" "sum(c['arrivals'] for c in d['services'][1]['classes'])")" -ge 1 ] && echo 0 || echo 1) \
	"1 MiB crosses native XDP in jumbo frames: the sink got $got bytes, $rxp packets of $avg bytes on average"
metrics > "$TMP/metrics.txt"
ok $(grep -qx 'sluice_xdp_mode{interface="s0",mode="native"} 1' "$TMP/metrics.txt" &&
	grep -qx 'sluice_xdp_mode{interface="s0",mode="generic"} 0' "$TMP/metrics.txt" && echo 0 || echo 1) \
	"sluice_xdp_mode says native" "$(grep xdp_mode "$TMP/metrics.txt")"
stop_sluiced

# --- a driver without native XDP (a bridge): auto falls back to generic, loudly -----------
in_srv ip link add bx$$ type bridge
in_srv ip link set bx$$ up
write_cfg "$TMP/bridge.yaml" bx$$ auto
start_sluiced "$TMP/bridge.yaml" || { ok 1 "sluiced starts on a bridge"; finish; exit 1; }
status
ok $(grep -q '^sluiced: warning: FELL BACK TO GENERIC XDP on bx'$$ "$SLUICED_LOG" && echo 0 || echo 1) \
	"the fallback to generic XDP is a warning in the log" "$(cat "$SLUICED_LOG")"
ok $(grep -q '"to":"generic"' "$SLUICED_LOG" && echo 0 || echo 1) "... and an event" "$(cat "$SLUICED_LOG")"
table=$($IN_SRV $CTL status | grep '^xdp:')
ok $([ "$(xdp_mode_of bx$$)" = generic ] &&
	[[ "$table" == "xdp: GENERIC on bx$$ "* ]] && echo 0 || echo 1) \
	"sluicectl status shows it ($table)"
metrics > "$TMP/metrics.txt"
ok $(grep -qx 'sluice_xdp_mode{interface="bx'$$'",mode="generic"} 1' "$TMP/metrics.txt" &&
	grep -qx 'sluice_xdp_mode{interface="bx'$$'",mode="native"} 0' "$TMP/metrics.txt" && echo 0 || echo 1) \
	"sluice_xdp_mode says generic" "$(grep xdp_mode "$TMP/metrics.txt")"
stop_sluiced

# --- VLAN tags stripped on receive: a refused SYN's RST keeps its tag ----------------------
ip link add vs2-$$ netns "$NS_S" type veth peer name vc2-$$ netns "$NS_C" || exit 1
in_srv ip link set vs2-$$ name s2
in_cli ip link set vc2-$$ name c2
in_srv ethtool -K s2 tx off >/dev/null 2>&1
in_cli ethtool -K c2 tx off >/dev/null 2>&1
in_cli ip link set dev c2 xdpdrv obj "$BUILD/tests/xdp_pass.bpf.o" sec xdp
# This kernel has neither 802.1Q devices nor VLAN-filtering bridges: VLAN 100 is made at TC
# (tests/e2e/tc_vlan.bpf.c), which leaves the skbs as a VLAN device with tx VLAN offload does
# (the tag in metadata, not in the frame XDP sees). The client's port carries only VLAN 100
# (untagged frames are dropped); the server's VLAN ends at TC behind sluice's filters, and the
# server's address is on a bridge over s2, so s2 has an upper device.
VLAN_OBJ=$BUILD/tests/tc_vlan.bpf.o
vlan_at_tc() { # vlan_at_tc NS-PREFIX DEV
	$1 tc qdisc add dev "$2" clsact
	$1 tc filter add dev "$2" egress pref 160 bpf da obj "$VLAN_OBJ" sec classifier/vlan_out
	$1 tc filter add dev "$2" ingress pref 160 bpf da obj "$VLAN_OBJ" sec classifier/vlan_in
}
vlan_at_tc "$IN_CLI" c2
vlan_at_tc "$IN_SRV" s2
in_cli ip addr add 198.18.3.2/24 dev c2
in_srv ip link add brs$$ type bridge
in_srv ip link set s2 master brs$$
in_srv ip addr add 198.18.3.1/24 dev brs$$
in_srv ip link set brs$$ up
in_srv ip link set s2 up
in_cli ip link set c2 up
start_bg "$TMP/bulk.log" $IN_SRV "$BUILD/tools/testserver" --listen 198.18.3.1:7000 --mode tcp \
	--workers 2 --service-ms 1
write_cfg "$TMP/vlan.yaml" s2 native
start_sluiced "$TMP/vlan.yaml" || { ok 1 "sluiced starts on s2"; finish; exit 1; }
connect() { # connect: how a connection to the tcp service over VLAN 100 ends, and in how many ms
	in_cli python3 -c "
import socket, time
t = time.monotonic()
try:
    socket.create_connection(('198.18.3.1', 7000), timeout=3).close(); r = 'connected'
except ConnectionRefusedError: r = 'refused'
except OSError as e: r = type(e).__name__
print(r, int((time.monotonic() - t) * 1000))"
}
wait_for 5 "a connection over VLAN 100" sh -c "[ \"\$($IN_CLI python3 -c \"import socket; socket.create_connection(('198.18.3.1', 7000), timeout=1).close(); print('ok')\")\" = ok ]"
first=$(connect)
$IN_SRV $CTL --config "$TMP/vlan.yaml" switch set bulk L3 --shed 100 --reason "e2e test" --ttl 1m >/dev/null
shed_bulk() { status; [ "$(json_get "$TMP/status.json" "d['services'][1]['classes'][3]['switch_shed']")" = 1.0 ]; }
wait_for 3 "the bulk L3 switch in the verdict map" shed_bulk
res=$(connect)
status
rst=$(json_get "$TMP/status.json" "d['packets']['rst_sent']")
ok $([ "${first% *}" = connected ] && [ "${res% *}" = refused ] && [ "${res#* }" -lt 1000 ] &&
	[ "$rst" -ge 1 ] && grep -q "s2 strips VLAN tags.*answered from TC" "$SLUICED_LOG" && echo 0 || echo 1) \
	"a refused SYN over VLAN 100 (tag stripped before XDP) gets its RST on the VLAN: $res ms (admitted before: $first; rst_sent $rst)" \
	"$(grep -i vlan "$SLUICED_LOG")"
stop_sluiced

finish
