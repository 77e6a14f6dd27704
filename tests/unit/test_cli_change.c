// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: sluicectl's side of a change (user/cli/cli_daemon.c, cli_change) against a
 * stand-in for sluiced on a temp socket file: a forked child that takes one request and
 * answers it as sluiced does, after as long as sluiced's ticks take. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/config.h"
#include "common/log.h"

struct ctx {
	char dir[64];
	pid_t child;
	struct cli_opts o;
	struct sluice_config cfg;
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	snprintf(c->dir, sizeof(c->dir), "/tmp/sluice-cli.XXXXXX");
	if (!mkdtemp(c->dir))
		return -1;
	log_init("test_cli_change", -2);   /* errors only */
	c->o.have_rec = 1;
	c->o.rec.pid = (long)getpid();
	snprintf(c->o.rec.state_dir, sizeof(c->o.rec.state_dir), "%s", c->dir);
	snprintf(c->o.rec.pin_dir, sizeof(c->o.rec.pin_dir), "%s", c->dir);
	snprintf(c->o.rec.socket, sizeof(c->o.rec.socket), "%s/sluiced.sock", c->dir);
	c->o.state_dir = c->o.rec.state_dir;
	c->o.pin_dir = c->o.rec.pin_dir;
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	char path[80];

	if (c->child > 0) {
		kill(c->child, SIGKILL);
		waitpid(c->child, NULL, 0);
	}
	unlink(c->o.rec.socket);
	snprintf(path, sizeof(path), "%s.link", c->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/other", c->dir);
	rmdir(path);
	rmdir(c->dir);
	free(c);
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

/* A stand-in for sluiced: listens on the record's socket, takes one request and answers
 * "applied and audited" answer_ms after it came (sluiced answers at its ticks). */
static void fake_daemon(struct ctx *c, long answer_ms)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	assert_true(lfd >= 0);
	assert_true(strlen(c->o.rec.socket) < sizeof(a.sun_path));
	memcpy(a.sun_path, c->o.rec.socket, strlen(c->o.rec.socket) + 1);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	c->child = fork();
	assert_true(c->child >= 0);
	if (c->child == 0) {
		static const char ans[] = "{\"ok\": true, \"message\": \"web L3 shed 50%\", "
					  "\"applied\": true, \"audited\": true, \"ticks\": 2, "
					  "\"maps\": []}";
		char buf[4096];
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0 || recv(fd, buf, sizeof(buf), 0) <= 0)
			_exit(1);
		sleep_ms(answer_ms);
		_exit(send(fd, ans, sizeof(ans) - 1, MSG_NOSIGNAL) == sizeof(ans) - 1 ? 0 : 1);
	}
	close(lfd);
}

static json_t *a_switch_set(void)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "service", "web", "class", "L3", "shed", "50",
			 "reason", "INC-1", "ttl", "5m");
}

/* With control_interval_ms at 3 s (the config allows up to 60 s) sluiced answers at its
 * second tick, 5.3 s after the request here: sluicectl waited a fixed 5 s, gave up with
 * "whether it applied the change is unknown" and exit 1 for a change in force. */
static void test_waits_for_a_daemon_with_slow_ticks(void **state)
{
	struct ctx *c = *state;

	c->cfg.control_interval_ms = 3000;
	c->o.cfg = &c->cfg;
	fake_daemon(c, 5300);
	assert_int_equal(cli_change(&c->o, "switch set", a_switch_set()), EXIT_OK);
}

/* A quick daemon's answer is taken as before. */
static void test_quick_answer(void **state)
{
	struct ctx *c = *state;

	fake_daemon(c, 0);
	assert_int_equal(cli_change(&c->o, "switch set", a_switch_set()), EXIT_OK);
}

/* $SLUICE_STATE_DIR or --state-dir written with a trailing slash, or through a symlink, names
 * the daemon's own state dir: the change was refused as "keeps its switches in DIR, not DIR/",
 * exit 1, for every command of a shell that exported it so. Another directory still is. */
static void test_state_dir_by_another_name(void **state)
{
	struct ctx *c = *state;
	char slash[80], link[80], other[80];

	snprintf(slash, sizeof(slash), "%s/", c->dir);
	snprintf(link, sizeof(link), "%s.link", c->dir);
	snprintf(other, sizeof(other), "%s/other", c->dir);
	assert_int_equal(symlink(c->dir, link), 0);
	assert_int_equal(mkdir(other, 0700), 0);
	fake_daemon(c, 0);
	c->o.state_dir_given = 1;
	c->o.state_dir = other;
	assert_int_equal(cli_change(&c->o, "switch set", a_switch_set()), EXIT_RUNTIME);
	c->o.state_dir = link;
	c->o.pin_dir_given = 1;
	c->o.pin_dir = slash;
	assert_int_equal(cli_change(&c->o, "switch set", a_switch_set()), EXIT_OK);
}

/* What cli_change() printed on stdout, into buf. */
static json_t *change_printing(struct ctx *c, int *rc, char *buf, size_t len)
{
	char path[96];
	int saved = dup(STDOUT_FILENO), fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stdout", c->dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	fflush(stdout);
	assert_int_equal(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
	*rc = cli_change(&c->o, "switch set", a_switch_set());
	fflush(stdout);
	assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
	close(saved);
	n = pread(fd, buf, len - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n >= 0);
	buf[n] = 0;
	return json_loads(buf, 0, NULL);     /* NULL unless the whole output is one document */
}

/* --json: a change's confirmation is one JSON object on stdout, sluiced's answer with the
 * verb and the daemon, and nothing else there (it printed the line of text). */
static void test_json_confirmation(void **state)
{
	struct ctx *c = *state;
	char buf[4096];
	json_t *j;
	int rc;

	c->o.json = 1;
	fake_daemon(c, 0);
	j = change_printing(c, &rc, buf, sizeof(buf));
	assert_int_equal(rc, EXIT_OK);
	if (!j)
		print_message("# stdout: %s\n", buf);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_true(json_is_true(json_object_get(j, "applied")));
	assert_true(json_is_true(json_object_get(j, "audited")));
	assert_string_equal(json_string_value(json_object_get(j, "op")), "switch set");
	assert_string_equal(json_string_value(json_object_get(j, "message")), "web L3 shed 50%");
	assert_int_equal(json_integer_value(json_object_get(j, "pid")), c->o.rec.pid);
	json_decref(j);
}

/* --json and no daemon: exit 1, the reason on stderr, nothing on stdout. */
static void test_json_no_daemon_prints_nothing(void **state)
{
	struct ctx *c = *state;
	char buf[4096];
	int rc;

	c->o.json = 1;
	c->o.have_rec = 0;
	assert_null(change_printing(c, &rc, buf, sizeof(buf)));
	assert_int_equal(rc, EXIT_RUNTIME);
	assert_string_equal(buf, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_quick_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waits_for_a_daemon_with_slow_ticks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_by_another_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json_confirmation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json_no_daemon_prints_nothing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
