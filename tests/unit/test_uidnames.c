// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the operators' user names (user/daemon/uidnames.c), with a password database
 * of the test's own making behind uidn_lookup. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static struct uid_names *start(void)
{
	struct uid_names *t = calloc(1, sizeof(*t));
	char err[128];

	assert_non_null(t);
	uidn_lookup = test_lookup;
	assert_int_equal(uidn_start(t, "", err, sizeof(err)), 0);
	return t;
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_uid_is_named_by_number),
		cmocka_unit_test(test_refresh_takes_a_rename),
		cmocka_unit_test(test_refresh_with_the_directory_down_keeps_the_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
