#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The load generator's keep-alive client against a server that closes reused connections: a
# request whose reused connection is closed before any answer is retried once, on a new
# connection, and succeeds; a request on a new connection is never retried. A server under
# load may close all its idle keep-alive connections at once (Apache's event MPM does while
# every worker is busy): a retry on the next idle connection would meet the same fate and be
# counted as the server's failure, when a real client (HAProxy to its servers, browsers)
# would have it answered. Successes answered on a connection opened for them are counted apart
# (ok_new_conn, new_conn_p50/p99_ms), here and against a plain keep-alive server, where
# most requests reuse a connection; `--trace` marks the same requests, one by one (the bench's
# step splits its tail by them). Loopback only, no root. Emits TAP.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
LG=$BUILD/tools/loadgen
TMP=$(mktemp -d /tmp/sluice-lgreuse.XXXXXX)
N=0 FAILED=0 SRV=
cleanup() {
	[ -n "$SRV" ] && kill "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
ok() {
	N=$((N + 1))
	if [ "$1" -eq 0 ]; then echo "ok $N - $2"; else
		echo "not ok $N - $2"; shift 2; for d in "$@"; do echo "# $d"; done
		FAILED=$((FAILED + 1))
	fi
}

[ -x "$LG" ] || { echo "not ok 1 - $LG is built"; echo "1..1"; exit 1; }

# A server on 127.0.0.1 with two ports (chosen by the kernel): on the first it answers the
# first request of each connection and closes the connection, unanswered, when a second
# request arrives on it; on the second it answers every request (a plain keep-alive server).
# It exits by itself after 30 s in case this script is killed before its trap runs.
cat > "$TMP/srv.py" <<'EOF'
import socket, sys, threading, time
def listener():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(512)
    ls.settimeout(0.5)
    return ls
closing, keeping = listener(), listener()
print(closing.getsockname()[1], keeping.getsockname()[1], flush=True)   # the script reads this
def serve(c, close_reused):
    n, buf = 0, b""
    try:
        while True:
            d = c.recv(4096)
            if not d:
                break
            buf += d
            while b"\r\n\r\n" in buf:
                _, buf = buf.split(b"\r\n\r\n", 1)
                n += 1
                if n > 1 and close_reused:
                    return
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    finally:
        c.close()
def accept(ls, close_reused):
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(c, close_reused), daemon=True).start()
threading.Thread(target=accept, args=(keeping, False), daemon=True).start()
accept(closing, True)
EOF
# Its first line is the port, printed once it listens: read with a deadline, no polling.
coproc SRVP { exec python3 "$TMP/srv.py"; }
SRV=$SRVP_PID PORT= KPORT=
read -r -t 10 -u "${SRVP[0]}" PORT KPORT || PORT=
ok $([ -n "$PORT" ] && [ -n "$KPORT" ] && echo 0 || echo 1) \
	"the server listens (ports ${PORT:-none} and ${KPORT:-none})"

"$LG" --target "127.0.0.1:$PORT" --mode http-keepalive --rate 200 --duration 1.5 \
	--timeout-ms 1000 --seed 3 --quiet --class L0:1 --trace "$TMP/lg.trace" \
	> "$TMP/lg.json" 2> "$TMP/lg.err"
rc=$?
get() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['classes']['L0'][sys.argv[2]])" "${2:-$TMP/lg.json}" "$1" 2>/dev/null; }
sent=$(get sent) okn=$(get ok) err=$(get errors) retr=$(get retried) eof=$(get eof)
lost=$(get lost_on_retry) onnew=$(get ok_new_conn)
ok $([ $rc = 0 ] && [ "${sent:-0}" -ge 100 ] && echo 0 || echo 1) \
	"loadgen ran: $sent requests sent (rc $rc)" "$(cat "$TMP/lg.err" "$TMP/lg.json" 2>/dev/null)"
# Every reuse meets a close, so most requests are retries: all of them answered.
ok $([ "${retr:-0}" -ge 20 ] && echo 0 || echo 1) \
	"requests on reused connections that the server closed were retried: $retr of $sent"
ok $([ "${err:-1}" = 0 ] && [ "${okn:-0}" = "${sent:-x}" ] && [ "${lost:-1}" = 0 ] && echo 0 || echo 1) \
	"every retry went on a new connection and was answered: $okn ok, $err failed ($eof eof, $lost lost on a retry) of $sent" \
	"$(cat "$TMP/lg.json")"
# Here no request is answered on a reused connection: every success was on a new one.
ok $([ "${onnew:-x}" = "${okn:-y}" ] && echo 0 || echo 1) \
	"every success counted as answered on a new connection: $onnew of $okn"

# The plain keep-alive server: requests go on the idle connections; only the first request of
# each connection the client opened is answered on a new one.
"$LG" --target "127.0.0.1:$KPORT" --mode http-keepalive --rate 200 --duration 1 \
	--timeout-ms 1000 --seed 3 --quiet --class L0:1 --trace "$TMP/lgk.trace" \
	> "$TMP/lgk.json" 2> "$TMP/lgk.err"
rc=$?
kok=$(get ok "$TMP/lgk.json") knew=$(get ok_new_conn "$TMP/lgk.json")
kp99=$(get new_conn_p99_ms "$TMP/lgk.json")
ok $([ $rc = 0 ] && [ "${kok:-0}" -ge 100 ] && [ "${knew:-0}" -ge 1 ] &&
	[ "$((${knew:-0} * 4))" -lt "${kok:-0}" ] && [ "${kp99:-None}" != None ] && echo 0 || echo 1) \
	"on a keep-alive server most successes reuse a connection: $knew of $kok on a new one (p99 $kp99 ms)" \
	"$(cat "$TMP/lgk.err" "$TMP/lgk.json" 2>/dev/null)"

# The trace marks the same requests: its last field is 1 for a request sent on a connection
# opened for it. Its successes so marked are the report's ok_new_conn, and so are the others.
tcount() { awk -v n="$2" '$3 == 0 && NF == 6 && $6 == n' "$1" | wc -l; }
for run in "lg:$okn:$onnew" "lgk:$kok:$knew"; do
	IFS=: read -r f all new <<< "$run"
	tnew=$(tcount "$TMP/$f.trace" 1) told=$(tcount "$TMP/$f.trace" 0)
	ok $([ "$tnew" = "${new:-x}" ] && [ "$((tnew + told))" = "${all:-x}" ] && echo 0 || echo 1) \
		"$f: the trace marks $tnew successes on a new connection and $told on a reused one (the report: $new of $all)" \
		"$(head -3 "$TMP/$f.trace" 2>/dev/null)"
done

echo "1..$N"
[ "$FAILED" -eq 0 ]
