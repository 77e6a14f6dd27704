#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# End-to-end test of the test tools on loopback: build/tools/testserver (a server of known
# capacity) and build/tools/loadgen (an open-loop load generator); and build/tools/synflood's
# command line (its flood is the refusal bench's, tools/bench/refusal.sh). No root, no namespaces.
# Speaks TAP. Every process it starts is killed on exit, whatever happens; bounded in time
# (each step is wrapped in `timeout`; about 20 s in all).
# Usage: tests/e2e/test_tools.sh   (BUILD=build by default)
TAG=tools
source "$(dirname "$0")/lib.sh"   # TAP ok, wait_for, TMP (no namespaces here)
TS=$BUILD/tools/testserver
LG=$BUILD/tools/loadgen
SF=$BUILD/tools/synflood

cleanup() {
	# TERM first (timeout(1) passes it on to loadgen, which then stops at once), then KILL
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	wait_for 2 "every process of the test to end after SIGTERM" none_alive "${PIDS[@]}" >/dev/null
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

echo "1..19"

if [ ! -x "$TS" ] || [ ! -x "$LG" ] || [ ! -x "$SF" ]; then
	make -s "$TS" "$LG" "$SF" >/dev/null 2>&1
fi

# json_get FILE SECTION KEY: a number from the loadgen JSON; SECTION is "total" or a class.
json_get() {
	local sec
	if [ "$2" = total ]; then
		sec=$(sed 's/.*"total":{//' "$1")
	else
		sec=$(sed "s/.*\"classes\":{//; s/.*\"$2\":{//; s/}.*//" "$1")
	fi
	echo "$sec" | grep -o "\"$3\":[-0-9.a-z]*" | head -1 | cut -d: -f2
}
# num_check EXPR: an awk condition on numbers, e.g. num_check "5.2 >= 4.5 && 5.2 <= 8"
num_check() { awk "BEGIN { exit !($1) }" 2>/dev/null; }

SRV_PID=
start_server() { # start_server ARGS...: sets SRV_PID and PORT
	rm -f "$TMP/port"
	"$TS" --listen 127.0.0.1:0 --port-file "$TMP/port" --quiet "$@" >"$TMP/server.out" 2>"$TMP/server.err" &
	SRV_PID=$!
	PIDS+=("$SRV_PID")
	wait_for 5 "testserver to write its port file" test -s "$TMP/port"
	PORT=$(head -1 "$TMP/port" 2>/dev/null)
	[ -n "$PORT" ]
}
stop_server() {
	[ -n "$SRV_PID" ] || return 0
	kill -TERM "$SRV_PID" 2>/dev/null
	timeout 3 tail --pid="$SRV_PID" -f /dev/null 2>/dev/null
	kill -KILL "$SRV_PID" 2>/dev/null
	wait "$SRV_PID" 2>/dev/null
	SRV_PID=
}
run_lg() { # run_lg OUTFILE ARGS...
	local out=$1
	shift
	timeout 20 "$LG" --target "127.0.0.1:$PORT" --quiet "$@" >"$out" 2>"$out.err" &
	local p=$!
	PIDS+=("$p")
	wait "$p"
}

# --- 1-6: a server with spare capacity: 4 workers x 5 ms = 800/s, offered 100/s
start_server --workers 4 --service-ms 5
ok $? "testserver starts (http, 4 workers, 5 ms) on a free port" "$(cat "$TMP/server.err")"

run_lg "$TMP/base.json" --rate 100 --duration 2 --timeout-ms 2000
rc=$?
sent=$(json_get "$TMP/base.json" total sent)
okc=$(json_get "$TMP/base.json" total ok)
err=$(json_get "$TMP/base.json" total errors)
rej=$(json_get "$TMP/base.json" total rejected)
p50=$(json_get "$TMP/base.json" total p50_ms)
p99=$(json_get "$TMP/base.json" total p99_ms)
echo "# keep-alive 100/s for 2 s: sent=$sent ok=$okc errors=$err rejected=$rej p50=${p50}ms p99=${p99}ms"
ok $((rc != 0)) "loadgen http-keepalive completes and exits 0" "rc=$rc $(cat "$TMP/base.json.err")"
num_check "${okc:-0} > 100"; ok $? "ok count > 100 (got ${okc:-none})"
num_check "${err:-1} == 0 && ${rej:-1} == 0"; ok $? "no errors, no rejections (errors=${err:-none} rejected=${rej:-none})"
p50_in_range() { num_check "${p50:-0} >= 4.5 && ${p50:-0} <= 8"; }
remeasure_p50() { # one more 2 s measurement
	run_lg "$TMP/base2.json" --rate 100 --duration 2 --timeout-ms 2000
	p50=$(json_get "$TMP/base2.json" total p50_ms)
	p50_in_range
}
retry_once p50_in_range remeasure_p50
ok $? "p50 of a 5 ms service is between 4.5 and 8 ms (got ${p50:-none})$RETRY_NOTE"
num_check "${sent:-0} == ${okc:-0} + ${rej:-0} + ${err:-0} && ${sent:-0} > 150 && ${sent:-0} < 260"
ok $? "open loop: sent ~ rate x duration (got ${sent:-none}) and sent = ok + rejected + errors"

# --- 7: a new connection per request
run_lg "$TMP/new.json" --rate 100 --duration 1 --mode http-new
okc=$(json_get "$TMP/new.json" total ok)
err=$(json_get "$TMP/new.json" total errors)
conns=$(grep -o '"connections_opened":[0-9]*' "$TMP/new.json" | cut -d: -f2)
num_check "${okc:-0} > 50 && ${err:-1} == 0 && ${conns:-0} >= ${okc:-1}"
ok $? "http-new: one connection per request, no errors (ok=${okc:-none} conns=${conns:-none})"

# --- 8-9: run-time failing mode through the mode file, then back, without restart
stop_server
start_server --workers 4 --service-ms 5 --mode-file "$TMP/mode"
answers() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/x")" = "$1" ]; }
echo "service_ms=5 fail_rate=1.0" >"$TMP/mode"
wait_for 3 "testserver to answer 500 after the mode file says fail_rate=1.0" answers 500
run_lg "$TMP/fail.json" --rate 100 --duration 1
okc=$(json_get "$TMP/fail.json" total ok)
oth=$(json_get "$TMP/fail.json" total other_status)
n500=$(sed 's/.*"total":{//' "$TMP/fail.json" | grep -o '"500":[0-9]*' | cut -d: -f2)
num_check "${oth:-0} > 50 && ${okc:-1} == 0 && ${n500:-0} == ${oth:-0}"
ok $? "mode-file fail_rate=1.0: every answer is a 500, counted as other_status (other_status=${oth:-none} ok=${okc:-none})"
rm -f "$TMP/mode"
wait_for 3 "testserver to answer 200 again once the mode file is gone" answers 200
run_lg "$TMP/back.json" --rate 100 --duration 1
okc=$(json_get "$TMP/back.json" total ok)
err=$(json_get "$TMP/back.json" total errors)
num_check "${okc:-0} > 50 && ${err:-1} == 0"
ok $? "mode file removed: back to 200s without a restart (ok=${okc:-none} errors=${err:-none})"

# --- 10-11: clean SIGTERM with the JSON stats
t0=$(now_ms)
kill -TERM "$SRV_PID"
timeout 3 tail --pid="$SRV_PID" -f /dev/null
wait "$SRV_PID"
src=$?
t1=$(now_ms)
SRV_PID=
num_check "$src == 0 && $t1 - $t0 < 1500"; ok $? "testserver exits 0 within 1.5 s of SIGTERM (rc=$src)"
served=$(grep -o '"requests_served":[0-9]*' "$TMP/server.out" | cut -d: -f2)
n5xx=$(grep -o '"http_5xx":[0-9]*' "$TMP/server.out" | cut -d: -f2)
num_check "${served:-0} > 100 && ${n5xx:-0} > 50"
ok $? "testserver prints its stats JSON on SIGTERM (requests_served=${served:-none} http_5xx=${n5xx:-none})"

# --- 12-13: overload: 2 workers x 20 ms = 100/s, offered 300/s, timeout 500 ms
start_server --workers 2 --service-ms 20
run_lg "$TMP/over.json" --rate 300 --duration 2 --timeout-ms 500
rc=$?
okc=$(json_get "$TMP/over.json" total ok)
tmo=$(json_get "$TMP/over.json" total timeout)
p99=$(json_get "$TMP/over.json" total p99_ms)
el=$(grep -o '"elapsed_s":[0-9.]*' "$TMP/over.json" | cut -d: -f2)
echo "# overload 3x: ok=$okc timeout=$tmo p99=${p99}ms elapsed=${el}s"
num_check "${tmo:-0} > 0 || ${p99:-0} > 100"
ok $? "overload (3x capacity): latency grows or requests time out (timeout=${tmo:-none} p99=${p99:-none})"
num_check "$rc == 0 && ${el:-99} < 3.2"
ok $? "overload: loadgen stops by itself within duration + timeout (elapsed=${el:-none}s)"
stop_server

# --- 14-15: tcp mode, a connection per unit
start_server --mode tcp --workers 4 --service-ms 5
run_lg "$TMP/tcp.json" --mode tcp --rate 100 --duration 1 --hold-ms 10
okc=$(json_get "$TMP/tcp.json" total ok)
err=$(json_get "$TMP/tcp.json" total errors)
p50=$(json_get "$TMP/tcp.json" total p50_ms)
num_check "${okc:-0} > 50 && ${err:-1} == 0"
ok $? "tcp mode: connect, line, ok, hold, close; no errors (ok=${okc:-none} errors=${err:-none} p50=${p50:-none})"
stop_server
run_lg "$TMP/refused.json" --mode tcp --rate 100 --duration 0.3
ref=$(json_get "$TMP/refused.json" total refused)
num_check "${ref:-0} > 10"; ok $? "a closed port counts as refused (refused=${ref:-none})"

# --- 16-17: class mix: header, path and source address per class
start_server --workers 4 --service-ms 2
run_lg "$TMP/mix.json" --rate 200 --duration 1 --class L0:1:src=127.0.0.2:header \
	--class L3:3:path=/status/429
l0=$(json_get "$TMP/mix.json" L0 ok)
l3=$(json_get "$TMP/mix.json" L3 http_429)
l3ok=$(json_get "$TMP/mix.json" L3 ok)
num_check "${l0:-0} > 10 && ${l3:-0} > ${l0:-0}"
ok $? "per-class mix by weight, L0 bound to source 127.0.0.2 (L0 ok=${l0:-none} L3 429s=${l3:-none})"
rp50=$(json_get "$TMP/mix.json" L3 reject_p50_ms)
num_check "${l3ok:-1} == 0 && ${rp50:-0} > 0"
ok $? "429s are counted apart with their own latency (L3 ok=${l3ok:-none} reject_p50=${rp50:-none})"
stop_server

# --- 18-19: synflood sends only within 198.18.0.0/15 and only a bounded run; checked before
# anything is opened (no root needed)
"$SF" --help >"$TMP/sf.help" 2>&1
rc=$?
grep -q -- '--count N' "$TMP/sf.help" && [ $rc -eq 0 ]
ok $? "synflood --help prints its options and exits 0 (rc=$rc)"
bad=""
for args in "--dst 10.0.0.1:8080 --src 198.18.0.20 --count 1" \
	"--dst 198.18.0.1:8080 --src 198.20.0.1 --count 1" \
	"--dst 198.18.0.1:8080 --src 198.19.255.250 --src-count 10 --count 1" \
	"--dst 198.18.0.1:8080 --src 198.18.0.20" \
	"--dst 198.18.0.1:8080 --src 198.18.0.20 --count 1 --rate fast"; do
	timeout 5 "$SF" --dev lo --dst-mac 02:00:00:00:00:01 $args >/dev/null 2>"$TMP/sf.err"
	rc=$?
	{ [ $rc -eq 2 ] && grep -q 'synflood: ' "$TMP/sf.err"; } || bad="$bad [$args: rc=$rc]"
done
[ -z "$bad" ]
ok $? "synflood refuses addresses outside 198.18.0.0/15, a run without --count and a bad rate with exit 2$bad"

[ "$FAILED" -eq 0 ]
