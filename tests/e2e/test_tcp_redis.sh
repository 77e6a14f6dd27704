#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# A real database's protocol, unparsed: Debian's Redis behind sluiced as a `protocol: tcp`
# service with the day-one limit. Every command is one turn on the wire (the client speaks,
# the server answers), so with nothing in sluice that knows Redis:
#  1. `DEBUG SLEEP 0.02` commands (the server holds each answer 20 ms) read as a p50 of about
#     20 ms in `sluicectl status` and in /metrics (the L0 histogram's median bucket), and the
#     service's limit has a latency signal;
#  2. the histogram counts one sample per command: 300 fast commands on one connection
#     (redis-cli -r) add 300 samples, within the one or two the client sends on its own;
#  3. a pipelined batch (50 PINGs in one write) is one turn: one sample;
#  4. afterwards nothing is in flight, exactly.
TAG=rds
source "$(dirname "$0")/lib.sh"
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
	skip_all "redis-server not installed (tools/install-deps.sh installs it)"
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: cache
    port: 6379
    protocol: tcp
    limit: { min: 4, max: 256 }
    target_latency_ms: auto
    default_class: L3
    classify:
      - { source: 198.18.0.2/32, class: L0 }
Y
# Redis as a user runs it, minus what touches the host: no persistence, no packaged config.
start_bg "$TMP/redis.log" $IN_SRV redis-server --bind $SRV_IP --port 6379 --save "" \
	--appendonly no --protected-mode no --enable-debug-command yes --daemonize no \
	--dir "$TMP" --logfile ""
redis_up() { $IN_CLI redis-cli -h $SRV_IP -p 6379 ping 2>/dev/null | grep -q PONG; }
wait_for 5 "redis-server to answer PING" redis_up ||
	{ ok 1 "redis-server starts" "$(cat "$TMP/redis.log")"; finish; exit 1; }
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok 0 "sluiced attaches with Redis as a tcp service"

samples() { hist_samples cache L0; }
# Every connection of the service has ended in sluice's books: no turn of theirs can still
# give a sample (the server's last data went out before the close).
closed() { status && [ "$(svc connections)" = 0 ]; }
rcli() { $IN_CLI redis-cli -h $SRV_IP -p 6379 "$@"; }

# --- 1. 100 commands of 20 ms each, from L0's address, one after the other --------------
# (Redis runs one command at a time: on more connections at once they would queue.)
$IN_CLI timeout 20 redis-cli -h $SRV_IP -p 6379 -r 100 debug sleep 0.02 > "$TMP/sleep.out" 2>&1
n_ok=$(grep -c '^OK' "$TMP/sleep.out")
ok $([ "$n_ok" = 100 ] && echo 0 || echo 1) "100 DEBUG SLEEP 0.02 answered ($n_ok)" \
	"$(tail -3 "$TMP/sleep.out")"
status
ok_p50_is 20 L0 "Redis's 20 ms answers"
# The same samples in /metrics, as Prometheus would read them: the L0 histogram of the tcp
# service holds the 100 commands (the connection's first turn, its setup, is held back), and
# the bucket its median falls in is the one holding 20 ms.
mport=$(sed -n 's/.*metrics on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$SLUICED_LOG" | tail -1)
$IN_SRV curl -s --max-time 2 "http://127.0.0.1:$mport/metrics" > "$TMP/metrics.txt"
read -r m_count m_median < <(python3 - "$TMP/metrics.txt" <<'PY'
import re, sys
buckets, count = [], 0
for line in open(sys.argv[1]):
    m = re.match(r'sluice_request_duration_seconds_bucket\{service="cache",class="L0",le="([^"]+)"\} (\d+)', line)
    if m:
        buckets.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))))
    m = re.match(r'sluice_request_duration_seconds_count\{service="cache",class="L0"\} (\d+)', line)
    if m:
        count = int(m.group(1))
median = next((le for le, n in sorted(buckets) if count and n >= count / 2), 0)
print(count, median)
PY
)
ok $([ "${m_count:-0}" -ge 99 ] && python3 -c "import sys; sys.exit(not 0.02 <= float('${m_median:-0}') <= 0.04)" && echo 0 || echo 1) \
	"/metrics: the tcp service's L0 histogram holds $m_count samples, median bucket le=$m_median s (20 ms answers)" \
	"$(grep 'cache",class="L0"' "$TMP/metrics.txt" | head -40)"
has_signal() { status && [ "$(svc signal)" != None ] && [ "$(svc signal)" != none ]; }
wait_for 3 "the limit's latency signal" has_signal
ok $? "the limit has a latency signal: $(svc signal)"

# --- 2. one sample per command ---------------------------------------------------------
# A connection's first turn may be its setup (a login, a startup packet): its latency is held
# back and given only if the connection ends after that one turn. So N commands on one
# connection are N - 1 samples, and a connection of one command is one.
n0=$(samples)
rcli -r 300 incr counter > "$TMP/incr.out" 2>&1
n1=$(samples)
ok $([ "$(tail -n 1 "$TMP/incr.out")" = 300 ] && [ $((n1 - n0)) = 299 ] && echo 0 || echo 1) \
	"300 INCR on one connection: $((n1 - n0)) samples (299: the first turn is the setup's)" \
	"$(tail -n 2 "$TMP/incr.out")"
for i in $(seq 1 20); do rcli get counter; done > "$TMP/get.out" 2>&1
settled_samples() { [ $(($(samples) - n1)) -ge 20 ]; }
wait_for 3 "the 20 one-command connections' samples" settled_samples
n2=$(samples)
ok $([ "$(grep -c '^300$' "$TMP/get.out")" = 20 ] && [ $((n2 - n1)) = 20 ] && echo 0 || echo 1) \
	"20 connections of one GET each: $((n2 - n1)) samples (20: each connection's single turn)"

# --- 3. a pipelined batch is one turn ---------------------------------------------------
# 50 PINGs in one write, then the 50 answers: one turn on the wire, one sample (the
# connection's only turn, given when it ends).
$IN_CLI python3 - "$SRV_IP" > "$TMP/pipe.out" 2>&1 <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], 6379), timeout=5)
s.sendall(b"PING\r\n" * 50)
got = b""
while got.count(b"+PONG\r\n") < 50:
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
s.close()
print(got.count(b"+PONG\r\n"))
PY
settled_pipe() { [ $(($(samples) - n2)) -ge 1 ]; }
wait_for 3 "the pipelined connection's sample" settled_pipe
wait_for 3 "the connection closed" closed   # a later sample would come before its close
n3=$(samples)
ok $([ "$(cat "$TMP/pipe.out")" = 50 ] && [ $((n3 - n2)) = 1 ] && echo 0 || echo 1) \
	"50 pipelined PINGs in one write: $(cat "$TMP/pipe.out") answers, $((n3 - n2)) sample (one turn)"

# --- 4. afterwards nothing is in flight --------------------------------------------------
idle() { status && [ "$(svc in_flight)" = 0 ] && [ "$(svc connections)" = 0 ]; }
wait_for 5 "in_flight and connections 0 after the clients closed" idle
ok $? "after the clients closed: in_flight $(svc in_flight), connections $(svc connections)"
ok $(kill -0 "$SLUICED_PID" 2>/dev/null && echo 0 || echo 1) "sluiced still runs"
finish
