// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: sluiced's signal dispositions (user/daemon/procsig.c). In a container sluiced is
 * PID 1, so every process orphaned there is handed to it: a probe's `sh -c "sluicectl ... |
 * grep"` whose shell the kubelet kills at its timeout, a `kubectl exec` cut off. sluiced never
 * waits for children, so they must not stay behind as zombies, each holding a pid of the
 * pod's limit. A subreaper stands in for PID 1 here: orphans below it are handed to it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "daemon/procsig.h"

/* The state letter of /proc/PID/stat ('Z' zombie), 0 when the pid is gone. */
static char proc_state(pid_t pid)
{
	char path[64], line[512] = "", *end;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	/* "PID (COMM) S ...": COMM may hold spaces and parentheses, the last ')' ends it */
	end = strrchr(line, ')');
	return end && end[1] == ' ' ? end[2] : '?';
}

/* An orphan handed to a process set up by procsig_setup is reaped by the kernel when it
 * exits: no zombie is left, though the process never waits for it. */
static void test_orphans_leave_no_zombie(void **state)
{
	int pids[2], go[2];
	pid_t child, orphan = 0;
	sigset_t mask;
	char st = 'Z';

	(void)state;
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	procsig_setup(&mask);
	sigprocmask(SIG_UNBLOCK, &mask, NULL);
	assert_int_equal(pipe(pids), 0);
	assert_int_equal(pipe(go), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* the shell of a probe: starts a command and is killed before it waits for it */
		pid_t cmd = fork();

		if (cmd == 0) {
			char b;

			close(go[1]);
			(void)!read(go[0], &b, 1);      /* until the test lets it end */
			_exit(0);
		}
		(void)!write(pids[1], &cmd, sizeof(cmd));
		_exit(0);
	}
	close(go[0]);
	close(pids[1]);
	assert_int_equal(read(pids[0], &orphan, sizeof(orphan)), (ssize_t)sizeof(orphan));
	close(pids[0]);
	/* the child is gone once this returns (reaped here, or by the kernel: ECHILD), and its
	 * command is ours now */
	(void)waitpid(child, NULL, 0);
	close(go[1]);                               /* the orphan exits */
	for (unsigned long long until = monotonic_ns() + 2000000000ull; monotonic_ns() < until;) {
		struct timespec tick = { 0, 1000000 };

		st = proc_state(orphan);
		if (st == 0)
			break;
		nanosleep(&tick, NULL);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)       /* leave no zombie behind the test */
		;
	if (st != 0)
		fprintf(stderr, "orphan %d left in state %c\n", (int)orphan, st);
	assert_int_equal(st, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_orphans_leave_no_zombie),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
