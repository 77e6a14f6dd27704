/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* How sluiced notices that its config file changed. inotify on the directories the path
 * goes through, renewed after every change (a directory replaced, a symlink now pointing
 * elsewhere), and a slow look at stat(path) behind it for what no watch can see: a directory
 * in the path that is itself a symlink swapped to another one, or no inotify at all. Either
 * only says "look again": daemon_reload reads the file and compares. */
#ifndef SLUICE_DAEMON_CFGWATCH_H
#define SLUICE_DAEMON_CFGWATCH_H

#include <sys/stat.h>

#define CFGWATCH_LOOK_NS 1000000000ull  /* the slow look: once a second */

struct cfgwatch {
	int fd;                  /* inotify, -1 without */
	int wd[2];               /* the path's directory as named, and as resolved */
	char path[512];
	int have;                /* stat(path) worked at the last look */
	struct stat st;          /* what it said */
	unsigned long long next_look_ns;
};

/* Watch `path` from now on. Returns the descriptor to poll for reading, or -1 (the slow look
 * still runs). */
int cfgwatch_open(struct cfgwatch *w, const char *path, unsigned long long now_ns);
/* The descriptor was readable: 1 when something changed in a watched directory. */
int cfgwatch_events(struct cfgwatch *w);
/* At a tick: 1 when the slow look is due and stat(path) says the file is not the one last
 * seen. */
int cfgwatch_look(struct cfgwatch *w, unsigned long long now_ns);
void cfgwatch_close(struct cfgwatch *w);

#endif
