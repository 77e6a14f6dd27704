// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "kernel/pinlock.h"
#include "common/log.h"

/* /proc/locks names the file a lock is on as MAJOR:MINOR:INODE, the device numbers in hex. */
int pin_dir_lock_holder(int fd)
{
	struct stat st;
	char line[256];
	FILE *f;
	int found = 0;

	if (fstat(fd, &st) || !(f = fopen("/proc/locks", "re")))
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char kind[16];
		unsigned maj, min;
		unsigned long ino;
		int pid;

		/* "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; blocked waiters are "-> ..." */
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%lu", kind, &pid, &maj, &min, &ino) == 5 &&
		    !strcmp(kind, "FLOCK") && maj == major(st.st_dev) && min == minor(st.st_dev) &&
		    ino == st.st_ino && pid > 0 && pid != getpid())
			found = pid;
	}
	fclose(f);
	return found;
}

static int asked_to_stop(void)
{
	sigset_t pending;

	return !sigpending(&pending) &&
	       (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1);
}

static void holder_text(int fd, char *out, size_t len)
{
	int pid = pin_dir_lock_holder(fd);

	if (pid)
		snprintf(out, len, "another sluiced (pid %d)", pid);
	else
		snprintf(out, len, "another sluiced");
}

/* The directory locked must still be the one at the path: one removed while this process
 * waited (`sluicectl detach`) and made again by another sluiced is another directory, with a
 * lock of its own. */
static int still_at_path(int fd, const char *pin_dir)
{
	struct stat held, now_at;

	return !fstat(fd, &held) && !stat(pin_dir, &now_at) && held.st_dev == now_at.st_dev &&
	       held.st_ino == now_at.st_ino;
}

int pin_dir_lock(const char *pin_dir, unsigned wait_ms, char *err, size_t errlen)
{
	struct timespec nap = { 0, 20 * 1000000L };
	unsigned long long waited = 0, said = 0;
	char who[64];

	for (;;) {
		int fd = open(pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e, stop;

		if (fd < 0) {
			e = errno;
			snprintf(err, errlen, "cannot open the pin dir %s: %s", pin_dir, strerror(e));
			return -e;
		}
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			if (still_at_path(fd, pin_dir)) {
				if (said)
					log_info("took over the pin dir %s after %llu ms", pin_dir, waited);
				return fd;
			}
			close(fd); /* replaced while waited for: the new one's lock is the one */
			continue;
		}
		e = errno;
		if (e != EWOULDBLOCK && e != EINTR) {
			snprintf(err, errlen, "cannot lock the pin dir %s: %s", pin_dir, strerror(e));
			close(fd);
			return -e;
		}
		stop = asked_to_stop();
		if (stop || (wait_ms != PIN_LOCK_WAIT_FOREVER && waited >= wait_ms)) {
			holder_text(fd, who, sizeof(who));
			snprintf(err, errlen, "%s runs on the pin dir %s: two would write the same maps; "
				 "%s", who, pin_dir, stop ? "asked to stop while waiting for it" :
				 "stop it first, or give this one its own --pin-dir");
			close(fd);
			return stop ? -EINTR : -EWOULDBLOCK;
		}
		if (waited >= said) {
			holder_text(fd, who, sizeof(who));
			log_warn("%s runs on the pin dir %s: waiting for it to stop before taking over "
				 "(%llu s so far)", who, pin_dir, waited / 1000);
			said = waited + 60000;
		}
		close(fd);
		nanosleep(&nap, NULL);
		waited += 20;
	}
}
