// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// loadgen: connections and requests: open, send, receive, time out, retry.
#include "loadgen.h"

// ---------------------------------------------------------------- connections
void conn_set_events(struct conn *c, uint32_t ev)
{
	if (c->events == ev)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = c };
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &e);
	c->events = ev;
}


void conn_close(struct conn *c)
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

void free_dead(void)
{
	while (dead_list) {
		struct conn *c = dead_list;
		dead_list = c->dead_next;
		free(c->rbuf);
		free(c);
	}
}

void req_finish(struct req *r, int outcome, int status, int64_t now)
{
	struct stats *s = &classes[r->cls].s;
	uint64_t us = now > r->start ? (uint64_t)(now - r->start) / 1000 : 0;
	if (status > 0 && status < 600)
		s->status[status]++;
	switch (outcome) {
	case O_OK:
		s->ok++;
		h_add(&s->ok_h, us);
		if (r->on_new_conn)
			h_add(&s->ok_new_h, us);
		break;
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
	if (opt.trace) // arrival (ms into the run), class, outcome, HTTP status, latency (us),
		       // 1 when sent on a connection opened for it
		fprintf(opt.trace, "%.3f %s %d %d %llu %d\n", (r->start - run_t0) / 1e6,
			classes[r->cls].name, outcome, status, (unsigned long long)us,
			r->on_new_conn ? 1 : 0);
	if (r->conn)
		r->conn->req = NULL;
	list_del(&r->tlink);
	list_del(&r->plink);
	outstanding--;
	free(r);
}

int status_outcome(int status)
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

void conn_send(struct conn *c, int64_t now)
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
			if (r->retries)
				classes[r->cls].s.lost_on_retry++;
			req_finish(r, err == ECONNREFUSED ? O_REFUSED : O_RESET, 0, now);
		}
		return;
	}
	c->state = C_RECEIVING;
	c->rlen = 0;
	conn_set_events(c, EPOLLIN | EPOLLRDHUP);
}

int connect_outcome(int err)
{
	switch (err) {
	case ECONNREFUSED: return O_REFUSED;
	case ECONNRESET: return O_RESET;
	case ETIMEDOUT: return O_TIMEOUT;
	default: return O_OTHER;
	}
}

void conn_open(struct req *r, int64_t now)
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
	r->on_new_conn = true;
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

// Whether an idle keep-alive connection was closed by the server (or sent something nobody
// asked for) in a way this loop has not yet read: its FIN may wait in the socket behind other
// events. Checked before reuse, as libcurl checks a pooled connection: a server that closes
// all its idle connections at once (Apache's event MPM does while every worker is busy) would
// otherwise have a request sent on one and its retry on the next.
static bool idle_conn_closed(const struct conn *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Gives a request a connection: an idle keep-alive one of its class, a new one, or a place
// in the class's pending list when --max-conns connections are open.
void dispatch(struct req *r, int64_t now)
{
	struct klass *k = &classes[r->cls];
	// A retry (its reused connection closed before any answer) goes on a new connection, as
	// HAProxy retries on one: the server that closed one idle connection may be closing
	// them all, and a new connection is not idle in its keep-alive queue.
	while (opt.mode == M_KEEPALIVE && !r->retries && !list_empty(&k->idle)) {
		struct conn *c = container_of(k->idle.next, struct conn, link);
		if (idle_conn_closed(c)) {
			k->s.stale_dropped++;
			conn_close(c);
			continue;
		}
		list_del(&c->link);
		c->req = r;
		r->conn = c;
		r->on_new_conn = false;
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

void drain_pending(void)
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

void new_request(int64_t sched)
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
int http_response(struct conn *c, bool eof, int *status, bool *server_close)
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

void conn_done(struct conn *c, bool server_close, int64_t now)
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
void conn_failed(struct conn *c, int err, int64_t now)
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
			if (err == 0 || err == ECONNRESET || err == EPIPE) {
				if (r->retries)
					classes[r->cls].s.lost_on_retry++;
				else if (!reused)
					classes[r->cls].s.lost_on_fresh++;
			}
			req_finish(r, err == 0 ? O_EOF : err == ETIMEDOUT ? O_TIMEOUT
				      : (err == ECONNRESET || err == EPIPE) ? O_RESET : O_OTHER,
				   0, now);
		}
	}
	drain_pending();
}

void conn_readable(struct conn *c, int64_t now)
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

void conn_event(struct conn *c, uint32_t ev, int64_t now)
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
void expire(int64_t now)
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

void arm_timer(int64_t at)
{
	if (at == armed_at)
		return;
	armed_at = at;
	struct itimerspec its = { .it_value = { at / 1000000000, at % 1000000000 } };
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1;
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}
