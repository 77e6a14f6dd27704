// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Event JSON: fields, escaping, numbers, truncation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "control/events.h"
#include "daemon/daemon.h"
#include "fillfd.h"

static void test_json_line(void **st)
{
	struct sluice_event ev;
	char buf[512];
	int n;
	(void)st;
	sluice_event_init(&ev, 123456789ull, SLUICE_EV_INFO, "we\"b\\x\n", SLUICE_EVM_BREAKER, "closed",
			  "open", "error_rate");
	sluice_event_num(&ev, "calls", 22);
	sluice_event_num(&ev, "error_rate", 0.5);
	sluice_event_num(&ev, "bad", NAN);
	n = sluice_event_json(&ev, buf, sizeof(buf));
	assert_int_equal(n, (int)strlen(buf));
	assert_string_equal(buf,
		"{\"t_ns\":123456789,\"event\":\"state_change\",\"level\":\"info\","
		"\"service\":\"we\\\"b\\\\x\\n\",\"machine\":\"breaker\",\"from\":\"closed\","
		"\"to\":\"open\",\"why\":\"error_rate\",\"calls\":22,\"error_rate\":0.5,\"bad\":null}");
	assert_null(strchr(buf, '\n'));
}

static void test_json_truncation_and_limits(void **st)
{
	struct sluice_event ev;
	char small[16];
	int i, n;
	(void)st;
	sluice_event_init(&ev, 1, SLUICE_EV_DEBUG, NULL, SLUICE_EVM_AIMD, "limit", "limit", "x");
	for (i = 0; i < 20; i++)
		sluice_event_num(&ev, "k", i);
	assert_int_equal(ev.n_nums, SLUICE_EV_MAX_NUMS);
	n = sluice_event_json(&ev, small, sizeof(small));
	assert_true(n > (int)sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	ev.cls = 2;
	{
		char buf[512];
		sluice_event_json(&ev, buf, sizeof(buf));
		assert_non_null(strstr(buf, "\"class\":\"L2\""));
		assert_non_null(strstr(buf, "\"service\":\"\""));
		assert_non_null(strstr(buf, "\"level\":\"debug\""));
	}
}

/* Every key is there whatever bytes its text holds: an interface name the kernel took as it
 * came, a message cut inside a character. jansson refuses a string that is not UTF-8, and the
 * key went missing from the line (a script reading "why" got nothing); such a byte shows as
 * U+FFFD instead, and text that is UTF-8 is kept as it is. */
static void test_json_keys_whatever_the_bytes(void **st)
{
	struct sluice_event ev;
	char buf[512];
	(void)st;

	sluice_event_init(&ev, 7, SLUICE_EV_ALERT, "veth\xff" "0", SLUICE_EVM_DAEMON, "native",
			  "gen\xc3", "bad key 'caf\xc3\xa9\xc3': cut");
	sluice_event_json(&ev, buf, sizeof(buf));
	assert_string_equal(buf,
		"{\"t_ns\":7,\"event\":\"state_change\",\"level\":\"alert\","
		"\"service\":\"veth\xef\xbf\xbd" "0\",\"machine\":\"daemon\",\"from\":\"native\","
		"\"to\":\"gen\xef\xbf\xbd\",\"why\":\"bad key 'caf\xc3\xa9\xef\xbf\xbd': cut\"}");
}


/* A test that would block fails instead of hanging. */
static void watchdog_fired(int sig)
{
	static const char msg[] = "watchdog: writing the events blocked\n";
	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

static void watchdog(unsigned s)
{
	signal(SIGALRM, watchdog_fired);
	alarm(s);
}

static void emit_numbered(struct daemon *d, int i)
{
	struct sluice_event ev;

	sluice_event_init(&ev, (uint64_t)i, SLUICE_EV_INFO, "web", SLUICE_EVM_DAEMON, "a", "b",
			  "a reason long enough to make the line a few hundred bytes, as real "
			  "events with their numbers are");
	sluice_event_num(&ev, "seq", i);
	daemon_print_event(d, &ev);
}

/* Read what the reader gets: the junk, then lines; every line whole JSON, numbered ones in
 * order. Returns the lines (a NULL-terminated array of objects). */
static json_t *read_lines(int rfd, struct daemon *d)
{
	json_t *all = json_array();
	char *acc = NULL, buf[8192];
	size_t len = 0;
	ssize_t n;
	int fl = fcntl(rfd, F_GETFL);

	fcntl(rfd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		n = read(rfd, buf, sizeof(buf));
		if (n > 0) {
			acc = realloc(acc, len + (size_t)n + 1);
			memcpy(acc + len, buf, (size_t)n);
			len += (size_t)n;
			continue;
		}
		/* the reader took all there was: the next tick writes more, if any waits */
		if (d->evs.on && (d->evs.len || d->evs.dropping)) {
			daemon_events_flush(d);
			continue;
		}
		break;
	}
	acc = realloc(acc, len + 1);
	acc[len] = 0;
	for (char *p = acc, *nl; *p; p = nl + 1) {
		json_error_t err;
		json_t *o;

		while (*p == 'x')
			p++;
		if (!*p)
			break;
		nl = strchr(p, '\n');
		assert_non_null(nl);             /* never half a line */
		*nl = 0;
		o = json_loads(p, 0, &err);
		assert_non_null(o);
		json_array_append_new(all, o);
	}
	free(acc);
	fcntl(rfd, F_SETFL, fl);
	return all;
}

/* What the reader got: numbered lines 0..first-1, a gap of the dropped ones said by one
 * "dropping" -> "writing" line, numbered lines after it; returns how many numbered lines. */
static int check_order(json_t *lines, unsigned long long dropped)
{
	int next = 0, said = 0, numbered = 0;
	size_t i;
	json_t *o;

	json_array_foreach(lines, i, o) {
		json_t *seq = json_object_get(o, "seq");

		if (seq) {
			assert_int_equal((int)json_integer_value(seq), next);
			next++;
			numbered++;
			continue;
		}
		assert_string_equal(json_string_value(json_object_get(o, "to")), "writing");
		assert_int_equal(said, 0);
		assert_non_null(strstr(json_string_value(json_object_get(o, "why")), "dropped"));
		said = 1;
		next += (int)dropped;
	}
	assert_int_equal(said, dropped > 0);
	return numbered;
}

/* A reader of stdout that stopped reading (journald behind, `sluiced | less` paused): events
 * used to block the control loop in fflush until it read again, so no tick, the heartbeat aged
 * and the data path failed open. Now emitting never waits: whole lines are kept while the
 * buffer lasts, then dropped and counted; when the reader is back it gets the kept lines in
 * order, one line saying how many were dropped, then the new ones. */
static void unread_stream_never_blocks(int wfd, int rfd)
{
	static struct daemon d;
	json_t *lines;
	int i, n = 2000;
	unsigned long long dropped;

	memset(&d, 0, sizeof(d));
	fill(wfd);
	assert_int_equal(daemon_events_open(&d, wfd), 0);
	watchdog(10);
	for (i = 0; i < n; i++)
		emit_numbered(&d, i);
	daemon_events_flush(&d);         /* a tick with the reader still away */
	alarm(0);
	dropped = d.evs.dropped_total;
	assert_true(dropped > 0);
	assert_true(d.evs.len <= EVSTREAM_BUF_BYTES);

	lines = read_lines(rfd, &d);
	assert_int_equal(check_order(lines, dropped), n - (int)dropped);
	json_decref(lines);
	assert_int_equal(d.evs.dropping, 0);

	/* the reader keeps up again: the next lines come at once, no tick needed */
	emit_numbered(&d, n);
	assert_int_equal(d.evs.len, 0);
	lines = read_lines(rfd, &d);
	assert_int_equal(json_array_size(lines), 1);
	json_decref(lines);
	assert_int_equal(d.evs.dropped_total, dropped);
	daemon_events_close(&d, 0);
}

static void test_unread_pipe_never_blocks(void **st)
{
	int p[2];
	(void)st;

	assert_int_equal(pipe(p), 0);
	unread_stream_never_blocks(p[1], p[0]);
	close(p[0]);
	close(p[1]);
}

/* journald's stdout is a socket */
static void test_unread_socket_never_blocks(void **st)
{
	int sv[2];
	(void)st;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	unread_stream_never_blocks(sv[0], sv[1]);
	close(sv[0]);
	close(sv[1]);
}

struct drain {
	int rfd;
	size_t got;
};

static void *drain_all(void *arg)
{
	struct drain *dr = arg;
	char buf[8192];
	ssize_t n;

	while ((n = read(dr->rfd, buf, sizeof(buf))) > 0)
		dr->got += (size_t)n;
	return NULL;
}

/* At exit (SIGTERM) the lines that wait are written out when the reader comes back within the
 * wait; with no reader, the wait is bounded and the rest is given up. The descriptor given
 * stays blocking throughout (a shell sharing a terminal never sees it change). */
static void test_exit_writes_out_with_bounded_wait(void **st)
{
	static struct daemon d;
	struct drain dr = { 0 };
	pthread_t th;
	size_t waiting;
	int p[2];
	(void)st;

	assert_int_equal(pipe(p), 0);
	fill(p[1]);
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_events_open(&d, p[1]), 0);
	watchdog(10);
	for (int i = 0; i < 50; i++)
		emit_numbered(&d, i);
	waiting = d.evs.len;
	assert_true(waiting > 0);
	assert_int_equal(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0);
	dr.rfd = p[0];
	assert_int_equal(pthread_create(&th, NULL, drain_all, &dr), 0);
	daemon_events_close(&d, 5000);
	close(p[1]);
	pthread_join(th, NULL);
	assert_int_equal(d.evs.on, 0);
	assert_true(dr.got >= waiting);
	close(p[0]);

	/* nobody reads: back after the wait, not stuck */
	assert_int_equal(pipe(p), 0);
	fill(p[1]);
	assert_int_equal(daemon_events_open(&d, p[1]), 0);
	emit_numbered(&d, 0);
	daemon_events_close(&d, 20);
	alarm(0);
	close(p[0]);
	close(p[1]);
}

/* A regular file gets every line, each complete, from its writer thread. */
static void test_regular_file_gets_every_line(void **st)
{
	static struct daemon d;
	char path[] = "/tmp/sluice-events-XXXXXX", buf[65536];
	int fd = mkstemp(path);
	ssize_t n;
	int lines = 0;
	(void)st;

	assert_true(fd >= 0);
	unlink(path);
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_events_open(&d, fd), 0);
	for (int i = 0; i < 100; i++)
		emit_numbered(&d, i);
	assert_true(evstream_drained(&d.evs, 5000));
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = 0;
	for (char *p = buf; (p = strchr(p, '\n')); p++)
		lines++;
	assert_int_equal(lines, 100);
	assert_int_equal(buf[n - 1], '\n');
	daemon_events_close(&d, 0);
	close(fd);
}

/* A file on a stalled disk (a hung NFS mount, a device in error recovery): its writes wait,
 * and cannot be made not to. The tick only queues the lines; while the disk holds the writer,
 * emitting returns at once, lines beyond the buffer are dropped whole and counted, and once
 * the disk moves again the kept ones are in the file, in order, then one line saying how many
 * were dropped. */
static pthread_mutex_t disk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t disk_cv = PTHREAD_COND_INITIALIZER;
static int disk_stalled, disk_waiting;

static ssize_t stalled_write(int fd, const void *p, size_t n)
{
	pthread_mutex_lock(&disk_mu);
	while (disk_stalled) {
		disk_waiting = 1;
		pthread_cond_broadcast(&disk_cv);
		pthread_cond_wait(&disk_cv, &disk_mu);
	}
	pthread_mutex_unlock(&disk_mu);
	return write(fd, p, n);
}

static void test_stalled_disk_never_blocks(void **st)
{
	static struct daemon d;
	char path[] = "/tmp/sluice-events-XXXXXX";
	int fd = mkstemp(path), rfd, n = 3000;
	unsigned long long dropped;
	json_t *lines;
	(void)st;

	assert_true(fd >= 0);
	rfd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(rfd >= 0);
	unlink(path);
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_events_open(&d, fd), 0);
	d.evs.write_fn = stalled_write;
	disk_stalled = 1;
	watchdog(10);
	emit_numbered(&d, 0);
	pthread_mutex_lock(&disk_mu);         /* the writer is in the disk's hands */
	while (!disk_waiting)
		pthread_cond_wait(&disk_cv, &disk_mu);
	pthread_mutex_unlock(&disk_mu);
	for (int i = 1; i < n; i++)
		emit_numbered(&d, i);
	daemon_events_flush(&d);              /* a tick with the disk still stalled */
	alarm(0);
	dropped = d.evs.dropped_total;
	assert_true(dropped > 0);

	pthread_mutex_lock(&disk_mu);         /* the disk moves again */
	disk_stalled = 0;
	pthread_cond_broadcast(&disk_cv);
	pthread_mutex_unlock(&disk_mu);
	assert_true(evstream_drained(&d.evs, 5000));
	daemon_events_flush(&d);              /* the next tick says how many were dropped */
	assert_true(evstream_drained(&d.evs, 5000));
	lines = read_lines(rfd, &d);
	assert_int_equal(check_order(lines, dropped), n - (int)dropped);
	json_decref(lines);
	daemon_events_close(&d, 1000);
	close(rfd);
	close(fd);
}

/* A reader gone for good (EPIPE): every event is dropped and counted, said once; the
 * descriptor (made non-blocking itself: a pipe with no reader cannot be opened again) gets its
 * flags back at the end. */
static void test_reader_gone_drops_and_counts(void **st)
{
	static struct daemon d;
	int p[2];
	(void)st;

	signal(SIGPIPE, SIG_IGN);            /* as sluiced does */
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_events_open(&d, p[1]), 0);
	watchdog(10);
	for (int i = 0; i < 3; i++)
		emit_numbered(&d, i);
	daemon_events_flush(&d);             /* no "writing" event: nothing would take it */
	alarm(0);
	assert_int_equal(d.evs.broken, EPIPE);
	assert_int_equal(d.evs.dropped_total, 3);
	assert_int_equal(d.evs.dropping, 3);
	daemon_events_close(&d, 1000);
	assert_int_equal(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0);
	close(p[1]);
}

/* A write that fails for a while (a file on a full disk: /dev/full says ENOSPC) is no reader
 * gone: the lines wait, and once the descriptor takes writes again (here another file put in
 * its place) they come out whole and in order; nothing is dropped. */
static void test_full_disk_waits_and_resumes(void **st)
{
	static struct daemon d;
	int full = open("/dev/full", O_WRONLY | O_CLOEXEC), p[2];
	json_t *lines;
	(void)st;

	assert_true(full >= 0);
	assert_int_equal(pipe(p), 0);
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_events_open(&d, full), 0);
	watchdog(10);
	for (int i = 0; i < 3; i++)
		emit_numbered(&d, i);
	daemon_events_flush(&d);
	assert_int_equal(d.evs.broken, 0);
	assert_int_equal(d.evs.dropped_total, 0);
	assert_true(d.evs.len > 0);
	assert_true(dup2(p[1], d.evs.fd) == d.evs.fd);   /* the disk has room again */
	daemon_events_flush(&d);
	emit_numbered(&d, 3);
	alarm(0);
	lines = read_lines(p[0], &d);
	assert_int_equal(check_order(lines, 0), 4);
	json_decref(lines);
	daemon_events_close(&d, 1000);
	close(full);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_line),
		cmocka_unit_test(test_json_truncation_and_limits),
		cmocka_unit_test(test_json_keys_whatever_the_bytes),
		cmocka_unit_test(test_unread_pipe_never_blocks),
		cmocka_unit_test(test_unread_socket_never_blocks),
		cmocka_unit_test(test_exit_writes_out_with_bounded_wait),
		cmocka_unit_test(test_regular_file_gets_every_line),
		cmocka_unit_test(test_stalled_disk_never_blocks),
		cmocka_unit_test(test_reader_gone_drops_and_counts),
		cmocka_unit_test(test_full_disk_waits_and_resumes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
