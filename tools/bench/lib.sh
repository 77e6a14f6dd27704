# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Shared plumbing of the benchmark scripts (tools/bench.sh, tools/bench/pg.sh; sourced, not
# run). The caller defines log(), BUILD, NS_S, NS_C, IN_SRV, IN_CLI and the PIDS array, and
# removes what these start with its own EXIT trap (stop_pids, then `ip netns del`).

# need_pkgs PKG...: install the Debian packages that are missing (a fresh machine has none).
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

# stop_pids: TERM every process in PIDS, KILL what is left after 3 s.
stop_pids() {
	local p i alive
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for i in $(seq 30); do
		alive=0
		for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	# only these: a bare `wait` would also wait for background work the caller owns
	[ ${#PIDS[@]} -gt 0 ] && wait "${PIDS[@]}" 2>/dev/null
	PIDS=()
}

start_bg() { # start_bg LOG CMD...: run in the background, remembered in PIDS and LAST_PID
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
	LAST_PID=$!
}

forget_pids() { # forget_pids PID...: ended and reaped, so never to be signalled again
	local p q keep=()
	for p in "${PIDS[@]}"; do
		for q in "$@"; do [ "$p" = "$q" ] && continue 2; done
		keep+=("$p")
	done
	PIDS=("${keep[@]}")
}

# wait_port ADDR PORT [PID]: until something accepts in the server namespace (10 s); gives up
# early when PID (the server that should be listening) has exited.
wait_port() {
	local i
	for i in $(seq 100); do
		$IN_SRV bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null && return 0
		[ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && return 1
		sleep 0.1
	done
	return 1
}

# sluice_up PID: until sluiced (PID) reports a live controller in PIN (10 s); fails at once
# when it has exited.
sluice_up() {
	local i
	for i in $(seq 100); do
		$IN_SRV "$BUILD/sluicectl" --pin-dir "$PIN" status --json 2>/dev/null |
			grep -q '"controller_alive":true' && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# detach_pins: detach sluice's programs and remove its pins in PIN, if a run left any.
detach_pins() {
	[ -d "$PIN" ] || return 0
	$IN_SRV "$BUILD/sluicectl" --pin-dir "$PIN" detach >/dev/null 2>&1
	rm -rf "$PIN"
}

# setup_ns SRV_IP CLIENT_IP...: namespaces NS_S (veth s0, SRV_IP/24) and NS_C (veth c0 with
# every CLIENT_IP/24), both up.
setup_ns() {
	local srv=$1 a i
	shift
	ip netns add "$NS_S" && ip netns add "$NS_C" || return 1
	ip link add vs-$$ netns "$NS_S" type veth peer name vc-$$ netns "$NS_C" || return 1
	$IN_SRV ip link set lo up
	$IN_CLI ip link set lo up
	$IN_SRV ip link set vs-$$ name s0
	$IN_CLI ip link set vc-$$ name c0
	$IN_SRV ip addr add "$srv/24" dev s0
	for a in "$@"; do $IN_CLI ip addr add "$a/24" dev c0; done
	$IN_SRV ethtool -K s0 tx off >/dev/null 2>&1
	$IN_CLI ethtool -K c0 tx off >/dev/null 2>&1
	# Same plumbing for every contender: sluice's XDP_TX replies reach the client promptly
	# only when its veth runs an XDP program (a pass-through one).
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
