// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The real BPF programs run through BPF_PROG_TEST_RUN on crafted frames: parsing (v4, v6,
 * VLAN, truncated, garbage), SYN admission by class headroom, the RST reply byte by byte,
 * unit accounting at FIN/RST, fail-open, a full flow table. Runs in a private netns. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sched.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/mman.h>
#include <cmocka.h>
#include <linux/pkt_cls.h>

#include "harness.h"
#include "pktbuild.h"
#include "livesock.h"
#include "common/config.h"
#include "control/verdict.h"
#include "daemon/daemon.h"
#include "common/rng.h"

#define SERVER4 "198.18.0.1"
#define SERVER6 "2001:db8::1"

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 4 }\n"
	"    headroom: { L0: 100, L1: 90, L2: 75, L3: 50 }\n"
	"    default_class: L3\n"
	"    trust_from: [2001:db8:9::/48, 192.0.2.0/24]\n"
	"    classify:\n"
	"      - { source: 198.18.1.0/24, class: L0 }\n"
	"      - { source: 198.18.0.0/15, class: L2 }\n"
	"      - { source: 2001:db8:1::/48, class: L0 }\n"
	"      - { dscp: 46, class: L1 }\n"
	"  - name: quiet\n"
	"    port: 6000\n"
	"    protocol: tcp\n"
	"    reject: drop\n"
	"    limit: { fixed: 1 }\n"
	"    default_class: L0\n"
	"  - name: tenant\n"
	"    port: 7000\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 100 }\n"
	"    default_class: L0\n"
	"    client_limit: { max_in_flight: 2 }\n"
	"  - name: metered\n"
	"    port: 7001\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 100 }\n"
	"    default_class: L0\n"
	"    client_limit: { rate: 1, burst: 2 }\n"
	"  - name: pool\n"
	"    port: 7002\n"
	"    protocol: tcp\n"
	"    max_connections: 4\n"
	"    default_class: L3\n"
	"    classify:\n"
	"      - { source: 198.18.1.0/24, class: L0 }\n"
	"  - name: gap\n"
	"    port: 7003\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 8 }\n"
	"    headroom: { L3: 50 }\n"
	"    headroom_mode: fixed\n"
	"    default_class: L3\n";

static void set_heartbeat(struct fixture *f, unsigned long long age_ns)
{
	struct sluice_globals g = { .heartbeat_ns = monotonic_ns() - age_ns,
				    .heartbeat_timeout_ns = 1000000000ull };
	assert_int_equal(maps_write_globals(&f->m, &g), 0);
}

static int setup_flows(void **state, unsigned max_flows)
{
	return (*state = harness_shared_fixture(CONFIG, max_flows, 1000000000ull)) ? 0 : -1;
}

static int setup(void **state) { return setup_flows(state, 0); }
static int setup_small_table(void **state) { return setup_flows(state, 4); }

static struct run run_prog(int prog_fd, const uint8_t *frame, size_t len)
{
	struct run r = harness_run(prog_fd, frame, len, NULL);

	assert_int_equal(r.err, 0);
	return r;
}

/* Every frame XDP passes (admitted SYNs, FIN/RST, packets inside a flow, anything not for a
 * service) must come out exactly as it went in: checked here, for every test. */
static struct run xdp(struct fixture *f, const struct pkt_spec *s)
{
	uint8_t buf[512];
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf, build_pkt(buf, s));

	if (r.ret == XDP_PASS)
		assert_true(harness_unchanged(&r));
	return r;
}

/* TC egress never acts on a packet: every one comes out as it went in. */
static struct run tc_egress(struct fixture *f, const struct pkt_spec *s)
{
	uint8_t buf[512];
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_tc_egress), buf, build_pkt(buf, s));

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_true(harness_unchanged(&r));
	return r;
}

/* TC ingress: tcp client data opens turns; it never acts on a packet either. */
static struct run tc_ingress(struct fixture *f, const struct pkt_spec *s)
{
	uint8_t buf[512];
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_tc_ingress), buf, build_pkt(buf, s));

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_true(harness_unchanged(&r));
	return r;
}

/* TC ingress's verdict alone, for frames it may drop. */
static int tc_ingress_ret(struct fixture *f, const struct pkt_spec *s)
{
	uint8_t buf[512];

	return run_prog(bpf_program__fd(f->skel->progs.sluice_tc_ingress), buf, build_pkt(buf, s)).ret;
}

static struct pkt_spec syn4(const char *src, uint16_t sport, uint16_t dport)
{
	struct pkt_spec s = { .src = src, .dst = SERVER4, .sport = sport, .dport = dport,
			      .seq = 1000u + sport, .syn = 1, .tcp_opts = 20 };
	return s;
}

/* The server's ISN in every SYN-ACK the tests send (a function of the client port). */
#define SERVER_ISN(port) (0x5e000000u + (port) * 7919u)

/* The server's SYN-ACK to a client SYN, as TC egress sees it. */
static struct pkt_spec synack_of(const struct pkt_spec *syn)
{
	struct pkt_spec sa = { .v6 = syn->v6, .vlan = syn->vlan, .src = syn->dst, .dst = syn->src,
			       .sport = syn->dport, .dport = syn->sport, .seq = SERVER_ISN(syn->sport),
			       .ack = syn->seq + 1, .syn = 1, .ackf = 1, .tcp_opts = 20 };
	return sa;
}

/* A client segment of the connection opened by syn, at the client's next sequence number,
 * acknowledging the server's SYN-ACK. */
static struct pkt_spec client_seg(const struct pkt_spec *syn)
{
	struct pkt_spec s = *syn;

	s.syn = 0, s.ackf = 1, s.tcp_opts = 0;
	s.seq = syn->seq + 1, s.ack = SERVER_ISN(syn->sport) + 1;
	return s;
}

/* The query connect_ sends after the handshake: the connection is busy from then on. */
#define QUERY "q\n"
#define QLEN 2u

/* The client's query right after the handshake (TC ingress): it opens a turn. */
static struct pkt_spec client_query(const struct pkt_spec *syn)
{
	struct pkt_spec s = client_seg(syn);
	s.psh = 1, s.payload = QUERY, s.payload_len = QLEN;
	return s;
}

/* The server's reply of n bytes at offset off of its data (TC egress). */
static struct pkt_spec server_reply(const struct pkt_spec *syn, uint32_t off, uint32_t n)
{
	static const char bytes[64] = "reply reply reply reply reply reply reply reply reply reply";
	struct pkt_spec s = synack_of(syn);
	s.syn = 0, s.tcp_opts = 0, s.psh = 1, s.seq = SERVER_ISN(syn->sport) + 1 + off;
	s.payload = bytes, s.payload_len = n < sizeof(bytes) ? n : sizeof(bytes);
	return s;
}

/* Client FIN and RST at where the client is after connect_'s query. */
static struct pkt_spec client_fin(const struct pkt_spec *syn)
{
	struct pkt_spec s = client_seg(syn);
	s.fin = 1, s.seq += QLEN;
	return s;
}

/* ... and of a connection that never sent a query (connect_idle). */
static struct pkt_spec idle_fin(const struct pkt_spec *syn)
{
	struct pkt_spec s = client_seg(syn);
	s.fin = 1;
	return s;
}

static struct pkt_spec client_rst(const struct pkt_spec *syn)
{
	struct pkt_spec s = client_seg(syn);
	s.rst = 1, s.ackf = 0, s.ack = 0, s.seq += QLEN;
	return s;
}

/* connect_'s query answered (its turn ends), then the client's FIN: the usual end of a
 * connection. (A FIN while the query still runs ends nothing: the server still works on it.) */
static void answered_then_fin(struct fixture *f, const struct pkt_spec *syn)
{
	struct pkt_spec r = server_reply(syn, 0, 3), fin = client_fin(syn);

	tc_egress(f, &r);
	xdp(f, &fin);
}

/* A connection as a real client makes it: SYN (XDP), the server's SYN-ACK (TC egress), the
 * client's ACK of it (XDP). Returns the SYN's verdict; only an admitted SYN goes on. */
static int connect_idle(struct fixture *f, const struct pkt_spec *syn)
{
	int rv = xdp(f, syn).ret;

	if (rv == XDP_PASS) {
		struct pkt_spec sa = synack_of(syn), ack = client_seg(syn);
		tc_egress(f, &sa);
		xdp(f, &ack);
	}
	return rv;
}

/* ... and its first query, unanswered: the connection is busy, it holds capacity. */
static int connect_(struct fixture *f, const struct pkt_spec *syn)
{
	int rv = connect_idle(f, syn);

	if (rv == XDP_PASS) {
		struct pkt_spec q = client_query(syn);
		xdp(f, &q);
		tc_ingress(f, &q);
	}
	return rv;
}

static int flow_count(struct fixture *f)
{
	int per[SLUICE_MAX_SERVICES];
	return maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES);
}

static struct sluice_class_stats stats(struct fixture *f, int svc, int cls)
{
	struct sluice_class_stats st;
	assert_int_equal(maps_read_class_stats(&f->m, f->idx[svc], cls, &st), 0);
	return st;
}

/* Priority marks of service svc ignored for an untrusted source (summed over CPUs). */
static unsigned long long untrusted(struct fixture *f, int svc)
{
	struct sluice_untrusted u;
	assert_int_equal(maps_read_untrusted(&f->m, f->idx[svc], &u), 0);
	return u.ignored;
}

static long long inflight_total(struct fixture *f, int svc)
{
	struct sluice_inflight in;
	assert_int_equal(maps_read_inflight(&f->m, f->idx[svc], &in), 0);
	return in.total;
}

static long long busy_total(struct fixture *f, int svc)
{
	struct sluice_inflight in;
	assert_int_equal(maps_read_busy(&f->m, f->idx[svc], &in), 0);
	return in.total;
}

static struct sluice_pkt_stats pstats(struct fixture *f)
{
	struct sluice_pkt_stats p;
	assert_int_equal(maps_read_pkt_stats(&f->m, &p), 0);
	return p;
}

/* ---- parsing ---- */

static void test_non_service_passes_untouched(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 40000, 80);
	struct run r = xdp(f, &s);

	assert_int_equal(r.ret, XDP_PASS);
	assert_true(harness_unchanged(&r));
	assert_int_equal(pstats(f).service, 0);
	assert_int_equal(pstats(f).malformed, 0);
}

static void test_truncated_and_bad_headers_pass_unchanged(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 40000, 5432);
	uint8_t full[512];
	size_t len = build_pkt(full, &s);
	int xdp_fd = bpf_program__fd(f->skel->progs.sluice_xdp_ingress);
	unsigned long long malformed = 0;

	/* Every truncation of a service SYN between a full Ethernet header and the end of
	 * the TCP header: passes, never rejected, never admitted. */
	for (size_t cut = 15; cut < 14 + 20 + 20; cut++) {
		struct run r = run_prog(xdp_fd, full, cut);
		assert_int_equal(r.ret, XDP_PASS);
		assert_true(harness_unchanged(&r));
		malformed++;
	}
	/* Bad IHL, bad doff, wrong IP version. */
	static const struct { size_t at; uint8_t val; } bads[] = {
		{ 14, 0x43 },           /* ihl 3 */
		{ 14 + 20 + 12, 0x20 }, /* doff 2 */
		{ 14, 0x65 },           /* version 6 in an IPv4 ethertype */
	};
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		uint8_t bad[512];
		memcpy(bad, full, len);
		bad[bads[i].at] = bads[i].val;
		struct run r = run_prog(xdp_fd, bad, len);
		assert_int_equal(r.ret, XDP_PASS);
		assert_true(harness_unchanged(&r));
		malformed++;
	}
	assert_int_equal(pstats(f).malformed, malformed);

}

/* ---- fuzz ---- */

/* Random frames in classes whose verdict is known exactly: random bytes behind an IPv4, IPv6
 * or 802.1Q ethertype; well-formed TCP with random IP and TCP fields to a port that is no
 * service; non-TCP and non-first fragments; malformed headers; service segments that are not
 * a SYN; SYN-ACKs; and service SYNs with random fields while the verdict admits everything,
 * then while it refuses everything. Each frame also goes through both TC programs, which
 * never alter it. A fixed seed (SLUICE_FUZZ_SEED overrides it), printed, replays a failure. */
enum fuzz_class {
	FZ_RANDOM, FZ_OTHER_PORT, FZ_NOT_TCP, FZ_MALFORMED, FZ_NO_SYN, FZ_SYN_ACK,
	FZ_SYN_ADMITTED, FZ_SYN_REFUSED, FZ_CLASSES
};
static const char *const fuzz_names[FZ_CLASSES] = {
	"random bytes", "other port", "not tcp", "malformed", "no syn", "syn-ack",
	"syn admitted", "syn refused"
};

static uint64_t fz_rng;
static uint32_t fz(uint32_t n) { return (uint32_t)(sluice_rng_next(&fz_rng) >> 32) % n; }

static void fz_bytes(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)fz(256);
}

static int is_service_port(uint16_t port)
{
	return port == 5432 || port == 6000 || port == 7000 || port == 7001 || port == 7002;
}

/* Where build_pkt put the headers of a frame. */
struct fz_frame {
	uint8_t b[512];
	size_t len, l3, l4;
	int v6;
};

/* A well-formed TCP frame (v4 or v6, tagged or not) with random addresses, DSCP, ports, seq,
 * ack, options and payload; then random IP id/TTL/flow label, TCP window, urgent pointer and
 * flags as the class allows. */
static void fz_tcp(struct fz_frame *fr, uint16_t dport, int syn, int ack)
{
	uint8_t payload[200], a6[2][16], a4[2][4];
	char src[64], dst[64];
	struct pkt_spec s = { .v6 = (int)fz(2), .vlan = fz(3) ? 0 : 1 + (int)fz(4094),
			      .sport = (uint16_t)(1 + fz(65535)), .dport = dport,
			      .seq = (uint32_t)sluice_rng_next(&fz_rng), .ack = (uint32_t)sluice_rng_next(&fz_rng),
			      .syn = syn, .ackf = ack, .dscp = (uint8_t)fz(64),
			      .tcp_opts = 4 * (int)fz(11), .payload = payload, .payload_len = fz(4) ? 0 : fz(200) };

	fz_bytes(payload, sizeof(payload));
	fz_bytes(&a6[0][0], sizeof(a6));
	fz_bytes(&a4[0][0], sizeof(a4));
	inet_ntop(s.v6 ? AF_INET6 : AF_INET, s.v6 ? (void *)a6[0] : (void *)a4[0], src, sizeof(src));
	inet_ntop(s.v6 ? AF_INET6 : AF_INET, s.v6 ? (void *)a6[1] : (void *)a4[1], dst, sizeof(dst));
	s.src = src, s.dst = dst;
	fr->len = build_pkt(fr->b, &s);
	fr->v6 = s.v6;
	fr->l3 = 14 + (s.vlan ? 4 : 0);
	fr->l4 = fr->l3 + (s.v6 ? 40 : 20);
	if (s.v6) {
		fr->b[fr->l3 + 1] = (uint8_t)((fr->b[fr->l3 + 1] & 0xf0) | fz(16)); /* flow label */
		fz_bytes(fr->b + fr->l3 + 2, 2);
		fr->b[fr->l3 + 7] = (uint8_t)fz(256);                               /* hop limit */
	} else {
		fz_bytes(fr->b + fr->l3 + 4, 2);                                    /* id */
		fr->b[fr->l3 + 6] = fz(2) ? 0x40 : 0;                               /* DF or not */
		fr->b[fr->l3 + 8] = (uint8_t)fz(256);                               /* ttl */
	}
	fz_bytes(fr->b + fr->l4 + 14, 2);                                           /* window */
	fz_bytes(fr->b + fr->l4 + 18, 2);                                           /* urgent */
	fz_bytes(fr->b + fr->l4 + 20, (size_t)s.tcp_opts);                          /* options */
	/* Flags: FIN RST PSH URG ECE CWR at random; SYN and ACK as the class says. A SYN carries
	 * no FIN or RST: with either the kernel does not take it as a SYN, and neither does XDP
	 * (test_syn_with_rst_or_fin_is_judged_as_the_kernel_takes_it). */
	uint8_t fl = (uint8_t)(fz(256) & ~(syn ? 0x17u : 0x12u));

	/* ... and a segment of the no-SYN class that carries FIN or RST may carry SYN as well:
	 * not a SYN to the kernel, nor to XDP */
	if (!syn && (fl & 0x05) && fz(2))
		fl |= 0x02;
	fr->b[fr->l4 + 13] = (uint8_t)(fl | (syn ? 0x02 : 0) | (ack ? 0x10 : 0));
}

static uint16_t fz_other_port(void)
{
	uint16_t p;
	do
		p = (uint16_t)fz(65536);
	while (is_service_port(p));
	return p;
}

static void fz_make(struct fz_frame *fr, enum fuzz_class c)
{
	static const uint16_t eth[] = { 0x0800, 0x86dd, 0x8100 };
	static const uint16_t db_or_quiet[] = { 5432, 6000 };

	switch (c) {
	case FZ_RANDOM: {
		uint16_t e = eth[fz(3)];
		fr->len = 14 + fz(200);
		fr->l4 = fr->len; /* no known TCP header */
		fz_bytes(fr->b, fr->len);
		fr->b[12] = (uint8_t)(e >> 8), fr->b[13] = (uint8_t)e;
		break;
	}
	case FZ_OTHER_PORT:
		fz_tcp(fr, fz_other_port(), (int)fz(2), (int)fz(2));
		break;
	case FZ_NOT_TCP:
		fz_tcp(fr, db_or_quiet[fz(2)], 1, 0);
		if (fr->v6) {
			uint8_t nh;
			do
				nh = (uint8_t)fz(256);
			while (nh == IPPROTO_TCP || nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING ||
			       nh == IPPROTO_DSTOPTS);
			fr->b[fr->l3 + 6] = nh;
		} else if (fz(2)) {
			uint8_t pr;
			do
				pr = (uint8_t)fz(256);
			while (pr == IPPROTO_TCP);
			fr->b[fr->l3 + 9] = pr;
		} else {
			/* A fragment: MF set, or a non-zero offset. */
			uint16_t fo = fz(2) ? (uint16_t)(0x2000 | fz(0x2000)) : (uint16_t)(1 + fz(0x1fff));
			fr->b[fr->l3 + 6] = (uint8_t)(fo >> 8);
			fr->b[fr->l3 + 7] = (uint8_t)fo;
		}
		break;
	case FZ_MALFORMED: {
		fz_tcp(fr, db_or_quiet[fz(2)], 1, 0);
		uint8_t *ip = fr->b + fr->l3, *tcp = fr->b + fr->l4;
		switch (fz(5)) {
		case 0: /* cut anywhere before the end of the TCP header */
			fr->len = 14 + fz((uint32_t)(fr->l4 + 20 - 14));
			break;
		case 1: /* wrong IP version for the ethertype */
			ip[0] = (uint8_t)(((fr->v6 ? 6 : 4) + 1 + fz(15)) % 16 << 4 | (ip[0] & 0x0f));
			break;
		case 2: /* data offset below 5 */
			tcp[12] = (uint8_t)(fz(5) << 4 | (tcp[12] & 0x0f));
			break;
		case 3: /* the IP length leaves less than the TCP header's data offset */
			if (fr->v6) {
				/* 0 is not short: it is BIG TCP's "the rest of the frame" */
				uint16_t pl = (uint16_t)(1 + fz((uint32_t)((tcp[12] >> 4) * 4 - 1)));
				ip[4] = (uint8_t)(pl >> 8), ip[5] = (uint8_t)pl;
			} else {
				uint16_t tot = (uint16_t)(20 + fz((uint32_t)((tcp[12] >> 4) * 4)));
				ip[2] = (uint8_t)(tot >> 8), ip[3] = (uint8_t)tot;
			}
			break;
		default: /* v4: header length below 5, or a total length below it; v6: wrong version */
			if (fr->v6)
				ip[0] = (uint8_t)((fz(6) << 4) | (ip[0] & 0x0f));
			else if (fz(2))
				ip[0] = (uint8_t)(0x40 | fz(5));
			else
				ip[2] = 0, ip[3] = (uint8_t)(1 + fz(19)); /* 0: BIG TCP */
		}
		break;
	}
	case FZ_NO_SYN:
		fz_tcp(fr, db_or_quiet[fz(2)], 0, (int)fz(2));
		break;
	case FZ_SYN_ACK:
		fz_tcp(fr, db_or_quiet[fz(2)], 1, 1);
		break;
	case FZ_SYN_ADMITTED:
	case FZ_SYN_REFUSED:
		fz_tcp(fr, db_or_quiet[fz(2)], 1, 0);
		break;
	default:
		break;
	}
}

/* A failed expectation names the seed, the class and the frame, and dumps the frame. */
#define FZ_CHECK(cond, ...)                                                                  \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			print_error("seed %llu, class %s, frame %d: ", seed, fuzz_names[c], i); \
			print_error(__VA_ARGS__);                                            \
			for (size_t b_ = 0; b_ < fr.len; b_++)                               \
				print_error("%02x%s", fr.b[b_], b_ % 32 == 31 ? "\n" : "");  \
			print_error("\n");                                                   \
			fail();                                                              \
		}                                                                            \
	} while (0)

static unsigned long long sum_stat(struct fixture *f, size_t field)
{
	unsigned long long n = 0;

	for (int svc = 0; svc < f->cfg.n_services; svc++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct sluice_class_stats st = { 0 };
			assert_int_equal(maps_read_class_stats(&f->m, f->idx[svc], c, &st), 0);
			n += *(const uint64_t *)((const char *)&st + field);
		}
	return n;
}

static void set_all_thresholds(struct fixture *f, int limit)
{
	for (int i = 0; i < f->cfg.n_services; i++) {
		struct sluice_verdict v;

		verdict_default(&f->cfg.services[i], limit, &v);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			v.class_threshold[c] = limit;
		assert_int_equal(maps_write_verdict(&f->m, f->idx[i], &v), 0);
	}
}

static void test_fuzz_exact_verdicts(void **state)
{
	struct fixture *f = *state;
	int xdp_fd = bpf_program__fd(f->skel->progs.sluice_xdp_ingress);
	int tci_fd = bpf_program__fd(f->skel->progs.sluice_tc_ingress);
	int tce_fd = bpf_program__fd(f->skel->progs.sluice_tc_egress);
	const char *env = getenv("SLUICE_FUZZ_SEED");
	unsigned long long seed = env ? strtoull(env, NULL, 0) : 20251201ull;
	int tc_runs = 0;

	print_message("# fuzz seed %llu (SLUICE_FUZZ_SEED=%llu replays it)\n", seed, seed);
	fz_rng = sluice_rng_seed(seed);
	for (int c = 0; c < FZ_CLASSES; c++) {
		unsigned long long arrivals0 = sum_stat(f, offsetof(struct sluice_class_stats, arrivals));
		set_all_thresholds(f, c == FZ_SYN_REFUSED ? 0 : 1000000);
		for (int i = 0; i < 300; i++) {
			struct fz_frame fr;
			struct sluice_pkt_stats p0 = pstats(f);
			unsigned long long adm0 = sum_stat(f, offsetof(struct sluice_class_stats, admitted));
			unsigned long long rtx0 = sum_stat(f, offsetof(struct sluice_class_stats, retransmits));

			fz_make(&fr, (enum fuzz_class)c);
			set_heartbeat(f, 0); /* the verdicts apply: no fail-open during the run */
			struct run r = run_prog(xdp_fd, fr.b, fr.len);
			int port = fr.len >= fr.l4 + 4 ? fr.b[fr.l4 + 2] << 8 | fr.b[fr.l4 + 3] : 0;
			int want = XDP_PASS;

			if (c == FZ_SYN_REFUSED)
				want = port == 6000 ? XDP_DROP : XDP_TX; /* quiet drops, db answers RST */
			FZ_CHECK(r.ret == want, "verdict %d, want %d\n", r.ret, want);
			FZ_CHECK(want != XDP_PASS || harness_unchanged(&r), "passed, but altered\n");
			struct sluice_pkt_stats p1 = pstats(f);
			unsigned long long adm = sum_stat(f, offsetof(struct sluice_class_stats, admitted)) - adm0;
			unsigned long long rtx = sum_stat(f, offsetof(struct sluice_class_stats, retransmits)) - rtx0;
			/* Random bytes may or may not parse; every other class is known. */
			FZ_CHECK(c == FZ_RANDOM ? p1.malformed - p0.malformed <= 1 :
				 p1.malformed - p0.malformed == (c == FZ_MALFORMED), "malformed +%llu\n",
				 p1.malformed - p0.malformed);
			/* Admitted, or (a rare 4-tuple and seq drawn twice) a resent SYN of one. */
			FZ_CHECK(c == FZ_SYN_ADMITTED ? adm + rtx == 1 : adm == 0, "admitted +%llu\n", adm);
			if (c == FZ_SYN_REFUSED && want == XDP_TX) {
				const uint8_t *tcp = r.out + fr.l4;
				FZ_CHECK(r.out_len == fr.l4 + 20, "RST of %u bytes\n", r.out_len);
				FZ_CHECK((tcp[13] & 0x3f) == 0x14, "RST flags 0x%x\n", tcp[13]);
				FZ_CHECK(!memcmp(tcp, fr.b + fr.l4 + 2, 2), "RST from another port\n");
				FZ_CHECK(p1.rst_sent - p0.rst_sent == 1, "rst_sent not counted\n");
			}

			/* Neither TC program alters a frame it lets through (no http service here).
			 * BPF_PROG_TEST_RUN refuses skbs too short for the IP header they claim
			 * (EINVAL before the program runs). */
			int fds[2] = { tci_fd, tce_fd };
			for (int k = 0; k < 2; k++) {
				struct __sk_buff ctx = { .ifindex = 1 };
				struct run t = harness_run(fds[k], fr.b, fr.len, k ? NULL : &ctx);
				if (t.err == -EINVAL && fr.len < 14 + 40)
					continue;
				assert_int_equal(t.err, 0);
				assert_int_equal(t.ret, TC_ACT_UNSPEC);
				assert_true(harness_unchanged(&t));
				tc_runs++;
			}
			/* No handshake ever completes here (no SYN-ACK is sent back): whatever the
			 * frame, no flow exists and no slot is held. */
			long long held = 0;
			for (int sv = 0; sv < f->cfg.n_services; sv++)
				held += inflight_total(f, sv);
			FZ_CHECK(flow_count(f) == 0 && held == 0, "%d flows, %lld in flight\n",
				 flow_count(f), held);
		}
		/* Only SYNs that reach a service's classification are arrivals. */
		unsigned long long arrivals = sum_stat(f, offsetof(struct sluice_class_stats, arrivals)) - arrivals0;
		if (c == FZ_SYN_ADMITTED || c == FZ_SYN_REFUSED)
			assert_int_equal(arrivals, 300);
		else
			assert_int_equal(arrivals, 0);
	}
	assert_true(tc_runs > FZ_CLASSES * 300); /* most frames went through TC as well */
}

/* ---- the half-open window in real time ----
 * A service's half-open counts are current for SLUICE_HALFOPEN_TIMEOUT_NS (1 s) after their
 * window started, on the kernel's clock (bpf_ktime_get_ns, CLOCK_MONOTONIC), which a test
 * cannot set. An assert that a count is held, or was given back, or that a verdict it weighs
 * in stands, says something only while that window is current: a run slower than that (a
 * loaded machine) proves nothing either way. Such a run is not asserted on; it is run again
 * from a fixture made afresh, and only a test none of whose runs was quick enough fails. */
#define WINDOW_MARGIN_NS 500000000ull  /* half the window: well clear of its end */
#define WINDOW_TRIES     5

static jmp_buf *window_late;           /* while within_window runs a scenario */
static unsigned long long window_t0;   /* when that run started: before its first SYN */

/* v, read by a scenario that within_window runs, to be asserted on: when more than
 * WINDOW_MARGIN_NS passed between the run's start and now (v was read before), the window
 * v depends on may have lapsed, and the run is given up for another. */
static long long in_window(long long v)
{
	if (!window_late)
		fail_msg("in_window() outside within_window()");
	if (monotonic_ns() - window_t0 > WINDOW_MARGIN_NS)
		longjmp(*window_late, 1);
	return v;
}

/* Runs scenario on the fixture in *state; when a run reads a value too late (in_window), again
 * on a fixture made afresh by setup_fn, up to WINDOW_TRIES runs. A fresh fixture's windows
 * lapsed long ago, so each run's first SYN of a service starts that service's window, after
 * window_t0: whatever is read within WINDOW_MARGIN_NS of window_t0 is read in that window. */
static void within_window(void **state, int (*setup_fn)(void **),
			  void (*scenario)(struct fixture *f))
{
	jmp_buf late;

	for (volatile int run = 0; run < WINDOW_TRIES; run++) {
		if (run) {
			harness_teardown(state);
			assert_int_equal(setup_fn(state), 0);
		}
		if (!setjmp(late)) {
			window_late = &late;
			window_t0 = monotonic_ns();
			scenario(*state);
			window_late = NULL;
			return;
		}
		window_late = NULL;
		print_message("# run %d of %d read past %llu ms: run again afresh\n", run + 1,
			      WINDOW_TRIES, WINDOW_MARGIN_NS / 1000000);
	}
	fail_msg("none of %d runs read its half-open counts within %llu ms of its start",
		 WINDOW_TRIES, WINDOW_MARGIN_NS / 1000000);
}

/* ---- admission ---- */

static void test_syn_admitted_counted_once(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 40001, 5432);

	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	assert_int_equal(xdp(f, &s).ret, XDP_PASS); /* retransmitted SYN */
	assert_int_equal(inflight_total(f, 0), 0);  /* no slot before the handshake completes */
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 0).admitted, 1);
	assert_int_equal(stats(f, 0, 0).retransmits, 1);

	/* The admitted connection's packets, both ways, go through as they are (xdp() and
	 * tc_egress() compare every passed packet with the one sent, byte for byte). The
	 * client's ACK of the SYN-ACK is lost: its first data, acknowledging the server's ISN,
	 * completes the handshake instead. */
	struct pkt_spec synack = { .src = SERVER4, .dst = "198.18.1.2", .sport = 5432, .dport = 40001,
				   .seq = 7, .ack = s.seq + 1, .syn = 1, .ackf = 1, .tcp_opts = 20 };
	tc_egress(f, &synack);
	assert_int_equal(inflight_total(f, 0), 0);
	struct pkt_spec data = s;
	data.syn = 0, data.ackf = 1, data.psh = 1, data.tcp_opts = 12;
	data.seq = s.seq + 1, data.ack = 8, data.payload = "SELECT 1;", data.payload_len = 9;
	assert_int_equal(xdp(f, &data).ret, XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(xdp(f, &data).ret, XDP_PASS); /* the same data again: still one unit */
	struct pkt_spec reply = synack;
	reply.syn = 0, reply.psh = 1, reply.seq = 8, reply.ack = data.seq + 9;
	reply.payload = "one row", reply.payload_len = 7;
	tc_egress(f, &reply);
	assert_int_equal(inflight_total(f, 0), 1);
	/* A late copy of the SYN after the handshake completed: the same unit, counted as a
	 * retransmit again, not a new arrival. */
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 0).retransmits, 2);
	assert_int_equal(inflight_total(f, 0), 1);
}

/* The SYN path knows a late copy of a completed handshake's SYN by the mark its promotion
 * left in the SYN's slot, and only the flow standing confirms it: once the connection is over,
 * the same 4-tuple and ISN again (a replay, or a client that reuses both) is a new SYN,
 * decided and counted as one, never let through as a copy. */
static long long halfopen_count(struct fixture *f, int svc);

static void syn_copy_after_flow_end_is_new(struct fixture *f)
{
	struct pkt_spec s = syn4("198.18.1.2", 40007, 5432);

	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	struct pkt_spec synack = synack_of(&s);
	tc_egress(f, &synack);
	struct pkt_spec ack = s;
	ack.syn = 0, ack.ackf = 1, ack.tcp_opts = 0, ack.seq = s.seq + 1, ack.ack = synack.seq + 1;
	assert_int_equal(xdp(f, &ack).ret, XDP_PASS);
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(xdp(f, &s).ret, XDP_PASS); /* a late copy: the same unit */
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 0).retransmits, 1);

	struct pkt_spec rst = ack;
	rst.rst = 1, rst.ackf = 0, rst.ack = 0;
	assert_int_equal(xdp(f, &rst).ret, XDP_PASS);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(inflight_total(f, 0), 0);

	assert_int_equal(xdp(f, &s).ret, XDP_PASS); /* the flow is gone: a new SYN */
	assert_int_equal(stats(f, 0, 0).arrivals, 2);
	assert_int_equal(stats(f, 0, 0).admitted, 2);
	assert_int_equal(stats(f, 0, 0).retransmits, 1);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
}

static void test_syn_copy_after_flow_end_is_new(void **state)
{
	within_window(state, setup, syn_copy_after_flow_end_is_new);
}

static void test_headroom_rejects_l3_first_and_rst_bytes(void **state)
{
	struct fixture *f = *state;
	/* limit 4: L3 (default) may use 2 slots, L0 (198.18.1/24) all 4. */
	for (uint16_t p = 1; p <= 2; p++) {
		struct pkt_spec s = syn4("203.0.113.9", p, 5432);
		assert_int_equal(connect_(f, &s), XDP_PASS);
	}
	struct pkt_spec s = syn4("203.0.113.9", 3, 5432);
	s.seq = 0xfffffff0u; /* ack must wrap */
	uint8_t in[512];
	size_t len = build_pkt(in, &s);
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), in, len);

	assert_int_equal(r.ret, XDP_TX);
	assert_int_equal(stats(f, 0, 3).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(pstats(f).rst_sent, 1);

	/* The reply, field by field. */
	assert_int_equal(r.out_len, 14 + 20 + 20);
	const struct ethhdr *eth = (const void *)r.out;
	const struct iphdr *ip = (const void *)(r.out + 14);
	const struct tcphdr *tcp = (const void *)(r.out + 34);
	const struct iphdr *oip = (const void *)(in + 14);
	const struct tcphdr *otcp = (const void *)(in + 34);
	assert_memory_equal(eth->h_dest, MAC_CLIENT, 6);
	assert_memory_equal(eth->h_source, MAC_SERVER, 6);
	assert_int_equal(ntohs(eth->h_proto), ETH_P_IP);
	assert_int_equal(ip->version, 4);
	assert_int_equal(ip->ihl, 5);
	assert_int_equal(ntohs(ip->tot_len), 40);
	assert_int_equal(ip->protocol, IPPROTO_TCP);
	assert_int_equal(ip->saddr, oip->daddr);
	assert_int_equal(ip->daddr, oip->saddr);
	assert_int_equal(csum_finish(csum_add(0, ip, 20)), 0);
	assert_int_equal(tcp->source, otcp->dest);
	assert_int_equal(tcp->dest, otcp->source);
	assert_int_equal(ntohl(tcp->seq), 0);
	assert_int_equal(ntohl(tcp->ack_seq), 0xfffffff1u);
	assert_int_equal(tcp->doff, 5);
	assert_true(tcp->rst && tcp->ack);
	assert_false(tcp->syn || tcp->fin || tcp->psh);
	assert_int_equal(tcp_verify(ip, 0, tcp, 20), 0);

	/* L0 still gets in up to the full limit. */
	struct pkt_spec l0 = syn4("198.18.1.7", 10, 5432);
	assert_int_equal(connect_(f, &l0), XDP_PASS);
	l0.sport = 11;
	assert_int_equal(connect_(f, &l0), XDP_PASS);
	l0.sport = 12;
	assert_int_equal(connect_(f, &l0), XDP_TX); /* 5th: over the limit even for L0 */
	assert_int_equal(stats(f, 0, 0).admitted, 2);
	assert_int_equal(inflight_total(f, 0), 4);

	/* A retransmit of the refused SYN is seen as one (retry-storm signal). */
	assert_int_equal(xdp(f, &s).ret, XDP_TX);
	assert_int_equal(stats(f, 0, 3).retransmits, 1);
}

/* A refused SYN with IPv4 options or IPv6 extension headers: RST in the fixed headers only,
 * never longer than the SYN, checksums right. */
static void check_rst_without_options(const uint8_t *in, size_t in_len, const struct run *r,
				      int v6, uint32_t syn_seq)
{
	size_t l3 = v6 ? 40 : 20;
	const void *ip = r->out + 14;
	const struct tcphdr *tcp = (const void *)(r->out + 14 + l3);

	assert_int_equal(r->ret, XDP_TX);
	assert_int_equal(r->out_len, 14 + l3 + 20);
	assert_true(r->out_len <= in_len);
	if (v6) {
		const struct ipv6hdr *ip6 = ip, *oip6 = (const void *)(in + 14);
		assert_int_equal(ip6->nexthdr, IPPROTO_TCP);
		assert_int_equal(ntohs(ip6->payload_len), 20);
		assert_memory_equal(&ip6->daddr, &oip6->saddr, 16);
	} else {
		const struct iphdr *ip4 = ip, *oip = (const void *)(in + 14);
		assert_int_equal(ip4->ihl, 5);
		assert_int_equal(ntohs(ip4->tot_len), 40);
		assert_int_equal(ip4->daddr, oip->saddr);
		assert_int_equal(ntohs(ip4->frag_off), 0x4000);
		assert_int_equal(csum_finish(csum_add(0, ip4, 20)), 0);
	}
	assert_int_equal(ntohs(tcp->source), 5432);
	assert_int_equal(ntohl(tcp->ack_seq), syn_seq + 1);
	assert_true(tcp->rst && tcp->ack);
	assert_int_equal(tcp->doff, 5);
	assert_int_equal(tcp_verify(ip, v6, tcp, 20), 0);
}

/* Packets with IPv4 options or IPv6 extension headers (hop-by-hop, destination options,
 * routing) are decided like any other: admitted ones hold their slot, refused ones are
 * answered with an RST. Later fragments carry no TCP header and pass; a chain of more
 * extension headers than the parser follows is dropped. (First fragments:
 * test_first_fragments_judged_or_dropped.) */
static void test_ip_options_and_ext_headers_decided(void **state)
{
	struct fixture *f = *state;
	/* db: limit 4, the default class L3 may use 2. */
	struct pkt_spec a4 = syn4("203.0.113.9", 1, 5432);
	struct pkt_spec a6 = { .v6 = 1, .src = "2001:db8:9::7", .dst = SERVER6, .sport = 2,
			       .dport = 5432, .seq = 50, .syn = 1, .tcp_opts = 20,
			       .ext = "HDR" };
	a4.ip_opts = 8;
	assert_int_equal(connect_(f, &a4), XDP_PASS);
	assert_int_equal(connect_(f, &a6), XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 2);
	assert_int_equal(busy_total(f, 0), 2);
	assert_int_equal(flow_count(f), 2);

	uint8_t in[512];
	struct pkt_spec r4 = syn4("203.0.113.9", 3, 5432), r6 = a6;
	r4.ip_opts = 40; /* the most an IPv4 header holds */
	size_t len = build_pkt(in, &r4);
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), in, len);
	check_rst_without_options(in, len, &r, 0, r4.seq);
	r6.sport = 4;
	len = build_pkt(in, &r6);
	r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), in, len);
	check_rst_without_options(in, len, &r, 1, r6.seq);
	assert_int_equal(stats(f, 0, 3).rejected[SLUICE_REJ_HEADROOM], 2);
	assert_int_equal(pstats(f).rst_sent, 2);
	assert_int_equal(pstats(f).reply_failed, 0);

	/* Later fragments: no TCP header to judge; passed, counted nowhere. */
	unsigned long long arrivals = stats(f, 0, 3).arrivals;
	struct pkt_spec later4 = syn4("203.0.113.9", 5, 5432), later6 = r6;
	later4.frag = 2;
	later6.sport = 6, later6.ext = "F", later6.frag = 2;
	assert_int_equal(xdp(f, &later4).ret, XDP_PASS);
	assert_int_equal(xdp(f, &later6).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 3).arrivals, arrivals);
	/* More extension headers than the parser follows: dropped, not passed unjudged. */
	struct pkt_spec deep = r6;
	deep.sport = 7, deep.ext = "HDDDR", deep.frag = 0;
	assert_int_equal(xdp(f, &deep).ret, XDP_DROP);
	deep.ext = "HDDR"; /* four are followed */
	assert_int_equal(xdp(f, &deep).ret, XDP_TX);
	assert_int_equal(inflight_total(f, 0), 2);
}

/* A first fragment of a TCP segment (more fragments to come) is judged like any segment when
 * it holds the TCP header and the first bytes of data: a SYN so split is admitted or refused
 * as any. One too short to judge -- the TCP header cut, or no data past it -- is dropped,
 * IPv4 and IPv6 alike: passed, the host would put the segment back together from the later
 * fragments and take a SYN (or a request) sluice never judged, as often as a client likes. */
static void test_first_fragments_judged_or_dropped(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[512];

	/* the whole header and 8 bytes of data (a SYN with data, split): judged, admitted */
	struct pkt_spec ok4 = syn4("198.18.1.2", 21, 5432);
	ok4.frag = 1, ok4.payload = "12345678", ok4.payload_len = 8;
	assert_int_equal(xdp(f, &ok4).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	struct pkt_spec ok6 = { .v6 = 1, .src = "2001:db8:9::7", .dst = SERVER6, .sport = 22,
				.dport = 5432, .seq = 50, .syn = 1, .ext = "F", .frag = 1,
				.payload = "12345678", .payload_len = 8 };
	assert_int_equal(xdp(f, &ok6).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 3).arrivals, 1);

	/* the header and no data, or fewer than 8 bytes: dropped, judged nowhere */
	unsigned long long malformed = pstats(f).malformed;
	struct pkt_spec bare4 = ok4, bare6 = ok6;
	bare4.sport = 23, bare4.payload_len = 0;
	bare6.sport = 24, bare6.payload_len = 4;
	assert_int_equal(xdp(f, &bare4).ret, XDP_DROP);
	assert_int_equal(xdp(f, &bare6).ret, XDP_DROP);
	assert_int_equal(tc_ingress_ret(f, &bare4), TC_ACT_SHOT);
	/* the TCP header itself cut at 8 bytes (ports and sequence number only) */
	struct pkt_spec cut = ok4;
	cut.sport = 25, cut.payload_len = 0;
	size_t len = build_pkt(buf, &cut);
	struct iphdr *ip = (struct iphdr *)(buf + 14);
	ip->tot_len = htons(20 + 8);
	len = 14 + 20 + 8;
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf, len);
	assert_int_equal(r.ret, XDP_DROP);
	assert_int_equal(pstats(f).malformed, malformed + 3);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 3).arrivals, 1);
	/* a segment that is not a fragment is judged as before, data or not */
	struct pkt_spec whole = ok4;
	whole.sport = 26, whole.frag = 0, whole.payload_len = 0;
	assert_int_equal(xdp(f, &whole).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).arrivals, 2);
}

/* s (built without extension headers) with `n` destination-options headers of 2 KiB each
 * (PadN options) between its IPv6 header and its TCP header, and `data` zero bytes of TCP data
 * after what s carries, into big: the frame's length. */
static size_t with_long_dstopts(uint8_t *big, size_t cap, const struct pkt_spec *s, int n,
				size_t data)
{
	uint8_t small[512];
	size_t len = build_pkt(small, s), ext = (size_t)n * 2048, l4 = 14 + 40;
	struct ipv6hdr *ip6;

	assert_true(len + ext + data <= cap);
	memcpy(big, small, l4);
	for (int i = 0; i < n; i++) {
		uint8_t *h = big + l4 + (size_t)i * 2048;

		h[0] = i + 1 < n ? IPPROTO_DSTOPTS : IPPROTO_TCP;
		h[1] = 255;                                    /* (255 + 1) * 8 bytes */
		for (size_t k = 2; k < 2048;) {
			size_t pad = 2048 - k - 2 > 255 ? 255 : 2048 - k - 2;

			h[k] = 1, h[k + 1] = (uint8_t)pad;     /* PadN */
			memset(h + k + 2, 0, pad);
			k += pad + 2;
		}
	}
	memcpy(big + l4 + ext, small + l4, len - l4);
	memset(big + len + ext, 0, data);
	ip6 = (struct ipv6hdr *)(big + 14);
	ip6->nexthdr = n ? IPPROTO_DSTOPTS : IPPROTO_TCP;
	ip6->payload_len = htons((uint16_t)(len - l4 + ext + data));
	return len + ext + data;
}

/* One run of XDP on a frame longer than a page: BPF_PROG_TEST_RUN puts what does not fit in
 * the first buffer (about 3.5 KiB) into fragments, as a NIC's multi-buffer receive does. */
static int xdp_big(struct fixture *f, const uint8_t *frame, size_t len)
{
	static uint8_t out[16384];
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = (uint32_t)len,
		    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);

	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(f->skel->progs.sluice_xdp_ingress),
						&o), 0);
	return (int)o.retval;
}

/* A SYN whose extension headers put its TCP header past XDP's first buffer (multi-buffer
 * receive, jumbo frames) cannot be judged there: dropped and counted malformed, not passed
 * unjudged (passed, a client could pad its SYNs past the shedding at will). A frame as long
 * whose headers are in the first buffer is judged as ever. */
static void test_headers_past_first_buffer_dropped(void **state)
{
	struct fixture *f = *state;
	static uint8_t big[8192];
	struct pkt_spec s = { .v6 = 1, .src = "2001:db8:9::7", .dst = SERVER6, .sport = 31,
			      .dport = 5432, .seq = 50, .syn = 1, .tcp_opts = 20 };
	unsigned long long malformed = pstats(f).malformed;
	size_t len = with_long_dstopts(big, sizeof(big), &s, 2, 0);

	assert_true(len > 4096);
	assert_int_equal(xdp_big(f, big, len), XDP_DROP);
	assert_int_equal(pstats(f).malformed, malformed + 1);
	assert_int_equal(stats(f, 0, 3).arrivals, 0);
	/* three: the third extension header itself starts past the first buffer */
	len = with_long_dstopts(big, sizeof(big), &s, 3, 0);
	assert_int_equal(xdp_big(f, big, len), XDP_DROP);
	assert_int_equal(pstats(f).malformed, malformed + 2);
	assert_int_equal(stats(f, 0, 3).arrivals, 0);

	/* one such header, then 3000 bytes of data: the TCP header in the first buffer */
	s.sport = 32;
	len = with_long_dstopts(big, sizeof(big), &s, 1, 3000);
	assert_true(len > 4096);
	assert_int_equal(xdp_big(f, big, len), XDP_PASS);
	assert_int_equal(stats(f, 0, 3).arrivals, 1);
	assert_int_equal(stats(f, 0, 3).admitted, 1);
	assert_int_equal(pstats(f).malformed, malformed + 2);
}

static void test_v6_vlan_dscp_classified_and_rst(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = { .v6 = 1, .vlan = 42, .src = "2001:db8:9::5", .dst = SERVER6,
			      .sport = 5555, .dport = 5432, .seq = 77, .syn = 1, .dscp = 46,
			      .tcp_opts = 20 };

	/* DSCP 46 -> L1: threshold 90% of 4 = 3. */
	for (uint16_t p = 0; p < 3; p++) {
		s.sport = 5555 + p;
		assert_int_equal(connect_(f, &s), XDP_PASS);
	}
	assert_int_equal(inflight_total(f, 0), 3);
	assert_int_equal(stats(f, 0, 1).admitted, 3);
	s.sport = 6000;
	uint8_t in[512];
	size_t len = build_pkt(in, &s);
	struct run r = run_prog(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), in, len);
	assert_int_equal(r.ret, XDP_TX);
	assert_int_equal(r.out_len, 14 + 4 + 40 + 20);
	assert_int_equal(r.out[12], 0x81); /* tag kept */
	assert_int_equal(r.out[15], 42);
	const struct ipv6hdr *ip6 = (const void *)(r.out + 18);
	const struct ipv6hdr *oip6 = (const void *)(in + 18);
	const struct tcphdr *tcp = (const void *)(r.out + 58);
	assert_memory_equal(&ip6->saddr, &oip6->daddr, 16);
	assert_memory_equal(&ip6->daddr, &oip6->saddr, 16);
	assert_int_equal(ntohs(ip6->payload_len), 20);
	assert_int_equal(ntohs(tcp->source), 5432);
	assert_int_equal(ntohs(tcp->dest), 6000);
	assert_int_equal(ntohl(tcp->ack_seq), 78);
	assert_true(tcp->rst && tcp->ack);
	assert_int_equal(tcp_verify(ip6, 1, tcp, 20), 0);

	/* v6 source rule: 2001:db8:1::/48 is L0. */
	struct pkt_spec l0 = s;
	l0.src = "2001:db8:1::9";
	l0.dscp = 0;
	assert_int_equal(xdp(f, &l0).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 1);

	/* DSCP 46 from outside trust_from is ignored: the default class (L3), v6 and v4; each
	 * SYN counts as a priority mark ignored. */
	struct pkt_spec un6 = s, un4 = syn4("203.0.113.40", 6001, 5432);
	un6.src = "2001:db8:a::5", un6.sport = 6001;
	un4.dscp = 46;
	unsigned long long l1 = stats(f, 0, 1).arrivals, l3 = stats(f, 0, 3).arrivals;
	unsigned long long marks = untrusted(f, 0);
	xdp(f, &un6);
	xdp(f, &un4);
	assert_int_equal(stats(f, 0, 1).arrivals, l1);
	assert_int_equal(stats(f, 0, 3).arrivals, l3 + 2);
	assert_int_equal(untrusted(f, 0), marks + 2);
	/* ... and counts from a trusted IPv4 source, not counted as ignored. */
	struct pkt_spec tr4 = syn4("192.0.2.40", 6002, 5432);
	tr4.dscp = 46;
	xdp(f, &tr4);
	assert_int_equal(stats(f, 0, 1).arrivals, l1 + 1);
	assert_int_equal(untrusted(f, 0), marks + 2);
	/* A source rule of lower order decides before the mark could: not counted. */
	struct pkt_spec src0 = syn4("198.18.1.40", 6003, 5432);
	src0.dscp = 46;
	xdp(f, &src0);
	assert_int_equal(untrusted(f, 0), marks + 2);
	/* No mark (DSCP 0): not counted. */
	struct pkt_spec plain = syn4("203.0.113.41", 6004, 5432);
	xdp(f, &plain);
	assert_int_equal(untrusted(f, 0), marks + 2);
}

static void test_first_matching_source_rule_wins(void **state)
{
	struct fixture *f = *state;
	/* 198.18.1.0/24 (rule 0, L0) is inside 198.18.0.0/15 (rule 1, L2): rule 0 wins. */
	struct pkt_spec a = syn4("198.18.1.50", 1, 5432), b = syn4("198.18.7.50", 2, 5432);

	xdp(f, &a);
	xdp(f, &b);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 2).arrivals, 1);
}

/* Prefixes of one family only: IPv6 ::/0 covers every IPv6 client and no IPv4 one, IPv4
 * 0.0.0.0/0 every IPv4 client and no IPv6 one, as source rules and as trust_from. */
static const char *FAMILY_CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: six\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 100 }\n"
	"    default_class: L3\n"
	"    trust_from: [\"::/0\"]\n"
	"    classify:\n"
	"      - { source: \"::/0\", class: L2 }\n"
	"      - { source: 198.18.0.0/15, class: L0 }\n"
	"      - { dscp: 46, class: L1 }\n"
	"  - name: four\n"
	"    port: 6000\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 100 }\n"
	"    default_class: L3\n"
	"    trust_from: [0.0.0.0/0]\n"
	"    classify:\n"
	"      - { source: 0.0.0.0/0, class: L2 }\n"
	"      - { source: 2001:db8:1::/48, class: L0 }\n"
	"      - { dscp: 46, class: L1 }\n";

static int setup_families(void **state)
{
	return (*state = harness_shared_fixture(FAMILY_CONFIG, 0, 1000000000ull)) ? 0 : -1;
}

static void test_prefix_matches_only_its_own_family(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec v6 = { .v6 = 1, .src = "2001:db8:a::5", .dst = SERVER6, .sport = 7000,
			       .dport = 5432, .seq = 1, .syn = 1, .dscp = 46, .tcp_opts = 20 };
	struct pkt_spec v4 = syn4("203.0.113.9", 7001, 5432), v4rule = syn4("198.18.3.3", 7002, 5432);
	unsigned long long marks = untrusted(f, 0);

	/* six: ::/0 (rule 0) classes an IPv6 client L2; an IPv4 one it leaves to the rules
	 * after it -- 198.18.0.0/15 (rule 1) is not shadowed by it -- and its DSCP mark is not
	 * trusted: the default class, the mark counted as ignored. */
	v4.dscp = 46;
	xdp(f, &v6);
	xdp(f, &v4);
	xdp(f, &v4rule);
	assert_int_equal(stats(f, 0, 2).arrivals, 1);
	assert_int_equal(stats(f, 0, 3).arrivals, 1);
	assert_int_equal(stats(f, 0, 0).arrivals, 1);
	assert_int_equal(stats(f, 0, 1).arrivals, 0);
	assert_int_equal(untrusted(f, 0), marks + 1);

	/* four: the mirror image. */
	marks = untrusted(f, 1);
	v6.dport = v4.dport = 6000;
	v6.sport = 7003;
	v6.src = "2001:db8:1::7";                             /* rule 1: L0 */
	xdp(f, &v6);
	v6.sport = 7004;
	v6.src = "2001:db8:a::6";                             /* no rule, mark untrusted: L3 */
	xdp(f, &v6);
	xdp(f, &v4);                                          /* rule 0: L2 */
	assert_int_equal(stats(f, 1, 0).arrivals, 1);
	assert_int_equal(stats(f, 1, 3).arrivals, 1);
	assert_int_equal(stats(f, 1, 2).arrivals, 1);
	assert_int_equal(stats(f, 1, 1).arrivals, 0);
	assert_int_equal(untrusted(f, 1), marks + 1);
}

static void test_drop_mode(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 1, 6000), b = syn4("198.18.1.2", 2, 6000);

	assert_int_equal(connect_(f, &a), XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_DROP);
	assert_int_equal(stats(f, 1, 0).rejected[SLUICE_REJ_HEADROOM], 1);
}

static void test_priority_count_never_blocks_higher_class(void **state)
{
	struct fixture *f = *state;
	struct sluice_verdict v;

	verdict_default(&f->cfg.services[0], 4, &v);
	v.flags = SLUICE_VERDICT_PRIORITY_COUNT;
	v.class_threshold[0] = 4, v.class_threshold[1] = 3;
	v.class_threshold[2] = 3, v.class_threshold[3] = 2;
	maps_write_verdict(&f->m, f->idx[0], &v);
	/* L3 fills its 2; a third is refused (L0..L3 in-flight 2 >= 2). */
	for (uint16_t p = 1; p <= 3; p++) {
		struct pkt_spec s = syn4("203.0.113.9", p, 5432);
		assert_int_equal(connect_(f, &s), p <= 2 ? XDP_PASS : XDP_TX);
	}
	/* L0 is compared with L0's own in-flight only: all 4 get in although the service's
	 * total is already 2 -- lower classes never hold a slot L0 needs. */
	for (uint16_t p = 10; p < 15; p++) {
		struct pkt_spec s = syn4("198.18.1.7", p, 5432);
		assert_int_equal(connect_(f, &s), p < 14 ? XDP_PASS : XDP_TX);
	}
	assert_int_equal(inflight_total(f, 0), 6);
	/* L3 now sees L0's 4 as well: still refused; L2 (198.18.7.x) too (4+0+... >= 3). */
	struct pkt_spec l3 = syn4("203.0.113.9", 20, 5432), l2 = syn4("198.18.7.1", 21, 5432);
	assert_int_equal(xdp(f, &l3).ret, XDP_TX);
	assert_int_equal(xdp(f, &l2).ret, XDP_TX);
	assert_int_equal(stats(f, 0, 2).rejected[SLUICE_REJ_HEADROOM], 1);
}

static void test_client_concurrency_cap(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 1, 7000), b = syn4("198.18.1.2", 2, 7000);
	struct pkt_spec c = syn4("198.18.1.2", 3, 7000), other = syn4("198.18.1.3", 4, 7000);

	/* SYNs forged in 198.18.1.2's name hold none of its two connections. */
	for (uint16_t p = 100; p < 110; p++) {
		struct pkt_spec forged = syn4("198.18.1.2", p, 7000);
		assert_int_equal(xdp(f, &forged).ret, XDP_PASS);
	}
	assert_int_equal(connect_(f, &a), XDP_PASS);
	assert_int_equal(connect_(f, &b), XDP_PASS);
	assert_int_equal(connect_(f, &c), XDP_TX);      /* third of one client: refused */
	assert_int_equal(connect_(f, &other), XDP_PASS); /* another client is not */
	assert_int_equal(stats(f, 2, 0).rejected[SLUICE_REJ_CLIENT_LIMIT], 1);
	assert_int_equal(inflight_total(f, 2), 3);
	/* One of the client's connections ends: it may connect again. */
	answered_then_fin(f, &a);
	c.sport = 5;
	assert_int_equal(connect_(f, &c), XDP_PASS);
}

static struct sluice_conn_cap conn_cap_of(struct fixture *f, int svc)
{
	struct sluice_conn_cap cc;
	assert_int_equal(maps_read_conn_cap(&f->m, f->idx[svc], &cc), 0);
	return cc;
}

/* The open-connection cap (max_connections 4, default headroom: L3 50 %): idle L3 holders
 * fill their own share (2) and no more, L0 connects up to the cap, SYNs forged in L3's name
 * never hold L0 back, refusals count under their own reason, and the open count returns to 0. */
static void test_open_connection_cap(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec l3[3], l0[3];

	for (int i = 0; i < 3; i++) {
		l3[i] = syn4("203.0.113.9", (uint16_t)(1 + i), 7002);
		l0[i] = syn4("198.18.1.7", (uint16_t)(10 + i), 7002);
	}
	assert_int_equal(conn_cap_of(f, 4).threshold[0], 4);
	assert_int_equal(conn_cap_of(f, 4).threshold[3], 2);
	assert_int_equal(connect_idle(f, &l3[0]), XDP_PASS);
	assert_int_equal(connect_idle(f, &l3[1]), XDP_PASS);
	assert_int_equal(busy_total(f, 4), 0);           /* idle: nothing busy ... */
	assert_int_equal(connect_idle(f, &l3[2]), XDP_TX); /* ... but L3's share is open */
	for (uint16_t p = 100; p < 110; p++) {            /* forged L3 SYNs, never completed */
		struct pkt_spec forged = syn4("203.0.113.9", p, 7002);
		assert_int_equal(xdp(f, &forged).ret, XDP_TX);
	}
	assert_int_equal(connect_idle(f, &l0[0]), XDP_PASS);
	assert_int_equal(connect_idle(f, &l0[1]), XDP_PASS);
	assert_int_equal(connect_idle(f, &l0[2]), XDP_TX); /* the cap itself */
	assert_int_equal(inflight_total(f, 4), 4);
	assert_int_equal(conn_cap_of(f, 4).rejected[3], 11);
	assert_int_equal(conn_cap_of(f, 4).rejected[0], 1);
	for (int r = 0; r < SLUICE_REJ_REASONS; r++)
		assert_int_equal(stats(f, 4, 3).rejected[r], 0);
	/* An L3 connection ends: L3 is still at its share with L0's two counted, L0 gets in. */
	struct pkt_spec fin = idle_fin(&l3[0]);
	xdp(f, &fin);
	l3[2].sport = 4;
	assert_int_equal(connect_idle(f, &l3[2]), XDP_TX);
	l0[2].sport = 13;
	assert_int_equal(connect_idle(f, &l0[2]), XDP_PASS);
	/* Every connection ends: the count is exact. */
	struct pkt_spec fins[] = { idle_fin(&l3[1]), idle_fin(&l0[0]), idle_fin(&l0[1]),
				   idle_fin(&l0[2]) };
	for (size_t i = 0; i < sizeof(fins) / sizeof(fins[0]); i++)
		xdp(f, &fins[i]);
	assert_int_equal(inflight_total(f, 4), 0);
	l3[2].sport = 5;
	assert_int_equal(connect_idle(f, &l3[2]), XDP_PASS);
}

/* Forged SYNs, never completed, count against a connection cap's lower classes as half-open
 * handshakes, but no more than a quarter of max_connections: a blind flood from inside the L0
 * prefix (whose SYNs the cap never refuses) cannot lock L1..L3 out. (With the half-open count
 * bounded by the class's own threshold instead, 40 forged SYNs refused every L3 connection:
 * XDP_TX for the first.) */
static void test_forged_syns_hold_a_quarter_of_the_connection_cap(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec l3a = syn4("203.0.113.9", 1, 7002), l3b = syn4("203.0.113.9", 2, 7002);
	char src[40][20];

	for (int i = 0; i < 40; i++) {
		snprintf(src[i], sizeof(src[i]), "198.18.1.%d", 100 + i);
		struct pkt_spec forged = syn4(src[i], (uint16_t)(2000 + i), 7002);
		assert_int_equal(xdp(f, &forged).ret, XDP_PASS);
	}
	assert_int_equal(inflight_total(f, 4), 0);
	/* L3's share is 2: one forged half-open counted (4 / 4), the first real one gets in */
	assert_int_equal(connect_idle(f, &l3a), XDP_PASS);
	assert_int_equal(connect_idle(f, &l3b), XDP_TX);
	assert_int_equal(conn_cap_of(f, 4).rejected[3], 1);
	assert_int_equal(inflight_total(f, 4), 1);
	struct pkt_spec fin = idle_fin(&l3a);
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 4), 0);
}

/* A thread that sends refused SYNs (L3 SYNs past L3's share of the connection cap, each from
 * another port) until told to stop, counting the refusals it saw. No cmocka asserts here:
 * they cannot fail from another thread. */
struct syn_flood {
	struct fixture *f;
	struct pkt_spec syn;
	int stop;
	unsigned long long refused, runs;
};

static void *syn_flood_run(void *arg)
{
	struct syn_flood *s = arg;
	int fd = bpf_program__fd(s->f->skel->progs.sluice_xdp_ingress);

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		uint8_t buf[512];
		struct run r;

		s->syn.sport = (uint16_t)(1000 + s->runs % 60000);
		r = harness_run(fd, buf, build_pkt(buf, &s->syn), NULL);
		__atomic_add_fetch(&s->runs, 1, __ATOMIC_RELAXED);
		s->refused += r.err == 0 && r.ret == XDP_TX;
	}
	return NULL;
}

/* The flood of syn_flood_run on pool's L3 while sluiced programs the services 300 times, or
 * (vary) while pool's cap is set 5,000 times, L1's threshold changed each time: every
 * refusal is counted. */
static void reprogram_during_flood(struct fixture *f, int vary)
{
	struct syn_flood s = { .f = f, .syn = syn4("203.0.113.9", 999, 7002) };
	struct pkt_spec l3a = syn4("203.0.113.9", 1, 7002), l3b = syn4("203.0.113.9", 2, 7002);
	unsigned long long before;
	pthread_t t;

	assert_int_equal(connect_idle(f, &l3a), XDP_PASS);   /* L3's share (2) is taken */
	assert_int_equal(connect_idle(f, &l3b), XDP_PASS);
	assert_int_equal(xdp(f, &s.syn).ret, XDP_TX);
	before = conn_cap_of(f, 4).rejected[3];
	assert_int_equal(pthread_create(&t, NULL, syn_flood_run, &s), 0);
	while (!__atomic_load_n(&s.runs, __ATOMIC_RELAXED))
		sched_yield();            /* the flood is under way */
	for (int i = 0; i < 300 && !vary; i++) {
		set_heartbeat(f, 0);      /* the cap applies only while the controller is alive */
		assert_int_equal(maps_program_services(&f->m, &f->cfg, f->idx), 0);
	}
	/* the entry's own write, as programming a changed cap does it, many times a second */
	for (int i = 0; i < 5000 && vary; i++) {
		struct sluice_conn_cap cc = conn_cap_of(f, 4);

		cc.threshold[1] = i % 2 ? 1 : 3;
		if (i % 1000 == 0)
			set_heartbeat(f, 0);
		assert_int_equal(maps_write_conn_cap(&f->m, 4, cc.threshold), 0);
	}
	if (vary)
		assert_int_equal(maps_program_services(&f->m, &f->cfg, f->idx), 0);
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(s.refused > 0);
	assert_int_equal(conn_cap_of(f, 4).rejected[3] - before, s.refused);
	assert_int_equal(conn_cap_of(f, 4).threshold[3], 2);
	for (int r = 0; r < SLUICE_REJ_REASONS; r++)
		assert_int_equal(stats(f, 4, 3).rejected[r], 0);
}

/* sluiced programs the services at its start and at every reload, each service's conn_cap
 * entry too, whose refusal counts BPF adds to with atomics beside the thresholds sluiced
 * writes. Written back with the counts it had read, the entry lost every refusal counted in
 * between, and to a reader the count went back (to Prometheus a counter reset: rate() counts
 * the whole count again). Programming services whose cap did not change leaves the entry
 * alone; a cap that changed is set in the kernel, threshold by threshold (sluice_set_conn_cap):
 * every refusal is counted while the services are programmed again and again. */
static void test_reprogramming_keeps_connection_cap_refusals(void **state)
{
	reprogram_during_flood(*state, 0);
}

static void test_changing_a_cap_keeps_its_refusals(void **state)
{
	struct fixture *f = *state;

	reprogram_during_flood(f, 1);
	assert_int_equal(conn_cap_of(f, 4).threshold[1], 3);   /* the config's again: 90 % of 4 */
}

/* An IPv6 client is its /64: 1000 addresses inside one /64 share one client's budget (two
 * connections at once), and an address in the next /64 is another client. */
static void test_client_limits_key_ipv6_by_64(void **state)
{
	struct fixture *f = *state;
	char addr[1000][48];
	int passed = 0, refused = 0;

	for (int i = 0; i < 1000; i++) {
		snprintf(addr[i], sizeof(addr[i]), "2001:db8:5:6:%x:%x:%x:1", i * 37 + 1, i, 1000 - i);
		struct pkt_spec s = { .v6 = 1, .src = addr[i], .dst = SERVER6, .sport = 20000,
				      .dport = 7000, .seq = 1000u + (uint32_t)i, .syn = 1 };
		int rv = connect_(f, &s);
		passed += rv == XDP_PASS;
		refused += rv == XDP_TX;
	}
	assert_int_equal(passed, 2);
	assert_int_equal(refused, 998);
	assert_int_equal(stats(f, 2, 0).rejected[SLUICE_REJ_CLIENT_LIMIT], 998);
	struct pkt_spec next = { .v6 = 1, .src = "2001:db8:5:7::1", .dst = SERVER6,
				 .sport = 20000, .dport = 7000, .seq = 1, .syn = 1 };
	assert_int_equal(connect_(f, &next), XDP_PASS);
	/* IPv4 clients stay one address each. */
	struct pkt_spec v4a = syn4("198.18.7.1", 1, 7000), v4b = syn4("198.18.7.2", 1, 7000);
	assert_int_equal(connect_(f, &v4a), XDP_PASS);
	assert_int_equal(connect_(f, &v4b), XDP_PASS);
}

/* Entries in the `clients` map. */
static int client_entries(struct fixture *f)
{
	struct sluice_client_key k, next;
	int n = 0;

	if (bpf_map_get_next_key(f->m.clients, NULL, &next))
		return 0;
	do {
		k = next;
		n++;
	} while (!bpf_map_get_next_key(f->m.clients, &k, &next));
	return n;
}

/* A flood of SYNs from forged sources (70,000 addresses, more than the `clients` LRU holds)
 * makes no client entry, so it cannot push a real client's out of the LRU and with it the
 * connections counted against that client's cap: the client at its cap of two stays refused
 * a third. (With an entry made per SYN, the flood evicted it and the third got in.) */
static void test_forged_sources_never_evict_a_client(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 1, 7000), b = syn4("198.18.1.2", 2, 7000);
	struct pkt_spec c = syn4("198.18.1.2", 3, 7000);
	unsigned long long admitted0 = stats(f, 2, 0).admitted;
	unsigned long long fail_open0 = stats(f, 2, 0).fail_open;
	char src[32];
	int passed = 0;

	assert_int_equal(connect_(f, &a), XDP_PASS);
	assert_int_equal(connect_(f, &b), XDP_PASS);
	assert_int_equal(client_entries(f), 1);
	for (uint32_t i = 0; i < 70000; i++) {
		uint32_t addr = (198u << 24 | 18u << 16 | 16u << 8) + i; /* 198.18.16.0 on */

		/* the flood can outlast the 1 s heartbeat on a slow or busy host (under ASan
		 * it did): kept fresh, or the programs fail open and skip the client
		 * check this is about */
		if (i % 4096 == 0)
			set_heartbeat(f, 0);
		snprintf(src, sizeof(src), "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff,
			 (addr >> 8) & 0xff, addr & 0xff);
		struct pkt_spec s = syn4(src, (uint16_t)(1024 + (i & 0x7fff)), 7000);
		passed += xdp(f, &s).ret == XDP_PASS;
	}
	/* The flood reached the client check: every SYN admitted, none counted. */
	assert_int_equal(passed, 70000);
	assert_int_equal(stats(f, 2, 0).admitted - admitted0, 2 + 70000);
	assert_int_equal(stats(f, 2, 0).fail_open, fail_open0);
	set_heartbeat(f, 0);
	assert_int_equal(connect_(f, &c), XDP_TX); /* still at its cap */
	assert_int_equal(stats(f, 2, 0).rejected[SLUICE_REJ_CLIENT_LIMIT], 1);
	assert_int_equal(client_entries(f), 1);
}

static void test_client_token_bucket(void **state)
{
	struct fixture *f = *state;

	/* SYNs forged in 198.18.1.2's name (no handshake ever completes) use up none of its
	 * tokens, nor of its concurrency. */
	for (uint16_t p = 100; p < 140; p++) {
		struct pkt_spec forged = syn4("198.18.1.2", p, 7001);
		assert_int_equal(xdp(f, &forged).ret, XDP_PASS);
	}
	/* 1 per second, burst 2: two at once pass, the third waits for a token. */
	for (uint16_t p = 1; p <= 3; p++) {
		struct pkt_spec s = syn4("198.18.1.2", p, 7001);
		assert_int_equal(connect_(f, &s), p <= 2 ? XDP_PASS : XDP_TX);
	}
	struct pkt_spec other = syn4("198.18.1.9", 9, 7001);
	assert_int_equal(connect_(f, &other), XDP_PASS);
	assert_int_equal(stats(f, 3, 0).rejected[SLUICE_REJ_CLIENT_LIMIT], 1);
	usleep(1100000);
	set_heartbeat(f, 0); /* the controller alive: the bucket, not fail-open, decides */
	struct pkt_spec later = syn4("198.18.1.2", 10, 7001), again = syn4("198.18.1.2", 11, 7001);
	assert_int_equal(connect_(f, &later), XDP_PASS);   /* the token that came back */
	assert_int_equal(connect_(f, &again), XDP_TX);     /* and no other yet */
}

static void test_client_limits_off_when_controller_silent(void **state)
{
	struct fixture *f = *state;

	/* Completed connections, not bare SYNs: only a completed handshake counts against a
	 * client's cap (2 here), so SYNs alone would pass with the controller alive too. */
	set_heartbeat(f, 2000000000ull);
	for (uint16_t p = 1; p <= 4; p++) {
		struct pkt_spec s = syn4("198.18.1.2", p, 7000);
		assert_int_equal(connect_(f, &s), XDP_PASS);
	}
}

/* ---- accounting ---- */

static void test_fin_rst_end_units_exactly_once(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 100, 5432), b = syn4("198.18.1.2", 101, 5432);

	connect_(f, &a);
	connect_(f, &b);
	assert_int_equal(inflight_total(f, 0), 2);

	/* Client FIN on a while its query runs: a half-close, the server still works on it, so
	 * nothing ends. The server's FIN then ends it: -1; a second one: nothing more. */
	struct pkt_spec fin = client_fin(&a);
	assert_int_equal(xdp(f, &fin).ret, XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 2);
	assert_int_equal(busy_total(f, 0), 2);
	struct pkt_spec sfin = { .src = SERVER4, .dst = "198.18.1.2", .sport = 5432, .dport = 100,
				 .fin = 1, .ackf = 1 };
	assert_int_equal(tc_egress(f, &sfin).ret, TC_ACT_UNSPEC);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(tc_egress(f, &sfin).ret, TC_ACT_UNSPEC);
	assert_int_equal(inflight_total(f, 0), 1);

	/* Server RST on b: -1 and an error. */
	struct pkt_spec srst = sfin;
	srst.dport = 101, srst.fin = 0, srst.rst = 1;
	assert_int_equal(tc_egress(f, &srst).ret, TC_ACT_UNSPEC);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(stats(f, 0, 0).completed, 2);
	assert_int_equal(stats(f, 0, 0).errors, 1);

	/* Data packets of a flow that ended pass untouched. */
	struct pkt_spec data = a;
	data.syn = 0, data.ackf = 1, data.tcp_opts = 0, data.payload = "hello", data.payload_len = 5;
	assert_int_equal(xdp(f, &data).ret, XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 0);
}

/* Flows carried over from a layout before client_next hold 0 there: where the client is is
 * not known. Their FIN/RST still ends them (as that layout did), and the server's next
 * segment teaches the flow where the client is, after which a FIN/RST out of the window ends
 * nothing again. */
static void forget_client_next(struct fixture *f)
{
	struct sluice_flow_key k, next;
	struct sluice_flow v;

	for (void *prev = NULL; bpf_map_get_next_key(f->m.flows, prev, &next) == 0; prev = &k) {
		k = next;
		assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &v), 0);
		v.client_next = 0;
		assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &v, BPF_EXIST), 0);
	}
}

static void test_carried_over_flow_without_client_next_still_ends(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 300, 5432), b = syn4("198.18.1.2", 301, 5432);

	assert_int_equal(connect_(f, &a), XDP_PASS);
	assert_int_equal(connect_(f, &b), XDP_PASS);
	forget_client_next(f);
	assert_int_equal(inflight_total(f, 0), 2);

	/* a: the client sent 3 GB since sluice last followed it; its RST ends the unit. */
	struct pkt_spec fin = client_rst(&a);
	fin.seq += 0xb0000000u;
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(stats(f, 0, 0).completed, 1);

	/* b: the server's data acknowledges a sequence 2^31 or more past 0 (no "later than 0"
	 * comparison could take it); from then on the window is back. */
	struct pkt_spec srv = synack_of(&b);
	srv.syn = 0, srv.tcp_opts = 0, srv.seq += 1, srv.ack = b.seq + 1 + 0xa0000000u;
	srv.payload = "row", srv.payload_len = 3;
	tc_egress(f, &srv);
	struct pkt_spec forged = client_rst(&b);
	xdp(f, &forged);
	assert_int_equal(inflight_total(f, 0), 1);
	struct pkt_spec bfin = client_fin(&b);
	bfin.seq = srv.ack;
	xdp(f, &bfin);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(stats(f, 0, 0).completed, 2);
	assert_int_equal(flow_count(f), 0);
}

static void test_stale_heartbeat_fails_open(void **state)
{
	struct fixture *f = *state;

	set_heartbeat(f, 2000000000ull); /* 2 s old, timeout 1 s */
	for (uint16_t p = 1; p <= 6; p++) {
		struct pkt_spec s = syn4("203.0.113.9", p, 5432); /* L3: 2 slots normally */
		assert_int_equal(connect_(f, &s), XDP_PASS);
	}
	assert_int_equal(stats(f, 0, 3).admitted, 6);
	assert_int_equal(stats(f, 0, 3).fail_open, 6);
	assert_int_equal(inflight_total(f, 0), 6); /* still counted */
	set_heartbeat(f, 0);
	struct pkt_spec s = syn4("203.0.113.9", 7, 5432);
	assert_int_equal(xdp(f, &s).ret, XDP_TX);
}

/* A heartbeat stamped after the SYN read its clock (sluiced's exact clock, a moment ahead of the
 * coarse one a SYN reads) is a fresh one: the verdicts apply, nothing fails open. Red when the
 * age is taken unsigned (it wraps around to "silent for ever"). One an hour ahead was not
 * stamped on this clock: the data path fails open, as for a silent controller. */
static void test_heartbeat_ahead_of_the_syn_clock_is_alive(void **state)
{
	struct fixture *f = *state;
	struct sluice_globals g = { .heartbeat_ns = monotonic_ns() + 5000000ull,
				    .heartbeat_timeout_ns = 1000000000ull };

	assert_int_equal(maps_write_globals(&f->m, &g), 0);
	for (uint16_t p = 1; p <= 2; p++) {
		struct pkt_spec s = syn4("203.0.113.9", p, 5432); /* L3: 2 slots */
		assert_int_equal(connect_(f, &s), XDP_PASS);
	}
	struct pkt_spec s = syn4("203.0.113.9", 3, 5432);
	assert_int_equal(xdp(f, &s).ret, XDP_TX);
	assert_int_equal(stats(f, 0, 3).fail_open, 0);
	assert_int_equal(stats(f, 0, 3).admitted, 2);

	g.heartbeat_ns = monotonic_ns() + 3600ull * 1000000000ull;
	assert_int_equal(maps_write_globals(&f->m, &g), 0);
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 3).fail_open, 1);
}

/* db's limit raised to 100, then n L0 connections from src (client ports 1 to n) completed,
 * each admitted: more than a 4-entry flow table holds when n > 4. */
static void connect_ports(struct fixture *f, const char *src, uint16_t n)
{
	struct sluice_verdict v;

	verdict_default(&f->cfg.services[0], 100, &v);
	maps_write_verdict(&f->m, f->idx[0], &v);
	for (uint16_t p = 1; p <= n; p++) {
		struct pkt_spec s = syn4(src, p, 5432);
		assert_int_equal(connect_(f, &s), XDP_PASS);
	}
}

static void test_full_flow_table_admits_untracked_and_drains_to_zero(void **state)
{
	struct fixture *f = *state; /* flows table of 4 entries; quiet has limit 1, db 4 */

	connect_ports(f, "198.18.1.2", 7);
	assert_int_equal(stats(f, 0, 0).admitted, 7);
	assert_int_equal(stats(f, 0, 0).untracked, 3);
	assert_int_equal(inflight_total(f, 0), 4);
	for (uint16_t p = 1; p <= 7; p++) {
		struct pkt_spec syn = syn4("198.18.1.2", p, 5432), s = client_rst(&syn);
		xdp(f, &s);
	}
	assert_int_equal(inflight_total(f, 0), 0);
}

/* ---- forged packets ---- */

/* A source address inside 198.18.1.0/24 (L0 for db) or anywhere (L3), from a counter. */
static void forged_src(char *buf, size_t n, uint32_t i, int l0)
{
	if (l0)
		snprintf(buf, n, "198.18.1.%u", 1 + i % 254);
	else
		snprintf(buf, n, "203.0.%u.%u", (i >> 8) & 0xff, 1 + (i & 0xff) % 254);
}

static struct sluice_hash_keys hash_keys(struct fixture *f);
static __u32 slot_of(const struct pkt_spec *syn, const struct sluice_hash_keys *keys);

/* A client port from `from` on whose 4-tuple (src to dport) the handshake slot is free. A SYN
 * that meets a slot another 4-tuple's young record holds goes unrecorded and its connection
 * is taken on at its first data by a socket lookup, which a test run has no socket for: a
 * test whose real clients follow a flood of pending handshakes picks their ports this way. */
static uint16_t port_on_free_slot(struct fixture *f, const char *src, uint16_t from,
				  uint16_t dport)
{
	size_t len = SLUICE_HANDSHAKE_SLOTS * sizeof(struct sluice_handshake_slot);
	struct sluice_handshake_slot *v = mmap(NULL, len, PROT_READ, MAP_SHARED,
					       bpf_map__fd(f->skel->maps.handshake_slots), 0);
	struct sluice_hash_keys keys = hash_keys(f);
	uint16_t p = from;

	assert_true(v != MAP_FAILED);
	for (; p < 65535; p++) {
		struct pkt_spec s = syn4(src, p, dport);

		if (!(v[slot_of(&s, &keys)].word & SLUICE_SLOT_HELD))
			break;
	}
	munmap(v, len);
	assert_true(p < 65535);
	return p;
}

/* Thousands of SYNs with forged sources from L0's own prefix, and from the default class,
 * none of which ever completes a handshake (the forger never sees the SYN-ACKs): the server
 * answers each, but they hold no slot, so the limit never fills and real clients of every
 * class still connect afterwards, L0 up to the whole limit. */
static void test_forged_syn_flood_never_fills_the_limit(void **state)
{
	struct fixture *f = *state;
	char src[32];

	for (uint32_t i = 0; i < 4000; i++) {
		forged_src(src, sizeof(src), i, i % 2 == 0);
		struct pkt_spec s = syn4(src, (uint16_t)(1024 + i), 5432);
		assert_int_equal(xdp(f, &s).ret, XDP_PASS);
		/* The server answers every one; the answer goes to the forged address. */
		struct pkt_spec sa = synack_of(&s);
		tc_egress(f, &sa);
		if (i % 100 == 0)
			assert_int_equal(inflight_total(f, 0), 0);
	}
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(stats(f, 0, 0).admitted, 2000);
	/* A real L3 client still gets in (the half-open budget takes at most a quarter of the
	 * limit from the lower classes), then real L0 clients fill the rest of the limit. Their
	 * ports are picked on slots the flood's records do not hold (see port_on_free_slot). */
	struct pkt_spec l3 = syn4("203.0.113.200", port_on_free_slot(f, "203.0.113.200", 60000, 5432),
				  5432);
	uint16_t l0_port[3];

	assert_int_equal(connect_(f, &l3), XDP_PASS);
	for (uint16_t p = 0; p < 3; p++) {
		l0_port[p] = port_on_free_slot(f, "198.18.1.77",
					       (uint16_t)(p ? l0_port[p - 1] + 1 : 61000), 5432);
		struct pkt_spec l0 = syn4("198.18.1.77", l0_port[p], 5432);
		assert_int_equal(connect_(f, &l0), XDP_PASS);
	}
	assert_int_equal(inflight_total(f, 0), 4);
	struct pkt_spec over = syn4("198.18.1.78", 62000, 5432);
	assert_int_equal(xdp(f, &over).ret, XDP_TX); /* the limit is the real clients' */
	/* Every real connection closes: in-flight is exactly 0, whatever the flood left. */
	answered_then_fin(f, &l3);
	for (uint16_t p = 0; p < 3; p++) {
		struct pkt_spec l0 = syn4("198.18.1.77", l0_port[p], 5432);
		struct pkt_spec rst = client_rst(&l0);
		xdp(f, &rst);
	}
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
}

/* An attempt to fill the flow table (4 entries here) with everything a client can send
 * without completing a handshake: forged SYNs the server answers (half-open forever), forged
 * ACKs guessing the server's ISN, forged data and bare ACKs on connections that never existed,
 * 500 rounds of each, with the table half full of real connections. None of it takes an entry,
 * so the real connections stay tracked, later real connections are tracked too (the table then
 * full of them), and an overload is still shed: the SYN beyond the limit gets its RST and
 * nothing is ever admitted untracked. */
static void test_table_full_attempt_keeps_shedding_on(void **state)
{
	struct fixture *f = *state; /* flows table of 4 entries; db: limit 4, L0 may use all 4 */
	char src[32];

	for (uint16_t p = 0; p < 2; p++) {
		struct pkt_spec l0 = syn4("198.18.1.50", (uint16_t)(100 + p), 5432);
		assert_int_equal(connect_(f, &l0), XDP_PASS);
	}
	assert_int_equal(flow_count(f), 2);
	for (uint32_t i = 0; i < 500; i++) {
		forged_src(src, sizeof(src), i, i % 2 == 0);
		struct pkt_spec s = syn4(src, (uint16_t)(2000 + i), 5432), sa = synack_of(&s);
		xdp(f, &s);
		tc_egress(f, &sa);
		struct pkt_spec guess = client_seg(&s);       /* an ISN guessed wrong */
		guess.ack = sa.seq + 1 + SLUICE_SEQ_WINDOW + i * 7919u;
		xdp(f, &guess);
		struct pkt_spec never = syn4(src, (uint16_t)(40000 + i), 5432);
		struct pkt_spec data = client_query(&never), bare = client_seg(&never);
		data.seq += i * 104729u, bare.seq += i * 104729u;
		xdp(f, &data);
		tc_ingress(f, &data);
		xdp(f, &bare);
	}
	assert_int_equal(flow_count(f), 2);
	assert_int_equal(inflight_total(f, 0), 2);
	/* Real connections after the attempt are tracked, up to the limit, which fills the
	 * table; the next one is shed. */
	for (uint16_t p = 2; p < 4; p++) {
		struct pkt_spec l0 = syn4("198.18.1.50", (uint16_t)(100 + p), 5432);
		assert_int_equal(connect_(f, &l0), XDP_PASS);
	}
	assert_int_equal(flow_count(f), 4);
	assert_int_equal(inflight_total(f, 0), 4);
	unsigned long long shed = stats(f, 0, 0).rejected[SLUICE_REJ_HEADROOM] +
				  stats(f, 0, 0).rejected[SLUICE_REJ_LADDER];
	struct pkt_spec over = syn4("198.18.1.51", 200, 5432);
	assert_int_equal(xdp(f, &over).ret, XDP_TX);
	assert_true(stats(f, 0, 0).rejected[SLUICE_REJ_HEADROOM] +
		    stats(f, 0, 0).rejected[SLUICE_REJ_LADDER] == shed + 1);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(stats(f, 0, c).untracked, 0);
	/* Every real connection ends through its flow: exactly 0 left. */
	for (uint16_t p = 0; p < 4; p++) {
		struct pkt_spec l0 = syn4("198.18.1.50", (uint16_t)(100 + p), 5432);
		answered_then_fin(f, &l0);
	}
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(stats(f, 0, 0).completed, 4);
}

/* The ACK that completes a handshake must acknowledge the server's ISN: an ACK guessed
 * without the SYN-ACK (or before it was sent) completes nothing. */
static void test_forged_ack_completes_no_handshake(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 777, 5432), sa = synack_of(&s);
	struct pkt_spec ack = client_seg(&s);

	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	xdp(f, &ack); /* before the SYN-ACK: the server's ISN is not known yet */
	assert_int_equal(inflight_total(f, 0), 0);
	tc_egress(f, &sa);
	struct pkt_spec bad = ack;
	bad.ack = sa.seq + 1 + SLUICE_SEQ_WINDOW;      /* beyond the window */
	xdp(f, &bad);
	bad.ack = sa.seq;                              /* one short: not an ACK of the SYN-ACK */
	xdp(f, &bad);
	bad.ack = sa.seq + 2;   /* one past: the listener answers it with an RST, which would
				 * then count as the server's error */
	xdp(f, &bad);
	assert_int_equal(flow_count(f), 0);
	bad = ack;
	bad.seq = s.seq + 1 + SLUICE_SEQ_WINDOW;       /* the right ack, a wrong sequence */
	xdp(f, &bad);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	xdp(f, &ack);
	assert_int_equal(inflight_total(f, 0), 1);
	xdp(f, &ack); /* a duplicate ACK takes nothing more */
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(flow_count(f), 1);
}

/* A FIN or RST ends a unit only inside the client's window: forged ones outside it (before
 * where the client is, or beyond the window) release nothing; the client's own does. */
static void test_forged_fin_rst_outside_window_release_nothing(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 888, 5432);

	assert_int_equal(connect_(f, &s), XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 1);
	const uint32_t off[] = { SLUICE_SEQ_WINDOW, SLUICE_SEQ_WINDOW + 12345, 0x80000000u,
				 (uint32_t)-1, (uint32_t)-1000 };
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
		struct pkt_spec rst = client_rst(&s), fin = client_fin(&s), rstack = client_rst(&s);
		rst.seq += off[i], fin.seq += off[i], rstack.seq += off[i];
		rstack.ackf = 1, rstack.ack = SERVER_ISN(s.sport) + 1;
		xdp(f, &rst);
		xdp(f, &fin);
		xdp(f, &rstack);
		assert_int_equal(inflight_total(f, 0), 1);
	}
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(stats(f, 0, 0).completed, 0);
	/* The server acknowledged 5000 bytes (its data carries the ack): the client's FIN is
	 * there now, and one at the handshake's sequence is outside the window. */
	struct pkt_spec srv = synack_of(&s);
	srv.syn = 0, srv.tcp_opts = 0, srv.seq += 1, srv.ack = s.seq + 1 + 5000;
	srv.payload = "row", srv.payload_len = 3;
	tc_egress(f, &srv);
	struct pkt_spec old = client_rst(&s);
	xdp(f, &old);
	assert_int_equal(inflight_total(f, 0), 1);
	struct pkt_spec fin = client_fin(&s);
	fin.seq += 5000;
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(stats(f, 0, 0).completed, 1);
	assert_int_equal(flow_count(f), 0);
}

/* A SYN with a new ISN on a live flow (anyone can send one) ends nothing; only the server
 * accepting it as a new connection (its SYN-ACK for the new ISN) ends the old unit. */
static void test_syn_with_new_isn_never_ends_a_live_flow(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 999, 5432);

	assert_int_equal(connect_(f, &s), XDP_PASS);
	for (uint32_t i = 1; i <= 50; i++) {
		struct pkt_spec again = s;
		again.seq = s.seq + i * 0x01000193u;
		assert_int_equal(xdp(f, &again).ret, XDP_PASS);
		assert_int_equal(inflight_total(f, 0), 1);
	}
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(stats(f, 0, 0).completed, 0);
	/* The old connection did end unseen and the server takes the new one: one unit ends,
	 * one begins, in-flight stays 1 and drops to 0 when the new one closes. */
	struct pkt_spec fresh = s;
	fresh.seq = s.seq + 0x40000000u;
	assert_int_equal(connect_(f, &fresh), XDP_PASS);
	assert_int_equal(stats(f, 0, 0).completed, 1);
	assert_int_equal(inflight_total(f, 0), 1);
	answered_then_fin(f, &fresh);
	assert_int_equal(inflight_total(f, 0), 0);
}

/* Handshakes admitted but not complete count against L1..L3 (up to a quarter of the limit),
 * so a burst of lower-class SYNs inside one round trip is held back; L0 never waits on them. */
static void halfopen_budget_holds_back_lower_classes_only(struct fixture *f)
{
	/* limit 4: L3 may use 2; the half-open budget counts at most 1. */
	struct pkt_spec a = syn4("203.0.113.9", 1, 5432), b = syn4("203.0.113.9", 2, 5432);
	struct pkt_spec c = syn4("203.0.113.9", 3, 5432);

	assert_int_equal(connect_(f, &a), XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_PASS); /* its handshake is under way */
	assert_int_equal(in_window(xdp(f, &c).ret), XDP_TX); /* 1 established + 1 under way: full */
	for (uint16_t p = 10; p < 13; p++) {
		struct pkt_spec l0 = syn4("198.18.1.7", p, 5432);
		assert_int_equal(connect_(f, &l0), XDP_PASS);
	}
	assert_int_equal(inflight_total(f, 0), 4);
	/* The handshake under way completes: its slot is taken now. */
	struct pkt_spec sa = synack_of(&b), ack = client_seg(&b);
	tc_egress(f, &sa);
	xdp(f, &ack);
	assert_int_equal(inflight_total(f, 0), 5);
}

static void test_halfopen_budget_holds_back_lower_classes_only(void **state)
{
	within_window(state, setup, halfopen_budget_holds_back_lower_classes_only);
}

static struct sluice_halfopen halfopen_of(struct fixture *f, int svc)
{
	struct sluice_halfopen h;
	__u32 k = (__u32)f->idx[svc];

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.halfopen), &k, &h), 0);
	return h;
}

/* A connection between its handshake and its client's first data is neither half-open nor
 * busy, yet it is about to be busy: it counts with the half-open ones (as fresh) until that
 * data or its end, so a SYN in that instant cannot take one more than the headroom. Service
 * gap: limit 8, L3 50 % (4), at most 2 half-open or fresh counted. */
static void fresh_connection_counts_until_its_first_data(struct fixture *f)
{
	struct pkt_spec a = syn4("203.0.113.9", 1, 7003), b = syn4("203.0.113.9", 2, 7003);
	struct pkt_spec c = syn4("203.0.113.9", 3, 7003), d = syn4("203.0.113.9", 4, 7003);
	struct pkt_spec e = syn4("203.0.113.9", 5, 7003), g = syn4("203.0.113.9", 6, 7003);

	assert_int_equal(connect_(f, &a), XDP_PASS);
	assert_int_equal(connect_(f, &b), XDP_PASS);
	assert_int_equal(busy_total(f, 5), 2);
	assert_int_equal(connect_idle(f, &c), XDP_PASS);   /* no data yet */
	assert_int_equal(in_window(halfopen_of(f, 5).count), 0);
	assert_int_equal(in_window(halfopen_of(f, 5).fresh), 1);
	assert_int_equal(xdp(f, &d).ret, XDP_PASS);        /* 2 busy + 1 fresh: one more */
	assert_int_equal(in_window(halfopen_of(f, 5).count), 1);
	assert_int_equal(in_window(xdp(f, &e).ret), XDP_TX); /* 2 busy + 1 fresh + 1 half-open */
	/* c's first data: busy now, no longer fresh; e's retry still finds L3 full. */
	struct pkt_spec q = client_query(&c);
	xdp(f, &q);
	tc_ingress(f, &q);
	assert_int_equal(busy_total(f, 5), 3);
	assert_int_equal(in_window(halfopen_of(f, 5).fresh), 0);
	e.sport = 7;
	assert_int_equal(in_window(xdp(f, &e).ret), XDP_TX);
	/* d completes and ends without a word: its fresh count goes with it. */
	struct pkt_spec dsa = synack_of(&d), dack = client_seg(&d), dfin = idle_fin(&d);
	tc_egress(f, &dsa);
	xdp(f, &dack);
	assert_int_equal(in_window(halfopen_of(f, 5).count), 0);
	assert_int_equal(in_window(halfopen_of(f, 5).fresh), 1);
	xdp(f, &dfin);
	assert_int_equal(in_window(halfopen_of(f, 5).fresh), 0);
	assert_int_equal(inflight_total(f, 5), 3);
	assert_int_equal(connect_(f, &g), XDP_PASS);       /* 3 busy: the fourth gets in */
	assert_int_equal(busy_total(f, 5), 4);
	assert_int_equal(in_window(halfopen_of(f, 5).fresh), 0);
}

static void test_fresh_connection_counts_until_its_first_data(void **state)
{
	within_window(state, setup, fresh_connection_counts_until_its_first_data);
}

/* Should the client's ACK of the SYN-ACK not be seen, the server's own first segment of the
 * connection, acknowledging the client's SYN, completes it; before the server answered the
 * SYN (no SYN-ACK seen) nothing completes it, and a server segment acknowledging anything
 * else (a challenge ACK of an older connection), or a server RST (no listener), completes
 * nothing either. */
static void test_server_segment_completes_a_handshake(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec s = syn4("198.18.1.2", 4321, 5432), t = syn4("198.18.1.2", 4322, 5432);
	struct pkt_spec u = syn4("198.18.1.2", 4323, 5432);

	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	struct pkt_spec sa0 = synack_of(&s), greet = synack_of(&s);
	greet.syn = 0, greet.tcp_opts = 0, greet.seq += 1, greet.payload = "hello", greet.payload_len = 5;
	greet.ack = s.seq + 1;                      /* the server never answered the SYN */
	tc_egress(f, &greet);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	tc_egress(f, &sa0);
	greet.ack = s.seq + 1 + SLUICE_SEQ_WINDOW;  /* not this connection's */
	tc_egress(f, &greet);
	greet.ack = s.seq;                          /* the SYN itself is not acknowledged */
	tc_egress(f, &greet);
	assert_int_equal(inflight_total(f, 0), 0);
	greet.ack = s.seq + 1;
	tc_egress(f, &greet);
	assert_int_equal(inflight_total(f, 0), 1);
	tc_egress(f, &greet);
	assert_int_equal(inflight_total(f, 0), 1);

	/* The server refuses t (no listener): its record goes, and an ACK later takes nothing. */
	assert_int_equal(xdp(f, &t).ret, XDP_PASS);
	struct pkt_spec rst = synack_of(&t);
	rst.syn = 0, rst.rst = 1, rst.seq = 0, rst.tcp_opts = 0;
	tc_egress(f, &rst);
	struct pkt_spec sa = synack_of(&t), ack = client_seg(&t);
	tc_egress(f, &sa);
	xdp(f, &ack);
	assert_int_equal(inflight_total(f, 0), 1);

	/* A client RST at its ISN + 1 before the handshake completes: the record goes too. */
	assert_int_equal(xdp(f, &u).ret, XDP_PASS);
	struct pkt_spec ursa = synack_of(&u), urst = client_rst(&u), uack = client_seg(&u);
	tc_egress(f, &ursa);
	xdp(f, &urst);
	xdp(f, &uack);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(flow_count(f), 1);
}

/* A closed connection is not brought back by its own late segments. The server closes first
 * (its FIN ends the flow), the client's FIN follows at sequence number c, then a "SYN" of the
 * client at that same c (SYN|FIN|RST|PSH, which the listener discards; or a plain SYN, which
 * the server, holding the closing connection, answers with an ACK of it): it is recorded as a
 * handshake, but the server never answers it. The server's data resent after its FIN
 * acknowledges the client's FIN, c + 1, which is also the SYN's ISN + 1: taken as the
 * server's first segment of the SYN's connection, it completed that record into a flow, with
 * a connection slot, after every ending of the 4-tuple had passed, held until the GC found it
 * silent for flow_idle_timeout_s. (The data-path fuzzer's frames: the SYN|FIN|RST|PSH a
 * mutant of the client's FIN, the server's segment a mutant of its last ACK whose IP length
 * claimed data; a flow, and a tcp service's in-flight 1, left at the end of an epoch.)
 * Nothing may come of it. */
static void test_closed_connection_not_revived_by_its_own_segments(void **state)
{
	struct fixture *f = *state;

	for (int plain = 0; plain < 2; plain++) {
		struct pkt_spec s = syn4("198.18.1.2", (uint16_t)(4400 + plain), 5432);
		uint32_t sisn = SERVER_ISN(s.sport);

		assert_int_equal(connect_(f, &s), XDP_PASS);
		struct pkt_spec reply = server_reply(&s, 0, 5);
		reply.ack = s.seq + 1 + QLEN;
		tc_egress(f, &reply);
		assert_int_equal(inflight_total(f, 0), 1);
		assert_int_equal(busy_total(f, 0), 0);
		/* the server closes first */
		struct pkt_spec sfin = server_reply(&s, 5, 0);
		sfin.psh = 0, sfin.fin = 1, sfin.payload = NULL, sfin.payload_len = 0;
		tc_egress(f, &sfin);
		assert_int_equal(inflight_total(f, 0), 0);
		assert_int_equal(flow_count(f), 0);
		/* the client's FIN at c, acknowledging the server's */
		struct pkt_spec cfin = client_fin(&s);
		cfin.ack = sisn + 1 + 5 + 1;
		xdp(f, &cfin);
		/* the client's "SYN" at c */
		struct pkt_spec again = cfin;
		again.syn = 1, again.ackf = 0, again.ack = 0;
		again.fin = again.rst = again.psh = !plain;
		assert_int_equal(xdp(f, &again).ret, XDP_PASS);
		/* the server's data resent after its FIN: it acknowledges c + 1 */
		struct pkt_spec resent = server_reply(&s, 0, 5);
		resent.ack = cfin.seq + 1;
		tc_egress(f, &resent);
		assert_int_equal(flow_count(f), 0);
		assert_int_equal(inflight_total(f, 0), 0);
		/* and the client's last ACK takes nothing either */
		struct pkt_spec last = cfin;
		last.fin = 0, last.seq += 1;
		xdp(f, &last);
		assert_int_equal(flow_count(f), 0);
		assert_int_equal(inflight_total(f, 0), 0);
	}
}

/* The flow key of a v4 SYN's 4-tuple. */
static struct sluice_flow_key key_of_syn(const struct pkt_spec *syn)
{
	struct sluice_flow_key k = { .client_port = htons(syn->sport),
				     .service_port = htons(syn->dport) };
	struct in_addr a;

	if (syn->v6) {
		assert_int_equal(inet_pton(AF_INET6, syn->src, k.client_addr), 1);
		assert_int_equal(inet_pton(AF_INET6, syn->dst, k.local_addr), 1);
		return k;
	}
	k.client_addr[10] = k.client_addr[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, syn->src, &a), 1);
	memcpy(k.client_addr + 12, &a, 4);
	k.local_addr[10] = k.local_addr[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, syn->dst, &a), 1);
	memcpy(k.local_addr + 12, &a, 4);
	return k;
}

/* The slot holding the pending handshake record of the 4-tuple that syn opens, copied into
 * *s (0 when no slot holds one). Looked for in every slot, not only in the one its hash names,
 * so that a record written anywhere else is seen too. */
static int pending_slot(struct fixture *f, const struct pkt_spec *syn,
			struct sluice_handshake_slot *s, __u32 *at)
{
	size_t len = SLUICE_HANDSHAKE_SLOTS * sizeof(*s);
	struct sluice_handshake_slot *v = mmap(NULL, len, PROT_READ, MAP_SHARED,
					       bpf_map__fd(f->skel->maps.handshake_slots), 0);
	struct sluice_flow_key k = key_of_syn(syn);
	int n = 0;

	assert_true(v != MAP_FAILED);
	for (__u32 i = 0; i < SLUICE_HANDSHAKE_SLOTS; i++)
		if ((v[i].word & SLUICE_SLOT_HELD) && !memcmp(&v[i].key, &k, sizeof(k)))
			*s = v[i], *at = i, n++;
	munmap(v, len);
	assert_true(n <= 1);
	return n;
}

/* The pending handshake record of the 4-tuple that syn opens (0 when there is none). */
static int pending_of(struct fixture *f, const struct pkt_spec *syn, struct sluice_handshake *h)
{
	struct sluice_handshake_slot s;
	__u32 at;

	if (!pending_slot(f, syn, &s, &at))
		return 0;
	memset(h, 0, sizeof(*h));
	sluice_slot_record(&s, h);
	return 1;
}

/* Make the pending record of syn's 4-tuple look age_ns older, and the service's half-open
 * window with it (as real time would: a record more than a second old was counted in a
 * window that has lapsed since). */
static void age_pending(struct fixture *f, const struct pkt_spec *syn, unsigned long long age_ns)
{
	int fd = bpf_map__fd(f->skel->maps.handshake_slots);
	struct sluice_handshake_slot s;
	__u32 at;

	if (!pending_slot(f, syn, &s, &at))
		fail_msg("no pending handshake for port %u", syn->sport);
	s.syn_ns -= age_ns;
	assert_int_equal(bpf_map_update_elem(fd, &at, &s, BPF_EXIST), 0);

	int hfd = bpf_map__fd(f->skel->maps.halfopen);
	struct sluice_halfopen h;
	__u32 k = s.svc;

	assert_int_equal(bpf_map_lookup_elem(hfd, &k, &h), 0);
	h.since_ns -= age_ns;
	assert_int_equal(bpf_map_update_elem(hfd, &k, &h, BPF_EXIST), 0);
}

/* The service's half-open count as the data path reads it: 0 once its window has lapsed. */
static long long halfopen_count(struct fixture *f, int svc)
{
	struct sluice_halfopen h;
	__u32 k = (__u32)f->idx[svc];

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.halfopen), &k, &h), 0);
	return monotonic_ns() - h.since_ns > SLUICE_HALFOPEN_TIMEOUT_NS ? 0 : h.count;
}

/* The handshake opened by syn completes (ACK of the SYN-ACK) and the connection ends with a
 * client FIN: tracked and counted exactly once, nothing left over (a scenario of
 * within_window's: the count given back is read in its window). */
static void complete_and_close(struct fixture *f, const struct pkt_spec *syn, uint64_t completed)
{
	struct pkt_spec ack = client_seg(syn), fin = client_seg(syn);
	struct sluice_handshake h;

	xdp(f, &ack);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(in_window(halfopen_count(f, 0)), 0);
	assert_int_equal(pending_of(f, syn, &h), 0);
	fin.fin = 1;
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(stats(f, 0, 0).completed, completed);
}

/* A forged SYN with a new ISN on a 4-tuple whose handshake is pending (a blind attacker who
 * guesses the 4-tuple) never displaces it: the real connection's ACK still completes it, so it
 * is tracked and counted once, whether the forged SYN comes after the SYN-ACK, before it, or
 * before the real SYN (then the server answers the forged one, the real client resets that
 * answer, and its own SYN's retransmit is decided). The forged SYN itself is left to the
 * server, undecided, and takes no half-open count. */
static void forged_syn_never_displaces_a_pending_handshake(struct fixture *f)
{
	struct sluice_handshake h;

	/* After the SYN-ACK; also a SYN-ACK for the forged ISN (a server answering with SYN
	 * cookies keeps no half-open state) leaves the record alone. */
	struct pkt_spec s = syn4("198.18.1.2", 2001, 5432), sa = synack_of(&s), forged = s;
	forged.seq = s.seq + 0x12345678u;
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	tc_egress(f, &sa);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	for (uint32_t i = 0; i < 20; i++, forged.seq += 0x01000193u) {
		assert_int_equal(xdp(f, &forged).ret, XDP_PASS);
		struct pkt_spec cookie = synack_of(&forged);
		tc_egress(f, &cookie);
	}
	assert_int_equal(stats(f, 0, 0).admitted, 1);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	assert_int_equal(pending_of(f, &s, &h), 1);
	assert_int_equal(h.client_isn, s.seq);
	assert_int_equal(h.server_isn, sa.seq);
	complete_and_close(f, &s, 1);

	/* Between the real SYN and its SYN-ACK. */
	struct pkt_spec t = syn4("198.18.1.2", 2002, 5432), tsa = synack_of(&t), tforged = t;
	tforged.seq = t.seq + 0x7654321u;
	assert_int_equal(xdp(f, &t).ret, XDP_PASS);
	assert_int_equal(xdp(f, &tforged).ret, XDP_PASS);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	tc_egress(f, &tsa);
	complete_and_close(f, &t, 2);
	assert_int_equal(stats(f, 0, 0).admitted, 2);

	/* Before the real SYN: the forged one is decided (nothing tells it apart yet) and the
	 * server answers it to the real client, whose SYN then finds the record standing. */
	struct pkt_spec real = syn4("198.18.1.3", 2003, 5432), first = real;
	first.seq = real.seq + 0x2468aceu;
	assert_int_equal(xdp(f, &first).ret, XDP_PASS);
	struct pkt_spec fsa = synack_of(&first);
	tc_egress(f, &fsa);
	assert_int_equal(xdp(f, &real).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 3);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	/* The server ACKs the real SYN at the forged ISN + 1; the real client resets that. */
	struct pkt_spec reset = real;
	reset.syn = 0, reset.rst = 1, reset.tcp_opts = 0, reset.seq = first.seq + 1;
	xdp(f, &reset);
	assert_int_equal(pending_of(f, &real, &h), 0);
	assert_int_equal(in_window(halfopen_count(f, 0)), 0);
	assert_int_equal(inflight_total(f, 0), 0);
	/* Its SYN's retransmit is a new SYN now: decided, answered, completed. */
	assert_int_equal(xdp(f, &real).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 4);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	struct pkt_spec rsa = synack_of(&real);
	tc_egress(f, &rsa);
	complete_and_close(f, &real, 3);
	assert_int_equal(stats(f, 0, 0).untracked, 0);
}

static void test_forged_syn_never_displaces_a_pending_handshake(void **state)
{
	within_window(state, setup, forged_syn_never_displaces_a_pending_handshake);
}

/* A dead handshake gives way to a client that starts afresh with a new ISN: one the server
 * never answered within a second is replaced (its half-open count lapsed with its window:
 * exactly one, the new SYN's, stays counted); one the server answered but its client never
 * completed stands until the server itself takes the new SYN (its SYN-ACK for the new ISN),
 * and the new connection is then tracked on the admission made for the 4-tuple. */
static void dead_handshake_gives_way_to_a_new_isn(struct fixture *f)
{
	struct sluice_handshake h;

	struct pkt_spec s = syn4("198.18.1.4", 3001, 5432), again = s;
	again.seq = s.seq + 0x33333333u;
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	age_pending(f, &s, 2000000000ull);
	assert_int_equal(xdp(f, &again).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 2); /* decided afresh */
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	assert_int_equal(pending_of(f, &s, &h), 1);
	assert_int_equal(h.client_isn, again.seq);
	struct pkt_spec asa = synack_of(&again);
	tc_egress(f, &asa);
	complete_and_close(f, &again, 1);

	struct pkt_spec t = syn4("198.18.1.4", 3002, 5432), tsa = synack_of(&t), fresh = t;
	fresh.seq = t.seq + 0x55555555u;
	assert_int_equal(xdp(f, &t).ret, XDP_PASS);
	tc_egress(f, &tsa);
	age_pending(f, &t, 2000000000ull);
	assert_int_equal(xdp(f, &fresh).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 3); /* the record stands: not decided */
	assert_int_equal(pending_of(f, &t, &h), 1);
	assert_int_equal(h.client_isn, t.seq);
	struct pkt_spec fsa = synack_of(&fresh);
	fsa.seq += 1000; /* a new server ISN for the new connection */
	tc_egress(f, &fsa);
	struct pkt_spec ack = client_seg(&fresh);
	ack.ack = fsa.seq + 1;
	xdp(f, &ack);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(pending_of(f, &t, &h), 0);
	struct pkt_spec fin = ack;
	fin.fin = 1;
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(stats(f, 0, 0).completed, 2);
}

static void test_dead_handshake_gives_way_to_a_new_isn(void **state)
{
	within_window(state, setup, dead_handshake_gives_way_to_a_new_isn);
}

/* A record the server answered stands against a SYN with a new ISN (above), but that SYN is
 * judged all the same: refused while its class is, it never inherits the record's admission.
 * Else a client could let a SYN-ACK go unanswered while the service is quiet and, once the
 * server had forgotten that handshake, connect on the 4-tuple past every refusal: the new
 * ISN's SYN went to the server undecided, and its handshake completed on the old record
 * (XDP_PASS under a shut class, before). */
static void standing_record_never_lends_its_admission(struct fixture *f)
{
	struct sluice_handshake h;
	struct sluice_verdict v, shut;
	__u32 k = (__u32)f->idx[0];
	struct pkt_spec t = syn4("198.18.1.20", 3101, 5432), tsa = synack_of(&t), fresh = t;

	fresh.seq = t.seq + 0x55555555u;
	assert_int_equal(xdp(f, &t).ret, XDP_PASS);
	tc_egress(f, &tsa);
	age_pending(f, &t, 2000000000ull); /* long enough for the server to give up on it */
	assert_int_equal(bpf_map_lookup_elem(f->m.verdicts, &k, &v), 0);
	shut = v;
	shut.flags |= SLUICE_VERDICT_SHUT(0);
	assert_int_equal(bpf_map_update_elem(f->m.verdicts, &k, &shut, BPF_EXIST), 0);
	assert_int_equal(xdp(f, &fresh).ret, XDP_TX); /* refused: the RST */
	assert_int_equal(stats(f, 0, 0).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(stats(f, 0, 0).arrivals, 2);
	assert_int_equal(stats(f, 0, 0).admitted, 1);
	assert_int_equal(pending_of(f, &t, &h), 1); /* the record stands */
	assert_int_equal(h.client_isn, t.seq);
	/* Open again: the SYN goes to the server undecided, as before, and counts nothing. */
	assert_int_equal(bpf_map_update_elem(f->m.verdicts, &k, &v, BPF_EXIST), 0);
	assert_int_equal(xdp(f, &fresh).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).arrivals, 2);
	assert_int_equal(stats(f, 0, 0).admitted, 1);
	assert_int_equal(pending_of(f, &t, &h), 1);
	/* The record's own client completes it: tracked once, nothing left over. */
	complete_and_close(f, &t, 1);
}

static void test_standing_record_never_lends_its_admission(void **state)
{
	within_window(state, setup, standing_record_never_lends_its_admission);
}

/* The frame of s with its IP length field saying `extra` bytes more than the frame holds (the
 * IPv4 header checksum kept right), run through prog: a truncated packet, which the host drops. */
static struct run run_claiming_more(int prog_fd, const struct pkt_spec *s, uint16_t extra)
{
	uint8_t buf[512];
	size_t len = build_pkt(buf, s), l3 = s->vlan ? 18 : 14;
	uint8_t *ip = buf + l3;

	if (s->v6) {
		uint16_t pl = (uint16_t)(ip[4] << 8 | ip[5]) + extra;
		ip[4] = (uint8_t)(pl >> 8), ip[5] = (uint8_t)pl;
	} else {
		uint16_t tot = (uint16_t)(ip[2] << 8 | ip[3]) + extra;
		uint32_t sum = 0;

		ip[2] = (uint8_t)(tot >> 8), ip[3] = (uint8_t)tot;
		ip[10] = ip[11] = 0;
		for (size_t k = 0; k < (size_t)(ip[0] & 0xf) * 4; k += 2)
			sum += (uint32_t)(ip[k] << 8 | ip[k + 1]);
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		ip[10] = (uint8_t)(~sum >> 8), ip[11] = (uint8_t)~sum;
	}
	struct run r = run_prog(prog_fd, buf, len);
	assert_true(harness_unchanged(&r));
	return r;
}

/* A frame shorter than its IP length says is dropped by the host as truncated, so it moves
 * nothing here: no SYN record, no turn, no connection ended; it passes, counted malformed. */
static void test_ip_length_beyond_the_frame_moves_nothing(void **state)
{
	struct fixture *f = *state;
	int xdp_fd = bpf_program__fd(f->skel->progs.sluice_xdp_ingress);
	int tci_fd = bpf_program__fd(f->skel->progs.sluice_tc_ingress);
	unsigned long long malformed = pstats(f).malformed;
	struct pkt_spec conn[2] = {
		syn4("198.18.1.2", 720, 5432),
		{ .v6 = 1, .src = "2001:db8:9::7", .dst = SERVER6, .sport = 721, .dport = 5432,
		  .seq = 77, .syn = 1, .tcp_opts = 20 },
	};
	struct sluice_handshake h;

	for (int v = 0; v < 2; v++) {
		const struct pkt_spec *s = &conn[v];

		for (uint16_t extra = 1; extra <= 1000; extra *= 10) {
			assert_int_equal(run_claiming_more(xdp_fd, s, extra).ret, XDP_PASS);
			assert_false(pending_of(f, s, &h));
			malformed++;
		}
		assert_int_equal(connect_idle(f, s), XDP_PASS);
		assert_int_equal(inflight_total(f, 0), 1);

		struct pkt_spec q = client_query(s), fin = idle_fin(s), rst = idle_fin(s);
		rst.fin = 0, rst.rst = 1, rst.ackf = 0, rst.ack = 0;
		assert_int_equal(run_claiming_more(tci_fd, &q, 1).ret, TC_ACT_UNSPEC);
		assert_int_equal(busy_total(f, 0), 0);
		assert_int_equal(run_claiming_more(xdp_fd, &fin, 1).ret, XDP_PASS);
		assert_int_equal(run_claiming_more(xdp_fd, &rst, 1).ret, XDP_PASS);
		assert_int_equal(inflight_total(f, 0), 1);
		malformed += 2; /* XDP counts; TC ingress sees what XDP passed and counts nothing */

		/* The same segments as sent open a turn and end the connection. */
		tc_ingress(f, &q);
		assert_int_equal(busy_total(f, 0), 1);
		struct pkt_spec rq = server_reply(s, 0, 8), end = client_fin(s);
		tc_egress(f, &rq);
		assert_int_equal(busy_total(f, 0), 0);
		xdp(f, &end);
		assert_int_equal(inflight_total(f, 0), 0);
		assert_int_equal(flow_count(f), 0);
	}
	assert_int_equal(pstats(f).malformed, malformed);
}

/* A SYN is judged as the kernel takes it. With RST it is an RST: the kernel resets a
 * connection at the client's sequence on it, so the unit ends (judged as a SYN it stayed
 * held, with nothing at the server: a client could reset its own connections unseen and keep
 * their capacity). With FIN it opens nothing and ends no connection (a listener discards it,
 * a connection answers a challenge ACK); it drops a handshake under way, as the kernel drops
 * the request. */
static void test_syn_with_rst_or_fin_is_judged_as_the_kernel_takes_it(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 730, 5432), b = syn4("198.18.1.2", 731, 5432);
	struct sluice_handshake h;

	assert_int_equal(connect_(f, &a), XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 1);
	for (int ack = 0; ack < 2; ack++) {
		struct pkt_spec synfin = client_fin(&a);
		synfin.syn = 1, synfin.ackf = ack, synfin.ack = ack ? synfin.ack : 0;
		assert_int_equal(xdp(f, &synfin).ret, XDP_PASS);
		assert_int_equal(inflight_total(f, 0), 1);
		assert_int_equal(flow_count(f), 1);
		assert_false(pending_of(f, &a, &h));
	}
	struct pkt_spec synrst = client_rst(&a);
	synrst.syn = 1;
	assert_int_equal(xdp(f, &synrst).ret, XDP_PASS);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	assert_false(pending_of(f, &a, &h));

	/* A new 4-tuple: neither opens a handshake. */
	struct pkt_spec nf = b, nr = b;
	nf.fin = 1, nr.rst = 1;
	assert_int_equal(xdp(f, &nf).ret, XDP_PASS);
	assert_int_equal(xdp(f, &nr).ret, XDP_PASS);
	assert_false(pending_of(f, &b, &h));

	/* A handshake under way: SYN|FIN in its window drops it. */
	assert_int_equal(xdp(f, &b).ret, XDP_PASS);
	assert_true(pending_of(f, &b, &h));
	nf.seq = b.seq + 1;
	assert_int_equal(xdp(f, &nf).ret, XDP_PASS);
	assert_false(pending_of(f, &b, &h));
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
}

/* The keys of the 4-tuples' hash in the fixture's maps (drawn at load, as sluiced draws them). */
static struct sluice_hash_keys hash_keys(struct fixture *f)
{
	struct sluice_hash_keys keys;
	__u32 zero = 0;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.flow_hash_key), &zero,
					     &keys), 0);
	return keys;
}

/* The handshake slot of a SYN's 4-tuple under the hash keys. */
static __u32 slot_of(const struct pkt_spec *syn, const struct sluice_hash_keys *keys)
{
	struct sluice_flow_key k = key_of_syn(syn);

	return sluice_slot_index(sluice_flow_key_hash(&k, keys));
}

/* A SYN of another L0 client (198.18.1.100 and up) to syn's port whose 4-tuple has the same
 * handshake slot as syn's. */
static struct pkt_spec syn_on_slot_of(const struct pkt_spec *syn,
				      const struct sluice_hash_keys *keys)
{
	static char addr[256][16];

	for (int i = 100; i < 255; i++) {
		snprintf(addr[i], sizeof(addr[i]), "198.18.1.%d", i);
		for (uint32_t port = 1024; port < 65536; port++) {
			struct pkt_spec o = syn4(addr[i], (uint16_t)port, syn->dport);

			if (slot_of(&o, keys) == slot_of(syn, keys))
				return o;
		}
	}
	fail_msg("no 4-tuple on the slot of port %u", syn->sport);
	return *syn;
}

/* A hash linear in the key's words (word j times (2j + 1) times one constant, summed), as the
 * handshake slots' hash once was: the measure of what the crafted 4-tuples below attack. */
static __u64 linear_hash(const struct sluice_flow_key *k, __u64 secret)
{
	__u32 w[9];
	__u64 h = secret;

	memcpy(w, k, sizeof(w));
	for (int j = 0; j < 9; j++)
		h += (__u64)w[j] * (0x9e3779b97f4a7c15ull * (__u64)(2 * j + 1));
	return h;
}

/* The IPv6 address whose third and fourth 32-bit words (the interface half, which a client
 * owns) are the base's plus 7n and minus 5n, as text. */
static const char *crafted_v6(char buf[INET6_ADDRSTRLEN], const char *base, __u32 n)
{
	__u8 a[16];
	__u32 w2, w3;

	assert_int_equal(inet_pton(AF_INET6, base, a), 1);
	memcpy(&w2, a + 8, 4), memcpy(&w3, a + 12, 4);
	w2 += 7 * n, w3 -= 5 * n;
	memcpy(a + 8, &w2, 4), memcpy(a + 12, &w3, 4);
	assert_non_null(inet_ntop(AF_INET6, a, buf, INET6_ADDRSTRLEN));
	return buf;
}

/* A client picks, offline, addresses of its own /64 whose 4-tuples a hash linear in the key's
 * words sums to its unfinished SYN's value under any secret: each such SYN would find its slot
 * held and go unrecorded, taken on at its first data past its client limits. Under the keyed
 * hash the crafted 4-tuples' hashes differ and land on slots of their own as any others do,
 * and the crafted SYN's handshake is recorded next to the first. */
static void test_crafted_ipv6_4tuples_get_slots_of_their_own(void **state)
{
	struct fixture *f = *state;
	struct sluice_hash_keys keys = hash_keys(f);
	static const char *base = "2001:db8:a:0:0:100:0:100";
	char buf[INET6_ADDRSTRLEN], other[INET6_ADDRSTRLEN];
	struct pkt_spec a = { .v6 = 1, .src = base, .dst = SERVER6, .sport = 4001, .dport = 5432,
			      .seq = 5001, .syn = 1, .tcp_opts = 20 }, b = a;
	struct sluice_flow_key ka = key_of_syn(&a);
	struct sluice_handshake h;
	int same_slot = 0, n = 1;

	for (__u32 i = 1; i <= 4096; i++) {
		b.src = crafted_v6(buf, base, i);
		struct sluice_flow_key kb = key_of_syn(&b);

		assert_true(linear_hash(&kb, 12345) == linear_hash(&ka, 12345)); /* the attack */
		assert_true(sluice_flow_key_hash(&kb, &keys) != sluice_flow_key_hash(&ka, &keys));
		same_slot += slot_of(&b, &keys) == slot_of(&a, &keys);
	}
	/* any two 4-tuples share a slot one time in 65536: 4096 pairs, 0.06 on average */
	assert_true(same_slot <= 4);

	/* on the wire: both SYNs recorded, each in its own slot (the first crafted address whose
	 * slot is not the first's, as 65535 in 65536 are) */
	do
		b.src = crafted_v6(other, base, (__u32)n);
	while (slot_of(&b, &keys) == slot_of(&a, &keys) && ++n < 16);
	b.seq = 7001;
	assert_int_equal(xdp(f, &a).ret, XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_PASS);
	assert_int_equal(pending_of(f, &a, &h), 1);
	assert_int_equal(h.client_isn, a.seq);
	assert_int_equal(pending_of(f, &b, &h), 1);
	assert_int_equal(h.client_isn, b.seq);
}

/* Two 4-tuples on one handshake slot (an attacker's forged SYNs can land on a real client's):
 * the first one's young record stands, so the second's SYN is admitted but unrecorded (still
 * counted as a handshake under way, a count that lapses with the window), its retransmit
 * decided again, and the first handshake completes and ends exactly. Once a record has held
 * its slot for SLUICE_HS_SLOT_HOLD_NS, the next SYN on the slot replaces it, and gives back no
 * count from a window that lapsed (it would be another SYN's). */
static void handshake_slot_shared_by_two_4tuples(struct fixture *f)
{
	struct sluice_handshake h;
	struct sluice_hash_keys keys = hash_keys(f);
	struct pkt_spec a = syn4("198.18.1.6", 4001, 5432), b = syn_on_slot_of(&a, &keys);

	assert_int_equal(xdp(f, &a).ret, XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 2);
	assert_int_equal(pending_of(f, &a, &h), 1);
	assert_int_equal(h.client_isn, a.seq);
	assert_int_equal(pending_of(f, &b, &h), 0);
	assert_int_equal(in_window(halfopen_count(f, 0)), 2);
	/* b's retransmit has no record to be known by: decided again (admitted: room) */
	assert_int_equal(xdp(f, &b).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 3);
	assert_int_equal(in_window(halfopen_count(f, 0)), 3);
	assert_int_equal(pending_of(f, &a, &h), 1);
	struct pkt_spec asa = synack_of(&a), aack = client_seg(&a), afin = client_seg(&a);
	tc_egress(f, &asa);
	xdp(f, &aack);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(pending_of(f, &a, &h), 0);
	assert_int_equal(in_window(halfopen_count(f, 0)), 2); /* b's two */
	afin.fin = 1;
	xdp(f, &afin);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(stats(f, 0, 0).completed, 1);

	/* a record no longer young gives way to another 4-tuple's SYN (its count lapsed with
	 * its window) */
	struct pkt_spec c = syn4("198.18.1.6", 4002, 5432), d = syn_on_slot_of(&c, &keys);

	assert_int_equal(xdp(f, &c).ret, XDP_PASS);
	assert_int_equal(in_window(halfopen_count(f, 0)), 3);
	/* c's record 2 s old: it still holds its slot */
	age_pending(f, &c, 2000000000ull);
	assert_int_equal(xdp(f, &d).ret, XDP_PASS);
	assert_int_equal(pending_of(f, &c, &h), 1);
	assert_int_equal(pending_of(f, &d, &h), 0);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	/* 4 s old: it gives way; the new window's count is d's alone */
	age_pending(f, &c, 2000000000ull);
	assert_int_equal(xdp(f, &d).ret, XDP_PASS);
	assert_int_equal(pending_of(f, &c, &h), 0);
	assert_int_equal(pending_of(f, &d, &h), 1);
	assert_int_equal(h.client_isn, d.seq);
	assert_int_equal(in_window(halfopen_count(f, 0)), 1);
	struct pkt_spec dsa = synack_of(&d);
	tc_egress(f, &dsa);
	complete_and_close(f, &d, 2);
	assert_int_equal(in_window(halfopen_count(f, 0)), 0);
	assert_int_equal(inflight_total(f, 0), 0);
}

static void test_handshake_slot_shared_by_two_4tuples(void **state)
{
	within_window(state, setup, handshake_slot_shared_by_two_4tuples);
}

/* ---- half-open counts given back ----
 * Each path that ends an admitted handshake's record gives its count back while the count's
 * window is current; these tests run each of them inside that window (within_window) and
 * read the counts exactly, so that a give-back that did not happen shows as a count left
 * over, not as a window that lapsed meanwhile. */

static struct sluice_flow flow_of(struct fixture *f, const struct pkt_spec *syn);

/* The service's half-open counts read raw, asserted only in the run's window. */
static void expect_halfopen(struct fixture *f, int svc, int count, int fresh)
{
	struct sluice_halfopen h = halfopen_of(f, svc);

	assert_int_equal(in_window(h.count), count);
	assert_int_equal(h.fresh, fresh);
}

/* A handshake that completes gives its count back at once and counts on as a fresh
 * connection (SLUICE_OWN_PENDING on its flow) until its client's first data: completed by
 * the client's ACK (XDP), or by the server's own first segment when that ACK is not seen
 * (TC egress). Each takes exactly its own count (the others still pending keep theirs), the
 * window is the one they were counted in (not lapsed and started afresh), and a second copy
 * of the proof gives nothing back twice. */
static void completed_handshake_gives_its_count_back(struct fixture *f)
{
	struct pkt_spec a = syn4("198.18.1.20", 5001, 5432), b = syn4("198.18.1.20", 5002, 5432);
	struct pkt_spec c = syn4("198.18.1.20", 5003, 5432);
	struct pkt_spec asa = synack_of(&a), aack = client_seg(&a), aq = client_query(&a);
	struct pkt_spec bsa = synack_of(&b), greet = server_reply(&b, 0, 5);
	unsigned long long since;

	assert_int_equal(xdp(f, &a).ret, XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_PASS);
	assert_int_equal(xdp(f, &c).ret, XDP_PASS);
	since = halfopen_of(f, 0).since_ns;
	expect_halfopen(f, 0, 3, 0);
	tc_egress(f, &asa);
	expect_halfopen(f, 0, 3, 0);             /* a SYN-ACK completes nothing */

	xdp(f, &aack);                           /* a: the client's ACK */
	expect_halfopen(f, 0, 2, 1);
	assert_int_equal(flow_count(f), 1);
	assert_true(flow_of(f, &a).req_active & SLUICE_OWN_PENDING);
	xdp(f, &aack);                           /* its copy: no record left, nothing more */
	expect_halfopen(f, 0, 2, 1);

	tc_egress(f, &bsa);
	tc_egress(f, &greet);                    /* b: the server's first segment */
	expect_halfopen(f, 0, 1, 2);
	assert_int_equal(flow_count(f), 2);
	assert_true(flow_of(f, &b).req_active & SLUICE_OWN_PENDING);
	tc_egress(f, &greet);
	expect_halfopen(f, 0, 1, 2);
	assert_int_equal(halfopen_of(f, 0).since_ns, since);

	xdp(f, &aq);                             /* a's first data: busy now, not fresh */
	tc_ingress(f, &aq);
	expect_halfopen(f, 0, 1, 1);
	assert_false(flow_of(f, &a).req_active & SLUICE_OWN_PENDING);
	assert_int_equal(busy_total(f, 0), 1);
	assert_int_equal(inflight_total(f, 0), 2);
	assert_int_equal(stats(f, 0, 0).untracked, 0);
}

static void test_completed_handshake_gives_its_count_back(void **state)
{
	within_window(state, setup, completed_handshake_gives_its_count_back);
}

/* A handshake that ends before it completes gives its count back: the client's RST or FIN at
 * its ISN + 1 (client_end, XDP), the server's RST (no listener) or FIN (server_handshake, TC
 * egress). Each takes its own count and no other: five pending, one less at each end, and
 * the last one's completion takes the last. A client RST or FIN outside its window, or a
 * copy of an end that came already, takes nothing. */
static void ended_handshake_gives_its_count_back(struct fixture *f)
{
	struct pkt_spec s[5];

	for (int i = 0; i < 5; i++) {
		s[i] = syn4("198.18.1.21", (uint16_t)(5101 + i), 5432);
		assert_int_equal(xdp(f, &s[i]).ret, XDP_PASS);
	}
	expect_halfopen(f, 0, 5, 0);

	/* s[0]: the client's RST at its ISN + 1; one guessed elsewhere first */
	struct pkt_spec crst = client_seg(&s[0]);
	crst.rst = 1, crst.ackf = 0, crst.ack = 0;
	crst.seq += SLUICE_SEQ_WINDOW + 1;
	xdp(f, &crst);
	expect_halfopen(f, 0, 5, 0);
	crst.seq = s[0].seq + 1;
	xdp(f, &crst);
	expect_halfopen(f, 0, 4, 0);
	xdp(f, &crst);
	expect_halfopen(f, 0, 4, 0);

	/* s[1]: the client's FIN, after the SYN-ACK */
	struct pkt_spec sa1 = synack_of(&s[1]), cfin = idle_fin(&s[1]);
	tc_egress(f, &sa1);
	cfin.seq -= SLUICE_SEQ_WINDOW + 1;
	xdp(f, &cfin);
	expect_halfopen(f, 0, 4, 0);
	cfin.seq = s[1].seq + 1;
	xdp(f, &cfin);
	expect_halfopen(f, 0, 3, 0);

	/* s[2]: the server's RST (no listener) */
	struct pkt_spec srst = synack_of(&s[2]);
	srst.syn = 0, srst.rst = 1, srst.seq = 0, srst.tcp_opts = 0;
	tc_egress(f, &srst);
	expect_halfopen(f, 0, 2, 0);
	tc_egress(f, &srst);
	expect_halfopen(f, 0, 2, 0);

	/* s[3]: the server's FIN after its SYN-ACK, before the client's ACK */
	struct pkt_spec sa3 = synack_of(&s[3]), sfin = server_reply(&s[3], 0, 0);
	sfin.psh = 0, sfin.fin = 1;
	tc_egress(f, &sa3);
	tc_egress(f, &sfin);
	expect_halfopen(f, 0, 1, 0);

	for (int i = 0; i < 4; i++) {
		struct sluice_handshake h;
		assert_int_equal(pending_of(f, &s[i], &h), 0);
	}
	assert_int_equal(flow_count(f), 0);
	/* s[4] completes: the last count goes, to its fresh connection */
	struct pkt_spec sa4 = synack_of(&s[4]), ack4 = client_seg(&s[4]);
	tc_egress(f, &sa4);
	xdp(f, &ack4);
	expect_halfopen(f, 0, 0, 1);
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(inflight_total(f, 0), 1);
}

static void test_ended_handshake_gives_its_count_back(void **state)
{
	within_window(state, setup, ended_handshake_gives_its_count_back);
}

/* A record the server's SYN-ACK restamps for another ISN (the server took a SYN let through
 * undecided while the record stood) keeps its count while that count's window is current,
 * and its completion gives it back; once that window lapsed, the restamped record holds no
 * count: its completion, stamped now, must not take one from the window running now (another
 * SYN's). */
static void restamped_handshake_gives_back_its_own_count_only(struct fixture *f)
{
	struct sluice_handshake h;

	/* In the window: the record's SYN never answered, another ISN answered instead. */
	struct pkt_spec s = syn4("198.18.1.22", 5201, 5432), x = syn4("198.18.1.22", 5202, 5432);
	struct pkt_spec other = s;
	other.seq = s.seq + 0x11111111u;
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	assert_int_equal(xdp(f, &x).ret, XDP_PASS);
	assert_int_equal(xdp(f, &other).ret, XDP_PASS); /* the record stands: undecided */
	assert_int_equal(stats(f, 0, 0).admitted, 2);
	expect_halfopen(f, 0, 2, 0);
	struct pkt_spec osa = synack_of(&other), oack = client_seg(&other);
	osa.seq += 1000, oack.ack = osa.seq + 1;
	tc_egress(f, &osa);
	assert_int_equal(pending_of(f, &s, &h), 1);
	assert_int_equal(h.client_isn, other.seq);
	assert_int_equal(h.server_isn, osa.seq);
	expect_halfopen(f, 0, 2, 0);
	/* after expect_halfopen, whose in_window tells whether h was read within the window */
	assert_true(h.flags & SLUICE_HS_COUNTED);
	xdp(f, &oack);
	expect_halfopen(f, 0, 1, 1);
	assert_true(flow_of(f, &s).req_active & SLUICE_OWN_PENDING);
	assert_int_equal(flow_of(f, &s).syn_seq, other.seq);

	/* Lapsed: t's record, answered by the server, 2 s old with its window; u's SYN starts
	 * the window running now. */
	struct pkt_spec t = syn4("198.18.1.23", 5301, 5432), u = syn4("198.18.1.23", 5302, 5432);
	struct pkt_spec tsa = synack_of(&t), fresh = t;
	fresh.seq = t.seq + 0x22222222u;
	assert_int_equal(xdp(f, &t).ret, XDP_PASS);
	tc_egress(f, &tsa);
	age_pending(f, &t, 2000000000ull);
	assert_int_equal(xdp(f, &u).ret, XDP_PASS);
	expect_halfopen(f, 0, 1, 0);             /* u's alone */
	assert_int_equal(xdp(f, &fresh).ret, XDP_PASS); /* t's record stands: undecided */
	struct pkt_spec fsa = synack_of(&fresh), fack = client_seg(&fresh);
	fsa.seq += 1000, fack.ack = fsa.seq + 1;
	tc_egress(f, &fsa);
	assert_int_equal(pending_of(f, &t, &h), 1);
	assert_int_equal(h.client_isn, fresh.seq);
	assert_false(h.flags & SLUICE_HS_COUNTED);
	xdp(f, &fack);
	expect_halfopen(f, 0, 1, 0);             /* still u's */
	assert_false(flow_of(f, &t).req_active & SLUICE_OWN_PENDING);
	assert_int_equal(inflight_total(f, 0), 2);
}

static void test_restamped_handshake_gives_back_its_own_count_only(void **state)
{
	within_window(state, setup, restamped_handshake_gives_back_its_own_count_only);
}

/* A handshake completing while the flow table is full (4 entries here) is admitted
 * untracked: its count is given back all the same, and the fresh count its promotion took is
 * given back with the failed insert (no flow will ever carry SLUICE_OWN_PENDING for it). */
static void untracked_completion_gives_its_counts_back(struct fixture *f)
{
	connect_ports(f, "198.18.1.24", 4);
	assert_int_equal(flow_count(f), 4);
	expect_halfopen(f, 0, 0, 0);
	struct pkt_spec a = syn4("198.18.1.24", 5, 5432), b = syn4("198.18.1.24", 6, 5432);
	assert_int_equal(xdp(f, &a).ret, XDP_PASS);
	assert_int_equal(xdp(f, &b).ret, XDP_PASS);
	expect_halfopen(f, 0, 2, 0);
	struct pkt_spec asa = synack_of(&a), aack = client_seg(&a);
	tc_egress(f, &asa);
	xdp(f, &aack);
	assert_int_equal(stats(f, 0, 0).untracked, 1);
	assert_int_equal(flow_count(f), 4);
	assert_int_equal(inflight_total(f, 0), 4);
	expect_halfopen(f, 0, 1, 0);
}

static void test_untracked_completion_gives_its_counts_back(void **state)
{
	within_window(state, setup_small_table, untracked_completion_gives_its_counts_back);
}

/* A handshake counted in a window that lapsed gives nothing back when it ends, whichever way:
 * replaced by its client's SYN with another ISN (dead: never answered within a second), reset
 * by its client or by the server, or completed (then not fresh either). What the counts hold
 * then is the window running now, another SYN's, which none of them may take. */
static void lapsed_handshake_gives_back_nothing(struct fixture *f)
{
	struct pkt_spec t[4], u = syn4("198.18.1.26", 5410, 5432);
	struct sluice_handshake h;

	for (int i = 0; i < 4; i++) {
		t[i] = syn4("198.18.1.26", (uint16_t)(5401 + i), 5432);
		assert_int_equal(xdp(f, &t[i]).ret, XDP_PASS);
	}
	struct pkt_spec sa3 = synack_of(&t[3]);
	tc_egress(f, &sa3);
	expect_halfopen(f, 0, 4, 0);
	for (int i = 0; i < 4; i++)
		age_pending(f, &t[i], 2000000000ull);
	assert_int_equal(xdp(f, &u).ret, XDP_PASS);
	expect_halfopen(f, 0, 1, 0);             /* u's window */

	struct pkt_spec again = t[0];            /* t[0]'s client starts afresh */
	again.seq = t[0].seq + 0x44444444u;
	assert_int_equal(xdp(f, &again).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).admitted, 6);
	assert_int_equal(pending_of(f, &t[0], &h), 1);
	assert_int_equal(h.client_isn, again.seq);
	expect_halfopen(f, 0, 2, 0);             /* u's and again's */

	struct pkt_spec crst = client_seg(&t[1]);
	crst.rst = 1, crst.ackf = 0, crst.ack = 0;
	xdp(f, &crst);
	assert_int_equal(pending_of(f, &t[1], &h), 0);
	expect_halfopen(f, 0, 2, 0);

	struct pkt_spec srst = synack_of(&t[2]);
	srst.syn = 0, srst.rst = 1, srst.seq = 0, srst.tcp_opts = 0;
	tc_egress(f, &srst);
	assert_int_equal(pending_of(f, &t[2], &h), 0);
	expect_halfopen(f, 0, 2, 0);

	struct pkt_spec ack3 = client_seg(&t[3]);
	xdp(f, &ack3);
	assert_int_equal(pending_of(f, &t[3], &h), 0);
	assert_int_equal(inflight_total(f, 0), 1);
	assert_false(flow_of(f, &t[3]).req_active & SLUICE_OWN_PENDING);
	expect_halfopen(f, 0, 2, 0);
}

static void test_lapsed_handshake_gives_back_nothing(void **state)
{
	within_window(state, setup, lapsed_handshake_gives_back_nothing);
}

/* ---- fail-safe verdicts ---- */

/* A verdict never written (all zero) admits everything: no threshold, no shedding, breaker
 * closed, no switch. */
static void test_all_zero_verdict_admits(void **state)
{
	struct fixture *f = *state;
	struct sluice_verdict zero;

	memset(&zero, 0, sizeof(zero));
	assert_int_equal(maps_write_verdict(&f->m, f->idx[0], &zero), 0);
	for (uint16_t p = 1; p <= 40; p++) {
		struct pkt_spec s = syn4(p % 2 ? "203.0.113.9" : "198.18.7.1", p, 5432); /* L3, L2 */
		assert_int_equal(connect_(f, &s), XDP_PASS);
	}
	assert_int_equal(inflight_total(f, 0), 40);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		for (int r = 0; r < SLUICE_REJ_REASONS; r++)
			assert_int_equal(stats(f, 0, c).rejected[r], 0);
	assert_int_equal(stats(f, 0, 3).fail_open, 0); /* admitted by the verdict, not fail-open */
	for (uint16_t p = 1; p <= 40; p++) {
		struct pkt_spec s = syn4(p % 2 ? "203.0.113.9" : "198.18.7.1", p, 5432);
		answered_then_fin(f, &s);
	}
	assert_int_equal(inflight_total(f, 0), 0);
}

/* A service given a slot another service used before starts from a zero verdict (admit),
 * written before its port is published: never the old service's, breaker open included. */
static void test_reused_slot_never_inherits_a_verdict(void **state)
{
	struct fixture *f = *state;
	struct sluice_config next;
	struct doc_errors errs;
	int idx[SLUICE_MAX_SERVICES];
	char text[4096];

	/* Every free slot once belonged to a removed service whose breaker is open. */
	for (int s = 0; s < f->m.n_slots; s++) {
		struct sluice_service sv;
		struct sluice_verdict v;

		if (maps_read_service(&f->m, s, &sv) == 0 && sv.name[0])
			continue;
		memset(&sv, 0, sizeof(sv));
		snprintf(sv.name, sizeof(sv.name), "gone%d", s);
		assert_int_equal(bpf_map_update_elem(f->m.services, &(__u32){ (__u32)s }, &sv, BPF_ANY), 0);
		verdict_default(&f->cfg.services[0], 4, &v);
		v.breaker_state = SLUICE_BREAKER_OPEN;
		assert_int_equal(maps_write_verdict(&f->m, s, &v), 0);
	}
	snprintf(text, sizeof(text), "%s  - name: fresh\n    port: 9000\n    protocol: tcp\n"
		 "    limit: { fixed: 2 }\n    default_class: L0\n", CONFIG);
	assert_int_equal(sluice_config_parse(text, strlen(text), "test", &next, &errs), 0);
	assert_int_equal(maps_assign_indices(&f->m, &next, idx), 0);
	int fresh = idx[next.n_services - 1];
	for (int i = 0; i < f->cfg.n_services; i++)
		assert_int_not_equal(fresh, f->idx[i]);
	assert_int_equal(maps_program_services(&f->m, &next, idx), 0);
	struct sluice_verdict v;
	assert_int_equal(maps_read_verdict(&f->m, fresh, &v), 0);
	assert_int_equal(v.breaker_state, SLUICE_BREAKER_CLOSED);
	struct pkt_spec s = syn4("198.18.1.2", 1, 9000);
	assert_int_equal(connect_(f, &s), XDP_PASS);
	/* The services that kept their slots kept their verdicts. */
	assert_int_equal(maps_read_verdict(&f->m, f->idx[0], &v), 0);
	assert_int_not_equal(v.class_threshold[0], 0);
}

/* A service given a removed service's slot meets none of its client limits' state: the
 * removed service's token bucket ran its client's arrival time up to burst / rate seconds
 * ahead, which refused the new service's first connection from that client, a unit it never
 * admitted. A client entry that still counts a unit open stays, for its flow to give it back.
 * Nor does it meet the classes the removed service gave its clients' requests. */
static void test_reused_slot_never_inherits_a_client_bucket(void **state)
{
	struct fixture *f = *state;
	struct sluice_config next;
	struct doc_errors errs;
	int idx[SLUICE_MAX_SERVICES];
	char text[4096];
	const char *cut = strstr(CONFIG, "  - name: metered\n"), *rest = strstr(CONFIG, "  - name: pool\n");
	struct sluice_client_key held = { .svc = (__u32)f->idx[3] };
	struct sluice_client c = { .in_flight = 1, .tat_ns = monotonic_ns() + 60000000000ull }, got;

	/* the metered service's client spends its burst; its connections end */
	for (uint16_t p = 1; p <= 2; p++) {
		struct pkt_spec s = syn4("198.18.1.2", p, 7001);
		assert_int_equal(connect_(f, &s), XDP_PASS);
		answered_then_fin(f, &s);
	}
	/* another of its clients still has a connection open (counted, as by a cap) */
	held.addr[10] = held.addr[11] = 0xff;
	held.addr[12] = 198, held.addr[13] = 18, held.addr[14] = 1, held.addr[15] = 3;
	assert_int_equal(bpf_map_update_elem(f->m.clients, &held, &c, BPF_ANY), 0);
	/* and the class its requests were given, which an http SYN of the address is judged by
	 * for a minute; another service's stays */
	struct sluice_addr_class ac = { .seen_ns = monotonic_ns(), .class = 0 }, acgot;
	struct sluice_client_key other = held;
	other.svc = (__u32)f->idx[0];
	assert_int_equal(bpf_map_update_elem(f->m.addr_class, &held, &ac, BPF_ANY), 0);
	assert_int_equal(bpf_map_update_elem(f->m.addr_class, &other, &ac, BPF_ANY), 0);
	/* every never-named slot taken by a removed service with a unit still open: the new
	 * service can only have metered's */
	for (int s = 0; s < f->m.n_slots; s++) {
		struct sluice_service sv;
		struct sluice_inflight b = { .total = 1 };

		if (maps_read_service(&f->m, s, &sv) == 0 && sv.name[0])
			continue;
		memset(&sv, 0, sizeof(sv));
		snprintf(sv.name, sizeof(sv.name), "gone%d", s);
		assert_int_equal(bpf_map_update_elem(f->m.services, &(__u32){ (__u32)s }, &sv, BPF_ANY), 0);
		b.cls[0] = 1;
		assert_int_equal(bpf_map_update_elem(f->m.busy, &(__u32){ (__u32)s }, &b, BPF_ANY), 0);
	}
	snprintf(text, sizeof(text), "%.*s%s  - name: fresh\n    port: 9000\n    protocol: tcp\n"
		 "    limit: { fixed: 100 }\n    default_class: L0\n"
		 "    client_limit: { rate: 1, burst: 2 }\n", (int)(cut - CONFIG), CONFIG, rest);
	assert_int_equal(sluice_config_parse(text, strlen(text), "test", &next, &errs), 0);
	assert_int_equal(maps_assign_indices(&f->m, &next, idx), 0);
	assert_int_equal(idx[next.n_services - 1], f->idx[3]);
	assert_int_equal(maps_program_services(&f->m, &next, idx), 0);
	set_heartbeat(f, 0);
	struct pkt_spec s = syn4("198.18.1.2", 3, 9000);
	assert_int_equal(connect_(f, &s), XDP_PASS);
	assert_int_equal(bpf_map_lookup_elem(f->m.clients, &held, &got), 0);
	assert_int_equal(got.in_flight, 1);
	assert_int_not_equal(bpf_map_lookup_elem(f->m.addr_class, &held, &acgot), 0);
	assert_int_equal(bpf_map_lookup_elem(f->m.addr_class, &other, &acgot), 0);
	sluice_config_free(&next);
}

static struct sluice_port_bits port_bits(struct fixture *f)
{
	struct sluice_port_bits b;
	assert_int_equal(bpf_map_lookup_elem(f->m.service_ports, &(__u32){ 0 }, &b), 0);
	return b;
}

static int port_bit(const struct sluice_port_bits *b, unsigned port)
{
	return (int)(b->word[port / 64] >> (port % 64) & 1);
}

static int bits_set(const struct sluice_port_bits *b)
{
	int n = 0;
	for (int w = 0; w < SLUICE_PORT_WORDS; w++)
		n += __builtin_popcountll(b->word[w]);
	return n;
}

/* The bitmap in front of port_to_service holds exactly the configured ports, follows a reload
 * both ways, is what the data path asks first, and where the array cannot be read says "ask
 * the array" for every port. */
static void test_port_bits_follow_the_ports(void **state)
{
	struct fixture *f = *state;
	struct sluice_config next;
	struct doc_errors errs;
	int idx[SLUICE_MAX_SERVICES];
	char text[4096];
	struct sluice_port_bits b = port_bits(f), zero;

	for (int i = 0; i < f->cfg.n_services; i++)
		assert_true(port_bit(&b, (unsigned)f->cfg.services[i].port));
	assert_int_equal(bits_set(&b), f->cfg.n_services);
	assert_false(port_bit(&b, 80));
	assert_false(port_bit(&b, 9000));

	/* Not in the bitmap: a packet to a service's port is left alone, however the array
	 * reads. Derived again from the array: judged again. */
	memset(&zero, 0, sizeof(zero));
	assert_int_equal(bpf_map_update_elem(f->m.service_ports, &(__u32){ 0 }, &zero, BPF_ANY), 0);
	__u64 before = stats(f, 0, 0).arrivals;
	struct pkt_spec s = syn4("198.18.1.2", 41000, 5432);
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).arrivals, before);
	assert_int_equal(maps_derive_port_bits(f->m.port_to_service, f->m.service_ports), 0);
	b = port_bits(f);
	assert_int_equal(bits_set(&b), f->cfg.n_services);
	s = syn4("198.18.1.2", 41001, 5432);
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	assert_int_equal(stats(f, 0, 0).arrivals, before + 1);

	/* A reload down to one service and a new port: the others' bits go, the new one's
	 * comes, and its SYN is judged. */
	snprintf(text, sizeof(text), "interface: lo\nservices:\n  - name: db\n    port: 5432\n"
		 "    protocol: tcp\n    limit: { fixed: 4 }\n  - name: fresh\n    port: 9000\n"
		 "    protocol: tcp\n    limit: { fixed: 2 }\n    default_class: L0\n");
	assert_int_equal(sluice_config_parse(text, strlen(text), "test", &next, &errs), 0);
	assert_int_equal(maps_assign_indices(&f->m, &next, idx), 0);
	assert_int_equal(maps_program_services(&f->m, &next, idx), 0);
	b = port_bits(f);
	assert_int_equal(bits_set(&b), 2);
	assert_true(port_bit(&b, 5432));
	assert_true(port_bit(&b, 9000));
	assert_false(port_bit(&b, 6000));
	struct sluice_class_stats st;
	assert_int_equal(maps_read_class_stats(&f->m, idx[1], 0, &st), 0);
	s = syn4("198.18.1.2", 41002, 9000);
	assert_int_equal(xdp(f, &s).ret, XDP_PASS);
	before = st.arrivals;
	assert_int_equal(maps_read_class_stats(&f->m, idx[1], 0, &st), 0);
	assert_int_equal(st.arrivals, before + 1);

	/* The array unreadable: every bit set, never a service's port missing. */
	assert_int_not_equal(maps_derive_port_bits(-1, f->m.service_ports), 0);
	b = port_bits(f);
	assert_int_equal(bits_set(&b), 65536);
}

static int always_open(void *ctx, const struct sluice_flow_key *k)
{
	return 1;
}

static void test_gc_reclaims_silent_flows(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 200, 5432), b = syn4("198.18.1.2", 201, 5432);
	struct pkt_spec c = syn4("198.18.1.2", 202, 5432);

	connect_(f, &a);
	connect_(f, &b);
	connect_(f, &c);
	/* The server speaks on c: established on its side too. a and b it never answered. */
	struct pkt_spec greet = synack_of(&c);
	greet.syn = 0, greet.tcp_opts = 0, greet.seq += 1, greet.payload = "hi", greet.payload_len = 2;
	tc_egress(f, &greet);
	assert_int_equal(inflight_total(f, 0), 3);
	/* Nothing is old yet. */
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns(), 30000000000ull, 600000000000ull,
				       NULL, NULL), 0);
	/* Old, but the kernel still has the connections: kept. */
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 31000000000ull, 30000000000ull,
				       600000000000ull, always_open, NULL), 0);
	assert_int_equal(inflight_total(f, 0), 3);
	/* 31 s later the two the server never spoke on are reclaimed (syn_timeout), c is not. */
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 31000000000ull, 30000000000ull,
				       600000000000ull, NULL, NULL), 2);
	assert_int_equal(inflight_total(f, 0), 1);
	/* 601 s later c is silent too: in-flight back to 0, exactly. */
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 601000000000ull, 30000000000ull,
				       600000000000ull, NULL, NULL), 1);
	assert_int_equal(inflight_total(f, 0), 0);
	/* A late FIN for a reclaimed flow changes nothing. */
	struct pkt_spec fin = client_fin(&a);
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 0), 0);
}

/* ---- tcp turns: latency samples and busy connections ---- */

static struct sluice_flow flow_of(struct fixture *f, const struct pkt_spec *syn)
{
	struct sluice_flow_key k = key_of_syn(syn);
	struct sluice_flow v;

	assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &v), 0);
	return v;
}

/* The connection's first turn has passed (SLUICE_FLOW_TURNED): the tests of request turns
 * start from there. */
static void set_turned(struct fixture *f, const struct pkt_spec *syn)
{
	struct sluice_flow_key k = key_of_syn(syn);
	struct sluice_flow v;

	assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &v), 0);
	v.flags |= SLUICE_FLOW_TURNED;
	assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &v, BPF_EXIST), 0);
}

static struct sluice_hist hist(struct fixture *f, int svc, int cls)
{
	struct sluice_hist h;
	assert_int_equal(maps_read_hist(&f->m, f->idx[svc], cls, &h), 0);
	return h;
}

static unsigned long long samples(const struct sluice_hist *h)
{
	unsigned long long n = 0;
	for (int b = 0; b < SLUICE_HIST_BUCKETS; b++)
		n += h->bucket[b];
	return n;
}

static long long busy_cls(struct fixture *f, int svc, int cls)
{
	struct sluice_inflight in;
	assert_int_equal(maps_read_busy(&f->m, f->idx[svc], &in), 0);
	return in.cls[cls];
}

/* A tcp connection the local stack holds established, whose handshake sluice never saw (open
 * before the attach, or its record pushed out by a SYN flood): its client's next query takes it
 * on, as if its handshake completed then (the connection's slot, in the class its SYN would
 * have had: 127.0.0.1 has no rule, so the default L3), and opens a turn; the reply ends the
 * turn, the client's FIN the connection. A query at any other sequence number takes nothing on. */
static void test_established_tcp_connection_adopted(void **state)
{
	struct fixture *f = *state;
	struct live_conn c = live_connection(5432);
	struct pkt_spec q = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = c.cport, .dport = 5432,
			      .seq = c.rcv_nxt + 200000, .ack = c.snd_nxt, .ackf = 1, .psh = 1,
			      .payload = QUERY, .payload_len = QLEN };
	struct pkt_spec r = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = 5432, .dport = c.cport,
			      .seq = c.snd_nxt, .ack = c.rcv_nxt + QLEN, .ackf = 1, .psh = 1,
			      .payload = "ok\n", .payload_len = 3 };
	struct pkt_spec fin = q;

	tc_ingress(f, &q);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(inflight_total(f, 0), 0);
	q.seq = c.rcv_nxt;
	tc_ingress(f, &q);
	/* ... and the query really reaches the server's socket (its rcv_nxt moves past it) */
	assert_int_equal(write(c.cli, QUERY, QLEN), (ssize_t)QLEN);
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(inflight_total(f, 0), 1);       /* the open connection */
	assert_int_equal(busy_cls(f, 0, 3), 1);           /* its turn */
	tc_egress(f, &r);
	assert_int_equal(busy_total(f, 0), 0);
	/* not held back as a setup turn: the connection's setup was long before */
	struct sluice_hist h = hist(f, 0, 3);
	assert_int_equal(samples(&h), 1);
	fin.seq = c.rcv_nxt + QLEN, fin.ack = c.snd_nxt + 3, fin.fin = 1, fin.psh = 0;
	fin.payload = NULL, fin.payload_len = 0;
	xdp(f, &fin);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(inflight_total(f, 0), 0);
	assert_int_equal(stats(f, 0, 3).untracked, 0);
	live_close(&c);
}

/* A client that sends bytes its server's stack throws away (an ack of data never sent, a bad
 * checksum: sluice sees them before the stack judges them) has sluice follow it past where it
 * really is; its next query, at the byte the server still expects, opens a turn all the same
 * (or every turn of a client that always did so was out of the busy count and the samples).
 * A query behind that at another byte, which the server has, opens none. */
static void test_turn_behind_discarded_bytes_opens(void **state)
{
	struct fixture *f = *state;
	struct live_conn c = live_connection(5432);
	struct pkt_spec q = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = c.cport, .dport = 5432,
			      .seq = c.rcv_nxt, .ack = c.snd_nxt, .ackf = 1, .psh = 1,
			      .payload = QUERY, .payload_len = QLEN };
	struct pkt_spec r = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = 5432, .dport = c.cport,
			      .seq = c.snd_nxt, .ack = c.rcv_nxt + QLEN, .ackf = 1, .psh = 1,
			      .payload = "ok\n", .payload_len = 3 };
	struct pkt_spec junk;
	char pad[200];

	tc_ingress(f, &q); /* taken on, its first turn */
	assert_int_equal(write(c.cli, QUERY, QLEN), (ssize_t)QLEN);
	tc_egress(f, &r);
	assert_int_equal(busy_total(f, 0), 0);
	/* bytes the server's stack drops: they ack data it never sent */
	memset(pad, 'z', sizeof(pad));
	junk = q;
	junk.seq = c.rcv_nxt + QLEN, junk.ack = c.snd_nxt + 100000;
	junk.payload = pad, junk.payload_len = sizeof(pad);
	tc_ingress(f, &junk);
	assert_int_equal(busy_total(f, 0), 1); /* sluice cannot tell yet: a turn */
	r.seq += 3, r.ack = c.rcv_nxt + QLEN;  /* the server's next data, acking none of it */
	tc_egress(f, &r);
	assert_int_equal(busy_total(f, 0), 0);
	/* the real query, at the byte the server expects: a turn */
	q.seq = c.rcv_nxt + QLEN, q.ack = c.snd_nxt + 6;
	tc_ingress(f, &q);
	assert_int_equal(busy_total(f, 0), 1);
	r.seq += 3, r.ack = c.rcv_nxt + 2 * QLEN;
	tc_egress(f, &r);
	assert_int_equal(busy_total(f, 0), 0);
	/* the first query again: the server has it, no turn */
	q.seq = c.rcv_nxt;
	tc_ingress(f, &q);
	assert_int_equal(busy_total(f, 0), 0);
	live_close(&c);
}

/* Connections sluice never saw the handshake of (open when sluiced attached, or whose SYN met
 * a slot another 4-tuple's record held, as under a flood of forged SYNs) count against their
 * client's cap once taken on at their data: 127.0.0.1 with three of them on "tenant" (cap 2)
 * is refused a fourth, and admitted again once they end. (Not counted, a flood that filled the
 * handshake slots let every client past its cap.) */
static void test_adopted_connections_count_against_the_client_cap(void **state)
{
	struct fixture *f = *state;
	struct live_conn c[3];
	struct pkt_spec syn = syn4("127.0.0.1", 1000, 7000);
	int lsn = live_listen(7000);

	for (int i = 0; i < 3; i++) {
		c[i] = live_connect(lsn, 7000);
		struct pkt_spec q = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = c[i].cport,
				      .dport = 7000, .seq = c[i].rcv_nxt, .ack = c[i].snd_nxt,
				      .ackf = 1, .psh = 1, .payload = QUERY, .payload_len = QLEN };
		tc_ingress(f, &q);
		/* the query reaches the server's socket too, and its answer ends the turn: the
		 * client's FIN below is then where the stack expects it, on an idle connection */
		assert_int_equal(write(c[i].cli, QUERY, QLEN), (ssize_t)QLEN);
		struct pkt_spec r = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = 7000,
				      .dport = c[i].cport, .seq = c[i].snd_nxt,
				      .ack = c[i].rcv_nxt + QLEN, .ackf = 1, .psh = 1,
				      .payload = "ok\n", .payload_len = 3 };
		tc_egress(f, &r);
	}
	assert_int_equal(flow_count(f), 3);
	assert_int_equal(inflight_total(f, 2), 3);
	assert_int_equal(xdp(f, &syn).ret, XDP_TX); /* at its cap: refused */
	assert_int_equal(stats(f, 2, 0).rejected[SLUICE_REJ_CLIENT_LIMIT], 1);
	for (int i = 0; i < 3; i++) {
		struct pkt_spec fin = { .src = "127.0.0.1", .dst = "127.0.0.1", .sport = c[i].cport,
					.dport = 7000, .seq = c[i].rcv_nxt + QLEN,
					.ack = c[i].snd_nxt, .ackf = 1, .fin = 1 };
		xdp(f, &fin);
		live_close(&c[i]);
	}
	close(lsn);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(inflight_total(f, 2), 0);
	syn.sport = 1001, syn.seq = 2001;
	assert_int_equal(xdp(f, &syn).ret, XDP_PASS); /* every count given back */
}

/* A query, a few ms, the reply: exactly one sample, in the bucket of (reply time - the turn's
 * start as the flow recorded it), and the flow busy exactly while the turn was open. */
static void test_turn_gives_one_sample_in_its_bucket(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 300, 5432); /* L0 */
	struct pkt_spec q = client_query(&a), r = server_reply(&a, 0, 20);

	assert_int_equal(connect_idle(f, &a), XDP_PASS);
	set_turned(f, &a);
	assert_int_equal(busy_total(f, 0), 0);
	assert_int_equal(inflight_total(f, 0), 1);   /* the open connection, for a cap */
	tc_ingress(f, &q);
	assert_int_equal(busy_total(f, 0), 1);
	assert_int_equal(busy_cls(f, 0, 0), 1);
	struct sluice_flow fl = flow_of(f, &a);
	assert_int_equal(fl.req_active & SLUICE_OWN_STATE, SLUICE_OWN_ACTIVE);
	usleep(3000);
	unsigned long long before = monotonic_ns();
	tc_egress(f, &r);
	unsigned long long after = monotonic_ns();
	assert_int_equal(busy_total(f, 0), 0);
	struct sluice_hist h = hist(f, 0, 0);
	assert_int_equal(samples(&h), 1);
	unsigned long long lo = (before - fl.req_start_ns) / 1000, hi = (after - fl.req_start_ns) / 1000;
	int b = -1;
	for (int i = 0; i < SLUICE_HIST_BUCKETS; i++)
		if (h.bucket[i])
			b = i;
	assert_true(lo >= 3000);
	assert_in_range(b, sluice_hist_bucket(lo), sluice_hist_bucket(hi));
	assert_in_range(h.sum_us, lo, hi);
	/* A turn is a measurement, not a unit: the connection alone completes (at its end). */
	assert_int_equal(stats(f, 0, 0).completed, 0);
	assert_int_equal(inflight_total(f, 0), 1);
}

/* A connection's first turn may be its setup (a database forking and authenticating, a TLS
 * handshake): busy while it lasts, but its sample is held back and dropped once a next turn
 * starts; the next turn gives its own, and the connection's end adds nothing. */
static void test_first_turn_is_setup(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 303, 5432);
	struct pkt_spec q = client_query(&a), r = server_reply(&a, 0, 10);

	assert_int_equal(connect_idle(f, &a), XDP_PASS);
	tc_ingress(f, &q);
	assert_int_equal(busy_total(f, 0), 1);
	tc_egress(f, &r);
	assert_int_equal(busy_total(f, 0), 0);
	struct sluice_hist h0 = hist(f, 0, 0);
	assert_int_equal(samples(&h0), 0);
	assert_true(flow_of(f, &a).flags & SLUICE_FLOW_TURNED);
	struct pkt_spec q2 = client_query(&a), r2 = server_reply(&a, 10, 10);
	q2.seq += QLEN, q2.ack += 10;
	tc_ingress(f, &q2);
	assert_int_equal(busy_total(f, 0), 1);
	tc_egress(f, &r2);
	assert_int_equal(busy_total(f, 0), 0);
	struct sluice_hist h1 = hist(f, 0, 0);
	assert_int_equal(samples(&h1), 1);
	struct pkt_spec fin = client_fin(&a);
	fin.seq += QLEN, fin.ack += 20;
	xdp(f, &fin);
	assert_int_equal(inflight_total(f, 0), 0);
	struct sluice_hist h2 = hist(f, 0, 0);
	assert_int_equal(samples(&h2), 1);
}

/* One request per connection: the single turn was the request, and the connection's end
 * gives its sample, in its bucket. */
static void test_single_turn_sample_at_the_end(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 304, 5432);
	struct pkt_spec q = client_query(&a), r = server_reply(&a, 0, 10);

	assert_int_equal(connect_idle(f, &a), XDP_PASS);
	tc_ingress(f, &q);
	unsigned long long start = flow_of(f, &a).req_start_ns;
	usleep(3000);
	unsigned long long before = monotonic_ns();
	tc_egress(f, &r);
	unsigned long long after = monotonic_ns();
	struct sluice_hist h0 = hist(f, 0, 0);
	assert_int_equal(samples(&h0), 0);
	struct pkt_spec fin = client_fin(&a);
	fin.ack += 10;
	xdp(f, &fin);
	struct sluice_hist h = hist(f, 0, 0);
	assert_int_equal(samples(&h), 1);
	assert_in_range(h.sum_us, (before - start) / 1000, (after - start) / 1000);
	assert_true(h.sum_us >= 3000);
}

/* Retransmitted client data (sequence not beyond what was seen), bare ACKs both ways and a
 * retransmitted server segment neither start nor end a turn. */
static void test_turn_ignores_retransmits_and_bare_acks(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 301, 5432);
	struct pkt_spec q = client_query(&a), r = server_reply(&a, 0, 10);

	connect_idle(f, &a);
	set_turned(f, &a);
	tc_ingress(f, &q);
	tc_egress(f, &r);
	assert_int_equal(busy_total(f, 0), 0);
	/* The query again (the server's ack was lost): no new turn. */
	tc_ingress(f, &q);
	xdp(f, &q);
	assert_int_equal(busy_total(f, 0), 0);
	/* The client's bare ACK of the reply: nothing. */
	struct pkt_spec ack = client_seg(&a);
	ack.seq += QLEN, ack.ack += 10;
	xdp(f, &ack);
	tc_ingress(f, &ack);
	assert_int_equal(busy_total(f, 0), 0);
	/* A second query opens a turn; the first reply resent does not end it, nor does a bare
	 * ACK of the server; the server's new data does. */
	struct pkt_spec q2 = client_query(&a);
	q2.seq += QLEN, q2.ack += 10;
	tc_ingress(f, &q2);
	assert_int_equal(busy_total(f, 0), 1);
	tc_egress(f, &r);
	struct pkt_spec sack = server_reply(&a, 10, 0);
	sack.payload = NULL, sack.psh = 0;
	tc_egress(f, &sack);
	assert_int_equal(busy_total(f, 0), 1);
	struct sluice_hist h1 = hist(f, 0, 0);
	assert_int_equal(samples(&h1), 1);
	struct pkt_spec r2 = server_reply(&a, 10, 10);
	tc_egress(f, &r2);
	assert_int_equal(busy_total(f, 0), 0);
	struct sluice_hist h = hist(f, 0, 0);
	assert_int_equal(samples(&h), 2);
	/* Data ahead of a gap (a segment the client has not reached, or a blind forger's) starts
	 * nothing either. */
	struct pkt_spec gap = client_query(&a);
	gap.seq += 3 * QLEN + 100;
	tc_ingress(f, &gap);
	assert_int_equal(busy_total(f, 0), 0);
}

/* A query in several segments is one turn; a reply streamed in many segments ends it on the
 * first: one sample. */
static void test_turn_many_segments_one_sample(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 302, 5432);

	connect_idle(f, &a);
	set_turned(f, &a);
	for (uint32_t i = 0; i < 3; i++) {
		struct pkt_spec q = client_query(&a);
		q.seq += i * QLEN;
		tc_ingress(f, &q);
		assert_int_equal(busy_total(f, 0), 1);
	}
	for (uint32_t i = 0; i < 6; i++) {
		struct pkt_spec r = server_reply(&a, i * 40, 40);
		tc_egress(f, &r);
		assert_int_equal(busy_total(f, 0), 0);
	}
	struct sluice_hist h = hist(f, 0, 0);
	assert_int_equal(samples(&h), 1);
}

/* Idle pooled connections hold no capacity: four idle L3 connections on a service whose L3
 * may have 2 busy, and a fifth is still admitted; two busy ones shut L3 until they are
 * answered. Open connections stay counted in `inflight` for a connection cap. */
static void test_idle_pooled_connections_hold_no_capacity(void **state)
{
	struct fixture *f = *state; /* db: fixed 4, L3 50 %: threshold 2 */
	struct pkt_spec c[6];

	for (uint16_t i = 0; i < 5; i++) {
		c[i] = syn4("203.0.113.9", (uint16_t)(310 + i), 5432); /* L3 */
		assert_int_equal(connect_idle(f, &c[i]), XDP_PASS);
	}
	assert_int_equal(busy_total(f, 0), 0);
	assert_int_equal(inflight_total(f, 0), 5);
	for (int i = 0; i < 2; i++) {
		struct pkt_spec q = client_query(&c[i]);
		tc_ingress(f, &q);
	}
	assert_int_equal(busy_cls(f, 0, 3), 2);
	c[5] = syn4("203.0.113.9", 316, 5432);
	assert_int_equal(xdp(f, &c[5]).ret, XDP_TX);
	for (int i = 0; i < 2; i++) {
		struct pkt_spec r = server_reply(&c[i], 0, 8);
		tc_egress(f, &r);
	}
	assert_int_equal(busy_total(f, 0), 0);
	c[5].seq += 7; /* a new attempt */
	assert_int_equal(xdp(f, &c[5]).ret, XDP_PASS);
}

/* Turns cut short by a client RST, a server RST or the GC give their busy count back exactly
 * once, with no sample; a client FIN (a half-close) cuts nothing short. */
static void test_busy_released_when_flows_end_mid_turn(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = syn4("198.18.1.2", 320, 5432), b = syn4("198.18.1.2", 321, 5432);
	struct pkt_spec c = syn4("198.18.2.2", 322, 5432); /* L2 */

	connect_(f, &a);
	connect_(f, &b);
	connect_(f, &c);
	assert_int_equal(busy_total(f, 0), 3);
	struct pkt_spec fin = client_fin(&a);
	xdp(f, &fin);                    /* a half-close: the turn still runs */
	assert_int_equal(busy_total(f, 0), 3);
	struct pkt_spec rst = client_rst(&a);
	xdp(f, &rst);
	assert_int_equal(busy_total(f, 0), 2);
	struct pkt_spec srst = server_reply(&b, 0, 0);
	srst.payload = NULL, srst.psh = 0, srst.rst = 1;
	tc_egress(f, &srst);
	assert_int_equal(busy_total(f, 0), 1);
	assert_int_equal(busy_cls(f, 0, 2), 1);
	assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 601 * 1000000000ull, 30000000000ull,
				       600000000000ull, NULL, NULL), 1);
	assert_int_equal(busy_total(f, 0), 0);
	assert_int_equal(busy_cls(f, 0, 2), 0);
	assert_int_equal(inflight_total(f, 0), 0);
	struct sluice_hist h0 = hist(f, 0, 0), h2 = hist(f, 0, 2);
	assert_int_equal(samples(&h0) + samples(&h2), 0);
}

/* Random conversations on many flows of several classes, against a model of who spoke last:
 * busy per class equals the model's open turns after every packet, samples equal the turns
 * the model closed, and after every flow ended (client FIN/RST, server FIN/RST, GC) busy is
 * exactly 0. */
static void test_turn_random_conversations_end_with_busy_zero(void **state)
{
	enum { NF = 12, STEPS = 4000 };
	struct fixture *f = *state;
	struct { struct pkt_spec syn; uint32_t cnext, snext, last_len, last_slen; int open, cls, live; } m[NF];
	const char *src[3] = { "198.18.1.7", "198.18.2.7", "203.0.113.7" }; /* L0, L2, L3 */
	const int cls_of[3] = { 0, 2, 3 };
	unsigned long long closed = 0, ended = 0, peak = 0;
	uint64_t rng = sluice_rng_seed(0x7c9);
	uint16_t next_port = 400;

	set_all_thresholds(f, 1000); /* every SYN admitted: the test is about turns */

	for (int step = 0; step < STEPS + NF; step++) {
		int i = (int)(sluice_rng_next(&rng) % NF), ev = (int)(sluice_rng_next(&rng) % 7);
		uint32_t len = 1 + (uint32_t)(sluice_rng_next(&rng) % 30);
		struct pkt_spec p;

		if (step == 0 || (step < STEPS && !m[i].live)) { /* (re)connect, idle */
			for (int j = step ? i : 0; j < (step ? i + 1 : NF); j++) {
				m[j].syn = syn4(src[j % 3], next_port++, 5432);
				m[j].cls = cls_of[j % 3];
				m[j].cnext = m[j].syn.seq + 1, m[j].snext = SERVER_ISN(m[j].syn.sport) + 1;
				m[j].open = 0, m[j].live = 1, m[j].last_len = m[j].last_slen = 0;
				assert_int_equal(connect_idle(f, &m[j].syn), XDP_PASS);
				set_turned(f, &m[j].syn);
			}
			continue;
		}
		if (step < STEPS && sluice_rng_next(&rng) % 100 == 0) /* now and then a flow ends */
			ev = 7 + (int)(sluice_rng_next(&rng) % 6);
		if (step >= STEPS) /* the end: every flow still live goes */
			i = step - STEPS, ev = 7 + (int)(sluice_rng_next(&rng) % 6);
		if (!m[i].live)
			continue;
		if (ev <= 6) {
			if (ev <= 2) { /* client: new data, a retransmit, or data ahead of a gap */
				p = client_query(&m[i].syn);
				p.payload = "0123456789012345678901234567890123456789", p.payload_len = len;
				p.ack = m[i].snext;
				p.seq = ev == 0 ? m[i].cnext : ev == 1 ? m[i].cnext - m[i].last_len : m[i].cnext + 50;
				if (ev == 1 && !m[i].last_len)
					continue;
				if (ev == 1)
					p.payload_len = m[i].last_len;
				xdp(f, &p);
				tc_ingress(f, &p);
				if (ev == 0) {
					m[i].cnext += len, m[i].last_len = len;
					m[i].open = 1;
				}
			} else if (ev == 3) { /* client bare ACK */
				p = client_seg(&m[i].syn);
				p.seq = m[i].cnext, p.ack = m[i].snext;
				xdp(f, &p);
				tc_ingress(f, &p);
			} else { /* server: new data, a retransmit of its last segment, a bare ACK */
				uint32_t off = m[i].snext - (SERVER_ISN(m[i].syn.sport) + 1);
				int resend = ev == 5 && m[i].last_slen;

				p = server_reply(&m[i].syn, resend ? off - m[i].last_slen : off,
						 ev == 6 ? 0 : resend ? m[i].last_slen : len);
				p.ack = m[i].cnext;
				if (ev == 6)
					p.payload = NULL, p.psh = 0;
				tc_egress(f, &p);
				if (ev == 4 || (ev == 5 && !resend)) {
					m[i].snext += len, m[i].last_slen = len;
					closed += m[i].open;
					m[i].open = 0;
				}
			}
		} else if (ended++, ev == 7 || ev == 9) { /* client FIN or RST at where it is */
			p = client_seg(&m[i].syn);
			p.seq = m[i].cnext, p.fin = ev == 7, p.rst = ev == 9;
			xdp(f, &p);
			if (ev == 7 && m[i].open) {
				/* a half-close: the turn still runs, until the server closes */
				long long w = 0;

				for (int j = 0; j < NF; j++)
					w += m[j].live && m[j].open && m[j].cls == m[i].cls;
				if (busy_cls(f, 0, m[i].cls) != w)
					fail_msg("step %d: a client FIN ended an open turn", step);
				p = server_reply(&m[i].syn, m[i].snext - (SERVER_ISN(m[i].syn.sport) + 1), 0);
				p.payload = NULL, p.psh = 0, p.ack = m[i].cnext + 1, p.fin = 1;
				tc_egress(f, &p);
			}
			m[i].live = 0;
		} else if (ev == 8 || ev == 10 || ev == 11) { /* server FIN or RST */
			p = server_reply(&m[i].syn, m[i].snext - (SERVER_ISN(m[i].syn.sport) + 1), 0);
			p.payload = NULL, p.psh = 0, p.ack = m[i].cnext;
			p.fin = ev != 11, p.rst = ev == 11;
			tc_egress(f, &p);
			m[i].live = 0;
		} else { /* left to the GC (at the end), or ended unseen mid-run: the GC now */
			if (step < STEPS) {
				ended--;
				continue;
			}
		}
		long long want[4] = { 0 }, all = 0;
		for (int j = 0; j < NF; j++)
			want[m[j].cls] += m[j].live && m[j].open;
		for (int c = 0; c < 4; c++)
			all += want[c];
		if ((unsigned long long)all > peak)
			peak = (unsigned long long)all;
		for (int c = 0; c < 4; c++)
			if (busy_cls(f, 0, c) != want[c])
				fail_msg("step %d (flow %d, event %d): busy L%d %lld, model %lld", step,
					 i, ev, c, busy_cls(f, 0, c), want[c]);
	}
	unsigned long long n = 0;
	for (int c = 0; c < 4; c++) {
		struct sluice_hist h = hist(f, 0, c);
		n += samples(&h);
	}
	assert_int_equal(n, closed);
	/* The run saw many turns, several flows busy at once, flows ending on the way. */
	assert_true(closed > 200);
	assert_true(peak >= 6);
	assert_true(ended >= 20);
	/* Whatever is left ends by the GC. */
	maps_gc_flows(&f->m, monotonic_ns() + 601 * 1000000000ull, 30000000000ull, 600000000000ull,
		      NULL, NULL);
	assert_int_equal(flow_count(f), 0);
	for (int c = 0; c < 4; c++)
		assert_int_equal(busy_cls(f, 0, c), 0);
	assert_int_equal(busy_total(f, 0), 0);
	assert_int_equal(inflight_total(f, 0), 0);
}

/* Flow stamps come from bpf_ktime_get_ns(), i.e. CLOCK_MONOTONIC: time since boot. The GC
 * tests place every stamp relative to the clock as the programs read it now, never at an
 * absolute value, so they hold on a host booted a minute ago as on one up for weeks. */
#define S_NS 1000000000ull
#define IDLE_NS (600 * S_NS)
#define SYN_NS (30 * S_NS)

static void put_flow(struct fixture *f, uint32_t id, uint8_t state, unsigned long long admitted_ns,
		     unsigned long long last_seen_ns, uint8_t tracked)
{
	struct sluice_flow_key k = { .client_port = htons((uint16_t)id), .service_port = htons(5432) };
	struct sluice_flow v = { .svc = (uint16_t)f->idx[0], .state = state, .class = 0,
				 .admitted_ns = admitted_ns, .last_seen_ns = last_seen_ns,
				 .tracked_inflight = tracked };

	k.client_addr[10] = k.client_addr[11] = 0xff;
	memcpy(k.client_addr + 12, &id, sizeof(id));
	assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &v, BPF_NOEXIST), 0);
}

static void test_walks_thousands_of_flows(void **state)
{
	struct fixture *f = *state;
	int per[SLUICE_MIN_SERVICE_SLOTS];
	unsigned long long t0 = monotonic_ns(), gc_at = t0 + IDLE_NS + S_NS;

	/* More flows than one batch (1024): count and GC see every one. 3000 fall silent at
	 * t0; 500 are still talking when the GC runs an idle timeout and a second later. */
	for (uint32_t i = 0; i < 3500; i++)
		put_flow(f, i, SLUICE_FLOW_OPEN, t0, i < 3000 ? t0 : gc_at - S_NS, 0);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MIN_SERVICE_SLOTS), 3500);
	assert_int_equal(per[f->idx[0]], 3500);
	/* At t0 nothing is idle, not even on a host whose clock is younger than the timeout. */
	assert_int_equal(maps_gc_flows(&f->m, t0, SYN_NS, IDLE_NS, NULL, NULL), 0);
	assert_int_equal(maps_gc_flows(&f->m, gc_at, SYN_NS, IDLE_NS, NULL, NULL), 3000);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MIN_SERVICE_SLOTS), 500);
	assert_int_equal(inflight_total(f, 0), 0); /* untracked entries released nothing */
}

/* One sluiced tick at now_s, then the flows left; each of the test's flows holds one slot. */
static void tick_leaves(struct daemon *d, struct fixture *f, unsigned long long now_s, int flows)
{
	int per[SLUICE_MIN_SERVICE_SLOTS];

	daemon_tick(d, now_s * S_NS);
	assert_int_equal(maps_count_flows(&f->m, per, SLUICE_MIN_SERVICE_SLOTS), flows);
	assert_int_equal(inflight_total(f, 0), flows);
}

/* sluiced's own tick (GC included) with a clock younger than the idle timeout, as on a host
 * that booted seconds ago: quiet flows are kept until their timeout has really passed, none
 * is reclaimed because "now - timeout" would be negative, and in-flight never goes below 0. */
static void test_daemon_gc_on_young_clock(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char err[256], dir[] = "/tmp/sluice-test-gc.XXXXXX", rm[64];
	struct sluice_inflight in = { .total = 4, .cls = { 4 } };
	__u32 k = (__u32)f->idx[0];

	assert_non_null(mkdtemp(dir));
	memset(&d, 0, sizeof(d));
	d.cfg = f->cfg;
	assert_int_equal(d.cfg.flow_idle_timeout_s, 600);
	assert_int_equal(d.cfg.syn_timeout_s, 30);
	snprintf(d.cfg.state_dir, sizeof(d.cfg.state_dir), "%s", dir);
	d.m = f->m;
	d.events = fopen("/dev/null", "w");
	assert_non_null(d.events);
	assert_int_equal(daemon_init(&d, 2 * S_NS, err, sizeof(err)), 0);

	/* Four connections holding four slots, stamped on a clock that started 2 s ago. */
	put_flow(f, 1, SLUICE_FLOW_OPEN, 1, 1, 1);                 /* seen at boot */
	put_flow(f, 2, SLUICE_FLOW_OPEN, S_NS, 4 * S_NS, 1);       /* seen at 4 s */
	put_flow(f, 3, SLUICE_FLOW_SYN, 3 * S_NS, 3 * S_NS, 1);    /* handshake since 3 s */
	put_flow(f, 4, SLUICE_FLOW_OPEN, S_NS, 20 * S_NS + 5, 1);  /* stamped just after the tick read its clock */
	assert_int_equal(bpf_map_update_elem(f->m.inflight, &k, &in, BPF_ANY), 0);

	tick_leaves(&d, f, 20, 4);
	/* 34 s: only the handshake that never completed (31 s old, SYN timeout 30 s) goes. */
	tick_leaves(&d, f, 34, 3);
	/* 603 s: silent since boot (603 s) goes; silent since 4 s (599 s) stays. */
	tick_leaves(&d, f, 603, 2);
	/* 605 s: the one silent since 4 s goes; the one stamped at 20 s stays. */
	tick_leaves(&d, f, 605, 1);

	daemon_fini(&d, 1000);       /* the file writer, before its directory goes */
	daemon_free(&d);
	fclose(d.events);
	snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
	assert_int_equal(system(rm), 0);
}

/* Sharing one object between the tests (harness_shared_fixture) is sound only if the reset
 * before each test leaves every map as a fresh load does: after tests that leave flows,
 * clients, counters, samples and replies behind, the reset object is compared map by map with
 * one loaded afresh. */
static void test_reset_leaves_every_map_as_loaded(void **state)
{
	void (*const runs[])(void **) = {
		test_headroom_rejects_l3_first_and_rst_bytes, test_client_token_bucket,
		test_forged_syn_flood_never_fills_the_limit, test_established_tcp_connection_adopted,
		test_turn_gives_one_sample_in_its_bucket, test_walks_thousands_of_flows,
	};
	/* Something those tests leave behind in a map of every type the reset handles: hash,
	 * LRU hash, LPM trie, array, per-CPU array, global data. */
	const char *left[] = { "flows", "clients", "source_rules", "halfopen", "inflight_pcpu",
			       "class_stats", bpf_map__name(((struct fixture *)*state)->skel->maps.bss) };

	assert_int_equal(harness_prove_reset(state, setup, runs, sizeof(runs) / sizeof(runs[0]),
					     left, sizeof(left) / sizeof(left[0])), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_non_service_passes_untouched, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_truncated_and_bad_headers_pass_unchanged, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_ip_length_beyond_the_frame_moves_nothing, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_syn_with_rst_or_fin_is_judged_as_the_kernel_takes_it, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_fuzz_exact_verdicts, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_syn_admitted_counted_once, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_syn_copy_after_flow_end_is_new, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_headroom_rejects_l3_first_and_rst_bytes, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_first_fragments_judged_or_dropped, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_headers_past_first_buffer_dropped, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_v6_vlan_dscp_classified_and_rst, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_ip_options_and_ext_headers_decided, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_first_matching_source_rule_wins, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_prefix_matches_only_its_own_family,
						setup_families, harness_teardown),
		cmocka_unit_test_setup_teardown(test_drop_mode, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_priority_count_never_blocks_higher_class, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_concurrency_cap, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_token_bucket, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_forged_sources_never_evict_a_client, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_limits_key_ipv6_by_64, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_limits_off_when_controller_silent, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_fin_rst_end_units_exactly_once, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_carried_over_flow_without_client_next_still_ends, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_stale_heartbeat_fails_open, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_heartbeat_ahead_of_the_syn_clock_is_alive, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_forged_syn_flood_never_fills_the_limit, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_forged_ack_completes_no_handshake, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_forged_fin_rst_outside_window_release_nothing, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_syn_with_new_isn_never_ends_a_live_flow, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_halfopen_budget_holds_back_lower_classes_only, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_fresh_connection_counts_until_its_first_data, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_open_connection_cap, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_forged_syns_hold_a_quarter_of_the_connection_cap,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_reprogramming_keeps_connection_cap_refusals,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_changing_a_cap_keeps_its_refusals, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_segment_completes_a_handshake, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_forged_syn_never_displaces_a_pending_handshake, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_dead_handshake_gives_way_to_a_new_isn, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_standing_record_never_lends_its_admission, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_handshake_slot_shared_by_two_4tuples, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_crafted_ipv6_4tuples_get_slots_of_their_own, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_completed_handshake_gives_its_count_back, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_ended_handshake_gives_its_count_back, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_restamped_handshake_gives_back_its_own_count_only,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_untracked_completion_gives_its_counts_back,
						setup_small_table, harness_teardown),
		cmocka_unit_test_setup_teardown(test_lapsed_handshake_gives_back_nothing, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_all_zero_verdict_admits, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_reused_slot_never_inherits_a_verdict, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_reused_slot_never_inherits_a_client_bucket, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_port_bits_follow_the_ports, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_table_full_attempt_keeps_shedding_on,
						setup_small_table, harness_teardown),
		cmocka_unit_test_setup_teardown(test_full_flow_table_admits_untracked_and_drains_to_zero,
						setup_small_table, harness_teardown),
		cmocka_unit_test_setup_teardown(test_closed_connection_not_revived_by_its_own_segments,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_gc_reclaims_silent_flows, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_established_tcp_connection_adopted, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_adopted_connections_count_against_the_client_cap, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_turn_behind_discarded_bytes_opens, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_turn_gives_one_sample_in_its_bucket, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_first_turn_is_setup, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_single_turn_sample_at_the_end, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_turn_ignores_retransmits_and_bare_acks, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_turn_many_segments_one_sample, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_idle_pooled_connections_hold_no_capacity, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_busy_released_when_flows_end_mid_turn, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_turn_random_conversations_end_with_busy_zero, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_walks_thousands_of_flows, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_daemon_gc_on_young_clock, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_reset_leaves_every_map_as_loaded, setup,
						harness_teardown),
	};

	/* Replies may be redirected: keep them inside a private network namespace. */
	if (unshare(CLONE_NEWNET) != 0)
		perror("unshare(CLONE_NEWNET)");
	return cmocka_run_group_tests_name("datapath", tests, NULL, harness_shared_release);
}
