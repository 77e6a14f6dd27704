/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Classification, admission and unit accounting, shared by the ingress programs.
 * Admission order: switch -> breaker -> headroom -> ladder. Anything missing (no
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

/* 1 when the packet's source is inside the service's trust_from (see SLUICE_SRC_TRUST). */
static __always_inline int source_trusted(__u32 svc, const struct pkt *p)
{
	struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc | SLUICE_SRC_TRUST };

	pkt_addr(p, 1, k.addr);
	return bpf_map_lookup_elem(&source_rules, &k) != 0;
}

/* Source-prefix and DSCP rules: everything a SYN can be judged by. A DSCP mark counts only
 * from a trusted source (anyone can set one). */
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
	if (d != SLUICE_RULE_NONE && source_trusted(svc, p))
		pick_rule(&best, d >> 2, d & 3);
	return best;
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

	if (!g || !g->heartbeat_ns)
		return 0;
	return now - g->heartbeat_ns <= g->heartbeat_timeout_ns;
}

/* Admitted handshakes of svc that count against L1..L3's headroom now (see sluice_halfopen):
 * none once the count has lapsed, at most limit / SLUICE_HALFOPEN_SHARE. */
static __always_inline __s64 halfopen_pending(__u32 svc, __u64 now, __u32 limit)
{
	struct sluice_halfopen *h = bpf_map_lookup_elem(&halfopen, &svc);
	__s64 n, cap = limit / SLUICE_HALFOPEN_SHARE;

	if (!h || now - h->since_ns > SLUICE_HALFOPEN_TIMEOUT_NS)
		return 0;
	n = h->count;
	return n < 0 ? 0 : n > cap ? cap : n;
}

static __always_inline void halfopen_add(__u32 svc, __u64 now)
{
	struct sluice_halfopen *h = bpf_map_lookup_elem(&halfopen, &svc);

	if (!h)
		return;
	if (now - h->since_ns > SLUICE_HALFOPEN_TIMEOUT_NS) {
		/* Lapsed: start afresh. Racing CPUs may lose a count here: the error is towards
		 * admitting, and lasts one timeout at most. */
		h->since_ns = now;
		h->count = 1;
		return;
	}
	__sync_fetch_and_add(&h->count, 1);
}

static __always_inline void halfopen_done(__u32 svc, __u64 now)
{
	struct sluice_halfopen *h = bpf_map_lookup_elem(&halfopen, &svc);

	if (h && now - h->since_ns <= SLUICE_HALFOPEN_TIMEOUT_NS && h->count > 0)
		__sync_fetch_and_add(&h->count, -1);
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

/* Decide one unit of (svc, cls). take = 1 (an http request): on admit one in-flight slot is
 * taken and 1 is returned. take = 0 (a tcp SYN): the same decision against the service's busy
 * flows (`busy`: connections with a turn open; idle ones hold no capacity), but nothing is
 * taken: the connection slot follows when the handshake completes (take_unit), and the
 * handshakes admitted but not yet complete count against L1..L3 meanwhile. On reject, 0 is
 * returned and *reason says why. */
static __always_inline int admit_unit(__u32 svc, __u32 cls, __u64 now,
				      struct sluice_class_stats *st, int *reason, int take)
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
				in_use += halfopen_pending(svc, now, v->limit);
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
	if (prio) {
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
	if (thr && in_use >= (__s64)thr) {
		*reason = SLUICE_REJ_HEADROOM;
		goto undo;
	}
	if (draw_refused(v->shed_prob[cls])) {
		*reason = SLUICE_REJ_LADDER;
		goto undo;
	}
	if (prio)
		__sync_fetch_and_add(&inf->total, 1);
	else
		__sync_fetch_and_add(&inf->cls[cls], 1);
	return 1;
undo:
	if (prio)
		__sync_fetch_and_add(&inf->cls[cls], -1);
	else
		__sync_fetch_and_add(&inf->total, -1);
	return 0;
take:
	if (take) {
		__sync_fetch_and_add(&inf->total, 1);
		__sync_fetch_and_add(&inf->cls[cls], 1);
	}
	return 1;
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

/* Take one in-flight slot of (svc, cls) for a unit already admitted (a completed handshake). */
static __always_inline void take_unit(__u32 svc, __u32 cls)
{
	count_unit(&inflight, svc, cls, 1);
}

/* The key of a client in `clients` (an IPv6 client is its /64: sluice_client_addr). */
static __always_inline void client_key_of(__u32 svc, const __u8 addr[16],
					  struct sluice_client_key *k)
{
	k->svc = svc;
	__builtin_memcpy(k->addr, addr, 16);
	sluice_client_addr(k->addr);
}

/* The client's entry in `clients`, created empty when it has none; NULL only if the map
 * cannot hold it (the caller then does not limit the client). */
static __always_inline struct sluice_client *client_entry(__u32 svc, const __u8 addr[16])
{
	struct sluice_client_key k = {};
	struct sluice_client *c, nc = {};

	client_key_of(svc, addr, &k);
	c = bpf_map_lookup_elem(&clients, &k);
	if (c)
		return c;
	bpf_map_update_elem(&clients, &k, &nc, BPF_NOEXIST);
	return bpf_map_lookup_elem(&clients, &k);
}

/* Per-client entry limits, last in the admission order: a concurrency cap and a token bucket
 * (GCRA: a unit may start no earlier than tat - burst tolerance). Returns 1 when the unit may
 * go on. take = 1 (a request): the unit is counted against the cap (*counted = 1) and takes
 * its token now. take = 0 (a SYN): both are only checked, *counted = 1 says the limits apply,
 * and client_take counts the unit once its handshake completes: a SYN forged in a client's
 * name uses up nothing of that client's. Off, or on any doubt (no map entry, controller
 * silent), the client is not limited. */
static __always_inline int admit_client(const struct sluice_service *sc, __u32 svc,
					const __u8 addr[16], __u64 now, __u8 *counted, int take)
{
	__u32 max = sc->client_max_in_flight, rate = sc->client_rate;
	struct sluice_client *c;

	*counted = 0;
	if ((!max && !rate) || !controller_alive(now))
		return 1;
	c = client_entry(svc, addr);
	if (!c)
		return 1;
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

		if (tat > now + tau) {
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

/* A unit admitted at its SYN completed its handshake: count it against its client's cap and
 * take its token. Returns 1 when it now counts against the cap. */
static __always_inline int client_take(const struct sluice_service *sc, __u32 svc,
				       const __u8 addr[16], __u64 now)
{
	struct sluice_client *c = client_entry(svc, addr);

	if (!c)
		return 0;
	if (sc->client_rate) {
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
	count_unit(&inflight, svc, cls, -1);
}

/* End a flow (a genuine FIN/RST, or the server accepting a new connection on its 4-tuple).
 * Whoever deletes the entry releases its connection slot; whoever clears req_active releases
 * the request slot (http) or the busy count of the open turn (tcp), once more after the
 * delete: a turn a racing CPU opened on the entry meanwhile is released here, or by that CPU
 * when it finds the entry gone (tcp_client_data), never twice. A turn cut short gives no
 * latency sample; a connection (tcp) or a request (http) counts as completed. */
static __always_inline void end_flow(struct sluice_flow_key *key, int server_reset)
{
	struct sluice_flow *f = bpf_map_lookup_elem(&flows, key);
	struct sluice_class_stats *st;
	__u32 svc, cls, tracked, req, client, tcp;

	if (!f)
		return;
	svc = f->svc;
	cls = f->class & 3;
	tracked = tcp = f->tracked_inflight;
	client = f->client_counted;
	req = __sync_val_compare_and_swap(&f->req_active, 1, 0) == 1;
	if (bpf_map_delete_elem(&flows, key) != 0)
		tracked = 0; /* someone else ended it first */
	else if (!req)
		req = __sync_val_compare_and_swap(&f->req_active, 1, 0) == 1;
	if (!tracked && !req)
		return;
	if (svc >= SLUICE_MAX_SERVICES)
		return;
	st = class_stats_of(svc, cls);
	if (tracked)
		release_unit(svc, cls);
	if (req && tcp)
		count_unit(&busy, svc, cls, -1);
	else if (req)
		release_unit(svc, cls);
	if (client)
		release_client(svc, key->client_addr);
	if (st) {
		st->completed += tracked + (tcp ? 0 : req);
		if (server_reset)
			st->errors++;
	}
}

#endif
