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

/* Everything one run needs: the empty programs, the sluice programs and their maps. */
struct bench {
	int repeat, loops;
	struct bpf_object *eo;
	struct sluice_bpf *skel;
	int e_xdp, e_tc, xdp, tci, tce;
	struct sluice_config cfg;
	struct sluice_maps m;
	int idx[SLUICE_MIN_SERVICE_SLOTS];
};

/* Load both objects and program the maps as sluiced would for CONFIG. */
static int bench_setup(struct bench *b, const char *empty_path)
{
	struct doc_errors errs;

	b->eo = bpf_object__open_file(empty_path, NULL);
	if (!b->eo || bpf_object__load(b->eo)) {
		fprintf(stderr, "bench_pktcost: cannot load %s\n", empty_path);
		return -1;
	}
	b->e_xdp = bpf_program__fd(bpf_object__find_program_by_name(b->eo, "empty_xdp"));
	b->e_tc = bpf_program__fd(bpf_object__find_program_by_name(b->eo, "empty_tc"));

	/* Room for every flow the loops create: a full table would admit untracked. */
	b->skel = harness_load((unsigned)(2 * b->loops + 4096), &b->m);
	if (!b->skel) {
		fprintf(stderr, "bench_pktcost: cannot load the sluice BPF object\n");
		return -1;
	}
	if (sluice_config_parse(CONFIG, strlen(CONFIG), "bench", &b->cfg, &errs)) {
		doc_errors_print(stderr, &errs);
		return -1;
	}
	if (maps_assign_indices(&b->m, &b->cfg, b->idx) ||
	    maps_program_services(&b->m, &b->cfg, b->idx)) {
		fprintf(stderr, "bench_pktcost: cannot program services\n");
		return -1;
	}
	for (int i = 0; i < b->cfg.n_services; i++) {
		struct sluice_verdict v;
		verdict_default(&b->cfg.services[i], verdict_initial_limit(&b->cfg.services[i]), &v);
		maps_write_verdict(&b->m, b->idx[i], &v);
	}
	struct sluice_globals g = { .heartbeat_ns = monotonic_ns(),
				    .heartbeat_timeout_ns = 3600ull * 1000000000ull };
	maps_write_globals(&b->m, &g);

	b->xdp = bpf_program__fd(b->skel->progs.sluice_xdp_ingress);
	b->tci = bpf_program__fd(b->skel->progs.sluice_tc_ingress);
	b->tce = bpf_program__fd(b->skel->progs.sluice_tc_egress);
	return 0;
}

/* One row measured with the in-kernel repeat: the packet of `s`, empty program vs `fd`. */
static void bench_row_repeat(const struct bench *b, const struct pkt_spec *s, int e_fd, int fd,
			     const char *name, const char *prog)
{
	uint8_t pkt[512];
	size_t len = build_pkt(pkt, s);
	double e, d;
	int rv;

	e = run_rep(e_fd, pkt, len, b->repeat, NULL);
	d = run_rep(fd, pkt, len, b->repeat, &rv);
	add(name, prog, "repeat", d, e, rv);
}

/* Paths that leave packet and state as they were. */
static void bench_repeat_paths(const struct bench *b)
{
	uint8_t pkt[512];
	struct pkt_spec s;

	s = syn4("198.18.1.2", 40000, 80);
	bench_row_repeat(b, &s, b->e_xdp, b->xdp, "non-service packet (dport 80)", "xdp");

	/* Established flow: admit one SYN, then its ACKs. */
	s = syn4("198.18.1.2", 40001, 7000);
	run1(b->xdp, pkt, build_pkt(pkt, &s), 1, NULL);
	s.syn = 0, s.ackf = 1, s.tcp_opts = 0, s.seq++, s.ack = 1;
	bench_row_repeat(b, &s, b->e_xdp, b->xdp, "established-flow packet (ACK)", "xdp");

	/* SYN retransmit: the same 4-tuple again and again (first run admits). */
	s = syn4("198.18.2.2", 40002, 7000);
	bench_row_repeat(b, &s, b->e_xdp, b->xdp, "SYN retransmit (same 4-tuple)", "xdp");

	/* Request continuation: the first run starts the request, the rest see it active. */
	s = req4("198.18.2.3", 40003, 8080);
	bench_row_repeat(b, &s, b->e_tc, b->tci, "http segment, request already active", "tc-in");

	/* Server's response segment of an established flow (no request outstanding). */
	struct pkt_spec r = { .src = SERVER4, .dst = "198.18.1.2", .sport = 7000, .dport = 40001,
			      .seq = 1, .ack = 40002, .ackf = 1 };
	bench_row_repeat(b, &r, b->e_tc, b->tce, "server ACK of established flow", "tc-eg");
}

/* The packet of call i of a repeat=1 loop; `src` is scratch room for the address text. */
typedef struct pkt_spec (*loop_pkt_fn)(int i, char *src, size_t srclen);

static struct pkt_spec new_syn(int i, char *src, size_t srclen)
{
	snprintf(src, srclen, "198.18.%d.%d", 10 + (i >> 16 & 0x7f), 1 + (i >> 8 & 0xff) % 250);
	return syn4(src, (uint16_t)(1024 + (i & 0xff) * 200 + (i >> 16)), 7000);
}

static struct pkt_spec refused_syn(int i, char *src, size_t srclen)
{
	return syn4("198.18.3.2", (uint16_t)(2 + i % 60000), 7001);
}

static struct pkt_spec new_request(int i, char *src, size_t srclen)
{
	snprintf(src, srclen, "198.18.%d.%d", 40 + (i >> 16 & 0x7f), 1 + (i >> 8 & 0xff) % 250);
	return req4(src, (uint16_t)(1024 + (i & 0xff) * 200 + (i >> 16)), 8080);
}

static struct pkt_spec refused_request(int i, char *src, size_t srclen)
{
	return req4("198.18.4.2", (uint16_t)(2 + i % 60000), 8081);
}

/* One row measured with b->loops calls of repeat=1, a fresh packet each call (mean). */
static void bench_row_loop(const struct bench *b, loop_pkt_fn next, int e_fd, int fd,
			   const char *name, const char *prog)
{
	double se = 0, sd = 0, d;
	int ne = 0, nd = 0, last = 0;
	uint8_t pkt[512];

	for (int i = 0; i < b->loops; i++) {
		char src[32];
		struct pkt_spec s = next(i, src, sizeof(src));
		size_t len = build_pkt(pkt, &s);

		if ((d = run1(e_fd, pkt, len, 1, NULL)) >= 0)
			se += d, ne++;
		if ((d = run1(fd, pkt, len, 1, &last)) >= 0)
			sd += d, nd++;
	}
	add(name, prog, "loop", nd ? sd / nd : -1, ne ? se / ne : -1, last);
}

/* Paths that must see a different packet or fresh state each time. */
static void bench_loop_paths(const struct bench *b)
{
	uint8_t pkt[512];
	struct pkt_spec s;

	/* New SYN admission: a different source port / address every call. */
	bench_row_loop(b, new_syn, b->e_xdp, b->xdp, "new SYN, admitted (new flow)", "xdp");

	/* SYN rejected with an RST (XDP_TX): service `tiny` holds its one slot. */
	s = syn4("198.18.3.1", 1, 7001);
	run1(b->xdp, pkt, build_pkt(pkt, &s), 1, NULL);
	bench_row_loop(b, refused_syn, b->e_xdp, b->xdp, "new SYN, rejected: RST reply (XDP_TX)",
		       "xdp");

	/* Request start with X-Priority classification, admitted: a new flow every call (the
	 * connection's SYN was not seen, so the flow is created at the request). */
	bench_row_loop(b, new_request, b->e_tc, b->tci, "request start + header class, admitted",
		       "tc-in");

	/* Request refused: in-kernel 429 (clone to the client) + RST to the server. */
	s = req4("198.18.4.1", 1, 8081);
	run1(b->tci, pkt, build_pkt(pkt, &s), 1, NULL);
	bench_row_loop(b, refused_request, b->e_tc, b->tci, "request refused: 429 reply + RST",
		       "tc-in");
}

static void bench_print(const struct bench *b)
{
	struct sluice_pkt_stats ps = { 0 };
	unsigned long long web_rej = 0;

	maps_read_pkt_stats(&b->m, &ps);
	for (int c = 0; c < 4; c++) {
		struct sluice_class_stats st;
		if (maps_read_class_stats(&b->m, b->idx[3], c, &st) == 0)
			for (int k = 0; k < SLUICE_REJ_REASONS; k++)
				web_rej += st.rejected[k];
	}

	printf("# per-packet cost, BPF_PROG_TEST_RUN, repeat=%d (best of 3) or %d calls of "
	       "repeat=1 (mean)\n", b->repeat, b->loops);
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
}

/* BENCH_DEBUG: per service and class, what admission decided (on stderr). */
static void bench_debug(const struct bench *b)
{
	for (int sv = 0; sv < b->cfg.n_services; sv++)
		for (int c = 0; c < 4; c++) {
			struct sluice_class_stats x;
			if (maps_read_class_stats(&b->m, b->idx[sv], c, &x) == 0 && x.arrivals)
				fprintf(stderr, "svc %s L%d arrivals %llu admitted %llu fail_open %llu rej %llu %llu %llu\n",
					b->cfg.services[sv].name, c, (unsigned long long)x.arrivals,
					(unsigned long long)x.admitted, (unsigned long long)x.fail_open,
					(unsigned long long)x.rejected[0], (unsigned long long)x.rejected[1],
					(unsigned long long)x.rejected[2]);
		}
}

int main(int argc, char **argv)
{
	const char *empty_path = argc > 1 ? argv[1] : "build/bench/empty_xdp.bpf.o";
	static struct bench b;

	b.repeat = argc > 2 ? atoi(argv[2]) : 1000000;
	b.loops = argc > 3 ? atoi(argv[3]) : 200000;
	if (unshare(CLONE_NEWNET) != 0) {
		perror("unshare(CLONE_NEWNET)");
		return 1;
	}
	if (system("ip link set lo up"))
		fprintf(stderr, "bench_pktcost: cannot bring lo up\n");
	if (bench_setup(&b, empty_path))
		return 1;

	/* ---- in-kernel repeat, then repeat = 1 with a fresh packet each call ---- */
	bench_repeat_paths(&b);
	bench_loop_paths(&b);

	bench_print(&b);
	if (getenv("BENCH_DEBUG"))
		bench_debug(&b);
	sluice_bpf__destroy(b.skel);
	bpf_object__close(b.eo);
	return 0;
}
