// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the operators' user names (user/daemon/uidnames.c), with a password database
 * of the test's own making behind uidn_lookup. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/uidnames.h"

/* The database: uid 1000 is called db_name, or is not found while db_down; its lookups are
 * counted. */
static pthread_mutex_t db_mu = PTHREAD_MUTEX_INITIALIZER;
static char db_name[UIDN_NAME_LEN];
static int db_down, db_lookups;

static int test_lookup(uint32_t uid, char *name, size_t len)
{
	int rc = -1;

	pthread_mutex_lock(&db_mu);
	db_lookups += uid == 1000;
	if (uid == 1000 && !db_down) {
		snprintf(name, len, "%s", db_name);
		rc = 0;
	}
	pthread_mutex_unlock(&db_mu);
	return rc;
}

static void db_set(const char *name, int down)
{
	pthread_mutex_lock(&db_mu);
	snprintf(db_name, sizeof(db_name), "%s", name);
	db_down = down;
	pthread_mutex_unlock(&db_mu);
}

static int lookups(void)
{
	int n;

	pthread_mutex_lock(&db_mu);
	n = db_lookups;
	pthread_mutex_unlock(&db_mu);
	return n;
}

/* The group database: "sluice-t-ops" is gid 4000 and "sluice-t-ops2" gid 4001, no other
 * group exists; while grp_down every lookup fails (EIO); while grp_held a lookup waits for
 * the test (a directory that takes its time). Lookups are counted. */
static pthread_cond_t grp_cv = PTHREAD_COND_INITIALIZER;
static int grp_down, grp_held, grp_lookups, grp_waiting;

static int test_group_lookup(const char *group, uint32_t *gid)
{
	int rc = ENOENT;

	pthread_mutex_lock(&db_mu);
	grp_lookups++;
	grp_waiting++;
	pthread_cond_broadcast(&grp_cv);
	while (grp_held)
		pthread_cond_wait(&grp_cv, &db_mu);
	grp_waiting--;
	if (grp_down) {
		rc = EIO;
	} else if (!strcmp(group, "sluice-t-ops") || !strcmp(group, "sluice-t-ops2")) {
		*gid = strcmp(group, "sluice-t-ops") ? 4001 : 4000;
		rc = 0;
	}
	pthread_mutex_unlock(&db_mu);
	return rc;
}

static void grp_set(int down, int held)
{
	pthread_mutex_lock(&db_mu);
	grp_down = down;
	grp_held = held;
	pthread_cond_broadcast(&grp_cv);
	pthread_mutex_unlock(&db_mu);
}

static int grp_count(void)
{
	int n;

	pthread_mutex_lock(&db_mu);
	n = grp_lookups;
	pthread_mutex_unlock(&db_mu);
	return n;
}

/* Until a lookup of a group sits in the held database: 0, or -1 after 5 s. */
static int grp_lookup_waits(void)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&db_mu);
	while (!grp_waiting && rc == 0)
		rc = pthread_cond_timedwait(&grp_cv, &db_mu, &until);
	pthread_mutex_unlock(&db_mu);
	return grp_waiting ? 0 : -1;
}

/* Until uidn_group() gives state for group: 0, or -1 after 5 s. The answers it was told to
 * log are counted in says. */
static int says;

static int group_within(struct uid_names *t, const char *group, int state, uint32_t *gid)
{
	char why[128];
	int say;

	for (int i = 0; i < 5000; i++) {
		int got = uidn_group(t, group, gid, why, sizeof(why), &say);

		says += say;
		if (got == state)
			return 0;
		usleep(1000);
	}
	return -1;
}

/* Until the table names uid as want: 0, or -1 after 5 s. */
static int named_within(struct uid_names *t, uint32_t uid, const char *want)
{
	char name[UIDN_NAME_LEN];

	for (int i = 0; i < 5000; i++) {
		uidn_name(t, uid, name, sizeof(name));
		if (!strcmp(name, want))
			return 0;
		usleep(1000);
	}
	return -1;
}

/* Until uid 1000 has been looked up more than n times: 0, or -1 after 5 s. */
static int asked_beyond(int n)
{
	for (int i = 0; i < 5000; i++) {
		if (lookups() > n)
			return 0;
		usleep(1000);
	}
	return -1;
}

static struct uid_names *start_with_group(const char *group)
{
	struct uid_names *t = calloc(1, sizeof(*t));
	char err[128];

	assert_non_null(t);
	uidn_lookup = test_lookup;
	uidn_group_lookup = test_group_lookup;
	assert_int_equal(uidn_start(t, group, err, sizeof(err)), 0);
	return t;
}

static struct uid_names *start(void)
{
	return start_with_group("");
}

static void stop(struct uid_names *t)
{
	uidn_stop(t, 1000);
	free(t);
}

/* Before the thread runs, and for a uid not looked up yet, the name is the uid: nothing
 * waits for the database. */
static void test_unknown_uid_is_named_by_number(void **state)
{
	struct uid_names idle = { 0 }, *t;
	char name[UIDN_NAME_LEN];

	uidn_name(&idle, 1000, name, sizeof(name));
	assert_string_equal(name, "uid1000");
	db_set("alice", 0);
	t = start();
	uidn_name(t, 4321, name, sizeof(name));
	assert_string_equal(name, "uid4321");
	assert_int_equal(named_within(t, 1000, "alice"), 0);
	uidn_name(t, 4321, name, sizeof(name));
	assert_string_equal(name, "uid4321");          /* not in the database: still the uid */
	stop(t);
}

/* A SIGHUP looks the names up again: a renamed user carries the new name. */
static void test_refresh_takes_a_rename(void **state)
{
	struct uid_names *t;

	db_set("alice", 0);
	t = start();
	assert_int_equal(named_within(t, 1000, "alice"), 0);
	db_set("alice.b", 0);
	uidn_refresh(t, "");
	assert_int_equal(named_within(t, 1000, "alice.b"), 0);
	stop(t);
}

/* A directory that does not answer at a SIGHUP does not take the names it gave before. Two
 * refreshes: the second lookup starts once the first one's answer is in the table. */
static void test_refresh_with_the_directory_down_keeps_the_name(void **state)
{
	struct uid_names *t;
	char name[UIDN_NAME_LEN];
	int n;

	db_set("alice", 0);
	t = start();
	assert_int_equal(named_within(t, 1000, "alice"), 0);
	db_set("", 1);
	n = lookups();
	uidn_refresh(t, "");
	assert_int_equal(asked_beyond(n), 0);
	uidn_refresh(t, "");
	assert_int_equal(asked_beyond(n + 1), 0);
	uidn_name(t, 1000, name, sizeof(name));
	assert_string_equal(name, "alice");
	stop(t);
}

/* The switch group's gid is looked up by the thread: the caller is answered at once, "not
 * resolved yet" while the database takes its time, and the gid once it has answered. */
static void test_group_resolved_by_the_thread(void **state)
{
	struct uid_names *t;
	uint32_t gid = 0;
	char why[128];
	int say;

	grp_set(0, 1);
	t = start_with_group("sluice-t-ops");
	assert_int_equal(grp_lookup_waits(), 0);
	assert_int_equal(uidn_group(t, "sluice-t-ops", &gid, why, sizeof(why), &say),
			 UIDN_GROUP_PENDING);
	grp_set(0, 0);
	assert_int_equal(group_within(t, "sluice-t-ops", UIDN_GROUP_FOUND, &gid), 0);
	assert_int_equal(gid, 4000);
	stop(t);
}

/* While a SIGHUP's lookup is under way the gid found before stands for the same name; a new
 * name has none until its own answer comes (the old name's answer, arriving meanwhile, is
 * not taken for it). */
static void test_new_group_name_waits_for_its_own_answer(void **state)
{
	struct uid_names *t;
	uint32_t gid = 0;
	char why[128];
	int say;

	grp_set(0, 0);
	t = start_with_group("sluice-t-ops");
	assert_int_equal(group_within(t, "sluice-t-ops", UIDN_GROUP_FOUND, &gid), 0);
	grp_set(0, 1);
	uidn_refresh(t, "sluice-t-ops");
	assert_int_equal(grp_lookup_waits(), 0);
	assert_int_equal(uidn_group(t, "sluice-t-ops", &gid, why, sizeof(why), &say),
			 UIDN_GROUP_FOUND);
	assert_int_equal(gid, 4000);
	assert_int_equal(uidn_group(t, "sluice-t-ops2", &gid, why, sizeof(why), &say),
			 UIDN_GROUP_PENDING);
	grp_set(0, 0);
	assert_int_equal(group_within(t, "sluice-t-ops2", UIDN_GROUP_FOUND, &gid), 0);
	assert_int_equal(gid, 4001);
	stop(t);
}

/* A database that does not answer, or does not know the group: said (once, for the caller
 * to log) and kept until a SIGHUP; asking again does not look it up again. */
static void test_group_lookup_failure_is_said_once(void **state)
{
	struct uid_names *t;
	uint32_t gid = 0;
	char why[128];
	int say, n;

	grp_set(1, 0);
	says = 0;
	t = start_with_group("sluice-t-ops");
	assert_int_equal(group_within(t, "sluice-t-ops", UIDN_GROUP_FAILED, &gid), 0);
	assert_int_equal(says, 1);
	n = grp_count();
	for (int i = 0; i < 3; i++) {
		assert_int_equal(uidn_group(t, "sluice-t-ops", &gid, why, sizeof(why), &say),
				 UIDN_GROUP_FAILED);
		assert_non_null(strstr(why, strerror(EIO)));
		assert_int_equal(say, 0);
	}
	assert_int_equal(grp_count(), n);
	grp_set(0, 0);
	assert_int_equal(group_within(t, "sluice-t-none", UIDN_GROUP_MISSING, &gid), 0);
	assert_int_equal(says, 2);
	assert_int_equal(uidn_group(t, "sluice-t-none", &gid, why, sizeof(why), &say),
			 UIDN_GROUP_MISSING);
	assert_string_equal(why, "no such group");
	uidn_refresh(t, "sluice-t-ops");
	assert_int_equal(group_within(t, "sluice-t-ops", UIDN_GROUP_FOUND, &gid), 0);
	stop(t);
}

/* Without the thread nobody is let in by the group: the state says it cannot be looked up. */
static void test_group_without_the_thread_fails(void **state)
{
	struct uid_names idle = { 0 };
	uint32_t gid = 0;
	char why[128];
	int say;

	assert_int_equal(uidn_group(&idle, "sluice-t-ops", &gid, why, sizeof(why), &say),
			 UIDN_GROUP_FAILED);
	assert_non_null(strstr(why, "not running"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_uid_is_named_by_number),
		cmocka_unit_test(test_refresh_takes_a_rename),
		cmocka_unit_test(test_refresh_with_the_directory_down_keeps_the_name),
		cmocka_unit_test(test_group_resolved_by_the_thread),
		cmocka_unit_test(test_new_group_name_waits_for_its_own_answer),
		cmocka_unit_test(test_group_lookup_failure_is_said_once),
		cmocka_unit_test(test_group_without_the_thread_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
