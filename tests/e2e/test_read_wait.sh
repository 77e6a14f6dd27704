#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The wait before the server reads (bpf/readwait.bpf.c), end to end, from /metrics:
#  1. sluiced loads the probe beside the data path: sluice_read_wait_probe 1, and per service
#     sluice_read_waits_total / sluice_read_wait_seconds_total;
#  2. an http server whose workers read their own requests (testserver --worker-reads, 4
#     workers x 20 ms) under a fixed limit well above them: 16 keep-alive clients make the
#     requests queue in the sockets, and the mean wait is tens of ms (which arms the read
#     gate, whose unread count is back to exactly 0 after the load); 2 clients (below the
#     workers) wait well under 2 ms; either way every request served is measured once
#     (the count within a few % of the responses);
#  3. the same server reading every request at once into its own queue (testserver's default
#     I/O thread): 16 clients still see a high latency, but no wait in the host: the probe
#     measures the socket, not the server's own queue;
#  4. a dual-stack (AF_INET6) listener of IPv4 clients, at a service by local address: the
#     probe finds the flows by their v4-mapped addresses, one wait per request;
#  5. a tcp service (testserver --mode tcp, 2 workers that each hold a connection): one wait
#     per turn, and the two connections left in the accept queue add their wait;
#  6. the probe is gone with its sluiced; `--no-read-wait` leaves it off: the gauge 0, no waits
#     on /metrics, the data path serving as before.
# The probe's cost (run_time_ns / run_cnt of its program, with kernel.bpf_stats_enabled on
# during step 2 and put back after) is printed, not checked.
TAG=rwait
source "$(dirname "$0")/lib.sh"
OLD_STATS=""
test_cleanup() { [ -n "$OLD_STATS" ] && sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"; }
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - { name: web, port: 8080, protocol: http, limit: { fixed: 64 }, default_class: L0 }
  - { name: web6, port: "$SRV_IP:8081", protocol: http, limit: { fixed: 64 }, default_class: L0 }
  - { name: db, port: 7000, protocol: tcp, limit: { fixed: 64 }, default_class: L0 }
Y
start_server() { # start_server [OPTION...]: the http testserver on 8080, 4 workers x 20 ms
	start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 \
		--mode http --workers 4 --service-ms 20 --quiet "$@"
	SERVER_PID=$LAST_PID
	wait_for 5 "the http testserver to listen" sh -c "$IN_SRV ss -Hltn '( sport = :8080 )' | grep -q LISTEN"
}
start_server --worker-reads
start_bg "$TMP/server-tcp.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 2 --service-ms 5 --quiet
# A dual-stack listener (AF_INET6, IPV6_V6ONLY off): IPv4 clients reach it v4-mapped. One
# connection at a time; bounded life.
start_bg "$TMP/server6.log" $IN_SRV python3 -c '
import socket, time
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 8081)); s.listen(16); s.settimeout(0.5)
end = time.time() + 120
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.settimeout(5); buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(4096)
                if not d:
                    raise EOFError
                buf += d
            buf = buf[buf.index(b"\r\n\r\n") + 4:]
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    except Exception:
        pass
    c.close()'
wait_for 5 "the three listeners" sh -c "$IN_SRV ss -Hltn | grep -cE ':(8080|8081|7000) ' | grep -qx 3"
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }

# The closed-loop client: N keep-alive connections, each sending its next request when the
# last is answered, until SECONDS have passed or it has had MAX answers; with GAP, each request
# in two parts GAP seconds apart (a trickling client). One JSON line.
cat > "$TMP/client.py" <<'PY'
import json, socket, sys, threading, time
ip, port, n, secs, cap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
gap = float(sys.argv[6]) if len(sys.argv) > 6 else 0
req = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
lock = threading.Lock()
tot = {"responses": 0, "errors": 0, "lat_s": 0.0}
end = time.monotonic() + secs
def client():
    ok = err = 0; lat = 0.0
    try:
        s = socket.create_connection((ip, port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while time.monotonic() < end and ok + err < cap:
            t0 = time.monotonic()
            if gap:
                s.sendall(req[:19])
                time.sleep(gap)
                s.sendall(req[19:])
            else:
                s.sendall(req)
            while True:
                i = buf.find(b"\r\n\r\n")
                if i >= 0:
                    head = buf[:i].decode()
                    clen = [int(l.split(":", 1)[1]) for l in head.split("\r\n")
                            if l.lower().startswith("content-length:")][0]
                    if len(buf) >= i + 4 + clen:
                        buf = buf[i + 4 + clen:]
                        break
                chunk = s.recv(4096)
                if not chunk:
                    raise EOFError("closed")
                buf += chunk
            lat += time.monotonic() - t0
            if head.split(" ")[1] == "200":
                ok += 1
            else:
                err += 1
        s.close()
    except Exception:
        err += 1
    with lock:
        tot["responses"] += ok; tot["errors"] += err; tot["lat_s"] += lat
th = [threading.Thread(target=client) for _ in range(n)]
[t.start() for t in th]
[t.join() for t in th]
done = tot["responses"] + tot["errors"]
print(json.dumps({"responses": tot["responses"], "errors": tot["errors"],
                  "mean_latency_ms": round(tot["lat_s"] * 1e3 / max(done, 1), 2)}))
PY

mport() { sed -n 's/.*metrics on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$SLUICED_LOG" | tail -1; }
scrape() { $IN_SRV curl -s --max-time 2 "http://127.0.0.1:$(mport)/metrics" > "$TMP/metrics.txt"; }
mval() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/metrics.txt"; }
waits() { mval "sluice_read_waits_total{service=\"$1\"}"; }
waitsum() { mval "sluice_read_wait_seconds_total{service=\"$1\"}"; }
hsum() { mval "sluice_request_duration_seconds_sum{service=\"$1\",class=\"L0\"}"; }
hcount() { mval "sluice_request_duration_seconds_count{service=\"$1\",class=\"L0\"}"; }
# close_to A B: A within max(2, 3 %) of B (B > 0)
close_to() { python3 -c "import sys; a, b = $1, $2; sys.exit(0 if b > 0 and abs(a - b) <= max(2, 0.03 * b) else 1)"; }
# lt / gt A B, as floats
lt() { python3 -c "import sys; sys.exit(0 if $1 < $2 else 1)"; }
gt() { python3 -c "import sys; sys.exit(0 if $1 > $2 else 1)"; }
# run_load NAME SERVICE PORT CLIENTS SECONDS MAX [GAP]: the closed loop; sets RESP, ERRS,
# LAT_MS, the probe's counts over it: DW (waits), MEAN_MS (their mean), and sluice's mean
# latency of the service's L0 requests over it: SLUICE_MS
run_load() {
	local w0 s0 w1 s1 h0 c0 h1 c1
	scrape; w0=$(waits "$2"); s0=$(waitsum "$2"); h0=$(hsum "$2"); c0=$(hcount "$2")
	in_cli python3 "$TMP/client.py" $SRV_IP "$3" "$4" "$5" "$6" ${7:-} > "$TMP/$1.json"
	scrape; w1=$(waits "$2"); s1=$(waitsum "$2"); h1=$(hsum "$2"); c1=$(hcount "$2")
	SLUICE_MS=$(python3 -c "print(round((${h1:-0} - ${h0:-0}) * 1e3 / max(${c1:-0} - ${c0:-0}, 1), 2))")
	RESP=$(json_get "$TMP/$1.json" "d['responses']"); ERRS=$(json_get "$TMP/$1.json" "d['errors']")
	LAT_MS=$(json_get "$TMP/$1.json" "d['mean_latency_ms']")
	DW=$((${w1:-0} - ${w0:-0}))
	MEAN_MS=$(python3 -c "print(round(($s1 - $s0) * 1e3 / max($DW, 1), 3))")
	echo "# $1: $4 clients on $3 (up to ${5} s, $6 requests each): $RESP responses, $ERRS errors, mean latency $LAT_MS ms;" \
		"the probe: $DW waits, mean wait $MEAN_MS ms"
}
# "ID RUN_TIME_NS RUN_CNT" of this sluiced's probe program (bpftool -j prog show)
prog_stats() {
	bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
pid = int(sys.argv[1]); progs = [p for p in json.load(sys.stdin) if p.get("name") == "read_wait"]
mine = [p for p in progs if any(x.get("pid") == pid for x in p.get("pids", []))] or progs[:1]
for p in mine[:1]:
    print(p["id"], p.get("run_time_ns", 0), p.get("run_cnt", 0))' "$SLUICED_PID"
}

# --- 1. the probe runs ---------------------------------------------------------------------
scrape
ok $(grep -q 'measuring the wait before the server reads' "$SLUICED_LOG" &&
	! grep -q 'not measured' "$SLUICED_LOG" && [ "$(mval sluice_read_wait_probe)" = 1 ] &&
	[ "$(waits web)" = 0 ] && [ "$(waits db)" = 0 ] && [ "$(waitsum web6)" = 0 ] &&
	echo 0 || echo 1) \
	"sluiced loads the wait probe: sluice_read_wait_probe $(mval sluice_read_wait_probe), every service's waits at 0" \
	"$(grep -i wait "$SLUICED_LOG")" "$(grep read_wait "$TMP/metrics.txt")"
read -r PROG_ID _ <<<"$(prog_stats)"
ok $([ -n "$PROG_ID" ] && echo 0 || echo 1) "bpftool lists the probe's program read_wait (id ${PROG_ID:-none})" \
	"$(bpftool prog show name read_wait 2>&1)"

# --- 2. requests waiting in the sockets of a server whose workers read them -----------------
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -qw kernel.bpf_stats_enabled=1
read -r _ rt0 rc0 <<<"$(prog_stats)"
run_load queued web 8080 16 2 2000
# what `sluicectl status` says of the gate, read at once (it stays armed 2 s after the waits)
"$BUILD/sluicectl" --pin-dir "$PIN" status --json --no-rates > "$TMP/status-armed.json"
read -r _ rt1 rc1 <<<"$(prog_stats)"
sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"
if [ -n "${rc1:-}" ] && [ "$((rc1 - rc0))" -gt 0 ]; then
	echo "# the probe's cost during that load: $((rt1 - rt0)) ns over $((rc1 - rc0)) calls =" \
		"$(((rt1 - rt0) / (rc1 - rc0))) ns a call (every TCP read on the host counts, the" \
		"clients' too; kernel.bpf_stats_enabled on for the load only)"
else
	echo "# the probe's cost: no run count from bpftool (${rc0:-?} -> ${rc1:-?})"
fi
ok $([ "$RESP" -ge 200 ] && [ "$ERRS" = 0 ] && close_to "$DW" "$RESP" && echo 0 || echo 1) \
	"16 clients, 4 workers: every request served is measured once ($DW waits, $RESP responses)"
ok $(gt "$MEAN_MS" 10 && echo 0 || echo 1) \
	"16 clients, 4 workers reading their own requests: the requests wait in the sockets, mean $MEAN_MS ms (> 10; latency $LAT_MS ms)" \
	"$(grep read_wait "$TMP/metrics.txt")"

# The read gate: those waits arm it for the service (its http requests then count as unread
# until the server reads them), and when the load is over every count has been taken off
# again, at the server's read (the probe) or at the answer: 0 unread. The clients are all L0,
# whom the gate never refuses.
GATE_ARMED=$(mval 'sluice_read_gate_armed{service="web"}')
gate_drained() { scrape; [ "$(mval 'sluice_read_gate_unread{service="web"}')" = 0 ]; }
DRAINED=no
wait_for 3 "the read gate's unread count back to 0" gate_drained && DRAINED=yes
ok $([ "$GATE_ARMED" = 1 ] && [ "$DRAINED" = yes ] &&
	[ "$(mval 'sluice_read_gate_refusals_total{service="web"}')" = 0 ] && echo 0 || echo 1) \
	"the waits armed the read gate (armed: ${GATE_ARMED:-none}), every request it counted was taken off again (unread now: $(mval 'sluice_read_gate_unread{service="web"}')), and no L0 request was refused" \
	"$(grep read_gate "$TMP/metrics.txt")"
STATUS_GATE=$(json_get "$TMP/status-armed.json" "[x['read_gate_armed'] for x in d['services'] if x['name'] == 'web'][0]")
ok $([ "$STATUS_GATE" = True ] && echo 0 || echo 1) \
	"sluicectl status --json says the gate is armed right after the load (read_gate_armed: ${STATUS_GATE:-none})" \
	"$(cat "$TMP/status-armed.json")"

run_load idle web 8080 2 2 2000
ok $([ "$RESP" -ge 50 ] && [ "$ERRS" = 0 ] && close_to "$DW" "$RESP" && lt "$MEAN_MS" 2 && echo 0 || echo 1) \
	"2 clients, 4 workers: no queue, mean wait $MEAN_MS ms (< 2), $DW waits for $RESP responses (latency $LAT_MS ms)" \
	"$(grep read_wait "$TMP/metrics.txt")"

# A trickling client (each request's first bytes, then the rest 100 ms later): the worker
# reads the first part at once (one wait, under 2 ms), and the request is timed from its rest
# (sluice's mean latency the server's 20 ms, not the 120 ms the client waits); the rest's read
# is no second wait.
run_load trickle web 8080 2 1 2000 0.1
ok $([ "$RESP" -ge 10 ] && [ "$ERRS" = 0 ] && [ "$DW" = "$RESP" ] && lt "$MEAN_MS" 2 &&
	lt "$SLUICE_MS" 50 && gt "$LAT_MS" 100 && echo 0 || echo 1) \
	"2 clients trickling (100 ms between a request's parts): $DW waits for $RESP responses, mean wait $MEAN_MS ms (< 2); timed from the rest: $SLUICE_MS ms (< 50) where the client waited $LAT_MS ms" \
	"$(grep -E 'read_wait|duration_seconds_(sum|count)\{service="web"' "$TMP/metrics.txt")"

# --- 3. a server that reads at once and queues inside: the latency without the wait ---------
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
start_server
run_load inner web 8080 16 2 2000
ok $([ "$RESP" -ge 200 ] && [ "$ERRS" = 0 ] && close_to "$DW" "$RESP" && lt "$MEAN_MS" 2 &&
	gt "$LAT_MS" 40 && echo 0 || echo 1) \
	"16 clients, a server that reads every request at once into its own queue: mean wait $MEAN_MS ms (< 2) at a latency of $LAT_MS ms (> 40); $DW waits, $RESP responses"

# --- 4. a dual-stack listener at a service by local address ---------------------------------
run_load v4mapped web6 8081 3 10 10
ok $([ "$RESP" = 30 ] && [ "$DW" = 30 ] && echo 0 || echo 1) \
	"an AF_INET6 listener of IPv4 clients at $SRV_IP:8081 (v4-mapped keys): $DW waits for $RESP requests on 3 connections" \
	"$(grep read_wait "$TMP/metrics.txt")"

# --- 5. a tcp service: one wait per turn ----------------------------------------------------
scrape; w0=$(waits db); s0=$(waitsum db)
$IN_CLI python3 - "$SRV_IP" > "$TMP/tcp.out" 2>&1 <<'PY'
import socket, sys, threading
got = []
def conn():
    s = socket.create_connection((sys.argv[1], 7000), timeout=5)
    n = 0
    for _ in range(10):
        s.sendall(b"L0\n")
        buf = b""
        while not buf.endswith(b"\n"):
            d = s.recv(64)
            if not d:
                break
            buf += d
        n += buf == b"ok\n"
    s.close()
    got.append(n)
th = [threading.Thread(target=conn) for _ in range(4)]
[t.start() for t in th]
[t.join() for t in th]
print(sum(got))
PY
scrape; w1=$(waits db); s1=$(waitsum db)
turns=$(cat "$TMP/tcp.out"); dw=$((${w1:-0} - ${w0:-0}))
sum_ms=$(python3 -c "print(round(($s1 - $s0) * 1e3, 3))")
echo "# tcp: $turns turns answered on 4 connections to 2 workers; the probe: $dw waits, $sum_ms ms in all"
ok $([ "$turns" = 40 ] && [ "$dw" = 40 ] && gt "$sum_ms" 50 && echo 0 || echo 1) \
	"tcp service: one wait per turn ($dw for $turns turns); the 2 connections queued behind the 2 workers' (10 x 5 ms each) add their wait: $sum_ms ms in all (> 50)" \
	"$(cat "$TMP/tcp.out")" "$(grep read_wait "$TMP/metrics.txt")"

# --- 6. gone with its sluiced; --no-read-wait --------------------------------------------
kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
gone() { ! bpftool prog show id "$PROG_ID" >/dev/null 2>&1; }
wait_for 2 "the probe's program $PROG_ID to go with its sluiced" gone
ok $? "the probe goes with its sluiced (program $PROG_ID unloaded after SIGTERM)"
SLUICED_ARGS=--no-read-wait start_sluiced "$CFG" || { ok 1 "sluiced --no-read-wait starts"; finish; exit 1; }
code=$(in_cli curl -s -o /dev/null -w "%{http_code}" --max-time 5 http://$SRV_IP:8080/x)
scrape
ok $([ "$(mval sluice_read_wait_probe)" = 0 ] && ! grep -qE '^sluice_read_wait(s|_seconds)_total' "$TMP/metrics.txt" &&
	[ -z "$(prog_stats)" ] && grep -q 'not measured (--no-read-wait)' "$SLUICED_LOG" &&
	! grep -q 'warning' "$SLUICED_LOG" && [ "$code" = 200 ] && echo 0 || echo 1) \
	"--no-read-wait: sluice_read_wait_probe $(mval sluice_read_wait_probe), no waits on /metrics, no probe program, a request served ($code)" \
	"$(grep -i wait "$SLUICED_LOG")" "$(grep read_wait "$TMP/metrics.txt")"
ok $(kill -0 "$SLUICED_PID" 2>/dev/null && echo 0 || echo 1) "sluiced still runs"
finish
