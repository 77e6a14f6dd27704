// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the switch audit log (user/ops/audit.c) and the JSON reader it uses (user/common/json.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/audit.h"
#include "common/duration.h"
#include "common/json.h"
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
		struct sjson *v = sjson_parse(lines[0], strlen(lines[0]), err, sizeof(err));
		const struct sjson *x;
		assert_non_null(v);
		x = sjson_get(v, "user");
		assert_non_null(x);
		assert_string_equal(x->s, "us\"er");
		x = sjson_get(v, "class");
		assert_string_equal(x->s, "L1");
		x = sjson_get(sjson_get(v, "new"), "expires_at");
		assert_string_equal(x->s, "2024-05-01T12:05:00Z");
		sjson_free(v);
	}
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

/* ---- the JSON reader ---- */

static void test_json_strict(void **state)
{
	static const char *const bad[] = {
		"", "{", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "{'a':1}", "01", "1.5", "1e3", "-",
		"tru", "truex", "nul", "\"abc", "\"a\\qb\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
		"\"\\u0000\"", "\"tab\there\"", "{\"a\":1,\"a\":2}", "1 2", "99999999999999999999",
		"[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]", "{\"a\":1}x",
	};
	char err[200];
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sjson *v = sjson_parse(bad[i], strlen(bad[i]), err, sizeof(err));
		if (v)
			fail_msg("accepted bad JSON: %s", bad[i]);
		assert_non_null(strstr(err, "line 1 col"));
	}
	{
		const char nul[] = "{\"a\":\0 1}";
		assert_null(sjson_parse(nul, sizeof(nul) - 1, err, sizeof(err)));
		assert_non_null(strstr(err, "NUL"));
	}
	assert_null(sjson_parse("{\n\"a\": 1,\n\"b\": }", 17, err, sizeof(err)));
	assert_non_null(strstr(err, "line 3"));
}

static void test_json_values(void **state)
{
	const char *t = "{ \"i\": -9223372036854775808, \"j\": 9223372036854775807, \"b\": true,"
			" \"f\": false, \"n\": null, \"s\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
			" \"a\": [1, [], {}] }";
	char err[200];
	struct sjson *v = sjson_parse(t, strlen(t), err, sizeof(err));
	const struct sjson *x;
	struct sjbuf b;
	(void)state;

	if (!v)
		fail_msg("%s", err);
	assert_int_equal(v->n, 7);
	assert_true(sjson_get(v, "i")->i == INT64_MIN);
	assert_true(sjson_get(v, "j")->i == INT64_MAX);
	assert_int_equal(sjson_get(v, "b")->type, SJSON_BOOL);
	assert_int_equal(sjson_get(v, "b")->i, 1);
	assert_int_equal(sjson_get(v, "f")->i, 0);
	assert_int_equal(sjson_get(v, "n")->type, SJSON_NULL);
	x = sjson_get(v, "s");
	assert_string_equal(x->s, "\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
	x = sjson_get(v, "a");
	assert_int_equal(x->type, SJSON_ARR);
	assert_int_equal(x->n, 3);
	assert_int_equal(x->child->next->type, SJSON_ARR);
	assert_null(sjson_get(v, "missing"));

	/* writer -> reader round trip of awkward strings */
	sjbuf_init(&b);
	sjbuf_str(&b, sjson_get(v, "s")->s);
	sjbuf_puts(&b, " ");
	{
		struct sjson *w;
		b.p[b.len - 1] = 0;
		w = sjson_parse(b.p, strlen(b.p), err, sizeof(err));
		assert_non_null(w);
		assert_string_equal(w->s, sjson_get(v, "s")->s);
		sjson_free(w);
	}
	sjbuf_free(&b);
	sjson_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_audit_append_and_parse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_each_line_is_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_print_human, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_missing_log, setup, teardown),
		cmocka_unit_test(test_audit_parse_rejects),
		cmocka_unit_test(test_json_strict),
		cmocka_unit_test(test_json_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
