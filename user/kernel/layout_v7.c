// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Layout 7: flow keys carry the local address. The maps keyed by struct sluice_flow_key
 * (flows, handshakes, rejected_syns) of an older layout have keys without it, so a migration
 * gives every carried entry its local address (layout.h, layout_rekey_fn):
 *   - the address of the entry's service, when that service is at an address: exact, since
 *     the older data path chose the service by the packet's local address;
 *   - else the local address of the kernel's own connection on the same client address, client
 *     port and local port (sock_diag, in sluiced's network namespace), preferring an address
 *     no service of the port is at (a port-only service's connections are on those);
 *   - else unknown: a flow is carried under the all-zero address, which no packet has, so the
 *     flow GC ends it through its ownership word after its timeout (the socket table has no
 *     connection for that key) and gives back exactly what it holds; the connection goes on
 *     untracked. A handshake record is left behind (it holds no capacity), and so is every
 *     refused SYN (rejected_syns only recognises retransmits).
 * The older key is the first part of the new one, so a connection's candidates sort
 * together in the socket table's keys. */
#include "kernel/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kernel/sockdiag.h"

#define OLD_KEY offsetof(struct sluice_flow_key, local_addr)

struct svc_addr {
	__u32 svc;
	struct sluice_addr_key key;
};

struct layout_rekey_state {
	int read;                        /* the socket table and the services' addresses read */
	struct sluice_flow_key *live;    /* the socket table's connections, sorted */
	int n_live;                      /* -1: could not be read */
	struct svc_addr *by_svc;         /* addr_services inverted, sorted by service */
	int n_svc;
	int addr_fd;                     /* addr_services as the older data path used it */
	long from_service, from_socket, unknown, left;
};

static int svc_cmp(const void *a, const void *b)
{
	const struct svc_addr *x = a, *y = b;

	return x->svc < y->svc ? -1 : x->svc > y->svc;
}

/* addr_services: adopted, or being copied (then the pinned one is what the old data path
 * used). */
static int addr_services_fd(struct layout_plan *p)
{
	for (int i = 0; i < p->n; i++)
		if (!strcmp(bpf_map__name(p->slot[i].map), "addr_services"))
			return p->slot[i].old_fd >= 0 ? p->slot[i].old_fd : bpf_map__fd(p->slot[i].map);
	return -1;
}

static void read_services(struct layout_rekey_state *st)
{
	struct sluice_addr_key k, next;
	int cap = 0;
	__u32 v;

	for (void *prev = NULL; st->addr_fd >= 0 && bpf_map_get_next_key(st->addr_fd, prev, &next) == 0;
	     prev = &k) {
		k = next;
		if (bpf_map_lookup_elem(st->addr_fd, &k, &v) || !v)
			continue;
		if (st->n_svc == cap) {
			void *n = realloc(st->by_svc, sizeof(*st->by_svc) * (size_t)(cap = cap ? cap * 2 : 64));

			if (!n)
				break;
			st->by_svc = n;
		}
		st->by_svc[st->n_svc++] = (struct svc_addr){ .svc = v - 1, .key = k };
	}
	if (st->n_svc)          /* no address-bound service: no array (qsort takes no NULL) */
		qsort(st->by_svc, (size_t)st->n_svc, sizeof(*st->by_svc), svc_cmp);
}

static void read_sockets(struct layout_rekey_state *st)
{
	uint16_t *ports = malloc(sizeof(*ports) * 65535);

	free(st->live);
	st->live = NULL;
	st->n_live = -1;
	if (!ports)
		return;
	for (int i = 0; i < 65535; i++)
		ports[i] = (uint16_t)(i + 1);
	st->n_live = live_flows_read(ports, 65535, &st->live);
	free(ports);
}

static struct layout_rekey_state *state_of(struct layout_plan *p)
{
	struct layout_rekey_state *st = p->rekey_state;

	if (!st) {
		st = p->rekey_state = calloc(1, sizeof(*st));
		if (!st)
			return NULL;
		st->addr_fd = addr_services_fd(p);
	}
	if (!st->read) {
		st->read = 1;
		if (!st->by_svc)
			read_services(st);
		read_sockets(st);
	}
	return st;
}

/* The address of service svc when it is at one on this port. */
static const __u8 *service_addr(const struct layout_rekey_state *st, __u32 svc, __u16 port)
{
	struct svc_addr want = { .svc = svc };
	const struct svc_addr *a = st->n_svc ? bsearch(&want, st->by_svc, (size_t)st->n_svc,
						       sizeof(want), svc_cmp) : NULL;

	return a && a->key.port == port ? a->key.addr : NULL;
}

static int addr_bound(const struct layout_rekey_state *st, const __u8 addr[16], __u16 port)
{
	struct sluice_addr_key k = { .port = port };
	__u32 v = 0;

	memcpy(k.addr, addr, sizeof(k.addr));
	return st->addr_fd >= 0 && bpf_map_lookup_elem(st->addr_fd, &k, &v) == 0 && v;
}

/* The local address of a connection on the older key, from the socket table. */
static const __u8 *socket_addr(const struct layout_rekey_state *st, const void *old_key,
			       __u16 port)
{
	int lo = 0, hi = st->n_live > 0 ? st->n_live : 0;
	const __u8 *first = NULL;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (memcmp(&st->live[mid], old_key, OLD_KEY) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < st->n_live && !memcmp(&st->live[lo], old_key, OLD_KEY); lo++) {
		if (!first)
			first = st->live[lo].local_addr;
		if (!addr_bound(st, st->live[lo].local_addr, port))
			return st->live[lo].local_addr;
	}
	return first;
}

static int rekey_local(struct layout_plan *p, const void *old_key, __u32 svc, void *new_key,
		       int keep_unknown)
{
	struct layout_rekey_state *st = state_of(p);
	struct sluice_flow_key *k = new_key;
	const __u8 *a = NULL;
	__u16 port;

	memset(k, 0, sizeof(*k));
	memcpy(k, old_key, OLD_KEY);
	port = ntohs(k->service_port);
	if (!st)
		return keep_unknown;
	if ((a = service_addr(st, svc, port)))
		st->from_service++;
	else if ((a = socket_addr(st, old_key, port)))
		st->from_socket++;
	if (a) {
		memcpy(k->local_addr, a, sizeof(k->local_addr));
		return 1;
	}
	if (keep_unknown)
		st->unknown++;
	else
		st->left++;
	return keep_unknown;
}

static int rekey_flow(struct layout_plan *p, const void *old_key, const void *value, void *new_key)
{
	return rekey_local(p, old_key, ((const struct sluice_flow *)value)->svc, new_key, 1);
}

static int rekey_handshake(struct layout_plan *p, const void *old_key, const void *value,
			   void *new_key)
{
	return rekey_local(p, old_key, ((const struct sluice_handshake *)value)->svc, new_key, 0);
}

static int rekey_none(struct layout_plan *p, const void *old_key, const void *value, void *new_key)
{
	return 0;
}

layout_rekey_fn layout_rekeyer(__u32 from, const char *map)
{
	if (from >= 7)
		return NULL;
	if (!strcmp(map, "flows"))
		return rekey_flow;
	if (!strcmp(map, "handshakes"))
		return rekey_handshake;
	if (!strcmp(map, "rejected_syns"))
		return rekey_none;
	return NULL;
}

__u32 layout_rekey_old_size(void)
{
	return OLD_KEY;
}

void layout_rekey_again(struct layout_plan *p)
{
	if (p->rekey_state)
		p->rekey_state->read = 0;
}

void layout_rekey_note(const struct layout_plan *p, char *buf, size_t len)
{
	const struct layout_rekey_state *st = p->rekey_state;

	buf[0] = 0;
	if (st)
		snprintf(buf, len, "; local addresses of carried flows and handshakes: %ld from "
			 "their service, %ld from the socket table, %ld unknown (left to the GC), "
			 "%ld handshakes left behind", st->from_service, st->from_socket, st->unknown,
			 st->left);
}

void layout_rekey_release(struct layout_plan *p)
{
	struct layout_rekey_state *st = p->rekey_state;

	if (st) {
		free(st->live);
		free(st->by_svc);
		free(st);
	}
	p->rekey_state = NULL;
}
