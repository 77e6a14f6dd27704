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
#include "daemon/ctlpersist.h"

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

/* The running sluiced's end (after its last tick): its daemon freed, the maps left as a
 * stopped sluiced leaves its pins. */
static void stop_daemon(struct scale *s)
{
	struct daemon *d = s->d;
	struct sluice_maps m = d->m;
	FILE *events = d->events;

	daemon_fini(d, 1000);
	daemon_free(d);
	sluice_config_free(&d->cfg);
	memset(d, 0, sizeof(*d));
	d->m = m;
	d->events = events;
}

/* The config of n services (scale_config) a new sluiced starts with, parsed. */
static void parse_config(struct scale *s, int n, struct sluice_config *cfg)
{
	struct doc_errors errs;
	char *text = scale_config(n, 0, s->state_dir);

	assert_non_null(text);
	assert_int_equal(sluice_config_parse(text, strlen(text), "scale", cfg, &errs), 0);
	free(text);
}

/* A new sluiced on those maps, as on adopted pins, with the config cfg: it sets up
 * (daemon_init, given now_ns) and adopts the controllers' state. */
static void start_daemon(struct scale *s, const struct sluice_config *cfg,
			 unsigned long long now_ns)
{
	char err[256];

	s->d->cfg = *cfg;
	assert_int_equal(daemon_init(s->d, now_ns, err, sizeof(err)), 0);
	daemon_ctl_import(s->d, monotonic_ns());
}

/* A restart with a big config: sluiced stops after its last tick (saving its controllers'
 * state, as at SIGTERM) and a new one starts on the same maps, programs them, sets up and
 * adopts BIG_RESTART controllers, then ticks. With no heartbeat written from the old one's
 * last tick to the end of the new one's setup, the heartbeat went 0.7-1.7 s old at 20,000
 * services (the parse included) and the data path failed open for every service. Adopting a
 * live data path, the start now keeps the heartbeat fresh as it goes, and the previous
 * sluiced's verdicts stay in force until the new one's first tick decides again. Held to half
 * the data path's timeout from the old one's last beat to the new one's third tick; the
 * config's parse, which comes before sluiced has the maps and so cannot beat, is done before
 * that beat. */
#define BIG_RESTART 20000

static void test_big_restart_keeps_the_heartbeat(void **st)
{
	struct scale *s = scale_setup(BIG_RESTART, 0);
	struct watch w = { .s = s };
	struct sluice_config cfg;
	unsigned long long start, timeout_ns;
	pthread_t th;
	(void)st;

	assert_non_null(s);
	timeout_ns = (unsigned long long)s->d->cfg.heartbeat_timeout_ms * 1000000ull;
	parse_config(s, BIG_RESTART, &cfg);
	daemon_tick(s->d, monotonic_ns());
	daemon_ctl_export_all(s->d, monotonic_ns());
	daemon_tick(s->d, monotonic_ns());          /* the old one's last beat */
	assert_int_equal(pthread_create(&th, NULL, watch_heartbeat, &w), 0);
	start = monotonic_ns();
	stop_daemon(s);
	start_daemon(s, &cfg, monotonic_ns());
	for (int k = 0; k < 3; k++)
		daemon_tick(s->d, monotonic_ns());
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	print_message("# restart with %d services: %.2f s to the third tick, the heartbeat at "
		      "most %.0f ms old\n", BIG_RESTART, (double)(monotonic_ns() - start) / 1e9,
		      (double)w.worst / 1e6);
	assert_int_equal(s->d->cfg.n_services, BIG_RESTART);
	assert_true(w.worst < timeout_ns / 2);
	scale_free(s);
}

/* Only a live heartbeat is carried through a start. One past the data path's timeout (the
 * previous sluiced gone for longer: the data path admits everything) is written again only
 * once the setup is over, at the time the setup was given; a live one is carried on from
 * there, never set back to it. */
static void test_restart_carries_only_a_live_heartbeat(void **st)
{
	struct scale *s = scale_setup(RUNNING, 0);
	struct sluice_globals g;
	struct sluice_config cfg;
	unsigned long long t;
	(void)st;

	assert_non_null(s);
	daemon_tick(s->d, monotonic_ns());
	stop_daemon(s);
	assert_int_equal(maps_read_globals(&s->d->m, &g), 0);
	g.heartbeat_ns = 1;    /* stale: past the timeout however long the host has been up */
	assert_int_equal(maps_write_globals(&s->d->m, &g), 0);
	parse_config(s, RUNNING, &cfg);
	t = monotonic_ns();
	start_daemon(s, &cfg, t);
	assert_int_equal(maps_read_globals(&s->d->m, &g), 0);
	assert_true(g.heartbeat_ns == t);

	daemon_tick(s->d, monotonic_ns());                     /* live */
	stop_daemon(s);
	parse_config(s, RUNNING, &cfg);
	t = monotonic_ns();
	start_daemon(s, &cfg, t);
	assert_int_equal(maps_read_globals(&s->d->m, &g), 0);
	assert_true(g.heartbeat_ns > t);
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
		cmocka_unit_test(test_big_restart_keeps_the_heartbeat),
		cmocka_unit_test(test_restart_carries_only_a_live_heartbeat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
