// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/mapconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include "kernel/replies.h"

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
	char old_name[SLUICE_MAX_SERVICES][SLUICE_NAME_LEN];
	int err = 0;

	/* The ports in force before this call: only they can need clearing (a walk over all
	 * 65536 entries would cost a syscall each and slow every start). */
	for (int s = 0; s < SLUICE_MAX_SERVICES; s++) {
		struct sluice_service sv;

		old_name[s][0] = 0;
		if (maps_read_service(m, s, &sv) == 0 && sv.name[0]) {
			old_port[s] = sv.port;
			memcpy(old_name[s], sv.name, SLUICE_NAME_LEN);
		}
	}
	for (int i = 0; i < cfg->n_services; i++) {
		struct sluice_service sv;
		__u32 k = idx[i];

		/* A slot new to this service starts from the all-zero verdict (admit everything)
		 * until the controller's first tick, written before its port is published below:
		 * never what the slot's previous service was told, an open breaker included. */
		if (strncmp(old_name[k], cfg->services[i].name, SLUICE_NAME_LEN)) {
			struct sluice_verdict zero;

			memset(&zero, 0, sizeof(zero));
			if (maps_write_verdict(m, (int)k, &zero))
				return -errno;
		}
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
