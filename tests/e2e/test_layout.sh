#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The layout version of the pinned maps end to end, with connections held across every
# restart: a fresh start records the layout; a restart adopts it; a record of a newer layout, a
# map that does not match its record, an interrupted migration, or pins without a record that
# hold maps the first layout never had make sluiced refuse with exit 1, a message that says
# what to do, and nothing changed (same XDP program, same pins, same in-flight). Upgrades:
# pins as a layout 10, 9, 8, 7, 6, 5, 4, 3, 2 and then a layout 1 sluiced leaves them (10: the
# hash's one 8-byte secret in flow_hash_key; 9 and older: no handshake_slots, no flow_hash_key;
# 8 and older: no http_conns or http_conn_cap; 7 and older: latency_hist one per-CPU entry per service and
# class, no latency_hist1..3; 6 and older: flow
# keys without the local address, the whole record in sluice_layout, no sluice_layout_ext, no
# untrusted_marks, class_stats one per-CPU entry per service and class; 5: in-flight in the
# shared map only, no inflight_pcpu, no conn_cap or addr_services; 4: nor
# busy/busy_released maps, flows without server_next and flags; 3: nor ctl_state/ctl_requests;
# 2 and 1: verdicts
# in the admit encoding, flows without client_next, nor handshakes/halfopen, the record as the
# old layout wrote it or none) are migrated while connections are held and new ones keep being
# admitted; the layout
# drill (a sluiced that claims the next layout) migrates by copying every map into fresh ones
# and swapping the programs. The held connections end cleanly through the migrated maps.
# Versions and the map count come from the build (include/sluice.h, the pins it makes), so a
# layout bump changes nothing here.
CLIENT_ADDRS="198.18.0.20"
TAG=lay
source "$(dirname "$0")/lib.sh"
e2e_setup
command -v bpftool >/dev/null || skip_all "needs bpftool"
DRILL=$BUILD/tests/layout_drill/sluiced
DRILL_CTL=$BUILD/tests/layout_drill/sluicectl   # the sluicectl of the drill's layout
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
EXT=$PIN/sluice_layout_ext   # the record's continuation (struct sluice_layout_ext)
# The layout this build writes, and the drill's (one more).
V=$(awk '$1 == "#define" && $2 == "SLUICE_MAP_LAYOUT_VERSION" { print $3 }' include/sluice.h)
DV=$((V + 1))

# SLUICECTL: the sluicectl of the layout pinned (the drill's once the drill migrated).
SLUICECTL=$BUILD/sluicectl
status() { "$SLUICECTL" --pin-dir "$PIN" status --json --no-rates > "$TMP/status.json"; }
# The held connections are idle: open connections (`connections`), not busy ones (`in_flight`).
inflight() { status; json_get "$TMP/status.json" "d['services'][0].get('connections', d['services'][0]['in_flight'])"; }
# The layout record as bytes (struct sluice_layout in include/sluice.h), and one field of it.
rec_bytes() { bpftool -j map lookup pinned "$REC" key 0 0 0 0 |
	python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["value"]))'; }
rec_u32() { # rec_u32 OFFSET
	rec_bytes | python3 -c "import sys; b=[int(x,16) for x in sys.stdin.read().split()]; print(int.from_bytes(bytes(b[$1:$1+4]),'little'))"; }
rec_write() { bpftool map update pinned "$REC" key 0 0 0 0 value $1; }
ext_bytes() { bpftool -j map lookup pinned "$EXT" key 0 0 0 0 |
	python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["value"]))'; }
# Maps the record lists: sluice_layout's entries and those of its continuation when it is of
# the same version.
rec_total() { { rec_bytes; ext_bytes 2>/dev/null; } | python3 -c "
import sys
r, e = [bytes(int(x, 16) for x in l.split()) for l in (sys.stdin.read().split('\n') + [''])[:2]]
n = int.from_bytes(r[8:12], 'little')
if len(e) >= 8 and e[0:4] == r[0:4]:
    n += int.from_bytes(e[4:8], 'little')
print(n)"; }
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
# The XDP link's pin (one per interface, link_xdp_<ifindex>; this test attaches to s0 only).
xdp_pin() { ls "$PIN" | grep '^link_xdp' | head -n 1; }
xdp_prog() { pinned_id link "$(xdp_pin)" prog_id; }
tc_filters() { for d in ingress egress; do in_srv tc filter show dev s0 $d; done | grep -c 'sluice_tc'; }
pins() { ls "$PIN" | sort | tr '\n' ' '; }
stop_sluiced() { kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null; }
last_log() { ls -t "$TMP"/sluiced.*.log | head -1; }

# refused BIN WHAT EXPECTED_MESSAGE: sluiced must exit 1 with the message and change nothing.
refused() {
	local bin=$1 what=$2 want=$3 before_prog before_pins before_in out rc
	before_prog=$(xdp_prog); before_pins=$(pins); before_in=$(inflight)
	out=$(timeout 20 $IN_SRV "$bin" --config "$CFG" --pin-dir "$PIN" 2>&1); rc=$?
	ok $([ $rc -eq 1 ] && echo "$out" | grep -qF -- "$want" && [ -n "$before_prog" ] &&
	     [ -n "$before_in" ] && [ "$(xdp_prog)" = "$before_prog" ] &&
		[ "$(pins)" = "$before_pins" ] && [ "$(tc_filters)" = 2 ] &&
		[ "$(inflight)" = "$before_in" ] && echo 0 || echo 1) \
		"$what: exit $rc, says what to do, XDP program $before_prog kept, pins, TC filters and in-flight ($before_in) unchanged" \
		"output: $out" "want: $want" "xdp $(xdp_prog) pins $(pins) tc $(tc_filters) in-flight $(inflight)"
}

start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 64 --service-ms 1
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
# Every map this build pins is under $PIN now (links aside): the record must list them all.
NMAPS=$(ls "$PIN" | grep -vc '^link_')
ok $([ -n "$V" ] && [ "$(rec_u32 0)" = "$V" ] && [ "$(rec_u32 4)" = 0 ] &&
	[ "$(rec_total)" = "$NMAPS" ] && [ "$NMAPS" -gt 1 ] &&
	grep -q "created the maps under $PIN, layout $V" "$(last_log)" && echo 0 || echo 1) \
	"a fresh start records layout $V and the $NMAPS pinned maps in sluice_layout" \
	"version $(rec_u32 0) migrating $(rec_u32 4) maps $(rec_total)" "$(cat "$(last_log)")"

# Connections held across everything below (12 of them), then closed with FIN when the test
# says so (SIGTERM to loadgen: it closes its held connections and reports). The steps below
# take the longer the busier the host is (at load average 10 a whole run took 58 to 74 s, and
# a 40 s hold ended before the drill's migration); a hold of fixed length ends mid-way on a
# host busy enough, so the hold is as long as tests/run.sh lets a suite run (300 s) and the
# test ends it itself.
start_bg "$TMP/held.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 12 --max-requests 12 --hold-ms 300000 --timeout-ms 50000 --quiet \
	--class L2:1:src=198.18.0.20
HELD_PID=$LAST_PID
inflight_is() { [ "$(inflight)" = "$1" ]; }
wait_for 5 "the 12 held connections in flight" inflight_is 12
held=$(inflight)
# held_open STEP: the 12 held connections still open as the client sees them (loadgen running,
# 12 established connections from 198.18.0.20 to the service) before STEP, so that a step that
# finds fewer flows says whether the connections had gone before it began.
held_established() { in_cli ss -Htn state established src 198.18.0.20 dst $SRV_IP:7000 | wc -l; }
held_open() {
	local n running=no
	n=$(held_established)
	kill -0 "$HELD_PID" 2>/dev/null && running=yes
	ok $([ "$running" = yes ] && [ "$n" = 12 ] && echo 0 || echo 1) \
		"before $1: the 12 held connections are open ($n established, loadgen running: $running)" \
		"loadgen's report (written when it ends): $(cat "$TMP/held.json")" \
		"in-flight as sluice counts it: $(inflight)"
}

# --- same layout: adopt ------------------------------------------------------------------
held_open "the restart that adopts the maps"
stop_sluiced
start_sluiced "$CFG"
ok $([ "$held" = 12 ] && [ "$(inflight)" = 12 ] && grep -q "adopted the maps under $PIN, layout $V" "$(last_log)" &&
	echo 0 || echo 1) "same layout: a restart adopts the maps (in-flight $held before, $(inflight) after)" \
	"$(cat "$(last_log)")"
stop_sluiced

# --- refusals: nothing may change ----------------------------------------------------------
good=$(rec_bytes)
rec_write "$(rec_patch 0 $(printf '0x%02x' "$DV"))"
flag="--pin-dir $PIN"
SLUICECTL=$DRILL_CTL   # the record says $DV: in-flight read by the sluicectl of that layout
refused "$BUILD/sluiced" "a newer layout ($DV) is refused" \
	"pinned maps under $PIN have layout $DV, this sluiced understands $V and cannot migrate $DV: run \`sluicectl $flag detach\` (drops in-flight state; traffic is admitted while detached) or start the matching sluiced version"
# sluicectl reads the same maps: a newer layout's values read as this build's would be wrong
# numbers, so status, hist and baseline reset refuse and say which sluicectl to use.
for verb in status "hist db" "baseline reset db"; do
	out=$("$BUILD/sluicectl" --pin-dir "$PIN" $verb 2>&1); rc=$?
	ok $([ $rc -eq 1 ] && echo "$out" | grep -qF "the maps under $PIN are layout $DV, written by a newer sluiced; this sluicectl reads layouts up to $V" &&
		[ "$(rec_u32 0)" = "$DV" ] && echo 0 || echo 1) \
		"sluicectl $verb on pins of a newer layout ($DV): exit $rc, says to use the matching sluicectl" \
		"output: $out"
done
rec_write "$good"
SLUICECTL=$BUILD/sluicectl

off=$(rec_entry flows)
rec_write "$(rec_patch $((off + 40)) 0x5a 0x5a 0x5a 0x5a 0x5a 0x5a 0x5a 0x5a)"
refused "$BUILD/sluiced" "same version, but map flows does not match its record (key/value types)" \
	"pinned maps under $PIN have layout $V, but map flows does not match it (key/value types differ (BTF hash 5a5a5a5a5a5a5a5a"
rec_write "$good"

rec_write "$(rec_patch 4 0x01)"
refused "$BUILD/sluiced" "an interrupted migration is refused" \
	"pinned maps under $PIN are half-way through a migration from layout 1 to $V that was interrupted: run \`sluicectl $flag detach\`"
rec_write "$good"

# This build's pins with the record gone would read as layout 1; the maps layout 1 never had
# say otherwise, and converting this layout's values as layout 1's would misread them all.
mv "$REC" "$PIN/sluice_layout_away"
refused "$BUILD/sluiced" "pins without a record that hold a map layout 1 never had are refused" \
	"pinned maps under $PIN say layout 1, but map handshakes, which layout 1 never had, is pinned: cannot tell which layout the pins are: run \`sluicectl $flag detach\`"
mv "$PIN/sluice_layout_away" "$REC"

# --- upgrades from layouts 10, 9, 8, 7, 6, 5, 4, 3, 2 and 1, connections held ------------------
# What an older sluiced leaves pinned, made from this build's pins (its sluiced stopped):
#  - every older layout: no handshake_slots map (pending handshakes were in `handshakes`);
#  - layout 8 and older: no http_conns or http_conn_cap map (an http service's connections
#    and their cap);
#  - layout 7 and older: latency_hist with one per-CPU histogram per service and class (at
#    service x 4 + class; replaced unread by the migration: the histograms start from zero),
#    no latency_hist1..3 maps (the other classes' histograms);
#  - layout 6 and older: flows, handshakes and rejected_syns keyed without the local address;
#    the whole record in sluice_layout (no sluice_layout_ext), no untrusted_marks map (the
#    ignored priority marks); class_stats with one per-CPU entry of one class's counters per
#    service and class (replaced unread by the migration: its counters start from zero);
#  - layout 5 and older: in-flight counted in the shared map only (no inflight_pcpu), no
#    conn_cap map (the open-connection cap), no addr_services map (services by local address);
#  - layout 4 and older: flows with 0 where server_next and flags are (unused by tcp, padding
#    then), no busy or busy_released map (the tcp turns' counts);
#  - layout 3 and older: none of the controller's maps ctl_state and ctl_requests either;
#  - layouts 1 and 2: verdicts in the admit encoding: admit fractions (SLUICE_PROB_ONE = admit
#    all), a class admitted while in-flight < its threshold (so 0 = no room), flags bit 0
#    only; flows with 0 where client_next is (padding then); no handshakes or halfopen map
#    (the data path running meanwhile keeps its own);
#  - layouts 2 to 9: the record as that version, without the maps it never had, the types of
#    flows (2 to 4; and for 2, verdicts) hashed differently (7: its first 24 maps in
#    sluice_layout, the others in sluice_layout_ext); layout 1: no record at all.
# The heartbeat is fresh, as the old sluiced's last tick leaves it: the swapped-in programs
# enforce the converted verdicts from the swap on (the migration waits 50 ms after the swap
# before its last merge; the controller's first tick comes after that). Until the swap, this
# build's programs read the admit encoding as shed fractions and would refuse new
# connections, which an old data path would not: none are made before the swap.
# map_updates PINNED_MAP: apply the lines "KEY BYTES value VALUE BYTES" read from stdin in one
# bpftool process (bpftool batch); one bpftool per entry cost ~30 ms each, minutes for the
# hundreds of flows the upgrades below leave behind.
map_updates() {
	sed "s|^|map update pinned $1 key |" > "$TMP/updates.batch"
	bpftool batch file "$TMP/updates.batch" >/dev/null
}
verdicts_to_admit_encoding() {
	bpftool -j map dump pinned "$PIN/verdicts" | python3 -c '
import json, struct, sys
ONE = 65536
for e in json.load(sys.stdin):
    b = bytes(int(x, 16) for x in e["value"])
    if not any(b):
        continue  # never written: all zero in every layout
    f = list(struct.unpack("<17I", b))
    flags = f[16]
    for c in range(4):
        shut = flags & (1 << (8 + c))
        f[1 + c] = 0 if shut else (f[1 + c] or 0xffffffff)
        f[5 + c] = ONE - min(f[5 + c], ONE)
        f[9 + c] = ONE - min(f[9 + c], ONE)
    f[14] = ONE - min(f[14], ONE)
    f[16] = flags & 1
    out = struct.pack("<17I", *f)
    print(" ".join(e["key"]), "value", " ".join(str(x) for x in out))
' | map_updates "$PIN/verdicts"
}
CLIENT_NEXT_OFF=$(bpftool btf dump file "$BUILD/sluice.bpf.o" format raw | awk '
	/STRUCT .sluice_flow. / { in_flow = 1; next } /^\[/ { in_flow = 0 }
	in_flow && /.client_next./ { sub(/.*bits_offset=/, ""); print $1 / 8 }')
# The union of req_seq (http) and server_next (tcp), and the flags byte.
SERVER_NEXT_OFF=$(bpftool btf dump file "$BUILD/sluice.bpf.o" format raw | awk '
	/STRUCT .sluice_flow. / { in_flow = 1; next } /^\[/ { in_flow = 0 }
	in_flow && /.\(anon\)./ { sub(/.*bits_offset=/, ""); print $1 / 8 }')
FLAGS_OFF=$(bpftool btf dump file "$BUILD/sluice.bpf.o" format raw | awk '
	/STRUCT .sluice_flow. / { in_flow = 1; next } /^\[/ { in_flow = 0 }
	in_flow && /.flags./ { sub(/.*bits_offset=/, ""); print $1 / 8 }')
flows_forget() { # flows_forget OFFSET:LEN...: those bytes of every flow zeroed
	bpftool -j map dump pinned "$PIN/flows" | python3 -c '
import json, sys
for e in json.load(sys.stdin):
    v = e["value"]
    for f in sys.argv[1:]:
        off, n = map(int, f.split(":"))
        v[off:off + n] = ["0x00"] * n
    print(" ".join(e["key"]), "value", " ".join(v))
' "$@" | map_updates "$PIN/flows"
}
heartbeat_now() { # the first 8 bytes of sluice_globals: CLOCK_MONOTONIC, as BPF reads it
	local v
	v=$(bpftool -j map lookup pinned "$PIN/globals" key 0 0 0 0 | python3 -c '
import json, sys, time
v = json.load(sys.stdin)["value"]
v[0:8] = ["0x%02x" % x for x in time.monotonic_ns().to_bytes(8, "little")]
print(" ".join(v))')
	bpftool map update pinned "$PIN/globals" key 0 0 0 0 value $v
}
# Layouts before 7 keyed flows, handshakes and rejected_syns without the local address (the
# key's last 16 bytes): each pinned one replaced by a map of the short key holding the same
# entries. This build's programs keep running on their own maps meanwhile.
short_flow_keys() {
	local m type
	for m in flows handshakes rejected_syns; do
		[ -e "$PIN/$m" ] || continue
		type=$(bpftool -j map show pinned "$PIN/$m" | python3 -c 'import json,sys; print(json.load(sys.stdin)["type"])')
		bpftool -j map show pinned "$PIN/$m" | python3 -c '
import json, sys
m = json.load(sys.stdin)
print(m["bytes_value"], m["max_entries"])' > "$TMP/short.$m"
		read -r vsz max < "$TMP/short.$m"
		bpftool -j map dump pinned "$PIN/$m" > "$TMP/short.$m.json"
		bpftool map create "$PIN/${m}__short" type "$type" key 20 value "$vsz" entries "$max" name "$m"
		python3 -c '
import json, sys
for e in json.load(open(sys.argv[1])):
    print(" ".join(e["key"][:20]), "value", " ".join(e["value"]))' "$TMP/short.$m.json" |
			map_updates "$PIN/${m}__short"
		mv "$PIN/${m}__short" "$PIN/$m"
	done
}
# The maps layout FROM never had.
never_had() {
	[ "$1" -le 9 ] && echo handshake_slots flow_hash_key
	[ "$1" -le 8 ] && echo http_conns http_conn_cap
	[ "$1" -le 7 ] && echo latency_hist1 latency_hist2 latency_hist3
	[ "$1" -le 6 ] && echo sluice_layout_ext untrusted_marks
	[ "$1" -le 5 ] && echo conn_cap addr_services inflight_pcpu
	[ "$1" -le 4 ] && echo busy busy_released
	[ "$1" -le 3 ] && echo ctl_state ctl_requests
	[ "$1" -le 2 ] && echo handshakes halfopen
}
# Layouts before 6 counted in-flight in the shared map only: the per-CPU stripes' counts are
# added to it (every CPU's classes, and their sum to the total), as such a layout had them.
stripes_to_shared() {
	bpftool -j map dump pinned "$PIN/inflight_pcpu" | python3 -c '
import json, struct, sys
for e in json.load(sys.stdin):
    cls = [0, 0, 0, 0]
    for c in e.get("values", []):
        f = struct.unpack("<5q", bytes(int(x, 16) for x in c["value"]))
        for j in range(4):
            cls[j] += f[1 + j]
    if any(cls):
        print(" ".join(e["key"]), " ".join(str(x) for x in cls))
' | while read -r k0 k1 k2 k3 c0 c1 c2 c3; do
		local v
		v=$(bpftool -j map lookup pinned "$PIN/inflight" key $k0 $k1 $k2 $k3 | python3 -c '
import json, struct, sys
f = list(struct.unpack("<5q", bytes(int(x, 16) for x in json.load(sys.stdin)["value"])))
add = [int(x) for x in sys.argv[1:]]
f[0] += sum(add)
for j in range(4):
    f[1 + j] += add[j]
print(" ".join(str(x) for x in struct.pack("<5q", *f)))' $c0 $c1 $c2 $c3)
		bpftool map update pinned "$PIN/inflight" key $k0 $k1 $k2 $k3 value $v
	done
}
# class_stats as layouts before 7 had it: one per-CPU entry per service and class (a fresh
# map: the migration replaces it without reading it).
class_stats_per_class() {
	local n
	n=$(bpftool -j map show pinned "$PIN/class_stats" | json_get /dev/stdin "d['max_entries']")
	rm -f "$PIN/class_stats"
	bpftool map create "$PIN/class_stats" type percpu_array key 4 value "$CLASS_STATS_SIZE" \
		entries $((n * 4)) name class_stats
}
CLASS_STATS_SIZE=$(bpftool btf dump file "$BUILD/sluice.bpf.o" format raw |
	awk "/STRUCT 'sluice_class_stats' size=/ { sub(/.*size=/, \"\"); print \$1; exit }")
# latency_hist as layouts before 8 had it: every class's histograms, one per-CPU entry per
# service and class (a fresh map: the migration replaces it without reading it).
hist_all_classes() {
	local n vsz
	n=$(bpftool -j map show pinned "$PIN/latency_hist" | json_get /dev/stdin "d['max_entries']")
	vsz=$(bpftool -j map show pinned "$PIN/latency_hist" | json_get /dev/stdin "d['bytes_value']")
	rm -f "$PIN/latency_hist"
	bpftool map create "$PIN/latency_hist" type percpu_array key 4 value "$vsz" \
		entries $((n * 4)) name latency_hist
}
# Layout 10 keyed the 4-tuples' hash with one 64-bit secret: flow_hash_key of 8-byte values.
secret_of_layout10() {
	rm -f "$PIN/flow_hash_key"
	bpftool map create "$PIN/flow_hash_key" type array key 4 value 8 entries 1 name flow_hash_key
	bpftool map update pinned "$PIN/flow_hash_key" key 0 0 0 0 value 1 2 3 4 5 6 7 8
}
as_old_layout() { # as_old_layout 1|2|3|4|5|6|7|8|9|10
	local gone
	gone=$(never_had "$1" | tr '\n' ' ')
	[ "$1" = 10 ] && secret_of_layout10
	[ "$1" -le 7 ] && hist_all_classes
	[ "$1" -le 6 ] && class_stats_per_class
	[ "$1" -le 5 ] && stripes_to_shared
	# The entries of the record's continuation, before it goes (one line, maybe empty).
	ext_bytes > "$TMP/ext$1" 2>/dev/null || : > "$TMP/ext$1"
	[ "$1" -le 2 ] && verdicts_to_admit_encoding
	if [ "$1" -le 2 ]; then
		flows_forget "$SERVER_NEXT_OFF:4" "$FLAGS_OFF:1" "$CLIENT_NEXT_OFF:4"
	elif [ "$1" -le 4 ]; then
		flows_forget "$SERVER_NEXT_OFF:4" "$FLAGS_OFF:1"
	fi
	for m in $gone; do rm -f "$PIN/$m"; done
	[ "$1" -le 6 ] && short_flow_keys
	if [ "$1" = 1 ]; then
		rm -f "$REC"
		return
	fi
	rec_bytes | python3 -c '
import sys
b = bytearray(int(x, 16) for x in sys.stdin.read().split())
e = bytearray(int(x, 16) for x in open(sys.argv[1]).read().split())
e_all = e
n = int.from_bytes(b[8:12], "little")
ents = [b[16 + 48 * i:64 + 48 * i] for i in range(n)]
if len(e) >= 8 and e[0:4] == b[0:4]:
    ents += [e[8 + 48 * i:56 + 48 * i] for i in range(int.from_bytes(e[4:8], "little"))]
ver = int(sys.argv[2])
gone = [x.encode() for x in sys.argv[3:]]
keep = []
for e in ents:
    name = bytes(e[:24]).rstrip(b"\0")
    if name in gone:
        continue
    if (name == b"flows" and ver <= 4) or (name == b"verdicts" and ver <= 2):
        e[40:48] = bytes([0x2c] * 8)  # another layout, other types
    keep.append(e)
# layouts 7 to 9 list their first 24 maps in sluice_layout, the others in its continuation; the
# layouts before listed all of theirs in sluice_layout
main, more = (keep[:24], keep[24:]) if ver >= 7 else (keep, [])
out = bytearray(len(b))
out[0:4] = ver.to_bytes(4, "little")
out[8:12] = len(main).to_bytes(4, "little")
for i, e in enumerate(main):
    out[16 + 48 * i:64 + 48 * i] = e
print(" ".join("0x%02x" % x for x in out))
if ver >= 7:
    x = bytearray(len(e_all))
    x[0:4] = ver.to_bytes(4, "little")
    x[4:8] = len(more).to_bytes(4, "little")
    for i, e in enumerate(more):
        x[8 + 48 * i:56 + 48 * i] = e
    open(sys.argv[1] + ".new", "w").write(" ".join("0x%02x" % v for v in x))' \
		"$TMP/ext$1" "$1" $gone > "$TMP/rec$1"
	if [ "$1" -ge 7 ]; then
		bpftool map update pinned "$EXT" key 0 0 0 0 value $(cat "$TMP/ext$1.new")
	fi
	rec_write "$(cat "$TMP/rec$1")"
}

# Latency samples in L2's histogram of service slot 0 (latency_hist2: per CPU, the buckets
# then the sum), 0 when the map is not pinned (layouts before 8 had none).
hist2() {
	bpftool -j map lookup pinned "$PIN/latency_hist2" key 0 0 0 0 2>/dev/null | python3 -c '
import json, struct, sys
try:
    cpus = json.load(sys.stdin)["values"]
except Exception:
    print(0); sys.exit()
n = 0
for c in cpus:
    b = bytes(int(x, 16) for x in c["value"])
    n += sum(struct.unpack("<%dQ" % (len(b) // 8 - 1), b[:len(b) - 8]))
print(n)'
}

# upgrade FROM: the pins as layout FROM left them, then this build's sluiced: migrated, held
# connections kept, and connections made from the moment its programs are swapped in (the
# XDP link runs another program) all admitted.
upgrade() {
	local from=$1 verdict_before prog_before prog_after what n_copied created=1 h0 h1 attached
	held_open "the upgrade from layout $from"
	as_old_layout "$from"
	h0=$(hist2)
	# 1 and 2: verdicts and flows through their converters; 3 and 4: flows copied.
	# 5: only layout 6's maps are new. From every one of them: flows, handshakes (1 and 2 had
	# none) and rejected_syns copied under keys with the local address, which the held
	# connections' flows take from the socket table; a flow key the data path makes from
	# their packets must find them (their FINs end them at the end of the test); class_stats
	# renewed (counted with the copied maps). 7: only latency_hist renewed (counted with the
	# copied maps too), every other map adopted, flows too. From every one: latency_hist
	# renewed.
	if [ "$from" -le 2 ]; then what="verdicts converted"
	elif [ "$from" -le 4 ]; then what="flows copied"
	elif [ "$from" = 5 ] || [ "$from" -ge 7 ]; then what="every other map adopted"
	else what="flow keys given their local address"; fi
	n_copied=5
	local carried="flows: 12 entries.*" held_how="copied under keys with their local address"
	local keyed="; local addresses of carried flows and handshakes: 0 from their service, 12 from the socket table, 0 unknown"
	if [ "$from" = 7 ]; then
		n_copied=1 carried="latency_hist split by class.*" held_how="adopted"
		keyed=""
	fi
	if [ "$from" -ge 8 ]; then
		n_copied=0 carried="" held_how="adopted" keyed=""
	fi
	# 10: flow_hash_key and handshake_slots replaced unread (counted with the copied maps)
	local rekeyed=1
	if [ "$from" = 10 ]; then
		n_copied=2 carried="flow_hash_key and handshake_slots replaced by empty ones.*"
		held_how="adopted, the hash's one secret replaced by ten key words"
	fi
	verdict_before=$(bpftool -j map lookup pinned "$PIN/verdicts" key 0 0 0 0 | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["value"][20:24]))')
	prog_before=$(xdp_prog)
	heartbeat_now
	start_bg "$TMP/up$from.log" $IN_SRV "$BUILD/sluiced" --config "$CFG" --pin-dir "$PIN"
	SLUICED_PID=$LAST_PID
	for i in $(seq 1000); do
		bpftool link show pinned "$PIN/$(xdp_pin)" | grep -q " prog $prog_before\b" || break
		kill -0 "$SLUICED_PID" 2>/dev/null || break
	done
	prog_after=$(xdp_prog)
	# Right after the swap: 100 connections at 1000/s, each must be admitted and answered.
	$IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp --arrivals uniform \
		--rate 1000 --max-requests 100 --timeout-ms 3000 --quiet --class L2:1:src=198.18.0.20 \
		> "$TMP/after$from.json" 2>/dev/null
	wait_for 5 "the layout $from upgrade's attached event" grep -q '"to":"attached"' "$TMP/up$from.log"
	attached=$?
	local ok_after rej_after
	ok_after=$(json_get "$TMP/after$from.json" "d['classes']['L2']['ok']")
	rej_after=$(json_get "$TMP/after$from.json" "d['classes']['L2']['refused']")
	for m in $(never_had "$from"); do [ -e "$PIN/$m" ] || created=0; done
	# the hash's keys are this layout's (struct sluice_hash_keys, 40 bytes), drawn, not zero
	[ "$(bpftool -j map show pinned "$PIN/flow_hash_key" | json_get /dev/stdin "d['bytes_value']")" = 40 ] &&
		bpftool -j map lookup pinned "$PIN/flow_hash_key" key 0 0 0 0 |
		python3 -c 'import json,sys; sys.exit(0 if any(int(x, 16) for x in json.load(sys.stdin)["value"]) else 1)' ||
		rekeyed=0
	ok $(grep -q "migrated the maps under $PIN from layout $from to $V ($what.*$carried$n_copied maps copied, $((NMAPS - n_copied)) adopted$keyed" "$TMP/up$from.log" &&
		[ "$(rec_u32 0)" = "$V" ] && [ "$(rec_u32 4)" = 0 ] && [ "$(rec_total)" = "$NMAPS" ] &&
		[ "$(inflight)" = 12 ] && [ "$created" = 1 ] && [ "$rekeyed" = 1 ] &&
		[ "$(tc_filters)" = 2 ] && [ "$attached" = 0 ] && kill -0 "$SLUICED_PID" 2>/dev/null &&
		[ -n "$prog_after" ] && [ "$prog_after" != "$prog_before" ] && echo 0 || echo 1) \
		"upgrade from layout $from: $what, 12 held flows $held_how, new maps created ($(never_had "$from" | tr '\n' ' ')), $((NMAPS - n_copied)) maps adopted, record $V, in-flight $(inflight), attached and running, program $prog_before -> $prog_after" \
		"$(cat "$TMP/up$from.log")" "record version $(rec_u32 0) maps $(rec_total) pins $(pins)"
	# their latency samples land in L2's own histogram map (latency_hist2), which status reads
	local p50_after
	status; p50_after=$(json_get "$TMP/status.json" "d['services'][0]['classes'][2]['p50_us']")
	h1=$(hist2)
	ok $([ "$ok_after" = 100 ] && [ "$rej_after" = 0 ] && [ "$p50_after" -gt 0 ] &&
	     [ $((h1 - h0)) -ge 100 ] && echo 0 || echo 1) \
		"upgrade from layout $from: the 100 connections made from the swap on are all admitted ($ok_after ok, $rej_after refused), L2's latency histogram counts their turns ($h0 -> $h1 samples, p50 $p50_after us)" \
		"$(cat "$TMP/after$from.json")" "layout $from verdict's admit_prob[L0] bytes were: $verdict_before"
	stop_sluiced
}
upgrade 10
upgrade 9
upgrade 8
upgrade 7
upgrade 6
upgrade 5
upgrade 4
upgrade 3
upgrade 2
upgrade 1

# --- the layout drill: migrate V -> V+1 by copying every map, connections held -------------
held_open "the drill's migration"
status; before=$(json_get "$TMP/status.json" "d['services'][0]['classes'][2]['admitted']")
completed_before=$(json_get "$TMP/status.json" "d['services'][0]['classes'][2]['completed']")
link_before=$(pinned_id link "$(xdp_pin)" id)
prog_before=$(xdp_prog)
flows_id_before=$(pinned_id map flows id)
start_bg "$TMP/drill.log" $IN_SRV "$DRILL" --config "$CFG" --pin-dir "$PIN"
SLUICED_PID=$LAST_PID
wait_for 5 "the drill's attached event" grep -q '"to":"attached"' "$TMP/drill.log"
SLUICECTL=$DRILL_CTL
link_after=$(pinned_id link "$(xdp_pin)" id)
flows_id_after=$(pinned_id map flows id)
ok $(grep -q "migrated the maps under $PIN from layout $V to $DV (rehearsal.*flows: 12 entries.*$((NMAPS - 1)) maps copied, 1 adopted" "$TMP/drill.log" &&
	[ "$(rec_u32 0)" = "$DV" ] && [ "$(rec_u32 4)" = 0 ] && [ "$(inflight)" = 12 ] &&
	[ "$link_after" = "$link_before" ] && [ "$(xdp_prog)" != "$prog_before" ] &&
	[ "$flows_id_after" != "$flows_id_before" ] && [ "$(tc_filters)" = 2 ] &&
	[ ! -e "$PIN/flows__migrating" ] && echo 0 || echo 1) \
	"migration $V -> $DV: 12 flows copied into a fresh map (id $flows_id_before -> $flows_id_after), program swapped on the same XDP link ($link_after), in-flight $(inflight), record $DV" \
	"$(cat "$TMP/drill.log")" "version $(rec_u32 0) link $link_before/$link_after prog $prog_before/$(xdp_prog)"
status
ok $([ -n "$before" ] && [ "$(json_get "$TMP/status.json" "d['services'][0]['classes'][2]['admitted']")" = "$before" ] && echo 0 || echo 1) \
	"counters carried over (L2 admitted $before)"

# A sluiced of layout V on the migrated pins: refused, the drill's data path untouched.
stop_sluiced
refused "$BUILD/sluiced" "layout $V sluiced on layout $DV pins is refused" \
	"pinned maps under $PIN have layout $DV, this sluiced understands $V and cannot migrate $DV: run \`sluicectl $flag detach\`"

# The held connections end through the migrated maps: every slot comes back.
start_bg "$TMP/drill2.log" $IN_SRV "$DRILL" --config "$CFG" --pin-dir "$PIN"
SLUICED_PID=$LAST_PID
wait_for 5 "the drill's second start to attach" grep -q '"to":"attached"' "$TMP/drill2.log"
held_open "they are closed"
kill -TERM "$HELD_PID"
wait "$HELD_PID"
wait_for 5 "in-flight back to 0 after the held connections end" inflight_is 0
held_ok=$(json_get "$TMP/held.json" "d['classes']['L2']['ok']")
status; completed=$(json_get "$TMP/status.json" "d['services'][0]['classes'][2]['completed']")
ok $([ "$held_ok" = 12 ] && [ "$(inflight)" = 0 ] && [ $((completed - completed_before)) = 12 ] &&
	grep -q "adopted the maps under $PIN, layout $DV" "$TMP/drill2.log" && echo 0 || echo 1) \
	"the 12 held connections complete after the upgrades from layouts 10, 9, 8, 7, 6, 5, 4, 3, 2 and 1 and the drill's migration, in-flight returns to exactly 0 and they count as completed ($completed_before -> $completed: their endings found the copied flows, not the GC)" \
	"loadgen ok $held_ok in-flight $(inflight)" "$(cat "$TMP/drill2.log")"
finish
