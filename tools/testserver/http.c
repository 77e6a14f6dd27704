// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// testserver: the http mode: one I/O thread (epoll) parses requests, workers serve them.
#include "testserver.h"

// ---------------------------------------------------------------- http mode

int epfd, wakefd;
pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;
struct conn *q_head, *q_tail;
pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
struct conn *all_head;

void enqueue(struct conn *c)
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

void conn_free(struct conn *c)
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

void conn_rearm(struct conn *c)
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

bool hdr_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
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
int http_parse(struct conn *c)
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

const char *reason(int code)
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

void http_serve(struct conn *c)
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

void *http_worker(void *arg)
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
		if (c->unread) {
			// --worker-reads: the request waited in the socket until now
			int r;

			c->unread = false;
			r = http_fill(c);
			if (r > 0)
				http_serve(c);
			else if (!r)
				conn_rearm(c);
		} else {
			http_serve(c);
		}
		DEC(st.busy);
	}
}

// Reads what is there: 1 when a complete request (or a bad one) heads the buffer, 0 when more
// bytes are needed, -1 when the connection is gone (freed).
int http_fill(struct conn *c)
{
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
				return -1;
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
			return 1;
		}
		conn_free(c);
		return -1;
	}
	return c->bad || (c->len && http_parse(c));
}

// A connection became readable. The I/O thread reads what is there and queues a complete
// request to the workers (or re-arms the connection); with --worker-reads it queues the
// connection unread, and the worker that takes it reads the request (http_worker).
void http_readable(struct conn *c)
{
	int r;

	(void)__atomic_load_n(&c->handoff, __ATOMIC_ACQUIRE);
	if (opt.worker_reads) {
		c->unread = true;
		enqueue(c);
		return;
	}
	r = http_fill(c);
	if (r > 0)
		enqueue(c);
	else if (!r)
		conn_rearm(c);
}

void http_accept(int lfd)
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

int lfd_marker[MAX_LISTEN]; // epoll data for listeners: &lfd_marker[i]

void *http_io(void *arg)
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
