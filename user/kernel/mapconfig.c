// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/mapconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "common/clock.h"
#include "kernel/replies.h"

unsigned maps_service_slots(int n_services)
{
	unsigned slots = SLUICE_MIN_SERVICE_SLOTS;

	while (slots < (unsigned)n_services && slots < SLUICE_MAX_SERVICES)
		slots *= 2;
	return slots;
}

/* Every slot of the `services` map, read in one batch (heap: 140 B a slot). */
static struct sluice_service *read_all_services(const struct sluice_maps *m)
{
	struct sluice_service *all = calloc((size_t)m->n_slots, sizeof(*all));

	if (all && maps_read_array(m->services, 0, (__u32)m->n_slots, sizeof(*all), all, NULL)) {
		free(all);
		return NULL;
	}
	return all;
}

/* Does a count of slot s say units are still open there: requests or connections in flight,
 * turns under way, open http connections? A count that cannot be read says so too. */
static int slot_holds_units(const struct sluice_maps *m, int s)
{
	struct sluice_inflight n[3];
	int rc = maps_read_inflight(m, s, &n[0]) | maps_read_busy(m, s, &n[1]);

	if (maps_read_http_conns(m, s, &n[2]) && m->http_conns >= 0)
		rc = -1;
	if (rc)
		return 1;
	for (int k = 0; k < 3; k++) {
		if (n[k].total)
			return 1;
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			if (n[k].cls[c])
				return 1;
	}
	return 0;
}

int maps_assign_indices(const struct sluice_maps *m, const struct sluice_config *cfg, int *idx)
{
	struct sluice_service *all;
	int *slot_of = NULL, *used = NULL, rc = -1;
	unsigned mask = 15, next = 0;

	if (cfg->n_services > m->n_slots)
		return -1;
	if (!(all = read_all_services(m)))
		return -1;
	while (mask + 1 < 2u * (unsigned)m->n_slots)
		mask = mask * 2 + 1;
	slot_of = calloc(mask + 1, sizeof(*slot_of));   /* name -> slot + 1, open addressing */
	used = calloc((size_t)m->n_slots, sizeof(*used));
	if (!slot_of || !used)
		goto out;
	for (int s = 0; s < m->n_slots; s++) {
		unsigned h;

		all[s].name[SLUICE_NAME_LEN - 1] = 0;
		if (!all[s].name[0])
			continue;
		for (h = sluice_service_name_hash(all[s].name) & mask; slot_of[h]; h = (h + 1) & mask)
			;
		slot_of[h] = s + 1;
	}
	for (int i = 0; i < cfg->n_services; i++) {
		idx[i] = -1;
		for (unsigned h = sluice_service_name_hash(cfg->services[i].name) & mask; slot_of[h];
		     h = (h + 1) & mask) {
			int s = slot_of[h] - 1;

			if (!used[s] && strncmp(all[s].name, cfg->services[i].name,
						SLUICE_NAME_LEN) == 0) {
				idx[i] = s;
				used[s] = 1;
				break;
			}
		}
	}
	/* New names: slots never named first, so a removed service's counters survive a while;
	 * then the slots of removed services with no unit open, and only then the others. The
	 * units a removed service's flows still hold stay counted in its slot until they end
	 * (mapconfig.h): a new service there would find them in its own in-flight and connection
	 * counts, a tcp service's long-lived connections for as long as they last. */
	for (int pass = 0; pass < 3; pass++) {
		next = 0;
		for (int i = 0; i < cfg->n_services; i++) {
			if (idx[i] >= 0)
				continue;
			while (next < (unsigned)m->n_slots &&
			       (used[next] || (pass == 0 && all[next].name[0]) ||
				(pass == 1 && slot_holds_units(m, (int)next))))
				next++;
			if (next == (unsigned)m->n_slots)
				break;
			idx[i] = (int)next;
			used[next] = 1;
		}
	}
	rc = 0;
	for (int i = 0; i < cfg->n_services; i++)
		if (idx[i] < 0)
			rc = -1;
out:
	free(all);
	free(slot_of);
	free(used);
	return rc;
}

/* Does rule a's prefix cover rule b's prefix? Never across families: an IPv6 prefix matches
 * no IPv4 client, so ::/0 shadows no IPv4 rule after it. */
static int prefix_covers(const struct class_rule *a, const struct class_rule *b)
{
	int bits = a->prefix_len;

	if (bits > b->prefix_len || a->is_v4 != b->is_v4)
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

/* An IPv6 prefix among rules (::/0, ::/64...) spans the range IPv4 addresses are stored in:
 * that range gets an entry of its own, val, under key space svc, so that an IPv4 client's
 * longest match stops there (no rule, not trusted) and never reaches the IPv6 prefix. */
static int write_v4_range(const struct sluice_maps *m, const struct class_rule *rules, int n,
			  __u32 svc, struct sluice_src_rule val)
{
	struct sluice_src_key key = { .prefixlen = 32 + 96, .svc = svc };
	int spans = 0;

	for (int r = 0; r < n; r++)
		spans |= (rules[r].kind == RULE_SOURCE) && prefix_spans_v4(&rules[r]);
	if (!spans)
		return 0;
	key.addr[10] = key.addr[11] = 0xff;
	return bpf_map_update_elem(m->source_rules, &key, &val, BPF_ANY);
}

/* The caller's heartbeat while services are written (maps_program_services_beat): called
 * after every `every` of them, in each pass over the config. */
struct prog_beat {
	int every, n;
	void (*fn)(void *ctx);
	void *ctx;
};

static void beat_one(struct prog_beat *b)
{
	if (b->fn && b->every > 0 && ++b->n % b->every == 0)
		b->fn(b->ctx);
}

static int program_source_rules(const struct sluice_maps *m, const struct sluice_config *cfg,
				const int *idx, struct prog_beat *b)
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

		beat_one(b);
		/* Before the prefixes: an IPv4 0.0.0.0/0 is the same key and overwrites it. */
		if (write_v4_range(m, sc->rules, sc->n_rules, (__u32)idx[i],
				   (struct sluice_src_rule){ .order = SLUICE_RULE_NONE }))
			err = -errno;
		if (write_v4_range(m, sc->trust, sc->n_trust, (__u32)idx[i] | SLUICE_SRC_TRUST,
				   (struct sluice_src_rule){ .order = SLUICE_RULE_NONE,
							     .class = SLUICE_SRC_UNTRUSTED }))
			err = -errno;
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
		for (int t = 0; t < sc->n_trust; t++) {
			struct sluice_src_rule val = { .order = SLUICE_RULE_NONE };

			memset(&key, 0, sizeof(key));
			key.prefixlen = 32 + sc->trust[t].prefix_len;
			key.svc = (__u32)idx[i] | SLUICE_SRC_TRUST;
			memcpy(key.addr, sc->trust[t].addr, 16);
			if (bpf_map_update_elem(m->source_rules, &key, &val, BPF_ANY))
				err = -errno;
		}
	}
	return err;
}

/* Port -> service, and (address, port) -> service for the ports that have address-specific
 * services. The address entries are written before their port's flag is set, and entries no
 * longer configured are deleted after, so a packet meets either the old or the new service,
 * never none. port_state: 1 = some service on the port (input), bit 1 set here when the port
 * has an address-specific one. */
static int program_ports(const struct sluice_maps *m, const struct sluice_config *cfg,
			 const int *idx, unsigned char *port_state, struct prog_beat *b)
{
	__u32 *port_only = calloc(65536, sizeof(*port_only));
	struct sluice_addr_key key, next;
	int err = 0, has_next;

	if (!port_only)
		return -ENOMEM;
	for (int i = 0; i < cfg->n_services; i++) {
		const struct service_conf *sc = &cfg->services[i];
		__u32 v = (__u32)idx[i] + 1;

		beat_one(b);
		if (!sc->has_addr) {
			port_only[sc->port & 0xffff] = v;
			continue;
		}
		memset(&key, 0, sizeof(key));
		memcpy(key.addr, sc->addr, sizeof(key.addr));
		key.port = (__u32)sc->port;
		if (m->addr_services < 0 ||
		    bpf_map_update_elem(m->addr_services, &key, &v, BPF_ANY)) {
			err = m->addr_services < 0 ? -ENOENT : -errno;
			goto out;
		}
		port_state[sc->port & 0xffff] |= 2;
	}
	for (int i = 0; i < cfg->n_services; i++) {
		__u32 port = (__u32)cfg->services[i].port, v = port_only[port & 0xffff];

		beat_one(b);
		if (port_state[port & 0xffff] & 2)
			v |= SLUICE_PORT_BY_ADDR;
		if (bpf_map_update_elem(m->port_to_service, &port, &v, BPF_ANY))
			err = -errno;
	}
	/* Address entries of services removed or moved (the walk restarts after a delete). */
	for (has_next = m->addr_services >= 0 &&
			!bpf_map_get_next_key(m->addr_services, NULL, &next);
	     has_next;) {
		int keep = 0;

		key = next;
		has_next = !bpf_map_get_next_key(m->addr_services, &key, &next);
		for (int i = 0; i < cfg->n_services && !keep; i++)
			keep = cfg->services[i].has_addr && cfg->services[i].port == (int)key.port &&
			       !memcmp(cfg->services[i].addr, key.addr, sizeof(key.addr));
		if (!keep)
			bpf_map_delete_elem(m->addr_services, &key);
	}
out:
	free(port_only);
	return err;
}

/* The rules stamp (sluice_service._pad1) of every configured service, once the trie's writes
 * are done: the clock is read after them, so a flow's answer cached from the rules before or
 * during the change (its flow admitted before this read) no longer counts. Every service is
 * stamped, its rules changed or not: rewrites are rare, and a flow that loses its cache only
 * walks the trie again. */
static int stamp_rules(const struct sluice_maps *m, const struct sluice_config *cfg,
		       const int *idx, struct prog_beat *b)
{
	__u32 stamp = sluice_rules_second(monotonic_ns());
	int err = 0;

	for (int i = 0; i < cfg->n_services; i++) {
		struct sluice_service sv;
		__u32 k = idx[i];

		beat_one(b);
		if (bpf_map_lookup_elem(m->services, &k, &sv)) {
			err = -errno;
			continue;
		}
		if (sv._pad1 >= stamp)
			continue;
		sv._pad1 = stamp;
		if (bpf_map_update_elem(m->services, &k, &sv, BPF_ANY))
			err = -errno;
	}
	return err;
}

int maps_derive_port_bits(int port_to_service, int service_ports)
{
	struct sluice_port_bits *bits = calloc(1, sizeof(*bits));
	__u32 *v = calloc(65536, sizeof(*v)), zero = 0;
	int err;

	if (!bits || !v) {
		free(bits);
		free(v);
		return -ENOMEM;
	}
	err = maps_read_array(port_to_service, 0, 65536, sizeof(*v), v, NULL);
	for (__u32 p = 0; p < 65536; p++)
		if (err || v[p])
			bits->word[p / 64] |= 1ULL << (p % 64);
	if (bpf_map_update_elem(service_ports, &zero, bits, BPF_ANY) && !err)
		err = -errno;
	free(bits);
	free(v);
	return err;
}

/* Is the slot, as it stood before this call, new to service sc? It is when another service or
 * none had it (the name differs), and when a reload removed sc from it (the name stays, the
 * port goes): what its maps hold was decided and counted while sc did not run there. */
static int slot_new_to(const struct sluice_service *was, const struct service_conf *sc)
{
	return strncmp(was->name, sc->name, SLUICE_NAME_LEN) || !was->port;
}

/* Entry key of a per-CPU map of u64 fields (size bytes a CPU) set to zero on every CPU. */
static int zero_percpu(int fd, __u32 key, size_t size, int ncpus)
{
	void *zero = calloc((size_t)(ncpus > 0 ? ncpus : 1), size);
	int err;

	if (fd < 0) {
		free(zero);
		return 0;                       /* pins that predate the map: nothing kept */
	}
	if (!zero)
		return -ENOMEM;
	err = bpf_map_update_elem(fd, &key, zero, BPF_ANY) ? -errno : 0;
	free(zero);
	return err;
}

/* Entry k of an optional array map set to zero (value size bytes). */
static int zero_entry(int fd, __u32 k, size_t size)
{
	void *zero = calloc(1, size);
	int err;

	if (fd < 0) {
		free(zero);
		return 0;
	}
	if (!zero)
		return -ENOMEM;
	err = bpf_map_update_elem(fd, &k, zero, BPF_ANY) ? -errno : 0;
	free(zero);
	return err;
}

/* Slot k, new to the service about to take it, made as a slot never used: written before its
 * port is published, so that its first packet meets none of it. Its decisions: the all-zero
 * verdict (admit everything until the controller's first tick; never what the slot's previous
 * service was told, an open breaker included). Of a slot some service had (named): its http
 * connection cap, the controller's record (a restart adopts a record that names the
 * service, and status shows it), the operator's request (done for the service before, it
 * would be done again), and the counters, histograms and refusal counts, which /metrics and
 * status show as the service's own (the clients' entries too, after the slots: forget_clients).
 * Left as they are: in-flight, busy, open connections and handshakes under way, the releases
 * of the GC and the clients' entries counting units still open: they count units the slot's
 * previous service admitted, which are given back here when they end (a count set to zero
 * under them would end below zero). */
static int clean_slot(const struct sluice_maps *m, __u32 k, int named)
{
	struct sluice_verdict zero;
	int err;

	memset(&zero, 0, sizeof(zero));
	if (maps_write_verdict(m, (int)k, &zero))
		return -errno;
	if (!named)
		return 0;       /* never any service's: nothing else was ever written there */
	if ((err = zero_entry(m->http_conn_cap, k, sizeof(struct sluice_http_conn_cap))) ||
	    (err = zero_entry(m->ctl_state, k, sizeof(struct sluice_ctl_slot))) ||
	    (err = zero_entry(m->ctl_requests, k, sizeof(struct sluice_ctl_request))) ||
	    (err = zero_entry(m->conn_cap, k, sizeof(struct sluice_conn_cap))) ||
	    (err = zero_percpu(m->class_stats, k, sizeof(struct sluice_svc_stats), m->ncpus)) ||
	    (err = zero_percpu(m->untrusted_marks, k, sizeof(struct sluice_untrusted), m->ncpus)))
		return err;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		__u32 key;
		int fd = maps_hist_fd(m, (int)k, c, &key);

		if ((err = zero_percpu(fd, key, sizeof(struct sluice_hist), m->ncpus)))
			return err;
	}
	return 0;
}

struct client_sweep {
	const unsigned char *passed;     /* by slot: new to its service */
	int n_slots;
	int counts;                      /* the map's values are struct sluice_client */
	struct sluice_client_key *keys;  /* to delete */
	int n, cap;
};

/* Keep key k to delete it after the walk (deleting while walking restarts a hash walk): an
 * entry of a slot new to its service, unless it counts units still open. */
static int sweep_one(struct client_sweep *sw, const struct sluice_client_key *k, const void *v)
{
	if (k->svc >= (__u32)sw->n_slots || !sw->passed[k->svc] ||
	    (sw->counts && ((const struct sluice_client *)v)->in_flight > 0))
		return 0;
	if (sw->n == sw->cap) {
		int cap = sw->cap ? sw->cap * 2 : 64;
		void *p = realloc(sw->keys, sizeof(*sw->keys) * (size_t)cap);

		if (!p)
			return -ENOMEM;
		sw->keys = p;
		sw->cap = cap;
	}
	sw->keys[sw->n++] = *k;
	return 0;
}

/* The entries of the slots marked in sw->passed of a map keyed by client (fd, values of vsize
 * bytes), deleted: one walk of the map (batches, entry by entry where the kernel has none). */
static int sweep_entry(void *ctx, const void *k, const void *v)
{
	return sweep_one(ctx, k, v);
}

static int forget_slots_clients(int fd, size_t vsize, struct client_sweep *sw)
{
	int rc;

	sw->n = 0;
	if (fd < 0)
		return 0;                   /* pins that predate the map, or not loaded here */
	rc = maps_walk_hash(fd, sizeof(struct sluice_client_key), vsize, sweep_entry, sw);
	for (int i = 0; i < sw->n && !rc; i++)
		if (bpf_map_delete_elem(fd, &sw->keys[i]) && errno != ENOENT)
			rc = -errno;       /* gone already: the LRU took it */
	return rc;
}

/* What the slots marked in passed[] (slots new to their service) kept of their previous
 * service's clients, forgotten: the new service's clients meet none of it there.
 * - `clients`: its token bucket leaves a client's arrival time up to burst / rate seconds
 *   ahead, which refused the new service's first units from that client. An entry that
 *   counts units still open stays: the previous service's flows give them back to it when
 *   they end (deleted, its count would start again from their first release, below what is
 *   open); an entry with none has nothing more to be given back.
 * - `addr_class`: the class the previous service's rules gave a client's requests (its
 *   trusted marks) raised the new service's judgement of that client's http SYNs for a
 *   minute, whatever the new service trusts.
 * One walk of each map, at a reload that gives a named slot to a service, never on the tick. */
static int forget_clients(const struct sluice_maps *m, const unsigned char *passed)
{
	struct client_sweep sw = { .passed = passed, .n_slots = m->n_slots, .counts = 1 };
	int rc = forget_slots_clients(m->clients, sizeof(struct sluice_client), &sw);

	sw.counts = 0;
	if (!rc)
		rc = forget_slots_clients(m->addr_class, sizeof(struct sluice_addr_class), &sw);
	free(sw.keys);
	return rc;
}

int maps_program_services(const struct sluice_maps *m, const struct sluice_config *cfg,
			  const int *idx)
{
	return maps_program_services_beat(m, cfg, idx, 0, NULL, NULL);
}

int maps_program_services_beat(const struct sluice_maps *m, const struct sluice_config *cfg,
			       const int *idx, int every, void (*beat)(void *ctx), void *ctx)
{
	struct sluice_service *all = read_all_services(m);
	unsigned char *in_cfg = calloc((size_t)m->n_slots, 1), *port_in_cfg = calloc(65536, 1);
	unsigned char *passed = calloc((size_t)m->n_slots, 1);   /* named slots new to their service */
	int any_passed = 0;
	/* Each service is written stamped already (before the trie changes; the stamp never goes
	 * back): from then on no answer cached before counts, even while the trie changes. */
	__u32 stamp = sluice_rules_second(monotonic_ns());
	struct prog_beat b = { .every = every, .fn = beat, .ctx = ctx };
	int err = 0;

	if (!all || !in_cfg || !port_in_cfg || !passed) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < cfg->n_services; i++) {
		struct sluice_service sv;
		__u32 k = idx[i];

		beat_one(&b);
		if (slot_new_to(&all[k], &cfg->services[i])) {
			if ((err = clean_slot(m, k, all[k].name[0] != 0)))
				goto out;
			passed[k] = all[k].name[0] != 0;
			any_passed |= passed[k];
		}
		fill_service(&sv, &cfg->services[i]);
		sv._pad1 = all[k]._pad1 > stamp ? all[k]._pad1 : stamp;
		if (bpf_map_update_elem(m->services, &k, &sv, BPF_ANY)) {
			err = -errno;
			goto out;
		}
		{
			unsigned thr[SLUICE_NUM_CLASSES];
			__u32 t32[SLUICE_NUM_CLASSES];

			service_conn_cap(&cfg->services[i], thr);
			for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
				t32[c] = thr[c];
			/* Pins older than the cap have no conn_cap map: nothing to program. */
			if (m->conn_cap >= 0 && maps_write_conn_cap(m, (int)k, t32)) {
				err = -errno;
				goto out;
			}
		}
		in_cfg[idx[i]] = 1;
		port_in_cfg[cfg->services[i].port & 0xffff] = 1;
		maps_write_reply(m, idx[i], SLUICE_REPLY_429, cfg->services[i].retry_after_s);
		maps_write_reply(m, idx[i], SLUICE_REPLY_503, cfg->services[i].retry_after_s);
	}
	/* before the ports: a new service's first client finds its entry gone */
	if (any_passed && (err = forget_clients(m, passed)))
		goto out;
	/* Ports: clear those in force before this call and no longer configured (only they can
	 * need clearing; a walk over all 65536 entries would cost a syscall each), then set the
	 * current ones. */
	for (int s = 0; s < m->n_slots; s++) {
		__u32 port = all[s].name[0] ? all[s].port : 0, zero = 0;

		if (port && !port_in_cfg[port & 0xffff] &&
		    bpf_map_update_elem(m->port_to_service, &port, &zero, BPF_ANY))
			err = -errno;
	}
	if (!err)
		err = program_ports(m, cfg, idx, port_in_cfg, &b);
	/* After the array, from what it holds whatever failed above: a port added is in the
	 * array before its bit says so, and a bit never goes missing for a port it still has. */
	if (m->service_ports >= 0) {
		int rc = maps_derive_port_bits(m->port_to_service, m->service_ports);

		if (rc && !err)
			err = rc;
	}
	/* A removed service keeps its name (stable index, counters) but no port: from then on its
	 * slot is new to whatever service takes it. Not after a failure: the running config is
	 * written back, and its services still run where they ran. */
	for (int s = 0; s < m->n_slots && !err; s++) {
		__u32 k = s;

		if (!in_cfg[s] && all[s].name[0] && all[s].port) {
			all[s].port = 0;
			bpf_map_update_elem(m->services, &k, &all[s], BPF_ANY);
		}
	}
	if (!err) {
		err = program_source_rules(m, cfg, idx, &b);
		/* Stamped again once the trie is written, even when some write failed: whatever
		 * it holds now is what later flows' answers come from. */
		if (stamp_rules(m, cfg, idx, &b) && !err)
			err = -EIO;
	}
out:
	free(all);
	free(in_cfg);
	free(port_in_cfg);
	free(passed);
	return err;
}
