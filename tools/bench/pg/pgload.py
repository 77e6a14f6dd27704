#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""Load for the PostgreSQL benchmark (tools/bench/pg.sh). Standard library only.

  pgload.py flood --host H --port P --src ADDR --duration S --holders N --churners N --seed N
      The L3 surge: N "holders" that log in, run one query and then sit idle on their
      connection (a pool that keeps connections open), and N "churners" that loop
      connect -> query -> disconnect as fast as the server lets them. A refused attempt is
      retried after a short pause, as an application would. Bounded by --duration.
      Speaks the PostgreSQL v3 wire protocol itself (trust authentication only), so a refusal
      is classified exactly: TCP reset/refused, the server's "too many clients" (53300),
      another server error, or a timeout. Prints one JSON object.

  pgload.py l0 --host H --port P --src ADDR --duration S --clients N --script F --seed N
               --logdir D [--connect]
      The L0 load: N independent pgbench processes (-c 1 each), each restarted when it exits
      early (pgbench gives up on a client whose connection fails, an application retries),
      so one refused connection costs one attempt, not the rest of the run. Counts only the
      transactions that completed inside the window. Latency: pgbench's per-transaction time
      with persistent connections; with --connect (pgbench -C) the interval between one
      client's completions, i.e. connect + transaction + disconnect, because pgbench's own
      figure leaves the connection out. Prints one JSON object.
"""
import argparse
import asyncio
import glob
import json
import os
import random
import re
import struct
import subprocess
import sys
import threading
import time


# ---------------------------------------------------------------------------- wire protocol
class Refused(Exception):
    def __init__(self, kind, detail=""):
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail


async def read_msg(reader):
    head = await reader.readexactly(5)
    typ, ln = head[:1], struct.unpack("!I", head[1:])[0]
    body = await reader.readexactly(ln - 4) if ln > 4 else b""
    return typ, body


def error_fields(body):
    f = {}
    for part in body.split(b"\0"):
        if part:
            f[part[:1].decode()] = part[1:].decode(errors="replace")
    return f


async def pg_login(host, port, src, user, db, timeout):
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, local_addr=(src, 0)), timeout)
    except asyncio.TimeoutError:
        raise Refused("timeout", "connect")
    except (ConnectionRefusedError, ConnectionResetError) as e:
        raise Refused("reset", str(e))
    except OSError as e:
        raise Refused("other", str(e))
    params = b"user\0" + user.encode() + b"\0database\0" + db.encode() + \
        b"\0application_name\0sluice-bench-flood\0\0"
    writer.write(struct.pack("!II", 8 + len(params), 196608) + params)
    try:
        while True:
            typ, body = await asyncio.wait_for(read_msg(reader), timeout)
            if typ == b"R":
                if struct.unpack("!I", body[:4])[0] != 0:
                    raise Refused("other", "authentication other than trust requested")
            elif typ == b"E":
                f = error_fields(body)
                raise Refused("full" if f.get("C") == "53300" else "server_error",
                              f.get("M", ""))
            elif typ == b"Z":
                return reader, writer
    except Refused:
        writer.close()
        raise
    except asyncio.TimeoutError:
        writer.close()
        raise Refused("timeout", "login")
    except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as e:
        writer.close()
        raise Refused("reset", "during login: %s" % e)


async def pg_query(reader, writer, sql, timeout):
    q = sql.encode() + b"\0"
    writer.write(b"Q" + struct.pack("!I", 4 + len(q)) + q)
    err = None
    try:
        while True:
            typ, body = await asyncio.wait_for(read_msg(reader), timeout)
            if typ == b"E":
                err = error_fields(body)
            elif typ == b"Z":
                break
    except asyncio.TimeoutError:
        raise Refused("timeout", "query")
    except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as e:
        raise Refused("reset", "during query: %s" % e)
    if err:
        raise Refused("full" if err.get("C") == "53300" else "server_error", err.get("M", ""))


async def pg_close(writer):
    try:
        writer.write(b"X\0\0\0\x04")
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 1)
    except Exception:
        pass


# ---------------------------------------------------------------------------- flood
def new_stats():
    return {"attempts": 0, "ok": 0, "reset": 0, "full": 0, "server_error": 0, "timeout": 0,
            "other": 0}


async def churner(a, rng, deadline, st, lat):
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        st["attempts"] += 1
        t0 = loop.time()
        try:
            r, w = await pg_login(a.host, a.port, a.src, a.user, a.db, a.timeout)
            try:
                await pg_query(r, w, a.query, a.timeout)
            finally:
                await pg_close(w)
            st["ok"] += 1
            lat.append(loop.time() - t0)
        except Refused as e:
            st[e.kind] += 1
            st.setdefault("last_error", e.detail)
            await asyncio.sleep(a.retry_ms / 1000.0 * rng.uniform(0.5, 1.5))


async def holder(a, rng, deadline, st, holding):
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        st["attempts"] += 1
        try:
            r, w = await pg_login(a.host, a.port, a.src, a.user, a.db, a.timeout)
        except Refused as e:
            st[e.kind] += 1
            st.setdefault("last_error", e.detail)
            await asyncio.sleep(a.hold_retry_ms / 1000.0 * rng.uniform(0.5, 1.5))
            continue
        try:
            await pg_query(r, w, "SELECT 1", a.timeout)
            st["ok"] += 1
            holding[0] += 1
            try:   # idle until the end (or until the server drops us)
                await asyncio.wait_for(r.read(1), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                pass
            except (ConnectionResetError, BrokenPipeError):
                pass
            holding[0] -= 1
        except Refused as e:
            st[e.kind] += 1
            st.setdefault("last_error", e.detail)
            await asyncio.sleep(a.hold_retry_ms / 1000.0 * rng.uniform(0.5, 1.5))
        finally:
            await pg_close(w)


async def flood_main(a):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    deadline = t0 + a.duration
    ch, ho = new_stats(), new_stats()
    lat, holding, held = [], [0], []
    tasks = []
    for i in range(a.holders):
        tasks.append(asyncio.create_task(holder(a, random.Random(a.seed * 7919 + i), deadline,
                                                ho, holding)))
    for i in range(a.churners):
        tasks.append(asyncio.create_task(churner(a, random.Random(a.seed * 104729 + i),
                                                 deadline, ch, lat)))

    def refused_now():
        return sum(s[k] for s in (ch, ho) for k in ("reset", "full", "server_error", "timeout",
                                                      "other"))

    async def sample():   # progress on stderr: lets the caller split the run into phases
        while loop.time() < deadline:
            held.append(holding[0])
            print("t=%.3f refused=%d admitted=%d" % (loop.time() - t0, refused_now(),
                                                     ch["ok"] + ho["ok"]),
                  file=sys.stderr, flush=True)
            await asyncio.sleep(0.25)
    tasks.append(asyncio.create_task(sample()))
    await asyncio.wait(tasks, timeout=a.duration + 2 * a.timeout + 2)
    for t in tasks:
        t.cancel()
    el = loop.time() - t0
    lat.sort()
    refused = refused_now()
    return {"elapsed_s": round(el, 3), "churners": ch, "holders": ho,
            "admitted": ch["ok"] + ho["ok"], "refused": refused,
            "churn_ok_per_s": round(ch["ok"] / el, 1),
            "churn_p50_ms": round(1000 * pctl(lat, 50), 2) if lat else None,
            "holders_held_mean": round(sum(held) / len(held), 1) if held else 0}


def pctl(sorted_vals, p):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


# ---------------------------------------------------------------------------- L0
ERR_CONN = re.compile(r"aborted while establishing connection|connection to server .* failed|"
                      r"could not connect|too many clients|Connection refused|"
                      r"server closed the connection|Connection reset")


def l0_client(a, idx, deadline, out):
    k = 0
    res = {"runs": 0, "conn_errors": 0, "failed": 0, "errors": []}
    while True:
        rem = deadline - time.time()
        if rem <= 0.2:
            break
        k += 1
        prefix = os.path.join(a.logdir, "c%d_%d" % (idx, k))
        cmd = [a.pgbench, "-n", "-c", "1", "-j", "1", "-T", str(max(1, int(rem + 0.999))),
               "-f", a.script, "-l", "--log-prefix=" + prefix,
               "--random-seed=%d" % (a.seed * 1000 + idx * 97 + k),
               "-h", a.host, "-p", str(a.port), "-U", a.user, a.db]
        if a.connect:
            cmd.insert(1, "-C")
        env = dict(os.environ, PGCONNECT_TIMEOUT="2", PGAPPNAME="sluice-bench-l0")
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        res["runs"] += 1
        early = time.time() < deadline - 0.05
        if p.returncode != 0 or early:
            msg = p.stderr.strip().splitlines()
            m = next((l for l in msg if "abort" in l or "error" in l or "FATAL" in l),
                     msg[-1] if msg else "exit %d" % p.returncode)
            if ERR_CONN.search(p.stderr) or "establishing connection" in p.stderr:
                res["conn_errors"] += 1
            else:
                res["failed"] += 1
            if len(res["errors"]) < 3:
                res["errors"].append(m[:200])
            time.sleep(a.retry_ms / 1000.0)
    out[idx] = res


def l0_main(a):
    os.makedirs(a.logdir, exist_ok=True)
    for f in glob.glob(os.path.join(a.logdir, "c*")):
        os.unlink(f)
    t_start = time.time()
    deadline = t_start + a.duration
    out = [None] * a.clients
    th = [threading.Thread(target=l0_client, args=(a, i, deadline, out))
          for i in range(a.clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    lat, n = [], 0
    for f in glob.glob(os.path.join(a.logdir, "c*")):
        prev = None
        for line in open(f):
            p = line.split()
            if len(p) < 6:
                continue
            end = int(p[4]) + int(p[5]) / 1e6
            if t_start <= end <= deadline:
                n += 1
                if not a.connect:
                    lat.append(int(p[2]) / 1000.0)
                elif prev is not None:
                    lat.append((end - prev) * 1000.0)
            prev = end
    lat.sort()
    conn_err = sum(r["conn_errors"] for r in out)
    failed = sum(r["failed"] for r in out)
    attempts = n + conn_err + failed
    errs = []
    for r in out:
        for e in r["errors"]:
            if e not in errs and len(errs) < 3:
                errs.append(e)
    return {"ok": n, "conn_errors": conn_err, "failed": failed,
            "success_pct": round(100.0 * n / attempts, 3) if attempts else 0.0,
            "tps": round(n / a.duration, 1), "p50_ms": rnd(pctl(lat, 50)),
            "p99_ms": rnd(pctl(lat, 99)), "pgbench_runs": sum(r["runs"] for r in out),
            "errors": errs}


def rnd(x):
    return None if x is None else round(x, 3)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("flood", "l0"):
        s = sub.add_parser(name)
        s.add_argument("--host", required=True)
        s.add_argument("--port", type=int, default=5432)
        s.add_argument("--src", default="")
        s.add_argument("--user", default="bench")
        s.add_argument("--db", default="bench")
        s.add_argument("--duration", type=float, required=True)
        s.add_argument("--seed", type=int, default=1)
        s.add_argument("--timeout", type=float, default=2.0)
    f = sub.choices["flood"]
    f.add_argument("--holders", type=int, default=16)
    f.add_argument("--churners", type=int, default=48)
    f.add_argument("--query", default="SELECT 1")
    f.add_argument("--retry-ms", type=float, default=50)
    f.add_argument("--hold-retry-ms", type=float, default=200)
    l0 = sub.choices["l0"]
    l0.add_argument("--clients", type=int, default=8)
    l0.add_argument("--script", required=True)
    l0.add_argument("--logdir", required=True)
    l0.add_argument("--connect", action="store_true")
    l0.add_argument("--retry-ms", type=float, default=100)
    l0.add_argument("--pgbench", default="pgbench")
    a = ap.parse_args()
    if a.cmd == "flood":
        res = asyncio.run(flood_main(a))
    else:
        res = l0_main(a)
    json.dump(res, sys.stdout)
    print()


if __name__ == "__main__":
    main()
