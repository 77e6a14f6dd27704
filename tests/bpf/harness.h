/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
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
#include "kernel/bpfmaps.h"
#include "common/config.h"
#include "control/verdict.h"
#include "common/clock.h"
#include "kernel/mapconfig.h"
#include "kernel/flowgc.h"
#include "kernel/replies.h"

static int silent_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	if (lvl == LIBBPF_WARN && getenv("SLUICE_TEST_VERBOSE"))
		return vfprintf(stderr, fmt, ap);
	if (lvl == LIBBPF_WARN)
		return vfprintf(stderr, fmt, ap);
	return 0;
}

/* m filled from a loaded object of the data path (the product build or a test build): its
 * maps, the GC's program, the sizes. */
static inline int harness_maps_of(struct bpf_object *obj, struct sluice_maps *m)
{
	struct bpf_program *gc = bpf_object__find_program_by_name(obj, "sluice_reclaim");
	struct bpf_program *pend = bpf_object__find_program_by_name(obj, "sluice_pending_requests");

	memset(m, -1, sizeof(*m));
#define X(name) m->name = bpf_object__find_map_fd_by_name(obj, #name);
	SLUICE_MAP_NAMES
	SLUICE_MAP_NAMES_OPTIONAL
#undef X
	m->own_ops = bpf_object__find_map_fd_by_name(obj, "own_ops");
	m->reclaim_prog = gc ? bpf_program__fd(gc) : -1;
	m->pending_prog = pend ? bpf_program__fd(pend) : -1;
	{
		struct bpf_program *cb = bpf_object__find_program_by_name(obj, "sluice_copy_counts");

		struct bpf_program *pb = bpf_object__find_program_by_name(obj, "sluice_publish_stripes");
		struct bpf_program *ccp = bpf_object__find_program_by_name(obj, "sluice_set_conn_cap");

		m->copy_prog = cb ? bpf_program__fd(cb) : -1;
		m->publish_prog = pb ? bpf_program__fd(pb) : -1;
		m->conncap_prog = ccp ? bpf_program__fd(ccp) : -1;
		m->busy_copy = bpf_object__find_map_fd_by_name(obj, "busy_copy");
		m->inflight_copy = bpf_object__find_map_fd_by_name(obj, "inflight_copy");
		m->service_ports = bpf_object__find_map_fd_by_name(obj, "service_ports");
		m->addr_class = bpf_object__find_map_fd_by_name(obj, "addr_class");
	}
	return maps_learn_sizes(m);
}

/* The 4-tuples' hash keys the tests run with, into the map key_fd (flow_hash_key): fixed, where
 * sluiced draws them at random (hs_hash_keys), so that which handshakes share a slot is the
 * same in every run and a test that sends many SYNs before its real clients' is not decided
 * by the draw (a SYN whose slot another 4-tuple's young record holds goes unrecorded, and the
 * socket lookup that takes such a connection on has no socket in a test run). Never all zero:
 * with zero keys the hash of an IPv4 4-tuple is its client address's alone. Tests about the
 * hash read the keys from the map. */
static inline int harness_fixed_keys(int key_fd)
{
	struct sluice_hash_keys keys;
	__u32 zero = 0;

	for (int i = 0; i < SLUICE_HASH_KEY_WORDS / 2; i++)
		keys.k[i] = 0x9e3779b97f4a7c15ull * (__u64)(2 * i + 1) + 0x632be59bd9b4e019ull;
	return bpf_map_update_elem(key_fd, &zero, &keys, BPF_ANY) ? -errno : 0;
}

/* Open and load the skeleton with every map unpinned; flows table sized max_flows (0 = default). */
static inline struct sluice_bpf *harness_load(unsigned max_flows, struct sluice_maps *m)
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
	if (harness_fixed_keys(bpf_map__fd(skel->maps.flow_hash_key)) ||
	    harness_maps_of(skel->obj, m) ||
	    maps_fold_estimate(m) <= 0) { /* the estimate on, as sluiced runs */
		sluice_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/* The programs loaded and the maps programmed as sluiced would for `config`: every service
 * with its default verdict (starting limit, headroom only), a fresh heartbeat. */
struct fixture {
	struct sluice_bpf *skel;
	struct sluice_maps m;
	struct sluice_config cfg;
	int idx[SLUICE_MIN_SERVICE_SLOTS];        /* harness configs stay within the default size */
};

static inline struct fixture *harness_program(struct fixture *f, const char *config,
					      unsigned long long heartbeat_timeout_ns);

static inline struct fixture *harness_fixture(const char *config, unsigned max_flows,
				       unsigned long long heartbeat_timeout_ns)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || !(f->skel = harness_load(max_flows, &f->m))) {
		fprintf(stderr, "cannot load BPF object\n");
		free(f);
		return NULL;
	}
	return harness_program(f, config, heartbeat_timeout_ns);
}

/* Program f's maps (loaded already) for `config`, as harness_fixture describes. */
static inline struct fixture *harness_program(struct fixture *f, const char *config,
					      unsigned long long heartbeat_timeout_ns)
{
	struct doc_errors errs;
	struct sluice_globals g = { .heartbeat_timeout_ns = heartbeat_timeout_ns };

	if (sluice_config_parse(config, strlen(config), "test", &f->cfg, &errs)) {
		doc_errors_print(stderr, &errs);
		return NULL;
	}
	if (maps_assign_indices(&f->m, &f->cfg, f->idx) ||
	    maps_program_services(&f->m, &f->cfg, f->idx))
		return NULL;
	for (int i = 0; i < f->cfg.n_services; i++) {
		struct sluice_verdict v;

		verdict_default(&f->cfg.services[i], verdict_initial_limit(&f->cfg.services[i]), &v);
		maps_write_verdict(&f->m, f->idx[i], &v);
	}
	g.heartbeat_ns = monotonic_ns();
	maps_write_globals(&f->m, &g);
	return f;
}

static inline int harness_teardown(void **state)
{
	struct fixture *f = *state;

	if (!f)
		return 0;
	sluice_bpf__destroy(f->skel);
	free(f);
	*state = NULL; /* a setup that fails after this leaves nothing to free twice */
	return 0;
}

/* One BPF_PROG_TEST_RUN of a frame (ctx: an __sk_buff for TC programs, or NULL). */
struct run {
	int err;                         /* of bpf_prog_test_run_opts: callers assert it is 0 */
	int ret;
	uint8_t out[1024];
	uint32_t out_len;
	uint8_t in[1024];                /* the frame as it went in, for harness_unchanged() */
	uint32_t in_len;
};

static inline struct run harness_run(int prog_fd, const uint8_t *frame, size_t len,
			      struct __sk_buff *ctx)
{
	struct run r = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = (uint32_t)len,
		    .data_out = r.out, .data_size_out = sizeof(r.out), .repeat = 1,
		    .ctx_in = ctx, .ctx_size_in = ctx ? sizeof(*ctx) : 0);

	r.in_len = (uint32_t)len;
	memcpy(r.in, frame, len < sizeof(r.in) ? len : sizeof(r.in));
	r.err = bpf_prog_test_run_opts(prog_fd, &o);
	r.ret = (int)o.retval;
	r.out_len = o.data_size_out;
	return r;
}

/* 1 when the program handed the frame on exactly as it came in: same length, every byte
 * the same (a packet sluice admits or leaves alone is never altered). Otherwise 0, with the
 * first difference on stderr. */
static inline int harness_unchanged(const struct run *r)
{
	if (r->in_len > sizeof(r->in) || r->out_len != r->in_len) {
		fprintf(stderr, "packet out is %u bytes, packet in was %u\n", r->out_len, r->in_len);
		return 0;
	}
	for (uint32_t i = 0; i < r->in_len; i++) {
		if (r->out[i] != r->in[i]) {
			fprintf(stderr, "packet out differs from packet in at byte %u: 0x%02x, was 0x%02x\n",
				i, r->out[i], r->in[i]);
			return 0;
		}
	}
	return 1;
}

#endif
