// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The config watch (daemon/cfgwatch.h) against the ways a config file really changes: in
 * place, a ConfigMap's `..data` swap, a symlink to a file in another directory, the
 * directory replaced, a symlinked directory swapped. Every change must be noticed (by the
 * watches, or by the slow look at the latest), and nothing unchanged may be. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>
#include "daemon/cfgwatch.h"
#include "daemon/daemon.h"

static char base[64];

static int setup(void **st)
{
	(void)st;
	snprintf(base, sizeof(base), "/tmp/cfgwatch.XXXXXX");
	return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[128];

	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

static char *at(const char *rel)
{
	static char p[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", base, rel);
	return p[k];
}

/* What the daemon's loop would do before its next reload: read the events, and at a tick
 * whose slow look is due, look. */
static int noticed(struct cfgwatch *w, unsigned long long *now)
{
	int ev = cfgwatch_events(w, *now);

	*now += CFGWATCH_LOOK_NS;
	return cfgwatch_look(w, *now) | ev;
}

static int by_events(struct cfgwatch *w)
{
	return cfgwatch_events(w, 0);
}

static void test_in_place_edit_and_nothing(void **st)
{
	struct cfgwatch w;
	unsigned long long now = 1;

	(void)st;
	sh("mkdir %s/etc && echo a > %s/etc/c.yaml", base, base);
	assert_true(cfgwatch_open(&w, at("etc/c.yaml"), now) >= 0);
	assert_false(noticed(&w, &now));
	sh("echo b > %s/etc/c.yaml", base);
	assert_true(by_events(&w));
	assert_false(noticed(&w, &now));  /* renewing the watches is no change */
	sh("echo c > %s/etc/c.new && mv %s/etc/c.new %s/etc/c.yaml", base, base, base);
	assert_true(by_events(&w));
	assert_false(noticed(&w, &now));
	cfgwatch_close(&w);
}

static void test_configmap_data_swap(void **st)
{
	struct cfgwatch w;
	unsigned long long now = 1;

	(void)st;
	sh("cd %s && mkdir -p m/..t1 && echo a > m/..t1/c.yaml && ln -s ..t1 m/..data && "
	   "ln -s ..data/c.yaml m/c.yaml", base);
	assert_true(cfgwatch_open(&w, at("m/c.yaml"), now) >= 0);
	for (int i = 2; i < 5; i++) {
		sh("cd %s/m && mkdir ..t%d && echo v%d > ..t%d/c.yaml && ln -s ..t%d ..data_tmp && "
		   "mv -T ..data_tmp ..data && rm -rf ..t%d", base, i, i, i, i, i - 1);
		assert_true(by_events(&w));
		assert_false(noticed(&w, &now));
	}
	cfgwatch_close(&w);
}

/* /etc/sluice/sluice.yaml -> /srv/conf/sluice.yaml: the edit happens in /srv/conf. */
static void test_symlink_to_a_file_elsewhere(void **st)
{
	struct cfgwatch w;
	unsigned long long now = 1;

	(void)st;
	sh("cd %s && mkdir etc srv && echo a > srv/c.yaml && ln -s ../srv/c.yaml etc/c.yaml", base);
	assert_true(cfgwatch_open(&w, at("etc/c.yaml"), now) >= 0);
	sh("echo b > %s/srv/c.new && mv %s/srv/c.new %s/srv/c.yaml", base, base, base);
	assert_true(by_events(&w));
	sh("echo c > %s/srv/c.yaml", base);
	assert_true(by_events(&w));
	cfgwatch_close(&w);
}

/* The directory renamed away and a new one put in its place: later edits land in the new
 * one and must still be seen. */
static void test_directory_replaced(void **st)
{
	struct cfgwatch w;
	unsigned long long now = 1;

	(void)st;
	sh("mkdir %s/etc && echo a > %s/etc/c.yaml", base, base);
	assert_true(cfgwatch_open(&w, at("etc/c.yaml"), now) >= 0);
	sh("cd %s && mkdir etc.new && echo b > etc.new/c.yaml && mv etc etc.old && mv etc.new etc",
	   base);
	assert_true(noticed(&w, &now));
	sh("echo c > %s/etc/c.yaml", base);
	assert_true(by_events(&w));
	/* deleted outright, then made again */
	sh("rm -rf %s/etc", base);
	assert_true(noticed(&w, &now));
	sh("mkdir %s/etc && echo d > %s/etc/c.yaml", base, base);
	assert_true(noticed(&w, &now));
	sh("echo e > %s/etc/c.yaml", base);
	assert_true(by_events(&w));
	cfgwatch_close(&w);
}

/* --config /etc/sluice/current/c.yaml, current -> v1, then current -> v2 (a release
 * switch): no watch on the directories the path names sees the symlink change; the slow
 * look does, and the watches follow to v2. */
static void test_symlinked_directory_swapped(void **st)
{
	struct cfgwatch w;
	unsigned long long now = 1;

	(void)st;
	sh("cd %s && mkdir v1 v2 && echo a > v1/c.yaml && echo b > v2/c.yaml && ln -s v1 current",
	   base);
	assert_true(cfgwatch_open(&w, at("current/c.yaml"), now) >= 0);
	sh("cd %s && ln -s v2 cur.tmp && mv -T cur.tmp current", base);
	assert_true(noticed(&w, &now));
	sh("echo c > %s/v2/c.yaml", base);
	assert_true(by_events(&w));
	assert_false(noticed(&w, &now));
	cfgwatch_close(&w);
}

/* chmod 000 is a change (the reload says it cannot read), and so is the way back. */
static void test_mode_change(void **st)
{
	struct cfgwatch w;
	unsigned long long now = 1;

	(void)st;
	sh("mkdir %s/etc && echo a > %s/etc/c.yaml", base, base);
	assert_true(cfgwatch_open(&w, at("etc/c.yaml"), now) >= 0);
	sh("chmod 000 %s/etc/c.yaml", base);
	assert_true(by_events(&w));
	sh("chmod 644 %s/etc/c.yaml", base);
	assert_true(by_events(&w));
	cfgwatch_close(&w);
}

/* A file written in place (cp, a redirect, a slow copy) is a prefix in between, and a
 * prefix is often a valid config with fewer services: it is read only once the writes have
 * stopped for CFGWATCH_SETTLE_NS, and a directory written without end cannot hold a reload
 * back more than CFGWATCH_SETTLE_MAX_NS. */
static void test_read_once_the_writes_stop(void **st)
{
	const unsigned long long ms = 1000000ull, t0 = 5000 * ms;
	unsigned long long now = t0;
	struct cfgwatch w;
	int due = 0;

	(void)st;
	sh("mkdir %s/etc && echo a > %s/etc/c.yaml", base, base);
	assert_true(cfgwatch_open(&w, at("etc/c.yaml"), now) >= 0);
	assert_false(cfgwatch_due(&w, now));
	sh(": > %s/etc/c.yaml", base);                 /* cp: truncated... */
	assert_true(cfgwatch_events(&w, now));
	assert_false(cfgwatch_due(&w, now + 100 * ms)); /* a tick later: still being written */
	sh("echo 'services:' >> %s/etc/c.yaml", base);  /* ...the first half... */
	now += 150 * ms;
	assert_true(cfgwatch_events(&w, now));
	assert_false(cfgwatch_due(&w, now + 100 * ms));
	sh("echo '  - name: web' >> %s/etc/c.yaml", base); /* ...the rest */
	now += 150 * ms;
	assert_true(cfgwatch_events(&w, now));
	assert_false(cfgwatch_due(&w, now + CFGWATCH_SETTLE_NS - 1));
	assert_true(cfgwatch_due(&w, now + CFGWATCH_SETTLE_NS));
	assert_false(cfgwatch_due(&w, now + CFGWATCH_SETTLE_NS + 100 * ms)); /* once */

	/* never quiet: read all the same, CFGWATCH_SETTLE_MAX_NS after the first change */
	now += 10000 * ms;
	for (unsigned long long t = 0; t <= CFGWATCH_SETTLE_MAX_NS && !due; t += 100 * ms) {
		sh("echo x >> %s/etc/other", base);
		assert_true(cfgwatch_events(&w, now + t));
		due = cfgwatch_due(&w, now + t);
		if (due)
			assert_true(t >= CFGWATCH_SETTLE_MAX_NS);
	}
	assert_true(due);

	/* a later change waits the same */
	sh("echo b > %s/etc/c.yaml", base);
	now += 10000 * ms;
	(void)cfgwatch_events(&w, now);
	assert_false(cfgwatch_due(&w, now));
	assert_true(cfgwatch_due(&w, now + CFGWATCH_SETTLE_NS));
	cfgwatch_close(&w);
}

/* What the watch reports is then read as `sluiced --check` reads a file: one larger than
 * --check takes, or a path it cannot read (a directory), is refused with the reason, never
 * started or reloaded as a config --check would not pass. */
static void test_config_read_as_check_reads_it(void **st)
{
	static const char cfg[] = "interface: eth0\nservices: [{ name: a, port: 1 }]\n";
	struct doc_errors errs;
	size_t len = 0;
	char *text;
	FILE *f;

	(void)st;
	f = fopen(at("big.yaml"), "w");
	assert_non_null(f);
	fputs(cfg, f);
	fputc('#', f);
	for (unsigned i = 0; i < DOC_MAX_BYTES; i++)
		fputc('x', f);
	fputc('\n', f);
	assert_int_equal(fclose(f), 0);
	assert_null(daemon_read_config(at("big.yaml"), &len, &errs));
	assert_non_null(strstr(errs.e[0].msg, "too large"));

	sh("mkdir %s/dir.yaml", base);
	assert_null(daemon_read_config(at("dir.yaml"), &len, &errs));
	assert_non_null(strstr(errs.e[0].msg, "cannot read"));

	sh("printf '%s' > %s/ok.yaml", cfg, base);
	text = daemon_read_config(at("ok.yaml"), &len, &errs);
	assert_non_null(text);
	assert_int_equal(len, strlen(cfg));
	assert_string_equal(text, cfg);
	assert_int_equal(errs.n, 0);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_in_place_edit_and_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_configmap_data_swap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_to_a_file_elsewhere, setup, teardown),
		cmocka_unit_test_setup_teardown(test_directory_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlinked_directory_swapped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mode_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_once_the_writes_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_read_as_check_reads_it, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
