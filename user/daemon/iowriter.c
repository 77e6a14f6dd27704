// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluiced's file writer thread. See iowriter.h. */
#include "daemon/iowriter.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "daemon/uidnames.h"
#include "ops/switchstate.h"

#define POLL_NS 100000000ull   /* look at the switch file ten times a second */

/* What failed (a save, an audit record, a read) is tried again once a second. */
static unsigned long long retry_every(const struct iowriter *w)
{
	return w->retry_ns ? w->retry_ns : 1000000000ull;
}

static void add_msg(struct iowriter *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Called with w->mu NOT held. */
static void add_msg(struct iowriter *w, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&w->mu);
	if (w->news->n_msgs < IOW_MAX_MSGS) {
		va_start(ap, fmt);
		vsnprintf(w->news->msgs[w->news->n_msgs++], IOW_MSG_LEN, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&w->mu);
}

/* Hand the set the thread now knows to the tick, as of job `seq`. */
static void post_set(struct iowriter *w, uint64_t seq, int external, int corrupt,
		     const struct sw_switch *expired, int n_expired)
{
	pthread_mutex_lock(&w->mu);
	w->news->set = *w->known;
	w->news->have_set = 1;
	w->news->external |= external;
	w->news->corrupt = corrupt;
	w->news_seq = seq;
	for (int i = 0; i < n_expired && w->news->n_expired < SW_MAX; i++)
		w->news->expired[w->news->n_expired++] = expired[i];
	w->first_read = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* What the next look compares the file with: s (NULL: no file). */
static void remember_stat(struct iowriter *w, const struct stat *s)
{
	w->have_file = s != NULL;
	if (!s)
		return;
	w->dev = s->st_dev;
	w->ino = s->st_ino;
	w->size = s->st_size;
	w->mtime = s->st_mtim;
	w->ctime = s->st_ctim;
}

/* A file read or saved under the lock (st_mode 0: none at the path). Not the path's stat after
 * it: an operator's `mv` takes no lock, and a file renamed in meanwhile would be taken as
 * seen, and never come into force. */
static void remember_file(struct iowriter *w, const struct stat *s)
{
	remember_stat(w, s->st_mode ? s : NULL);
}

static int same_file(const struct iowriter *w, const struct stat *s)
{
	return w->have_file && w->dev == s->st_dev && w->ino == s->st_ino &&
	       w->size == s->st_size &&
	       w->mtime.tv_sec == s->st_mtim.tv_sec && w->mtime.tv_nsec == s->st_mtim.tv_nsec &&
	       w->ctime.tv_sec == s->st_ctim.tv_sec && w->ctime.tv_nsec == s->st_ctim.tv_nsec;
}

/* The state dir is root's, readable by the switch group, closed to everyone else: members
 * read `switch ls` and the log; nobody but sluiced (root) writes. */
/* The group's members read the audit log through this chown: say once that they cannot
 * (without CAP_CHOWN root may not give a file to a group it is not in), not at every write. */
static void group_failed(struct iowriter *w, const char *path)
{
	if (w->group_warned)
		return;
	w->group_warned = 1;
	log_warn("switch_group: cannot give %s to gid %ld (%s); the group's members cannot read "
		 "the audit log (does sluiced have CAP_CHOWN?)", path, w->group_gid, strerror(errno));
}

static void restrict_modes(struct iowriter *w)
{
	char p[PATH_MAX];

	if (w->group_gid < 0)
		return;
	if (chown(w->state_dir, 0, (gid_t)w->group_gid) == 0)
		chmod(w->state_dir, 0750);
	else
		group_failed(w, w->state_dir);
	if (state_path(p, sizeof(p), w->state_dir, AUDIT_FILE_NAME) == 0) {
		if (chown(p, 0, (gid_t)w->group_gid) == 0)
			chmod(p, 0640);
		else if (errno != ENOENT)
			group_failed(w, p);
	}
}

/* Remember that job seq did not reach the disk (the socket's answer says so). */
static void job_failed(struct iowriter *w, uint64_t seq, const char *why)
{
	if (!seq)
		return;
	pthread_mutex_lock(&w->mu);
	w->fails[seq % IOW_FAILS].seq = seq;
	snprintf(w->fails[seq % IOW_FAILS].why, IOW_MSG_LEN, "%s", why);
	pthread_mutex_unlock(&w->mu);
}

/* Records the audit log refused (a full disk) are kept, in order, and written as soon as it
 * takes them again: a change in force must not be missing from the log for good. Returns
 * how many are still held. */
static int write_held(struct iowriter *w)
{
	char err[512];
	int k = 0;

	while (k < w->n_held && state_audit_append(w->state_dir, &w->held[k], err, sizeof(err)) == 0)
		k++;
	if (!k)
		return w->n_held;
	memmove(w->held, w->held + k, sizeof(*w->held) * (size_t)(w->n_held - k));
	w->n_held -= k;
	restrict_modes(w);
	if (!w->n_held)
		log_info("audit log written again: the records it refused are in it now");
	return w->n_held;
}

static int hold(struct iowriter *w, const struct audit_entry *e)
{
	if (!w->held)
		w->held = calloc(IOW_HELD_MAX, sizeof(*w->held));
	if (!w->held || w->n_held >= IOW_HELD_MAX)
		return -1;
	w->held[w->n_held++] = *e;
	return 0;
}

/* A record made before the names' thread knew the caller says "uidN" (the control loop never
 * waits for the password database). This thread may wait for it: the log gets the name when
 * the database gives one, else keeps "uidN" (the uid is in the record either way). Root's
 * name is looked up at start, and a name root gave for itself (sudo) is kept as given. */
static void name_the_caller(struct audit_entry *e)
{
	char placeholder[AUDIT_USER_LEN], name[AUDIT_USER_LEN];

	snprintf(placeholder, sizeof(placeholder), "uid%u", (unsigned)e->uid);
	if (e->uid == 0 || strcmp(e->user, placeholder))
		return;
	if (uidn_lookup(e->uid, name, sizeof(name)) == 0 && name[0])
		snprintf(e->user, sizeof(e->user), "%s", name);
}

static void audit_all(struct iowriter *w, const struct audit_entry *a, int n, uint64_t seq)
{
	char err[512], msg[IOW_MSG_LEN];
	int held = w->n_held ? write_held(w) : 0;
	struct audit_entry e;

	for (int i = 0; i < n; i++) {
		e = a[i];
		name_the_caller(&e);
		/* behind records still held: after them, or the log would be out of order */
		if (held)
			snprintf(err, sizeof(err), "earlier records still wait for it");
		else if (state_audit_append(w->state_dir, &e, err, sizeof(err)) == 0)
			continue;
		held = hold(w, &e) == 0;
		snprintf(msg, sizeof(msg), "a change to %s is IN FORCE but NOT in the audit log: %s%s",
			 a[i].service[0] ? a[i].service : "the node", err,
			 held ? " (written once the log takes it)" : " (dropped: too many held)");
		add_msg(w, "%s", msg);
		job_failed(w, seq, msg);
		held = w->n_held;
	}
	if (n)
		restrict_modes(w);
}

/* Held audit records are tried again once a second while nothing else writes the log. */
static void rewrite_held(struct iowriter *w)
{
	unsigned long long now = monotonic_ns();

	if (!w->n_held || now - w->reaudit_ns < retry_every(w))
		return;
	w->reaudit_ns = now;
	write_held(w);
}

/* The changes of a job on a set (the file's, or the memory's when the file refused them). */
static void apply_changes(struct sw_set *set, const struct iow_job *j)
{
	for (int i = 0; i < j->n_changes; i++) {
		const struct iow_change *c = &j->changes[i];
		if (c->present)
			sw_set_put(set, &c->sw, NULL);
		else
			sw_set_clear(set, c->service, c->cls, NULL);
	}
}

/* An edit made outside sluiced: one "file edit" record per switch that differs. gone_why: the
 * reason of the records of switches the edit removed. */
static void audit_diff(struct iowriter *w, const struct sw_set *was, const struct sw_set *now,
		       uint32_t uid, const char *gone_why)
{
	static struct audit_entry a[2 * SW_MAX];
	uint64_t t = (uint64_t)time(NULL);
	int n = 0;

	for (int i = 0; i < was->n; i++) {
		const struct sw_switch *o = &was->sw[i];
		const struct sw_switch *x = sw_set_find(now, o->service, o->class);
		if (!sw_equal(o, x))
			audit_entry_make(&a[n++], t, uid, "file", "file edit", o->service, o->class,
					 o, x, x ? x->reason : gone_why);
	}
	for (int i = 0; i < now->n; i++) {
		const struct sw_switch *x = &now->sw[i];
		if (!sw_set_find(was, x->service, x->class))
			audit_entry_make(&a[n++], t, uid, "file", "file edit", x->service, x->class,
					 NULL, x, x->reason);
	}
	audit_all(w, a, n, 0);
}

static int same_set(const struct sw_set *a, const struct sw_set *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n; i++)
		if (!sw_equal(&a->sw[i], &b->sw[i]))
			return 0;
	return 1;
}

/* Under the lock the file holds what the thread last read or wrote, unless it was edited
 * after the last look (while a job waited for the lock, or ran before it): audit that edit
 * before a save builds on it, or the save takes it in without a record. note: what
 * switch_writer_open said (non-empty: the file was damaged and moved aside). */
static void audit_unseen_edit(struct iowriter *w, const char *path, const struct sw_set *cur,
			      const char *note)
{
	struct stat s;

	if (w->unsaved || same_set(w->known, cur))
		return;
	audit_diff(w, w->known, cur, stat(path, &s) == 0 ? (uint32_t)s.st_uid : 0,
		   note[0] ? "switch file damaged: NO switches are in force"
			   : "switch file edited outside sluiced");
}

/* One try at saving job j on the file as it is under the lock: 0 saved; SW_SAVE_REPLACED when
 * a file was renamed in since the read (an operator's `mv` takes no lock: it is read and built
 * on at the next try, not written over); -1 with err. */
static int try_job(struct iowriter *w, struct iow_job *j, char *err, size_t errlen)
{
	static struct sw_set cur, read;
	char path[PATH_MAX], note[1024];
	struct stat seen, written;
	int fd, rc;

	fd = switch_writer_open(w->state_dir, (uint64_t)time(NULL), &cur, &seen, path,
				sizeof(path), note, sizeof(note), err, errlen);
	if (fd < 0)
		return -1;
	if (note[0])
		add_msg(w, "%s", note);
	audit_unseen_edit(w, path, &cur, note);
	read = cur;
	/* After a refused save the file lacks changes still in force: build on memory, or this
	 * save would drop them without a word. */
	if (w->unsaved)
		cur = *w->known;
	apply_changes(&cur, j);
	rc = switch_writer_save(path, &cur, &seen, &written, err, errlen);
	if (rc == 0) {
		remember_file(w, &written);
		sw_unlock(fd);
		*w->known = cur;
		w->unsaved = 0;
		w->known_unread = 0;
		return 0;
	}
	sw_unlock(fd);
	/* What was read is audited in (above): the next try's edit is the step from it. Not
	 * when memory holds changes the file lacks: a next try builds on memory again, and would
	 * write it over the edit. The job fails; the next look loads the edit, the new truth
	 * like any other, and audits what it drops. */
	if (rc == SW_SAVE_REPLACED && !w->unsaved) {
		*w->known = read;
		w->known_unread = 0;
		return rc;
	}
	/* Memory emptied by a failed read: the file was read just now, and its switches
	 * (audited above as they came back) are what this change stays in force on, and what is
	 * saved with it later. */
	if (w->known_unread) {
		*w->known = cur;
		w->known_unread = 0;
	}
	return -1;
}

static void run_job(struct iowriter *w, struct iow_job *j)
{
	char err[1024], msg[IOW_MSG_LEN];
	int rc = 0;

	if (j->n_changes) {
		for (int tries = 0; tries < 3; tries++)
			if ((rc = try_job(w, j, err, sizeof(err))) != SW_SAVE_REPLACED)
				break;
		if (rc == 0) {
			audit_all(w, j->audit, j->n_audit, j->seq);
			return;
		}
		/* The file refused it: the change stays in force in memory (the set handed back
		 * keeps it), loudly; the audit record is still attempted. Memory is saved over the
		 * file later only when it holds the file's switches: emptied by a failed read, it
		 * holds only this change, and saving it would wipe every switch on file. */
		snprintf(msg, sizeof(msg), "switch change IN FORCE but NOT saved: %s%s", err,
			 w->known_unread ? "; the file could not be read either: set it again once "
					   "it reads" : "");
		add_msg(w, "%s", msg);
		job_failed(w, j->seq, msg);
		apply_changes(w->known, j);
		w->unsaved = !w->known_unread;
	}
	audit_all(w, j->audit, j->n_audit, j->seq);
}


static void sweep_expired(struct iowriter *w, const char *path, uint64_t seq)
{
	static struct sw_set cur, read;
	static struct sw_switch gone[SW_MAX];
	static struct audit_entry a[SW_MAX];
	char note[1024], err[1024], p[PATH_MAX];
	uint64_t now = (uint64_t)time(NULL);
	struct stat seen, written;
	int fd, n, k = 0, rc = 0;

	for (int i = 0; i < w->known->n; i++)
		k += w->known->sw[i].expires_at <= now;
	if (!k)
		return;
	fd = switch_writer_open(w->state_dir, now, &cur, &seen, p, sizeof(p), note, sizeof(note),
				err, sizeof(err));
	if (fd < 0) {
		/* Nothing sheds past its expiry anyway (the admit ratio looks at expires_at). Keep
		 * them and try again at the next look: dropped here, the file would keep them and
		 * no expire record would ever be written. Said once, not ten times a second. */
		if (!w->sweep_warned)
			add_msg(w, "switch expiry: %s; %d expired switch(es) shed nothing but stay in "
				"the file until it can be rewritten", err, k);
		w->sweep_warned = 1;
		return;
	}
	w->sweep_warned = 0;
	if (note[0])
		add_msg(w, "%s", note);
	audit_unseen_edit(w, p, &cur, note);
	read = cur;
	if (w->unsaved)
		cur = *w->known;   /* the file lacks changes in force (see run_job) */
	n = sw_set_expire(&cur, now, gone, SW_MAX);
	if (n > 0)
		rc = switch_writer_save(path, &cur, &seen, &written, err, sizeof(err));
	if (rc == SW_SAVE_REPLACED) {
		/* A file renamed in since the read: not written over. The next look reads it,
		 * audits it against what was read here (audited in above), and sweeps it. */
		sw_unlock(fd);
		if (!w->unsaved) {
			*w->known = read;
			w->known_unread = 0;
		}
		return;
	}
	if (rc) {
		add_msg(w, "switch expiry: cannot save %s: %s", path, err);
		/* The file still holds them: the next save builds on memory, or it would write
		 * them back and the sweep after it audit the same expiry again. */
		w->unsaved = 1;
	} else if (n > 0) {
		w->unsaved = 0;
		seen = written;
	}
	remember_file(w, &seen);
	sw_unlock(fd);
	*w->known = cur;
	w->known_unread = 0;   /* read under the lock just now */
	for (int i = 0; i < n && i < SW_MAX; i++)
		audit_entry_make(&a[i], now, (uint32_t)getuid(), "sluiced", "expire", gone[i].service,
				 gone[i].class, &gone[i], NULL, NULL);
	post_set(w, seq, 0, 0, gone, n);
	audit_all(w, a, n, 0);
}

/* Changes the file refused (w->unsaved) are saved as soon as it takes writes again, once a
 * second, not only with the next job: a restart reads the file, and would otherwise drop a
 * switch that was in force or bring back one that was cleared. The refusal was reported with
 * the job; a retry that fails says nothing more. */

static void resave(struct iowriter *w, const char *path)
{
	static struct sw_set cur;
	char note[1024], err[1024], p[PATH_MAX];
	unsigned long long now = monotonic_ns();
	struct stat seen, written;
	int fd;

	if (!w->unsaved || w->known_unread || now - w->resave_ns < retry_every(w))
		return;
	w->resave_ns = now;
	fd = switch_writer_open(w->state_dir, (uint64_t)time(NULL), &cur, &seen, p, sizeof(p),
				note, sizeof(note), err, sizeof(err));
	if (fd < 0)
		return;
	if (note[0])
		add_msg(w, "%s", note);
	/* not over a file renamed in since the read: the next look reads that one */
	if (switch_writer_save(path, w->known, &seen, &written, err, sizeof(err)) == 0) {
		w->unsaved = 0;
		seen = written;
		log_info("switch file %s written again: the switches in force are saved", path);
	}
	remember_file(w, &seen);
	sw_unlock(fd);
}

/* A read of the switch file that failed (out of descriptors or memory, an I/O error) is tried
 * again once a second even when the file looks the same: its stat is remembered like any
 * other, and a good file that does not change would otherwise stay out of force for good,
 * while `switch ls`, which reads it, shows its switches in force. */

static int reload_due(struct iowriter *w)
{
	unsigned long long now = monotonic_ns();

	if (!w->load_failed || now - w->reload_ns < retry_every(w))
		return 0;
	w->reload_ns = now;
	return 1;
}

/* The file could not be loaded (err): no switches in force, loudly. again: the same file as
 * at the last look, read again. */
static void load_failed(struct iowriter *w, uint64_t seq, const char *err, int again,
			uint32_t uid)
{
	static struct sw_set none;

	/* the same file failing the same way: said already, and nothing in force changes */
	if (w->load_failed && again && !strcmp(err, w->load_err))
		return;
	if (!w->load_failed)
		w->fail_audited = w->first_read && w->known->n;
	w->load_failed = 1;
	w->reload_ns = monotonic_ns();
	snprintf(w->load_err, sizeof(w->load_err), "%s", err);
	add_msg(w, "%s", err);
	/* Every switch in force stops shedding here: that is a change like any other edit, and
	 * the log must say so, or the record of a switch coming back when the file is put right
	 * reads as if it had been in force all along. */
	sw_set_init(&none);
	if (w->first_read)
		audit_diff(w, w->known, &none, uid, "switch file damaged: NO switches are in force");
	/* Changes the file refused go out of force with the rest: memory no longer holds the
	 * file's switches under them, and saving it would write an empty set over a file that
	 * was never read. */
	if (w->unsaved)
		add_msg(w, "switch changes that were NOT saved are out of force with the rest; set "
			"them again once the file reads");
	sw_set_init(w->known);
	w->unsaved = 0;
	w->known_unread = 1;
	post_set(w, seq, 1, 1, NULL, 0);
}

static void watch_file(struct iowriter *w, uint64_t seq)
{
	static struct sw_set fresh;
	char path[PATH_MAX], err[1024];
	struct stat s, seen;
	int present, rc, same, retried, audit;

	if (state_path(path, sizeof(path), w->state_dir, SW_FILE_NAME))
		return;
	present = stat(path, &s) == 0;
	same = w->first_read && ((present && same_file(w, &s)) || (!present && !w->have_file));
	if (same && !reload_due(w)) {
		resave(w, path);
		rewrite_held(w);
		sweep_expired(w, path, seq);
		return;
	}
	rc = sw_load_seen(path, &fresh, &seen, err, sizeof(err));
	/* The file that was read, not what is at the path now: a file an operator renamed in
	 * after the read would be taken as seen, and never come into force. Nothing opened: the
	 * look before the read (a file that could not be opened is not read again and again). */
	remember_stat(w, seen.st_mode ? &seen : present ? &s : NULL);
	if (rc) {
		load_failed(w, seq, err, same, present ? (uint32_t)s.st_uid : 0);
		return;
	}
	/* The same file read again after a failure is no edit: its switches come back, audited
	 * only if their going out of force was (a failure at the first read audited nothing, and
	 * the log already has them in force). */
	retried = w->load_failed && same;
	audit = w->first_read && (!retried || w->fail_audited);
	if (w->load_failed)
		log_info("switch file %s read again: %d switch%s in force", path, fresh.n,
			 fresh.n == 1 ? "" : "es");
	w->load_failed = 0;
	/* Memory built since on this same file (read under the lock by a job whose save it
	 * refused) holds changes it lacks: that stays the truth, to be saved. */
	if (retried && w->unsaved) {
		post_set(w, seq, 0, 0, NULL, 0);
		sweep_expired(w, path, seq);
		return;
	}
	if (audit)
		audit_diff(w, w->known, &fresh, present ? (uint32_t)s.st_uid : 0,
			   "switch file edited outside sluiced");
	*w->known = fresh;
	w->unsaved = 0;    /* an edit by hand is the new truth; audit_diff recorded what it dropped */
	w->known_unread = 0;
	post_set(w, seq, w->first_read && !retried, 0, NULL, 0);
	sweep_expired(w, path, seq);
}

static void *writer_main(void *arg)
{
	struct iowriter *w = arg;

	for (;;) {
		struct iow_job *list, *next;
		struct timespec until;
		uint64_t last = 0;

		pthread_mutex_lock(&w->mu);
		if (!w->head && !w->stop) {
			clock_deadline(CLOCK_MONOTONIC, POLL_NS, &until);
			pthread_cond_timedwait(&w->cv, &w->mu, &until);
		}
		if (w->stop && !w->head) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		list = w->head;
		w->head = w->tail = NULL;
		w->queued = 0;
		last = w->done_seq;
		w->busy_since_ns = monotonic_ns();
		pthread_mutex_unlock(&w->mu);

		/* An edit made outside sluiced since the last look is audited as such before a
		 * job reads the file and builds on it. */
		if (list)
			watch_file(w, last);
		for (; list; list = next) {
			next = list->next;
			run_job(w, list);
			last = list->seq;
			if (list->n_changes)
				post_set(w, last, 0, 0, NULL, 0);
			pthread_mutex_lock(&w->mu);
			w->done_seq = last;
			pthread_mutex_unlock(&w->mu);
			free(list->changes);
			free(list->audit);
			free(list);
		}
		watch_file(w, last);
		pthread_mutex_lock(&w->mu);
		w->busy_since_ns = 0;
		pthread_mutex_unlock(&w->mu);
	}
	pthread_mutex_lock(&w->mu);
	w->exited = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int iow_start(struct iowriter *w, const char *state_dir, long group_gid, int wait_ms,
	      char *err, size_t errlen)
{
	pthread_condattr_t ca;
	struct timespec until;

	memset(w, 0, sizeof(*w));
	snprintf(w->state_dir, sizeof(w->state_dir), "%s", state_dir);
	w->group_gid = group_gid;
	w->news = calloc(1, sizeof(*w->news));
	w->known = calloc(1, sizeof(*w->known));
	if (!w->news || !w->known) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->thread, NULL, writer_main, w)) {
		snprintf(err, errlen, "cannot start the file writer thread");
		return -1;
	}
	w->started = 1;
	clock_deadline(CLOCK_MONOTONIC, (unsigned long long)wait_ms * 1000000ull, &until);
	pthread_mutex_lock(&w->mu);
	while (!w->first_read)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

void iow_stop(struct iowriter *w, int wait_ms)
{
	struct timespec until;
	int done;

	free(w->spare);
	w->spare = NULL;
	if (!w->started)
		return;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_ms / 1000 + 1;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->cv);
	while (!w->exited)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT)
			break;
	done = w->exited;
	pthread_mutex_unlock(&w->mu);
	if (done)
		pthread_join(w->thread, NULL);
	else
		pthread_detach(w->thread);
	w->started = 0;
}

int iow_reserve(struct iowriter *w, char *err, size_t errlen)
{
	int queued;

	if (!w->spare)
		w->spare = calloc(1, sizeof(*w->spare));
	if (!w->spare) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_mutex_lock(&w->mu);
	queued = w->queued;
	pthread_mutex_unlock(&w->mu);
	if (queued < IOW_MAX_QUEUE)
		return 0;   /* the thread only ever takes jobs out: the place stays free */
	snprintf(err, errlen, "the switch file writer is busy (%d jobs wait for the state "
		 "directory %s)", queued, w->state_dir);
	return -1;
}

uint64_t iow_enqueue(struct iowriter *w, struct iow_change *changes, int n_changes,
		     struct audit_entry *audit, int n_audit)
{
	struct iow_job *j = w->spare ? w->spare : calloc(1, sizeof(*j));
	static uint64_t seq;   /* one writer per process */
	uint64_t s = 0;

	w->spare = NULL;
	if (!j)
		return 0;
	pthread_mutex_lock(&w->mu);
	if (w->queued < IOW_MAX_QUEUE) {
		j->seq = s = ++seq;
		j->changes = changes;
		j->n_changes = n_changes;
		j->audit = audit;
		j->n_audit = n_audit;
		if (w->tail)
			w->tail->next = j;
		else
			w->head = j;
		w->tail = j;
		w->queued++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	if (!s)
		w->spare = j;   /* kept for the next one */
	return s;
}

void iow_take(struct iowriter *w, uint64_t sent, struct iow_news *out)
{
	pthread_mutex_lock(&w->mu);
	/* Copy only what there is: most ticks there is nothing. */
	out->have_set = w->news->have_set;
	out->external = w->news->external;
	out->corrupt = w->news->corrupt;
	if (out->have_set)
		out->set = w->news->set;
	out->n_expired = w->news->n_expired;
	memcpy(out->expired, w->news->expired, sizeof(out->expired[0]) * (size_t)out->n_expired);
	out->n_msgs = w->news->n_msgs;
	memcpy(out->msgs, w->news->msgs, sizeof(out->msgs[0]) * (size_t)out->n_msgs);
	if (out->have_set && w->news_seq < sent)
		out->have_set = 0;   /* older than a change still queued: wait for the next */
	w->news->have_set = 0;
	w->news->external = 0;
	w->news->n_expired = 0;
	w->news->n_msgs = 0;
	pthread_mutex_unlock(&w->mu);
}

void iow_progress(struct iowriter *w, uint64_t *done_seq, unsigned long long *busy_ns,
		  int *queued)
{
	unsigned long long now = monotonic_ns();

	pthread_mutex_lock(&w->mu);
	*done_seq = w->done_seq;
	*busy_ns = w->busy_since_ns ? now - w->busy_since_ns : 0;
	*queued = w->queued;
	pthread_mutex_unlock(&w->mu);
}

int iow_job_failed(struct iowriter *w, uint64_t seq, char *why, size_t len)
{
	int failed;

	pthread_mutex_lock(&w->mu);
	failed = seq && w->fails[seq % IOW_FAILS].seq == seq;
	if (failed && why && len)
		snprintf(why, len, "%s", w->fails[seq % IOW_FAILS].why);
	pthread_mutex_unlock(&w->mu);
	return failed;
}
