// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The controller's config keys (common/config_ctl.c) through the YAML parser and alone, and
 * the warnings about settings that defeat each other (common/config_warn.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/config.h"
#include "common/config_warn.h"

static struct sluice_config cfg;
static struct doc_errors errs;

static int parse_svc(const char *svc_lines)
{
	char text[2048];

	snprintf(text, sizeof(text),
		 "interface: eth0\n"
		 "services:\n"
		 "  - name: web\n"
		 "    port: 8080\n"
		 "    protocol: http\n"
		 "%s", svc_lines);
	return sluice_config_parse(text, strlen(text), "inline.yaml", &cfg, &errs);
}

static void test_defaults(void **st)
{
	struct service_conf s;
	(void)st;
	sluice_service_defaults(&s);
	assert_int_equal(s.limit_algorithm, LIMIT_ALG_AUTO);
	assert_true(s.latency_slo_ratio == 1.2);
	assert_true(s.latency_slo_ms == 0);
	assert_int_equal(s.min_samples, 20);
	assert_int_equal(s.headroom_set, 0);
	assert_true(s.recovery_step_s == 0.5);
	/* target_latency_ms: auto|N keeps working next to the new keys */
	assert_int_equal(parse_svc("    target_latency_ms: auto\n"), 0);
	assert_true(cfg.services[0].target_latency_ms == 0);
	assert_int_equal(parse_svc("    target_latency_ms: 40\n"), 0);
	assert_true(cfg.services[0].target_latency_ms == 40);
}

static void test_keys_through_yaml(void **st)
{
	const struct service_conf *s;
	(void)st;
	assert_int_equal(parse_svc("    limit_algorithm: aimd\n"
				   "    latency_slo: 1.5x\n"
				   "    min_samples: 50\n"
				   "    recovery_step_s: 2\n"
				   "    headroom: { L3: 40 }\n"), 0);
	s = &cfg.services[0];      /* the services live on the heap: taken after the parse */
	assert_int_equal(s->limit_algorithm, LIMIT_ALG_AIMD);
	assert_true(s->latency_slo_ratio == 1.5 && s->latency_slo_ms == 0);
	assert_int_equal(s->min_samples, 50);
	assert_true(s->recovery_step_s == 2);
	assert_int_equal(s->headroom_set, 1);
	assert_int_equal(s->headroom_written, 1u << 3);     /* which keys: L0 not written */
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    limit_algorithm: gradient\n"), 0);
	s = &cfg.services[0];
	assert_true(s->latency_slo_ms == 50);
	assert_int_equal(s->limit_algorithm, LIMIT_ALG_GRADIENT);
	assert_int_equal(s->headroom_set, 0);
	assert_int_equal(s->headroom_written, 0);
	assert_int_equal(parse_svc("    latency_slo: 0.2s\n"), 0);
	s = &cfg.services[0];
	assert_true(s->latency_slo_ms == 200);
	/* bad values are errors with their line */
	assert_int_equal(parse_svc("    latency_slo: fast\n"), -1);
	assert_int_equal(errs.e[0].line, 6);
	assert_non_null(strstr(errs.e[0].msg, "1.2x"));
	assert_int_equal(parse_svc("    limit_algorithm: vegas\n"), -1);
	assert_non_null(strstr(errs.e[0].msg, "gradient"));
	assert_int_equal(parse_svc("    min_samples: 0\n"), -1);
	assert_int_equal(errs.e[0].line, 6);
	assert_non_null(strstr(errs.e[0].msg, "min_samples"));
	assert_non_null(strstr(errs.e[0].msg, "from 1 to 100000"));
	assert_int_equal(parse_svc("    latency_slo: 0.5x\n"), -1);
	assert_int_equal(errs.e[0].line, 6);
	assert_non_null(strstr(errs.e[0].msg, ">= 1x"));
}

static void test_key_function(void **st)
{
	struct service_conf s;
	char err[128];
	(void)st;
	sluice_service_defaults(&s);
	assert_int_equal(sluice_service_ctl_key(&s, "port", "1", err, sizeof(err)), 0);
	assert_int_equal(sluice_service_ctl_key(&s, "latency_slo", "75ms", err, sizeof(err)), 1);
	assert_true(s.latency_slo_ms == 75);
	/* a ratio written after a latency replaces it */
	assert_int_equal(sluice_service_ctl_key(&s, "latency_slo", "2x", err, sizeof(err)), 1);
	assert_true(s.latency_slo_ms == 0 && s.latency_slo_ratio == 2);
	assert_int_equal(sluice_service_ctl_key(&s, "latency_slo", "50", err, sizeof(err)), -1);
	assert_int_equal(sluice_service_ctl_key(&s, "min_samples", "12x", err, sizeof(err)), -1);
}

static int has(const struct doc_errors *w, const char *sub)
{
	for (int i = 0; i < w->n; i++)
		if (strstr(w->e[i].msg, sub))
			return 1;
	return 0;
}

static void test_warnings(void **st)
{
	struct doc_errors w;
	(void)st;
	/* a sane config: no warning */
	assert_int_equal(parse_svc("    latency_slo: 50ms\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	/* each conflict alone, then all four at once */
	assert_int_equal(parse_svc("    latency_slo: 900ms\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "slow_call_ms (800) is below the latency objective (900 ms)"));
	assert_int_equal(w.e[0].line, 3);
	assert_int_equal(parse_svc("    target_latency_ms: 1000\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_int_equal(parse_svc("    limit: { fixed: 20 }\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "fixed limit with a learned latency objective"));
	assert_int_equal(parse_svc("    limit: { fixed: 20 }\n    latency_slo: 40ms\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	assert_int_equal(parse_svc("    aimd_window_ms: 50\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "shorter than control_interval_ms (100)"));
	assert_int_equal(parse_svc("    retry_after_s: 0\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "retry_after_s 0"));
	assert_int_equal(parse_svc("    retry_after_s: 0\n    aimd_window_ms: 50\n"
				   "    limit: { fixed: 20 }\n"
				   "    breaker: { slow_call_ms: 10 }\n"
				   "    target_latency_ms: 20\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 3);   /* fixed limit has a written target */
	assert_true(has(&w, "slow_call_ms (10)"));
	/* the classic aimd under a learned 1.2x objective grows only below 0.84 x the
	 * baseline; with a written latency, or 1.5x (band 1.05 x), nothing to say */
	assert_int_equal(parse_svc("    limit_algorithm: aimd\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "limit_algorithm aimd grows only while the median is below 0.7 x "
			    "the objective, here 0.84 x the learned baseline"));
	assert_int_equal(parse_svc("    limit_algorithm: aimd\n    latency_slo: 60ms\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	assert_int_equal(parse_svc("    limit_algorithm: aimd\n    latency_slo: 1.5x\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	assert_int_equal(parse_svc("    limit_algorithm: gradient\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	/* header / dscp rules without trust_from: inert, said so; with it, nothing to say */
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    classify:\n"
				   "      - { header: X-Priority, class: from-header }\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "inert without trust_from"));
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    classify:\n"
				   "      - { dscp: 46, class: L0 }\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    trust_from: [10.0.0.0/8]\n"
				   "    classify:\n      - { dscp: 46, class: L0 }\n"
				   "      - { header: X-Priority, class: from-header }\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    classify:\n"
				   "      - { source: 10.0.0.0/8, class: L0 }\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
}

/* A key that is valid but has no effect next to another is said by --check: a fixed limit
 * runs no algorithm, and of latency_slo and a numeric target_latency_ms only one objective
 * holds. */
static void test_warnings_keys_without_effect(void **st)
{
	struct doc_errors w;
	(void)st;
	assert_int_equal(parse_svc("    limit: { fixed: 20 }\n    latency_slo: 40ms\n"
				   "    limit_algorithm: aimd\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "service 'web': limit_algorithm aimd has no effect: a fixed limit "
			    "(20) does not move"));
	assert_int_equal(w.e[0].line, 3);
	assert_int_equal(parse_svc("    limit: { fixed: 20 }\n    latency_slo: 40ms\n"
				   "    limit_algorithm: gradient\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_int_equal(parse_svc("    limit: { fixed: 20 }\n    latency_slo: 40ms\n"
				   "    limit_algorithm: auto\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	assert_int_equal(parse_svc("    latency_slo: 1.5x\n    target_latency_ms: 40\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "service 'web': latency_slo 1.5x has no effect: target_latency_ms "
			    "(40) sets the objective"));
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    target_latency_ms: 40\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "service 'web': target_latency_ms (40) has no effect: latency_slo "
			    "50ms sets the objective"));
	assert_int_equal(parse_svc("    latency_slo: 1.5x\n    target_latency_ms: auto\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	assert_int_equal(parse_svc("    target_latency_ms: 40\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	/* an http service answers a refused request 429 (503 from the breaker); reject only
	 * says how the SYNs its connection cap refuses are answered, and with the cap off there
	 * are none */
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    reject: drop\n"
				   "    connection_cap: off\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 1);
	assert_true(has(&w, "service 'web': reject drop has no effect: with connection_cap off "
			    "no SYN of this http service is refused"));
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    reject: drop\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
	assert_int_equal(parse_svc("    latency_slo: 50ms\n    connection_cap: off\n"), 0);
	assert_int_equal(config_warnings(&cfg, &w), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_keys_through_yaml),
		cmocka_unit_test(test_key_function),
		cmocka_unit_test(test_warnings),
		cmocka_unit_test(test_warnings_keys_without_effect),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
