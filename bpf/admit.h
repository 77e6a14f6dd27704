/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Classification, admission and unit accounting, shared by the ingress programs.
 * Admission order: switch -> breaker -> headroom -> ladder. Anything missing (no
 * verdict, stale heartbeat) admits: on doubt, admit. */
#ifndef SLUICE_ADMIT_H
#define SLUICE_ADMIT_H

#include "maps.h"
#include "unread.h"
#include "parse.h"

/* A plain read the compiler makes exactly once (what a compare-and-swap is then tried with). */
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

/* One more change of the accounting of svc, counted after it (see own_ops in maps.h). */
static __always_inline void own_bump(__u32 svc)
{
	__u32 zero = 0;
	struct own_ops *o = bpf_map_lookup_elem(&own_ops, &zero);

	if (o)
		o->n[svc & (SLUICE_OWN_OPS_BUCKETS - 1)]++;
}

static __always_inline struct sluice_class_stats *class_stats_of(__u32 svc, __u32 cls)
{
	struct sluice_svc_stats *v = bpf_map_lookup_elem(&class_stats, &svc);

	return v ? &v->cls[cls & (SLUICE_NUM_CLASSES - 1)] : NULL;
}

/* The first matching classify rule wins: each rule kind yields its best (lowest-order) match
 * and the lowest order overall picks the class. */
struct class_pick {
	__u8 order;
	__u8 class;
	__u8 ignored;   /* lowest order of a rule whose mark was ignored (an untrusted source),
			 * SLUICE_RULE_NONE when none */
};

static __always_inline void pick_rule(struct class_pick *best, __u8 order, __u8 cls)
{
	if (order < best->order) {
		best->order = order;
		best->class = cls;
	}
}

/* 1 when k (a key under svc | SLUICE_SRC_TRUST) is inside the service's trust_from: a
 * prefix holds it, and not the v4-mapped range's own entry (SLUICE_SRC_UNTRUSTED). */
static __always_inline int trust_lookup(const struct sluice_src_key *k)
{
	struct sluice_src_rule *r = bpf_map_lookup_elem(&source_rules, k);

	return r && r->class != SLUICE_SRC_UNTRUSTED;
}

/* 1 when the address (v4-mapped for IPv4) is inside the service's trust_from (see
 * SLUICE_SRC_TRUST). */
static __always_inline int addr_trusted(__u32 svc, const __u8 addr[16])
{
	struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc | SLUICE_SRC_TRUST };

	__builtin_memcpy(k.addr, addr, 16);
	return trust_lookup(&k);
}

/* 1 when the packet's source is inside the service's trust_from. */
static __always_inline int source_trusted(__u32 svc, const struct pkt *p)
{
	struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc | SLUICE_SRC_TRUST };

	pkt_addr(p, 1, k.addr);
	return trust_lookup(&k);
}

/* What `source_rules` says of a unit's source: its source rule (order SLUICE_RULE_NONE: none
 * covers it) and whether it is inside trust_from (-1: not looked up yet, source_trust_of
 * does when a rule needs it). From the trie, or from the flow's cache (http). */
struct src_answer {
	__u8 order;
	__u8 class;
	__s8 trusted;
};

static __always_inline int source_trust_of(struct src_answer *a, __u32 svc, const struct pkt *p)
{
	if (a->trusted < 0)
		a->trusted = source_trusted(svc, p);
	return a->trusted;
}

/* The source rule covering k's address for k's service, from the trie. */
static __always_inline void source_rule_at(const struct sluice_src_key *k, struct src_answer *a)
{
	struct sluice_src_rule *r = bpf_map_lookup_elem(&source_rules, k);

	a->order = r ? r->order : SLUICE_RULE_NONE;
	a->class = r ? r->class & 3 : 0;
	a->trusted = -1;
}

/* Source-prefix and DSCP rules: everything a SYN can be judged by, given what the trie says
 * of the source (a). A DSCP mark counts only from a trusted source (anyone can set one); from
 * any other it is noted in `ignored`. */
static __always_inline struct class_pick classify_l3_with(const struct sluice_service *sc,
							  __u32 svc, const struct pkt *p,
							  struct src_answer *a)
{
	struct class_pick best = { .order = SLUICE_RULE_NONE, .class = sc->default_class,
				   .ignored = SLUICE_RULE_NONE };
	__u8 d;

	if (a->order != SLUICE_RULE_NONE)
		pick_rule(&best, a->order, a->class);
	d = sc->dscp_rule[p->dscp & 63];
	if (d != SLUICE_RULE_NONE) {
		if (source_trust_of(a, svc, p))
			pick_rule(&best, d >> 2, d & 3);
		else
			best.ignored = d >> 2;
	}
	return best;
}

static __always_inline struct class_pick classify_l3(const struct sluice_service *sc,
						     __u32 svc, const struct pkt *p)
{
	struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc };
	struct src_answer a;

	pkt_addr(p, 1, k.addr);
	source_rule_at(&k, &a);
	return classify_l3_with(sc, svc, p, &a);
}

/* 1 when some rule of the service reads a priority mark (the header, a DSCP value): only
 * then does trust_from matter to it. Eight words of dscp_rule, all SLUICE_RULE_NONE bytes
 * when no DSCP rule is configured. */
static __always_inline int service_reads_marks(const struct sluice_service *sc)
{
	__u64 all = ~0ull;

	if (sc->header_order != SLUICE_RULE_NONE)
		return 1;
#pragma unroll
	for (int i = 0; i < 64; i += 8)
		all &= *(const __u64 *)&sc->dscp_rule[i];
	return all != ~0ull;
}

/* The source answer an http flow caches when it is created (sluice_flow._pad), for the client
 * at addr (the new flow's key). 0 (nothing cached) for a source rule of order 15 or more. */
static __always_inline __u8 source_cache_of(const struct sluice_service *sc, __u32 svc,
					    const __u8 addr[16])
{
	struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc };
	struct src_answer a;
	__u8 c = SLUICE_SRC_CACHED;

	__builtin_memcpy(k.addr, addr, 16);
	source_rule_at(&k, &a);
	if (a.order == SLUICE_RULE_NONE)
		c |= SLUICE_SRC_NO_RULE;
	else if (a.order < SLUICE_SRC_NO_RULE)
		c |= a.order | (a.class << SLUICE_SRC_CLASS_SHIFT);
	else
		return 0;
	/* A service whose rules read no mark never asks for trust: no lookup (a rewrite that
	 * adds such a rule stamps the service, and this answer no longer counts). */
	k.svc = svc | SLUICE_SRC_TRUST;
	if (service_reads_marks(sc) && trust_lookup(&k))
		c |= SLUICE_SRC_TRUSTED;
	return c;
}

/* The cached answer c as a src_answer. */
static __always_inline void source_answer_of_cache(__u8 c, struct src_answer *a)
{
	a->order = (c & SLUICE_SRC_ORDER) == SLUICE_SRC_NO_RULE ? SLUICE_RULE_NONE :
		   (c & SLUICE_SRC_ORDER);
	a->class = (c >> SLUICE_SRC_CLASS_SHIFT) & 3;
	a->trusted = !!(c & SLUICE_SRC_TRUSTED);
}

/* Count the unit in untrusted_marks when a mark it carried was ignored and would have decided
 * its class (a rule of lower order than the one that did). Only such a unit pays the lookup. */
static __always_inline void count_untrusted(__u32 svc, const struct class_pick *pick)
{
	struct sluice_untrusted *u;

	if (pick->ignored >= pick->order)
		return;
	u = bpf_map_lookup_elem(&untrusted_marks, &svc);
	if (u)
		u->ignored++;
}

/* 1 when a draw refuses at shed fraction `shed` (0 = never, SLUICE_PROB_ONE = always). */
static __always_inline int draw_refused(__u32 shed)
{
	if (!shed)
		return 0;
	if (shed >= SLUICE_PROB_ONE)
		return 1;
	return (bpf_get_prandom_u32() & (SLUICE_PROB_ONE - 1)) < shed;
}

static __always_inline int controller_alive(__u64 now)
{
	__u32 zero = 0;
	struct sluice_globals *g = bpf_map_lookup_elem(&globals, &zero);

	__s64 age;

	if (!g || !g->heartbeat_ns)
		return 0;
	/* Signed: a SYN reads the coarse clock, up to a tick behind the one the heartbeat was
	 * stamped with, and a heartbeat a moment "from the future" is a fresh one. One further
	 * ahead than that was not stamped on this host's clock: a doubt, so not alive. */
	age = (__s64)(now - g->heartbeat_ns);
	return age <= (__s64)g->heartbeat_timeout_ns && age >= -2 * (__s64)SLUICE_COARSE_TICK_NS;
}

/* Whether svc's half-open counts have lapsed: started over SLUICE_HALFOPEN_TIMEOUT_NS before
 * now. Signed: a SYN reads the coarse clock (a tick behind the exact one), and another CPU may
 * have started the counts a moment after this one read its clock: the counts are current. */
static __always_inline int halfopen_lapsed(const struct sluice_halfopen *h, __u64 now)
{
	return (__s64)(now - READ_ONCE(h->since_ns)) > (__s64)SLUICE_HALFOPEN_TIMEOUT_NS;
}

/* Admitted handshakes of svc that count against L1..L3's headroom now (see sluice_halfopen),
 * with its fresh connections too when with_fresh (for the busy count, which they are not in
 * yet; the open-connection count already has them): none once the counts have lapsed, at
 * most limit / SLUICE_HALFOPEN_SHARE. */
static __always_inline __s64 halfopen_pending(__u32 svc, __u64 now, __u32 limit, int with_fresh)
{
	struct sluice_halfopen *h = bpf_map_lookup_elem(&halfopen, &svc);
	__s64 n, f, cap = limit / SLUICE_HALFOPEN_SHARE;

	if (!h || halfopen_lapsed(h, now))
		return 0;
	n = h->count;
	f = with_fresh ? h->fresh : 0;
	n = (n < 0 ? 0 : n) + (f < 0 ? 0 : f);
	return n > cap ? cap : n;
}

static __always_inline void halfopen_add(__u32 svc, __u64 now)
{
	struct sluice_halfopen *h = bpf_map_lookup_elem(&halfopen, &svc);

	if (!h)
		return;
	if (halfopen_lapsed(h, now)) {
		/* Lapsed: start afresh. Racing CPUs may lose a count here: the error is towards
		 * admitting, and lasts one timeout at most. */
		h->since_ns = now;
		h->count = 1;
		h->fresh = 0;
		return;
	}
	__sync_fetch_and_add(&h->count, 1);
}

/* Whether a handshake whose SYN was counted at syn_ns is still in the current counts (not
 * lapsed, and not from before a restart of them). */
static __always_inline struct sluice_halfopen *halfopen_current(__u32 svc, __u64 syn_ns,
								 __u64 now)
{
	struct sluice_halfopen *h = bpf_map_lookup_elem(&halfopen, &svc);

	if (!h || halfopen_lapsed(h, now) || (__s64)(syn_ns - h->since_ns) < 0)
		return NULL;
	return h;
}

/* A handshake whose SYN was counted at syn_ns ended before it completed (refused, reset,
 * replaced): its count is given back only while it is in the current counts (a count from a
 * window that lapsed is gone already; giving it back would take another SYN's). */
static __always_inline void halfopen_done(__u32 svc, __u64 syn_ns, __u64 now)
{
	struct sluice_halfopen *h = halfopen_current(svc, syn_ns, now);

	if (h && h->count > 0)
		__sync_fetch_and_add(&h->count, -1);
}

/* A handshake completed: it counts on as a fresh connection until its client's first data.
 * 1 when it was counted (the flow then carries SLUICE_OWN_PENDING). */
static __always_inline int halfopen_promoted(__u32 svc, __u64 syn_ns, __u64 now)
{
	struct sluice_halfopen *h = halfopen_current(svc, syn_ns, now);

	if (!h)
		return 0;
	if (h->count > 0)
		__sync_fetch_and_add(&h->count, -1);
	__sync_fetch_and_add(&h->fresh, 1);
	return 1;
}

/* A fresh connection sent its first data or ended (its word's SLUICE_OWN_PENDING was swapped
 * out by this caller). */
static __always_inline void halfopen_fresh_done(__u32 svc, __u64 syn_ns, __u64 now)
{
	struct sluice_halfopen *h = halfopen_current(svc, syn_ns, now);

	if (h && h->fresh > 0)
		__sync_fetch_and_add(&h->fresh, -1);
}

/* In-flight that class cls is compared with: the service's total, or with priority counting
 * the classes 0..cls; both net of what the controller's GC released. */
static __always_inline __s64 in_use_of(const struct sluice_inflight *inf,
				       const struct sluice_inflight *rel, __u32 cls, int prio)
{
	__s64 n = 0;

	if (!prio)
		return inf->total - (rel ? rel->total : 0);
	for (__u32 j = 0; j < SLUICE_NUM_CLASSES; j++) {
		if (j > cls)
			break;
		n += inf->cls[j];
	}
	if (!rel)
		return n;
	for (__u32 j = 0; j < SLUICE_NUM_CLASSES; j++) {
		if (j > cls)
			break;
		n -= rel->cls[j];
	}
	return n;
}

/* CPUs the in-flight estimate's bound counts; 0 until sluice_publish_stripes has put every
 * CPU's stripe into it, and while 0 every take near a threshold or not reads all the stripes.
 * Per load, like the estimate. */
volatile __u32 sluice_estimate_cpus;

/* Move d of a CPU's change of class c into the estimate: to the estimate first, then to the
 * CPU's published share, each atomically, so that whatever interleaves (the GC's program in
 * process context interrupted by a packet's on the same CPU, or sluiced's fold from another
 * CPU) the estimate never holds less than the shares. */
static __always_inline void move_to_estimate(struct sluice_inflight_est *est,
					     struct sluice_inflight *pub, __u32 c, __s64 d)
{
	__sync_fetch_and_add(&est->cls[c & 3], d);
	__sync_fetch_and_add(&pub->cls[c & 3], d);
}

/* Publish this CPU's unpublished change of class cls (own: its stripe's count, pub: its share)
 * once it reaches the batch either way (struct sluice_inflight_est), so that no CPU's
 * unpublished change exceeds SLUICE_STRIPE_BATCH past the take that made it. */
static __always_inline void publish_if_due(__s64 own, struct sluice_inflight *pub,
					   struct sluice_inflight_est *est, __u32 cls)
{
	__s64 d = own - READ_ONCE(pub->cls[cls & 3]);

	if (d >= SLUICE_STRIPE_BATCH || d <= -SLUICE_STRIPE_RELEASE_BATCH)
		move_to_estimate(est, pub, cls, d);
}

/* A take's work on the estimate, after its add to this CPU's stripe of (svc, cls), which left
 * the stripe's count at own: publish the change when due, and return an upper bound of what
 * the other CPUs' stripes of svc hold in the classes of mask, from the estimate and this CPU's
 * share; -1 when the estimate is off (cpus 0: not filled yet, or a take with no threshold,
 * which needs no bound). The stripe's count comes from the take's own add, not a second
 * lookup. A function of its own, called without a branch around it: verified once (inlined,
 * its branches added a sixth to what the verifier walks for TC ingress), and one call a take. */
__attribute__((noinline))
__s64 sluice_take_estimate(__u32 svc, __u32 cls, __s64 own, __u32 mask, __u32 cpus)
{
	struct sluice_inflight *pub = bpf_map_lookup_elem(&inflight_pub, &svc);
	struct sluice_inflight_est *est = bpf_map_lookup_elem(&inflight_est, &svc);
	/* the classes counted: a CPU holds at most a batch unpublished in each */
	__u32 m = (mask & 1) + (mask >> 1 & 1) + (mask >> 2 & 1) + (mask >> 3 & 1);
	__s64 n;

	if (!pub || !est)
		return -1;
	publish_if_due(own, pub, est, cls);
	if (!cpus || cpus > SLUICE_MAX_CPUS)
		return -1;
	n = (__s64)(cpus - 1) * SLUICE_STRIPE_BATCH * m;
	/* without a branch per class: each one doubles what the verifier walks after it */
#pragma unroll
	for (__u32 j = 0; j < SLUICE_NUM_CLASSES; j++)
		n += (READ_ONCE(est->cls[j]) - READ_ONCE(pub->cls[j])) &
		     -(__s64)((mask >> j) & 1);
	return n;
}

/* Add d to this CPU's stripe of (svc, cls) in `inflight_pcpu`. Atomic although no other CPU
 * writes the stripe: a program in process context (the GC's) may be interrupted by one in
 * softirq on the same CPU. */
static __always_inline void stripe_add(__u32 svc, __u32 cls, __s64 d)
{
	struct sluice_inflight *s = bpf_map_lookup_elem(&inflight_pcpu, &svc);

	if (s)
		__sync_fetch_and_add(&s->cls[cls & 3], d);
}

/* One unit taken on this CPU's stripe without a threshold (failing open, a connection slot)
 * and published when due, as every take is: the estimate's bound holds only while no CPU
 * holds more than a batch of takes unpublished. */
static __always_inline void stripe_take(__u32 svc, __u32 cls)
{
	struct sluice_inflight *s = bpf_map_lookup_elem(&inflight_pcpu, &svc);

	if (s)
		sluice_take_estimate(svc, cls, __sync_fetch_and_add(&s->cls[cls & 3], 1) + 1, 0, 0);
}

/* One unit given back on this CPU's stripe. It publishes nothing itself: it only lowers the
 * true count, which the estimate may run above; the next take on this CPU publishes it once it
 * is a batch, and sluiced folds in what CPUs that only give back have left (once a second, and
 * at a tick's in-kernel read of the counts: fold_stripe). */
static __always_inline void stripe_give_back(__u32 svc, __u32 cls)
{
	stripe_add(svc, cls, -1);
}

struct stripe_sum {
	__u32 svc, me, mask;             /* mask: the classes counted */
	__u32 first;                     /* the CPU bpf_loop's step 0 reads */
	__s64 n;
};

/* CPU cpu's stripe into s; 1 past the last CPU. */
static __always_inline long stripe_add_cpu(__u32 cpu, struct stripe_sum *s)
{
	struct sluice_inflight *x;

	if (cpu == s->me)
		return 0;
	x = bpf_map_lookup_percpu_elem(&inflight_pcpu, &s->svc, cpu);
	if (!x)
		return 1;
	for (__u32 j = 0; j < SLUICE_NUM_CLASSES; j++)
		if (s->mask & (1u << j))
			s->n += x->cls[j];
	return 0;
}

static long stripe_sum_one(__u32 i, void *ctx)
{
	struct stripe_sum *s = ctx;

	return stripe_add_cpu(s->first + i, s);
}

/* The stripes of every CPU but s->me into s->n. The first few CPUs open-coded: a bpf_loop
 * step is a call and a return of its own per CPU, which on a host whose returns go through a
 * mitigation thunk cost more than the lookups; the rest, on a larger host, by bpf_loop. */
#define STRIPES_OPEN_CODED 4
static __always_inline void sum_stripes(struct stripe_sum *s)
{
#pragma unroll
	for (__u32 cpu = 0; cpu < STRIPES_OPEN_CODED; cpu++)
		if (stripe_add_cpu(cpu, s))
			return;
	s->first = STRIPES_OPEN_CODED;
	bpf_loop(SLUICE_MAX_CPUS - STRIPES_OPEN_CODED, stripe_sum_one, s, 0);
}

/* Take one slot of (svc, cls) on this CPU's stripe and return the in-flight it is compared
 * with, before it: the classes 0..cls with priority counting, else all, over every stripe,
 * plus what older layouts counted in the shared `inflight` (base), net of the GC's releases.
 * With no threshold (thr 0) nothing is compared and nothing else is read. Far below thr, the
 * other CPUs' share is bounded from the estimate (sluice_take_estimate) and their stripes are not
 * read; otherwise they are: the take is a full-barrier read-modify-write and every other stripe
 * is read after it, so of two CPUs racing for the last slot the later one sees the earlier's
 * take, and the bound is as exact as with one shared counter. */
static __always_inline __s64 take_slot(__u32 svc, __u32 cls, int prio, __u32 thr,
				       const struct sluice_inflight *base,
				       const struct sluice_inflight *rel)
{
	struct sluice_inflight *own = bpf_map_lookup_elem(&inflight_pcpu, &svc);
	__u32 mask = prio ? (2u << cls) - 1 : 15u;
	/* Read before the take's barrier: a CPU that sees the estimate on then reads it whole. */
	__u32 cpus = sluice_estimate_cpus;
	__s64 n, others;

	if (!own)
		return 0;
	n = __sync_fetch_and_add(&own->cls[cls], 1);
	others = sluice_take_estimate(svc, cls, n + 1, mask, thr ? cpus : 0);
	if (!thr)
		return 0;
	for (__u32 j = 0; j < SLUICE_NUM_CLASSES; j++) {
		if (!(mask & (1u << j)))
			continue;
		if (j != cls)
			n += own->cls[j];
		n += base->cls[j] - (rel ? rel->cls[j] : 0);
	}
	if (others >= 0 && n + others < (__s64)thr)
		return n + others;
	{
		struct stripe_sum s = { .svc = svc, .me = bpf_get_smp_processor_id(), .mask = mask };

		sum_stripes(&s);
		return n + s.n;
	}
}

/* ---- Filling the in-flight estimate (sluice_publish_stripes) ---- */

/* Publish the whole unpublished change of one CPU's stripe (own, its share pub) from any CPU:
 * what sluice_publish_stripes does for every stripe once, and the tick's read of the counts
 * for the services it reads (sluice_copy_counts), so that what a CPU gave back without taking
 * since does not keep the estimate high. Racing the CPU's own publish, both may add the same
 * change: the estimate and the share get it twice alike, which leaves the share above the
 * stripe (the bound only looser) until that CPU's next publish evens it. */
static __always_inline void fold_stripe(const struct sluice_inflight *own,
					struct sluice_inflight *pub,
					struct sluice_inflight_est *est)
{
#pragma unroll
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		__s64 d = READ_ONCE(own->cls[c]) - READ_ONCE(pub->cls[c]);

		if (d)
			move_to_estimate(est, pub, c, d);
	}
}

struct publish_walk {
	__u32 cpus, slots, published;
	int failed;
};

/* 1 past the last possible CPU (the per-CPU map has a value for each). */
static long count_cpu(__u32 cpu, struct publish_walk *w)
{
	__u32 zero = 0;

	if (!bpf_map_lookup_percpu_elem(&inflight_pcpu, &zero, cpu))
		return 1;
	w->cpus = cpu + 1;
	return 0;
}

/* Publish CPU (i mod cpus)'s whole unpublished change of slot (i / cpus), every class; 1 past
 * the last slot. */
static long publish_one(__u32 i, struct publish_walk *w)
{
	__u32 svc = i / w->cpus, cpu = i % w->cpus;
	struct sluice_inflight *own = bpf_map_lookup_percpu_elem(&inflight_pcpu, &svc, cpu);
	struct sluice_inflight *pub = bpf_map_lookup_percpu_elem(&inflight_pub, &svc, cpu);
	struct sluice_inflight_est *est = bpf_map_lookup_elem(&inflight_est, &svc);

	if (!own && cpu == 0) {
		w->slots = svc;
		return 1;
	}
	if (!own || !pub || !est) {
		w->failed = 1;
		return 1;
	}
	fold_stripe(own, pub, est);
	w->published++;
	return 0;
}

/* Put every CPU's stripe of every slot into the estimate, then turn it on. Until then a CPU
 * that took nothing since this load may hold any amount unpublished (its stripe is older than
 * the estimate), which the bound could not allow for. Run after the programs are attached and
 * any migration has merged its counts into the stripes, then again once a second to fold in
 * what CPUs that only give back left: each run is the same walk, harmless at any time. */
static __always_inline int publish_stripes(struct sluice_publish_stripes *arg)
{
	struct publish_walk w = { 0 };

	arg->cpus = 0;
	bpf_loop(SLUICE_MAX_CPUS, count_cpu, &w, 0);
	if (!w.cpus || w.cpus >= SLUICE_MAX_CPUS)
		return 0; /* more CPUs than the bound counts: the estimate stays off */
	bpf_loop(1 << 23, publish_one, &w, 0);
	if (w.failed || !w.slots || w.published != w.slots * w.cpus)
		return 0;
	/* after every publish above (each a full barrier) */
	sluice_estimate_cpus = w.cpus;
	arg->cpus = w.cpus;
	return 0;
}

/* The read gate (sluice_unread, SLUICE_VERDICT_READ_GATE): 1 when a request of class cls must
 * be refused because the server has left requests unread for the gate's age and
 * one of a higher class is among them, or as many as the class may wait behind
 * (SLUICE_NUM_CLASSES - 1 - cls; L0 is never refused here). The age is measured from when the
 * total last rose from 0: a queue the server keeps emptying is not a queue. Counted in the
 * map's `refused` here, as decided (a refusal that cannot be answered cleanly admits the
 * request instead, like any other: counted all the same; the class's headroom refusals in
 * class_stats are counted once the answer is sent). A global function, verified once. */
__attribute__((noinline))
int read_gate_refuses(__u32 svc, __u32 cls, __u64 now)
{
	struct sluice_unread *u;
	__s64 total, ahead;

	cls &= 3;
	if (!cls)
		return 0;
	u = bpf_map_lookup_elem(&unread, &svc);
	if (!u)
		return 0;
	total = READ_ONCE(u->total);
	/* signed: since_ns may be a moment later than this CPU's clock read */
	if (total <= 0 || (__s64)(now - READ_ONCE(u->since_ns)) < (__s64)SLUICE_READ_GATE_AGE_NS)
		return 0;
	ahead = READ_ONCE(u->cls[0]);
	if (cls > 1)
		ahead += READ_ONCE(u->cls[1]);
	if (cls > 2)
		ahead += READ_ONCE(u->cls[2]);
	if (ahead <= 0 && total < (__s64)(SLUICE_NUM_CLASSES - cls))
		return 0;
	__sync_fetch_and_add(&u->refused[cls], 1);
	return 1;
}

/* A request admitted while the gate is armed waits unread: counted before its word shows
 * SLUICE_OWN_UNREAD, so whoever clears the bit finds the count there. Global, verified once. */
__attribute__((noinline))
int unread_add(__u32 svc, __u32 cls, __u64 now)
{
	struct sluice_unread *u = bpf_map_lookup_elem(&unread, &svc);

	if (!u)
		return 0;
	if (READ_ONCE(u->total) <= 0)
		u->since_ns = now; /* the queue starts: written before the total shows it */
	__sync_fetch_and_add(&u->cls[cls & 3], 1);
	__sync_fetch_and_add(&u->total, 1);
	return 0;
}

/* Decide one unit of (svc, cls). take = 1 (an http request): on admit one in-flight slot is
 * taken and 1 is returned. take = 0 (a tcp SYN): the same decision against the service's busy
 * flows (`busy`: connections with a turn open; idle ones hold no capacity), but nothing is
 * taken: the connection slot follows when the handshake completes (take_unit), and the
 * handshakes admitted but not yet complete count against L1..L3 meanwhile. On reject, 0 is
 * returned and *reason says why. */
static __always_inline int admit_unit(__u32 svc, __u32 cls, __u64 now,
				      struct sluice_class_stats *st, int *reason, int take,
				      __u32 *vflags)
{
	struct sluice_inflight *inf, *rel;
	struct sluice_verdict *v;
	__u32 thr;
	__s64 in_use;
	int prio;

	if (take)
		inf = bpf_map_lookup_elem(&inflight, &svc);
	else
		inf = bpf_map_lookup_elem(&busy, &svc);
	if (!inf)
		return 1; /* cannot count: admit, untracked */
	cls &= 3;

	if (!controller_alive(now)) {
		st->fail_open++;
		goto take;
	}
	v = bpf_map_lookup_elem(&verdicts, &svc);
	if (!v)
		goto take;
	if (vflags)
		*vflags = v->flags;
	if (draw_refused(v->switch_shed[cls])) {
		*reason = SLUICE_REJ_SWITCH;
		return 0;
	}
	if (v->breaker_state == SLUICE_BREAKER_OPEN ||
	    (v->breaker_state == SLUICE_BREAKER_HALF_OPEN && draw_refused(v->breaker_shed))) {
		*reason = SLUICE_REJ_BREAKER;
		return 0;
	}
	if (v->flags & SLUICE_VERDICT_SHUT(cls)) {
		*reason = SLUICE_REJ_HEADROOM;
		return 0;
	}
	/* An http request while the read gate is armed: no room while what the server has not
	 * read would be served before it. */
	if (take && (v->flags & SLUICE_VERDICT_READ_GATE) && read_gate_refuses(svc, cls, now)) {
		*reason = SLUICE_REJ_HEADROOM;
		return 0;
	}
	thr = v->class_threshold[cls];
	prio = v->flags & SLUICE_VERDICT_PRIORITY_COUNT;
	if (take)
		rel = bpf_map_lookup_elem(&inflight_released, &svc);
	else
		rel = bpf_map_lookup_elem(&busy_released, &svc);
	if (!take) {
		if (thr) {
			in_use = in_use_of(inf, rel, cls, prio);
			if (cls)
				in_use += halfopen_pending(svc, now, v->limit, 1);
			if (in_use >= (__s64)thr) {
				*reason = SLUICE_REJ_HEADROOM;
				return 0;
			}
		}
		if (draw_refused(v->shed_prob[cls])) {
			*reason = SLUICE_REJ_LADDER;
			return 0;
		}
		return 1;
	}
	/* Reserve first, then check: two CPUs cannot both take the last slot. */
	in_use = take_slot(svc, cls, prio, thr, inf, rel);
	if (thr && in_use >= (__s64)thr) {
		*reason = SLUICE_REJ_HEADROOM;
		goto undo;
	}
	if (draw_refused(v->shed_prob[cls])) {
		*reason = SLUICE_REJ_LADDER;
		goto undo;
	}
	return 1;
undo:
	stripe_give_back(svc, cls);
	own_bump(svc);
	return 0;
take:
	if (take)
		stripe_take(svc, cls);
	return 1;
}

/* Every CPU's stripe of svc summed over its classes: the units taken since layout 6 (for a tcp
 * service, its open connections: the slots the ownership words hold as SLUICE_OWN_CONN). */
static __always_inline __s64 stripes_total(__u32 svc)
{
	struct stripe_sum s = { .svc = svc, .me = ~0u, .mask = 15u };

	sum_stripes(&s);
	return s.n;
}

/* The open-connection cap, checked at a tcp SYN already admitted by admit_unit: class cls
 * goes on while the service's open connections plus its admitted handshakes still open stay
 * below threshold[cls]. Every class is compared with the service's total, so idle holders of a
 * lower class can fill only their own share and never the slots above it (L0's threshold is
 * the cap itself). Open connections are the connection slots the flows' ownership words hold
 * (every CPU's stripe, plus what older layouts counted in the shared `inflight`, net of the
 * releases): each goes back exactly once, with its flow's end. Handshakes admitted but not
 * complete count for L1..L3, up to max_connections / SLUICE_HALFOPEN_SHARE. A check, not a
 * reservation: two SYNs on two CPUs in the same instant may both take the last slot; the
 * server's own limit refuses the extra one. Returns 1 to go on, 0 refused (counted in
 * rejected[cls]). */
static __always_inline int admit_conn_cap(__u32 svc, __u32 cls, __u64 now)
{
	struct sluice_conn_cap *cc = bpf_map_lookup_elem(&conn_cap, &svc);
	struct sluice_inflight *inf, *rel;
	__u32 thr;
	__s64 open;

	cls &= 3;
	if (!cc || !(thr = cc->threshold[cls]) || !controller_alive(now))
		return 1;
	inf = bpf_map_lookup_elem(&inflight, &svc);
	if (!inf)
		return 1;
	rel = bpf_map_lookup_elem(&inflight_released, &svc);
	open = inf->total - (rel ? rel->total : 0) + stripes_total(svc);
	/* As for headroom: SYNs forged by anyone never hold L0 back, and hold at most a share of
	 * the whole cap (threshold[0], max_connections) from the lower classes, not of the
	 * class's own threshold: L0's SYNs are never refused here, so a blind flood from inside
	 * L0's prefix could otherwise fill a lower class's threshold with half-open counts. */
	if (cls)
		open += halfopen_pending(svc, now, cc->threshold[0], 0);
	if (open < (__s64)thr)
		return 1;
	__sync_fetch_and_add(&cc->rejected[cls], 1);
	return 0;
}

/* Add d to the count of (svc, cls) in a count map (`inflight` or `busy`). */
static __always_inline void count_unit(void *map, __u32 svc, __u32 cls, __s64 d)
{
	struct sluice_inflight *inf = bpf_map_lookup_elem(map, &svc);

	if (!inf)
		return;
	__sync_fetch_and_add(&inf->total, d);
	__sync_fetch_and_add(&inf->cls[cls & 3], d);
}

/* ---- http connections: the lower classes' connection cap (sluice_http_conn_cap) ---- */

/* The key of a client in `clients` and `addr_class` (an IPv6 client is its /64:
 * sluice_client_addr). */
static __always_inline void client_key_of(__u32 svc, const __u8 addr[16],
					  struct sluice_client_key *k)
{
	k->svc = svc;
	__builtin_memcpy(k->addr, addr, 16);
	sluice_client_addr(k->addr);
}

/* The class an http SYN is judged by for the connection cap: what its source and DSCP rules
 * say, raised to the class its address's requests were given lately (addr_class). A SYN
 * carries no header: a client that is L0 by its header is known by its address. */
static __always_inline __u32 http_syn_class(const struct sluice_service *sc, __u32 svc,
					    const struct pkt *p, __u64 now, __u8 *learned)
{
	struct class_pick pick = classify_l3(sc, svc, p);
	struct sluice_client_key ck;
	struct sluice_addr_class *ac;
	__u32 cls = pick.class & 3;
	__u8 addr[16];

	if (!cls)
		return 0;
	pkt_addr(p, 1, addr);
	client_key_of(svc, addr, &ck);
	ac = bpf_map_lookup_elem(&addr_class, &ck);
	if (ac && (__s64)(now - READ_ONCE(ac->seen_ns)) <= (__s64)SLUICE_ADDR_CLASS_TTL_NS &&
	    (READ_ONCE(ac->class) & 3) < cls) {
		cls = READ_ONCE(ac->class) & 3;
		*learned = 1;
	}
	return cls;
}

/* The class an http connection whose SYN was not judged (no class was capped then) counts
 * under: what the SYN's source and DSCP rules give (a, the source's answer), as
 * http_syn_class would have judged it. The DSCP is the SYN's own, kept in its record, never
 * the completing segment's: a mark counts from a trusted source only, and what the SYN
 * carried is all a SYN could have claimed, so no later segment (an ACK forged by whoever saw
 * the SYN-ACK, a remark on the way) moves the connection into another class's count. The
 * class the address's requests were given lately (addr_class) is not looked up here: one
 * lookup more per connection; a client known by its header is counted under that class from
 * its next SYN on. A record that kept no DSCP (from an older layout) counts by its source. */
static __always_inline __u32 http_conn_class(const struct sluice_service *sc, __u32 svc,
					     const __u8 addr[16], struct src_answer *a,
					     const struct sluice_handshake *hs)
{
	struct class_pick best = { .order = SLUICE_RULE_NONE, .class = sc->default_class };
	__u8 d;

	if (a->order != SLUICE_RULE_NONE)
		pick_rule(&best, a->order, a->class);
	d = (hs->flags & SLUICE_HS_DSCP) ? sc->dscp_rule[hs->dscp & 63] : SLUICE_RULE_NONE;
	if (d != SLUICE_RULE_NONE && (d >> 2) < best.order) {
		if (a->trusted < 0)
			a->trusted = addr_trusted(svc, addr);
		if (a->trusted)
			pick_rule(&best, d >> 2, d & 3);
	}
	return best.class & 3;
}

/* Remember the address of a request of class cls for its next SYN, when the request is of a
 * class higher than its connection was counted under (flags: the flow's), or of the class the
 * connection was counted under only because the address was remembered (so a client that is
 * L0 by its header stays known while it sends, not only for the minute after its first
 * connection). Written at most once a second an address; a higher class remembered lately
 * stands, as old as it is (a lower class's request never keeps it alive). */
static __always_inline void http_learn_class(__u32 svc, const __u8 addr[16], __u32 cls,
					     __u8 flags, __u64 now)
{
	struct sluice_client_key ck;
	struct sluice_addr_class *ac, v = { .seen_ns = now, .class = cls & 3 };
	__u32 conn_cls = (flags >> SLUICE_FLOW_CONN_CLASS_SHIFT) & 3;

	cls &= 3;
	if (!(flags & SLUICE_FLOW_CONN_COUNTED) || cls > conn_cls ||
	    (cls == conn_cls && !(flags & SLUICE_FLOW_CONN_LEARNED)))
		return;
	client_key_of(svc, addr, &ck);
	ac = bpf_map_lookup_elem(&addr_class, &ck);
	if (ac) {
		__u32 known = READ_ONCE(ac->class) & 3;
		__u64 age = now - READ_ONCE(ac->seen_ns);

		if ((known == cls && age < 1000000000ull) ||
		    (known < cls && age <= SLUICE_ADDR_CLASS_TTL_NS))
			return;
	}
	bpf_map_update_elem(&addr_class, &ck, &v, BPF_ANY);
}

/* 1 when an http connection of class cls may open: its class has no cap, or its open
 * connections are under it. A refusal is counted in conn_cap.rejected[cls] (`connections`).
 * Not a reservation: SYNs of one instant may all see the last place free, and none of them
 * holds anything until its handshake completes. */
static __always_inline int http_conn_admit(const struct sluice_http_conn_cap *cap, __u32 svc,
					   __u32 cls)
{
	struct sluice_inflight *open;
	struct sluice_conn_cap *cc;
	__u32 c = cap->cap[cls & 3];

	if (!c || !(cls & 3))
		return 1; /* no cap, or L0: never capped, whatever the map says */
	open = bpf_map_lookup_elem(&http_conns, &svc);
	if (!open || READ_ONCE(open->cls[cls & 3]) < (__s64)c)
		return 1;
	cc = bpf_map_lookup_elem(&conn_cap, &svc);
	if (cc)
		__sync_fetch_and_add(&cc->rejected[cls & 3], 1);
	return 0;
}

/* 1 when a request on an http connection counted under a capped class (flags: the flow's) is
 * to be refused because that class holds more open connections than its cap: connections
 * opened before the cap was set, or before it was lowered. The refusal (a 429, which closes
 * the connection) brings the class down to its cap (a check, not a reservation: requests
 * decided at the same instant on several CPUs may close up to one more each), which then
 * keeps the connection from coming back; without it those connections stay open for as long
 * as their clients keep sending, and every one of them past the backend's workers is a wait
 * in front of L0.
 * Never a request of a class higher than its connection's, never an L0 connection's, never
 * while the controller is silent. Counted by the caller once the refusal stands
 * (count_conn_cap_refusal): a request whose answer could not even be begun is admitted
 * instead, and not counted. */
static __always_inline int http_conn_over_cap(__u32 svc, __u8 flags, __u32 cls, __u64 now)
{
	const struct sluice_http_conn_cap *cap;
	struct sluice_inflight *open;
	__u32 k = (flags >> SLUICE_FLOW_CONN_CLASS_SHIFT) & 3, c;

	if (!(flags & SLUICE_FLOW_CONN_COUNTED) || !k || (cls & 3) < k)
		return 0;
	cap = bpf_map_lookup_elem(&http_conn_cap, &svc);
	if (!cap)
		return 0;
	c = cap->cap[k];
	if (!c || !controller_alive(now))
		return 0;
	open = bpf_map_lookup_elem(&http_conns, &svc);
	return open && READ_ONCE(open->cls[k]) > (__s64)c;
}

/* A request http_conn_over_cap refused, not admitted after all: counted in conn_cap.rejected
 * under its connection's class (`connections`). */
static __always_inline void count_conn_cap_refusal(__u32 svc, __u8 flags)
{
	struct sluice_conn_cap *cc = bpf_map_lookup_elem(&conn_cap, &svc);

	if (cc)
		__sync_fetch_and_add(&cc->rejected[(flags >> SLUICE_FLOW_CONN_CLASS_SHIFT) & 3], 1);
}

/* Take one in-flight slot of (svc, cls) for a unit already admitted (a completed handshake). */
static __always_inline void take_unit(__u32 svc, __u32 cls)
{
	stripe_take(svc, cls);
}

/* The client's entry in `clients`, created empty when it has none and create is set; NULL
 * when it has none (create 0) or the map cannot hold it (the caller then does not limit the
 * client). */
static __always_inline struct sluice_client *client_entry(__u32 svc, const __u8 addr[16],
							  int create)
{
	struct sluice_client_key k = {};
	struct sluice_client *c, nc = {};

	client_key_of(svc, addr, &k);
	c = bpf_map_lookup_elem(&clients, &k);
	if (c || !create)
		return c;
	bpf_map_update_elem(&clients, &k, &nc, BPF_NOEXIST);
	return bpf_map_lookup_elem(&clients, &k);
}

/* Per-client entry limits, last in the admission order: a concurrency cap and a token bucket
 * (GCRA: a unit may start no earlier than tat - burst tolerance). Returns 1 when the unit may
 * go on. take = 1 (a request): the unit is counted against the cap (*counted = 1) and takes
 * its token now. take = 0 (a SYN): both are only checked, *counted = 1 says the limits apply,
 * and client_count counts the unit once its handshake completes: a SYN forged in a client's
 * name uses up nothing of that client's. Nor does a SYN make an entry: a client with none
 * has nothing counted and passes, and its entry is made when its handshake completes. An
 * entry made per SYN let a flood from forged sources (anyone can send one) push every real
 * client's entry out of the LRU, and with it the connections counted against its cap. Off,
 * or on any doubt (no room in the map, controller silent), the client is not limited. */
static __always_inline int admit_client(const struct sluice_service *sc, __u32 svc,
					const __u8 addr[16], __u64 now, __u8 *counted, int take)
{
	__u32 max = sc->client_max_in_flight, rate = sc->client_rate;
	struct sluice_client *c;

	*counted = 0;
	if ((!max && !rate) || !controller_alive(now))
		return 1;
	c = client_entry(svc, addr, take);
	if (!c) {
		*counted = !take; /* nothing counted yet: the handshake's completion counts it */
		return 1;
	}
	if (max) {
		if (!take) {
			if (c->in_flight >= (__s64)max)
				return 0;
		} else if (__sync_fetch_and_add(&c->in_flight, 1) >= (__s64)max) {
			__sync_fetch_and_add(&c->in_flight, -1);
			return 0;
		} else {
			*counted = 1;
		}
	}
	if (rate) {
		__u64 t = 1000000000ull / rate;
		__u64 tau = t * (sc->client_burst > 1 ? sc->client_burst - 1 : 0);
		__u64 tat = c->tat_ns;

		/* a SYN's clock is the coarse one, up to a tick behind: its check gives the tick
		 * (the token is taken on the exact clock when the handshake completes) */
		if (tat > now + tau + (take ? 0 : SLUICE_COARSE_TICK_NS)) {
			if (*counted)
				__sync_fetch_and_add(&c->in_flight, -1);
			*counted = 0;
			return 0;
		}
		if (take)
			c->tat_ns = (tat > now ? tat : now) + t;
	}
	if (!take)
		*counted = 1;
	return 1;
}

/* A connection is now the client's: count it against its client's cap (returns 1 when it
 * now counts) and, with token, take its token. token 1: a unit admitted at its SYN completed
 * its handshake. token 0: a connection taken on at its data (no handshake
 * record: open before sluiced attached, or its SYN met a slot another 4-tuple's record held,
 * as under a SYN flood) counts against the cap like one whose handshake was seen, or a flood
 * of forged SYNs that fills the handshake slots would let every client past its cap; never
 * refused (the connection is the server's already) and its token not taken (it arrived long
 * before, or was judged at its SYN; taking one at each try while the flow table is full would
 * move the bucket many times for one connection). */
static __always_inline int client_count(const struct sluice_service *sc, __u32 svc,
					const __u8 addr[16], __u64 now, int token)
{
	struct sluice_client *c;

	if (!sc->client_max_in_flight && !(token && sc->client_rate))
		return 0;
	c = client_entry(svc, addr, 1);
	if (!c)
		return 0;
	if (token && sc->client_rate) {
		__u64 tat = c->tat_ns;

		c->tat_ns = (tat > now ? tat : now) + 1000000000ull / sc->client_rate;
	}
	if (!sc->client_max_in_flight)
		return 0;
	__sync_fetch_and_add(&c->in_flight, 1);
	return 1;
}

static __always_inline void release_client(__u32 svc, const __u8 addr[16])
{
	struct sluice_client_key k = {};
	struct sluice_client *c;

	client_key_of(svc, addr, &k);
	c = bpf_map_lookup_elem(&clients, &k);
	if (c && c->in_flight > 0)
		__sync_fetch_and_add(&c->in_flight, -1);
}

/* Give back one in-flight slot of (svc, cls). */
static __always_inline void release_unit(__u32 svc, __u32 cls)
{
	stripe_give_back(svc, cls);
}

/* What an ownership word holds (see SLUICE_OWN_* in sluice.h). A word without the tag comes
 * from an older layout: its flow's own fields say it. */
struct own_units {
	__u32 svc, cls;
	__u8 unit;                       /* an open request (inflight) or turn (busy) */
	__u8 turn;                       /* the open unit is a tcp turn */
	__u8 conn;                       /* a tcp connection slot (inflight) */
	__u8 client;                     /* a count against the client's cap */
	__u8 pending;                    /* a fresh connection counted in `halfopen` */
	__u8 unread;                     /* the open request is counted in `unread` */
};

static __always_inline void own_units_of(const struct sluice_flow *f, __u32 w,
					 struct own_units *u)
{
	u->unit = (w & SLUICE_OWN_STATE) == SLUICE_OWN_ACTIVE;
	if (w & SLUICE_OWN_TAGGED) {
		u->svc = w >> SLUICE_OWN_SVC_SHIFT;
		u->cls = (w >> SLUICE_OWN_CLASS_SHIFT) & 3;
		u->turn = !!(w & SLUICE_OWN_TURN);
		u->conn = !!(w & SLUICE_OWN_CONN);
		u->client = !!(w & SLUICE_OWN_CLIENT);
		u->pending = !!(w & SLUICE_OWN_PENDING);
		u->unread = !!(w & SLUICE_OWN_UNREAD);
	} else {
		u->pending = 0;
		u->unread = 0;
		u->svc = f->svc;
		u->cls = f->class & 3;
		u->turn = u->conn = f->tracked_inflight;
		u->client = f->client_counted;
	}
}

/* The open unit of a flow (a request or a turn), taken out of its word by compare-and-swap:
 * 1 when this caller took it (*u says what it was and the caller gives it back), 0 when none
 * is open or another CPU took it first. A tcp word keeps its connection. */
static __always_inline int own_take_open(struct sluice_flow *f, struct own_units *u)
{
	__u32 w = READ_ONCE(f->req_active), nw = 0, seen;

	if ((w & SLUICE_OWN_STATE) != SLUICE_OWN_ACTIVE)
		return 0;
	if ((w & SLUICE_OWN_TAGGED) && (w & SLUICE_OWN_CONN))
		nw = w & ~(SLUICE_OWN_STATE | SLUICE_OWN_TURN);
	seen = __sync_val_compare_and_swap(&f->req_active, w, nw);
	if (seen != w) {
		/* The wait probe takes SLUICE_OWN_UNREAD off an open request at the server's first
		 * read (the one change it makes to a word): the request is still open, once more. */
		if (!(w & SLUICE_OWN_UNREAD) || seen != (w & ~SLUICE_OWN_UNREAD) ||
		    __sync_val_compare_and_swap(&f->req_active, seen, nw) != seen)
			return 0;
		w = seen;
	}
	own_units_of(f, w, u);
	if (!(w & SLUICE_OWN_TAGGED) && u->turn) {
		/* an older layout's tcp flow: its connection and client stay with the flow */
		u->conn = 0;
		u->client = 0;
	} else if (!(w & SLUICE_OWN_TAGGED) && u->client) {
		f->client_counted = 0; /* an older layout's http request: its client goes with it */
	}
	if (u->conn)
		u->client = 0; /* a tcp connection's client count ends with the connection */
	return 1;
}

/* Class cls's latency histogram of service svc (this CPU's). Each class's lookup stays a
 * call of its own: clang would otherwise merge the four into one call on a map chosen at run
 * time, which the verifier cannot inline (the map is not known at that call), and the generic
 * lookup cost the tcp turn's end about 45 ns (bench_pktcost). The empty asm, with a different
 * constant in each case, keeps the calls apart. */
#define HIST_LOOKUP(map, n)                                                                    \
	({                                                                                     \
		struct sluice_hist *h_ = bpf_map_lookup_elem(&map, &svc);                      \
		asm volatile("" : "+r"(h_) : "i"(n));                                          \
		h_;                                                                            \
	})
static __always_inline struct sluice_hist *hist_of(__u32 svc, __u32 cls)
{
	switch (cls & (SLUICE_NUM_CLASSES - 1)) {
	case 0:
		return HIST_LOOKUP(latency_hist, 0);
	case 1:
		return HIST_LOOKUP(latency_hist1, 1);
	case 2:
		return HIST_LOOKUP(latency_hist2, 2);
	default:
		return HIST_LOOKUP(latency_hist3, 3);
	}
}

/* One latency sample of service svc, class cls. */
static __always_inline void record_latency(__u32 svc, __u32 cls, __u64 us)
{
	struct sluice_hist *h = hist_of(svc, cls);
	struct sluice_svc_stats *n;

	if (h) {
		__u32 b = sluice_hist_bucket(us);

		/* Keep the bound check on the register that indexes (clang may reuse another). */
		asm volatile("" : "+r"(b));
		if (b < SLUICE_HIST_BUCKETS)
			h->bucket[b]++;
		h->sum_us += us;
	}
	n = bpf_map_lookup_elem(&class_stats, &svc);
	if (n)
		n->samples[cls & (SLUICE_NUM_CLASSES - 1)]++;
}

/* A tcp connection ends after a single turn: that turn was its request, its sample is due.
 * Called by end_flow's killer only (the word it swapped to DEAD held the connection and no
 * open turn, u), so no turn can open on the flow any more; the swap of req_start_ns still
 * guards against a turn's start written by a CPU that then lost its swap of the word. */
static __always_inline void flush_setup_turn(struct sluice_flow *f, const struct own_units *u)
{
	__u64 v = READ_ONCE(f->req_start_ns);

	if (!(v & SLUICE_SETUP_PENDING) || u->svc >= SLUICE_MAX_SERVICES)
		return;
	if (__sync_val_compare_and_swap(&f->req_start_ns, v, 0) == v)
		record_latency(u->svc, u->cls, v & ~SLUICE_SETUP_PENDING);
}

/* End a flow (a genuine FIN/RST, the server accepting a new connection on its 4-tuple, a
 * refused request, the GC). The caller that swaps the ownership word to DEAD owns everything
 * the word held and gives it back: the connection slot (tcp), the open request or turn, the
 * client count. A request being decided holds nothing yet: its decider finds the word DEAD
 * and gives back what it took itself. The killer deletes the entry only while the key still
 * finds this very entry; otherwise the entry was deleted and reused under another key
 * meanwhile, and it stays DEAD and orphaned for the GC. Returns 1 when this caller ended it.
 * A turn cut short gives no latency sample; a connection (tcp) or a request (http) counts as
 * completed. fin: the ending is a FIN or RST seen on the wire, so a connection that had a single
 * turn gives that turn's held-back sample (flush_setup_turn); only the killer does, with the
 * word it swapped out, so the sample is given once and only by a flow that really ended.
 * keep_open: a client's FIN, which closes only its sending side: a request or turn open (or
 * being decided) still runs at the server, so the flow is left to end with it and the server's
 * own close (returns 0); otherwise a client could half-close after each request and have it
 * run uncounted. */
static __always_inline int end_flow(struct sluice_flow_key *key, int server_reset, int fin,
				    int keep_open)
{
	struct sluice_flow *f = bpf_map_lookup_elem(&flows, key);
	struct sluice_class_stats *st;
	struct own_units u;
	__u64 syn_ns;
	__u32 w = 0;
	__u8 conn;
	int won = 0;

	if (!f)
		return 0;
	for (int i = 0; i < 8 && !won; i++) {
		w = READ_ONCE(f->req_active);
		if ((w & SLUICE_OWN_STATE) == SLUICE_OWN_DEAD)
			return 0; /* someone else ended it first */
		if (keep_open && (w & SLUICE_OWN_STATE) != SLUICE_OWN_IDLE)
			return 0; /* a unit still runs: it ends by its answer */
		won = __sync_val_compare_and_swap(&f->req_active, w, SLUICE_OWN_DEAD) == w;
	}
	if (!won)
		return 0; /* the word kept moving: left for the next ending or the GC */
	own_units_of(f, w, &u);
	syn_ns = f->admitted_ns; /* read before the entry may go */
	conn = READ_ONCE(f->flags);
	if (fin && u.conn && !u.unit)
		flush_setup_turn(f, &u);
	if (bpf_map_lookup_elem(&flows, key) == f)
		bpf_map_delete_elem(&flows, key);
	else
		f->req_active = SLUICE_OWN_DEAD | SLUICE_OWN_ORPHAN;
	if (u.svc >= SLUICE_MAX_SERVICES)
		return 1;
	st = class_stats_of(u.svc, u.cls);
	if (u.conn)
		release_unit(u.svc, u.cls);
	if (u.unit && u.turn)
		count_unit(&busy, u.svc, u.cls, -1);
	else if (u.unit)
		release_unit(u.svc, u.cls);
	if (u.unit && u.unread)
		unread_take_off(u.svc, u.cls);
	if (u.client)
		release_client(u.svc, key->client_addr);
	if (u.pending)
		halfopen_fresh_done(u.svc, syn_ns, bpf_ktime_get_ns());
	if (conn & SLUICE_FLOW_CONN_COUNTED)
		count_unit(&http_conns, u.svc, conn >> SLUICE_FLOW_CONN_CLASS_SHIFT, -1);
	own_bump(u.svc);
	if (st) {
		st->completed += u.conn + (u.unit && !u.turn);
		if (server_reset)
			st->errors++;
	}
	return 1;
}

#endif
