// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: sluiced's messages through a stderr nobody reads (user/daemon/logstream.c). A
 * journald that falls behind leaves stderr full; a message must then cost the tick nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "daemon/logstream.h"
#include "fillfd.h"

/* A test that would block fails instead of hanging. */
static void watchdog_fired(int sig)
{
	static const char msg[] = "watchdog: a log message blocked on a full stderr\n";
	(void)sig;
	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(1);
}

static void *log_from_thread(void *arg)
{
	for (int i = 0; i < 2000; i++)
		log_warn("from the file writer thread, message %d", i);
	return arg;
}

/* Everything the reader gets, after the junk that filled the pipe. */
static char *read_all(int rfd, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);
	int fl = fcntl(rfd, F_GETFL);

	fcntl(rfd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		ssize_t r;

		if (n + 65536 > cap)
			buf = realloc(buf, cap *= 2);
		r = read(rfd, buf + n, 65536);
		if (r <= 0) {
			/* the pipe is empty: a tick writes out what waits in the buffer */
			logstream_flush();
			r = read(rfd, buf + n, 65536);
		}
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

static void test_full_stderr_never_blocks(void **st)
{
	unsigned long long t0, worst = 0;
	char *all, *p, *gap;
	size_t len;
	int fds[2], saved, lines = 0, last = -1, seen = 0, dropped_said = 0;
	unsigned long long dropped;
	pthread_t th;
	(void)st;

	/* stderr itself is the pipe, as under systemd */
	assert_int_equal(pipe(fds), 0);
	saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fds[1], 2), 2);
	fill(2);
	log_init("sluiced", 0);
	assert_int_equal(logstream_open(2, 64 * 1024), 0);
	signal(SIGALRM, watchdog_fired);
	alarm(5);
	assert_int_equal(pthread_create(&th, NULL, log_from_thread, NULL), 0);
	for (int i = 0; i < 5000; i++) {
		t0 = monotonic_ns();
		log_warn("the tick's message %d, long enough to fill the buffer in a few hundred "
			 "messages like a burst of real ones", i);
		if (monotonic_ns() - t0 > worst)
			worst = monotonic_ns() - t0;
	}
	pthread_join(th, NULL);
	alarm(0);
	/* a write that waited for the reader would never have come back */
	assert_true(worst < 1000000000ull);
	dropped = logstream_dropped();
	assert_true(dropped > 0);

	all = read_all(fds[0], &len);
	p = all;
	while (*p == 'x')
		p++;
	/* every message whole, the tick's in order; the gap said once, with its count */
	while (*p) {
		char *nl = strchr(p, '\n');
		int k;

		assert_non_null(nl);
		*nl = 0;
		assert_int_equal(strncmp(p, "sluiced: warning: ", 18), 0);
		if (sscanf(p, "sluiced: warning: the tick's message %d,", &k) == 1) {
			assert_true(k > last);
			assert_non_null(strstr(p, "like a burst of real ones"));
			last = k;
			seen++;
		} else if ((gap = strstr(p, " messages were dropped here: stderr did not take"))) {
			dropped_said++;
		} else {
			assert_non_null(strstr(p, "from the file writer thread, message "));
			seen++;
		}
		lines++;
		p = nl + 1;
	}
	assert_int_equal(dropped_said, 1);
	assert_int_equal((unsigned long long)seen + dropped, 7000ull);
	free(all);

	/* the reader is back: a message goes straight through */
	log_warn("after the gap");
	all = read_all(fds[0], &len);
	assert_string_equal(all, "sluiced: warning: after the gap\n");
	free(all);
	assert_int_equal(logstream_close(100), 0);
	dup2(saved, 2);
	close(saved);
	close(fds[0]);
	close(fds[1]);
	(void)lines;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_stderr_never_blocks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
