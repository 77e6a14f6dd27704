# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Shared by the end-to-end tests: TAP output, two network namespaces joined by a veth pair
# (198.18.0.0/24, the benchmarking range), sluiced in the server namespace, and cleanup of
# everything on exit, pass or fail. Source it; then call e2e_setup.
#
# Processes run in a namespace via `nsenter --net` (not `ip netns exec`), so they keep this
# mount namespace and see the real /sys/fs/bpf where sluiced pins its maps.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUILD=${BUILD:-build}
TAG=${TAG:-e2e}$$
NS_S=sl-s-$TAG                 # server namespace
NS_C=sl-c-$TAG                 # client namespace
PIN=/sys/fs/bpf/sluice-$TAG
TMP=$(mktemp -d /tmp/sluice-$TAG.XXXXXX)
SRV_IP=198.18.0.1
CLI_IP=198.18.0.2
PIDS=()
N=0
FAILED=0

ok() { # ok STATUS DESCRIPTION [DIAGNOSTIC...]
	N=$((N + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $N - $2"
	else
		echo "not ok $N - $2"
		shift 2
		for d in "$@"; do echo "# $d"; done
		FAILED=$((FAILED + 1))
	fi
}
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
finish() { echo "1..$N"; [ "$FAILED" -eq 0 ]; }

# Prefixes, not functions, so that `start_bg LOG $IN_SRV cmd` leaves $! = the real process
# (nsenter execs its command), which signals then reach.
IN_SRV="nsenter --net=/run/netns/$NS_S"
IN_CLI="nsenter --net=/run/netns/$NS_C"
in_srv() { $IN_SRV "$@"; }
in_cli() { $IN_CLI "$@"; }

e2e_cleanup() {
	local p ns
	# Everything still running inside our namespaces, whoever started it, then our own pids.
	for ns in "$NS_S" "$NS_C"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do PIDS+=("$p"); done
	done
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 0.3
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -d "$PIN" ] && $IN_SRV "$BUILD/sluicectl" --pin-dir "$PIN" detach >/dev/null 2>&1
	[ -d "$PIN" ] && rm -rf "$PIN"
	ip netns del "$NS_S" 2>/dev/null
	ip netns del "$NS_C" 2>/dev/null
	# iproute2 leaves its own directory (tc/globals) and symlinks (ip, xdp -> tc) when it
	# loads the pass-through program; remove them once empty.
	rmdir /sys/fs/bpf/tc/globals 2>/dev/null && rmdir /sys/fs/bpf/tc 2>/dev/null
	for l in ip xdp; do
		# only when dangling: the tc directory is gone
		[ -L /sys/fs/bpf/$l ] && [ ! -e /sys/fs/bpf/$l ] && rm -f /sys/fs/bpf/$l
	done
	# A bpffs this test mounted goes again once nothing but the kernel's own preload
	# iterators (maps.debug, progs.debug) is left in it.
	if [ "${BPFFS_MOUNTED:-0}" = 1 ] && [ -z "$(ls /sys/fs/bpf | grep -v '\.debug$')" ]; then
		umount /sys/fs/bpf 2>/dev/null
	fi
	rm -rf "$TMP"
}

# e2e_setup: namespaces, veth, addresses. Extra client addresses: CLIENT_ADDRS="198.18.0.10 ..."
e2e_setup() {
	[ "$(id -u)" = 0 ] || skip_all "needs root"
	trap e2e_cleanup EXIT
	trap 'exit 1' INT TERM
	# Hosts (and fresh VMs) without a bpffs: mount one for the test, remove it after.
	if ! mountpoint -q /sys/fs/bpf; then
		mount -t bpf bpf /sys/fs/bpf && BPFFS_MOUNTED=1
	fi
	ip netns add "$NS_S" && ip netns add "$NS_C" || { echo "not ok - cannot create netns"; exit 1; }
	ip link add vs-$$ netns "$NS_S" type veth peer name vc-$$ netns "$NS_C" || exit 1
	in_srv ip link set lo up
	in_cli ip link set lo up
	in_srv ip link set vs-$$ name s0
	in_cli ip link set vc-$$ name c0
	in_srv ip addr add $SRV_IP/24 dev s0
	in_cli ip addr add $CLI_IP/24 dev c0
	for a in ${CLIENT_ADDRS:-}; do in_cli ip addr add "$a/24" dev c0; done
	# XDP sees full checksums only without TX offload. XDP_TX replies reach the client's
	# stack promptly only when the client veth runs an XDP program (tests/e2e/xdp_pass.bpf.c).
	in_srv ethtool -K s0 tx off >/dev/null 2>&1
	in_cli ethtool -K c0 tx off >/dev/null 2>&1
	in_cli ip link set dev c0 xdpdrv obj "$BUILD/tests/xdp_pass.bpf.o" sec xdp ||
		{ echo "not ok - cannot attach the pass-through XDP program to the client veth"; exit 1; }
	in_srv ip link set s0 up
	in_cli ip link set c0 up
	for i in $(seq 50); do
		in_cli ip -br link show c0 | grep -q ' UP ' &&
			in_srv ip -br link show s0 | grep -q ' UP ' && return 0
		sleep 0.1
	done
	echo "not ok - veth link never came up"; exit 1
}

# start_bg LOGFILE CMD... : run in the background, remember the pid in PIDS.
start_bg() {
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
	LAST_PID=$!
}

# start_sluiced CONFIG: sluiced in the server namespace; waits until it has attached and
# written its first heartbeat (its "attached" event), not merely until some heartbeat is
# fresh: after a restart the old process's last heartbeat stays fresh for a while.
start_sluiced() {
	local log="$TMP/sluiced.$N.$RANDOM.log"
	start_bg "$log" $IN_SRV "$BUILD/sluiced" --config "$1" --pin-dir "$PIN"
	SLUICED_PID=$LAST_PID
	for i in $(seq 100); do
		grep -q '"to":"attached"' "$log" 2>/dev/null && return 0
		kill -0 "$SLUICED_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# sluiced did not come up:"; sed 's/^/#   /' "$log"
	return 1
}

# status_field JQ-LIKE: tiny JSON reader (python3 when present, else grep) for numbers.
json_get() { # json_get FILE EXPR  (python expression on `d`)
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}
