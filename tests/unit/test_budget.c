// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: timeout budget check (user/ops/budget.c). Run from the repository root (fixtures). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/budget.h"

#define FIX "tests/unit/fixtures/"

static struct budget_file *load_ok(const char *path)
{
	struct budget_file *bf = malloc(sizeof(*bf));
	struct doc_errors errs;
	assert_non_null(bf);
	if (budget_load(path, bf, &errs)) {
		doc_errors_print(stderr, &errs);
		fail_msg("%s did not load", path);
	}
	return bf;
}

static char *report(const struct budget_file *bf, int *over)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	*over = budget_report(out, bf);
	fclose(out);
	return buf;
}

/* The order-api chain adds up to 9540 ms against a 1000 ms entry timeout. */
static void test_budget_seed_order_api(void **state)
{
	struct budget_file *bf = load_ok(FIX "order_api_chains.yaml");
	const struct budget_chain *c;
	char *out;
	int over;
	(void)state;

	assert_int_equal(bf->n_chains, 1);
	c = &bf->chains[0];
	assert_string_equal(c->name, "order-api");
	assert_int_equal(c->n_hops, 3);
	assert_int_equal(c->hops[0].worst_ms, 7400);   /* 2000 x 3 + 1400 */
	assert_int_equal(c->hops[1].worst_ms, 1800);   /* 800 x 2 + 200 */
	assert_int_equal(c->hops[2].worst_ms, 300);    /* 300 x 1 */
	assert_int_equal(c->worst_ms, 9540);           /* + 40 own processing */
	assert_int_equal(c->budget_ms, 1000);
	assert_int_equal(c->over, 1);
	assert_int_equal(c->amplification, 6);         /* 3 x 2 x 1 */
	assert_int_equal(c->retrying_hops, 2);
	assert_int_equal(budget_compute(bf), 1);

	out = report(bf, &over);
	print_message("%s", out);
	assert_int_equal(over, 1);
	assert_non_null(strstr(out, "FAIL order-api: worst path 9540 ms > entry budget 1000 ms (9.5x); "
				    "retry amplification x6"));
	assert_non_null(strstr(out, "warning: payment-gateway: one attempt (2000 ms) is 200% of the entry budget"));
	assert_non_null(strstr(out, "warning: inventory: one attempt (800 ms) is 80%"));
	assert_null(strstr(out, "warning: order-db"));           /* 300 ms = 30% */
	assert_non_null(strstr(out, "warning: 2 hops retry"));
	assert_non_null(strstr(out, "1 of 1 chains over budget"));
	free(out);
	free(bf);
}

static void test_budget_within(void **state)
{
	struct budget_file *bf = load_ok(FIX "budget_ok.yaml");
	char *out;
	int over;
	(void)state;

	assert_int_equal(bf->n_chains, 2);
	/* 150 x 2 + 50 = 350, + 40 + 30 + 50 own = 470 <= 600 */
	assert_int_equal(bf->chains[0].worst_ms, 470);
	assert_int_equal(bf->chains[0].over, 0);
	assert_int_equal(bf->chains[0].amplification, 2);
	assert_int_equal(bf->chains[0].retrying_hops, 1);
	/* three layers each retrying twice = 3^3 = 27 */
	assert_int_equal(bf->chains[1].amplification, 27);
	assert_int_equal(bf->chains[1].worst_ms, 3 * (100 * 3 + 100));
	assert_int_equal(bf->chains[1].over, 0);
	assert_int_equal(budget_compute(bf), 0);
	out = report(bf, &over);
	assert_int_equal(over, 0);
	assert_non_null(strstr(out, "OK   order-api-fixed: worst path 470 ms <= entry budget 600 ms; "
				    "retry amplification x2"));
	assert_non_null(strstr(out, "retry amplification x27"));
	assert_null(strstr(out, "warning: 1 hops"));
	assert_non_null(strstr(out, "warning: 3 hops retry"));
	assert_non_null(strstr(out, "0 of 2 chains over budget"));
	free(out);
	free(bf);
}

static void test_budget_boundary(void **state)
{
	/* worst == budget is within; one more millisecond is over */
	const char *eq = "chains:\n  - name: x\n    budget_ms: 700\n    self_ms: 100\n    hops:\n"
			 "      - { name: a, timeout_ms: 200, retries: 2, backoff_ms: 0 }\n";
	const char *gt = "chains:\n  - name: x\n    budget_ms: 699\n    self_ms: 100\n    hops:\n"
			 "      - { name: a, timeout_ms: 200, retries: 2, backoff_ms: 0 }\n";
	struct budget_file *bf = malloc(sizeof(*bf));
	struct doc_errors errs;
	(void)state;

	assert_int_equal(budget_parse(eq, strlen(eq), "eq", bf, &errs), 0);
	assert_int_equal(bf->chains[0].worst_ms, 700);
	assert_int_equal(bf->chains[0].over, 0);
	assert_int_equal(budget_parse(gt, strlen(gt), "gt", bf, &errs), 0);
	assert_int_equal(bf->chains[0].over, 1);
	assert_int_equal(budget_compute(bf), 1);
	free(bf);
}

static void test_budget_amplification_saturates(void **state)
{
	struct budget_file *bf = calloc(1, sizeof(*bf));
	(void)state;
	bf->n_chains = 1;
	bf->chains[0].budget_ms = 1000;
	bf->chains[0].n_hops = 20;
	for (int i = 0; i < 20; i++) {
		bf->chains[0].hops[i].timeout_ms = 1;
		bf->chains[0].hops[i].retries = 10;   /* 11^20 > 2^64 */
	}
	budget_compute(bf);
	assert_int_equal(bf->chains[0].amp_saturated, 1);
	assert_true(bf->chains[0].amplification == UINT64_MAX);
	bf->chains[0].n_hops = 18;                    /* 11^18 fits */
	budget_compute(bf);
	assert_int_equal(bf->chains[0].amp_saturated, 0);
	assert_true(bf->chains[0].amplification == 5559917313492231481ull);
	free(bf);
}

static void test_budget_bad_file(void **state)
{
	struct budget_file *bf = malloc(sizeof(*bf));
	struct doc_errors errs;
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	(void)state;

	assert_int_equal(budget_load(FIX "budget_bad.yaml", bf, &errs), -1);
	out = open_memstream(&buf, &len);
	doc_errors_print(out, &errs);
	fclose(out);
	print_message("%s", buf);
	/* file:line:column, one message format for every YAML file (common/yamldoc.h) */
	assert_non_null(strstr(buf, FIX "budget_bad.yaml:4:5: unknown key 'timeout' in chain broken"));
	assert_non_null(strstr(buf, FIX "budget_bad.yaml:6:32: bad timeout_ms '-5' in hop a of chain broken: must be an integer in 1..3600000"));
	assert_non_null(strstr(buf, FIX "budget_bad.yaml:7:61: bad backoff_ms '50' in hop b of chain broken: must be 0 when retries is 0"));
	assert_non_null(strstr(buf, FIX "budget_bad.yaml:8:46: bad retries 'two' in hop c of chain broken: must be an integer in 0..10"));
	free(buf);

	{
		const char *t = "chains: []\n";
		assert_int_equal(budget_parse(t, strlen(t), "t", bf, &errs), -1);
		assert_non_null(strstr(errs.e[0].msg, "bad chains: must not be empty"));
	}
	{
		const char *t = "chains:\n  - name: x\n    hops:\n      - { name: a, timeout_ms: 1, retries: 0 }\n";
		assert_int_equal(budget_parse(t, strlen(t), "t", bf, &errs), -1);
		assert_non_null(strstr(errs.e[0].msg, "missing required key 'budget_ms' in chain x"));
	}
	{
		const char *t = "chains:\n  - name: x\n    budget_ms: 10\n    hops:\n      - { name: a, timeout_ms: 1 }\n";
		assert_int_equal(budget_parse(t, strlen(t), "t", bf, &errs), -1);
		assert_non_null(strstr(errs.e[0].msg, "missing required key 'retries' in hop a of chain x"));
	}
	{
		const char *t = "chains:\n  - name: x\n    budget_ms: 10\n    hops:\n"
				"      - { name: a, timeout_ms: 1, retries: 11 }\n";
		assert_int_equal(budget_parse(t, strlen(t), "t", bf, &errs), -1);
		assert_non_null(strstr(errs.e[0].msg, "bad retries '11' in hop a of chain x: must be an integer in 0..10"));
	}
	{
		const char *t = "chains:\n  - name: x\n    budget_ms: 10\n    hops: [{name: a, timeout_ms: 1, retries: 0}]\n"
				"  - name: x\n    budget_ms: 10\n    hops: [{name: a, timeout_ms: 1, retries: 0}]\n";
		assert_int_equal(budget_parse(t, strlen(t), "t", bf, &errs), -1);
		assert_non_null(strstr(errs.e[0].msg, "defined twice"));
		assert_int_equal(errs.e[0].line, 5);
	}
	assert_int_equal(budget_load(FIX "nope.yaml", bf, &errs), -1);
	assert_non_null(strstr(errs.e[0].msg, "cannot open"));
	free(bf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budget_seed_order_api),
		cmocka_unit_test(test_budget_within),
		cmocka_unit_test(test_budget_boundary),
		cmocka_unit_test(test_budget_amplification_saturates),
		cmocka_unit_test(test_budget_bad_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
