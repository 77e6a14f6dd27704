// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// loadgen: an open-loop load generator for sluice tests and benchmarks.
//
// Arrivals are scheduled by the clock (Poisson at --rate per second, or evenly spaced), never
// by completions: a request whose connection is slow does not delay the next arrival. One
// thread, nonblocking sockets, epoll, a timerfd for sub-millisecond arrival times; thousands
// of outstanding requests. Latency is measured from the scheduled arrival time, so a late
// send is charged to the request (no coordinated omission).
//
// Modes: http-keepalive (a pool of persistent connections per class: an idle one is reused,
// else a new one is opened), http-new (a new connection per request, Connection: close),
// tcp (connect, send one line, wait for "ok", hold --hold-ms, close: the connection is the
// unit). Everything goes to --target and nowhere else.
//
// Output: one JSON object on stdout at the end; optional progress lines on stderr.
// See tools/README.md for usage.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define MAX_CLASSES 16
#define MAX_RESP (4 * 1024 * 1024)

// ---------------------------------------------------------------- intrusive lists
struct link {
	struct link *prev, *next;
};
#define container_of(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))
static void list_init(struct link *h) { h->prev = h->next = h; }
static bool list_empty(const struct link *h) { return h->next == h; }
static void list_add_tail(struct link *h, struct link *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}
static void list_add_head(struct link *h, struct link *n)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}
static void list_del(struct link *n)
{
	if (!n->next)
		return;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
}

// ---------------------------------------------------------------- log-linear histogram (µs)
// Exact below 128 µs, then 64 sub-buckets per power of two (relative error < 1.6%, the
// reported bucket middle < 0.8%). Covers 2^40 µs.
#define H_SUB 64
#define H_BUCKETS (H_SUB * 36)
struct hist {
	uint64_t b[H_BUCKETS];
	uint64_t n, max_us;
};

static int h_index(uint64_t v)
{
	if (v < 2 * H_SUB)
		return (int)v;
	int msb = 63 - __builtin_clzll(v);
	int shift = msb - 6;
	int idx = (shift + 1) * H_SUB + (int)(v >> shift) - H_SUB;
	return idx < H_BUCKETS ? idx : H_BUCKETS - 1;
}

static double h_value(int idx) // middle of the bucket, µs
{
	if (idx < 2 * H_SUB)
		return idx;
	int shift = idx / H_SUB - 1;
	uint64_t sub = (uint64_t)(idx % H_SUB + H_SUB);
	return (double)(sub << shift) + ((1ULL << shift) - 1) / 2.0;
}

static void h_add(struct hist *h, uint64_t us)
{
	h->b[h_index(us)]++;
	h->n++;
	if (us > h->max_us)
		h->max_us = us;
}

static void h_merge(struct hist *dst, const struct hist *src)
{
	for (int i = 0; i < H_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->n += src->n;
	if (src->max_us > dst->max_us)
		dst->max_us = src->max_us;
}

static double h_pct_ms(const struct hist *h, double p)
{
	uint64_t rank = (uint64_t)ceil(p * (double)h->n), cum = 0;
	if (rank < 1)
		rank = 1;
	for (int i = 0; i < H_BUCKETS; i++) {
		cum += h->b[i];
		if (cum >= rank) {
			double v = h_value(i);
			return (v > (double)h->max_us ? (double)h->max_us : v) / 1000.0;
		}
	}
	return h->max_us / 1000.0;
}

// ---------------------------------------------------------------- types
enum { M_KEEPALIVE, M_NEW, M_TCP };
static const char *mode_names[] = { "http-keepalive", "http-new", "tcp" };

struct stats {
	uint64_t sent, ok, h429, h503, other_status, refused, reset, eof, timeout, other_error,
		unfinished, retried;
	uint64_t status[600];
	struct hist ok_h, rej_h;
};

struct klass {
	char name[32];
	double weight;
	struct sockaddr_storage src;
	socklen_t srclen;
	int dscp;
	bool header;
	char hdrval[32];
	char path[512];
	char *req, *req_close; // prebuilt request texts (keep-alive / Connection: close)
	size_t req_len, req_close_len;
	struct link idle;    // idle keep-alive connections (most recent first)
	struct link pending; // requests waiting for a connection slot
	struct stats s;
};

enum { C_CONNECTING, C_SENDING, C_RECEIVING, C_IDLE, C_HOLDING };

struct req;
struct conn {
	int fd, cls, state;
	struct req *req;
	char *rbuf;
	size_t rlen, rcap, woff;
	unsigned nreq;	  // requests completed on this connection
	struct link link; // class idle list or hold list
	int64_t hold_until;
	uint32_t events;
	bool dead;
	struct conn *dead_next;
};

struct req {
	int cls;
	int retries;
	int64_t start, deadline; // ns, CLOCK_MONOTONIC; start = scheduled arrival
	struct conn *conn;
	struct link tlink; // outstanding FIFO (deadline order)
	struct link plink; // class pending list
};

// ---------------------------------------------------------------- globals
static struct {
	const char *target_str;
	struct sockaddr_storage target;
	socklen_t target_len;
	double rate, duration;
	uint64_t max_requests;
	int64_t timeout_ns, hold_ns;
	int mode;
	bool uniform;
	double report_interval;
	int max_conns;
	uint64_t seed;
	bool quiet;
} opt = { .timeout_ns = 2000000000LL, .mode = M_KEEPALIVE, .duration = -1 };

static struct klass classes[MAX_CLASSES];
static int nclasses;
static double weight_sum;
static int epfd, tfd, sfd;
static int nconns;
static uint64_t outstanding;
static struct link outstanding_list; // every live request, in deadline order
static struct link hold_list;	     // tcp mode: connections in their hold time
static struct conn *dead_list;
static uint64_t conn_opened_total, local_errors;
static int tfd_marker, sfd_marker;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "loadgen: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

// a runtime failure (not the user's input): exit 1
#define fatal(...) (fprintf(stderr, "loadgen: " __VA_ARGS__), fputc('\n', stderr), exit(1))

static void warn_once(int *flag, const char *fmt, ...)
{
	if (*flag || opt.quiet)
		return;
	*flag = 1;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "loadgen: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t rng;
static double rnd01(void) // xorshift64*, (0,1]
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return ((rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0) +
	       (1.0 / 9007199254740992.0);
}

// ---------------------------------------------------------------- addresses
static int parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len, bool need_port)
{
	char host[256], buf[300];
	const char *port = "0";
	if (!need_port) {
		// a bare address: v4, v6 or [v6]
		size_t n = strlen(s);
		if (s[0] == '[' && n > 2 && s[n - 1] == ']') {
			if (n - 2 >= sizeof host)
				return -1;
			memcpy(host, s + 1, n - 2);
			host[n - 2] = 0;
		} else {
			if (n >= sizeof host)
				return -1;
			strcpy(host, s);
		}
	} else if (s[0] == '[') {
		const char *e = strchr(s, ']');
		if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof host)
			return -1;
		memcpy(host, s + 1, (size_t)(e - s - 1));
		host[e - s - 1] = 0;
		port = e + 2;
	} else {
		const char *c = strrchr(s, ':');
		if (!c || memchr(s, ':', (size_t)(c - s)) || (size_t)(c - s) >= sizeof host)
			return -1;
		memcpy(host, s, (size_t)(c - s));
		host[c - s] = 0;
		port = c + 1;
	}
	char *end;
	long p = strtol(port, &end, 10);
	if (!*port || *end || p < 0 || p > 65535 || (need_port && p == 0) || !host[0])
		return -1;
	snprintf(buf, sizeof buf, "%s", port);
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	if (getaddrinfo(host, buf, &hints, &res))
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

// ---------------------------------------------------------------- classes
static char *xstrdup_printf(size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("out of memory");
	*len = (size_t)n;
	return s;
}

// NAME:WEIGHT[:src=ADDR][:header[=VALUE]][:path=/x][:dscp=N]
static void add_class(const char *spec)
{
	if (nclasses == MAX_CLASSES)
		die("too many --class (max %d)", MAX_CLASSES);
	struct klass *k = &classes[nclasses];
	memset(k, 0, sizeof *k);
	k->dscp = -1;
	strcpy(k->path, "/");
	char *copy = strdup(spec), *save = NULL;
	if (!copy)
		fatal("out of memory");
	char *name = strtok_r(copy, ":", &save);
	char *w = name ? strtok_r(NULL, ":", &save) : NULL;
	if (!name || !w || strlen(name) >= sizeof k->name)
		die("bad --class '%s' (want NAME:WEIGHT[:src=ADDR][:header][:path=/x][:dscp=N])", spec);
	strcpy(k->name, name);
	for (int i = 0; i < nclasses; i++)
		if (!strcmp(classes[i].name, name))
			die("--class %s given twice", name);
	char *end;
	k->weight = strtod(w, &end);
	if (*end || !(k->weight >= 0) || k->weight > 1e9)
		die("bad weight in --class '%s'", spec);
	snprintf(k->hdrval, sizeof k->hdrval, "%s", name);
	// Options are split at ':' too, except that src= takes the rest up to the next option
	// keyword so that IPv6 addresses work: src=[fd00::1] or src=fd00::1.
	char *rest = save;
	while (rest && *rest) {
		char *opt_end = NULL;
		if (!strncmp(rest, "src=", 4)) {
			char *v = rest + 4;
			char *cut = NULL;
			static const char *kw[] = { ":header", ":path=", ":dscp=" };
			for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++) {
				char *f = strstr(v, kw[i]);
				if (f && (!cut || f < cut))
					cut = f;
			}
			if (cut) {
				*cut = 0;
				opt_end = cut + 1;
			}
			if (parse_hostport(v, &k->src, &k->srclen, false))
				die("bad src address '%s' in --class '%s'", v, spec);
		} else {
			char *colon = strchr(rest, ':');
			if (colon) {
				*colon = 0;
				opt_end = colon + 1;
			}
			if (!strcmp(rest, "header"))
				k->header = true;
			else if (!strncmp(rest, "header=", 7)) {
				k->header = true;
				snprintf(k->hdrval, sizeof k->hdrval, "%s", rest + 7);
			} else if (!strncmp(rest, "path=", 5)) {
				if (rest[5] != '/' || strlen(rest + 5) >= sizeof k->path ||
				    strpbrk(rest + 5, " \r\n"))
					die("bad path in --class '%s' (must start with /, no spaces)", spec);
				strcpy(k->path, rest + 5);
			} else if (!strncmp(rest, "dscp=", 5)) {
				long d = strtol(rest + 5, &end, 10);
				if (!rest[5] || *end || d < 0 || d > 63)
					die("bad dscp in --class '%s' (0..63)", spec);
				k->dscp = (int)d;
			} else
				die("unknown option '%s' in --class '%s'", rest, spec);
		}
		rest = opt_end;
	}
	free(copy);
	nclasses++;
}

static void build_requests(void)
{
	char host[300];
	snprintf(host, sizeof host, "%s", opt.target_str);
	for (int i = 0; i < nclasses; i++) {
		struct klass *k = &classes[i];
		char prio[64] = "";
		if (k->header)
			snprintf(prio, sizeof prio, "X-Priority: %s\r\n", k->hdrval);
		if (opt.mode == M_TCP) {
			k->req = xstrdup_printf(&k->req_len, "%s\n", k->name);
		} else {
			k->req = xstrdup_printf(&k->req_len,
						"GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-loadgen\r\n"
						"%s\r\n",
						k->path, host, prio);
			k->req_close = xstrdup_printf(&k->req_close_len,
						      "GET %s HTTP/1.1\r\nHost: %s\r\n"
						      "User-Agent: sluice-loadgen\r\n%s"
						      "Connection: close\r\n\r\n",
						      k->path, host, prio);
		}
		list_init(&k->idle);
		list_init(&k->pending);
		weight_sum += k->weight;
	}
	if (!(weight_sum > 0))
		die("the class weights sum to 0");
}

static int pick_class(void)
{
	double x = rnd01() * weight_sum;
	for (int i = 0; i < nclasses; i++) {
		x -= classes[i].weight;
		if (x <= 0 && classes[i].weight > 0)
			return i;
	}
	for (int i = nclasses - 1; i >= 0; i--)
		if (classes[i].weight > 0)
			return i;
	return 0;
}

// ---------------------------------------------------------------- connections
static void conn_set_events(struct conn *c, uint32_t ev)
{
	if (c->events == ev)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = c };
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &e);
	c->events = ev;
}

static void drain_pending(void);

static void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	list_del(&c->link);
	close(c->fd);
	c->fd = -1;
	c->dead = true;
	c->req = NULL;
	c->dead_next = dead_list;
	dead_list = c;
	nconns--;
}

static void free_dead(void)
{
	while (dead_list) {
		struct conn *c = dead_list;
		dead_list = c->dead_next;
		free(c->rbuf);
		free(c);
	}
}

// ---------------------------------------------------------------- request outcomes
enum { O_OK, O_429, O_503, O_STATUS, O_REFUSED, O_RESET, O_EOF, O_TIMEOUT, O_OTHER, O_UNFINISHED };

static void req_finish(struct req *r, int outcome, int status, int64_t now)
{
	struct stats *s = &classes[r->cls].s;
	uint64_t us = now > r->start ? (uint64_t)(now - r->start) / 1000 : 0;
	if (status > 0 && status < 600)
		s->status[status]++;
	switch (outcome) {
	case O_OK: s->ok++; h_add(&s->ok_h, us); break;
	case O_429: s->h429++; h_add(&s->rej_h, us); break;
	case O_503: s->h503++; h_add(&s->rej_h, us); break;
	case O_STATUS: s->other_status++; break;
	case O_REFUSED: s->refused++; h_add(&s->rej_h, us); break;
	case O_RESET: s->reset++; break;
	case O_EOF: s->eof++; break;
	case O_TIMEOUT: s->timeout++; break;
	case O_UNFINISHED: s->unfinished++; break;
	default: s->other_error++; break;
	}
	if (r->conn)
		r->conn->req = NULL;
	list_del(&r->tlink);
	list_del(&r->plink);
	outstanding--;
	free(r);
}

static int status_outcome(int status)
{
	if (status >= 200 && status < 300)
		return O_OK;
	if (status == 429)
		return O_429;
	if (status == 503)
		return O_503;
	return O_STATUS;
}

// ---------------------------------------------------------------- sending
static void dispatch(struct req *r, int64_t now);

static void conn_send(struct conn *c, int64_t now)
{
	struct klass *k = &classes[c->cls];
	const char *msg = opt.mode == M_NEW ? k->req_close : k->req;
	size_t len = opt.mode == M_NEW ? k->req_close_len : k->req_len;
	c->state = C_SENDING;
	while (c->woff < len) {
		ssize_t n = send(c->fd, msg + c->woff, len - c->woff, MSG_NOSIGNAL);
		if (n > 0) {
			c->woff += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			conn_set_events(c, EPOLLOUT | EPOLLIN | EPOLLRDHUP);
			return;
		}
		// the connection is gone; a reused keep-alive connection gets one retry
		struct req *r = c->req;
		int err = n < 0 ? errno : EPIPE;
		conn_close(c);
		if (r && c->nreq > 0 && r->retries == 0) {
			r->retries++;
			r->conn = NULL;
			classes[r->cls].s.retried++;
			dispatch(r, now);
		} else if (r) {
			r->conn = NULL;
			req_finish(r, err == ECONNREFUSED ? O_REFUSED : O_RESET, 0, now);
		}
		return;
	}
	c->state = C_RECEIVING;
	c->rlen = 0;
	conn_set_events(c, EPOLLIN | EPOLLRDHUP);
}

static int connect_outcome(int err)
{
	switch (err) {
	case ECONNREFUSED: return O_REFUSED;
	case ECONNRESET: return O_RESET;
	case ETIMEDOUT: return O_TIMEOUT;
	default: return O_OTHER;
	}
}

static void conn_open(struct req *r, int64_t now)
{
	static int warned_fd, warned_conn;
	struct klass *k = &classes[r->cls];
	int fam = opt.target.ss_family;
	int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
	if (fd < 0) {
		warn_once(&warned_fd, "socket: %s (counted as other_error)", strerror(errno));
		local_errors++;
		req_finish(r, O_OTHER, 0, now);
		return;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (k->dscp >= 0) {
		int tos = k->dscp << 2;
		if (fam == AF_INET)
			setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
		else
			setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
	}
	if (k->srclen) {
		if (fam == AF_INET)
			setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&k->src, k->srclen) < 0) {
			warn_once(&warned_conn, "bind to class %s source: %s (counted as other_error)",
				  k->name, strerror(errno));
			close(fd);
			local_errors++;
			req_finish(r, O_OTHER, 0, now);
			return;
		}
	}
	int rc = connect(fd, (struct sockaddr *)&opt.target, opt.target_len);
	if (rc < 0 && errno != EINPROGRESS) {
		int err = errno;
		close(fd);
		if (err == EADDRNOTAVAIL || err == EAGAIN) {
			warn_once(&warned_conn, "connect: %s (counted as other_error)", strerror(err));
			local_errors++;
		}
		req_finish(r, connect_outcome(err), 0, now);
		return;
	}
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		fatal("out of memory");
	c->fd = fd;
	c->cls = r->cls;
	c->req = r;
	r->conn = c;
	nconns++;
	conn_opened_total++;
	c->events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
	struct epoll_event e = { .events = c->events, .data.ptr = c };
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) < 0)
		fatal("epoll_ctl: %s", strerror(errno));
	if (rc == 0)
		conn_send(c, now);
	else
		c->state = C_CONNECTING;
}

// Gives a request a connection: an idle keep-alive one of its class, a new one, or a place
// in the class's pending list when --max-conns connections are open.
static void dispatch(struct req *r, int64_t now)
{
	struct klass *k = &classes[r->cls];
	if (opt.mode == M_KEEPALIVE && !list_empty(&k->idle)) {
		struct conn *c = container_of(k->idle.next, struct conn, link);
		list_del(&c->link);
		c->req = r;
		r->conn = c;
		c->woff = 0;
		conn_send(c, now);
		return;
	}
	if (nconns >= opt.max_conns) {
		// make room by closing an idle connection of another class, if any
		for (int i = 0; i < nclasses; i++)
			if (!list_empty(&classes[i].idle)) {
				conn_close(container_of(classes[i].idle.prev, struct conn, link));
				break;
			}
	}
	if (nconns >= opt.max_conns) {
		list_add_tail(&k->pending, &r->plink);
		return;
	}
	conn_open(r, now);
}

static void drain_pending(void)
{
	int64_t now = now_ns();
	for (int i = 0; i < nclasses; i++) {
		struct klass *k = &classes[i];
		while (!list_empty(&k->pending) &&
		       (nconns < opt.max_conns || (opt.mode == M_KEEPALIVE && !list_empty(&k->idle)))) {
			struct req *r = container_of(k->pending.next, struct req, plink);
			list_del(&r->plink);
			dispatch(r, now);
		}
	}
}

static void new_request(int64_t sched)
{
	struct req *r = calloc(1, sizeof *r);
	if (!r)
		fatal("out of memory");
	r->cls = pick_class();
	r->start = sched;
	r->deadline = sched + opt.timeout_ns;
	list_add_tail(&outstanding_list, &r->tlink);
	outstanding++;
	classes[r->cls].s.sent++;
	dispatch(r, now_ns());
}

// ---------------------------------------------------------------- receiving
// HTTP response framing. Returns 1 complete, 0 incomplete, -1 malformed.
static int http_response(struct conn *c, bool eof, int *status, bool *server_close)
{
	char *b = c->rbuf;
	char *he = c->rlen ? memmem(b, c->rlen, "\r\n\r\n", 4) : NULL;
	if (!he)
		return eof || c->rlen > 64 * 1024 ? -1 : 0;
	size_t hlen = (size_t)(he - b) + 4;
	if (hlen < 14 || memcmp(b, "HTTP/1.", 7) || b[8] != ' ' || b[9] < '1' || b[9] > '5' ||
	    b[10] < '0' || b[10] > '9' || b[11] < '0' || b[11] > '9')
		return -1;
	*status = (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
	*server_close = b[7] == '0';
	long long clen = -1;
	bool chunked = false;
	for (char *l = (char *)memchr(b, '\n', hlen) + 1; l < b + hlen - 2;) {
		char *e = memchr(l, '\n', (size_t)(b + hlen - l));
		size_t n = (size_t)(e - l);
		if (n > 15 && !strncasecmp(l, "Content-Length:", 15))
			clen = strtoll(l + 15, NULL, 10);
		else if (n > 11 && !strncasecmp(l, "Connection:", 11)) {
			if (memmem(l, n, "close", 5) || memmem(l, n, "Close", 5))
				*server_close = true;
			else if (memmem(l, n, "eep-alive", 9))
				*server_close = false;
		} else if (n > 18 && !strncasecmp(l, "Transfer-Encoding:", 18) &&
			   (memmem(l, n, "chunked", 7) || memmem(l, n, "Chunked", 7)))
			chunked = true;
		l = e + 1;
	}
	if (*status < 200 || *status == 204 || *status == 304)
		return 1;
	if (chunked) {
		size_t p = hlen;
		for (;;) {
			char *nl = memmem(b + p, c->rlen - p, "\r\n", 2);
			if (!nl)
				return eof ? -1 : 0;
			char *end;
			unsigned long long sz = strtoull(b + p, &end, 16);
			if (end == b + p)
				return -1;
			p = (size_t)(nl - b) + 2;
			if (sz == 0) { // trailers end with an empty line
				for (;;) {
					char *t = memmem(b + p, c->rlen - p, "\r\n", 2);
					if (!t)
						return eof ? -1 : 0;
					if (t == b + p)
						return 1;
					p = (size_t)(t - b) + 2;
				}
			}
			if (c->rlen - p < sz + 2)
				return eof ? -1 : 0;
			p += sz + 2;
		}
	}
	if (clen >= 0)
		return c->rlen >= hlen + (size_t)clen ? 1 : (eof ? -1 : 0);
	*server_close = true; // body delimited by the end of the connection
	return eof ? 1 : 0;
}

static void conn_done(struct conn *c, bool server_close, int64_t now)
{
	c->nreq++;
	if (opt.mode == M_TCP) {
		if (opt.hold_ns > 0 && !server_close) {
			c->state = C_HOLDING;
			c->hold_until = now + opt.hold_ns;
			list_add_tail(&hold_list, &c->link);
			conn_set_events(c, EPOLLIN | EPOLLRDHUP);
		} else {
			conn_close(c);
		}
	} else if (opt.mode == M_KEEPALIVE && !server_close) {
		c->state = C_IDLE;
		c->rlen = 0;
		list_add_head(&classes[c->cls].idle, &c->link);
		conn_set_events(c, EPOLLIN | EPOLLRDHUP);
	} else {
		conn_close(c);
	}
	drain_pending();
}

// An error or EOF before the response was complete.
static void conn_failed(struct conn *c, int err, int64_t now)
{
	struct req *r = c->req;
	bool connecting = c->state == C_CONNECTING;
	bool nothing_back = c->rlen == 0;
	unsigned reused = c->nreq;
	conn_close(c);
	if (r) {
		r->conn = NULL;
		if (!connecting && reused && nothing_back && r->retries == 0 &&
		    (err == 0 || err == ECONNRESET || err == EPIPE)) {
			// a stale keep-alive connection closed by the server: retry once
			r->retries++;
			classes[r->cls].s.retried++;
			dispatch(r, now);
		} else if (connecting) {
			req_finish(r, connect_outcome(err), 0, now);
		} else {
			req_finish(r, err == 0 ? O_EOF : err == ETIMEDOUT ? O_TIMEOUT
				      : (err == ECONNRESET || err == EPIPE) ? O_RESET : O_OTHER,
				   0, now);
		}
	}
	drain_pending();
}

static void conn_readable(struct conn *c, int64_t now)
{
	bool eof = false;
	int err = 0;
	for (;;) {
		if (c->rcap - c->rlen < 4096) {
			size_t ncap = c->rcap ? c->rcap * 2 : 4096;
			if (ncap > MAX_RESP) {
				err = EMSGSIZE;
				break;
			}
			char *nb = realloc(c->rbuf, ncap);
			if (!nb)
				fatal("out of memory");
			c->rbuf = nb;
			c->rcap = ncap;
		}
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n > 0) {
			c->rlen += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n == 0)
			eof = true;
		else
			err = errno;
		break;
	}
	if (c->state == C_IDLE || c->state == C_HOLDING) {
		// the server closed (or sent something unsolicited): drop the connection
		if (eof || err || c->rlen) {
			conn_close(c);
			drain_pending();
		}
		return;
	}
	if (c->state != C_RECEIVING && c->state != C_SENDING)
		return;
	struct req *r = c->req;
	if (opt.mode == M_TCP) {
		char *nl = c->rlen ? memchr(c->rbuf, '\n', c->rlen) : NULL;
		if (nl) {
			bool ok = nl - c->rbuf >= 2 && !memcmp(c->rbuf, "ok", 2);
			c->rlen = 0;
			c->req = NULL;
			if (r) {
				r->conn = NULL;
				req_finish(r, ok ? O_OK : O_STATUS, 0, now);
			}
			conn_done(c, eof || err, now);
			return;
		}
		if (eof || err)
			conn_failed(c, err, now);
		return;
	}
	int status = 0;
	bool server_close = false;
	int rc = c->rlen || eof ? http_response(c, eof, &status, &server_close) : 0;
	if (rc == 1) {
		c->req = NULL;
		if (r) {
			r->conn = NULL;
			req_finish(r, status_outcome(status), status, now);
		}
		conn_done(c, server_close || eof, now);
	} else if (rc < 0 && !(eof && c->rlen == 0)) {
		conn_close(c);
		if (r) {
			r->conn = NULL;
			req_finish(r, O_OTHER, 0, now);
		}
		drain_pending();
	} else if (eof || err) {
		conn_failed(c, err, now);
	}
}

static void conn_event(struct conn *c, uint32_t ev, int64_t now)
{
	if (c->dead)
		return;
	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof err;
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err) {
			conn_failed(c, err, now);
			return;
		}
		if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		conn_send(c, now);
		return;
	}
	if (c->state == C_SENDING && (ev & EPOLLOUT) && !(ev & (EPOLLERR | EPOLLHUP))) {
		conn_send(c, now);
		if (c->dead || c->state == C_SENDING)
			return;
	}
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		conn_readable(c, now);
}

// ---------------------------------------------------------------- timers
static void expire(int64_t now)
{
	while (!list_empty(&outstanding_list)) {
		struct req *r = container_of(outstanding_list.next, struct req, tlink);
		if (r->deadline > now)
			break;
		struct conn *c = r->conn;
		if (c) {
			c->req = NULL;
			r->conn = NULL;
			conn_close(c); // a late answer must not land on a reused connection
		}
		req_finish(r, O_TIMEOUT, 0, now);
	}
	while (!list_empty(&hold_list)) {
		struct conn *c = container_of(hold_list.next, struct conn, link);
		if (c->hold_until > now)
			break;
		conn_close(c);
	}
	drain_pending();
}

static int64_t armed_at = -1;
static void arm_timer(int64_t at)
{
	if (at == armed_at)
		return;
	armed_at = at;
	struct itimerspec its = { .it_value = { at / 1000000000, at % 1000000000 } };
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

// ---------------------------------------------------------------- output
static void stats_merge(struct stats *t, const struct stats *s)
{
	t->sent += s->sent;
	t->ok += s->ok;
	t->h429 += s->h429;
	t->h503 += s->h503;
	t->other_status += s->other_status;
	t->refused += s->refused;
	t->reset += s->reset;
	t->eof += s->eof;
	t->timeout += s->timeout;
	t->other_error += s->other_error;
	t->unfinished += s->unfinished;
	t->retried += s->retried;
	for (int i = 0; i < 600; i++)
		t->status[i] += s->status[i];
	h_merge(&t->ok_h, &s->ok_h);
	h_merge(&t->rej_h, &s->rej_h);
}

static void print_pcts(FILE *f, const char *prefix, const struct hist *h)
{
	static const struct {
		const char *name;
		double p;
	} ps[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };
	for (size_t i = 0; i < 3; i++) {
		if (h->n)
			fprintf(f, ",\"%s%s_ms\":%.3f", prefix, ps[i].name, h_pct_ms(h, ps[i].p));
		else
			fprintf(f, ",\"%s%s_ms\":null", prefix, ps[i].name);
	}
	if (h->n)
		fprintf(f, ",\"%smax_ms\":%.3f", prefix, h->max_us / 1000.0);
	else
		fprintf(f, ",\"%smax_ms\":null", prefix);
}

static void print_stats(FILE *f, const struct stats *s, double dur)
{
	// every arrival ends as exactly one of: ok, rejected (429, 503, refused), errors
	uint64_t errors = s->other_status + s->reset + s->eof + s->timeout + s->other_error +
			  s->unfinished;
	fprintf(f,
		"{\"sent\":%llu,\"ok\":%llu,\"http_429\":%llu,\"http_503\":%llu,"
		"\"other_status\":%llu,\"refused\":%llu,\"reset\":%llu,\"eof\":%llu,"
		"\"timeout\":%llu,\"other_error\":%llu,\"unfinished\":%llu,\"retried\":%llu,"
		"\"errors\":%llu,\"rejected\":%llu,\"ok_rate\":%.2f",
		(unsigned long long)s->sent, (unsigned long long)s->ok, (unsigned long long)s->h429,
		(unsigned long long)s->h503, (unsigned long long)s->other_status,
		(unsigned long long)s->refused, (unsigned long long)s->reset,
		(unsigned long long)s->eof, (unsigned long long)s->timeout,
		(unsigned long long)s->other_error, (unsigned long long)s->unfinished,
		(unsigned long long)s->retried, (unsigned long long)errors,
		(unsigned long long)(s->h429 + s->h503 + s->refused),
		dur > 0 ? s->ok / dur : 0.0);
	print_pcts(f, "", &s->ok_h);
	print_pcts(f, "reject_", &s->rej_h);
	fprintf(f, ",\"status\":{");
	bool first = true;
	for (int i = 0; i < 600; i++)
		if (s->status[i]) {
			fprintf(f, "%s\"%d\":%llu", first ? "" : ",", i, (unsigned long long)s->status[i]);
			first = false;
		}
	fprintf(f, "}}");
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('"', f);
}

// ---------------------------------------------------------------- main
static void usage(FILE *f)
{
	fprintf(f,
		"usage: loadgen --target ADDR:PORT --rate R [--duration S] [options]\n"
		"  --target ADDR:PORT       v4 or [v6]:PORT (numeric); the only destination\n"
		"  --rate R                 arrivals per second (open loop)\n"
		"  --duration S             arrival window in seconds (default 10 unless\n"
		"                           --max-requests is given)\n"
		"  --max-requests N         stop after N arrivals\n"
		"  --timeout-ms MS          absolute timeout per request (default 2000)\n"
		"  --mode M                 http-keepalive (default) | http-new | tcp\n"
		"  --hold-ms MS             tcp: keep the connection MS after \"ok\" (default 0)\n"
		"  --class NAME:W[:src=ADDR][:header[=VAL]][:path=/x][:dscp=N]   repeatable;\n"
		"                           default one class L2. header adds X-Priority: NAME\n"
		"  --arrivals poisson|uniform  (default poisson)\n"
		"  --max-conns N            open connections cap (default: fd limit - 64)\n"
		"  --report-interval S      progress lines on stderr\n"
		"  --seed N                 random seed (default: from the clock)\n"
		"  --quiet                  no warnings on stderr\n"
		"Prints one JSON object on stdout (also after SIGINT: stop arrivals and drain;\n"
		"SIGTERM or a second SIGINT: stop at once, outstanding requests = unfinished).\n"
		"Exit 0 when the run completed, 2 bad usage, 1 runtime failure.\n");
}

static double num_arg(const char *name, const char *v, double lo, double hi)
{
	char *end;
	double x = strtod(v, &end);
	if (!*v || *end || !(x >= lo && x <= hi))
		die("bad value for %s: '%s' (want %g..%g)", name, v, lo, hi);
	return x;
}

// Reads the command line into opt and the class table. Exits 2 on bad usage, 0 after --help.
static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
#define ARG() (has ? argv[++i] : (die("%s needs a value", a), ""))
		if (!strcmp(a, "--target"))
			opt.target_str = ARG();
		else if (!strcmp(a, "--rate"))
			opt.rate = num_arg(a, ARG(), 0.001, 1e7);
		else if (!strcmp(a, "--duration"))
			opt.duration = num_arg(a, ARG(), 0, 1e6);
		else if (!strcmp(a, "--max-requests"))
			opt.max_requests = (uint64_t)num_arg(a, ARG(), 1, 1e12);
		else if (!strcmp(a, "--timeout-ms"))
			opt.timeout_ns = (int64_t)(num_arg(a, ARG(), 1, 3600e3) * 1e6);
		else if (!strcmp(a, "--hold-ms"))
			opt.hold_ns = (int64_t)(num_arg(a, ARG(), 0, 86400e3) * 1e6);
		else if (!strcmp(a, "--mode")) {
			const char *m = ARG();
			int k;
			for (k = 0; k < 3 && strcmp(m, mode_names[k]); k++)
				;
			if (k == 3)
				die("bad --mode '%s' (http-keepalive|http-new|tcp)", m);
			opt.mode = k;
		} else if (!strcmp(a, "--class"))
			add_class(ARG());
		else if (!strcmp(a, "--arrivals")) {
			const char *m = ARG();
			if (!strcmp(m, "uniform"))
				opt.uniform = true;
			else if (strcmp(m, "poisson"))
				die("bad --arrivals '%s' (poisson|uniform)", m);
		} else if (!strcmp(a, "--max-conns"))
			opt.max_conns = (int)num_arg(a, ARG(), 1, 10e6);
		else if (!strcmp(a, "--report-interval"))
			opt.report_interval = num_arg(a, ARG(), 0.1, 1e6);
		else if (!strcmp(a, "--seed"))
			opt.seed = (uint64_t)num_arg(a, ARG(), 0, 1e18);
		else if (!strcmp(a, "--quiet"))
			opt.quiet = true;
		else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			die("unknown argument '%s'", a);
		}
#undef ARG
	}
	if (!opt.target_str || !(opt.rate > 0)) {
		usage(stderr);
		die("--target and --rate are required");
	}
	if (parse_hostport(opt.target_str, &opt.target, &opt.target_len, true))
		die("bad --target '%s' (want numeric ADDR:PORT or [V6ADDR]:PORT)", opt.target_str);
	if (opt.duration < 0)
		opt.duration = opt.max_requests ? 1e6 : 10;
	if (!nclasses)
		add_class("L2:1");
	for (int i = 0; i < nclasses; i++)
		if (classes[i].srclen && classes[i].src.ss_family != opt.target.ss_family)
			die("class %s: source and target address families differ", classes[i].name);
}

// The random seed, the connection cap from the fd limit, and the epoll set: the arrival
// timer and the signals (blocked, read through a signalfd).
static void setup_process(void)
{
	rng = opt.seed ? opt.seed : (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	if (!rng)
		rng = 1;

	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		long lim = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : (long)rl.rlim_cur;
		if (!opt.max_conns || opt.max_conns > lim - 64)
			opt.max_conns = lim > 128 ? (int)(lim - 64) : 64;
	}

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (epfd < 0 || tfd < 0 || sfd < 0)
		fatal("epoll/timerfd/signalfd: %s", strerror(errno));
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = &tfd_marker };
	epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &e);
	e.data.ptr = &sfd_marker;
	epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &e);
	list_init(&outstanding_list);
	list_init(&hold_list);
}

// The run's schedule and progress.
struct run {
	int64_t t0, t_end, gap, next_arrival, next_report, t_arrivals_end, t_done;
	uint64_t issued;
	bool arriving;
	int signals;
};

static bool arrivals_over(const struct run *r)
{
	return r->next_arrival >= r->t_end || (opt.max_requests && r->issued >= opt.max_requests);
}

// Issues the arrivals due (catching up if the loop was late: the schedule is the clock's).
static void issue_arrivals(struct run *r, int64_t now)
{
	while (r->arriving && r->next_arrival <= now) {
		if (arrivals_over(r)) {
			r->arriving = false;
			break;
		}
		new_request(r->next_arrival);
		r->issued++;
		r->next_arrival += opt.uniform ? r->gap : (int64_t)(-log(rnd01()) / opt.rate * 1e9);
	}
	if (r->arriving && arrivals_over(r))
		r->arriving = false;
	if (!r->arriving && !r->t_arrivals_end)
		r->t_arrivals_end = now < r->t_end ? now : r->t_end;
}

static void report_progress(const struct run *r, int64_t now)
{
	uint64_t ok = 0, sent = 0, rej = 0, err = 0;
	for (int i = 0; i < nclasses; i++) {
		struct stats *s = &classes[i].s;
		sent += s->sent;
		ok += s->ok;
		rej += s->h429 + s->h503 + s->refused;
		err += s->other_status + s->reset + s->eof + s->timeout + s->other_error;
	}
	fprintf(stderr,
		"loadgen: t=%.1fs sent=%llu ok=%llu rejected=%llu errors=%llu "
		"outstanding=%llu conns=%d\n",
		(now - r->t0) / 1e9, (unsigned long long)sent, (unsigned long long)ok,
		(unsigned long long)rej, (unsigned long long)err,
		(unsigned long long)outstanding, nconns);
}

// The earliest of: next arrival, next request deadline, next hold end, next progress line.
static int64_t next_wake(const struct run *r)
{
	int64_t wake = INT64_MAX;
	if (r->arriving)
		wake = r->next_arrival;
	if (!list_empty(&outstanding_list)) {
		int64_t d = container_of(outstanding_list.next, struct req, tlink)->deadline;
		if (d < wake)
			wake = d;
	}
	if (!list_empty(&hold_list)) {
		int64_t d = container_of(hold_list.next, struct conn, link)->hold_until;
		if (d < wake)
			wake = d;
	}
	if (r->next_report < wake)
		wake = r->next_report;
	return wake;
}

static void on_signals(struct run *r, int64_t now)
{
	struct signalfd_siginfo si;
	bool term = false;
	while (read(sfd, &si, sizeof si) == sizeof si) {
		r->signals++;
		term |= si.ssi_signo == SIGTERM;
	}
	bool was_arriving = r->arriving;
	r->arriving = false;
	if (!term && (r->signals == 1 || was_arriving))
		return; // first SIGINT: stop arrivals, drain
	// SIGTERM or a second SIGINT: stop now; the outstanding requests are reported as
	// unfinished
	while (!list_empty(&outstanding_list)) {
		struct req *q = container_of(outstanding_list.next, struct req, tlink);
		if (q->conn)
			conn_close(q->conn);
		q->conn = NULL;
		req_finish(q, O_UNFINISHED, 0, now);
	}
	while (!list_empty(&hold_list)) // held tcp connections too
		conn_close(container_of(hold_list.next, struct conn, link));
}

static void run_loop(struct run *r)
{
	struct epoll_event evs[512];

	for (;;) {
		int64_t now = now_ns();
		issue_arrivals(r, now);
		expire(now);
		if (now >= r->next_report) {
			report_progress(r, now);
			r->next_report += (int64_t)(opt.report_interval * 1e9);
		}
		free_dead();
		if (!r->arriving && outstanding == 0 && list_empty(&hold_list))
			break; /* held tcp connections end at their hold time, not at the last arrival */
		int64_t wake = next_wake(r);
		int n;
		if (wake <= now_ns()) {
			n = epoll_wait(epfd, evs, 512, 0);
		} else {
			if (wake != INT64_MAX)
				arm_timer(wake);
			n = epoll_wait(epfd, evs, 512, -1);
		}
		if (n < 0 && errno != EINTR)
			fatal("epoll_wait: %s", strerror(errno));
		now = now_ns();
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &tfd_marker) {
				uint64_t x;
				if (read(tfd, &x, sizeof x) < 0) {
				}
				armed_at = -1;
				continue;
			}
			if (p == &sfd_marker) {
				on_signals(r, now);
				continue;
			}
			conn_event(p, evs[i].events, now);
		}
		free_dead();
	}
	r->t_done = now_ns();
}

static void print_summary(const struct run *r)
{
	double dur = (r->t_arrivals_end - r->t0) / 1e9;
	static struct stats total;
	printf("{\"target\":");
	json_str(stdout, opt.target_str);
	printf(",\"mode\":\"%s\",\"duration_s\":%.3f,\"elapsed_s\":%.3f,\"offered_rate\":%.2f,"
	       "\"achieved_rate\":%.2f,\"timeout_ms\":%.1f,\"connections_opened\":%llu,"
	       "\"local_errors\":%llu,\"classes\":{",
	       mode_names[opt.mode], dur, (r->t_done - r->t0) / 1e9, opt.rate,
	       dur > 0 ? r->issued / dur : 0.0, opt.timeout_ns / 1e6,
	       (unsigned long long)conn_opened_total, (unsigned long long)local_errors);
	for (int i = 0; i < nclasses; i++) {
		printf("%s", i ? "," : "");
		json_str(stdout, classes[i].name);
		putchar(':');
		print_stats(stdout, &classes[i].s, dur);
		stats_merge(&total, &classes[i].s);
	}
	printf("},\"total\":");
	print_stats(stdout, &total, dur);
	printf("}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	build_requests();
	setup_process();

	struct run r = { .t0 = now_ns(), .arriving = true };
	r.t_end = r.t0 + (int64_t)(opt.duration * 1e9);
	r.gap = (int64_t)(1e9 / opt.rate);
	r.next_arrival = r.t0;
	r.next_report = opt.report_interval > 0 ? r.t0 + (int64_t)(opt.report_interval * 1e9)
						: INT64_MAX;
	run_loop(&r);

	// close everything that is still open (idle keep-alive and held connections)
	while (!list_empty(&hold_list))
		conn_close(container_of(hold_list.next, struct conn, link));
	for (int i = 0; i < nclasses; i++)
		while (!list_empty(&classes[i].idle))
			conn_close(container_of(classes[i].idle.next, struct conn, link));
	free_dead();

	print_summary(&r);
	for (int i = 0; i < nclasses; i++) {
		free(classes[i].req);
		free(classes[i].req_close);
	}
	close(tfd);
	close(sfd);
	close(epfd);
	return 0;
}
