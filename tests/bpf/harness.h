/* BPF test harness: load the real programs unpinned (no /sys/fs/bpf side effects), program
 * maps like sluiced would, and run crafted frames through BPF_PROG_TEST_RUN. */
#ifndef SLUICE_TEST_HARNESS_H
#define SLUICE_TEST_HARNESS_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sluice.skel.h"
#include "bpfmaps.h"

static int silent_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	if (lvl == LIBBPF_WARN && getenv("SLUICE_TEST_VERBOSE"))
		return vfprintf(stderr, fmt, ap);
	if (lvl == LIBBPF_WARN)
		return vfprintf(stderr, fmt, ap);
	return 0;
}

/* Open and load the skeleton with every map unpinned; flows table sized max_flows (0 = default). */
static struct sluice_bpf *harness_load(unsigned max_flows, struct sluice_maps *m)
{
	struct sluice_bpf *skel;
	struct bpf_map *map;

	libbpf_set_print(silent_print);
	skel = sluice_bpf__open();
	if (!skel)
		return NULL;
	bpf_object__for_each_map(map, skel->obj)
		bpf_map__set_pin_path(map, NULL);
	if (max_flows)
		bpf_map__set_max_entries(skel->maps.flows, max_flows);
	if (sluice_bpf__load(skel)) {
		sluice_bpf__destroy(skel);
		return NULL;
	}
	memset(m, -1, sizeof(*m));
	m->ncpus = libbpf_num_possible_cpus();
#define X(name) m->name = bpf_map__fd(skel->maps.name);
	SLUICE_MAP_NAMES
#undef X
	return skel;
}

#endif
