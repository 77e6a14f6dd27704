// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: the switch set in force and the writer protocol of the state directory.
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

uint32_t switch_state_admit(const struct switch_state *st, const char *service, int cls,
			    uint64_t now)
{
	return sw_admit_ratio(&st->set, service, cls, now);
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

/* Move the damaged file aside, but only the very file that was read (seen): a good file an
 * operator renamed in since the read is put back where it was. 0: moved (saved names where
 * to); 1: PATH holds another file now, or none, to be read again; -1 with err. */
static int move_damaged_aside(const char *path, const struct stat *seen, uint64_t now,
			      char *saved, size_t savedlen, char *err, size_t errlen)
{
	struct stat moved;

	if (sw_quarantine(path, now, saved, savedlen, err, errlen))
		return lstat(path, &moved) && errno == ENOENT ? 1 : -1;
	/* stat, not lstat: a symlink at the path was read through (sw_load opens it) */
	if (stat(saved, &moved) == 0 && moved.st_dev == seen->st_dev &&
	    moved.st_ino == seen->st_ino)
		return 0;
	/* not what was read: back, unless yet another file took the name meanwhile */
	if (sw_rename_noreplace(saved, path))
		return errf(err, errlen, "%s was replaced while it was read, and the new file, "
			    "moved to %s, cannot be put back (%s)", path, saved, strerror(errno));
	return 1;
}

int switch_writer_open(const char *state_dir, uint64_t now, struct sw_set *set,
		       struct stat *seen, char *path, size_t pathlen, char *note, size_t notelen,
		       char *err, size_t errlen)
{
	char lerr[SWST_ERR_LEN], qerr[256], saved[PATH_MAX];
	int fd, rc, moved;

	if (note && notelen)
		note[0] = 0;
	if (state_path(path, pathlen, state_dir, SW_FILE_NAME))
		return errf(err, errlen, "switch file path too long under %s", state_dir);
	if (state_dir_ensure(state_dir, err, errlen))
		return -1;
	fd = sw_lock(path, err, errlen);
	if (fd < 0)
		return -1;
	/* An operator's `mv new switches.json` takes no lock: the file moved aside must be the
	 * one found damaged, not a good one renamed in after the read. */
	for (int tries = 0; ; tries++) {
		rc = sw_load_seen(path, set, seen, lerr, sizeof(lerr));
		if (rc == SW_LOAD_UNREADABLE) {
			/* Not damage: out of descriptors or memory, an I/O error. The file may hold
			 * every switch in force; moved aside, the save after this wrote an empty
			 * set over them. The writer tries again later (sluiced: once a second). */
			sw_unlock(fd);
			return errf(err, errlen, "%s\nnothing changed: the file is kept and tried "
				    "again", lerr);
		}
		if (!rc)
			return fd;
		moved = move_damaged_aside(path, seen, now, saved, sizeof(saved), qerr,
					   sizeof(qerr));
		if (!moved)
			break;
		if (moved < 0 || tries == 2) {
			sw_unlock(fd);
			return errf(err, errlen, "%s\nand it cannot be moved aside (%s): nothing "
				    "changed", lerr, moved < 0 ? qerr : "it is replaced again and "
				    "again while it is read");
		}
	}
	errf(note, notelen, "%s\nthe damaged file was moved aside to %s; starting from an empty "
	     "set (see `sluicectl switch log` for what was in force)", lerr, saved);
	sw_set_init(set);
	memset(seen, 0, sizeof(*seen));   /* nothing at the path now */
	return fd;
}

int switch_writer_save(const char *path, const struct sw_set *set, const struct stat *read,
		       struct stat *written, char *err, size_t errlen)
{
	return sw_save_seen(path, set, read, written, err, errlen);
}
