#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# The load generator's keep-alive client against a server that closes reused connections: a
# request whose reused connection is closed before any answer is retried once, on a new
# connection, and succeeds; a request on a new connection is never retried. A server under
# load may close all its idle keep-alive connections at once (Apache's event MPM does while
# every worker is busy): a retry on the next idle connection would meet the same fate and be
# counted as the server's failure, when a real client (HAProxy to its servers, browsers)
# would have it answered. Loopback only, no root. Emits TAP.
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

# A server on 127.0.0.1 (port chosen by the kernel) that answers the first request of each
# connection and closes the connection, unanswered, when a second request arrives on it.
# It exits by itself after 30 s in case this script is killed before its trap runs.
cat > "$TMP/srv.py" <<'EOF'
import socket, sys, threading, time
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(512)
print(ls.getsockname()[1], flush=True)   # listening: the script reads this line
stats = {"conns": 0, "closed_unanswered": 0}
def serve(c):
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
                if n > 1:
                    stats["closed_unanswered"] += 1
                    return
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    finally:
        c.close()
deadline = time.time() + 30
ls.settimeout(0.5)
while time.time() < deadline:
    try:
        c, _ = ls.accept()
    except socket.timeout:
        continue
    stats["conns"] += 1
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
# Its first line is the port, printed once it listens: read with a deadline, no polling.
coproc SRVP { exec python3 "$TMP/srv.py"; }
SRV=$SRVP_PID PORT=
read -r -t 10 -u "${SRVP[0]}" PORT || PORT=
ok $([ -n "$PORT" ] && echo 0 || echo 1) "the closing server listens (port ${PORT:-none})"

"$LG" --target "127.0.0.1:$PORT" --mode http-keepalive --rate 200 --duration 1.5 \
	--timeout-ms 1000 --seed 3 --quiet --class L0:1 > "$TMP/lg.json" 2> "$TMP/lg.err"
rc=$?
get() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['classes']['L0'][sys.argv[2]])" "$TMP/lg.json" "$1" 2>/dev/null; }
sent=$(get sent) okn=$(get ok) err=$(get errors) retr=$(get retried) eof=$(get eof)
lost=$(get lost_on_retry)
ok $([ $rc = 0 ] && [ "${sent:-0}" -ge 100 ] && echo 0 || echo 1) \
	"loadgen ran: $sent requests sent (rc $rc)" "$(cat "$TMP/lg.err" "$TMP/lg.json" 2>/dev/null)"
# Every reuse meets a close, so most requests are retries: all of them answered.
ok $([ "${retr:-0}" -ge 20 ] && echo 0 || echo 1) \
	"requests on reused connections that the server closed were retried: $retr of $sent"
ok $([ "${err:-1}" = 0 ] && [ "${okn:-0}" = "${sent:-x}" ] && [ "${lost:-1}" = 0 ] && echo 0 || echo 1) \
	"every retry went on a new connection and was answered: $okn ok, $err failed ($eof eof, $lost lost on a retry) of $sent" \
	"$(cat "$TMP/lg.json")"

echo "1..$N"
[ "$FAILED" -eq 0 ]
