// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluiced's process-wide signal dispositions (procsig.h). */
#include "daemon/procsig.h"

#include <pthread.h>
#include <signal.h>

void procsig_setup(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, mask, NULL);
	/* A reader that goes away (a FIFO in the state dir, a client that hangs up) must cost an
	 * error on that write, never the process. */
	signal(SIGPIPE, SIG_IGN);
}
