#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# PostgreSQL benchmark: a real database from Debian under a connection flood. NOT a test: it
# prints ratios measured side by side in one run and never passes or fails on absolute time.
#
#   tools/bench/pg.sh BUILD OUTDIR        (needs root)
#
# A private PostgreSQL 15 cluster (initdb in a temporary directory, run as the postgres user)
# with 36 connection slots for the bench role, in a server network namespace joined to a
# client namespace by a veth pair (198.18.0.0/24).
#  - L0: 8 pgbench clients from 198.18.0.10 running tools/bench/pg/l0.sql, once with persistent
#    connections and once with a new connection per transaction (pgbench -C).
#  - L3: a flood from 198.18.0.20 (tools/bench/pg/pgload.py flood): connection holders that sit
#    idle on their connection, and churners that loop connect -> query -> disconnect.
# L0 alone with no protection is the baseline. Then L0 under the flood against each contender:
# no protection, iptables connlimit, pgbouncer (transaction pooling), sluice with the day-one
# config and sluice tuned (configs in tools/bench/pg/, each saying why it is so).
# Runs are interleaved (round 1 of every contender, then round 2, ...) so that the noise of a
# shared machine spreads over all contenders instead of landing on one.
# Writes OUTDIR/pg.jsonl (a meta line, one line per contender x mode x run, summary lines) and
# OUTDIR/pg.txt (the table). Exits non-zero when a contender or the database fails to start,
# saying which and why. Everything it starts (namespaces, processes, pins, iptables rules in
# its namespace, the cluster's temporary directory) is removed on any exit.
# Knobs (environment): PG_RUNS (3), PG_DUR (s of L0 per run, 10), PG_CONTENDERS (also any
# sluice-NAME that has a tools/bench/pg/sluice-NAME.yaml), PG_MODES ("persistent connect"),
# PG_HOLDERS (16), PG_CHURNERS (48), PG_SEED (1).
set -u
[ $# -eq 2 ] || { echo "usage: tools/bench/pg.sh BUILD OUTDIR" >&2; exit 2; }
BUILD=$(realpath -m "$1")
OUTDIR=$(realpath -m "$2")
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
HERE=$PWD/tools/bench/pg
RUNS=${PG_RUNS:-3}
DUR=${PG_DUR:-10}
CONTENDERS=${PG_CONTENDERS:-"none iptables pgbouncer sluice-dayone sluice-tuned"}
MODES=${PG_MODES:-"persistent connect"}
HOLDERS=${PG_HOLDERS:-16}
CHURNERS=${PG_CHURNERS:-48}
SEED=${PG_SEED:-1}
L0_CLIENTS=8
LEAD=2                     # s of flood before L0 starts: L0 meets a flood already under way
SRV_IP=198.18.0.1
L0_IP=198.18.0.10
L3_IP=198.18.0.20
PGBIN=/usr/lib/postgresql/15/bin
TAG=pg$$
NS_S=sl-ps-$TAG
NS_C=sl-pc-$TAG
PIN=/sys/fs/bpf/sluice-$TAG
IN_SRV="nsenter --net=/run/netns/$NS_S"
IN_CLI="nsenter --net=/run/netns/$NS_C"
AS_PG="setpriv --reuid=postgres --regid=postgres --init-groups"
TMP=
PIDS=()
PG_PID=
NS_UP=0
FAILED=()

log() { echo "bench-pg: $*" >&2; }
. tools/bench/lib.sh

# ------------------------------------------------------------------ cleanup (always)
stop_pg() { # fast shutdown (SIGINT): clients are cut, no waiting for them
	local i
	[ -n "$PG_PID" ] || return 0
	kill -INT "$PG_PID" 2>/dev/null
	for i in $(seq 100); do kill -0 "$PG_PID" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$PG_PID" 2>/dev/null
	wait "$PG_PID" 2>/dev/null
	PG_PID=
}
teardown_ns() {
	stop_pids
	stop_pg
	detach_pins
	if [ $NS_UP = 1 ]; then
		$IN_SRV iptables -F 2>/dev/null
		ip netns del "$NS_S" 2>/dev/null
		ip netns del "$NS_C" 2>/dev/null
		NS_UP=0
	fi
}
cleanup() {
	teardown_ns
	[ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

[ "$(id -u)" = 0 ] || { log "needs root (network namespaces, BPF, the postgres user)"; exit 1; }

# ------------------------------------------------------------------ dependencies
need_pkgs postgresql-15 postgresql-client-15 pgbouncer iptables python3 ethtool iproute2 \
	util-linux bpftool || { log "cannot install PostgreSQL 15, pgbench or pgbouncer"; exit 1; }
# The packages may start Debian's own cluster and pgbouncer on install: the bench never uses
# them (its cluster has its own directory, socket and network namespace).
for b in "$BUILD/sluiced" "$BUILD/sluicectl" "$BUILD/tests/xdp_pass.bpf.o"; do
	[ -e "$b" ] || { log "$b missing: run make all build/tests/xdp_pass.bpf.o"; exit 1; }
done
id postgres >/dev/null 2>&1 || { log "no postgres user (postgresql-15 not installed?)"; exit 1; }
mkdir -p "$OUTDIR" || { log "cannot create $OUTDIR"; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null

TMP=$(mktemp -d /tmp/sluice-$TAG.XXXXXX) || exit 1
chmod 711 "$TMP"
PGD=$TMP/pg
SOCK=$PGD/sock
mkdir -p "$PGD/sock" && chown -R postgres:postgres "$PGD" && chmod 700 "$PGD"
RAW=$TMP/raw.jsonl
: > "$RAW"
ADMIN="$PGBIN/psql -X -q -h $SOCK -p 5432 -U postgres"

# ------------------------------------------------------------------ the database
# start_pg LISTEN: the cluster in the server namespace, listening on LISTEN (an address of
# that namespace) and on its private unix socket (the bench's own monitoring).
start_pg() {
	local i
	$IN_SRV $AS_PG "$PGBIN/postgres" -D "$PGD/data" -c listen_addresses="$1" -c port=5432 \
		-c unix_socket_directories="$SOCK" > "$TMP/postgres.log" 2>&1 &
	PG_PID=$!
	for i in $(seq 150); do
		"$PGBIN/pg_isready" -q -h "$SOCK" -p 5432 && return 0
		kill -0 "$PG_PID" 2>/dev/null || break
		sleep 0.1
	done
	log "PostgreSQL did not start on $1:5432:"; tail -n 5 "$TMP/postgres.log" >&2
	return 1
}

init_cluster() {
	log "initdb in $PGD/data"
	$AS_PG "$PGBIN/initdb" -D "$PGD/data" -U postgres --auth=trust -E UTF8 --no-sync \
		> "$TMP/initdb.log" 2>&1 || { log "initdb failed:"; tail -n 5 "$TMP/initdb.log" >&2; return 1; }
	cat "$HERE/postgresql.conf" >> "$PGD/data/postgresql.conf"
	cp "$HERE/pg_hba.conf" "$PGD/data/pg_hba.conf"
	chown postgres:postgres "$PGD/data/pg_hba.conf"
	# Once, socket only: the role, the database and pgbench's tables (scale 1: 100000 rows).
	$AS_PG "$PGBIN/postgres" -D "$PGD/data" -c listen_addresses= -c port=5432 \
		-c unix_socket_directories="$SOCK" > "$TMP/postgres.log" 2>&1 &
	PG_PID=$!
	for i in $(seq 150); do
		"$PGBIN/pg_isready" -q -h "$SOCK" -p 5432 && break
		kill -0 "$PG_PID" 2>/dev/null || break
		sleep 0.1
	done
	$ADMIN -d postgres -c "CREATE ROLE bench LOGIN" -c "CREATE DATABASE bench OWNER bench" \
		>/dev/null 2>"$TMP/init.err" &&
	"$PGBIN/pgbench" -i -q -s 1 -h "$SOCK" -p 5432 -U bench bench >/dev/null 2>>"$TMP/init.err" ||
		{ log "cannot create the bench database:"; tail -n 5 "$TMP/init.err" "$TMP/postgres.log" >&2; stop_pg; return 1; }
	stop_pg
}

# ------------------------------------------------------------------ namespaces
# Both namespaces and the veth pair (tools/bench/lib.sh); pgbench cannot choose its source
# address, so the route to the server gives it L0's; the flood binds to L3's address itself.
setup_pg_ns() {
	NS_UP=1
	setup_ns $SRV_IP $L0_IP $L3_IP &&
		$IN_CLI ip route add $SRV_IP/32 dev c0 src $L0_IP
}

# ------------------------------------------------------------------ contenders
start_iptables() {
	start_pg $SRV_IP || return 1
	sed "s/@SRV@/$SRV_IP/g; s/@L0@/$L0_IP/g" "$HERE/iptables.rules" > "$TMP/iptables.rules"
	$IN_SRV iptables-restore < "$TMP/iptables.rules" ||
		{ log "iptables-restore refused tools/bench/pg/iptables.rules"; return 1; }
}

start_pgbouncer() {
	start_pg 127.0.0.1 || return 1
	echo '"bench" ""' > "$TMP/userlist.txt"
	sed "s|@SRV@|$SRV_IP|g; s|@TMP@|$TMP|g; s|@PGPORT@|5432|g" "$HERE/pgbouncer.ini" > "$TMP/pgbouncer.ini"
	: > "$TMP/pgbouncer.log"
	chown postgres:postgres "$TMP/pgbouncer.log"
	start_bg "$TMP/pgbouncer.out" $IN_SRV $AS_PG pgbouncer "$TMP/pgbouncer.ini"
	PGB_PID=$LAST_PID
	wait_port $SRV_IP 5432 "$PGB_PID" && kill -0 "$PGB_PID" 2>/dev/null && return 0
	log "pgbouncer did not start:"; tail -n 5 "$TMP/pgbouncer.out" "$TMP/pgbouncer.log" >&2
	return 1
}

start_sluice() { # start_sluice NAME: tools/bench/pg/sluice-NAME.yaml
	start_pg $SRV_IP || return 1
	# What the database accepts, read from its own config as a user would:
	# max_connections - superuser_reserved_connections.
	local maxconn
	maxconn=$(awk -F'[ =]+' '$1 == "max_connections" {m = $2} $1 == "superuser_reserved_connections" {r = $2}
		END {print m - r}' "$HERE/postgresql.conf")
	sed "s|@STATE@|$TMP/state|g; s|@L0@|$L0_IP|g; s|@MAXCONN@|$maxconn|g" "$HERE/sluice-$1.yaml" > "$TMP/sluice.yaml"
	start_bg "$TMP/sluiced.log" $IN_SRV "$BUILD/sluiced" --config "$TMP/sluice.yaml" --pin-dir "$PIN"
	sluice_up "$LAST_PID" && return 0
	log "sluiced did not come up:"; tail -n 5 "$TMP/sluiced.log" >&2
	return 1
}

start_contender() { # start_contender NAME: fresh namespaces, database, protection, warm-up
	local who=$1
	setup_pg_ns || { log "cannot set up the network namespaces for $who"; return 1; }
	case $who in
	none) start_pg $SRV_IP ;;
	iptables) start_iptables ;;
	pgbouncer) start_pgbouncer ;;
	sluice-?*)
		if [ -f "$HERE/$who.yaml" ]; then
			start_sluice "${who#sluice-}"
		else
			log "unknown contender $who (no tools/bench/pg/$who.yaml)"; false
		fi ;;
	*) log "unknown contender $who"; false ;;
	esac || return 1
	# warm-up (not recorded): the database's caches, sluice's first samples
	l0_load persistent 2 0 "$TMP/warm.json" ||
		{ log "$who: L0 cannot reach the database:"; cat "$TMP/warm.json" >&2; return 1; }
}

# ------------------------------------------------------------------ measurement
host_busy_ns() { # all CPUs' non-idle time (ns), from /proc/stat
	awk -v tk="$(getconf CLK_TCK)" '/^cpu /{printf "%.0f\n", ($2+$3+$4+$7+$8+$9) * 1e9 / tk}' /proc/stat
}
sluice_counts() { # "L0adm L0rej L3adm L3rej limit" or nothing
	[ -d "$PIN" ] || return 0
	"$BUILD/sluicectl" --pin-dir "$PIN" status --json 2>/dev/null | python3 -c '
import json,sys
s=json.load(sys.stdin)["services"][0]; c={x["class"]:x for x in s["classes"]}
print(c["L0"].get("admitted",0), c["L0"].get("rejected",0), c["L3"].get("admitted",0),
      c["L3"].get("rejected",0), s.get("limit",0))' 2>/dev/null
}
# backends by client: one line "L0 L3 other" per second while $TMP/sampling exists
sample_backends() {
	while [ -e "$TMP/sampling" ]; do
		$ADMIN -d postgres -Atc "select
			count(*) filter (where client_addr = '$L0_IP'),
			count(*) filter (where client_addr = '$L3_IP'),
			count(*) filter (where client_addr is distinct from '$L0_IP' and client_addr is distinct from '$L3_IP')
			from pg_stat_activity where backend_type = 'client backend' and usename = 'bench'" 2>/dev/null |
			tr '|' ' '
		sleep 1
	done
}
l0_load() { # l0_load MODE DURATION SEED OUT
	local c=""
	[ "$1" = connect ] && c=--connect
	timeout -s KILL $(($2 + 60)) $IN_CLI python3 "$HERE/pgload.py" l0 --host $SRV_IP \
		--duration "$2" --clients $L0_CLIENTS --script "$HERE/l0.sql" --logdir "$TMP/l0" \
		--seed "$3" --pgbench "$PGBIN/pgbench" $c > "$4" 2>&1
}
drain() { # until no bench client holds a backend (pgbouncer: none is active), at most 15 s
	local q="select count(*) from pg_stat_activity where backend_type = 'client backend' and usename = 'bench'"
	[ "$1" = pgbouncer ] && q="$q and state <> 'idle'"
	for i in $(seq 150); do
		[ "$($ADMIN -d postgres -Atc "$q" 2>/dev/null)" = 0 ] && return 0
		sleep 0.1
	done
	log "  $1: backends still busy 15 s after the run"
}

# run_one CONTENDER MODE RUN FLOOD(0|1): one L0 run, alone or under the flood; one JSON line.
run_one() {
	local who=$1 mode=$2 run=$3 flood=$4 seed c0 c1 cl s0 s1 fpid=
	seed=$((SEED * 100 + run))
	log "  $who $mode run $run $([ $flood = 1 ] && echo "under the flood" || echo alone)"
	s0=$(sluice_counts)
	c0=$(host_busy_ns)
	echo '{}' > "$TMP/flood.json"
	if [ $flood = 1 ]; then
		timeout -s KILL $((LEAD + DUR + 60)) $IN_CLI python3 "$HERE/pgload.py" flood \
			--host $SRV_IP --src $L3_IP --duration $((LEAD + DUR + 1)) --holders $HOLDERS \
			--churners $CHURNERS --seed $seed > "$TMP/flood.json" 2>"$TMP/flood.err" &
		fpid=$!
		PIDS+=($fpid)
		sleep $LEAD
	fi
	cl=$(host_busy_ns)
	touch "$TMP/sampling"
	sample_backends > "$TMP/backends.txt" &
	local spid=$!
	PIDS+=($spid)
	l0_load "$mode" "$DUR" "$seed" "$TMP/l0.json"
	rm -f "$TMP/sampling"
	[ -n "$fpid" ] && wait $fpid
	c1=$(host_busy_ns)
	s1=$(sluice_counts)
	wait $spid 2>/dev/null
	forget_pids $fpid $spid
	python3 - "$who" "$mode" "$run" "$flood" "$DUR" "$TMP/l0.json" "$TMP/flood.json" \
		"$((c1 - c0))" "$s0" "$s1" "$TMP/backends.txt" "$((cl - c0))" $LEAD "$TMP/flood.err" \
		>> "$RAW" <<'PY'
import json, re, sys
who, mode, run, flood, dur, l0f, ff, cpu, s0, s1, bf, cpu_lead, lead, ferr = sys.argv[1:]
def load(f):
    try:
        return json.load(open(f))
    except Exception as e:
        return {"error": "unreadable: %s: %s" % (e, open(f).read()[:300])}
l0 = load(l0f)
fl = load(ff) if flood == "1" else None
rej = (fl or {}).get("refused", 0) + l0.get("conn_errors", 0)
rec = {"type": "run", "contender": who, "mode": mode, "run": int(run), "flood": flood == "1",
       "dur_s": float(dur), "l0": l0, "l3": fl, "host_cpu_s": round(int(cpu) / 1e9, 3),
       "rejections": rej,
       "cpu_us_per_rejection": round(int(cpu) / 1e3 / rej, 1) if rej else None}
if fl:
    # the flood alone (before L0 starts): host CPU / rejections in that window
    pts = [(float(m.group(1)), int(m.group(2))) for m in
           (re.search(r"t=([\d.]+) refused=(\d+)", l) for l in open(ferr)) if m]
    before = [p for p in pts if p[0] <= float(lead)]
    if before and before[-1][1]:
        t, n = before[-1]
        rec["flood_only"] = {"window_s": t, "host_cpu_s": round(int(cpu_lead) / 1e9 * t / float(lead), 3),
                             "rejections": n,
                             "cpu_us_per_rejection": round(int(cpu_lead) / 1e3 * t / float(lead) / n, 1)}
rows = [[int(x) for x in l.split()] for l in open(bf) if len(l.split()) == 3]
if rows:
    n = len(rows)
    rec["backends"] = {"samples": n,
                       "l0_mean": round(sum(r[0] for r in rows) / n, 1), "l0_max": max(r[0] for r in rows),
                       "l3_mean": round(sum(r[1] for r in rows) / n, 1), "l3_max": max(r[1] for r in rows),
                       "other_mean": round(sum(r[2] for r in rows) / n, 1)}
if s0 and s1:
    a, b = [int(x) for x in s0.split()], [int(x) for x in s1.split()]
    rec["sluice"] = {"L0_admitted": b[0] - a[0], "L0_rejected": b[1] - a[1],
                     "L3_admitted": b[2] - a[2], "L3_rejected": b[3] - a[3], "limit_end": b[4]}
print(json.dumps(rec))
PY
	drain "$who"
}

bench_round() { # bench_round RUN CONTENDER
	local run=$1 who=$2 m
	log "contender $who, round $run"
	if ! start_contender "$who"; then
		log "FAILED: cannot start $who (see above)"
		FAILED+=("$who")
		teardown_ns
		return 1
	fi
	# L0 alone: every round for the baseline (no protection), once for the others (their
	# overhead with no flood).
	if [ "$who" = none ] || [ "$run" = 1 ]; then
		for m in $MODES; do run_one "$who" "$m" "$run" 0; done
	fi
	for m in $MODES; do run_one "$who" "$m" "$run" 1; done
	[ "${who#sluice}" != "$who" ] && cp "$TMP/sluiced.log" "$OUTDIR/pg-$who-run$run.sluiced.log" 2>/dev/null
	teardown_ns
}

# ------------------------------------------------------------------ main
T0=$(date +%s)
init_cluster || { log "FAILED: the PostgreSQL server cannot be prepared"; exit 1; }
for run in $(seq "$RUNS"); do
	for who in $CONTENDERS; do
		case " ${FAILED[*]} " in *" $who "*) continue ;; esac
		bench_round "$run" "$who"
	done
done
ELAPSED=$(($(date +%s) - T0))
log "runs took $ELAPSED s"

# Under tools/bench.sh: the stamp it took at its start, so that one run carries one stamp.
COMMIT=${BENCH_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
DIRTY=${BENCH_DIRTY:-false}
[ -z "${BENCH_DIRTY:-}" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && DIRTY=true
python3 "$HERE/report.py" "$RAW" "$OUTDIR/pg.jsonl" "$OUTDIR/pg.txt" "$COMMIT" "$DIRTY" \
	"$RUNS" "$DUR" "$HOLDERS" "$CHURNERS" "$L0_CLIENTS" "$ELAPSED" "$(uname -r)" "$(nproc)" \
	"${FAILED[*]}" || { log "report failed"; exit 1; }
cat "$OUTDIR/pg.txt"
if [ ${#FAILED[@]} -gt 0 ]; then
	log "FAILED to start: ${FAILED[*]}"
	exit 1
fi
log "results: $OUTDIR/pg.txt $OUTDIR/pg.jsonl"
