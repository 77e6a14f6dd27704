#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Services by local address end to end, on a server with two addresses (198.18.0.1 and .3) and
# a tcp service at each on port 7000: one client address and source port connected to both
# at once holds two flows, one per service, and each ends with its own FIN; the listen queue
# is read per address (the listener at .3 never accepts, the one at .1 does: only .3's
# service sees a queue).
TAG=addrs
source "$(dirname "$0")/lib.sh"
e2e_setup
SRV2=198.18.0.3
in_srv ip addr add $SRV2/24 dev s0
CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - { name: one, port: "$SRV_IP:7000", protocol: tcp, limit: { fixed: 100 } }
  - { name: three, port: "$SRV2:7000", protocol: tcp, limit: { fixed: 100 } }
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 8 --service-ms 1 --quiet
# The listener at .3 never accepts: what connects waits in its queue (bounded life).
start_bg "$TMP/stuck.log" $IN_SRV python3 -c '
import socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], 7000)); s.listen(16); time.sleep(120)' $SRV2
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
wait_for 5 "both listeners" sh -c "$IN_SRV ss -Hltn '( sport = :7000 )' | grep -c LISTEN | grep -qx 2"

# The client: one source port to both addresses (SO_REUSEADDR lets two sockets share it
# towards different peers), three more connections to .3; each step waits for a file.
start_bg "$TMP/client.log" $IN_CLI python3 -c '
import os, socket, sys, time
d, a, b = sys.argv[1:4]
def wait(f):
    t = time.time() + 60
    while not os.path.exists(os.path.join(d, f)) and time.time() < t:
        time.sleep(0.02)
def conn(dst, port=0):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("198.18.0.2", port)); s.connect((dst, 7000)); return s
x = conn(a); p = x.getsockname()[1]; y = conn(b, p)
more = [conn(b) for _ in range(3)]
print(p, y.getsockname()[1], flush=True)
wait("close-one"); x.close()
wait("close-all"); y.close(); [m.close() for m in more]
wait("end")' "$TMP" $SRV_IP $SRV2
wait_for 5 "the client's connections" sh -c "[ -s '$TMP/client.log' ]"
read -r p1 p2 < "$TMP/client.log"

status() { "$BUILD/sluicectl" --pin-dir "$PIN" status --json --no-rates > "$TMP/status.json"; }
# conns NAME: open connections of a service, as sluice counts them
conns() { json_get "$TMP/status.json" "[s for s in d['services'] if s['name'] == '$1'][0]['connections']"; }
counts() { status; echo "$(conns one) $(conns three) $(json_get "$TMP/status.json" "d['flows']")"; }
counts_are() { [ "$(counts)" = "$1" ]; }
port() { grep -o 'metrics on [^ ]* (port [0-9]*' "$SLUICED_LOG" | grep -o '[0-9]*$'; }
queue() { $IN_SRV curl -s "http://127.0.0.1:$(port)/metrics" |
	awk -v s="service=\"$1\"" '$1 ~ /^sluice_accept_queue_length\{/ && index($1, s) { print $2 }'; }
queues() { echo "$(queue one) $(queue three)"; }
queues_are() { [ "$(queues)" = "$1" ]; }

wait_for 5 "one connection at .1 and four at .3 counted, five flows" counts_are "1 4 5"
ok $? "198.18.0.2:$p1 to $SRV_IP:7000 and to $SRV2:7000 at once (source port $p2): one connection counted by each service, five flows in all (one three flows: $(counts))" \
	"$(cat "$TMP/status.json")" "$(in_cli ss -tn)"
wait_for 5 "the listen queue of .3's service at 4, of .1's at 0" queues_are "0 4"
ok $? "listen queue per address: one 0, three 4 (the listener at $SRV2 never accepts; got $(queues))" \
	"$($IN_SRV curl -s "http://127.0.0.1:$(port)/metrics" | grep accept_queue)" "$(in_srv ss -ltn)"

touch "$TMP/close-one"
wait_for 5 "the connection to .1 ended, the one to .3 still counted" counts_are "0 4 4"
ok $? "the FIN of the connection to $SRV_IP ends only its own flow (one three flows: $(counts))" \
	"$(cat "$TMP/status.json")"
touch "$TMP/close-all"
wait_for 5 "every connection ended" counts_are "0 0 0"
ok $? "the connections to $SRV2 end with their FINs: nothing counted, no flow left ($(counts))" \
	"$(cat "$TMP/status.json")"
touch "$TMP/end"
finish
