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
#include "errtext.h"

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

static struct budget_file *parse_ok(const char *text)
{
	struct budget_file *bf = malloc(sizeof(*bf));
	struct doc_errors errs;
	assert_non_null(bf);
	if (budget_parse(text, strlen(text), "t", bf, &errs)) {
		doc_errors_print(stderr, &errs);
		fail_msg("did not parse:\n%s", text);
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

/* The order-api chain adds up to 9540 ms against a 1000 ms entry timeout. order-api calls its
 * three dependencies one after another: payment-gateway (2 retries) receives 3 attempts per
 * entry request, inventory (1 retry) 2, order-db 1; the retries of siblings do not multiply. */
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
	assert_int_equal(c->hops[0].attempts, 3);
	assert_int_equal(c->hops[1].attempts, 2);
	assert_int_equal(c->hops[2].attempts, 1);
	assert_int_equal(c->n_services, 3);
	assert_string_equal(c->services[0].name, "payment-gateway");
	assert_int_equal(c->services[0].attempts, 3);
	assert_string_equal(c->services[1].name, "inventory");
	assert_int_equal(c->services[1].attempts, 2);
	assert_string_equal(c->services[2].name, "order-db");
	assert_int_equal(c->services[2].attempts, 1);
	assert_int_equal(c->amplification, 3);         /* the largest, not 3 x 2 x 1 */
	assert_int_equal(c->retrying_hops, 2);
	assert_int_equal(c->layered_retries, 0);
	assert_int_equal(c->over_hops, 0);
	assert_int_equal(budget_compute(bf), 1);

	out = report(bf, &over);
	print_message("%s", out);
	assert_int_equal(over, 1);
	assert_non_null(strstr(out, "FAIL order-api: worst path 9540 ms > entry budget 1000 ms (9.5x); "
				    "retry amplification x3 (payment-gateway)\n"));
	assert_non_null(strstr(out, "attempts per entry request: payment-gateway 3x, inventory 2x, "
				    "order-db 1x\n"));
	assert_null(strstr(out, "x6"));
	assert_non_null(strstr(out, "warning: payment-gateway: one attempt (2000 ms) is 200% of the entry budget"));
	assert_non_null(strstr(out, "warning: inventory: one attempt (800 ms) is 80%"));
	assert_null(strstr(out, "warning: order-db"));           /* 300 ms = 30% */
	assert_null(strstr(out, "retries below"));              /* siblings, not layers */
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
	/* a calls b calls c, each retrying twice: 3, 9, 27 attempts per entry request */
	assert_int_equal(bf->chains[1].n_hops, 3);
	assert_int_equal(bf->chains[1].hops[1].parent, 0);
	assert_int_equal(bf->chains[1].hops[2].parent, 1);
	assert_int_equal(bf->chains[1].hops[2].depth, 2);
	assert_int_equal(bf->chains[1].hops[0].attempts, 3);
	assert_int_equal(bf->chains[1].hops[1].attempts, 9);
	assert_int_equal(bf->chains[1].hops[2].attempts, 27);
	assert_int_equal(bf->chains[1].amplification, 27);
	assert_int_equal(bf->chains[1].layered_retries, 2);
	/* only the entry's own callee counts toward its path: 1000 x 3 + 100 */
	assert_int_equal(bf->chains[1].worst_ms, 3100);
	assert_int_equal(bf->chains[1].hops[0].calls_ms, 960);   /* b: 300 x 3 + 60, <= 1000 */
	assert_int_equal(bf->chains[1].hops[1].calls_ms, 170);   /* c: 50 x 3 + 20, <= 300 */
	assert_int_equal(bf->chains[1].over, 0);
	assert_int_equal(budget_compute(bf), 0);
	out = report(bf, &over);
	assert_int_equal(over, 0);
	assert_non_null(strstr(out, "OK   order-api-fixed: worst path 470 ms <= entry budget 600 ms; "
				    "retry amplification x2"));
	assert_non_null(strstr(out, "retry amplification x27 (service-c)"));
	assert_non_null(strstr(out, "attempts per entry request: service-a 3x, service-b 9x, service-c 27x"));
	assert_non_null(strstr(out, "\n       service-b                  300 ms"));   /* indented */
	assert_non_null(strstr(out, "warning: service-c retries below service-b, which retries too: "
				    "layers multiply (x27 at service-c)"));
	assert_non_null(strstr(out, "warning: service-b retries below service-a"));
	assert_null(strstr(out, "payment-gateway retries below"));
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

/* A service called from two places receives the sum of both paths' attempts. */
static void test_budget_shared_service(void **state)
{
	const char *t = "chains:\n  - name: x\n    budget_ms: 5000\n    hops:\n"
			"      - name: inventory\n        timeout_ms: 1000\n        retries: 1\n"
			"        calls:\n          - { name: order-db, timeout_ms: 700, retries: 0 }\n"
			"      - { name: order-db, timeout_ms: 100, retries: 2 }\n";
	struct budget_file *bf = parse_ok(t);
	char *out;
	int over;
	(void)state;

	assert_int_equal(bf->chains[0].n_hops, 3);
	assert_int_equal(bf->chains[0].hops[1].attempts, 2);   /* below inventory's 2 attempts */
	assert_int_equal(bf->chains[0].hops[2].attempts, 3);   /* called by the entry, 2 retries */
	assert_int_equal(bf->chains[0].n_services, 2);
	assert_int_equal(bf->chains[0].services[1].attempts, 5);
	assert_int_equal(bf->chains[0].amplification, 5);
	assert_int_equal(bf->chains[0].layered_retries, 0);     /* order-db under inventory: 0 retries */
	out = report(bf, &over);
	assert_int_equal(over, 0);
	assert_non_null(strstr(out, "retry amplification x5 (order-db)"));
	assert_non_null(strstr(out, "attempts per entry request: inventory 2x, order-db 5x\n"));
	/* 60% is measured against what the caller waits: inventory's timeout, not the entry's */
	assert_non_null(strstr(out, "warning: order-db: one attempt (700 ms) is 70% of the timeout of "
				    "inventory (more than 60%)"));
	free(out);
	free(bf);
}

/* A hop whose own calls outlast its timeout fails the chain even when the entry's path fits. */
static void test_budget_calls_outlast_timeout(void **state)
{
	const char *t = "chains:\n  - name: x\n    budget_ms: 5000\n    hops:\n"
			"      - name: inventory\n        timeout_ms: 800\n        retries: 0\n"
			"        self_ms: 100\n        calls:\n"
			"          - { name: order-db, timeout_ms: 300, retries: 1, backoff_ms: 101 }\n";
	struct budget_file *bf = parse_ok(t);
	char *out;
	int over;
	(void)state;

	assert_int_equal(bf->chains[0].worst_ms, 800);
	assert_int_equal(bf->chains[0].hops[0].calls_ms, 801);  /* 100 + 300 x 2 + 101 */
	assert_int_equal(bf->chains[0].hops[0].over, 1);
	assert_int_equal(bf->chains[0].over, 1);
	out = report(bf, &over);
	print_message("%s", out);
	assert_int_equal(over, 1);
	assert_non_null(strstr(out, "FAIL x: worst path 800 ms <= entry budget 5000 ms; 1 hop's calls "
				    "outlast its timeout"));
	assert_non_null(strstr(out, "over: inventory: one attempt may take 801 ms (own 100 ms + calls) "
				    "but its caller waits 800 ms"));
	assert_null(strstr(out, "warning: order-db"));          /* 300 of 800 ms: 37% */
	free(out);
	/* one millisecond less backoff: the calls fit exactly */
	bf->chains[0].hops[1].backoff_ms = 100;
	assert_int_equal(budget_compute(bf), 0);
	assert_int_equal(bf->chains[0].hops[0].over, 0);
	free(bf);
}

/* Eight levels of calls are accepted (11^8 attempts at the bottom), a ninth is refused. */
static void test_budget_depth(void **state)
{
	struct budget_file *bf = malloc(sizeof(*bf));
	struct doc_errors errs;
	char t[4096];
	size_t n;
	(void)state;

	for (int levels = BUDGET_MAX_DEPTH; levels <= BUDGET_MAX_DEPTH + 1; levels++) {
		n = (size_t)snprintf(t, sizeof(t), "chains:\n  - name: deep\n    budget_ms: 3600000\n"
				     "    hops:\n");
		for (int i = 0; i < levels; i++)
			n += (size_t)snprintf(t + n, sizeof(t) - n,
					      "%*s- name: s%d\n%*s  timeout_ms: 1\n%*s  retries: 10\n%*s  calls:\n",
					      6 + 4 * i, "", i, 6 + 4 * i, "", 6 + 4 * i, "", 6 + 4 * i, "");
		/* the last level calls nothing */
		n -= strlen("  calls:\n") + (size_t)(6 + 4 * (levels - 1));
		t[n] = 0;
		if (levels == BUDGET_MAX_DEPTH) {
			if (budget_parse(t, n, "t", bf, &errs)) {
				doc_errors_print(stderr, &errs);
				fail_msg("%d levels refused", levels);
			}
			assert_int_equal(bf->chains[0].n_hops, BUDGET_MAX_DEPTH);
			assert_true(bf->chains[0].amplification == 214358881ull);   /* 11^8 */
		} else {
			assert_int_equal(budget_parse(t, n, "t", bf, &errs), -1);
			assert_non_null(strstr(errs.e[0].msg, "calls nested more than 8 levels deep in chain deep"));
		}
	}
	free(bf);
}

static void test_budget_bad_file(void **state)
{
	struct budget_file *bf = malloc(sizeof(*bf));
	struct doc_errors errs;
	char *buf;
	(void)state;

	assert_int_equal(budget_load(FIX "budget_bad.yaml", bf, &errs), -1);
	buf = errors_text(&errs);
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
	{
		const char *t = "chains:\n  - name: x\n    budget_ms: 10\n    hops:\n"
				"      - { name: a, timeout_ms: 1, retries: 0, calls: [] }\n";
		assert_int_equal(budget_parse(t, strlen(t), "t", bf, &errs), -1);
		assert_non_null(strstr(errs.e[0].msg, "bad calls in hop a of chain x: must be a non-empty list"));
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
		cmocka_unit_test(test_budget_shared_service),
		cmocka_unit_test(test_budget_calls_outlast_timeout),
		cmocka_unit_test(test_budget_depth),
		cmocka_unit_test(test_budget_bad_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
