// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Per-packet cost of sluice's BPF programs through BPF_PROG_TEST_RUN, side by side with an
 * empty XDP / TC program in the same run (benchmark, not a test: it never fails on time).
 *
 *   build/bench/bench_pktcost EMPTY_OBJ [REPEAT] [LOOPS]
 *
 * REPEAT (default 1000000) is the in-kernel repeat count for paths that do not change state
 * or the packet; LOOPS (default 200000) is the number of repeat=1 calls for paths that must
 * see a different packet or fresh state each time (new SYN admission, request start, the RST
 * and 429 replies: with repeat > 1 a rewritten packet would be re-run on its own output).
 * opts.duration is the mean ns per run; with repeat=1 it includes the kernel's per-call
 * timing overhead, which the empty program pays too, so the difference is still meaningful.
 * Runs in a private network namespace with lo up (429 replies are cloned to the test skb's
 * device). Prints a table on stdout; exit 0 unless something could not be loaded or run. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <linux/pkt_cls.h>
#include <linux/if_link.h>

#include "harness.h"
#include "pktbuild.h"
#include "common/config.h"
#include "control/verdict.h"

#define SERVER4 "198.18.0.1"

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: big\n"          /* admission always succeeds */
	"    port: 7000\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 1000000 }\n"
	"    default_class: L2\n"
	"    classify:\n"
	"      - { source: 198.18.1.0/24, class: L0 }\n"
	"  - name: tiny\n"         /* one slot: every further SYN gets the RST */
	"    port: 7001\n"
	"    protocol: tcp\n"
	"    reject: rst\n"
	"    limit: { fixed: 1 }\n"
	"    default_class: L0\n"
	"  - name: web\n"          /* http, header classification, admission always succeeds */
	"    port: 8080\n"
	"    protocol: http\n"
	"    limit: { fixed: 1000000 }\n"
	"    default_class: L2\n"
	"    classify:\n"
	"      - { source: 198.18.1.0/24, class: L0 }\n"
	"      - { header: \"X-Priority\", class: from-header }\n"
	"  - name: webfull\n"      /* http, one slot: every further request gets the 429 */
	"    port: 8081\n"
	"    protocol: http\n"
	"    limit: { fixed: 1 }\n"
	"    default_class: L2\n"
	"    classify:\n"
	"      - { header: \"X-Priority\", class: from-header }\n";

static const char REQ[] = "GET /item HTTP/1.1\r\nHost: bench\r\nUser-Agent: loadgen\r\n"
			  "Accept: */*\r\nX-Priority: L3\r\n\r\n";

static uint8_t outbuf[2048];

/* One BPF_PROG_TEST_RUN: mean ns per run, or -1. */
static double run1(int fd, const uint8_t *pkt, size_t len, int repeat, int *retval)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = (uint32_t)len,
		    .data_out = outbuf, .data_size_out = sizeof(outbuf), .repeat = repeat);
	if (bpf_prog_test_run_opts(fd, &o))
		return -1;
	if (retval)
		*retval = (int)o.retval;
	return (double)o.duration;
}

/* Best of 3 repeats of `repeat` runs (the VM is noisy; min is the least disturbed). */
static double run_rep(int fd, const uint8_t *pkt, size_t len, int repeat, int *retval)
{
	double best = -1;
	for (int i = 0; i < 3; i++) {
		double d = run1(fd, pkt, len, repeat, retval);
		if (d >= 0 && (best < 0 || d < best))
			best = d;
	}
	return best;
}

struct row {
	const char *name, *prog, *how;
	double ns, empty_ns;
	int retval;
};
static struct row rows[32];
static int nrows;

static void add(const char *name, const char *prog, const char *how, double ns, double empty,
		int retval)
{
	rows[nrows++] = (struct row){ name, prog, how, ns, empty, retval };
}

static struct pkt_spec syn4(const char *src, uint16_t sport, uint16_t dport)
{
	struct pkt_spec s = { .src = src, .dst = SERVER4, .sport = sport, .dport = dport,
			      .seq = 1000u + sport, .syn = 1, .tcp_opts = 20 };
	return s;
}

static struct pkt_spec req4(const char *src, uint16_t sport, uint16_t dport)
{
	struct pkt_spec s = { .src = src, .dst = SERVER4, .sport = sport, .dport = dport,
			      .seq = 5000u + sport, .ack = 77, .ackf = 1, .psh = 1,
			      .payload = REQ, .payload_len = sizeof(REQ) - 1 };
	return s;
}

/* The handshake before a client's first segment `first` (seq = client ISN + 1, ack = server
 * ISN + 1): SYN (XDP), the server's SYN-ACK (TC egress), the client's ACK (XDP). Untimed. */
static void handshake(int xdp, int tce, const struct pkt_spec *first)
{
	struct pkt_spec syn, sa, ack;
	uint8_t b[512];

	handshake_of(first, &syn, &sa, &ack);
	run1(xdp, b, build_pkt(b, &syn), 1, NULL);
	run1(tce, b, build_pkt(b, &sa), 1, NULL);
	run1(xdp, b, build_pkt(b, &ack), 1, NULL);
}

/* The client's first segment after the handshake of syn (no payload). */
static struct pkt_spec after_syn(const struct pkt_spec *syn)
{
	struct pkt_spec a = *syn;

	a.syn = 0, a.ackf = 1, a.tcp_opts = 0, a.seq = syn->seq + 1, a.ack = 1;
	return a;
}

int main(int argc, char **argv)
{
	const char *empty_path = argc > 1 ? argv[1] : "build/bench/empty_xdp.bpf.o";
	int repeat = argc > 2 ? atoi(argv[2]) : 1000000;
	int loops = argc > 3 ? atoi(argv[3]) : 200000;
	struct sluice_config cfg;
	struct doc_errors errs;
	struct sluice_maps m;
	int idx[SLUICE_MIN_SERVICE_SLOTS];
	uint8_t pkt[512];
	size_t len;
	int rv;

	if (unshare(CLONE_NEWNET) != 0) {
		perror("unshare(CLONE_NEWNET)");
		return 1;
	}
	if (system("ip link set lo up"))
		fprintf(stderr, "bench_pktcost: cannot bring lo up\n");

	struct bpf_object *eo = bpf_object__open_file(empty_path, NULL);
	if (!eo || bpf_object__load(eo)) {
		fprintf(stderr, "bench_pktcost: cannot load %s\n", empty_path);
		return 1;
	}
	int e_xdp = bpf_program__fd(bpf_object__find_program_by_name(eo, "empty_xdp"));
	int e_tc = bpf_program__fd(bpf_object__find_program_by_name(eo, "empty_tc"));

	/* Room for every flow the loops create: a full table would admit untracked. */
	struct sluice_bpf *skel = harness_load((unsigned)(2 * loops + 4096), &m);
	if (!skel) {
		fprintf(stderr, "bench_pktcost: cannot load the sluice BPF object\n");
		return 1;
	}
	if (sluice_config_parse(CONFIG, strlen(CONFIG), "bench", &cfg, &errs)) {
		doc_errors_print(stderr, &errs);
		return 1;
	}
	if (maps_assign_indices(&m, &cfg, idx) || maps_program_services(&m, &cfg, idx)) {
		fprintf(stderr, "bench_pktcost: cannot program services\n");
		return 1;
	}
	for (int i = 0; i < cfg.n_services; i++) {
		struct sluice_verdict v;
		verdict_default(&cfg.services[i], verdict_initial_limit(&cfg.services[i]), &v);
		maps_write_verdict(&m, idx[i], &v);
	}
	struct sluice_globals g = { .heartbeat_ns = monotonic_ns(),
				    .heartbeat_timeout_ns = 3600ull * 1000000000ull };
	maps_write_globals(&m, &g);

	int xdp = bpf_program__fd(skel->progs.sluice_xdp_ingress);
	int tci = bpf_program__fd(skel->progs.sluice_tc_ingress);
	int tce = bpf_program__fd(skel->progs.sluice_tc_egress);
	struct pkt_spec s;
	double e, d;

	/* ---- in-kernel repeat: paths that leave packet and state as they were ---- */
	s = syn4("198.18.1.2", 40000, 80);
	len = build_pkt(pkt, &s);
	e = run_rep(e_xdp, pkt, len, repeat, NULL);
	d = run_rep(xdp, pkt, len, repeat, &rv);
	add("non-service packet (dport 80)", "xdp", "repeat", d, e, rv);

	/* Established flow: a completed handshake, then its ACKs. */
	s = syn4("198.18.1.2", 40001, 7000);
	struct pkt_spec a = after_syn(&s);
	handshake(xdp, tce, &a);
	len = build_pkt(pkt, &a);
	e = run_rep(e_xdp, pkt, len, repeat, NULL);
	d = run_rep(xdp, pkt, len, repeat, &rv);
	add("established-flow packet (ACK)", "xdp", "repeat", d, e, rv);

	/* SYN retransmit: the same 4-tuple again and again (first run admits). */
	s = syn4("198.18.2.2", 40002, 7000);
	len = build_pkt(pkt, &s);
	e = run_rep(e_xdp, pkt, len, repeat, NULL);
	d = run_rep(xdp, pkt, len, repeat, &rv);
	add("SYN retransmit (same 4-tuple)", "xdp", "repeat", d, e, rv);

	/* Request continuation: the first run starts the request, the rest see it active. */
	s = req4("198.18.2.3", 40003, 8080);
	handshake(xdp, tce, &s);
	len = build_pkt(pkt, &s);
	e = run_rep(e_tc, pkt, len, repeat, NULL);
	d = run_rep(tci, pkt, len, repeat, &rv);
	add("http segment, request already active", "tc-in", "repeat", d, e, rv);

	/* Server's response segment of an established flow (no request outstanding). */
	struct pkt_spec r = { .src = SERVER4, .dst = "198.18.1.2", .sport = 7000, .dport = 40001,
			      .seq = 1, .ack = 40002, .ackf = 1 };
	len = build_pkt(pkt, &r);
	e = run_rep(e_tc, pkt, len, repeat, NULL);
	d = run_rep(tce, pkt, len, repeat, &rv);
	add("server ACK of established flow", "tc-eg", "repeat", d, e, rv);

	/* ---- repeat = 1, a fresh packet each call ---- */
	double se = 0, sd = 0;
	int ne = 0, nd = 0, last = 0;
	/* New SYN admission: a different source port / address every call. */
	for (int i = 0; i < loops; i++) {
		char src[32];
		snprintf(src, sizeof src, "198.18.%d.%d", 10 + (i >> 16 & 0x7f), 1 + (i >> 8 & 0xff) % 250);
		s = syn4(src, (uint16_t)(1024 + (i & 0xff) * 200 + (i >> 16)), 7000);
		len = build_pkt(pkt, &s);
		if ((d = run1(e_xdp, pkt, len, 1, NULL)) >= 0)
			se += d, ne++;
		if ((d = run1(xdp, pkt, len, 1, &last)) >= 0)
			sd += d, nd++;
	}
	add("new SYN, admitted (handshake record)", "xdp", "loop", nd ? sd / nd : -1, ne ? se / ne : -1, last);

	/* The ACK that completes an admitted handshake: the flow and its slot are taken here. */
	se = sd = 0, ne = nd = 0;
	for (int i = 0; i < loops; i++) {
		char src[32];
		snprintf(src, sizeof src, "198.18.%d.%d", 60 + (i >> 16 & 0x3f), 1 + (i >> 8 & 0xff) % 250);
		s = syn4(src, (uint16_t)(1024 + (i & 0xff) * 200 + (i >> 16)), 7000);
		struct pkt_spec sa = { .src = SERVER4, .dst = src, .sport = 7000, .dport = s.sport,
				       .seq = 0, .ack = s.seq + 1, .syn = 1, .ackf = 1, .tcp_opts = 20 };
		len = build_pkt(pkt, &s);
		run1(xdp, pkt, len, 1, NULL);
		len = build_pkt(pkt, &sa);
		run1(tce, pkt, len, 1, NULL);
		a = after_syn(&s);
		len = build_pkt(pkt, &a);
		if ((d = run1(e_xdp, pkt, len, 1, NULL)) >= 0)
			se += d, ne++;
		if ((d = run1(xdp, pkt, len, 1, &last)) >= 0)
			sd += d, nd++;
	}
	add("ACK completing a handshake (flow + slot)", "xdp", "loop", nd ? sd / nd : -1,
	    ne ? se / ne : -1, last);

	/* SYN rejected with an RST (XDP_TX): service `tiny` holds its one slot (a connection
	 * whose query is unanswered: busy; an idle one would hold nothing). */
	s = syn4("198.18.3.1", 1, 7001);
	a = after_syn(&s);
	handshake(xdp, tce, &a);
	a.payload = "q\n", a.payload_len = 2, a.psh = 1;
	len = build_pkt(pkt, &a);
	run1(tci, pkt, len, 1, NULL);
	se = sd = 0, ne = nd = 0;
	for (int i = 0; i < loops; i++) {
		s = syn4("198.18.3.2", (uint16_t)(2 + i % 60000), 7001);
		len = build_pkt(pkt, &s);
		if ((d = run1(e_xdp, pkt, len, 1, NULL)) >= 0)
			se += d, ne++;
		if ((d = run1(xdp, pkt, len, 1, &last)) >= 0)
			sd += d, nd++;
	}
	add("new SYN, rejected: RST reply (XDP_TX)", "xdp", "loop", nd ? sd / nd : -1,
	    ne ? se / ne : -1, last);

	/* Request start with X-Priority classification, admitted: a new connection every call
	 * (its handshake untimed). */
	se = sd = 0, ne = nd = 0;
	for (int i = 0; i < loops; i++) {
		char src[32];
		snprintf(src, sizeof src, "198.18.%d.%d", 40 + (i >> 16 & 0x7f), 1 + (i >> 8 & 0xff) % 250);
		s = req4(src, (uint16_t)(1024 + (i & 0xff) * 200 + (i >> 16)), 8080);
		handshake(xdp, tce, &s);
		len = build_pkt(pkt, &s);
		if ((d = run1(e_tc, pkt, len, 1, NULL)) >= 0)
			se += d, ne++;
		if ((d = run1(tci, pkt, len, 1, &last)) >= 0)
			sd += d, nd++;
	}
	add("request start + header class, admitted", "tc-in", "loop", nd ? sd / nd : -1,
	    ne ? se / ne : -1, last);

	/* Data with no handshake (a forged request segment): no flow, nothing decided. */
	s = req4("198.18.5.1", 40005, 8080);
	len = build_pkt(pkt, &s);
	e = run_rep(e_tc, pkt, len, repeat, NULL);
	d = run_rep(tci, pkt, len, repeat, &rv);
	add("http data, no handshake (forged)", "tc-in", "repeat", d, e, rv);

	/* tcp turns on one connection of `big`: a client query segment starts a turn (TC
	 * ingress), the server's reply segment ends it with a latency sample (TC egress); each
	 * pair carries on from the previous one's sequence numbers. */
	{
		static const char Q[] = "SELECT 1;\n", R[] = "1 row\n";
		struct pkt_spec q = { .src = "198.18.6.1", .dst = SERVER4, .sport = 40006,
				      .dport = 7000, .seq = 9000, .ack = 70001, .ackf = 1, .psh = 1,
				      .payload = Q, .payload_len = sizeof(Q) - 1 };
		struct pkt_spec rp = { .src = SERVER4, .dst = q.src, .sport = 7000, .dport = q.sport,
				       .seq = 70001, .ackf = 1, .psh = 1, .payload = R,
				       .payload_len = sizeof(R) - 1 };
		double qe = 0, qd = 0, re = 0, rd = 0;
		int nqe = 0, nqd = 0, nre = 0, nrd = 0, rlast = 0;

		handshake(xdp, tce, &q);
		for (int i = 0; i < loops; i++) {
			rp.ack = q.seq + (uint32_t)q.payload_len;
			len = build_pkt(pkt, &q);
			if ((d = run1(e_tc, pkt, len, 1, NULL)) >= 0)
				qe += d, nqe++;
			if ((d = run1(tci, pkt, len, 1, &last)) >= 0)
				qd += d, nqd++;
			len = build_pkt(pkt, &rp);
			if ((d = run1(e_tc, pkt, len, 1, NULL)) >= 0)
				re += d, nre++;
			if ((d = run1(tce, pkt, len, 1, &rlast)) >= 0)
				rd += d, nrd++;
			q.seq += (uint32_t)q.payload_len;
			q.ack = rp.seq + (uint32_t)rp.payload_len;
			rp.seq += (uint32_t)rp.payload_len;
		}
		add("tcp client data, starts a turn", "tc-in", "loop", nqd ? qd / nqd : -1,
		    nqe ? qe / nqe : -1, last);
		add("tcp server reply, ends the turn", "tc-eg", "loop", nrd ? rd / nrd : -1,
		    nre ? re / nre : -1, rlast);
		/* The last query again: a retransmit, sequence not beyond what was seen. */
		q.seq -= (uint32_t)q.payload_len;
		len = build_pkt(pkt, &q);
		e = run_rep(e_tc, pkt, len, repeat, NULL);
		d = run_rep(tci, pkt, len, repeat, &rv);
		add("tcp client data, retransmit (ignored)", "tc-in", "repeat", d, e, rv);
	}

	/* Request refused: in-kernel 429 (clone to the client) + RST to the server. */
	s = req4("198.18.4.1", 1, 8081);
	handshake(xdp, tce, &s);
	len = build_pkt(pkt, &s);
	run1(tci, pkt, len, 1, NULL);
	se = sd = 0, ne = nd = 0;
	for (int i = 0; i < loops; i++) {
		s = req4("198.18.4.2", (uint16_t)(2 + i % 60000), 8081);
		handshake(xdp, tce, &s);
		len = build_pkt(pkt, &s);
		if ((d = run1(e_tc, pkt, len, 1, NULL)) >= 0)
			se += d, ne++;
		if ((d = run1(tci, pkt, len, 1, &last)) >= 0)
			sd += d, nd++;
	}
	add("request refused: 429 reply + RST", "tc-in", "loop", nd ? sd / nd : -1,
	    ne ? se / ne : -1, last);

	struct sluice_pkt_stats ps = { 0 };
	maps_read_pkt_stats(&m, &ps);
	unsigned long long web_rej = 0;
	for (int c = 0; c < 4; c++) {
		struct sluice_class_stats st;
		if (maps_read_class_stats(&m, idx[3], c, &st) == 0)
			for (int k = 0; k < SLUICE_REJ_REASONS; k++)
				web_rej += st.rejected[k];
	}

	printf("# per-packet cost, BPF_PROG_TEST_RUN, repeat=%d (best of 3) or %d calls of "
	       "repeat=1 (mean)\n", repeat, loops);
	printf("%-42s %-6s %-7s %9s %9s %9s %7s %s\n", "path", "prog", "method", "ns/pkt",
	       "empty_ns", "over_ns", "ratio", "retval");
	for (int i = 0; i < nrows; i++) {
		struct row *w = &rows[i];
		printf("%-42s %-6s %-7s %9.1f %9.1f %9.1f %7.2f %d\n", w->name, w->prog, w->how,
		       w->ns, w->empty_ns, w->ns - w->empty_ns,
		       w->empty_ns > 0 ? w->ns / w->empty_ns : 0.0, w->retval);
	}
	printf("# counters: rst_sent=%llu reply_sent=%llu reply_failed=%llu "
	       "webfull rejected=%llu\n",
	       (unsigned long long)ps.rst_sent, (unsigned long long)ps.reply_sent,
	       (unsigned long long)ps.reply_failed,
	       web_rej);
	if (getenv("BENCH_DEBUG"))
		for (int sv = 0; sv < cfg.n_services; sv++)
			for (int c = 0; c < 4; c++) {
				struct sluice_class_stats x;
				if (maps_read_class_stats(&m, idx[sv], c, &x) == 0 && x.arrivals)
					fprintf(stderr, "svc %s L%d arrivals %llu admitted %llu fail_open %llu rej %llu %llu %llu\n",
						cfg.services[sv].name, c, (unsigned long long)x.arrivals,
						(unsigned long long)x.admitted, (unsigned long long)x.fail_open,
						(unsigned long long)x.rejected[0], (unsigned long long)x.rejected[1],
						(unsigned long long)x.rejected[2]);
			}
	sluice_bpf__destroy(skel);
	bpf_object__close(eo);
	return 0;
}
