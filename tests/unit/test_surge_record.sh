#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The step scenario's reading of a trace (tools/bench/surge.py record and table) on traces made
# here with known answers: the objective from the 2 s before the step, when the admitted p99
# comes back within it, full admission after the surge, and the surge's admitted p99 split by
# the connection each request went on (loadgen's last trace field); a trace without that field
# (older loadgen) gives no split, said as '-' in the table; the step's and PostgreSQL's goals said
# plainly, met or NOT met. No root, no network. Emits TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
TMP=$(mktemp -d /tmp/sluice-surge.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
N=0 FAILED=0
ok() {
	N=$((N + 1))
	if [ "$1" -eq 0 ]; then echo "ok $N - $2"; else
		echo "not ok $N - $2"; shift 2; for d in "$@"; do echo "# $d"; done
		FAILED=$((FAILED + 1))
	fi
}

# make_trace FILE SLOW_UNTIL_MS FIELDS: 0.5x (4 s, 50 ms each), a 7 s surge in which every
# fourth request is refused (429) and the others answered: on a reused connection in 52 ms, on
# a new one (every third admitted) in 90 ms until SLOW_UNTIL_MS into the run and 52 ms after;
# then 11 s of 0.5x again at 50 ms, the first of them refused at 11.1 s. FIELDS 5 leaves the
# connection field out.
make_trace() {
	python3 - "$@" <<'PY'
import sys
out, slow_until, fields = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
lines, n = [], 0
def add(t, cls, outcome, status, us, new):
    f = ["%.3f" % t, cls, str(outcome), str(status), str(us)] + ([str(new)] if fields == 6 else [])
    lines.append(" ".join(f))
t = 0.0
while t < 4000:
    add(t, "L0" if n % 25 == 0 else "L3", 0, 200, 50000, 0); n += 1; t += 10
adm = 0
while t < 11000:
    if n % 4 == 0:
        add(t, "L3", 1, 429, 200, 0)
    else:
        new = adm % 3 == 0
        add(t, "L0" if n % 25 == 0 else "L3", 0, 200, 90000 if new and t < slow_until else 52000, int(new))
        adm += 1
    n += 1; t += 2.5
while t < 22000:
    if abs(t - 11100) < 5:
        add(t, "L3", 1, 429, 200, 0)
    else:
        add(t, "L3", 0, 200, 50000, 0)
    t += 10
open(out, "w").write("\n".join(lines) + "\n")
PY
}
: > "$TMP/status"
rec() { python3 tools/bench/surge.py record "$1" "$TMP/status" 0 4 7 11 300 "$2" 1 abc false d; }
field() { python3 -c "import json,sys; v=json.loads(open(sys.argv[1]).read())[sys.argv[2]]; print('None' if v is None else round(v, 2))" "$1" "$2"; }

make_trace "$TMP/slow.trace" 99999 6 && rec "$TMP/slow.trace" slow > "$TMP/slow.json"
ok $? "surge.py reads a trace whose new connections stay slow" "$(tail -c 300 "$TMP/slow.json")"
obj=$(field "$TMP/slow.json" objective_ms) back=$(field "$TMP/slow.json" p99_back_s)
reu=$(field "$TMP/slow.json" surge_p99_reused_ms) new=$(field "$TMP/slow.json" surge_p99_new_conn_ms)
pct=$(field "$TMP/slow.json" surge_new_conn_pct) full=$(field "$TMP/slow.json" full_s)
ok $([ "$obj" = 60.0 ] && [ "$back" = None ] && echo 0 || echo 1) \
	"objective 1.2 x the 50 ms before the step ($obj ms); the p99 never comes back ($back)"
ok $([ "$reu" = 52.0 ] && [ "$new" = 90.0 ] && [ "$pct" = 33.33 ] && echo 0 || echo 1) \
	"the surge's p99 split by connection: reused $reu ms, new $new ms, $pct % on new ones"
ok $([ "$full" = 0.25 ] && echo 0 || echo 1) \
	"full admission from the slice after the last refusal (11.1 s, 0.1 s after the surge): $full s"

make_trace "$TMP/fast.trace" 6000 6 && rec "$TMP/fast.trace" fast > "$TMP/fast.json"
back=$(field "$TMP/fast.json" p99_back_s)
ok $([ "$back" = 2.0 ] && echo 0 || echo 1) \
	"new connections slow until 6 s (2 s after the step): the p99 is back from the slice at $back s"

make_trace "$TMP/old.trace" 99999 5 && rec "$TMP/old.trace" old > "$TMP/old.json"
new=$(field "$TMP/old.json" surge_p99_new_conn_ms) back=$(field "$TMP/old.json" p99_back_s)
ok $([ "$new" = None ] && [ "$back" = None ] && echo 0 || echo 1) \
	"a trace without the connection field: no split ($new), the rest read as before (back $back)"

cat "$TMP/slow.json" "$TMP/old.json" > "$TMP/all.jsonl"
python3 tools/bench/surge.py table "$TMP/all.jsonl" --md "$TMP/t.md" > "$TMP/t.txt"
row_slow=$(grep '^| slow ' "$TMP/t.md") row_old=$(grep '^| old ' "$TMP/t.md")
ok $(echo "$row_slow" | grep -q '| 52.0 \[52.0-52.0\] / 90.0 \[90.0-90.0\] | 33 \[33-33\] |' &&
	echo "$row_old" | grep -q '| - / - | - |' && echo 0 || echo 1) \
	"the table gives the split, and '-' for the record without it" "$row_slow" "$row_old"

# The goals said plainly: a contender whose p99 never came back (slow), one back after 2 s
# (fast): both NOT met on that; full admission 0.25 s is within its 10 s.
cat "$TMP/slow.json" "$TMP/fast.json" > "$TMP/goals.jsonl"
python3 tools/bench/surge.py table "$TMP/goals.jsonl" --md "$TMP/g.md" > "$TMP/g.txt"
ok $(grep -qx '  step slow: NOT met (p99 back s never <= 1)' "$TMP/g.txt" &&
	grep -qx '  step fast: NOT met (p99 back s 2.00 <= 1)' "$TMP/g.txt" &&
	grep -qx -- '- step slow: NOT met (p99 back s never <= 1)' "$TMP/g.md" && echo 0 || echo 1) \
	"the table says which step goals are not met" "$(grep step "$TMP/g.txt")"

# PostgreSQL's goals (tools/bench/report.py): L0 ok 100 % and TPS >= 95 % persistent, >= 90 %
# with -C, under the flood; medians.
pgsum() { # contender mode ok_median tps_median
	printf '{"type": "summary", "contender": "%s", "mode": "%s", "flood": true, "l0_success_pct": {"median": %s, "min": %s, "max": %s, "n": 3}, "l0_tps_pct_of_baseline": {"median": %s, "min": %s, "max": %s, "n": 3}, "l0_tps_pct_of_own_alone": null, "l0_p50_x_baseline": null, "l0_p99_x_baseline": null, "l3_admitted": null, "l3_refused": null, "flood_only_cpu_us_per_rejection": null}\n' \
		"$1" "$2" "$3" "$3" "$3" "$4" "$4" "$4"
}
{
	echo '{"type": "meta", "runs": 3, "dur_s": 6.0, "failed_to_start": []}'
	pgsum sluice-dayone persistent 100.0 96.0
	pgsum sluice-dayone connect 100.0 89.5
	pgsum pgbouncer persistent 99.5 97.0
} > "$TMP/pg.jsonl"
python3 -c 'import sys; sys.path.insert(0, "tools/bench"); import report
print(report.pg_tables(sys.argv[1])[0])' "$TMP/pg.jsonl" > "$TMP/pg.md"
ok $(grep -qx -- '- postgresql persistent sluice-dayone: met' "$TMP/pg.md" &&
	grep -qx -- '- postgresql -C sluice-dayone: NOT met (TPS % 89.5 >= 90)' "$TMP/pg.md" &&
	grep -qx -- '- postgresql persistent pgbouncer: NOT met (L0 ok % 99.5 >= 100)' "$TMP/pg.md" &&
	echo 0 || echo 1) "the PostgreSQL tables say which goals are not met" "$(grep postgresql "$TMP/pg.md")"

echo "1..$N"
[ "$FAILED" -eq 0 ]
