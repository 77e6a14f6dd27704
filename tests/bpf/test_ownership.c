// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Exact in-flight under interleavings: the data path built with its test hooks
 * (tests/bpf/hooks.h) runs, at a named point of one program, the step another CPU could run
 * there (a flow ending, its entry reused at once by a new connection), and the flow GC races
 * a request through its liveness callback. After each, in-flight and busy must be exactly
 * what the flow table holds, and exactly 0 once every flow is gone; the reconciliation must
 * correct only a difference that stands still, and never one under way. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sched.h>
#include <unistd.h>
#include <linux/pkt_cls.h>
#include <cmocka.h>

#include "harness.h"
#include "pktbuild.h"
#include "sluice_hooks.skel.h"
#include "inflight_unit.skel.h"
#include <pthread.h>

#define SERVER4 "198.18.0.1"
#define S_NS 1000000000ull

enum sluice_hook_point { HOOK_DECIDING = 1, HOOK_TURN = 2 };
enum sluice_hook_action { HOOK_END = 1, HOOK_END_REUSE = 2 };
struct sluice_hook {                    /* as tests/bpf/hooks.h */
	__u32 point, action, fired, _pad;
	struct sluice_flow_key reuse_key;
};

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: web\n"
	"    port: 8080\n"
	"    protocol: http\n"
	"    limit: { fixed: 50 }\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 50 }\n"
	"  - name: capped\n"
	"    port: 5433\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 50 }\n"
	"    max_connections: 3\n"
	"    default_class: L0\n";

struct hfix {
	struct fixture f;
	struct sluice_hooks_bpf *sk;
};

static int setup(void **state)
{
	struct hfix *h = calloc(1, sizeof(*h));
	struct bpf_map *map;

	if (!h || !(h->sk = sluice_hooks_bpf__open()))
		return -1;
	bpf_object__for_each_map(map, h->sk->obj)
		bpf_map__set_pin_path(map, NULL);
	if (sluice_hooks_bpf__load(h->sk) ||
	    harness_fixed_keys(bpf_map__fd(h->sk->maps.flow_hash_key)) ||
	    harness_maps_of(h->sk->obj, &h->f.m) || maps_fold_estimate(&h->f.m) <= 0)
		return -1;
	if (!harness_program(&h->f, CONFIG, 3600 * S_NS))
		return -1;
	*state = h;
	return 0;
}

static int teardown(void **state)
{
	struct hfix *h = *state;

	sluice_hooks_bpf__destroy(h->sk);
	free(h);
	return 0;
}

static int run(struct hfix *h, struct bpf_program *prog, const struct pkt_spec *s)
{
	uint8_t buf[1024];
	struct __sk_buff ctx = { .ifindex = 1 };
	int xdp = prog == h->sk->progs.sluice_xdp_ingress;
	struct run r = harness_run(bpf_program__fd(prog), buf, build_pkt(buf, s), xdp ? NULL : &ctx);

	assert_int_equal(r.err, 0);
	return r.ret;
}

static void arm(struct hfix *h, __u32 point, __u32 action, uint16_t reuse_port)
{
	struct sluice_hook k = { .point = point, .action = action };
	__u32 zero = 0;

	k.reuse_key.client_addr[10] = k.reuse_key.client_addr[11] = 0xff;
	k.reuse_key.client_addr[12] = 198, k.reuse_key.client_addr[13] = 18;
	k.reuse_key.client_addr[14] = 9, k.reuse_key.client_addr[15] = 9;
	k.reuse_key.client_port = htons(reuse_port);
	k.reuse_key.service_port = htons(8080);
	k.reuse_key.local_addr[10] = k.reuse_key.local_addr[11] = 0xff;
	inet_pton(AF_INET, SERVER4, k.reuse_key.local_addr + 12);
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(h->sk->maps.test_hook), &zero, &k, BPF_ANY), 0);
}

static int fired(struct hfix *h)
{
	struct sluice_hook k;
	__u32 zero = 0;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(h->sk->maps.test_hook), &zero, &k), 0);
	return (int)k.fired;
}

/* One connection: its SYN, the server's SYN-ACK, the client's ACK (a flow, no request yet). */
static struct pkt_spec conn(struct hfix *h, uint16_t sport, uint16_t dport)
{
	struct pkt_spec syn = { .src = "198.18.1.7", .dst = SERVER4, .sport = sport, .dport = dport,
				.seq = 1000u + sport, .syn = 1 };
	struct pkt_spec sa = { .src = SERVER4, .dst = syn.src, .sport = dport, .dport = sport,
			       .seq = 70000u + sport, .ack = syn.seq + 1, .syn = 1, .ackf = 1 };
	struct pkt_spec ack = syn;

	assert_int_equal(run(h, h->sk->progs.sluice_xdp_ingress, &syn), XDP_PASS);
	run(h, h->sk->progs.sluice_tc_egress, &sa);
	ack.syn = 0, ack.ackf = 1, ack.seq = syn.seq + 1, ack.ack = sa.seq + 1;
	run(h, h->sk->progs.sluice_xdp_ingress, &ack);
	return ack;
}

/* The client's data (a request for http, a query for tcp) at where the client is. */
static struct pkt_spec data_of(const struct pkt_spec *c)
{
	struct pkt_spec d = *c;

	d.psh = 1, d.payload = "GET / HTTP/1.1\r\n\r\n", d.payload_len = 18;
	return d;
}

/* The server's segment to the client of c: data, FIN or RST. */
static struct pkt_spec server_seg(const struct pkt_spec *c, int fin, int rst)
{
	struct pkt_spec s = { .src = SERVER4, .dst = c->src, .sport = c->dport, .dport = c->sport,
			      .seq = c->ack, .ack = c->seq + 18, .ackf = 1, .fin = fin, .rst = rst };

	if (!fin && !rst)
		s.psh = 1, s.payload = "HTTP/1.1 200 OK\r\n\r\n", s.payload_len = 19;
	return s;
}

static long long net(struct hfix *h, int svc, int busy)
{
	struct sluice_inflight in;

	assert_int_equal((busy ? maps_read_busy : maps_read_inflight)(&h->f.m, h->f.idx[svc], &in), 0);
	return in.total;
}

static int flows(struct hfix *h)
{
	int per[SLUICE_MIN_SERVICE_SLOTS];

	return maps_count_flows(&h->f.m, per, SLUICE_MIN_SERVICE_SLOTS);
}

/* The GC at a clock far ahead: every flow is silent and reclaimed. */
static int gc_all(struct hfix *h)
{
	return maps_gc_flows(&h->f.m, monotonic_ns() + 3600 * S_NS, 30 * S_NS, 600 * S_NS, NULL, NULL);
}

static void assert_all_zero(struct hfix *h)
{
	for (int s = 0; s < 2; s++) {
		assert_int_equal(net(h, s, 0), 0);
		assert_int_equal(net(h, s, 1), 0);
	}
}

/* A server FIN lands between a request's claim (DECIDING, slot taken) and its commit: the
 * flow is gone, so the decider gives its slot back. */
static void test_fin_between_claim_and_commit(void **state)
{
	struct hfix *h = *state;
	struct pkt_spec c = conn(h, 4001, 8080), rq = data_of(&c);

	arm(h, HOOK_DECIDING, HOOK_END, 0);
	assert_int_equal(run(h, h->sk->progs.sluice_tc_ingress, &rq), TC_ACT_UNSPEC);
	assert_int_equal(fired(h), 1);
	assert_int_equal(flows(h), 0);
	assert_int_equal(net(h, 0, 0), 0);
	struct sluice_class_stats st;
	int cls = h->f.cfg.services[0].default_class;
	assert_int_equal(maps_read_class_stats(&h->f.m, h->f.idx[0], cls, &st), 0);
	assert_int_equal(st.admitted, 1);
	assert_int_equal(st.completed, 1);
}

/* ... and the freed entry is reused at once by a new tcp connection holding its slot: the
 * decider's stale pointer must not make the request the new connection's, nor take its slot. */
static void test_fin_and_reuse_between_claim_and_commit(void **state)
{
	struct hfix *h = *state;
	struct pkt_spec c = conn(h, 4002, 8080), rq = data_of(&c);

	arm(h, HOOK_DECIDING, HOOK_END_REUSE, 9999);
	run(h, h->sk->progs.sluice_tc_ingress, &rq);
	assert_int_equal(fired(h), 1);
	assert_int_equal(flows(h), 1);
	assert_int_equal(net(h, 0, 0), 1);          /* the new connection's slot, nothing else */
	assert_int_equal(net(h, 0, 1), 0);
	assert_int_equal(gc_all(h), 1);
	assert_int_equal(flows(h), 0);
	assert_all_zero(h);
}

/* Request and client RST in one NAPI batch: XDP sees both before TC ingress sees the request,
 * so the flow is gone by then and the request takes nothing. */
static void test_request_and_rst_in_one_batch(void **state)
{
	struct hfix *h = *state;
	struct pkt_spec c = conn(h, 4003, 8080), rq = data_of(&c), rst = c;

	rst.rst = 1, rst.ackf = 0, rst.ack = 0, rst.seq = c.seq + 18;
	run(h, h->sk->progs.sluice_xdp_ingress, &rq);
	run(h, h->sk->progs.sluice_xdp_ingress, &rst);
	assert_int_equal(run(h, h->sk->progs.sluice_tc_ingress, &rq), TC_ACT_UNSPEC);
	assert_int_equal(flows(h), 0);
	assert_all_zero(h);
}

/* The GC decided a flow is dead (scan, socket table) and a request starts on it before the GC
 * ends it: whatever the GC ends, it gives back exactly what the flow held then. */
struct racer {
	struct hfix *h;
	struct pkt_spec rq;
	int ran;
};

static int request_races_gc(void *ctx, const struct sluice_flow_key *k)
{
	struct racer *r = ctx;

	r->ran++;
	run(r->h, r->h->sk->progs.sluice_tc_ingress, &r->rq);
	return 0; /* the socket table says: closed */
}

static void test_gc_racing_a_claim(void **state)
{
	struct hfix *h = *state;
	struct pkt_spec c = conn(h, 4004, 8080);
	struct racer r = { .h = h, .rq = data_of(&c) };

	assert_int_equal(maps_gc_flows(&h->f.m, monotonic_ns() + 3600 * S_NS, 30 * S_NS, 600 * S_NS,
				       request_races_gc, &r), 1);
	assert_int_equal(r.ran, 1);
	assert_int_equal(flows(h), 0);
	assert_all_zero(h);
}

/* A tcp turn opens on a flow that ended and whose entry a new connection of the same service
 * and class took meanwhile (the word reads the same: compare-and-swap cannot tell): the turn
 * is then the new connection's, and ends with it. */
static void test_turn_racing_an_end_and_reuse(void **state)
{
	struct hfix *h = *state;
	struct pkt_spec c = conn(h, 4005, 5432), q = data_of(&c);

	assert_int_equal(net(h, 1, 0), 1);
	arm(h, HOOK_TURN, HOOK_END_REUSE, 9998);
	run(h, h->sk->progs.sluice_tc_ingress, &q);
	assert_int_equal(fired(h), 1);
	assert_int_equal(flows(h), 1);
	assert_int_equal(net(h, 1, 0), 1);
	assert_int_equal(gc_all(h), 1);
	assert_int_equal(flows(h), 0);
	assert_all_zero(h);
}

static struct recon_state recon;

/* Traffic with every ending (response, client FIN, server RST, GC), then nothing left: the
 * counts are exactly 0 and two sweeps at rest correct nothing. A leak put in by hand (what a
 * lost release would leave) is corrected only by the second sweep that sees it at rest, and
 * not at all while a request is half decided. */
static void test_reconcile_exact_and_only_at_rest(void **state)
{
	struct hfix *h = *state;
	struct sluice_inflight in;
	__u32 k = (__u32)h->f.idx[0];

	assert_int_equal(recon_init(&recon, h->f.m.n_slots), 0);
	for (int i = 0; i < 40; i++) {
		struct pkt_spec c = conn(h, (uint16_t)(5000 + i), i & 1 ? 5432 : 8080), d = data_of(&c);
		struct pkt_spec resp = server_seg(&c, 0, 0), fin = c;

		run(h, h->sk->progs.sluice_tc_ingress, &d);
		assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
		if (i % 4 == 0)
			run(h, h->sk->progs.sluice_tc_egress, &resp);
		fin.fin = 1, fin.seq += 18;
		if (i % 4 == 1)
			run(h, h->sk->progs.sluice_xdp_ingress, &fin);
		if (i % 4 == 2) {
			struct pkt_spec rst = server_seg(&c, 0, 1);
			run(h, h->sk->progs.sluice_tc_egress, &rst);
		}
	}
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_true(gc_all(h) > 0);
	assert_int_equal(flows(h), 0);
	assert_all_zero(h);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_int_equal(recon.slot[k].corrections, 0);

	/* A leak of 2 in class L1 and a request half decided on a live flow. */
	struct pkt_spec c = conn(h, 6000, 8080);
	struct sluice_flow_key fk = { .client_port = htons(6000), .service_port = htons(8080) };
	struct sluice_flow fv;
	fk.client_addr[10] = fk.client_addr[11] = 0xff;
	fk.client_addr[12] = 198, fk.client_addr[13] = 18, fk.client_addr[14] = 1, fk.client_addr[15] = 7;
	fk.local_addr[10] = fk.local_addr[11] = 0xff;
	inet_pton(AF_INET, SERVER4, fk.local_addr + 12);
	assert_int_equal(bpf_map_lookup_elem(h->f.m.flows, &fk, &fv), 0);
	fv.req_active = SLUICE_OWN_DECIDING;
	assert_int_equal(bpf_map_update_elem(h->f.m.flows, &fk, &fv, BPF_EXIST), 0);
	assert_int_equal(bpf_map_lookup_elem(h->f.m.inflight, &k, &in), 0);
	in.total += 2, in.cls[1] += 2;
	assert_int_equal(bpf_map_update_elem(h->f.m.inflight, &k, &in, BPF_ANY), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	/* The decision done (nothing taken): at rest now, corrected by the second sweep. */
	fv.req_active = 0;
	assert_int_equal(bpf_map_update_elem(h->f.m.flows, &fk, &fv, BPF_EXIST), 0);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 1);
	assert_int_equal(recon.slot[k].corrections, 2);
	assert_int_equal(net(h, 0, 0), 0);
	/* A request under way between two sweeps (the change counts move): no correction. */
	struct pkt_spec d = data_of(&c);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	run(h, h->sk->progs.sluice_tc_ingress, &d);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_int_equal(net(h, 0, 0), 1);
	assert_int_equal(recon.slot[k].corrections, 2);

	/* A leak corrected whose busy release cannot be written: the in-flight release that
	 * was written is still a correction (sluiced re-reads the releases on it), not an
	 * error that hides it. */
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	LIBBPF_OPTS(bpf_get_fd_by_id_opts, ro, .open_flags = BPF_F_RDONLY);
	int busy_rel = h->f.m.busy_released, ro_fd;

	assert_int_equal(bpf_obj_get_info_by_fd(busy_rel, &info, &len), 0);
	assert_true((ro_fd = bpf_map_get_fd_by_id_opts(info.id, &ro)) >= 0);
	assert_int_equal(bpf_map_lookup_elem(h->f.m.inflight, &k, &in), 0);
	in.total += 3, in.cls[2] += 3;
	assert_int_equal(bpf_map_update_elem(h->f.m.inflight, &k, &in, BPF_ANY), 0);
	h->f.m.busy_released = ro_fd;
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 0);
	assert_int_equal(maps_reconcile(&h->f.m, &recon), 1);
	h->f.m.busy_released = busy_rel;
	close(ro_fd);
	assert_int_equal(net(h, 0, 0), 1);
	recon_free(&recon);
}

static unsigned long long samples_of(struct hfix *h, int svc, int cls)
{
	struct sluice_hist hs;
	unsigned long long n = 0;

	assert_int_equal(maps_read_hist(&h->f.m, h->f.idx[svc], cls, &hs), 0);
	for (int b = 0; b < SLUICE_HIST_BUCKETS; b++)
		n += hs.bucket[b];
	return n;
}

/* A SYN to the capped service beyond what conn() opened: 1 when it was let through. */
static int cap_admits(struct hfix *h, uint16_t sport)
{
	struct pkt_spec syn = { .src = "198.18.1.7", .dst = SERVER4, .sport = sport, .dport = 5433,
				.seq = 1000u + sport, .syn = 1 };

	return run(h, h->sk->progs.sluice_xdp_ingress, &syn) == XDP_PASS;
}

/* The open-connection cap counts the connection slots the ownership words hold: each goes back
 * exactly once whatever ends the connection, and however many endings race for it (a reply
 * carrying FIN then the client's FIN, RSTs of both sides while a turn is open, a FIN just as a
 * turn opens, the GC). After every round the open count is exactly 0 and the cap (3) admits
 * exactly 3 again: one slot given back twice would let a fourth in, one never given back would
 * keep one out. A connection's held-back first turn is given by its end exactly once. */
static void test_conn_cap_exact_under_every_ending(void **state)
{
	struct hfix *h = *state;
	struct sluice_conn_cap cc;
	int refused = 0;

	for (int round = 0; round < 3; round++) {
		uint16_t base = (uint16_t)(7000 + 10 * round);
		struct pkt_spec c[3];

		for (int i = 0; i < 3; i++)
			c[i] = conn(h, (uint16_t)(base + i), 5433);
		assert_int_equal(net(h, 2, 0), 3);
		assert_false(cap_admits(h, (uint16_t)(base + 5)));
		refused++;
		if (round == 2) { /* silent connections: the GC ends them */
			assert_int_equal(gc_all(h), 3);
		} else {
			/* a turn open, the reply carries the server's FIN, then the client's FIN */
			struct pkt_spec q0 = data_of(&c[0]), r0 = server_seg(&c[0], 0, 0), f0 = c[0];
			run(h, h->sk->progs.sluice_tc_ingress, &q0);
			assert_int_equal(net(h, 2, 1), 1);
			r0.fin = 1;
			run(h, h->sk->progs.sluice_tc_egress, &r0);
			f0.fin = 1, f0.seq += 18;
			run(h, h->sk->progs.sluice_xdp_ingress, &f0);
			/* a turn open, the client's RST, then the server's */
			struct pkt_spec q1 = data_of(&c[1]), x1 = c[1], s1 = server_seg(&c[1], 0, 1);
			run(h, h->sk->progs.sluice_tc_ingress, &q1);
			x1.rst = 1, x1.ackf = 0, x1.ack = 0, x1.seq += 18;
			run(h, h->sk->progs.sluice_xdp_ingress, &x1);
			run(h, h->sk->progs.sluice_tc_egress, &s1);
			/* the flow ends (a server FIN, or the GC) just as a turn opens on it */
			struct pkt_spec q2 = data_of(&c[2]);
			arm(h, HOOK_TURN, HOOK_END, 0);
			run(h, h->sk->progs.sluice_tc_ingress, &q2);
			assert_int_equal(fired(h), 1);
		}
		assert_int_equal(flows(h), 0);
		assert_int_equal(net(h, 2, 0), 0);
		assert_int_equal(net(h, 2, 1), 0);
		/* c[0]'s single turn was held back as a setup and given by its end, once although
		 * two endings came; the turns cut short and the GC give none */
		assert_int_equal(samples_of(h, 2, 0), round < 2 ? round + 1 : 2);
	}
	/* exactly the cap again, and no more */
	for (int i = 0; i < 3; i++)
		conn(h, (uint16_t)(7100 + i), 5433);
	assert_false(cap_admits(h, 7105));
	refused++;
	assert_int_equal(maps_read_conn_cap(&h->f.m, h->f.idx[2], &cc), 0);
	assert_int_equal(cc.rejected[0], refused);
	assert_int_equal(gc_all(h), 3);
	assert_int_equal(net(h, 2, 0), 0);
	assert_all_zero(h);
}

/* The admission bound with the in-flight striped per CPU: one thread pinned per CPU takes
 * slots (tests/bpf/inflight_unit.bpf.c) against a threshold of T, all at once, never giving
 * one back: exactly T are admitted over all CPUs, and in-flight is exactly T. */
struct taker {
	int cpu, fd, admitted;
	pthread_barrier_t *go;
};

static void *take_many(void *arg)
{
	struct taker *t = arg;
	unsigned char pkt[64] = { 0 };
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(t->go);
	for (int i = 0; i < 3000; i++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt),
			    .repeat = 1);
		if (bpf_prog_test_run_opts(t->fd, &o) == 0 && o.retval == XDP_PASS)
			t->admitted++;
	}
	return NULL;
}

/* The inflight_unit object loaded unpinned, service 0 with every class's threshold thr, a
 * fresh heartbeat; the in-flight estimate on (as sluiced runs) or off. */
static struct inflight_unit_bpf *unit_load(__u32 thr, int estimate, struct sluice_maps *m)
{
	struct inflight_unit_bpf *sk = inflight_unit_bpf__open();
	struct sluice_verdict v = { .limit = thr };
	struct sluice_globals g = { .heartbeat_timeout_ns = 3600 * S_NS };
	struct bpf_map *map;

	assert_non_null(sk);
	bpf_object__for_each_map(map, sk->obj)
		bpf_map__set_pin_path(map, NULL);
	assert_int_equal(inflight_unit_bpf__load(sk), 0);
	assert_int_equal(harness_maps_of(sk->obj, m), 0);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		v.class_threshold[c] = thr;
	g.heartbeat_ns = monotonic_ns();
	assert_int_equal(maps_write_verdict(m, 0, &v), 0);
	assert_int_equal(maps_write_globals(m, &g), 0);
	if (estimate)
		assert_int_equal(maps_fold_estimate(m), libbpf_num_possible_cpus());
	return sk;
}

/* prog run n times on CPU cpu from this thread: how many passed (XDP_PASS). */
static int run_on(int prog_fd, int cpu, int n)
{
	unsigned char pkt[64] = { 0 };
	cpu_set_t set, old;
	int passed = 0;

	sched_getaffinity(0, sizeof(old), &old);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
	for (int i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt),
			    .repeat = 1);
		assert_int_equal(bpf_prog_test_run_opts(prog_fd, &o), 0);
		passed += o.retval == XDP_PASS;
	}
	sched_setaffinity(0, sizeof(old), &old);
	return passed;
}

/* The stripes of slot k, class cls, written from user space as a pin from an older load (or a
 * CPU that never published) would hold them: on_cpu0 on CPU 0, on_cpu1 on CPU 1, 0 elsewhere. */
static void write_stripes(int map_fd, __u32 k, int cls, __s64 on_cpu0, __s64 on_cpu1)
{
	int ncpus = libbpf_num_possible_cpus();
	struct sluice_inflight v[ncpus];

	memset(v, 0, sizeof(v));
	v[0].cls[cls] = on_cpu0;
	v[1].cls[cls] = on_cpu1;
	assert_int_equal(bpf_map_update_elem(map_fd, &k, v, BPF_ANY), 0);
}

/* CPU 1's stripe of service 0, class 2 (the inflight_unit object's). */
static void set_stripe(struct inflight_unit_bpf *sk, __s64 n)
{
	write_stripes(bpf_map__fd(sk->maps.inflight_pcpu), 0, 2, 0, n);
}

static void test_striped_admission_bound_is_exact(void **state)
{
	int n = (int)sysconf(_SC_NPROCESSORS_ONLN);

	if (n > 8)
		n = 8;
	/* near its threshold a take reads every stripe whether the estimate is on or not */
	for (int estimate = 0; estimate < 2; estimate++) {
		struct sluice_inflight in;
		struct sluice_maps m;
		struct inflight_unit_bpf *sk = unit_load(700, estimate, &m);
		struct taker t[8];
		pthread_t th[8];
		pthread_barrier_t go;
		int total = 0;

		pthread_barrier_init(&go, NULL, (unsigned)n);
		for (int i = 0; i < n; i++)
			t[i] = (struct taker){ .cpu = i, .fd = bpf_program__fd(sk->progs.unit_take),
					       .go = &go };
		for (int i = 0; i < n; i++)
			pthread_create(&th[i], NULL, take_many, &t[i]);
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], NULL);
			total += t[i].admitted;
		}
		pthread_barrier_destroy(&go);
		assert_int_equal(total, 700);
		assert_int_equal(maps_read_inflight(&m, 0, &in), 0);
		assert_int_equal(in.total, 700);
		assert_int_equal(in.cls[2], 700);
		inflight_unit_bpf__destroy(sk);
	}
}

/* Far below its threshold a take trusts the estimate and reads no other CPU's stripe: with an
 * amount on CPU 1 that was never published (forged from user space after the estimate was
 * filled), takes on CPU 0 are admitted exactly while their own count plus the bound's
 * allowance for the other CPUs, (CPUs - 1) x batch x 4 classes, stays below the threshold,
 * and from there the take reads every stripe and sees CPU 1's amount. */
static void test_far_below_threshold_reads_no_other_stripe(void **state)
{
	int cpus = libbpf_num_possible_cpus();
	__u32 allowance = (__u32)(cpus - 1) * SLUICE_STRIPE_BATCH * SLUICE_NUM_CLASSES;
	struct sluice_maps m;
	struct inflight_unit_bpf *sk;

	if (cpus < 2 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		print_message("# skip reason: one CPU (the test needs a second one)\n");
		skip();
	}
	sk = unit_load(allowance + 44, 1, &m);
	set_stripe(sk, 1000000);
	assert_int_equal(run_on(bpf_program__fd(sk->progs.unit_take), 0, 100), 44);
	inflight_unit_bpf__destroy(sk);
	/* the same with the estimate off: every take reads CPU 1's stripe */
	sk = unit_load(allowance + 44, 0, &m);
	set_stripe(sk, 1000000);
	assert_int_equal(run_on(bpf_program__fd(sk->progs.unit_take), 0, 100), 0);
	inflight_unit_bpf__destroy(sk);
}

/* A stripe older than the estimate (a pin from an earlier load) is in it once it is filled:
 * 50 units on CPU 1 from before, a threshold of 60, and CPU 0 gets exactly 10. */
static void test_estimate_counts_stripes_older_than_it(void **state)
{
	struct sluice_maps m;
	struct sluice_inflight in;
	struct inflight_unit_bpf *sk;

	if (libbpf_num_possible_cpus() < 2 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		print_message("# skip reason: one CPU (the test needs a second one)\n");
		skip();
	}
	sk = unit_load(60, 0, &m);
	set_stripe(sk, 50);
	assert_true(maps_fold_estimate(&m) >= 2);
	assert_int_equal(run_on(bpf_program__fd(sk->progs.unit_take), 0, 100), 10);
	assert_int_equal(maps_read_inflight(&m, 0, &in), 0);
	assert_int_equal(in.total, 60);
	inflight_unit_bpf__destroy(sk);
}

/* Units taken on one CPU and given back on another: the taker publishes as it goes, the CPU
 * that only gives back publishes nothing itself, so the estimate runs above the true count
 * (never below it) until the fold that the tick's read of the counts does from any CPU
 * (sluice_publish_stripes here, sluice_copy_counts in sluiced: test_tick_read_folds_stripes)
 * brings it to exactly the stripes' sum. In-flight is exactly 0 throughout. */
static void test_estimate_follows_takes_and_releases_on_other_cpus(void **state)
{
	int cpus = libbpf_num_possible_cpus();
	struct sluice_inflight in, pub[cpus];
	struct sluice_inflight_est est;
	struct sluice_maps m;
	struct inflight_unit_bpf *sk;
	__u32 zero = 0;

	if (cpus < 2 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		print_message("# skip reason: one CPU (the test needs a second one)\n");
		skip();
	}
	sk = unit_load(1u << 30, 1, &m);
	for (int round = 0; round < 3; round++) {
		assert_int_equal(run_on(bpf_program__fd(sk->progs.unit_take), 0, 1000), 1000);
		assert_int_equal(run_on(bpf_program__fd(sk->progs.unit_release), 1, 1000), 1000);
	}
	assert_int_equal(maps_read_inflight(&m, 0, &in), 0);
	assert_int_equal(in.total, 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(sk->maps.inflight_pub), &zero, pub), 0);
	assert_true(pub[0].cls[2] > 3000 - SLUICE_STRIPE_BATCH);
	assert_int_equal(pub[1].cls[2], 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(sk->maps.inflight_est), &zero, &est), 0);
	assert_true(est.cls[2] > 3000 - SLUICE_STRIPE_BATCH);
	assert_true(maps_fold_estimate(&m) >= 2);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(sk->maps.inflight_est), &zero, &est), 0);
	assert_int_equal(est.cls[2], 0);
	inflight_unit_bpf__destroy(sk);
}

/* The tick's read of an http service's in-flight (sluice_copy_counts) folds every CPU's
 * unpublished change into the estimate: stripes of +7 on CPU 0 and -5 on CPU 1, nothing
 * published, read as 2 and leave the estimate at exactly 2, each CPU's share at its stripe. */
static void test_tick_read_folds_stripes(void **state)
{
	struct hfix *h = *state;
	int cpus = libbpf_num_possible_cpus();
	struct sluice_inflight pub[cpus];
	struct sluice_inflight_est est;
	__u32 k = (__u32)h->f.idx[0];
	struct sluice_copy_counts a = { .first = k, .n = 1, .what = SLUICE_COPY_INFLIGHT };
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));
	struct sluice_inflight in;

	if (cpus < 2) {
		print_message("# skip reason: one CPU (the test needs a second one)\n");
		skip();
	}
	write_stripes(bpf_map__fd(h->sk->maps.inflight_pcpu), k, 1, 7, -5);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(h->sk->maps.inflight_est), &k, &est), 0);
	assert_int_equal(est.cls[1], 0);
	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(h->sk->progs.sluice_copy_counts), &o), 0);
	assert_int_equal(a.copied, 1);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(h->sk->maps.inflight_copy), &k, &in), 0);
	assert_int_equal(in.cls[1], 2);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(h->sk->maps.inflight_est), &k, &est), 0);
	assert_int_equal(est.cls[1], 2);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(h->sk->maps.inflight_pub), &k, pub), 0);
	assert_int_equal(pub[0].cls[1], 7);
	assert_int_equal(pub[1].cls[1], -5);
	/* back to nothing in flight */
	write_stripes(bpf_map__fd(h->sk->maps.inflight_pcpu), k, 1, 0, 0);
}

/* sluiced's fold once a second (maps_fold_estimate), for services whose in-flight the tick read
 * with a lookup of its own: stripes of +9 on CPU 0 and -6 on CPU 1, nothing published, leave
 * the estimate at exactly 3 and keep it on. */
static void test_daemon_fold_publishes_what_cpus_gave_back(void **state)
{
	struct hfix *h = *state;
	int cpus = libbpf_num_possible_cpus();
	struct sluice_inflight_est est;
	__u32 k = (__u32)h->f.idx[0];

	if (cpus < 2) {
		print_message("# skip reason: one CPU (the test needs a second one)\n");
		skip();
	}
	write_stripes(bpf_map__fd(h->sk->maps.inflight_pcpu), k, 3, 9, -6);
	assert_int_equal(maps_fold_estimate(&h->f.m), cpus);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(h->sk->maps.inflight_est), &k, &est), 0);
	assert_int_equal(est.cls[3], 3);
	write_stripes(bpf_map__fd(h->sk->maps.inflight_pcpu), k, 3, 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fin_between_claim_and_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fin_and_reuse_between_claim_and_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_request_and_rst_in_one_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_racing_a_claim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_turn_racing_an_end_and_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconcile_exact_and_only_at_rest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_conn_cap_exact_under_every_ending, setup, teardown),
		cmocka_unit_test(test_striped_admission_bound_is_exact),
		cmocka_unit_test(test_far_below_threshold_reads_no_other_stripe),
		cmocka_unit_test(test_estimate_counts_stripes_older_than_it),
		cmocka_unit_test(test_estimate_follows_takes_and_releases_on_other_cpus),
		cmocka_unit_test_setup_teardown(test_tick_read_folds_stripes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_daemon_fold_publishes_what_cpus_gave_back, setup,
						teardown),
	};

	/* Replies may be redirected: keep them inside a private network namespace. */
	if (unshare(CLONE_NEWNET) != 0)
		perror("unshare(CLONE_NEWNET)");
	return cmocka_run_group_tests_name("ownership", tests, NULL, NULL);
}
