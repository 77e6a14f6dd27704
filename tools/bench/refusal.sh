#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# What one refusal costs the host: sluice's RST from XDP and its 429 from TC against the 429 of
# HAProxy and of nginx, on the same machine in the same run. NOT a test: it prints ratios and
# never passes or fails on time; it fails (non-zero, after cleaning up) when a contender does
# not start or does not refuse what it is sent.
#
#   tools/bench/refusal.sh BUILD OUTDIR        (needs root; what `make bench` runs for the
#                                               scenario "refusal")
#
# Every contender refuses everything it is sent, on 198.18.0.1:8080 in a server namespace
# joined to a client namespace by a veth pair:
#   sluice-rst   a tcp service whose class has no room (headroom L3: 0): every SYN is answered
#                with an RST from XDP; nothing listens behind it;
#   sluice-429   the same as an http service: the handshake completes (a test server listens),
#                the request is answered 429 from TC ingress and the server's side reset;
#   haproxy-429  HAProxy answering every request `http-request deny deny_status 429`;
#   nginx-429    nginx answering every request `return 429`.
# The client (tools/loadgen, open loop, RATE arrivals/s for DUR s) opens a new connection per
# arrival: mode tcp for the RST, http-new (one request, Connection: close) for the 429s -- a
# flood of new clients, the case refusals exist for.
# CPU per refusal: whole-host busy jiffies from /proc/stat (user, system, irq, softirq of every
# CPU) over the step, minus the background (the mean of DUR s just before and just after it,
# the contender idle: on a shared machine others' work is in the host's figure too), minus the client process's own user + system time (getrusage of its children). What
# the client's kernel does outside its process (its softirq: sending SYNs, taking RSTs) stays
# in: every contender carries the same client, so the ratios understate sluice's advantage.
# Also the CPU of the server side's processes (user + system of every process in the server
# namespace: HAProxy, nginx's workers, sluiced; softirq not in it).
# Knobs: REFUSAL_RATE (arrivals/s, default 3000), REFUSAL_DUR (s, default 5), REFUSAL_RUNS (1;
# the best of them per contender), REFUSAL_CONTENDERS (default all four).
# Writes OUTDIR/refusal.txt; everything it starts is removed on any exit.
set -u
[ $# -eq 2 ] || { echo "usage: tools/bench/refusal.sh BUILD OUTDIR" >&2; exit 2; }
BUILD=$(realpath -m "$1")
OUTDIR=$(realpath -m "$2")
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
RATE=${REFUSAL_RATE:-3000}
DUR=${REFUSAL_DUR:-5}
RUNS=${REFUSAL_RUNS:-1}
CONTENDERS=${REFUSAL_CONTENDERS:-"sluice-rst sluice-429 haproxy-429 nginx-429"}
SRV_IP=198.18.0.1
CLI_IP=198.18.0.20
TAG=rf$$
NS_S=sl-rs-$TAG
NS_C=sl-rc-$TAG
PIN=/sys/fs/bpf/sluice-$TAG
IN_SRV="nsenter --net=/run/netns/$NS_S"
IN_CLI="nsenter --net=/run/netns/$NS_C"
TMP=$(mktemp -d /tmp/sluice-$TAG.XXXXXX)
PIDS=()
FAILED=()
NS_UP=0

log() { echo "bench-refusal: $*" >&2; }
. tools/bench/lib.sh

teardown_ns() {
	stop_pids
	detach_pins
	if [ $NS_UP = 1 ]; then
		ip netns del "$NS_S" 2>/dev/null
		ip netns del "$NS_C" 2>/dev/null
		NS_UP=0
	fi
}
cleanup() {
	teardown_ns
	[ -n "${REFUSAL_KEEP:-}" ] && cp "$TMP/rows" "$TMP"/*.json "$OUTDIR/" 2>/dev/null; rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

[ "$(id -u)" = 0 ] || { echo "bench-refusal: needs root" >&2; exit 1; }
dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q "install ok installed" && NGINX_PKG=nginx || NGINX_PKG=nginx-light
need_pkgs haproxy $NGINX_PKG python3 ethtool iproute2 util-linux ||
	{ echo "bench-refusal: cannot install HAProxy, nginx or the tools" >&2; exit 1; }
for b in "$BUILD/sluiced" "$BUILD/sluicectl" "$BUILD/tools/loadgen" "$BUILD/tools/testserver" \
	"$BUILD/tests/xdp_pass.bpf.o"; do
	[ -e "$b" ] || { echo "bench-refusal: $b missing: run make bench" >&2; exit 1; }
done
mkdir -p "$OUTDIR"

# ------------------------------------------------------------------ contenders
# sluice: the class every client is in (L3, the default) has no room, so each unit is refused
# at once; limit and headroom mode fixed so that nothing the controller learns changes that.
sluice_conf() { # sluice_conf tcp|http
	cat <<EOF
interface: s0
state_dir: $TMP/state
services:
  - name: flood
    port: 8080
    protocol: $1
    reject: rst
    limit: { fixed: 64 }
    headroom_mode: fixed
    headroom: { L0: 100, L1: 100, L2: 100, L3: 0 }
    default_class: L3
EOF
}

start_sluice() { # start_sluice tcp|http
	sluice_conf "$1" | grep -v "${2:-^$}" > "$TMP/sluice.yaml"
	start_bg "$TMP/sluiced.log" $IN_SRV "$BUILD/sluiced" --config "$TMP/sluice.yaml" --pin-dir "$PIN"
	sluice_up "$LAST_PID" || { WHY="sluiced: $(tail -3 "$TMP/sluiced.log" | tr '\n' ' ')"; return 1; }
}

start_haproxy() {
	cat > "$TMP/haproxy.cfg" <<EOF
# Every request is refused with 429 by HAProxy itself (no backend is ever used).
global
    maxconn 4000
    nbthread 2
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
    timeout http-request 5s
frontend fe
    bind $SRV_IP:8080 backlog 4096
    http-request deny deny_status 429
EOF
	start_bg "$TMP/haproxy.log" $IN_SRV haproxy -db -f "$TMP/haproxy.cfg"
	wait_port $SRV_IP 8080 "$LAST_PID" || { WHY="haproxy: $(tail -3 "$TMP/haproxy.log" | tr '\n' ' ')"; return 1; }
}

start_nginx() {
	mkdir -p "$TMP/nginx"
	cat > "$TMP/nginx.conf" <<EOF
# Every request is refused with 429 by nginx itself.
worker_processes 2;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    server {
        listen $SRV_IP:8080 backlog=4096;
        location / { return 429; }
    }
}
EOF
	start_bg "$TMP/nginx.log" $IN_SRV nginx -p "$TMP/nginx" -c "$TMP/nginx.conf" -g 'daemon off;'
	wait_port $SRV_IP 8080 "$LAST_PID" || { WHY="nginx: $(tail -3 "$TMP/nginx.log" | tr '\n' ' ')"; return 1; }
}

start_contender() {
	WHY=""
	setup_ns $SRV_IP $CLI_IP || { WHY="cannot set up the network namespaces"; return 1; }
	NS_UP=1
	case $1 in
	sluice-rst) start_sluice tcp ;;
	sluice-429)
		start_bg "$TMP/testserver.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 \
			--mode http --workers 2 --service-ms 1 --quiet &&
			wait_port $SRV_IP 8080 "$LAST_PID" && start_sluice http "reject: rst" ;;
	haproxy-429) start_haproxy ;;
	nginx-429) start_nginx ;;
	*) WHY="unknown contender"; false ;;
	esac
}

# ------------------------------------------------------------------ measurement
cpu_stat() { # whole-host busy jiffies (user nice system irq softirq steal) and the total
	awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat
}
ns_ticks() { # utime + stime of every process in the server namespace (HAProxy's threads are
	# in its one process; nginx's workers are processes of their own)
	local p t=0 v
	for p in $(ip netns pids "$NS_S" 2>/dev/null); do
		v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }')
		t=$((t + ${v:-0}))
	done
	echo $t
}
# client SECONDS MODE OUT: loadgen in the client namespace under a parent that prints its
# children's user + system seconds (the client's own CPU) on OUT.cpu
client() {
	python3 -c '
import resource, subprocess, sys
out = open(sys.argv[1], "w")
rc = subprocess.call(sys.argv[2:], stdout=out)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1] + ".cpu", "w").write("%.4f\n" % (r.ru_utime + r.ru_stime))
sys.exit(rc)' "$3" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode "$2" \
		--rate "$RATE" --arrivals uniform --duration "$1" --timeout-ms 1000 --quiet
}

HZ=$(getconf CLK_TCK)
NCPU=$(nproc)
: > "$TMP/rows"
measure() { # measure WHO RUN
	local who=$1 run=$2 mode=http-new b0 b1 b2 b3 s0 s1 st0 st1 rc=0
	[ "$who" = sluice-rst ] && mode=tcp
	client 1 "$mode" "$TMP/warm.json" >/dev/null 2>&1      # warm-up, not counted
	# background: the host with the contender idle, as long as the step
	read -r b0 _ < <(cpu_stat); sleep "$DUR"; read -r b1 _ < <(cpu_stat)
	st0=$(ns_ticks)
	read -r s0 _ < <(cpu_stat)
	client "$DUR" "$mode" "$TMP/step.json" || rc=$?
	read -r s1 _ < <(cpu_stat)
	st1=$(ns_ticks)
	read -r b2 _ < <(cpu_stat); sleep "$DUR"; read -r b3 _ < <(cpu_stat)
	python3 - "$TMP/step.json" "$who" "$run" "$(((b1 - b0 + b3 - b2) / 2))" "$((s1 - s0))" "$HZ" \
		"$(cat "$TMP/step.json.cpu" 2>/dev/null || echo 0)" "${st0:-}" "${st1:-}" "$rc" \
		>> "$TMP/rows" <<'EOF' || { FAILED+=("$who run $run: $(tail -c 300 "$TMP/rows")"); return 1; }
import json, sys
path, who, run, bg, busy, hz, client_s, st0, st1, rc = sys.argv[1:]
j = [json.loads(l) for l in open(path) if l.startswith("{")]
if not j or rc != "0":
    print("error: %s: the client failed (exit %s)" % (who, rc)); sys.exit(1)
t = j[-1]["total"]
refused = t["rejected"]
if t["sent"] == 0 or refused < 0.9 * t["sent"]:
    print("error: %s refused %d of %d (ok %d, errors %d): it does not refuse everything"
          % (who, refused, t["sent"], t["ok"], t["errors"])); sys.exit(1)
hz = float(hz)
cpu = (int(busy) - int(bg)) / hz - float(client_s)
server = (int(st1) - int(st0)) / hz
print(json.dumps({"who": who, "run": int(run), "sent": t["sent"], "refused": refused,
                  "host_busy_s": int(busy) / hz, "background_s": int(bg) / hz,
                  "client_s": float(client_s), "cpu_s": cpu, "server_process_s": server}))
EOF
}

for run in $(seq "$RUNS"); do
	for who in $CONTENDERS; do
		if ! start_contender "$who"; then
			log "$who cannot start: $WHY"
			FAILED+=("$who: cannot start: $WHY")
			teardown_ns
			continue
		fi
		log "run $run: $who, $RATE new connections/s for ${DUR}s"
		measure "$who" "$run" || log "  FAILED: $(tail -1 "$TMP/rows")"
		teardown_ns
	done
done

# ------------------------------------------------------------------ report
python3 - "$TMP/rows" "$RATE" "$DUR" "$NCPU" > "$OUTDIR/refusal.txt" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rate, dur, ncpu = sys.argv[2], sys.argv[3], sys.argv[4]
best = {}
for r in rows:
    per = r["refused"] / r["cpu_s"] if r["cpu_s"] > 0 else float("inf")
    r["per_core_s"] = per
    if r["who"] not in best or per > best[r["who"]]["per_core_s"]:
        best[r["who"]] = r
print("# bg_%: the host's busy share with the contender idle (others' work on a shared machine);"
      " far above 0 it swamps the figures")
print("# refusals per second per core: new connections at %s/s for %s s, each refused; CPU ="
      " whole-host busy (user+system+irq+softirq, %s CPUs) - background - the client process"
      % (rate, dur, ncpu))
print("%-12s %8s %8s %9s %8s %9s %7s %16s %10s %10s" % ("contender", "sent", "refused", "cpu_s",
      "us/ref", "client_s", "bg_%", "refusals/core_s", "x_haproxy", "x_nginx"))
hap = best.get("haproxy-429", {}).get("per_core_s")
ngx = best.get("nginx-429", {}).get("per_core_s")
for who in ("sluice-rst", "sluice-429", "haproxy-429", "nginx-429"):
    r = best.get(who)
    if not r:
        continue
    per = r["per_core_s"]
    us = 1e6 * r["cpu_s"] / r["refused"] if r["refused"] else 0
    bg = 100.0 * r["background_s"] / (float(dur) * int(ncpu))
    print("%-12s %8d %8d %9.2f %8.1f %9.2f %7.0f %16.0f %10s %10s" % (who, r["sent"], r["refused"],
          r["cpu_s"], us, r["client_s"], bg, per,
          "%.1f" % (per / hap) if hap else "-", "%.1f" % (per / ngx) if ngx else "-"))
for who in ("sluice-rst", "sluice-429", "haproxy-429", "nginx-429"):
    r = best.get(who)
    if r and r["server_process_s"] >= 0:
        print("# %s: its processes alone %.2f s CPU, %.1f us per refusal (softirq not in it)"
              % (who, r["server_process_s"], 1e6 * r["server_process_s"] / max(1, r["refused"])))
EOF
cat "$OUTDIR/refusal.txt"
if [ ${#FAILED[@]} -gt 0 ]; then
	log "FAILED:"; printf 'bench-refusal:   %s\n' "${FAILED[@]}" >&2
	exit 1
fi
exit 0
