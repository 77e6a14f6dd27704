// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The small libmicrohttpd server behind /metrics (metrics.h): GET /metrics answers with the
 * body the daemon's callback renders; the listening socket is bound here so every address
 * form of the config (HOST:PORT, [V6]:PORT, :PORT) works the same way. */
#include "daemon/metrics.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* Connections served at a time. A client may open more, up to METRICS_CONN_SPARE beyond
 * this: each one past it makes room by closing the oldest connection still waiting for its
 * request (see make_room), so that a process holding every connection, trickling a header
 * line now and then, cannot keep a scrape out -- the scrape, whose request comes at once,
 * is never the oldest waiting. */
#define METRICS_MAX_CONNS  64
#define METRICS_CONN_SPARE 16

/* One open connection, from libmicrohttpd's connection notifications. Only the server's
 * own thread (MHD_USE_INTERNAL_POLLING_THREAD, where every callback runs) touches them. */
struct metrics_conn {
	struct metrics_conn *prev, *next;   /* oldest first */
	struct MHD_Connection *c;
	int answering;                      /* its request head is in: being answered */
	int closing;                        /* shut down by make_room, not yet closed */
};

struct metrics_server {
	struct MHD_Daemon *d;
	metrics_body_fn fn;
	void *ctx;
	int port;
	struct metrics_conn *oldest, *newest;
	int open;                           /* connections not closing */
};

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Over METRICS_MAX_CONNS: shut down the oldest connection waiting for (or idle before) its
 * request. Its socket is shut, not closed, so libmicrohttpd closes it in its own time: here,
 * in its thread, the connection is still open and its fd its own. None waiting (all being
 * answered): nothing is closed, and past the spare libmicrohttpd refuses new ones. */
static void make_room(struct metrics_server *srv)
{
	for (struct metrics_conn *mc = srv->oldest; mc && srv->open > METRICS_MAX_CONNS;
	     mc = mc->next) {
		const union MHD_ConnectionInfo *ci;

		if (mc->answering || mc->closing || mc == srv->newest)
			continue;
		ci = MHD_get_connection_info(mc->c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || shutdown(ci->connect_fd, SHUT_RDWR))
			continue;
		mc->closing = 1;
		srv->open--;
	}
}

static void conn_unlink(struct metrics_server *srv, struct metrics_conn *mc)
{
	if (mc->prev)
		mc->prev->next = mc->next;
	else
		srv->oldest = mc->next;
	if (mc->next)
		mc->next->prev = mc->prev;
	else
		srv->newest = mc->prev;
}

/* A connection opened (kept in order of arrival, oldest first) or closed. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct metrics_server *srv = cls;
	struct metrics_conn *mc = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		mc = calloc(1, sizeof(*mc));
		if (!mc)
			return;              /* untracked: served, never closed for room */
		mc->c = c;
		mc->prev = srv->newest;
		if (srv->newest)
			srv->newest->next = mc;
		else
			srv->oldest = mc;
		srv->newest = mc;
		srv->open++;
		*socket_context = mc;
		make_room(srv);
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && mc) {
		conn_unlink(srv, mc);
		srv->open -= !mc->closing;
		free(mc);
		*socket_context = NULL;
	}
}

/* c's tracking record, NULL when it has none. */
static struct metrics_conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* A request answered: the connection waits for its next one (keep-alive), and may be closed
 * for room again. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct metrics_conn *mc = conn_of(c);

	(void)cls;
	(void)con_cls;
	(void)toe;
	if (mc)
		mc->answering = 0;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct metrics_server *srv = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body = NULL;
	size_t len = 0;
	struct metrics_conn *mc = conn_of(c);

	(void)version;
	(void)upload_data;
	(void)con_cls;
	if (mc)
		mc->answering = 1;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		/* answer at once: any request body is not read */
		*upload_data_size = 0;
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n");
	}
	if (!strcmp(url, "/"))
		return reply_text(c, MHD_HTTP_OK, "sluice: metrics are at /metrics\n");
	if (strcmp(url, "/metrics"))
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
	if (srv->fn(srv->ctx, &body, &len) || !body) {
		free(body);
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics unavailable\n");
	}
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* "host:port", "[v6]:port", ":port" (every address). Port: decimal digits only, 0..65535
 * (0: any free port, see metrics_port()). */
static int split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen,
		      char *err, size_t errlen)
{
	const char *h, *he, *p;
	unsigned long v = 0;
	size_t n;

	if (!addr || !*addr) {
		snprintf(err, errlen, "metrics address is empty: expected HOST:PORT");
		return -1;
	}
	if (addr[0] == '[') {
		h = addr + 1;
		he = strchr(h, ']');
		if (!he) {
			snprintf(err, errlen, "metrics address '%s': missing ']' (expected [IPV6]:PORT)",
				 addr);
			return -1;
		}
		if (he[1] != ':') {
			snprintf(err, errlen, "metrics address '%s': expected [IPV6]:PORT", addr);
			return -1;
		}
		p = he + 2;
	} else {
		const char *colon = strrchr(addr, ':');

		if (!colon) {
			snprintf(err, errlen, "metrics address '%s': expected HOST:PORT", addr);
			return -1;
		}
		h = addr;
		he = colon;
		if (memchr(h, ':', (size_t)(he - h))) {
			snprintf(err, errlen,
				 "metrics address '%s': IPv6 addresses must be written [ADDR]:PORT",
				 addr);
			return -1;
		}
		p = colon + 1;
	}
	n = (size_t)(he - h);      /* 0: every address (":9477", as the config allows) */
	if (n >= hostlen) {
		snprintf(err, errlen, "metrics address '%s': host too long", addr);
		return -1;
	}
	if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 5 ||
	    (v = strtoul(p, NULL, 10)) > 65535) {
		snprintf(err, errlen,
			 "metrics address '%s': port '%s' must be a number in 0..65535", addr, p);
		return -1;
	}
	memcpy(host, h, n);
	host[n] = '\0';
	snprintf(port, portlen, "%lu", v);
	return 0;
}

/* Resolve and bind; the first address that binds wins. An empty host is every address: the
 * IPv6 wildcard in dual-stack mode, or the IPv4 one where there is no IPv6. Returns the
 * listening fd or -1. */
static int listen_on(const char *addr, const char *host, const char *port, int *family_out,
		     char *err, size_t errlen)
{
	static const int any_families[] = { AF_INET6, AF_INET };
	struct addrinfo hints, *res = NULL, *ai;
	int rc, fd = -1, last_errno = 0;
	int any = !host[0];

	for (int pass = 0; fd < 0 && pass < (any ? 2 : 1); pass++) {
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = any ? any_families[pass] : AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
		rc = getaddrinfo(any ? NULL : host, port, &hints, &res);
		if (rc && any)
			continue;
		if (rc) {
			snprintf(err, errlen, "metrics address '%s': cannot resolve '%s': %s", addr,
				 host, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
			return -1;
		}
		for (ai = res; ai; ai = ai->ai_next) {
			int one = 1, zero = 0;

			if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
				continue;
			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
			if (fd < 0) {
				last_errno = errno;
				continue;
			}
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (any && ai->ai_family == AF_INET6)
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) {
				*family_out = ai->ai_family;
				break;
			}
			last_errno = errno;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
		res = NULL;
	}
	if (fd < 0)
		snprintf(err, errlen, "metrics address '%s': cannot listen: %s", addr,
			 last_errno ? strerror(last_errno) : "no IPv4/IPv6 address");
	return fd;
}

struct metrics_server *metrics_start(const char *addr, metrics_body_fn fn, void *ctx,
				     char *err, size_t errlen)
{
	char host[256], port[8], dummy[1];
	struct metrics_server *srv;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, family = AF_INET;
	unsigned flags;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!fn) {
		snprintf(err, errlen, "metrics: no body function");
		return NULL;
	}
	if (split_addr(addr, host, sizeof(host), port, sizeof(port), err, errlen))
		return NULL;
	fd = listen_on(addr, host, port, &family, err, errlen);
	if (fd < 0)
		return NULL;
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		close(fd);
		snprintf(err, errlen, "metrics: out of memory");
		return NULL;
	}
	srv->fn = fn;
	srv->ctx = ctx;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		srv->port = ntohs(ss.ss_family == AF_INET6 ?
				  ((struct sockaddr_in6 *)&ss)->sin6_port :
				  ((struct sockaddr_in *)&ss)->sin_port);
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
	if (family == AF_INET6)
		flags |= MHD_USE_IPv6;
	srv->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, srv,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				  MHD_OPTION_CONNECTION_LIMIT,
				  (unsigned)(METRICS_MAX_CONNS + METRICS_CONN_SPARE),
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
				  MHD_OPTION_END);
	if (!srv->d) {
		close(fd);
		free(srv);
		snprintf(err, errlen, "metrics address '%s': libmicrohttpd failed to start", addr);
		return NULL;
	}
	return srv;
}

int metrics_port(const struct metrics_server *srv)
{
	return srv ? srv->port : -1;
}

void metrics_stop(struct metrics_server *srv)
{
	if (!srv)
		return;
	MHD_stop_daemon(srv->d);      /* joins the thread and closes the listening socket */
	free(srv);
}
