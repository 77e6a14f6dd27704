#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# An experiment, not a test: where the bench's Apache (16 workers x 50 ms, tools/bench/apache)
# starts to queue, read two ways at each of a series of fixed limits under a closed-loop
# overload (wrk, CONNS keep-alive connections, all L3): sluice's own admitted latency
# (request -> first response byte: wait + service) and the wait alone (request -> the
# server's first read of it, tests/bench/qdelay.bpf.c). Prints one line per (run, limit);
# the limit `dayone` runs the bench's day-one config (adaptive limit) instead.
#   tests/bench/qdelay-knee.sh      env: LIMITS RUNS DUR CONNS LOOP RATE KEEP (defaults below;
#                                   KEEP=DIR keeps each run's sluiced log there;
#                                   DAYONE_SLO=60ms adds latency_slo to the dayone config)
# LOOP=open: tools/loadgen's open loop instead (Poisson arrivals at RATE/s, keep-alive).
# Needs root, apache2, wrk (make bench installs them) and a built tree (make bench).
LIMITS=${LIMITS:-"12 14 15 16 17 18 20 24"}
RUNS=${RUNS:-2}
DUR=${DUR:-7}
CONNS=${CONNS:-56}
LOOP=${LOOP:-closed}
RATE=${RATE:-1100}         # open loop: 3.5 x the ~315 answers/s this Apache gives
TAG=qdk
source "$(dirname "$0")/../e2e/lib.sh"
for t in apache2 wrk; do command -v $t >/dev/null || { echo "qdelay-knee: $t missing (make bench installs it)" >&2; exit 1; }; done
[ -x "$BUILD/bench/qdelay" ] || { echo "qdelay-knee: $BUILD/bench/qdelay missing (make bench builds it)" >&2; exit 1; }
e2e_setup

WORKERS=16 SERVICE_MS=50
A=$TMP/apache
mkdir -p "$A"; chmod 755 "$TMP" "$A"   # Apache's user reads its handler there
sed "s|@TMP@|$A|g; s|@LISTEN@|$SRV_IP:8080|g; s|@WORKERS@|$WORKERS|g; s|@SERVICE_MS@|$SERVICE_MS|g" \
	tools/bench/apache/httpd.conf > "$A/httpd.conf"
sed "s|@SERVICE_US@|$((SERVICE_MS * 1000))|g" tools/bench/apache/work.lua > "$A/work.lua"
start_bg "$A/stdout.log" $IN_SRV apache2 -f "$A/httpd.conf" -DFOREGROUND
apache_up() { $IN_CLI curl -s -o /dev/null --max-time 1 http://$SRV_IP:8080/; }
wait_for 10 "Apache to answer" apache_up || { cat "$A/error.log" >&2; exit 1; }

echo "# qdelay-knee $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo -dirty) $(date -u '+%F %T') UTC, kernel $(uname -r), $(nproc) CPUs"
if [ "$LOOP" = open ]; then LOADDESC="loadgen open loop, $RATE arrivals/s (Poisson, keep-alive, L3)"
else LOADDESC="wrk $CONNS keep-alive connections (L3)"; fi
echo "# Apache $WORKERS workers x $SERVICE_MS ms; $LOADDESC, $DUR s per limit; the wait probe over the middle $((DUR - 2)) s"
printf '%-4s %-6s %8s %8s %9s %9s %7s %9s %9s %9s %9s\n' run limit "ok/s" "429/s" "adm_p50" "adm_p99" waits "wait_p50" "wait_p90" "wait_p99" "wait_avg"
for run in $(seq 1 "$RUNS"); do
	for L in $LIMITS; do
		if [ "$L" = dayone ]; then   # the bench's day-one config: the adaptive limit
			sed "s|@STATE@|$TMP/state|g; s|@L0@|198.18.0.10|g" tools/bench/sluice-dayone.yaml \
				> "$TMP/sluice.yaml"
			# DAYONE_SLO=60ms: the same with the objective written as a latency
			[ -z "${DAYONE_SLO:-}" ] || echo "    latency_slo: $DAYONE_SLO" >> "$TMP/sluice.yaml"
		else
			cat > "$TMP/sluice.yaml" <<Y
interface: s0
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    limit: { fixed: $L }
    headroom: { L0: 100, L1: 100, L2: 100, L3: 100 }
    headroom_mode: fixed
    connection_cap: off
    default_class: L3
Y
		fi
		start_sluiced "$TMP/sluice.yaml" >/dev/null || { echo "qdelay-knee: sluiced did not start" >&2; exit 1; }
		if [ "$LOOP" = open ]; then
			$IN_CLI timeout -s INT $((DUR + 20)) "$BUILD/tools/loadgen" --target $SRV_IP:8080 \
				--mode http-keepalive --rate "$RATE" --duration "$DUR" --timeout-ms 2000 \
				--seed "$run" --quiet --class L3:1 > "$TMP/wrk.out" 2>&1 &
		else
			$IN_CLI timeout $((DUR + 20)) wrk -t2 -c"$CONNS" -d"${DUR}s" --timeout 2s \
				http://$SRV_IP:8080/ > "$TMP/wrk.out" 2>&1 &
		fi
		wpid=$!
		sleep 1 # part of the measurement: the probe skips the load's first second
		"$BUILD/bench/qdelay" "$PIN" 8080 $((DUR - 2)) > "$TMP/qd.json" 2> "$TMP/qd.err"
		wait $wpid
		"$BUILD/sluicectl" --pin-dir "$PIN" status --json --no-rates > "$TMP/status.json"
		[ "$L" = dayone ] && echo "# day one: the limit at the end $(json_get "$TMP/status.json" "d['services'][0]['limit']"), the baseline $(json_get "$TMP/status.json" "d['services'][0]['baseline_us']") us"
		kill -TERM "$SLUICED_PID"; wait "$SLUICED_PID" 2>/dev/null
		[ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$SLUICED_LOG" "$KEEP/sluiced-$LOOP-$L-$run.log"; }
		$IN_SRV "$BUILD/sluicectl" --pin-dir "$PIN" detach >/dev/null 2>&1
		python3 - "$run" "$L" "$DUR" "$TMP/wrk.out" "$TMP/qd.json" "$TMP/status.json" "$TMP/qd.err" <<'PY'
import json, re, sys
run, L, dur, wrk, qd, st, qerr = sys.argv[1:]
w = open(wrk).read()
if w.lstrip().startswith('{'):              # loadgen's JSON: answered and refused
    lg = json.loads(w)['classes']['L3']
    total, non2xx = lg['ok'] + lg['http_429'], lg['http_429']
else:
    total = int(re.search(r'(\d+) requests in', w).group(1))
    non2xx = int((re.search(r'Non-2xx or 3xx responses: (\d+)', w) or [0, 0])[1])
try:
    q = json.load(open(qd))
except Exception:
    q = {'waits': 0, 'p50_us': 0, 'p90_us': 0, 'p99_us': 0, 'mean_us': 0}
    print('# qdelay failed: ' + open(qerr).read().strip())
c = [x for x in json.load(open(st))['services'][0]['classes'] if x['class'] == 'L3'][0]
d = float(dur)
if total - non2xx < 1:
    print('# wrk: ' + ' | '.join(w.strip().splitlines()))
print('%-4s %-6s %8.1f %8.1f %7.1fms %7.1fms %7d %7.2fms %7.2fms %7.2fms %7.2fms' % (
    run, L, (total - non2xx) / d, non2xx / d, c['p50_us'] / 1e3, c['p99_us'] / 1e3, q['waits'],
    q['p50_us'] / 1e3, q['p90_us'] / 1e3, q['p99_us'] / 1e3, q['mean_us'] / 1e3))
PY
	done
done
