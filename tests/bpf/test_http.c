// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* HTTP request shedding through BPF_PROG_TEST_RUN: request start (TC ingress) and end
 * (TC egress), classification by header / path / source, split headers, status parsing,
 * and the kernel's 429 reply and server-side RST checked byte by byte. The 429 is sent with
 * bpf_clone_redirect to the test skb's device (loopback of a private netns) and captured
 * there with a packet socket. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sched.h>
#include <unistd.h>
#include <poll.h>
#include <time.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/if_packet.h>
#include <linux/pkt_cls.h>
#include <cmocka.h>

#include "harness.h"
#include "netns.h"
#include "pktbuild.h"
#include "livesock.h"
#include "common/config.h"
#include "control/verdict.h"

#define SERVER4 "198.18.0.1"

/* The web service up to its trust_from (the per-flow cache tests vary what follows). */
#define WEB_SERVICE_HEAD \
	"interface: lo\n" \
	"services:\n" \
	"  - name: web\n" \
	"    port: 8080\n" \
	"    protocol: http\n" \
	"    retry_after_s: 7\n" \
	"    limit: { fixed: 8 }\n" \
	"    headroom: { L0: 100, L1: 90, L2: 75, L3: 25 }\n" \
	"    default_class: L2\n"

static const char *CONFIG =
	WEB_SERVICE_HEAD
	"    trust_from: [203.0.113.0/28, 2001:db8::/64]\n"
	"    classify:\n"
	"      - { source: 198.18.1.0/24, class: L0 }\n"
	"      - { path_prefix: /report, class: L3 }\n"
	"      - { header: X-Priority, class: from-header }\n"
	"      - { path_prefix: /pay, class: L0 }\n"
	"      - { dscp: 46, class: L1 }\n"
	"      - { source: 203.0.113.0/30, class: L1 }\n"    /* inside trust_from */
	"      - { path_prefix: /api/v2/orders/export, class: L3 }\n";  /* three words */

static int setup(void **state)
{
	return (*state = harness_shared_fixture(CONFIG, 0, 3600000000000ull)) ? 0 : -1;
}

/* A flow table of 4 entries. */
static int setup_small_table(void **state)
{
	return (*state = harness_shared_fixture(CONFIG, 4, 3600000000000ull)) ? 0 : -1;
}

static struct run run_tc(int fd, const struct pkt_spec *s)
{
	uint8_t buf[1024];
	size_t len = build_pkt(buf, s);
	struct __sk_buff ctx = { .ifindex = 1 };

	struct run r = harness_run(fd, buf, len, &ctx);

	assert_int_equal(r.err, 0);
	return r;
}

static struct run ingress(struct fixture *f, const struct pkt_spec *s)
{
	return run_tc(bpf_program__fd(f->skel->progs.sluice_tc_ingress), s);
}

/* TC egress never acts on a packet (responses end requests; nothing is refused there):
 * every one comes out exactly as it went in. */
static struct run egress(struct fixture *f, const struct pkt_spec *s)
{
	struct run r = run_tc(bpf_program__fd(f->skel->progs.sluice_tc_egress), s);

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_true(harness_unchanged(&r));
	return r;
}

/* A segment the server must get as the client sent it: the start of an admitted request,
 * more of one, or a segment that starts nothing. */
static struct run admitted(struct fixture *f, const struct pkt_spec *s)
{
	struct run r = ingress(f, s);

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_true(harness_unchanged(&r));
	return r;
}

static struct run run_xdp(struct fixture *f, const struct pkt_spec *s)
{
	uint8_t buf[1024];
	size_t len = build_pkt(buf, s);
	struct run r = harness_run(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf, len, NULL);

	assert_int_equal(r.err, 0);
	assert_int_equal(r.ret, XDP_PASS);
	assert_true(harness_unchanged(&r));
	return r;
}

/* The server's FIN on the connection of client segment c, acknowledging it (and a FIN it
 * carries): a connection whose client half-closed ends with it, request or not. */
static void server_closes(struct fixture *f, const struct pkt_spec *c)
{
	struct pkt_spec s = { .v6 = c->v6, .vlan = c->vlan, .src = c->dst, .dst = c->src,
			      .sport = c->dport, .dport = c->sport, .seq = c->ack,
			      .ack = c->seq + (uint32_t)c->payload_len + (c->fin ? 1 : 0),
			      .ackf = 1, .fin = 1 };

	egress(f, &s);
}

/* The connection of client segment c ends cleanly: the client's FIN right after c (TC
 * ingress), then the server's close. */
static void both_close_after(struct fixture *f, const struct pkt_spec *c)
{
	struct pkt_spec fin = *c;

	fin.seq += (uint32_t)c->payload_len, fin.payload_len = 0, fin.fin = 1, fin.psh = 0;
	admitted(f, &fin);
	server_closes(f, &fin);
}

/* The handshake of the connection a request segment belongs to, as a real client makes it:
 * SYN at seq - 1 (XDP), the server's SYN-ACK at ack - 1 (TC egress), the client's ACK (XDP). */
static void handshake(struct fixture *f, const struct pkt_spec *rq)
{
	struct pkt_spec syn, sa, ack;

	handshake_of(rq, &syn, &sa, &ack);
	run_xdp(f, &syn);
	admitted(f, &syn); /* and on through TC ingress, as the stack passes it */
	struct run r = run_tc(bpf_program__fd(f->skel->progs.sluice_tc_egress), &sa);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_true(harness_unchanged(&r));
	run_xdp(f, &ack);
}

static int flow_count(struct fixture *f)
{
	int per[SLUICE_MAX_SERVICES];
	return maps_count_flows(&f->m, per, SLUICE_MAX_SERVICES);
}

static struct pkt_spec request(const char *src, uint16_t sport, const char *text)
{
	struct pkt_spec s = { .src = src, .dst = SERVER4, .sport = sport, .dport = 8080,
			      .seq = 5000, .ack = 9000, .ackf = 1, .psh = 1,
			      .payload = text, .payload_len = strlen(text) };
	return s;
}

static struct pkt_spec response(const char *dst, uint16_t dport, const char *text)
{
	struct pkt_spec s = { .src = SERVER4, .dst = dst, .sport = 8080, .dport = dport,
			      .seq = 9000, .ack = 6000, .ackf = 1, .psh = 1,
			      .payload = text, .payload_len = strlen(text) };
	return s;
}

static struct sluice_class_stats stats(struct fixture *f, int cls)
{
	struct sluice_class_stats st;
	assert_int_equal(maps_read_class_stats(&f->m, f->idx[0], cls, &st), 0);
	return st;
}

static long long inflight(struct fixture *f)
{
	struct sluice_inflight in;
	assert_int_equal(maps_read_inflight(&f->m, f->idx[0], &in), 0);
	return in.total;
}

#define GET(path, hdrs) "GET " path " HTTP/1.1\r\nHost: t\r\n" hdrs "\r\n"

static void test_request_start_and_end(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.5", 1000, GET("/x", ""));

	handshake(f, &rq);
	assert_int_equal(inflight(f), 0); /* http connections hold no slot */
	assert_int_equal(flow_count(f), 1);
	admitted(f, &rq);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(stats(f, 2).arrivals, 1); /* default L2 */
	/* A second segment of the same request (body) is not a new request. */
	struct pkt_spec body = rq;
	body.seq += rq.payload_len;
	body.payload = "more";
	body.payload_len = 4;
	admitted(f, &body);
	assert_int_equal(stats(f, 2).arrivals, 1);

	usleep(2000);
	struct pkt_spec rs = response("203.0.113.5", 1000, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(stats(f, 2).completed, 1);
	assert_int_equal(stats(f, 2).errors, 0);
	/* Later segments of the response change nothing. */
	egress(f, &rs);
	assert_int_equal(stats(f, 2).completed, 1);

	struct sluice_hist h;
	maps_read_hist(&f->m, f->idx[0], 2, &h);
	unsigned long long n = 0;
	for (int i = 0; i < SLUICE_HIST_BUCKETS; i++)
		n += h.bucket[i];
	assert_int_equal(n, 1);
	assert_true(h.sum_us >= 2000); /* slept 2 ms between request and response */
}

/* The flow of a client at src:sport on the service, or fails the test. */
static struct sluice_flow_key flow_key(const char *src, uint16_t sport)
{
	struct sluice_flow_key k = { 0 };

	k.client_addr[10] = k.client_addr[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, src, k.client_addr + 12), 1);
	k.client_port = htons(sport);
	k.service_port = htons(8080);
	k.local_addr[10] = k.local_addr[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, SERVER4, k.local_addr + 12), 1);
	return k;
}

/* A last-seen 10 s back, or the clock's start on a host up for less (no test may assume a
 * long uptime): either is over a second old, which is what makes a segment refresh it. */
static unsigned long long ten_seconds_ago(void)
{
	unsigned long long now = monotonic_ns();

	return now > 10000000000ull ? now - 10000000000ull : 0;
}

/* Last-seen is what the idle GC goes by: a client sending a long body (the server answering
 * with bare ACKs only) and a server sending a long response both keep their flow fresh. */
/* A client that half-closes after its request (FIN, as HTTP/1.0 tools do, or an attacker
 * hoping to have its request run uncounted) does not end it: the server still works on it.
 * The request holds its slot until its response; the flow ends with the server's FIN. A FIN
 * that carries the request itself starts it (on the flow, not ended first). */
static void test_client_fin_leaves_the_request_running(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.5", 1010, GET("/x", ""));

	handshake(f, &rq);
	admitted(f, &rq);
	assert_int_equal(inflight(f), 1);
	struct pkt_spec fin = rq;
	fin.seq += rq.payload_len, fin.payload = NULL, fin.payload_len = 0, fin.psh = 0, fin.fin = 1;
	run_xdp(f, &fin);
	admitted(f, &fin);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(flow_count(f), 1);
	struct pkt_spec rs = response("203.0.113.5", 1010, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.ack = fin.seq + 1;
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(stats(f, 2).completed, 1);
	struct pkt_spec sfin = rs;
	sfin.seq += (uint32_t)rs.payload_len, sfin.payload = NULL, sfin.payload_len = 0;
	sfin.psh = 0, sfin.fin = 1;
	egress(f, &sfin);
	assert_int_equal(flow_count(f), 0);

	/* request and FIN in one segment */
	struct pkt_spec one = request("203.0.113.5", 1011, GET("/y", ""));
	handshake(f, &one);
	one.fin = 1;
	run_xdp(f, &one);
	admitted(f, &one);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(stats(f, 2).arrivals, 2);
	assert_int_equal(stats(f, 2).untracked, 0);
	rs.dport = 1011, rs.ack = one.seq + (uint32_t)one.payload_len + 1;
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
}

static void test_data_keeps_flow_fresh(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.9", 1100, GET("/x", ""));
	struct sluice_flow_key k = flow_key("203.0.113.9", 1100);
	struct sluice_flow fl;
	unsigned long long before;

	handshake(f, &rq);
	admitted(f, &rq);
	struct pkt_spec body = rq;
	body.seq += rq.payload_len;
	body.payload = "more";
	body.payload_len = 4;
	for (int side = 0; side < 2; side++) {
		assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
		fl.last_seen_ns = ten_seconds_ago();  /* 10 s idle */
		assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &fl, BPF_EXIST), 0);
		before = monotonic_ns();
		if (side == 0) {
			admitted(f, &body);                          /* more of the request */
		} else {
			struct pkt_spec rs = response("203.0.113.9", 1100, "HTTP/1.1 200 OK\r\n\r\n");
			egress(f, &rs);                              /* ends the request */
			assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
			fl.last_seen_ns = ten_seconds_ago();
			assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &fl, BPF_EXIST), 0);
			before = monotonic_ns();
			rs.seq += rs.payload_len;
			egress(f, &rs);                              /* more of the response */
		}
		assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
		/* Fresh to within a clock tick (the coarse clock may lag by one). */
		assert_true(fl.last_seen_ns + 100000000ull >= before);
		assert_true(fl.last_seen_ns <= monotonic_ns());
	}
}

static void test_status_5xx_and_429(void **state)
{
	struct fixture *f = *state;

	struct pkt_spec a = request("203.0.113.5", 1001, GET("/x", ""));
	handshake(f, &a);
	admitted(f, &a);
	struct pkt_spec ra = response("203.0.113.5", 1001, "HTTP/1.1 503 Service Unavailable\r\n\r\n");
	egress(f, &ra);
	struct pkt_spec b = request("203.0.113.5", 1002, GET("/x", ""));
	handshake(f, &b);
	admitted(f, &b);
	struct pkt_spec rb = response("203.0.113.5", 1002, "HTTP/1.1 429 Too Many Requests\r\n\r\n");
	egress(f, &rb);
	struct pkt_spec c = request("203.0.113.5", 1003, GET("/x", ""));
	handshake(f, &c);
	admitted(f, &c);
	struct pkt_spec rc = response("203.0.113.5", 1003, "\x16\x03\x01garbage, no status line");
	egress(f, &rc);
	assert_int_equal(stats(f, 2).completed, 3);
	assert_int_equal(stats(f, 2).errors, 1);   /* the 503 */
	assert_int_equal(stats(f, 2).resp_429, 1); /* apart, never an error */
	assert_int_equal(inflight(f), 0);
}

/* A 505 or 501 answers how the request was written (an HTTP version, a method the server does
 * not speak): any client has them at will, so they are completions, not failures; otherwise an
 * L3 client sending "GET / HTTP/2.0" faster than the others call opened the service's breaker
 * and had every class refused. A 500 or 502 still is one. */
static void test_status_of_the_request_form_not_an_error(void **state)
{
	struct fixture *f = *state;
	static const char *const answers[] = {
		"HTTP/1.1 505 HTTP Version Not Supported\r\n\r\n",
		"HTTP/1.1 501 Not Implemented\r\n\r\n",
		"HTTP/1.1 500 Internal Server Error\r\n\r\n",
		"HTTP/1.1 502 Bad Gateway\r\n\r\n",
	};

	for (int i = 0; i < 4; i++) {
		struct pkt_spec a = request("203.0.113.5", (uint16_t)(1001 + i), GET("/x", ""));
		struct pkt_spec r = response("203.0.113.5", (uint16_t)(1001 + i), answers[i]);

		handshake(f, &a);
		admitted(f, &a);
		egress(f, &r);
	}
	assert_int_equal(stats(f, 2).completed, 4);
	assert_int_equal(stats(f, 2).errors, 2);   /* the 500 and the 502 */
	assert_int_equal(inflight(f), 0);
}

/* Priority marks of the web service ignored so far (untrusted_marks, summed over CPUs). */
static unsigned long long untrusted(struct fixture *f)
{
	struct sluice_untrusted u;

	assert_int_equal(maps_read_untrusted(&f->m, f->idx[0], &u), 0);
	return u.ignored;
}

/* Each request's class, and whether it counts as a priority mark ignored (`ignored`: a mark
 * from outside trust_from that would have decided its class). */
static void test_classification(void **state)
{
	struct fixture *f = *state;
	struct { const char *src, *text; int cls, ignored, dscp; } cases[] = {
		{ "203.0.113.5", GET("/x", "X-Priority: L1\r\n"), 1, 0, 0 },          /* header */
		{ "203.0.113.5", GET("/x", "x-priority:L0\r\n"), 0, 0, 0 },           /* case, no space */
		{ "203.0.113.5", GET("/x", "X-Other: L0\r\n"), 2, 0, 0 },             /* absent: default */
		{ "203.0.113.5", GET("/report/q", "X-Priority: L0\r\n"), 3, 0, 0 },   /* path rule first */
		{ "203.0.113.5", GET("/pay", "X-Priority: L1\r\n"), 1, 0, 0 },        /* header before /pay */
		{ "203.0.113.5", GET("/pay", ""), 0, 0, 0 },                           /* path */
		{ "203.0.113.5", GET("/PAY", ""), 2, 0, 0 },                 /* a path is exact */
		{ "203.0.113.5", GET("/api/v2/orders/export?m=12", ""), 3, 0, 0 }, /* 21 bytes */
		{ "203.0.113.5", GET("/api/v2/orders/exporT", ""), 2, 0, 0 },  /* third word */
		{ "203.0.113.5", GET("/api/v2/orderz/export", ""), 2, 0, 0 },  /* second word */
		{ "203.0.113.5", GET("/api/v2/orders/expor", ""), 2, 0, 0 },   /* one byte short */
		/* A segment that ends inside a prefix: the path's bytes in the scratch buffer after
		 * it are the previous request's (the same prefix, a case before: one CPU), and
		 * must not complete it. */
		{ "203.0.113.5", "GET /api/v2/orders/export HTTP/1.1\r\n\r\n", 3, 0, 0 },
		{ "203.0.113.5", "GET /api/v2/orders/exp", 2, 0, 0 },
		{ "203.0.113.5", "GET /report/q HTTP/1.1\r\n\r\n", 3, 0, 0 },
		{ "203.0.113.5", "GET /repo", 2, 0, 0 },
		{ "198.18.1.9", GET("/report", ""), 0, 0, 0 },                         /* source first */
		{ "203.0.113.5", "GET /x HTTP/1.1\r\nHost: t\r\nX-Prio", 2, 0, 0 },   /* split: default */
		{ "203.0.113.5", GET("/x", "X-Priority: L7\r\n"), 2, 0, 0 },          /* bad value */
		{ "203.0.113.5", "\x00\x01\x02\x03\xff\xfe binary bytes", -1, 0, 0 },    /* no method */
		{ "203.0.113.5", "get /x HTTP/1.1\r\n\r\n", 2, 0, 0 },   /* any token: Go takes it */
		{ "203.0.113.5", "m3! /x HTTP/1.1\r\n\r\n", 2, 0, 0 },
		{ "203.0.113.5", "get http://t/x HTTP/1.1\r\n\r\n", 2, 0, 0 },      /* absolute */
		{ "203.0.113.5", "hello world, more text", -1, 0, 0 },   /* no target: not a request */
		{ "203.0.113.5", "2026-12-03 12:00 INFO up", -1, 0, 0 },
		{ "203.0.113.5", "hello how are you", -1, 0, 0 },
		{ "203.0.113.5", "hello everybody here", -1, 0, 0 },    /* 8 letters, no ':' */
		{ "203.0.113.5", "get x:/a HTTP/1.1\r\n\r\n", 2, 0, 0 },      /* any scheme */
		{ "203.0.113.5", "M-SEARCH * HTTP/1.1\r\n\r\n", 2, 0, 0 },
		{ "203.0.113.5", "options * HTTP/1.1\r\n\r\n", 2, 0, 0 },
		{ "203.0.113.5", "{\"get\": 1} /x", -1, 0, 0 },                       /* no token */
		/* longer than sluice reads: a request all the same, without its path */
		{ "203.0.113.5", "GETTINGSGETTINGSGETTINGS /pay HTTP/1.1\r\n\r\n", 2, 0, 0 },
		{ "203.0.113.5", "gettingsgettingsgettings /x HTTP/1.1\r\n\r\n", -1, 0, 0 },
		{ "203.0.113.5", "PROPFIND /x HTTP/1.1\r\n\r\n", 2, 0, 0 },         /* 8 letters */
		{ "203.0.113.5", "UPDATEREDIRECTREF /x HTTP/1.1\r\n\r\n", 2, 0, 0 }, /* 17 */
		{ "203.0.113.5", "BASELINE-CONTROL /pay HTTP/1.1\r\n\r\n", 0, 0, 0 }, /* its path */
		{ "203.0.113.5", GET("/x", "X-Priority: 0\r\n"), 0, 0, 0 },           /* bare digit */
		{ "203.0.113.5", GET("/x", ""), 1, 0, 46 },                      /* DSCP, trusted */
		/* Outside trust_from: the header is ignored, the other rules decide; counted
		 * where the mark would have decided. */
		{ "203.0.113.77", GET("/x", "X-Priority: L0\r\n"), 2, 1, 0 },
		{ "203.0.113.77", GET("/x", "X-Priority: 0\r\n"), 2, 1, 0 },
		{ "203.0.113.77", GET("/pay", "X-Priority: L1\r\n"), 0, 1, 0 },    /* header first */
		{ "203.0.113.77", GET("/report", "X-Priority: L0\r\n"), 3, 0, 0 }, /* path first */
		{ "198.18.1.9", GET("/x", "X-Priority: L3\r\n"), 0, 0, 0 },        /* source first */
		{ "203.0.113.77", GET("/x", ""), 2, 1, 46 },                      /* DSCP */
		{ "203.0.113.77", GET("/x", "X-Priority: L0\r\n"), 2, 1, 46 },  /* both: once */
		{ "203.0.113.77", GET("/pay", ""), 0, 0, 46 },                    /* path first */
		{ "203.0.113.77", GET("/x", "X-Priority: L9\r\n"), 2, 0, 0 },      /* no class */
		/* A source rule inside trust_from: the source is trusted all the same. */
		{ "203.0.113.2", GET("/x", "X-Priority: L0\r\n"), 0, 0, 0 },     /* header first */
		{ "203.0.113.2", GET("/x", ""), 1, 0, 0 },                          /* then source */
	};
	uint64_t before[4] = { 0 }, marks;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int c = 0; c < 4; c++)
			before[c] = stats(f, c).arrivals;
		marks = untrusted(f);
		struct pkt_spec rq = request(cases[i].src, (uint16_t)(2000 + i), cases[i].text);
		if (cases[i].text[0] == 0)
			rq.payload_len = 17;     /* the binary case's bytes, past its NUL (19 there) */
		rq.dscp = (uint8_t)cases[i].dscp;
		handshake(f, &rq);
		admitted(f, &rq);
		for (int c = 0; c < 4; c++) {
			uint64_t d = stats(f, c).arrivals - before[c];
			if (d != (c == cases[i].cls)) {
				print_error("case %zu: class L%d got %llu arrivals\n", i, c,
					    (unsigned long long)d);
				fail();
			}
		}
		if (untrusted(f) - marks != (uint64_t)cases[i].ignored) {
			print_error("case %zu: %llu priority marks counted as ignored, want %d\n", i,
				    (unsigned long long)(untrusted(f) - marks), cases[i].ignored);
			fail();
		}
		/* The client vanishes mid-request: its FIN and the server's close end the request,
		 * nothing leaks. */
		struct pkt_spec fin = rq;
		fin.seq += (uint32_t)rq.payload_len, fin.payload_len = 0, fin.fin = 1, fin.psh = 0;
		admitted(f, &fin);
		uint8_t buf[256];
		size_t len = build_pkt(buf, &fin);
		struct run x = harness_run(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf, len, NULL);
		assert_int_equal(x.err, 0);
		assert_int_equal(x.ret, XDP_PASS);
		server_closes(f, &fin);
		assert_true(harness_unchanged(&x));
	}
	assert_int_equal(inflight(f), 0);
}

/* The priority header as read from a request's first 256 bytes, one byte at a time: the
 * reference the data path's word-wise scan must agree with. A header line is the name
 * (any case) then ':'; blanks and "L" before the value are skipped and its first other
 * character decides (0..3, anything else: none); the empty line or the end of the bytes ends
 * the search. -1 when there is none. */
static int ref_header_class(const char *t, size_t n, const char *name, int *skipped)
{
	size_t hl = strlen(name), len = n < 256 ? n : 256;
	long pos = -1, line_len = 0;
	int in_value = 0;

	*skipped = 0;
	for (size_t i = 0; i < len; i++) {
		char c = t[i];

		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (in_value) {
			if (c == ' ' || c == '\t' || c == 'l') {
				++*skipped;
				continue;
			}
			return c >= '0' && c <= '3' ? c - '0' : -1;
		}
		if (c == '\n') {
			if (line_len == 0 || (line_len == 1 && t[i - 1] == '\r'))
				return -1;
			pos = 0, line_len = 0;
			continue;
		}
		line_len++;
		if (pos < 0)
			continue;
		if ((size_t)pos < hl)
			pos = c == name[pos] ? pos + 1 : -1;
		else if (c == ':')
			in_value = 1;
		else
			pos = -1;
	}
	return -1;
}

/* Generated requests, header lines of every shape at every alignment (case, blanks, tabs,
 * near-miss names, bare CR and LF, long blank runs, the header past the first 256 bytes, cut
 * off mid-line): the class the data path picks is always the reference's (or the default). */
static void test_header_scan_matches_reference(void **state)
{
	struct fixture *f = *state;
	static const char *pieces[] = {
		"X-Priority: L1\r\n", "x-priority:L0\r\n", "X-PRIORITY: \t l3\r\n",
		"X-Priority:          L1\r\n", "X-Priority:\t\t\t\t\t\t\t\t\tL0\r\n",
		"X-Priorityy: L0\r\n", "X-Priorit: L0\r\n", "X-Prio\r\n", "X-Priority L0\r\n",
		"X-Priority: L9\r\n", "X-Priority: Lx\r\n", "X-Priority:\r\n", "Host: t\r\n",
		"\rX-Priority: L2\r\n", "A: \r\n", "User-Agent: some longer agent string/1.0\r\n",
		"X-Priority: 2\r\n", "X-Priority: l1\n", "Y-Priority: L0\r\n", "X-Priority: L",
		"Accept: */*\r\n", "X-Pri\nority: L0\r\n", "Cookie: a=b; c=d; e=f\r\n",
	};
	const int np = (int)(sizeof(pieces) / sizeof(pieces[0]));
	uint32_t seed = 12345;
	char text[600];
	int with_header = 0, by_bytes = 0;

	for (int i = 0; i < 604; i++) {
		size_t n = 0;

		/* First a request, then the same cut off before its value: what the scan's
		 * buffer still holds past the end of the second must not count. */
		if (i < 4)
			n += (size_t)snprintf(text, sizeof text, "%s", i & 1 ?
				"GET /x HTTP/1.1\r\nX-Priority: L" :
				"GET /x HTTP/1.1\r\nX-Priority: L1\r\n\r\n");
		else
			n += (size_t)snprintf(text, sizeof text, "GET /x%.*s HTTP/1.1\r\n",
					      (int)(seed % 13), "aaaaaaaaaaaaaaaa");
		for (int k = 0; k < 1 + (int)(seed % 9) && n < 420 && i >= 4; k++) {
			seed = seed * 1103515245u + 12345u;
			const char *pc = pieces[(seed >> 8) % (uint32_t)np];
			if ((seed >> 20) % 5 == 0) {          /* filler that shifts the alignment */
				int fl = (int)((seed >> 12) % 40);
				n += (size_t)snprintf(text + n, sizeof text - n, "F: %.*s\r\n", fl,
					"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH");
			}
			n += (size_t)snprintf(text + n, sizeof text - n, "%s", pc);
		}
		seed = seed * 1103515245u + 12345u;
		if ((seed >> 16) % 3 && i >= 4)
			n += (size_t)snprintf(text + n, sizeof text - n, "\r\n");
		int skipped, want = ref_header_class(text, n, "x-priority", &skipped);
		int cls = want >= 0 ? want : 2;            /* the default class otherwise */
		uint64_t before[4];

		with_header += want >= 0;
		/* a value after 8 or more blanks is the byte machine's (the word-wise scan
		 * hands it over, SCAN_FALLBACK) */
		by_bytes += want >= 0 && skipped >= 8;
		for (int c = 0; c < 4; c++)
			before[c] = stats(f, c).arrivals;
		struct pkt_spec rq = request("203.0.113.7", (uint16_t)(20000 + i), text);
		rq.payload_len = n;
		handshake(f, &rq);
		admitted(f, &rq);
		for (int c = 0; c < 4; c++) {
			uint64_t d = stats(f, c).arrivals - before[c];
			if (d != (c == cls)) {
				print_error("request %d: L%d got %llu arrivals, the reference says L%d:\n%s\n",
					    i, c, (unsigned long long)d, cls, text);
				fail();
			}
		}
		struct pkt_spec fin = rq;
		fin.seq += (uint32_t)rq.payload_len, fin.payload_len = 0, fin.fin = 1, fin.psh = 0;
		admitted(f, &fin);
		uint8_t buf[256];
		struct run x = harness_run(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf,
					   build_pkt(buf, &fin), NULL);
		assert_int_equal(x.err, 0);
		server_closes(f, &fin);
	}
	/* The generator is not degenerate: both outcomes are common, and the byte machine
	 * decides some. */
	assert_true(with_header > 100 && with_header < 500);
	assert_true(by_bytes >= 10);
	print_message("# %d of 604 requests carry the header, %d decided by the byte machine\n",
		      with_header, by_bytes);
	assert_int_equal(inflight(f), 0);
}

/* ---- The whole classification against a model, on drawn request heads ----
 * The test above holds the header scans to their reference. The path rules are compared 8
 * bytes at a time too, over a per-CPU buffer that still holds the previous request's bytes
 * past the segment, and the rules decide in their configured order. Here the class of the
 * whole request is held to a plain model of the service's rules (the header by the same
 * reference), on heads drawn with methods of several lengths, paths beside the rules'
 * prefixes (a byte short, a byte more, one letter's case), the priority header or a near
 * miss of it among other headers, blanks and "L" in any mix before the value, bare LF and
 * lone CR lines, half of them cut at any byte (a head that goes on in the next segment); and a
 * quarter of the draws the previous head again, cut within its first 32 bytes. */

#define MODEL_SCAN_LEN 256 /* the bytes of a segment the classification reads */

/* Whether the path (after the method's space, within the first 24 bytes) starts with prefix,
 * every byte of it inside the segment. */
static int model_path_has(const char *b, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	for (size_t i = 1; i < 24 && i < len; i++)
		if (b[i] == ' ')
			return i + 1 + n <= len && !memcmp(b + i + 1, prefix, n);
	return 0;
}

/* The class CONFIG gives a request from 203.0.113.5 or 2001:db8::5 (trusted, in no source rule)
 * without DSCP: its rules in order, the default L2. */
static int model_class(const char *b, size_t seg_len)
{
	size_t len = seg_len < MODEL_SCAN_LEN ? seg_len : MODEL_SCAN_LEN;
	int h, skipped;

	if (len < 4)
		return 2; /* too short for any payload rule */
	if (model_path_has(b, len, "/report"))
		return 3;
	if ((h = ref_header_class(b, len, "x-priority", &skipped)) >= 0)
		return h;
	if (model_path_has(b, len, "/pay"))
		return 0;
	if (model_path_has(b, len, "/api/v2/orders/export"))
		return 3;
	return 2;
}

struct draw {
	uint64_t s;
	char *b;
	size_t n, cap;
	int long_value;  /* a header of the rule's name whose value opens with 8+ blanks */
};

static uint32_t draw_below(struct draw *d, uint32_t n)
{
	d->s ^= d->s << 13, d->s ^= d->s >> 7, d->s ^= d->s << 17; /* xorshift64 */
	return (uint32_t)((d->s >> 16) % n);
}

static void draw_put(struct draw *d, const char *s)
{
	for (; *s && d->n < d->cap; s++)
		d->b[d->n++] = *s;
}

static uint32_t draw_chars(struct draw *d, const char *set, uint32_t max)
{
	uint32_t n = draw_below(d, max + 1);

	for (uint32_t k = n; k > 0 && d->n < d->cap; k--)
		d->b[d->n++] = set[draw_below(d, (uint32_t)strlen(set))];
	return n;
}

#define PICK(d, a) ((a)[draw_below((d), sizeof(a) / sizeof((a)[0]))])

/* One request head (and sometimes a body) into d->b (d->n bytes); returns the length of the
 * segment that carries it. */
static size_t draw_request(struct draw *d)
{
	static const char *const methods[] = { "GET", "POST", "PUT", "OPTIONS", "DELETE" };
	static const char *const paths[] = {
		"/x", "/report", "/repor", "/reports/7", "/pay", "/pa", "/PAY", "/payment",
		"/api/v2/orders/export", "/api/v2/orders/expor", "/api/v2/orders/exportX",
		"/api/v2/orders/exporT", "/api/v2/orderz/export", "/", "/a/b/c/d/e/f/g",
	};
	static const char *const names[] = {
		"X-Priority", "x-priority", "X-PRIORITY", "x-Priority",      /* the rule's */
		"X-Priorit", "X-Priority-", "XX-Priority", "X-Priority ",    /* near misses */
	};
	static const char *const others[] = { "Host", "Accept", "User-Agent", "X-Pri", "Cookie" };
	static const char *const ends[] = { "0", "1", "2", "3", "4", "9", "x", "\r", "" };
	static const char *const eols[] = { "\r\n", "\r\n", "\r\n", "\n" };

	/* A quarter of them the previous head again, cut within its first 32 bytes: the scan's
	 * buffer then holds that same head's bytes past the cut, where a compare that reads one
	 * byte too far would find the rest of a path prefix. */
	if (d->n && !draw_below(d, 4))
		return 1 + draw_below(d, d->n < 32 ? (uint32_t)d->n : 32);
	d->n = 0;
	d->long_value = 0;
	draw_put(d, PICK(d, methods));
	draw_put(d, " ");
	draw_put(d, PICK(d, paths));
	draw_chars(d, "abc/?=&", 12);
	draw_put(d, " HTTP/1.1");
	draw_put(d, PICK(d, eols));
	for (uint32_t h = draw_below(d, 8); h > 0; h--) {
		switch (draw_below(d, 10)) {
		case 0: case 1: case 2: case 3: /* another header, of any length */
			draw_put(d, PICK(d, others));
			draw_put(d, ": ");
			draw_chars(d, "abcdefgh/;=-. ", 70);
			break;
		case 4: case 5: case 6: case 7: case 8: { /* the priority header, or nearly */
			uint32_t name = draw_below(d, sizeof(names) / sizeof(names[0]));

			draw_put(d, names[name]);
			draw_put(d, ":");
			if (draw_chars(d, "  \tLl", 12) >= 8 && name < 4)
				d->long_value = 1;
			draw_put(d, PICK(d, ends));
			draw_chars(d, "0123 abc", 4);
			break;
		}
		default: /* a lone CR, or a line without a colon */
			draw_put(d, draw_below(d, 2) ? "\r" : "no colon here");
			break;
		}
		draw_put(d, PICK(d, eols));
	}
	if (draw_below(d, 5))
		draw_put(d, PICK(d, eols)); /* the empty line */
	if (!draw_below(d, 4))
		draw_chars(d, "X-Priority: 0\r\nbody", 40); /* what follows the head */
	/* cut anywhere in half of them: a head that goes on in the next segment */
	return draw_below(d, 2) ? d->n : 1 + draw_below(d, (uint32_t)d->n);
}

/* text, its CR, LF and tab written out, for a failure's message */
static const char *escaped(const char *t, size_t n)
{
	static char out[4 * 640 + 1];
	size_t o = 0;

	for (size_t k = 0; k < n && o + 4 < sizeof(out); k++) {
		const char *e = t[k] == '\r' ? "\\r" : t[k] == '\n' ? "\\n" : t[k] == '\t' ? "\\t" : NULL;

		if (e)
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", e);
		else
			out[o++] = t[k];
	}
	out[o] = 0;
	return out;
}

static void test_classification_matches_model_on_cut_heads(void **state)
{
	struct fixture *f = *state;
	const uint64_t seed = 0x5eed2026120701ull; /* fixed: a failure replays */
	char text[640];
	struct draw d = { .s = seed, .b = text, .cap = sizeof(text) };
	int seen[4] = { 0 }, cut = 0, long_blanks = 0;

	for (int i = 0; i < 2000; i++) {
		uint64_t before[4];
		size_t len = draw_request(&d);
		int want = model_class(text, len);

		for (int c = 0; c < 4; c++)
			before[c] = stats(f, c).arrivals;
		struct pkt_spec rq = request("203.0.113.5", (uint16_t)(50000 + i), "");
		rq.payload = text;
		rq.payload_len = len;
		if (i % 3 == 2) /* IPv6 too: the payload further in, from a client inside trust_from */
			rq.v6 = 1, rq.src = "2001:db8::5", rq.dst = "2001:db8::1";
		handshake(f, &rq);
		admitted(f, &rq);
		for (int c = 0; c < 4; c++) {
			if (stats(f, c).arrivals - before[c] != (uint64_t)(c == want)) {
				print_error("draw %d (seed %#llx): want L%d, L%d got %llu arrivals; "
					    "the segment (%zu bytes): %s\n", i,
					    (unsigned long long)seed, want, c,
					    (unsigned long long)(stats(f, c).arrivals - before[c]),
					    len, escaped(text, len));
				fail();
			}
		}
		seen[want]++;
		cut += len < d.n;
		long_blanks += d.long_value;
		both_close_after(f, &rq);
	}
	print_message("# classes L0-L3 %d / %d / %d / %d, %d cut, %d with a long blank run\n",
		      seen[0], seen[1], seen[2], seen[3], cut, long_blanks);
	/* The draws reach every class, cut heads and long blank runs (or the test says little). */
	for (int c = 0; c < 4; c++)
		assert_true(seen[c] > 30);
	assert_true(cut > 500);
	assert_true(long_blanks > 100);
	assert_int_equal(inflight(f), 0);
}

/* Forged data segments (a request line, random forged sources, no handshake ever): each goes
 * to the server as it is, and none creates a flow, takes a slot or is even decided. */
static void test_data_without_handshake_creates_nothing(void **state)
{
	struct fixture *f = *state;
	char src[32];

	for (uint32_t i = 0; i < 200; i++) {
		snprintf(src, sizeof(src), "%u.%u.%u.%u", 1 + i % 223, (i * 7) & 0xff, (i * 13) & 0xff,
			 1 + i % 250);
		struct pkt_spec rq = request(src, (uint16_t)(1024 + i * 31), GET("/x", "X-Priority: L0\r\n"));
		rq.seq = 0x9e3779b9u * (i + 1), rq.ack = 0x7f4a7c15u * (i + 1);
		run_xdp(f, &rq);
		admitted(f, &rq);
	}
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(inflight(f), 0);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(stats(f, c).arrivals, 0);
}

/* The flow table (4 entries here) full of established connections, then an attempt to add
 * to it with what needs no handshake (500 forged requests, 500 forged SYNs): nothing is added
 * and requests on the established connections are still decided: L3 (2 of the limit of 8)
 * admits two, the third gets its 429, and once one is answered the next is admitted again. */
static void test_table_full_attempt_keeps_shedding_on(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq[4];
	char src[32];

	for (uint16_t p = 0; p < 4; p++) {
		rq[p] = request("203.0.113.5", (uint16_t)(4000 + p), GET("/report", ""));
		handshake(f, &rq[p]);
	}
	assert_int_equal(flow_count(f), 4);
	for (uint32_t i = 0; i < 500; i++) {
		snprintf(src, sizeof(src), "198.%u.%u.%u", 18 + (i & 1), (i * 7) & 0xff, 1 + i % 250);
		struct pkt_spec fq = request(src, (uint16_t)(1024 + i), GET("/x", ""));
		fq.seq = 0x9e3779b9u * (i + 1), fq.ack = 0x7f4a7c15u * (i + 1);
		run_xdp(f, &fq);
		admitted(f, &fq);
		struct pkt_spec syn = fq;
		syn.syn = 1, syn.ackf = 0, syn.psh = 0, syn.payload = NULL, syn.payload_len = 0;
		run_xdp(f, &syn);
	}
	assert_int_equal(flow_count(f), 4);
	assert_int_equal(inflight(f), 0);
	admitted(f, &rq[0]);
	admitted(f, &rq[1]);
	assert_int_equal(inflight(f), 2);
	struct run r = ingress(f, &rq[2]);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_false(harness_unchanged(&r));           /* turned into the RST to the server */
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(inflight(f), 2);
	struct pkt_spec done = response("203.0.113.5", 4000, "HTTP/1.1 200 OK\r\n\r\n");
	done.ack = rq[0].seq + (uint32_t)rq[0].payload_len;
	egress(f, &done);
	assert_int_equal(inflight(f), 1);
	admitted(f, &rq[3]);
	assert_int_equal(inflight(f), 2);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(stats(f, c).untracked, 0);
	assert_int_equal(stats(f, 3).admitted, 3);
}

/* A request starts where the client is (after the handshake, then after the bytes it sent
 * before) and with a method token; a request line anywhere else, a body, or a resent request
 * starts nothing. */
static void test_request_only_at_the_expected_sequence(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.5", 1500, GET("/x", ""));

	handshake(f, &rq);
	struct pkt_spec ahead = rq;
	ahead.seq += 100; /* not where the client is: a forger who guessed the 4-tuple */
	admitted(f, &ahead);
	struct pkt_spec behind = rq;
	behind.seq -= 100;
	admitted(f, &behind);
	assert_int_equal(stats(f, 2).arrivals, 0);
	assert_int_equal(inflight(f), 0);

	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	/* Its body: no method, not a request; a body that looks like a request line is not
	 * one either while the request is in flight. */
	struct pkt_spec body = rq;
	body.seq += (uint32_t)rq.payload_len, body.payload = "GET x=1&y=2", body.payload_len = 11;
	admitted(f, &body);
	assert_int_equal(stats(f, 2).arrivals, 1);
	struct pkt_spec rs = response("203.0.113.5", 1500, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.ack = body.seq + (uint32_t)body.payload_len; /* all the server received */
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
	/* The same request again (a resend): a retry, not a new request. */
	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(stats(f, 2).retransmits, 1);
	/* The next request on the connection, right after the previous bytes. */
	struct pkt_spec next = rq;
	next.seq = body.seq + (uint32_t)body.payload_len;
	admitted(f, &next);
	assert_int_equal(stats(f, 2).arrivals, 2);
	assert_int_equal(inflight(f), 1);
	/* A forged RST beyond the window ends nothing; the client's FIN and then the server's
	 * close end the request. */
	struct pkt_spec rst = next;
	rst.payload_len = 0, rst.psh = 0, rst.rst = 1, rst.seq += (uint32_t)next.payload_len + SLUICE_SEQ_WINDOW;
	run_xdp(f, &rst);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(flow_count(f), 1);
	struct pkt_spec fin = next;
	fin.payload_len = 0, fin.psh = 0, fin.fin = 1, fin.seq += (uint32_t)next.payload_len;
	run_xdp(f, &fin);
	assert_int_equal(inflight(f), 1);
	server_closes(f, &fin);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(flow_count(f), 0);
}

/* A verdict never written (all zero) admits every request. */
static void test_all_zero_verdict_admits_requests(void **state)
{
	struct fixture *f = *state;
	struct sluice_verdict zero;

	memset(&zero, 0, sizeof(zero));
	maps_write_verdict(&f->m, f->idx[0], &zero);
	for (uint16_t p = 0; p < 20; p++) {
		struct pkt_spec rq = request("203.0.113.5", (uint16_t)(5000 + p), GET("/report", ""));
		handshake(f, &rq);
		admitted(f, &rq);
	}
	assert_int_equal(stats(f, 3).admitted, 20);
	assert_int_equal(inflight(f), 20);
	for (uint16_t p = 0; p < 20; p++) {
		struct pkt_spec rs = response("203.0.113.5", (uint16_t)(5000 + p), "HTTP/1.1 200 OK\r\n\r\n");
		egress(f, &rs);
	}
	assert_int_equal(inflight(f), 0);
}

static int capture_socket(void)
{
	int s = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				   .sll_ifindex = 1 };

	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sll, sizeof(sll)), 0);
	return s;
}

/* The next captured frame that is TCP from port 8080 (outgoing copy on lo). */
static ssize_t capture_reply(int s, uint8_t *buf, size_t cap)
{
	for (int tries = 0; tries < 50; tries++) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 20) <= 0)
			continue;
		ssize_t n = recv(s, buf, cap, 0);
		if (n > 54 && buf[23] == IPPROTO_TCP && buf[34] == 0x1f && buf[35] == 0x90)
			return n;
	}
	return -1;
}

/* L2 filled (75 % of 8 = 6) by requests from src at ports base..base+5, then text sent as the
 * first segment of a new connection from base + 100: refused there, a 429 to the client and
 * the segment turned into an RST to the server. */
static void l2_full_then_refused(struct fixture *f, const char *src, uint16_t base, const char *text)
{
	for (uint16_t p = 0; p < 6; p++) {
		struct pkt_spec r2 = request(src, (uint16_t)(base + p), GET("/y", ""));

		handshake(f, &r2);
		admitted(f, &r2);
	}
	assert_int_equal(inflight(f), 6);
	struct pkt_spec first = request(src, (uint16_t)(base + 100), text);
	handshake(f, &first);
	struct run r = ingress(f, &first);
	const struct tcphdr *tcp = (const void *)(r.out + 34);

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(stats(f, 2).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(inflight(f), 6);
	assert_int_equal(r.out_len, 54);
	assert_true(tcp->rst);
}

/* A client chooses where its segments end. One that cuts its request before the method's space
 * ("GET" | " /x HTTP/1.1 ...") still has it decided at the first segment (its source rules or
 * the default class: no header is in view), and refused when its class has no room: before,
 * neither segment read as a start and every such request went to the server undecided. A
 * token cut anywhere starts at its first piece ("G" | "ET" | " /x ..." is one request). */
static void test_request_cut_before_its_space_is_decided(void **state)
{
	struct fixture *f = *state;
	static const char *heads[] = { "GET", "POST", "G", "OPTIONS" };
	struct pkt_spec rq = request("203.0.113.9", 1600, GET("/x", ""));
	uint32_t seq;

	handshake(f, &rq);
	seq = rq.seq;
	for (int i = 0; i < 4; i++) {
		struct pkt_spec head = rq, rest = rq, rs;
		const char *tail = " /x HTTP/1.1\r\nHost: t\r\n\r\n";

		head.seq = seq;
		head.payload = heads[i];
		head.payload_len = strlen(heads[i]);
		admitted(f, &head);
		assert_int_equal(stats(f, 2).arrivals, (unsigned long long)i + 1);
		assert_int_equal(inflight(f), 1);
		rest.seq = seq + (uint32_t)head.payload_len;
		rest.payload = tail;
		rest.payload_len = strlen(tail);
		admitted(f, &rest); /* the same request */
		assert_int_equal(stats(f, 2).arrivals, (unsigned long long)i + 1);
		seq = rest.seq + (uint32_t)rest.payload_len;
		rs = response("203.0.113.9", 1600, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		rs.ack = seq;
		egress(f, &rs);
		assert_int_equal(inflight(f), 0);
	}
	/* "G" | "ET" | " /x ...": one request, decided at "G". */
	{
		struct pkt_spec g = rq, et = rq, tail = rq, rs;
		const char *t = " /x HTTP/1.1\r\nHost: t\r\n\r\n";

		g.seq = seq, g.payload = "G", g.payload_len = 1;
		et.seq = seq + 1, et.payload = "ET", et.payload_len = 2;
		tail.seq = seq + 3, tail.payload = t, tail.payload_len = strlen(t);
		admitted(f, &g);
		admitted(f, &et);
		admitted(f, &tail);
		assert_int_equal(stats(f, 2).arrivals, 5);
		assert_int_equal(inflight(f), 1);
		seq = tail.seq + (uint32_t)tail.payload_len;
		rs = response("203.0.113.9", 1600, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		rs.ack = seq;
		egress(f, &rs);
		assert_int_equal(inflight(f), 0);
	}
	/* Not a token cut short: a brace, a leading space, CR LF, 24 lower-case letters with no
	 * request target in reach (text, not a method). */
	static const char *not_heads[] = { "{GET", " GET", "\r\n", "abcdefghijklmnopqrstuvwx" };
	for (int i = 0; i < 4; i++) {
		struct pkt_spec junk = rq;

		junk.seq = seq;
		junk.payload = not_heads[i];
		junk.payload_len = strlen(not_heads[i]);
		admitted(f, &junk);
		seq += (uint32_t)junk.payload_len;
	}
	assert_int_equal(stats(f, 2).arrivals, 5);
	assert_int_equal(inflight(f), 0);
	/* A method of capitals longer than sluice reads (Go's net/http serves any method): a
	 * request all the same, whole or cut short, decided without its path. (It was taken for
	 * no start, and such requests went past the shedding uncounted.) */
	static const char *long_heads[] = {
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ /report HTTP/1.1\r\nHost: t\r\n\r\n",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
	};
	for (int i = 0; i < 2; i++) {
		struct pkt_spec lm = rq, rs;

		lm.seq = seq;
		lm.payload = long_heads[i];
		lm.payload_len = strlen(long_heads[i]);
		admitted(f, &lm);
		assert_int_equal(stats(f, 2).arrivals, 6 + (unsigned)i);
		assert_int_equal(inflight(f), 1);
		seq += (uint32_t)lm.payload_len;
		rs = response("203.0.113.9", 1600, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		rs.ack = seq;
		egress(f, &rs);
		assert_int_equal(inflight(f), 0);
	}

	/* With L2 full (75 % of 8 = 6), an L2 client that cuts its request so has it refused at
	 * the first segment: a 429 to the client, the segment turned into an RST to the server. */
	l2_full_then_refused(f, "203.0.113.9", 3100, "GET");
}

/* One request on the client's connection at seq (text), answered and ended; returns where the
 * client is after it. */
static uint32_t one_request(struct fixture *f, const struct pkt_spec *conn, uint32_t seq,
			    const char *text)
{
	struct pkt_spec rq = *conn, rs;

	rq.seq = seq, rq.payload = text, rq.payload_len = strlen(text);
	admitted(f, &rq);
	seq += (uint32_t)rq.payload_len;
	rs = response("203.0.113.10", conn->sport, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.ack = seq;
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
	return seq;
}

/* Servers skip blank lines before a request line (nginx any number, Apache ten): a request
 * sent after them is decided, and classified on what follows them. Method characters are
 * capitals, '_' and '-'. */
static void test_blank_lines_before_the_request_line(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.10", 1610, GET("/x", ""));
	char many[64 + sizeof(GET("/x", ""))] = "";
	uint32_t seq = rq.seq;

	handshake(f, &rq);
	seq = one_request(f, &rq, seq, "\r\n" GET("/x", ""));
	assert_int_equal(stats(f, 2).arrivals, 1);
	/* classified after them: /pay is L0 by path (read within the first 16 bytes) */
	seq = one_request(f, &rq, seq, "\r\n\r\n\r\n\r\n\r\n\r\n\r\n" GET("/pay", ""));
	assert_int_equal(stats(f, 0).arrivals, 1);
	/* blank lines alone start nothing; the request after them does */
	seq = one_request(f, &rq, seq, "\r\n");
	assert_int_equal(stats(f, 2).arrivals, 1);
	seq = one_request(f, &rq, seq, GET("/x", ""));
	assert_int_equal(stats(f, 2).arrivals, 2);
	/* more of them than are read: a start all the same, in the lowest class (its path, here
	 * one of L0's, is out of view) */
	for (int i = 0; i < 20; i++)
		strcat(many, "\r\n");
	strcat(many, GET("/pay", ""));
	seq = one_request(f, &rq, seq, many);
	assert_int_equal(stats(f, 3).arrivals, 1);
	assert_int_equal(stats(f, 0).arrivals, 1);
	seq = one_request(f, &rq, seq, "X_Y-Z /x HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(stats(f, 2).arrivals, 3);
	/* With L2 full (75 % of 8 = 6), such a request is refused at its first segment. */
	l2_full_then_refused(f, "203.0.113.10", 3300, "\r\n" GET("/y", ""));
}

static void test_refused_request_gets_429_and_server_rst(void **state)
{
	struct fixture *f = *state;
	/* L3 (path /report) may use 25% of 8 = 2: the third concurrent one is refused. */
	for (uint16_t p = 0; p < 2; p++) {
		struct pkt_spec rq = request("203.0.113.5", (uint16_t)(3000 + p), GET("/report", ""));
		handshake(f, &rq);
		admitted(f, &rq);
	}
	int cap = capture_socket();
	const char *text = GET("/report/daily", "");
	struct pkt_spec rq = request("203.0.113.5", 3999, text);
	rq.seq = 0xfffffff0u; /* the ack of the reply must wrap */
	uint8_t in[1024];
	size_t in_len = build_pkt(in, &rq);
	handshake(f, &rq);
	struct run r = ingress(f, &rq);

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(inflight(f), 2);

	/* What goes on to the server: an RST at the client's sequence number, no payload. */
	const struct iphdr *ip = (const void *)(r.out + 14);
	const struct tcphdr *tcp = (const void *)(r.out + 34);
	const struct iphdr *oip = (const void *)(in + 14);
	assert_int_equal(r.out_len, 54);
	assert_int_equal(ip->saddr, oip->saddr);
	assert_int_equal(ip->daddr, oip->daddr);
	assert_int_equal(ntohs(tcp->dest), 8080);
	assert_int_equal(ntohs(tcp->source), 3999);
	assert_true(tcp->rst);
	assert_false(tcp->fin || tcp->syn || tcp->psh);
	assert_int_equal(ntohl(tcp->seq), 0xfffffff0u);
	assert_int_equal(ntohs(ip->tot_len), 40);
	assert_int_equal(csum_finish(csum_add(0, ip, 20)), 0);
	assert_int_equal(tcp_verify(ip, 0, tcp, 20), 0);

	/* What the client gets: the complete 429, FIN, seq = its ack, ack = its seq + len. */
	uint8_t rep[1024];
	ssize_t n = capture_reply(cap, rep, sizeof(rep));
	close(cap);
	assert_true(n > 54);
	const struct ethhdr *eth = (const void *)rep;
	ip = (const void *)(rep + 14);
	tcp = (const void *)(rep + 34);
	size_t plen = (size_t)n - 54;
	assert_memory_equal(eth->h_dest, MAC_CLIENT, 6);
	assert_memory_equal(eth->h_source, MAC_SERVER, 6);
	assert_int_equal(ip->saddr, oip->daddr);
	assert_int_equal(ip->daddr, oip->saddr);
	assert_int_equal(ntohs(ip->tot_len), 40 + plen);
	assert_int_equal(csum_finish(csum_add(0, ip, 20)), 0);
	assert_int_equal(ntohs(tcp->source), 8080);
	assert_int_equal(ntohs(tcp->dest), 3999);
	assert_int_equal(ntohl(tcp->seq), 9000);
	assert_int_equal(ntohl(tcp->ack_seq), 0xfffffff0u + (uint32_t)strlen(text));
	assert_true(tcp->fin && tcp->ack && tcp->psh);
	assert_false(tcp->rst || tcp->syn);
	assert_int_equal(tcp->doff, 5);
	assert_int_equal(tcp_verify(ip, 0, tcp, 20 + plen), 0);
	char body[512];
	memcpy(body, rep + 54, plen);
	body[plen] = 0;
	assert_non_null(strstr(body, "HTTP/1.1 429 Too Many Requests\r\n"));
	assert_non_null(strstr(body, "Retry-After: 7\r\n"));
	assert_non_null(strstr(body, "Connection: close\r\n"));
	const char *hdr_end = strstr(body, "\r\n\r\n");
	assert_non_null(hdr_end);
	int clen = atoi(strstr(body, "Content-Length: ") + 16);
	assert_int_equal(clen, (int)(plen - (size_t)(hdr_end + 4 - body)));
	assert_int_equal(plen % 4, 0);
	(void)in_len;
}

/* A request refused on a keep-alive connection the server has answered on: sluice first asks
 * the stack whether an answer is still on its way to the client. A stack that holds no such
 * connection (here: only the port's listener, which the socket lookup then returns) has none,
 * so the refusal goes out as on a new connection. */
static void test_refusal_after_an_answer_asks_only_the_connection(void **state)
{
	struct fixture *f = *state;
	int lsn = live_listen(8080), cap;
	struct pkt_spec rq = request("127.0.0.1", 4000, GET("/x", "")), rs, next;
	uint8_t rep[1024];
	ssize_t n;

	rq.dst = "127.0.0.1";
	handshake(f, &rq);
	admitted(f, &rq);
	rs = response("127.0.0.1", 4000, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.src = "127.0.0.1", rs.ack = rq.seq + (uint32_t)rq.payload_len;
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
	/* L3 may use 25% of 8 = 2: both held by another client */
	for (uint16_t p = 0; p < 2; p++) {
		struct pkt_spec h = request("203.0.113.5", (uint16_t)(3000 + p), GET("/report", ""));
		handshake(f, &h);
		admitted(f, &h);
	}
	cap = capture_socket();
	next = rq;
	next.payload = GET("/report", ""), next.payload_len = strlen(next.payload);
	next.seq = rq.seq + (uint32_t)rq.payload_len;
	next.ack = rs.seq + (uint32_t)rs.payload_len; /* the client has the whole answer */
	assert_int_equal(ingress(f, &next).ret, TC_ACT_UNSPEC);
	n = capture_reply(cap, rep, sizeof(rep));
	close(cap);
	close(lsn);
	assert_true(n > 54 + 12);
	assert_memory_equal(rep + 54, "HTTP/1.1 429", 12);
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(stats(f, 3).untracked, 0);
	assert_int_equal(inflight(f), 2);
}

/* The next captured IPv6 frame that is TCP from port 8080. */
static ssize_t capture_reply6(int s, uint8_t *buf, size_t cap)
{
	for (int tries = 0; tries < 50; tries++) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 20) <= 0)
			continue;
		ssize_t n = recv(s, buf, cap, 0);
		if (n > 74 && buf[12] == 0x86 && buf[13] == 0xdd && buf[20] == IPPROTO_TCP &&
		    buf[54] == 0x1f && buf[55] == 0x90)
			return n;
	}
	return -1;
}

static void test_ipv6_refused_request_gets_429(void **state)
{
	struct fixture *f = *state;
	const char *text = GET("/report/v6", "");
	struct pkt_spec rq = { .v6 = 1, .src = "2001:db8::5", .dst = "2001:db8::1", .sport = 4444,
			       .dport = 8080, .seq = 777, .ack = 9000, .ackf = 1, .psh = 1,
			       .payload = text, .payload_len = strlen(text) };
	struct sluice_verdict v;

	/* L3 (path /report) shut out: every such request is refused. */
	maps_read_verdict(&f->m, f->idx[0], &v);
	v.flags |= SLUICE_VERDICT_SHUT(3);
	maps_write_verdict(&f->m, f->idx[0], &v);
	handshake(f, &rq);
	int cap = capture_socket();
	struct run r = ingress(f, &rq);
	uint8_t rep[1024];
	ssize_t n = capture_reply6(cap, rep, sizeof(rep));
	close(cap);

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	/* To the server: an RST at the client's sequence number. */
	const struct ipv6hdr *sip = (const void *)(r.out + 14);
	const struct tcphdr *stcp = (const void *)(r.out + 54);
	assert_int_equal(r.out_len, 74);
	assert_int_equal(ntohs(sip->payload_len), 20);
	assert_true(stcp->rst);
	assert_int_equal(ntohl(stcp->seq), 777);
	assert_int_equal(tcp_verify(sip, 1, stcp, 20), 0);
	/* To the client: the 429 with FIN, checksummed over the v6 pseudo-header. */
	assert_true(n > 74);
	const struct ipv6hdr *ip6 = (const void *)(rep + 14);
	const struct tcphdr *tcp = (const void *)(rep + 54);
	size_t plen = (size_t)n - 74;
	char want_dst[16];
	inet_pton(AF_INET6, "2001:db8::5", want_dst);
	assert_memory_equal(&ip6->daddr, want_dst, 16);
	assert_int_equal(ntohs(ip6->payload_len), 20 + plen);
	assert_int_equal(ntohs(tcp->dest), 4444);
	assert_int_equal(ntohl(tcp->ack_seq), 777 + (uint32_t)strlen(text));
	assert_true(tcp->fin && tcp->ack);
	assert_int_equal(tcp_verify(ip6, 1, tcp, 20 + plen), 0);
	assert_memory_equal(rep + 74, "HTTP/1.1 429 Too Many Requests\r\n", 32);
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 1);
}

/* A refused request whose segment also carries the client's FIN (it wrote the request and
 * half-closed at once): the reply acknowledges the FIN as well as the request's bytes, or the
 * client's FIN stays unacknowledged and its stack resends it into the server's reset socket. */
static void test_refused_request_with_fin_acknowledges_the_fin(void **state)
{
	struct fixture *f = *state;
	const char *text = GET("/report/fin", "");
	struct pkt_spec rq = request("203.0.113.5", 4555, text);
	struct sluice_verdict v;
	uint8_t rep[1024];
	ssize_t n;
	int cap;

	maps_read_verdict(&f->m, f->idx[0], &v);
	v.flags |= SLUICE_VERDICT_SHUT(3);
	maps_write_verdict(&f->m, f->idx[0], &v);
	handshake(f, &rq);
	rq.fin = 1;
	cap = capture_socket();
	struct run r = ingress(f, &rq);
	n = capture_reply(cap, rep, sizeof(rep));
	close(cap);

	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_true(n > 54);
	const struct iphdr *ip = (const void *)(rep + 14);
	const struct tcphdr *tcp = (const void *)(rep + 34);
	assert_int_equal(ntohl(tcp->seq), 9000);
	assert_int_equal(ntohl(tcp->ack_seq), 5000 + (uint32_t)strlen(text) + 1);
	assert_true(tcp->fin && tcp->ack);
	assert_int_equal(tcp_verify(ip, 0, tcp, (size_t)n - 34), 0);
	/* the server's RST still at the client's first byte */
	tcp = (const void *)(r.out + 34);
	assert_true(tcp->rst);
	assert_int_equal(ntohl(tcp->seq), 5000);
}

/* A refused request that came with IPv4 options or IPv6 extension headers (a first fragment
 * included) is answered like any other, the reply and the RST without them, checksums right;
 * never admitted untracked. */
static void test_refused_request_with_ip_options_answered(void **state)
{
	struct fixture *f = *state;
	const char *text = GET("/report/opt", "");
	struct sluice_verdict v;

	maps_read_verdict(&f->m, f->idx[0], &v);
	v.flags |= SLUICE_VERDICT_SHUT(3);
	maps_write_verdict(&f->m, f->idx[0], &v);
	for (int v6 = 0; v6 <= 1; v6++) {
		struct pkt_spec rq = request("203.0.113.5", (uint16_t)(5100 + v6), text);
		size_t l3 = v6 ? 40 : 20;
		if (v6) {
			rq.v6 = 1, rq.src = "2001:db8::5", rq.dst = "2001:db8::1";
			rq.ext = "HRDF", rq.frag = 1;
		} else {
			rq.ip_opts = 12;
		}
		/* the handshake's segments unfragmented: a SYN alone in a first fragment, with no
		 * data, is too short to judge and is dropped */
		struct pkt_spec hs = rq;
		if (v6)
			hs.ext = "HRD", hs.frag = 0;
		handshake(f, &hs);
		int cap = capture_socket();
		struct run r = ingress(f, &rq);
		uint8_t rep[1024];
		ssize_t n = v6 ? capture_reply6(cap, rep, sizeof(rep)) : capture_reply(cap, rep, sizeof(rep));
		close(cap);

		assert_int_equal(r.ret, TC_ACT_UNSPEC);
		/* To the server: an RST at the client's sequence number, in the fixed headers. */
		uint8_t srv[128];
		memcpy(srv, r.out, sizeof(srv));
		const struct tcphdr *stcp = (const void *)(srv + 14 + l3);
		assert_int_equal(r.out_len, 14 + l3 + 20);
		assert_true(stcp->rst);
		assert_int_equal(ntohl(stcp->seq), 5000);
		assert_int_equal(tcp_verify(srv + 14, v6, stcp, 20), 0);
		/* To the client: the 429 with FIN. */
		assert_true(n > (ssize_t)(14 + l3 + 20));
		const struct tcphdr *tcp = (const void *)(rep + 14 + l3);
		size_t plen = (size_t)n - 14 - l3 - 20;
		if (v6) {
			const struct ipv6hdr *ip6 = (const void *)(rep + 14);
			assert_int_equal(ip6->nexthdr, IPPROTO_TCP);
			assert_int_equal(ntohs(ip6->payload_len), 20 + plen);
		} else {
			const struct iphdr *ip = (const void *)(rep + 14), *sip = (const void *)(srv + 14);
			assert_int_equal(ip->ihl, 5);
			assert_int_equal(ntohs(ip->tot_len), 40 + plen);
			assert_int_equal(csum_finish(csum_add(0, ip, 20)), 0);
			assert_int_equal(sip->ihl, 5);
			assert_int_equal(csum_finish(csum_add(0, sip, 20)), 0);
		}
		assert_int_equal(ntohs(tcp->dest), 5100 + v6);
		assert_int_equal(ntohl(tcp->ack_seq), 5000 + (uint32_t)strlen(text));
		assert_true(tcp->fin && tcp->ack);
		assert_int_equal(tcp_verify(rep + 14, v6, tcp, 20 + plen), 0);
		assert_memory_equal(rep + 14 + l3 + 20, "HTTP/1.1 429 Too Many Requests\r\n", 32);
	}
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 2);
	assert_int_equal(stats(f, 3).untracked, 0);
	assert_int_equal(stats(f, 3).admitted, 0);
}

/* The server's answer to rq, acknowledging all of it. */
static struct pkt_spec answer_to(const struct pkt_spec *rq, uint32_t off, const char *text)
{
	struct pkt_spec r = response(rq->src, rq->sport, text);
	r.seq = 9000 + off, r.ack = rq->seq + (uint32_t)rq->payload_len;
	return r;
}

/* Request boundaries: a 1xx other than 101 is not the final response (the request keeps its
 * slot until the real one, its body starts nothing); after a 101 or a CONNECT the flow is
 * opaque: request-looking bytes on it are neither decided nor refused, even with every class
 * shut. */
static void test_interim_upgrade_and_connect(void **state)
{
	struct fixture *f = *state;
	const char *post = "POST /x HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
			   "Content-Length: 10\r\n\r\n";
	const char *cont = "HTTP/1.1 100 Continue\r\n\r\n";
	struct pkt_spec rq = request("203.0.113.5", 6100, post);

	handshake(f, &rq);
	admitted(f, &rq);
	assert_int_equal(inflight(f), 1);
	struct pkt_spec c = answer_to(&rq, 0, cont);
	egress(f, &c);
	assert_int_equal(inflight(f), 1);           /* 100 Continue ends nothing */
	struct pkt_spec body = rq;
	body.seq += (uint32_t)rq.payload_len, body.payload = "GET 567890", body.payload_len = 10;
	admitted(f, &body);                          /* a body is no request, whatever it reads */
	assert_int_equal(stats(f, 2).arrivals, 1);
	body.payload_len = 0;                        /* what the final answer acknowledges */
	body.seq += 10;
	struct pkt_spec fin = response("203.0.113.5", 6100, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	fin.seq = 9000 + (uint32_t)strlen(cont), fin.ack = body.seq;
	egress(f, &fin);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(stats(f, 2).completed, 1);

	struct sluice_verdict v;
	maps_read_verdict(&f->m, f->idx[0], &v);
	struct sluice_verdict shut = v;
	const char *opener[2] = { GET("/chat", "Upgrade: websocket\r\nConnection: Upgrade\r\n"),
				  "CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal\r\n\r\n" };
	const char *reply[2] = { "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
				 "HTTP/1.1 200 Connection established\r\n\r\n" };
	for (int i = 0; i < 2; i++) {
		maps_write_verdict(&f->m, f->idx[0], &v);
		struct pkt_spec o = request("203.0.113.5", (uint16_t)(6200 + i), opener[i]);
		handshake(f, &o);
		admitted(f, &o);
		assert_int_equal(inflight(f), 1);
		struct pkt_spec a = answer_to(&o, 0, reply[i]);
		egress(f, &a);
		assert_int_equal(inflight(f), 0);
		for (int k = 0; k < 4; k++)
			shut.flags |= SLUICE_VERDICT_SHUT(k);
		maps_write_verdict(&f->m, f->idx[0], &shut);
		uint64_t arrivals = stats(f, 2).arrivals;
		struct pkt_spec next = request("203.0.113.5", (uint16_t)(6200 + i), GET("/x", ""));
		next.seq = o.seq + (uint32_t)o.payload_len;
		admitted(f, &next);                  /* at the expected sequence, yet not decided */
		assert_int_equal(stats(f, 2).arrivals, arrivals);
		assert_int_equal(inflight(f), 0);
		assert_int_equal(flow_count(f), 2 + i);
	}

	/* A CONNECT cut before its space ("CONNECT" | " db.internal:5432 ...") is one too. */
	maps_write_verdict(&f->m, f->idx[0], &v);
	struct pkt_spec o = request("203.0.113.5", 6300, "CONNECT");
	struct pkt_spec rest = o;
	handshake(f, &o);
	admitted(f, &o);
	assert_int_equal(inflight(f), 1);
	rest.seq += (uint32_t)o.payload_len;
	rest.payload = " db.internal:5432 HTTP/1.1\r\nHost: db.internal\r\n\r\n";
	rest.payload_len = strlen(rest.payload);
	admitted(f, &rest);
	struct pkt_spec a = answer_to(&rest, 0, reply[1]);
	egress(f, &a);
	assert_int_equal(inflight(f), 0);
	maps_write_verdict(&f->m, f->idx[0], &shut);
	uint64_t arrivals = stats(f, 2).arrivals;
	struct pkt_spec next = request("203.0.113.5", 6300, GET("/x", ""));
	next.seq = rest.seq + (uint32_t)rest.payload_len;
	admitted(f, &next);                          /* the tunnel's bytes: not decided */
	assert_int_equal(stats(f, 2).arrivals, arrivals);
	assert_int_equal(inflight(f), 0);
}

/* A client that writes its whole request and half-closes before the SYN-ACK arrives sends
 * the handshake's ACK, the request and its FIN as one segment; the kernel establishes the
 * connection from it and hands the request to the server. That request is decided like any
 * other: admitted and counted while there is room, refused with a 429 when its class is shut
 * (it once passed undecided, its handshake's record taken for one that was given up). */
static void test_request_with_fin_completing_the_handshake_is_decided(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.5", 1012, GET("/z", "")), syn, sa, ack;

	handshake_of(&rq, &syn, &sa, &ack);
	run_xdp(f, &syn);
	admitted(f, &syn);
	egress(f, &sa);
	rq.fin = 1;                                  /* no bare ACK before it */
	run_xdp(f, &rq);
	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(flow_count(f), 1);
	struct pkt_spec rs = response("203.0.113.5", 1012, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.ack = rq.seq + (uint32_t)rq.payload_len + 1;
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);

	/* every class shut: the same segment gets the 429 */
	struct sluice_verdict v;
	maps_read_verdict(&f->m, f->idx[0], &v);
	for (int k = 0; k < 4; k++)
		v.flags |= SLUICE_VERDICT_SHUT(k);
	maps_write_verdict(&f->m, f->idx[0], &v);
	struct pkt_spec two = request("203.0.113.5", 1013, GET("/z", ""));
	handshake_of(&two, &syn, &sa, &ack);
	run_xdp(f, &syn);
	egress(f, &sa);
	two.fin = 1;
	run_xdp(f, &two);
	int cap = capture_socket();
	ingress(f, &two);
	uint8_t rep[1024];
	assert_true(capture_reply(cap, rep, sizeof(rep)) > 54);
	close(cap);
	assert_int_equal(stats(f, 2).arrivals, 2);
	assert_int_equal(inflight(f), 0);
}

/* A CONNECT the server refuses (a 4xx, the connection kept alive) opens no tunnel: the
 * connection's next requests are requests, decided like any other. Were the flow opaque from
 * the CONNECT's admission on, one refused CONNECT would let every later request on the
 * connection pass undecided and uncounted. */
static void test_refused_connect_leaves_the_connection_http(void **state)
{
	struct fixture *f = *state;
	struct sluice_verdict v, shut;
	struct pkt_spec o = request("203.0.113.5", 6400,
				    "CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal\r\n\r\n");

	maps_read_verdict(&f->m, f->idx[0], &v);
	shut = v;
	for (int k = 0; k < 4; k++)
		shut.flags |= SLUICE_VERDICT_SHUT(k);
	handshake(f, &o);
	admitted(f, &o);
	assert_int_equal(inflight(f), 1);
	struct pkt_spec a = answer_to(&o, 0, "HTTP/1.1 405 Method Not Allowed\r\n"
					      "Content-Length: 0\r\n\r\n");
	egress(f, &a);
	assert_int_equal(inflight(f), 0);
	maps_write_verdict(&f->m, f->idx[0], &shut);
	uint64_t arrivals = stats(f, 2).arrivals;
	struct pkt_spec next = request("203.0.113.5", 6400, GET("/x", ""));
	next.seq = o.seq + (uint32_t)o.payload_len;
	next.ack = a.seq + (uint32_t)a.payload_len;
	ingress(f, &next);              /* a plain request at the expected sequence */
	assert_int_equal(stats(f, 2).arrivals, arrivals + 1); /* decided (refused: all shut) */
}

/* No 429/503 goes to a peer that has not proved it receives our packets: with every class
 * shut, request segments with no handshake, with a handshake whose ACK never came, or with an
 * ACK that does not acknowledge the server's SYN-ACK get no reply at all (0 bytes back for
 * any bytes sent) and pass untouched; the completed handshake's request gets one. */
static void test_no_reply_to_unverified_peers(void **state)
{
	struct fixture *f = *state;
	struct sluice_verdict v;

	maps_read_verdict(&f->m, f->idx[0], &v);
	for (int k = 0; k < 4; k++)
		v.flags |= SLUICE_VERDICT_SHUT(k);
	maps_write_verdict(&f->m, f->idx[0], &v);
	int cap = capture_socket();
	for (uint16_t i = 0; i < 30; i++) {
		struct pkt_spec rq = request("203.0.113.9", (uint16_t)(7000 + i), GET("/x", ""));
		struct pkt_spec syn, sa, ack;
		handshake_of(&rq, &syn, &sa, &ack);
		if (i % 3 >= 1) {                    /* SYN and SYN-ACK seen, ... */
			run_xdp(f, &syn);
			egress(f, &sa);
		}
		if (i % 3 == 2) {                    /* ... an ACK of something else */
			ack.ack += 0x40000000u;
			run_xdp(f, &ack);
			rq.ack = ack.ack;
		}
		admitted(f, &rq);
	}
	uint8_t rep[1024];
	assert_int_equal(capture_reply(cap, rep, sizeof(rep)), -1);
	struct sluice_pkt_stats ps;
	assert_int_equal(maps_read_pkt_stats(&f->m, &ps), 0);
	assert_int_equal(ps.reply_sent, 0);
	struct pkt_spec real = request("203.0.113.9", 7100, GET("/x", ""));
	handshake(f, &real);
	assert_int_equal(ingress(f, &real).ret, TC_ACT_UNSPEC);
	assert_true(capture_reply(cap, rep, sizeof(rep)) > 54);
	close(cap);
}

/* Pipelining is counted per connection turn, not per request: requests sent before the answer
 * to the first (in its segment or after it) belong to the first's unit; the first response
 * ends it and the later responses end nothing. */
static void test_pipelined_requests_count_as_one(void **state)
{
	struct fixture *f = *state;
	const char *two = GET("/a", "") GET("/b", "");
	struct pkt_spec rq = request("203.0.113.5", 7200, two);

	handshake(f, &rq);
	admitted(f, &rq);
	struct pkt_spec third = request("203.0.113.5", 7200, GET("/c", ""));
	third.seq = rq.seq + (uint32_t)rq.payload_len;
	admitted(f, &third);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(inflight(f), 1);
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	for (uint32_t k = 0; k < 3; k++) {
		struct pkt_spec a = answer_to(&rq, k * (uint32_t)strlen(ok), ok);
		egress(f, &a);
		assert_int_equal(inflight(f), 0);
	}
	assert_int_equal(stats(f, 2).completed, 1);
}

/* ---- the per-flow cache of the source answer (sluice_flow._pad) ---- */

/* The web service's config with other source rules and trust_from (the rest as CONFIG). */
static const char *web_config(const char *trust, const char *src_class)
{
	static char buf[1024];

	snprintf(buf, sizeof(buf),
		 WEB_SERVICE_HEAD
		 "    trust_from: [%s]\n"
		 "    classify:\n"
		 "      - { source: 198.18.1.0/24, class: %s }\n"
		 "      - { path_prefix: /report, class: L3 }\n"
		 "      - { header: X-Priority, class: from-header }\n"
		 "      - { path_prefix: /pay, class: L0 }\n"
		 "      - { dscp: 46, class: L1 }\n"
		 "      - { source: 203.0.113.0/30, class: L1 }\n", trust, src_class);
	return buf;
}

/* The rules rewritten as sluiced does on a reload (which stamps the services). */
static void reprogram(struct fixture *f, const char *config)
{
	struct sluice_config cfg;
	struct doc_errors errs;
	int idx[SLUICE_MIN_SERVICE_SLOTS];

	assert_int_equal(sluice_config_parse(config, strlen(config), "test", &cfg, &errs), 0);
	assert_int_equal(maps_assign_indices(&f->m, &cfg, idx), 0);
	assert_int_equal(idx[0], f->idx[0]);
	assert_int_equal(maps_program_services(&f->m, &cfg, idx), 0);
	sluice_config_free(&cfg);
}

static struct sluice_service service_slot(struct fixture *f)
{
	struct sluice_service sv;
	__u32 k = (__u32)f->idx[0];

	assert_int_equal(bpf_map_lookup_elem(f->m.services, &k, &sv), 0);
	return sv;
}

/* The rules as if programmed a second earlier (the stamp one unit back): flows admitted now
 * cache their answer, as they do on a host whose rules did not just change. A test that
 * waited for the clock's second to turn would check the same, a second slower. */
static void rules_stamp_back(struct fixture *f)
{
	struct sluice_service sv = service_slot(f);
	__u32 k = (__u32)f->idx[0];

	assert_true(sv._pad1 <= sluice_rules_second(monotonic_ns()));
	sv._pad1 = sluice_rules_second(monotonic_ns()) - 1;
	assert_int_equal(bpf_map_update_elem(f->m.services, &k, &sv, BPF_ANY), 0);
}

static __u8 flow_cache(struct fixture *f, const char *src, uint16_t sport)
{
	struct sluice_flow_key k = flow_key(src, sport);
	struct sluice_flow fl;

	assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
	return fl._pad;
}

/* One request on the keep-alive connection *rq (moved on to the next request's sequence),
 * answered: the class it was counted in. */
static int keepalive_request(struct fixture *f, struct pkt_spec *rq, const char *text)
{
	uint64_t before[4];
	int cls = -1;

	for (int c = 0; c < 4; c++)
		before[c] = stats(f, c).arrivals;
	rq->payload = text, rq->payload_len = strlen(text);
	admitted(f, rq);
	for (int c = 0; c < 4; c++)
		if (stats(f, c).arrivals != before[c]) {
			assert_int_equal(cls, -1);
			cls = c;
		}
	struct pkt_spec a = answer_to(rq, rq->seq, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	a.v6 = rq->v6, a.src = rq->dst;
	egress(f, &a);
	rq->seq += (uint32_t)rq->payload_len;
	return cls;
}

/* The trust entries of the web service deleted from the trie behind sluiced's back (no stamp):
 * only flows that still go by their cached answer believe the header. */
static void trust_deleted_unstamped(struct fixture *f)
{
	struct sluice_src_key keys[64], k, next;
	int n = 0, more = bpf_map_get_next_key(f->m.source_rules, NULL, &next) == 0;

	while (more && n < 64) {
		k = next;
		if (k.svc & SLUICE_SRC_TRUST)
			keys[n++] = k;
		more = bpf_map_get_next_key(f->m.source_rules, &k, &next) == 0;
	}
	assert_int_equal(n, 2); /* 203.0.113.0/28 and 2001:db8::/64 */
	for (int i = 0; i < n; i++)
		assert_int_equal(bpf_map_delete_elem(f->m.source_rules, &keys[i]), 0);
}

/* A keep-alive client inside trust_from: its header is believed from the answer cached when
 * its connection was made (the cache is used: with the trust entry gone from the trie and no
 * stamp, the flow still believes it, a new flow does not); once sluiced rewrites the rules
 * without it, the same connection's header is ignored at its next request, and after 100 and
 * 300 rewrites still (a cache checked against a wrapping generation came back to life after
 * 64); back in trust_from, believed again. */
static void test_source_cache_trust_removed(void **state)
{
	struct fixture *f = *state;
	const char *hi = GET("/x", "X-Priority: L0\r\n"), *mid = GET("/x", "X-Priority: L1\r\n");
	struct pkt_spec rq = request("203.0.113.5", 3100, hi);
	unsigned long long marks;

	rules_stamp_back(f);
	handshake(f, &rq);
	assert_int_equal(flow_cache(f, "203.0.113.5", 3100),
			 SLUICE_SRC_CACHED | SLUICE_SRC_TRUSTED | SLUICE_SRC_NO_RULE);
	assert_int_equal(keepalive_request(f, &rq, mid), 1);
	assert_int_equal(keepalive_request(f, &rq, hi), 0);

	trust_deleted_unstamped(f);
	assert_int_equal(keepalive_request(f, &rq, mid), 1);     /* the cache decided */
	struct pkt_spec other = request("203.0.113.6", 3101, hi);
	marks = untrusted(f);
	handshake(f, &other);
	assert_int_equal(flow_cache(f, "203.0.113.6", 3101), SLUICE_SRC_CACHED | SLUICE_SRC_NO_RULE);
	assert_int_equal(keepalive_request(f, &other, hi), 2);   /* the trie decided */
	assert_int_equal(untrusted(f) - marks, 1);

	const char *without = web_config("2001:db8::/64", "L0");
	for (int n = 1; n <= 300; n++) {
		reprogram(f, without);
		if (n == 1 || n == 63 || n == 64 || n == 65 || n == 100 || n == 300) {
			marks = untrusted(f);
			if (keepalive_request(f, &rq, hi) != 2) {
				print_error("after %d rewrites the removed client's header counted\n", n);
				fail();
			}
			assert_int_equal(untrusted(f) - marks, 1);
		}
	}
	reprogram(f, web_config("203.0.113.0/28, 2001:db8::/64", "L0"));
	assert_int_equal(keepalive_request(f, &rq, hi), 0);
	assert_int_equal(keepalive_request(f, &other, mid), 1);
	assert_int_equal(inflight(f), 0);
}

/* A source rule that changes class, then goes, takes effect at the next request of a live
 * connection that cached the rule. */
static void test_source_cache_rule_changes(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("198.18.1.9", 3200, GET("/x", ""));
	const char *plain = GET("/x", "");

	rules_stamp_back(f);
	handshake(f, &rq);
	assert_int_equal(flow_cache(f, "198.18.1.9", 3200), SLUICE_SRC_CACHED | 0 /* order 0, L0 */);
	assert_int_equal(keepalive_request(f, &rq, plain), 0);
	reprogram(f, web_config("203.0.113.0/28, 2001:db8::/64", "L3"));
	assert_int_equal(keepalive_request(f, &rq, plain), 3);
	assert_int_equal(keepalive_request(f, &rq, GET("/pay", "")), 3); /* the rule comes first */
	/* A config without the rule: the default class (the /report path rule still wins). */
	const char *norule =
		"interface: lo\n"
		"services:\n"
		"  - name: web\n"
		"    port: 8080\n"
		"    protocol: http\n"
		"    limit: { fixed: 8 }\n"
		"    default_class: L2\n"
		"    classify:\n"
		"      - { path_prefix: /report, class: L3 }\n";
	reprogram(f, norule);
	assert_int_equal(keepalive_request(f, &rq, plain), 2);
	assert_int_equal(keepalive_request(f, &rq, GET("/report", "")), 3);
	assert_int_equal(inflight(f), 0);
}

/* The cache is each flow's own, filled from its own key when its handshake completes: an
 * untrusted client's requests (priority headers, DSCP marks), a forged SYN and forged
 * segments on a trusted client's 4-tuple change neither the trusted flow's answer nor their
 * own; the untrusted client's header is never believed, on a new connection or an old one. */
static void test_source_cache_is_per_flow(void **state)
{
	struct fixture *f = *state;
	const char *hi = GET("/x", "X-Priority: L0\r\n");
	struct pkt_spec t = request("203.0.113.5", 3300, hi);
	struct pkt_spec u = request("203.0.113.77", 3300, hi);
	__u8 tc, uc;

	rules_stamp_back(f);
	handshake(f, &t);
	handshake(f, &u);
	tc = flow_cache(f, "203.0.113.5", 3300);
	uc = flow_cache(f, "203.0.113.77", 3300);
	assert_int_equal(tc, SLUICE_SRC_CACHED | SLUICE_SRC_TRUSTED | SLUICE_SRC_NO_RULE);
	assert_int_equal(uc, SLUICE_SRC_CACHED | SLUICE_SRC_NO_RULE);
	for (int i = 0; i < 20; i++) {
		u.dscp = i & 1 ? 46 : 0;
		assert_int_equal(keepalive_request(f, &u, hi), 2);
		assert_int_equal(keepalive_request(f, &t, hi), 0);
		/* Forged on the trusted client's 4-tuple: a SYN with a new ISN, a request line
		 * away from where the client is, a FIN and an RST outside its window. */
		struct pkt_spec x = t;
		x.syn = 1, x.ackf = 0, x.psh = 0, x.payload = NULL, x.payload_len = 0;
		x.seq = 0x9e3779b9u * (uint32_t)(i + 1);
		run_xdp(f, &x);
		x = t;
		x.seq += 0x40000000u + (uint32_t)i;
		admitted(f, &x);
		x.payload = NULL, x.payload_len = 0, x.psh = 0, x.fin = 1;
		run_xdp(f, &x);
		x.fin = 0, x.rst = 1;
		run_xdp(f, &x);
	}
	assert_int_equal(flow_cache(f, "203.0.113.5", 3300), tc);
	assert_int_equal(flow_cache(f, "203.0.113.77", 3300), uc);
	/* A new connection of the untrusted client, and the old ones, still as they were. */
	struct pkt_spec u2 = request("203.0.113.77", 3301, hi);
	handshake(f, &u2);
	assert_int_equal(keepalive_request(f, &u2, hi), 2);
	assert_int_equal(keepalive_request(f, &t, hi), 0);
	assert_int_equal(keepalive_request(f, &u, hi), 2);
	assert_int_equal(inflight(f), 0);
}

/* IPv6 clients: the answer cached from the full address (the flow's key), inside and outside
 * trust_from's /64. */
static void test_source_cache_ipv6(void **state)
{
	struct fixture *f = *state;
	const char *hi = GET("/x", "X-Priority: L0\r\n");
	struct pkt_spec t = { .v6 = 1, .src = "2001:db8::5", .dst = "2001:db8::1", .sport = 3500,
			      .dport = 8080, .seq = 5000, .ack = 9000, .ackf = 1, .psh = 1,
			      .payload = hi, .payload_len = strlen(hi) };
	struct pkt_spec u = t;
	__u8 want[2] = { SLUICE_SRC_CACHED | SLUICE_SRC_TRUSTED | SLUICE_SRC_NO_RULE,
			 SLUICE_SRC_CACHED | SLUICE_SRC_NO_RULE };

	u.src = "2001:db8:0:1::5"; /* the next /64 */
	rules_stamp_back(f);
	handshake(f, &t);
	handshake(f, &u);
	for (int i = 0; i < 2; i++) {
		struct sluice_flow_key k = { 0 };
		struct sluice_flow fl;

		assert_int_equal(inet_pton(AF_INET6, i ? u.src : t.src, k.client_addr), 1);
		assert_int_equal(inet_pton(AF_INET6, t.dst, k.local_addr), 1);
		k.client_port = htons(3500), k.service_port = htons(8080);
		assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
		assert_int_equal(fl._pad, want[i]);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(keepalive_request(f, &t, hi), 0);
		assert_int_equal(keepalive_request(f, &u, hi), 2);
	}
	reprogram(f, web_config("203.0.113.0/28", "L0"));      /* the /64 taken out */
	assert_int_equal(keepalive_request(f, &t, hi), 2);
	assert_int_equal(inflight(f), 0);
}

/* A flow admitted in the second of its service's rules stamp caches nothing (its answer might
 * come from rules that were still changing). */
static void test_source_cache_not_in_stamp_second(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.5", 3400, GET("/x", "X-Priority: L1\r\n"));
	struct sluice_service sv = service_slot(f);
	__u32 k = (__u32)f->idx[0];

	sv._pad1 = sluice_rules_second(monotonic_ns()) + 1; /* as if stamped this very second */
	assert_int_equal(bpf_map_update_elem(f->m.services, &k, &sv, BPF_ANY), 0);
	handshake(f, &rq);
	assert_int_equal(flow_cache(f, "203.0.113.5", 3400), 0);
	assert_int_equal(keepalive_request(f, &rq, GET("/x", "X-Priority: L1\r\n")), 1);
	/* Stamps only move forward: a reload keeps the later one. */
	reprogram(f, CONFIG);
	assert_int_equal(service_slot(f)._pad1, sv._pad1);
}

static void test_open_breaker_answers_503(void **state)
{
	struct fixture *f = *state;
	struct sluice_verdict v;

	maps_read_verdict(&f->m, f->idx[0], &v);
	v.breaker_state = SLUICE_BREAKER_OPEN;
	maps_write_verdict(&f->m, f->idx[0], &v);
	maps_write_reply(&f->m, f->idx[0], SLUICE_REPLY_503, 4);
	int cap = capture_socket();
	struct pkt_spec rq = request("198.18.1.3", 4000, GET("/pay", ""));
	handshake(f, &rq);
	assert_int_equal(ingress(f, &rq).ret, TC_ACT_UNSPEC);
	uint8_t rep[1024];
	ssize_t n = capture_reply(cap, rep, sizeof(rep));
	close(cap);
	assert_true(n > 54);
	rep[n < 1023 ? n : 1023] = 0;
	assert_non_null(strstr((char *)rep + 54, "HTTP/1.1 503 Service Unavailable\r\n"));
	assert_non_null(strstr((char *)rep + 54, "Retry-After: 4\r\n"));
	assert_int_equal(stats(f, 0).rejected[SLUICE_REJ_BREAKER], 1);
	assert_int_equal(inflight(f), 0);
}

/* An http service's open connections by class (http_conns) and the cap's refusals. */
static struct sluice_inflight http_conns(struct fixture *f)
{
	struct sluice_inflight in;

	assert_int_equal(maps_read_http_conns(&f->m, f->idx[0], &in), 0);
	return in;
}

static unsigned long long cap_refusals(struct fixture *f, int cls)
{
	struct sluice_conn_cap cc;

	assert_int_equal(maps_read_conn_cap(&f->m, f->idx[0], &cc), 0);
	return (unsigned long long)cc.rejected[cls];
}

/* The SYN of rq's connection through XDP: its verdict (the frame unchanged when passed). */
static int syn_of(struct fixture *f, const struct pkt_spec *rq)
{
	struct pkt_spec syn, sa, ack;
	uint8_t buf[256];

	handshake_of(rq, &syn, &sa, &ack);
	size_t len = build_pkt(buf, &syn);
	struct run r = harness_run(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf, len, NULL);

	assert_int_equal(r.err, 0);
	if (r.ret == XDP_PASS)
		assert_true(harness_unchanged(&r));
	return (int)r.ret;
}

/* rq's connection ends with the client's FIN (XDP sees it after its request bytes). */
static void client_fin(struct fixture *f, const struct pkt_spec *rq, uint32_t sent)
{
	struct pkt_spec fin = *rq;

	fin.seq += sent, fin.payload_len = 0, fin.fin = 1, fin.psh = 0;
	run_xdp(f, &fin);
	server_closes(f, &fin);
}

/* The lower classes' connection cap: counted at the handshake under the class the SYN was
 * judged by, given back exactly at the end, a SYN over its class's cap answered with an RST
 * and counted, other classes (L0 by source, L0 learned from a trusted header) not held back,
 * and nothing capped once the cap is lifted or the controller is silent. */
static void test_connection_cap(void **state)
{
	struct fixture *f = *state;
	__u32 cap[SLUICE_NUM_CLASSES] = { 0, 0, 2, 0 };
	struct pkt_spec a = request("203.0.113.77", 4001, GET("/x", ""));
	struct pkt_spec b = request("203.0.113.78", 4002, GET("/x", ""));
	struct pkt_spec c = request("203.0.113.79", 4003, GET("/x", ""));
	struct pkt_spec l0 = request("198.18.1.9", 4004, GET("/x", ""));
	struct pkt_spec hi = request("203.0.113.5", 4005, GET("/x", "X-Priority: L0\r\n"));
	struct pkt_spec hi2 = request("203.0.113.5", 4006, GET("/x", ""));
	struct sluice_inflight n;

	/* no cap: counted by class all the same (default L2; the source rule's L0) */
	handshake(f, &a);
	handshake(f, &l0);
	n = http_conns(f);
	assert_int_equal(n.cls[2], 1);
	assert_int_equal(n.cls[0], 1);
	assert_int_equal(n.total, 2);
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], cap), 0);
	handshake(f, &b);
	assert_int_equal(http_conns(f).cls[2], 2);
	/* L2 is at its cap: the next L2 SYN gets an RST from XDP, counted, nothing held */
	assert_int_equal(syn_of(f, &c), XDP_TX);
	assert_int_equal(cap_refusals(f, 2), 1);
	assert_int_equal(stats(f, 2).arrivals, 0); /* a refused connection is no request */
	assert_int_equal(http_conns(f).cls[2], 2);
	/* L0 by its source is not held back by L2's cap */
	struct pkt_spec l0b = request("198.18.1.10", 4007, GET("/x", ""));
	assert_int_equal(syn_of(f, &l0b), XDP_PASS);
	/* a client whose trusted header says L0 on a connection counted as L2 (its SYN came
	 * before the cap): its address is remembered, and its next SYN is judged L0 */
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], (__u32[4]){ 0 }), 0);
	handshake(f, &hi);
	admitted(f, &hi);
	assert_int_equal(http_conns(f).cls[2], 3);
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], cap), 0);
	handshake(f, &hi2);
	n = http_conns(f);
	assert_int_equal(n.cls[2], 3);
	assert_int_equal(n.cls[0], 2);
	/* a connection ends: its place is free again, and the next SYN of the class passes */
	client_fin(f, &a, 0);
	client_fin(f, &hi, (uint32_t)hi.payload_len);
	assert_int_equal(http_conns(f).cls[2], 1);
	assert_int_equal(syn_of(f, &c), XDP_PASS);
	/* with the controller silent (no heartbeat within its timeout), no cap applies */
	handshake(f, &c);
	assert_int_equal(http_conns(f).cls[2], 2);
	struct pkt_spec d = request("203.0.113.80", 4008, GET("/x", ""));
	assert_int_equal(syn_of(f, &d), XDP_TX);
	struct sluice_globals g;
	assert_int_equal(maps_read_globals(&f->m, &g), 0);
	g.heartbeat_timeout_ns = 1;
	g.heartbeat_ns = 1;
	assert_int_equal(maps_write_globals(&f->m, &g), 0);
	assert_int_equal(syn_of(f, &d), XDP_PASS);
	/* every connection ends: the counts come back to exactly 0 */
	client_fin(f, &b, 0);
	client_fin(f, &c, 0);
	client_fin(f, &l0, 0);
	client_fin(f, &hi2, 0);
	n = http_conns(f);
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		assert_int_equal(n.cls[k], 0);
	assert_int_equal(n.total, 0);
}

/* An IPv6 request from 2001:db8:7:N::host (outside trust_from: its L0 comes from the /pay path
 * rule) on port sport, to the server's IPv6 address. */
static struct pkt_spec pay6(char *addr, size_t len, unsigned net, unsigned host, uint16_t sport)
{
	struct pkt_spec rq = request(addr, sport, GET("/pay", ""));

	snprintf(addr, len, "2001:db8:7:%x::%x", net, host);
	rq.v6 = 1, rq.dst = "2001:db8:ffff::1";
	return rq;
}

/* What an http SYN learns from its client's requests (addr_class) is kept by client as the
 * `clients` map keys them: an IPv6 client is its /64. A host's next temporary address is
 * judged by what the last one was given, and 20,000 addresses churned inside one /64 make one
 * entry, so they cannot push another client's out of the LRU (16,384 entries): its next SYN is
 * still judged L0 while L2 is capped. (Keyed by the full address, the client's next address
 * was judged L2 and refused: XDP_TX.) */
static void test_learned_class_kept_by_64(void **state)
{
	struct fixture *f = *state;
	__u32 cap[SLUICE_NUM_CLASSES] = { 0, 0, 1, 0 };
	char a[48], b[48], c[48], x[48];
	struct pkt_spec rq = pay6(a, sizeof(a), 1, 0xa, 5001);

	/* no cap yet: the connection counts under L2 (its source), its request is L0 */
	handshake(f, &rq);
	admitted(f, &rq);
	assert_int_equal(http_conns(f).cls[2], 1);
	for (unsigned i = 0; i < 20000; i++) { /* another client churns addresses in its /64 */
		char addr[48];
		struct pkt_spec o = pay6(addr, sizeof(addr), 0x66, i + 1, (uint16_t)(10000 + i % 50000));

		o.seq += i;
		handshake(f, &o);
		ingress(f, &o); /* admitted or refused (the limit): taught either way */
	}
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], cap), 0);
	/* L2 is at its cap (the first connection): the client's next address is known as L0 */
	struct pkt_spec next = pay6(b, sizeof(b), 1, 0xb, 5002);
	assert_int_equal(syn_of(f, &next), XDP_PASS);
	/* an address in another /64 is another client: L2, over the cap */
	struct pkt_spec other = pay6(c, sizeof(c), 2, 0xa, 5003);
	assert_int_equal(syn_of(f, &other), XDP_TX);
	/* the churning client's own /64 is one client too, and L0 */
	struct pkt_spec churn = pay6(x, sizeof(x), 0x66, 0xffff, 5004);
	assert_int_equal(syn_of(f, &churn), XDP_PASS);
}

/* A request on a connection the local stack holds established, whose handshake sluice never
 * saw, is decided (its flow is taken on at exactly the byte the server expects next) and
 * ends like any other; a segment anywhere else in that stream, and one on a 4-tuple with no
 * socket, take nothing on. */
static void test_established_connection_adopted(void **state)
{
	struct fixture *f = *state;
	struct live_conn c = live_connection(8080);
	struct pkt_spec rq = request("127.0.0.1", c.cport, GET("/x", "X-Priority: L1\r\n"));
	struct pkt_spec rs, fin;

	rq.dst = "127.0.0.1";
	/* not where the server is: a blind forger's guess, or an old retransmit */
	rq.seq = c.rcv_nxt + 100000, rq.ack = c.snd_nxt;
	admitted(f, &rq);
	rq.seq = c.rcv_nxt - 5000;
	admitted(f, &rq);
	/* the right byte from another port: the stack has only the listener for it */
	rq.seq = c.rcv_nxt, rq.sport = (uint16_t)(c.cport + 1);
	admitted(f, &rq);
	/* ... to another local address: no socket at all */
	rq.sport = c.cport, rq.dst = "127.0.0.2";
	admitted(f, &rq);
	/* ... in IPv6 from the v4-mapped client to an address ending in the server's: the
	 * IPv4 connection must not be taken on under a key of its own (one per address) */
	rq.v6 = 1, rq.src = "::ffff:127.0.0.1", rq.dst = "2001:db8::7f00:1";
	admitted(f, &rq);
	rq.dst = "::ffff:127.0.0.2";
	admitted(f, &rq);
	rq.v6 = 0, rq.src = "127.0.0.1", rq.dst = "127.0.0.1";
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(stats(f, 2).arrivals, 0);

	/* a body's next bytes (no method): nothing taken on; nor lower-case words, which an
	 * established flow's next request could be but a body across the attach more likely is */
	rq.payload = "xyzw: not a request\r\n", rq.payload_len = strlen(rq.payload);
	admitted(f, &rq);
	assert_int_equal(flow_count(f), 0);
	rq.payload = "more of the body\r\n", rq.payload_len = strlen(rq.payload);
	admitted(f, &rq);
	assert_int_equal(flow_count(f), 0);
	/* the connection's own next byte, a request: taken on, and the request decided (the
	 * default class L2: 127.0.0.1 is outside trust_from, so its header does not count) */
	rq.payload = GET("/x", "X-Priority: L1\r\n"), rq.payload_len = strlen(rq.payload);
	admitted(f, &rq);
	assert_int_equal(flow_count(f), 1);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(stats(f, 2).admitted, 1);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(http_conns(f).total, 1);
	assert_int_equal(http_conns(f).cls[2], 1);
	/* the same segment again is more of the request, not a second one */
	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	/* the request reaches the server's socket too (its rcv_nxt moves past it) */
	assert_int_equal(write(c.cli, rq.payload, rq.payload_len), (ssize_t)rq.payload_len);

	/* the answer ends the request; the client's FIN ends the connection */
	rs = response("127.0.0.1", c.cport, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.src = "127.0.0.1", rs.seq = c.snd_nxt, rs.ack = c.rcv_nxt + rq.payload_len;
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(stats(f, 2).completed, 1);
	fin = rq;
	fin.seq = c.rcv_nxt + rq.payload_len, fin.payload = NULL, fin.payload_len = 0;
	fin.fin = 1, fin.psh = 0;
	run_xdp(f, &fin);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(http_conns(f).total, 0);
	live_close(&c);
}

/* A client that first sends bytes its server's stack throws away (an ack of data never sent,
 * a bad checksum: sluice sees them before the stack judges them) has sluice follow it past
 * where it really is; its request, sent then at the byte the server still expects, must be
 * decided all the same, or every request of a client that always did so went to the server
 * past the shedding. A request-looking segment behind where sluice followed the client, at a
 * byte the server is not at, still decides nothing. */
static void test_request_behind_discarded_bytes_is_decided(void **state)
{
	struct fixture *f = *state;
	struct live_conn c = live_connection(8080);
	struct pkt_spec rq = request("127.0.0.1", c.cport, GET("/x", "")), junk;
	char pad[200];

	rq.dst = "127.0.0.1", rq.seq = c.rcv_nxt, rq.ack = c.snd_nxt;
	handshake(f, &rq);
	memset(pad, '{', sizeof(pad));
	junk = rq;
	junk.payload = pad, junk.payload_len = sizeof(pad);
	junk.ack = c.snd_nxt + 100000; /* data the server never sent: its stack drops it */
	admitted(f, &junk);
	assert_int_equal(stats(f, 2).arrivals, 0);
	/* not the server's byte either: nothing */
	rq.seq = c.rcv_nxt + 10;
	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 0);
	/* the server's next byte: decided */
	rq.seq = c.rcv_nxt;
	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(stats(f, 2).admitted, 1);
	assert_int_equal(inflight(f), 1);
	/* the same segment again is more of the request, not a second one */
	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	live_close(&c);
}

/* rq's handshake with the SYN marked syn_dscp and the completing ACK ack_dscp. */
static void handshake_marked(struct fixture *f, const struct pkt_spec *rq, uint8_t syn_dscp,
			     uint8_t ack_dscp)
{
	struct pkt_spec syn, sa, ack;

	handshake_of(rq, &syn, &sa, &ack);
	syn.dscp = syn_dscp;
	ack.dscp = ack_dscp;
	run_xdp(f, &syn);
	egress(f, &sa);
	run_xdp(f, &ack);
}

/* A connection whose SYN was not judged (no class capped then) counts under the class its
 * SYN's source and DSCP rules give, as a judged SYN would: DSCP 46 (L1, a rule ahead of the
 * source rule 203.0.113.0/30) from a trusted source counts as L1, from an untrusted one as the
 * default L2, behind the L0 source rule as L0; a mark on the completing ACK alone moves
 * nothing; the same when the handshake completes by the server's first segment. */
static void test_connection_class_unjudged_syn(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec trusted = request("203.0.113.9", 4101, GET("/x", ""));
	struct pkt_spec untrusted = request("203.0.113.77", 4102, GET("/x", ""));
	struct pkt_spec ack_only = request("203.0.113.10", 4103, GET("/x", ""));
	struct pkt_spec l0 = request("198.18.1.5", 4104, GET("/x", ""));
	struct pkt_spec judged = request("203.0.113.11", 4105, GET("/x", ""));
	struct pkt_spec by_server = request("203.0.113.12", 4106, GET("/x", ""));
	struct pkt_spec syn, sa, ack, first;
	struct sluice_inflight n;

	handshake_marked(f, &trusted, 46, 46);
	assert_int_equal(http_conns(f).cls[1], 1);
	handshake_marked(f, &untrusted, 46, 46);
	assert_int_equal(http_conns(f).cls[2], 1);
	handshake_marked(f, &ack_only, 0, 46);
	assert_int_equal(http_conns(f).cls[2], 2);
	handshake_marked(f, &l0, 46, 46);
	assert_int_equal(http_conns(f).cls[0], 1);
	/* judged (a class capped): the same class */
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], (__u32[4]){ 0, 0, 9, 0 }), 0);
	handshake_marked(f, &judged, 46, 0);
	assert_int_equal(http_conns(f).cls[1], 2);
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], (__u32[4]){ 0 }), 0);
	/* completed by the server's first segment (the client's ACK lost): the SYN's mark */
	handshake_of(&by_server, &syn, &sa, &ack);
	syn.dscp = 46;
	run_xdp(f, &syn);
	egress(f, &sa);
	first = response(by_server.src, by_server.sport, "220 hello\r\n");
	first.ack = by_server.seq;
	egress(f, &first);
	n = http_conns(f);
	assert_int_equal(n.cls[0], 1);
	assert_int_equal(n.cls[1], 3);
	assert_int_equal(n.cls[2], 2);
	assert_int_equal(n.total, 6);
	/* given back under the class each was counted under */
	client_fin(f, &trusted, 0);
	client_fin(f, &untrusted, 0);
	client_fin(f, &ack_only, 0);
	client_fin(f, &l0, 0);
	client_fin(f, &judged, 0);
	client_fin(f, &by_server, 0);
	n = http_conns(f);
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		assert_int_equal(n.cls[k], 0);
	assert_int_equal(n.total, 0);
}

/* With `reject: drop`, a SYN the connection cap refuses is dropped and counted, and so is
 * each of its retransmits (they are the same packet again, and no state is kept of a refused
 * SYN): conn_cap.rejected counts refused SYN packets, not connections; none is a request's
 * arrival or a retransmit in the class's counts. */
static void test_connection_cap_drop_counts_packets(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec open = request("203.0.113.77", 4201, GET("/x", ""));
	struct pkt_spec over = request("203.0.113.78", 4202, GET("/x", ""));

	reprogram(f, WEB_SERVICE_HEAD
		  "    reject: drop\n"
		  "    trust_from: [203.0.113.0/28]\n");
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], (__u32[4]){ 0, 0, 1, 0 }), 0);
	handshake(f, &open);
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(syn_of(f, &over), XDP_DROP);
		assert_int_equal(cap_refusals(f, 2), i);
	}
	assert_int_equal(stats(f, 2).arrivals, 0);
	assert_int_equal(stats(f, 2).retransmits, 0);
	assert_int_equal(http_conns(f).cls[2], 1);
}

/* How the connections of test_connection_cap_release end. */
enum conn_end { END_429, END_SERVER_FIN, END_SERVER_RST, END_GC, END_CLIENT_FIN };

/* Open the cap's worth of connections of L1 (cap 1, by source) and L2 (cap 2, the default
 * class), and one of L0 (never capped), from ports base..base+3; the next SYN of L1 and of
 * L2 is refused. */
static void open_to_cap(struct fixture *f, uint16_t base, struct pkt_spec c[4])
{
	struct pkt_spec over2 = request("203.0.113.90", (uint16_t)(base + 5), GET("/x", ""));
	struct pkt_spec over1 = request("203.0.113.2", (uint16_t)(base + 6), GET("/x", ""));
	unsigned long long r1 = cap_refusals(f, 1), r2 = cap_refusals(f, 2);
	struct sluice_inflight n;

	c[0] = request("203.0.113.90", base, GET("/x", ""));
	c[1] = request("203.0.113.91", (uint16_t)(base + 1), GET("/x", ""));
	c[2] = request("203.0.113.2", (uint16_t)(base + 2), GET("/x", ""));
	c[3] = request("198.18.1.20", (uint16_t)(base + 3), GET("/x", ""));
	for (int i = 0; i < 4; i++)
		handshake(f, &c[i]);
	n = http_conns(f);
	assert_int_equal(n.cls[0], 1);
	assert_int_equal(n.cls[1], 1);
	assert_int_equal(n.cls[2], 2);
	assert_int_equal(n.cls[3], 0);
	assert_int_equal(n.total, 4);
	assert_int_equal(syn_of(f, &over2), XDP_TX);
	assert_int_equal(syn_of(f, &over1), XDP_TX);
	assert_int_equal(cap_refusals(f, 1), r1 + 1);
	assert_int_equal(cap_refusals(f, 2), r2 + 1);
}

/* Every connection of c ends the way `how` says; with a request open on c[0] first (but for
 * END_429, whose ending is a request). */
static void end_all(struct fixture *f, struct pkt_spec c[4], enum conn_end how)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct sluice_verdict v, shut;

	if (how != END_429) {
		admitted(f, &c[0]);
		assert_int_equal(inflight(f), 1);
	}
	switch (how) {
	case END_429: /* every class shut: each request is answered 429, the server reset */
		assert_int_equal(maps_read_verdict(&f->m, f->idx[0], &v), 0);
		shut = v;
		for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
			shut.flags |= SLUICE_VERDICT_SHUT(k);
		assert_int_equal(maps_write_verdict(&f->m, f->idx[0], &shut), 0);
		for (int i = 0; i < 4; i++) {
			unsigned long long was = stats(f, i == 3 ? 0 : i == 2 ? 1 : 2)
						  .rejected[SLUICE_REJ_HEADROOM];
			struct run r = ingress(f, &c[i]);
			const struct tcphdr *tcp = (const void *)(r.out + 34);

			assert_int_equal(r.ret, TC_ACT_UNSPEC);
			assert_int_equal(r.out_len, 54);
			assert_true(tcp->rst);
			assert_int_equal(stats(f, i == 3 ? 0 : i == 2 ? 1 : 2)
					 .rejected[SLUICE_REJ_HEADROOM], was + 1);
		}
		assert_int_equal(maps_write_verdict(&f->m, f->idx[0], &v), 0);
		break;
	case END_SERVER_FIN:
	case END_SERVER_RST:
		for (int i = 0; i < 4; i++) {
			struct pkt_spec e = response(c[i].src, c[i].sport, i ? "" : ok);

			if (i)
				e.psh = 0;
			e.ack = c[i].seq + (i ? 0 : (uint32_t)c[i].payload_len);
			if (how == END_SERVER_FIN)
				e.fin = 1;
			else
				e.rst = 1;
			egress(f, &e);
		}
		break;
	case END_GC: /* silent: the GC's clock far ahead */
		assert_int_equal(maps_gc_flows(&f->m, monotonic_ns() + 3600000000000ull,
					       30000000000ull, 600000000000ull, NULL, NULL), 4);
		break;
	case END_CLIENT_FIN:
		for (int i = 0; i < 4; i++)
			client_fin(f, &c[i], i ? 0 : (uint32_t)c[i].payload_len);
		break;
	}
}

/* The connection cap's counts given back exactly, whichever way a counted connection ends: a
 * request refused with the in-kernel 429 (the server side reset), the server's FIN (after a
 * response) or RST, the flow GC, the client's FIN. After each, every class's count and the
 * total are 0, no flow and no request is left, and the cap admits exactly as many again. */
static void test_connection_cap_release(void **state)
{
	struct fixture *f = *state;
	__u32 cap[SLUICE_NUM_CLASSES] = { 0, 1, 2, 0 };
	static const enum conn_end ends[] = { END_429, END_SERVER_FIN, END_SERVER_RST, END_GC,
					      END_CLIENT_FIN };

	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], cap), 0);
	for (unsigned r = 0; r < sizeof(ends) / sizeof(ends[0]); r++) {
		struct pkt_spec c[4];
		struct sluice_inflight n;

		open_to_cap(f, (uint16_t)(5000 + 10 * r), c);
		end_all(f, c, ends[r]);
		n = http_conns(f);
		for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
			assert_int_equal(n.cls[k], 0);
		assert_int_equal(n.total, 0);
		assert_int_equal(flow_count(f), 0);
		assert_int_equal(inflight(f), 0);
	}
}

/* Connections of a class opened before its cap was set (or lowered) are over it: a request on
 * one of them is answered 429 (the server's side reset), counted among the cap's refusals,
 * until the class is down to its cap; then its requests pass. A request of a higher class than
 * its connection's is never refused for it, nor is any while the controller is silent. */
static void test_connection_cap_trims(void **state)
{
	struct fixture *f = *state;
	__u32 cap[SLUICE_NUM_CLASSES] = { 0, 0, 2, 0 };
	struct pkt_spec c[5];
	struct pkt_spec hi = request("203.0.113.6", 4110, GET("/x", "X-Priority: L0\r\n"));
	struct sluice_globals g;

	static const char *src[5] = { "203.0.113.100", "203.0.113.101", "203.0.113.102",
				      "203.0.113.103", "203.0.113.104" };

	for (int i = 0; i < 5; i++) {
		c[i] = request(src[i], (uint16_t)(4100 + i), GET("/x", ""));
		handshake(f, &c[i]);
	}
	handshake(f, &hi);
	assert_int_equal(http_conns(f).cls[2], 6); /* the default class, L2 */
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], cap), 0);
	/* an L0 request (trusted header) on an L2 connection: not refused for L2's cap */
	admitted(f, &hi);
	assert_int_equal(cap_refusals(f, 2), 0);
	/* L2's own requests: refused, each closing its connection, until L2 holds its cap */
	for (int i = 0; i < 4; i++) {
		struct run r = ingress(f, &c[i]);
		const struct tcphdr *tcp = (const void *)(r.out + 34);

		assert_int_equal(r.ret, TC_ACT_UNSPEC);
		assert_int_equal(r.out_len, 54);
		assert_true(tcp->rst);
		assert_int_equal(cap_refusals(f, 2), (unsigned long long)(i + 1));
		assert_int_equal(http_conns(f).cls[2], 5 - i);
	}
	assert_int_equal(stats(f, 2).rejected[SLUICE_REJ_HEADROOM], 0);
	assert_int_equal(stats(f, 2).admitted, 0);
	/* at its cap: the next passes */
	admitted(f, &c[4]);
	assert_int_equal(stats(f, 2).admitted, 1);
	assert_int_equal(cap_refusals(f, 2), 4);
	/* over the cap again (lowered to 1), with the controller silent: nothing is refused */
	cap[2] = 1;
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], cap), 0);
	assert_int_equal(maps_read_globals(&f->m, &g), 0);
	g.heartbeat_timeout_ns = 1;
	g.heartbeat_ns = 1;
	assert_int_equal(maps_write_globals(&f->m, &g), 0);
	/* c[4]'s request answered first: its next one is a request start, which is where the
	 * over-cap check sits */
	struct pkt_spec done = response(src[4], 4104, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	done.ack = c[4].seq + (uint32_t)c[4].payload_len;
	egress(f, &done);
	struct pkt_spec more = c[4];
	more.seq += (uint32_t)c[4].payload_len;
	admitted(f, &more);
	assert_int_equal(cap_refusals(f, 2), 4);
}

/* A request the connection cap refuses but that cannot be answered cleanly (here: no 429 to
 * send) is admitted, as any refusal that cannot be answered is, and is not counted as a
 * refusal of the cap: `connections` counts only the refusals clients saw. */
static void test_connection_cap_unanswered_refusal_admits(void **state)
{
	struct fixture *f = *state;
	__u32 cap[SLUICE_NUM_CLASSES] = { 0, 0, 1, 0 };
	__u32 rk = (__u32)f->idx[0] * 2 + SLUICE_REPLY_429;
	struct sluice_reply none = { 0 };
	struct pkt_spec c[3];
	static const char *src[3] = { "203.0.113.110", "203.0.113.111", "203.0.113.112" };

	for (int i = 0; i < 3; i++) {
		c[i] = request(src[i], (uint16_t)(4200 + i), GET("/x", ""));
		handshake(f, &c[i]);
	}
	assert_int_equal(http_conns(f).cls[2], 3);
	assert_int_equal(maps_write_http_conn_cap(&f->m, f->idx[0], cap), 0);
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(f->skel->maps.replies), &rk, &none,
					     BPF_ANY), 0);
	admitted(f, &c[0]);
	assert_int_equal(cap_refusals(f, 2), 0);
	assert_int_equal(stats(f, 2).admitted, 1);
	assert_int_equal(stats(f, 2).untracked, 1);
	assert_int_equal(http_conns(f).cls[2], 3); /* the connection stays open */
}

/* ---- TC ingress's memo of the client it follows on this CPU (bpf/client_memo.h) ----
 * The suite runs on one CPU (main), so every segment meets the same memo. */

static struct sluice_flow flow_of(struct fixture *f, const char *src, uint16_t sport)
{
	struct sluice_flow_key k = flow_key(src, sport);
	struct sluice_flow fl;

	assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
	return fl;
}

/* The client's next segment after prev, carrying text. */
static struct pkt_spec after(const struct pkt_spec *prev, const char *text)
{
	struct pkt_spec b = *prev;

	b.seq = prev->seq + (uint32_t)prev->payload_len, b.payload = text;
	b.payload_len = strlen(text);
	return b;
}

/* The server answers rq early, before it read the body (an early 413: its ack covers rq's head
 * only), and the client's next request (text) follows its last body segment: returns that
 * request as sent. */
static struct pkt_spec answer_early_then_next(struct fixture *f, const struct pkt_spec *rq,
					      const struct pkt_spec *last, const char *text)
{
	struct pkt_spec rs = response(rq->src, rq->sport, "HTTP/1.1 413 Too Large\r\n\r\n");
	struct pkt_spec next = after(last, text);

	rs.ack = rq->seq + (uint32_t)rq->payload_len;
	egress(f, &rs);
	admitted(f, &next);
	return next;
}

/* An upload on this CPU: its head rq admitted, then b[0..2] sent (b[1], b[2] followed by this
 * CPU's memo only); b[3] comes next. */
static void upload_followed_here(struct fixture *f, struct pkt_spec *rq, struct pkt_spec b[4])
{
	static const char *body[4] = { "{\"a\": 1}", "{\"b\": 2}", "{\"c\": 3}", "{\"d\": 4}" };

	handshake(f, rq);
	admitted(f, rq);
	for (int i = 0; i < 4; i++)
		b[i] = after(i ? &b[i - 1] : rq, body[i]);
	for (int i = 0; i < 3; i++)
		admitted(f, &b[i]);
}

#define POST_UP "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 24\r\n\r\n"

/* Returns at the start of a new tick of the kernel's coarse clock (the one TC ingress stamps
 * late bytes with and whose jiffy the memo is taken in), waiting at most a second. */
static unsigned long long next_tick(void)
{
	struct timespec t0, t;
	unsigned long long deadline = monotonic_ns() + 1000000000ull;

	assert_int_equal(clock_gettime(CLOCK_MONOTONIC_COARSE, &t0), 0);
	do {
		assert_int_equal(clock_gettime(CLOCK_MONOTONIC_COARSE, &t), 0);
		assert_true(monotonic_ns() < deadline);
	} while (t.tv_sec == t0.tv_sec && t.tv_nsec == t0.tv_nsec);
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* The kernel's coarse clock now (what TC ingress stamps late bytes by; it moves a tick at a
 * time). */
static unsigned long long coarse_ns(void)
{
	struct timespec t;

	assert_int_equal(clock_gettime(CLOCK_MONOTONIC_COARSE, &t), 0);
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* The latency samples of class 2 so far: their count and sum (us). */
static void samples_so_far(struct fixture *f, unsigned long long *n, unsigned long long *sum_us)
{
	struct sluice_hist h;

	maps_read_hist(&f->m, f->idx[0], 2, &h);
	*n = 0;
	for (int i = 0; i < SLUICE_HIST_BUCKETS; i++)
		*n += h.bucket[i];
	*sum_us = h.sum_us;
}

/* A request whose first bytes came early and the rest late (a slow client, or one trickling
 * its requests to make the service look slow) is timed from its late bytes: the server's time
 * after the client's last bytes, not the client's pace. Whether the rest begins like a token
 * (the whole way at TC ingress) or is a body segment this CPU's memo follows (it goes the
 * whole way at a new tick while the request is open), the start moves to it; a sample is
 * never longer than from the first byte, and nothing moves a start once the request ended. */
static void test_request_timed_from_its_late_bytes(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < 2; i++) {
		uint16_t port = (uint16_t)(1800 + i);
		struct pkt_spec rq = request("203.0.113.30", port, i ? POST_UP :
								   "GET /x HTTP/1.1\r\n");
		struct sluice_flow_key k = flow_key("203.0.113.30", port);
		unsigned long long n0, sum0, n, sum, early, tick;
		struct pkt_spec last = rq, rest;
		struct sluice_flow fl;

		samples_so_far(f, &n0, &sum0);
		handshake(f, &rq);
		admitted(f, &rq);
		if (i) { /* the body's first segment: the memo follows the client from its end */
			last = after(&rq, "{\"a\": 1}");
			admitted(f, &last);
			struct sluice_client_memo m[libbpf_num_possible_cpus()];
			uint32_t zero = 0;

			assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.client_memo),
							     &zero, m), 0);
			assert_true(m[sched_getcpu()].valid && m[sched_getcpu()].request_open);
		}
		/* the request's first bytes came 300 ms ago (or at the clock's start) */
		fl = flow_of(f, "203.0.113.30", port);
		early = fl.req_start_ns > 300000000ull ? fl.req_start_ns - 300000000ull : 1;
		fl.req_start_ns = early;
		assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &fl, BPF_EXIST), 0);
		tick = next_tick();
		rest = after(&last, i ? "{\"b\": 2}" : "Host: t\r\n\r\n");
		admitted(f, &rest);
		fl = flow_of(f, "203.0.113.30", port);
		assert_true(fl.req_start_ns >= tick);
		assert_true(fl.req_start_ns <= monotonic_ns());
		assert_int_equal(fl.client_next, rest.seq + rest.payload_len);
		struct pkt_spec rs = response("203.0.113.30", port,
					      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		rs.ack = rest.seq + (uint32_t)rest.payload_len;
		egress(f, &rs);
		samples_so_far(f, &n, &sum);
		assert_int_equal(n - n0, 1);
		assert_true(sum - sum0 < 100000); /* not the 300 ms since the first bytes */
		assert_int_equal(inflight(f), 0);
		/* after the answer: more bytes that start nothing move no start */
		fl = flow_of(f, "203.0.113.30", port);
		early = fl.req_start_ns;
		next_tick();
		struct pkt_spec more = after(&rest, "{}");
		admitted(f, &more);
		assert_int_equal(flow_of(f, "203.0.113.30", port).req_start_ns, early);
	}
}

/* This CPU's memo of the client at src:sport: 1 when it holds that client (*m then filled). */
static int memo_here_of(struct fixture *f, const char *src, uint16_t sport,
			struct sluice_client_memo *m)
{
	int ncpu = libbpf_num_possible_cpus();
	struct sluice_client_memo *all = calloc((size_t)ncpu, sizeof(*all));
	struct sluice_flow_key k = flow_key(src, sport);
	uint32_t zero = 0;
	int held;

	assert_non_null(all);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.client_memo), &zero, all),
			 0);
	*m = all[sched_getcpu()];
	free(all);
	held = m->valid && !memcmp(&m->key, &k, sizeof(k));
	return held;
}

/* A request's first bytes 300 ms back (or at the clock's start): any later start is a move. */
static unsigned long long start_made_early(struct fixture *f, const char *src, uint16_t sport)
{
	struct sluice_flow_key k = flow_key(src, sport);
	struct sluice_flow fl = flow_of(f, src, sport);

	fl.req_start_ns = fl.req_start_ns > 300000000ull ? fl.req_start_ns - 300000000ull : 1;
	assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &fl, BPF_EXIST), 0);
	return fl.req_start_ns;
}

/* Only the client's new bytes, where it is, move an open request's start, and where the
 * entry and this CPU's memo have the client. A resend (whole, or of the last bytes), a
 * segment ahead of a gap, one far out of the window or behind it, data with RST, a bare ACK:
 * none moves anything, however late it comes. A segment that resends the last bytes and
 * carries new ones on (a stack cutting a resend anew) does: its new bytes are the client's. */
static void test_request_start_moved_only_by_in_order_bytes(void **state)
{
	struct fixture *f = *state;
	const char *src = "203.0.113.32";
	struct pkt_spec rq = request(src, 1820, "GET /x HTTP/1.1\r\n");
	uint32_t next = rq.seq + (uint32_t)rq.payload_len;
	struct sluice_client_memo m;
	unsigned long long early;
	struct sluice_flow fl;

	handshake(f, &rq);
	admitted(f, &rq);
	early = start_made_early(f, src, 1820);

	struct pkt_spec tail = after(&rq, "Host: t\r\n\r\n"), seg[7];
	for (int i = 0; i < 7; i++)
		seg[i] = tail;
	seg[0] = rq;                                         /* the request again */
	seg[1].seq = next - 2, seg[1].payload = "\r\n";      /* its last bytes again */
	seg[1].payload_len = 2;
	seg[2].seq = next + 1;                               /* ahead of a gap */
	seg[3].seq = next + 0x80000000u;                     /* far out of the window */
	seg[4].seq = next - SLUICE_SEQ_WINDOW - 64;          /* behind the window */
	seg[5].rst = 1;                                      /* new bytes, with RST */
	seg[6].payload = NULL, seg[6].payload_len = 0;       /* a bare ACK where the client is */
	for (int i = 0; i < 7; i++) {
		admitted(f, &seg[i]);
		fl = flow_of(f, src, 1820);
		assert_int_equal(fl.req_start_ns, early);
		assert_int_equal(fl.client_next, next);
		if (memo_here_of(f, src, 1820, &m))
			assert_int_equal(m.next, next);
	}
	assert_int_equal(stats(f, 2).arrivals, 1);

	struct pkt_spec overlap = tail;
	overlap.seq = next - 2, overlap.payload = "\r\nHost: t\r\n\r\n";
	overlap.payload_len = strlen(overlap.payload);
	admitted(f, &overlap);
	fl = flow_of(f, src, 1820);
	assert_true(fl.req_start_ns > early);
	assert_true(fl.req_start_ns <= monotonic_ns());
	assert_int_equal(fl.client_next, next + (uint32_t)strlen(tail.payload));
	assert_true(memo_here_of(f, src, 1820, &m) && m.request_open);
	assert_int_equal(m.next, fl.client_next);
}

/* What timing a request from its last bytes cannot tell: bytes past the request's end, sent
 * while it is open (the next request pipelined, or a blank line a server skips before a
 * request line, sent for the purpose), move its start like the rest of its head would. TC
 * ingress does not follow the stream to the request's end, and could not hold a client to
 * it: what the server's stack puts together (a gap filled later, bytes sent twice with
 * different content) is the client's to make differ from what TC sees. So a client can make
 * its own requests' samples short -- down to under a tick with a byte every tick, one whole
 * way a tick while the request is open -- as it could make them long when requests were timed
 * from their first byte. The bound: one sample per request it had admitted (the pipelined
 * one is no unit of its own), its share of the service's samples. */
static void test_bytes_past_the_request_move_its_start(void **state)
{
	struct fixture *f = *state;
	const char *src = "203.0.113.33";
	struct pkt_spec rq = request(src, 1830, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
	unsigned long long n0, sum0, n, sum, early, tick;

	samples_so_far(f, &n0, &sum0);
	handshake(f, &rq);
	admitted(f, &rq);
	early = start_made_early(f, src, 1830);
	tick = next_tick();
	struct pkt_spec blank = after(&rq, "\r\n"), second = after(&blank, "GET /b HTTP/1.1\r\n\r\n");
	admitted(f, &blank);
	assert_true(flow_of(f, src, 1830).req_start_ns >= tick);
	admitted(f, &second);
	assert_true(flow_of(f, src, 1830).req_start_ns > early);
	assert_int_equal(stats(f, 2).arrivals, 1); /* the pipelined request: no unit of its own */
	/* A client sending a byte a segment: each of these goes the whole way (a token
	 * character first), but only the first of a tick moves the start (one read of the
	 * exact clock, one swap). */
	struct pkt_spec last = second;
	int same_tick = 0;

	for (int i = 0; i < 100 && !same_tick; i++) {
		unsigned long long t0 = coarse_ns(), moved;
		struct pkt_spec a = after(&last, "x"), b = after(&a, "x");

		admitted(f, &a);
		moved = flow_of(f, src, 1830).req_start_ns;
		admitted(f, &b);
		last = b;
		if (coarse_ns() == t0) {
			same_tick = 1;
			assert_int_equal(flow_of(f, src, 1830).req_start_ns, moved);
		}
	}
	assert_true(same_tick);

	struct pkt_spec rs = response(src, 1830, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.ack = last.seq + (uint32_t)last.payload_len;
	egress(f, &rs);
	samples_so_far(f, &n, &sum);
	assert_int_equal(n - n0, 1);
	assert_true(sum - sum0 < 100000); /* from the bytes past it, not the 300 ms of its own */
	assert_int_equal(inflight(f), 0);
}

/* An upload whose server answers before it has read the body (an early 413, say): the body's
 * segments after the first move only the memo; the client's next request starts where the
 * client really is, and is decided there. */
static void test_body_followed_then_next_request_decided(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.20", 1700, POST_UP);

	handshake(f, &rq);
	admitted(f, &rq);
	struct pkt_spec b1 = after(&rq, "{\"a\": 1}"), b2 = after(&b1, "{\"b\": 2}"),
			b3 = after(&b2, "{\"c\": 3}");
	admitted(f, &b1);
	admitted(f, &b2);
	admitted(f, &b3);
	/* The memo took the client at b1's end and followed it: the entry was not touched. */
	assert_int_equal(flow_of(f, "203.0.113.20", 1700).client_next, b1.seq + b1.payload_len);
	struct pkt_spec next = answer_early_then_next(f, &rq, &b3, "\r\n" GET("/x", ""));
	assert_int_equal(stats(f, 2).arrivals, 2); /* decided, behind a blank line too */
	assert_int_equal(inflight(f), 1);
	assert_int_equal(flow_of(f, "203.0.113.20", 1700).client_next, next.seq + next.payload_len);
}

/* Another client's segment takes the memo over only after what it followed is written back. */
static void test_memo_written_back_when_taken_over(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec a = request("203.0.113.21", 1710, POST_UP);
	struct pkt_spec b = request("203.0.113.22", 1720, POST_UP);

	handshake(f, &a);
	handshake(f, &b);
	admitted(f, &a);
	struct pkt_spec a1 = after(&a, "{\"a\": 1}"), a2 = after(&a1, "{\"b\": 2}");
	admitted(f, &a1);
	admitted(f, &a2);
	assert_int_equal(flow_of(f, "203.0.113.21", 1710).client_next, a1.seq + a1.payload_len);
	admitted(f, &b); /* a request start takes no memo */
	assert_int_equal(flow_of(f, "203.0.113.21", 1710).client_next, a1.seq + a1.payload_len);
	struct pkt_spec b1 = after(&b, "{\"a\": 1}");
	admitted(f, &b1); /* b's body: the memo follows b from here, a's is written back */
	assert_int_equal(flow_of(f, "203.0.113.21", 1710).client_next, a2.seq + a2.payload_len);
	assert_int_equal(flow_of(f, "203.0.113.22", 1720).client_next, b1.seq + b1.payload_len);
	answer_early_then_next(f, &a, &a2, GET("/x", ""));
	assert_int_equal(stats(f, 2).arrivals, 3);
}

/* What the memo followed of one connection never goes into a later one on the same 4-tuple
 * (here with the new connection's first byte where the old memo was taken, so that only the
 * admission time tells them apart). */
static void test_memo_not_written_into_a_later_connection(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.23", 1730, POST_UP), b[4];
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(f->skel->maps.client_memo);
	struct sluice_client_memo *memo = calloc((size_t)(ncpu > 0 ? ncpu : 1), sizeof(*memo));
	uint32_t zero = 0;

	assert_non_null(memo);
	upload_followed_here(f, &rq, b);
	client_fin(f, &b[2], (uint32_t)b[2].payload_len);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(inflight(f), 0);
	/* The memo as the old connection left it, put back after the new handshake: as if the
	 * new SYN had met another CPU's TC ingress (its clearing is tested on its own). */
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, memo), 0);
	usleep(1000); /* a later SYN: the new entry's admission time differs */
	/* its first byte where the memo was taken: inside what the memo followed */
	struct pkt_spec again = rq;
	again.seq = b[1].seq;
	handshake(f, &again);
	assert_int_equal(bpf_map_update_elem(fd, &zero, memo, BPF_ANY), 0);
	free(memo);
	admitted(f, &again);
	assert_int_equal(stats(f, 2).arrivals, 2);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(flow_of(f, "203.0.113.23", 1730).client_next, again.seq + again.payload_len);
}

/* A long upload: the entry never lags the client by more than SLUICE_MEMO_BYTES, so the
 * client's FIN after more than the FIN/RST window of body (1 MiB) still ends the flow. */
static void test_long_upload_ends_at_the_clients_fin(void **state)
{
	struct fixture *f = *state;
	static char chunk[901];
	struct pkt_spec rq = request("203.0.113.24", 1740, POST_UP), last = rq;

	memset(chunk, '[', sizeof(chunk) - 1); /* no token character: the memo follows it */
	handshake(f, &rq);
	admitted(f, &rq);
	for (int i = 0; i < 1300; i++) {
		last = after(&last, chunk);
		admitted(f, &last);
		uint32_t lag = last.seq + (uint32_t)last.payload_len -
			       flow_of(f, "203.0.113.24", 1740).client_next;
		assert_true(lag <= SLUICE_MEMO_BYTES);
	}
	assert_true(last.seq + last.payload_len - rq.seq > SLUICE_SEQ_WINDOW);
	client_fin(f, &last, (uint32_t)last.payload_len);
	assert_int_equal(flow_count(f), 0);
	assert_int_equal(inflight(f), 0);
}

/* A resend of a request's start while the request is open (a retransmit timeout's, a loss
 * probe's) is neither a new request nor a retry: counted nowhere, it moves nothing. A resend
 * that carries the start and bytes past it still moves the client on; once the request is
 * answered, a resend is a retry. */
static void test_resend_of_an_open_request(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.31", 1810, POST_UP);
	uint32_t at = rq.seq + (uint32_t)rq.payload_len;

	handshake(f, &rq);
	admitted(f, &rq);
	for (int i = 0; i < 3; i++)
		admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(stats(f, 2).retransmits, 0);
	assert_int_equal(inflight(f), 1);
	assert_int_equal(flow_of(f, "203.0.113.31", 1810).client_next, at);

	struct pkt_spec more = rq;
	more.payload = POST_UP "{\"a\": 1}";
	more.payload_len = strlen(more.payload);
	admitted(f, &more);
	assert_int_equal(flow_of(f, "203.0.113.31", 1810).client_next,
			 rq.seq + (uint32_t)more.payload_len);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(inflight(f), 1);

	struct pkt_spec rs = response("203.0.113.31", 1810, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	rs.ack = rq.seq + (uint32_t)more.payload_len;
	egress(f, &rs);
	assert_int_equal(inflight(f), 0);
	admitted(f, &rq);
	assert_int_equal(stats(f, 2).arrivals, 1);
	assert_int_equal(stats(f, 2).retransmits, 1);
}

/* A memo SLUICE_MEMO_JIFFIES old answers nothing: the segment goes the whole way and keeps
 * the flow's last-seen fresh for the GC. */
static void test_old_memo_leaves_last_seen_to_the_whole_way(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.25", 1750, POST_UP);
	struct sluice_flow_key k = flow_key("203.0.113.25", 1750);
	int ncpu = libbpf_num_possible_cpus();
	struct sluice_client_memo *memo;
	uint32_t zero = 0;
	struct sluice_flow fl;

	assert_true(ncpu > 0);
	memo = calloc((size_t)ncpu, sizeof(*memo));
	assert_non_null(memo);
	handshake(f, &rq);
	admitted(f, &rq);
	struct pkt_spec b1 = after(&rq, "{\"a\": 1}"), b2 = after(&b1, "{\"b\": 2}");
	admitted(f, &b1);
	fl = flow_of(f, "203.0.113.25", 1750);
	fl.last_seen_ns = ten_seconds_ago(); /* 10 s idle */
	assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &fl, BPF_EXIST), 0);
	/* Every CPU's memo as it is, but taken at jiffies 0. */
	int fd = bpf_map__fd(f->skel->maps.client_memo);
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, memo), 0);
	for (int c = 0; c < ncpu; c++)
		memo[c].jiffies = 0;
	assert_int_equal(bpf_map_update_elem(fd, &zero, memo, BPF_ANY), 0);
	free(memo);
	unsigned long long before = monotonic_ns();
	admitted(f, &b2);
	fl = flow_of(f, "203.0.113.25", 1750);
	assert_true(fl.last_seen_ns + 100000000ull >= before);
	assert_int_equal(fl.client_next, b2.seq + b2.payload_len);
}

/* Moves the calling thread to cpu. */
static void run_on(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	assert_int_equal(sched_getcpu(), cpu);
}

/* A connection that moves to another CPU mid-body: its first segment there lies ahead of the
 * entry, where the first CPU's memo left it; what that memo followed is gathered, and the
 * client's next request is decided where it starts. */
/* A CPU this thread may run on other than home, or skips the test (one CPU: nothing moves). */
static int other_cpu(int home)
{
	int other = -1;

	for (int c = 0; c < libbpf_num_possible_cpus() && other < 0; c++) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(c, &one);
		if (c != home && sched_setaffinity(0, sizeof(one), &one) == 0)
			other = c;
	}
	run_on(home);
	if (other < 0) {
		print_message("# skip reason: one CPU (the test needs a second one)\n");
		skip();
	}
	return other;
}

static void test_connection_moving_cpu_gathers_the_memo(void **state)
{
	struct fixture *f = *state;
	int home = sched_getcpu(), other = other_cpu(home);
	struct pkt_spec rq = request("203.0.113.26", 1760, POST_UP), b[4];
	struct pkt_spec b1 = (upload_followed_here(f, &rq, b), b[0]), b3 = b[2], b4 = b[3];

	assert_int_equal(flow_of(f, "203.0.113.26", 1760).client_next, b1.seq + b1.payload_len);
	run_on(other);
	/* first there: a resend of the last bytes home followed (a loss probe), ahead of the
	 * entry: what home followed is gathered, up to the segment's end */
	admitted(f, &b3);
	assert_int_equal(flow_of(f, "203.0.113.26", 1760).client_next, b3.seq + b3.payload_len);
	admitted(f, &b4); /* followed there now */
	answer_early_then_next(f, &rq, &b4, GET("/x", ""));
	run_on(home);
	assert_int_equal(stats(f, 2).arrivals, 2);
	assert_int_equal(inflight(f), 1);
}

/* A move whose first segment on the new CPU is a resend at the entry (a retransmit timeout's):
 * nothing is ahead yet, so nothing is gathered then; the next segment, ahead of the entry,
 * gathers what the first CPU followed. */
static void test_resend_at_the_entry_after_a_move(void **state)
{
	struct fixture *f = *state;
	int home = sched_getcpu(), other = other_cpu(home);
	struct pkt_spec rq = request("203.0.113.29", 1790, POST_UP), b[4];
	struct pkt_spec b2 = (upload_followed_here(f, &rq, b), b[1]), b4 = b[3];

	run_on(other);
	admitted(f, &b2); /* at the entry: it moves the entry on, nothing to gather */
	admitted(f, &b4); /* ahead of the entry: home's memo gathered */
	assert_int_equal(flow_of(f, "203.0.113.29", 1790).client_next, b4.seq + b4.payload_len);
	answer_early_then_next(f, &rq, &b4, GET("/x", ""));
	run_on(home);
	assert_int_equal(stats(f, 2).arrivals, 2);
}

/* With the gathers this CPU may start in the jiffy spent (SLUICE_MEMO_GATHERS), the first
 * segment of a moved connection that lies ahead of its entry reads no other CPU's memo and
 * leaves the entry where it was; the next segment ahead of the entry, with gathers to spare,
 * reads them, so the client's next request is still decided where it starts. */
static void test_spent_gathers_tried_again(void **state)
{
	struct fixture *f = *state;
	int home = sched_getcpu(), other = other_cpu(home), ncpu = libbpf_num_possible_cpus();
	int bfd = bpf_map__fd(f->skel->maps.memo_budget), mfd = bpf_map__fd(f->skel->maps.client_memo);
	struct sluice_memo_budget *bud = calloc((size_t)ncpu, sizeof(*bud));
	struct sluice_client_memo *memo = calloc((size_t)ncpu, sizeof(*memo));
	uint32_t zero = 0;
	int refused = 0;

	assert_non_null(bud);
	assert_non_null(memo);
	/* The spent budget names a jiffy, the one home's memo was taken in; should the clock
	 * tick before the segment meets it, the data path starts a fresh budget and gathers, and
	 * the test takes another connection. */
	for (int attempt = 0; attempt < 50 && !refused; attempt++) {
		uint16_t port = (uint16_t)(1800 + attempt);
		struct pkt_spec rq = request("203.0.113.31", port, POST_UP), b[4];

		run_on(home);
		upload_followed_here(f, &rq, b);
		assert_int_equal(bpf_map_lookup_elem(mfd, &zero, memo), 0);
		uint64_t jiffy = memo[home].jiffies;

		run_on(other);
		assert_int_equal(bpf_map_lookup_elem(bfd, &zero, bud), 0);
		bud[other].jiffies = jiffy;
		bud[other].used = SLUICE_MEMO_GATHERS;
		assert_int_equal(bpf_map_update_elem(bfd, &zero, bud, BPF_ANY), 0);
		admitted(f, &b[2]); /* ahead of the entry (home followed b[1] and b[2]) */
		assert_int_equal(bpf_map_lookup_elem(bfd, &zero, bud), 0);
		if (bud[other].jiffies != jiffy) {
			/* A tick came first: it gathered. This attempt's upload ends (the client's
			 * FIN, the server's close), or each retry would leave a request open and the
			 * seventh would find its class's room (6 of the limit's 8) taken. */
			both_close_after(f, &b[2]);
			assert_int_equal(inflight(f), 0);
			continue;
		}
		refused = 1;
		assert_int_equal(bud[other].used, SLUICE_MEMO_GATHERS);
		assert_int_equal(flow_of(f, "203.0.113.31", port).client_next,
				 b[0].seq + b[0].payload_len);
		/* gathers to spare again: the next segment ahead of the entry reads home's memo */
		memset(bud, 0, (size_t)ncpu * sizeof(*bud));
		assert_int_equal(bpf_map_update_elem(bfd, &zero, bud, BPF_ANY), 0);
		admitted(f, &b[3]);
		assert_int_equal(flow_of(f, "203.0.113.31", port).client_next,
				 b[3].seq + b[3].payload_len);
		uint64_t before = stats(f, 2).arrivals;
		answer_early_then_next(f, &rq, &b[3], GET("/x", ""));
		assert_int_equal(stats(f, 2).arrivals, before + 1);
	}
	run_on(home);
	free(bud);
	free(memo);
	assert_true(refused);
}

/* A later connection on the same 4-tuple never meets the earlier one's memo, however the
 * earlier one ended (the server's FIN at egress, the client's at XDP): the new connection's
 * SYN at TC ingress clears it, even with the new data at exactly the memo's position. */
static void test_later_connection_not_answered_by_the_memo(void **state)
{
	struct fixture *f = *state;

	for (int how = 0; how < 2; how++) {
		uint16_t port = (uint16_t)(1770 + how);
		struct pkt_spec rq = request("203.0.113.27", port, POST_UP);

		handshake(f, &rq);
		admitted(f, &rq);
		struct pkt_spec b1 = after(&rq, "{\"a\": 1}"), b2 = after(&b1, "{\"b\": 2}");
		admitted(f, &b1);
		admitted(f, &b2); /* the memo: at b2's end */
		if (how == 0) {
			struct pkt_spec fin = response("203.0.113.27", port, "");
			fin.payload_len = 0, fin.psh = 0, fin.fin = 1;
			egress(f, &fin);
		} else {
			client_fin(f, &b2, (uint32_t)b2.payload_len);
		}
		struct sluice_flow_key k = flow_key("203.0.113.27", port);
		struct sluice_flow gone;
		assert_int_not_equal(bpf_map_lookup_elem(f->m.flows, &k, &gone), 0);
		/* the new connection's first data lands where the memo is (its ISN + 1 there) */
		struct pkt_spec data = after(&b2, "{\"z\": 9}");
		handshake(f, &data);
		admitted(f, &data);
		assert_int_equal(flow_of(f, "203.0.113.27", port).client_next,
				 data.seq + data.payload_len);
	}
}

/* A SYN on a live connection's 4-tuple (anyone can send one) clears the memo of it only after
 * writing back what the memo followed: the client's next request is still decided. */
static void test_forged_syn_keeps_what_the_memo_followed(void **state)
{
	struct fixture *f = *state;
	struct pkt_spec rq = request("203.0.113.28", 1780, POST_UP);

	struct pkt_spec b[4];

	upload_followed_here(f, &rq, b);
	struct pkt_spec b2 = b[2]; /* the last followed */
	struct pkt_spec syn = rq;
	syn.payload = NULL, syn.payload_len = 0, syn.psh = 0, syn.ackf = 0, syn.ack = 0;
	syn.syn = 1, syn.seq = 77777, syn.tcp_opts = 20;
	run_xdp(f, &syn);
	admitted(f, &syn);
	assert_int_equal(flow_of(f, "203.0.113.28", 1780).client_next, b2.seq + b2.payload_len);
	answer_early_then_next(f, &rq, &b2, GET("/x", ""));
	assert_int_equal(stats(f, 2).arrivals, 2);
}

/* Sharing one object between the tests (harness_shared_fixture) is sound only if the reset
 * before each test leaves every map as a fresh load does: after tests that leave requests,
 * connection counts, learned classes and memos behind, the reset object is compared map by
 * map with one loaded afresh. */
/* ---- The read gate (struct sluice_unread, SLUICE_VERDICT_READ_GATE) ----
 * The wait probe that takes a request off at the server's first read is a tracepoint: here
 * its one write (the word's SLUICE_OWN_UNREAD cleared, the counts taken off) is done by hand
 * (probe_reads); tests/e2e/test_read_wait.sh runs the real probe. */

static int unread_fd(struct fixture *f)
{
	return bpf_map__fd(f->skel->maps.unread);
}

static struct sluice_unread unread_of(struct fixture *f)
{
	struct sluice_unread u;
	__u32 k = (__u32)f->idx[0];

	assert_int_equal(bpf_map_lookup_elem(unread_fd(f), &k, &u), 0);
	return u;
}

/* What waits unread: counts by class, since_ns as given (the refusals kept) (1: long ago on any host, as the
 * monotonic clock has run more than the gate's age since boot by the time a test runs). */
static void set_unread(struct fixture *f, __s64 l0, __s64 l1, __s64 l2, __s64 l3, __u64 since_ns)
{
	struct sluice_unread u = unread_of(f); /* the gate's refusals as they are */
	__u32 k = (__u32)f->idx[0];

	u.total = l0 + l1 + l2 + l3;
	u.cls[0] = l0, u.cls[1] = l1, u.cls[2] = l2, u.cls[3] = l3;
	u.since_ns = since_ns;
	assert_int_equal(bpf_map_update_elem(unread_fd(f), &k, &u, BPF_ANY), 0);
}

static void arm_read_gate(struct fixture *f, int on)
{
	struct sluice_verdict v;

	assert_int_equal(maps_read_verdict(&f->m, f->idx[0], &v), 0);
	v.flags = on ? v.flags | SLUICE_VERDICT_READ_GATE : v.flags & ~SLUICE_VERDICT_READ_GATE;
	assert_int_equal(maps_write_verdict(&f->m, f->idx[0], &v), 0);
}

/* A request start of a connection just made: 1 when admitted, 0 when refused (429 + RST). */
static int gate_request(struct fixture *f, const char *src, uint16_t sport, const char *text)
{
	struct pkt_spec rq = request(src, sport, text);
	struct run r;

	handshake(f, &rq);
	r = ingress(f, &rq);
	assert_int_equal(r.ret, TC_ACT_UNSPEC);
	return harness_unchanged(&r);
}

/* The server reads the request open on (src, sport), as the wait probe sees it. */
static void probe_reads(struct fixture *f, const char *src, uint16_t sport)
{
	struct sluice_flow_key k = flow_key(src, sport);
	struct sluice_flow fl;
	struct sluice_unread u = unread_of(f);
	__u32 cls, idx = (__u32)f->idx[0];

	assert_int_equal(bpf_map_lookup_elem(f->m.flows, &k, &fl), 0);
	assert_true(fl.req_active & SLUICE_OWN_UNREAD);
	cls = (fl.req_active >> SLUICE_OWN_CLASS_SHIFT) & 3;
	fl.req_active &= ~SLUICE_OWN_UNREAD;
	assert_int_equal(bpf_map_update_elem(f->m.flows, &k, &fl, BPF_EXIST), 0);
	u.total--, u.cls[cls]--;
	assert_int_equal(bpf_map_update_elem(unread_fd(f), &idx, &u, BPF_ANY), 0);
}

static void answer(struct fixture *f, const char *src, uint16_t sport, const char *text)
{
	struct pkt_spec rs = response(src, sport, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");

	rs.ack = 5000 + (uint32_t)strlen(text);
	egress(f, &rs);
}

/* While an L0 request waits unread (past the gate's age), every lower class is refused with
 * the 429 and counted as refused for headroom and by the gate; L0 itself is admitted and
 * counted unread. */
static void test_read_gate_refuses_lower_classes_behind_unread_l0(void **state)
{
	struct fixture *f = *state;

	arm_read_gate(f, 1);
	set_unread(f, 1, 0, 0, 0, 1);
	assert_false(gate_request(f, "203.0.113.5", 4100, GET("/report", "")));   /* L3 */
	assert_false(gate_request(f, "203.0.113.2", 4101, GET("/x", "")));        /* L1 */
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(stats(f, 1).rejected[SLUICE_REJ_HEADROOM], 1);
	assert_int_equal(unread_of(f).refused[3], 1);
	assert_int_equal(unread_of(f).refused[1], 1);
	assert_int_equal(inflight(f), 0);
	assert_true(gate_request(f, "198.18.1.5", 4102, GET("/x", "")));          /* L0 */
	assert_int_equal(unread_of(f).total, 2);
	assert_int_equal(unread_of(f).cls[0], 2);
	assert_true(flow_of(f, "198.18.1.5", 4102).req_active & SLUICE_OWN_UNREAD);
	assert_int_equal(unread_of(f).refused[0], 0);
}

/* With no higher class waiting, class k may find up to 3 - k requests unread ahead of it: L3
 * none, L2 one, L1 two. */
static void test_read_gate_depth_by_class(void **state)
{
	struct fixture *f = *state;

	arm_read_gate(f, 1);
	set_unread(f, 0, 0, 0, 1, 1);
	assert_false(gate_request(f, "203.0.113.5", 4110, GET("/report", "")));   /* L3 behind 1 */
	assert_true(gate_request(f, "203.0.113.9", 4111, GET("/x", "")));         /* L2 behind 1 */
	assert_int_equal(unread_of(f).total, 2);
	assert_false(gate_request(f, "203.0.113.9", 4112, GET("/x", "")));        /* L2 behind 2,
										      * one an L2 */
	set_unread(f, 0, 0, 0, 2, 1);
	assert_false(gate_request(f, "203.0.113.9", 4113, GET("/x", "")));        /* L2 behind 2 */
	assert_true(gate_request(f, "203.0.113.2", 4114, GET("/x", "")));         /* L1 behind 2 */
	assert_false(gate_request(f, "203.0.113.2", 4115, GET("/x", "")));        /* L1 behind an L1 */
	assert_int_equal(unread_of(f).refused[3], 1);
	assert_int_equal(unread_of(f).refused[2], 2);
	assert_int_equal(unread_of(f).refused[1], 1);
}

/* Nothing is refused by the gate while what waits is younger than its age (a server that
 * keeps up reads within it), nor while the controller has not armed it; a request admitted
 * unarmed is not counted. */
static void test_read_gate_needs_its_age_and_its_arming(void **state)
{
	struct fixture *f = *state;

	arm_read_gate(f, 1);
	set_unread(f, 1, 0, 0, 0, monotonic_ns() + 1000000000ull); /* starts "now" (and then some) */
	assert_true(gate_request(f, "203.0.113.5", 4120, GET("/report", "")));
	assert_int_equal(unread_of(f).total, 2);
	arm_read_gate(f, 0);
	set_unread(f, 1, 0, 0, 0, 1);
	assert_true(gate_request(f, "203.0.113.5", 4121, GET("/report", "")));
	assert_int_equal(unread_of(f).total, 1);
	assert_false(flow_of(f, "203.0.113.5", 4121).req_active & SLUICE_OWN_UNREAD);
	assert_int_equal(stats(f, 3).rejected[SLUICE_REJ_HEADROOM], 0);
}

/* Every way a counted request can go takes its count off exactly once: read by the server
 * and then answered, answered unread, ended by the client's RST; and a word counted in an
 * earlier load's map (a restart) takes nothing below 0. */
static void test_read_gate_counts_back_to_zero(void **state)
{
	struct fixture *f = *state;
	const char *text = GET("/x", "");
	struct pkt_spec rst = request("203.0.113.9", 4132, text);
	__u64 before = monotonic_ns();

	arm_read_gate(f, 1);
	assert_true(gate_request(f, "203.0.113.9", 4130, text));
	assert_int_equal(unread_of(f).total, 1);
	assert_int_equal(unread_of(f).cls[2], 1);
	assert_true(unread_of(f).since_ns >= before);
	probe_reads(f, "203.0.113.9", 4130);
	answer(f, "203.0.113.9", 4130, text);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(unread_of(f).total, 0);
	assert_int_equal(unread_of(f).cls[2], 0);

	assert_true(gate_request(f, "203.0.113.9", 4131, text));
	answer(f, "203.0.113.9", 4131, text);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(unread_of(f).total, 0);

	assert_true(gate_request(f, "203.0.113.9", 4132, text));
	rst.seq += (uint32_t)rst.payload_len, rst.payload = NULL, rst.payload_len = 0;
	rst.psh = 0, rst.rst = 1;
	run_xdp(f, &rst);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(unread_of(f).total, 0);
	assert_int_equal(unread_of(f).cls[2], 0);

	/* counted by the last load: this map starts at 0 */
	assert_true(gate_request(f, "203.0.113.9", 4133, text));
	set_unread(f, 0, 0, 0, 0, 0);
	answer(f, "203.0.113.9", 4133, text);
	assert_int_equal(inflight(f), 0);
	assert_int_equal(unread_of(f).total, 0);
	assert_int_equal(unread_of(f).cls[2], 0);
}

static void test_reset_leaves_every_map_as_loaded(void **state)
{
	void (*const runs[])(void **) = {
		test_request_start_and_end, test_connection_cap, test_learned_class_kept_by_64,
		test_source_cache_is_per_flow, test_refused_request_gets_429_and_server_rst,
		test_established_connection_adopted,
	};
	/* Something those tests leave behind in a map of every type the reset handles: hash,
	 * LRU hash, LPM trie, array, per-CPU array, global data. */
	const char *left[] = { "flows", "addr_class", "source_rules", "http_conns", "http_conn_cap",
			       "client_memo", "latency_hist",
			       bpf_map__name(((struct fixture *)*state)->skel->maps.bss) };

	assert_int_equal(harness_prove_reset(state, setup, runs, sizeof(runs) / sizeof(runs[0]),
					     left, sizeof(left) / sizeof(left[0])), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_request_start_and_end, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_request_timed_from_its_late_bytes, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_request_start_moved_only_by_in_order_bytes, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_bytes_past_the_request_move_its_start, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_connection_cap_unanswered_refusal_admits, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_status_of_the_request_form_not_an_error, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_status_5xx_and_429, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_table_full_attempt_keeps_shedding_on,
						setup_small_table, harness_teardown),
		cmocka_unit_test_setup_teardown(test_client_fin_leaves_the_request_running, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_request_with_fin_completing_the_handshake_is_decided,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_data_keeps_flow_fresh, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_classification, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_header_scan_matches_reference, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_classification_matches_model_on_cut_heads, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_data_without_handshake_creates_nothing, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_request_only_at_the_expected_sequence, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_resend_of_an_open_request, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_request_cut_before_its_space_is_decided, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_blank_lines_before_the_request_line, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_all_zero_verdict_admits_requests, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_refused_request_gets_429_and_server_rst, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_refused_request_with_ip_options_answered, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_refused_request_with_fin_acknowledges_the_fin, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_interim_upgrade_and_connect, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_refused_connect_leaves_the_connection_http, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_no_reply_to_unverified_peers, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_pipelined_requests_count_as_one, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_open_breaker_answers_503, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_connection_cap, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_learned_class_kept_by_64, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_connection_cap_release, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_connection_cap_trims, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_connection_class_unjudged_syn, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_connection_cap_drop_counts_packets, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_refusal_after_an_answer_asks_only_the_connection,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_ipv6_refused_request_gets_429, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_source_cache_trust_removed, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_source_cache_rule_changes, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_source_cache_is_per_flow, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_source_cache_ipv6, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_source_cache_not_in_stamp_second, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_established_connection_adopted, setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_request_behind_discarded_bytes_is_decided, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_body_followed_then_next_request_decided, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_memo_written_back_when_taken_over, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_memo_not_written_into_a_later_connection, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_long_upload_ends_at_the_clients_fin, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_old_memo_leaves_last_seen_to_the_whole_way, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_connection_moving_cpu_gathers_the_memo, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_later_connection_not_answered_by_the_memo, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_forged_syn_keeps_what_the_memo_followed, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_resend_at_the_entry_after_a_move, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_spent_gathers_tried_again, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_read_gate_refuses_lower_classes_behind_unread_l0,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_read_gate_depth_by_class, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_read_gate_needs_its_age_and_its_arming, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_read_gate_counts_back_to_zero, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_reset_leaves_every_map_as_loaded, setup,
						harness_teardown),
	};
	cpu_set_t one;

	/* A private netns whose loopback receives the redirected replies. */
	if (private_loopback())
		return 1;
	/* One CPU for the whole suite: TC ingress keeps a memo per CPU (bpf/client_memo.h), and
	 * a test's segments must meet the same one however the scheduler moves the process. */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one)) {
		perror("sched_setaffinity");
		return 1;
	}
	return cmocka_run_group_tests_name("http", tests, NULL, harness_shared_release);
}
