#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# sluice benchmark ("proof under load"). NOT a test: it prints ratios measured side by
# side in one run and never passes or fails on absolute time.
#
#   tools/bench.sh [BUILD]          (what `make bench` runs; needs root)
#
# 1. Per-packet cost of the BPF programs through BPF_PROG_TEST_RUN against an empty program
#    (tests/bpf/bench_pktcost.c).
# 2. The same HTTP server (build/tools/testserver: WORKERS workers x SERVICE_MS, capacity
#    WORKERS/SERVICE_MS) and the same open-loop load (build/tools/loadgen, http-new, L0 from
#    198.18.0.10 with X-Priority: L0, L3 from 198.18.0.20 with X-Priority: L3) against each
#    contender: no protection, iptables connlimit+hashlimit, HAProxy, nginx, sluice (fixed and
#    adaptive headroom). Scenarios: 0.5x (overhead), 2x and 4x overload, and a slow-downstream
#    episode (service time x20 for SLOW_S seconds) followed by recovery.
# Each contender gets fresh network namespaces (198.18.0.0/24 on a veth pair) that this script
# creates and always removes, with every process it started, on any exit (trap).
# Knobs (environment): BENCH_DUR (s per load step, default 8), BENCH_CONTENDERS,
# BENCH_LOADS ("0.5 2 4"), BENCH_OUT (default docs/results), BENCH_SKIP_PKTCOST=1.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
BUILD=${1:-build}
DUR=${BENCH_DUR:-8}
LOADS=${BENCH_LOADS:-"0.5 2 4"}
CONTENDERS=${BENCH_CONTENDERS:-"none iptables haproxy nginx sluice-fixed sluice-adaptive"}
OUT=${BENCH_OUT:-docs/results}
WORKERS=8
SERVICE_MS=20
CAPACITY=$((WORKERS * 1000 / SERVICE_MS))    # requests/s
SLOW_LOAD=0.8                                 # offered load (x capacity) of the slow episode
SLOW_PRE=5 SLOW_S=10 SLOW_POST=10             # seconds: before, during (service x20), after
TIMEOUT_MS=1000                               # client timeout: slower is not success
MIX_L0=1 MIX_L3=9                             # arrivals weight: 10% L0, 90% L3
SRV_IP=198.18.0.1
L0_IP=198.18.0.10
L3_IP=198.18.0.20
TAG=bench$$
NS_S=sl-bs-$TAG
NS_C=sl-bc-$TAG
PIN=/sys/fs/bpf/sluice-$TAG
TMP=$(mktemp -d /tmp/sluice-$TAG.XXXXXX)
IN_SRV="nsenter --net=/run/netns/$NS_S"
IN_CLI="nsenter --net=/run/netns/$NS_C"
PIDS=()
BPF_STATS_OLD=
DATE=$(date -u +%Y-%m-%d)
RAW=$TMP/raw.jsonl

log() { echo "bench: $*" >&2; }

# ------------------------------------------------------------------ cleanup (always)
stop_pids() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for i in $(seq 20); do
		local alive=0
		for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	PIDS=()
}
teardown_ns() {
	stop_pids
	if [ -d "$PIN" ]; then
		$IN_SRV "$BUILD/sluicectl" --pin-dir "$PIN" detach >/dev/null 2>&1
		rm -rf "$PIN"
	fi
	ip netns del "$NS_S" 2>/dev/null
	ip netns del "$NS_C" 2>/dev/null
}
cleanup() {
	teardown_ns
	[ -n "$BPF_STATS_OLD" ] && sysctl -qw kernel.bpf_stats_enabled="$BPF_STATS_OLD"
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

[ "$(id -u)" = 0 ] || { echo "bench: needs root (network namespaces, BPF)" >&2; exit 1; }

# ------------------------------------------------------------------ dependencies
need_pkgs() {
	local missing="" p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	log "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 ||
		{ apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends $missing >/dev/null; }
}
dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q "install ok installed" && NGINX_PKG=nginx || NGINX_PKG=nginx-light
need_pkgs haproxy $NGINX_PKG iptables gnuplot-nox python3 ethtool iproute2 bpftool ||
	{ echo "bench: cannot install the peers" >&2; exit 1; }
# Debian may start the packaged services on install: the bench never uses them.
for b in "$BUILD/sluiced" "$BUILD/sluicectl" "$BUILD/tools/testserver" "$BUILD/tools/loadgen" \
	"$BUILD/tests/xdp_pass.bpf.o" "$BUILD/bench/bench_pktcost" "$BUILD/bench/bench_tick" \
	"$BUILD/bench/empty_xdp.bpf.o"; do
	[ -e "$b" ] || { echo "bench: $b missing: run make bench" >&2; exit 1; }
done
mkdir -p "$OUT" "$BUILD/bench"
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# ------------------------------------------------------------------ 1. per-packet cost
PKTCOST=$TMP/pktcost.txt
if [ "${BENCH_SKIP_PKTCOST:-0}" != 1 ]; then
	log "per-packet cost (BPF_PROG_TEST_RUN)"
	timeout 300 "$BUILD/bench/bench_pktcost" "$BUILD/bench/empty_xdp.bpf.o" 1000000 200000 > "$PKTCOST" ||
		echo "# per-packet cost: FAILED (see stderr)" >> "$PKTCOST"
	cat "$PKTCOST"
else
	echo "# per-packet cost: skipped" > "$PKTCOST"
fi

# ------------------------------------------------------------------ 2. controller tick cost
# The pure controller (signals, AIMD, breaker, ladder, headroom, retry storm, cascade) for
# 1, 100 and 1000 services x 4 classes, without map I/O (tests/bench/bench_tick.c).
TICKCOST=$TMP/tickcost.txt
log "controller tick cost"
timeout 300 "$BUILD/bench/bench_tick" > "$TICKCOST" 2>&1 ||
	echo "# controller tick cost: FAILED" >> "$TICKCOST"
sed -i '1i # controller tick cost (us per tick, all services x 4 classes, no map I/O)' "$TICKCOST"
cat "$TICKCOST"

# ------------------------------------------------------------------ namespaces
setup_ns() {
	ip netns add "$NS_S" && ip netns add "$NS_C" || return 1
	ip link add vs-$$ netns "$NS_S" type veth peer name vc-$$ netns "$NS_C" || return 1
	$IN_SRV ip link set lo up
	$IN_CLI ip link set lo up
	$IN_SRV ip link set vs-$$ name s0
	$IN_CLI ip link set vc-$$ name c0
	$IN_SRV ip addr add $SRV_IP/24 dev s0
	$IN_CLI ip addr add 198.18.0.2/24 dev c0
	$IN_CLI ip addr add $L0_IP/24 dev c0
	$IN_CLI ip addr add $L3_IP/24 dev c0
	$IN_SRV ethtool -K s0 tx off >/dev/null 2>&1
	$IN_CLI ethtool -K c0 tx off >/dev/null 2>&1
	# Same plumbing for every contender: XDP_TX replies reach the client promptly only when
	# its veth runs an XDP program (see tests/e2e/lib.sh).
	$IN_CLI ip link set dev c0 xdpdrv obj "$BUILD/tests/xdp_pass.bpf.o" sec xdp || return 1
	$IN_CLI sysctl -qw net.ipv4.ip_local_port_range="1024 65000"
	$IN_CLI sysctl -qw net.ipv4.tcp_tw_reuse=1
	$IN_SRV sysctl -qw net.core.somaxconn=4096
	$IN_SRV ip link set s0 up
	$IN_CLI ip link set c0 up
	for i in $(seq 50); do
		$IN_CLI ip -br link show c0 | grep -q ' UP ' &&
			$IN_SRV ip -br link show s0 | grep -q ' UP ' && return 0
		sleep 0.1
	done
	return 1
}

start_bg() { # start_bg LOG CMD...
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
	LAST_PID=$!
}

wait_port() { # wait_port ADDR PORT: until something accepts in the server namespace
	for i in $(seq 50); do
		$IN_SRV bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ------------------------------------------------------------------ contenders
# Each start_X sets PROT_PIDS (processes whose CPU is the protection's) and FRONT (addr:port
# the clients use). The testserver listens on the front address itself for none, iptables and
# sluice, and on 127.0.0.1:8081 behind the proxies.
start_server() { # start_server ADDR:PORT
	rm -f "$TMP/mode"
	start_bg "$TMP/testserver.log" $IN_SRV "$BUILD/tools/testserver" --listen "$1" --mode http \
		--workers $WORKERS --service-ms $SERVICE_MS --mode-file "$TMP/mode" --quiet
	SERVER_PID=$LAST_PID
	wait_port "${1%:*}" "${1##*:}"
}

start_none() {
	PROT_PIDS=""
	FRONT=$SRV_IP:8080
	start_server $FRONT
}

start_iptables() {
	PROT_PIDS=""
	FRONT=$SRV_IP:8080
	start_server $FRONT || return 1
	sed "s/@SRV@/$SRV_IP/g; s/@L0@/$L0_IP/g" tools/bench/iptables.rules > "$TMP/iptables.rules"
	$IN_SRV iptables-restore < "$TMP/iptables.rules" || return 1
}

start_haproxy() {
	PROT_PIDS=""
	FRONT=$SRV_IP:8080
	start_server 127.0.0.1:8081 || return 1
	sed "s|@SRV@|$SRV_IP|g; s|@L0@|$L0_IP|g; s|@WORKERS@|$WORKERS|g" tools/bench/haproxy.cfg > "$TMP/haproxy.cfg"
	start_bg "$TMP/haproxy.log" $IN_SRV haproxy -db -f "$TMP/haproxy.cfg"
	PROT_PIDS=$LAST_PID
	wait_port $SRV_IP 8080
}

start_nginx() {
	PROT_PIDS=""
	FRONT=$SRV_IP:8080
	start_server 127.0.0.1:8081 || return 1
	mkdir -p "$TMP/nginx"
	sed "s|@SRV@|$SRV_IP|g; s|@L0@|$L0_IP|g; s|@TMP@|$TMP/nginx|g" tools/bench/nginx.conf > "$TMP/nginx.conf"
	start_bg "$TMP/nginx.log" $IN_SRV nginx -p "$TMP/nginx" -c "$TMP/nginx.conf" -g 'daemon off;'
	NGINX_PID=$LAST_PID
	wait_port $SRV_IP 8080 || return 1
	PROT_PIDS="$NGINX_PID $(ps -o pid= --ppid "$NGINX_PID" | tr '\n' ' ')"
}

start_sluice() { # start_sluice fixed|adaptive
	PROT_PIDS=""
	FRONT=$SRV_IP:8080
	start_server $FRONT || return 1
	sed "s|@STATE@|$TMP/state|g; s|@L0@|$L0_IP|g" "tools/bench/sluice-$1.yaml" > "$TMP/sluice.yaml"
	start_bg "$TMP/sluiced.log" $IN_SRV "$BUILD/sluiced" --config "$TMP/sluice.yaml" --pin-dir "$PIN"
	SLUICED_PID=$LAST_PID
	for i in $(seq 50); do
		"$BUILD/sluicectl" --pin-dir "$PIN" status --json 2>/dev/null |
			grep -q '"controller_alive":true' && break
		kill -0 "$SLUICED_PID" 2>/dev/null || { cat "$TMP/sluiced.log" >&2; return 1; }
		sleep 0.1
	done
	PROT_PIDS=$SLUICED_PID
	# The programs on s0, for kernel.bpf_stats run time.
	SLUICE_PROGS=$($IN_SRV bpftool -j net show dev s0 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); ids=set()
def walk(x):
    if isinstance(x,dict):
        for k,v in x.items():
            if k=="id" and isinstance(v,int): ids.add(v)
            else: walk(v)
    elif isinstance(x,list):
        for v in x: walk(v)
walk(d); print(" ".join(str(i) for i in sorted(ids)))')
	[ -n "$SLUICE_PROGS" ] || { log "cannot find sluice programs on s0"; return 1; }
}

# ------------------------------------------------------------------ measurement
proc_cpu_ns() { # sum of utime+stime (ns) of PROT_PIDS
	local t=0 p tk
	tk=$(getconf CLK_TCK)
	for p in $PROT_PIDS; do
		[ -r /proc/$p/stat ] || continue
		t=$((t + $(awk '{print $14 + $15}' /proc/$p/stat)))
	done
	echo $((t * 1000000000 / tk))
}
bpf_ns() { # sum of run_time_ns of SLUICE_PROGS
	local t=0 id v
	for id in ${SLUICE_PROGS:-}; do
		v=$(bpftool -j prog show id "$id" 2>/dev/null |
			python3 -c 'import json,sys; print(json.load(sys.stdin).get("run_time_ns",0))' 2>/dev/null)
		t=$((t + ${v:-0}))
	done
	echo $t
}
softirq_ns() { # all CPUs' softirq time (ns), from /proc/stat
	awk -v tk="$(getconf CLK_TCK)" '/^cpu /{printf "%d\n", $8 * 1e9 / tk}' /proc/stat
}
sluice_rejected() {
	"$BUILD/sluicectl" --pin-dir "$PIN" status --json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); s=d["services"][0]
print(sum(c.get("rejected",0) for c in s["classes"]), sum(c.get("admitted",0) for c in s["classes"]))' 2>/dev/null
}

# run_load CONTENDER SCENARIO LOAD DURATION [episode]: one loadgen run, one JSON record.
run_load() {
	local who=$1 scen=$2 load=$3 dur=$4 episode=${5:-}
	local rate lg=$TMP/lg.json ts=$TMP/lg.err c0 c1 b0 b1 s0 s1 r0 r1
	rate=$(python3 -c "print(round($load * $CAPACITY, 1))")
	c0=$(proc_cpu_ns); b0=$(bpf_ns); s0=$(softirq_ns)
	[ "${who#sluice}" != "$who" ] && r0=$(sluice_rejected) || r0="0 0"
	timeout -s INT $((dur + 20)) $IN_CLI "$BUILD/tools/loadgen" --target "$FRONT" \
		--mode http-new --rate "$rate" --duration "$dur" --timeout-ms $TIMEOUT_MS \
		--report-interval 0.5 --quiet \
		--class "L0:$MIX_L0:src=$L0_IP:header" --class "L3:$MIX_L3:src=$L3_IP:header" \
		> "$lg" 2> "$ts" &
	local lpid=$!
	if [ -n "$episode" ]; then
		sleep $SLOW_PRE
		echo "service_ms=$((SERVICE_MS * 20))" > "$TMP/mode.new" && mv "$TMP/mode.new" "$TMP/mode"
		sleep $SLOW_S
		rm -f "$TMP/mode"
	fi
	wait $lpid
	c1=$(proc_cpu_ns); b1=$(bpf_ns); s1=$(softirq_ns)
	[ "${who#sluice}" != "$who" ] && r1=$(sluice_rejected) || r1="0 0"
	python3 - "$lg" "$ts" "$who" "$scen" "$load" "$dur" "$((c1 - c0))" "$((b1 - b0))" \
		"$((s1 - s0))" "$r0" "$r1" >> "$RAW" <<'PY'
import json, sys, re
lg, ts, who, scen, load, dur, cpu, bpf, sirq, r0, r1 = sys.argv[1:]
try:
    d = json.load(open(lg))
except Exception as e:
    d = {"error": "loadgen output unreadable: %s" % e}
series = []
for line in open(ts):
    m = re.search(r"t=([\d.]+)s sent=(\d+) ok=(\d+) rejected=(\d+) errors=(\d+) outstanding=(\d+)", line)
    if m:
        series.append([float(m.group(1))] + [int(x) for x in m.groups()[1:]])
r0 = [int(x) for x in r0.split()] or [0, 0]; r1 = [int(x) for x in r1.split()] or [0, 0]
print(json.dumps({"who": who, "scenario": scen, "load": float(load), "dur": float(dur),
                  "prot_cpu_ns": int(cpu), "bpf_ns": int(bpf), "softirq_ns": int(sirq),
                  "sluice_rejected": r1[0] - r0[0], "sluice_admitted": r1[1] - r0[1],
                  "loadgen": d, "series": series}))
PY
}

start_contender() { # start_contender NAME: fresh namespaces, server, protection, warm-up
	local who=$1
	setup_ns || { log "cannot set up namespaces for $who"; teardown_ns; return 1; }
	case $who in
	none) start_none ;;
	iptables) start_iptables ;;
	haproxy) start_haproxy ;;
	nginx) start_nginx ;;
	sluice-fixed) start_sluice fixed ;;
	sluice-adaptive) start_sluice adaptive ;;
	*) log "unknown contender $who"; false ;;
	esac || { log "cannot start $who"; teardown_ns; return 1; }
	# warm-up (not recorded): connections, caches, sluice's AIMD/auto target from real samples
	timeout -s INT 20 $IN_CLI "$BUILD/tools/loadgen" --target "$FRONT" --mode http-new \
		--rate $((CAPACITY / 2)) --duration 2 --timeout-ms $TIMEOUT_MS --quiet \
		--class "L0:$MIX_L0:src=$L0_IP:header" --class "L3:$MIX_L3:src=$L3_IP:header" >/dev/null 2>&1
}

# Every scenario starts from a fresh contender: an unprotected server keeps working off the
# backlog of requests its clients already gave up on, which would spill into the next step.
bench_contender() { # bench_contender NAME
	local who=$1
	log "contender $who"
	for l in $LOADS; do
		start_contender "$who" || return 1
		log "  $who load ${l}x for ${DUR}s"
		run_load "$who" "load" "$l" "$DUR"
		[ "${who#sluice}" != "$who" ] && cp "$TMP/sluiced.log" "$TMP/sluiced-$who-$l.log" 2>/dev/null
		teardown_ns
	done
	start_contender "$who" || return 1
	log "  $who slow-downstream episode (${SLOW_LOAD}x, service x20 for ${SLOW_S}s)"
	run_load "$who" "slow" "$SLOW_LOAD" $((SLOW_PRE + SLOW_S + SLOW_POST)) episode
	[ "${who#sluice}" != "$who" ] && cp "$TMP/sluiced.log" "$TMP/sluiced-$who-slow.log" 2>/dev/null
	teardown_ns
}

# ------------------------------------------------------------------ 2. under load
BPF_STATS_OLD=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null)
sysctl -qw kernel.bpf_stats_enabled=1
: > "$RAW"
T0=$(date +%s)
for who in $CONTENDERS; do
	bench_contender "$who"
done
log "load runs took $(($(date +%s) - T0)) s"

RESULT=$OUT/bench-$DATE.txt
{
	echo "# sluice benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs"
	echo "# command: make bench   (tools/bench.sh $BUILD; BENCH_DUR=$DUR)"
	echo "# server: testserver $WORKERS workers x ${SERVICE_MS} ms = capacity $CAPACITY req/s;" \
		"load: loadgen http-new, Poisson, L0 $((100 * MIX_L0 / (MIX_L0 + MIX_L3)))% / L3," \
		"timeout ${TIMEOUT_MS} ms"
	echo
	cat "$PKTCOST"
	echo
	cat "$TICKCOST"
	echo
	python3 tools/bench/report.py "$RAW" "$CAPACITY" "$OUT/goodput.dat" \
		"$SLOW_PRE" "$SLOW_S"
} > "$RESULT"
cp "$RAW" "$OUT/bench-$DATE.raw.jsonl"
for f in "$TMP"/sluiced-*.log; do
	[ -e "$f" ] && cp "$f" "$OUT/$DATE-$(basename "$f")"
done
NAMES=$(grep '^# ' "$OUT/goodput.dat" | cut -c3- | tr '\n' ' ')
gnuplot -e "datafile='$OUT/goodput.dat'; outfile='$OUT/goodput.png'; names='$NAMES'" tools/bench/plot.gnuplot 2>&1 |
	grep -v "^$" >&2
cat "$RESULT"
log "results: $RESULT, $OUT/goodput.png"
