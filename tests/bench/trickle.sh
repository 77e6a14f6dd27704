#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# An experiment, not a test (tests/e2e/test_read_wait.sh checks the timing itself): a client
# that trickles its requests (the first bytes early, the rest 200 ms later) against the
# day-one adaptive limit, beside L0 and L1 clients of a fast service (8 workers x 20 ms), in
# two network namespaces of its own. Prints the limit before and after (its lowest), each
# class's p50 and refusals. BUILD=DIR runs another build (a worktree's) for a side-by-side.
# Usage: tests/bench/trickle.sh   (root; about 15 s)
TAG=trickle
source "$(dirname "$0")/../e2e/lib.sh"
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
    limit: { min: 4, max: 64 }
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
      - { source: 198.18.0.11/32, class: L1 }
Y
in_cli ip addr add 198.18.0.10/24 dev c0
in_cli ip addr add 198.18.0.11/24 dev c0
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 8 --service-ms 20 --quiet
wait_for 5 "the testserver to listen" sh -c "$IN_SRV ss -Hltn '( sport = :8080 )' | grep -q LISTEN"
SLUICED_ARGS="-v ${SLUICED_ARGS:-}" start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
lg() { json_get "$1" "d['classes']['$2']['$3']"; }
load() { # load OUT CLASS SRC RATE SECONDS
	start_bg "$1" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode http-keepalive \
		--arrivals uniform --rate "$4" --duration "$5" --timeout-ms 3000 --quiet \
		--class "$2:1:src=$3"
}
# The trickler: N connections, each sending a request's first bytes, the rest GAP s later,
# then reading the answer; bounded in time.
TRICKLE=$TMP/trickle.py
cat > "$TRICKLE" <<'PY'
import socket, sys, threading, time
host, n, gap, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
end = time.time() + dur
done = [0]
def client():
    s = None
    while time.time() < end:
        try:
            if s is None:
                s = socket.create_connection((host, 8080), timeout=3)
            s.sendall(b"GET /t HTTP/1.1\r\nHo")
            time.sleep(gap)
            s.sendall(b"st: t\r\n\r\n")
            buf = b""
            while b"\r\n\r\n" not in buf:
                c = s.recv(4096)
                if not c:
                    raise OSError("closed")
                buf += c
            head, _, body = buf.partition(b"\r\n\r\n")
            ln = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    ln = int(line.split(b":")[1])
            while len(body) < ln:
                c = s.recv(4096)
                if not c:
                    raise OSError("closed")
                body += c
            if b" 200 " in head.split(b"\r\n")[0]:
                done[0] += 1
        except OSError:
            if s:
                s.close()
            s = None
            time.sleep(0.05)
ts = [threading.Thread(target=client) for _ in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(done[0])
PY

# calm: L0 and L1 teach the baseline
load "$TMP/calm0.json" L0 198.18.0.10 100 3; P0=$LAST_PID
load "$TMP/calm1.json" L1 198.18.0.11 100 3; P1=$LAST_PID
wait $P0 $P1
status; echo "# after the calm: limit $(svc limit), p50 L0 $(cls L0 p50_us) us"

# the attack: 50 trickling L3 connections (about 220 requests/s of 200 ms + 20 ms) for 8 s
start_bg "$TMP/trickle.out" $IN_CLI python3 "$TRICKLE" $SRV_IP 50 0.2 8; TP=$LAST_PID
load "$TMP/l0.json" L0 198.18.0.10 100 8; P0=$LAST_PID
load "$TMP/l1.json" L1 198.18.0.11 100 8; P1=$LAST_PID
low=$(lowest_limit 15 $TP $P0 $P1)
wait $TP $P0 $P1
status
echo "# after the attack: limit $(svc limit) (lowest $low); L3 p50 $(cls L3 p50_us) us, L0 p50 $(cls L0 p50_us) us; trickled requests answered $(cat "$TMP/trickle.out")"
echo "# L1 rejected_by $(cls L1 rejected_by); L3 rejected_by $(cls L3 rejected_by)"
l0ok=$(lg "$TMP/l0.json" L0 ok); l0sent=$(lg "$TMP/l0.json" L0 sent)
l1ok=$(lg "$TMP/l1.json" L1 ok); l1sent=$(lg "$TMP/l1.json" L1 sent)
echo "# L0 $l0ok of $l0sent, L1 $l1ok of $l1sent"
echo "# the limit's moves: $(grep '"aimd"' "$SLUICED_LOG" | grep -o '"why":"[a-z_]*"\|"limit_to":[0-9]*' | paste -d' ' - - | sed 's/"why"://; s/"limit_to"://' | tr '\n' ',')"
