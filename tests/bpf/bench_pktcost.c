// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Per-packet cost of sluice's BPF programs through BPF_PROG_TEST_RUN, side by side with an
 * empty XDP / TC program in the same run (a benchmark: it never fails on time, only when a
 * path did not do what it is meant to measure).
 *
 *   build/bench/bench_pktcost EMPTY_OBJ [REPEAT] [LOOPS]
 *
 * REPEAT (default 1000000) is the in-kernel repeat count for paths that leave packet and state
 * as they were; LOOPS (default 20000) is the number of repeat=1 calls for paths that must see
 * a different packet or fresh state each time (new SYN, handshake completion, request start
 * on a new connection and on a keep-alive one, the RST and 429 replies: with repeat > 1 a
 * rewritten packet would be re-run on its own output). opts.duration is the mean ns per run; with repeat=1 it includes the kernel's
 * per-call timing overhead, which the empty program pays too, so the difference still means
 * something. Every figure is the best of BENCH_ROUNDS (5) rounds taken in this one run: the
 * VM is shared and noisy, the least disturbed round is the one that tells the code's cost.
 *
 * One line per path, for IPv4, IPv6 and 802.1Q-tagged IPv4:
 *   path: <name> ns: <N> empty_ns: <E> over_empty_ns: <N-E>
 * with, before the paths and after them, what a dependent load costs on the host's memory
 * then (host: ..., see chase_ns),
 * then the same admitted-flow packets at 1 and 4096 services, 100 and 60,000 flows, and the
 * ratio of the largest to the smallest (what such a packet costs must not grow with either),
 * and on one CPU against every CPU at once: those packets, and whole requests (start and
 * response) per second per core, after which in flight must be back where it was.
 * Runs in a private network namespace with lo up (429 replies are cloned to the test skb's
 * device). Exit 0 unless something could not be loaded or run, or a path did not do what it is
 * named for: its return value, and the data path's own counts (class_stats, pkt_stats,
 * in-flight, http connections, busy turns; every CPU, read untimed around its timed runs, or
 * around the last call of each round where the setup moves them too), which must move by
 * exactly what one run of that path moves, times its runs (most paths pass whether or not
 * their flow is there: an RST path that sent no RST, an ACK of no flow, measure nothing). A
 * path on a flow must find its entry first (a request's segments: the request open), a SYN
 * retransmit its pending handshake. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/pkt_cls.h>
#include <linux/if_link.h>

#include "harness.h"
#include "pktbuild.h"
#include "stream_ctl.h"
#include "common/config.h"
#include "control/verdict.h"
#include "kernel/attach.h"
#include "kernel/hsmove.h"

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
	"    trust_from: [198.19.0.0/16, 2001:2::/32]\n"   /* the clients: their header is read */
	"    classify:\n"
	"      - { source: 198.18.1.0/24, class: L0 }\n"
	"      - { header: \"X-Priority\", class: from-header }\n"
	"  - name: webpath\n"      /* http, path rules before the header: the example configs' shape */
	"    port: 8082\n"
	"    protocol: http\n"
	"    limit: { fixed: 1000000 }\n"
	"    default_class: L2\n"
	"    trust_from: [198.19.0.0/16, 2001:2::/32]\n"
	"    classify:\n"
	"      - { path_prefix: /checkout, class: L0 }\n"
	"      - { path_prefix: /api/v2/reports/monthly, class: L3 }\n"
	"      - { path_prefix: /static/, class: L3 }\n"
	"      - { header: \"X-Priority\", class: from-header }\n"
	"  - name: webfull\n"      /* http, one slot: every further request gets the 429 */
	"    port: 8081\n"
	"    protocol: http\n"
	"    limit: { fixed: 1 }\n"
	"    default_class: L2\n"
	"    trust_from: [198.19.0.0/16, 2001:2::/32]\n"
	"    classify:\n"
	"      - { header: \"X-Priority\", class: from-header }\n";

static const char REQ[] = "GET /item HTTP/1.1\r\nHost: bench\r\nUser-Agent: loadgen\r\n"
			  "Accept: */*\r\nX-Priority: L3\r\n\r\n";
static const char RESP[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
/* A request body's segment: JSON, as an API client uploads it. */
static const char BODY[] = "{\"id\": 42, \"items\": [1, 2, 3], \"note\": \"more of the body\"}";

static uint8_t outbuf[2048];
static int rounds = 5, failed;
static int e_xdp, e_tc;
static int handshakes_fd = -1;

/* The pending-handshake slots of the map handshake_slots (fd), mapped; NULL on failure. */
static struct sluice_handshake_slot *map_slots(int fd)
{
	void *p = mmap(NULL, SLUICE_HANDSHAKE_SLOTS * sizeof(struct sluice_handshake_slot),
		       PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Empty the pending-handshake slots (untimed). The new-SYN loops leave their SYNs unanswered:
 * without this, each family would start where the previous one left the slots (by the last, a
 * flood's worth of young records, which new SYNs do not replace), and the families' figures
 * would differ by their order, not by their code. */
static void drain_handshakes(void)
{
	struct sluice_handshake_slot *s;

	if (handshakes_fd < 0 || !(s = map_slots(handshakes_fd)))
		return;
	memset(s, 0, SLUICE_HANDSHAKE_SLOTS * sizeof(*s));
	munmap(s, SLUICE_HANDSHAKE_SLOTS * sizeof(*s));
}

/* Held handshake slots (untimed): what a stream of admitted SYNs left. */
static int held_slots(void)
{
	struct sluice_handshake_slot *s;
	int n = 0;

	if (handshakes_fd < 0 || !(s = map_slots(handshakes_fd)))
		return -1;
	for (int i = 0; i < SLUICE_HANDSHAKE_SLOTS; i++)
		n += (s[i].word & SLUICE_SLOT_HELD) != 0;
	munmap(s, SLUICE_HANDSHAKE_SLOTS * sizeof(*s));
	return n;
}

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

static void report(const char *name, double ns, double empty)
{
	printf("path: %s ns: %.1f empty_ns: %.1f over_empty_ns: %.1f\n", name, ns, empty,
	       ns - empty);
	fflush(stdout);
}

/* BENCH_ONLY=TEXT: only the paths whose name contains TEXT are timed (a quicker look at one
 * path while working on it; their setup still runs). */
static int skipped(const char *name)
{
	const char *only = getenv("BENCH_ONLY");

	return only && *only && name && !strstr(name, only);
}

static void check_ret(const char *name, int got, int want)
{
	if (got != want) {
		fprintf(stderr, "bench_pktcost: path %s returned %d, not %d: it measured another path\n",
			name, got, want);
		failed = 1;
	}
}

/* ---- what a path did: the data path's own counts, read untimed ----
 * A return value alone does not say which path ran: most paths pass whether or not their flow
 * is there. What each path must move is in its counts: the class counters and the latency
 * samples (class_stats), what it holds (in-flight requests and tcp connections, http
 * connections, open tcp turns) and what the parser saw and sent (pkt_stats). Summed over every
 * CPU and service slot, before and after the timed runs: the empty program's runs touch none
 * of sluice's maps, so the change is the path's alone. */
enum tally_field {
	T_ARRIVALS, T_ADMITTED, T_REJECTED, T_RETRANSMITS, T_COMPLETED, T_ERRORS, T_RESP_429,
	T_FAIL_OPEN, T_UNTRACKED, T_SAMPLES,
	T_INFLIGHT, T_HTTP_CONNS, T_BUSY,
	T_SERVICE, T_RST_SENT, T_REPLY_SENT, T_REPLY_FAILED, T_MALFORMED,
	T_N
};
static const char *const tally_names[T_N] = {
	"class_stats.arrivals", "class_stats.admitted", "class_stats.rejected",
	"class_stats.retransmits", "class_stats.completed", "class_stats.errors",
	"class_stats.resp_429", "class_stats.fail_open", "class_stats.untracked",
	"class_stats.samples", "inflight_pcpu", "http_conns", "busy", "pkt_stats.service",
	"pkt_stats.rst_sent", "pkt_stats.reply_sent", "pkt_stats.reply_failed",
	"pkt_stats.malformed",
};

struct tally {
	long long v[T_N];
};

/* What a path moves in one run, field by field: MOVES([T_SERVICE] = 1, ...); NOTHING for a
 * path that must leave every count where it was. */
#define MOVES(...) ((const int[T_N]){ __VA_ARGS__ })
#define NOTHING MOVES(0)

/* The maps of the object being timed (set where it is loaded, NULL between objects). */
static const struct sluice_maps *tally_maps;

/* Every class of every service slot's counters, all CPUs, into t. */
static int tally_class_stats(const struct sluice_maps *m, struct tally *t)
{
	size_t per = sizeof(struct sluice_svc_stats) * (size_t)m->ncpus;
	struct sluice_svc_stats *v = malloc(per * (size_t)m->n_slots);
	int err = v ? maps_read_array(m->class_stats, 0, (__u32)m->n_slots, per, v, NULL) : -1;

	for (size_t e = 0; !err && e < (size_t)m->n_slots * (size_t)m->ncpus; e++)
		for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
			const struct sluice_class_stats *c = &v[e].cls[k];

			t->v[T_ARRIVALS] += (long long)c->arrivals;
			t->v[T_ADMITTED] += (long long)c->admitted;
			for (int r = 0; r < SLUICE_REJ_REASONS; r++)
				t->v[T_REJECTED] += (long long)c->rejected[r];
			t->v[T_RETRANSMITS] += (long long)c->retransmits;
			t->v[T_COMPLETED] += (long long)c->completed;
			t->v[T_ERRORS] += (long long)c->errors;
			t->v[T_RESP_429] += (long long)c->resp_429;
			t->v[T_FAIL_OPEN] += (long long)c->fail_open;
			t->v[T_UNTRACKED] += (long long)c->untracked;
			t->v[T_SAMPLES] += (long long)v[e].samples[k];
		}
	free(v);
	return err;
}

/* The per-class counts of a map of struct sluice_inflight (cpus: its copies, 1 unless
 * per-CPU), every slot, summed into *sum. */
static int tally_units(int fd, const struct sluice_maps *m, int cpus, long long *sum)
{
	size_t per = sizeof(struct sluice_inflight) * (size_t)cpus;
	struct sluice_inflight *v = malloc(per * (size_t)m->n_slots);
	int err = v ? maps_read_array(fd, 0, (__u32)m->n_slots, per, v, NULL) : -1;

	for (size_t e = 0; !err && e < (size_t)m->n_slots * (size_t)cpus; e++)
		for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
			*sum += v[e].cls[k];
	free(v);
	return err;
}

static int tally_read(struct tally *t)
{
	const struct sluice_maps *m = tally_maps;
	struct sluice_pkt_stats ps;

	memset(t, 0, sizeof(*t));
	if (!m || tally_class_stats(m, t) ||
	    tally_units(m->inflight_pcpu, m, m->ncpus, &t->v[T_INFLIGHT]) ||
	    tally_units(m->http_conns, m, 1, &t->v[T_HTTP_CONNS]) ||
	    tally_units(m->busy, m, 1, &t->v[T_BUSY]) || maps_read_pkt_stats(m, &ps))
		return -1;
	t->v[T_SERVICE] = (long long)ps.service;
	t->v[T_RST_SENT] = (long long)ps.rst_sent;
	t->v[T_REPLY_SENT] = (long long)ps.reply_sent;
	t->v[T_REPLY_FAILED] = (long long)ps.reply_failed;
	t->v[T_MALFORMED] = (long long)ps.malformed;
	return 0;
}

/* Before a path's timed runs: the counts as they are (a failed read fails the path). */
static int tally_before(const char *name, struct tally *t)
{
	if (tally_read(t) == 0)
		return 0;
	fprintf(stderr, "bench_pktcost: path %s: cannot read the data path's counts\n", name);
	failed = 1;
	return -1;
}

/* After `runs` timed runs of the path: every count moved by exactly runs x moves[field]. */
static void witness(const char *name, const struct tally *before, long long runs,
		    const int moves[T_N])
{
	struct tally after;

	if (tally_before(name, &after))
		return;
	for (int f = 0; f < T_N; f++) {
		long long d = after.v[f] - before->v[f];

		if (d != runs * moves[f]) {
			fprintf(stderr, "bench_pktcost: path %s moved %s by %lld in %lld runs, "
				"not %lld\n", name, tally_names[f], d, runs, runs * moves[f]);
			failed = 1;
		}
	}
}

/* The flow key of s's 4-tuple: its client is the packet's source coming in (ingress), its
 * destination going out; addresses v4-mapped, ports in network order. */
static int key_of(const struct pkt_spec *s, int ingress, struct sluice_flow_key *k)
{
	const char *client = ingress ? s->src : s->dst, *local = ingress ? s->dst : s->src;
	int af = s->v6 ? AF_INET6 : AF_INET, at = s->v6 ? 0 : 12;

	memset(k, 0, sizeof(*k));
	k->client_port = htons(ingress ? s->sport : s->dport);
	k->service_port = htons(ingress ? s->dport : s->sport);
	if (!s->v6) {
		k->client_addr[10] = k->client_addr[11] = 0xff;
		k->local_addr[10] = k->local_addr[11] = 0xff;
	}
	return inet_pton(af, client, k->client_addr + at) == 1 &&
	       inet_pton(af, local, k->local_addr + at) == 1 ? 0 : -1;
}

/* Before timing a path that runs on a flow (the packet s, seen coming in or going out): its
 * entry is there, and with `request` its word holds an http request. Without them the path
 * passes all the same, having measured a lookup that finds nothing. */
static void need_flow(const char *name, const struct pkt_spec *s, int ingress, int request)
{
	struct sluice_flow_key k;
	struct sluice_flow f;

	if (skipped(name))
		return;
	if (!tally_maps || key_of(s, ingress, &k) ||
	    bpf_map_lookup_elem(tally_maps->flows, &k, &f)) {
		fprintf(stderr, "bench_pktcost: path %s has no flow to run on\n", name);
		failed = 1;
		return;
	}
	if (request && ((f.req_active & SLUICE_OWN_STATE) != SLUICE_OWN_ACTIVE ||
			(f.req_active & SLUICE_OWN_TURN))) {
		fprintf(stderr, "bench_pktcost: path %s: its flow holds no request (word %#x)\n",
			name, f.req_active);
		failed = 1;
	}
}

static int hash_keys_fd = -1;

/* Before timing a SYN retransmit: the handshake record of its SYN (the same ISN) is in the slot
 * its 4-tuple hashes to, where the data path reads it. A pending handshake has no flow yet:
 * without the record the SYN would be judged as a new one. */
static void need_handshake(const char *name, const struct pkt_spec *syn)
{
	struct sluice_handshake_slot *slots, *s;
	struct sluice_hash_keys keys;
	struct sluice_flow_key k;
	__u32 zero = 0;
	__u64 h;
	int held;

	if (skipped(name))
		return;
	if (handshakes_fd < 0 || key_of(syn, 1, &k) ||
	    bpf_map_lookup_elem(hash_keys_fd, &zero, &keys) || !(slots = map_slots(handshakes_fd))) {
		fprintf(stderr, "bench_pktcost: path %s: cannot read the handshake slots\n", name);
		failed = 1;
		return;
	}
	h = sluice_flow_key_hash(&k, &keys);
	s = &slots[sluice_slot_index(h)];
	held = (s->word & (SLUICE_SLOT_TAG_MASK | SLUICE_SLOT_HELD)) ==
	       (sluice_slot_tag(h) | SLUICE_SLOT_HELD) &&
	       !memcmp(&s->key, &k, sizeof(k)) && s->client_isn == syn->seq;
	munmap(slots, SLUICE_HANDSHAKE_SLOTS * sizeof(*slots));
	if (!held) {
		fprintf(stderr, "bench_pktcost: path %s has no pending handshake to resend the SYN "
			"of\n", name);
		failed = 1;
	}
}

/* The object gone: nothing reads its maps any more. */
static void unload(struct sluice_bpf *skel)
{
	sluice_bpf__destroy(skel);
	tally_maps = NULL;
	handshakes_fd = hash_keys_fd = -1;
}

/* A path that leaves packet and state as they were: best of `rounds` in-kernel repeats, the
 * empty program of the same hook interleaved. Every run must move the counts by `moves`.
 * Returns the over-empty ns. */
static double rep_path(const char *name, int fd, int tc, const uint8_t *pkt, size_t len,
		       int repeat, int want, const int moves[T_N])
{
	double best = -1, ebest = -1, d;
	long long runs = 0;
	struct tally before;
	int rv = -1;

	if (skipped(name) || tally_before(name, &before))
		return 0;
	for (int i = 0; i < rounds; i++) {
		if ((d = run1(tc ? e_tc : e_xdp, pkt, len, repeat, NULL)) >= 0 && (ebest < 0 || d < ebest))
			ebest = d;
		if ((d = run1(fd, pkt, len, repeat, &rv)) >= 0 && (best < 0 || d < best))
			best = d;
		if (d >= 0)
			runs += repeat;
	}
	witness(name, &before, runs, moves);
	check_ret(name, rv, want);
	report(name, best, ebest);
	return best - ebest;
}

/* The stream program of the baseline object (empty_xdp.bpf.c stream_xdp): its control and
 * the program it tail-calls. -1 when the object has none. */
static int e_stream = -1, e_stream_ctl = -1, e_stream_target = -1, e_xdp_frags = -1;

/* One call of n runs of target behind a stream program (stream_xdp or stream_tc, whose
 * target_map is its prog array): ports base, base + stride, ... (the port at off); with
 * restore, the frame written back before every run. */
static double stream_run(int stream, int target_map, int target, const uint8_t *pkt,
			 size_t len, uint32_t off, uint16_t base, uint16_t stride, uint16_t evict,
			 int n, int restore, int *rv)
{
	struct stream_ctl c = { .sport_off = off, .base = base, .next = 0, .stride = stride,
				.evict_lines = evict };
	uint32_t zero = 0;

	if (restore) {
		if (len > sizeof(c.frame))
			return -1;
		c.frame_len = (uint32_t)len;
		memcpy(c.frame, pkt, len);
	}
	if (bpf_map_update_elem(target_map, &zero, &target, BPF_ANY) ||
	    bpf_map_update_elem(e_stream_ctl, &zero, &c, BPF_ANY))
		return -1;
	return run1(stream, pkt, len, n, rv);
}

/* One packet stream at XDP: n runs in one call, the port at off rewritten to base, base +
 * stride, ... (best of `rounds` calls against the same stream into the empty program); each
 * run must move the counts by `moves`. new_syns: the packet is an admitted SYN, timed from
 * empty handshake slots, and each call must leave nearly n records (a few share a slot): else
 * it timed refusals or retransmits, not admissions. */
static double stream_path(const char *name, int xdp, const uint8_t *pkt, size_t len,
			  uint32_t off, uint16_t base, uint16_t stride, uint16_t evict, int n,
			  int want, int new_syns, const int moves[T_N])
{
	double best = -1, ebest = -1, d;
	struct tally before;
	int rv = -1, held;

	if (skipped(name))
		return 0;
	if (e_stream < 0) {
		fprintf(stderr, "bench_pktcost: path %s not timed: the baseline object has no "
			"stream_xdp\n", name);
		return 0;
	}
	for (int r = 0; r < rounds; r++) {
		if ((d = stream_run(e_stream, e_stream_target, e_xdp_frags, pkt, len, off, base,
				    stride, evict, n, 0, NULL)) >= 0 && (ebest < 0 || d < ebest))
			ebest = d;
		if (new_syns)
			drain_handshakes();
		if (tally_before(name, &before))
			break;
		if ((d = stream_run(e_stream, e_stream_target, xdp, pkt, len, off, base, stride,
				    evict, n, 0, &rv)) >= 0 && (best < 0 || d < best))
			best = d;
		witness(name, &before, d >= 0 ? n : 0, moves);
		if (new_syns && (held = held_slots()) < n * 9 / 10) {
			fprintf(stderr, "bench_pktcost: path %s left %d handshake records of %d SYNs\n",
				name, held, n);
			failed = 1;
		}
	}
	if (new_syns)
		drain_handshakes();
	check_ret(name, rv, want);
	report(name, best, ebest);
	return best - ebest;
}

/* Packets to ports no service has, each to another port, SWEEP_PORTS of them in a scattered
 * order over the whole port space: the port tables are read at as many places, where
 * xdp.non-service reads one entry again and again. What a host's replies to its own outbound
 * connections (ephemeral ports) cost at XDP. With SWEEP_EVICT_LINES, each packet comes after
 * other traffic's share of the caches (4 KiB of a 32 MiB table, on both sides): what the same
 * packets cost where the CPU's caches do not keep the port tables for sluice. */
#define SWEEP_PORTS 28000
#define SWEEP_STRIDE 40503 /* odd: 65536 runs would visit every port once */
#define SWEEP_EVICT_LINES 64

/* The TC stream (empty_xdp.bpf.c stream_tc): its program and the program it tail-calls. */
static int e_stream_tc = -1, e_stream_target_tc = -1;

static double stream_tc_call(int target, const uint8_t *pkt, size_t len, uint32_t off,
			     uint16_t base, int n, int restore, int *rv)
{
	return stream_run(e_stream_tc, e_stream_target_tc, target, pkt, len, off, base, 1, 0, n,
			  restore, rv);
}

/* Untimed set-up of a TC stream: n connections from one client, ports base .. base + n - 1,
 * each ready for the packet written to pkt (its source port the stream's to rewrite, at *off). */
typedef size_t (*stream_prep_fn)(void *ctx, const char *src, uint16_t base, int n, uint8_t *pkt,
				 uint32_t *off);

/* A request start in every run of one call: n requests back to back, each on its own
 * established connection (best of `rounds` calls, each on connections of its own, against the
 * same stream into the empty program). Each run must move the counts by `moves`: a request
 * admitted (with refused: refused, the packet written back before every run since the refusal
 * turns it into an RST), else it timed something other than what it is named for. */
static double stream_tc_path(const char *name, int tci, int n, stream_prep_fn prep, void *ctx,
			     int v6, int refused, const int moves[T_N])
{
	double best = -1, ebest = -1, d;
	int rv = -1;
	uint8_t pkt[512];

	if (skipped(name))
		return 0;
	if (e_stream_tc < 0) {
		fprintf(stderr, "bench_pktcost: path %s not timed: the baseline object has no "
			"stream_tc\n", name);
		return 0;
	}
	for (int r = 0; r < rounds; r++) {
		char src[48];
		uint32_t off = 0;
		struct tally before;
		size_t len;

		/* a client address no loop path uses: its 4-tuples are the stream's alone */
		if (v6)
			snprintf(src, sizeof src, "2001:2::ff00:%x", (unsigned)r + 1);
		else
			snprintf(src, sizeof src, "198.19.250.%u", (unsigned)r + 1);
		len = prep(ctx, src, 20000, n, pkt, &off);
		if ((d = stream_tc_call(e_tc, pkt, len, off, 20000, n, refused, NULL)) >= 0 &&
		    (ebest < 0 || d < ebest))
			ebest = d;
		if (tally_before(name, &before))
			break;
		if ((d = stream_tc_call(tci, pkt, len, off, 20000, n, refused, &rv)) >= 0 &&
		    (best < 0 || d < best))
			best = d;
		witness(name, &before, d >= 0 ? n : 0, moves);
	}
	check_ret(name, rv, TC_ACT_UNSPEC);
	report(name, best, ebest);
	return best - ebest;
}

/* A path that needs a fresh packet or state every call: prep() does the untimed setup of
 * call i and builds the packet to time. Best round mean of `rounds` rounds of loops/rounds
 * calls each. The last call of each round must move the counts by `moves` (only that one is
 * read around: prep's setup moves them too, and a read per call would cost more than the
 * calls). */
typedef size_t (*prep_fn)(void *ctx, int i, uint8_t *pkt);

static double loop_path(const char *name, int fd, int tc, int loops, prep_fn prep, void *ctx,
			int want, const int moves[T_N])
{
	double best = -1, ebest = -1, d;
	int per = loops / rounds > 0 ? loops / rounds : 1, i = 0, rv = -1;
	uint8_t pkt[512];

	if (skipped(name))
		return 0;
	for (int r = 0; r < rounds; r++) {
		double s = 0, es = 0;
		int n = 0, en = 0;

		/* Each round from empty slots: the SYNs of earlier rounds and paths (never
		 * completed, all under a second old) would otherwise hold a growing share of
		 * them, and a SYN on a held slot goes unrecorded, which is cheaper. */
		drain_handshakes();
		for (int k = 0; k < per; k++, i++) {
			size_t len = prep(ctx, i, pkt);
			struct tally before;
			int last = k == per - 1;

			if ((d = run1(tc ? e_tc : e_xdp, pkt, len, 1, NULL)) >= 0)
				es += d, en++;
			if (last && tally_before(name, &before))
				last = 0;
			if ((d = run1(fd, pkt, len, 1, &rv)) >= 0)
				s += d, n++;
			if (last)
				witness(name, &before, d >= 0, moves);
			if (rv != want)
				break;
		}
		if (n && (best < 0 || s / n < best))
			best = s / n;
		if (en && (ebest < 0 || es / en < ebest))
			ebest = es / en;
		if (rv != want)
			break;
	}
	check_ret(name, rv, want);
	report(name, best, ebest);
	return best - ebest;
}

/* ---- addresses: every client is new (a counter), in the benchmarking ranges ---- */

struct fam {
	const char *suffix;              /* "", ".v6", ".vlan" */
	int v6, vlan;
	char server[48];
};

static unsigned next_client;

/* A fresh client of family f: its address into buf, its port returned. */
static uint16_t new_client(const struct fam *f, char *buf, size_t cap)
{
	unsigned u = next_client++, k = u / 50000;

	if (f->v6)
		snprintf(buf, cap, "2001:2::%x:%x", 0x100 + (k >> 16), k & 0xffff);
	else
		snprintf(buf, cap, "198.19.%u.%u", (k >> 8) & 0xff, k & 0xff);
	return (uint16_t)(10000 + u % 50000);
}

struct ctx {
	const struct fam *f;
	int xdp, tci, tce;
	uint16_t dport;
	const char *req;                 /* the request's bytes; NULL: REQ */
	char src[48];
};

static struct pkt_spec syn_of(const struct ctx *c, const char *src, uint16_t sport, uint16_t dport)
{
	struct pkt_spec s = { .v6 = c->f->v6, .vlan = c->f->vlan, .src = src, .dst = c->f->server,
			      .sport = sport, .dport = dport, .seq = 1000u + sport, .syn = 1,
			      .tcp_opts = 20 };
	return s;
}

static struct pkt_spec req_of(const struct ctx *c, const char *src, uint16_t sport, uint16_t dport)
{
	struct pkt_spec s = { .v6 = c->f->v6, .vlan = c->f->vlan, .src = src, .dst = c->f->server,
			      .sport = sport, .dport = dport, .seq = 5000u + sport, .ack = 77,
			      .ackf = 1, .psh = 1, .payload = c->req ? c->req : REQ };

	s.payload_len = strlen(s.payload);
	return s;
}

/* The handshake before a client's first segment `first`: SYN (XDP), the server's SYN-ACK (TC
 * egress), the client's ACK (XDP). Untimed. */
static void handshake(const struct ctx *c, const struct pkt_spec *first)
{
	struct pkt_spec syn, sa, ack;
	uint8_t b[512];

	handshake_of(first, &syn, &sa, &ack);
	run1(c->xdp, b, build_pkt(b, &syn), 1, NULL);
	run1(c->tce, b, build_pkt(b, &sa), 1, NULL);
	run1(c->xdp, b, build_pkt(b, &ack), 1, NULL);
}

/* The client's first segment after the handshake of syn (no payload). */
static struct pkt_spec after_syn(const struct pkt_spec *syn)
{
	struct pkt_spec a = *syn;

	a.syn = 0, a.ackf = 1, a.tcp_opts = 0, a.seq = syn->seq + 1, a.ack = 1;
	return a;
}

/* A new client's SYN to c->dport. */
static size_t prep_new_syn(void *vc, int i, uint8_t *pkt)
{
	struct ctx *c = vc;
	uint16_t sport = new_client(c->f, c->src, sizeof(c->src));
	struct pkt_spec s = syn_of(c, c->src, sport, c->dport);

	return build_pkt(pkt, &s);
}

/* A bare client ACK on a new 4-tuple at every call (an admitted flow's, its SYN-ACK long past:
 * XDP keeps no state of it), so the tables it may touch are not in cache from the call before. */
static size_t prep_cold_ack(void *vc, int i, uint8_t *pkt)
{
	struct ctx *c = vc;
	uint16_t sport = new_client(c->f, c->src, sizeof(c->src));
	struct pkt_spec s = syn_of(c, c->src, sport, c->dport);

	s.syn = 0, s.ackf = 1, s.tcp_opts = 0, s.ack = 77;
	return build_pkt(pkt, &s);
}

/* SYN and SYN-ACK untimed; the client's ACK that completes the handshake is timed. */
static size_t prep_handshake_ack(void *vc, int i, uint8_t *pkt)
{
	struct ctx *c = vc;
	uint16_t sport = new_client(c->f, c->src, sizeof(c->src));
	struct pkt_spec s = syn_of(c, c->src, sport, c->dport), syn, sa, ack;

	s = after_syn(&s);
	handshake_of(&s, &syn, &sa, &ack);
	run1(c->xdp, pkt, build_pkt(pkt, &syn), 1, NULL);
	run1(c->tce, pkt, build_pkt(pkt, &sa), 1, NULL);
	return build_pkt(pkt, &ack);
}

/* A whole handshake untimed, then the first request segment (timed). */
static size_t prep_request(void *vc, int i, uint8_t *pkt)
{
	struct ctx *c = vc;
	uint16_t sport = new_client(c->f, c->src, sizeof(c->src));
	struct pkt_spec s = req_of(c, c->src, sport, c->dport);

	handshake(c, &s);
	return build_pkt(pkt, &s);
}

/* The priority header's value behind 10 blanks: more than the word-wise scan reads in one
 * word, so the byte machine decides it (any client can have each of its requests take it). */
static const char REQ_BLANKS[] = "GET /item HTTP/1.1\r\nHost: bench\r\nUser-Agent: loadgen\r\n"
				 "Accept: */*\r\nX-Priority:          L3\r\n\r\n";

/* The server's answer to the client request s (RESP, at the client's ack), acknowledging
 * acked bytes of it. */
static struct pkt_spec answer_to(const struct ctx *c, const struct pkt_spec *s, uint32_t acked)
{
	struct pkt_spec rs = { .v6 = c->f->v6, .vlan = c->f->vlan, .src = c->f->server,
			       .dst = s->src, .sport = s->dport, .dport = s->sport, .seq = s->ack,
			       .ack = s->seq + acked, .ackf = 1, .psh = 1,
			       .payload = RESP, .payload_len = sizeof(RESP) - 1 };
	return rs;
}

/* A whole handshake and the server's data on the connection (the rest of an earlier answer,
 * say), untimed; then the client's request (timed): a request on a connection the server spoke
 * on, which, when refused, first asks the socket table whether an answer is still on its way. */
static size_t prep_after_server_data(void *vc, int i, uint8_t *pkt)
{
	struct ctx *c = vc;
	uint16_t sport = new_client(c->f, c->src, sizeof(c->src));
	struct pkt_spec s = req_of(c, c->src, sport, c->dport);
	struct pkt_spec rs = answer_to(c, &s, 0);
	uint8_t b[512];

	handshake(c, &s);
	run1(c->tce, b, build_pkt(b, &rs), 1, NULL);
	s.ack += (uint32_t)rs.payload_len;
	return build_pkt(pkt, &s);
}

/* A whole handshake and a first request, answered, untimed; then the connection's next request
 * (timed): a keep-alive client's request start. */
static size_t prep_keepalive(void *vc, int i, uint8_t *pkt)
{
	struct ctx *c = vc;
	uint16_t sport = new_client(c->f, c->src, sizeof(c->src));
	struct pkt_spec s = req_of(c, c->src, sport, c->dport);
	struct pkt_spec rs = answer_to(c, &s, (uint32_t)s.payload_len);
	uint8_t b[512];

	handshake(c, &s);
	run1(c->tci, b, build_pkt(b, &s), 1, NULL);
	run1(c->tce, b, build_pkt(b, &rs), 1, NULL);
	s.seq += (uint32_t)s.payload_len;
	s.ack += (uint32_t)rs.payload_len;
	return build_pkt(pkt, &s);
}

/* The streams' connections: every one at the same sequence numbers, so that one request
 * packet, its source port rewritten, is the next request on each. */
static size_t prep_stream_start(void *vc, const char *src, uint16_t base, int n, uint8_t *pkt,
				uint32_t *off)
{
	struct ctx *c = vc;
	struct pkt_spec s = req_of(c, src, base, c->dport);

	s.seq = 5000;
	for (int i = 0; i < n; i++) {
		s.sport = (uint16_t)(base + i);
		handshake(c, &s);
	}
	s.sport = base;
	*off = (uint32_t)(ETH_HLEN + (c->f->vlan ? 4 : 0) + (c->f->v6 ? 40 : 20));
	return build_pkt(pkt, &s);
}

/* Keep-alive: each connection's first request answered first (untimed). */
static size_t prep_stream_keepalive(void *vc, const char *src, uint16_t base, int n,
				    uint8_t *pkt, uint32_t *off)
{
	struct ctx *c = vc;
	struct pkt_spec s = req_of(c, src, base, c->dport);
	struct pkt_spec rs = { .v6 = c->f->v6, .vlan = c->f->vlan, .src = c->f->server,
			       .dst = src, .sport = c->dport, .ackf = 1, .psh = 1,
			       .payload = RESP, .payload_len = sizeof(RESP) - 1 };
	uint8_t b[512];

	s.seq = 5000;
	rs.seq = s.ack, rs.ack = s.seq + (uint32_t)s.payload_len;
	for (int i = 0; i < n; i++) {
		s.sport = rs.dport = (uint16_t)(base + i);
		handshake(c, &s);
		run1(c->tci, b, build_pkt(b, &s), 1, NULL);
		run1(c->tce, b, build_pkt(b, &rs), 1, NULL);
	}
	s.sport = base;
	s.seq += (uint32_t)s.payload_len;
	s.ack += (uint32_t)rs.payload_len;
	*off = (uint32_t)(ETH_HLEN + (c->f->vlan ? 4 : 0) + (c->f->v6 ? 40 : 20));
	return build_pkt(pkt, &s);
}

/* What a request refused with the in-kernel 429 moves. */
#define REFUSED_429 MOVES([T_ARRIVALS] = 1, [T_REJECTED] = 1, [T_REPLY_SENT] = 1, \
			  [T_HTTP_CONNS] = -1)

/* Every path of the table for one address family / framing. */
static void family_paths(const struct fam *f, int xdp, int tci, int tce, int repeat, int loops)
{
	struct ctx c = { .f = f, .xdp = xdp, .tci = tci, .tce = tce };
	char name[96], src[48];
	uint8_t pkt[512];
	struct pkt_spec s, a;
	uint16_t sport;
	size_t len;
#define NAME(n) (snprintf(name, sizeof name, "%s%s", n, f->suffix), name)

	drain_handshakes();

	/* Not a service: the parse and one port lookup. */
	sport = new_client(f, src, sizeof src);
	s = syn_of(&c, src, sport, 80);
	len = build_pkt(pkt, &s);
	rep_path(NAME("xdp.non-service"), xdp, 0, pkt, len, repeat, XDP_PASS, NOTHING);
	/* ... and to ports all over the port space (a service's port may be among the 28000: a
	 * bare ACK of no flow passes there too) */
	s.syn = 0, s.ackf = 1;
	len = build_pkt(pkt, &s);
	stream_path(NAME("xdp.non-service-port-sweep"), xdp, pkt, len,
		    (uint32_t)(ETH_HLEN + (f->vlan ? 4 : 0) + (f->v6 ? 40 : 20) + 2), 1024,
		    SWEEP_STRIDE, 0, SWEEP_PORTS, XDP_PASS, 0, NOTHING);
	stream_path(NAME("xdp.non-service-port-sweep-cache-pressure"), xdp, pkt, len,
		    (uint32_t)(ETH_HLEN + (f->vlan ? 4 : 0) + (f->v6 ? 40 : 20) + 2), 1024,
		    SWEEP_STRIDE, SWEEP_EVICT_LINES, SWEEP_PORTS, XDP_PASS, 0, NOTHING);

	/* Established flow of a tcp service: a completed handshake, then its ACKs (a bare ACK is
	 * not counted: it ends at its handshake slot's word). */
	sport = new_client(f, src, sizeof src);
	s = syn_of(&c, src, sport, 7000);
	a = after_syn(&s);
	handshake(&c, &a);
	len = build_pkt(pkt, &a);
	need_flow(NAME("xdp.established-ack"), &a, 1, 0);
	rep_path(name, xdp, 0, pkt, len, repeat, XDP_PASS, NOTHING);

	/* The server's bare ACK and its response data on an established http flow with no
	 * request outstanding (the response's first segment of a request is in the request
	 * start's cost: it happens once per request). */
	{
		char hs[48];
		uint16_t hp = new_client(f, hs, sizeof hs);
		struct pkt_spec r = req_of(&c, hs, hp, 8080), ack;

		handshake(&c, &r);
		ack = (struct pkt_spec){ .v6 = f->v6, .vlan = f->vlan, .src = f->server, .dst = hs,
					 .sport = 8080, .dport = hp, .seq = 77, .ack = r.seq,
					 .ackf = 1 };
		len = build_pkt(pkt, &ack);
		need_flow(NAME("tc-egress.bare-ack"), &ack, 0, 0);
		rep_path(name, tce, 1, pkt, len, repeat, TC_ACT_UNSPEC, NOTHING);
		/* data out is counted, whether it ends at the socket's memo or goes on to the
		 * flow */
		ack.payload = RESP, ack.payload_len = sizeof(RESP) - 1, ack.psh = 1;
		len = build_pkt(pkt, &ack);
		need_flow(NAME("tc-egress.response-data"), &ack, 0, 0);
		rep_path(name, tce, 1, pkt, len, repeat, TC_ACT_UNSPEC, MOVES([T_SERVICE] = 1));
	}

	/* Request continuation: the first run starts the request, the rest see it active (data
	 * in: counted only when it starts a request). */
	sport = new_client(f, src, sizeof src);
	s = req_of(&c, src, sport, 8080);
	handshake(&c, &s);
	len = build_pkt(pkt, &s);
	run1(tci, pkt, len, 1, NULL);
	need_flow(NAME("tc-ingress.request-active-segment"), &s, 1, 1);
	rep_path(name, tci, 1, pkt, len, repeat, TC_ACT_UNSPEC, NOTHING);
	/* More of that request: its body, the segment after the start (the first run moves the
	 * client on, the rest resend it). */
	{
		struct pkt_spec b = s;

		b.seq = s.seq + s.payload_len, b.payload = BODY, b.payload_len = sizeof(BODY) - 1;
		len = build_pkt(pkt, &b);
		run1(tci, pkt, len, 1, NULL);
		need_flow(NAME("tc-ingress.request-body-segment"), &b, 1, 1);
		rep_path(name, tci, 1, pkt, len, repeat, TC_ACT_UNSPEC, NOTHING);
	}

	/* SYN retransmit: the same 4-tuple again and again (the first run admits; each further
	 * one is a SYN in, and counted as a retransmit of its class). */
	sport = new_client(f, src, sizeof src);
	s = syn_of(&c, src, sport, 7000);
	len = build_pkt(pkt, &s);
	run1(xdp, pkt, len, 1, NULL);
	need_handshake(NAME("xdp.syn-retransmit"), &s);
	rep_path(name, xdp, 0, pkt, len, repeat, XDP_PASS,
		 MOVES([T_SERVICE] = 1, [T_RETRANSMITS] = 1));

	/* An admitted SYN of a tcp service: an arrival, admitted (its slot waits for the
	 * handshake). */
	c.dport = 7000;
	loop_path(NAME("xdp.new-syn-admitted"), xdp, 0, loops, prep_new_syn, &c, XDP_PASS,
		  MOVES([T_SERVICE] = 1, [T_ARRIVALS] = 1, [T_ADMITTED] = 1));
	/* The same, a burst's worth back to back (the source port at the TCP header's start). */
	sport = new_client(f, src, sizeof src);
	s = syn_of(&c, src, sport, 7000);
	len = build_pkt(pkt, &s);
	stream_path(NAME("xdp.new-syn-stream"), xdp, pkt, len,
		    (uint32_t)(ETH_HLEN + (f->vlan ? 4 : 0) + (f->v6 ? 40 : 20)), 61000, 1, 0,
		    loops / rounds, XDP_PASS, 1,
		    MOVES([T_SERVICE] = 1, [T_ARRIVALS] = 1, [T_ADMITTED] = 1));
	/* The handshake completes: the tcp connection's flow and its in-flight slot (a bare ACK:
	 * no packet counter). */
	loop_path(NAME("xdp.handshake-ack"), xdp, 0, loops, prep_handshake_ack, &c, XDP_PASS,
		  MOVES([T_INFLIGHT] = 1));
	c.dport = 8080;
	/* An http connection's: no slot, but the flow caches its client's source answer, and the
	 * connection counts in its class's http connections. */
	loop_path(NAME("xdp.handshake-ack-http"), xdp, 0, loops, prep_handshake_ack, &c, XDP_PASS,
		  MOVES([T_HTTP_CONNS] = 1));
	/* A request start: an arrival, admitted, in flight (data in: no packet counter). */
	loop_path(NAME("tc-ingress.request-start"), tci, 1, loops, prep_request, &c, TC_ACT_UNSPEC,
		  MOVES([T_ARRIVALS] = 1, [T_ADMITTED] = 1, [T_INFLIGHT] = 1));
	loop_path(NAME("tc-ingress.request-start-keepalive"), tci, 1, loops, prep_keepalive, &c,
		  TC_ACT_UNSPEC, MOVES([T_ARRIVALS] = 1, [T_ADMITTED] = 1, [T_INFLIGHT] = 1));
	/* The same two, a busy queue's worth back to back. */
	stream_tc_path(NAME("tc-ingress.request-start-stream"), tci, loops / rounds,
		       prep_stream_start, &c, f->v6, 0,
		       MOVES([T_ARRIVALS] = 1, [T_ADMITTED] = 1, [T_INFLIGHT] = 1));
	stream_tc_path(NAME("tc-ingress.request-start-keepalive-stream"), tci, loops / rounds,
		       prep_stream_keepalive, &c, f->v6, 0,
		       MOVES([T_ARRIVALS] = 1, [T_ADMITTED] = 1, [T_INFLIGHT] = 1));
	/* A request start on a service whose path rules come first (every rule's prefix against
	 * the path /item, none matching, then the header). */
	c.dport = 8082;
	loop_path(NAME("tc-ingress.request-start-path-rules"), tci, 1, loops, prep_request, &c,
		  TC_ACT_UNSPEC, MOVES([T_ARRIVALS] = 1, [T_ADMITTED] = 1, [T_INFLIGHT] = 1));
	c.dport = 8080;
	c.req = REQ_BLANKS;
	loop_path(NAME("tc-ingress.request-start-blank-value"), tci, 1, loops, prep_request, &c,
		  TC_ACT_UNSPEC, MOVES([T_ARRIVALS] = 1, [T_ADMITTED] = 1, [T_INFLIGHT] = 1));
	c.req = NULL;

	/* SYN refused with an RST (XDP_TX): service `tiny` holds its one slot (a connection
	 * whose query is unanswered: busy; an idle one would hold nothing). */
	sport = new_client(f, src, sizeof src);
	s = syn_of(&c, src, sport, 7001);
	a = after_syn(&s);
	drain_handshakes(); /* its SYN's slot free, so its handshake completes tracked */
	handshake(&c, &a);
	a.payload = "q\n", a.payload_len = 2, a.psh = 1;
	run1(tci, pkt, build_pkt(pkt, &a), 1, NULL);
	/* Each SYN: an arrival, refused (headroom), the RST sent. */
	c.dport = 7001;
	loop_path(NAME("xdp.syn-refused-rst"), xdp, 0, loops, prep_new_syn, &c, XDP_TX,
		  MOVES([T_SERVICE] = 1, [T_ARRIVALS] = 1, [T_REJECTED] = 1, [T_RST_SENT] = 1));

	/* Request refused: in-kernel 429 (clone to the client) + RST to the server; service
	 * `webfull`'s one slot is held by a request without a response. */
	sport = new_client(f, src, sizeof src);
	s = req_of(&c, src, sport, 8081);
	handshake(&c, &s);
	run1(tci, pkt, build_pkt(pkt, &s), 1, NULL);
	/* Each request: an arrival, refused (headroom), the 429 sent; the RST to the server is the
	 * request's own skb rewritten, not counted as sent (rst_sent counts refused SYNs'). The
	 * flow ends with it, and so does its http connection's count. */
	c.dport = 8081;
	loop_path(NAME("tc-ingress.request-refused-429-rst"), tci, 1, loops, prep_request, &c,
		  TC_ACT_UNSPEC, REFUSED_429);
	stream_tc_path(NAME("tc-ingress.request-refused-429-rst-stream"), tci, loops / rounds,
		       prep_stream_start, &c, f->v6, 1, REFUSED_429);
	/* The same on a connection the server spoke on: the socket lookup before the 429 (here
	 * it meets no socket at all; on a real host it meets the connection's). */
	loop_path(NAME("tc-ingress.request-refused-429-rst-after-server-data"), tci, 1, loops,
		  prep_after_server_data, &c, TC_ACT_UNSPEC, REFUSED_429);
#undef NAME
}

/* Paths beyond the table, IPv4 only: forged data, tcp turns. */
static void other_paths(const struct fam *f, int xdp, int tci, int tce, int repeat, int loops)
{
	struct ctx c = { .f = f, .xdp = xdp, .tci = tci, .tce = tce };
	static const char Q[] = "SELECT 1;\n", R[] = "1 row\n";
	char src[48];
	uint8_t pkt[512];
	uint16_t sport;
	size_t len;

	/* Data with no handshake (a forged request segment): no flow, nothing decided. The
	 * socket table is asked whether the server holds such a connection (one open before the
	 * attach would be taken on); with a server listening on the port, as in real use, the
	 * lookup meets its listener. */
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_port = htons(8080) };
	int lsn = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (lsn < 0 || setsockopt(lsn, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lsn, (struct sockaddr *)&la, sizeof(la)) || listen(lsn, 8)) {
		perror("bench_pktcost: a listener on port 8080");
		exit(1);
	}
	sport = new_client(f, src, sizeof src);
	struct pkt_spec s = req_of(&c, src, sport, 8080);
	len = build_pkt(pkt, &s);
	rep_path("tc-ingress.forged-data", tci, 1, pkt, len, repeat, TC_ACT_UNSPEC, NOTHING);
	close(lsn);

	/* tcp turns on one connection of `big`: a client query segment starts a turn (TC
	 * ingress), the server's reply segment ends it (TC egress); each pair carries on from
	 * the previous one's sequence numbers. Best round of the pairs. */
	sport = new_client(f, src, sizeof src);
	struct pkt_spec q = { .src = src, .dst = f->server, .sport = sport, .dport = 7000,
			      .seq = 9000, .ack = 70001, .ackf = 1, .psh = 1, .payload = Q,
			      .payload_len = sizeof(Q) - 1 };
	struct pkt_spec rp = { .src = f->server, .dst = src, .sport = 7000, .dport = sport,
			       .seq = 70001, .ackf = 1, .psh = 1, .payload = R,
			       .payload_len = sizeof(R) - 1 };
	double qb = -1, qeb = -1, rb = -1, reb = -1, d;
	int per = loops / rounds > 0 ? loops / rounds : 1;

	handshake(&c, &q);
	/* The last pair of each round is read around, as loop_path does: the query opens a turn
	 * (data in: no packet counter), the reply (data out) ends it with a latency sample -- but
	 * for the connection's first turn, which is held back as its setup. */
	for (int r = 0; r < rounds && !skipped("tc-ingress.tcp-turn-start"); r++) {
		double qe = 0, qd = 0, re = 0, rd = 0;
		int n = 0;

		for (int i = 0; i < per; i++, n++) {
			struct tally before;
			int last = i == per - 1;

			rp.ack = q.seq + (uint32_t)q.payload_len;
			len = build_pkt(pkt, &q);
			qe += (d = run1(e_tc, pkt, len, 1, NULL)) > 0 ? d : 0;
			if (last && tally_before("tc-ingress.tcp-turn-start", &before))
				last = 0;
			qd += (d = run1(tci, pkt, len, 1, NULL)) > 0 ? d : 0;
			if (last)
				witness("tc-ingress.tcp-turn-start", &before, d >= 0,
					MOVES([T_BUSY] = 1));
			len = build_pkt(pkt, &rp);
			re += (d = run1(e_tc, pkt, len, 1, NULL)) > 0 ? d : 0;
			if (last && tally_before("tc-egress.tcp-turn-end", &before))
				last = 0;
			rd += (d = run1(tce, pkt, len, 1, NULL)) > 0 ? d : 0;
			if (last)
				witness("tc-egress.tcp-turn-end", &before, d >= 0,
					MOVES([T_SERVICE] = 1, [T_BUSY] = -1, [T_SAMPLES] = r || i));
			q.seq += (uint32_t)q.payload_len;
			q.ack = rp.seq + (uint32_t)rp.payload_len;
			rp.seq += (uint32_t)rp.payload_len;
		}
		if (qb < 0 || qd / n < qb) qb = qd / n;
		if (qeb < 0 || qe / n < qeb) qeb = qe / n;
		if (rb < 0 || rd / n < rb) rb = rd / n;
		if (reb < 0 || re / n < reb) reb = re / n;
	}
	if (qb >= 0) {
		report("tc-ingress.tcp-turn-start", qb, qeb);
		report("tc-egress.tcp-turn-end", rb, reb);
	}
	/* The last query again: a retransmit, sequence not beyond what was seen (it starts no
	 * turn). */
	q.seq -= (uint32_t)q.payload_len;
	len = build_pkt(pkt, &q);
	need_flow("tc-ingress.tcp-retransmit", &q, 1, 0);
	rep_path("tc-ingress.tcp-retransmit", tci, 1, pkt, len, repeat, TC_ACT_UNSPEC, NOTHING);
}

/* ---- invariance: admitted-flow packets at 1 / 4096 services, 100 / 60,000 flows; and a new
 * SYN, whose cost should not grow with the flows either ---- */

#define INV_PORT0 20000

/* n http services on ports INV_PORT0.., loaded unpinned with the per-service maps sized for
 * n, programmed as sluiced would. */
static struct sluice_bpf *load_services(int n, struct sluice_maps *m)
{
	size_t cap = 128 + (size_t)n * 96, off = 0;
	char *t = malloc(cap);
	struct sluice_config cfg;
	struct doc_errors errs;
	struct sluice_bpf *skel;
	struct sluice_hash_keys keys;   /* drawn as sluiced draws them */
	struct bpf_map *map;
	int *idx = calloc((size_t)n, sizeof(int));

	if (!t || !idx)
		return NULL;
	off += (size_t)snprintf(t + off, cap - off, "interface: lo\nservices:\n");
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(t + off, cap - off, "  - { name: s%d, port: %d, protocol: http, "
					"limit: { fixed: 1000000 } }\n", i, INV_PORT0 + i);
	if (sluice_config_parse(t, off, "inv", &cfg, &errs)) {
		doc_errors_print(stderr, &errs);
		free(t);
		return NULL;
	}
	free(t);
	if (!(skel = sluice_bpf__open()))
		return NULL;
	bpf_object__for_each_map(map, skel->obj)
		bpf_map__set_pin_path(map, NULL);
	attach_size_services(skel->obj, maps_service_slots(n));
	if (sluice_bpf__load(skel) ||
	    hs_hash_keys(bpf_map__fd(skel->maps.flow_hash_key), &keys)) {
		sluice_bpf__destroy(skel);
		return NULL;
	}
	memset(m, -1, sizeof(*m));
#define X(name) m->name = bpf_map__fd(skel->maps.name);
	SLUICE_MAP_NAMES
	SLUICE_MAP_NAMES_OPTIONAL
#undef X
	m->publish_prog = bpf_program__fd(skel->progs.sluice_publish_stripes);
	m->service_ports = bpf_map__fd(skel->maps.service_ports);
	if (maps_fold_estimate(m) <= 0 || /* the estimate on, as sluiced runs */
	    maps_learn_sizes(m) || maps_assign_indices(m, &cfg, idx) ||
	    maps_program_services(m, &cfg, idx)) {
		sluice_bpf__destroy(skel);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		struct sluice_verdict v;

		verdict_default(&cfg.services[i], verdict_initial_limit(&cfg.services[i]), &v);
		maps_write_verdict(m, idx[i], &v);
	}
	struct sluice_globals g = { .heartbeat_ns = monotonic_ns(),
				    .heartbeat_timeout_ns = 3600ull * 1000000000ull };
	maps_write_globals(m, &g);
	sluice_config_free(&cfg);
	free(idx);
	tally_maps = m;
	return skel;
}

/* Over-empty ns of the admitted-flow packets with n services and `flows` flows in the table:
 * out[0] XDP client ACK, out[1] TC ingress segment of an active request, out[2] TC egress
 * response data with no request outstanding; out[3] a new SYN (loops calls). */
#define INV_PATHS 5
static int invariance_point(int n, int flows, int repeat, int loops, double out[INV_PATHS])
{
	static const struct fam v4 = { "", 0, 0, "198.18.0.1" };
	struct sluice_maps m;
	struct sluice_bpf *skel = load_services(n, &m);
	uint8_t pkt[512];
	char src[48], name[96];
	size_t len;

	if (!skel) {
		fprintf(stderr, "bench_pktcost: cannot load the object for %d services\n", n);
		return -1;
	}
	struct ctx c = { .f = &v4, .xdp = bpf_program__fd(skel->progs.sluice_xdp_ingress),
			 .tci = bpf_program__fd(skel->progs.sluice_tc_ingress),
			 .tce = bpf_program__fd(skel->progs.sluice_tc_egress) };
	uint16_t dport = (uint16_t)(INV_PORT0 + n - 1);

	/* The table filled as by clients of every service (written directly: only its
	 * occupancy matters to a lookup); the measured flow is a real one. */
	for (int i = 0; i < flows - 2; i++) {
		struct sluice_flow_key k = { 0 };
		struct sluice_flow v = { .client_next = 1, .state = SLUICE_FLOW_OPEN };
		uint32_t a = htonl(0xc6130000u + (uint32_t)i / 60000u * 256u + 7u);

		k.client_addr[10] = k.client_addr[11] = 0xff;
		memcpy(k.client_addr + 12, &a, 4);
		k.client_port = htons((uint16_t)(1024 + i % 60000));
		k.service_port = htons((uint16_t)(INV_PORT0 + i % n));
		v.svc = (uint16_t)(i % n);
		if (bpf_map_update_elem(m.flows, &k, &v, BPF_NOEXIST)) {
			fprintf(stderr, "bench_pktcost: flow %d of %d not stored\n", i, flows);
			unload(skel);
			return -1;
		}
	}
	snprintf(src, sizeof src, "198.18.200.1");
	struct pkt_spec r = req_of(&c, src, 40000, dport), ack;
	handshake(&c, &r);
	len = build_pkt(pkt, &r);
	run1(c.tci, pkt, len, 1, NULL);                 /* the request starts */
	snprintf(name, sizeof name, "invariance.tc-ingress.request-active-segment.svc%d.flows%d", n, flows);
	need_flow(name, &r, 1, 1);
	out[1] = rep_path(name, c.tci, 1, pkt, len, repeat, TC_ACT_UNSPEC, NOTHING);
	ack = after_syn(&r);
	ack.payload = NULL, ack.payload_len = 0, ack.psh = 0, ack.seq = r.seq + r.payload_len;
	ack.ack = r.ack;
	len = build_pkt(pkt, &ack);
	snprintf(name, sizeof name, "invariance.xdp.established-ack.svc%d.flows%d", n, flows);
	need_flow(name, &ack, 1, 0);
	out[0] = rep_path(name, c.xdp, 0, pkt, len, repeat, XDP_PASS, NOTHING);
	/* The response ends the request (untimed); later response data finds none outstanding. */
	struct pkt_spec rs = { .src = r.dst, .dst = src, .sport = dport, .dport = 40000,
			       .seq = r.ack, .ack = r.seq + (uint32_t)r.payload_len, .ackf = 1,
			       .psh = 1, .payload = RESP, .payload_len = sizeof(RESP) - 1 };
	len = build_pkt(pkt, &rs);
	run1(c.tce, pkt, len, 1, NULL);
	snprintf(name, sizeof name, "invariance.tc-egress.response-data.svc%d.flows%d", n, flows);
	need_flow(name, &rs, 0, 0);
	out[2] = rep_path(name, c.tce, 1, pkt, len, repeat, TC_ACT_UNSPEC, MOVES([T_SERVICE] = 1));
	/* the server's bare ACK on the same flow (it ends and starts nothing, and is not counted) */
	rs.payload = NULL, rs.payload_len = 0, rs.psh = 0, rs.seq += sizeof(RESP) - 1;
	len = build_pkt(pkt, &rs);
	snprintf(name, sizeof name, "invariance.tc-egress.bare-ack.svc%d.flows%d", n, flows);
	need_flow(name, &rs, 0, 0);
	out[4] = rep_path(name, c.tce, 1, pkt, len, repeat, TC_ACT_UNSPEC, NOTHING);
	/* These services are http: a SYN is only recorded (its requests are what is decided). */
	c.dport = dport;
	snprintf(name, sizeof name, "invariance.xdp.new-syn-admitted.svc%d.flows%d", n, flows);
	out[3] = loop_path(name, c.xdp, 0, loops, prep_new_syn, &c, XDP_PASS,
			   MOVES([T_SERVICE] = 1));
	unload(skel);
	return 0;
}

/* ---- the same packets on every CPU at once ----
 * What a packet of an admitted flow costs as more CPUs run them: each CPU sends its own flow's
 * packets (BPF_PROG_TEST_RUN with repeat, one thread pinned to each CPU, released together),
 * timed against the same on CPU 0 alone; the empty program alike, so that what the CPUs share
 * outside sluice (the test-run machinery, the memory bus) is taken out. */
#define CPU_MAX 64

struct cpu_run {
	pthread_t t;
	pthread_barrier_t *go;
	int cpu, fd, repeat, err;
	const uint8_t *pkt;
	size_t len;
	double ns;
};

static void *cpu_work(void *v)
{
	struct cpu_run *w = v;
	uint8_t out[2048];
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	w->err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(w->go);
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = w->pkt, .data_size_in = (uint32_t)w->len,
		    .data_out = out, .data_size_out = sizeof(out), .repeat = w->repeat);
	if (!w->err && bpf_prog_test_run_opts(w->fd, &o))
		w->err = errno;
	w->ns = (double)o.duration;
	return NULL;
}

/* Mean ns per packet over n CPUs running fd at once (CPU i its pkt[i]); -1 on an error. Best
 * of the rounds. */
static double cpus_at_once(int n, int fd, uint8_t (*pkt)[512], const size_t *len, int repeat)
{
	double best = -1;

	for (int r = 0; r < rounds; r++) {
		struct cpu_run w[CPU_MAX];
		pthread_barrier_t go;
		double sum = 0;

		pthread_barrier_init(&go, NULL, (unsigned)n);
		for (int i = 0; i < n; i++) {
			w[i] = (struct cpu_run){ .go = &go, .cpu = i, .fd = fd, .repeat = repeat,
						 .pkt = pkt[i], .len = len[i] };
			pthread_create(&w[i].t, NULL, cpu_work, &w[i]);
		}
		for (int i = 0; i < n; i++) {
			pthread_join(w[i].t, NULL);
			if (w[i].err) {
				pthread_barrier_destroy(&go);
				return -1;
			}
			sum += w[i].ns;
		}
		pthread_barrier_destroy(&go);
		if (best < 0 || sum / n < best)
			best = sum / n;
	}
	return best;
}

/* Whole requests on every CPU at once: each CPU its own keep-alive connection, on which it
 * runs n requests one after the other, each a request start (TC ingress: classified, admitted,
 * counted in flight) and its response's first segment (TC egress: the request ends, its slot
 * is given back, its latency sampled), one BPF_PROG_TEST_RUN each. Requests per second per
 * core from the CPU's own wall clock, and the two programs' in-kernel ns per request; with
 * empty, the same calls into the empty programs (what a request costs outside sluice: the
 * system calls and the test-run machinery). */
struct req_run {
	pthread_t t;
	pthread_barrier_t *go;
	int cpu, tci, tce, n, err;
	struct pkt_spec req, resp;
	double wall_ns, prog_ns;
};

static void *req_work(void *v)
{
	struct req_run *w = v;
	struct pkt_spec q = w->req, r = w->resp;
	uint8_t b[512], out[2048];
	struct timespec t0, t1;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	w->err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(w->go);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < w->n && !w->err; i++) {
		for (int k = 0; k < 2; k++) {
			size_t len = build_pkt(b, k ? &r : &q);
			LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = b, .data_size_in = (uint32_t)len,
				    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);

			if (bpf_prog_test_run_opts(k ? w->tce : w->tci, &o))
				w->err = errno ? errno : -1;
			w->prog_ns += (double)o.duration;
		}
		/* the next request where this one ended, acknowledging the response */
		q.seq += (uint32_t)q.payload_len;
		q.ack += (uint32_t)r.payload_len;
		r.seq += (uint32_t)r.payload_len;
		r.ack = q.seq;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	w->wall_ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	w->req = q, w->resp = r;        /* where the connection is now */
	return NULL;
}

/* n CPUs at once, each on its own connection (req[i], resp[i]; with `advance`, left where its
 * requests ended: the empty programs' runs move no connection of sluice's): mean requests per
 * second per CPU and in-kernel ns per request; -1 on an error. */
static int reqs_at_once(int ncpu, int tci, int tce, struct pkt_spec *req, struct pkt_spec *resp,
			int n, int advance, double *per_s, double *prog_ns)
{
	struct req_run w[CPU_MAX];
	pthread_barrier_t go;
	double rate = 0, ns = 0;
	int err = 0;

	pthread_barrier_init(&go, NULL, (unsigned)ncpu);
	for (int i = 0; i < ncpu; i++) {
		w[i] = (struct req_run){ .go = &go, .cpu = i, .tci = tci, .tce = tce, .n = n,
					 .req = req[i], .resp = resp[i] };
		pthread_create(&w[i].t, NULL, req_work, &w[i]);
	}
	for (int i = 0; i < ncpu; i++) {
		pthread_join(w[i].t, NULL);
		err |= w[i].err || w[i].wall_ns <= 0;
		if (!err) {
			rate += n * 1e9 / w[i].wall_ns;
			ns += w[i].prog_ns / n;
		}
		if (advance)                    /* the connection carries on where they ended */
			req[i] = w[i].req, resp[i] = w[i].resp;
	}
	pthread_barrier_destroy(&go);
	if (err)
		return -1;
	*per_s = rate / ncpu;
	*prog_ns = ns / ncpu;
	return 0;
}

/* Whole requests per second per core, one CPU against all, best of the rounds; every request
 * must have been admitted and ended (in flight back to exactly 0, as many latency samples as
 * requests). */
static void cpu_requests(const struct ctx *c, int ncpu, int n)
{
	static struct pkt_spec req[CPU_MAX], resp[CPU_MAX];
	static char src[CPU_MAX][48];
	double best[2][2] = { { 0 } }, ns[2][2] = { { 0 } };
	long long runs = 0;
	struct tally before, after;

	for (int i = 0; i < ncpu; i++) {
		snprintf(src[i], sizeof src[i], "198.18.202.%d", i + 1);
		req[i] = req_of(c, src[i], 41000, INV_PORT0);
		handshake(c, &req[i]);
		resp[i] = (struct pkt_spec){ .v6 = 0, .src = c->f->server, .dst = src[i],
					     .sport = INV_PORT0, .dport = 41000, .ackf = 1,
					     .psh = 1, .payload = RESP,
					     .payload_len = sizeof(RESP) - 1,
					     .seq = req[i].ack,
					     .ack = req[i].seq + (uint32_t)req[i].payload_len };
	}
	if (tally_before("cpus.requests", &before))
		return;
	for (int r = 0; r < rounds; r++)
		for (int all = 0; all < 2; all++)
			for (int e = 0; e < 2; e++) {
				int k = all ? ncpu : 1;
				double per_s, prog;

				if (reqs_at_once(k, e ? e_tc : c->tci, e ? e_tc : c->tce, req, resp, n,
						 !e, &per_s, &prog)) {
					fprintf(stderr, "bench_pktcost: the request points did not run\n");
					failed = 1;
					return;
				}
				if (!e)
					runs += (long long)k * n;
				if (per_s > best[all][e])
					best[all][e] = per_s, ns[all][e] = prog;
			}
	if (tally_before("cpus.requests", &after))
		return;
	if (after.v[T_INFLIGHT] != before.v[T_INFLIGHT] ||
	    after.v[T_ADMITTED] - before.v[T_ADMITTED] != runs ||
	    after.v[T_SAMPLES] - before.v[T_SAMPLES] != runs) {
		fprintf(stderr, "bench_pktcost: %lld requests on every CPU: %lld admitted, %lld "
			"sampled, in flight moved by %lld (not 0)\n", runs,
			after.v[T_ADMITTED] - before.v[T_ADMITTED],
			after.v[T_SAMPLES] - before.v[T_SAMPLES],
			after.v[T_INFLIGHT] - before.v[T_INFLIGHT]);
		failed = 1;
	}
	printf("cpus: requests one_cpu_per_s: %.0f empty_per_s: %.0f prog_ns: %.1f empty_ns: %.1f "
	       "all_cpus: %d per_core_per_s: %.0f empty_per_s: %.0f prog_ns: %.1f empty_ns: %.1f "
	       "per_core_vs_one_cpu: %.2f in_flight_moved: %lld\n", best[0][0], best[0][1],
	       ns[0][0], ns[0][1], ncpu, best[1][0], best[1][1], ns[1][0], ns[1][1],
	       best[0][0] > 0 ? best[1][0] / best[0][0] : 0.0,
	       after.v[T_INFLIGHT] - before.v[T_INFLIGHT]);
}

/* The established ACK (XDP) and the segment of an active request (TC ingress), each CPU on a
 * flow of its own, on one CPU and on all: all_over_one near 1.0 is no growth with CPUs. */
static void cpu_points(int repeat)
{
	static const struct fam v4 = { "", 0, 0, "198.18.0.1" };
	static uint8_t ack[CPU_MAX][512], seg[CPU_MAX][512];
	size_t ack_len[CPU_MAX], seg_len[CPU_MAX];
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int n = online < 1 ? 1 : online > CPU_MAX ? CPU_MAX : (int)online;
	struct sluice_maps m;
	struct sluice_bpf *skel = load_services(1, &m);

	if (!skel) {
		fprintf(stderr, "bench_pktcost: cannot load the object for the CPU points\n");
		failed = 1;
		return;
	}
	struct ctx c = { .f = &v4, .xdp = bpf_program__fd(skel->progs.sluice_xdp_ingress),
			 .tci = bpf_program__fd(skel->progs.sluice_tc_ingress),
			 .tce = bpf_program__fd(skel->progs.sluice_tc_egress) };

	for (int i = 0; i < n; i++) {
		char src[48];
		struct pkt_spec r, a;

		snprintf(src, sizeof src, "198.18.201.%d", i + 1);
		r = req_of(&c, src, 40000, INV_PORT0);
		handshake(&c, &r);
		seg_len[i] = build_pkt(seg[i], &r);
		run1(c.tci, seg[i], seg_len[i], 1, NULL); /* the request starts: later copies are its segments */
		a = after_syn(&r);
		a.payload = NULL, a.payload_len = 0, a.psh = 0, a.seq = r.seq + r.payload_len;
		a.ack = r.ack;
		ack_len[i] = build_pkt(ack[i], &a);
	}
	struct { const char *name; int fd, efd; uint8_t (*pkt)[512]; size_t *len; } p[2] = {
		{ "xdp.established-ack", c.xdp, e_xdp, ack, ack_len },
		{ "tc-ingress.request-active-segment", c.tci, e_tc, seg, seg_len },
	};
	for (int k = 0; k < 2; k++) {
		double one = cpus_at_once(1, p[k].fd, p[k].pkt, p[k].len, repeat);
		double eone = cpus_at_once(1, p[k].efd, p[k].pkt, p[k].len, repeat);
		double all = cpus_at_once(n, p[k].fd, p[k].pkt, p[k].len, repeat);
		double eall = cpus_at_once(n, p[k].efd, p[k].pkt, p[k].len, repeat);

		if (one < 0 || eone < 0 || all < 0 || eall < 0) {
			fprintf(stderr, "bench_pktcost: the CPU points of %s did not run\n", p[k].name);
			failed = 1;
			continue;
		}
		printf("cpus: %s one_cpu_ns: %.1f empty_ns: %.1f all_cpus: %d all_cpus_ns: %.1f "
		       "empty_ns: %.1f over_empty_all_over_one: %.2f\n", p[k].name, one, eone, n, all,
		       eall, one - eone > 0 ? (all - eall) / (one - eone) : 0.0);
	}
	cpu_requests(&c, n, repeat / 100 > 100 ? repeat / 100 : 100);
	unload(skel);
}

/* A client ACK of an admitted flow, one flow after another, with the handshake slots empty and
 * then 65,000 of them holding records no one completes (as a SYN flood leaves them): what XDP's
 * check for a completing handshake costs every such ACK. */
static void cold_ack_points(int loops)
{
	static const struct fam v4 = { "", 0, 0, "198.18.0.1" };
	struct sluice_maps m;
	struct sluice_bpf *skel = load_services(1, &m);
	int n = SLUICE_HANDSHAKE_SLOTS - 536;
	struct sluice_handshake_slot *slots;
	struct sluice_hash_keys keys;
	__u32 zero = 0;

	if (!skel || bpf_map_lookup_elem(bpf_map__fd(skel->maps.flow_hash_key), &zero, &keys)) {
		fprintf(stderr, "bench_pktcost: cannot load the object for the cold ACKs\n");
		failed = 1;
		return;
	}
	struct ctx c = { .f = &v4, .xdp = bpf_program__fd(skel->progs.sluice_xdp_ingress),
			 .dport = INV_PORT0 };

	loop_path("xdp.cold-ack.handshakes0", c.xdp, 0, loops, prep_cold_ack, &c, XDP_PASS, NOTHING);
	if (!(slots = map_slots(bpf_map__fd(skel->maps.handshake_slots)))) {
		fprintf(stderr, "bench_pktcost: cannot map the handshake slots\n");
		failed = 1;
		unload(skel);
		return;
	}
	/* records of other 4-tuples in n slots (their own, as the data path would place them) */
	for (int i = 0, placed = 0; placed < n && i < 4 * n; i++) {
		struct sluice_flow_key k = { 0 };
		uint32_t a = htonl(0xc6120000u + (uint32_t)i / 60000u * 256u + 9u);
		struct sluice_handshake_slot *sl;
		__u64 h;

		k.client_addr[10] = k.client_addr[11] = 0xff;
		memcpy(k.client_addr + 12, &a, 4);
		k.client_port = htons((uint16_t)(1024 + i % 60000));
		k.service_port = htons(INV_PORT0);
		h = sluice_flow_key_hash(&k, &keys);
		sl = &slots[sluice_slot_index(h)];
		if (sl->word & SLUICE_SLOT_HELD)
			continue;
		memset(sl, 0, sizeof(*sl));
		sl->key = k;
		sl->syn_ns = 1, sl->client_isn = 5;
		sl->word = sluice_slot_tag(h) | SLUICE_SLOT_HELD;
		placed++;
	}
	munmap(slots, SLUICE_HANDSHAKE_SLOTS * sizeof(*slots));
	loop_path("xdp.cold-ack.handshakes65000", c.xdp, 0, loops, prep_cold_ack, &c, XDP_PASS,
		  NOTHING);
	unload(skel);
}

static void invariance(int repeat, int loops)
{
	static const int svcs[2] = { 1, 4096 }, flows[2] = { 100, 60000 };
	static const char *what[INV_PATHS] = { "xdp.established-ack",
					       "tc-ingress.request-active-segment",
					       "tc-egress.response-data", "xdp.new-syn-admitted",
					       "tc-egress.bare-ack" };
	double v[2][2][INV_PATHS];

	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			if (invariance_point(svcs[a], flows[b], repeat, loops, v[a][b])) {
				failed = 1;
				return;
			}
	/* Ratio of the dearest point to the cheapest, per packet: 1.0 is no growth. Over-empty
	 * figures of a few ns are integers from the kernel's mean: ±1 ns is resolution. */
	for (int k = 0; k < INV_PATHS; k++) {
		double lo = v[0][0][k], hi = v[0][0][k];

		for (int a = 0; a < 2; a++)
			for (int b = 0; b < 2; b++) {
				if (v[a][b][k] < lo) lo = v[a][b][k];
				if (v[a][b][k] > hi) hi = v[a][b][k];
			}
		printf("invariance: %s svc1.flows100: %.1f svc1.flows60000: %.1f svc4096.flows100: "
		       "%.1f svc4096.flows60000: %.1f max_over_min: %.2f\n", what[k], v[0][0][k],
		       v[0][1][k], v[1][0][k], v[1][1][k], lo > 0 ? hi / lo : 0.0);
	}
}

/* The data path loaded afresh with the bench's services programmed as sluiced would. Each
 * family, and the other paths, get their own: run in sequence on one object, whichever family
 * came first paid about 520 ns for a new SYN and whichever came last about 970 (the IPv4 one
 * too, run last), so the figures differed by their order, not by their code. Room for every
 * flow the loops create (handshake completions and request starts): a full table would admit
 * untracked and measure another path. */
static struct sluice_bpf *load_programmed(int loops, const struct sluice_config *cfg,
					  struct sluice_maps *m)
{
	int idx[SLUICE_MIN_SERVICE_SLOTS];
	struct sluice_bpf *skel = harness_load((unsigned)(8 * loops + 4096), m);

	if (!skel) {
		fprintf(stderr, "bench_pktcost: cannot load the sluice BPF object\n");
		return NULL;
	}
	if (maps_assign_indices(m, cfg, idx) || maps_program_services(m, cfg, idx)) {
		fprintf(stderr, "bench_pktcost: cannot program services\n");
		sluice_bpf__destroy(skel);
		return NULL;
	}
	for (int i = 0; i < cfg->n_services; i++) {
		struct sluice_verdict v;
		verdict_default(&cfg->services[i], verdict_initial_limit(&cfg->services[i]), &v);
		maps_write_verdict(m, idx[i], &v);
	}
	struct sluice_globals g = { .heartbeat_ns = monotonic_ns(),
				    .heartbeat_timeout_ns = 3600ull * 1000000000ull };
	maps_write_globals(m, &g);
	handshakes_fd = bpf_map__fd(skel->maps.handshake_slots);
	hash_keys_fd = bpf_map__fd(skel->maps.flow_hash_key);
	tally_maps = m;
	/* Flows admitted in the second the rules were written in cache nothing (their answer
	 * could come from rules still changing): on a host the rules were written long before.
	 * Wait for the clock's next second (2^30 ns) so the loops' flows do as they would there. */
	unsigned long long written = monotonic_ns() >> 30;

	while (monotonic_ns() >> 30 <= written)
		usleep(10000);
	return skel;
}

static void add_pkt_stats(struct sluice_maps *m, struct sluice_pkt_stats *sum)
{
	struct sluice_pkt_stats ps = { 0 };

	maps_read_pkt_stats(m, &ps);
	sum->rst_sent += ps.rst_sent;
	sum->reply_sent += ps.reply_sent;
	sum->reply_failed += ps.reply_failed;
}

/* The host's memory as a path that misses the cache meets it: ns per dependent load, random
 * 64-byte lines linked in one cycle over `bytes` of 4 KiB pages (as a large map's vmalloc'ed
 * memory is: every line can be a TLB miss too), best of the rounds: what a miss costs on the
 * host the run was taken on, for the paths that take one per new connection (a new SYN's
 * handshake slot, a request start's flow entry). Printed before the paths and after them, so
 * that a run whose host changed under it shows it. 4 MiB is the handshake table's size; 64 MiB
 * lies past any cache. */
static double chase_ns(size_t bytes)
{
	size_t n = bytes / 64, steps = 1000000, *order;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	double best = -1;
	char *buf;

	buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return -1;
	madvise(buf, bytes, MADV_NOHUGEPAGE);
	order = malloc(n * sizeof(*order));
	if (!order) {
		munmap(buf, bytes);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates, xorshift64: the same cycle each run */
		size_t j, t;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		j = x % (i + 1);
		t = order[i], order[i] = order[j], order[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		*(void **)(buf + order[i] * 64) = buf + order[(i + 1) % n] * 64;
	free(order);
	for (int r = 0; r < rounds; r++) {
		void **q = (void **)buf;
		struct timespec t0, t1;
		double ns;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (size_t s = 0; s < steps; s++)
			q = *q;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		asm volatile("" : : "r"(q) : "memory"); /* the chase's end is used: not optimised away */
		ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / steps;
		if (best < 0 || ns < best)
			best = ns;
	}
	munmap(buf, bytes);
	return best;
}

static void print_host_memory(const char *when)
{
	printf("host: memory-chase-4MiB ns: %.1f memory-chase-64MiB ns: %.1f (%s)\n",
	       chase_ns(4u << 20), chase_ns(64u << 20), when);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *empty_path = argc > 1 ? argv[1] : "build/bench/empty_xdp.bpf.o";
	int repeat = argc > 2 ? atoi(argv[2]) : 1000000;
	int loops = argc > 3 ? atoi(argv[3]) : 20000;
	struct sluice_config cfg;
	struct doc_errors errs;
	struct sluice_maps m;

	if (getenv("BENCH_ROUNDS") && atoi(getenv("BENCH_ROUNDS")) > 0)
		rounds = atoi(getenv("BENCH_ROUNDS"));
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
	e_xdp = bpf_program__fd(bpf_object__find_program_by_name(eo, "empty_xdp"));
	e_tc = bpf_program__fd(bpf_object__find_program_by_name(eo, "empty_tc"));
	{
		struct bpf_program *sp = bpf_object__find_program_by_name(eo, "stream_xdp");
		struct bpf_program *ef = bpf_object__find_program_by_name(eo, "empty_xdp_frags");

		if (sp && ef) {
			e_stream = bpf_program__fd(sp);
			e_xdp_frags = bpf_program__fd(ef);
			e_stream_ctl = bpf_object__find_map_fd_by_name(eo, "stream_ctl");
			e_stream_target = bpf_object__find_map_fd_by_name(eo, "stream_target");
		}
		sp = bpf_object__find_program_by_name(eo, "stream_tc");
		if (sp) {
			e_stream_tc = bpf_program__fd(sp);
			e_stream_target_tc = bpf_object__find_map_fd_by_name(eo, "stream_target_tc");
			e_stream_ctl = bpf_object__find_map_fd_by_name(eo, "stream_ctl");
		}
	}

	if (sluice_config_parse(CONFIG, strlen(CONFIG), "bench", &cfg, &errs)) {
		doc_errors_print(stderr, &errs);
		return 1;
	}
	static const struct fam fams[3] = {
		{ "", 0, 0, "198.18.0.1" },
		{ ".v6", 1, 0, "2001:2::1" },
		{ ".vlan", 0, 100, "198.18.0.1" },
	};

	printf("# per-packet cost, BPF_PROG_TEST_RUN: best of %d rounds of repeat=%d, or of %d "
	       "calls of repeat=1 for paths that change state\n", rounds, repeat, loops / rounds);
	print_host_memory("before the paths");
	/* BENCH_FAMILIES=1: IPv4 only (a quicker look while working on the code). */
	int nfam = getenv("BENCH_FAMILIES") ? atoi(getenv("BENCH_FAMILIES")) : 3;
	struct sluice_pkt_stats ps = { 0 };

	if (nfam > 3 || nfam < 0)
		nfam = 3;
	for (int i = 0; i <= nfam; i++) { /* the families, then the other paths */
		struct sluice_bpf *skel = load_programmed(loops, &cfg, &m);

		if (!skel)
			return 1;
		int xdp = bpf_program__fd(skel->progs.sluice_xdp_ingress);
		int tci = bpf_program__fd(skel->progs.sluice_tc_ingress);
		int tce = bpf_program__fd(skel->progs.sluice_tc_egress);
		if (i < nfam)
			family_paths(&fams[i], xdp, tci, tce, repeat, loops);
		else
			other_paths(&fams[0], xdp, tci, tce, repeat, loops);
		add_pkt_stats(&m, &ps);
		unload(skel);
	}
	printf("# counters: rst_sent=%llu reply_sent=%llu reply_failed=%llu\n",
	       (unsigned long long)ps.rst_sent, (unsigned long long)ps.reply_sent,
	       (unsigned long long)ps.reply_failed);
	sluice_config_free(&cfg);

	if (!getenv("BENCH_NO_INVARIANCE")) {
		invariance(repeat, loops);
		cpu_points(repeat);
	}
	cold_ack_points(loops);
	print_host_memory("after them");
	bpf_object__close(eo);
	return failed;
}
