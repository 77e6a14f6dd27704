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
	/* In a container sluiced is PID 1 and inherits every orphan there (a probe's shell killed
	 * at its timeout leaves its sluicectl and grep). It starts no children and waits for
	 * none: with SIGCHLD ignored the kernel reaps them, instead of a zombie per orphan
	 * holding a pid of the pod's limit until the probes cannot fork. */
	signal(SIGCHLD, SIG_IGN);
}
