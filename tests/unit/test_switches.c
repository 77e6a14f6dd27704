// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: durations and manual degradation switches (user/common/duration.c, user/ops/switches.c). */
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
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "common/duration.h"
#include "ops/switches.h"

#define T0 1714564800ull /* 2024-05-01T12:00:00Z: the fake clock's start */

static const char *const known[] = { "web", "api" };

struct ctx {
	char dir[64];
	char path[128];
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	snprintf(c->dir, sizeof(c->dir), "/tmp/sluice-test-sw-XXXXXX");
	if (!mkdtemp(c->dir))
		return -1;
	snprintf(c->path, sizeof(c->path), "%s/switches.json", c->dir);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	char p[160];
	unlink(c->path);
	snprintf(p, sizeof(p), "%s.lock", c->path);
	unlink(p);
	rmdir(c->dir);
	free(c);
	return 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static struct sw_set *new_set(void)
{
	struct sw_set *s = malloc(sizeof(*s));
	assert_non_null(s);
	s->n = 42; /* garbage the loader must reset */
	return s;
}

static void mk(struct sw_switch *sw, const char *svc, const char *cls, const char *pct,
	       const char *ttl, uint64_t now)
{
	char err[256];
	int rc = sw_make(sw, svc, cls, pct, "INC-42 payment slow", ttl, "alice", now, known, 2,
			 err, sizeof(err));
	if (rc)
		fail_msg("sw_make failed: %s", err);
}

/* ---- duration ---- */

static void test_duration_parse_ok(void **state)
{
	static const struct { const char *s; uint64_t v; } ok[] = {
		{ "90s", 90 }, { "5m", 300 }, { "2h", 7200 }, { "1d", 86400 }, { "1h30m", 5400 },
		{ "1d2h3m4s", 93784 }, { "0h1s", 1 }, { "3650d", 3650ull * 86400 },
	};
	char err[200];
	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 0;
		assert_int_equal(duration_parse(ok[i].s, &v, err, sizeof(err)), 0);
		assert_int_equal(v, ok[i].v);
	}
}

static void test_duration_parse_bad(void **state)
{
	static const struct { const char *s; const char *why; } bad[] = {
		{ "", "empty" }, { "90", "missing unit" }, { "5x", "unknown unit" },
		{ "0s", "greater than zero" }, { "0h0m", "greater than zero" }, { "-5m", "sign" },
		{ "1.5h", "fraction" }, { "1h 30m", "space" }, { "30m1h", "largest first" },
		{ "1h1h", "largest first" }, { "h", "expected a number" }, { "3651d", "too large" },
		{ "99999999999999999999s", "too large" }, { "5M", "unknown unit" },
	};
	char err[200];
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 12345;
		err[0] = 0;
		assert_int_equal(duration_parse(bad[i].s, &v, err, sizeof(err)), -1);
		assert_int_equal(v, 12345);
		if (!strstr(err, bad[i].why))
			fail_msg("\"%s\": message \"%s\" does not say \"%s\"", bad[i].s, err, bad[i].why);
	}
}

static void test_duration_format(void **state)
{
	char b[32];
	(void)state;
	assert_string_equal(duration_format(252, b, sizeof(b)), "4m12s");
	assert_string_equal(duration_format(0, b, sizeof(b)), "0s");
	assert_string_equal(duration_format(3600, b, sizeof(b)), "1h");
	assert_string_equal(duration_format(93784, b, sizeof(b)), "1d2h3m4s");
	assert_string_equal(duration_format(86401, b, sizeof(b)), "1d1s");
}

static void test_time_iso(void **state)
{
	char b[SLUICE_ISO_LEN];
	uint64_t t;
	(void)state;
	assert_string_equal(time_format_iso(T0, b, sizeof(b)), "2024-05-01T12:00:00Z");
	assert_int_equal(time_parse_iso("2024-05-01T12:00:00Z", &t), 0);
	assert_int_equal(t, T0);
	assert_int_equal(time_parse_iso("2024-05-01 12:00:00Z", &t), -1);
	assert_int_equal(time_parse_iso("2024-05-01T12:00:00", &t), -1);
	assert_int_equal(date_parse_ymd("2024-05-01", &t), 0);
	assert_int_equal(t, T0 - 12 * 3600);
	assert_int_equal(date_parse_ymd("2024-02-29", &t), 0);
	assert_int_equal(date_parse_ymd("2023-02-29", &t), -1);
	assert_int_equal(date_parse_ymd("2024-13-01", &t), -1);
	assert_int_equal(date_parse_ymd("2024-1-01", &t), -1);
}

/* ---- switch validation ---- */

static void expect_make_error(const char *svc, const char *cls, const char *pct, const char *reason,
			      const char *ttl, const char *owner, const char *needle)
{
	struct sw_switch sw;
	char err[300] = "";
	int rc = sw_make(&sw, svc, cls, pct, reason, ttl, owner, T0, known, 2, err, sizeof(err));
	if (rc != -1)
		fail_msg("accepted svc=%s cls=%s pct=%s reason=%s ttl=%s", svc, cls, pct, reason, ttl);
	if (!strstr(err, needle))
		fail_msg("error \"%s\" does not name \"%s\"", err, needle);
}

static void test_switch_validation(void **state)
{
	(void)state;
	expect_make_error("web", "L4", "50", "r", "1h", "alice", "class \"L4\"");
	expect_make_error("web", "l3", "50", "r", "1h", "alice", "class \"l3\"");
	expect_make_error("web", "", "50", "r", "1h", "alice", "class");
	expect_make_error("nope", "L3", "50", "r", "1h", "alice", "service \"nope\": unknown service (configured: web, api)");
	expect_make_error("", "L3", "50", "r", "1h", "alice", "service");
	expect_make_error("web", "L3", "101", "r", "1h", "alice", "--shed \"101\"");
	expect_make_error("web", "L3", "-1", "r", "1h", "alice", "--shed \"-1\"");
	expect_make_error("web", "L3", "99999999999", "r", "1h", "alice", "between 0 and 100");
	expect_make_error("web", "L3", "5.5", "r", "1h", "alice", "--shed");
	expect_make_error("web", "L3", "abc", "r", "1h", "alice", "--shed");
	expect_make_error("web", "L3", "", "r", "1h", "alice", "--shed");
	expect_make_error("web", "L3", NULL, "r", "1h", "alice", "--shed");
	expect_make_error("web", "L3", "50", "r", NULL, "alice", "--ttl: required");
	expect_make_error("web", "L3", "50", "r", "", "alice", "--ttl: required");
	expect_make_error("web", "L3", "50", "r", "0s", "alice", "--ttl");
	expect_make_error("web", "L3", "50", "r", "0s", "alice", "greater than zero");
	expect_make_error("web", "L3", "50", "r", "soon", "alice", "--ttl");
	expect_make_error("web", "L3", "50", "r", "90", "alice", "missing unit");
	expect_make_error("web", "L3", "50", "r", "31d", "alice", "maximum");
	expect_make_error("web", "L3", "50", "", "1h", "alice", "--reason");
	expect_make_error("web", "L3", "50", "   ", "1h", "alice", "--reason");
	expect_make_error("web", "L3", "50", NULL, "1h", "alice", "--reason");
	expect_make_error("web", "L3", "50", "a\nb", "1h", "alice", "--reason");
	expect_make_error("web", "L3", "50", "r", "1h", "", "--owner");
	/* not UTF-8: jansson cannot carry it, so the request would go without it (or not at all) */
	expect_make_error("web", "L3", "50", "INC\xff", "1h", "alice", "--reason: is not valid UTF-8");
	expect_make_error("web", "L3", "50", "r", "1h", "al\xc3", "--owner: is not valid UTF-8");
	expect_make_error("web", "L3", "50", "\xc0\xaf", "1h", "alice", "UTF-8");   /* overlong */
	expect_make_error("web", "L3", "50", "\xed\xa0\x80", "1h", "alice", "UTF-8"); /* surrogate */
	assert_null(sw_text_problem("INC-42 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5"));
}

/* New text is held to more than C0 controls: the C1 controls (U+009B is a terminal's CSI, as
 * ESC [ is), the line and paragraph separators (a line break to a log viewer) and the
 * bidirectional controls (they reorder what a terminal shows of the line) are refused from
 * a reason, an owner and a runbook. A switch file that already holds one still loads: what
 * was accepted before is not made a damaged file, which would lift every switch. */
static void test_switch_new_text_controls(void **state)
{
	static const char *const refused[] = {
		"a\xc2\x85" "b",           /* U+0085 NEL */
		"a\xc2\x9b" "31mb",        /* U+009B CSI */
		"a\xe2\x80\xa8" "b",       /* U+2028 LINE SEPARATOR */
		"a\xe2\x80\xa9" "b",       /* U+2029 PARAGRAPH SEPARATOR */
		"a\xe2\x80\xae" "b",       /* U+202E RIGHT-TO-LEFT OVERRIDE */
		"a\xe2\x81\xa6" "b",       /* U+2066 LEFT-TO-RIGHT ISOLATE */
	};
	const char *file = "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\","
			   "\"shed_pct\":50,\"reason\":\"a\\u009bb\",\"owner\":\"alice\","
			   "\"set_at\":1000,\"expires_at\":2000}]}";
	struct sw_set *set = new_set();
	struct sw_switch sw;
	char err[300];
	(void)state;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		expect_make_error("web", "L3", "50", refused[i], "1h", "alice",
				  "--reason: contains control characters");
		expect_make_error("web", "L3", "50", "r", "1h", refused[i],
				  "--owner: contains control characters");
		assert_int_equal(sw_make(&sw, "web", "L3", "50", "r", "1h", "bob", T0, known, 2,
					 err, sizeof(err)), 0);
		assert_int_equal(sw_set_ledger(&sw, NULL, refused[i], err, sizeof(err)), -1);
		assert_non_null(strstr(err, "--runbook: contains control characters"));
	}
	/* letters of any script, and the marks text needs, are fine */
	assert_int_equal(sw_make(&sw, "web", "L3", "50", "INC-42 \xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d "
				 "\xe2\x80\x94 caf\xc3\xa9 \xc2\xa0\xe2\x82\xac", "1h", "bob", T0, known,
				 2, err, sizeof(err)), 0);
	assert_int_equal(sw_parse(file, strlen(file), "switches.json", set, err, sizeof(err)), 0);
	assert_int_equal(set->n, 1);
	assert_string_equal(set->sw[0].reason, "a\xc2\x9b" "b");
	free(set);
}

static void test_switch_make_ok(void **state)
{
	struct sw_switch sw;
	char err[200];
	(void)state;
	assert_int_equal(sw_make(&sw, "web", "L3", "30%", "INC-1", "1h30m", "bob", T0, known, 2,
				 err, sizeof(err)), 0);
	assert_string_equal(sw.service, "web");
	assert_int_equal(sw.class, SLUICE_L3);
	assert_int_equal(sw.shed_pct, 30);
	assert_string_equal(sw.reason, "INC-1");
	assert_string_equal(sw.owner, "bob");
	assert_int_equal(sw.set_at, T0);
	assert_int_equal(sw.expires_at, T0 + 5400);
	/* no known list: any sane name is accepted */
	assert_int_equal(sw_make(&sw, "other", "L0", "0", "r", "1m", "bob", T0, NULL, -1, err,
				 sizeof(err)), 0);
	assert_int_equal(sw_class_parse("L0"), 0);
	assert_int_equal(sw_class_parse("L3"), 3);
	assert_int_equal(sw_class_parse("L4"), -1);
	assert_int_equal(sw_class_parse("L"), -1);
	assert_int_equal(sw_class_parse("L00"), -1);
}

/* ---- lifecycle with a fake clock ---- */

static void test_switch_lifecycle(void **state)
{
	struct sw_set *s = new_set();
	struct sw_switch a, b, c, old, expired[4];
	uint64_t now = T0;
	(void)state;

	sw_set_init(s);
	mk(&a, "web", "L3", "100", "10m", now);
	mk(&b, "web", "L2", "30", "1h", now);
	mk(&c, "api", "L3", "50", "30m", now);
	assert_int_equal(sw_set_put(s, &a, &old), 0);
	assert_int_equal(sw_set_put(s, &b, &old), 0);
	assert_int_equal(sw_set_put(s, &c, &old), 0);
	assert_int_equal(s->n, 3);
	/* sorted by (service, class) */
	assert_string_equal(s->sw[0].service, "api");
	assert_string_equal(s->sw[1].service, "web");
	assert_int_equal(s->sw[1].class, SLUICE_L2);
	assert_int_equal(s->sw[2].class, SLUICE_L3);

	/* shed ratios in fixed point */
	assert_int_equal(sw_shed_ratio(s, "web", SLUICE_L3, now), SLUICE_PROB_ONE);
	assert_int_equal(sw_admit_ratio(s, "web", SLUICE_L3, now), 0);
	assert_int_equal(sw_shed_ratio(s, "web", SLUICE_L2, now), 19661); /* 30% of 65536, rounded */
	assert_int_equal(sw_admit_ratio(s, "web", SLUICE_L2, now), SLUICE_PROB_ONE - 19661);
	assert_int_equal(sw_shed_ratio(s, "api", SLUICE_L3, now), 32768);
	assert_int_equal(sw_admit_ratio(s, "web", SLUICE_L0, now), SLUICE_PROB_ONE);
	assert_int_equal(sw_admit_ratio(s, "nosuch", SLUICE_L3, now), SLUICE_PROB_ONE);

	/* replacing the same service/class returns the old one */
	mk(&a, "web", "L3", "60", "1h", now + 60);
	assert_int_equal(sw_set_put(s, &a, &old), 1);
	assert_int_equal(old.shed_pct, 100);
	assert_int_equal(s->n, 3);
	assert_int_equal(sw_set_find(s, "web", SLUICE_L3)->shed_pct, 60);
	assert_int_equal(sw_set_find(s, "web", SLUICE_L3)->expires_at, T0 + 60 + 3600);

	/* nothing expires early */
	now = T0 + 29 * 60;
	assert_int_equal(sw_set_expire(s, now, expired, 4), 0);
	assert_int_equal(s->n, 3);
	/* at exactly expires_at the api switch is gone; ratio reads as normal even before expire() */
	now = T0 + 30 * 60;
	assert_int_equal(sw_admit_ratio(s, "api", SLUICE_L3, now), SLUICE_PROB_ONE);
	assert_int_equal(sw_set_expire(s, now, expired, 4), 1);
	assert_string_equal(expired[0].service, "api");
	assert_int_equal(expired[0].class, SLUICE_L3);
	assert_int_equal(s->n, 2);
	assert_null(sw_set_find(s, "api", SLUICE_L3));
	/* web/L2 expires at T0+1h, web/L3 at T0+1h1m */
	now = T0 + 3600 + 59;
	assert_int_equal(sw_set_expire(s, now, expired, 4), 1);
	assert_int_equal(expired[0].class, SLUICE_L2);
	assert_int_equal(sw_admit_ratio(s, "web", SLUICE_L3, now), 26214); /* 40% of 65536 */
	mk(&b, "web", "L2", "30", "1h", T0);
	assert_int_equal(sw_set_put(s, &b, NULL), 0); /* back: the next sweep takes both */
	now = T0 + 2 * 3600;
	assert_int_equal(sw_set_expire(s, now, expired, 1), 2); /* only one copied, both removed */
	assert_int_equal(s->n, 0);

	/* clear */
	mk(&a, "web", "L3", "100", "10m", now);
	assert_int_equal(sw_set_put(s, &a, NULL), 0);
	assert_int_equal(sw_set_clear(s, "web", SLUICE_L2, &old), 0);
	assert_int_equal(sw_set_clear(s, "web", SLUICE_L3, &old), 1);
	assert_int_equal(old.shed_pct, 100);
	assert_int_equal(s->n, 0);

	/* an invalid switch is never put */
	memset(&a, 0, sizeof(a));
	assert_int_equal(sw_set_put(s, &a, NULL), -1);
	assert_int_equal(s->n, 0);
	free(s);
}

static void test_switch_persist_roundtrip(void **state)
{
	struct ctx *c = *state;
	struct sw_set *s = new_set(), *r = new_set();
	struct sw_switch a, b;
	char err[300];
	struct stat st;
	mode_t mask;
	(void)state;

	sw_set_init(s);
	mk(&a, "web", "L3", "100", "10m", T0);
	mk(&b, "api", "L1", "25", "2h", T0);
	snprintf(b.reason, sizeof(b.reason), "quote \" backslash \\ unicode \xc3\xa9 \xe2\x82\xac");
	assert_int_equal(sw_set_put(s, &a, NULL), 0);
	assert_int_equal(sw_set_put(s, &b, NULL), 0);
	mask = umask(077);   /* 0644 whatever the umask: `switch ls` reads it */
	assert_int_equal(sw_save(c->path, s, err, sizeof(err)), 0);
	umask(mask);
	assert_int_equal(stat(c->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);

	assert_int_equal(sw_load(c->path, r, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(r->n, 2);
	assert_memory_equal(&r->sw[0], &s->sw[0], sizeof(s->sw[0]));
	assert_memory_equal(&r->sw[1], &s->sw[1], sizeof(s->sw[1]));
	assert_string_equal(sw_set_find(r, "api", SLUICE_L1)->reason, b.reason);

	/* the temp file is gone; an empty set saves and loads back empty */
	sw_set_init(s);
	assert_int_equal(sw_save(c->path, s, err, sizeof(err)), 0);
	assert_int_equal(sw_load(c->path, r, err, sizeof(err)), 0);
	assert_int_equal(r->n, 0);
	free(s);
	free(r);
}

static void test_switch_missing_file(void **state)
{
	struct ctx *c = *state;
	struct sw_set *s = new_set();
	char err[300] = "junk";
	(void)state;
	assert_int_equal(sw_load(c->path, s, err, sizeof(err)), 0);
	assert_int_equal(s->n, 0);
	assert_string_equal(err, "");
	free(s);
}

static void expect_corrupt(struct ctx *c, const char *text, const char *needle)
{
	struct sw_set *s = new_set();
	char err[400] = "";
	write_file(c->path, text);
	assert_int_equal(sw_load(c->path, s, err, sizeof(err)), -1);
	assert_int_equal(s->n, 0); /* normal, never degraded */
	assert_non_null(strstr(err, "ERROR: switch file"));
	assert_non_null(strstr(err, c->path));
	assert_non_null(strstr(err, "NO switches are in force"));
	if (!strstr(err, needle))
		fail_msg("error \"%s\" does not say \"%s\"", err, needle);
	free(s);
}

#define SW1 "{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":100,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":200}"

static void test_switch_corrupt_file(void **state)
{
	struct ctx *c = *state;
	expect_corrupt(c, "", "is empty");
	expect_corrupt(c, " \n\n", "is empty");
	expect_corrupt(c, "{\"version\":1,\"switches\":[" SW1, "corrupt");
	expect_corrupt(c, "{\"version\":1,\"switches\":[" SW1 "]} trailing", "trailing");
	expect_corrupt(c, "not json at all", "corrupt");
	expect_corrupt(c, "[]", "top level");
	expect_corrupt(c, "{\"version\":2,\"switches\":[]}", "version");
	expect_corrupt(c, "{\"switches\":[]}", "version");
	expect_corrupt(c, "{\"version\":1}", "switches");
	expect_corrupt(c, "{\"version\":1,\"switches\":[],\"extra\":1}", "unknown key \"extra\"");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L9\",\"shed_pct\":100,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":200}]}",
		       "unknown class \"L9\"");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":101,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":200}]}",
		       "shed_pct");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":\"50\",\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":200}]}",
		       "must be an integer");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":50,\"reason\":\"\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":200}]}",
		       "reason");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":50,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100}]}",
		       "missing \"expires_at\"");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":50,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":100}]}",
		       "expires_at");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":50,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":200,\"enabled\":false}]}",
		       "unknown key \"enabled\"");
	expect_corrupt(c, "{\"version\":1,\"switches\":[" SW1 "," SW1 "]}", "second switch");
	expect_corrupt(c, "{\"version\":1,\"switches\":[" SW1 "," SW1 "]}", "second switch");
	expect_corrupt(c, "{\"version\":1,\"version\":1,\"switches\":[]}", "duplicate key");
	expect_corrupt(c, "{\"version\":1.0,\"switches\":[]}", "integer");
	/* a switch no renewal could have made: far past 30 days after set_at */
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":50,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":9223372036854775807}]}",
		       "expires_at");
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":50,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":100,\"expires_at\":2592201}]}",
		       "more than 30 days");
	/* a 30-minute switch written by hand in milliseconds: within 30 days of its set_at, but
	 * it would shed until the year 56000 and its audit records could not be read back */
	expect_corrupt(c, "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\",\"shed_pct\":50,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":1714564800000,\"expires_at\":1714566600000}]}",
		       "expires_at");
}

static void test_switch_corrupt_keeps_nothing(void **state)
{
	/* one good switch and one bad one: the whole file is refused, nothing is applied */
	struct ctx *c = *state;
	struct sw_set *s = new_set();
	char err[400];
	write_file(c->path, "{\"version\":1,\"switches\":[" SW1 ",{\"service\":\"api\",\"class\":\"L3\",\"shed_pct\":100}]}");
	assert_int_equal(sw_load(c->path, s, err, sizeof(err)), -1);
	assert_int_equal(s->n, 0);
	assert_int_equal(sw_admit_ratio(s, "web", SLUICE_L3, 150), SLUICE_PROB_ONE);
	/* a valid file loads */
	write_file(c->path, "{\"version\":1,\"switches\":[" SW1 "]}");
	assert_int_equal(sw_load(c->path, s, err, sizeof(err)), 0);
	assert_int_equal(s->n, 1);
	assert_int_equal(sw_admit_ratio(s, "web", SLUICE_L3, 150), 0);
	assert_int_equal(sw_admit_ratio(s, "web", SLUICE_L3, 200), SLUICE_PROB_ONE);
	free(s);
}

static void test_switch_quarantine(void **state)
{
	struct ctx *c = *state;
	struct sw_set *s = new_set();
	char err[400], saved[256], expect[256];
	write_file(c->path, "{garbage");
	assert_int_equal(sw_load(c->path, s, err, sizeof(err)), -1);
	assert_int_equal(sw_quarantine(c->path, T0, saved, sizeof(saved), err, sizeof(err)), 0);
	snprintf(expect, sizeof(expect), "%s.corrupt.%llu", c->path, (unsigned long long)T0);
	assert_string_equal(saved, expect);
	assert_int_equal(access(c->path, F_OK), -1);
	assert_int_equal(access(saved, F_OK), 0);
	unlink(saved);
	assert_int_equal(sw_quarantine(c->path, T0, saved, sizeof(saved), err, sizeof(err)), -1);
	free(s);
}

/* Installs seccomp filter f (n statements) in this process, for good. */
static int filter_in(struct sock_filter *f, size_t n)
{
	struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* sw_quarantine of path in a child that first installs narrow (its own filter, so the
 * test process keeps every system call): the child's exit status, 2 when narrow failed. */
static int quarantine_restricted(const char *path, int (*narrow)(void))
{
	char err[400];
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		if (narrow())
			_exit(2);
		_exit(sw_quarantine(path, T0, NULL, 0, err, sizeof(err)) ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* The first line of file path is text. */
static void first_line_is(const char *path, const char *text)
{
	char got[64];
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	assert_non_null(fgets(got, sizeof(got), f));
	fclose(f);
	assert_string_equal(got, text);
}

/* From here on, in this process, every stat of a path fails with EIO. */
static int stats_fail(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __NR_lstat
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_lstat, 3, 0),
#else
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_statx, 3, 0),
#endif
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_newfstatat, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_statx, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EIO),
	};

	return filter_in(f, sizeof(f) / sizeof(f[0]));
}

/* From here on, in this process, the renameat2 system call fails with ENOSYS (an old kernel, a
 * sandbox); glibc then says EINVAL, as for a file system without RENAME_NOREPLACE. */
static int renameat2_missing(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_renameat2, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	};

	return filter_in(f, sizeof(f) / sizeof(f[0]));
}

/* Without renameat2() a damaged file is still moved aside, next to the earlier copy. */
static void test_switch_quarantine_without_renameat2(void **state)
{
	struct ctx *c = *state;
	char err[400], first[256], second[300];

	write_file(c->path, "{first");
	assert_int_equal(sw_quarantine(c->path, T0, first, sizeof(first), err, sizeof(err)), 0);
	write_file(c->path, "{second");
	assert_int_equal(quarantine_restricted(c->path, renameat2_missing), 0);
	assert_int_equal(access(c->path, F_OK), -1);
	snprintf(second, sizeof(second), "%s.1", first);
	first_line_is(second, "{second");
	first_line_is(first, "{first");
	unlink(first);
	unlink(second);
}

/* A name whose stat fails (an I/O error, memory running out) is not free: the earlier copy
 * moved aside under it must not be replaced by the next one. */
static void test_switch_quarantine_stat_error_is_not_free(void **state)
{
	struct ctx *c = *state;
	char err[400], first[256], second[300];

	write_file(c->path, "{first");
	assert_int_equal(sw_quarantine(c->path, T0, first, sizeof(first), err, sizeof(err)), 0);
	write_file(c->path, "{second");
	assert_int_not_equal(quarantine_restricted(c->path, stats_fail), 2); /* the filter went in */
	first_line_is(first, "{first");
	unlink(first);
	snprintf(second, sizeof(second), "%s.1", first);
	unlink(second);
}

/* Two damaged files moved aside in the same second: both are kept for the post-mortem (a
 * rename onto the first name would silently replace the first one). */
static void test_switch_quarantine_keeps_both(void **state)
{
	struct ctx *c = *state;
	char err[400], first[256], second[256], text[64];
	FILE *f;

	write_file(c->path, "{first");
	assert_int_equal(sw_quarantine(c->path, T0, first, sizeof(first), err, sizeof(err)), 0);
	write_file(c->path, "{second");
	assert_int_equal(sw_quarantine(c->path, T0, second, sizeof(second), err, sizeof(err)), 0);
	assert_string_not_equal(first, second);
	f = fopen(first, "r");
	assert_non_null(f);
	assert_non_null(fgets(text, sizeof(text), f));
	fclose(f);
	assert_string_equal(text, "{first");
	f = fopen(second, "r");
	assert_non_null(f);
	assert_non_null(fgets(text, sizeof(text), f));
	fclose(f);
	assert_string_equal(text, "{second");
	unlink(first);
	unlink(second);
}

static void test_switch_unreadable(void **state)
{
	struct ctx *c = *state;
	struct sw_set *s = new_set();
	char err[400];
	/* a directory where the file should be */
	assert_int_equal(mkdir(c->path, 0700), 0);
	assert_int_equal(sw_load(c->path, s, err, sizeof(err)), -1);
	assert_int_equal(s->n, 0);
	assert_non_null(strstr(err, "NO switches are in force"));
	rmdir(c->path);
	free(s);
}

/* A FIFO where the file should be (a mistake, or someone's trap): refused as "not a regular
 * file" at once. Opened for reading as it was, the open waited for a writer that never
 * comes: sluiced's file writer stopped saving and auditing, `switch ls` hung. The alarm is
 * only the watchdog of a hang; a pass never waits for it. */
static void test_switch_fifo_refused_without_blocking(void **state)
{
	struct ctx *c = *state;
	struct sw_set *s = new_set();
	char err[400];

	assert_int_equal(mkfifo(c->path, 0600), 0);
	alarm(10);
	assert_int_equal(sw_load(c->path, s, err, sizeof(err)), -1);
	alarm(0);
	assert_int_equal(s->n, 0);
	assert_non_null(strstr(err, "not a regular file"));
	assert_non_null(strstr(err, "NO switches are in force"));
	free(s);
}

static void test_switch_save_refuses_invalid(void **state)
{
	struct ctx *c = *state;
	struct sw_set *s = new_set();
	struct sw_switch a;
	char err[300];
	sw_set_init(s);
	mk(&a, "web", "L3", "10", "1m", T0);
	assert_int_equal(sw_set_put(s, &a, NULL), 0);
	s->sw[0].reason[0] = 0; /* corrupted in memory */
	assert_int_equal(sw_save(c->path, s, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "reason"));
	assert_int_equal(access(c->path, F_OK), -1);
	free(s);
}

static void test_switch_lock(void **state)
{
	struct ctx *c = *state;
	char err[200];
	char lp[160];
	int fd = sw_lock(c->path, err, sizeof(err)), other;
	assert_true(fd >= 0);
	/* held: another open file description of the lock file cannot take it */
	snprintf(lp, sizeof(lp), "%s.lock", c->path);
	other = open(lp, O_RDWR);
	assert_true(other >= 0);
	assert_int_equal(flock(other, LOCK_EX | LOCK_NB), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	sw_unlock(fd);
	/* released: it can */
	assert_int_equal(flock(other, LOCK_EX | LOCK_NB), 0);
	close(other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration_parse_ok),
		cmocka_unit_test(test_duration_parse_bad),
		cmocka_unit_test(test_duration_format),
		cmocka_unit_test(test_time_iso),
		cmocka_unit_test(test_switch_validation),
		cmocka_unit_test(test_switch_new_text_controls),
		cmocka_unit_test(test_switch_make_ok),
		cmocka_unit_test(test_switch_lifecycle),
		cmocka_unit_test_setup_teardown(test_switch_persist_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_missing_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_corrupt_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_corrupt_keeps_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_quarantine, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_quarantine_keeps_both, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_quarantine_without_renameat2, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_switch_quarantine_stat_error_is_not_free, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_switch_unreadable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_fifo_refused_without_blocking, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_switch_save_refuses_invalid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_lock, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
