// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/sockdiag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>

#define TCP_LISTEN_STATE 10

/* One sock_diag dump of TCP sockets of a family in `states`; fn sees each socket, and for an
 * IPv6 listener whether it is IPv6 only (IPV6_V6ONLY: 1 or 0; -1 when the kernel did not
 * say). */
typedef void (*sock_fn)(void *ctx, int family, const struct inet_diag_msg *d, int v6only);

/* The INET_DIAG_SKV6ONLY attribute after the message (the kernel adds it to every IPv6
 * socket listening or closed), or -1. */
static int v6only_of(const struct nlmsghdr *h)
{
	const struct inet_diag_msg *d = NLMSG_DATA(h);
	const struct rtattr *a = (const struct rtattr *)(d + 1);
	int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*d));

	for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == INET_DIAG_SKV6ONLY && RTA_PAYLOAD(a) >= 1)
			return *(const uint8_t *)RTA_DATA(a) != 0;
	return -1;
}

/* The answer to one dump request: each socket to fn. -EOPNOTSUPP when the kernel refused the
 * request before any socket (the caller may ask another way), -EPROTO for an error later. */
static int read_dump(int fd, sock_fn fn, void *ctx)
{
	char buf[16384];
	int seen = 0;

	for (;;) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		/* A signal is not the end of the dump: the rest is still to come (taken for the
		 * whole, a partial list of live flows would have the GC reclaim live ones). */
		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0)
			return -errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
			const struct inet_diag_msg *d = NLMSG_DATA(h);

			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR)
				return seen ? -EPROTO : -EOPNOTSUPP;
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
				return -EPROTO;
			seen = 1;
			if (d->idiag_family == AF_INET || d->idiag_family == AF_INET6)
				fn(ctx, d->idiag_family, d,
				   d->idiag_family == AF_INET6 ? v6only_of(h) : -1);
		}
	}
}

/* One sock_diag dump of the TCP sockets of a family in `states`. */
static int dump_family(int fd, int family, uint32_t states, sock_fn fn, void *ctx)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} msg = {
		.nlh = { .nlmsg_len = sizeof(msg), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.req = { .sdiag_family = (uint8_t)family, .sdiag_protocol = IPPROTO_TCP,
			 .idiag_states = states },
	};

	if (send(fd, &msg, sizeof(msg), 0) < 0)
		return -errno;
	return read_dump(fd, fn, ctx);
}

/* Every TCP socket in `states`, IPv4 and IPv6. The kernel walks its socket table once per
 * dump, and a dump by family walks all of it for one family: the listener table alone has
 * 64K buckets, about 15 us a walk. The older request (TCPDIAG_GETSOCK) asks for both
 * families in one walk; a kernel that refuses it is asked family by family (*two_dumps is
 * then set, so the next call asks that way at once). */
static int dump_sockets(int fd, uint32_t states, int *two_dumps, sock_fn fn, void *ctx)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req req;
	} msg = {
		.nlh = { .nlmsg_len = sizeof(msg), .nlmsg_type = TCPDIAG_GETSOCK,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.req = { .idiag_family = AF_INET, .idiag_states = states },
	};
	int rc;

	if (!*two_dumps) {
		if (send(fd, &msg, sizeof(msg), 0) < 0)
			return -errno;
		rc = read_dump(fd, fn, ctx);
		if (rc != -EOPNOTSUPP)
			return rc;
		*two_dumps = 1;
	}
	rc = dump_family(fd, AF_INET, states, fn, ctx);
	return rc ? rc : dump_family(fd, AF_INET6, states, fn, ctx);
}

/* The services' ports, sorted, each with its position in the caller's array: a socket is
 * matched with one binary search, whatever the number of services. Entry = port << 16 | i. */
struct port_index {
	uint32_t *e;
	int n;
};

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int port_index_build(struct port_index *pi, const uint16_t *ports, int n)
{
	pi->n = n;
	pi->e = malloc(sizeof(*pi->e) * (size_t)(n ? n : 1));
	if (!pi->e)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		pi->e[i] = (uint32_t)ports[i] << 16 | (uint32_t)(i & 0xffff);
	qsort(pi->e, (size_t)n, sizeof(*pi->e), u32_cmp);
	return 0;
}

/* Position of the first entry for port, or -1. */
static int port_index_find(const struct port_index *pi, uint16_t port)
{
	int lo = 0, hi = pi->n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (pi->e[mid] >> 16 < port)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < pi->n && pi->e[lo] >> 16 == port ? lo : -1;
}

struct queue_ctx {
	const struct port_index *pi;
	const struct acceptq_want *want;
	struct acceptq *out;
	struct acceptq *wild;            /* address-bound services: the port's wildcard listeners */
};

static void acceptq_add(struct acceptq *q, const struct inet_diag_msg *d)
{
	/* For listeners rqueue is the accept queue, wqueue its limit. */
	q->queued += d->idiag_rqueue;
	q->backlog += d->idiag_wqueue;
	q->listeners++;
}

static void sock_addr(int family, const __be32 a[4], uint8_t out[16]);

static int is_v4mapped(const uint8_t a[16])
{
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };

	return memcmp(a, pre, sizeof(pre)) == 0;
}

/* A listener goes to the services it takes connections for: one bound to an address to the
 * service at that address (or, when no service of the port is there, to the port-only one);
 * a wildcard one to the port-only service, and to a service at an address that has no
 * listener of its own (sorted out after the dump; an IPv4 wildcard takes no IPv6 address, an
 * IPv6 wildcard set IPV6_V6ONLY no IPv4 one). */
static void add_listener(void *vctx, int family, const struct inet_diag_msg *d, int v6only)
{
	struct queue_ctx *c = vctx;
	uint16_t port = ntohs(d->id.idiag_sport);
	int k0 = port_index_find(c->pi, port), bound = 0, wildcard;
	uint8_t la[16];

	if (k0 < 0)
		return;
	sock_addr(family, d->id.idiag_src, la);
	wildcard = family == AF_INET ? !d->id.idiag_src[0]
				     : !memcmp(la, (uint8_t[16]){ 0 }, sizeof(la));
	for (int k = k0; !wildcard && k < c->pi->n && c->pi->e[k] >> 16 == port; k++) {
		const struct acceptq_want *w = &c->want[c->pi->e[k] & 0xffff];

		bound |= w->has_addr && !memcmp(w->addr, la, sizeof(la));
	}
	for (int k = k0; k < c->pi->n && c->pi->e[k] >> 16 == port; k++) {
		int i = (int)(c->pi->e[k] & 0xffff);
		const struct acceptq_want *w = &c->want[i];

		if (!w->has_addr) {
			if (!bound)
				acceptq_add(&c->out[i], d);
		} else if (!wildcard) {
			if (!memcmp(w->addr, la, sizeof(la)))
				acceptq_add(&c->out[i], d);
		} else if (family == AF_INET6 ? !(v6only == 1 && is_v4mapped(w->addr))
					      : is_v4mapped(w->addr)) {
			acceptq_add(&c->wild[i], d);
		}
	}
}

/* A socket's address as the data path keys it: v4-mapped for IPv4. */
static void sock_addr(int family, const __be32 a[4], uint8_t out[16])
{
	if (family == AF_INET) {
		memset(out, 0, 10);
		out[10] = 0xff;
		out[11] = 0xff;
		memcpy(out + 12, &a[0], 4);
	} else {
		memcpy(out, a, 16);
	}
}

struct live_ctx {
	const struct port_index *pi;
	struct sluice_flow_key *keys;
	int count, cap;
	int oom;
};

static void add_live(void *vctx, int family, const struct inet_diag_msg *d, int v6only)
{
	struct live_ctx *c = vctx;
	struct sluice_flow_key k;

	if (port_index_find(c->pi, ntohs(d->id.idiag_sport)) < 0)
		return;
	memset(&k, 0, sizeof(k));
	sock_addr(family, d->id.idiag_dst, k.client_addr);
	sock_addr(family, d->id.idiag_src, k.local_addr);
	k.client_port = d->id.idiag_dport;
	k.service_port = d->id.idiag_sport;
	if (c->count == c->cap) {
		void *p = realloc(c->keys, sizeof(k) * (size_t)(c->cap = c->cap ? c->cap * 2 : 256));
		if (!p) {
			c->oom = 1;
			return;
		}
		c->keys = p;
	}
	c->keys[c->count++] = k;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct sluice_flow_key));
}

int live_flows_read(const uint16_t *ports, int n, struct sluice_flow_key **keys)
{
	struct port_index pi;
	struct live_ctx c = { .pi = &pi };
	uint32_t states = 0xfff & ~(1u << TCP_LISTEN_STATE);
	int fd, rc, two_dumps = 0;

	if (port_index_build(&pi, ports, n))
		return -ENOMEM;
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0) {
		free(pi.e);
		return -errno;
	}
	rc = dump_sockets(fd, states, &two_dumps, add_live, &c);
	close(fd);
	free(pi.e);
	if (rc || c.oom) {
		free(c.keys);
		return rc ? rc : -ENOMEM;
	}
	if (c.count)            /* none found: no array to sort (qsort takes no NULL) */
		qsort(c.keys, (size_t)c.count, sizeof(*c.keys), key_cmp);
	*keys = c.keys;
	return c.count;
}

int live_flows_has(const struct sluice_flow_key *keys, int count, const struct sluice_flow_key *k)
{
	return keys && count > 0 && bsearch(k, keys, (size_t)count, sizeof(*k), key_cmp) != NULL;
}

void acceptq_reader_init(struct acceptq_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void acceptq_reader_free(struct acceptq_reader *r)
{
	if (r->open)
		close(r->fd);
	free(r->index);
	free(r->tmp);
	acceptq_reader_init(r);
}

int acceptq_reader_read(struct acceptq_reader *r, const struct acceptq_want *want, int n,
			struct acceptq *out)
{
	struct port_index pi;
	struct queue_ctx c;
	int rc;

	if (!r->index || r->n != n) {
		/* the services' ports, sorted once (the caller frees the reader when they change) */
		uint16_t *ports = malloc(sizeof(*ports) * (size_t)(n ? n : 1));
		struct acceptq *tmp = calloc((size_t)(n ? n : 1) * 2, sizeof(*tmp));

		for (int i = 0; ports && i < n; i++)
			ports[i] = want[i].port;
		free(r->index);
		free(r->tmp);
		r->index = NULL;
		r->tmp = tmp;
		if (!tmp || !ports || port_index_build(&pi, ports, n)) {
			free(ports);
			return -ENOMEM;
		}
		free(ports);
		r->index = pi.e;
		r->n = n;
	}
	pi = (struct port_index){ .e = r->index, .n = r->n };
	memset(r->tmp, 0, sizeof(*r->tmp) * (size_t)(n ? n : 1) * 2);
	c = (struct queue_ctx){ .pi = &pi, .want = want, .out = r->tmp, .wild = r->tmp + n };
	if (!r->open) {
		if ((r->fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) < 0)
			return -errno;
		r->open = 1;
	}
	rc = dump_sockets(r->fd, 1u << TCP_LISTEN_STATE, &r->two_dumps, add_listener, &c);
	if (rc) {
		/* a dump cut short leaves its rest in the socket: start the next on a new one */
		close(r->fd);
		r->open = 0;
		return rc;
	}
	for (int i = 0; i < n; i++)
		out[i] = want[i].has_addr && !r->tmp[i].listeners ? c.wild[i] : r->tmp[i];
	return 0;
}

int acceptq_read_at(const struct acceptq_want *want, int n, struct acceptq *out)
{
	struct acceptq_reader r;
	int rc;

	acceptq_reader_init(&r);
	rc = acceptq_reader_read(&r, want, n, out);
	acceptq_reader_free(&r);
	return rc;
}

int acceptq_read(const uint16_t *ports, int n, struct acceptq *out)
{
	struct acceptq_want *w = calloc((size_t)(n ? n : 1), sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		w[i].port = ports[i];
	rc = acceptq_read_at(w, n, out);
	free(w);
	return rc;
}
