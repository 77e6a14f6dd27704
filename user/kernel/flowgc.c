// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/flowgc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* Visit every flow: in batches of 1024 (one syscall each) where the kernel supports batch
 * lookups of hash maps, else key by key. fn returns non-zero to stop. */
typedef int (*flow_visit_fn)(void *ctx, const struct sluice_flow_key *k, const struct sluice_flow *f);

static int walk_flows(const struct sluice_maps *m, flow_visit_fn fn, void *ctx)
{
	enum { CHUNK = 1024 };
	struct sluice_flow_key *keys = malloc(sizeof(*keys) * CHUNK), key, next;
	struct sluice_flow *vals = malloc(sizeof(*vals) * CHUNK), f;
	__u32 in_batch = 0, out_batch = 0;
	int first = 1, have = 0, rc = 0;

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (;;) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		__u32 count = CHUNK;
		int err = bpf_map_lookup_batch(m->flows, first ? NULL : &in_batch, &out_batch,
					       keys, vals, &count, &opts);
		int e = err ? errno : 0;

		if (err && e != ENOENT) {
			if (first && (e == EINVAL || e == ENOTSUP || e == EOPNOTSUPP))
				goto one_by_one;
			rc = -e;
			goto out;
		}
		for (__u32 i = 0; i < count; i++)
			if (fn(ctx, &keys[i], &vals[i]))
				goto out;
		if (e == ENOENT)
			goto out;
		in_batch = out_batch;
		first = 0;
	}
one_by_one:
	while (bpf_map_get_next_key(m->flows, have ? &key : NULL, &next) == 0) {
		key = next;
		have = 1;
		if (bpf_map_lookup_elem(m->flows, &key, &f) == 0 && fn(ctx, &key, &f))
			break;
	}
out:
	free(keys);
	free(vals);
	return rc;
}

struct stale_scan {
	unsigned long long now_ns, syn_timeout_ns, idle_timeout_ns;
	struct sluice_flow_key *stale;
	int n, cap, oom;
};

static int collect_stale(void *ctx, const struct sluice_flow_key *k, const struct sluice_flow *f)
{
	struct stale_scan *sc = ctx;

	if (!((f->state == SLUICE_FLOW_SYN && sc->now_ns > f->admitted_ns + sc->syn_timeout_ns) ||
	      sc->now_ns > f->last_seen_ns + sc->idle_timeout_ns))
		return 0;
	if (sc->n == sc->cap) {
		void *p = realloc(sc->stale, sizeof(*sc->stale) * (size_t)(sc->cap = sc->cap ? sc->cap * 2 : 64));
		if (!p) {
			sc->oom = 1;
			return 1;
		}
		sc->stale = p;
	}
	sc->stale[sc->n++] = *k;
	return 0;
}

/* The GC's share of a reclaimed flow's client count. Not atomic against the data path's
 * updates of the same client; off by one at worst, for a flow whose end was never seen. */
static void release_client_count(const struct sluice_maps *m, __u32 svc, const __u8 addr[16])
{
	struct sluice_client_key k = { .svc = svc };
	struct sluice_client c;

	memcpy(k.addr, addr, 16);
	sluice_client_addr(k.addr);
	if (bpf_map_lookup_elem(m->clients, &k, &c) == 0 && c.in_flight > 0) {
		c.in_flight--;
		bpf_map_update_elem(m->clients, &k, &c, BPF_EXIST);
	}
}

int maps_gc_flows(const struct sluice_maps *m, unsigned long long now_ns,
		  unsigned long long syn_timeout_ns, unsigned long long idle_timeout_ns,
		  flow_alive_fn still_open, void *ctx)
{
	/* Per released map (inflight_released, busy_released), one entry per service slot. */
	const int rel_fd[2] = { m->inflight_released, m->busy_released };
	struct sluice_inflight *rel;
	unsigned char *dirty;
	struct stale_scan scan = { .now_ns = now_ns, .syn_timeout_ns = syn_timeout_ns,
				   .idle_timeout_ns = idle_timeout_ns };
	struct sluice_flow_key *stale;
	struct sluice_flow f;
	int reclaimed = 0, n_stale;

	/* Collect first, delete after: deleting while walking restarts a hash walk. */
	walk_flows(m, collect_stale, &scan);
	stale = scan.stale;
	n_stale = scan.n;
	if (!n_stale) {
		free(stale);
		return 0;
	}
	rel = calloc(2 * (size_t)m->n_slots, sizeof(*rel));
	dirty = calloc(2 * (size_t)m->n_slots, 1);
	if (!rel || !dirty) {
		free(rel);
		free(dirty);
		free(stale);
		return -ENOMEM;
	}
	for (int i = 0; i < n_stale; i++) {
		if (bpf_map_lookup_elem(m->flows, &stale[i], &f) || f.svc >= m->n_slots)
			continue;
		if (still_open && still_open(ctx, &stale[i]))
			continue;
		/* Only a successful delete owns the release (BPF may end it at the same time). */
		if (bpf_map_delete_elem(m->flows, &stale[i]))
			continue;
		reclaimed++;
		if (f.client_counted)
			release_client_count(m, f.svc, stale[i].client_addr);
		/* units[0]: `inflight` (a tcp connection, an http request; req_active 2 is a
		 * request being decided, no slot yet); units[1]: `busy` (a tcp turn left open). */
		int tcp = f.tracked_inflight, open = f.req_active == 1;
		int units[2] = { tcp + (!tcp && open), tcp && open };
		for (int w = 0; w < 2; w++) {
			if (!units[w])
				continue;
			size_t at = (size_t)w * m->n_slots + f.svc;

			if (!dirty[at]) {
				__u32 k = f.svc;
				if (bpf_map_lookup_elem(rel_fd[w], &k, &rel[at]))
					continue;
				dirty[at] = 1;
			}
			rel[at].total += units[w];
			rel[at].cls[f.class & 3] += units[w];
		}
	}
	free(stale);
	for (int w = 0; w < 2 && reclaimed >= 0; w++)
		for (int s = 0; s < m->n_slots; s++) {
			size_t at = (size_t)w * m->n_slots + s;
			__u32 k = s;

			if (dirty[at] && bpf_map_update_elem(rel_fd[w], &k, &rel[at], BPF_ANY)) {
				reclaimed = -errno;
				break;
			}
		}
	free(rel);
	free(dirty);
	return reclaimed;
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
