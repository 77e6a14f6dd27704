// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// synflood: a raw SYN flood for the benchmarks, to test namespaces on veth only.
//
// Why it exists: a client that opens real connections (loadgen) cannot send more than a few
// tens of thousands of SYNs a second on this host, and at that rate the receiving veth's
// NAPI kthread still wakes about once a packet, so what a refusal costs is mostly that
// wake-up. A host under a SYN flood receives faster, in batches. This tool crafts the
// Ethernet + IPv4 + TCP SYN frames itself and hands them to the interface through an
// AF_PACKET socket, many per sendmmsg() call, without any socket state for the answers (the
// RSTs or SYN-ACKs that come back are for the caller to count, from the interface's counters).
//
// Every frame goes to --dst (an address in 198.18.0.0/15, the benchmarking range) from a
// source in the same range: --src, or --src-count consecutive addresses from it; the source
// port walks --ports, and the source address moves on each time the ports wrap. Sequence
// numbers and IP ids are random. IP and TCP checksums are correct: the receiver may check.
//
// Arrivals are paced by the clock (open loop, evenly spaced at --rate per second): each time
// it wakes, it sends what is due by then (at most --batch frames a call) and sleeps until the
// next frame is due. At low rates that is a frame a call; at high rates, or when the host
// is busy, several frames go in one call, as a flood arrives. --rate max sends --batch frames
// a call without pacing. It always stops by itself: after --count frames or --duration
// seconds, whichever comes first (SIGINT/SIGTERM stop it earlier). Output: one JSON object on
// stdout. See tools/README.md for usage.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#define TOOL_NAME "synflood"
#include "../common/args.h"
#include "../common/hostport.h"

#define MAX_BATCH 1024
#define FRAME_LEN (14 + 20 + 24) // Ethernet, IPv4 without options, TCP with an MSS option
// The benchmarking range (RFC 2544): the only addresses this tool sends from or to.
#define BENCH_NET 0xc6120000u // 198.18.0.0
#define BENCH_MASK 0xfffe0000u // /15

static struct {
	const char *dev, *dst_str;
	uint8_t dst_mac[6], src_mac[6];
	bool have_dst_mac, have_src_mac;
	uint32_t dst, src; // host order
	uint16_t dport, port_lo, port_hi;
	uint32_t src_count;
	double rate; // 0: as fast as it can
	uint64_t count;
	double duration;
	int batch;
	uint64_t seed;
} opt = { .port_lo = 1024, .port_hi = 65535, .src_count = 1, .duration = 10, .batch = 64 };

static volatile sig_atomic_t stop;


static void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "synflood: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng;
static uint32_t rnd32(void) // xorshift64*
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)((rng * 2685821657736338717ULL) >> 32);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: synflood --dev IF --dst-mac MAC --dst ADDR:PORT --src ADDR --count N\n"
		"                [--rate R|max] [--duration S] [options]\n"
		"  --dev IF                 the interface to send on (in this network namespace)\n"
		"  --dst-mac MAC            the receiver's MAC (aa:bb:cc:dd:ee:ff), e.g. the veth peer's\n"
		"  --dst ADDR:PORT          IPv4 destination, in 198.18.0.0/15\n"
		"  --src ADDR               IPv4 source, in 198.18.0.0/15\n"
		"  --src-count N            sources: N consecutive addresses from --src, all in\n"
		"                           198.18.0.0/15 (default 1); the next one each time the\n"
		"                           source ports wrap\n"
		"  --ports LO-HI            source ports, walked in turn (default 1024-65535)\n"
		"  --src-mac MAC            frame source (default: the interface's own)\n"
		"  --count N                stop after N frames (required: the run is bounded)\n"
		"  --duration S             stop after S seconds at the latest (default 10)\n"
		"  --rate R|max             frames per second, evenly spaced by the clock (default\n"
		"                           max: --batch frames a call, no pacing)\n"
		"  --batch N                at most N frames per sendmmsg() call (default 64, max %d)\n"
		"  --seed N                 random seed of sequence numbers and IP ids (default: clock)\n"
		"Prints one JSON object on stdout: sent, elapsed_s, achieved_rate, calls, busy (calls\n"
		"the interface refused for a moment, retried). Needs CAP_NET_RAW.\n"
		"Exit 0 when the run completed, 2 bad usage, 1 runtime failure.\n",
		MAX_BATCH);
}

static void parse_mac(const char *name, const char *v, uint8_t mac[6])
{
	unsigned m[6];
	char tail;
	if (sscanf(v, "%x:%x:%x:%x:%x:%x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5], &tail) != 6)
		die("bad %s '%s' (want aa:bb:cc:dd:ee:ff)", name, v);
	for (int i = 0; i < 6; i++) {
		if (m[i] > 255)
			die("bad %s '%s' (want aa:bb:cc:dd:ee:ff)", name, v);
		mac[i] = (uint8_t)m[i];
	}
}

static bool in_bench_net(uint32_t a)
{
	return (a & BENCH_MASK) == BENCH_NET;
}

static uint32_t v4_arg(const char *name, const char *v, unsigned flags, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (parse_hostport(v, flags, &ss, &len) || ss.ss_family != AF_INET)
		die("bad %s '%s' (want a numeric IPv4 address%s)", name, v,
		    flags & HOSTPORT_BARE ? "" : ":PORT");
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
	uint32_t a = ntohl(sin->sin_addr.s_addr);
	if (!in_bench_net(a))
		die("%s '%s' is outside 198.18.0.0/15: this tool sends only within it", name, v);
	if (port)
		*port = ntohs(sin->sin_port);
	return a;
}

static void parse_args(int argc, char **argv)
{
	bool have_src = false, have_count = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if (!strcmp(a, "--dev")) {
			opt.dev = ARG();
			if (!*opt.dev || strlen(opt.dev) >= IFNAMSIZ)
				die("bad --dev '%s'", opt.dev);
		} else if (!strcmp(a, "--dst-mac")) {
			parse_mac(a, ARG(), opt.dst_mac);
			opt.have_dst_mac = true;
		} else if (!strcmp(a, "--src-mac")) {
			parse_mac(a, ARG(), opt.src_mac);
			opt.have_src_mac = true;
		} else if (!strcmp(a, "--dst")) {
			opt.dst_str = ARG();
			opt.dst = v4_arg(a, opt.dst_str, 0, &opt.dport);
		} else if (!strcmp(a, "--src")) {
			opt.src = v4_arg(a, ARG(), HOSTPORT_BARE, NULL);
			have_src = true;
		} else if (!strcmp(a, "--src-count"))
			opt.src_count = (uint32_t)num_arg(a, ARG(), 1, 1 << 17);
		else if (!strcmp(a, "--ports")) {
			const char *v = ARG();
			unsigned lo, hi;
			char tail;
			if (sscanf(v, "%u-%u%c", &lo, &hi, &tail) != 2 || lo < 1 || lo > hi || hi > 65535)
				die("bad --ports '%s' (want LO-HI within 1-65535)", v);
			opt.port_lo = (uint16_t)lo;
			opt.port_hi = (uint16_t)hi;
		} else if (!strcmp(a, "--count")) {
			opt.count = (uint64_t)num_arg(a, ARG(), 1, 1e10);
			have_count = true;
		} else if (!strcmp(a, "--duration"))
			opt.duration = num_arg(a, ARG(), 0.001, 3600);
		else if (!strcmp(a, "--rate")) {
			const char *v = ARG();
			opt.rate = strcmp(v, "max") ? num_arg(a, v, 1, 1e8) : 0;
		} else if (!strcmp(a, "--batch"))
			opt.batch = (int)num_arg(a, ARG(), 1, MAX_BATCH);
		else if (!strcmp(a, "--seed"))
			opt.seed = (uint64_t)num_arg(a, ARG(), 0, 1e18);
		else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			die("unknown argument '%s'", a);
		}
	}
	if (!opt.dev || !opt.have_dst_mac || !opt.dst_str || !have_src || !have_count) {
		usage(stderr);
		die("--dev, --dst-mac, --dst, --src and --count are required");
	}
	if (!opt.dport)
		die("--dst needs a port other than 0");
	// The last source as well: the whole walk stays in the range.
	if (!in_bench_net(opt.src + opt.src_count - 1) || opt.src + opt.src_count - 1 < opt.src)
		die("--src-count %u from --src goes past 198.18.0.0/15", opt.src_count);
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

// The parts of every frame that never change: MACs, ethertype, IP version/length/TTL/DF,
// the destination, TCP header length, flags SYN, window, the MSS option.
static void frame_template(uint8_t *f)
{
	memset(f, 0, FRAME_LEN);
	memcpy(f, opt.dst_mac, 6);
	memcpy(f + 6, opt.src_mac, 6);
	put16(f + 12, ETH_P_IP);
	uint8_t *ip = f + 14, *tcp = ip + 20;
	ip[0] = 0x45;
	put16(ip + 2, 20 + 24);
	put16(ip + 6, 0x4000); // DF
	ip[8] = 64;
	ip[9] = IPPROTO_TCP;
	put32(ip + 16, opt.dst);
	put16(tcp + 2, opt.dport);
	tcp[12] = 6 << 4; // 24 bytes of header
	tcp[13] = 0x02;   // SYN
	put16(tcp + 14, 64240);
	tcp[20] = 2; // MSS 1460
	tcp[21] = 4;
	put16(tcp + 22, 1460);
}

// The fields that differ frame to frame, and both checksums over them.
static void frame_fill(uint8_t *f, uint32_t src, uint16_t sport)
{
	uint8_t *ip = f + 14, *tcp = ip + 20;
	put16(ip + 4, (uint16_t)rnd32());
	put32(ip + 12, src);
	put16(ip + 10, 0);
	put16(ip + 10, fold(sum16(ip, 20, 0)));
	put16(tcp, sport);
	put32(tcp + 4, rnd32());
	put16(tcp + 16, 0);
	// pseudo-header: both addresses, protocol, TCP length
	uint32_t sum = sum16(ip + 12, 8, 0) + IPPROTO_TCP + 24;
	put16(tcp + 16, fold(sum16(tcp, 24, sum)));
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	rng = opt.seed ? opt.seed : (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	if (!rng)
		rng = 1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	// A 50 us timer slack (the default) would bunch the paced frames at rates above ~20000/s.
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	int fd = socket(AF_PACKET, SOCK_RAW, 0); // protocol 0: it receives nothing
	if (fd < 0)
		fatal("AF_PACKET socket: %s (needs CAP_NET_RAW)", strerror(errno));
	unsigned ifindex = if_nametoindex(opt.dev);
	if (!ifindex)
		fatal("--dev %s: %s", opt.dev, strerror(errno));
	if (!opt.have_src_mac) {
		struct ifreq ifr = { 0 };
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", opt.dev);
		if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
			fatal("--dev %s: its MAC: %s", opt.dev, strerror(errno));
		memcpy(opt.src_mac, ifr.ifr_hwaddr.sa_data, 6);
	}
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_ifindex = (int)ifindex };
	if (bind(fd, (struct sockaddr *)&ll, sizeof ll) < 0)
		fatal("bind to %s: %s", opt.dev, strerror(errno));
	// Straight to the driver: a full transmit ring then comes back at once as ENOBUFS, and the
	// frame is retried (counted in busy), never queued behind a qdisc or dropped unseen.
	int one = 1;
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
	ll.sll_protocol = htons(ETH_P_IP);
	ll.sll_halen = 6;
	memcpy(ll.sll_addr, opt.dst_mac, 6);

	static uint8_t frames[MAX_BATCH][FRAME_LEN];
	static struct iovec iov[MAX_BATCH];
	static struct mmsghdr msgs[MAX_BATCH];
	for (int i = 0; i < opt.batch; i++) {
		frame_template(frames[i]);
		iov[i] = (struct iovec){ .iov_base = frames[i], .iov_len = FRAME_LEN };
		msgs[i].msg_hdr = (struct msghdr){ .msg_name = &ll, .msg_namelen = sizeof ll,
						   .msg_iov = &iov[i], .msg_iovlen = 1 };
	}

	uint64_t sent = 0, calls = 0, busy = 0;
	uint32_t src_i = 0;
	uint32_t sport = opt.port_lo;
	int filled = 0; // frames[0..filled) are built and not yet sent
	int64_t t0 = now_ns(), end = t0 + (int64_t)(opt.duration * 1e9), t = t0;
	while (!stop && sent < opt.count && (t = now_ns()) < end) {
		uint64_t want = opt.count - sent;
		if (opt.rate > 0) {
			uint64_t due = (uint64_t)((double)(t - t0) * opt.rate / 1e9) + 1;
			if (due <= sent) {
				// sleep until the next frame is due (or the end)
				int64_t next = t0 + (int64_t)((double)sent * 1e9 / opt.rate);
				if (next > end)
					next = end;
				struct timespec ts = { .tv_sec = next / 1000000000,
						       .tv_nsec = next % 1000000000 };
				clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
				continue;
			}
			if (due - sent < want)
				want = due - sent;
		}
		int n = want < (uint64_t)opt.batch ? (int)want : opt.batch;
		for (; filled < n; filled++) {
			frame_fill(frames[filled], opt.src + src_i, (uint16_t)sport);
			if (sport++ == opt.port_hi) {
				sport = opt.port_lo;
				src_i = (src_i + 1) % opt.src_count;
			}
		}
		int k = sendmmsg(fd, msgs, (unsigned)n, MSG_DONTWAIT);
		calls++;
		if (k < 0) {
			if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) {
				// the interface is full for a moment: let the receiver run, then retry
				busy++;
				sched_yield();
				continue;
			}
			fatal("sendmmsg on %s: %s", opt.dev, strerror(errno));
		}
		sent += (uint64_t)k;
		// frames not taken keep their place for the next call
		if (k < n) {
			memmove(frames, frames + k, (size_t)(n - k) * FRAME_LEN);
			busy++;
		}
		filled -= k;
		if (filled > 0 && k < n)
			sched_yield();
	}
	double elapsed = (double)(now_ns() - t0) / 1e9;
	close(fd);
	char dst_ip[INET_ADDRSTRLEN], src_ip[INET_ADDRSTRLEN];
	struct in_addr ia = { .s_addr = htonl(opt.dst) };
	inet_ntop(AF_INET, &ia, dst_ip, sizeof dst_ip);
	ia.s_addr = htonl(opt.src);
	inet_ntop(AF_INET, &ia, src_ip, sizeof src_ip);
	printf("{\"dev\":\"%s\",\"dst\":\"%s:%u\",\"src\":\"%s\",\"src_count\":%u,\"ports\":\"%u-%u\","
	       "\"offered_rate\":",
	       opt.dev, dst_ip, opt.dport, src_ip, opt.src_count, opt.port_lo, opt.port_hi);
	if (opt.rate > 0)
		printf("%.0f", opt.rate);
	else
		printf("null");
	printf(",\"batch\":%d,\"count\":%llu,\"duration_s\":%g,\"sent\":%llu,\"elapsed_s\":%.3f,"
	       "\"achieved_rate\":%.0f,\"calls\":%llu,\"busy\":%llu,\"stopped\":%s}\n",
	       opt.batch, (unsigned long long)opt.count, opt.duration, (unsigned long long)sent,
	       elapsed, elapsed > 0 ? (double)sent / elapsed : 0.0, (unsigned long long)calls,
	       (unsigned long long)busy, stop ? "true" : "false");
	return 0;
}
