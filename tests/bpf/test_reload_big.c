// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A reload of a very large config never lets the heartbeat age. 65,000 services parse for
 * seconds, their controllers' memory (over a gigabyte) took seconds more to touch, and writing
 * them into the maps a second more: the tick waited for all of it and wrote no heartbeat, so the
 * data path failed open (admitted everything) until the reload was over. The parse and the
 * memory now come from a thread of their own while the ticks go on (daemon_reload_start), and
 * the steps left to the tick (daemon_reload_finish) write the heartbeat as they go. So does
 * the first tick after it, which reads and runs all the controllers.
 * The test reloads 12,000 services (65,000 took 13 s and 1.9 GB) and holds the heartbeat to half
 * the data path's timeout: 108-116 ms here with every step above, where nothing ticking
 * during the reload left it 0.85-0.88 s old at 12,000 services (1.6 s at 20,000). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <time.h>
#include "scale.h"

#define RUNNING 64
#define BIG 12000
#define TICK_NS 10000000ull        /* the control interval the loop below keeps */

/* The data path's view: how old the heartbeat is, looked at every millisecond as a packet
 * would; the oldest seen. */
struct watch {
	struct scale *s;
	int stop;
	unsigned long long worst;
};

static void *watch_heartbeat(void *arg)
{
	struct watch *w = arg;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		struct timespec ms = { 0, 1000000 };
		struct sluice_globals g;
		unsigned long long now = monotonic_ns();

		if (!maps_read_globals(&w->s->d->m, &g) && now > g.heartbeat_ns &&
		    now - g.heartbeat_ns > w->worst)
			w->worst = now - g.heartbeat_ns;
		nanosleep(&ms, NULL);     /* the sampling period */
	}
	return NULL;
}

/* Service i of the big config: the running ones where they run (SCALE_PORT0 + i), the rest
 * on the ports from 100 up that those leave free. */
static int big_port(int i)
{
	int p = 100 + i;

	if (i < RUNNING)
		return SCALE_PORT0 + i;
	return p >= SCALE_PORT0 ? p + RUNNING : p;
}

/* The config file the daemon reloads: BIG services. */
static void write_big(struct scale *s, char *path)
{
	size_t cap = 128 + (size_t)BIG * 80, len = 0;
	char *text = malloc(cap);
	int fd = mkstemp(path);

	assert_non_null(text);
	assert_true(fd >= 0);
	len += (size_t)snprintf(text + len, cap - len, "interface: lo\nstate_dir: %s\nservices:\n",
				s->state_dir);
	for (int i = 0; i < BIG; i++)
		len += (size_t)snprintf(text + len, cap - len, "  - { name: s%d, port: %d }\n", i,
					big_port(i));
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	free(text);
	snprintf(s->d->cfg_path, sizeof(s->d->cfg_path), "%s", path);
}

/* From the reload's start until the big config is in force and has ticked, as sluiced's loop
 * runs: a tick every TICK_NS, the reload applied at the tick after its parse is over, then the
 * first ticks that run all BIG controllers. The heartbeat is never older than half the data
 * path's timeout (1 s here). */
static void test_big_reload_keeps_the_heartbeat(void **st)
{
	struct scale *s = scale_setup_room(RUNNING, 0, BIG);
	char path[] = "/tmp/sluice-bigreload.XXXXXX";
	unsigned long long start, now, next, timeout_ns, ticks = 0;
	struct watch w = { .s = s };
	pthread_t th;
	(void)st;

	assert_non_null(s);
	timeout_ns = (unsigned long long)s->d->cfg.heartbeat_timeout_ms * 1000000ull;
	write_big(s, path);
	daemon_tick(s->d, monotonic_ns());
	assert_int_equal(pthread_create(&th, NULL, watch_heartbeat, &w), 0);
	start = next = monotonic_ns();
	assert_int_equal(daemon_reload_start(s->d, 1, start), 0);
	while (daemon_reload_busy(s->d)) {
		struct timespec ts;

		next += TICK_NS;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);   /* the tick's pace */
		now = monotonic_ns();
		if (daemon_reload_finish(s->d, now))
			now = monotonic_ns();
		daemon_tick(s->d, now);
		ticks++;
		if (next < now)
			next = now;
	}
	/* the first ticks that run all BIG controllers */
	for (int k = 0; k < 3; k++)
		daemon_tick(s->d, monotonic_ns());
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	print_message("# reload of %d services: %.2f s, %llu ticks meanwhile, the heartbeat at "
		      "most %.0f ms old\n", BIG, (double)(monotonic_ns() - start) / 1e9, ticks,
		      (double)w.worst / 1e6);
	assert_int_equal(s->d->cfg.n_services, BIG);
	assert_int_equal(s->d->reloads_ok, 1);
	assert_true(ticks > 0);
	assert_true(w.worst < timeout_ns / 2);
	unlink(path);
	scale_free(s);
}

/* One reload at a time; an unchanged file is read and compared, nothing more. */
static void test_reload_start_unchanged(void **st)
{
	struct scale *s = scale_setup(RUNNING, 0);
	char path[] = "/tmp/sluice-bigreload.XXXXXX";
	char *text = scale_config(RUNNING, 0, s ? s->state_dir : "/tmp");
	int fd = mkstemp(path), rc = 0;
	(void)st;

	assert_non_null(s);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(s->d->cfg_path, sizeof(s->d->cfg_path), "%s", path);
	assert_int_equal(daemon_reload_start(s->d, 0, monotonic_ns()), 0);
	assert_int_equal(daemon_reload_start(s->d, 1, monotonic_ns()), 1);   /* one at a time */
	while (daemon_reload_busy(s->d))
		rc = daemon_reload_finish(s->d, monotonic_ns());
	assert_int_equal(rc, 1);              /* the first: no bytes were known */
	assert_int_equal(daemon_reload_start(s->d, 0, monotonic_ns()), 0);
	while (daemon_reload_busy(s->d))
		rc = daemon_reload_finish(s->d, monotonic_ns());
	assert_int_equal(rc, 0);              /* the same bytes: nothing done */
	assert_int_equal(s->d->reloads_ok, 1);
	free(text);
	unlink(path);
	scale_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reload_start_unchanged),
		cmocka_unit_test(test_big_reload_keeps_the_heartbeat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
