#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# sluice benchmark. NOT a test: it prints numbers measured side by side in one run and never
# passes or fails on absolute time. It does fail (exit non-zero, after cleaning up) when a
# contender, a server or a load tool cannot start or run, and says which and why.
#
#   tools/bench.sh [BUILD]          (what `make bench` runs; needs root)
#
# 1. Per-packet cost of the BPF programs (BPF_PROG_TEST_RUN, BUILD/bench/bench_pktcost),
#    controller tick cost (BUILD/bench/bench_tick) and the daemon's whole tick on the real maps
#    for 1 to 4096 services configured and active (BUILD/bench/bench_daemon), the in-flight
#    accounting on 1 CPU and on every CPU at once (BUILD/bench/bench_inflight), all built by
#    make; then sluiced itself attached with 1 to 4096 services configured, few active: its
#    CPU from /proc/PID/stat over BENCH_IDLE_S seconds, each size also as a ratio to 1 service.
# 2. HTTP on a real server: Apache httpd (event MPM, WORKERS threads, a handler that sleeps
#    SERVICE_MS; tools/bench/apache/) whose capacity is measured at the start of every run.
#    L0 clients (source 198.18.0.10, X-Priority: L0, about 4 % of the clients or arrivals) and
#    an L3 surge (198.18.0.20, X-Priority: L3) on keep-alive connections, at LOADS x capacity:
#      http-closed  wrk, closed loop: LOAD x WORKERS connections in all (each one is a client
#                   that sends its next request when the last one is answered);
#      http-open    tools/loadgen, open loop: Poisson arrivals at LOAD x capacity per second.
#    Contenders: none, iptables (connlimit), HAProxy (priority classes + queue), nginx
#    (limit_conn + limit_req), sluice as written on day one, sluice tuned. Each peer's config
#    file says why it is set the way it is; every one is sized from the same capacity figures.
#    L0 alone (same L0 load, no surge, no protection) is measured in every run as the baseline.
#      step         tools/loadgen, open loop: 0.5x for STEP_PRE s, 4x for BENCH_DUR s, 0.5x
#                   for STEP_POST s (STEP_CONTENDERS); every request's arrival and latency
#                   (--trace) and, for sluice, its /metrics every 100 ms give the
#                   time until the admitted p99 is back within 1.2x its pre-step value and the
#                   time until full admission after the surge (tools/bench/surge.py).
# 3. PostgreSQL (tools/bench/pg.sh BUILD OUTDIR, when present; docs/BENCHMARKS.md section 4).
# 4. What one refusal costs the host: sluice's XDP RST and in-kernel 429 against HAProxy's and
#    nginx's 429, as refusals per second per core and ratios, at a quiet and at a flood rate of
#    new connections (tools/bench/refusal.sh; REFUSAL_RATES, default "3000 20000"), and
#    sluice's RST under a raw SYN flood (tools/synflood; REFUSAL_FLOOD_RATES, default
#    "20000 100000 300000 max").
# Every (contender, scenario, load) step gets fresh network namespaces (198.18.0.0/24 on a
# veth pair), a fresh server and a fresh contender; all of it, with every process the bench
# started, is removed on any exit (trap).
#
# Knobs (environment):
#   BENCH_DUR        seconds per measured step (default 7; the PostgreSQL steps too when given,
#                    else PG_DUR, default 6 here)
#   BENCH_IDLE_S     seconds of each sluiced-at-rest measurement of the micro scenario (default 10)
#   BENCH_RUNS       repetitions of everything, reported as median [min-max] (default 3)
#   BENCH_SCENARIOS  any of "micro http-closed http-open step pg refusal" (default: all six), and
#                    "soak" (opt-in: connection churn for SOAK_SECONDS, default 1800, ending with
#                    in-flight checked to be exactly 0; tools/bench/soak.sh). A run of other
#                    than the default set writes docs/results/bench-DATE-SCENARIOS.* and does not
#                    touch the README's and docs/BENCHMARKS.md's results sections.
#   BENCH_LOADS      offered load, x capacity (default "2 3.5 10")
#   BENCH_CONTENDERS (default "none iptables haproxy nginx sluice-dayone sluice-tuned"; also
#                    sluice-fixedN: day one with only the limit fixed at N (a point of the
#                    trade-off between goodput and L0's tail that the adaptive limit picks from);
#                    any sluice-NAME with a tools/bench/sluice-NAME.yaml, such as
#                    sluice-dayone-cap and sluice-dayone-nocap: day one with connection_cap auto
#                    and off, for the A/B of the default churn gate; sluice-dayone-aimd: day one
#                    with limit_algorithm aimd, for the A/B of the limit's algorithm)
#   STEP_CONTENDERS  the step scenario's contenders (default "haproxy sluice-dayone"); STEP_PRE
#                    (default 4) and STEP_POST (default 11) seconds around the surge
#   STEP_KEEP        a directory: keep each step run's loadgen trace and /metrics samples there
#   BENCH_L0_TRACE   a directory: the closed loop's L0 client (wrk, one thread per connection)
#                    writes every response's send time and latency there, a file per
#                    connection, named WHO-LOAD-RUN-N.txt (tools/bench/wrk-l0trace.lua; read with
#                    tools/bench/l0trace.py): which of L0's requests make its p99, and when
#   BENCH_SLUICED_ARGS extra sluiced options for the sluice contenders (e.g. -v: the limit's probes
#                    and other debug events in the logs the bench keeps)
#   BENCH_SEED       base seed of the open-loop arrivals (default 1; run r uses seed + r)
#   BENCH_OUT        output directory (default docs/results); with the default, the results
#                    section of docs/BENCHMARKS.md is regenerated from the run
#
# Duration of the default run (BENCH_RUNS=3, 7 s HTTP steps, 6 s PostgreSQL steps): about
# 30 minutes on the 2-vCPU VM, estimated from a quick run's timings (BENCH_RUNS=1 BENCH_DUR=3
# PG_DUR=4: 430 s): an HTTP step costs its duration + about 3.2 s (namespaces, server,
# contender, 2 s warm-up, teardown), 42 steps and a 5 s capacity measurement per run:
# 3 x (42 x 10.2 + 7) = ~1300 s; PostgreSQL 44 x PG_DUR + ~225 s = ~490 s; the micro
# benchmarks ~25 s; the refusal cost 2 rates x 4 x 3 x (5 s + ~4 s) = ~4 minutes (223 s
# measured) and its raw SYN flood 4 rates x 3 x (5 s + ~4 s) = ~2 minutes; the step scenario
# 3 x 2 contenders x (STEP_PRE + BENCH_DUR + STEP_POST + ~3 s) = ~150 s (measured: 26 s for
# one contender and run), so about 37 minutes in all (the full run
# before it took 1871 s; the one at 052d909, refusal cost at one rate, 2199 s). With the
# earlier defaults (8 s and 10 s) it was ~35 minutes.
set -u
# Debian's own tools first (what tools/install-deps.sh installs): a python3 found earlier on
# PATH may be a version-manager shim that costs 0.1-2 s per start and lacks python3-yaml.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
BUILD=${1:-build}
DUR=${BENCH_DUR:-7}
RUNS=${BENCH_RUNS:-3}
DEFAULT_SCENARIOS="micro http-closed http-open step pg refusal"
SCENARIOS=${BENCH_SCENARIOS:-$DEFAULT_SCENARIOS}
STEP_CONTENDERS=${STEP_CONTENDERS:-"haproxy sluice-dayone"}
STEP_KEEP=${STEP_KEEP:-}
STEP_PRE=${STEP_PRE:-4}
STEP_POST=${STEP_POST:-11}
LOADS=${BENCH_LOADS:-"2 3.5 10"}
CONTENDERS=${BENCH_CONTENDERS:-"none iptables haproxy nginx sluice-dayone sluice-tuned"}
SEED=${BENCH_SEED:-1}
OUT=${BENCH_OUT:-docs/results}
WORKERS=16                 # Apache worker threads
SERVICE_MS=50              # handler time: nominal capacity WORKERS / SERVICE_MS = 320 req/s
L0_PCT=4                   # L0 share of the clients (closed loop) or arrivals (open loop)
TIMEOUT_MS=1000            # client timeout: slower is not success
CAL_S=5                    # seconds of the capacity measurement
SRV_IP=198.18.0.1
L0_IP=198.18.0.10
L3_IP=198.18.0.20
L0_UID=65534               # the closed-loop L0 client runs as this user: its own source route
TAG=bench$$
NS_S=sl-bs-$TAG
NS_C=sl-bc-$TAG
PIN=/sys/fs/bpf/sluice-$TAG
TMP=$(mktemp -d /tmp/sluice-$TAG.XXXXXX)
IN_SRV="nsenter --net=/run/netns/$NS_S"
IN_CLI="nsenter --net=/run/netns/$NS_C"
PIDS=()
DATE=$(date -u +%F)
RAW=$TMP/raw.jsonl
FAILED=()                  # what could not start or run: makes the bench exit non-zero

log() { echo "bench: $*" >&2; }
. tools/bench/lib.sh       # need_pkgs, start_bg, stop_pids, wait_port, setup_ns, ...
. tests/e2e/iproute2_pins.sh   # remove_iproute2_pins
has() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }

# ------------------------------------------------------------------ cleanup (always)
teardown_ns() {
	stop_pids
	detach_pins
	# Apache's worker process is a child of the one we started; it leaves with the namespace's
	# last listener, but make sure nothing of ours survives.
	if [ -e /run/netns/$NS_S ]; then
		local p
		for p in $(ip netns pids "$NS_S" 2>/dev/null) $(ip netns pids "$NS_C" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
	fi
	ip netns del "$NS_S" 2>/dev/null
	ip netns del "$NS_C" 2>/dev/null
}
cleanup() {
	teardown_ns
	remove_iproute2_pins
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

[ "$(id -u)" = 0 ] || { echo "bench: needs root (network namespaces, BPF)" >&2; exit 1; }
[ "$RUNS" -ge 1 ] 2>/dev/null || { echo "bench: BENCH_RUNS must be >= 1" >&2; exit 1; }

# ------------------------------------------------------------------ dependencies
dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q "install ok installed" && NGINX_PKG=nginx || NGINX_PKG=nginx-light
need_pkgs apache2 wrk haproxy $NGINX_PKG iptables gnuplot-nox python3 ethtool iproute2 bpftool \
	util-linux git || { echo "bench: cannot install the peers, servers or tools" >&2; exit 1; }
# Debian may start the packaged services on install: the bench never uses them; its own
# copies run in its namespaces with configs from tools/bench/.
for b in "$BUILD/sluiced" "$BUILD/sluicectl" "$BUILD/tools/loadgen" "$BUILD/tests/xdp_pass.bpf.o"; do
	[ -e "$b" ] || { echo "bench: $b missing: run make bench" >&2; exit 1; }
done
if has micro "$SCENARIOS"; then
	for b in "$BUILD/bench/bench_pktcost" "$BUILD/bench/bench_tick" "$BUILD/bench/bench_daemon" \
		"$BUILD/bench/bench_inflight" "$BUILD/bench/empty_xdp.bpf.o" "$BUILD/tools/testserver"; do
		[ -e "$b" ] || { echo "bench: $b missing: run make bench" >&2; exit 1; }
	done
fi
mkdir -p "$OUT"
chmod 711 "$TMP"                # the closed-loop L0 client (an unprivileged user) reads a script here
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null

# Results are stamped with the commit and whether the tree differed from it (modified or
# untracked files, such as a new user/*.c the Makefile would build; earlier bench output in
# docs/results does not count).
REV=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$REV" = unknown ]; then DIRTY=unknown
elif [ -z "$(git status --porcelain -- . ':!docs/results' 2>/dev/null)" ]; then DIRTY=false
else DIRTY=true; fi
STAMP="commit $REV$([ "$DIRTY" = true ] && echo ' (dirty: uncommitted changes)')"
log "$STAMP"
T_START=$(date +%s)

# ------------------------------------------------------------------ 1. micro benchmarks
MICRO=$TMP/micro.txt
: > "$MICRO"
if has micro "$SCENARIOS"; then
	log "per-packet cost (BPF_PROG_TEST_RUN)"
	if ! timeout 300 "$BUILD/bench/bench_pktcost" "$BUILD/bench/empty_xdp.bpf.o" 1000000 \
		>> "$MICRO" 2> "$TMP/pktcost.err"; then
		log "bench_pktcost failed: $(tail -3 "$TMP/pktcost.err")"
		FAILED+=("bench_pktcost: $(tail -1 "$TMP/pktcost.err")")
	fi
	echo >> "$MICRO"
	log "controller tick cost"
	echo "# controller tick cost (us per tick, all services x 4 classes, no map I/O)" >> "$MICRO"
	if ! timeout 300 "$BUILD/bench/bench_tick" >> "$MICRO" 2> "$TMP/tick.err"; then
		log "bench_tick failed: $(tail -3 "$TMP/tick.err")"
		FAILED+=("bench_tick: $(tail -1 "$TMP/tick.err")")
	fi
	echo >> "$MICRO"
	log "daemon tick cost (real maps, batched reads)"
	if ! timeout 300 "$BUILD/bench/bench_daemon" >> "$MICRO" 2> "$TMP/daemon.err"; then
		log "bench_daemon failed: $(tail -3 "$TMP/daemon.err")"
		FAILED+=("bench_daemon: $(tail -1 "$TMP/daemon.err")")
	fi
	echo >> "$MICRO"
	log "in-flight accounting across CPUs (one thread pinned per CPU)"
	echo "# in-flight accounting: ns per unit on 1 CPU and on every CPU at once" >> "$MICRO"
	if ! timeout 300 "$BUILD/bench/bench_inflight" 5000000 7 >> "$MICRO" 2> "$TMP/inflight.err"; then
		log "bench_inflight failed: $(tail -3 "$TMP/inflight.err")"
		FAILED+=("bench_inflight: $(tail -1 "$TMP/inflight.err")")
	fi
	cat "$MICRO" >&2
fi

# ------------------------------------------------------------------ namespaces
# Both namespaces and the veth pair (tools/bench/lib.sh), L3's address first so that it is
# the subnet route's source; wrk cannot pick its source address: sockets of user L0_UID leave
# from L0_IP (policy route by uid), every other unbound socket from L3_IP.
setup_http_ns() {
	setup_ns $SRV_IP $L3_IP $L0_IP || return 1
	$IN_CLI ip route replace 198.18.0.0/24 dev c0 src $L3_IP &&
		$IN_CLI ip route add 198.18.0.0/24 dev c0 src $L0_IP table 100 &&
		$IN_CLI ip rule add uidrange $L0_UID-$L0_UID table 100 pref 100
}

why() { # why LOGFILE...: the last lines of a failed program's logs, on one line
	tail -q -n 3 "$@" 2>/dev/null | tr '\n' ' ' | cut -c1-300
}

# ------------------------------------------------------------------ 1b. sluiced at rest
# sluiced attached with many configured services of which a few have traffic (10 loadgens at
# 20 connections/s each): its CPU over IDLE_S seconds from /proc/PID/stat (user + system, all
# its threads), in % of one core.
IDLE_S=${BENCH_IDLE_S:-10}
proc_cpu_ticks() { # utime + stime of a process (fields 14 and 15, counted after the comm)
	sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
idle_cpu() { # idle_cpu CONFIGURED ACTIVE: one line for the micro results
	local n=$1 active=$2 cfg=$TMP/idle-$1.yaml port step i t0 t1 hz pid listen=""
	printf 'interface: s0\nmetrics_address: 127.0.0.1:0\nstate_dir: %s/idle-state\nservices:\n' \
		"$TMP" > "$cfg"
	awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "  - { name: s%d, port: %d }\n", i, 20000 + i }' >> "$cfg"
	setup_ns $SRV_IP $L3_IP || { echo "# idle $n/$active: cannot set up namespaces"; return 1; }
	step=$((active > 0 ? n / active : 1))
	for i in $(seq 0 $((active - 1))); do listen="$listen --listen $SRV_IP:$((20000 + i * step))"; done
	[ "$active" -gt 0 ] && start_bg "$TMP/idle-server.log" $IN_SRV "$BUILD/tools/testserver" $listen \
		--mode tcp --workers 4 --service-ms 1
	start_bg "$TMP/sluiced-idle-$n.log" $IN_SRV "$BUILD/sluiced" --config "$cfg" --pin-dir "$PIN"
	pid=$LAST_PID
	for i in $(seq 100); do grep -q '"to":"attached"' "$TMP/sluiced-idle-$n.log" && break; sleep 0.1; done
	if ! grep -q '"to":"attached"' "$TMP/sluiced-idle-$n.log"; then
		echo "# idle $n/$active: sluiced did not attach: $(why "$TMP/sluiced-idle-$n.log")"
		teardown_ns; return 1
	fi
	for i in $(seq 0 $((active - 1))); do
		start_bg "$TMP/idle-lg-$i.json" $IN_CLI "$BUILD/tools/loadgen" --target \
			$SRV_IP:$((20000 + i * step)) --mode tcp --rate 20 --duration $((IDLE_S + 4)) --quiet
	done
	sleep 2                        # past the start: controllers run once, then rest
	hz=$(getconf CLK_TCK); t0=$(proc_cpu_ticks "$pid"); sleep "$IDLE_S"; t1=$(proc_cpu_ticks "$pid")
	awk -v n="$n" -v a="$active" -v d=$((t1 - t0)) -v hz="$hz" -v s="$IDLE_S" \
		'BEGIN { printf "%10d %7d %8.2f %9.1f\n", n, a, 100 * d / hz / s, 1000 * d / hz / s }'
	teardown_ns
}
if has micro "$SCENARIOS"; then
	log "sluiced at rest: CPU with many services configured, few active"
	{
		echo
		echo "# sluiced CPU, attached, ${IDLE_S} s from /proc/PID/stat (every thread); active services get 20 tcp connections/s; x_1 = cpu / cpu with 1 service"
		printf '%10s %7s %8s %9s %7s\n' configured active cpu% ms_per_s x_1
		# in this shell, not a pipeline's subshell: the cleanup trap must see every pid
		: > "$TMP/idle.txt"
		for na in "1 1" "100 10" "1000 0" "1000 10" "4096 10"; do
			idle_cpu $na >> "$TMP/idle.txt"
		done
		awk '/^#/ { print; next } { if (!base) base = $3 > 0 ? $3 : 0.001
			printf "%s %7.1f\n", $0, $3 / base }' "$TMP/idle.txt"
	} >> "$MICRO"
	tail -7 "$MICRO" >&2
fi

# ------------------------------------------------------------------ server and contenders
# start_apache ADDR:PORT: Apache behind (127.0.0.1:8081) or in place of (the front) a contender.
start_apache() {
	local d=$TMP/apache
	rm -rf "$d"; mkdir -p "$d"; chmod 755 "$d"
	sed "s|@TMP@|$d|g; s|@LISTEN@|$1|g; s|@WORKERS@|$WORKERS|g; s|@SERVICE_MS@|$SERVICE_MS|g" \
		tools/bench/apache/httpd.conf > "$d/httpd.conf"
	sed "s|@SERVICE_US@|$((SERVICE_MS * 1000))|g" tools/bench/apache/work.lua > "$d/work.lua"
	start_bg "$d/stdout.log" $IN_SRV apache2 -f "$d/httpd.conf" -DFOREGROUND
	wait_port "${1%:*}" "${1##*:}" "$LAST_PID" ||
		{ WHY="apache: $(why "$d/stdout.log" "$d/error.log")"; return 1; }
}

fill() { # fill TEMPLATE OUTFILE: the capacity figures every peer is sized from
	sed "s|@SRV@|$SRV_IP|g; s|@L0@|$L0_IP|g; s|@WORKERS@|$WORKERS|g; s|@QUEUE@|$WORKERS|g;
	     s|@LIMIT@|$((2 * WORKERS))|g; s|@RATE@|$CAP_INT|g; s|@STATE@|$TMP/state|g;
	     s|@TMP@|$TMP/peer|g" "$1" > "$2"
}

start_none() { start_apache $SRV_IP:8080; }

start_iptables() {
	start_apache $SRV_IP:8080 || return 1
	fill tools/bench/iptables.rules "$TMP/iptables.rules"
	$IN_SRV iptables-restore < "$TMP/iptables.rules" 2> "$TMP/iptables.err" ||
		{ WHY="iptables-restore: $(why "$TMP/iptables.err")"; return 1; }
}

start_haproxy() {
	start_apache 127.0.0.1:8081 || return 1
	fill tools/bench/haproxy.cfg "$TMP/haproxy.cfg"
	start_bg "$TMP/haproxy.log" $IN_SRV haproxy -db -f "$TMP/haproxy.cfg"
	wait_port $SRV_IP 8080 "$LAST_PID" || { WHY="haproxy: $(why "$TMP/haproxy.log")"; return 1; }
}

start_nginx() {
	start_apache 127.0.0.1:8081 || return 1
	rm -rf "$TMP/peer"; mkdir -p "$TMP/peer"
	fill tools/bench/nginx.conf "$TMP/nginx.conf"
	start_bg "$TMP/nginx.log" $IN_SRV nginx -p "$TMP/peer" -c "$TMP/nginx.conf" -g 'daemon off;'
	wait_port $SRV_IP 8080 "$LAST_PID" ||
		{ WHY="nginx: $(why "$TMP/nginx.log" "$TMP/peer/error.log")"; return 1; }
}

start_sluice() { # start_sluice dayone|tuned|...|fixedN
	start_apache $SRV_IP:8080 || return 1
	case $1 in
	fixed[0-9]*) # day one with only the limit fixed at N: a point of the limit's trade-off
		fill tools/bench/sluice-dayone.yaml "$TMP/sluice.yaml" &&
			sed -i "s|limit: { min: 4, max: 512 }|limit: { fixed: ${1#fixed} }|" "$TMP/sluice.yaml"
		# day one's limit line changed: run nothing rather than day one under this name
		grep -q "limit: { fixed: ${1#fixed} }" "$TMP/sluice.yaml" ||
			{ WHY="sluice-$1: tools/bench/sluice-dayone.yaml has no 'limit: { min: 4, max: 512 }' to fix"; return 1; } ;;
	*) fill "tools/bench/sluice-$1.yaml" "$TMP/sluice.yaml" ;;
	esac
	start_bg "$TMP/sluiced.log" $IN_SRV "$BUILD/sluiced" --config "$TMP/sluice.yaml" --pin-dir "$PIN" \
		${BENCH_SLUICED_ARGS:-}
	sluice_up "$LAST_PID" && return 0
	WHY="sluiced: $(why "$TMP/sluiced.log")"
	return 1
}

start_contender() { # start_contender NAME: fresh namespaces, server, protection
	WHY=""
	setup_http_ns || { WHY="cannot set up the network namespaces"; return 1; }
	case $1 in
	none) start_none ;;
	iptables) start_iptables ;;
	haproxy) start_haproxy ;;
	nginx) start_nginx ;;
	# any tools/bench/sluice-NAME.yaml (dayone, tuned, the day-one variants of experiments)
	sluice-fixed[0-9]*) start_sluice "${1#sluice-}" ;;
	sluice-*) [ -f "tools/bench/$1.yaml" ] && start_sluice "${1#sluice-}" ;;
	*) WHY="unknown contender"; false ;;
	esac
}

# ------------------------------------------------------------------ load
cpu_stat() { # whole-host "busy total" jiffies (all CPUs; busy includes irq and softirq)
	awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat
}

# wrk_run LOG CONNS CLASS SECONDS [as-L0-user [TRACE-PREFIX]]: closed loop, JSON result line
# in LOG; with a trace prefix, every response's latency in PREFIX-N.txt (one thread and file
# per connection)
wrk_run() {
	local log=$1 conns=$2 class=$3 secs=$4 asl0=${5:-} trace=${6:-} threads=2
	local script=$TMP/wrk/report.lua
	[ "$conns" -lt 2 ] && threads=1
	[ -n "$trace" ] && { threads=$conns; script=$TMP/wrk/l0trace.lua; }
	local cmd=(wrk -t$threads -c"$conns" -d"${secs}s" --timeout "$((TIMEOUT_MS / 1000))s"
		-H "X-Priority: $class" -s "$script" "http://$SRV_IP:8080/")
	[ -n "$trace" ] && cmd+=(-- "$trace")
	if [ -n "$asl0" ]; then
		cmd=(setpriv --reuid=$L0_UID --regid=$L0_UID --clear-groups "${cmd[@]}")
	fi
	timeout -s KILL $((secs + 30)) $IN_CLI "${cmd[@]}" > "$log" 2>&1
}

# loadgen_run LOG RATE SECONDS SEED CLASS...: open loop, JSON result in LOG
loadgen_run() {
	local log=$1 rate=$2 secs=$3 seed=$4; shift 4
	local cl=() c
	for c in "$@"; do cl+=(--class "$c"); done
	timeout -s INT $((secs + 30)) $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 \
		--mode http-keepalive --rate "$rate" --duration "$secs" --timeout-ms $TIMEOUT_MS \
		--seed "$seed" --report-interval 0.5 --quiet "${cl[@]}" > "$log" 2> "$log.err"
}

l0_conns() { # closed loop: L0 clients out of LOAD x WORKERS
	python3 -c "n=round($1*$WORKERS); print(max(1, round(n*$L0_PCT/100)), n)"
}

# measure WHO SCENARIO LOAD RUN: one measured step, one JSON record in RAW
measure() {
	local who=$1 scen=$2 load=$3 run=$4 c0 c1 rc0=0 rc3=0 l0 n l3
	local d=$TMP/step
	rm -rf "$d"; mkdir -p "$d"
	c0=$(cpu_stat)
	if [ "$scen" = http-closed ]; then
		read -r l0 n < <(l0_conns "$load"); l3=$((n - l0))
		local tr=""
		[ -n "${BENCH_L0_TRACE:-}" ] && tr=$TMP/l0trace/$who-$load-$run
		if [ "$who" = L0-alone ]; then
			wrk_run "$d/l0" "$l0" L0 "$DUR" as-l0 "$tr" || rc0=$?
		else
			wrk_run "$d/l3" "$l3" L3 "$DUR" & local p3=$!
			PIDS+=($p3)        # stopped with the rest if the bench is interrupted
			wrk_run "$d/l0" "$l0" L0 "$DUR" as-l0 "$tr" || rc0=$?
			wait $p3 || rc3=$?
			forget_pids $p3
		fi
		if [ -n "$tr" ]; then
			cp "$tr"-*.txt "$BENCH_L0_TRACE"/ 2>/dev/null ||
				log "BENCH_L0_TRACE: $who $load run $run left no trace"
			rm -f "$tr"-*.txt
		fi
	else
		local rate l0rate seed=$((SEED + run))
		rate=$(python3 -c "print(round($load * $CAP, 1))")
		l0rate=$(python3 -c "print(round($load * $CAP * $L0_PCT / 100, 1))")
		if [ "$who" = L0-alone ]; then
			loadgen_run "$d/lg" "$l0rate" "$DUR" "$seed" "L0:1:src=$L0_IP:header" || rc0=$?
		else
			loadgen_run "$d/lg" "$rate" "$DUR" "$seed" "L0:$L0_PCT:src=$L0_IP:header" \
				"L3:$((100 - L0_PCT)):src=$L3_IP:header" || rc0=$?
		fi
	fi
	c1=$(cpu_stat)
	python3 tools/bench/record.py "$d" "$who" "$scen" "$load" "$run" "$DUR" "$CAP" \
		"$rc0" "$rc3" "$c0" "$c1" "$REV" "$DIRTY" "$DATE" >> "$RAW" ||
		{ FAILED+=("$who $scen ${load}x run $run: load tool failed: $(tail -c 300 "$RAW")"); 
		  log "  FAILED: load tool ($(tail -c 300 "$RAW"))"; }
}

# step_run WHO RUN: the step scenario for one contender (fresh namespaces, server, contender):
# open loop at 0.5x, 4x for DUR s, 0.5x again; one "surge" record in RAW (tools/bench/surge.py)
step_run() {
	local who=$1 run=$2 d=$TMP/surge total r0 r4 t0
	rm -rf "$d"; mkdir -p "$d"; : > "$d/status"
	total=$((STEP_PRE + DUR + STEP_POST))
	r0=$(python3 -c "print(round(0.5 * $CAP, 1))"); r4=$(python3 -c "print(round(4 * $CAP, 1))")
	case $who in sluice*)
		# sluice's limit and ladder every 100 ms from its /metrics (sluicectl status takes
		# 250 ms per call: it measures rates), for the run's length
		start_bg "$d/poll.log" $IN_SRV python3 tools/bench/surge.py poll 127.0.0.1:9477 \
			$((total + 2)) "$d/status" ;;
	esac
	t0=$(date +%s.%N)
	timeout -s INT $((total + 30)) $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 \
		--mode http-keepalive --rate "$r0" --rate-step "$STEP_PRE:$r4" \
		--rate-step "$((STEP_PRE + DUR)):$r0" --duration "$total" --timeout-ms $TIMEOUT_MS \
		--seed $((SEED + run)) --trace "$d/trace" --quiet --class "L0:$L0_PCT:src=$L0_IP:header" \
		--class "L3:$((100 - L0_PCT)):src=$L3_IP:header" > "$d/lg.json" 2> "$d/lg.err" ||
		{ FAILED+=("$who step run $run: loadgen failed: $(why "$d/lg.err")"); return 1; }
	python3 tools/bench/surge.py record "$d/trace" "$d/status" "$t0" "$STEP_PRE" "$DUR" \
		"$STEP_POST" "$CAP" "$who" "$run" "$REV" "$DIRTY" "$DATE" >> "$RAW" ||
		FAILED+=("$who step run $run: cannot read the trace")
	# the raw trace and status samples, for a look at what one run's tail is made of
	[ -z "$STEP_KEEP" ] || { mkdir -p "$STEP_KEEP" &&
		cp "$d/trace" "$STEP_KEEP/$who-$run.trace" && cp "$d/status" "$STEP_KEEP/$who-$run.status"; }
}

# calibrate RUN: capacity of Apache alone (closed loop, 2 x WORKERS connections), then L0 alone
calibrate() {
	local run=$1
	setup_http_ns && start_none || { log "cannot start the server: ${WHY:-namespaces}"; return 1; }
	wrk_run "$TMP/cal" $((2 * WORKERS)) L3 $CAL_S ||
		{ WHY="wrk: $(why "$TMP/cal")"; return 1; }
	CAP=$(python3 -c '
import json,sys
j=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print("%.1f" % ((j["requests"]-j["status"])/(j["duration_us"]/1e6)))' "$TMP/cal") ||
		{ WHY="capacity: unreadable wrk output: $(why "$TMP/cal")"; return 1; }
	CAP_INT=$(python3 -c "print(int(round($CAP)))")
	log "run $run: measured capacity $CAP req/s (nominal $((WORKERS * 1000 / SERVICE_MS)))"
	echo "{\"kind\":\"capacity\",\"run\":$run,\"capacity_rps\":$CAP,\"workers\":$WORKERS,\"service_ms\":$SERVICE_MS,\"commit\":\"$REV\",\"dirty\":\"$DIRTY\",\"date\":\"$DATE\"}" >> "$RAW"
	teardown_ns
	local s l
	for s in http-closed http-open; do
		has $s "$SCENARIOS" || continue
		for l in $LOADS; do
			setup_http_ns && start_none || { log "cannot start the server: ${WHY:-namespaces}"; return 1; }
			log "  run $run: L0 alone, $s, L0 of ${l}x"
			measure L0-alone $s "$l" "$run"
			teardown_ns
		done
	done
}

# ------------------------------------------------------------------ 2. HTTP on Apache
HTTP_SCEN=""
for s in http-closed http-open; do has $s "$SCENARIOS" && HTTP_SCEN="$HTTP_SCEN $s"; done
: > "$RAW"
if [ -n "$HTTP_SCEN" ] || has step "$SCENARIOS"; then
	mkdir -p "$TMP/wrk"; chmod 755 "$TMP/wrk"
	cp tools/bench/wrk-report.lua "$TMP/wrk/report.lua"
	cp tools/bench/wrk-l0trace.lua "$TMP/wrk/l0trace.lua"
	chmod 644 "$TMP/wrk/report.lua" "$TMP/wrk/l0trace.lua"
	if [ -n "${BENCH_L0_TRACE:-}" ]; then
		# the L0 client (an unprivileged user) writes in the bench's own directory; each
		# step's files are then copied to BENCH_L0_TRACE
		mkdir -p "$BENCH_L0_TRACE" "$TMP/l0trace" && chmod 1777 "$TMP/l0trace" ||
			{ log "BENCH_L0_TRACE: cannot make $BENCH_L0_TRACE"; exit 2; }
	fi
	declare -A DEAD=()
	for run in $(seq "$RUNS"); do
		calibrate "$run" || {
			log "the HTTP server cannot be measured: $WHY"
			FAILED+=("server (apache) run $run: $WHY"); teardown_ns; break; }
		for who in $CONTENDERS; do
			[ -n "${DEAD[$who]:-}" ] && continue
			for s in $HTTP_SCEN; do
				for l in $LOADS; do
					[ -n "${DEAD[$who]:-}" ] && break
					if ! start_contender "$who"; then
						log "contender $who cannot start: $WHY"
						FAILED+=("contender $who: cannot start: $WHY")
						echo "{\"kind\":\"failed\",\"who\":\"$who\",\"run\":$run,\"why\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$WHY")}" >> "$RAW"
						DEAD[$who]=1
						teardown_ns
						break
					fi
					# warm-up (not recorded): connections, caches, sluice's limit from real samples
					loadgen_run "$TMP/warm" "$(python3 -c "print(round($CAP / 2))")" 2 $((SEED + 1000)) \
						"L0:$L0_PCT:src=$L0_IP:header" "L3:$((100 - L0_PCT)):src=$L3_IP:header" >/dev/null 2>&1
					log "  run $run: $who $s ${l}x for ${DUR}s"
					measure "$who" "$s" "$l" "$run"
					case $who in sluice*) cp "$TMP/sluiced.log" "$TMP/sluiced-$who-$s-$l-$run.log" ;; esac
					teardown_ns
				done
			done
		done
		has step "$SCENARIOS" || continue
		for who in $STEP_CONTENDERS; do
			[ -n "${DEAD[$who]:-}" ] && continue
			if ! start_contender "$who"; then
				log "contender $who cannot start: $WHY"
				FAILED+=("contender $who: cannot start: $WHY")
				DEAD[$who]=1
				teardown_ns
				continue
			fi
			log "  run $run: $who step 0.5x -> 4x (${DUR}s) -> 0.5x"
			step_run "$who" "$run"
			case $who in sluice*) cp "$TMP/sluiced.log" "$TMP/sluiced-$who-step-$run.log" ;; esac
			teardown_ns
		done
	done
fi

# ------------------------------------------------------------------ 3. PostgreSQL
PGTXT=""
PGJSON=""
if has pg "$SCENARIOS"; then
	if [ -x tools/bench/pg.sh ]; then
		log "PostgreSQL scenario (tools/bench/pg.sh)"
		mkdir -p "$TMP/pg"
		# Same repetitions and seed as the HTTP scenarios; the step length asked for, else
		# 6 s (pg.sh alone defaults to 10 s; 6 keeps the whole default bench near 30 minutes)
		export PG_RUNS=${PG_RUNS:-$RUNS} PG_SEED=${PG_SEED:-$SEED} PG_DUR=${PG_DUR:-${BENCH_DUR:-6}}
		BENCH_COMMIT=$REV BENCH_DIRTY=$DIRTY tools/bench/pg.sh "$BUILD" "$TMP/pg"
		rc=$?
		[ -s "$TMP/pg/pg.txt" ] && PGTXT=$TMP/pg/pg.txt
		[ -s "$TMP/pg/pg.jsonl" ] && PGJSON=$TMP/pg/pg.jsonl
		if [ $rc != 0 ]; then
			# its records name the contenders that could not start (its log above says why)
			pgdead=$([ -n "$PGJSON" ] && python3 -c 'import json,sys
print(" ".join(json.loads(open(sys.argv[1]).readline()).get("failed_to_start", [])))' "$PGJSON")
			log "tools/bench/pg.sh failed (exit $rc)"
			FAILED+=("PostgreSQL: ${pgdead:+contender(s) $pgdead cannot start, }tools/bench/pg.sh exit $rc (its log above says why)")
		fi
	else
		log "PostgreSQL scenario: tools/bench/pg.sh is not there; skipped"
	fi
fi
# ------------------------------------------------------------------ 4. soak (opt-in)
SOAKTXT=""
if has soak "$SCENARIOS"; then
	log "soak: ${SOAK_SECONDS:-1800} s of connection churn (tools/bench/soak.sh)"
	SOAKTXT=$TMP/soak.txt
	tools/bench/soak.sh "$BUILD" > "$SOAKTXT" 2>&1 ||
		FAILED+=("soak: $(grep '^not ok' "$SOAKTXT" | head -3 | tr '\n' ' ')")
	cat "$SOAKTXT" >&2
fi
# ------------------------------------------------------------------ 5. refusal cost
REFTXT=""
if has refusal "$SCENARIOS"; then
	log "refusal cost: sluice's RST and 429 against HAProxy's and nginx's 429, and the RST under a raw SYN flood (tools/bench/refusal.sh)"
	mkdir -p "$TMP/refusal"
	# at most 5 s a step: two rates of four contenders and four of the flood must fit in about
	# 7 minutes
	REFUSAL_DUR=${REFUSAL_DUR:-$((DUR < 5 ? DUR : 5))} REFUSAL_RUNS=${REFUSAL_RUNS:-$RUNS} \
		tools/bench/refusal.sh "$BUILD" "$TMP/refusal" ||
		FAILED+=("refusal: tools/bench/refusal.sh exit $? (its log above says why)")
	[ -s "$TMP/refusal/refusal.txt" ] && REFTXT=$TMP/refusal/refusal.txt
fi
ELAPSED=$(($(date +%s) - T_START))
log "bench took $ELAPSED s"

# ------------------------------------------------------------------ report
# A run of only some scenarios gets its own file name and leaves README.md and
# docs/BENCHMARKS.md alone, so that it never replaces the day's full run (a 30-minute soak alone
# would otherwise overwrite the comparison tables).
RES=$OUT/bench-$DATE
FULL_RUN=1
[ "$SCENARIOS" = "$DEFAULT_SCENARIOS" ] || { RES=$RES-$(echo $SCENARIOS | tr ' ' '-'); FULL_RUN=0; }
cp "$RAW" "$RES.jsonl"
[ -n "$PGJSON" ] && cat "$PGJSON" >> "$RES.jsonl"
{
	echo "# sluice benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs, $STAMP"
	echo "# command: make bench   (tools/bench.sh $BUILD; BENCH_DUR=$DUR BENCH_RUNS=$RUNS" \
		"BENCH_SCENARIOS='$SCENARIOS' BENCH_LOADS='$LOADS' BENCH_SEED=$SEED), took $ELAPSED s"
	if [ ${#FAILED[@]} -gt 0 ]; then
		echo "# FAILED:"; printf '#   %s\n' "${FAILED[@]}"
	fi
	echo
	[ -s "$MICRO" ] && { cat "$MICRO"; echo; }
	[ -n "$SOAKTXT" ] && { echo "# soak"; cat "$SOAKTXT"; echo; }
	# the HTTP tables (text here, markdown for the docs) and the PostgreSQL ones (markdown)
	if [ -n "$HTTP_SCEN" ] || [ -n "$PGJSON" ]; then
		python3 tools/bench/report.py "$RAW" --text --dat "$TMP/bench.dat" \
			--md "$TMP/results.md" --readme "$TMP/readme.md" --contenders "$CONTENDERS" \
			--loads "$LOADS" ${PGJSON:+--pg "$PGJSON"} || FAILED+=("report.py failed")
		echo
	fi
	if has step "$SCENARIOS"; then
		python3 tools/bench/surge.py table "$RAW" --md "$TMP/surge.md" || FAILED+=("surge.py failed")
		echo
	fi
	[ -n "$PGTXT" ] && { echo "## PostgreSQL (tools/bench/pg.sh)"; cat "$PGTXT"; echo; }
	[ -n "$REFTXT" ] && { echo "## Refusal cost (tools/bench/refusal.sh)"; cat "$REFTXT"; echo; }
} > "$RES.txt"
if [ -s "$TMP/bench.dat" ]; then
	cp "$TMP/bench.dat" "$OUT/bench.dat"
	gnuplot -e "datafile='$OUT/bench.dat'; outfile='$OUT/bench.png'; names='$CONTENDERS'; scens='$HTTP_SCEN'" \
		tools/bench/plot.gnuplot 2>&1 | grep -v '^$' >&2
fi
# tail_md PNG: what ends both generated sections (the failures, said plainly, and the plot of
# this run's HTTP scenarios, if it had any)
tail_md() {
	if [ ${#FAILED[@]} -gt 0 ]; then
		echo; echo "**This run had failures:**"; printf -- '- %s\n' "${FAILED[@]}"
	fi
	[ -n "$HTTP_SCEN" ] && [ -s "$OUT/bench.png" ] && { echo; echo "![goodput and L0 latency]($1)"; }
	return 0
}
[ -s "$TMP/surge.md" ] && { echo; cat "$TMP/surge.md"; } >> "$TMP/results.md"
if [ -s "$TMP/results.md" ]; then
	{
		echo "Generated by \`make bench\` on $(date -u +%F), $STAMP, $(uname -r), $(nproc) CPUs;"
		echo "BENCH_DUR=$DUR s per step, BENCH_RUNS=$RUNS, took $ELAPSED s. Raw records:"
		echo "\`docs/results/${RES##*/}.jsonl\`, full text: \`docs/results/${RES##*/}.txt\`."
		echo
		cat "$TMP/results.md"
		tail_md results/bench.png
	} > "$OUT/results.md"
	{
		echo -n "\`make bench\` on $(date -u +%F), $STAMP"
		if [ -n "$HTTP_SCEN" ]; then
			echo ": Apache httpd (event MPM, $WORKERS workers ×"
			echo "$SERVICE_MS ms, capacity measured in the run) behind each contender, L0 ~$L0_PCT % and an L3"
			echo "surge on keep-alive connections; $RUNS run(s) of ${DUR} s per step."
		else
			echo "."
		fi
		echo "Method, ranges and every table: [docs/BENCHMARKS.md](docs/BENCHMARKS.md)."
		echo
		[ -s "$TMP/readme.md" ] && cat "$TMP/readme.md"
		tail_md docs/results/bench.png
	} > "$OUT/readme.md"
	# The default output regenerates the results sections of docs/BENCHMARKS.md and README.md
	# (between their markers); quick runs elsewhere (BENCH_OUT=...) and runs of some scenarios
	# only leave the docs alone.
	if [ "$FULL_RUN" = 1 ] && [ "$(realpath "$OUT")" = "$(realpath docs/results)" ]; then
		python3 tools/bench/report.py --splice docs/BENCHMARKS.md "$OUT/results.md" ||
			FAILED+=("cannot update docs/BENCHMARKS.md")
		python3 tools/bench/report.py --splice README.md "$OUT/readme.md" ||
			FAILED+=("cannot update README.md")
	fi
fi
for f in "$TMP"/sluiced-*.log "$TMP"/pg/pg-*.sluiced.log; do
	[ -e "$f" ] && mkdir -p "$OUT/logs" && cp "$f" "$OUT/logs/"
done
cat "$RES.txt"
log "results: $RES.txt, $RES.jsonl, $OUT/bench.png"
if [ ${#FAILED[@]} -gt 0 ]; then
	log "FAILED:"; printf 'bench:   %s\n' "${FAILED[@]}" >&2
	exit 1
fi
exit 0
