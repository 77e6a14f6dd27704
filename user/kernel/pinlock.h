/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* One sluiced per pin dir. Two controllers on the same pinned maps would each write verdicts,
 * the heartbeat and the hash keys the other relies on, and each would take the other's
 * in-flight counts for its own. A second one waits, touching nothing, until the first lets go:
 * a handover (start the new one, stop the old one) works, a duplicate does nothing but wait. */
#ifndef SLUICE_PINLOCK_H
#define SLUICE_PINLOCK_H

#include <stddef.h>

#define PIN_LOCK_WAIT_FOREVER 0xffffffffu

/* Take the pin dir's lock (an exclusive flock on the directory, released by the kernel when
 * the holder exits, however it exits), waiting up to wait_ms for another holder to let go
 * (saying who it waits for in the log, once a minute). A process asked to stop while it waits
 * (a pending SIGTERM or SIGINT: sluiced blocks them to read them from its signalfd) gives up.
 * Returns the lock's fd (close it to let go), or -errno with a message in err: -EWOULDBLOCK
 * when another process still holds it, -EINTR when asked to stop. */
int pin_dir_lock(const char *pin_dir, unsigned wait_ms, char *err, size_t errlen);

/* The pid holding a flock on the file open at fd (from /proc/locks), 0 when none is found. */
int pin_dir_lock_holder(int fd);

#endif
