// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: sluiced's file writer thread (user/daemon/iowriter.c) on a temp state dir: the
 * first read, a job (file and audit), a direct edit (audited as a diff), expiry (file
 * rewritten, audit record, report), a damaged file (all admit, loudly), and a stalled audit log
 * (a FIFO nobody reads): taking the news never waits, the job stays unfinished. Plus the state
 * directory helper (user/ops/switchstate.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/audit.h"
#include "ops/switches.h"
#include "ops/switchstate.h"
#include "daemon/iowriter.h"
#include "daemon/uidnames.h"
#include "common/clock.h"

#define T0 1714564800ull /* 2024-05-01T12:00:00Z: the fake clock's start */

static const char *const known[] = { "web", "api" };

struct ctx {
	char dir[64];
	char sw[128], audit[128];
	struct iowriter w;
	struct iow_news news;
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
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	DIR *d;

	iow_stop(&c->w, 1000);
	d = opendir(c->dir);
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


/* Wait up to 3 s for the writer to finish job seq; 0 when it did. */
static int wait_done(struct ctx *c, uint64_t seq)
{
	for (int i = 0; i < 300; i++) {
		uint64_t done;
		unsigned long long busy;
		int q;

		iow_progress(&c->w, &done, &busy, &q);
		if (done >= seq)
			return 0;
		usleep(10000);
	}
	return -1;
}

/* Wait up to 3 s for news with a set (what the tick would adopt). */
static int wait_set(struct ctx *c, uint64_t sent)
{
	for (int i = 0; i < 300; i++) {
		iow_take(&c->w, sent, &c->news);
		if (c->news.have_set)
			return 0;
		usleep(10000);
	}
	return -1;
}

/* Wait up to 3 s for the writer to finish a job with nothing to do: it has looked at the
 * file at least once since now. */
static void look_again(struct ctx *c)
{
	uint64_t seq = iow_enqueue(&c->w, NULL, 0, NULL, 0);

	assert_true(seq > 0);
	assert_int_equal(wait_done(c, seq), 0);
}

/* Wait up to 5 s for the audit log to hold n lines; returns how many it held last. */
static int wait_audit_lines(struct ctx *c, int n)
{
	int got = count_lines(c->audit);

	for (int i = 0; i < 500 && got < n; i++) {
		usleep(10000);
		got = count_lines(c->audit);
	}
	return got;
}

/* Wait up to 5 s for the switch file to hold n switches (read into onfile); 0 when it did. */
static int wait_on_file(struct ctx *c, struct sw_set *onfile, int n)
{
	char err[256];

	for (int i = 0; i < 500; i++) {
		if (sw_load(c->sw, onfile, err, sizeof(err)) == 0 && onfile->n == n)
			return 0;
		usleep(10000);
	}
	return -1;
}

static uint64_t wall(void)
{
	return (uint64_t)time(NULL);
}

/* A change that sets service's class cls to shed pct for an hour (as a `switch set` job). */
static void set_change(struct iow_change *ch, const char *service, int cls, const char *pct)
{
	char name[4];

	snprintf(name, sizeof(name), "L%d", cls);
	mk(&ch->sw, service, name, pct, "1h", wall());
	snprintf(ch->service, sizeof(ch->service), "%s", service);
	ch->cls = cls;
	ch->present = 1;
}

/* A job setting service's class cls to shed pct, which the writer finishes but reports
 * failed (its save refused). */
static void refused_job(struct ctx *c, const char *service, int cls, const char *pct)
{
	struct iow_change *ch = calloc(1, sizeof(*ch));
	uint64_t seq;

	set_change(ch, service, cls, pct);
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	assert_int_equal(iow_job_failed(&c->w, seq, NULL, 0), 1);
}

/* The switch file holds sw, web's L3 shed pct for an hour, and the writer starts on it. */
static void start_on_web_l3(struct ctx *c, const char *pct, struct sw_switch *sw)
{
	char err[256];

	mk(sw, "web", "L3", pct, "1h", wall());
	save(c, sw, 1);
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
}

/* Refuse the next job's save: the switch file's lock is a directory (even root fails). */
static void refuse_saves(const struct ctx *c, char *lock, size_t len)
{
	snprintf(lock, len, "%s.lock", c->sw);
	assert_int_equal(mkdir(lock, 0700), 0);
}

/* Refuse the next save its temp file: a directory stands at the name it would take. */
static void refuse_temp_files(const struct ctx *c, char *tmp, size_t len)
{
	snprintf(tmp, len, "%s.tmp.%ld", c->sw, (long)getpid());
	assert_int_equal(mkdir(tmp, 0700), 0);
}

static void test_first_read(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw;

	start_on_web_l3(c, "40", &sw);
	/* iow_start waited for the first read: the news is there at once */
	iow_take(&c->w, 0, &c->news);
	assert_true(c->news.have_set);
	assert_false(c->news.external);
	assert_int_equal(c->news.set.n, 1);
	assert_int_equal(c->news.set.sw[0].shed_pct, 40);
	assert_int_equal(count_lines(c->audit), -1);   /* reading audits nothing */
}

static void test_job_writes_file_and_audit(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	struct audit_entry *au = calloc(1, sizeof(*au));
	struct sw_set *s = malloc(sizeof(*s));
	char err[256];
	uint64_t seq;

	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	set_change(ch, "web", 2, "70");
	audit_entry_make(au, wall(), 1000, "alice", "switch set", "web", 2, NULL, &ch->sw, NULL);
	seq = iow_enqueue(&c->w, ch, 1, au, 1);
	assert_true(seq > 0);
	assert_int_equal(wait_done(c, seq), 0);
	assert_int_equal(sw_load(c->sw, s, err, sizeof(err)), 0);
	assert_int_equal(s->n, 1);
	assert_int_equal(s->sw[0].shed_pct, 70);
	assert_int_equal(count_lines(c->audit), 1);
	assert_int_equal(wait_set(c, seq), 0);
	assert_int_equal(c->news.set.n, 1);
	assert_false(c->news.external);
	/* news older than a job still queued is not handed out */
	iow_take(&c->w, seq + 1, &c->news);
	assert_false(c->news.have_set);
	free(s);
}

static int named_4242(uint32_t uid, char *name, size_t len)
{
	if (uid != 4242)
		return -1;
	snprintf(name, len, "alice");
	return 0;
}

/* The control loop names a caller the names' thread has not looked up yet "uidN" (it never
 * waits for the password database); the writer, which may wait, puts the name in the log.
 * A name root gave (sudo's user) and a uid the database does not know stay as they are. */
static void test_audit_names_the_caller(void **state)
{
	struct ctx *c = *state;
	int (*real_lookup)(uint32_t, char *, size_t) = uidn_lookup;
	struct audit_entry *au = calloc(3, sizeof(*au));
	char err[256], line[2048];
	FILE *f;
	uint64_t seq;

	uidn_lookup = named_4242;
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	audit_entry_make(&au[0], wall(), 4242, "uid4242", "cascade clear", "", -1, NULL, NULL,
			 "INC-1");
	audit_entry_make(&au[1], wall(), 0, "uid4242", "cascade clear", "", -1, NULL, NULL,
			 "INC-2");
	audit_entry_make(&au[2], wall(), 4343, "uid4343", "cascade clear", "", -1, NULL, NULL,
			 "INC-3");
	seq = iow_enqueue(&c->w, NULL, 0, au, 3);
	assert_true(seq > 0);
	assert_int_equal(wait_done(c, seq), 0);
	uidn_lookup = real_lookup;
	f = fopen(c->audit, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	assert_non_null(strstr(line, "\"uid\":4242,\"user\":\"alice\""));
	assert_non_null(fgets(line, sizeof(line), f));
	assert_non_null(strstr(line, "\"uid\":0,\"user\":\"uid4242\""));
	assert_non_null(fgets(line, sizeof(line), f));
	assert_non_null(strstr(line, "\"uid\":4343,\"user\":\"uid4343\""));
	fclose(f);
}

static void test_direct_edit_audited_as_diff(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw[2];
	struct audit_entry e;
	char err[256], line[2048];
	FILE *f;

	start_on_web_l3(c, "100", &sw[0]);
	iow_take(&c->w, 0, &c->news);
	sw[0].shed_pct = 50;
	mk(&sw[1], "api", "L1", "10", "1h", wall());
	usleep(20000);   /* a new mtime even on coarse clocks */
	save(c, sw, 2);
	assert_int_equal(wait_set(c, 0), 0);
	assert_true(c->news.external);
	assert_int_equal(c->news.set.n, 2);
	assert_int_equal(wait_audit_lines(c, 2), 2);
	f = fopen(c->audit, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		assert_int_equal(audit_parse_line(line, &e, err, sizeof(err)), 0);
		assert_string_equal(e.user, "file");
		assert_string_equal(e.command, "file edit");
		if (!strcmp(e.service, "web")) {
			assert_true(e.old.present && e.new.present);
			assert_int_equal(e.old.shed_pct, 100);
			assert_int_equal(e.new.shed_pct, 50);
		} else {
			assert_false(e.old.present);
			assert_int_equal(e.new.shed_pct, 10);
		}
	}
	fclose(f);
}

/* An edit immediately followed by a job: the job must not swallow the edit unaudited. */
static void test_edit_then_job(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	struct sw_switch sw;
	char line[2048], first[2048] = "";
	uint64_t seq;
	FILE *f;
	int n = 0;

	start_on_web_l3(c, "100", &sw);
	usleep(20000);
	sw.shed_pct = 30;
	save(c, &sw, 1);                  /* the edit ... */
	set_change(ch, "api", 1, "10");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);   /* ... and a job right behind it */
	assert_int_equal(wait_done(c, seq), 0);
	f = fopen(c->audit, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (n++ == 0)
			snprintf(first, sizeof(first), "%s", line);
	fclose(f);
	assert_int_equal(n, 1);
	assert_non_null(strstr(first, "\"command\":\"file edit\""));
	assert_non_null(strstr(first, "\"shed_pct\":30"));
}

/* 1 when /proc/locks shows someone waiting for a lock on inode ino. */
static int lock_waited_on(ino_t ino)
{
	char line[256], tag[32];
	FILE *f = fopen("/proc/locks", "r");
	int found = 0;

	snprintf(tag, sizeof(tag), ":%lu ", (unsigned long)ino);
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "->") && strstr(line, tag);
	if (f)
		fclose(f);
	return found;
}

/* An edit made after the writer's last look, while its job waits for the lock (another
 * writer holds it): the job reads the edited file under the lock. It must audit the edit
 * before building on it, not take it into its save without a record. */
static void test_edit_while_job_waits_for_lock(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	struct audit_entry e;
	struct sw_switch sw;
	char err[256], line[2048], lockp[160];
	struct stat st;
	uint64_t seq;
	int fd, n = 0, waited = 0;
	FILE *f;

	start_on_web_l3(c, "100", &sw);
	fd = sw_lock(c->sw, err, sizeof(err));
	assert_true(fd >= 0);
	snprintf(lockp, sizeof(lockp), "%s.lock", c->sw);
	assert_int_equal(stat(lockp, &st), 0);
	set_change(ch, "api", 1, "10");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	for (int i = 0; i < 300 && !waited; i++) {       /* the job has looked and now waits */
		waited = lock_waited_on(st.st_ino);
		if (!waited)
			usleep(10000);
	}
	assert_true(waited);
	sw.shed_pct = 30;
	save(c, &sw, 1);                                  /* the edit, unseen by that look */
	sw_unlock(fd);
	assert_int_equal(wait_done(c, seq), 0);
	f = fopen(c->audit, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		assert_int_equal(audit_parse_line(line, &e, err, sizeof(err)), 0);
		n++;
	}
	fclose(f);
	assert_int_equal(n, 1);
	assert_string_equal(e.command, "file edit");
	assert_string_equal(e.service, "web");
	assert_int_equal(e.old.shed_pct, 100);
	assert_int_equal(e.new.shed_pct, 30);
}

static void test_expiry_rewrites_file_and_audits(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw[2];
	struct sw_set *s = malloc(sizeof(*s));
	char err[256];

	mk(&sw[0], "web", "L3", "100", "1h", wall());
	mk(&sw[1], "api", "L3", "100", "1m", wall() - 3600);   /* expired an hour ago */
	save(c, sw, 2);
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	for (int i = 0; i < 300; i++) {
		iow_take(&c->w, 0, &c->news);
		if (c->news.n_expired)
			break;
		usleep(10000);
	}
	assert_int_equal(c->news.n_expired, 1);
	assert_string_equal(c->news.expired[0].service, "api");
	assert_int_equal(c->news.set.n, 1);
	assert_int_equal(sw_load(c->sw, s, err, sizeof(err)), 0);
	assert_int_equal(s->n, 1);
	assert_string_equal(s->sw[0].service, "web");
	assert_int_equal(wait_audit_lines(c, 1), 1);
	free(s);
}

/* Lower the descriptor limit so that `spare` more opens succeed and the one after fails with
 * EMFILE. *was: the limit to put back. */
static void descriptors_left(struct rlimit *was, int spare)
{
	struct rlimit low;
	int next = dup(0);

	assert_true(next >= 0);
	close(next);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, was), 0);
	low = *was;
	low.rlim_cur = (rlim_t)(next + spare);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
}

/* The next open fails with EMFILE. */
static void no_more_descriptors(struct rlimit *was)
{
	descriptors_left(was, 0);
}

/* Whether a copy of the switch file was moved aside in the state directory. */
static int has_quarantined(const struct ctx *c)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;
	int found = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		found |= strstr(e->d_name, ".corrupt.") != NULL;
	closedir(d);
	return found;
}

/* Renames hook_from over hook_to once, from the hook it is installed as (sw_load() has read a
 * file, sw_save() has renamed one): an operator's `mv` landing at that moment. */
static char hook_from[256], hook_to[256];
static int hook_skip;   /* calls to let by first */

static void rename_in_once(const char *path)
{
	if (!hook_from[0] || hook_skip-- > 0)
		return;
	assert_int_equal(rename(hook_from, hook_to), 0);
	hook_from[0] = 0;
}

static void arm_rename_in(struct ctx *c, const struct sw_switch *sws, int n)
{
	struct sw_set *s = malloc(sizeof(*s));
	char err[256];

	assert_non_null(s);
	sw_set_init(s);
	for (int i = 0; i < n; i++)
		assert_true(sw_set_put(s, &sws[i], NULL) >= 0);
	snprintf(hook_from, sizeof(hook_from), "%s/new.json", c->dir);
	snprintf(hook_to, sizeof(hook_to), "%s", c->sw);
	if (sw_save(hook_from, s, err, sizeof(err)))
		fail_msg("sw_save: %s", err);
	free(s);
}

static void disarm_rename_in(void)
{
	sw_after_read_hook = NULL;
	sw_after_save_hook = NULL;
	hook_from[0] = 0;
	hook_skip = 0;
}

/* The writer's news after a look: the switches on file are one, the api edit renamed in. */
static void expect_news_of_api_alone(struct ctx *c)
{
	iow_take(&c->w, 0, &c->news);
	assert_true(c->news.have_set);
	assert_int_equal(c->news.set.n, 1);
	assert_string_equal(c->news.set.sw[0].service, "api");
}

/* An edit renamed in while the writer reads the file: later looks must compare the path with
 * the file that was read, not with what was there a moment after, or the edit is taken as
 * seen and never comes into force. */
static void test_edit_renamed_in_during_the_read(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw, edit;
	char err[256];

	mk(&sw, "web", "L3", "40", "1h", wall());
	save(c, &sw, 1);
	mk(&edit, "web", "L3", "70", "1h", wall());
	arm_rename_in(c, &edit, 1);
	sw_after_read_hook = rename_in_once;
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	disarm_rename_in();
	iow_take(&c->w, 0, &c->news);
	assert_true(c->news.have_set);
	assert_int_equal(c->news.set.sw[0].shed_pct, 40);   /* what the first read had */
	look_again(c);
	iow_take(&c->w, 0, &c->news);
	assert_true(c->news.have_set);
	assert_int_equal(c->news.set.n, 1);
	assert_int_equal(c->news.set.sw[0].shed_pct, 70);
}

/* An edit renamed in just after a job's save: later looks must compare the path with the
 * file that was saved, or the edit is taken as the writer's own and never comes into force. */
static void test_edit_renamed_in_after_a_save(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	struct sw_switch edit;
	char err[256];
	uint64_t seq;

	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	mk(&edit, "api", "L1", "20", "1h", wall());
	arm_rename_in(c, &edit, 1);
	sw_after_save_hook = rename_in_once;
	set_change(ch, "web", 2, "70");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	sw_after_save_hook = NULL;
	disarm_rename_in();
	look_again(c);
	expect_news_of_api_alone(c);
}

/* An edit renamed in while a job reads the file under the lock (the operator's `mv` takes no
 * lock): the job's save must not write over it, but build on it: both end up on file, and the
 * edit is audited as one. */
static void test_edit_renamed_in_during_a_job_is_kept(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	static struct sw_set onfile;
	struct sw_switch sw, edit;
	char err[256];
	uint64_t seq;

	start_on_web_l3(c, "40", &sw);
	mk(&edit, "api", "L1", "20", "1h", wall());
	arm_rename_in(c, &edit, 1);
	sw_after_read_hook = rename_in_once;
	set_change(ch, "web", 2, "70");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	disarm_rename_in();
	assert_false(iow_job_failed(&c->w, seq, NULL, 0));
	assert_int_equal(sw_load(c->sw, &onfile, err, sizeof(err)), 0);
	assert_int_equal(onfile.n, 2);
	assert_non_null(sw_set_find(&onfile, "api", 1));
	assert_non_null(sw_set_find(&onfile, "web", 2));
	assert_null(sw_set_find(&onfile, "web", 3));   /* the edit dropped it */
	assert_int_equal(count_lines(c->audit), 2);      /* web L3 gone, api L1 new */
}

/* ... and while an expiry sweep reads it: the sweep leaves it to the next look, which loads it
 * (an expiry saved over it would have dropped the edit). */
static void test_edit_renamed_in_during_a_sweep_is_kept(void **state)
{
	struct ctx *c = *state;
	static struct sw_set onfile;
	struct sw_switch sw, edit;
	char err[256];

	mk(&sw, "web", "L3", "40", "1s", wall());
	save(c, &sw, 1);
	mk(&edit, "api", "L1", "20", "1h", wall());
	arm_rename_in(c, &edit, 1);
	hook_skip = 1;                         /* the first read; the next is the sweep's */
	sw_after_read_hook = rename_in_once;
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	for (int i = 0; i < 300 && hook_from[0]; i++)
		usleep(10000);
	assert_false(hook_from[0]);
	disarm_rename_in();
	look_again(c);
	assert_int_equal(sw_load(c->sw, &onfile, err, sizeof(err)), 0);
	assert_int_equal(onfile.n, 1);
	assert_string_equal(onfile.sw[0].service, "api");
	expect_news_of_api_alone(c);
}

/* A good file renamed in over a damaged one while the writer reads the damaged one: the file
 * moved aside must be the damaged one that was read, not the good one, which is read instead. */
static void test_writer_open_moves_aside_only_what_it_read(void **state)
{
	struct ctx *c = *state;
	static struct sw_set set;
	struct sw_switch good;
	char path[256], note[1024], err[1024];
	struct stat seen;
	int fd;

	write_file(c->sw, "{\"version\": 1, \"switches\": [");
	mk(&good, "web", "L3", "70", "1h", wall());
	arm_rename_in(c, &good, 1);
	sw_after_read_hook = rename_in_once;
	fd = switch_writer_open(c->dir, wall(), &set, &seen, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	disarm_rename_in();
	if (fd < 0)
		fail_msg("switch_writer_open: %s", err);
	sw_unlock(fd);
	assert_string_equal(note, "");
	assert_false(has_quarantined(c));
	assert_int_equal(set.n, 1);
	assert_int_equal(set.sw[0].shed_pct, 70);
	assert_int_equal(sw_load(c->sw, &set, err, sizeof(err)), 0);
	assert_int_equal(set.n, 1);
}

/* A damaged file reached through a symlink is the file that was read: moved aside. */
static void test_writer_open_moves_aside_damaged_symlink(void **state)
{
	struct ctx *c = *state;
	static struct sw_set set;
	char path[256], note[1024], err[1024], target[300];
	struct stat seen;
	int fd;

	snprintf(target, sizeof(target), "%s/target.json", c->dir);
	write_file(target, "{garbage");
	assert_int_equal(symlink("target.json", c->sw), 0);
	fd = switch_writer_open(c->dir, wall(), &set, &seen, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	if (fd < 0)
		fail_msg("switch_writer_open: %s", err);
	sw_unlock(fd);
	assert_non_null(strstr(note, "moved aside"));
	assert_true(has_quarantined(c));
	assert_int_equal(set.n, 0);
}

/* A good switch file that cannot be read for the moment (out of descriptors here; ENFILE,
 * ENOMEM or EIO are alike) is not damaged: the writer must refuse and change nothing, not
 * move it aside and start from an empty set, which the next save wrote over every switch in
 * force. */
static void test_writer_open_unreadable_is_not_damage(void **state)
{
	struct ctx *c = *state;
	static struct sw_set set;
	struct rlimit was;
	struct sw_switch sw;
	char path[256], note[1024], err[1024];
	struct stat seen;
	int fd;

	mk(&sw, "web", "L3", "40", "1h", wall());
	save(c, &sw, 1);
	descriptors_left(&was, 1);                 /* the lock opens, the read does not */
	fd = switch_writer_open(c->dir, wall(), &set, &seen, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	if (fd >= 0)
		sw_unlock(fd);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(err, "cannot be read"));
	assert_false(has_quarantined(c));
	assert_int_equal(sw_load(c->sw, &set, err, sizeof(err)), 0);
	assert_int_equal(set.n, 1);
}

/* jansson's allocations fail while this is set (installed before the first parse, so the
 * library's own bookkeeping sits on top of it). */
static int json_allocs_fail;

static void *test_json_malloc(size_t n)
{
	return json_allocs_fail ? NULL : malloc(n);
}

/* A good switch file parsed while memory runs out: jansson then reports a syntax error at a
 * good token ("string or '}' expected near '"version"'"), and the writer took the file for
 * damaged and moved it aside. Out of memory is not damage either. */
static void test_writer_open_out_of_memory_is_not_damage(void **state)
{
	struct ctx *c = *state;
	static struct sw_set set;
	struct sw_switch sw;
	char path[256], note[1024], err[1024];
	struct stat seen;
	int fd;

	mk(&sw, "web", "L3", "40", "1h", wall());
	save(c, &sw, 1);
	json_allocs_fail = 1;
	fd = switch_writer_open(c->dir, wall(), &set, &seen, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	json_allocs_fail = 0;
	if (fd >= 0)
		sw_unlock(fd);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(err, "cannot be read"));
	assert_false(has_quarantined(c));
	assert_int_equal(sw_load(c->sw, &set, err, sizeof(err)), 0);
	assert_int_equal(set.n, 1);
}

/* ... and a job that meets it is refused, kept in force, and saved with the file's switches
 * once the file reads again. */
static void test_job_on_unreadable_file_keeps_its_switches(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	static struct sw_set onfile;
	struct rlimit was;
	struct sw_switch sw;
	uint64_t seq;
	int done;

	start_on_web_l3(c, "40", &sw);
	c->w.retry_ns = 100000000ull;   /* tried again ten times a second */
	set_change(ch, "api", 1, "100");
	descriptors_left(&was, 1);      /* the lock opens, the read does not */
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	done = wait_done(c, seq);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_int_equal(done, 0);
	assert_int_equal(iow_job_failed(&c->w, seq, NULL, 0), 1);
	assert_false(has_quarantined(c));
	assert_int_equal(wait_on_file(c, &onfile, 2), 0);
	assert_non_null(sw_set_find(&onfile, "web", 3));
	assert_non_null(sw_set_find(&onfile, "api", 1));
}

/* The first read fails for want of a descriptor (EMFILE; ENOMEM or EIO are alike): the switches
 * are out of force, loudly. The file is good and does not change, so its stat does not either:
 * it must be read again (once a second) and its switches come back, without an audit record
 * (nothing was edited, and the log already has them in force). Remembering the stat of the
 * failed read kept them out of force until the file next changed, while `switch ls`, which
 * reads the file, showed them in force. */
static void test_failed_read_tried_again(void **state)
{
	struct ctx *c = *state;
	struct rlimit was;
	struct sw_switch sw;
	char err[256];

	mk(&sw, "web", "L3", "40", "1h", wall());
	save(c, &sw, 1);
	no_more_descriptors(&was);
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	c->w.retry_ns = 100000000ull;   /* tried again ten times a second */
	iow_take(&c->w, 0, &c->news);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_true(c->news.have_set);
	assert_true(c->news.corrupt);
	assert_int_equal(c->news.set.n, 0);
	assert_int_equal(c->news.n_msgs, 1);
	assert_non_null(strstr(c->news.msgs[0], "cannot be read"));
	assert_int_equal(wait_set(c, 0), 0);
	assert_false(c->news.corrupt);
	assert_int_equal(c->news.set.n, 1);
	assert_int_equal(c->news.set.sw[0].shed_pct, 40);
	assert_int_equal(count_lines(c->audit), -1);   /* no edit: nothing audited */
}

/* ... and later on, a read that fails when the file was touched (here its times: same content)
 * puts its switches out of force, audited; once it reads again they come back, audited too,
 * so the log never reads as if they had been out of force all along. */
static void test_failed_read_later_comes_back_audited(void **state)
{
	struct ctx *c = *state;
	struct rlimit was;
	struct sw_switch sw;
	int n = 0;

	start_on_web_l3(c, "40", &sw);
	c->w.retry_ns = 100000000ull;   /* tried again ten times a second */
	iow_take(&c->w, 0, &c->news);
	assert_int_equal(c->news.set.n, 1);
	no_more_descriptors(&was);
	assert_int_equal(utimensat(AT_FDCWD, c->sw, NULL, 0), 0);   /* new times, no descriptor */
	n = wait_set(c, 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_int_equal(n, 0);
	assert_true(c->news.corrupt);
	assert_int_equal(c->news.set.n, 0);
	assert_int_equal(wait_set(c, 0), 0);
	assert_false(c->news.corrupt);
	assert_int_equal(c->news.set.n, 1);
	assert_int_equal(wait_audit_lines(c, 2), 2);   /* out of force, then back */
}

static void test_damaged_file_admits_all(void **state)
{
	struct ctx *c = *state;
	char err[256];

	write_file(c->sw, "{\"version\": 1, \"switches\": [ {\"service\"");
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	iow_take(&c->w, 0, &c->news);
	assert_true(c->news.have_set);
	assert_true(c->news.corrupt);
	assert_int_equal(c->news.set.n, 0);
	assert_int_equal(c->news.n_msgs, 1);
	assert_non_null(strstr(c->news.msgs[0], "NO switches are in force"));
	/* reported once, not on every poll */
	usleep(300000);
	iow_take(&c->w, 0, &c->news);
	assert_int_equal(c->news.n_msgs, 0);
}

/* A damaged edit puts every switch out of force (normal, loudly): the audit log says so, one
 * record per switch, so that when the file is put right the record of the switch coming back
 * (normal -> shed) follows one of it going (shed -> normal). Unaudited, the log read as if
 * the switch had been in force all along and was then set anew by the file. */
static void test_damaged_edit_audits_what_it_drops(void **state)
{
	struct ctx *c = *state;
	struct audit_entry e[3];
	struct sw_switch sw;
	char err[256], line[2048];
	int n = 0, back = 0;
	FILE *f;

	start_on_web_l3(c, "100", &sw);
	iow_take(&c->w, 0, &c->news);
	assert_int_equal(c->news.set.n, 1);
	write_file(c->sw, "{\"version\": 1, \"switches\": [");    /* cut short */
	assert_int_equal(wait_set(c, 0), 0);
	assert_true(c->news.corrupt);
	assert_int_equal(c->news.set.n, 0);
	save(c, &sw, 1);                                           /* put right */
	assert_int_equal(wait_set(c, 0), 0);
	assert_false(c->news.corrupt);
	assert_int_equal(c->news.set.n, 1);
	/* the record of its return is the last one written for this edit */
	for (int i = 0; i < 300 && !back; i++) {
		f = fopen(c->audit, "r");
		n = 0;
		while (f && n < 3 && fgets(line, sizeof(line), f))
			assert_int_equal(audit_parse_line(line, &e[n++], err, sizeof(err)), 0);
		if (f)
			fclose(f);
		back = n > 0 && e[n - 1].new.present;
		if (!back)
			usleep(10000);
	}
	assert_true(back);
	assert_int_equal(n, 2);
	assert_string_equal(e[0].service, "web");
	assert_true(e[0].old.present);
	assert_false(e[0].new.present);
	assert_string_equal(e[0].command, "file edit");
	assert_non_null(strstr(e[0].reason, "damaged"));
	assert_false(e[1].old.present);
	assert_int_equal(e[1].new.shed_pct, 100);
}

/* A switch file that cannot be locked (its lock file is a directory: even root fails): the
 * job is reported failed and its change stays in the set handed back to the tick. */
static void test_refused_job_stays_in_force(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	char err[256], why[IOW_MSG_LEN], lock[200];
	uint64_t seq;

	refuse_saves(c, lock, sizeof(lock));
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	set_change(ch, "web", 1, "100");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	assert_int_equal(iow_job_failed(&c->w, seq, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "IN FORCE but NOT saved"));
	assert_int_equal(iow_job_failed(&c->w, seq + 1, why, sizeof(why)), 0);
	assert_int_equal(wait_set(c, seq), 0);
	assert_int_equal(c->news.set.n, 1);
	assert_int_equal(c->news.set.sw[0].shed_pct, 100);
	assert_int_equal(access(c->sw, F_OK), -1);   /* nothing was written */
	rmdir(lock);
}

/* A change the file refused stays in force in memory; the next job, once the file takes
 * writes again, must save it with its own change, not rebuild the set from the stale file and
 * drop it (unsaved, unaudited as gone). */
static void test_refused_change_survives_next_job(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	char err[256], lock[200];
	struct sw_set *onfile = malloc(sizeof(*onfile));
	uint64_t seq;

	assert_non_null(onfile);
	refuse_saves(c, lock, sizeof(lock));
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	refused_job(c, "web", 1, "100");
	assert_int_equal(rmdir(lock), 0);           /* the file system takes writes again */
	set_change(ch, "web", 2, "30");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	assert_int_equal(iow_job_failed(&c->w, seq, NULL, 0), 0);
	assert_int_equal(wait_set(c, seq), 0);
	assert_int_equal(c->news.set.n, 2);
	assert_non_null(sw_set_find(&c->news.set, "web", 1));
	assert_int_equal(sw_load(c->sw, onfile, err, sizeof(err)), 0);
	assert_int_equal(onfile->n, 2);
	free(onfile);
}

/* Make the next look of the writer fail to read the file (out of descriptors while its times
 * change), and wait until that empty set is handed out. */
static void fail_next_read(struct ctx *c)
{
	struct rlimit was;
	int n;

	no_more_descriptors(&was);
	assert_int_equal(utimensat(AT_FDCWD, c->sw, NULL, 0), 0);
	do
		n = wait_set(c, 0);
	while (n == 0 && !c->news.corrupt);   /* past news of the jobs before */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_int_equal(n, 0);
	assert_true(c->news.corrupt);
}

/* A job saved once the file is written again; returns the set on file. */
static void job_saved(struct ctx *c, const char *svc, int cls, struct sw_set *onfile)
{
	struct iow_change *ch = calloc(1, sizeof(*ch));
	char err[256];
	uint64_t seq;

	set_change(ch, svc, cls, "30");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	assert_int_equal(iow_job_failed(&c->w, seq, NULL, 0), 0);
	assert_int_equal(sw_load(c->sw, onfile, err, sizeof(err)), 0);
}

/* A refused save, then a read of the file that fails: the read empties the set in memory. That
 * empty set must never be written over the file, whose switches were never read: the next
 * save built on it and wiped every switch in force. */
static void test_refused_save_then_failed_read_keeps_file(void **state)
{
	struct ctx *c = *state;
	static struct sw_set onfile;
	struct sw_switch sw;
	char lock[200];

	start_on_web_l3(c, "40", &sw);
	c->w.retry_ns = 3600000000000ull;   /* no retry by itself meanwhile: the job decides */
	refuse_saves(c, lock, sizeof(lock));
	refused_job(c, "api", 1, "100");
	fail_next_read(c);
	assert_int_equal(rmdir(lock), 0);
	job_saved(c, "api", 2, &onfile);
	assert_non_null(sw_set_find(&onfile, "web", 3));
	assert_non_null(sw_set_find(&onfile, "api", 2));
}

/* An edit renamed in while a job builds on memory that holds a change the file refused: no
 * try may write memory over the edit. The edit comes into force, the new truth like any other
 * edit, and is what stays on file. */
static void test_edit_renamed_in_under_unsaved_changes_is_kept(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	static struct sw_set onfile;
	struct sw_switch sw, edit;
	char err[256], lock[200];
	uint64_t seq;

	start_on_web_l3(c, "40", &sw);
	c->w.retry_ns = 3600000000000ull;   /* no retry by itself meanwhile: the job decides */
	refuse_saves(c, lock, sizeof(lock));
	refused_job(c, "api", 1, "100");
	assert_int_equal(rmdir(lock), 0);
	mk(&edit, "api", "L2", "20", "1h", wall());
	arm_rename_in(c, &edit, 1);
	sw_after_read_hook = rename_in_once;
	set_change(ch, "web", 2, "70");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	disarm_rename_in();
	look_again(c);
	assert_int_equal(sw_load(c->sw, &onfile, err, sizeof(err)), 0);
	assert_int_equal(onfile.n, 1);
	assert_non_null(sw_set_find(&onfile, "api", 2));
	iow_take(&c->w, 0, &c->news);
	assert_true(c->news.have_set);
	assert_int_equal(c->news.set.n, 1);
	assert_non_null(sw_set_find(&c->news.set, "api", 2));
}

/* ... nor a set holding only a change refused after such a failed read. */
static void test_failed_read_then_refused_save_keeps_file(void **state)
{
	struct ctx *c = *state;
	static struct sw_set onfile;
	struct sw_switch sw;
	char lock[200];

	start_on_web_l3(c, "40", &sw);
	c->w.retry_ns = 3600000000000ull;   /* no retry by itself meanwhile: the job decides */
	fail_next_read(c);
	refuse_saves(c, lock, sizeof(lock));
	refused_job(c, "api", 1, "100");
	assert_int_equal(rmdir(lock), 0);
	job_saved(c, "api", 2, &onfile);
	assert_non_null(sw_set_find(&onfile, "web", 3));
	assert_non_null(sw_set_find(&onfile, "api", 2));
}

/* ... and a change whose save is refused after the file was read again under the lock (its
 * temp file cannot be made) is kept on the file's switches and saved with them later, not
 * left on the emptied set, unsaved, to be dropped at the next read. */
static void test_failed_read_then_refused_save_keeps_change(void **state)
{
	struct ctx *c = *state;
	static struct sw_set onfile;
	struct sw_switch sw;
	char tmp[200];

	start_on_web_l3(c, "40", &sw);
	c->w.retry_ns = 3600000000000ull;   /* not read again before the job */
	fail_next_read(c);
	refuse_temp_files(c, tmp, sizeof(tmp));
	refused_job(c, "api", 1, "100");
	assert_int_equal(rmdir(tmp), 0);
	c->w.retry_ns = 100000000ull;       /* read and saved again ten times a second */
	assert_int_equal(wait_on_file(c, &onfile, 2), 0);
	assert_non_null(sw_set_find(&onfile, "web", 3));
	assert_non_null(sw_set_find(&onfile, "api", 1));
}

/* A switch that expires while the switch file cannot be rewritten (its lock is a directory)
 * is still an expiry: the audit log records it, once the file is written or at once. */
static void test_expiry_audited_when_file_locked(void **state)
{
	struct ctx *c = *state;
	struct sw_switch sw;
	char err[256], lock[200];

	mk(&sw, "api", "L3", "100", "1m", wall() - 3600);   /* expired an hour ago */
	save(c, &sw, 1);
	refuse_saves(c, lock, sizeof(lock));
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	usleep(300000);
	assert_int_equal(rmdir(lock), 0);
	assert_int_equal(wait_audit_lines(c, 1), 1);
}

/* An expiry whose save fails is audited once: the next job must not write the expired
 * switch back from the stale file (and the sweep after it record the expiry again). */
static void test_expiry_save_failed_audited_once(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	struct sw_set *onfile = malloc(sizeof(*onfile));
	struct sw_switch sw;
	char err[256], tmp[200];
	uint64_t seq;

	assert_non_null(onfile);
	mk(&sw, "api", "L3", "100", "1m", wall() - 3600);   /* expired an hour ago */
	save(c, &sw, 1);
	refuse_temp_files(c, tmp, sizeof(tmp));
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	assert_int_equal(wait_audit_lines(c, 1), 1);
	assert_int_equal(rmdir(tmp), 0);
	set_change(ch, "web", 1, "100");
	seq = iow_enqueue(&c->w, ch, 1, NULL, 0);
	assert_int_equal(wait_done(c, seq), 0);
	usleep(300000);                                     /* a few looks of the writer */
	assert_int_equal(count_lines(c->audit), 1);
	assert_int_equal(sw_load(c->sw, onfile, err, sizeof(err)), 0);
	assert_int_equal(onfile->n, 1);
	assert_string_equal(onfile->sw[0].service, "web");
	free(onfile);
}

/* The audit log is a FIFO nobody reads: the writer blocks in open(); taking the news must not
 * wait, the job stays unfinished, and past IOW_MAX_QUEUE jobs enqueueing refuses. The stuck
 * thread is left behind (as sluiced leaves it at exit). */
static void test_stalled_audit_never_blocks_the_taker(void **state)
{
	struct ctx *c = *state;
	static struct iowriter w;         /* outlives the test: its thread never returns */
	static struct iow_news news;
	struct audit_entry *au;
	unsigned long long t0, worst = 0, busy;
	uint64_t seq, done, last = 0;
	char err[256];
	int q, refused = 0;

	assert_int_equal(mkfifo(c->audit, 0640), 0);
	assert_int_equal(iow_start(&w, c->dir, -1, 1000, err, sizeof(err)), 0);
	au = calloc(1, sizeof(*au));
	audit_entry_make(au, wall(), 0, "root", "cascade clear", "", -1, NULL, NULL, "x");
	seq = iow_enqueue(&w, NULL, 0, au, 1);
	assert_true(seq > 0);
	for (int i = 0; i < 30; i++) {
		t0 = monotonic_ns();
		iow_take(&w, seq, &news);
		if (monotonic_ns() - t0 > worst)
			worst = monotonic_ns() - t0;
		usleep(10000);
	}
	assert_true(worst < 20000000ull);   /* 20 ms: a copy under a mutex, never the disk */
	iow_progress(&w, &done, &busy, &q);
	assert_true(done < seq);
	assert_true(busy > 200000000ull);
	for (int i = 0; i < IOW_MAX_QUEUE + 1; i++) {
		au = calloc(1, sizeof(*au));
		last = iow_enqueue(&w, NULL, 0, au, 1);
		if (!last) {
			free(au);
			refused = 1;
			break;
		}
	}
	assert_true(refused);
	iow_stop(&w, 100);                  /* returns although the thread is stuck */
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

/* A change the file refused is saved once the file takes writes again, with no other job to
 * carry it: otherwise a restart would read the stale file and silently drop a switch that was
 * in force (or bring back one that was cleared). */
static void test_refused_change_saved_when_file_takes_writes(void **state)
{
	struct ctx *c = *state;
	struct sw_set *onfile = malloc(sizeof(*onfile));
	char err[256], lock[200];

	assert_non_null(onfile);
	refuse_saves(c, lock, sizeof(lock));
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	c->w.retry_ns = 100000000ull;   /* tried again ten times a second */
	refused_job(c, "web", 1, "100");
	assert_int_equal(access(c->sw, F_OK), -1);
	assert_int_equal(rmdir(lock), 0);           /* the file system takes writes again */
	assert_int_equal(wait_on_file(c, onfile, 1), 0);
	assert_non_null(sw_set_find(onfile, "web", 1));
	free(onfile);
}

/* Audit records the log refused (here it is a directory: even root cannot append) are
 * written once it takes them again, in order, with no other job to carry them: a change in
 * force must not stay missing from the audit log for good because the disk was full when it
 * was made. */
static void test_refused_audit_written_when_log_takes_it(void **state)
{
	struct ctx *c = *state;
	struct iow_change *ch = calloc(1, sizeof(*ch));
	struct audit_entry *au = calloc(2, sizeof(*au));
	char err[256], why[IOW_MSG_LEN];
	uint64_t seq;

	assert_int_equal(mkdir(c->audit, 0700), 0);
	assert_int_equal(iow_start(&c->w, c->dir, -1, 1000, err, sizeof(err)), 0);
	c->w.retry_ns = 100000000ull;   /* tried again ten times a second */
	set_change(ch, "web", 2, "70");
	audit_entry_make(&au[0], wall(), 1000, "alice", "switch set", "web", 2, NULL, &ch->sw, NULL);
	audit_entry_make(&au[1], wall(), 1000, "alice", "breaker reset", "api", -1, NULL, NULL,
			 "INC-42");
	seq = iow_enqueue(&c->w, ch, 1, au, 2);
	assert_int_equal(wait_done(c, seq), 0);
	assert_int_equal(iow_job_failed(&c->w, seq, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "NOT in the audit log"));
	assert_int_equal(rmdir(c->audit), 0);        /* the log takes writes again */
	assert_int_equal(wait_audit_lines(c, 2), 2);
	{
		FILE *f = fopen(c->audit, "r");
		char line[4096];

		assert_non_null(f);
		assert_non_null(fgets(line, sizeof(line), f));
		assert_non_null(strstr(line, "switch set"));
		assert_non_null(fgets(line, sizeof(line), f));
		assert_non_null(strstr(line, "breaker reset"));
		fclose(f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_first_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_writes_file_and_audit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_names_the_caller, setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_edit_audited_as_diff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edit_then_job, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edit_while_job_waits_for_lock, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_expiry_rewrites_file_and_audits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_file_admits_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_read_tried_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_open_unreadable_is_not_damage, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_job_on_unreadable_file_keeps_its_switches, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_open_out_of_memory_is_not_damage, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_read_later_comes_back_audited, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_edit_audits_what_it_drops, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_job_stays_in_force, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_save_then_failed_read_keeps_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_read_then_refused_save_keeps_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_read_then_refused_save_keeps_change,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_change_survives_next_job, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_change_saved_when_file_takes_writes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_audit_written_when_log_takes_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_expiry_audited_when_file_locked, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_expiry_save_failed_audited_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_edit_renamed_in_during_the_read, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_open_moves_aside_only_what_it_read,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_edit_renamed_in_after_a_save, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_open_moves_aside_damaged_symlink, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_edit_renamed_in_during_a_job_is_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_edit_renamed_in_during_a_sweep_is_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_edit_renamed_in_under_unsaved_changes_is_kept,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_ensure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stalled_audit_never_blocks_the_taker, setup,
						teardown),
	};

	json_set_alloc_funcs(test_json_malloc, free);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
