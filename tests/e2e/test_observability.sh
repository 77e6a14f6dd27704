#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Observability end to end: a real Prometheus server from Debian scrapes sluiced's
# /metrics and a PromQL query returns the admitted count; `sluicectl top` runs under tmux and
# its screen shows the service, the classes and the switch in force; JSON events on stdout.
TAG=obs
source "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null || skip_all "prometheus not installed"
command -v tmux >/dev/null || skip_all "tmux not installed"
e2e_setup

MPORT=9477
CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
metrics_address: 127.0.0.1:$MPORT
state_dir: $TMP/state
services:
  - name: web
    port: 8080
    protocol: http
    limit: { fixed: 16 }
    default_class: L2
    trust_from: [198.18.0.0/15]          # the test clients may set X-Priority
    classify:
      - { header: X-Priority, class: from-header }
Y
start_bg "$TMP/server.log" $IN_SRV "$BUILD/tools/testserver" --listen $SRV_IP:8080 --mode http \
	--workers 4 --service-ms 2
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }

# Prometheus lives in the server namespace, next to sluiced's loopback listener.
cat > "$TMP/prometheus.yml" <<Y
global: { scrape_interval: 1s, evaluation_interval: 1s }
scrape_configs:
  - job_name: sluice
    static_configs: [ { targets: ["127.0.0.1:$MPORT"] } ]
Y
promtool check config "$TMP/prometheus.yml" >/dev/null 2>&1
ok $? "the scrape config is valid (promtool)"
start_bg "$TMP/prometheus.log" $IN_SRV prometheus --config.file="$TMP/prometheus.yml" \
	--storage.tsdb.path="$TMP/tsdb" --web.listen-address=127.0.0.1:9090
for i in $(seq 5); do in_cli curl -s -o /dev/null -H "X-Priority: L0" http://$SRV_IP:8080/a; done
for i in $(seq 7); do in_cli curl -s -o /dev/null -H "X-Priority: L3" http://$SRV_IP:8080/b; done

q() { in_srv curl -s --get --data-urlencode "query=$1" http://127.0.0.1:9090/api/v1/query |
	python3 -c "import json,sys; r=json.load(sys.stdin)['data']['result']; print(r[0]['value'][1] if r else 'none')" 2>/dev/null; }
got=none
admitted_12() { got=$(q 'sum(sluice_requests_admitted_total{service="web"})'); [ "$got" = 12 ]; }
wait_for 30 "Prometheus to scrape 12 admitted requests" admitted_12
ok $? "Prometheus scrapes /metrics: sum(sluice_requests_admitted_total) = $got (12 sent)" \
	"$(tail -3 "$TMP/prometheus.log")"
l0=$(q 'sluice_requests_admitted_total{service="web",class="L0"}')
up=$(q 'up{job="sluice"}')
lim=$(q 'sluice_concurrency_limit{service="web"}')
ok $([ "$l0" = 5 ] && [ "$up" = 1 ] && [ "$lim" = 16 ] && echo 0 || echo 1) \
	"per-class series and gauges: L0 admitted $l0, limit $lim, up $up"
# The median of the 12 requests (2 ms service time) from the cumulative buckets.
hq=none
have_hq() {
	hq=$(q 'histogram_quantile(0.5, sum by (le) (sluice_request_duration_seconds_bucket{service="web"}))')
	[ "$hq" != none ]
}
wait_for 10 "a histogram_quantile result from Prometheus" have_hq
median_ok() { python3 -c "import sys; sys.exit(0 if 0.001 <= float('$hq') <= 0.02 else 1)" 2>/dev/null; }
remeasure_median() { # 12 more requests, once Prometheus has them: the median of all 24
	for i in $(seq 12); do in_cli curl -s -o /dev/null -H "X-Priority: L2" http://$SRV_IP:8080/e; done
	admitted_24() { [ "$(q 'sum(sluice_requests_admitted_total{service="web"})')" = 24 ]; }
	wait_for 15 "Prometheus to scrape 24 admitted requests" admitted_24 && have_hq && median_ok
}
retry_once median_ok remeasure_median
ok $? "the latency histogram works with histogram_quantile: median $hq s for a 2 ms service$RETRY_NOTE"

# --- sluicectl top under tmux ---------------------------------------------------------
CTL="$BUILD/sluicectl --pin-dir $PIN --state-dir $TMP/state --config $CFG"
$CTL switch set web L3 --shed 40 --reason "obs test" --ttl 10m >/dev/null
sess=sluice-top-$$
test_cleanup() { tmux kill-session -t "$sess" 2>/dev/null; }
tmux new-session -d -s "$sess" -x 200 -y 50 "$CTL top --interval 0.5"
top_drawn() { screen=$(tmux capture-pane -p -t "$sess" 2>/dev/null); echo "$screen" | grep -q "web"; }
wait_for 5 "sluicectl top to draw its first screen" top_drawn
for i in $(seq 10); do in_cli curl -s -o /dev/null http://$SRV_IP:8080/c; done
top_full() {
	screen=$(tmux capture-pane -p -t "$sess" 2>/dev/null)
	echo "$screen" | grep -q "web" && echo "$screen" | grep -q "L0" && echo "$screen" | grep -q "L3" &&
		echo "$screen" | grep -qi "limit" && echo "$screen" | grep -q "40%"
}
wait_for 5 "top's screen to show web, L0, L3, the limit and the 40% switch" top_full
ok $? \
	"sluicectl top shows the service, its classes, the limit and the active switch" "$screen"
tmux send-keys -t "$sess" q
top_gone() { ! tmux has-session -t "$sess" 2>/dev/null; }
wait_for 3 "top to quit on q" top_gone; gone=$?
[ $gone -ne 0 ] && tmux kill-session -t "$sess"
ok $gone "q quits top"

# --- an expired switch reverts by itself and says so ------------------------------------
$CTL switch set web L1 --shed 100 --reason "short test" --ttl 2s >/dev/null
l1_shed() { $CTL status --json | python3 -c "
import json, sys; d = json.load(sys.stdin)
sys.exit(0 if [c for c in d['services'][0]['classes'] if c['class'] == 'L1'][0]['switch_shed'] == $1 else 1)"; }
wait_for 2 "the L1 switch in the verdict map" l1_shed 1
e1=$(in_cli curl -s -o /dev/null -w "%{http_code}" -H "X-Priority: L1" http://$SRV_IP:8080/d)
expired() { grep -q '"machine":"switch","class":"L1","from":"set","to":"expired"' "$TMP"/sluiced.*.log && l1_shed 0; }
wait_for 5 "the 2 s switch to expire (event, and gone from the verdict map)" expired
e2=$(in_cli curl -s -o /dev/null -w "%{http_code}" -H "X-Priority: L1" http://$SRV_IP:8080/d)
ok $([ "$e1" = 429 ] && [ "$e2" = 200 ] &&
	grep -q '"machine":"switch","class":"L1","from":"set","to":"expired"' "$TMP"/sluiced.*.log &&
	grep -q '"command":"expire"' "$TMP/state/audit.log" && echo 0 || echo 1) \
	"a 2 s switch sheds ($e1), then expires by itself ($e2) with an event and an audit line" \
	"$(grep -h expire "$TMP"/sluiced.*.log "$TMP/state/audit.log" | head -3)"

# --- a reload that moves /metrics is refused: the listener stays where it is -------------
sed -i "s/^metrics_address: .*/metrics_address: 127.0.0.1:$((MPORT + 1))/" "$CFG"
kill -HUP "$SLUICED_PID"
moved_refused() { grep -q 'metrics_address changes need a restart' "$TMP"/sluiced.*.log; }
wait_for 5 "the reload's refusal" moved_refused
ok $(moved_refused && in_srv curl -s -o /dev/null http://127.0.0.1:$MPORT/metrics &&
	echo 0 || echo 1) \
	"a reload changing metrics_address is refused and /metrics stays at :$MPORT" \
	"$(grep -h 'restart' "$TMP"/sluiced.*.log | tail -2)"

# --- JSON events ------------------------------------------------------------------------
bad=$(grep '^{' "$TMP"/sluiced.*.log | python3 -c "
import json, sys
n = 0
for l in sys.stdin:
    e = json.loads(l)
    n += not all(k in e for k in ('time', 'event', 'machine', 'from', 'to', 'why'))
print(n)")
ok $([ "$bad" = 0 ] && grep -q '"machine":"switch","class":"L3","from":"normal","to":"set","why":"switch set by ' "$TMP"/sluiced.*.log && echo 0 || echo 1) \
	"every stdout line is one JSON event with time, machine, from, to, why"
finish
