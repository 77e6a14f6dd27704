// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the daemon's side of the switches (user/ops/switchstate.c) with a temp state dir and
 * a fake wall clock: pick-up of a saved file, expiry (file rewritten, audit record, report),
 * damaged files (all admit + one error per change), the cascade-clear request file. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/audit.h"
#include "ops/switches.h"
#include "ops/switchstate.h"

#define T0 1714564800ull /* 2024-05-01T12:00:00Z: the fake clock's start */

static const char *const known[] = { "web", "api" };

struct ctx {
	char dir[64];
	char sw[128], audit[128];
	struct switch_state st;
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	snprintf(c->dir, sizeof(c->dir), "/tmp/sluice-test-swst-XXXXXX");
	if (!mkdtemp(c->dir))
		return -1;
	snprintf(c->sw, sizeof(c->sw), "%s/%s", c->dir, SW_FILE_NAME);
	snprintf(c->audit, sizeof(c->audit), "%s/%s", c->dir, AUDIT_FILE_NAME);
	switch_state_init(&c->st);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	DIR *d = opendir(c->dir);
	struct dirent *e;
	char p[512];

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", c->dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(c->dir);
	free(c);
	return 0;
}

static void mk(struct sw_switch *sw, const char *svc, const char *cls, const char *pct,
	       const char *ttl, uint64_t now)
{
	char err[256];
	if (sw_make(sw, svc, cls, pct, "INC-42 payment slow", ttl, "alice", now, known, 2, err,
		    sizeof(err)))
		fail_msg("sw_make failed: %s", err);
}

/* Save a set made of the given switches (as sluicectl would). */
static void save(struct ctx *c, const struct sw_switch *sws, int n)
{
	struct sw_set *s = malloc(sizeof(*s));
	char err[256];

	assert_non_null(s);
	sw_set_init(s);
	for (int i = 0; i < n; i++)
		assert_true(sw_set_put(s, &sws[i], NULL) >= 0);
	if (sw_save(c->sw, s, err, sizeof(err)))
		fail_msg("sw_save: %s", err);
	free(s);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, ch;

	if (!f)
		return -1;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

static void test_missing_file_admits_all(void **state)
{
	struct ctx *c = *state;
	char err[512];

	assert_int_equal(switch_state_poll(&c->st, c->dir, T0, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(c->st.set.n, 0);
	assert_int_equal(c->st.corrupt, 0);
	for (int k = 0; k < 4; k++)
		assert_int_equal(switch_state_admit(&c->st, "web", k, T0), SLUICE_PROB_ONE);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 1, err, sizeof(err)), 0);
}

static void test_poll_picks_up_saved_file(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw[2];
	char err[512];

	assert_int_equal(switch_state_poll(&c->st, c->dir, T0, err, sizeof(err)), 0);
	mk(&sw[0], "web", "L3", "30", "1h", T0);
	mk(&sw[1], "api", "L2", "100", "1h", T0);
	save(c, sw, 2);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 1, err, sizeof(err)), 1);
	assert_int_equal(c->st.set.n, 2);
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0 + 1), 45875); /* OPERATIONS.md */
	assert_int_equal(switch_state_admit(&c->st, "api", 2, T0 + 1), 0);
	assert_int_equal(switch_state_admit(&c->st, "web", 0, T0 + 1), SLUICE_PROB_ONE);
	assert_int_equal(switch_state_admit(&c->st, "nosuch", 3, T0 + 1), SLUICE_PROB_ONE);
	/* unchanged file: nothing to do */
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 2, err, sizeof(err)), 0);
	assert_int_equal(c->st.n_expired, 0);
	/* a replacement is picked up */
	mk(&sw[0], "web", "L3", "100", "2h", T0 + 3);
	save(c, sw, 1);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 4, err, sizeof(err)), 1);
	assert_int_equal(c->st.set.n, 1);
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0 + 4), 0);
	assert_int_equal(switch_state_admit(&c->st, "api", 2, T0 + 4), SLUICE_PROB_ONE);
	/* removal of the file: back to normal */
	unlink(c->sw);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 5, err, sizeof(err)), 1);
	assert_int_equal(c->st.set.n, 0);
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0 + 5), SLUICE_PROB_ONE);
}

static void test_expiry_rewrites_file_and_audits(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw[2];
	struct sw_set *left = malloc(sizeof(*left));
	struct audit_entry e;
	char err[512], line[2048];
	struct stat st;
	FILE *f;

	assert_non_null(left);
	mk(&sw[0], "web", "L3", "50", "10m", T0);
	mk(&sw[1], "api", "L1", "20", "1h", T0);
	save(c, sw, 2);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0, err, sizeof(err)), 1);
	/* one second before expiry: still shedding, nothing swept */
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 599, err, sizeof(err)), 0);
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0 + 599), SLUICE_PROB_ONE / 2);
	assert_int_equal(count_lines(c->audit), -1);
	/* at expires_at: admitted even before the sweep ... */
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0 + 600), SLUICE_PROB_ONE);
	/* ... and the sweep removes it from the file, audits it and reports it */
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 600, err, sizeof(err)), 1);
	assert_string_equal(err, "");
	assert_int_equal(c->st.n_expired, 1);
	assert_string_equal(c->st.expired[0].service, "web");
	assert_int_equal(c->st.expired[0].class, 3);
	assert_int_equal(c->st.set.n, 1);
	assert_int_equal(sw_load(c->sw, left, err, sizeof(err)), 0);
	assert_int_equal(left->n, 1);
	assert_string_equal(left->sw[0].service, "api");
	assert_int_equal(switch_state_admit(&c->st, "api", 1, T0 + 600), 52429);

	assert_int_equal(count_lines(c->audit), 1);
	f = fopen(c->audit, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_int_equal(audit_parse_line(line, &e, err, sizeof(err)), 0);
	assert_string_equal(e.command, "expire");
	assert_string_equal(e.user, "sluiced");
	assert_string_equal(e.service, "web");
	assert_int_equal(e.class, 3);
	assert_int_equal(e.time, T0 + 600);
	assert_true(e.old.present);
	assert_int_equal(e.old.shed_pct, 50);
	assert_false(e.new.present);
	assert_int_equal(stat(c->audit, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	assert_int_equal(stat(c->sw, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);

	/* our own rewrite is not reported again as a change; nothing more to expire */
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 601, err, sizeof(err)), 0);
	assert_int_equal(c->st.n_expired, 0);
	assert_int_equal(count_lines(c->audit), 1);
	/* the second one expires later */
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 3600, err, sizeof(err)), 1);
	assert_int_equal(c->st.n_expired, 1);
	assert_string_equal(c->st.expired[0].service, "api");
	assert_int_equal(count_lines(c->audit), 2);
	assert_int_equal(sw_load(c->sw, left, err, sizeof(err)), 0);
	assert_int_equal(left->n, 0);
	free(left);
}

/* Expiry re-reads the file under the lock: a switch another writer added since the last
 * poll survives the sweep. */
static void test_expiry_keeps_concurrent_changes(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw[2];
	struct sw_set *left = malloc(sizeof(*left));
	char err[512];

	assert_non_null(left);
	mk(&sw[0], "web", "L3", "50", "1m", T0);
	save(c, sw, 1);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0, err, sizeof(err)), 1);
	mk(&sw[1], "api", "L2", "10", "1h", T0 + 30);
	save(c, sw, 2);
	/* the poll at expiry sees both the change and the expiry */
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 60, err, sizeof(err)), 1);
	assert_int_equal(c->st.n_expired, 1);
	assert_int_equal(sw_load(c->sw, left, err, sizeof(err)), 0);
	assert_int_equal(left->n, 1);
	assert_string_equal(left->sw[0].service, "api");
	assert_int_equal(c->st.set.n, 1);
	assert_int_equal(count_lines(c->audit), 1);
	free(left);
}

static void test_corrupt_file_admits_all_and_reports_once(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw[1];
	char err[512];

	mk(&sw[0], "web", "L3", "100", "1h", T0);
	save(c, sw, 1);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0, err, sizeof(err)), 1);
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0), 0);

	write_file(c->sw, "{\"version\": 1, \"switches\": [ {\"service\": \"web\"");
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ERROR: switch file"));
	assert_non_null(strstr(err, "NO switches are in force"));
	assert_true(c->st.corrupt);
	assert_int_equal(c->st.set.n, 0);
	for (int k = 0; k < 4; k++) {
		assert_int_equal(switch_state_admit(&c->st, "web", k, T0 + 1), SLUICE_PROB_ONE);
		assert_int_equal(switch_state_admit(&c->st, "api", k, T0 + 1), SLUICE_PROB_ONE);
	}
	/* same damaged file: no new error (the caller logs once per change) */
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 2, err, sizeof(err)), 0);
	assert_true(c->st.corrupt);
	/* the daemon never overwrites or moves a damaged file */
	assert_int_equal(access(c->sw, F_OK), 0);
	/* a different damage is reported again */
	write_file(c->sw, "   \n");
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 3, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "empty"));
	/* repaired: picked up */
	save(c, sw, 1);
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0 + 4, err, sizeof(err)), 1);
	assert_false(c->st.corrupt);
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0 + 4), 0);
}

static void test_corrupt_at_start(void **state)
{
	struct ctx *c = *state;
	char err[512];

	write_file(c->sw, "{\"version\": 2, \"switches\": []}");
	assert_int_equal(switch_state_poll(&c->st, c->dir, T0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "corrupt"));
	assert_int_equal(switch_state_admit(&c->st, "web", 3, T0), SLUICE_PROB_ONE);
	assert_int_equal(count_lines(c->audit), -1);
}

static void test_cascade_clear_request(void **state)
{
	struct ctx *c = *state;
	char who[256], err[256], p[256];

	assert_int_equal(cascade_clear_requested(c->dir, who, sizeof(who)), 0);
	assert_int_equal(cascade_clear_request(c->dir, "alice", 1000, T0, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/%s", c->dir, CASCADE_CLEAR_FILE);
	assert_int_equal(access(p, F_OK), 0);
	assert_int_equal(cascade_clear_requested(c->dir, who, sizeof(who)), 1);
	assert_string_equal(who, "user alice uid 1000 time 2024-05-01T12:00:00Z");
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(cascade_clear_requested(c->dir, who, sizeof(who)), 0);
	assert_int_equal(cascade_clear_requested(c->dir, NULL, 0), 0);
}

static void test_state_dir_ensure(void **state)
{
	struct ctx *c = *state;
	char p[256], err[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/a", c->dir);
	snprintf(p + strlen(p), sizeof(p) - strlen(p), "/b");
	assert_int_equal(state_dir_ensure(p, err, sizeof(err)), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0755);
	assert_int_equal(state_dir_ensure(p, err, sizeof(err)), 0);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/a", c->dir);
	rmdir(p);
	/* a file where the directory should be */
	write_file(c->sw, "x");
	assert_int_equal(state_dir_ensure(c->sw, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a directory"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_missing_file_admits_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_poll_picks_up_saved_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry_rewrites_file_and_audits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry_keeps_concurrent_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_file_admits_all_and_reports_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_at_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cascade_clear_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_ensure, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
