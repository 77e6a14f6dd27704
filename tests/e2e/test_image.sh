#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The container image for real: deploy/Dockerfile built with buildah (tools/image.sh, the
# recipe of `make image`; a Debian 12 base made with mmdebstrap when no registry is
# reachable), then the image's own sluiced run the way the DaemonSet runs it, without a
# container runtime (podman/crun cannot run containers on every host): in a private mount
# namespace, chrooted into the image's root filesystem (buildah mount), read-only, with the
# DaemonSet's volumes bound where it mounts them (the host's /sys/fs/bpf, /sys/kernel/btf
# read-only, /var/lib/sluice, the config directory read-only) and only the capabilities the
# DaemonSet grants (read from deploy/kubernetes/daemonset.yaml), no_new_privs, in the server
# namespace of a veth topology. It must attach, pass the DaemonSet's startup probe run with the
# image's own tools, and shed: a flood of connections over the limit is refused with RST.
# Then SIGTERM and a second pod from the image adopt the pinned data path (the rolling update).
# Speaks TAP. Usage: bash tests/e2e/test_image.sh (root; BUILD=build; build first:
# make build/sluicectl build/tools/loadgen build/tools/testserver build/tests/xdp_pass.bpf.o)
CLIENT_ADDRS="198.18.0.10"
TAG=image
source "$(dirname "$0")/lib.sh"

DS=deploy/kubernetes/daemonset.yaml
IMAGE=localhost/sluice:e2e-$$
CTR=sluice-e2e-$$
ROOT=""

[ "$(id -u)" = 0 ] || skip_all "needs root"
for f in "$BUILD/tools/loadgen" "$BUILD/tools/testserver" "$BUILD/tests/xdp_pass.bpf.o"; do
	[ -e "$f" ] || { echo "not ok 1 - $f not built (make test builds it)"; echo "1..1"; exit 1; }
done

test_cleanup() { # called by e2e_cleanup before the namespaces go
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait_for 2 "the pods to stop" none_alive "${PIDS[@]}" >/dev/null
	if [ -n "$ROOT" ]; then buildah umount "$CTR" >/dev/null 2>&1; fi
	buildah rm "$CTR" >/dev/null 2>&1
	buildah rmi "$IMAGE" >/dev/null 2>&1
}

# ---------------------------------------------------------------- build ------------------
# The build takes minutes: a test stopped in it (a timeout) still removes the image and $TMP.
trap e2e_cleanup EXIT
trap 'exit 1' INT TERM
t0=$(now_ms)
IMAGE=$IMAGE IMAGE_ENV=$TMP/image.env tools/image.sh "$BUILD" > "$TMP/image.log" 2>&1
rc=$?
dt=$(($(now_ms) - t0))
e2e_setup          # after the build: the topology only lives as long as it is needed
[ -f "$TMP/image.env" ] && source "$TMP/image.env"
ok $([ $rc -eq 0 ] && buildah inspect --type image "$IMAGE" >/dev/null 2>&1 && echo 0 || echo 1) \
	"make image's recipe builds deploy/Dockerfile with buildah (chroot isolation) on ${BASE_IMAGE:-?}: $((${IMAGE_SIZE_BYTES:-0} / 1000000)) MB in $((dt / 1000)) s (layers cached by earlier builds are reused)" \
	"$(tail -5 "$TMP/image.log")"
[ $rc -eq 0 ] || { finish; exit 1; }

buildah from --pull=never --name "$CTR" "$IMAGE" >/dev/null && ROOT=$(buildah mount "$CTR")
ENTRY=$(buildah inspect --type image "$IMAGE" |
	python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)["OCIv1"]["config"]["Entrypoint"]))')
ok $([ -n "$ROOT" ] && [ -x "$ROOT/usr/local/bin/sluiced" ] && [ -x "$ROOT/usr/local/bin/sluicectl" ] &&
	[ "$ENTRY" = "/usr/local/bin/sluiced --config /etc/sluice/sluice.yaml" ] && echo 0 || echo 1) \
	"the image holds sluiced and sluicectl; its entrypoint is: $ENTRY"

# Everything the binaries link resolves inside the image (no library of the build machine).
out=$(chroot "$ROOT" /usr/bin/ldd /usr/local/bin/sluiced /usr/local/bin/sluicectl 2>&1)
ok $([ $? -eq 0 ] && ! echo "$out" | grep -q 'not found' && echo 0 || echo 1) \
	"every shared library of the image's sluiced and sluicectl is in the image" "$(echo "$out" | grep 'not found')"

# The ConfigMap's config passes the image's own sluiced --check.
python3 -c 'import sys, yaml
sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"]["sluice.yaml"])' \
	deploy/kubernetes/configmap-config.yaml > "$ROOT/tmp/cm-sluice.yaml"
out=$(chroot "$ROOT" /usr/local/bin/sluiced --check /tmp/cm-sluice.yaml 2>&1)
ok $? "the ConfigMap's sluice.yaml passes the image's sluiced --check" "$out"

# ---------------------------------------------------------------- the pod ----------------
# The DaemonSet's securityContext, as setpriv options: capabilities.add (drop ALL), and
# allowPrivilegeEscalation: false (no_new_privs). setpriv cannot grant what this shell lacks.
CAPS=$(python3 -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
c = d["spec"]["template"]["spec"]["containers"][0]["securityContext"]
assert c["capabilities"]["drop"] == ["ALL"] and c["allowPrivilegeEscalation"] is False
print(" ".join(c["capabilities"]["add"]))' "$DS")
PROBE=$(python3 -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
print(d["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["exec"]["command"][2])' "$DS")
LIVE=$(python3 -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
print(d["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["exec"]["command"][2])' "$DS")
capbnd=$((0x$(awk '/^CapBnd/{print $2}' /proc/self/status)))
bset=-all; want=0; lacking=""
for c in $CAPS; do
	b=$(awk -v n="CAP_$c" '$1 == "#define" && $2 == n { print $3 }' /usr/include/linux/capability.h)
	[ -n "$b" ] || { ok 1 "capability $c of the DaemonSet is known to this kernel's headers"; finish; exit 1; }
	if [ $((capbnd >> b & 1)) = 1 ]; then bset="$bset,+${c,,}"; want=$((want | 1 << b)); else lacking="$lacking $c"; fi
done
[ -n "$lacking" ] && echo "# this shell lacks$lacking; the pod runs without it"
# the systemd unit grants the same set
UNIT_CAPS=$(sed -n 's/^CapabilityBoundingSet=//p' deploy/systemd/sluiced.service | tr ' ' '\n' | sed 's/^CAP_//' | sort | xargs)

# The pod's volumes, as the DaemonSet mounts them.
mkdir -p "$TMP/etc-sluice" "$TMP/state"
mkdir -p "$ROOT/sys" "$ROOT/proc" "$ROOT/var/lib/sluice" "$ROOT/etc/sluice" "$ROOT/tmp"
cat > "$TMP/etc-sluice/sluice.yaml" <<Y
interface: s0
control_interval_ms: 100
heartbeat_timeout_ms: 1000
metrics_address: 127.0.0.1:0
state_dir: /var/lib/sluice
pin_dir: $PIN
services:
  - name: db
    port: 7000
    protocol: tcp
    reject: rst
    limit: { fixed: 4 }
    headroom: { L0: 100, L1: 90, L2: 75, L3: 50 }
    headroom_mode: fixed
    default_class: L3
    classify:
      - { source: 198.18.0.10/32, class: L0 }
Y
cat > "$TMP/pod.sh" <<'P'
# In a private mount namespace: the image's root read-only, the DaemonSet's mounts on it, then
# chroot, the capability set, and the image's entrypoint.
set -e
root=$1 newroot=$2 etc=$3 state=$4 bset=$5; shift 5
mount --bind "$root" "$newroot"
mount -o remount,bind,ro "$newroot"                       # readOnlyRootFilesystem: true
mount -t proc proc "$newroot/proc"
mount --bind -o ro /sys "$newroot/sys"                    # what a container sees of sysfs
mount --bind /sys/fs/bpf "$newroot/sys/fs/bpf"            # hostPath /sys/fs/bpf
mount --bind /sys/kernel/btf "$newroot/sys/kernel/btf"    # hostPath /sys/kernel/btf, read-only
mount -o remount,bind,ro "$newroot/sys/kernel/btf"
mount --bind "$state" "$newroot/var/lib/sluice"           # hostPath /var/lib/sluice
mount --bind "$etc" "$newroot/etc/sluice"                 # ConfigMap sluice-config, read-only
mount -o remount,bind,ro "$newroot/etc/sluice"
exec chroot "$newroot" /usr/bin/setpriv --bounding-set "$bset" --inh-caps=-all --ambient-caps=-all \
	--no-new-privs -- "$@"
P
# pod N: start one from the image; sets POD_PID and POD_LOG
pod() {
	mkdir -p "$TMP/newroot$1"
	POD_LOG=$TMP/pod$1.log
	start_bg "$POD_LOG" $IN_SRV unshare --mount --propagation private bash "$TMP/pod.sh" \
		"$ROOT" "$TMP/newroot$1" "$TMP/etc-sluice" "$TMP/state" "$bset" $ENTRY --pin-dir "$PIN"
	POD_PID=$LAST_PID
	SLUICED_PID=$POD_PID
	wait_for 8 "the pod's sluiced to attach" attached_or_gone "$POD_LOG"
}
# in_pod CMD...: like kubectl exec: the pod's namespaces, root and capability set
in_pod() {
	nsenter -t "$POD_PID" -m -n -r -w /usr/bin/setpriv --bounding-set "$bset" --inh-caps=-all \
		--ambient-caps=-all --no-new-privs -- "$@"
}

# The server answers a line after service_ms (its mode file): 2 s while the shedding below
# needs busy connections (an idle connection holds no capacity), 1 ms otherwise.
MODE=$TMP/server.mode
echo "service_ms=1" > "$MODE"
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:7000 --mode tcp \
	--workers 64 --service-ms 1 --mode-file "$MODE"
pod 1
capeff=$(awk '/^CapEff/{print $2}' /proc/$POD_PID/status 2>/dev/null)
capbnd_pod=$(awk '/^CapBnd/{print $2}' /proc/$POD_PID/status 2>/dev/null)
nnp=$(awk '/^NoNewPrivs/{print $2}' /proc/$POD_PID/status 2>/dev/null)
exe_root=$(readlink /proc/$POD_PID/root 2>/dev/null)
ok $(grep -q '"to":"attached"' "$POD_LOG" && kill -0 "$POD_PID" 2>/dev/null &&
	[ $((0x${capeff:-0})) = $want ] && [ $((0x${capbnd_pod:-0})) = $want ] && [ "$nnp" = 1 ] &&
	[ "$exe_root" = "$TMP/newroot1" ] && [ "$(echo $CAPS | tr ' ' '\n' | sort | xargs)" = "$UNIT_CAPS" ] && echo 0 || echo 1) \
	"the image's sluiced attaches chrooted in the image with only the DaemonSet's capabilities ($CAPS, the systemd unit's too: CapEff $capeff) and no_new_privs" \
	"root $exe_root, CapBnd $capbnd_pod, NoNewPrivs $nnp, unit: $UNIT_CAPS" "$(tail -5 "$POD_LOG")"
if ! kill -0 "$POD_PID" 2>/dev/null; then finish; exit 1; fi

out=$(in_pod /bin/sh -c "$PROBE" 2>&1)
ok $? "the DaemonSet's startup probe passes inside the pod with the image's sluicectl: $PROBE" "$out"
# The liveness probe reads heartbeat_age_s from the real status with the image's own awk.
out=$(in_pod /bin/sh -c "$LIVE" 2>&1)
ok $? "the DaemonSet's liveness probe passes inside the pod with the image's sluicectl and awk" "$LIVE" "$out"

# ---------------------------------------------------------------- it sheds ---------------
# limit 4, L3 headroom 50%: 2 busy L3 connections at a time; 40 arrive within 1 s, each
# waiting 2 s for its answer.
echo "service_ms=2000" > "$MODE"
wait_for 5 "the server to take up service_ms=2000 from its mode file" \
	grep -q 'mode: service_ms=2000.000 ' "$TMP/server.log"
in_cli "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp --arrivals uniform --rate 40 \
	--duration 1 --timeout-ms 3000 --quiet --class L3:1 > "$TMP/l3.json" 2>"$TMP/l3.err"
echo "service_ms=1" > "$MODE"
lg() { json_get "$TMP/l3.json" "d['classes']['L3']['$1']"; }
sent=$(lg sent 2>/dev/null); okc=$(lg ok 2>/dev/null); refused=$(lg refused 2>/dev/null)
in_pod /usr/local/bin/sluicectl --pin-dir "$PIN" status --json > "$TMP/status.json" 2>"$TMP/status.err"
rej=$(json_get "$TMP/status.json" "[c for c in d['services'][0]['classes'] if c['class']=='L3'][0]['rejected_by']['headroom']" 2>/dev/null)
ok $([ "${sent:-0}" -ge 30 ] && [ "${okc:-0}" -ge 2 ] && [ "${refused:-0}" -ge 20 ] && [ "${rej:-0}" -ge 20 ] && echo 0 || echo 1) \
	"the image's sluiced sheds: of $sent L3 connections $okc served, $refused refused with RST; the pod's sluicectl counts $rej refused for headroom" \
	"$(cat "$TMP/l3.json" "$TMP/l3.err" "$TMP/status.err" 2>/dev/null | tail -5)"

# The table an operator reads in the pod: within 120 columns, and its admitted% is the
# measured share of the JSON's counters (not the ladder's probability, which stays 100%).
in_pod /usr/local/bin/sluicectl --pin-dir "$PIN" status > "$TMP/status.txt" 2>&1
wide=$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' "$TMP/status.txt")
row=$(awk '/^  class / { for (i = 1; i <= NF; i++) col[$i] = i } $1 == "L3" && col["admitted%"] { print $col["admitted%"], $col["ladder%"]; exit }' "$TMP/status.txt")
want=$(json_get "$TMP/status.json" "'%.1f%%' % (100.0 * [c for c in d['services'][0]['classes'] if c['class']=='L3'][0]['admitted_ratio'])" 2>/dev/null)
ok $([ "$wide" -le 120 ] && [ "$row" = "$want 100%" ] && echo 0 || echo 1) \
	"the pod's sluicectl status fits 120 columns ($wide) and shows L3 admitted% $want (measured) next to ladder% 100% (the ladder's probability)" \
	"row: $row" "$(cat "$TMP/status.txt")"

# ---------------------------------------------------------------- rolling update ---------
# L0 traffic (within its headroom) runs across the restart: the pinned data path keeps
# serving while no controller runs, and the next pod adopts it without a refused connection.
start_bg "$TMP/l0.json" $IN_CLI "$BUILD/tools/loadgen" --target $SRV_IP:7000 --mode tcp \
	--arrivals uniform --rate 20 --duration 3 --timeout-ms 2000 --quiet --class L0:1:src=198.18.0.10
LGPID=$LAST_PID
sleep 0.5 # part of the scenario: the pod stops half a second into the L0 load
kill -TERM "$POD_PID"; wait "$POD_PID" 2>/dev/null; rc=$?
pins=$(ls "$PIN" 2>/dev/null | wc -l)
pod 2
wait "$LGPID"
l0() { json_get "$TMP/l0.json" "d['classes']['L0']['$1']" 2>/dev/null; }
ok $([ $rc -eq 0 ] && [ "$pins" -gt 0 ] && grep -q 'attached to s0 (xdp adopted)' "$POD_LOG" &&
	kill -0 "$POD_PID" 2>/dev/null && [ "$(l0 sent)" -ge 50 ] && [ "$(l0 ok)" = "$(l0 sent)" ] && echo 0 || echo 1) \
	"rolling update: the pod exits $rc on SIGTERM and leaves $pins pins; the next pod from the image adopts them; L0 traffic across it: $(l0 ok) of $(l0 sent) served" \
	"$(tail -3 "$POD_LOG")" "$(cat "$TMP/l0.json")"
finish
