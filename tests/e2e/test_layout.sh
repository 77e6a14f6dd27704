#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The layout version of the pinned maps end to end, with connections held across every
# restart: a fresh start records the layout; a restart adopts it; pins without a record
# (the first layout) are taken over in place; a record of a newer layout, a map that does not
# match its record, or an interrupted migration make sluiced refuse with exit 1, a message
# that says what to do, and nothing changed (same XDP program, same pins, same in-flight);
# the layout drill (a sluiced that claims the next layout) migrates by copying every map into
# fresh ones and swapping the programs while connections are held, and they end cleanly.
CLIENT_ADDRS="198.18.0.20"
TAG=lay
source "$(dirname "$0")/lib.sh"
e2e_setup
command -v bpftool >/dev/null || skip_all "needs bpftool"
DRILL=$BUILD/tests/layout_drill/sluiced
CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
heartbeat_timeout_ms: 5000
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: db
    port: 7000
    protocol: tcp
    limit: { fixed: 100 }
    default_class: L2
Y
REC=$PIN/sluice_layout

status() { "$BUILD/sluicectl" --pin-dir "$PIN" status --json > "$TMP/status.json"; }
# The held connections are idle: open connections (`connections`), not busy ones (`in_flight`).
inflight() { status; json_get "$TMP/status.json" "d['services'][0].get('connections', d['services'][0]['in_flight'])"; }
# The layout record as bytes (struct sluice_layout in include/sluice.h), and one field of it.
rec_bytes() { bpftool -j map lookup pinned "$REC" key 0 0 0 0 |
	python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["value"]))'; }
rec_u32() { # rec_u32 OFFSET
	rec_bytes | python3 -c "import sys; b=[int(x,16) for x in sys.stdin.read().split()]; print(int.from_bytes(bytes(b[$1:$1+4]),'little'))"; }
rec_write() { bpftool map update pinned "$REC" key 0 0 0 0 value $1; }
# rec_patch OFFSET HEXBYTES...: the record with those bytes replaced.
rec_patch() {
	local off=$1; shift
	rec_bytes | python3 -c "
import sys
b=sys.stdin.read().split(); new=sys.argv[2:]; o=int(sys.argv[1])
b[o:o+len(new)]=new; print(' '.join(b))" "$off" "$@"
}
# Offset of map NAME's entry in the record (16 + 48 * i).
rec_entry() { rec_bytes | python3 -c "
import sys
b=bytes(int(x,16) for x in sys.stdin.read().split()); n=int.from_bytes(b[8:12],'little')
print([16+48*i for i in range(n) if b[16+48*i:40+48*i].rstrip(b'\0')==b'$1'][0])"; }
# pinned_id link|map PIN_NAME FIELD: a field of bpftool's description of a pinned object.
pinned_id() { bpftool -j "$1" show pinned "$PIN/$2" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3"; }
xdp_prog() { pinned_id link link_xdp prog_id; }
tc_filters() { for d in ingress egress; do in_srv tc filter show dev s0 $d; done | grep -c 'sluice_tc'; }
pins() { ls "$PIN" | sort | tr '\n' ' '; }
stop_sluiced() { kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null; }
last_log() { ls -t "$TMP"/sluiced.*.log | head -1; }

# refused BIN WHAT EXPECTED_MESSAGE: sluiced must exit 1 with the message and change nothing.
refused() {
	local bin=$1 what=$2 want=$3 before_prog before_pins before_in out rc
	before_prog=$(xdp_prog); before_pins=$(pins); before_in=$(inflight)
	out=$(timeout 20 $IN_SRV "$bin" --config "$CFG" --pin-dir "$PIN" 2>&1); rc=$?
	ok $([ $rc -eq 1 ] && echo "$out" | grep -qF -- "$want" && [ "$(xdp_prog)" = "$before_prog" ] &&
		[ "$(pins)" = "$before_pins" ] && [ "$(tc_filters)" = 2 ] &&
		[ "$(inflight)" = "$before_in" ] && echo 0 || echo 1) \
		"$what: exit $rc, says what to do, XDP program $before_prog kept, pins, TC filters and in-flight ($before_in) unchanged" \
		"output: $out" "want: $want" "xdp $(xdp_prog) pins $(pins) tc $(tc_filters) in-flight $(inflight)"
}

start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 64 --service-ms 1
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok $([ "$(rec_u32 0)" = 2 ] && [ "$(rec_u32 4)" = 0 ] && [ "$(rec_u32 8)" = 15 ] &&
	grep -q "created the maps under $PIN, layout 2" "$(last_log)" && echo 0 || echo 1) \
	"a fresh start records layout 2 and the 15 pinned maps in sluice_layout" \
	"version $(rec_u32 0) migrating $(rec_u32 4) maps $(rec_u32 8)" "$(cat "$(last_log)")"

# Connections held across everything below (12 of them, 30 s), then closed with FIN.
start_bg "$TMP/held.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 12 --max-requests 12 --hold-ms 30000 --timeout-ms 40000 --quiet \
	--class L2:1:src=198.18.0.20
HELD_PID=$LAST_PID
for i in $(seq 50); do [ "$(inflight)" = 12 ] && break; sleep 0.1; done
held=$(inflight)

# --- same layout: adopt ------------------------------------------------------------------
stop_sluiced
start_sluiced "$CFG"
ok $([ "$held" = 12 ] && [ "$(inflight)" = 12 ] && grep -q "adopted the maps under $PIN, layout 2" "$(last_log)" &&
	echo 0 || echo 1) "same layout: a restart adopts the maps (in-flight $held before, $(inflight) after)" \
	"$(cat "$(last_log)")"

# --- pins from before the record (layout 1): taken over in place -------------------------
stop_sluiced
rm "$REC"
start_sluiced "$CFG"
ok $([ "$(inflight)" = 12 ] && [ "$(rec_u32 0)" = 2 ] &&
	grep -q "migrated the maps under $PIN from layout 1 to 2 (no map changed.*0 maps copied, 15 adopted" "$(last_log)" &&
	echo 0 || echo 1) "pins without a record count as layout 1: adopted in place, record 2 written, in-flight $(inflight)" \
	"$(cat "$(last_log)")"
stop_sluiced

# --- refusals: nothing may change ----------------------------------------------------------
good=$(rec_bytes)
rec_write "$(rec_patch 0 0x03)"
flag="--pin-dir $PIN"
refused "$BUILD/sluiced" "a newer layout (3) is refused" \
	"pinned maps under $PIN have layout 3, this sluiced understands 2 and cannot migrate 3: run \`sluicectl $flag detach\` (drops in-flight state; traffic is admitted while detached) or start the matching sluiced version"
rec_write "$good"

off=$(rec_entry flows)
rec_write "$(rec_patch $((off + 40)) 0x5a 0x5a 0x5a 0x5a 0x5a 0x5a 0x5a 0x5a)"
refused "$BUILD/sluiced" "same version, but map flows does not match its record (key/value types)" \
	"pinned maps under $PIN have layout 2, but map flows does not match it (key/value types differ (BTF hash 5a5a5a5a5a5a5a5a"
rec_write "$good"

rec_write "$(rec_patch 4 0x01)"
refused "$BUILD/sluiced" "an interrupted migration is refused" \
	"pinned maps under $PIN are half-way through a migration from layout 1 to 2 that was interrupted: run \`sluicectl $flag detach\`"
rec_write "$good"

# --- the layout drill: migrate 2 -> 3 by copying every map, connections held ---------------
status; before=$(json_get "$TMP/status.json" "d['services'][0]['classes'][2]['admitted']")
link_before=$(pinned_id link link_xdp id)
prog_before=$(xdp_prog)
flows_id_before=$(pinned_id map flows id)
start_bg "$TMP/drill.log" $IN_SRV "$DRILL" --config "$CFG" --pin-dir "$PIN"
SLUICED_PID=$LAST_PID
for i in $(seq 100); do grep -q '"to":"attached"' "$TMP/drill.log" && break; sleep 0.05; done
link_after=$(pinned_id link link_xdp id)
flows_id_after=$(pinned_id map flows id)
ok $(grep -q "migrated the maps under $PIN from layout 2 to 3 (rehearsal.*flows: 12 entries.*14 maps copied, 1 adopted" "$TMP/drill.log" &&
	[ "$(rec_u32 0)" = 3 ] && [ "$(rec_u32 4)" = 0 ] && [ "$(inflight)" = 12 ] &&
	[ "$link_after" = "$link_before" ] && [ "$(xdp_prog)" != "$prog_before" ] &&
	[ "$flows_id_after" != "$flows_id_before" ] && [ "$(tc_filters)" = 2 ] &&
	[ ! -e "$PIN/flows__migrating" ] && echo 0 || echo 1) \
	"migration 2 -> 3: 12 flows copied into a fresh map (id $flows_id_before -> $flows_id_after), program swapped on the same XDP link ($link_after), in-flight $(inflight), record 3" \
	"$(cat "$TMP/drill.log")" "version $(rec_u32 0) link $link_before/$link_after prog $prog_before/$(xdp_prog)"
status
ok $([ "$(json_get "$TMP/status.json" "d['services'][0]['classes'][2]['admitted']")" = "$before" ] && echo 0 || echo 1) \
	"counters carried over (L2 admitted $before)"

# A sluiced of layout 2 on the migrated pins: refused, the drill's data path untouched.
stop_sluiced
refused "$BUILD/sluiced" "layout 2 sluiced on layout 3 pins is refused" \
	"pinned maps under $PIN have layout 3, this sluiced understands 2 and cannot migrate 3: run \`sluicectl $flag detach\`"

# The held connections end through the migrated maps: every slot comes back.
start_bg "$TMP/drill2.log" $IN_SRV "$DRILL" --config "$CFG" --pin-dir "$PIN"
SLUICED_PID=$LAST_PID
wait "$HELD_PID"
for i in $(seq 50); do [ "$(inflight)" = 0 ] && break; sleep 0.1; done
held_ok=$(json_get "$TMP/held.json" "d['classes']['L2']['ok']")
ok $([ "$held_ok" = 12 ] && [ "$(inflight)" = 0 ] && grep -q "adopted the maps under $PIN, layout 3" "$TMP/drill2.log" &&
	echo 0 || echo 1) \
	"the 12 held connections complete after the migration and in-flight returns to 0 (FIN found the copied flows)" \
	"loadgen ok $held_ok in-flight $(inflight)" "$(cat "$TMP/drill2.log")"
finish
