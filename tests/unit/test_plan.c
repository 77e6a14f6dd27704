// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: degradation plans (user/ops/plan.c). Run from the repository root (fixtures). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"
#include "ops/plan.h"
#include "ops/switches.h"
#include "errtext.h"

#define FIX "tests/unit/fixtures/"

static const char *const known[] = { "web", "api" };

static uint64_t day(const char *ymd)
{
	uint64_t t;
	assert_int_equal(date_parse_ymd(ymd, &t), 0);
	return t;
}

static struct sluice_plan *load_ok(const char *path)
{
	struct sluice_plan *p = malloc(sizeof(*p));
	struct doc_errors errs;
	assert_non_null(p);
	if (plan_load(path, p, &errs)) {
		doc_errors_print(stderr, &errs);
		fail_msg("%s did not load", path);
	}
	return p;
}

static int count_kind(const struct plan_finding *f, int n, enum plan_finding_kind k, const char *level,
		      const struct sluice_plan *p)
{
	int c = 0;
	for (int i = 0; i < n; i++)
		if (f[i].kind == k && (!level || !strcmp(p->levels[f[i].level].name, level)))
			c++;
	return c;
}

static void test_plan_load(void **state)
{
	struct sluice_plan *p = load_ok(FIX "plan_order_api.yaml");
	(void)state;
	assert_string_equal(p->service, "order-api");
	assert_string_equal(p->owner, "order-team");
	assert_int_equal(p->has_last_reviewed, 1);
	assert_int_equal(p->last_reviewed, day("2026-11-01"));
	assert_int_equal(p->n_levels, 3);
	assert_string_equal(p->levels[0].name, "L1");
	assert_int_equal(p->levels[0].n_actions, 2);
	assert_string_equal(p->levels[0].actions[0].service, "web");
	assert_int_equal(p->levels[0].actions[0].class, SLUICE_L3);
	assert_int_equal(p->levels[0].actions[0].shed_pct, 100);
	assert_int_equal(p->levels[0].actions[1].class, SLUICE_L2);
	assert_int_equal(p->levels[0].actions[1].shed_pct, 50);
	assert_string_equal(p->levels[0].expected_saving, "12% CPU");
	assert_int_equal(p->levels[0].reversible, 1);
	assert_int_equal(p->levels[0].verified, 1);
	assert_int_equal(p->levels[0].verified_at, day("2026-10-18"));
	assert_string_equal(p->levels[2].approver, "ic, business_owner");
	assert_int_equal(p->levels[2].reversible, 0);
	assert_int_equal(p->levels[2].verified, 0);
	assert_int_equal(p->levels[1].approver[0], 0);
	assert_int_equal(plan_find_level(p, "L2"), 1);
	assert_int_equal(plan_find_level(p, "L9"), -1);
	free(p);
}

static void test_plan_check_findings(void **state)
{
	struct sluice_plan *p = load_ok(FIX "plan_order_api.yaml");
	struct plan_finding f[16];
	int n;
	(void)state;

	n = plan_check(p, day("2026-11-10"), known, 2, f, 16);
	for (int i = 0; i < n; i++)
		print_message("# %s\n", f[i].msg);
	assert_int_equal(n, 2);
	/* L2 verified 2026-08-10: 92 days before the fake clock */
	assert_int_equal(count_kind(f, n, PLAN_VERIFY_STALE, "L2", p), 1);
	/* L3 never drilled */
	assert_int_equal(count_kind(f, n, PLAN_NEVER_VERIFIED, "L3", p), 1);
	/* L3 is irreversible but signed: no finding */
	assert_int_equal(count_kind(f, n, PLAN_IRREVERSIBLE_NO_APPROVER, NULL, p), 0);
	for (int i = 0; i < n; i++) {
		assert_non_null(strstr(f[i].msg, FIX "plan_order_api.yaml:"));
		if (f[i].kind == PLAN_VERIFY_STALE)
			assert_non_null(strstr(f[i].msg, "92 days ago"));
	}
	/* against a config without "api" the plan also names the unknown service */
	{
		static const char *const only_web[] = { "web" };
		n = plan_check(p, day("2026-11-10"), only_web, 1, f, 16);
		assert_int_equal(count_kind(f, n, PLAN_UNKNOWN_SERVICE, NULL, p), 2);
	}
	free(p);
}

static void test_plan_check_90_day_boundary(void **state)
{
	struct sluice_plan *p = load_ok(FIX "plan_clean.yaml");
	struct plan_finding f[8];
	uint64_t v = day("2026-10-01");
	(void)state;

	assert_int_equal(plan_check(p, v, known, 2, f, 8), 0);
	assert_int_equal(plan_check(p, v + 90 * 86400, known, 2, f, 8), 0);
	assert_int_equal(plan_check(p, v + 91 * 86400, known, 2, f, 8), 1);
	assert_int_equal(f[0].kind, PLAN_VERIFY_STALE);
	assert_non_null(strstr(f[0].msg, "91 days ago"));
	assert_int_equal(plan_check(p, v - 86400, known, 2, f, 8), 1);
	assert_int_equal(f[0].kind, PLAN_VERIFY_FUTURE);
	free(p);
}

static void test_plan_irreversible_without_approver(void **state)
{
	struct sluice_plan *p = load_ok(FIX "plan_no_approver.yaml");
	struct plan_finding f[8];
	struct sw_switch sw[8];
	char err[400];
	int n;
	(void)state;

	n = plan_check(p, day("2026-10-05"), known, 2, f, 8);
	assert_int_equal(n, 1);
	assert_int_equal(f[0].kind, PLAN_IRREVERSIBLE_NO_APPROVER);
	assert_string_equal(p->levels[f[0].level].name, "L2");
	/* L1 is fine to apply; L2 is refused */
	assert_int_equal(plan_level_switches(p, "L1", "INC-9", "1h", "alice", 1000, known, 2, sw, 8,
					     err, sizeof(err)), 1);
	assert_int_equal(plan_level_switches(p, "L2", "INC-9", "1h", "alice", 1000, known, 2, sw, 8,
					     err, sizeof(err)), -1);
	assert_non_null(strstr(err, "irreversible"));
	assert_non_null(strstr(err, "\"L2\""));
	free(p);
}

static void test_plan_unknown_level(void **state)
{
	struct sluice_plan *p = load_ok(FIX "plan_order_api.yaml");
	struct sw_switch sw[8];
	char err[400];
	(void)state;
	assert_int_equal(plan_level_switches(p, "L7", "INC-9", "1h", "alice", 1000, known, 2, sw, 8,
					     err, sizeof(err)), -1);
	assert_non_null(strstr(err, "level \"L7\""));
	assert_non_null(strstr(err, "levels: L1, L2, L3"));
	free(p);
}

static void test_plan_level_switches(void **state)
{
	struct sluice_plan *p = load_ok(FIX "plan_order_api.yaml");
	struct sw_switch sw[8];
	const uint64_t now = 1790000000;
	char err[400];
	int n;
	(void)state;

	/* L1 alone */
	n = plan_level_switches(p, "L1", "INC-9", "2h", "alice", now, known, 2, sw, 8, err, sizeof(err));
	assert_int_equal(n, 2);
	assert_string_equal(sw[0].service, "web");
	assert_int_equal(sw[0].class, SLUICE_L3);
	assert_int_equal(sw[0].shed_pct, 100);
	assert_string_equal(sw[0].reason, "plan L1: INC-9");
	assert_string_equal(sw[0].owner, "alice");
	assert_int_equal(sw[0].set_at, now);
	assert_int_equal(sw[0].expires_at, now + 7200);
	assert_int_equal(sw[1].class, SLUICE_L2);
	assert_int_equal(sw[1].shed_pct, 50);

	/* L2 is cumulative: L1's actions plus its own, web/L2 overridden to 100 */
	n = plan_level_switches(p, "L2", "INC-9", "2h", "alice", now, known, 2, sw, 8, err, sizeof(err));
	assert_int_equal(n, 3);
	assert_string_equal(sw[0].service, "web");
	assert_int_equal(sw[0].class, SLUICE_L3);
	assert_int_equal(sw[1].class, SLUICE_L2);
	assert_int_equal(sw[1].shed_pct, 100);
	assert_string_equal(sw[2].service, "api");
	assert_int_equal(sw[2].class, SLUICE_L3);
	assert_string_equal(sw[2].reason, "plan L2: INC-9");

	/* bad inputs are refused before anything is produced */
	assert_int_equal(plan_level_switches(p, "L1", "", "2h", "alice", now, known, 2, sw, 8, err,
					     sizeof(err)), -1);
	assert_non_null(strstr(err, "--reason"));
	assert_int_equal(plan_level_switches(p, "L1", "INC", "0s", "alice", now, known, 2, sw, 8, err,
					     sizeof(err)), -1);
	assert_non_null(strstr(err, "--ttl"));
	assert_int_equal(plan_level_switches(p, "L1", "INC", "2h", "alice", now, known, 2, sw, 1, err,
					     sizeof(err)), -1);
	{
		static const char *const only_api[] = { "api" };
		assert_int_equal(plan_level_switches(p, "L1", "INC", "2h", "alice", now, only_api, 1, sw,
						     8, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "service \"web\""));
		assert_non_null(strstr(err, FIX "plan_order_api.yaml:"));
	}
	free(p);
}

static void test_plan_apply_to_set(void **state)
{
	struct sluice_plan *p = load_ok(FIX "plan_order_api.yaml");
	struct sw_set *set = malloc(sizeof(*set));
	struct sw_switch sw[8], old[8], pre;
	int had[8], n;
	char err[400];
	const uint64_t now = 1790000000;
	(void)state;

	sw_set_init(set);
	assert_int_equal(sw_make(&pre, "web", "L2", "10", "manual", "1h", "bob", now - 60, known, 2,
				 err, sizeof(err)), 0);
	assert_int_equal(sw_set_put(set, &pre, NULL), 0);
	n = plan_level_switches(p, "L2", "INC-9", "2h", "alice", now, known, 2, sw, 8, err, sizeof(err));
	assert_int_equal(n, 3);
	assert_int_equal(plan_apply_to_set(set, sw, n, old, had, err, sizeof(err)), 0);
	assert_int_equal(set->n, 3);
	assert_int_equal(had[0], 0);
	assert_int_equal(had[1], 1);
	assert_int_equal(old[1].shed_pct, 10);
	assert_string_equal(old[1].owner, "bob");
	assert_int_equal(sw_admit_ratio(set, "web", SLUICE_L2, now), 0);

	/* all or nothing: one invalid switch leaves the set untouched */
	sw_set_init(set);
	sw[2].reason[0] = 0;
	assert_int_equal(plan_apply_to_set(set, sw, n, old, had, err, sizeof(err)), -1);
	assert_int_equal(set->n, 0);
	assert_non_null(strstr(err, "reason"));
	free(set);
	free(p);
}

static void test_plan_bad_files(void **state)
{
	struct sluice_plan *p = malloc(sizeof(*p));
	struct doc_errors errs;
	char *buf;
	(void)state;

	assert_int_equal(plan_load(FIX "plan_bad.yaml", p, &errs), -1);
	buf = errors_text(&errs);
	print_message("%s", buf);
	/* file:line:column, one message format for every YAML file (common/yamldoc.h) */
	assert_non_null(strstr(buf, FIX "plan_bad.yaml:3:5: unknown key 'colour' in level L1 (allowed: name,"));
	assert_non_null(strstr(buf, FIX "plan_bad.yaml:5:32: bad class 'L7' in action 1 of level L1: expected L0, L1, L2 or L3"));
	assert_non_null(strstr(buf, FIX "plan_bad.yaml:6:42: bad shed '101' in action 2 of level L1: must be an integer in 0..100"));
	assert_non_null(strstr(buf, FIX "plan_bad.yaml:7:17: bad reversible 'maybe' in level L1: expected true or false"));
	assert_non_null(strstr(buf, FIX "plan_bad.yaml:8:18: bad verified_at '2026-13-40' in level L1: not a date YYYY-MM-DD"));
	assert_non_null(strstr(buf, FIX "plan_bad.yaml:9:11: level \"L1\" defined twice (first at line 2)"));
	assert_non_null(strstr(buf, "bad actions in level L1: must not be empty"));
	assert_non_null(strstr(buf, "missing required key 'verified_at' in level L1"));
	free(buf);

	assert_int_equal(plan_load(FIX "plan_syntax.yaml", p, &errs), -1);
	assert_int_equal(errs.n, 1);
	assert_true(errs.e[0].line >= 3);
	assert_non_null(strstr(errs.e[0].msg, "YAML syntax error"));

	assert_int_equal(plan_load(FIX "does_not_exist.yaml", p, &errs), -1);
	assert_non_null(strstr(errs.e[0].msg, "cannot open"));

	assert_int_equal(plan_parse("", 0, "empty.yaml", p, &errs), -1);
	assert_non_null(strstr(errs.e[0].msg, "empty"));
	{
		const char *t = "levels:\n  - name: L1\n    actions: [{service: web, class: L3, shed: 5}]\n"
				"    reversible: true\n    verified_at: null\nextra: 1\n";
		assert_int_equal(plan_parse(t, strlen(t), "x.yaml", p, &errs), -1);
		assert_int_equal(errs.e[0].line, 6);
		assert_non_null(strstr(errs.e[0].msg, "unknown key 'extra' at top level"));
	}
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_load),
		cmocka_unit_test(test_plan_check_findings),
		cmocka_unit_test(test_plan_check_90_day_boundary),
		cmocka_unit_test(test_plan_irreversible_without_approver),
		cmocka_unit_test(test_plan_unknown_level),
		cmocka_unit_test(test_plan_level_switches),
		cmocka_unit_test(test_plan_apply_to_set),
		cmocka_unit_test(test_plan_bad_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
