// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluiced's messages, never blocking the tick; see logstream.h. */
#include "daemon/logstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "common/log.h"
#include "daemon/evstream.h"

static pthread_mutex_t ls_mu = PTHREAD_MUTEX_INITIALIZER;
static struct evstream ls;

static void put_line(void *ctx, const char *line, size_t n)
{
	(void)ctx;
	pthread_mutex_lock(&ls_mu);
	evstream_put(&ls, line, n);
	pthread_mutex_unlock(&ls_mu);
}

int logstream_open(int fd, size_t cap)
{
	int rc;

	pthread_mutex_lock(&ls_mu);
	rc = ls.on ? -EALREADY : evstream_open(&ls, fd, cap);
	pthread_mutex_unlock(&ls_mu);
	if (!rc)
		log_set_sink(put_line, NULL);
	return rc;
}

unsigned long long logstream_flush(void)
{
	unsigned long long n;

	pthread_mutex_lock(&ls_mu);
	n = ls.on ? evstream_flush(&ls) : 0;
	pthread_mutex_unlock(&ls_mu);
	/* after what waited, where the gap is */
	if (n)
		log_warn("%llu message%s dropped here: stderr did not take them as fast as they "
			 "came", n, n == 1 ? " was" : "s were");
	return n;
}

unsigned long long logstream_dropped(void)
{
	unsigned long long n;

	pthread_mutex_lock(&ls_mu);
	n = ls.dropped_total;
	pthread_mutex_unlock(&ls_mu);
	return n;
}

size_t logstream_close(int wait_ms)
{
	unsigned long long dropping;
	size_t left;

	pthread_mutex_lock(&ls_mu);
	if (!ls.on) {
		pthread_mutex_unlock(&ls_mu);
		return 0;
	}
	dropping = ls.dropping;
	left = evstream_close(&ls, wait_ms);
	pthread_mutex_unlock(&ls_mu);
	log_set_sink(NULL, NULL);
	if (dropping)
		log_warn("%llu messages were dropped at the end: stderr did not take them",
			 dropping);
	return left;
}
