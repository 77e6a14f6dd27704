// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the switch audit log (user/ops/audit.c) and the JSON reader it uses (user/common/jsonio.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/audit.h"
#include "common/duration.h"
#include "common/jsonio.h"
#include "ops/switches.h"

#define T0 1714564800ull /* 2024-05-01T12:00:00Z */

struct ctx {
	char dir[64];
	char path[128];
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	snprintf(c->dir, sizeof(c->dir), "/tmp/sluice-test-audit-XXXXXX");
	if (!mkdtemp(c->dir))
		return -1;
	snprintf(c->path, sizeof(c->path), "%s/audit.log", c->dir);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	unlink(c->path);
	rmdir(c->dir);
	free(c);
	return 0;
}

static void mk(struct sw_switch *sw, const char *cls, const char *pct, const char *reason,
	       const char *ttl, uint64_t now)
{
	char err[256];
	if (sw_make(sw, "web", cls, pct, reason, ttl, "alice", now, NULL, -1, err, sizeof(err)))
		fail_msg("sw_make: %s", err);
}

/* Read the whole file into lines[]; returns the count. */
static int read_lines(const char *path, char lines[][2048], int max)
{
	FILE *f = fopen(path, "r");
	int n = 0;
	assert_non_null(f);
	while (n < max && fgets(lines[n], 2048, f))
		n++;
	fclose(f);
	return n;
}

static void test_audit_append_and_parse(void **state)
{
	struct ctx *c = *state;
	struct sw_switch a, b;
	struct audit_entry e, r;
	char err[256], lines[4][2048];
	struct stat st;

	mk(&a, "L3", "100", "INC-42 \"payments\" slow", "1h", T0);
	audit_entry_make(&e, T0, 1000, "alice", "switch set", "web", SLUICE_L3, NULL, &a, NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);

	mk(&b, "L3", "40", "INC-42 easing off", "30m", T0 + 600);
	audit_entry_make(&e, T0 + 600, 0, "root", "switch set", "web", SLUICE_L3, &a, &b, NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);

	audit_entry_make(&e, T0 + 900, 1001, "bob", "switch clear", "web", SLUICE_L3, &b, NULL,
			 "INC-42 resolved");
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);

	assert_int_equal(stat(c->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(read_lines(c->path, lines, 4), 3);

	/* line 1: set from nothing */
	assert_int_equal(audit_parse_line(lines[0], &r, err, sizeof(err)), 0);
	assert_int_equal(r.time, T0);
	assert_int_equal(r.uid, 1000);
	assert_string_equal(r.user, "alice");
	assert_string_equal(r.command, "switch set");
	assert_string_equal(r.service, "web");
	assert_int_equal(r.class, SLUICE_L3);
	assert_int_equal(r.old.present, 0);
	assert_int_equal(r.new.present, 1);
	assert_int_equal(r.new.shed_pct, 100);
	assert_string_equal(r.new.reason, "INC-42 \"payments\" slow");
	assert_string_equal(r.new.owner, "alice");
	assert_int_equal(r.new.expires_at, T0 + 3600);
	assert_string_equal(r.reason, "INC-42 \"payments\" slow");
	assert_non_null(strstr(lines[0], "\"time\":\"2024-05-01T12:00:00Z\""));
	assert_non_null(strstr(lines[0], "\"old\":null"));

	/* line 2: change, old -> new */
	assert_int_equal(audit_parse_line(lines[1], &r, err, sizeof(err)), 0);
	assert_int_equal(r.uid, 0);
	assert_string_equal(r.user, "root");
	assert_int_equal(r.old.present, 1);
	assert_int_equal(r.old.shed_pct, 100);
	assert_int_equal(r.old.expires_at, T0 + 3600);
	assert_int_equal(r.new.shed_pct, 40);
	assert_int_equal(r.new.expires_at, T0 + 600 + 1800);
	assert_string_equal(r.reason, "INC-42 easing off");

	/* line 3: clear, with its own reason */
	assert_int_equal(audit_parse_line(lines[2], &r, err, sizeof(err)), 0);
	assert_string_equal(r.command, "switch clear");
	assert_int_equal(r.old.present, 1);
	assert_int_equal(r.old.shed_pct, 40);
	assert_int_equal(r.new.present, 0);
	assert_string_equal(r.reason, "INC-42 resolved");
	assert_non_null(strstr(lines[2], "\"new\":null"));
	assert_int_equal(r.time, T0 + 900);
}

/* A write cut short (disk full; here the file size limit) leaves part of a record without
 * its newline; the next record must still start a line of its own and read back. */
static void test_audit_after_short_write(void **state)
{
	struct ctx *c = *state;
	struct audit_entry e, back;
	struct sw_switch sw;
	struct rlimit was, lim;
	struct stat st;
	char err[256], lines[4][2048];
	int n;

	mk(&sw, "L3", "100", "INC-42", "30m", T0);
	audit_entry_make(&e, T0, 1000, "alice", "switch set", "web", 3, NULL, &sw, NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	assert_int_equal(stat(c->path, &st), 0);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
	lim = was;
	lim.rlim_cur = (rlim_t)st.st_size + 40;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	n = audit_append(c->path, &e, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(n, -1);
	assert_non_null(strstr(err, "cannot write audit log"));
	audit_entry_make(&e, T0 + 60, 1000, "alice", "switch clear", "web", 3, &sw, NULL,
			 "INC-42 resolved");
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	n = read_lines(c->path, lines, 4);
	assert_true(n >= 2);
	lines[n - 1][strcspn(lines[n - 1], "\n")] = 0;
	assert_int_equal(audit_parse_line(lines[n - 1], &back, err, sizeof(err)), 0);
	assert_string_equal(back.command, "switch clear");
	lines[0][strcspn(lines[0], "\n")] = 0;
	assert_int_equal(audit_parse_line(lines[0], &back, err, sizeof(err)), 0);
}

/* The log ends mid-line (a record cut short, its truncate failed too) and whether it does
 * cannot be told for the moment (no descriptor to read it with): the record must be refused
 * (the writer keeps it and tries again), not glued onto the cut line, where both read as
 * damaged and `switch log` loses the change. */
static void test_audit_refused_when_its_end_cannot_be_read(void **state)
{
	struct ctx *c = *state;
	struct audit_entry e, back;
	struct sw_switch sw;
	struct rlimit was, low;
	char err[256], lines[4][2048];
	FILE *f;
	int n, next;

	mk(&sw, "L3", "100", "INC-42", "30m", T0);
	audit_entry_make(&e, T0, 1000, "alice", "switch set", "web", 3, NULL, &sw, NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	f = fopen(c->path, "a");
	assert_non_null(f);
	fputs("{\"time\":\"2024-05-01T12:", f);        /* cut short */
	fclose(f);
	next = dup(0);
	assert_true(next >= 0);
	close(next);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
	low = was;
	low.rlim_cur = (rlim_t)next + 1;                 /* the append opens, the look back not */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	n = audit_append(c->path, &e, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	if (n == 0) {                                    /* written: it must read back */
		n = read_lines(c->path, lines, 4);
		lines[n - 1][strcspn(lines[n - 1], "\n")] = 0;
		assert_int_equal(audit_parse_line(lines[n - 1], &back, err, sizeof(err)), 0);
		return;
	}
	assert_int_equal(n, -1);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	n = read_lines(c->path, lines, 4);
	assert_int_equal(n, 3);
	lines[2][strcspn(lines[2], "\n")] = 0;
	assert_int_equal(audit_parse_line(lines[2], &back, err, sizeof(err)), 0);
}

static void test_audit_each_line_is_json(void **state)
{
	struct ctx *c = *state;
	struct sw_switch a;
	struct audit_entry e;
	char err[256], lines[2][2048];

	mk(&a, "L1", "5", "line\\break and tab-free", "5m", T0);
	audit_entry_make(&e, T0, 7, "us\"er", "plan apply L1", "web", SLUICE_L1, NULL, &a, NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	assert_int_equal(read_lines(c->path, lines, 2), 1);
	{
		json_t *v = jsonio_parse(lines[0], strlen(lines[0]), err, sizeof(err));
		assert_non_null(v);
		assert_string_equal(json_string_value(json_object_get(v, "user")), "us\"er");
		assert_string_equal(json_string_value(json_object_get(v, "class")), "L1");
		assert_string_equal(json_string_value(json_object_get(json_object_get(v, "new"),
								      "expires_at")),
				    "2024-05-01T12:05:00Z");
		json_decref(v);
	}
}

/* A caller's name longer than the record holds is cut where a character starts, and one
 * that is not UTF-8 is written with U+FFFD: the record is written either way (it was refused
 * as JSON, the change in force and not audited). 40 two-byte characters: the 32nd would be
 * split at 63 bytes. */
static void test_audit_any_caller_name(void **state)
{
	struct ctx *c = *state;
	struct sw_switch a;
	struct audit_entry e;
	char err[256], lines[3][2048], name[96] = "", want[96] = "";

	for (int i = 0; i < 40; i++)
		strcat(name, "\xc3\xa9");
	for (int i = 0; i < 31; i++)
		strcat(want, "\xc3\xa9");
	mk(&a, "L1", "5", "INC-9", "5m", T0);
	audit_entry_make(&e, T0, 0, name, "switch set", "web", SLUICE_L1, NULL, &a, NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	audit_entry_make(&e, T0, 1000, "caf\xe9", "switch clear", "web", SLUICE_L1, &a, NULL,
			 NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	assert_int_equal(read_lines(c->path, lines, 3), 2);
	assert_int_equal(audit_parse_line(lines[0], &e, err, sizeof(err)), 0);
	assert_string_equal(e.user, want);
	assert_int_equal(audit_parse_line(lines[1], &e, err, sizeof(err)), 0);
	assert_string_equal(e.user, "caf\xef\xbf\xbd");
}

static void test_audit_print_human(void **state)
{
	struct ctx *c = *state;
	struct sw_switch a;
	struct audit_entry e;
	char err[256], *buf = NULL;
	size_t len = 0;
	FILE *out;
	FILE *f;

	mk(&a, "L3", "100", "INC-7", "1h", T0);
	audit_entry_make(&e, T0, 1000, "alice", "switch set", "web", SLUICE_L3, NULL, &a, NULL);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	/* a damaged line in the middle is reported, the rest still printed */
	f = fopen(c->path, "a");
	fputs("{not json\n", f);
	fclose(f);
	audit_entry_make(&e, T0 + 60, 1000, "alice", "switch clear", "web", SLUICE_L3, &a, NULL,
			 "done");
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);

	out = open_memstream(&buf, &len);
	assert_int_equal(audit_print(out, c->path, 0, err, sizeof(err)), 1);
	fclose(out);
	assert_non_null(strstr(buf, "2024-05-01T12:00:00Z alice(1000) switch set web/L3: normal -> "
				    "shed 100% until 2024-05-01T13:00:00Z (owner alice) -- reason: INC-7\n"));
	assert_non_null(strstr(buf, "line 2: unreadable audit record"));
	assert_non_null(strstr(buf, "2024-05-01T12:01:00Z alice(1000) switch clear web/L3: shed 100% "
				    "until 2024-05-01T13:00:00Z (owner alice) -> normal -- reason: done\n"));
	free(buf);

	/* last N */
	buf = NULL;
	out = open_memstream(&buf, &len);
	assert_int_equal(audit_print(out, c->path, 1, err, sizeof(err)), 0);
	fclose(out);
	assert_null(strstr(buf, "switch set"));
	assert_non_null(strstr(buf, "switch clear"));
	free(buf);
}

static void test_audit_missing_log(void **state)
{
	struct ctx *c = *state;
	char err[256], *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_int_equal(audit_print(out, c->path, 0, err, sizeof(err)), 0);
	fclose(out);
	assert_non_null(strstr(buf, "no switch changes recorded"));
	free(buf);
}

/* The audit log replaced by a FIFO (the stalled state directory sluiced itself survives):
 * `switch log` says it cannot read it instead of waiting in open() for a writer that never
 * comes. The alarm is only the watchdog of a hang; a pass never waits for it. */
static void test_audit_print_fifo_refused(void **state)
{
	struct ctx *c = *state;
	char err[256] = "", *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_int_equal(mkfifo(c->path, 0640), 0);
	alarm(10);
	assert_int_equal(audit_print(out, c->path, 0, err, sizeof(err)), -1);
	alarm(0);
	fclose(out);
	assert_non_null(strstr(err, "not a regular file"));
	free(buf);
}

/* A log that takes the record but cannot be synced (a FIFO someone reads, as an operator
 * may tail one): the record is written, and so counted (a record counted as refused would be
 * held and written again: the reader got it twice). */
static void *read_fifo(void *arg)
{
	const char *path = arg;
	static char got[4096];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(got, 1, sizeof(got) - 1, f);
		fclose(f);
	}
	got[n] = 0;
	return got;
}

static void test_audit_append_to_fifo_written_once(void **state)
{
	struct ctx *c = *state;
	struct sw_switch a;
	struct audit_entry e;
	char err[256] = "", *got, *nl;
	pthread_t t;

	assert_int_equal(mkfifo(c->path, 0640), 0);
	assert_int_equal(pthread_create(&t, NULL, read_fifo, c->path), 0);
	mk(&a, "L3", "100", "INC-7 fifo", "1h", T0);
	audit_entry_make(&e, T0, 0, "root", "switch set", "web", SLUICE_L3, NULL, &a, NULL);
	alarm(10);
	assert_int_equal(audit_append(c->path, &e, err, sizeof(err)), 0);
	assert_int_equal(pthread_join(t, (void **)&got), 0);
	alarm(0);
	nl = strchr(got, '\n');
	assert_non_null(nl);
	assert_string_equal(nl + 1, "");          /* one record, whole */
	assert_non_null(strstr(got, "INC-7 fifo"));
}

static void test_audit_parse_rejects(void **state)
{
	struct audit_entry r;
	char err[256];
	(void)state;
	assert_int_equal(audit_parse_line("", &r, err, sizeof(err)), -1);
	assert_int_equal(audit_parse_line("[]", &r, err, sizeof(err)), -1);
	assert_int_equal(audit_parse_line("{\"time\":\"yesterday\",\"uid\":1,\"user\":\"a\","
					  "\"command\":\"c\",\"service\":\"s\",\"class\":\"L0\","
					  "\"old\":null,\"new\":null,\"reason\":\"\"}", &r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "time"));
	assert_int_equal(audit_parse_line("{\"time\":\"2024-05-01T12:00:00Z\",\"uid\":1,\"user\":\"a\","
					  "\"command\":\"c\",\"service\":\"s\",\"class\":\"L5\","
					  "\"old\":null,\"new\":null,\"reason\":\"\"}", &r, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "class"));
	assert_int_equal(audit_parse_line("{\"time\":\"2024-05-01T12:00:00Z\",\"uid\":1,\"user\":\"a\","
					  "\"command\":\"c\",\"service\":\"s\",\"class\":\"L0\","
					  "\"old\":null,\"new\":null,\"reason\":\"\"}", &r, err, sizeof(err)), 0);
}

/* ---- the JSON reader (jansson, strict settings) ---- */

static void test_json_strict(void **state)
{
	static const char *const bad[] = {
		"", "{", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "{'a':1}", "[01]", "1.5", "1e3", "[-]",
		"[tru]", "[truex]", "[nul]", "[\"abc]", "[\"a\\qb\"]", "[\"\\u12\"]", "[\"\\ud800\"]",
		"[\"\\udc00\"]", "[\"\\u0000\"]", "[\"tab\there\"]", "{\"a\":1,\"a\":2}", "1 2",
		"[99999999999999999999]", "{\"a\":1}x",
	};
	char err[200];
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		json_t *v = jsonio_parse(bad[i], strlen(bad[i]), err, sizeof(err));
		if (v)
			fail_msg("accepted bad JSON: %s", bad[i]);
		assert_non_null(strstr(err, "line 1 column"));
	}
	{
		const char nul[] = "{\"a\":\0 1}";
		assert_null(jsonio_parse(nul, sizeof(nul) - 1, err, sizeof(err)));
	}
	assert_null(jsonio_parse("{\n\"a\": 1,\n\"b\": }", 17, err, sizeof(err)));
	assert_non_null(strstr(err, "line 3"));
	assert_null(jsonio_parse("{\"a\":1,\"a\":2}", 13, err, sizeof(err)));
	assert_non_null(strstr(err, "duplicate key"));
	{
		/* nesting is bounded: a deep document is an error, not a stack overflow */
		static char deep[20001];
		memset(deep, '[', 10000);
		memset(deep + 10000, ']', 10000);
		assert_null(jsonio_parse(deep, 20000, err, sizeof(err)));
	}
}

static void test_json_values(void **state)
{
	const char *t = "{ \"i\": -9223372036854775808, \"j\": 9223372036854775807, \"b\": true,"
			" \"f\": false, \"n\": null, \"s\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
			" \"a\": [1, [], {}] }";
	char err[200];
	json_t *v = jsonio_parse(t, strlen(t), err, sizeof(err)), *x;
	(void)state;

	if (!v)
		fail_msg("%s", err);
	assert_int_equal(json_object_size(v), 7);
	assert_true(json_integer_value(json_object_get(v, "i")) == INT64_MIN);
	assert_true(json_integer_value(json_object_get(v, "j")) == INT64_MAX);
	assert_true(json_is_true(json_object_get(v, "b")));
	assert_true(json_is_false(json_object_get(v, "f")));
	assert_true(json_is_null(json_object_get(v, "n")));
	x = json_object_get(v, "s");
	assert_string_equal(json_string_value(x), "\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
	x = json_object_get(v, "a");
	assert_int_equal(json_array_size(x), 3);
	assert_true(json_is_array(json_array_get(x, 1)));
	assert_null(json_object_get(v, "missing"));

	/* writer -> reader round trip of awkward strings */
	{
		json_t *arr = json_pack("[O]", json_object_get(v, "s")), *w;
		char *text = jsonio_dumps(arr);

		assert_non_null(text);
		assert_null(strchr(text, '\n'));
		w = jsonio_parse(text, strlen(text), err, sizeof(err));
		assert_non_null(w);
		assert_string_equal(json_string_value(json_array_get(w, 0)),
				    json_string_value(json_object_get(v, "s")));
		json_decref(w);
		json_decref(arr);
		free(text);
	}
	json_decref(v);
}

/* Numbers keep the types readers saw before: integers stay integers, fractions carry a point. */
static void test_json_numbers(void **state)
{
	json_t *a = json_pack("[o,o,o,o,o,o,o,o]", jsonio_fixed(1, 2), jsonio_fixed(0.12345678, 4),
			      jsonio_fixed(-0.0, 3), jsonio_fixed(NAN, 2), jsonio_number(22),
			      jsonio_number(0.5), jsonio_number(123456.7), jsonio_number(1.0 / 3));
	char *text = jsonio_dumps(a);
	(void)state;

	assert_non_null(text);
	assert_string_equal(text, "[1.0,0.1235,0.0,null,22,0.5,123457,0.333333]");
	free(text);
	json_decref(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_audit_append_and_parse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_after_short_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_refused_when_its_end_cannot_be_read, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_audit_any_caller_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_each_line_is_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_print_human, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_missing_log, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_print_fifo_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_append_to_fifo_written_once, setup,
						teardown),
		cmocka_unit_test(test_audit_parse_rejects),
		cmocka_unit_test(test_json_strict),
		cmocka_unit_test(test_json_values),
		cmocka_unit_test(test_json_numbers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
