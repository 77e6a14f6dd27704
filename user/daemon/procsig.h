/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluiced's process-wide signal dispositions, set once at start before any thread exists. */
#ifndef SLUICE_PROCSIG_H
#define SLUICE_PROCSIG_H

#include <signal.h>

/* Block SIGTERM, SIGINT and SIGHUP (in *mask, for the main loop's signalfd: no thread sees
 * them), ignore SIGPIPE, and have the kernel reap children (orphans handed to PID 1). */
void procsig_setup(sigset_t *mask);

#endif
