// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* User names for operators' uids, off the control loop. See uidnames.h. */
#include "daemon/uidnames.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

/* A database entry bigger than this is no user sluice should name. */
#define UIDN_BUF_MAX (1 << 20)

static int lookup_passwd(uint32_t uid, char *name, size_t len)
{
	size_t size = 16384;
	int rc = ERANGE, ok = 0;

	while (rc == ERANGE && size <= UIDN_BUF_MAX) {
		char *buf = malloc(size);
		struct passwd pw, *res = NULL;

		if (!buf)
			return -1;
		rc = getpwuid_r((uid_t)uid, &pw, buf, size, &res);
		if (rc == 0 && res && res->pw_name && res->pw_name[0]) {
			snprintf(name, len, "%s", res->pw_name);
			ok = 1;
		}
		free(buf);
		size *= 2;
	}
	return ok ? 0 : -1;
}

int (*uidn_lookup)(uint32_t uid, char *name, size_t len) = lookup_passwd;

static int lookup_group(const char *group, uint32_t *gid)
{
	size_t size = 16384;
	int rc = ERANGE;

	while (rc == ERANGE && size <= UIDN_BUF_MAX) {
		char *buf = malloc(size);
		struct group gr, *res = NULL;

		if (!buf)
			return ENOMEM;
		rc = getgrnam_r(group, &gr, buf, size, &res);
		if (rc == 0 && res)
			*gid = (uint32_t)res->gr_gid;
		else if (rc == 0 || rc == ESRCH || rc == EBADF || rc == EPERM)
			rc = ENOENT;   /* the ways getgrnam_r(3) says the name is not there */
		free(buf);
		size *= 2;
	}
	return rc;
}

int (*uidn_group_lookup)(const char *group, uint32_t *gid) = lookup_group;

static struct uidn_entry *find(struct uid_names *t, uint32_t uid)
{
	for (int i = 0; i < t->n; i++)
		if (t->e[i].uid == uid)
			return &t->e[i];
	return NULL;
}

/* A new entry for uid (not named yet); when the table is full, one is taken round the table. */
static struct uidn_entry *add(struct uid_names *t, uint32_t uid)
{
	struct uidn_entry *e;

	if (t->n < UIDN_MAX) {
		e = &t->e[t->n++];
	} else {
		e = &t->e[t->next_evict];
		t->next_evict = (t->next_evict + 1) % UIDN_MAX;
	}
	memset(e, 0, sizeof(*e));
	e->uid = uid;
	return e;
}

/* An answer of the database, into the table (t->mu held). A failed lookup keeps the name the
 * table had: a directory that does not answer at a SIGHUP does not unname the operators. */
static void store(struct uid_names *t, uint32_t uid, const char *name)
{
	struct uidn_entry *e = find(t, uid);

	if (!name)
		return;
	if (!e)
		e = add(t, uid);
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->named = 1;
}

/* The members of group (its supplementary members, as the group database lists them) into
 * the table, as long as it is under half full: the rest is for the callers seen. */
static void add_members(struct uid_names *t, const char *group)
{
	size_t size = 16384;
	char *buf = NULL, **names = NULL;
	struct group gr, *res = NULL;
	int rc = ERANGE, n = 0;

	while (rc == ERANGE && size <= UIDN_BUF_MAX) {
		free(buf);
		buf = malloc(size);
		if (!buf)
			return;
		rc = getgrnam_r(group, &gr, buf, size, &res);
		size *= 2;
	}
	if (rc || !res) {
		free(buf);
		return;
	}
	for (names = res->gr_mem; names && names[n] && n < UIDN_MAX / 2; n++) {
		char pbuf[16384];
		struct passwd pw, *pres = NULL;

		if (getpwnam_r(names[n], &pw, pbuf, sizeof(pbuf), &pres) || !pres)
			continue;
		pthread_mutex_lock(&t->mu);
		if (t->n < UIDN_MAX / 2 || find(t, (uint32_t)pres->pw_uid))
			store(t, (uint32_t)pres->pw_uid, pres->pw_name);
		pthread_mutex_unlock(&t->mu);
	}
	free(buf);
}

/* Look group's gid up and keep the answer, unless the name was changed meanwhile (its own
 * lookup is then waiting: an answer for the old name must not stand for the new one). */
static void resolve_group(struct uid_names *t, const char *group)
{
	uint32_t gid = 0;
	int rc = uidn_group_lookup(group, &gid);

	pthread_mutex_lock(&t->mu);
	if (!strcmp(t->group, group)) {
		memset(&t->g, 0, sizeof(t->g));
		snprintf(t->g.name, sizeof(t->g.name), "%s", group);
		t->g.gid = gid;
		t->g.state = rc == 0 ? UIDN_GROUP_FOUND : rc == ENOENT ? UIDN_GROUP_MISSING
			   : UIDN_GROUP_FAILED;
		snprintf(t->g.why, sizeof(t->g.why), "%s", rc == ENOENT ? "no such group"
			 : strerror(rc));
	}
	pthread_mutex_unlock(&t->mu);
}

static void *resolver_main(void *arg)
{
	struct uid_names *t = arg;
	uint32_t uids[UIDN_MAX];
	char group[sizeof(t->group)], name[UIDN_NAME_LEN];

	pthread_mutex_lock(&t->mu);
	while (!t->stop) {
		int n = 0, refresh = t->refresh, group_wanted = t->refresh || t->group_wanted;

		if (!t->refresh && !t->wanted && !t->group_wanted) {
			pthread_cond_wait(&t->cv, &t->mu);
			continue;
		}
		t->refresh = 0;
		t->wanted = 0;
		t->group_wanted = 0;
		snprintf(group, sizeof(group), "%s", t->group);
		for (int i = 0; i < t->n; i++)
			if (refresh || !t->e[i].named)
				uids[n++] = t->e[i].uid;
		pthread_mutex_unlock(&t->mu);
		/* the lookups, with the table free for the control loop to read; the gid first:
		 * operators wait for it, not for their names */
		if (group_wanted && group[0]) {
			resolve_group(t, group);
			add_members(t, group);
		}
		for (int i = 0; i < n; i++) {
			int rc = uidn_lookup(uids[i], name, sizeof(name));

			pthread_mutex_lock(&t->mu);
			store(t, uids[i], rc ? NULL : name);
			pthread_mutex_unlock(&t->mu);
		}
		pthread_mutex_lock(&t->mu);
	}
	t->exited = 1;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

int uidn_start(struct uid_names *t, const char *group, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	snprintf(t->group, sizeof(t->group), "%s", group);
	add(t, 0);                     /* root, who may act without a name of its choosing */
	t->refresh = 1;
	if (pthread_create(&t->thread, NULL, resolver_main, t)) {
		snprintf(err, errlen, "cannot start the user name thread");
		return -1;
	}
	t->started = 1;
	return 0;
}

void uidn_stop(struct uid_names *t, int wait_ms)
{
	struct timespec until;
	int done;

	if (!t->started)
		return;
	clock_deadline(CLOCK_REALTIME, (unsigned long long)wait_ms * 1000000ull, &until);
	pthread_mutex_lock(&t->mu);
	t->stop = 1;
	pthread_cond_broadcast(&t->cv);
	while (!t->exited)
		if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT)
			break;
	done = t->exited;
	pthread_mutex_unlock(&t->mu);
	if (done)
		pthread_join(t->thread, NULL);
	else
		pthread_detach(t->thread);   /* stuck in the database: the process is ending */
	t->started = 0;
}

void uidn_name(struct uid_names *t, uint32_t uid, char *name, size_t len)
{
	struct uidn_entry *e;

	snprintf(name, len, "uid%u", (unsigned)uid);
	if (!t->started)
		return;
	pthread_mutex_lock(&t->mu);
	e = find(t, uid);
	if (e && e->named) {
		snprintf(name, len, "%s", e->name);
	} else {
		if (!e)
			add(t, uid);
		t->wanted = 1;
		pthread_cond_signal(&t->cv);
	}
	pthread_mutex_unlock(&t->mu);
}

void uidn_refresh(struct uid_names *t, const char *group)
{
	if (!t->started)
		return;
	pthread_mutex_lock(&t->mu);
	snprintf(t->group, sizeof(t->group), "%s", group);
	t->refresh = 1;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

int uidn_group(struct uid_names *t, const char *group, uint32_t *gid, char *why, size_t len,
	       int *say)
{
	int state;

	*say = 0;
	if (!t->started) {
		snprintf(why, len, "the thread that looks it up is not running");
		return UIDN_GROUP_FAILED;
	}
	pthread_mutex_lock(&t->mu);
	if (strcmp(t->g.name, group)) {
		state = UIDN_GROUP_PENDING;
		if (strcmp(t->group, group)) {
			snprintf(t->group, sizeof(t->group), "%s", group);
			t->group_wanted = 1;
			pthread_cond_signal(&t->cv);
		}
	} else {
		state = t->g.state;
		*gid = t->g.gid;
		snprintf(why, len, "%s", t->g.why);
		*say = state != UIDN_GROUP_FOUND && !t->g.said;
		t->g.said = 1;
	}
	pthread_mutex_unlock(&t->mu);
	return state;
}
