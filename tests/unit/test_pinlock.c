// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* One sluiced per pin dir: a second one waits for the first to let go, and gives up when it is
 * asked to stop or its wait ends, naming the first one's pid; the lock goes with its holder,
 * however it ends. On a temporary directory (the lock is the directory's flock, the same on
 * bpffs, which test_operator.sh covers with two sluiced). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "common/log.h"

#include "kernel/pinlock.h"

struct fx {
	char dir[64];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/sluice-pinlock.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	rmdir(f->dir);
	free(f);
	return 0;
}

/* A child that takes the lock, says so on `ready`, and holds it until `go` is closed (then
 * waits hold_ms more before it exits) or until it is killed. */
static pid_t holder(const char *dir, unsigned hold_ms, int *go_w)
{
	int ready[2], go[2];
	char b;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		char err[256];
		int fd = pin_dir_lock(dir, 0, err, sizeof(err));

		close(ready[0]);
		close(go[1]);
		if (write(ready[1], fd >= 0 ? "y" : "n", 1) != 1)
			_exit(2);
		if (read(go[0], &b, 1) < 0)
			_exit(2);
		usleep(hold_ms * 1000);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	assert_int_equal(read(ready[0], &b, 1), 1);
	assert_int_equal(b, 'y');
	close(ready[0]);
	*go_w = go[1];
	return pid;
}

static void test_second_instance_refused_with_the_first_ones_pid(void **state)
{
	struct fx *f = *state;
	char err[512] = "", want[32];
	int go, st;
	pid_t pid = holder(f->dir, 0, &go);

	assert_int_equal(pin_dir_lock(f->dir, 100, err, sizeof(err)), -EWOULDBLOCK);
	snprintf(want, sizeof(want), "(pid %d)", (int)pid);
	assert_non_null(strstr(err, want));
	assert_non_null(strstr(err, f->dir));
	/* Killed, not stopped: the kernel lets go of its lock all the same. */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(go);
	int fd = pin_dir_lock(f->dir, 0, err, sizeof(err));
	assert_true(fd >= 0);
	/* ... and this process holds it now: a second open of the dir is refused (no pid of
	 * its own is named), closing the first lets the second in. */
	assert_int_equal(pin_dir_lock(f->dir, 0, err, sizeof(err)), -EWOULDBLOCK);
	assert_null(strstr(err, "(pid"));
	close(fd);
	fd = pin_dir_lock(f->dir, 0, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
}

static void test_holder_on_its_way_out_is_waited_for(void **state)
{
	struct fx *f = *state;
	char err[512];
	int go, st;
	pid_t pid = holder(f->dir, 300, &go);

	close(go); /* it exits 300 ms from now */
	int fd = pin_dir_lock(f->dir, 3000, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fd);
}

/* A pending SIGTERM (blocked, as sluiced blocks it for its signalfd) ends the wait at once. */
static void test_asked_to_stop_while_waiting_gives_up(void **state)
{
	struct fx *f = *state;
	char err[512];
	sigset_t term, old;
	int go, st, sig;
	pid_t pid = holder(f->dir, 0, &go);

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	assert_int_equal(sigprocmask(SIG_BLOCK, &term, &old), 0);
	kill(getpid(), SIGTERM);
	assert_int_equal(pin_dir_lock(f->dir, PIN_LOCK_WAIT_FOREVER, err, sizeof(err)), -EINTR);
	assert_non_null(strstr(err, "asked to stop"));
	assert_int_equal(sigwait(&term, &sig), 0);
	assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
	close(go);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

static void test_missing_dir_is_a_clear_error(void **state)
{
	struct fx *f = *state;
	char err[512], path[96];

	snprintf(path, sizeof(path), "%s/nope", f->dir);
	assert_int_equal(pin_dir_lock(path, 0, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "cannot open the pin dir"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_second_instance_refused_with_the_first_ones_pid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_holder_on_its_way_out_is_waited_for, setup, teardown),
		cmocka_unit_test_setup_teardown(test_asked_to_stop_while_waiting_gives_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_dir_is_a_clear_error, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
