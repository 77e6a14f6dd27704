#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The per-packet bench's own checks (tests/bpf/bench_pktcost.c), in every `make test`: a short
# run (repeat 2000, 400 calls per loop path; about 7 s) must time every path and find each one
# did what it is named for -- its return value, and the data path's
# counts moved by exactly what one run of it moves (a SYN retransmit counted as one, a refused
# request's 429 sent, an established ACK moving nothing), its flow there before it is timed.
# The figures themselves are not judged here: `make pktcost` is for those. Speaks TAP.
# Usage: tests/e2e/test_pktcost_checks.sh   (BUILD=build by default)
. "$(dirname "$0")/lib.sh"   # TAP (ok, skip_all, finish) and TMP; nothing else of it is set up
trap 'rm -rf "$TMP"' EXIT
[ "$(id -u)" = 0 ] || skip_all "needs root"

# Every path the run must time, once each: the table's paths in each family (IPv4, IPv6, an
# 802.1Q tag), then the paths beyond it (IPv4 only) and the cold ACKs.
FAMILY_PATHS="xdp.non-service xdp.non-service-port-sweep
	xdp.non-service-port-sweep-cache-pressure xdp.established-ack
	tc-egress.bare-ack tc-egress.response-data tc-ingress.request-active-segment
	tc-ingress.request-body-segment xdp.syn-retransmit xdp.new-syn-admitted xdp.new-syn-stream
	xdp.handshake-ack xdp.handshake-ack-http tc-ingress.request-start
	tc-ingress.request-start-keepalive tc-ingress.request-start-stream
	tc-ingress.request-start-keepalive-stream tc-ingress.request-start-path-rules
	tc-ingress.request-start-blank-value xdp.syn-refused-rst
	tc-ingress.request-refused-429-rst tc-ingress.request-refused-429-rst-stream
	tc-ingress.request-refused-429-rst-after-server-data"
OTHER_PATHS="tc-ingress.forged-data tc-ingress.tcp-turn-start tc-egress.tcp-turn-end
	tc-ingress.tcp-retransmit xdp.cold-ack.handshakes0 xdp.cold-ack.handshakes65000"
expected=()
for fam in "" .v6 .vlan; do
	for p in $FAMILY_PATHS; do expected+=("$p$fam"); done
done
for p in $OTHER_PATHS; do expected+=("$p"); done

timeout 120 "$BUILD/bench/bench_pktcost" "$BUILD/bench/empty_xdp.bpf.o" 2000 400 \
	>"$TMP/out" 2>"$TMP/err"
rc=$?
ok $rc "the short run exits 0" "exit status $rc" "$(tail -5 "$TMP/err")"

missing=()
for p in "${expected[@]}"; do
	[ "$(grep -c -F "path: $p ns: " "$TMP/out")" = 1 ] || missing+=("$p")
done
n=$(grep '^path: ' "$TMP/out" | grep -vc '^path: invariance\.')   # the points' own come later
[ ${#missing[@]} = 0 ] && [ "$n" = ${#expected[@]} ]
ok $? "it times every path once (${#expected[@]} path lines)" \
	"$n path lines; missing or repeated: ${missing[*]:-none}"

grep -q -F 'path: xdp.established-ack ns: ' "$TMP/out" &&
	grep -q -F 'path: tc-ingress.request-start-stream.v6 ns: ' "$TMP/out"
ok $? "among them xdp.established-ack and tc-ingress.request-start-stream.v6"

! grep -q 'bench_pktcost:' "$TMP/err"
ok $? "no path failed its checks (nothing from bench_pktcost on stderr)" \
	"$(grep 'bench_pktcost:' "$TMP/err" | head -10)"

# The host's memory, before the paths and after them: two chases each, in ns (a positive number).
nhost=$(grep -cE '^host: memory-chase-4MiB ns: [0-9]+\.[0-9] memory-chase-64MiB ns: [0-9]+\.[0-9] \(' "$TMP/out")
[ "$nhost" = 2 ] && ! grep -qE '^host: .* ns: (-|0\.0 )' "$TMP/out"
ok $? "the host's memory is timed before the paths and after them" "$(grep '^host: ' "$TMP/out")"

# The points beyond the paths, with their own checks, in the same run: 1 and 4096 services
# with 100 and 60,000 flows, every CPU at once, and whole requests on every CPU, after which in
# flight must be back where it was and every request admitted and sampled.
ninv=$(grep -c '^invariance: .* max_over_min: [1-9]' "$TMP/out")
grep -q '^cpus: requests .* in_flight_moved: 0$' "$TMP/out" && [ "$ninv" -ge 5 ]
ok $? "the invariance and CPU points ran ($ninv invariance lines; $(grep -o 'per_core_vs_one_cpu: [0-9.]* in_flight_moved: [-0-9]*' "$TMP/out"))" \
	"$(grep -E '^(invariance|cpus):' "$TMP/out")"
finish
