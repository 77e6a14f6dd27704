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
		m->unread = bpf_object__find_map_fd_by_name(obj, "unread");
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

/* Open and load the skeleton with every map unpinned; flows table sized max_flows (0 = default).
 * Nothing written into the maps yet: the state harness_reset_maps puts back. */
static inline struct sluice_bpf *harness_load_bare(unsigned max_flows)
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
	return skel;
}

/* m filled from skel, loaded by harness_load_bare or put back by harness_reset_maps, and what
 * every test runs with written: the fixed hash keys, the estimate on (as sluiced runs). */
static inline int harness_ready(struct sluice_bpf *skel, struct sluice_maps *m)
{
	return harness_fixed_keys(bpf_map__fd(skel->maps.flow_hash_key)) ||
	       harness_maps_of(skel->obj, m) ||
	       maps_fold_estimate(m) <= 0 ? -1 : 0;
}

/* harness_load_bare, then harness_ready. */
static inline struct sluice_bpf *harness_load(unsigned max_flows, struct sluice_maps *m)
{
	struct sluice_bpf *skel = harness_load_bare(max_flows);

	if (skel && harness_ready(skel, m)) {
		sluice_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/* ---- One load per suite ----
 * Loading means verifying every program again (TC ingress alone is ~110k instructions), which
 * costs far more than any test: a suite whose tests differ only in what they write into the
 * maps shares one object per flows-table size, and before every test harness_reset_maps puts
 * each map back as the load left it, so that a test sees exactly what a fresh load shows. */

#define HARNESS_SHARED_MAX 4        /* distinct flows-table sizes of one suite */
#define HARNESS_IMAGES_MAX 8        /* global-data sections of the object */

/* A global-data section (.data, .bss) as the load left it, to put back. */
struct harness_image {
	const struct bpf_map *map;
	void *value;
};

struct harness_shared {
	unsigned max_flows;
	struct sluice_bpf *skel;
	struct harness_image images[HARNESS_IMAGES_MAX];
	int n_images;
};

static struct harness_shared harness_shared_objs[HARNESS_SHARED_MAX];

/* Read-only global data (.rodata, .kconfig) is frozen at load: neither a program nor user space
 * can change it, so nothing of it needs putting back. */
static inline int harness_map_frozen(const struct bpf_map *map)
{
	return bpf_map__is_internal(map) && (bpf_map__map_flags(map) & BPF_F_RDONLY_PROG);
}

/* The bytes one element of map takes in a lookup or an update (a per-CPU map: one slot,
 * 8-byte aligned, per possible CPU). */
static inline size_t harness_value_bytes(const struct bpf_map *map)
{
	enum bpf_map_type t = bpf_map__type(map);
	size_t v = bpf_map__value_size(map);

	if (t == BPF_MAP_TYPE_PERCPU_ARRAY || t == BPF_MAP_TYPE_PERCPU_HASH ||
	    t == BPF_MAP_TYPE_LRU_PERCPU_HASH)
		return ((v + 7) & ~(size_t)7) * (size_t)libbpf_num_possible_cpus();
	return v;
}

/* Every key of a hash-like map, into *keys (malloc'd; *n of them). 0, or -errno. */
static inline int harness_map_keys(const struct bpf_map *map, void **keys, __u32 *n)
{
	int fd = bpf_map__fd(map);
	size_t ks = bpf_map__key_size(map);
	__u32 max = bpf_map__max_entries(map);
	char *all = malloc(((size_t)max + 1) * ks);

	*n = 0;
	if (!all)
		return -ENOMEM;
	while (*n <= max) {
		if (bpf_map_get_next_key(fd, *n ? all + (*n - 1) * ks : NULL, all + *n * ks)) {
			if (errno == ENOENT)
				break;
			free(all);
			return -errno;
		}
		(*n)++;
	}
	if (*n > max) {     /* more keys than entries: the walk went round */
		free(all);
		return -E2BIG;
	}
	*keys = all;
	return 0;
}

/* Every element of an array map zero. 0, or -errno. */
static inline int harness_zero_array(const struct bpf_map *map)
{
	__u32 n = bpf_map__max_entries(map), count = n;
	__u32 *keys = malloc(n * sizeof(*keys));
	void *zeros = calloc(n, harness_value_bytes(map));
	int err = 0;

	if (!keys || !zeros)
		err = -ENOMEM;
	for (__u32 i = 0; !err && i < n; i++)
		keys[i] = i;
	if (!err && bpf_map_update_batch(bpf_map__fd(map), keys, zeros, &count, NULL))
		err = -errno;
	if (!err && count != n)
		err = -EIO;
	free(keys);
	free(zeros);
	return err;
}

/* Every key of a hash-like map deleted, and the map seen empty after. 0, or -errno. */
static inline int harness_empty_map(const struct bpf_map *map)
{
	size_t ks = bpf_map__key_size(map);
	void *keys = NULL;
	__u32 n;
	int err = harness_map_keys(map, &keys, &n);

	for (__u32 i = 0; !err && i < n; i++)
		if (bpf_map_delete_elem(bpf_map__fd(map), (char *)keys + i * ks) && errno != ENOENT)
			err = -errno;
	if (!err && n && bpf_map_get_next_key(bpf_map__fd(map), NULL, keys) == 0)
		err = -ENOTEMPTY;
	free(keys);
	return err;
}

/* The image of every writable global-data section of sh's object, taken right after the load
 * (before anything ran): what harness_reset_maps puts back. 0, or -1 with the reason on
 * stderr. */
static inline int harness_keep_images(struct harness_shared *sh)
{
	struct bpf_map *map;

	bpf_object__for_each_map(map, sh->skel->obj) {
		struct harness_image *im = &sh->images[sh->n_images];

		if (!bpf_map__is_internal(map) || harness_map_frozen(map))
			continue;
		if (sh->n_images == HARNESS_IMAGES_MAX ||
		    !(im->value = malloc(bpf_map__value_size(map))) ||
		    bpf_map_lookup_elem(bpf_map__fd(map), &(__u32){ 0 }, im->value)) {
			fprintf(stderr, "cannot keep the loaded image of %s\n", bpf_map__name(map));
			return -1;
		}
		im->map = map;
		sh->n_images++;
	}
	return 0;
}

/* Every map of sh's object as the load left it: hash, LRU and LPM maps empty, arrays and
 * per-CPU arrays zero, global data its loaded image. A map of any other type is an error (-1,
 * named on stderr), never skipped: state it kept would leak into the next test. */
static inline int harness_reset_maps(const struct harness_shared *sh)
{
	struct bpf_map *map;

	bpf_object__for_each_map(map, sh->skel->obj) {
		enum bpf_map_type t = bpf_map__type(map);
		const struct harness_image *im = NULL;
		int err;

		for (int i = 0; i < sh->n_images; i++)
			if (sh->images[i].map == map)
				im = &sh->images[i];
		if (harness_map_frozen(map))
			continue;
		if (bpf_map__is_internal(map))
			err = im && !bpf_map_update_elem(bpf_map__fd(map), &(__u32){ 0 }, im->value,
							 BPF_ANY) ? 0 : -ENOENT;
		else if (t == BPF_MAP_TYPE_HASH || t == BPF_MAP_TYPE_LRU_HASH ||
			 t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_LRU_PERCPU_HASH ||
			 t == BPF_MAP_TYPE_LPM_TRIE)
			err = harness_empty_map(map);
		else if (t == BPF_MAP_TYPE_ARRAY || t == BPF_MAP_TYPE_PERCPU_ARRAY)
			err = harness_zero_array(map);
		else if (t == BPF_MAP_TYPE_SK_STORAGE)
			/* An element lives on its socket and goes with it. These suites never attach
			 * a program: the only socket a program sees is the one BPF_PROG_TEST_RUN
			 * makes for a single run, and frees after it. */
			err = 0;
		else
			err = -EOPNOTSUPP;
		if (err) {
			fprintf(stderr, "cannot reset map %s (%s): %s\n", bpf_map__name(map),
				libbpf_bpf_map_type_str(t), strerror(-err));
			return -1;
		}
	}
	return 0;
}

/* The suite's object for a flows table of max_flows (0 = default), every map as the load left
 * it: loaded on first use, reset on every later one. NULL on failure (said on stderr). */
static inline struct sluice_bpf *harness_shared_object(unsigned max_flows)
{
	struct harness_shared *sh = NULL;

	for (int i = 0; i < HARNESS_SHARED_MAX && !sh; i++)
		if (!harness_shared_objs[i].skel || harness_shared_objs[i].max_flows == max_flows)
			sh = &harness_shared_objs[i];
	if (!sh) {
		fprintf(stderr, "more than %d flows-table sizes in one suite\n", HARNESS_SHARED_MAX);
		return NULL;
	}
	if (sh->skel)
		return harness_reset_maps(sh) ? NULL : sh->skel;
	sh->max_flows = max_flows;
	if (!(sh->skel = harness_load_bare(max_flows)))
		return NULL;
	if (harness_keep_images(sh)) {
		sluice_bpf__destroy(sh->skel);
		sh->skel = NULL;
		return NULL;
	}
	return sh->skel;
}

/* The shared entry of skel (NULL: skel is a test's own). */
static inline struct harness_shared *harness_shared_of(const struct sluice_bpf *skel)
{
	for (int i = 0; i < HARNESS_SHARED_MAX; i++)
		if (skel && harness_shared_objs[i].skel == skel)
			return &harness_shared_objs[i];
	return NULL;
}

static size_t harness_sort_key_size;

static int harness_key_order(const void *a, const void *b)
{
	return memcmp(a, b, harness_sort_key_size);
}

/* Everything map holds, in an order that depends on its content only: an array's values by
 * index; a hash-like map's keys sorted, each followed by its value. 0, or -errno. An sk_storage
 * map has no content of its own to read (see harness_reset_maps): it dumps empty. */
static inline int harness_map_dump(const struct bpf_map *map, char **out, size_t *len)
{
	enum bpf_map_type t = bpf_map__type(map);
	size_t ks = bpf_map__key_size(map), vb = harness_value_bytes(map);
	int fd = bpf_map__fd(map), err = 0;
	void *keys = NULL;
	__u32 n = 0;

	*out = NULL;
	*len = 0;
	if (t == BPF_MAP_TYPE_SK_STORAGE)
		return 0;
	if (t == BPF_MAP_TYPE_ARRAY || t == BPF_MAP_TYPE_PERCPU_ARRAY) {
		n = bpf_map__max_entries(map);
		ks = 0;
	} else if (t == BPF_MAP_TYPE_HASH || t == BPF_MAP_TYPE_LRU_HASH ||
		   t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_LRU_PERCPU_HASH ||
		   t == BPF_MAP_TYPE_LPM_TRIE) {
		if ((err = harness_map_keys(map, &keys, &n)))
			return err;
		harness_sort_key_size = ks;
		qsort(keys, n, ks, harness_key_order);
	} else {
		return -EOPNOTSUPP;
	}
	*len = (size_t)n * (ks + vb);
	if (!(*out = malloc(*len ? *len : 1)))
		err = -ENOMEM;
	if (!err && !ks) {     /* an array: its values in index order, in one call */
		__u32 *idx = malloc(n * sizeof(*idx)), count = n, at;

		if (!idx)
			err = -ENOMEM;
		/* ENOENT: the batch reached the end, as it must */
		else if (bpf_map_lookup_batch(fd, NULL, &at, idx, *out, &count, NULL) &&
			 errno != ENOENT)
			err = -errno;
		else if (count != n)
			err = -EIO;
		for (__u32 i = 0; !err && i < n; i++)
			if (idx[i] != i)
				err = -EIO;
		free(idx);
		n = 0;
	}
	for (__u32 i = 0; !err && i < n; i++) {
		char *at = *out + i * (ks + vb);
		const void *key = ks ? (const void *)((char *)keys + i * ks) : (const void *)&i;

		memcpy(at, key, ks);
		if (bpf_map_lookup_elem(fd, key, at + ks))
			err = -errno;
	}
	free(keys);
	return err;
}

/* How many maps of object a hold other than the map of the same name in b, each named in
 * names (space-separated, cut at size); -1 when one cannot be read (said on stderr). */
static inline int harness_maps_differing(struct bpf_object *a, struct bpf_object *b,
					 char *names, size_t size)
{
	struct bpf_map *ma;
	int differ = 0;

	names[0] = 0;
	bpf_object__for_each_map(ma, a) {
		const struct bpf_map *mb = bpf_object__find_map_by_name(b, bpf_map__name(ma));
		char *da = NULL, *db = NULL;
		size_t la, lb;
		int err = !mb ? -ENOENT : harness_map_dump(ma, &da, &la);

		err = err ? err : harness_map_dump(mb, &db, &lb);
		if (err) {
			fprintf(stderr, "cannot read map %s: %s\n", bpf_map__name(ma), strerror(-err));
			free(da);
			free(db);
			return -1;
		}
		if (la != lb || (la && memcmp(da, db, la))) {
			size_t used = strlen(names);

			snprintf(names + used, size - used, "%s%s", used ? " " : "", bpf_map__name(ma));
			differ++;
		}
		free(da);
		free(db);
	}
	return differ;
}

/* The proof of harness_reset_maps, for a test to run after another left its state in the
 * shared object skel: the maps unlike fresh's (a bare load of the same flows-table size) named
 * in before, then skel reset, and those still unlike named in after. Returns how many still
 * differ, or -1 when the reset or a read failed (said on stderr). */
static inline int harness_reset_check(struct sluice_bpf *skel, struct sluice_bpf *fresh,
				      char *before, char *after, size_t size)
{
	const struct harness_shared *sh = harness_shared_of(skel);

	if (!sh || harness_maps_differing(skel->obj, fresh->obj, before, size) < 0 ||
	    harness_reset_maps(sh))
		return -1;
	return harness_maps_differing(skel->obj, fresh->obj, after, size);
}

/* Group teardown of a suite that shares objects: each destroyed. */
static inline int harness_shared_release(void **state)
{
	(void)state;
	for (int i = 0; i < HARNESS_SHARED_MAX; i++) {
		struct harness_shared *sh = &harness_shared_objs[i];

		for (int k = 0; k < sh->n_images; k++)
			free(sh->images[k].value);
		sluice_bpf__destroy(sh->skel);
		memset(sh, 0, sizeof(*sh));
	}
	return 0;
}

/* The programs loaded and the maps programmed as sluiced would for `config`: every service
 * with its default verdict (starting limit, headroom only), a fresh heartbeat. harness_fixture
 * loads an object of its own, for a test that attaches, pins or replaces it; any other takes
 * harness_shared_fixture. */
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

/* harness_fixture on the suite's shared object (harness_shared_object): the same maps a fresh
 * load would give, without the load. The suite passes harness_shared_release as its group
 * teardown. */
static inline struct fixture *harness_shared_fixture(const char *config, unsigned max_flows,
						     unsigned long long heartbeat_timeout_ns)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || !(f->skel = harness_shared_object(max_flows)) || harness_ready(f->skel, &f->m)) {
		fprintf(stderr, "cannot load or reset BPF object\n");
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
	if (!harness_shared_of(f->skel))    /* a shared object stays for the next test */
		sluice_bpf__destroy(f->skel);
	free(f);
	*state = NULL; /* a setup that fails after this leaves nothing to free twice */
	return 0;
}

/* The proof that a shared object is as good as a fresh load (harness_reset_maps), for a test
 * of a suite whose setup makes shared fixtures of the default flows-table size: each of runs
 * (tests of the suite) run on a fixture of its own, then the object reset and every map
 * compared with a freshly loaded object's. Each name of left must be among the maps the runs
 * changed, so that the comparison had something to find. 0, or -1 with the reason on stderr. */
static inline int harness_prove_reset(void **state, int (*setup)(void **),
				      void (*const *runs)(void **), size_t n_runs,
				      const char *const *left, size_t n_left)
{
	struct sluice_bpf *fresh = harness_load_bare(0);
	char before[4096], after[4096], seen[16384] = " ";
	int err = fresh ? 0 : -1;

	for (size_t i = 0; !err && i < n_runs; i++) {
		/* set up afresh for each, the first too: its heartbeat must be younger than its
		 * timeout when it runs, and the load above may take that long */
		harness_teardown(state);
		if (setup(state)) {
			fprintf(stderr, "cannot set up for run %zu\n", i);
			err = -1;
			break;
		}
		runs[i](state);
		if (harness_reset_check(((struct fixture *)*state)->skel, fresh, before, after,
					sizeof(before))) {
			fprintf(stderr, "after run %zu the reset left maps unlike a fresh load's (or "
				"failed): %s\n", i, after);
			err = -1;
		}
		printf("# run %zu left: %s\n", i, before);
		strncat(seen, before, sizeof(seen) - strlen(seen) - 2);
		strcat(seen, " ");
	}
	for (size_t i = 0; !err && i < n_left; i++) {
		char word[64];

		snprintf(word, sizeof(word), " %s ", left[i]);
		if (!strstr(seen, word)) {
			fprintf(stderr, "no run left anything in %s: nothing proved for it\n", left[i]);
			err = -1;
		}
	}
	sluice_bpf__destroy(fresh);
	return err;
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
