// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluiced's config watch. See cfgwatch.h. */
#include "daemon/cfgwatch.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* IN_DELETE_SELF/IN_MOVE_SELF: the directory itself went away (renamed, replaced): the
 * watch must be put on whatever has its name now. */
#define CFGWATCH_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB | \
		       IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF)

static void remember(struct cfgwatch *w)
{
	w->have = stat(w->path, &w->st) == 0;
}

static int same(const struct cfgwatch *w)
{
	struct stat s;
	int have = stat(w->path, &s) == 0;

	if (have != w->have)
		return 0;
	return !have || (s.st_dev == w->st.st_dev && s.st_ino == w->st.st_ino &&
			 s.st_size == w->st.st_size &&
			 s.st_mtim.tv_sec == w->st.st_mtim.tv_sec &&
			 s.st_mtim.tv_nsec == w->st.st_mtim.tv_nsec &&
			 s.st_ctim.tv_sec == w->st.st_ctim.tv_sec &&
			 s.st_ctim.tv_nsec == w->st.st_ctim.tv_nsec);
}

/* Put the watches on the directories the path names now: its directory as written (a
 * ConfigMap swaps `..data` there), and the directory of the file it resolves to (a symlink
 * to a file elsewhere is edited there). Adding a directory already watched gives its watch
 * back; a watch on a directory no longer named is dropped (which queues an IN_IGNORED). */
static void rewatch(struct cfgwatch *w)
{
	char dir[sizeof(w->path)], real[PATH_MAX];
	int wd[2] = { -1, -1 };

	snprintf(dir, sizeof(dir), "%s", w->path);
	wd[0] = inotify_add_watch(w->fd, dirname(dir), CFGWATCH_MASK);
	if (realpath(w->path, real))
		wd[1] = inotify_add_watch(w->fd, dirname(real), CFGWATCH_MASK);
	if (wd[1] == wd[0])
		wd[1] = -1;
	for (int i = 0; i < 2; i++)
		if (w->wd[i] >= 0 && w->wd[i] != wd[0] && w->wd[i] != wd[1])
			inotify_rm_watch(w->fd, w->wd[i]);
	w->wd[0] = wd[0];
	w->wd[1] = wd[1];
}

static void note_change(struct cfgwatch *w, unsigned long long now_ns)
{
	if (!w->changed)
		w->first_ns = now_ns;
	w->changed = 1;
	w->last_ns = now_ns;
}

int cfgwatch_open(struct cfgwatch *w, const char *path, unsigned long long now_ns)
{
	memset(w, 0, sizeof(*w));
	w->wd[0] = w->wd[1] = -1;
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->next_look_ns = now_ns + CFGWATCH_LOOK_NS;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd >= 0)
		rewatch(w);
	remember(w);
	return w->fd;
}

int cfgwatch_events(struct cfgwatch *w, unsigned long long now_ns)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int any = 0;

	if (w->fd < 0)
		return 0;
	for (ssize_t n; (n = read(w->fd, buf, sizeof(buf))) > 0;)
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)p;

			/* a watch dropped (by rewatch, or after IN_DELETE_SELF) is no change */
			any |= !(e->mask & IN_IGNORED);
			p += sizeof(*e) + e->len;
		}
	if (any) {
		/* before the reload reads the file: a change after this is seen by the new watches */
		rewatch(w);
		remember(w);
		note_change(w, now_ns);
	}
	return any;
}

int cfgwatch_look(struct cfgwatch *w, unsigned long long now_ns)
{
	if (now_ns < w->next_look_ns)
		return 0;
	w->next_look_ns = now_ns + CFGWATCH_LOOK_NS;
	if (same(w))
		return 0;
	if (w->fd >= 0)
		rewatch(w);
	remember(w);
	note_change(w, now_ns);
	return 1;
}

int cfgwatch_due(struct cfgwatch *w, unsigned long long now_ns)
{
	if (!w->changed || (now_ns - w->last_ns < CFGWATCH_SETTLE_NS &&
			    now_ns - w->first_ns < CFGWATCH_SETTLE_MAX_NS))
		return 0;
	w->changed = 0;
	return 1;
}

void cfgwatch_close(struct cfgwatch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}
