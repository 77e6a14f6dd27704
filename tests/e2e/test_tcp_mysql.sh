#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# A protocol whose server speaks first, unparsed: Debian's MariaDB (the MySQL protocol: the
# server's greeting, the client's login, then one query and its answer at a time) behind
# sluiced as a `protocol: tcp` service with the day-one limit.
#  1. 60 `SELECT SLEEP(0.02)` on one connection read as a p50 of about 20 ms, and the limit
#     gets its signal: the greeting (server data before the client said anything) opens no
#     turn, the login is the connection's setup turn, each query one turn;
#  2. one sample per query: 200 `SELECT 1` on one connection are 200 samples (the login's
#     setup turn is replaced by the first query's; the closing COM_QUIT has no answer and
#     gives none), and 10 connections of one query each are 10 (the login turn is held back,
#     then replaced by the query's);
#  3. afterwards nothing is in flight, exactly.
TAG=mdb
source "$(dirname "$0")/lib.sh"
command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null &&
	command -v mariadb >/dev/null ||
	skip_all "mariadb-server not installed (tools/install-deps.sh installs it)"
e2e_setup

CFG=$TMP/sluice.yaml
cat > "$CFG" <<Y
interface: s0
control_interval_ms: 100
metrics_address: 127.0.0.1:0
state_dir: $TMP/state
services:
  - name: db
    port: 3306
    protocol: tcp
    limit: { min: 4, max: 256 }
    target_latency_ms: auto
    default_class: L3
    classify:
      - { source: 198.18.0.2/32, class: L0 }
Y
# A throwaway server: its own data directory in the test's temporary one, small InnoDB
# files, no binary log, no grant tables (any user), nothing read from the host's config.
DB_OPTS="--no-defaults --datadir=$TMP/db --user=root --innodb-log-file-size=4M
	--innodb-data-file-path=ibdata1:4M:autoextend"
mariadb-install-db $DB_OPTS --auth-root-authentication-method=normal --skip-test-db \
	> "$TMP/install.log" 2>&1 || { ok 1 "mariadb-install-db" "$(tail -5 "$TMP/install.log")"; finish; exit 1; }
start_bg "$TMP/mariadb.log" $IN_SRV mariadbd $DB_OPTS --bind-address=$SRV_IP --port=3306 \
	--socket="$TMP/mariadb.sock" --pid-file="$TMP/mariadb.pid" --skip-grant-tables \
	--skip-log-bin --innodb-buffer-pool-size=16M
q() { $IN_CLI mariadb -h $SRV_IP -P 3306 -u root --batch --skip-column-names "$@"; }
db_up() { q -e "SELECT 1" 2>/dev/null | grep -q '^1$'; }
wait_for 20 "mariadbd to answer" db_up ||
	{ ok 1 "mariadbd starts" "$(tail -5 "$TMP/mariadb.log")"; finish; exit 1; }
start_sluiced "$CFG" || { ok 1 "sluiced starts"; finish; exit 1; }
ok 0 "sluiced attaches with MariaDB as a tcp service"

samples() { hist_samples db L0; }
# Every connection of the service has ended in sluice's books: no turn of theirs can still
# give a sample (the server's last data went out before the close).
closed() { status && [ "$(svc connections)" = 0 ]; }
# N copies of a statement, as one -e argument.
stmts() { local i out=""; for i in $(seq 1 "$1"); do out="$out$2; "; done; echo "$out"; }

# --- 1. 60 queries of 20 ms on one connection -------------------------------------------
# The signal is read while they run: a window that decided on their samples says `ok`, and the
# next one, which has none once they end, says `thin` a window later (on a loaded host the
# reads after the queries can take that long).
start_bg "$TMP/sleep.out" $IN_CLI mariadb -h $SRV_IP -P 3306 -u root --batch --skip-column-names \
	-e "$(stmts 60 'SELECT SLEEP(0.02)')"
QPID=$LAST_PID
has_signal() { status && [ "$(svc signal)" = ok ]; }
wait_for 8 "the limit's latency signal" has_signal
sig_rc=$?; sig=$(svc signal)
wait "$QPID"
n_ok=$(grep -c '^0$' "$TMP/sleep.out")
ok $([ "$n_ok" = 60 ] && echo 0 || echo 1) "60 SELECT SLEEP(0.02) answered ($n_ok)" \
	"$(tail -3 "$TMP/sleep.out")"
status
ok_p50_is 20 L0 "MariaDB's 20 ms answers"
ok $sig_rc "the limit has a latency signal while they run: $sig"

# --- 2. one sample per query ------------------------------------------------------------
n0=$(samples)
q -e "$(stmts 200 'SELECT 1')" > "$TMP/one.out" 2>&1
settled() { [ $(($(samples) - $1)) -ge "$2" ]; }
wait_for 3 "200 samples" settled "$n0" 200
wait_for 3 "the connection closed" closed   # a later sample would come before its close
n1=$(samples)
ok $([ "$(grep -c '^1$' "$TMP/one.out")" = 200 ] && [ $((n1 - n0)) = 200 ] && echo 0 || echo 1) \
	"200 SELECT 1 on one connection: $((n1 - n0)) samples (200)" "$(tail -n 2 "$TMP/one.out")"
for i in $(seq 1 10); do q -e "SELECT 2"; done > "$TMP/ten.out" 2>&1
wait_for 3 "10 samples" settled "$n1" 10
wait_for 3 "the connections closed" closed
n2=$(samples)
ok $([ "$(grep -c '^2$' "$TMP/ten.out")" = 10 ] && [ $((n2 - n1)) = 10 ] && echo 0 || echo 1) \
	"10 connections of one query each: $((n2 - n1)) samples (10)"

# --- 3. afterwards nothing is in flight --------------------------------------------------
idle() { status && [ "$(svc in_flight)" = 0 ] && [ "$(svc connections)" = 0 ]; }
wait_for 5 "in_flight and connections 0 after the clients closed" idle
ok $? "after the clients closed: in_flight $(svc in_flight), connections $(svc connections)"
ok $(kill -0 "$SLUICED_PID" 2>/dev/null && echo 0 || echo 1) "sluiced still runs"
finish
