# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Sourced by tests/e2e/lib.sh and tools/bench.sh.
# iproute2 leaves its own directory (tc/globals) and symlinks (ip, xdp -> tc) when it loads
# the pass-through program; remove them once empty (the benchmarks use this too).
remove_iproute2_pins() {
	rmdir /sys/fs/bpf/tc/globals 2>/dev/null && rmdir /sys/fs/bpf/tc 2>/dev/null
	for l in ip xdp; do
		# only when dangling: the tc directory is gone
		[ -L /sys/fs/bpf/$l ] && [ ! -e /sys/fs/bpf/$l ] && rm -f /sys/fs/bpf/$l
	done
	return 0
}
