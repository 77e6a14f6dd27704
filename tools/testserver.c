// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// testserver: a TCP/HTTP server whose capacity is known (workers / service time).
//
// http mode: one I/O thread accepts connections and reads requests (epoll, EPOLLONESHOT);
// a complete request is queued to a fixed pool of N workers, which "work" for service-ms
// (sleep, or spin with --busy), answer, and hand the connection back. Idle keep-alive
// connections hold no worker, so capacity is N / service time requests per second.
// tcp mode: each worker accepts a connection itself and holds it until it closes (a
// connection occupies a worker; waiting connections stay in the kernel accept queue). Every
// line received costs service-ms and is answered "ok\n" ("err\n" when failing).
//
// Run-time control without restart: --mode-file PATH, re-read every 100 ms, holds
// whitespace-separated key=value pairs (service_ms, slow_ms, fail_rate, hold_ms, busy);
// a missing file means the command-line values. SIGUSR1 cycles normal -> slow -> failing.
// SIGTERM/SIGINT: stop, join, print the JSON stats on stdout, exit 0.
// See tools/README.md for usage.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTEN 16
#define MAX_HEADER (16 * 1024)
#define MAX_BODY (1024 * 1024)
#define MAX_LINE (64 * 1024)

enum { MODE_HTTP, MODE_TCP };

// ---------------------------------------------------------------- options and run-time mode
static struct {
	const char *listen[MAX_LISTEN];
	int nlisten;
	int workers;
	double service_ms;
	double slow_ms; // < 0: 10 x service_ms
	double hold_ms;
	double fail_rate;
	int busy;
	int mode;
	int backlog;
	const char *mode_file;
	const char *stats_file;
	int stats_interval_ms;
	const char *port_file;
	int quiet;
} opt = { .workers = 4, .service_ms = 10, .slow_ms = -1, .mode = MODE_HTTP, .backlog = 1024,
	  .stats_interval_ms = 1000 };

// Current behaviour, read by workers with relaxed atomics.
static int64_t rt_service_us, rt_slow_us, rt_hold_us;
static int64_t rt_fail_ppm; // probability of failing, parts per million
static int rt_busy;
static int sig_override; // SIGUSR1 cycle: 0 normal, 1 slow, 2 failing

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define INC(x) __atomic_add_fetch(&(x), 1, __ATOMIC_RELAXED)
#define DEC(x) __atomic_sub_fetch(&(x), 1, __ATOMIC_RELAXED)

// ---------------------------------------------------------------- stats
static struct {
	uint64_t requests, r2xx, r4xx, r5xx, conns, conns_closed;
	int64_t conns_open, max_conns_open, busy, max_busy, queued, max_queued;
} st;

static void raise_max(int64_t *max, int64_t v)
{
	int64_t cur = LOAD(*max);
	while (v > cur && !__atomic_compare_exchange_n(max, &cur, v, false, __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

static int stopping_flag;
#define stopping LOAD(stopping_flag)
static struct timespec t_start;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void logmsg(const char *fmt, ...)
{
	if (opt.quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "testserver: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "testserver: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static int stats_json(char *buf, size_t n)
{
	double up = now_s() - (t_start.tv_sec + t_start.tv_nsec / 1e9);
	return snprintf(buf, n,
			"{\"mode\":\"%s\",\"workers\":%d,\"uptime_s\":%.3f,\"requests_served\":%llu,"
			"\"http_2xx\":%llu,\"http_4xx\":%llu,\"http_5xx\":%llu,"
			"\"connections_accepted\":%llu,\"connections_open\":%lld,"
			"\"max_concurrent\":%lld,\"max_busy_workers\":%lld,\"max_queued\":%lld,"
			"\"service_ms\":%.3f,\"fail_rate\":%.6f}\n",
			opt.mode == MODE_HTTP ? "http" : "tcp", opt.workers, up,
			(unsigned long long)LOAD(st.requests), (unsigned long long)LOAD(st.r2xx),
			(unsigned long long)LOAD(st.r4xx), (unsigned long long)LOAD(st.r5xx),
			(unsigned long long)LOAD(st.conns), (long long)LOAD(st.conns_open),
			(long long)LOAD(st.max_conns_open), (long long)LOAD(st.max_busy),
			(long long)LOAD(st.max_queued), LOAD(rt_service_us) / 1000.0,
			LOAD(rt_fail_ppm) / 1e6);
}

static void write_stats_file(void)
{
	if (!opt.stats_file)
		return;
	char buf[1024], tmp[4096];
	int n = stats_json(buf, sizeof buf);
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", opt.stats_file, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	fwrite(buf, 1, (size_t)n, f);
	if (fclose(f) == 0)
		rename(tmp, opt.stats_file);
	else
		unlink(tmp);
}

// ---------------------------------------------------------------- run-time mode
static void apply_mode(double service_ms, double slow_ms, double fail_rate, double hold_ms,
		       int busy)
{
	int ov = LOAD(sig_override);
	if (ov == 1)
		service_ms = slow_ms;
	if (ov == 2)
		fail_rate = 1.0;
	if (fail_rate < 0)
		fail_rate = 0;
	if (fail_rate > 1)
		fail_rate = 1;
	STORE(rt_service_us, (int64_t)llround(service_ms * 1000));
	STORE(rt_slow_us, (int64_t)llround(slow_ms * 1000));
	STORE(rt_fail_ppm, (int64_t)llround(fail_rate * 1e6));
	STORE(rt_hold_us, (int64_t)llround(hold_ms * 1000));
	STORE(rt_busy, busy);
}

// Re-reads the mode file; logs when the effective values change.
static void poll_mode_file(void)
{
	double service_ms = opt.service_ms, slow_ms = opt.slow_ms, fail_rate = opt.fail_rate;
	double hold_ms = opt.hold_ms;
	int busy = opt.busy;
	bool slow_set = false;
	static char last[1024];
	char buf[1024] = "";
	if (opt.mode_file) {
		FILE *f = fopen(opt.mode_file, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof buf - 1, f);
			buf[n] = 0;
			fclose(f);
		}
		char copy[1024];
		memcpy(copy, buf, sizeof copy);
		char *save = NULL;
		for (char *tok = strtok_r(copy, " \t\r\n,;", &save); tok;
		     tok = strtok_r(NULL, " \t\r\n,;", &save)) {
			if (tok[0] == '#')
				break;
			char *eq = strchr(tok, '=');
			if (!eq)
				continue;
			*eq = 0;
			char *end;
			double v = strtod(eq + 1, &end);
			if (end == eq + 1 || v < 0) {
				logmsg("mode-file: bad value for %s ignored", tok);
				continue;
			}
			if (!strcmp(tok, "service_ms"))
				service_ms = v;
			else if (!strcmp(tok, "slow_ms"))
				slow_ms = v, slow_set = true;
			else if (!strcmp(tok, "fail_rate"))
				fail_rate = v;
			else if (!strcmp(tok, "hold_ms"))
				hold_ms = v;
			else if (!strcmp(tok, "busy"))
				busy = v != 0;
			else
				logmsg("mode-file: unknown key %s ignored", tok);
		}
	}
	if (slow_ms < 0 || (!slow_set && opt.slow_ms < 0))
		slow_ms = 10 * service_ms;
	apply_mode(service_ms, slow_ms, fail_rate, hold_ms, busy);
	char now[1024];
	snprintf(now, sizeof now, "service_ms=%.3f slow_ms=%.3f fail_rate=%.4f hold_ms=%.1f busy=%d",
		 LOAD(rt_service_us) / 1000.0, LOAD(rt_slow_us) / 1000.0, LOAD(rt_fail_ppm) / 1e6,
		 LOAD(rt_hold_us) / 1000.0, LOAD(rt_busy));
	if (strcmp(now, last)) {
		if (last[0])
			logmsg("mode: %s", now);
		memcpy(last, now, sizeof last);
	}
}

// ---------------------------------------------------------------- helpers
static __thread uint64_t rng_state;

static double rnd01(void)
{
	if (!rng_state)
		rng_state = (uint64_t)now_us() ^ ((uint64_t)pthread_self() << 1) ^ 0x9e3779b97f4a7c15ULL;
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static bool should_fail(void)
{
	int64_t ppm = LOAD(rt_fail_ppm);
	return ppm > 0 && (ppm >= 1000000 || rnd01() * 1e6 < (double)ppm);
}

// Models the work of a request: sleep (a downstream wait) or spin the CPU. Interruptible by
// shutdown. Returns false when stopping.
static bool do_work(int64_t us)
{
	int64_t end = now_us() + us;
	bool busy = LOAD(rt_busy);
	for (;;) {
		if (stopping)
			return false;
		int64_t left = end - now_us();
		if (left <= 0)
			return true;
		if (busy)
			continue;
		if (left > 20000)
			left = 20000;
		struct timespec ts = { left / 1000000, (left % 1000000) * 1000 };
		nanosleep(&ts, NULL);
	}
}

// Writes all of buf on a nonblocking socket; false on error or shutdown.
static bool send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { fd, POLLOUT, 0 };
			if (stopping)
				return false;
			poll(&p, 1, 100);
			continue;
		}
		return false;
	}
	return true;
}

static int parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256];
	const char *port;
	if (s[0] == '[') {
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
	if (!host[0] || !strcmp(host, "*"))
		strcpy(host, "0.0.0.0");
	char *end;
	long p = strtol(port, &end, 10);
	if (!*port || *end || p < 0 || p > 65535)
		return -1;
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	if (getaddrinfo(host, port, &hints, &res))
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void fmt_addr(const struct sockaddr_storage *ss, char *out, size_t n)
{
	char h[INET6_ADDRSTRLEN + 8] = "?";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		getnameinfo((const void *)a, sizeof *a, h, sizeof h, NULL, 0, NI_NUMERICHOST);
		port = ntohs(a->sin_port);
		snprintf(out, n, "%s:%d", h, port);
	} else {
		const struct sockaddr_in6 *a = (const void *)ss;
		getnameinfo((const void *)a, sizeof *a, h, sizeof h, NULL, 0, NI_NUMERICHOST);
		port = ntohs(a->sin6_port);
		snprintf(out, n, "[%s]:%d", h, port);
	}
}

// ---------------------------------------------------------------- listeners
static int lfds[MAX_LISTEN];

static void open_listeners(void)
{
	FILE *pf = NULL;
	if (opt.port_file && !(pf = fopen(opt.port_file, "w")))
		die("cannot write %s: %s", opt.port_file, strerror(errno));
	for (int i = 0; i < opt.nlisten; i++) {
		struct sockaddr_storage ss;
		socklen_t len;
		if (parse_hostport(opt.listen[i], &ss, &len))
			die("bad --listen address '%s' (want ADDR:PORT or [V6ADDR]:PORT)",
			    opt.listen[i]);
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (ss.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&ss, len) < 0)
			die("bind %s: %s", opt.listen[i], strerror(errno));
		if (listen(fd, opt.backlog) < 0)
			die("listen %s: %s", opt.listen[i], strerror(errno));
		len = sizeof ss;
		getsockname(fd, (struct sockaddr *)&ss, &len);
		char name[128];
		fmt_addr(&ss, name, sizeof name);
		logmsg("listening on %s (%s, %d workers, service %.3f ms%s)", name,
		       opt.mode == MODE_HTTP ? "http" : "tcp", opt.workers, opt.service_ms,
		       opt.busy ? ", busy" : "");
		if (pf)
			fprintf(pf, "%d\n", ntohs(ss.ss_family == AF_INET
							  ? ((struct sockaddr_in *)&ss)->sin_port
							  : ((struct sockaddr_in6 *)&ss)->sin6_port));
		lfds[i] = fd;
	}
	if (pf)
		fclose(pf);
}

static void conn_opened(void)
{
	INC(st.conns);
	raise_max(&st.max_conns_open, INC(st.conns_open));
}

static void conn_closed(void)
{
	DEC(st.conns_open);
	INC(st.conns_closed);
}

static void count_status(int code)
{
	INC(st.requests);
	if (code >= 200 && code < 300)
		INC(st.r2xx);
	else if (code >= 400 && code < 500)
		INC(st.r4xx);
	else if (code >= 500)
		INC(st.r5xx);
}

// ---------------------------------------------------------------- http mode
struct conn {
	int fd;
	char *buf;
	size_t len, cap;
	// the parsed request at the head of buf
	size_t req_len; // header + body bytes
	char path[256];
	bool keep_alive, bad, peer_closed;
	int handoff; // release/acquire pair for the worker -> I/O thread hand-over via epoll
	struct conn *qnext;		  // work queue
	struct conn *all_prev, *all_next; // registry of open connections
};

static int epfd, wakefd;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;
static struct conn *q_head, *q_tail;
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn *all_head;

static void enqueue(struct conn *c)
{
	pthread_mutex_lock(&q_mu);
	c->qnext = NULL;
	if (q_tail)
		q_tail->qnext = c;
	else
		q_head = c;
	q_tail = c;
	raise_max(&st.max_queued, INC(st.queued));
	pthread_cond_signal(&q_cv);
	pthread_mutex_unlock(&q_mu);
}

static void conn_free(struct conn *c)
{
	pthread_mutex_lock(&all_mu);
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		all_head = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	pthread_mutex_unlock(&all_mu);
	close(c->fd);
	free(c->buf);
	free(c);
	conn_closed();
}

static void conn_rearm(struct conn *c)
{
	// the kernel orders epoll_ctl before the next epoll_wait event; this makes the
	// hand-over visible to the C memory model (and to thread sanitizers) too
	// (nothing of c may be read after the store: the I/O thread may own it already)
	int fd = c->fd;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c };
	__atomic_store_n(&c->handoff, 1, __ATOMIC_RELEASE);
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		conn_free(c); // not armed: still ours
}

static bool hdr_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t k = strlen(name);
	if (n <= k || strncasecmp(line, name, k) || line[k] != ':')
		return false;
	const char *v = line + k + 1, *e = line + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*val = v;
	*vlen = (size_t)(e - v);
	return true;
}

// Returns 1 when a complete request (or a bad one, c->bad) heads the buffer, 0 when more bytes
// are needed.
static int http_parse(struct conn *c)
{
	char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
	if (!end) {
		if (c->len > MAX_HEADER)
			c->bad = true;
		// A first line that can't be HTTP can be refused before the headers end.
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl && (nl - c->buf < 10 || memcmp(nl - 9, "HTTP/1.", 7)))
			c->bad = true;
		return c->bad;
	}
	size_t hlen = (size_t)(end - c->buf) + 4;
	c->bad = false;
	c->keep_alive = true;
	c->path[0] = 0;
	// request line: METHOD SP TARGET SP HTTP/1.x CRLF
	char *p = c->buf, *le = memchr(p, '\r', hlen);
	char *sp1 = memchr(p, ' ', (size_t)(le - p));
	char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == p || sp2 == sp1 + 1 || le - sp2 != 9 ||
	    memcmp(sp2 + 1, "HTTP/1.", 7) || (sp2[8] != '0' && sp2[8] != '1')) {
		c->bad = true;
		return 1;
	}
	for (char *m = p; m < sp1; m++)
		if (*m < 'A' || *m > 'Z') {
			c->bad = true;
			return 1;
		}
	size_t plen = (size_t)(sp2 - sp1 - 1);
	if (plen >= sizeof c->path)
		plen = sizeof c->path - 1;
	memcpy(c->path, sp1 + 1, plen);
	c->path[plen] = 0;
	if (sp2[8] == '0')
		c->keep_alive = false;
	size_t clen = 0;
	for (char *l = le + 2; l < c->buf + hlen - 2;) {
		char *e2 = memmem(l, (size_t)(c->buf + hlen - l), "\r\n", 2);
		size_t n = (size_t)(e2 - l);
		const char *v;
		size_t vl;
		if (hdr_is(l, n, "Content-Length", &v, &vl)) {
			char tmp[24];
			if (vl == 0 || vl >= sizeof tmp) {
				c->bad = true;
				return 1;
			}
			memcpy(tmp, v, vl);
			tmp[vl] = 0;
			char *ep;
			unsigned long long x = strtoull(tmp, &ep, 10);
			if (*ep || tmp[0] == '-' || x > MAX_BODY) {
				c->bad = true;
				return 1;
			}
			clen = (size_t)x;
		} else if (hdr_is(l, n, "Connection", &v, &vl)) {
			if (memmem(v, vl, "close", 5) || memmem(v, vl, "Close", 5))
				c->keep_alive = false;
			else if (sp2[8] == '0' && (memmem(v, vl, "keep-alive", 10) ||
						   memmem(v, vl, "Keep-Alive", 10)))
				c->keep_alive = true;
		} else if (hdr_is(l, n, "Transfer-Encoding", &v, &vl)) {
			c->bad = true; // chunked request bodies are not supported
			return 1;
		}
		l = e2 + 2;
	}
	if (c->len < hlen + clen)
		return 0;
	c->req_len = hlen + clen;
	return 1;
}

static const char *reason(int code)
{
	switch (code) {
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Status";
	}
}

static void http_serve(struct conn *c)
{
	int code = 200;
	bool close_after = !c->keep_alive || c->peer_closed;
	if (c->bad) {
		code = 400;
		close_after = true;
	} else {
		int64_t us = LOAD(rt_service_us);
		if (!strncmp(c->path, "/slow", 5))
			us = LOAD(rt_slow_us);
		if (!strncmp(c->path, "/status/", 8)) {
			int s = atoi(c->path + 8);
			if (s >= 200 && s <= 599)
				code = s;
		}
		if (should_fail())
			code = 500;
		if (!do_work(us)) {
			conn_free(c);
			return;
		}
	}
	char resp[512];
	const char *body = code == 200 ? "ok\n" : code == 400 ? "bad request\n" : "error\n";
	int n = snprintf(resp, sizeof resp,
			 "HTTP/1.1 %d %s\r\nServer: sluice-testserver\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\n%s\r\n%s",
			 code, reason(code), strlen(body),
			 close_after ? "Connection: close\r\n" : "", body);
	bool ok = send_all(c->fd, resp, (size_t)n);
	count_status(code);
	if (!ok || close_after) {
		if (ok)
			shutdown(c->fd, SHUT_WR);
		conn_free(c);
		return;
	}
	memmove(c->buf, c->buf + c->req_len, c->len - c->req_len);
	c->len -= c->req_len;
	c->req_len = 0;
	if (c->len && http_parse(c))
		enqueue(c); // pipelined request: to the tail of the queue, fairly
	else
		conn_rearm(c);
}

static void *http_worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&q_mu);
		while (!q_head && !stopping)
			pthread_cond_wait(&q_cv, &q_mu);
		if (stopping) {
			pthread_mutex_unlock(&q_mu);
			return NULL;
		}
		struct conn *c = q_head;
		q_head = c->qnext;
		if (!q_head)
			q_tail = NULL;
		DEC(st.queued);
		pthread_mutex_unlock(&q_mu);
		raise_max(&st.max_busy, INC(st.busy));
		http_serve(c);
		DEC(st.busy);
	}
}

// Reads what is there; then either queues the connection to the workers (a complete request)
// or re-arms it.
static void http_readable(struct conn *c)
{
	(void)__atomic_load_n(&c->handoff, __ATOMIC_ACQUIRE);
	for (;;) {
		if (c->cap - c->len < 4096) {
			size_t ncap = c->cap ? c->cap * 2 : 8192;
			if (ncap > MAX_HEADER + MAX_BODY + 8192) {
				c->bad = true;
				break;
			}
			char *nb = realloc(c->buf, ncap);
			if (!nb) {
				conn_free(c);
				return;
			}
			c->buf = nb;
			c->cap = ncap;
		}
		ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n > 0) {
			c->len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		// EOF or error: serve a complete request already read (half-close), else close
		if (n == 0 && c->len && http_parse(c) && !c->bad) {
			c->peer_closed = true;
			enqueue(c);
		} else {
			conn_free(c);
		}
		return;
	}
	if (c->bad || (c->len && http_parse(c)))
		enqueue(c);
	else
		conn_rearm(c);
}

static void http_accept(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				logmsg("accept: %s", strerror(errno));
			return;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct conn *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		conn_opened();
		pthread_mutex_lock(&all_mu);
		c->all_next = all_head;
		if (all_head)
			all_head->all_prev = c;
		all_head = c;
		pthread_mutex_unlock(&all_mu);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c };
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			conn_free(c);
	}
}

static int lfd_marker[MAX_LISTEN]; // epoll data for listeners: &lfd_marker[i]

static void *http_io(void *arg)
{
	(void)arg;
	struct epoll_event evs[256];
	while (!stopping) {
		int n = epoll_wait(epfd, evs, 256, 200);
		for (int i = 0; i < n && !stopping; i++) {
			void *p = evs[i].data.ptr;
			if (p == &wakefd)
				continue;
			if (p >= (void *)lfd_marker && p < (void *)(lfd_marker + MAX_LISTEN)) {
				http_accept(lfds[(int *)p - lfd_marker]);
				continue;
			}
			http_readable(p);
		}
	}
	return NULL;
}

// ---------------------------------------------------------------- tcp mode
static void tcp_serve(int fd)
{
	char *buf = malloc(MAX_LINE);
	size_t len = 0;
	int64_t hold = LOAD(rt_hold_us);
	int64_t deadline = hold > 0 ? now_us() + hold : INT64_MAX;
	bool open = buf != NULL;
	while (open && !stopping) {
		int64_t left = deadline - now_us();
		if (left <= 0)
			break;
		struct pollfd p = { fd, POLLIN, 0 };
		int r = poll(&p, 1, left > 100000 ? 100 : (int)((left + 999) / 1000));
		if (r <= 0)
			continue;
		ssize_t n = recv(fd, buf + len, MAX_LINE - len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		char *nl;
		while (open && (nl = memchr(buf, '\n', len))) {
			size_t used = (size_t)(nl - buf) + 1;
			bool fail = should_fail();
			if (!do_work(LOAD(rt_service_us))) {
				open = false;
				break;
			}
			if (!send_all(fd, fail ? "err\n" : "ok\n", fail ? 4 : 3))
				open = false;
			count_status(fail ? 500 : 200);
			memmove(buf, buf + used, len - used);
			len -= used;
		}
		if (len == MAX_LINE)
			break; // a line too long: drop the connection
	}
	free(buf);
	close(fd);
	conn_closed();
}

static void *tcp_worker(void *arg)
{
	(void)arg;
	struct pollfd p[MAX_LISTEN];
	for (int i = 0; i < opt.nlisten; i++)
		p[i] = (struct pollfd){ lfds[i], POLLIN, 0 };
	while (!stopping) {
		if (poll(p, (nfds_t)opt.nlisten, 100) <= 0)
			continue;
		for (int i = 0; i < opt.nlisten && !stopping; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			int fd = accept4(lfds[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0)
				continue; // another worker took it
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			conn_opened();
			raise_max(&st.max_busy, INC(st.busy));
			tcp_serve(fd);
			DEC(st.busy);
			break; // back to poll: fairness between listeners and workers
		}
	}
	return NULL;
}

// ---------------------------------------------------------------- main
static void usage(FILE *f)
{
	fprintf(f,
		"usage: testserver --listen ADDR:PORT [--listen ...] [options]\n"
		"  --listen ADDR:PORT     address to listen on (repeatable; [V6]:PORT; port 0 = any)\n"
		"  --workers N            worker threads (default 4)\n"
		"  --service-ms MS        work per request / line (default 10; fractions allowed)\n"
		"  --mode http|tcp        per-request HTTP/1.1 keep-alive, or per-connection lines\n"
		"  --busy                 spin the CPU for the service time instead of sleeping\n"
		"  --slow-ms MS           service time of paths starting with /slow (default 10x)\n"
		"  --fail-rate P          answer 500 (tcp: \"err\") with probability P (default 0)\n"
		"  --hold-ms MS           tcp: close each connection MS after accept (0 = never)\n"
		"  --backlog N            listen backlog (default 1024)\n"
		"  --mode-file PATH       re-read every 100 ms: service_ms= slow_ms= fail_rate=\n"
		"                         hold_ms= busy= (missing file = command-line values)\n"
		"  --stats-file PATH      write the JSON stats there every --stats-interval-ms\n"
		"  --stats-interval-ms N  default 1000\n"
		"  --port-file PATH       write the bound port(s), one a line (useful with port 0)\n"
		"  --quiet                no log lines on stderr\n"
		"SIGUSR1 cycles normal -> slow -> failing -> normal. SIGTERM/SIGINT: print stats\n"
		"JSON on stdout and exit 0. HTTP paths: /slow*, /status/NNN.\n");
}

static double num_arg(const char *name, const char *v, double lo, double hi)
{
	char *end;
	double x = strtod(v, &end);
	if (!*v || *end || !(x >= lo && x <= hi))
		die("bad value for %s: '%s' (want %g..%g)", name, v, lo, hi);
	return x;
}

// Reads the command line into opt. Exits 2 on bad usage, 0 after --help.
static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
#define ARG() (has ? argv[++i] : (die("%s needs a value", a), ""))
		if (!strcmp(a, "--listen")) {
			if (opt.nlisten == MAX_LISTEN)
				die("too many --listen (max %d)", MAX_LISTEN);
			opt.listen[opt.nlisten++] = ARG();
		} else if (!strcmp(a, "--workers"))
			opt.workers = (int)num_arg(a, ARG(), 1, 4096);
		else if (!strcmp(a, "--service-ms"))
			opt.service_ms = num_arg(a, ARG(), 0, 3600e3);
		else if (!strcmp(a, "--slow-ms"))
			opt.slow_ms = num_arg(a, ARG(), 0, 3600e3);
		else if (!strcmp(a, "--hold-ms"))
			opt.hold_ms = num_arg(a, ARG(), 0, 86400e3);
		else if (!strcmp(a, "--fail-rate"))
			opt.fail_rate = num_arg(a, ARG(), 0, 1);
		else if (!strcmp(a, "--backlog"))
			opt.backlog = (int)num_arg(a, ARG(), 1, 1 << 20);
		else if (!strcmp(a, "--busy"))
			opt.busy = 1;
		else if (!strcmp(a, "--mode")) {
			const char *m = ARG();
			if (!strcmp(m, "http"))
				opt.mode = MODE_HTTP;
			else if (!strcmp(m, "tcp"))
				opt.mode = MODE_TCP;
			else
				die("bad --mode '%s' (http|tcp)", m);
		} else if (!strcmp(a, "--mode-file"))
			opt.mode_file = ARG();
		else if (!strcmp(a, "--stats-file"))
			opt.stats_file = ARG();
		else if (!strcmp(a, "--stats-interval-ms"))
			opt.stats_interval_ms = (int)num_arg(a, ARG(), 100, 3600e3);
		else if (!strcmp(a, "--port-file"))
			opt.port_file = ARG();
		else if (!strcmp(a, "--quiet"))
			opt.quiet = 1;
		else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			die("unknown argument '%s'", a);
		}
#undef ARG
	}
	if (!opt.nlisten) {
		usage(stderr);
		die("--listen is required");
	}
}

// Starts the I/O thread (http) and the workers; returns the threads to join.
static pthread_t *start_threads(int *n_threads)
{
	pthread_t *th = calloc((size_t)opt.workers + 1, sizeof *th);
	if (!th)
		die("out of memory");
	int nth = 0;
	if (opt.mode == MODE_HTTP) {
		epfd = epoll_create1(EPOLL_CLOEXEC);
		wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (epfd < 0 || wakefd < 0)
			die("epoll/eventfd: %s", strerror(errno));
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &wakefd };
		epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev);
		for (int i = 0; i < opt.nlisten; i++) {
			ev = (struct epoll_event){ .events = EPOLLIN, .data.ptr = &lfd_marker[i] };
			epoll_ctl(epfd, EPOLL_CTL_ADD, lfds[i], &ev);
		}
		if (pthread_create(&th[nth++], NULL, http_io, NULL))
			die("pthread_create failed");
	}
	for (int i = 0; i < opt.workers; i++)
		if (pthread_create(&th[nth++], NULL, opt.mode == MODE_HTTP ? http_worker : tcp_worker,
				   NULL))
			die("pthread_create failed");
	*n_threads = nth;
	return th;
}

// Serves until SIGTERM or SIGINT: SIGUSR1 cycles the override mode, the mode file is polled
// and the stats file rewritten every --stats-interval-ms.
static void serve_until_signalled(const sigset_t *set)
{
	double next_stats = now_s() + opt.stats_interval_ms / 1000.0;
	write_stats_file();
	for (;;) {
		struct timespec to = { 0, 100 * 1000 * 1000 };
		int sig = sigtimedwait(set, NULL, &to);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig == SIGUSR1) {
			STORE(sig_override, (LOAD(sig_override) + 1) % 3);
			logmsg("SIGUSR1: %s", (const char *[]){ "normal", "slow", "failing" }
						      [LOAD(sig_override)]);
		}
		poll_mode_file();
		if (opt.stats_file && now_s() >= next_stats) {
			write_stats_file();
			next_stats = now_s() + opt.stats_interval_ms / 1000.0;
		}
	}
}

// Stops accepting, wakes and joins everyone (sleeps are sliced: < 1 s total).
static void shutdown_threads(pthread_t *th, int nth)
{
	STORE(stopping_flag, 1);
	for (int i = 0; i < opt.nlisten; i++)
		close(lfds[i]);
	if (opt.mode == MODE_HTTP) {
		uint64_t one = 1;
		if (write(wakefd, &one, sizeof one) < 0) {
		}
		pthread_mutex_lock(&q_mu);
		pthread_cond_broadcast(&q_cv);
		pthread_mutex_unlock(&q_mu);
	}
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	free(th);
	if (opt.mode == MODE_HTTP) {
		while (all_head)
			conn_free(all_head);
		close(epfd);
		close(wakefd);
	}
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	clock_gettime(CLOCK_MONOTONIC, &t_start);

	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	// Signals are taken synchronously by the main thread; workers never see them.
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	poll_mode_file();
	open_listeners();

	int nth;
	pthread_t *th = start_threads(&nth);

	serve_until_signalled(&set);
	shutdown_threads(th, nth);
	char buf[1024];
	stats_json(buf, sizeof buf);
	fputs(buf, stdout);
	fflush(stdout);
	write_stats_file();
	return 0;
}
