#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""Test plumbing: a TCP client made of raw frames written into a tap device, so the test
chooses how each frame reaches the stack. The tap has two queues: frames written to the
"napi-frags" queue arrive as skbs whose linear part holds only the Ethernet header, the IP
and TCP headers left in page fragments (what drivers that receive into pages and skip GRO
hand the stack); frames written to the plain queue arrive linear and run native XDP.

Usage: tapclient.py IFNAME CLIENT_IP SERVER_IP PORT GO_FILE OUT_FILE REQUEST...
Creates IFNAME, prints "ready", waits for GO_FILE, opens a connection per REQUEST (an HTTP
request head with "\\n" for line ends; handshake on the plain queue), prints "open", waits
for GO_FILE.2, then sends each request on the napi-frags queue and notes the first line of
the answer (or "none"). Writes {"answers": [...]} to OUT_FILE and keeps the tap until
killed. A tun device with an XDP program linearizes every frame: the test removes XDP between
the two steps, so the requests arrive in page fragments."""
import fcntl
import json
import os
import select
import socket
import struct
import sys
import time

TUNSETIFF, SIOCGIFHWADDR = 0x400454CA, 0x8927
IFF_TAP, IFF_NAPI, IFF_NAPI_FRAGS, IFF_MULTI_QUEUE, IFF_NO_PI = 0x2, 0x10, 0x20, 0x100, 0x1000
CLIENT_MAC = bytes.fromhex("020000000e12")


def open_queue(name, flags):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), flags | IFF_TAP | IFF_NO_PI |
                                           IFF_MULTI_QUEUE))
    return fd


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


class Conn:
    def __init__(self, ifname, cip, sip, sport, dport):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:   # /sys may be another netns's
            self.mac = fcntl.ioctl(s, SIOCGIFHWADDR, struct.pack("256s", ifname.encode()))[18:24]
        self.cip, self.sip = socket.inet_aton(cip), socket.inet_aton(sip)
        self.sport, self.dport = sport, dport
        self.seq, self.ack = 1000 + sport * 7, 0

    def frame(self, flags, payload=b""):
        tcp = struct.pack("!HHIIBBHHH", self.sport, self.dport, self.seq, self.ack, 5 << 4, flags,
                          64000, 0, 0) + payload
        ph = self.cip + self.sip + struct.pack("!BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", csum(ph + tcp)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, self.cip,
                         self.sip)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        return self.mac + CLIENT_MAC + b"\x08\x00" + ip + tcp

    def mine(self, f):
        """(flags, seq, payload) of a frame of this connection from the server, else None."""
        if len(f) < 54 or f[12:14] != b"\x08\x00" or f[23] != 6:
            return None
        ihl = (f[14] & 15) * 4
        tot = struct.unpack("!H", f[16:18])[0]
        t = 14 + ihl
        sp, dp, seq, _ack, off, flags = struct.unpack("!HHIIBB", f[t:t + 14])
        if f[26:30] != self.sip or f[30:34] != self.cip or sp != self.dport or dp != self.sport:
            return None
        return flags, seq, f[t + (off >> 4) * 4:14 + tot]


def wait_for(fds, conn, want, deadline):
    """The first frame of conn for which want(flags, seq, payload) holds, or None."""
    while time.monotonic() < deadline:
        r, _, _ = select.select(fds, [], [], max(0.0, deadline - time.monotonic()))
        for fd in r:
            try:
                f = os.read(fd, 65536)
            except BlockingIOError:
                continue
            m = conn.mine(f)
            if m and want(*m):
                return m
    return None


def handshake(ifname, cip, sip, port, sport, plain, frags):
    c = Conn(ifname, cip, sip, sport, port)
    os.write(plain, c.frame(0x02))                                       # SYN
    sa = wait_for([plain, frags], c, lambda fl, s, p: fl & 0x12 == 0x12, time.monotonic() + 3)
    if not sa:
        return None
    c.seq += 1
    c.ack = (sa[1] + 1) & 0xFFFFFFFF
    os.write(plain, c.frame(0x10))                                       # ACK
    return c


def request(c, plain, frags, request):
    if not c:
        return "no syn-ack"
    req = request.replace("\\n", "\r\n").encode()
    f = c.frame(0x18, req)
    os.writev(frags, [f[:14], f[14:]])                # headers beyond Ethernet in a page fragment
    ans = wait_for([plain, frags], c, lambda fl, s, p: len(p) > 0, time.monotonic() + 3)
    c.seq += len(req)
    os.write(plain, c.frame(0x04))                                       # RST: done
    if not ans:
        return "none"
    return ans[2].split(b"\r\n", 1)[0].decode(errors="replace")


def wait_file(path):
    while not os.path.exists(path):
        time.sleep(0.05)


def main():
    ifname, cip, sip, port, go, out = sys.argv[1:7]
    frags = open_queue(ifname, IFF_NAPI | IFF_NAPI_FRAGS)
    plain = open_queue(ifname, 0)
    print("ready", flush=True)
    wait_file(go)
    conns = [handshake(ifname, cip, sip, int(port), 40000 + i, plain, frags)
             for i in range(len(sys.argv) - 7)]
    print("open", flush=True)
    wait_file(go + ".2")
    answers = [request(c, plain, frags, rq) for c, rq in zip(conns, sys.argv[7:])]
    with open(out + ".tmp", "w") as f:
        json.dump({"answers": answers}, f)
    os.rename(out + ".tmp", out)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
