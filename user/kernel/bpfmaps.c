// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/bpfmaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* Pins of an older layout (an older sluiced still running) hold class_stats entries of
 * another shape: reading them as this build's would mix up classes and CPUs, so the map is
 * left out (reads of it fail; status shows no counters rather than wrong ones). */
static void drop_other_class_stats(struct sluice_maps *m)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (m->class_stats >= 0 && (bpf_obj_get_info_by_fd(m->class_stats, &info, &len) ||
				    info.value_size != sizeof(struct sluice_svc_stats))) {
		close(m->class_stats);
		m->class_stats = -1;
	}
}

int maps_open_pinned(const char *pin_dir, struct sluice_maps *m)
{
	char path[512];
	int err = 0;

	memset(m, -1, sizeof(*m));
	m->ncpus = libbpf_num_possible_cpus();
#define X(name)                                                              \
	if (!err) {                                                          \
		snprintf(path, sizeof(path), "%s/%s", pin_dir, #name);       \
		m->name = bpf_obj_get(path);                                 \
		if (m->name < 0)                                             \
			err = -errno;                                        \
	}
	SLUICE_MAP_NAMES
#undef X
	if (!err)
		err = maps_learn_sizes(m);
	if (err) {
		maps_close(m);
		return err;
	}
	drop_other_class_stats(m);
#define X(name)                                                              \
	snprintf(path, sizeof(path), "%s/%s", pin_dir, #name);               \
	m->name = bpf_obj_get(path);
	SLUICE_MAP_NAMES_OPTIONAL
#undef X
	return 0;
}

int maps_learn_sizes(struct sluice_maps *m)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	m->ncpus = libbpf_num_possible_cpus();
	if (bpf_obj_get_info_by_fd(m->services, &info, &len))
		return -errno;
	m->n_slots = (int)info.max_entries;
	return 0;
}

int maps_walk_hash(int fd, size_t ksize, size_t vsize, maps_entry_fn fn, void *ctx)
{
	enum { CHUNK = 1024 };
	unsigned char *keys = malloc(ksize * CHUNK), *vals = malloc(vsize * CHUNK);
	unsigned char *key = malloc(ksize), *next = malloc(ksize);
	__u32 in_batch = 0, out_batch = 0;
	int first = 1, have = 0, rc = 0;

	if (!keys || !vals || !key || !next) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		__u32 count = CHUNK;
		int err = bpf_map_lookup_batch(fd, first ? NULL : &in_batch, &out_batch, keys, vals,
					       &count, &opts);
		int e = err ? errno : 0;

		if (err && e != ENOENT) {
			if (first && (e == EINVAL || e == ENOTSUP || e == EOPNOTSUPP))
				goto one_by_one;
			rc = -e;
			goto out;
		}
		for (__u32 i = 0; i < count && !rc; i++)
			rc = fn(ctx, keys + ksize * i, vals + vsize * i);
		if (rc || e == ENOENT)
			goto out;
		in_batch = out_batch;
		first = 0;
	}
one_by_one:
	/* vals holds one value here: the batch never filled it */
	while (!rc && bpf_map_get_next_key(fd, have ? key : NULL, next) == 0) {
		memcpy(key, next, ksize);
		have = 1;
		if (bpf_map_lookup_elem(fd, key, vals) == 0)
			rc = fn(ctx, key, vals);
	}
out:
	free(keys);
	free(vals);
	free(key);
	free(next);
	return rc;
}

int maps_read_array(int fd, __u32 first, __u32 n, size_t stride, void *vals, __u32 *keys)
{
	__u32 done = 0, *own = NULL;
	int err = 0;

	if (!keys && !(keys = own = malloc(sizeof(*keys) * (n ? n : 1))))
		return -ENOMEM;
	/* The batch position is the last key read: start after first - 1 (NULL: from 0). */
	__u32 prev = first - 1, *inp = first ? &prev : NULL;

	while (done < n) {
		LIBBPF_OPTS(bpf_map_batch_opts, o);
		__u32 out = 0, count = n - done;
		int rc = bpf_map_lookup_batch(fd, inp, &out, keys, (char *)vals + stride * done,
					      &count, &o);

		if (rc && errno != ENOENT) {
			err = -errno;
			break;
		}
		done += count;
		if (rc || !count)
			break;   /* ENOENT: the end of the map */
		prev = out;
		inp = &prev;
	}
	free(own);
	if (err == -EINVAL || err == -ENOTSUP || err == -EOPNOTSUPP || err == -524 /* ENOTSUPP */) {
		err = 0;  /* no batch ops for this map here: entry by entry */
		for (__u32 i = done; i < n && !err; i++) {
			__u32 k = first + i;

			if (bpf_map_lookup_elem(fd, &k, (char *)vals + stride * i))
				err = -errno;
		}
		done = err ? done : n;
	}
	return err ? err : done == n ? 0 : -ENOENT;
}

void maps_close(struct sluice_maps *m)
{
#define X(name) if (m->name >= 0) { close(m->name); m->name = -1; }
	SLUICE_MAP_NAMES
	SLUICE_MAP_NAMES_OPTIONAL
#undef X
}

/* Sum a per-CPU value made only of u64 fields. */
static int read_percpu_u64s(int fd, __u32 key, int ncpus, void *out, size_t size)
{
	size_t n = size / sizeof(__u64);
	__u64 *all = calloc((size_t)ncpus, size), *sum = out;

	if (!all)
		return -ENOMEM;
	if (bpf_map_lookup_elem(fd, &key, all) != 0) {
		int err = -errno;
		free(all);
		return err;
	}
	memset(out, 0, size);
	for (int c = 0; c < ncpus; c++)
		for (size_t i = 0; i < n; i++)
			sum[i] += all[(size_t)c * n + i];
	free(all);
	return 0;
}

int maps_read_svc_stats(const struct sluice_maps *m, int svc, struct sluice_svc_stats *out)
{
	return read_percpu_u64s(m->class_stats, (__u32)svc, m->ncpus, out, sizeof(*out));
}

int maps_read_class_stats(const struct sluice_maps *m, int svc, int cls,
			  struct sluice_class_stats *out)
{
	struct sluice_svc_stats all;
	int err = maps_read_svc_stats(m, svc, &all);

	if (!err)
		*out = all.cls[cls & (SLUICE_NUM_CLASSES - 1)];
	return err;
}

int maps_hist_fd(const struct sluice_maps *m, int svc, int cls, __u32 *key)
{
	const int fd[SLUICE_NUM_CLASSES] = { m->latency_hist, m->latency_hist1, m->latency_hist2,
					     m->latency_hist3 };

	cls &= SLUICE_NUM_CLASSES - 1;
	if (m->latency_hist1 < 0) {
		/* pins of a layout before 8: every class in latency_hist */
		*key = sluice_stat_index((__u32)svc, (__u32)cls);
		return m->latency_hist;
	}
	*key = (__u32)svc;
	return fd[cls];
}

int maps_read_hist(const struct sluice_maps *m, int svc, int cls, struct sluice_hist *out)
{
	__u32 key;
	int fd = maps_hist_fd(m, svc, cls, &key);

	return fd < 0 ? -ENOENT : read_percpu_u64s(fd, key, m->ncpus, out, sizeof(*out));
}

int maps_read_pkt_stats(const struct sluice_maps *m, struct sluice_pkt_stats *out)
{
	return read_percpu_u64s(m->pkt_stats, 0, m->ncpus, out, sizeof(*out));
}

/* Net of what the controller's GC released. */
static void net_of(struct sluice_inflight *out, const struct sluice_inflight *rel)
{
	out->total -= rel->total;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		out->cls[c] -= rel->cls[c];
}

int maps_add_stripes(const struct sluice_maps *m, __u32 first, __u32 n, void *buf, __u32 *keys,
		     struct sluice_inflight *out)
{
	const struct sluice_inflight *v = buf;
	int err;

	if (m->inflight_pcpu < 0)
		return 0;
	err = maps_read_array(m->inflight_pcpu, first, n, sizeof(*v) * (size_t)m->ncpus, buf, keys);
	for (__u32 e = 0; e < n && !err; e++)
		for (int c = 0; c < m->ncpus; c++)
			for (int j = 0; j < SLUICE_NUM_CLASSES; j++) {
				out[e].cls[j] += v[(size_t)e * (size_t)m->ncpus + (size_t)c].cls[j];
				out[e].total += v[(size_t)e * (size_t)m->ncpus + (size_t)c].cls[j];
			}
	return err;
}

static int read_net(int fd, int rel_fd, int svc, struct sluice_inflight *out)
{
	struct sluice_inflight rel;
	__u32 k = svc;

	if (bpf_map_lookup_elem(fd, &k, out) || bpf_map_lookup_elem(rel_fd, &k, &rel))
		return -errno;
	net_of(out, &rel);
	return 0;
}

int maps_read_inflight(const struct sluice_maps *m, int svc, struct sluice_inflight *out)
{
	void *buf = calloc((size_t)m->ncpus, sizeof(*out));
	__u32 key;
	int err = buf ? read_net(m->inflight, m->inflight_released, svc, out) : -ENOMEM;

	if (!err)
		err = maps_add_stripes(m, (__u32)svc, 1, buf, &key, out);
	free(buf);
	return err;
}

int maps_read_busy(const struct sluice_maps *m, int svc, struct sluice_inflight *out)
{
	return read_net(m->busy, m->busy_released, svc, out);
}

int maps_read_concurrency(const struct sluice_maps *m, int svc, int protocol,
			  struct sluice_inflight *out)
{
	return protocol == SLUICE_PROTO_HTTP ? maps_read_inflight(m, svc, out)
					     : maps_read_busy(m, svc, out);
}

int maps_read_service(const struct sluice_maps *m, int svc, struct sluice_service *out)
{
	__u32 k = svc;
	return bpf_map_lookup_elem(m->services, &k, out) ? -errno : 0;
}

/* The slots the map has (m->n_slots, learned when it was opened), in one batch: a name none
 * runs under was a lookup of each of the 65,536 a map could have, about 150 ms. */
int maps_find_service(const struct sluice_maps *m, const char *name, struct sluice_service *sv)
{
	struct sluice_service *all;
	int found = -1;

	if (m->n_slots <= 0 || m->n_slots > SLUICE_MAX_SERVICES ||
	    !(all = calloc((size_t)m->n_slots, sizeof(*all))))
		return -1;
	if (maps_read_array(m->services, 0, (__u32)m->n_slots, sizeof(*all), all, NULL) == 0)
		for (int s = 0; s < m->n_slots && found < 0; s++)
			if (all[s].port && strncmp(all[s].name, name, SLUICE_NAME_LEN) == 0) {
				*sv = all[s];
				found = s;
			}
	free(all);
	return found;
}

int maps_read_verdict(const struct sluice_maps *m, int svc, struct sluice_verdict *out)
{
	__u32 k = svc;
	return bpf_map_lookup_elem(m->verdicts, &k, out) ? -errno : 0;
}

int maps_write_verdict(const struct sluice_maps *m, int svc, const struct sluice_verdict *v)
{
	__u32 k = svc;
	return bpf_map_update_elem(m->verdicts, &k, v, BPF_ANY) ? -errno : 0;
}

int maps_read_globals(const struct sluice_maps *m, struct sluice_globals *out)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(m->globals, &k, out) ? -errno : 0;
}

int maps_write_globals(const struct sluice_maps *m, const struct sluice_globals *g)
{
	__u32 k = 0;
	return bpf_map_update_elem(m->globals, &k, g, BPF_ANY) ? -errno : 0;
}

/* ---- the tick's read path */

/* A copy map of n entries (struct sluice_inflight) mapped read-only, or NULL when there is
 * none (or no program to fill it) or it cannot be mapped; *len: its length. */
static const struct sluice_inflight *map_copy(int fd, int prog, size_t n, size_t *len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	if (fd < 0 || prog < 0 || !n || page <= 0)
		return NULL;
	*len = (sizeof(struct sluice_inflight) * n + (size_t)page - 1) & ~((size_t)page - 1);
	p = mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

int maps_reader_init(struct maps_reader *r, const struct sluice_maps *m)
{
	size_t n = (size_t)m->n_slots;

	memset(r, 0, sizeof(*r));
	r->n_slots = m->n_slots;
	r->ncpus = m->ncpus;
	r->stats_len = sizeof(struct sluice_svc_stats) * (size_t)m->ncpus;
	r->stats = malloc(r->stats_len * n);
	r->scratch = malloc(r->stats_len * n);
	r->changed = calloc(n, 1);
	r->inflight = calloc(n, sizeof(*r->inflight));
	r->released = calloc(n, sizeof(*r->released));
	r->busy = calloc(n, sizeof(*r->busy));
	r->busy_released = calloc(n, sizeof(*r->busy_released));
	r->busy_read = calloc(n, 1);
	r->wants_inflight = calloc(n, 1);
	r->samples = calloc(n * SLUICE_NUM_CLASSES, sizeof(*r->samples));
	r->hist = malloc(sizeof(struct sluice_hist) * SLUICE_NUM_CLASSES * (size_t)m->ncpus);
	r->stripes = malloc(sizeof(struct sluice_inflight) * n * (size_t)m->ncpus);
	r->keys = malloc(sizeof(*r->keys) * n * SLUICE_NUM_CLASSES);
	r->hwant = calloc(n, 1);
	r->hdone = calloc(n, 1);
	r->hgen = calloc(n, sizeof(*r->hgen));
	r->hpos = calloc(n * SLUICE_NUM_CLASSES, sizeof(*r->hpos));
	/* a run's buffer of about 128 KB: big enough that the syscalls are few, small enough
	 * to stay in cache while it is summed */
	r->hraw_entries = (int)(131072 / (sizeof(struct sluice_hist) * (size_t)m->ncpus));
	if (r->hraw_entries < SLUICE_NUM_CLASSES)
		r->hraw_entries = SLUICE_NUM_CLASSES;
	r->hraw = malloc(sizeof(struct sluice_hist) * (size_t)m->ncpus * (size_t)r->hraw_entries);
	if (!r->keys || !r->hwant || !r->hdone || !r->hgen || !r->hpos || !r->hraw ||
	    !r->stats || !r->scratch || !r->changed || !r->inflight || !r->stripes ||
	    !r->released || !r->hist || !r->busy || !r->busy_released || !r->busy_read ||
	    !r->samples || !r->wants_inflight) {
		maps_reader_free(r);
		return -ENOMEM;
	}
	/* the copies made in the kernel, mapped (else: batch lookups, as without them) */
	r->busy_map = map_copy(m->busy_copy, m->copy_prog, n, &r->copy_map_len);
	r->inflight_map = map_copy(m->inflight_copy, m->copy_prog, n, &r->copy_map_len);
	r->copy_prog = m->copy_prog;
	return maps_reader_reread_released(r, m);
}

void maps_reader_free(struct maps_reader *r)
{
	free(r->stats);
	free(r->scratch);
	free(r->changed);
	free(r->inflight);
	free(r->released);
	free(r->busy);
	free(r->busy_released);
	free(r->busy_read);
	free(r->wants_inflight);
	free(r->samples);
	free(r->hist);
	free(r->stripes);
	free(r->keys);
	free(r->hwant);
	free(r->hdone);
	free(r->hgen);
	free(r->hpos);
	free(r->hsum);
	free(r->hraw);
	if (r->busy_map)
		munmap((void *)r->busy_map, r->copy_map_len);
	if (r->inflight_map)
		munmap((void *)r->inflight_map, r->copy_map_len);
	memset(r, 0, sizeof(*r));
}

/* Entries [first, first + n) copied into the mapped copy of `what` (enum sluice_copy_what)
 * in the kernel: 0 when all were. */
static int copy_in_kernel(const struct maps_reader *r, const struct sluice_inflight *mapped,
			  unsigned what, int first, int n)
{
	struct sluice_copy_counts a = { .first = (__u32)first, .n = (__u32)n, .what = what };
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));

	if (!mapped || bpf_prog_test_run_opts(r->copy_prog, &o))
		return -1;
	return a.copied == (__u32)n ? 0 : -1;
}

int maps_reader_reread_released(struct maps_reader *r, const struct sluice_maps *m)
{
	int err = maps_read_array(m->inflight_released, 0, (__u32)r->n_slots,
				  sizeof(*r->released), r->released, r->keys);

	if (!err)
		err = maps_read_array(m->busy_released, 0, (__u32)r->n_slots,
				      sizeof(*r->busy_released), r->busy_released, r->keys);
	/* not read (or in part): tried again by the next read of the counters */
	r->released_stale = err != 0;
	return err;
}

/* Read slots [first, first + n) into `stats`, marking those whose counters moved; `whole`:
 * they are every slot in use. */
static int read_slots(struct maps_reader *r, const struct sluice_maps *m, int first, int n,
		      int whole)
{
	int err = maps_read_array(m->class_stats, (__u32)first, (__u32)n, r->stats_len, r->scratch,
				  r->keys);

	if (err)
		return err;
	/* A read of every slot in use: the batch is laid out as `stats`, so the buffers swap
	 * instead of the moved slots being copied (the slots past them are not in use) */
	int swap = whole && first == 0;

	for (int k = 0; k < n; k++) {
		size_t off = r->stats_len * (size_t)(first + k);
		const unsigned char *fresh = r->scratch + r->stats_len * (size_t)k;
		__u64 *samples = &r->samples[(size_t)(first + k) * SLUICE_NUM_CLASSES];

		if (r->have_prev && !memcmp(r->stats + off, fresh, r->stats_len))
			continue;
		if (!swap)
			memcpy(r->stats + off, fresh, r->stats_len);
		r->changed[first + k] = 1;
		r->n_changed++;
		memset(samples, 0, sizeof(__u64) * SLUICE_NUM_CLASSES);
		for (int c = 0; c < r->ncpus; c++)
			for (int j = 0; j < SLUICE_NUM_CLASSES; j++)
				samples[j] += ((const struct sluice_svc_stats *)fresh)[c].samples[j];
	}
	if (swap) {
		unsigned char *t = r->stats;

		r->stats = r->scratch;
		r->scratch = t;
	}
	/* busy: from its copy in the kernel (mapped), or in a batch into the scratch (the stats
	 * are compared, it is free again) */
	const struct sluice_inflight *busy_now;

	if (copy_in_kernel(r, r->busy_map, SLUICE_COPY_BUSY, first, n) == 0) {
		busy_now = r->busy_map + first;
	} else {
		if ((err = maps_read_array(m->busy, (__u32)first, (__u32)n, sizeof(*r->busy),
					   r->scratch, r->keys)))
			return err;
		busy_now = (const struct sluice_inflight *)r->scratch;
	}
	for (int k = 0; k < n; k++) {
		const struct sluice_inflight *fresh = busy_now + k;
		int s = first + k;

		r->busy_read[s] = 1;
		if (r->have_prev && !memcmp(&r->busy[s], fresh, sizeof(*fresh)))
			continue;
		r->busy[s] = *fresh;
		if (!r->changed[s]) {
			r->changed[s] = 1;
			r->n_changed++;
		}
	}
	return 0;
}

int maps_reader_read(struct maps_reader *r, const struct sluice_maps *m, int n_used,
		     const int *hot, int n_hot)
{
	int err, parts, len, first, end, n_inflight = 0;

	if (n_used > r->n_slots)
		n_used = r->n_slots;
	/* The GC's releases could not be re-read after a pass: kept as they were, every unit
	 * released since would count as in flight. Read now, and every slot's concurrency
	 * looked at again (a quiet service's moved with them, no counter did). */
	if (r->released_stale) {
		if ((err = maps_reader_reread_released(r, m)))
			return err;
		r->have_prev = 0;
	}
	memset(r->changed, 0, (size_t)r->n_slots);
	memset(r->busy_read, 0, (size_t)r->n_slots);
	if (!++r->gen)
		r->gen = 1;   /* histograms read ahead before these counters: not to be used */
	r->n_changed = 0;
	r->inflight_read = 0;
	parts = (n_used + MAPS_SCAN_SLOTS - 1) / MAPS_SCAN_SLOTS;
	if (parts > MAPS_SCAN_PARTS)
		parts = MAPS_SCAN_PARTS;
	if (!r->have_prev || parts <= 1 || n_hot * 4 > n_used) {
		first = 0;
		end = n_used;   /* everything: the first read, few slots, or much moving */
	} else {
		len = (n_used + parts - 1) / parts;
		first = (r->turn++ % parts) * len;
		end = first + len < n_used ? first + len : n_used;
	}
	if ((err = read_slots(r, m, first, end - first, first == 0 && end == n_used)))
		goto fail;
	for (int k = 0; k < n_hot; k++)
		if ((hot[k] < first || hot[k] >= end) && hot[k] < n_used &&
		    (err = read_slots(r, m, hot[k], 1, 0)))
			goto fail;
	r->have_prev = 1;
	/* In-flight of many services: one batch; of a few: a lookup each, when asked for. */
	for (int s = 0; s < n_used && r->n_changed > n_used / 8; s++)
		n_inflight += r->changed[s] & r->wants_inflight[s];
	if (n_inflight > n_used / 8) {
		if (copy_in_kernel(r, r->inflight_map, SLUICE_COPY_INFLIGHT, 0, n_used) == 0)
			memcpy(r->inflight, r->inflight_map, sizeof(*r->inflight) * (size_t)n_used);
		else if ((err = maps_read_array(m->inflight, 0, (__u32)n_used,
						sizeof(*r->inflight), r->inflight, r->keys)) ||
			 (err = maps_add_stripes(m, 0, (__u32)n_used, r->stripes, r->keys,
						 r->inflight)))
			goto fail;  /* the counters were read: their changes are to be seen again */
		r->inflight_read = 1;
	}
	return 0;
fail:
	r->have_prev = 0; /* the buffer may hold a partial read: compare nothing with it */
	return err;
}

long long maps_reader_samples(const struct maps_reader *r, int svc, int cls)
{
	return (long long)r->samples[(size_t)svc * SLUICE_NUM_CLASSES + (size_t)cls];
}

int maps_reader_changed(const struct maps_reader *r, int svc)
{
	return r->changed[svc];
}
/* The per-CPU values below are made of u64 only: no padding between CPUs. */
_Static_assert(sizeof(struct sluice_svc_stats) % 8 == 0, "class_stats not u64-aligned");
_Static_assert(sizeof(struct sluice_hist) % 8 == 0, "hist not u64-aligned");

/* Per-CPU values of consecutive entries: entry e of CPU c is at (e * ncpus + c). */
static void sum_percpu(const void *raw, int entries, int ncpus, size_t size, void *out)
{
	size_t n = size / sizeof(__u64);
	const __u64 *all = raw;

	for (int e = 0; e < entries; e++) {
		__u64 *sum = (__u64 *)((char *)out + size * (size_t)e);
		const __u64 *v0 = all + (size_t)e * (size_t)ncpus * n;
		int c = 1;

		/* the first two CPUs' values added as out is written, then the others added: one
		 * pass over out on 2 CPUs */
		if (ncpus >= 2) {
			for (size_t i = 0; i < n; i++)
				sum[i] = v0[i] + v0[n + i];
			c = 2;
		} else {
			memcpy(sum, v0, size);
		}
		for (; c < ncpus; c++) {
			const __u64 *v = all + ((size_t)e * (size_t)ncpus + (size_t)c) * n;

			for (size_t i = 0; i < n; i++)
				sum[i] += v[i];
		}
	}
}

void maps_reader_stats(const struct maps_reader *r, int svc, struct sluice_class_stats *out)
{
	const struct sluice_svc_stats *v = (const void *)(r->stats + r->stats_len * (size_t)svc);

	/* the first CPU's counters as they are, the others added: no pass to zero out first */
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		out[k] = v[0].cls[k];
	for (int c = 1; c < r->ncpus; c++)
		for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
			const __u64 *f = (const __u64 *)&v[c].cls[k];
			__u64 *o = (__u64 *)&out[k];

			for (size_t i = 0; i < sizeof(*out) / sizeof(__u64); i++)
				o[i] += f[i];
		}
}

int maps_reader_inflight(struct maps_reader *r, const struct sluice_maps *m, int svc,
			 struct sluice_inflight *out)
{
	__u32 k = (__u32)svc;

	if (!r->inflight_read && (bpf_map_lookup_elem(m->inflight, &k, &r->inflight[svc]) ||
				  maps_add_stripes(m, k, 1, r->stripes, r->keys, &r->inflight[svc])))
		return -errno;
	*out = r->inflight[svc];
	net_of(out, &r->released[svc]);
	return 0;
}

int maps_reader_busy(struct maps_reader *r, const struct sluice_maps *m, int svc,
		     struct sluice_inflight *out)
{
	__u32 k = (__u32)svc;

	/* A slot this read did not cover (its service runs for another reason): look it up. */
	if (!r->busy_read[svc] && bpf_map_lookup_elem(m->busy, &k, &r->busy[svc]))
		return -errno;
	*out = r->busy[svc];
	net_of(out, &r->busy_released[svc]);
	return 0;
}

int maps_reader_concurrency(struct maps_reader *r, const struct sluice_maps *m, int svc,
			    int protocol, struct sluice_inflight *out)
{
	return protocol == SLUICE_PROTO_HTTP ? maps_reader_inflight(r, m, svc, out)
					     : maps_reader_busy(r, m, svc, out);
}

/* Where the classes of mask read ahead this round are (at[c]); 0 when one of them was not. */
static int at_prefetch(const struct maps_reader *r, int svc, unsigned mask,
		       const struct sluice_hist **at)
{
	if (svc < 0 || svc >= r->n_slots || r->hgen[svc] != r->gen || !r->gen ||
	    (r->hdone[svc] & mask) != mask)
		return 0;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (mask >> c & 1)
			at[c] = &r->hsum[r->hpos[(size_t)svc * SLUICE_NUM_CLASSES + (size_t)c]];
	return 1;
}

/* The classes of mask read ahead this round into out[c]; 0 when one of them was not. */
static int from_prefetch(const struct maps_reader *r, int svc, unsigned mask,
			 struct sluice_hist *out)
{
	const struct sluice_hist *at[SLUICE_NUM_CLASSES];

	if (!at_prefetch(r, svc, mask, at))
		return 0;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (mask >> c & 1)
			out[c] = *at[c];
	return 1;
}

void maps_reader_prefetch_slot(const struct maps_reader *r, int svc)
{
	const unsigned char *st;

	if (svc < 0 || svc >= r->n_slots)
		return;
	st = r->stats + r->stats_len * (size_t)svc;
	for (size_t o = 0; o < r->stats_len; o += 64)
		__builtin_prefetch(st + o, 0, 2);
	__builtin_prefetch(&r->busy[svc], 0, 2);
	__builtin_prefetch(&r->inflight[svc], 0, 2);
	__builtin_prefetch(&r->samples[(size_t)svc * SLUICE_NUM_CLASSES], 0, 2);
	for (int c = 0; r->hgen[svc] == r->gen && r->gen && c < SLUICE_NUM_CLASSES; c++)
		if (r->hdone[svc] >> c & 1)
			__builtin_prefetch(&r->hsum[r->hpos[(size_t)svc * SLUICE_NUM_CLASSES +
							    (size_t)c]], 0, 2);
}

void maps_reader_want_hist(struct maps_reader *r, int svc, unsigned mask)
{
	if (svc >= 0 && svc < r->n_slots)
		r->hwant[svc] |= (unsigned char)(mask & ((1u << SLUICE_NUM_CLASSES) - 1));
}

/* Sum class c's asked-for slots of the run [first, first + n) (in hraw) into hsum. */
static void take_run(struct maps_reader *r, int c, __u32 first, __u32 n, int *pos)
{
	size_t one = sizeof(struct sluice_hist) * (size_t)r->ncpus;

	for (__u32 s = first; s < first + n; s++) {
		if (!(r->hwant[s] >> c & 1))
			continue;
		if (r->hgen[s] != r->gen) {
			r->hgen[s] = r->gen;
			r->hdone[s] = 0;
		}
		sum_percpu((const unsigned char *)r->hraw + one * (s - first), 1, r->ncpus,
			   sizeof(struct sluice_hist), &r->hsum[*pos]);
		r->hpos[(size_t)s * SLUICE_NUM_CLASSES + (size_t)c] = *pos;
		r->hdone[s] |= (unsigned char)(1u << c);
		(*pos)++;
	}
}

/* Read the slots [start, end) of class c's histograms in one lookup and sum what was asked
 * of them. */
static int read_run(struct maps_reader *r, const struct sluice_maps *m, int c, __u32 start,
		    __u32 end, int *pos)
{
	__u32 key;
	int err, fd = maps_hist_fd(m, (int)start, c, &key);

	if (m->latency_hist1 < 0)
		return -ENOTSUP;     /* pins of a layout before 8: not the daemon's */
	r->hist_syscalls++;
	err = maps_read_array(fd, start, end - start,
			      sizeof(struct sluice_hist) * (size_t)r->ncpus, r->hraw, r->keys);
	if (!err)
		take_run(r, c, start, end - start, pos);
	if (r->beat)
		r->beat(r->beat_ctx);
	return err;
}

int maps_reader_prefetch_hists(struct maps_reader *r, const struct sluice_maps *m, int n_used)
{
	int want = 0, pos = 0, err = 0;
	__u32 start = 0, end = 0;    /* the run being built: [start, end), empty when equal */

	if (n_used > r->n_slots)
		n_used = r->n_slots;
	if (!++r->gen)
		r->gen = 1;          /* 0 is "never read" */
	for (int s = 0; s < n_used; s++)
		want += __builtin_popcount(r->hwant[s]);
	if (want > r->hsum_cap) {
		struct sluice_hist *h = realloc(r->hsum, sizeof(*h) * (size_t)want);

		if (!h) {
			memset(r->hwant, 0, (size_t)r->n_slots);
			return -ENOMEM;   /* every histogram is looked up on its own */
		}
		r->hsum = h;
		r->hsum_cap = want;
	}
	/* class by class: the slots of one class are consecutive entries of its map */
	for (int c = 0; c < SLUICE_NUM_CLASSES && want; c++) {
		for (int s = 0; s < n_used; s++) {
			__u32 k = (__u32)s;

			if (!(r->hwant[s] >> c & 1))
				continue;
			if (start != end && k - end <= MAPS_HIST_GAP &&
			    k + 1 - start <= (__u32)r->hraw_entries) {
				end = k + 1;
				continue;
			}
			if (start != end && !err)
				err = read_run(r, m, c, start, end, &pos);
			start = k;
			end = k + 1;
		}
		if (start != end && !err)
			err = read_run(r, m, c, start, end, &pos);
		start = end = 0;
	}
	memset(r->hwant, 0, (size_t)r->n_slots);
	return err;   /* what was not read is looked up entry by entry */
}

int maps_reader_hists(struct maps_reader *r, const struct sluice_maps *m, int svc,
		      struct sluice_hist *out)
{
	return maps_reader_hist_classes(r, m, svc, (1u << SLUICE_NUM_CLASSES) - 1, out);
}

int maps_reader_hist_at(struct maps_reader *r, const struct sluice_maps *m, int svc,
			unsigned mask, struct sluice_hist *room, const struct sluice_hist **at)
{
	int err;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		at[c] = NULL;
	if (at_prefetch(r, svc, mask, at))
		return 0;
	if ((err = maps_reader_hist_classes(r, m, svc, mask, room)))
		return err;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (mask >> c & 1)
			at[c] = &room[c];
	return 0;
}

int maps_reader_hist_classes(struct maps_reader *r, const struct sluice_maps *m, int svc,
			     unsigned mask, struct sluice_hist *out)
{
	if (from_prefetch(r, svc, mask, out))
		return 0;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		__u32 k;
		int fd;

		if (!(mask >> c & 1))
			continue;
		fd = maps_hist_fd(m, svc, c, &k);
		if (bpf_map_lookup_elem(fd, &k, r->hist))
			return -errno;
		sum_percpu(r->hist, 1, r->ncpus, sizeof(*out), &out[c]);
	}
	return 0;
}

static int lookup_opt(int fd, int svc, void *out)
{
	__u32 k = svc;

	if (fd < 0)
		return -ENOENT;
	return bpf_map_lookup_elem(fd, &k, out) ? -errno : 0;
}

static int update_opt(int fd, int svc, const void *v)
{
	__u32 k = svc;

	if (fd < 0)
		return -ENOENT;
	return bpf_map_update_elem(fd, &k, v, BPF_ANY) ? -errno : 0;
}

int maps_read_ctl_slot(const struct sluice_maps *m, int svc, struct sluice_ctl_slot *out)
{
	return lookup_opt(m->ctl_state, svc, out);
}

int maps_write_ctl_slot(const struct sluice_maps *m, int svc, const struct sluice_ctl_slot *v)
{
	return update_opt(m->ctl_state, svc, v);
}

int maps_read_conn_cap(const struct sluice_maps *m, int svc, struct sluice_conn_cap *out)
{
	memset(out, 0, sizeof(*out));
	return lookup_opt(m->conn_cap, svc, out);
}

int maps_read_untrusted(const struct sluice_maps *m, int svc, struct sluice_untrusted *out)
{
	memset(out, 0, sizeof(*out));
	if (m->untrusted_marks < 0)
		return -ENOENT;
	return read_percpu_u64s(m->untrusted_marks, (__u32)svc, m->ncpus, out, sizeof(*out));
}

/* The refusal counts share the entry, and BPF adds to them with atomics: an update writes back
 * the counts read before it, losing every refusal counted in between, and to a reader (the
 * /metrics counter) the count goes back. So the entry is written only when a threshold
 * changes, not each time the services are programmed (every start and reload); a change
 * made while the cap refuses may still lose the few refusals of that moment. */
int maps_write_conn_cap(const struct sluice_maps *m, int svc, const __u32 *threshold)
{
	struct sluice_conn_cap cc;

	if (maps_read_conn_cap(m, svc, &cc) == 0 &&
	    !memcmp(cc.threshold, threshold, sizeof(cc.threshold)))
		return 0;
	if (m->conncap_prog >= 0 && svc >= 0) {
		struct sluice_set_conn_cap a = { .svc = (__u32)svc };
		LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));

		memcpy(a.threshold, threshold, sizeof(a.threshold));
		if (!bpf_prog_test_run_opts(m->conncap_prog, &o) && a.done)
			return 0;
	}
	memcpy(cc.threshold, threshold, sizeof(cc.threshold));
	return update_opt(m->conn_cap, svc, &cc);
}

int maps_read_http_conns(const struct sluice_maps *m, int svc, struct sluice_inflight *out)
{
	memset(out, 0, sizeof(*out));
	return lookup_opt(m->http_conns, svc, out);
}

int maps_read_unread_all(const struct sluice_maps *m, struct sluice_unread *out)
{
	if (m->unread < 0)
		return -ENOENT;
	return maps_read_array(m->unread, 0, (__u32)m->n_slots, sizeof(*out), out, NULL);
}

int maps_read_unread(const struct sluice_maps *m, int svc, struct sluice_unread *out)
{
	memset(out, 0, sizeof(*out));
	if (m->unread < 0)
		return -ENOENT;
	return lookup_opt(m->unread, svc, out);
}

int maps_read_http_conn_cap(const struct sluice_maps *m, int svc, struct sluice_http_conn_cap *out)
{
	memset(out, 0, sizeof(*out));
	return lookup_opt(m->http_conn_cap, svc, out);
}

int maps_write_http_conn_cap(const struct sluice_maps *m, int svc, const __u32 *cap)
{
	struct sluice_http_conn_cap v;

	memcpy(v.cap, cap, sizeof(v.cap));
	return update_opt(m->http_conn_cap, svc, &v);
}

int maps_read_ctl_request(const struct sluice_maps *m, int svc, struct sluice_ctl_request *out)
{
	return lookup_opt(m->ctl_requests, svc, out);
}

int maps_pending_requests(const struct sluice_maps *m, __u32 first, __u32 n,
			  struct sluice_pending_requests *a)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = a, .ctx_size_in = sizeof(*a));

	if (m->pending_prog < 0 || m->ctl_requests < 0 || m->ctl_state < 0)
		return -EBADF;
	memset(a, 0, sizeof(*a));
	a->first = first;
	a->n = n;
	if (bpf_prog_test_run_opts(m->pending_prog, &o))
		return -errno;
	/* a scan the map's end cut short is a slice sized from another map: read it instead */
	return a->scanned == n ? 0 : -ERANGE;
}

int maps_write_ctl_request(const struct sluice_maps *m, int svc,
			   const struct sluice_ctl_request *v)
{
	return update_opt(m->ctl_requests, svc, v);
}

/* ---- batched writes */

int maps_batch_init(struct maps_batch *b, int fd, size_t vsize, int cap)
{
	memset(b, 0, sizeof(*b));
	b->fd = fd;
	b->vsize = vsize;
	b->cap = cap > 0 ? cap : 1;
	b->keys = malloc(sizeof(*b->keys) * (size_t)b->cap);
	b->who = malloc(sizeof(*b->who) * (size_t)b->cap);
	b->vals = malloc(vsize * (size_t)b->cap);
	if (!b->keys || !b->who || !b->vals) {
		maps_batch_free(b);
		return -ENOMEM;
	}
	return 0;
}

void maps_batch_free(struct maps_batch *b)
{
	free(b->keys);
	free(b->who);
	free(b->vals);
	memset(b, 0, sizeof(*b));
	b->fd = -1;
}

void *maps_batch_put(struct maps_batch *b, __u32 key, int who)
{
	if (!b->vals || b->n >= b->cap)
		return NULL;
	b->keys[b->n] = key;
	b->who[b->n] = who;
	return b->vals + b->vsize * (size_t)b->n++;
}

int maps_batch_flush(struct maps_batch *b)
{
	__u32 done = 0;
	int err = 0;

	b->last_n = b->n;
	b->n = 0;
	if (!b->last_n || b->fd < 0)
		return 0;
	while (done < (__u32)b->last_n) {
		LIBBPF_OPTS(bpf_map_batch_opts, o, .elem_flags = BPF_ANY);
		__u32 count = (__u32)b->last_n - done;
		int rc;

		b->syscalls++;
		rc = bpf_map_update_batch(b->fd, b->keys + done, b->vals + b->vsize * done, &count,
					  &o);
		done += count;   /* the kernel says how many it wrote, also on an error */
		if (rc) {
			err = -errno;
			break;
		}
		if (!count)
			break;
	}
	if (err == -EINVAL || err == -ENOTSUP || err == -EOPNOTSUPP || err == -524 /* ENOTSUPP */) {
		/* no batch ops for this map here: entry by entry, in order, up to a failure */
		for (; done < (__u32)b->last_n; done++) {
			b->syscalls++;
			if (bpf_map_update_elem(b->fd, &b->keys[done], b->vals + b->vsize * done,
						BPF_ANY))
				break;
		}
	}
	return (int)done;
}

int maps_fold_estimate(const struct sluice_maps *m)
{
	struct sluice_publish_stripes a = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));

	if (m->publish_prog < 0 || bpf_prog_test_run_opts(m->publish_prog, &o))
		return -1;
	return (int)a.cpus;
}
