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
#include <time.h>
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

/* Failures that end the stream for good; anything else (a full disk, EIO) is tried again. */
static int gone_for_good(int err)
{
	return err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == EBADF;
}

/* A file's writer: takes what the tick queued and writes it, blocking as long as the disk
 * makes it wait; a write that fails (ENOSPC) is tried again a second later, or at the next
 * line queued. Ends at stop once all is written, or at stop with the disk still refusing. */
static void *writer_main(void *arg)
{
	struct evstream *es = arg;

	pthread_mutex_lock(&es->mu);
	for (;;) {
		ssize_t w;
		int err;

		if (es->out_off == es->out_len) {
			char *t = es->out;

			if (!es->len) {
				pthread_cond_broadcast(&es->cv);   /* drained */
				if (es->stop)
					break;
				pthread_cond_wait(&es->cv, &es->mu);
				continue;
			}
			es->out = es->buf;
			es->out_off = 0;
			es->out_len = es->len;
			es->buf = t;
			es->len = 0;
		}
		pthread_mutex_unlock(&es->mu);
		w = es->write_fn(es->fd, es->out + es->out_off, es->out_len - es->out_off);
		err = errno;
		pthread_mutex_lock(&es->mu);
		if (w > 0) {
			es->out_off += (size_t)w;
		} else if (w < 0 && err == EINTR) {
			continue;
		} else if (w < 0 && gone_for_good(err)) {
			es->broken = err;
			es->out_off = es->out_len;
			es->len = 0;
		} else if (es->stop) {
			break;            /* the disk still refuses, and the process is ending */
		} else {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&es->cv, &es->mu, &ts);
		}
	}
	es->exited = 1;
	pthread_cond_broadcast(&es->cv);
	pthread_mutex_unlock(&es->mu);
	return NULL;
}

static void start_writer(struct evstream *es)
{
	pthread_condattr_t ca;

	es->out = malloc(es->cap);
	if (!es->out)
		return;
	pthread_mutex_init(&es->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&es->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&es->thread, NULL, writer_main, es)) {
		pthread_cond_destroy(&es->cv);
		pthread_mutex_destroy(&es->mu);
		free(es->out);
		es->out = NULL;
		return;
	}
	es->threaded = 1;
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
	es->write_fn = write;
	if (S_ISSOCK(st.st_mode))
		es->sock = 1;
	else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		make_nonblocking(es, fd);
	else
		start_writer(es);   /* failing that, written at the tick as before */
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
				     : es->write_fn(es->fd, p + done, n - done);

		if (w > 0)
			done += (size_t)w;
		else if (w < 0 && errno == EINTR)
			continue;
		else if (w < 0 && gone_for_good(errno))
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

/* A file's: the line is queued whole for its thread, or dropped whole. */
static int put_queued(struct evstream *es, const char *line, size_t n)
{
	int r = 0;

	pthread_mutex_lock(&es->mu);
	if (es->broken || es->dropping || n > es->cap - es->len) {
		r = drop(es);
	} else {
		memcpy(es->buf + es->len, line, n);
		es->len += n;
		pthread_cond_signal(&es->cv);
	}
	pthread_mutex_unlock(&es->mu);
	return r;
}

int evstream_put(struct evstream *es, const char *line, size_t n)
{
	if (es->threaded)
		return put_queued(es, line, n);
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

	if (es->threaded) {
		pthread_mutex_lock(&es->mu);
		n = es->dropping;
		if (n && !es->len && es->out_off == es->out_len && !es->broken)
			es->dropping = 0;
		else
			n = 0;
		pthread_mutex_unlock(&es->mu);
		return n;
	}

	write_buffer(es);
	if (!n || es->len || es->broken)
		return 0;
	es->dropping = 0;
	return n;
}

/* Wait until the thread wrote all (1) or the deadline passed (0); with es->mu held. */
static int wait_written(struct evstream *es, unsigned long long end)
{
	struct timespec ts = { .tv_sec = (time_t)(end / 1000000000ull),
			       .tv_nsec = (long)(end % 1000000000ull) };

	while ((es->len || es->out_off != es->out_len) && !es->exited && !es->broken)
		if (pthread_cond_timedwait(&es->cv, &es->mu, &ts) == ETIMEDOUT)
			break;
	return !es->len && es->out_off == es->out_len;
}

int evstream_drained(struct evstream *es, int wait_ms)
{
	unsigned long long end = monotonic_ns() + (unsigned long long)wait_ms * 1000000ull;
	int r;

	if (!es->threaded) {
		write_buffer(es);
		return !es->len;
	}
	pthread_mutex_lock(&es->mu);
	r = wait_written(es, end);
	pthread_mutex_unlock(&es->mu);
	return r;
}

/* A file's thread: stopped once it wrote what waits (wait_ms at most), then joined; a
 * thread still in a write then is left behind, es with it (untouched from then on, the process
 * is ending). Returns the bytes left. */
static size_t close_queued(struct evstream *es, int wait_ms)
{
	unsigned long long end = monotonic_ns() + (unsigned long long)wait_ms * 1000000ull;
	size_t left;
	int done;

	pthread_mutex_lock(&es->mu);
	wait_written(es, end);
	es->stop = 1;
	pthread_cond_broadcast(&es->cv);
	left = es->len + (es->out_len - es->out_off);
	if (!left)
		while (!es->exited)
			pthread_cond_wait(&es->cv, &es->mu);   /* it ends at once: nothing to write */
	done = es->exited;
	pthread_mutex_unlock(&es->mu);
	if (!done) {
		/* es stays as it is: the thread still uses it */
		pthread_detach(es->thread);
		return left;
	}
	pthread_join(es->thread, NULL);
	pthread_cond_destroy(&es->cv);
	pthread_mutex_destroy(&es->mu);
	free(es->out);
	free(es->buf);
	memset(es, 0, sizeof(*es));
	es->restore_fl = -1;
	return left;
}

size_t evstream_close(struct evstream *es, int wait_ms)
{
	unsigned long long end = monotonic_ns() + (unsigned long long)wait_ms * 1000000ull;
	size_t left;

	if (es->threaded)
		return close_queued(es, wait_ms);
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
