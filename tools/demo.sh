#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# make demo: sluice protecting a service under overload, end to end, in two network
# namespaces (198.18.0.0/24). Same server, same load, first without and then with sluice.
# Cleans up everything on exit. About a minute.
set -u
# Debian's own tools first (what tools/install-deps.sh installs): a python3 found earlier on
# PATH may be a version-manager shim that costs 0.1-2 s per start and lacks python3-yaml.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
BUILD=${1:-build}
export BUILD TAG=demo
CLIENT_ADDRS="198.18.0.10 198.18.0.20"
source "$(dirname "$0")/../tests/e2e/lib.sh"
ok() { :; }   # the demo prints tables, not TAP
[ "$(id -u)" = 0 ] || { echo "make demo needs root (network namespaces, BPF)"; exit 1; }
e2e_setup

WORKERS=8 SERVICE_MS=20
CAP=$((WORKERS * 1000 / SERVICE_MS))
cat > "$TMP/sluice.yaml" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: shop
    port: 8080
    protocol: http
    retry_after_s: 1
    limit: { fixed: $WORKERS }          # the server has $WORKERS workers
    headroom: { L0: 100, L1: 90, L2: 75, L3: 50 }
    headroom_mode: adaptive
    default_class: L3
    trust_from: [198.18.0.0/15]          # whose X-Priority counts (the demo's clients)
    classify:
      - { source: 198.18.0.10/32, class: L0 }     # the checkout frontend
      - { header: X-Priority, class: from-header }
  - name: db
    port: 7000
    protocol: tcp
    reject: rst
    limit: { fixed: 20 }
    headroom_mode: fixed
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y

banner() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
table() { # table TITLE FILE...: per-class outcome of loadgen runs
	python3 - "$@" <<'PY'
import json, sys
title, files = sys.argv[1], sys.argv[2:]
print(f"  {title}")
print(f"  {'class':<6}{'sent':>7}{'ok':>7}{'429':>7}{'refused':>9}{'timeout':>9}{'success':>9}{'p50 ms':>9}{'p99 ms':>9}")
for f in files:
    d = json.load(open(f))
    for name, c in sorted(d["classes"].items()):
        succ = 100.0 * c["ok"] / c["sent"] if c["sent"] else 0
        p50 = f'{c["p50_ms"]:.1f}' if c["p50_ms"] is not None else "-"
        p99 = f'{c["p99_ms"]:.1f}' if c["p99_ms"] is not None else "-"
        print(f"  {name:<6}{c['sent']:>7}{c['ok']:>7}{c['http_429']:>7}{c['refused']:>9}"
              f"{c['timeout'] + c['unfinished']:>9}{succ:>8.1f}%{p50:>9}{p99:>9}")
PY
}
http_load() { # http_load TAG: L0 checkout 100/s + L3 reporting 900/s, 6 s
	start_bg "$TMP/$1-l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 \
		--mode http-keepalive --rate 100 --duration 6 --timeout-ms 1000 --quiet \
		--class L0:1:src=198.18.0.10
	local a=$LAST_PID
	start_bg "$TMP/$1-l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:8080 \
		--mode http-keepalive --rate 900 --duration 6 --timeout-ms 1000 --quiet \
		--class L3:1:header
	wait $a $LAST_PID
}

start_shop() { # a fresh server for each phase: an overloaded one keeps working off requests
	           # its clients gave up on long ago (that is what overload does)
	[ -n "${SHOP_PID:-}" ] && { kill -TERM "$SHOP_PID"; wait "$SHOP_PID" 2>/dev/null; }
	start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 \
		--mode http --workers $WORKERS --service-ms $SERVICE_MS --backlog 4096
	SHOP_PID=$LAST_PID
	sleep 0.3
}
start_shop
# The database answers each query after 3 s: a connection counts while its query is
# outstanding (a busy connection), as a pooled idle one holds no capacity.
start_bg "$TMP/dbserver.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 64 --service-ms 3000
sleep 0.3

banner "A shop server: $WORKERS workers x $SERVICE_MS ms = $CAP requests/s. Offered: L0 checkout 100/s + L3 reports 900/s (2.5x)"
banner "1. No protection"
http_load none
table "every request waits in the same queue; checkout times out with the reports" \
	"$TMP/none-l0.json" "$TMP/none-l3.json"

banner "2. With sluice (XDP + TC on the server's NIC, sluiced controlling)"
start_shop
start_sluiced "$TMP/sluice.yaml" || exit 1
http_load sluice
table "reports are answered 429 by the kernel at once; checkout keeps its latency" \
	"$TMP/sluice-l0.json" "$TMP/sluice-l3.json"
echo
"$BUILD/sluicectl" --pin-dir "$PIN" status | sed -n '/^shop/,/^$/p'

banner "3. Operator switch: shed L1 of shop for 5 minutes"
"$BUILD/sluicectl" --pin-dir "$PIN" --state-dir "$TMP/state" --config "$TMP/sluice.yaml" \
	switch set shop L1 --shed 100 --reason "demo: protect checkout" --ttl 5m
sleep 0.3
in_cli curl -s -i -H "X-Priority: L1" http://$SRV_IP:8080/recommendations | sed -n '1,7p' | sed 's/^/  curl L1: /'
"$BUILD/sluicectl" --pin-dir "$PIN" --state-dir "$TMP/state" --config "$TMP/sluice.yaml" switch ls | sed 's/^/  /'

banner "4. Connection-level (tcp service db, limit 20): 200 L3 + 8 L0 connections, each query taking 3 s"
start_bg "$TMP/db-l3.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 100 --duration 2 --timeout-ms 5000 --quiet \
	--class L3:1:src=198.18.0.20
a=$LAST_PID
start_bg "$TMP/db-l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 4 --duration 2 --timeout-ms 5000 --quiet \
	--class L0:1:src=198.18.0.10
wait $a $LAST_PID
table "L3 beyond its 50% headroom is refused with an immediate RST; L0 connects" \
	"$TMP/db-l0.json" "$TMP/db-l3.json"
sleep 0.5
echo
"$BUILD/sluicectl" --pin-dir "$PIN" status | sed -n '/^db/,/^$/p'

banner "Events sluiced printed (JSON lines)"
grep '^{' "$TMP"/sluiced.*.log | head -8 | cut -c1-160 | sed 's/^/  /'
banner "Cleaning up: sluicectl detach, namespaces removed"
