// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/bpfmaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

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
	if (err)
		maps_close(m);
	return err;
}

void maps_close(struct sluice_maps *m)
{
#define X(name) if (m->name >= 0) { close(m->name); m->name = -1; }
	SLUICE_MAP_NAMES
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

int maps_read_class_stats(const struct sluice_maps *m, int svc, int cls,
			  struct sluice_class_stats *out)
{
	return read_percpu_u64s(m->class_stats, sluice_stat_index(svc, cls), m->ncpus, out,
				sizeof(*out));
}

int maps_read_hist(const struct sluice_maps *m, int svc, int cls, struct sluice_hist *out)
{
	return read_percpu_u64s(m->latency_hist, sluice_stat_index(svc, cls), m->ncpus, out,
				sizeof(*out));
}

int maps_read_pkt_stats(const struct sluice_maps *m, struct sluice_pkt_stats *out)
{
	return read_percpu_u64s(m->pkt_stats, 0, m->ncpus, out, sizeof(*out));
}

static int read_net(int fd, int rel_fd, int svc, struct sluice_inflight *out)
{
	struct sluice_inflight rel;
	__u32 k = svc;

	if (bpf_map_lookup_elem(fd, &k, out) || bpf_map_lookup_elem(rel_fd, &k, &rel))
		return -errno;
	out->total -= rel.total;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		out->cls[c] -= rel.cls[c];
	return 0;
}

int maps_read_inflight(const struct sluice_maps *m, int svc, struct sluice_inflight *out)
{
	return read_net(m->inflight, m->inflight_released, svc, out);
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
