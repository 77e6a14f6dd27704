// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests of user/common/config.c: the YAML config parser and validator.
 * Fixtures live in tests/unit/configs/ and are found relative to the repo root (tests/run.sh
 * runs from there); set SLUICE_SRCDIR to run from elsewhere. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "common/config.h"
#include "common/config_warn.h"
#include "control/breaker.h"
#include "control/cascade.h"
#include "control/retrystorm.h"
#include "errtext.h"

struct fx {
	struct sluice_config cfg;
	struct doc_errors errs;
	char path[512];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

static const char *fixture(struct fx *f, const char *name)
{
	const char *dir = getenv("SLUICE_SRCDIR");
	snprintf(f->path, sizeof(f->path), "%s%stests/unit/configs/%s", dir ? dir : "",
		 dir ? "/" : "", name);
	return f->path;
}

static int load(struct fx *f, const char *name)
{
	return sluice_config_load(fixture(f, name), &f->cfg, &f->errs);
}

static int parse(struct fx *f, const char *text)
{
	return sluice_config_parse(text, strlen(text), "inline.yaml", &f->cfg, &f->errs);
}

static void dump_errors(const struct doc_errors *e)
{
	doc_errors_print(stderr, e);
}

/* An error at `line` whose message contains `sub` was reported. */
static void expect_error(const struct doc_errors *e, int line, const char *sub)
{
	for (int i = 0; i < e->n; i++)
		if (e->e[i].line == line && strstr(e->e[i].msg, sub))
			return;
	fprintf(stderr, "# wanted an error at line %d containing \"%s\"; got:\n", line, sub);
	dump_errors(e);
	fail_msg("missing error at line %d: %s", line, sub);
}

static void expect_ok(struct fx *f, int rc)
{
	if (rc != 0 || f->errs.n != 0) {
		dump_errors(&f->errs);
		fail_msg("config refused: %d errors", f->errs.n);
	}
}

static void expect_fail(struct fx *f, int rc, int n_errors)
{
	assert_int_equal(rc, -1);
	if (n_errors >= 0 && f->errs.n != n_errors) {
		dump_errors(&f->errs);
		fail_msg("expected %d errors, got %d", n_errors, f->errs.n);
	}
}

/* ---- valid configs ---- */

/* good.yaml is the example in docs/CONFIG.md. */
static void test_documented_example(void **state)
{
	struct fx *f = *state;
	struct sluice_config *c = &f->cfg;
	struct service_conf *s;
	struct class_rule *r;

	expect_ok(f, load(f, "good.yaml"));
	assert_string_equal(c->interface, "eth0");
	assert_int_equal(c->xdp_mode, XDP_MODE_AUTO);
	assert_int_equal(c->control_interval_ms, 100);
	assert_int_equal(c->heartbeat_timeout_ms, 1000);
	assert_string_equal(c->metrics_address, "127.0.0.1:9477");
	assert_string_equal(c->state_dir, "/var/lib/sluice");
	assert_int_equal(c->n_services, 1);

	s = &c->services[0];
	assert_string_equal(s->name, "web");
	assert_int_equal(s->line, 8);
	assert_int_equal(s->port, 8080);
	assert_int_equal(s->protocol, SLUICE_PROTO_HTTP);
	assert_int_equal(s->reject, SLUICE_REJECT_RST);
	assert_int_equal(s->retry_after_s, 1);
	assert_int_equal(s->limit_min, 4);
	assert_int_equal(s->limit_max, 512);
	assert_int_equal(s->limit_fixed, 0);
	assert_true(s->target_latency_ms == 0);   /* auto */
	assert_int_equal(s->headroom[0], 100);
	assert_int_equal(s->headroom[1], 90);
	assert_int_equal(s->headroom[2], 75);
	assert_int_equal(s->headroom[3], 50);
	assert_int_equal(s->default_class, SLUICE_L2);

	assert_int_equal(s->n_trust, 1);
	assert_int_equal(s->trust[0].prefix_len, 96 + 24);
	assert_int_equal(s->n_rules, 4);
	r = &s->rules[0];
	assert_int_equal(r->kind, RULE_SOURCE);
	assert_int_equal(r->line, 19);
	assert_int_equal(r->class, SLUICE_L0);
	assert_int_equal(r->is_v4, 1);
	assert_int_equal(r->prefix_len, 96 + 24);
	{
		const uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 1, 0 };
		assert_memory_equal(r->addr, want, 16);
	}
	r = &s->rules[1];
	assert_int_equal(r->kind, RULE_DSCP);
	assert_int_equal(r->line, 20);
	assert_int_equal(r->dscp, 46);
	assert_int_equal(r->class, SLUICE_L0);
	r = &s->rules[2];
	assert_int_equal(r->kind, RULE_HEADER);
	assert_string_equal(r->header, "X-Priority");   /* as written */
	assert_int_equal(r->class, SLUICE_CLASS_FROM_HEADER);
	r = &s->rules[3];
	assert_int_equal(r->kind, RULE_PATH);
	assert_string_equal(r->path, "/report");
	assert_int_equal(r->class, SLUICE_L3);
	assert_int_equal(r->line, 22);

	assert_int_equal(s->breaker.min_calls, 20);
	assert_true(s->breaker.error_rate == 0.5);
	assert_int_equal(s->breaker.slow_call_ms, 800);
	assert_true(s->breaker.slow_call_rate == 0.6);
	assert_true(s->breaker.open_s == 5);
	assert_int_equal(s->breaker.n_half_open_steps, 4);
	assert_int_equal(s->breaker.half_open_steps[0], 10);
	assert_int_equal(s->breaker.half_open_steps[1], 30);
	assert_int_equal(s->breaker.half_open_steps[2], 60);
	assert_int_equal(s->breaker.half_open_steps[3], 100);
	assert_true(s->breaker.step_s == 5);
}

static void test_defaults(void **state)
{
	struct fx *f = *state;
	struct sluice_config *c = &f->cfg;
	struct service_conf *s;

	expect_ok(f, load(f, "minimal.yaml"));
	assert_string_equal(c->interface, "eth1");
	assert_int_equal(c->xdp_mode, XDP_MODE_AUTO);
	assert_int_equal(c->control_interval_ms, 100);
	assert_int_equal(c->heartbeat_timeout_ms, 1000);
	assert_string_equal(c->metrics_address, "127.0.0.1:9477");
	assert_string_equal(c->state_dir, "/var/lib/sluice");
	assert_string_equal(c->pin_dir, SLUICE_PIN_DIR);
	assert_string_equal(c->switch_group, "");
	assert_int_equal(c->switch_max_renewals, 3);
	assert_int_equal(c->flow_idle_timeout_s, 600);
	assert_int_equal(c->syn_timeout_s, 30);
	assert_int_equal(c->cascade.max_opens, 5);
	assert_true(c->cascade.window_s == 10);
	assert_true(c->cascade.suspend_s == 0);   /* operators decide */
	assert_true(c->retry_storm.ratio == 0.2);
	assert_int_equal(c->retry_storm.windows, 3);

	assert_int_equal(c->n_services, 1);
	s = &c->services[0];
	assert_string_equal(s->name, "api");
	assert_int_equal(s->port, 9000);
	assert_int_equal(s->protocol, SLUICE_PROTO_TCP);
	assert_int_equal(s->reject, SLUICE_REJECT_RST);
	assert_int_equal(s->retry_after_s, 1);
	assert_int_equal(s->limit_min, 4);
	assert_int_equal(s->limit_max, 512);
	assert_int_equal(s->limit_fixed, 0);
	assert_true(s->target_latency_ms == 0);
	assert_int_equal(s->aimd_window_ms, 1000);
	assert_int_equal(s->headroom[0], 100);
	assert_int_equal(s->headroom[1], 90);
	assert_int_equal(s->headroom[2], 75);
	assert_int_equal(s->headroom[3], 50);
	assert_int_equal(s->default_class, SLUICE_L2);
	assert_int_equal(s->n_rules, 0);
	assert_int_equal(s->breaker.min_calls, 20);
	assert_true(s->breaker.error_rate == 0.5);
	assert_int_equal(s->breaker.slow_call_ms, 800);
	assert_true(s->breaker.slow_call_rate == 0.6);
	assert_true(s->breaker.open_s == 5);
	assert_int_equal(s->breaker.n_half_open_steps, 4);
	assert_int_equal(s->breaker.half_open_steps[3], 100);
	assert_true(s->breaker.step_s == 5);
	assert_true(s->breaker.half_open_success == 0.9);
	assert_true(s->breaker.window_s == 10);
	assert_int_equal(s->n_ladder_steps, 5);
	assert_int_equal(s->ladder_steps[0], 10);
	assert_int_equal(s->ladder_steps[1], 30);
	assert_int_equal(s->ladder_steps[2], 50);
	assert_int_equal(s->ladder_steps[3], 80);
	assert_int_equal(s->ladder_steps[4], 100);
	assert_true(s->recovery_step_s == 0.5);
}

static void test_defaults_function(void **state)
{
	struct fx *f = *state;

	memset(&f->cfg, 0xa5, sizeof(f->cfg));
	sluice_config_defaults(&f->cfg);
	assert_int_equal(f->cfg.n_services, 0);
	assert_string_equal(f->cfg.interface, "");
	assert_int_equal(f->cfg.control_interval_ms, 100);
	assert_string_equal(f->cfg.pin_dir, "/sys/fs/bpf/sluice");
}

/* block.yaml and flow.yaml hold the same settings in the two styles. */
static void check_db(const struct sluice_config *c)
{
	const struct service_conf *s = &c->services[0];
	const struct class_rule *r;

	assert_string_equal(c->interface, "veth0");
	assert_int_equal(c->xdp_mode, XDP_MODE_GENERIC);
	assert_int_equal(c->control_interval_ms, 50);
	assert_int_equal(c->heartbeat_timeout_ms, 500);
	assert_string_equal(c->metrics_address, "[::1]:9100");
	assert_string_equal(c->state_dir, "/tmp/sluice-state");
	assert_string_equal(c->pin_dir, "/sys/fs/bpf/sluice-test");
	assert_string_equal(c->switch_group, "sluice");
	assert_int_equal(c->flow_idle_timeout_s, 120);
	assert_int_equal(c->syn_timeout_s, 10);
	assert_int_equal(c->cascade.max_opens, 3);
	assert_true(c->cascade.window_s == 20);
	assert_true(c->cascade.suspend_s == 0);
	assert_true(c->retry_storm.ratio == 0.25);
	assert_int_equal(c->retry_storm.windows, 5);
	assert_int_equal(c->n_services, 1);

	assert_string_equal(s->name, "db");
	assert_int_equal(s->port, 5432);
	assert_int_equal(s->protocol, SLUICE_PROTO_TCP);
	assert_int_equal(s->reject, SLUICE_REJECT_DROP);
	assert_int_equal(s->retry_after_s, 3);
	assert_int_equal(s->limit_fixed, 64);
	assert_int_equal(s->limit_min, 64);
	assert_int_equal(s->limit_max, 64);
	assert_true(s->target_latency_ms == 12.5);
	assert_int_equal(s->aimd_window_ms, 250);
	assert_int_equal(s->headroom[0], 100);
	assert_int_equal(s->headroom[1], 80);
	assert_int_equal(s->headroom[2], 60);
	assert_int_equal(s->headroom[3], 40);
	assert_int_equal(s->default_class, SLUICE_L1);

	assert_int_equal(s->n_rules, 3);
	r = &s->rules[0];
	assert_int_equal(r->kind, RULE_SOURCE);
	assert_int_equal(r->is_v4, 0);
	assert_int_equal(r->prefix_len, 48);
	assert_int_equal(r->class, SLUICE_L0);
	{
		const uint8_t want[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 1 };
		assert_memory_equal(r->addr, want, 16);
	}
	r = &s->rules[1];
	assert_int_equal(r->kind, RULE_SOURCE);
	assert_int_equal(r->is_v4, 1);
	assert_int_equal(r->prefix_len, 128);      /* bare address: a /32 host */
	assert_int_equal(r->class, SLUICE_L3);
	r = &s->rules[2];
	assert_int_equal(r->kind, RULE_DSCP);
	assert_int_equal(r->dscp, 10);
	assert_int_equal(r->class, SLUICE_L2);

	assert_int_equal(s->breaker.min_calls, 50);
	assert_true(s->breaker.error_rate == 0.25);
	assert_int_equal(s->breaker.slow_call_ms, 200);
	assert_true(s->breaker.slow_call_rate == 0.5);
	assert_true(s->breaker.open_s == 2.5);
	assert_int_equal(s->breaker.n_half_open_steps, 3);
	assert_int_equal(s->breaker.half_open_steps[0], 25);
	assert_int_equal(s->breaker.half_open_steps[1], 50);
	assert_int_equal(s->breaker.half_open_steps[2], 100);
	assert_true(s->breaker.step_s == 1);
	assert_true(s->breaker.half_open_success == 0.95);
	assert_true(s->breaker.window_s == 30);
	assert_int_equal(s->n_ladder_steps, 3);
	assert_int_equal(s->ladder_steps[0], 20);
	assert_int_equal(s->ladder_steps[1], 60);
	assert_int_equal(s->ladder_steps[2], 100);
	assert_true(s->recovery_step_s == 2);
}

static void test_block_style(void **state)
{
	struct fx *f = *state;

	expect_ok(f, load(f, "block.yaml"));
	check_db(&f->cfg);
	assert_int_equal(f->cfg.services[0].line, 19);
	assert_int_equal(f->cfg.services[0].rules[2].line, 39);
}

static void test_flow_style(void **state)
{
	struct fx *f = *state;

	expect_ok(f, load(f, "flow.yaml"));
	check_db(&f->cfg);
	assert_int_equal(f->cfg.services[0].rules[1].line, 10);
}

static void test_flow_style_errors_have_lines(void **state)
{
	struct fx *f = *state;
	const char *text =
		"{ interface: eth0,\n"
		"  services: [ { name: web, port: 80,\n"
		"                breaker: { min_calls: 5,\n"
		"                           error_rate: 7 } } ] }\n";

	expect_fail(f, parse(f, text), 1);
	expect_error(&f->errs, 4, "error_rate");
}

static void test_v6_prefix(void **state)
{
	struct fx *f = *state;
	const struct class_rule *r;

	expect_ok(f, load(f, "v6.yaml"));
	r = f->cfg.services[0].rules;
	assert_int_equal(f->cfg.services[0].n_rules, 3);
	assert_int_equal(r[0].is_v4, 0);
	assert_int_equal(r[0].prefix_len, 48);
	{
		const uint8_t want[16] = { 0x20, 0x01, 0x0d, 0xb8, 0xab, 0xcd };
		assert_memory_equal(r[0].addr, want, 16);
	}
	assert_int_equal(r[1].is_v4, 0);
	assert_int_equal(r[1].prefix_len, 0);
	assert_int_equal(r[1].class, SLUICE_L3);
	assert_int_equal(r[2].is_v4, 1);
	assert_int_equal(r[2].prefix_len, 96);      /* 0.0.0.0/0: every v4-mapped address */
	assert_int_equal(r[2].addr[10], 0xff);
	assert_int_equal(r[2].addr[11], 0xff);
}

static void test_fixed_limit(void **state)
{
	struct fx *f = *state;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - { name: s, port: 1, limit: { fixed: 7 } }\n"));
	assert_int_equal(f->cfg.services[0].limit_fixed, 7);
	assert_int_equal(f->cfg.services[0].limit_min, 7);
	assert_int_equal(f->cfg.services[0].limit_max, 7);
}

static void test_limit_only_max(void **state)
{
	struct fx *f = *state;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - { name: s, port: 1, limit: { max: 2 } }\n"));
	assert_int_equal(f->cfg.services[0].limit_min, 2);
	assert_int_equal(f->cfg.services[0].limit_max, 2);
	assert_int_equal(f->cfg.services[0].limit_fixed, 0);
}

static void test_target_latency_number(void **state)
{
	struct fx *f = *state;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - { name: s, port: 1, target_latency_ms: 250 }\n"));
	assert_true(f->cfg.services[0].target_latency_ms == 250);
	expect_fail(f, parse(f, "interface: lo\nservices:\n"
				"  - { name: s, port: 1, target_latency_ms: 0 }\n"), 1);
	expect_error(&f->errs, 3, "target_latency_ms");
}

/* latency_slo and min_samples: a plain decimal only. strtod alone took "nan" (which passed
 * every range check), hex and leading blanks. */
static void test_latency_slo_not_a_number(void **state)
{
	static const char *const bad[] = { "nanx", "NaNms", "nans", "0x2x", "\" 1.5x\"",
					    "\"+1.5x\"", "infms", "-nanx" };
	struct fx *f = *state;
	char text[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "interface: lo\nservices:\n"
			 "  - name: s\n    port: 1\n    latency_slo: %s\n", bad[i]);
		expect_fail(f, parse(f, text), 1);
		expect_error(&f->errs, 5, "latency_slo");
	}
	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - { name: s, port: 1, latency_slo: .5s }\n"));
	assert_true(f->cfg.services[0].latency_slo_ms == 500);
	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - { name: s, port: 1, latency_slo: 1.5x }\n"));
	assert_true(f->cfg.services[0].latency_slo_ratio == 1.5);
	expect_fail(f, parse(f, "interface: lo\nservices:\n"
				"  - { name: s, port: 1, min_samples: \" 5\" }\n"), 1);
	expect_error(&f->errs, 3, "min_samples");
}

/* A warning is printed whole: the aimd one is ~300 bytes, its remedy at the end. */
static void test_warning_not_truncated(void **state)
{
	struct fx *f = *state;
	struct doc_errors w;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - name: a-service-name-of-31-characters\n    port: 1\n"
			      "    limit_algorithm: aimd\n    latency_slo: 1.4x\n"));
	assert_int_equal(config_warnings(&f->cfg, &w), 1);
	if (!strstr(w.e[0].msg, "or use gradient"))
		fail_msg("warning cut short: \"%s\"", w.e[0].msg);
}

static void test_switch_max_renewals(void **state)
{
	struct fx *f = *state;

	expect_ok(f, parse(f, "interface: lo\nswitch_max_renewals: 5\nservices:\n"
			      "  - { name: s, port: 1 }\n"));
	assert_int_equal(f->cfg.switch_max_renewals, 5);
	expect_fail(f, parse(f, "interface: lo\nswitch_max_renewals: -1\nservices:\n"
				"  - { name: s, port: 1 }\n"), 1);
	expect_error(&f->errs, 2, "switch_max_renewals");
}

static void test_headroom_mode(void **state)
{
	struct fx *f = *state;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - { name: s, port: 1 }\n"
			      "  - { name: t, port: 2, headroom_mode: fixed }\n"));
	assert_int_equal(f->cfg.services[0].headroom_mode, HEADROOM_ADAPTIVE);
	assert_int_equal(f->cfg.services[1].headroom_mode, HEADROOM_FIXED);
	expect_fail(f, parse(f, "interface: lo\nservices:\n"
				"  - { name: s, port: 1, headroom_mode: greedy }\n"), 1);
	expect_error(&f->errs, 3, "headroom_mode");
}

/* An http-only enum key of a service: `dflt` without it, each of names[i] read as values[i],
 * refused on a tcp service ("needs protocol: http") and for `bad`. */
static void check_http_enum_key(struct fx *f, const char *key,
				int (*get)(const struct service_conf *), int dflt,
				const char *const *names, const int *values, int n, const char *bad)
{
	char text[256];

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - name: web\n    port: 80\n    protocol: http\n"));
	assert_int_equal(get(&f->cfg.services[0]), dflt);
	for (int i = 0; i < n; i++) {
		snprintf(text, sizeof(text), "interface: lo\nservices:\n"
			 "  - name: web\n    port: 80\n    protocol: http\n    %s: %s\n", key, names[i]);
		expect_ok(f, parse(f, text));
		assert_int_equal(get(&f->cfg.services[0]), values[i]);
	}
	snprintf(text, sizeof(text), "interface: lo\nservices:\n"
		 "  - name: db\n    port: 5432\n    %s: %s\n", key, names[0]);
	expect_fail(f, parse(f, text), 1);
	expect_error(&f->errs, 5, "needs protocol: http");
	snprintf(text, sizeof(text), "interface: lo\nservices:\n"
		 "  - name: web\n    port: 80\n    protocol: http\n    %s: %s\n", key, bad);
	expect_fail(f, parse(f, text), 1);
	expect_error(&f->errs, 6, key);
}

static int conn_cap_of(const struct service_conf *s)
{
	return s->connection_cap;
}

static int read_gate_of(const struct service_conf *s)
{
	return s->read_gate;
}

/* connection_cap: http only; churn by default, off and auto as written. */
static void test_connection_cap(void **state)
{
	static const char *const names[] = { "off", "auto", "churn" };
	static const int values[] = { CONN_CAP_OFF, CONN_CAP_AUTO, CONN_CAP_CHURN };

	check_http_enum_key(*state, "connection_cap", conn_cap_of, CONN_CAP_CHURN, names, values,
			    3, "12");
}

/* read_gate: http only; auto by default, off as written, anything else an error. */
static void test_read_gate_key(void **state)
{
	static const char *const names[] = { "off", "auto" };
	static const int values[] = { READ_GATE_OFF, READ_GATE_AUTO };

	check_http_enum_key(*state, "read_gate", read_gate_of, READ_GATE_AUTO, names, values, 2,
			    "on");
}

/* max_connections: the per-class shape of the cap, where it is refused, what --check warns. */
static void test_max_connections(void **state)
{
	struct fx *f = *state;
	unsigned thr[SLUICE_NUM_CLASSES];
	struct doc_errors w;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - name: db\n    port: 5432\n    max_connections: 36\n"));
	service_conn_cap(&f->cfg.services[0], thr);
	/* default headroom 100/90/75/50: L0 the whole cap, L3 half of it */
	assert_int_equal(thr[0], 36);
	assert_int_equal(thr[1], 32);
	assert_int_equal(thr[2], 27);
	assert_int_equal(thr[3], 18);
	assert_int_equal(config_warnings(&f->cfg, &w), 0);
	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - name: db\n    port: 5432\n    max_connections: 10\n"
			      "    headroom: { L3: 5 }\n    limit: { fixed: 12 }\n"
			      "    latency_slo: 20ms\n"));
	service_conn_cap(&f->cfg.services[0], thr);
	assert_int_equal(thr[3], 1);      /* 5 % of 10 rounds to 0: the class keeps one */
	assert_int_equal(config_warnings(&f->cfg, &w), 2);
	assert_non_null(strstr(w.e[0].msg, "limit fixed 12 is above max_connections (10)"));
	assert_non_null(strstr(w.e[1].msg, "headroom L3 5 % of max_connections (10) is less than one"));
	/* no cap: no thresholds at all */
	expect_ok(f, parse(f, "interface: lo\nservices:\n  - name: db\n    port: 5432\n"));
	service_conn_cap(&f->cfg.services[0], thr);
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		assert_int_equal(thr[k], 0);
	expect_fail(f, parse(f, "interface: lo\nservices:\n"
				"  - name: web\n    port: 80\n    protocol: http\n"
				"    max_connections: 100\n"), 1);
	expect_error(&f->errs, 6, "max_connections");
	expect_error(&f->errs, 6, "needs protocol: tcp");
	expect_fail(f, parse(f, "interface: lo\nservices:\n"
				"  - name: db\n    port: 5432\n    max_connections: -1\n"), 1);
	expect_error(&f->errs, 5, "max_connections");
}

static void test_client_limit(void **state)
{
	struct fx *f = *state;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - name: s\n    port: 1\n"
			      "    client_limit: { max_in_flight: 4, rate: 50, burst: 10 }\n"));
	assert_int_equal(f->cfg.services[0].client_max_in_flight, 4);
	assert_int_equal(f->cfg.services[0].client_rate, 50);
	assert_int_equal(f->cfg.services[0].client_burst, 10);
	expect_fail(f, parse(f, "interface: lo\nservices:\n"
				"  - name: s\n    port: 1\n"
				"    client_limit: { per_ip: 4, rate: -1 }\n"), 2);
	expect_error(&f->errs, 5, "unknown key 'per_ip'");
	expect_error(&f->errs, 5, "rate");
}

static void test_many_services(void **state)
{
	struct fx *f = *state;
	size_t cap = 64 * (size_t)(SLUICE_MAX_SERVICES + 2), len = 0;
	char *t = malloc(cap);

	assert_non_null(t);
	/* 4096 services: every one parsed, names and ports checked for duplicates */
	len += (size_t)snprintf(t + len, cap - len, "interface: eth0\nservices:\n");
	for (int i = 0; i < 4096; i++)
		len += (size_t)snprintf(t + len, cap - len, "  - { name: s%d, port: %d }\n", i, 1000 + i);
	expect_ok(f, sluice_config_parse(t, len, "many", &f->cfg, &f->errs));
	assert_int_equal(f->cfg.n_services, 4096);
	assert_int_equal(sluice_config_service_index(&f->cfg, "s4095"), 4095);
	assert_int_equal(f->cfg.services[4095].port, 1000 + 4095);
	assert_int_equal(sluice_config_service_index(&f->cfg, "nope"), -1);
	sluice_config_free(&f->cfg);

	/* a duplicate far down the list is still found, with the first one's line */
	len += (size_t)snprintf(t + len, cap - len, "  - { name: s17, port: 1017 }\n");
	expect_fail(f, sluice_config_parse(t, len, "many", &f->cfg, &f->errs), 2);
	expect_error(&f->errs, 2 + 4096 + 1, "duplicate service name 's17' (first at line 20)");
	sluice_config_free(&f->cfg);

	/* beyond the built-in limit: refused at the first service too many, with the count */
	len = (size_t)snprintf(t, cap, "interface: eth0\nservices:\n");
	for (int i = 0; i <= SLUICE_MAX_SERVICES; i++)
		len += (size_t)snprintf(t + len, cap - len, "  - { name: s%d, port: %d }\n", i,
					1 + i % 65535);
	expect_fail(f, sluice_config_parse(t, len, "many", &f->cfg, &f->errs), 1);
	expect_error(&f->errs, 2 + SLUICE_MAX_SERVICES + 1,
		     "too many services: 65537, at most 65536 (sluice's built-in limit)");
	sluice_config_free(&f->cfg);
	free(t);
}

static void test_many_rules(void **state)
{
	struct fx *f = *state;
	char t[4096];
	size_t len = 0;

	len += (size_t)snprintf(t + len, sizeof(t) - len,
				"interface: eth0\nservices:\n  - name: web\n    port: 80\n    classify:\n");
	for (int i = 0; i < SLUICE_MAX_RULES; i++)
		len += (size_t)snprintf(t + len, sizeof(t) - len, "      - { dscp: %d, class: L1 }\n", i);
	expect_ok(f, sluice_config_parse(t, len, "rules", &f->cfg, &f->errs));
	assert_int_equal(f->cfg.services[0].n_rules, SLUICE_MAX_RULES);

	len += (size_t)snprintf(t + len, sizeof(t) - len, "      - { dscp: 40, class: L1 }\n");
	expect_fail(f, sluice_config_parse(t, len, "rules", &f->cfg, &f->errs), 1);
	expect_error(&f->errs, 5 + SLUICE_MAX_RULES + 1, "too many classify rules");
}

/* ---- refused configs: every class of mistake, at its line ---- */

static void test_bad_unknown_key(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_unknown_key.yaml"), 4);
	expect_error(&f->errs, 2, "unknown key 'colour' at top level");
	expect_error(&f->errs, 6, "unknown key 'foo' in service 'web'");
	expect_error(&f->errs, 7, "unknown key 'opne_s' in breaker of service 'web'");
	expect_error(&f->errs, 7, "did you mean 'open_s'");
	expect_error(&f->errs, 8, "unknown key 'maximum' in limit of service 'web'");
}

/* A long value quoted in a message is cut where a character starts, so the message stays
 * UTF-8: sluiced puts the first error of a refused reload into its JSON event, which cannot
 * carry half a character. 'a' and 30 two-byte characters: cut at 44 bytes, the 22nd
 * character would be split. */
static void test_long_value_cut_between_characters(void **state)
{
	struct fx *f = *state;
	char t[512], key[128] = "a", want[128] = "unknown key 'a";
	json_t *j;

	for (int i = 0; i < 30; i++)
		strcat(key, "\xc3\xa9");
	for (int i = 0; i < 21; i++)
		strcat(want, "\xc3\xa9");
	strcat(want, "...' at top level");
	snprintf(t, sizeof(t), "interface: eth0\n%s: 1\nservices:\n  - name: web\n    port: 80\n",
		 key);
	expect_fail(f, parse(f, t), 1);
	expect_error(&f->errs, 2, want);
	j = json_string(f->errs.e[0].msg);
	if (!j)
		fail_msg("message is not UTF-8: %s", f->errs.e[0].msg);
	json_decref(j);
}

static void test_bad_port(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_port.yaml"), 4);
	expect_error(&f->errs, 4, "bad port '0' in service 'a'");
	expect_error(&f->errs, 6, "bad port '65536'");
	expect_error(&f->errs, 8, "bad port 'http'");
	expect_error(&f->errs, 10, "bad port '80.5'");
	expect_error(&f->errs, 10, "1..65535");
}

/* port: ADDR:PORT. The data path matches the local address exactly: a service at 0.0.0.0 or
 * [::] (a listener's wildcard) would never take a packet, and is refused. */
static void test_port_address(void **state)
{
	struct fx *f = *state;
	static const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	static const uint8_t v4[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 };
	static const char *const bad[] = { "0.0.0.0:80", "[::]:80", "[::ffff:0.0.0.0]:80" };
	char doc[256];

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			   "  - { name: a, port: \"[2001:db8::1]:80\" }\n"
			   "  - { name: b, port: \"10.0.0.1:80\" }\n"
			   "  - { name: c, port: 80 }\n"));
	assert_true(f->cfg.services[0].has_addr);
	assert_memory_equal(f->cfg.services[0].addr, v6, 16);
	assert_memory_equal(f->cfg.services[1].addr, v4, 16);
	assert_false(f->cfg.services[2].has_addr);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(doc, sizeof(doc), "interface: lo\nservices:\n  - name: a\n"
			 "    port: \"%s\"\n", bad[i]);
		expect_fail(f, parse(f, doc), 1);
		expect_error(&f->errs, 4, "no local address");
	}
}

static void test_bad_prefix(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_prefix.yaml"), 6);
	expect_error(&f->errs, 6, "prefix length out of range");
	expect_error(&f->errs, 7, "host bits set");
	expect_error(&f->errs, 8, "not an IPv4 or IPv6 address");
	expect_error(&f->errs, 9, "prefix length out of range 0..128");
	expect_error(&f->errs, 10, "host bits set");
	expect_error(&f->errs, 11, "prefix length is not a number");
}

/* trust_from: IPv4 and IPv6 prefixes, stored as source prefixes are; a bad one is an error
 * at its line, like a bad source prefix. */
static void test_trust_from(void **state)
{
	struct fx *f = *state;
	const char *good =
		"interface: lo\n"
		"services:\n"
		"  - name: web\n"
		"    port: 80\n"
		"    trust_from: [10.1.0.0/16, \"2001:db8:7::/48\", 192.0.2.9]\n";
	const char *bad =
		"interface: lo\n"
		"services:\n"
		"  - name: web\n"
		"    port: 80\n"
		"    trust_from:\n"
		"      - 10.1.0.0/33\n"
		"      - 10.1.0.1/16\n"
		"      - not-an-address\n"
		"      - 2001:db8::/129\n"
		"      - { a: b }\n";

	expect_ok(f, parse(f, good));
	const struct service_conf *s = &f->cfg.services[0];
	assert_int_equal(s->n_trust, 3);
	assert_int_equal(s->trust[0].prefix_len, 96 + 16);
	assert_int_equal(s->trust[0].addr[10], 0xff);
	assert_int_equal(s->trust[0].addr[12], 10);
	assert_int_equal(s->trust[1].prefix_len, 48);
	assert_int_equal(s->trust[1].addr[5], 0x07);
	assert_int_equal(s->trust[2].prefix_len, 128);
	expect_fail(f, parse(f, bad), 5);
	expect_error(&f->errs, 6, "prefix length out of range 0..32");
	expect_error(&f->errs, 7, "host bits set");
	expect_error(&f->errs, 8, "not an IPv4 or IPv6 address");
	expect_error(&f->errs, 9, "prefix length out of range 0..128");
	expect_error(&f->errs, 10, "trust_from");
}

/* A prefix has one family: ::ffff:a.b.c.d/LEN is the IPv4 prefix it spells; ::/0 and ::/64
 * are IPv6 prefixes that span the v4-mapped range (so it gets an entry of its own), which
 * 2001:db8::/32 and the IPv4 0.0.0.0/0 do not. */
static void test_prefix_families(void **state)
{
	struct fx *f = *state;
	const char *good =
		"interface: lo\n"
		"services:\n"
		"  - name: web\n"
		"    port: 80\n"
		"    trust_from: [\"::ffff:10.0.0.0/104\", \"::/0\", \"::/64\", \"2001:db8::/32\",\n"
		"                 0.0.0.0/0, \"::fffe:0:0/95\"]\n";

	expect_ok(f, parse(f, good));
	const struct service_conf *s = &f->cfg.services[0];
	assert_int_equal(s->n_trust, 6);
	assert_true(s->trust[0].is_v4);
	assert_int_equal(s->trust[0].prefix_len, 96 + 8);
	assert_false(prefix_spans_v4(&s->trust[0]));
	assert_false(s->trust[1].is_v4);
	assert_true(prefix_spans_v4(&s->trust[1]));
	assert_true(prefix_spans_v4(&s->trust[2]));
	assert_false(prefix_spans_v4(&s->trust[3]));
	assert_true(s->trust[4].is_v4);
	assert_false(prefix_spans_v4(&s->trust[4]));
	assert_false(s->trust[5].is_v4);
	assert_true(prefix_spans_v4(&s->trust[5]));
}

/* A YAML tag is refused wherever it stands, at its line and column, with the file's other
 * errors: no key reads one, so "port: !!str 80" would be the number 80 and "!!binary" its
 * base64 text. Untagged, the same file loads. */
static void test_yaml_tags_refused(void **state)
{
	struct fx *f = *state;
	static const char *const tagged[] = {
		"interface: lo\nservices:\n  - name: web\n    port: !!str 80\n",
		"interface: lo\nservices:\n  - name: web\n    port: !!int 80\n",
		"interface: lo\nservices:\n  - name: web\n    port: !foo 80\n",
		"interface: lo\nservices:\n  - name: web\n    port: ! 80\n",
		"interface: lo\nservices:\n  - name: web\n    !!str port: 80\n",
		"interface: lo\nservices: !!seq\n  - name: web\n    port: 80\n",
		"interface: lo\nservices:\n  - !!map { name: web, port: 80 }\n",
		"interface: lo\nservices:\n  - name: web\n    port: 80\n    limit: !!map { fixed: 4 }\n",
		"interface: lo\nservices:\n  - name: web\n    port: 80\n"
		"    trust_from: [!!binary AAAA]\n",
	};
	static const int line[] = { 4, 4, 4, 4, 4, 2, 3, 5, 5 };
	static const int column[] = { 11, 11, 11, 11, 5, 11, 5, 12, 18 };
	static const char *const shown[] = { "'!!str'", "'!!int'", "'!foo'", "'!'", "'!!str'",
					     "'!!seq'", "'!!map'", "'!!map'", "'!!binary'" };

	for (size_t i = 0; i < sizeof(tagged) / sizeof(tagged[0]); i++) {
		expect_fail(f, parse(f, tagged[i]), -1);
		assert_true(f->errs.n >= 1);
		if (!strstr(f->errs.e[0].msg, "YAML tag") || !strstr(f->errs.e[0].msg, shown[i]) ||
		    f->errs.e[0].line != line[i] || f->errs.e[0].column != column[i]) {
			dump_errors(&f->errs);
			fail_msg("case %zu: wanted the tag %s at %d:%d", i, shown[i], line[i],
				 column[i]);
		}
	}
	/* The file's other errors come with it. */
	expect_fail(f, parse(f, "interface: lo\nservices:\n  - name: web\n    port: !!str 80\n"
				"    limit: { fixed: 0 }\n"), 2);
	expect_error(&f->errs, 4, "YAML tag");
	expect_error(&f->errs, 5, "limit");
	expect_ok(f, parse(f, "interface: lo\nservices:\n  - name: web\n    port: 80\n"));
}

static void test_bad_headroom(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_headroom.yaml"), 3);
	expect_error(&f->errs, 7, "bad L1 '150' in headroom of service 'web'");
	expect_error(&f->errs, 8, "0..100");
	expect_error(&f->errs, 9, "unknown key 'L5'");
}

/* state_dir and pin_dir are absolute: sluiced publishes them as written and sluicectl reads
 * them from its own working directory, so a relative one named two different places (switch
 * ls read a file that was not there and said all traffic was normal). */
static void test_relative_dirs(void **state)
{
	struct fx *f = *state;

	expect_fail(f, parse(f, "interface: lo\nstate_dir: var/sluice\npin_dir: ./pins\n"
				"services:\n  - name: web\n    port: 80\n"), 2);
	expect_error(&f->errs, 2, "bad state_dir 'var/sluice': must be an absolute path");
	expect_error(&f->errs, 3, "bad pin_dir './pins': must be an absolute path");
	expect_fail(f, parse(f, "interface: lo\npin_dir: /sys/fs/bpf/\n"
				"services:\n  - name: web\n    port: 80\n"), 1);
	expect_error(&f->errs, 2, "bad pin_dir '/sys/fs/bpf/': is the BPF file system's root");
	expect_ok(f, parse(f, "interface: lo\nstate_dir: /var/sluice\npin_dir: /sys/fs/bpf/s\n"
			      "services:\n  - name: web\n    port: 80\n"));
	assert_string_equal(f->cfg.state_dir, "/var/sluice");
	assert_string_equal(f->cfg.pin_dir, "/sys/fs/bpf/s");
	sluice_config_free(&f->cfg);
}

/* `headroom: {}` names no class: it is refused rather than read as every default percentage
 * capping its class, the opposite of leaving the key out (no class capped). */
static void test_empty_headroom(void **state)
{
	struct fx *f = *state;

	expect_fail(f, parse(f, "interface: lo\nservices:\n  - name: web\n    port: 80\n"
				"    headroom: {}\n"), 1);
	expect_error(&f->errs, 5, "bad headroom in service 'web': give at least one of L0, L1, "
		     "L2, L3");
	assert_int_equal(f->errs.e[0].column, 15);
	expect_ok(f, parse(f, "interface: lo\nservices:\n  - name: web\n    port: 80\n"
			      "    headroom: { L3: 20 }\n"));
	assert_int_equal(f->cfg.services[0].headroom_written, 1u << 3);
	sluice_config_free(&f->cfg);
}

static void test_bad_class(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_class.yaml"), 6);
	expect_error(&f->errs, 6, "bad default_class 'L4'");
	expect_error(&f->errs, 8, "from-header is only valid for header rules");
	expect_error(&f->errs, 9, "bad class 'l1'");
	expect_error(&f->errs, 10, "header rules take class: from-header");
	expect_error(&f->errs, 11, "missing 'class'");
	expect_error(&f->errs, 12, "needs one of source, dscp, header, path_prefix");
}

static void test_bad_duplicate(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_duplicate.yaml"), 2);
	expect_error(&f->errs, 6, "duplicate port 8080");
	expect_error(&f->errs, 7, "duplicate service name 'web' (first at line 3)");
}

static void test_bad_duplicate_key(void **state)
{
	struct fx *f = *state;

	expect_fail(f, parse(f, "interface: eth0\nservices:\n  - name: a\n    port: 1\n"
				"    port: 2\ninterface: eth1\n"), 2);
	expect_error(&f->errs, 5, "duplicate key 'port' in service 'a'");
	expect_error(&f->errs, 6, "duplicate key 'interface'");
}

/* A key with a NUL inside ("name\0x", written with an escape) is refused: read as a C
 * string it would pass for the key before its NUL ("name", "interface"). */
static void test_bad_key_with_nul(void **state)
{
	struct fx *f = *state;

	expect_fail(f, parse(f, "interface: eth0\nservices:\n  - \"name\\0x\": a\n    name: b\n"
				"    port: 1\n"), 1);
	expect_error(&f->errs, 3, "keys must be plain words in service 'b': 'name?x' contains a NUL");
	expect_fail(f, parse(f, "\"interface\\0\": eth0\nservices: [{name: a, port: 1}]\n"), -1);
	expect_error(&f->errs, 1, "contains a NUL character");
	expect_error(&f->errs, 0, "missing required key 'interface'");
}

static void test_bad_limit(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_limit.yaml"), 4);
	expect_error(&f->errs, 5, "min 100 is greater than max 10");
	expect_error(&f->errs, 8, "bad min '0' in limit of service 'b'");
	expect_error(&f->errs, 11, "'fixed' cannot be combined");
	expect_error(&f->errs, 14, "bad fixed '0'");
}

static void test_bad_rates(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_rates.yaml"), 4);
	expect_error(&f->errs, 2, "bad ratio '1.2' in retry_storm");
	expect_error(&f->errs, 7, "bad error_rate '1.5'");
	expect_error(&f->errs, 8, "bad slow_call_rate '-0.1'");
	expect_error(&f->errs, 9, "bad half_open_success '2'");
	expect_error(&f->errs, 9, "0..1");
}

/* A value the parser accepts is the value the controller runs with: no silent clamp to the
 * controller's rings, no written 0 read as "unset". */
static void test_accepted_is_applied(void **state)
{
	struct fx *f = *state;
	struct sluice_cascade_params cp;
	struct sluice_breaker_params bp;
	struct sluice_retrystorm_params rp;

	expect_ok(f, parse(f, "interface: eth0\n"
			      "cascade: { max_opens: 63 }\n"
			      "retry_storm: { ratio: 0.01 }\n"
			      "services:\n"
			      "  - name: web\n"
			      "    port: 8080\n"
			      "    breaker: { window_s: 64, error_rate: 0.01, slow_call_rate: 0.01,\n"
			      "               half_open_success: 0.01 }\n"));
	sluice_cascade_params_from_conf(&f->cfg.cascade, &cp);
	assert_int_equal(cp.max_opens, 63);
	sluice_breaker_params_from_conf(&f->cfg.services[0].breaker, &bp);
	assert_int_equal(bp.window_s, 64);
	assert_true(bp.error_rate == 0.01);
	assert_true(bp.slow_rate == 0.01);
	assert_true(bp.success == 0.01);
	sluice_retrystorm_params_from_conf(&f->cfg.retry_storm, &rp);
	assert_true(rp.ratio == 0.01);
	sluice_config_free(&f->cfg);

	expect_fail(f, parse(f, "interface: eth0\n"
				"cascade: { max_opens: 64 }\n"
				"retry_storm: { ratio: 0 }\n"
				"services:\n"
				"  - name: web\n"
				"    port: 8080\n"
				"    breaker: { window_s: 65, error_rate: 0, slow_call_rate: 0,\n"
				"               half_open_success: 0 }\n"), 6);
	expect_error(&f->errs, 2, "max_opens");
	expect_error(&f->errs, 3, "above 0");
	expect_error(&f->errs, 7, "window_s");
	expect_error(&f->errs, 7, "error_rate");
	expect_error(&f->errs, 7, "slow_call_rate");
	expect_error(&f->errs, 8, "half_open_success");
}

static void test_bad_steps(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_steps.yaml"), 4);
	expect_error(&f->errs, 5, "strictly increasing");
	expect_error(&f->errs, 9, "the last step must be 100");
	expect_error(&f->errs, 12, "bad recovery_steps '20' in service 'c'");
	expect_error(&f->errs, 15, "at least one step");
}

static void test_bad_dscp(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_dscp.yaml"), 2);
	expect_error(&f->errs, 6, "bad dscp '64'");
	expect_error(&f->errs, 7, "bad dscp '-1'");
	expect_error(&f->errs, 7, "0..63");
}

static void test_bad_path(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_path.yaml"), 2);
	expect_error(&f->errs, 7, "must start with '/'");
	expect_error(&f->errs, 8, "too long");
}

static void test_bad_header(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_header.yaml"), 2);
	expect_error(&f->errs, 7, "bad header name");
	expect_error(&f->errs, 7, "too long");
	expect_error(&f->errs, 12, "header rules need protocol: http");
}

/* The longest header name and path prefix the data path holds, and one byte more: the
 * limits docs/CONFIG.md gives for classify rules. */
static void test_rule_name_lengths(void **state)
{
	struct fx *f = *state;

	expect_ok(f, parse(f, "interface: lo\nservices:\n"
			      "  - { name: s, port: 1, protocol: http, classify: [\n"
			      "      { header: X-Priority-Of-The-Caller-Abcdef, class: from-header },\n"
			      "      { path_prefix: /abcdefghijklmnopqrstuv, class: L3 } ] }\n"));
	assert_int_equal(strlen(f->cfg.services[0].rules[0].header), 31);
	assert_int_equal(strlen(f->cfg.services[0].rules[1].path), 23);
	expect_fail(f, parse(f, "interface: lo\nservices:\n"
				"  - { name: s, port: 1, protocol: http, classify: [\n"
				"      { header: X-Priority-Of-The-Caller-Abcdefg, class: from-header },\n"
				"      { path_prefix: /abcdefghijklmnopqrstuvw, class: L3 } ] }\n"), 2);
	expect_error(&f->errs, 4, "at most 31");
	expect_error(&f->errs, 5, "at most 23");
}

static void test_bad_interface(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_interface_missing.yaml"), 1);
	expect_error(&f->errs, 0, "missing required key 'interface'");
	expect_fail(f, load(f, "bad_interface_long.yaml"), 1);
	expect_error(&f->errs, 4, "bad interface 'averyveryverylongifname': too long");
	expect_fail(f, parse(f, "interface: a/b\nservices: [{name: x, port: 1}]\n"), 1);
	expect_error(&f->errs, 1, "not a valid interface name");
}

static void test_bad_number(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_number.yaml"), 5);
	expect_error(&f->errs, 2, "bad control_interval_ms '12x'");
	expect_error(&f->errs, 3, "bad heartbeat_timeout_ms '1e3'");
	expect_error(&f->errs, 7, "bad retry_after_s '1s'");
	expect_error(&f->errs, 8, "bad target_latency_ms 'fast'");
	expect_error(&f->errs, 9, "bad open_s '5x'");
}

static void test_bad_type(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_type.yaml"), 5);
	expect_error(&f->errs, 5, "bad limit in service 'web': expected a mapping, got a list");
	expect_error(&f->errs, 6, "expected a mapping, got a scalar");
	expect_error(&f->errs, 8, "bad breaker in service 'web': expected a mapping, got a list");
	expect_error(&f->errs, 9, "bad classify in service 'web': expected a list, got a mapping");
	expect_error(&f->errs, 10, "bad service #2: expected a mapping");
}

static void test_bad_misc(void **state)
{
	struct fx *f = *state;

	expect_fail(f, parse(f, "interface: eth0\nmetrics_address: localhost\n"
				"services: [{name: x, port: 1}]\n"), 1);
	expect_error(&f->errs, 2, "bad metrics_address 'localhost'");
	expect_fail(f, parse(f, "interface: eth0\ncontrol_interval_ms: 500\n"
				"heartbeat_timeout_ms: 400\nservices: [{name: x, port: 1}]\n"), 1);
	expect_error(&f->errs, 3, "must be greater than control_interval_ms");
	expect_fail(f, parse(f, "interface: eth0\nservices:\n  - name: \"bad name\"\n    port: 1\n"), 1);
	expect_error(&f->errs, 3, "bad name 'bad name'");
	expect_fail(f, parse(f, "interface: eth0\nservices:\n  - port: 1\n"), 1);
	expect_error(&f->errs, 3, "missing required key 'name'");
	expect_fail(f, parse(f, "interface: eth0\nservices:\n  - name: x\n"), 1);
	expect_error(&f->errs, 3, "missing required key 'port' in service 'x'");
	expect_fail(f, parse(f, "- a\n- b\n"), 1);
	expect_error(&f->errs, 1, "expected a mapping of settings at top level");
	expect_fail(f, parse(f, "interface: eth0\nservices: [{name: x, port: 1}]\n---\nfoo: 1\n"), 1);
	expect_error(&f->errs, 4, "more than one YAML document");
}

/* metrics_address as sluiced's listener takes it: what --check passes must not fail at start
 * for its syntax (a stray bracket, a port of six digits). */
static void test_metrics_address(void **state)
{
	struct fx *f = *state;
	static const char *const good[] = { "[::1]:9477", "[fe80::1%eth0]:9477", "[]:9477",
					    ":9477", "[127.0.0.1]:0", "localhost:09477" };
	static const char *const bad[] = { "[::1]]:9477", "[[::1]:9477", "[::1]:009477",
					   "[ ::1]:9477", "a]:9477", "[fe80::1%]:9477",
					   "[::1]x:9477", "::1:9477", "[host]:9477" };
	char doc[256];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(doc, sizeof(doc), "interface: eth0\nmetrics_address: \"%s\"\n"
			 "services: [{name: x, port: 1}]\n", good[i]);
		expect_ok(f, parse(f, doc));
		assert_string_equal(f->cfg.metrics_address, good[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		snprintf(doc, sizeof(doc), "interface: eth0\nmetrics_address: \"%s\"\n"
			 "services: [{name: x, port: 1}]\n", bad[i]);
		snprintf(want, sizeof(want), "bad metrics_address '%s'", bad[i]);
		expect_fail(f, parse(f, doc), 1);
		expect_error(&f->errs, 2, want);
	}
}

static void test_multiple_errors(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_multi.yaml"), 5);
	expect_error(&f->errs, 2, "bad xdp_mode 'fast': expected auto, native or generic");
	expect_error(&f->errs, 5, "bad port '99999'");
	expect_error(&f->errs, 6, "bad protocol 'udp' in service 'web': expected tcp or http");
	expect_error(&f->errs, 7, "bad reject 'reset'");
	expect_error(&f->errs, 8, "bad L1 '101'");
	/* in the order written */
	for (int i = 1; i < f->errs.n; i++)
		assert_true(f->errs.e[i].line >= f->errs.e[i - 1].line);
}

static void test_too_many_errors(void **state)
{
	struct fx *f = *state;
	char t[4096];
	size_t len = 0;

	len += (size_t)snprintf(t + len, sizeof(t) - len, "interface: eth0\n");
	for (int i = 0; i < 40; i++)
		len += (size_t)snprintf(t + len, sizeof(t) - len, "junk%d: 1\n", i);
	len += (size_t)snprintf(t + len, sizeof(t) - len, "services: [{name: x, port: 1}]\n");
	expect_fail(f, sluice_config_parse(t, len, "junk", &f->cfg, &f->errs), DOC_MAX_ERRORS);
	expect_error(&f->errs, 2, "unknown key 'junk0'");
	assert_int_equal(f->errs.e[DOC_MAX_ERRORS - 1].line, 0);
	assert_non_null(strstr(f->errs.e[DOC_MAX_ERRORS - 1].msg, "too many errors: 40 found"));
}

/* A mapping of very many keys (a file of DOC_MAX_BYTES holds some 500000) is checked for
 * repeated keys in n log n: comparing each key with all those before it took minutes of CPU,
 * in --check or in sluiced's reload, between two ticks. Here the check takes 0.12 s of CPU
 * and the pairwise one took 49 s: the bound lies between, far from both. */
static void test_many_keys_in_one_mapping(void **state)
{
	enum { N = 100000 };
	struct fx *f = *state;
	size_t cap = (size_t)N * 24 + 256, len = 0;
	char *t = malloc(cap);
	clock_t cpu;

	assert_non_null(t);
	len += (size_t)snprintf(t + len, cap - len, "interface: eth0\nservices:\n"
				"  - name: a\n    port: 1\n    headroom:\n");
	for (int i = 0; i < N; i++)
		len += (size_t)snprintf(t + len, cap - len, "      x%d: 1\n", i);
	len += (size_t)snprintf(t + len, cap - len, "      x7: 1\n");
	cpu = clock();
	expect_fail(f, sluice_config_parse(t, len, "keys", &f->cfg, &f->errs), DOC_MAX_ERRORS);
	cpu = clock() - cpu;
	free(t);
	/* every key unknown, and the last one a repeat of x7 */
	assert_int_equal(f->errs.total, N + 1);
	expect_error(&f->errs, 6, "unknown key 'x0' in headroom of service 'a'");
	sluice_config_free(&f->cfg);
	assert_true(cpu < 5 * CLOCKS_PER_SEC);
}

/* Lists and mappings nested deeper than DOC_MAX_DEPTH are refused before the file is loaded:
 * libyaml's scanner costs the square of the depth, and loading 100000 levels (200 KB) took
 * some 30 s of CPU, in --check or in sluiced's reload, between two ticks. Refused, they take
 * milliseconds. */
static void test_deep_nesting(void **state)
{
	enum { DEEP = 100000 };
	static const char head[] = "interface: eth0\nservices: [{name: a, port: 1}]\nx: ";
	struct fx *f = *state;
	size_t cap = sizeof(head) + 2 * DEEP + 2, len;
	char *t = malloc(cap);
	clock_t cpu;

	assert_non_null(t);
	/* the top-level mapping is one level: x's lists make the rest */
	for (int n = DOC_MAX_DEPTH - 1; n <= DOC_MAX_DEPTH; n++) {
		len = (size_t)snprintf(t, cap, "%s", head);
		memset(t + len, '[', (size_t)n);
		memset(t + len + n, ']', (size_t)n);
		len += 2 * (size_t)n;
		t[len++] = '\n';
		expect_fail(f, sluice_config_parse(t, len, "deep", &f->cfg, &f->errs), 1);
		sluice_config_free(&f->cfg);
		expect_error(&f->errs, 3, n < DOC_MAX_DEPTH ? "unknown key 'x'"
			     : "lists and mappings nested more than 64 deep");
	}

	len = (size_t)snprintf(t, cap, "%s", head);
	memset(t + len, '[', DEEP);
	memset(t + len + DEEP, ']', DEEP);
	len += 2 * DEEP;
	cpu = clock();
	expect_fail(f, sluice_config_parse(t, len, "deep", &f->cfg, &f->errs), 1);
	cpu = clock() - cpu;
	free(t);
	expect_error(&f->errs, 3, "nested more than 64 deep");
	assert_true(cpu < 2 * CLOCKS_PER_SEC);
}

/* More than DOC_MAX_ANCHORS anchors are refused before the file is loaded: libyaml's loader
 * compares each anchor with all before it, and 100000 of them (1 MB) took some 13 s of CPU.
 * Refused, they take milliseconds; aliases are not counted. */
static void test_many_anchors(void **state)
{
	enum { MANY = 100000 };
	static const char head[] = "interface: eth0\nservices: [{name: a, port: 1}]\nx: [";
	struct fx *f = *state;
	size_t cap = sizeof(head) + (size_t)MANY * 16 + 64, len;
	char *t = malloc(cap);
	clock_t cpu;

	assert_non_null(t);
	for (int n = DOC_MAX_ANCHORS; n <= DOC_MAX_ANCHORS + 1; n++) {
		len = (size_t)snprintf(t, cap, "%s", head);
		for (int i = 0; i < n; i++)
			len += (size_t)snprintf(t + len, cap - len, "&a%d 1, *a%d, ", i, i);
		len += (size_t)snprintf(t + len, cap - len, "]\n");
		expect_fail(f, sluice_config_parse(t, len, "anchors", &f->cfg, &f->errs), 1);
		sluice_config_free(&f->cfg);
		expect_error(&f->errs, 3, n == DOC_MAX_ANCHORS ? "unknown key 'x'"
			     : "more than 1024 anchors (&name)");
	}

	len = (size_t)snprintf(t, cap, "%s", head);
	for (int i = 0; i < MANY; i++)
		len += (size_t)snprintf(t + len, cap - len, "&a%d 1,", i);
	len += (size_t)snprintf(t + len, cap - len, "]\n");
	cpu = clock();
	expect_fail(f, sluice_config_parse(t, len, "anchors", &f->cfg, &f->errs), 1);
	cpu = clock() - cpu;
	free(t);
	expect_error(&f->errs, 3, "more than 1024 anchors");
	assert_true(cpu < 2 * CLOCKS_PER_SEC);
}

/* More than DOC_MAX_DIRECTIVES lines starting with '%' are refused before the file is read as
 * YAML: libyaml compares each %TAG directive with all before it, and 60000 (1.6 MB) took
 * some 15 s of CPU. Refused, they take milliseconds. */
static void test_many_directives(void **state)
{
	enum { MANY = 60000 };
	static const char doc[] = "---\ninterface: eth0\nservices: [{name: a, port: 1}]\n";
	struct fx *f = *state;
	size_t cap = sizeof(doc) + (size_t)MANY * 32, len;
	char *t = malloc(cap);
	clock_t cpu;

	assert_non_null(t);
	for (int n = DOC_MAX_DIRECTIVES; n <= DOC_MAX_DIRECTIVES + 1; n++) {
		len = 0;
		for (int i = 0; i < n; i++)
			len += (size_t)snprintf(t + len, cap - len, "%%TAG !t%d! tag:x,%d:\n", i, i);
		len += (size_t)snprintf(t + len, cap - len, "%s", doc);
		if (n == DOC_MAX_DIRECTIVES) {
			expect_ok(f, sluice_config_parse(t, len, "tags", &f->cfg, &f->errs));
		} else {
			expect_fail(f, sluice_config_parse(t, len, "tags", &f->cfg, &f->errs), 1);
			expect_error(&f->errs, n, "more than 16 directives");
		}
		sluice_config_free(&f->cfg);
	}

	len = 0;
	for (int i = 0; i < MANY; i++)
		len += (size_t)snprintf(t + len, cap - len, "%%TAG !t%d! tag:x,%d:\n", i, i);
	len += (size_t)snprintf(t + len, cap - len, "%s", doc);
	cpu = clock();
	expect_fail(f, sluice_config_parse(t, len, "tags", &f->cfg, &f->errs), 1);
	cpu = clock() - cpu;
	free(t);
	expect_error(&f->errs, DOC_MAX_DIRECTIVES + 1, "more than 16 directives");
	assert_true(cpu < 2 * CLOCKS_PER_SEC);
}

/* A value cut short in a message is cut between two characters: sluiced puts the message in
 * a JSON event (a refused reload's 'kept'), and a string that is not UTF-8 is no JSON string. */
static void test_cut_value_stays_utf8(void **state)
{
	static const char *const docs[] = {
		"interface: eth0\nservices: [{name: a, port: 1, reject: %s}]\n",
		"interface: eth0\nservices: [{name: a, port: 1, headroom: {%s: 1}}]\n",
		"interface: eth0\n%s: 1\nservices: [{name: a, port: 1}]\n",
	};
	struct fx *f = *state;
	char doc[512], v[128];
	size_t n = 0;

	v[n++] = 'x';                    /* then 2-byte characters: every cut point is inside one */
	while (n < 100) {
		v[n++] = (char)0xc3;
		v[n++] = (char)0xa9;
	}
	v[n] = '\0';
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		json_t *j;

		snprintf(doc, sizeof(doc), docs[i], v);
		expect_fail(f, parse(f, doc), 1);
		assert_non_null(strstr(f->errs.e[0].msg, "x\xc3\xa9"));
		assert_non_null(strstr(f->errs.e[0].msg, "..."));
		j = json_string(f->errs.e[0].msg);
		if (!j)
			fail_msg("not UTF-8: %s", f->errs.e[0].msg);
		json_decref(j);
	}
}

static void test_syntax_error(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_syntax.yaml"), 1);
	expect_error(&f->errs, 5, "YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence started at line 4)");
	expect_fail(f, parse(f, "interface: eth0\n\tservices: 1\n"), 1);
	expect_error(&f->errs, 2, "YAML syntax error");
}

static void test_missing_file(void **state)
{
	struct fx *f = *state;
	char want[160];

	expect_fail(f, load(f, "does_not_exist.yaml"), 1);
	assert_int_equal(f->errs.e[0].line, 0);
	snprintf(want, sizeof(want), "%s", strerror(ENOENT));
	assert_non_null(strstr(f->errs.e[0].msg, want));
	assert_non_null(strstr(f->errs.file, "does_not_exist.yaml"));
}

/* A file of DOC_MAX_BYTES is read; one byte more is "too large" (the reader refused files
 * from DOC_MAX_BYTES - 1 bytes on, saying they had more than DOC_MAX_BYTES). */
static void test_file_size_limit(void **state)
{
	static const char cfg[] = "interface: eth0\nservices: [{name: a, port: 1}]\n#";
	struct fx *f = *state;
	char path[] = "/tmp/sluice-config-XXXXXX";
	int fd = mkstemp(path);
	FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;

	assert_non_null(out);
	fputs(cfg, out);
	for (size_t i = strlen(cfg); i < DOC_MAX_BYTES - 1; i++)
		fputc('x', out);
	fputc('\n', out);
	assert_int_equal(fclose(out), 0);
	expect_ok(f, sluice_config_load(path, &f->cfg, &f->errs));
	sluice_config_free(&f->cfg);

	out = fopen(path, "a");
	assert_non_null(out);
	fputc('\n', out);
	assert_int_equal(fclose(out), 0);
	expect_fail(f, sluice_config_load(path, &f->cfg, &f->errs), 1);
	expect_error(&f->errs, 0, "file too large (more than 4194304 bytes)");
	unlink(path);
}

static void test_empty_file(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "empty.yaml"), 1);
	expect_error(&f->errs, 0, "no services");
	expect_fail(f, load(f, "comments_only.yaml"), 1);
	expect_error(&f->errs, 0, "no services");
	expect_fail(f, load(f, "bad_no_services.yaml"), 1);
	expect_error(&f->errs, 2, "no services");
	expect_fail(f, parse(f, "interface: eth0\nservices:\n"), 1);
	expect_error(&f->errs, 2, "no services");
}

static void test_print_errors(void **state)
{
	struct fx *f = *state;
	char *buf;

	expect_fail(f, parse(f, "interface: eth0\nfoo: 1\nservices: []\n"), 2);
	buf = errors_text(&f->errs);
	/* file:line:column, the column of the key or value at fault */
	assert_non_null(strstr(buf, "inline.yaml:2:1: unknown key 'foo' at top level\n"));
	assert_non_null(strstr(buf, "inline.yaml:3:11: no services\n"));
	free(buf);

	expect_fail(f, load(f, "empty.yaml"), 1);
	buf = errors_text(&f->errs);
	assert_non_null(strstr(buf, "empty.yaml: no services"));
	assert_null(strstr(buf, "empty.yaml:0"));
	free(buf);
}

static void test_class_names(void **state)
{
	(void)state;
	assert_int_equal(sluice_class_from_name("L0"), 0);
	assert_int_equal(sluice_class_from_name("L3"), 3);
	assert_int_equal(sluice_class_from_name("L4"), -1);
	assert_int_equal(sluice_class_from_name("from-header"), -1);
	assert_int_equal(sluice_class_from_name(NULL), -1);
	assert_string_equal(sluice_class_name(2), "L2");
	assert_string_equal(sluice_class_name(SLUICE_CLASS_FROM_HEADER), "from-header");
	assert_string_equal(sluice_xdp_mode_name(XDP_MODE_GENERIC), "generic");
}

static void test_ok_after_bad_resets_errors(void **state)
{
	struct fx *f = *state;

	expect_fail(f, load(f, "bad_multi.yaml"), 5);
	expect_ok(f, load(f, "good.yaml"));
	assert_int_equal(f->errs.n, 0);
}

/* A reload hands each service's learned state to the service of the same name. With one
 * service removed at the top of a long list every later one moves up, and matching them by
 * searching the running list held the control loop past the data path's heartbeat (1 s by
 * default: the data path then admits everything) from about 16,000 services on, and for tens
 * of seconds at 65,536. The match must stay far within a heartbeat. */
static void test_match_services_by_name(void **st)
{
	enum { N = 20000 };
	struct sluice_config from = { 0 }, to = { 0 };
	struct timespec t0, t1;
	int *was = malloc(sizeof(*was) * N);
	double s;

	(void)st;
	from.services = calloc(N, sizeof(*from.services));
	to.services = calloc(N, sizeof(*to.services));
	assert_non_null(was);
	assert_non_null(from.services);
	assert_non_null(to.services);
	from.n_services = to.n_services = N;
	for (int i = 0; i < N; i++)
		snprintf(from.services[i].name, SLUICE_NAME_LEN, "svc-%d", i);
	/* svc-0 removed, a new one at the end, svc-5 and svc-6 swapped */
	for (int i = 0; i < N - 1; i++)
		snprintf(to.services[i].name, SLUICE_NAME_LEN, "svc-%d", i + 1);
	snprintf(to.services[N - 1].name, SLUICE_NAME_LEN, "new");
	snprintf(to.services[4].name, SLUICE_NAME_LEN, "svc-6");
	snprintf(to.services[5].name, SLUICE_NAME_LEN, "svc-5");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(sluice_config_match_services(&from, &to, was), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	for (int i = 0; i < N - 1; i++)
		if (i != 4 && i != 5)
			assert_int_equal(was[i], i + 1);
	assert_int_equal(was[4], 6);
	assert_int_equal(was[5], 5);
	assert_int_equal(was[N - 1], -1);
	if (s > 0.25)
		fail_msg("matching %d services took %.3f s", N, s);

	/* none running: every service is new */
	from.n_services = 0;
	assert_int_equal(sluice_config_match_services(&from, &to, was), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(was[i], -1);
	free(from.services);
	free(to.services);
	free(was);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_documented_example, setup, teardown),
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_max_renewals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_headroom_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connection_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_gate_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_connections, setup, teardown),
		cmocka_unit_test_setup_teardown(test_defaults_function, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_style, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flow_style, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flow_style_errors_have_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v6_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fixed_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limit_only_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_target_latency_number, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_services, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_unknown_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_value_cut_between_characters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_port, setup, teardown),
		cmocka_unit_test_setup_teardown(test_port_address, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_headroom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_relative_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_headroom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_class, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_duplicate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_duplicate_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_key_with_nul, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_rates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_accepted_is_applied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_dscp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trust_from, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prefix_families, setup, teardown),
		cmocka_unit_test_setup_teardown(test_yaml_tags_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rule_name_lengths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_interface, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_number, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_type, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_misc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metrics_address, setup, teardown),
		cmocka_unit_test_setup_teardown(test_multiple_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_many_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_keys_in_one_mapping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_value_stays_utf8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deep_nesting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_anchors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_directives, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syntax_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_size_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_print_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_class_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ok_after_bad_resets_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_latency_slo_not_a_number, setup, teardown),
		cmocka_unit_test_setup_teardown(test_warning_not_truncated, setup, teardown),
		cmocka_unit_test(test_match_services_by_name),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
