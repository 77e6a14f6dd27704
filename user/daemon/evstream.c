// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The events' way out, never blocking the tick; see evstream.h. */
#include "daemon/evstream.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"

/* A pipe, FIFO or terminal: the same file through a description of our own, non-blocking, so
 * the flag never reaches the shell or whoever else holds the one we were given. Else fd made
 * non-blocking itself (its flags put back at close). */
static void make_nonblocking(struct evstream *es, int fd)
{
	char path[64];
	int nfd, fl;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (nfd >= 0) {
		es->fd = nfd;
		es->own_fd = 1;
		return;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
		es->restore_fl = fl;
}

int evstream_open(struct evstream *es, int fd, size_t cap)
{
	struct stat st;

	memset(es, 0, sizeof(*es));
	es->fd = fd;
	es->restore_fl = -1;
	if (fstat(fd, &st))
		return -errno;
	es->buf = malloc(cap);
	if (!es->buf)
		return -ENOMEM;
	es->cap = cap;
	if (S_ISSOCK(st.st_mode))
		es->sock = 1;
	else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		make_nonblocking(es, fd);
	es->on = 1;
	return 0;
}

/* As much of p as the descriptor takes now. A reader gone (EPIPE and its kin) marks the stream
 * broken for good; any other failure (a full disk under a file, EIO) is taken like a full
 * pipe: what is left waits and is tried again at the next tick, so the events come back when
 * the failure passes. */
static size_t write_some(struct evstream *es, const char *p, size_t n)
{
	size_t done = 0;

	while (done < n && !es->broken) {
		ssize_t w = es->sock ? send(es->fd, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL)
				     : write(es->fd, p + done, n - done);

		if (w > 0)
			done += (size_t)w;
		else if (w < 0 && errno == EINTR)
			continue;
		else if (w < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN ||
				   errno == EBADF))
			es->broken = errno;
		else
			break;
	}
	return done;
}

static void write_buffer(struct evstream *es)
{
	size_t w = es->len ? write_some(es, es->buf, es->len) : 0;

	memmove(es->buf, es->buf + w, es->len - w);
	es->len -= w;
}

static int drop(struct evstream *es)
{
	es->dropped_total++;
	return es->dropping++ == 0;
}

int evstream_put(struct evstream *es, const char *line, size_t n)
{
	/* once dropping, until the buffer drained: the gap stays one gap, said where it is */
	if (es->broken || es->dropping || n > es->cap)
		return drop(es);
	write_buffer(es);
	if (!es->len && !es->broken) {
		size_t w = write_some(es, line, n);

		line += w;
		n -= w;
		if (!n)
			return 0;
	}
	if (es->broken)          /* the reader is gone (EPIPE): nothing will take it */
		return drop(es);
	/* the rest of a line begun (len was 0, n <= cap) always fits: never half a line */
	if (es->cap - es->len < n)
		return drop(es);
	memcpy(es->buf + es->len, line, n);
	es->len += n;
	return 0;
}

unsigned long long evstream_flush(struct evstream *es)
{
	unsigned long long n = es->dropping;

	write_buffer(es);
	if (!n || es->len || es->broken)
		return 0;
	es->dropping = 0;
	return n;
}

size_t evstream_close(struct evstream *es, int wait_ms)
{
	unsigned long long end = monotonic_ns() + (unsigned long long)wait_ms * 1000000ull;
	size_t left;

	write_buffer(es);
	while (es->len && !es->broken) {
		unsigned long long now = monotonic_ns();
		struct pollfd pfd = { .fd = es->fd, .events = POLLOUT };
		size_t before = es->len;
		int r;

		if (now >= end)
			break;
		r = poll(&pfd, 1, (int)((end - now + 999999) / 1000000));
		if (r == 0 || (r < 0 && errno != EINTR))
			break;
		write_buffer(es);
		if (r > 0 && es->len == before)
			break;           /* writable, yet it took nothing (a full disk): no spinning */
	}
	left = es->len;
	if (es->own_fd)
		close(es->fd);
	else if (es->restore_fl >= 0)
		fcntl(es->fd, F_SETFL, es->restore_fl);
	free(es->buf);
	memset(es, 0, sizeof(*es));
	es->restore_fl = -1;
	return left;
}
