// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: the daemon's side of the manual switches; helpers shared with sluicectl.
 * See switchstate.h. */
#include "common/errf.h"
#include "ops/switchstate.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/audit.h"
#include "common/duration.h"


int state_path(char *buf, size_t len, const char *state_dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", state_dir, name);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int state_dir_ensure(const char *state_dir, char *err, size_t errlen)
{
	char p[PATH_MAX];
	struct stat st;
	size_t n;

	if (!state_dir || !state_dir[0])
		return errf(err, errlen, "no state directory given");
	if (snprintf(p, sizeof(p), "%s", state_dir) >= (int)sizeof(p))
		return errf(err, errlen, "state directory path too long: %s", state_dir);
	n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = 0;
	for (char *s = p + 1; ; s++) {
		int last = *s == 0;

		if (*s != '/' && !last)
			continue;
		*s = 0;
		if (mkdir(p, 0755) == 0) {
			chmod(p, 0755); /* whatever the umask: readers (switch ls) need r-x */
		} else if (errno != EEXIST) {
			return errf(err, errlen, "cannot create state directory %s: %s", p,
				    strerror(errno));
		}
		if (last)
			break;
		*s = '/';
	}
	if (stat(state_dir, &st))
		return errf(err, errlen, "state directory %s: %s", state_dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return errf(err, errlen, "state directory %s is not a directory", state_dir);
	return 0;
}

int state_audit_append(const char *state_dir, const struct audit_entry *e, char *err,
		       size_t errlen)
{
	char path[PATH_MAX];
	int fd;

	if (state_path(path, sizeof(path), state_dir, AUDIT_FILE_NAME))
		return errf(err, errlen, "audit log path too long under %s", state_dir);
	/* Create it 0640 ourselves (audit_append would create 0644). */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (fd >= 0) {
		fchmod(fd, 0640);
		close(fd);
	}
	return audit_append(path, e, err, errlen);
}

void switch_state_init(struct switch_state *st)
{
	memset(st, 0, sizeof(*st));
	sw_set_init(&st->set);
}

static int same_file(const struct switch_state *st, const struct stat *s)
{
	return st->have_file && st->dev == s->st_dev && st->ino == s->st_ino &&
	       st->size == s->st_size &&
	       st->mtime.tv_sec == s->st_mtim.tv_sec && st->mtime.tv_nsec == s->st_mtim.tv_nsec &&
	       st->ctime.tv_sec == s->st_ctim.tv_sec && st->ctime.tv_nsec == s->st_ctim.tv_nsec;
}

static void remember(struct switch_state *st, const struct stat *s)
{
	st->have_file = 1;
	st->dev = s->st_dev;
	st->ino = s->st_ino;
	st->size = s->st_size;
	st->mtime = s->st_mtim;
	st->ctime = s->st_ctim;
}

static int sets_equal(const struct sw_set *a, const struct sw_set *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n; i++) {
		if (!sw_equal(&a->sw[i], &b->sw[i]))
			return 0;
	}
	return 1;
}

/* Load the file into st (identity remembered). 1 changed, 0 same content, -1 damaged. */
static int reload(struct switch_state *st, const char *path, char *err, size_t errlen)
{
	struct sw_set *fresh = malloc(sizeof(*fresh));
	struct stat s1;
	int rc, changed;

	if (!fresh)
		return errf(err, errlen, "switch file %s: out of memory", path);

	if (stat(path, &s1)) {
		st->have_file = 0;
		rc = sw_load(path, fresh, err, errlen); /* ENOENT -> 0, else the loud error */
	} else {
		rc = sw_load(path, fresh, err, errlen);
		remember(st, &s1);
	}
	changed = !sets_equal(&st->set, fresh);
	st->set = *fresh;
	free(fresh);
	if (changed)
		st->generation++;
	if (rc) {
		st->corrupt = 1;
		snprintf(st->last_err, sizeof(st->last_err), "%s", err ? err : "damaged switch file");
		return -1;
	}
	st->corrupt = 0;
	st->last_err[0] = 0;
	return changed;
}

/* Under the lock: re-read, drop expired, save once, audit each. */
static int sweep(struct switch_state *st, const char *state_dir, const char *path, uint64_t now,
		 char *err, size_t errlen)
{
	struct sw_set *cur = malloc(sizeof(*cur));
	char lerr[SWST_ERR_LEN];
	struct stat s;
	int fd, n, rc = 0;

	if (!cur)
		return errf(err, errlen, "switch expiry: out of memory");
	fd = sw_lock(path, lerr, sizeof(lerr));
	if (fd < 0) {
		/* Cannot write: still stop shedding (in memory) and report. */
		n = sw_set_expire(&st->set, now, st->expired, SWST_MAX_EXPIRED);
		st->n_expired = n < SWST_MAX_EXPIRED ? n : SWST_MAX_EXPIRED;
		st->generation++;
		free(cur);
		return errf(err, errlen, "switch expiry: %s; %d expired switch(es) dropped in memory "
			    "only, %s still lists them", lerr, n, path);
	}
	if (sw_load(path, cur, lerr, sizeof(lerr))) {
		/* Someone damaged the file since the last poll: never write over it. */
		sw_unlock(fd);
		free(cur);
		sw_set_init(&st->set);
		st->corrupt = 1;
		st->generation++;
		snprintf(st->last_err, sizeof(st->last_err), "%s", lerr);
		return errf(err, errlen, "%s", lerr);
	}
	n = sw_set_expire(cur, now, st->expired, SWST_MAX_EXPIRED);
	st->n_expired = n < SWST_MAX_EXPIRED ? n : SWST_MAX_EXPIRED;
	if (n > 0) {
		if (sw_save(path, cur, lerr, sizeof(lerr))) {
			rc = errf(err, errlen, "switch expiry: cannot save %s: %s", path, lerr);
		} else {
			chmod(path, 0644);
			for (int i = 0; i < st->n_expired; i++) {
				struct audit_entry e;
				const struct sw_switch *x = &st->expired[i];

				audit_entry_make(&e, now, (uint32_t)getuid(), "sluiced", "expire",
						 x->service, x->class, x, NULL, NULL);
				if (state_audit_append(state_dir, &e, lerr, sizeof(lerr)) && !rc)
					rc = errf(err, errlen, "switch %s/%s expired and was removed "
						  "but is NOT in the audit log: %s", x->service,
						  sw_class_str(x->class), lerr);
			}
		}
	}
	if (stat(path, &s) == 0)
		remember(st, &s);
	else
		st->have_file = 0;
	sw_unlock(fd);
	if (!sets_equal(&st->set, cur))
		st->generation++;
	st->set = *cur;
	free(cur);
	st->corrupt = 0;
	st->last_err[0] = 0;
	if (rc)
		return rc;
	return 1;
}

int switch_state_poll(struct switch_state *st, const char *state_dir, uint64_t now_wall_s,
		      char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct stat s;
	int rc = 0, present;

	st->n_expired = 0;
	if (err && errlen)
		err[0] = 0;
	if (state_path(path, sizeof(path), state_dir, SW_FILE_NAME))
		return errf(err, errlen, "switch file path too long under %s", state_dir);
	present = stat(path, &s) == 0;
	if (!st->polled || (present && !same_file(st, &s)) || (!present && st->have_file) ||
	    (!present && errno != ENOENT)) {
		st->polled = 1;
		rc = reload(st, path, err, errlen);
		if (rc < 0)
			return -1;
	}
	for (int i = 0; i < st->set.n; i++) {
		if (st->set.sw[i].expires_at <= now_wall_s) {
			int r = sweep(st, state_dir, path, now_wall_s, err, errlen);
			return r < 0 ? -1 : 1;
		}
	}
	return rc;
}

uint32_t switch_state_admit(const struct switch_state *st, const char *service, int cls,
			    uint64_t now)
{
	return sw_admit_ratio(&st->set, service, cls, now);
}

int cascade_clear_request(const char *state_dir, const char *user, uint32_t uid, uint64_t now,
			  char *err, size_t errlen)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32], iso[SLUICE_ISO_LEN], line[256];
	int fd, n;

	if (state_path(path, sizeof(path), state_dir, CASCADE_CLEAR_FILE))
		return errf(err, errlen, "path too long under %s", state_dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	n = snprintf(line, sizeof(line), "user %s uid %u time %s\n", user, uid,
		     time_format_iso(now, iso, sizeof(iso)));
	if (n < 0 || (size_t)n >= sizeof(line))
		n = (int)sizeof(line) - 1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
	if (write(fd, line, (size_t)n) != n || fsync(fd)) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return errf(err, errlen, "cannot write %s: %s", tmp, strerror(e));
	}
	close(fd);
	if (rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		return errf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(e));
	}
	return 0;
}

int cascade_clear_requested(const char *state_dir, char *who, size_t len)
{
	char path[PATH_MAX], buf[256];
	ssize_t n;
	int fd;

	if (who && len)
		who[0] = 0;
	if (state_path(path, sizeof(path), state_dir, CASCADE_CLEAR_FILE)) {
		errf(who, len, "path too long under %s", state_dir);
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		errf(who, len, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		errf(who, len, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	buf[n] = 0;
	buf[strcspn(buf, "\r\n")] = 0;
	if (unlink(path) && errno != ENOENT) {
		errf(who, len, "cannot remove %s: %s", path, strerror(errno));
		return -1;
	}
	if (who && len)
		snprintf(who, len, "%s", buf[0] ? buf : "unknown requester");
	return 1;
}

int switch_may_change(const char *group, char *why, size_t len)
{
	struct group *gr;
	gid_t *gs;
	int n, ok = 0;

	if (getuid() == 0)
		return 0;
	if (!group || !group[0])
		return errf(why, len, "permission denied: only root may change switches "
			    "(no switch_group is configured)");
	gr = getgrnam(group);
	if (!gr)
		return errf(why, len, "permission denied: only root or members of switch_group "
			    "'%s' may change switches, and that group does not exist", group);
	if (getgid() == gr->gr_gid || getegid() == gr->gr_gid)
		return 0;
	n = getgroups(0, NULL);
	if (n > 0 && (gs = calloc((size_t)n, sizeof(*gs)))) {
		n = getgroups(n, gs);
		for (int i = 0; i < n; i++)
			if (gs[i] == gr->gr_gid)
				ok = 1;
		free(gs);
	}
	if (ok)
		return 0;
	return errf(why, len, "permission denied: only root or members of group '%s' may change "
		    "switches (uid %u is neither)", group, (unsigned)getuid());
}

void switch_caller(char *name, size_t len)
{
	const char *sudo = getenv("SUDO_USER");
	struct passwd *pw;

	if (getuid() == 0 && sudo && sudo[0]) {
		snprintf(name, len, "%s", sudo);
		return;
	}
	pw = getpwuid(getuid());
	if (pw && pw->pw_name && pw->pw_name[0])
		snprintf(name, len, "%s", pw->pw_name);
	else
		snprintf(name, len, "uid%u", (unsigned)getuid());
}

int switch_writer_open(const char *state_dir, uint64_t now, struct sw_set *set,
		       char *path, size_t pathlen, char *note, size_t notelen,
		       char *err, size_t errlen)
{
	char lerr[SWST_ERR_LEN], saved[PATH_MAX];
	int fd;

	if (note && notelen)
		note[0] = 0;
	if (state_path(path, pathlen, state_dir, SW_FILE_NAME))
		return errf(err, errlen, "switch file path too long under %s", state_dir);
	if (state_dir_ensure(state_dir, err, errlen))
		return -1;
	fd = sw_lock(path, err, errlen);
	if (fd < 0)
		return -1;
	if (sw_load(path, set, lerr, sizeof(lerr))) {
		struct stat s;

		if (stat(path, &s) == 0) {
			char qerr[256];
			if (sw_quarantine(path, now, saved, sizeof(saved), qerr, sizeof(qerr))) {
				sw_unlock(fd);
				return errf(err, errlen, "%s\nand it cannot be moved aside (%s): "
					    "nothing changed", lerr, qerr);
			}
			errf(note, notelen, "%s\nthe damaged file was moved aside to %s; starting "
			     "from an empty set (see `sluicectl switch log` for what was in force)",
			     lerr, saved);
		} else {
			sw_unlock(fd);
			return errf(err, errlen, "%s", lerr);
		}
		sw_set_init(set);
	}
	return fd;
}

int switch_writer_save(const char *path, const struct sw_set *set, char *err, size_t errlen)
{
	if (sw_save(path, set, err, errlen))
		return -1;
	chmod(path, 0644);
	return 0;
}
