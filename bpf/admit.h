/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Classification, admission and unit accounting, shared by the ingress programs.
 * Admission order: switch -> breaker -> headroom -> ladder -> client limits. Anything missing (no
 * verdict, stale heartbeat) admits: on doubt, admit. */
#ifndef SLUICE_ADMIT_H
#define SLUICE_ADMIT_H

#include "maps.h"
#include "parse.h"

static __always_inline struct sluice_class_stats *class_stats_of(__u32 svc, __u32 cls)
{
	__u32 idx = sluice_stat_index(svc, cls);
	return bpf_map_lookup_elem(&class_stats, &idx);
}

/* The first matching classify rule wins: each rule kind yields its best (lowest-order) match
 * and the lowest order overall picks the class. */
struct class_pick {
	__u8 order;
	__u8 class;
};

static __always_inline void pick_rule(struct class_pick *best, __u8 order, __u8 cls)
{
	if (order < best->order) {
		best->order = order;
		best->class = cls;
	}
}

/* Source-prefix and DSCP rules: everything a SYN can be judged by. */
static __always_inline struct class_pick classify_l3(const struct sluice_service *sc,
						     __u32 svc, const struct pkt *p)
{
	struct class_pick best = { .order = SLUICE_RULE_NONE, .class = sc->default_class };
	struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc };
	struct sluice_src_rule *r;
	__u8 d;

	pkt_addr(p, 1, k.addr);
	r = bpf_map_lookup_elem(&source_rules, &k);
	if (r)
		pick_rule(&best, r->order, r->class);
	d = sc->dscp_rule[p->dscp & 63];
	if (d != SLUICE_RULE_NONE)
		pick_rule(&best, d >> 2, d & 3);
	return best;
}

static __always_inline int draw_refused(__u32 admit_prob)
{
	if (admit_prob >= SLUICE_PROB_ONE)
		return 0;
	return (bpf_get_prandom_u32() & (SLUICE_PROB_ONE - 1)) >= admit_prob;
}

static __always_inline int controller_alive(__u64 now)
{
	__u32 zero = 0;
	struct sluice_globals *g = bpf_map_lookup_elem(&globals, &zero);

	if (!g || !g->heartbeat_ns)
		return 0;
	return now - g->heartbeat_ns <= g->heartbeat_timeout_ns;
}

/* Decide one unit of (svc, cls). On admit, one in-flight slot is taken and 1 is returned;
 * on reject, 0 is returned and *reason says why. */
static __always_inline int admit_unit(__u32 svc, __u32 cls, __u64 now,
				      struct sluice_class_stats *st, int *reason)
{
	struct sluice_inflight *inf, *rel;
	struct sluice_verdict *v;
	__s64 in_use;

	inf = bpf_map_lookup_elem(&inflight, &svc);
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
	if (draw_refused(v->switch_admit[cls])) {
		*reason = SLUICE_REJ_SWITCH;
		return 0;
	}
	if (v->breaker_state == SLUICE_BREAKER_OPEN ||
	    (v->breaker_state == SLUICE_BREAKER_HALF_OPEN && draw_refused(v->breaker_admit))) {
		*reason = SLUICE_REJ_BREAKER;
		return 0;
	}
	/* Reserve first, then check: two CPUs cannot both take the last slot. */
	rel = bpf_map_lookup_elem(&inflight_released, &svc);
	if (v->flags & SLUICE_VERDICT_PRIORITY_COUNT) {
		in_use = __sync_fetch_and_add(&inf->cls[cls], 1);
		for (__u32 j = 0; j < SLUICE_NUM_CLASSES; j++) {
			if (j >= cls)
				break;
			in_use += inf->cls[j];
		}
		for (__u32 j = 0; j < SLUICE_NUM_CLASSES && rel; j++) {
			if (j > cls)
				break;
			in_use -= rel->cls[j];
		}
	} else {
		in_use = __sync_fetch_and_add(&inf->total, 1);
		if (rel)
			in_use -= rel->total;
	}
	if (in_use >= (__s64)v->class_threshold[cls]) {
		*reason = SLUICE_REJ_HEADROOM;
		goto undo;
	}
	if (draw_refused(v->admit_prob[cls])) {
		*reason = SLUICE_REJ_LADDER;
		goto undo;
	}
	if (v->flags & SLUICE_VERDICT_PRIORITY_COUNT)
		__sync_fetch_and_add(&inf->total, 1);
	else
		__sync_fetch_and_add(&inf->cls[cls], 1);
	return 1;
undo:
	if (v->flags & SLUICE_VERDICT_PRIORITY_COUNT)
		__sync_fetch_and_add(&inf->cls[cls], -1);
	else
		__sync_fetch_and_add(&inf->total, -1);
	return 0;
take:
	__sync_fetch_and_add(&inf->total, 1);
	__sync_fetch_and_add(&inf->cls[cls], 1);
	return 1;
}

/* Per-client entry limits, last in the admission order: a concurrency cap and a
 * token bucket (GCRA: a unit may start no earlier than tat - burst tolerance). Returns 1 when
 * the unit may go on; *counted = 1 when it now counts against the client's cap. Off, or on
 * any doubt (no map entry, controller silent), the client is not limited. */
static __always_inline int admit_client(const struct sluice_service *sc, __u32 svc,
					const __u8 addr[16], __u64 now, __u8 *counted)
{
	struct sluice_client_key k = { .svc = svc };
	struct sluice_client *c, nc = {};
	__u32 max = sc->client_max_in_flight, rate = sc->client_rate;

	*counted = 0;
	if ((!max && !rate) || !controller_alive(now))
		return 1;
	__builtin_memcpy(k.addr, addr, 16);
	c = bpf_map_lookup_elem(&clients, &k);
	if (!c) {
		bpf_map_update_elem(&clients, &k, &nc, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&clients, &k);
		if (!c)
			return 1;
	}
	if (max) {
		if (__sync_fetch_and_add(&c->in_flight, 1) >= (__s64)max) {
			__sync_fetch_and_add(&c->in_flight, -1);
			return 0;
		}
		*counted = 1;
	}
	if (rate) {
		__u64 t = 1000000000ull / rate;
		__u64 tau = t * (sc->client_burst > 1 ? sc->client_burst - 1 : 0);
		__u64 tat = c->tat_ns;

		if (tat > now + tau) {
			if (*counted)
				__sync_fetch_and_add(&c->in_flight, -1);
			*counted = 0;
			return 0;
		}
		c->tat_ns = (tat > now ? tat : now) + t;
	}
	return 1;
}

static __always_inline void release_client(__u32 svc, const __u8 addr[16])
{
	struct sluice_client_key k = { .svc = svc };
	struct sluice_client *c;

	__builtin_memcpy(k.addr, addr, 16);
	c = bpf_map_lookup_elem(&clients, &k);
	if (c && c->in_flight > 0)
		__sync_fetch_and_add(&c->in_flight, -1);
}

/* Give back one in-flight slot of (svc, cls). */
static __always_inline void release_unit(__u32 svc, __u32 cls)
{
	struct sluice_inflight *inf = bpf_map_lookup_elem(&inflight, &svc);

	if (!inf)
		return;
	__sync_fetch_and_add(&inf->total, -1);
	__sync_fetch_and_add(&inf->cls[cls & 3], -1);
}

/* End a flow (FIN/RST seen, or replaced by a new SYN). Whoever deletes the entry releases its
 * connection slot; whoever clears req_active releases the request slot. */
static __always_inline void end_flow(struct sluice_flow_key *key, int server_reset)
{
	struct sluice_flow *f = bpf_map_lookup_elem(&flows, key);
	struct sluice_class_stats *st;
	__u32 svc, cls, tracked, req, client;

	if (!f)
		return;
	svc = f->svc;
	cls = f->class & 3;
	tracked = f->tracked_inflight;
	client = f->client_counted;
	req = __sync_val_compare_and_swap(&f->req_active, 1, 0) == 1;
	if (bpf_map_delete_elem(&flows, key) != 0)
		tracked = 0; /* someone else ended it first */
	if (!tracked && !req)
		return;
	if (svc >= SLUICE_MAX_SERVICES)
		return;
	st = class_stats_of(svc, cls);
	if (tracked)
		release_unit(svc, cls);
	if (req)
		release_unit(svc, cls);
	if (client)
		release_client(svc, key->client_addr);
	if (st) {
		st->completed += tracked + req;
		if (server_reset)
			st->errors++;
	}
}

#endif
