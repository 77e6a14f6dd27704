// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/flowgc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* Visit every flow (maps_walk_hash). fn returns non-zero to stop; the walk returns 0 then. */
typedef int (*flow_visit_fn)(void *ctx, const struct sluice_flow_key *k, const struct sluice_flow *f);

struct flow_visit {
	flow_visit_fn fn;
	void *ctx;
};

static int visit_flow(void *ctx, const void *k, const void *v)
{
	const struct flow_visit *w = ctx;

	return w->fn(w->ctx, k, v) ? 1 : 0;
}

static int walk_flows(const struct sluice_maps *m, flow_visit_fn fn, void *ctx)
{
	struct flow_visit w = { fn, ctx };
	int rc = maps_walk_hash(m->flows, sizeof(struct sluice_flow_key), sizeof(struct sluice_flow),
				visit_flow, &w);

	return rc > 0 ? 0 : rc;
}

struct stale_scan {
	unsigned long long now_ns, syn_timeout_ns, idle_timeout_ns;
	struct sluice_flow_key *stale;
	unsigned char *orphan;
	int n, cap, oom;
};

static int collect_stale(void *ctx, const struct sluice_flow_key *k, const struct sluice_flow *f)
{
	struct stale_scan *sc = ctx;
	int orphan = (f->req_active & (SLUICE_OWN_STATE | SLUICE_OWN_ORPHAN)) ==
		     (SLUICE_OWN_DEAD | SLUICE_OWN_ORPHAN);

	if (!orphan &&
	    !((f->state == SLUICE_FLOW_SYN && sc->now_ns > f->admitted_ns + sc->syn_timeout_ns) ||
	      sc->now_ns > f->last_seen_ns + sc->idle_timeout_ns))
		return 0;
	if (sc->n == sc->cap) {
		int cap = sc->cap ? sc->cap * 2 : 64;
		void *p = realloc(sc->stale, sizeof(*sc->stale) * (size_t)cap);
		void *o = p ? realloc(sc->orphan, (size_t)cap) : NULL;

		if (p)
			sc->stale = p;
		if (!o) {
			sc->oom = 1;
			return 1;
		}
		sc->orphan = o;
		sc->cap = cap;
	}
	sc->orphan[sc->n] = (unsigned char)orphan;
	sc->stale[sc->n++] = *k;
	return 0;
}

/* One flow through the data path's own ending (sluice_reclaim): the result, or -errno. */
static int reclaim_one(const struct sluice_maps *m, const struct sluice_flow_key *k,
		       unsigned long long now_ns, unsigned long long syn_timeout_ns,
		       unsigned long long idle_timeout_ns)
{
	struct sluice_reclaim a = { .key = *k, .now_ns = now_ns, .syn_timeout_ns = syn_timeout_ns,
				    .idle_timeout_ns = idle_timeout_ns };
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));

	if (bpf_prog_test_run_opts(m->reclaim_prog, &o))
		return -errno;
	return (int)a.result;
}

int maps_gc_flows(const struct sluice_maps *m, unsigned long long now_ns,
		  unsigned long long syn_timeout_ns, unsigned long long idle_timeout_ns,
		  flow_alive_fn still_open, void *ctx)
{
	struct stale_scan scan = { .now_ns = now_ns, .syn_timeout_ns = syn_timeout_ns,
				   .idle_timeout_ns = idle_timeout_ns };
	int reclaimed = 0, rc = 0;

	if (m->reclaim_prog < 0)
		return -EBADF;
	/* Collect first, end after: deleting while walking restarts a hash walk. The data path
	 * checks each candidate again when it ends it (it may have spoken since), and a request
	 * or turn starting on it meanwhile is ended with it or never taken: the GC owns nothing
	 * it did not swap out of the flow's ownership word. */
	walk_flows(m, collect_stale, &scan);
	for (int i = 0; i < scan.n && rc >= 0; i++) {
		if (!scan.orphan[i] && still_open && still_open(ctx, &scan.stale[i]))
			continue;
		rc = reclaim_one(m, &scan.stale[i], now_ns, syn_timeout_ns, idle_timeout_ns);
		reclaimed += rc == SLUICE_RECLAIM_ENDED;
	}
	free(scan.stale);
	free(scan.orphan);
	return rc < 0 ? rc : reclaimed;
}

/* ---- reconciliation ---- */

/* What a flow's ownership word holds, as the data path reads it (own_units_of). */
static void units_of(const struct sluice_flow *f, int *svc, int *cls, int *unit, int *turn,
		     int *conn)
{
	__u32 w = f->req_active;

	*unit = (w & SLUICE_OWN_STATE) == SLUICE_OWN_ACTIVE;
	if (w & SLUICE_OWN_TAGGED) {
		*svc = (int)(w >> SLUICE_OWN_SVC_SHIFT);
		*cls = (int)((w >> SLUICE_OWN_CLASS_SHIFT) & 3);
		*turn = !!(w & SLUICE_OWN_TURN);
		*conn = !!(w & SLUICE_OWN_CONN);
	} else {
		*svc = f->svc;
		*cls = f->class & 3;
		*turn = *conn = f->tracked_inflight;
	}
}

struct recon_walk {
	int n_slots;
	struct sluice_inflight *in, *busy;   /* what the flows hold, per slot */
	unsigned char *unsure;               /* a request being decided: skip the slot */
};

static int count_owned(void *ctx, const struct sluice_flow_key *k, const struct sluice_flow *f)
{
	struct recon_walk *w = ctx;
	int svc, cls, unit, turn, conn;

	if ((f->req_active & SLUICE_OWN_STATE) == SLUICE_OWN_DEAD)
		return 0;
	if ((f->req_active & SLUICE_OWN_STATE) == SLUICE_OWN_DECIDING) {
		if (f->svc < w->n_slots)
			w->unsure[f->svc] = 1;
		return 0;
	}
	units_of(f, &svc, &cls, &unit, &turn, &conn);
	if (svc >= w->n_slots)
		return 0;
	w->in[svc].cls[cls] += conn + (unit && !turn);
	w->busy[svc].cls[cls] += unit && turn;
	return 0;
}

/* The data path's change counts per bucket, summed over CPUs. */
static int read_ops(const struct sluice_maps *m, __u64 *ops)
{
	size_t n = SLUICE_OWN_OPS_BUCKETS;
	__u64 *all = calloc((size_t)m->ncpus * n, sizeof(*all));
	__u32 zero = 0;

	if (!all)
		return -ENOMEM;
	if (bpf_map_lookup_elem(m->own_ops, &zero, all)) {
		free(all);
		return -errno;
	}
	memset(ops, 0, n * sizeof(*ops));
	for (int c = 0; c < m->ncpus; c++)
		for (size_t b = 0; b < n; b++)
			ops[b] += all[(size_t)c * n + b];
	free(all);
	return 0;
}

/* The counters as BPF keeps them (without the releases) of every slot: in[] (the stripes
 * included), busy[]. */
static int read_counts(const struct sluice_maps *m, struct sluice_inflight *in,
		       struct sluice_inflight *busy)
{
	void *buf = calloc((size_t)m->n_slots * (size_t)m->ncpus, sizeof(*in));
	int err = buf ? maps_read_array(m->inflight, 0, (__u32)m->n_slots, sizeof(*in), in, NULL)
		      : -ENOMEM;

	if (!err)
		err = maps_add_stripes(m, 0, (__u32)m->n_slots, buf, NULL, in);
	free(buf);
	return err ? err : maps_read_array(m->busy, 0, (__u32)m->n_slots, sizeof(*busy), busy, NULL);
}

/* diff = counted - held, the total included (held: the classes' sum). 1 when any is not 0. */
static int diff_of(const struct sluice_inflight *counted, const struct sluice_inflight *rel,
		   const struct sluice_inflight *held, struct sluice_inflight *diff)
{
	__s64 total = 0;
	int any;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		diff->cls[c] = counted->cls[c] - rel->cls[c] - held->cls[c];
		total += held->cls[c];
	}
	diff->total = counted->total - rel->total - total;
	any = diff->total != 0;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		any |= diff->cls[c] != 0;
	return any;
}

int recon_init(struct recon_state *r, int n_slots)
{
	memset(r, 0, sizeof(*r));
	r->n_slots = n_slots;
	r->slot = calloc((size_t)n_slots, sizeof(*r->slot));
	return r->slot ? 0 : -ENOMEM;
}

void recon_free(struct recon_state *r)
{
	free(r->slot);
	r->slot = NULL;
}

int maps_reconcile(const struct sluice_maps *m, struct recon_state *r)
{
	int n = m->n_slots < r->n_slots ? m->n_slots : r->n_slots, corrected = 0, err;
	size_t sz = (size_t)m->n_slots * sizeof(struct sluice_inflight);
	__u64 ops1[SLUICE_OWN_OPS_BUCKETS], ops2[SLUICE_OWN_OPS_BUCKETS];
	struct sluice_inflight *c1 = calloc(8, sz), *b1 = c1 ? c1 + m->n_slots : NULL;
	struct sluice_inflight *c2 = b1 ? b1 + m->n_slots : NULL, *b2 = c2 ? c2 + m->n_slots : NULL;
	struct sluice_inflight *rel = b2 ? b2 + m->n_slots : NULL, *brel = rel ? rel + m->n_slots : NULL;
	struct recon_walk w = { .n_slots = m->n_slots, .in = brel ? brel + m->n_slots : NULL };

	if (!c1 || m->own_ops < 0) {
		free(c1);
		return c1 ? -EBADF : -ENOMEM;
	}
	w.busy = w.in + m->n_slots;
	w.unsure = calloc((size_t)m->n_slots, 1);
	/* One sweep: change counts, counters, the flow table, counters, change counts. */
	err = w.unsure ? 0 : -ENOMEM;
	if (!err)
		err = read_ops(m, ops1);
	if (!err)
		err = read_counts(m, c1, b1);
	if (!err)
		err = walk_flows(m, count_owned, &w);
	if (!err)
		err = read_counts(m, c2, b2);
	if (!err)
		err = read_ops(m, ops2);
	if (!err)
		err = maps_read_array(m->inflight_released, 0, (__u32)m->n_slots, sizeof(*rel), rel, NULL);
	if (!err)
		err = maps_read_array(m->busy_released, 0, (__u32)m->n_slots, sizeof(*brel), brel, NULL);
	for (int s = 0; s < n && !err; s++) {
		struct recon_slot *rs = &r->slot[s];
		struct sluice_inflight d_in, d_busy;
		int b = s & (SLUICE_OWN_OPS_BUCKETS - 1);

		/* The sweep saw this slot at rest: nothing counted or swapped while it ran, and no
		 * request half decided. Otherwise it says nothing, and the next one starts afresh. */
		if (ops1[b] != ops2[b] || w.unsure[s] || memcmp(&c1[s], &c2[s], sizeof(c1[s])) ||
		    memcmp(&b1[s], &b2[s], sizeof(b1[s]))) {
			rs->have = 0;
			continue;
		}
		int any = diff_of(&c1[s], &rel[s], &w.in[s], &d_in) |
			  diff_of(&b1[s], &brel[s], &w.busy[s], &d_busy);
		if (!any) {
			rs->have = 0;
			continue;
		}
		/* A difference counts only when the sweep before saw the same one at rest too
		 * (and nothing moved in between): a change in flight cannot stand still across two
		 * sweeps a tick apart. */
		if (!rs->have || rs->ops != ops1[b] || memcmp(&rs->d_in, &d_in, sizeof(d_in)) ||
		    memcmp(&rs->d_busy, &d_busy, sizeof(d_busy))) {
			rs->have = 1;
			rs->ops = ops1[b];
			rs->d_in = d_in;
			rs->d_busy = d_busy;
			continue;
		}
		/* Corrected where only the controller writes: the releases. */
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			rel[s].cls[c] += d_in.cls[c];
			brel[s].cls[c] += d_busy.cls[c];
		}
		rel[s].total += d_in.total;
		brel[s].total += d_busy.total;
		__u32 k = (__u32)s;
		if (bpf_map_update_elem(m->inflight_released, &k, &rel[s], BPF_ANY)) {
			err = -errno;
			break;
		}
		if (bpf_map_update_elem(m->busy_released, &k, &brel[s], BPF_ANY)) {
			err = -errno;
			corrected++;  /* the in-flight release was written: the caller re-reads */
			break;
		}
		__s64 units = (d_in.total < 0 ? -d_in.total : d_in.total) +
			      (d_busy.total < 0 ? -d_busy.total : d_busy.total);
		r->slot[s].corrections += (unsigned long long)(units ? units : 1);
		rs->have = 0;
		corrected++;
	}
	free(w.unsure);
	free(c1);
	/* releases written before a failure are corrections still: the caller re-reads them */
	return corrected ? corrected : err;
}

struct flow_count {
	int *per_service, n, total;
};

static int count_flow(void *ctx, const struct sluice_flow_key *k, const struct sluice_flow *f)
{
	struct flow_count *fc = ctx;

	if (f->svc < fc->n)
		fc->per_service[f->svc]++;
	fc->total++;
	return 0;
}

int maps_count_flows(const struct sluice_maps *m, int *per_service, int n)
{
	struct flow_count fc = { .per_service = per_service, .n = n };

	if (n > 0)
		memset(per_service, 0, sizeof(int) * (size_t)n);
	walk_flows(m, count_flow, &fc);
	return fc.total;
}
