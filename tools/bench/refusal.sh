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
#   nginx-429    nginx answering every request `return 429`;
#   sluice-rst-flood  the same server as sluice-rst, sent raw SYNs instead of connections (below).
# The client (tools/loadgen, open loop, evenly spaced arrivals, each rate of REFUSAL_RATES for
# DUR s) opens a new connection per arrival: mode tcp for the RST, http-new (one request,
# Connection: close) for the 429s -- a flood of new clients, the case refusals exist for.
# sluice-rst-flood is measured another way: tools/synflood in the client namespace crafts SYN
# frames (source port walking 1024-65535, random sequence numbers, correct checksums) and hands
# them to the client veth through an AF_PACKET socket, several per sendmmsg() call when more
# than one is due, at each rate of REFUSAL_FLOOD_RATES (evenly spaced by the clock, "max": as
# fast as it can) for DUR s. Why: one loadgen process doing connect() on these 2 CPUs sends at
# most a few tens of thousands of SYNs a second, and at that rate the server's kthread still
# wakes about once a packet; raw SYNs reach the rates at which a host under a SYN flood
# receives, in batches. Its refusals are what came back: the client veth's received packets
# (the RSTs, counted by the veth before the client's XDP program drops them: the client has no
# socket for them), cross-checked against sluice's own count of RSTs sent (`sluicectl status
# --json`, packets.rst_sent), which must equal those plus the ones lost at the client veth's
# full ring (its rx_dropped; the client's kthread short of CPU at the highest rates). The
# server CPU is counted as for the other rows. It keeps up when >= 90 % of the SYNs sent came
# back as RSTs; not keeping up at its lowest rate fails the script, as for the others, and so
# does a disagreement of the two counts (the figure would not be sound). Only the RST can be
# measured so: the 429s need a completed handshake, and HAProxy and nginx answer nothing before
# it. Its rows are reported in a table of their own, against HAProxy at HAProxy's busiest rate.
# Why more than one rate: at a few thousand arrivals/s the server veth's NAPI kthread wakes
# once per packet, and that wake-up and the veth hand-over are most of what an XDP refusal
# costs; a host under a flood receives faster than that, its kthread can take several
# packets a wake-up, and what it pays per refusal is lower. The first rate is the quiet one (every
# contender keeps up), the later ones are near or past what this host can refuse.
# CPU per refusal: the server side's own CPU, measured on the tasks that do its work, never
# the whole host's (on a shared machine others' work swamps a whole-host difference, and
# subtracting the client left negative figures). Both veths receive in threaded NAPI (GRO on,
# TSO off so that every segment takes the NAPI path, `threaded` 1): everything the kernel does
# for a packet coming in to the server -- XDP, TC, IP, TCP, the SYN-ACK or RST it sends back,
# waking the server -- runs in the server veth's NAPI kthread, and what it does for a packet
# coming in to the client runs in the client veth's kthread. Server CPU = the run time
# (/proc/PID/schedstat, ns) of the server veth's kthread + of every thread of every process in
# the server namespace (HAProxy, nginx's workers, sluiced, the test server behind sluice's 429),
# over a fixed count of arrivals. The client's process and its kthread are not in it. Left out
# as well: TCP timers (delayed ACKs, TIME-WAIT) that run in softirq on any CPU. The client
# runs on the same CPUs as the server: at the high rates the two compete, so the rate where a
# contender stops keeping up is this host's (client included), not the contender's alone.
# Keeping up: a contender keeps up at a rate when it refuses at least 90 % of the arrivals
# (a refusal = a 429, an RST to the SYN, or a refused connect; the rest are timeouts at
# 1 s, resets, or answers). One that does not is still reported, marked "no" with the rate
# it did refuse, its CPU per refusal (the work spent on the arrivals it never answered
# included) and its ratio to HAProxy flagged; that is a result, not a failure, except at the
# first (lowest) rate, where every contender is expected to keep up and one that does not is
# broken, not busy: the script then fails. Each contender is measured RUNS times per rate; the
# report gives median [min-max].
# Knobs: REFUSAL_RATES (arrivals/s, ascending, default "3000 20000"), REFUSAL_DUR (s, default
# 5), REFUSAL_RUNS (default 3), REFUSAL_CONTENDERS (default all five), REFUSAL_FLOOD_RATES (raw
# SYNs/s for sluice-rst-flood, ascending, "max" last, default "20000 100000 300000 max").
# Why 20000: on the 2-vCPU VM the three 429s stop keeping up between about 6000 and 10000/s
# (the client's own work included) and collapse above it, while sluice's RST keeps up with
# what one client process sends up to about 40000/s, and its cost per refusal falls from about
# 10000/s (more packets a wake-up of the kthread, or a CPU already awake). 20000 is the
# highest rate at which the RST kept up in every run here, also with other work on the host;
# at 40000 it did not always (most likely the client fell behind: the server's kthread did as
# much work as in the runs that kept up, 1 s of 5).
# Writes OUTDIR/refusal.txt; everything it starts is removed on any exit.
set -u
[ $# -eq 2 ] || { echo "usage: tools/bench/refusal.sh BUILD OUTDIR" >&2; exit 2; }
BUILD=$(realpath -m "$1")
OUTDIR=$(realpath -m "$2")
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
RATES=${REFUSAL_RATES:-"3000 20000"}
DUR=${REFUSAL_DUR:-5}
RUNS=${REFUSAL_RUNS:-3}
CONTENDERS=${REFUSAL_CONTENDERS:-"sluice-rst sluice-429 haproxy-429 nginx-429 sluice-rst-flood"}
FLOOD_RATES=${REFUSAL_FLOOD_RATES:-"20000 100000 300000 max"}
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
	"$BUILD/tools/synflood" "$BUILD/tests/xdp_pass.bpf.o" "$BUILD/tests/xdp_drop.bpf.o"; do
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

napi_threads() { # napi_threads DEV: pids of the threaded-NAPI kthreads of a veth named DEV
	local p
	for p in $(pgrep "^napi/$1-" 2>/dev/null); do echo "$p"; done | sort
}

# threaded_rx: both veths receive in NAPI kthreads of their own (see the header); SRV_NAPI
# holds the server veth's, found as the napi/s0-* kthreads that were not there before.
threaded_rx() {
	local before
	before=$(napi_threads s0)
	$IN_SRV ethtool -K s0 gro on tso off >/dev/null 2>&1 || return 1
	$IN_CLI ethtool -K c0 gro on tso off >/dev/null 2>&1 || return 1
	ip netns exec "$NS_S" sh -c 'echo 1 > /sys/class/net/s0/threaded' || return 1
	ip netns exec "$NS_C" sh -c 'echo 1 > /sys/class/net/c0/threaded' || return 1
	SRV_NAPI=$(comm -13 <(echo "$before") <(napi_threads s0) | tr '\n' ' ')
	[ -n "${SRV_NAPI// /}" ]
}

start_contender() {
	WHY=""
	setup_ns $SRV_IP $CLI_IP || { WHY="cannot set up the network namespaces"; return 1; }
	NS_UP=1
	threaded_rx || { WHY="cannot make the veths receive in threaded NAPI"; return 1; }
	case $1 in
	sluice-rst) start_sluice tcp ;;
	sluice-rst-flood)
		# the client drops the RSTs in XDP, counted by its veth first (tests/e2e/xdp_drop.bpf.c)
		$IN_CLI ip -force link set dev c0 xdpdrv obj "$BUILD/tests/xdp_drop.bpf.o" sec xdp ||
			{ WHY="cannot attach the client's dropping XDP program"; return 1; }
		start_sluice tcp ;;
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
# server_ns: run time in ns of the server side's tasks (see the header): the server veth's NAPI
# kthreads, and every thread of every process in the server namespace. Prints "RX PROCS".
server_ns() {
	local p t rx=0 pr=0 v
	for p in $SRV_NAPI; do
		read -r v _ < "/proc/$p/schedstat" 2>/dev/null && rx=$((rx + v))
	done
	for p in $(ip netns pids "$NS_S" 2>/dev/null); do
		for t in /proc/$p/task/*/schedstat; do
			read -r v _ < "$t" 2>/dev/null && pr=$((pr + v))
		done
	done
	echo "$rx $pr"
}
client() { # client RATE SECONDS MODE OUT: loadgen in the client namespace, its JSON on OUT
	$IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 --mode "$3" --rate "$1" \
		--arrivals uniform --duration "$2" --timeout-ms 1000 --quiet > "$4"
}

NCPU=$(nproc)
FIRST_RATE=${RATES%% *}
: > "$TMP/rows"
# measure WHO RUN RATE: one row on TMP/rows; exit 0 when it kept up, 3 when it did not (the
# row says so), 1 when there is no figure (the client failed, or the kthread did no work).
measure() {
	local who=$1 run=$2 rate=$3 mode=http-new rx0 pr0 rx1 pr1 rc=0
	[ "$who" = sluice-rst ] && mode=tcp
	client "$rate" 1 "$mode" "$TMP/warm.json" >/dev/null 2>&1      # warm-up, not counted
	sleep 1   # what the warm-up left (TIME-WAIT, retransmits) settles
	read -r rx0 pr0 < <(server_ns)
	client "$rate" "$DUR" "$mode" "$TMP/step.json" || rc=$?
	read -r rx1 pr1 < <(server_ns)
	python3 - "$TMP/step.json" "$who" "$run" "$rate" "$((rx1 - rx0))" "$((pr1 - pr0))" "$rc" \
		>> "$TMP/rows" <<'EOF'
import json, sys
path, who, run, rate, rx, procs, rc = sys.argv[1:]
j = [json.loads(l) for l in open(path) if l.startswith("{")]
if not j or rc != "0":
    print("error: %s at %s/s: the client failed (exit %s)" % (who, rate, rc)); sys.exit(1)
t = j[-1]["total"]
refused = t["rejected"]
rx_s, procs_s = int(rx) / 1e9, int(procs) / 1e9
if rx_s <= 0:
    print("error: %s at %s/s: the server veth's NAPI kthread did no work: the packets took"
          " another path, the figure would not be the server's" % (who, rate)); sys.exit(1)
kept = t["sent"] > 0 and refused >= 0.9 * t["sent"]
print(json.dumps({"who": who, "run": int(run), "rate": int(rate), "sent": t["sent"],
                  "refused": refused, "refused_per_s": refused / j[-1]["duration_s"],
                  "ok": t["ok"], "timeout": t["timeout"], "reset": t["reset"],
                  "errors": t["errors"], "kept": kept, "rx_s": rx_s, "procs_s": procs_s,
                  "cpu_s": rx_s + procs_s}))
sys.exit(0 if kept else 3)
EOF
}

# ------------------------------------------------------------------ the raw SYN flood
# veth_counts: "C0_RX C0_RXDROP C0_TXDROP S0_RX S0_RXDROP RST_SENT": the client veth's
# received packets (the RSTs), the RSTs lost on the way in (its ring full) and the SYN frames it
# refused the sender for a moment (retried), the server veth's received packets and drops, and
# sluice's count of the RSTs it sent (-1 when it cannot be read).
veth_counts() {
	local c s r
	c=$(ip netns exec "$NS_C" cat /sys/class/net/c0/statistics/rx_packets \
		/sys/class/net/c0/statistics/rx_dropped \
		/sys/class/net/c0/statistics/tx_dropped 2>/dev/null | tr '\n' ' ')
	s=$(ip netns exec "$NS_S" cat /sys/class/net/s0/statistics/rx_packets \
		/sys/class/net/s0/statistics/rx_dropped 2>/dev/null | tr '\n' ' ')
	r=$($IN_SRV "$BUILD/sluicectl" --pin-dir "$PIN" status --json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["packets"]["rst_sent"])' 2>/dev/null)
	echo "${c:-0 0 0 } ${s:-0 0 } ${r:--1}"
}
flood() { # flood RATE SECONDS OUT: tools/synflood in the client namespace, its JSON on OUT
	local count
	if [ "$1" = max ]; then count=$((20000000 * $2)); else count=$(($1 * $2)); fi
	$IN_CLI "$BUILD/tools/synflood" --dev c0 --dst-mac "$SRV_MAC" --dst $SRV_IP:8080 \
		--src $CLI_IP --rate "$1" --count "$count" --duration "$2" > "$3"
}
# measure_flood RUN RATE: as measure, for sluice-rst-flood (its row's rate is 0 for "max");
# exit 4 when the client veth's count and sluice's disagree.
measure_flood() {
	local run=$1 rate=$2 rx0 pr0 rx1 pr1 a0 a1 rc=0
	SRV_MAC=$(ip netns exec "$NS_S" cat /sys/class/net/s0/address) || return 1
	flood "$rate" 1 "$TMP/warm.json" >/dev/null 2>&1      # warm-up, not counted
	sleep 1
	read -r rx0 pr0 < <(server_ns)
	a0=$(veth_counts)
	flood "$rate" "$DUR" "$TMP/step.json" || rc=$?
	sleep 0.2   # the last RSTs come back
	read -r rx1 pr1 < <(server_ns)
	a1=$(veth_counts)
	python3 - "$TMP/step.json" "$run" "$rate" "$((rx1 - rx0))" "$((pr1 - pr0))" "$rc" \
		"$a0" "$a1" >> "$TMP/rows" <<'EOF'
import json, sys
path, run, rate, rx, procs, rc, a0, a1 = sys.argv[1:]
who = "sluice-rst-flood"
j = [json.loads(l) for l in open(path) if l.startswith("{")]
if not j or rc != "0":
    print("error: %s at %s/s: the flood failed (exit %s)" % (who, rate, rc)); sys.exit(1)
f = j[-1]
c0_rx, c0_rxdrop, c0_txdrop, s0_rx, s0_rxdrop, rst = [
    int(y) - int(x) for x, y in zip(a0.split(), a1.split())]
if int(a0.split()[5]) < 0 or int(a1.split()[5]) < 0:
    rst = -1
rx_s, procs_s = int(rx) / 1e9, int(procs) / 1e9
if rx_s <= 0:
    print("error: %s at %s/s: the server veth's NAPI kthread did no work" % (who, rate)); sys.exit(1)
# A refusal is an RST that came back to the client veth: received (rx_packets), or lost at its
# full ring (rx_dropped: its NAPI kthread short of CPU; the server's XDP_TX had done its part).
# sluice's own count of the RSTs it sent must agree: within 1 % or 10, the veth also carries
# the odd neighbour packet.
refused = c0_rx + c0_rxdrop
agree = rst >= 0 and abs(rst - refused) <= max(10, 0.01 * rst)
kept = f["sent"] > 0 and refused >= 0.9 * f["sent"]
print(json.dumps({"who": who, "run": int(run), "rate": 0 if rate == "max" else int(rate),
                  "sent": f["sent"], "sent_per_s": f["sent"] / f["elapsed_s"],
                  "refused": refused, "refused_per_s": refused / f["elapsed_s"],
                  "received": c0_rx, "rst_sent": rst, "agree": agree, "c0_rx_dropped": c0_rxdrop,
                  "c0_tx_dropped": c0_txdrop,
                  "s0_rx": s0_rx, "s0_rx_dropped": s0_rxdrop, "busy": f["busy"],
                  "calls": f["calls"], "elapsed_s": f["elapsed_s"],
                  "kept": kept, "rx_s": rx_s, "procs_s": procs_s, "cpu_s": rx_s + procs_s}))
sys.exit(4 if not agree else 0 if kept else 3)
EOF
}

FIRST_FLOOD_RATE=${FLOOD_RATES%% *}
# step WHO RUN RATE LOWEST WHAT: start WHO, measure it at RATE (the flood row with raw SYNs),
# say how it went (not keeping up at LOWEST, its lowest rate, is a failure), tear it down.
# WHAT names the arrivals in the log.
step() {
	local who=$1 run=$2 rate=$3 lowest=$4 what=$5 rc
	if ! start_contender "$who"; then
		log "$who cannot start: $WHY"
		FAILED+=("$who: cannot start: $WHY")
		teardown_ns
		return
	fi
	log "run $run: $who, $what at $rate/s for ${DUR}s"
	if [ "$who" = sluice-rst-flood ]; then
		measure_flood "$run" "$rate"
	else
		measure "$who" "$run" "$rate"
	fi
	rc=$?
	case $rc in
	0) ;;
	3)
		log "  $who does not keep up at $rate/s: $(tail -1 "$TMP/rows" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
if "s0_rx" in r:
	print("%d RSTs came back for %d SYNs sent (%d reached the server, %d of the RSTs lost at the client ring)" % (r["refused"], r["sent"], r["s0_rx"], r["c0_rx_dropped"]))
else:
	print("refused %d of %d (ok %d, timeouts %d, resets %d)" % (r["refused"], r["sent"], r["ok"], r["timeout"], r["reset"]))')"
		[ "$rate" = "$lowest" ] &&
			FAILED+=("$who run $run: does not refuse everything at $rate/s, its lowest rate")
		;;
	4)
		log "  FAILED: the RSTs that came back and sluice's count disagree: $(tail -1 "$TMP/rows")"
		FAILED+=("$who run $run at $rate/s: RSTs counted at the client and by sluice disagree")
		;;
	*)
		log "  FAILED: $(tail -1 "$TMP/rows")"
		FAILED+=("$who run $run at $rate/s: $(tail -1 "$TMP/rows")")
		;;
	esac
	teardown_ns
}

for run in $(seq "$RUNS"); do
	for rate in $RATES; do
		for who in $CONTENDERS; do
			[ "$who" = sluice-rst-flood ] && continue   # its own rates, below
			step "$who" "$run" "$rate" "$FIRST_RATE" "new connections"
		done
	done
	# the raw SYN flood: the RST alone, at its own rates (see the header)
	case " $CONTENDERS " in *" sluice-rst-flood "*) ;; *) continue ;; esac
	for rate in $FLOOD_RATES; do
		step sluice-rst-flood "$run" "$rate" "$FIRST_FLOOD_RATE" "raw SYNs"
	done
done

# ------------------------------------------------------------------ report
python3 - "$TMP/rows" "$RATES" "$DUR" "$RUNS" "$FLOOD_RATES" > "$OUTDIR/refusal.txt" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rates, dur, runs = [int(r) for r in sys.argv[2].split()], sys.argv[3], sys.argv[4]
order = ("sluice-rst", "sluice-429", "haproxy-429", "nginx-429")
def per(r):
    return r["refused"] / r["cpu_s"]
def us(r, key):  # us per refusal; one that refused nothing (it did not keep up at all): inf
    return 1e6 * r[key] / r["refused"] if r["refused"] else float("inf")
def mmm(v, f):
    return "%s [%s-%s]" % (f % statistics.median(v), f % min(v), f % max(v))
print("# refusals per core-second of the server side at %s new connections/s, %s s per run and"
      " rate, %s runs, every arrival to be refused; server CPU = the server veth's NAPI kthread"
      " (XDP, TC, IP/TCP in and the replies out) + every thread of the server namespace's"
      " processes; the client shares the host's %s CPUs; median [min-max] over the runs"
      % (" and ".join(map(str, rates)), dur, runs, __import__("os").cpu_count()))
print("# kept: runs in which the contender refused >= 90 % of the arrivals; refused/s: the"
      " refusals it did per second of arrivals; * on x_haproxy: one side did not keep up in"
      " some run, its CPU per refusal includes the work on arrivals it never answered")
print("%6s %-12s %8s %22s %22s %22s %20s %24s %20s" % ("rate", "contender", "kept",
      "refused/s", "us/ref", "kthread_us/ref", "procs_us/ref", "refusals/core_s", "x_haproxy"))
for rate in rates:
    by = {w: [r for r in rows if r["who"] == w and r["rate"] == rate] for w in order}
    hrs = by["haproxy-429"]
    hap = [per(r) for r in hrs]
    for who in order:
        rs = by[who]
        if not rs:
            continue
        p = [per(r) for r in rs]
        ratio = "-"
        if hap and statistics.median(hap) > 0:
            ratio = "%.1f" % (statistics.median(p) / statistics.median(hap))
            if len(rs) > 1 and len(hap) > 1:  # the spread: the worst against HAProxy's best, and the reverse
                ratio += " [%.1f-%.1f]" % (min(p) / max(hap), max(p) / max(min(hap), 1e-9))
            if who != "haproxy-429" and not all(r["kept"] for r in rs + hrs):
                ratio += "*"
        kept = sum(r["kept"] for r in rs)
        print("%6d %-12s %8s %22s %22s %22s %20s %24s %20s" % (rate, who,
              "%d/%d" % (kept, len(rs)) + ("" if kept == len(rs) else " no"),
              mmm([r["refused_per_s"] for r in rs], "%.0f"),
              mmm([us(r, "cpu_s") for r in rs], "%.1f"),
              mmm([us(r, "rx_s") for r in rs], "%.1f"),
              mmm([us(r, "procs_s") for r in rs], "%.1f"),
              mmm(p, "%.0f"), ratio))
# Each contender at the highest rate at which it kept up in every run: the side-by-side ratio at
# one rate compares a busy sluice with a HAProxy past its limit, whose figure then counts
# work on arrivals it never answered; this one compares each at its own busiest measured rate.
print("# at its busiest: the highest rate at which the contender kept up in every run,"
      " median refusals/core_s there, x_haproxy and x_nginx against HAProxy's and nginx's"
      " at their own busiest rates")
best = {}
for who in order:
    ok = [rate for rate in rates
          if (rs := [r for r in rows if r["who"] == who and r["rate"] == rate])
          and all(r["kept"] for r in rs)]
    if ok:
        rs = [r for r in rows if r["who"] == who and r["rate"] == ok[-1]]
        best[who] = (ok[-1], statistics.median([per(r) for r in rs]))
for who in order:
    if who in best:
        rate, v = best[who]
        ratio = "%.1f" % (v / best["haproxy-429"][1]) if "haproxy-429" in best else "-"
        xn = "%.1f" % (v / best["nginx-429"][1]) if "nginx-429" in best else "-"
        print("#   %-12s at %6d/s: %8.0f refusals/core_s, x_haproxy %s, x_nginx %s"
              % (who, rate, v, ratio, xn))
    elif any(r["who"] == who for r in rows):
        print("#   %-12s kept up at no rate in every run" % who)
# The raw SYN flood: sluice's RST measured with crafted SYNs, not connections, so in a table of
# its own; its ratio is against HAProxy at HAProxy's busiest rate (real connections), the only
# HAProxy figure that is a refusal and not a collapse.
fl = [r for r in rows if r["who"] == "sluice-rst-flood"]
if fl:
    frates = [0 if x == "max" else int(x) for x in sys.argv[5].split()]
    fname = lambda rate: "max" if rate == 0 else str(rate)
    hb, hnote = best.get("haproxy-429"), ", real connections"
    if not hb and any(r["who"] == "haproxy-429" for r in rows):
        # HAProxy kept up at no rate in every run: against its lowest rate, flagged
        hr = min(r["rate"] for r in rows if r["who"] == "haproxy-429")
        hb = (hr, statistics.median([per(r) for r in rows
                                     if r["who"] == "haproxy-429" and r["rate"] == hr]))
        hnote += "; HAProxy did not keep up there in every run: its figure includes work on" \
                 " arrivals it never answered"
    hrs = [r for r in rows if hb and r["who"] == "haproxy-429" and r["rate"] == hb[0]]
    hap, hflag = [per(r) for r in hrs], "" if all(r["kept"] for r in hrs) else "*"
    print("# sluice-rst-flood: the same sluice RST server, sent raw SYN frames by tools/synflood"
          " (AF_PACKET, sendmmsg, evenly spaced by the clock; max: as fast as it can) instead of"
          " real connections; refused = the RSTs that came back to the client veth (received,"
          " then dropped by the client's XDP program, or lost at its full ring), checked"
          " against sluice's own count of the RSTs it sent; lost_%%: the share lost at the"
          " client's ring; us/rx: server CPU per RST the client received (the lost ones"
          " charged to the rest); server CPU as above; x_haproxy against HAProxy's median at"
          " its busiest rate%s" % (" (%d/s%s)" % (hb[0], hnote) if hb else " (not measured)"))
    print("%6s %-16s %8s %22s %22s %8s %22s %22s %20s %8s %24s %20s" % ("rate", "contender",
          "kept", "sent/s", "refused/s", "lost_%", "us/ref", "kthread_us/ref",
          "procs_us/ref", "us/rx", "refusals/core_s", "x_haproxy"))
    for rate in frates:
        rs = [r for r in fl if r["rate"] == rate]
        if not rs:
            continue
        p = [per(r) for r in rs]
        ratio = "-"
        if hap and statistics.median(hap) > 0:
            ratio = "%.1f" % (statistics.median(p) / statistics.median(hap))
            if len(rs) > 1 and len(hap) > 1:
                ratio += " [%.1f-%.1f]" % (min(p) / max(hap), max(p) / max(min(hap), 1e-9))
            if not all(r["kept"] for r in rs) or hflag:
                ratio += "*"
        kept = sum(r["kept"] for r in rs)
        print("%6s %-16s %8s %22s %22s %8s %22s %22s %20s %8s %24s %20s" % (fname(rate),
              "sluice-rst-flood", "%d/%d" % (kept, len(rs)) + ("" if kept == len(rs) else " no"),
              mmm([r["sent_per_s"] for r in rs], "%.0f"),
              mmm([r["refused_per_s"] for r in rs], "%.0f"),
              "%.1f" % statistics.median([100 * r["c0_rx_dropped"] / max(r["rst_sent"], 1)
                                          for r in rs]),
              mmm([us(r, "cpu_s") for r in rs], "%.2f"),
              mmm([us(r, "rx_s") for r in rs], "%.2f"),
              mmm([us(r, "procs_s") for r in rs], "%.3f"),
              "%.2f" % statistics.median([1e6 * r["cpu_s"] / max(r["received"], 1) for r in rs]),
              mmm(p, "%.0f"), ratio))
    ok = [rate for rate in frates
          if (rs := [r for r in fl if r["rate"] == rate]) and all(r["kept"] for r in rs)]
    if ok:
        rs = [r for r in fl if r["rate"] == ok[-1]]
        v = statistics.median([per(r) for r in rs])
        print("# at its busiest (raw SYNs; the RST rows above are real connections):")
        print("#   %-16s at %6s/s: %8.0f refusals/core_s (%.0f refused/s), x_haproxy %s" % (
              "sluice-rst-flood", fname(ok[-1]), v,
              statistics.median([r["refused_per_s"] for r in rs]),
              "%.1f%s" % (v / hb[1], hflag) if hb else "-"))
    else:
        print("#   sluice-rst-flood kept up at no rate in every run")
EOF
cat "$OUTDIR/refusal.txt"
if [ ${#FAILED[@]} -gt 0 ]; then
	log "FAILED:"; printf 'bench-refusal:   %s\n' "${FAILED[@]}" >&2
	exit 1
fi
exit 0
