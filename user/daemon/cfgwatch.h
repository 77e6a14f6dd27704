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
/* A change is read once the file has been left alone this long: a file written in place
 * (cp, a shell redirect, a slow copy over the network) is empty or a prefix in between, and a
 * prefix cut at a line end is often a valid config with fewer services (or a shorter port
 * number). Read mid-write, that would be applied: services dropped, their learned state lost,
 * for a tick. */
#define CFGWATCH_SETTLE_NS 200000000ull
/* ...or this long after the first change, for a directory that never stays quiet (another
 * file in it written all the time) */
#define CFGWATCH_SETTLE_MAX_NS 2000000000ull

struct cfgwatch {
	int fd;                  /* inotify, -1 without */
	int wd[2];               /* the path's directory as named, and as resolved */
	char path[512];
	int have;                /* stat(path) worked at the last look */
	struct stat st;          /* what it said */
	unsigned long long next_look_ns;
	int changed;             /* seen, not handed to a reload yet */
	unsigned long long first_ns, last_ns;   /* of the changes since */
};

/* Watch `path` from now on. Returns the descriptor to poll for reading, or -1 (the slow look
 * still runs). */
int cfgwatch_open(struct cfgwatch *w, const char *path, unsigned long long now_ns);
/* The descriptor was readable: 1 when something changed in a watched directory. */
int cfgwatch_events(struct cfgwatch *w, unsigned long long now_ns);
/* At a tick: 1 when the slow look is due and stat(path) says the file is not the one last
 * seen. */
int cfgwatch_look(struct cfgwatch *w, unsigned long long now_ns);
/* 1 once for changes seen (by either) and settled: time to read the file. */
int cfgwatch_due(struct cfgwatch *w, unsigned long long now_ns);
void cfgwatch_close(struct cfgwatch *w);

#endif
