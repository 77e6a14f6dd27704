#include "bpfmaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ctype.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

unsigned long long monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
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

int maps_read_inflight(const struct sluice_maps *m, int svc, struct sluice_inflight *out)
{
	struct sluice_inflight rel;
	__u32 k = svc;

	if (bpf_map_lookup_elem(m->inflight, &k, out) || bpf_map_lookup_elem(m->inflight_released, &k, &rel))
		return -errno;
	out->total -= rel.total;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		out->cls[c] -= rel.cls[c];
	return 0;
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

int maps_assign_indices(const struct sluice_maps *m, const struct sluice_config *cfg, int *idx)
{
	char names[SLUICE_MAX_SERVICES][SLUICE_NAME_LEN];
	int used[SLUICE_MAX_SERVICES] = { 0 };

	for (int s = 0; s < SLUICE_MAX_SERVICES; s++) {
		struct sluice_service sv;

		names[s][0] = 0;
		if (maps_read_service(m, s, &sv) == 0 && sv.name[0])
			memcpy(names[s], sv.name, SLUICE_NAME_LEN);
	}
	for (int i = 0; i < cfg->n_services; i++) {
		idx[i] = -1;
		for (int s = 0; s < SLUICE_MAX_SERVICES; s++)
			if (!used[s] && strncmp(names[s], cfg->services[i].name, SLUICE_NAME_LEN) == 0) {
				idx[i] = s;
				used[s] = 1;
				break;
			}
	}
	for (int i = 0; i < cfg->n_services; i++) {
		if (idx[i] >= 0)
			continue;
		/* Prefer slots never named, so a removed service's counters survive a while. */
		for (int pass = 0; pass < 2 && idx[i] < 0; pass++)
			for (int s = 0; s < SLUICE_MAX_SERVICES; s++)
				if (!used[s] && (pass == 1 || !names[s][0])) {
					idx[i] = s;
					used[s] = 1;
					break;
				}
		if (idx[i] < 0)
			return -1;
	}
	return 0;
}

/* Does rule a's prefix cover rule b's prefix? */
static int prefix_covers(const struct class_rule *a, const struct class_rule *b)
{
	int bits = a->prefix_len;

	if (bits > b->prefix_len)
		return 0;
	for (int i = 0; i < 16 && bits > 0; i++, bits -= 8) {
		__u8 mask = bits >= 8 ? 0xff : (__u8)(0xff << (8 - bits));
		if ((a->addr[i] & mask) != (b->addr[i] & mask))
			return 0;
	}
	return 1;
}

static void fill_service(struct sluice_service *sv, const struct service_conf *sc)
{
	int n_path = 0;

	memset(sv, 0, sizeof(*sv));
	snprintf(sv->name, sizeof(sv->name), "%s", sc->name);
	sv->port = sc->port;
	sv->protocol = sc->protocol;
	sv->reject_mode = sc->reject;
	sv->default_class = sc->default_class;
	sv->retry_after_s = sc->retry_after_s > 255 ? 255 : sc->retry_after_s;
	sv->header_order = SLUICE_RULE_NONE;
	sv->client_max_in_flight = (__u32)sc->client_max_in_flight;
	sv->client_rate = (__u32)sc->client_rate;
	sv->client_burst = (__u32)sc->client_burst;
	memset(sv->dscp_rule, SLUICE_RULE_NONE, sizeof(sv->dscp_rule));
	for (int r = 0; r < sc->n_rules; r++) {
		const struct class_rule *cr = &sc->rules[r];

		switch (cr->kind) {
		case RULE_DSCP:
			if (sv->dscp_rule[cr->dscp & 63] == SLUICE_RULE_NONE)
				sv->dscp_rule[cr->dscp & 63] = (__u8)((r << 2) | (cr->class & 3));
			break;
		case RULE_HEADER:
			if (sv->header_order == SLUICE_RULE_NONE) {
				size_t n = strlen(cr->header);

				sv->header_order = r;
				sv->header_len = n;
				for (size_t i = 0; i < n && i < SLUICE_HEADER_LEN; i++)
					sv->header[i] = tolower((unsigned char)cr->header[i]);
			}
			break;
		case RULE_PATH:
			if (n_path < SLUICE_MAX_PATH_RULES) {
				struct sluice_path_rule *pr = &sv->path[n_path++];

				pr->len = strlen(cr->path);
				pr->class = cr->class & 3;
				pr->order = r;
				memcpy(pr->prefix, cr->path, pr->len);
			}
			break;
		case RULE_SOURCE:
			break;
		}
	}
}

static int program_source_rules(const struct sluice_maps *m, const struct sluice_config *cfg,
				const int *idx)
{
	struct sluice_src_key key, next;
	int err = 0;

	/* Drop every old rule, then write the new set. The trie is small; a lookup that lands
	 * in between sees the default class for one packet, which is harmless. */
	while (bpf_map_get_next_key(m->source_rules, NULL, &next) == 0) {
		key = next;
		if (bpf_map_delete_elem(m->source_rules, &key))
			break;
	}
	for (int i = 0; i < cfg->n_services; i++) {
		const struct service_conf *sc = &cfg->services[i];

		for (int r = 0; r < sc->n_rules; r++) {
			const struct class_rule *cr = &sc->rules[r];
			struct sluice_src_rule val = { .class = cr->class & 3, .order = r };

			if (cr->kind != RULE_SOURCE)
				continue;
			/* First match wins: an earlier, shorter prefix shadows this one. */
			for (int e = 0; e < r; e++)
				if (sc->rules[e].kind == RULE_SOURCE && prefix_covers(&sc->rules[e], cr)) {
					val.class = sc->rules[e].class & 3;
					val.order = e;
					break;
				}
			memset(&key, 0, sizeof(key));
			key.prefixlen = 32 + cr->prefix_len;
			key.svc = idx[i];
			memcpy(key.addr, cr->addr, 16);
			if (bpf_map_update_elem(m->source_rules, &key, &val, BPF_ANY))
				err = -errno;
		}
	}
	return err;
}

int maps_program_services(const struct sluice_maps *m, const struct sluice_config *cfg,
			  const int *idx)
{
	int in_cfg[SLUICE_MAX_SERVICES] = { 0 };
	__u32 old_port[SLUICE_MAX_SERVICES] = { 0 };
	int err = 0;

	/* The ports in force before this call: only they can need clearing (a walk over all
	 * 65536 entries would cost a syscall each and slow every start). */
	for (int s = 0; s < SLUICE_MAX_SERVICES; s++) {
		struct sluice_service sv;

		if (maps_read_service(m, s, &sv) == 0 && sv.name[0])
			old_port[s] = sv.port;
	}
	for (int i = 0; i < cfg->n_services; i++) {
		struct sluice_service sv;
		__u32 k = idx[i];

		fill_service(&sv, &cfg->services[i]);
		if (bpf_map_update_elem(m->services, &k, &sv, BPF_ANY))
			return -errno;
		in_cfg[idx[i]] = 1;
		maps_write_reply(m, idx[i], SLUICE_REPLY_429, cfg->services[i].retry_after_s);
		maps_write_reply(m, idx[i], SLUICE_REPLY_503, cfg->services[i].retry_after_s);
	}
	/* Ports: clear those no longer configured, then set the current ones. */
	for (int s = 0; s < SLUICE_MAX_SERVICES; s++) {
		__u32 port = old_port[s], zero = 0;
		int still = 0;

		if (!port)
			continue;
		for (int i = 0; i < cfg->n_services; i++)
			still |= cfg->services[i].port == (int)port;
		if (!still && bpf_map_update_elem(m->port_to_service, &port, &zero, BPF_ANY))
			err = -errno;
	}
	for (int i = 0; i < cfg->n_services; i++) {
		__u32 port = cfg->services[i].port, v = idx[i] + 1;

		if (bpf_map_update_elem(m->port_to_service, &port, &v, BPF_ANY))
			err = -errno;
	}
	for (int s = 0; s < SLUICE_MAX_SERVICES; s++) {
		struct sluice_service sv;
		__u32 k = s;

		/* A removed service keeps its name (stable index, counters) but no port. */
		if (!in_cfg[s] && maps_read_service(m, s, &sv) == 0 && sv.name[0] && sv.port) {
			sv.port = 0;
			bpf_map_update_elem(m->services, &k, &sv, BPF_ANY);
		}
	}
	if (!err)
		err = program_source_rules(m, cfg, idx);
	return err;
}

void build_http_reply(struct sluice_reply *r, int kind, int retry_after_s)
{
	const char *status = kind == SLUICE_REPLY_503 ? "503 Service Unavailable"
						      : "429 Too Many Requests";
	const char *body = kind == SLUICE_REPLY_503 ? "service unavailable: shed by sluice"
						    : "too many requests: shed by sluice";
	char text[SLUICE_REPLY_MAX];
	int len = 0;

	/* The data path checksums in 4-byte words: pad the body with spaces to a multiple of 4
	 * (Content-Length always equals the body as sent). */
	for (int pad = 0; pad < 8; pad++) {
		int blen = (int)strlen(body) + pad + 1;

		len = snprintf(text, sizeof(text),
			       "HTTP/1.1 %s\r\nRetry-After: %d\r\nContent-Type: text/plain\r\n"
			       "Content-Length: %d\r\nConnection: close\r\n\r\n%s%*s\n",
			       status, retry_after_s, blen, body, pad, "");
		if (len % 4 == 0)
			break;
	}
	memset(r, 0, sizeof(*r));
	memcpy(r->text, text, (size_t)len);
	r->len = (__u32)len;
	/* Ones' complement partial sum over 16-bit words in memory order, like csum_partial. */
	__u64 sum = 0;
	for (int i = 0; i < len; i += 2) {
		__u16 w;
		memcpy(&w, r->text + i, 2);
		sum += w;
	}
	while (sum >> 32)
		sum = (sum & 0xffffffff) + (sum >> 32);
	r->csum = (__u32)sum;
}

int maps_write_reply(const struct sluice_maps *m, int svc, int kind, int retry_after_s)
{
	struct sluice_reply r;
	__u32 k = svc * 2 + kind;

	build_http_reply(&r, kind, retry_after_s);
	return bpf_map_update_elem(m->replies, &k, &r, BPF_ANY) ? -errno : 0;
}

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
	if (bpf_map_lookup_elem(m->clients, &k, &c) == 0 && c.in_flight > 0) {
		c.in_flight--;
		bpf_map_update_elem(m->clients, &k, &c, BPF_EXIST);
	}
}

int maps_gc_flows(const struct sluice_maps *m, unsigned long long now_ns,
		  unsigned long long syn_timeout_ns, unsigned long long idle_timeout_ns,
		  flow_alive_fn still_open, void *ctx)
{
	struct sluice_inflight rel[SLUICE_MAX_SERVICES];
	int dirty[SLUICE_MAX_SERVICES] = { 0 };
	struct stale_scan scan = { .now_ns = now_ns, .syn_timeout_ns = syn_timeout_ns,
				   .idle_timeout_ns = idle_timeout_ns };
	struct sluice_flow_key *stale;
	struct sluice_flow f;
	int reclaimed = 0, n_stale;

	/* Collect first, delete after: deleting while walking restarts a hash walk. */
	walk_flows(m, collect_stale, &scan);
	stale = scan.stale;
	n_stale = scan.n;
	for (int i = 0; i < n_stale; i++) {
		if (bpf_map_lookup_elem(m->flows, &stale[i], &f) || f.svc >= SLUICE_MAX_SERVICES)
			continue;
		if (still_open && still_open(ctx, &stale[i]))
			continue;
		/* Only a successful delete owns the release (BPF may end it at the same time). */
		if (bpf_map_delete_elem(m->flows, &stale[i]))
			continue;
		reclaimed++;
		if (f.client_counted)
			release_client_count(m, f.svc, stale[i].client_addr);
		int units = f.tracked_inflight + (f.req_active == 1); /* 2: being decided, no slot yet */
		if (!units)
			continue;
		if (!dirty[f.svc]) {
			__u32 k = f.svc;
			if (bpf_map_lookup_elem(m->inflight_released, &k, &rel[f.svc]))
				continue;
			dirty[f.svc] = 1;
		}
		rel[f.svc].total += units;
		rel[f.svc].cls[f.class & 3] += units;
	}
	free(stale);
	for (int s = 0; s < SLUICE_MAX_SERVICES; s++) {
		__u32 k = s;
		if (dirty[s] && bpf_map_update_elem(m->inflight_released, &k, &rel[s], BPF_ANY))
			return -errno;
	}
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

	memset(per_service, 0, sizeof(int) * (size_t)n);
	walk_flows(m, count_flow, &fc);
	return fc.total;
}
