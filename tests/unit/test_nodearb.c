// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Node-wide arbitration (user/control/nodearb.c) over a fake clock, the pressure file's
 * parser, and the daemon's start with the file missing (user/daemon/node.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "control/nodearb.h"
#include "common/config_warn.h"
#include "daemon/daemon.h"

#define S 1000000000ull
#define ONE SLUICE_PROB_ONE

static const struct sluice_node_params P = { .threshold_pct = 40, .step_ns = 2 * S,
					     .recover_ns = 3 * S };

static int obs(struct sluice_node_arb *a, uint64_t t, double pct, uint64_t arrivals)
{
	struct sluice_node_obs o = { .valid = 1, .pressure_pct = pct, .arrivals = arrivals };

	return sluice_node_tick(a, &P, &o, t, NULL);
}

/* What must hold at every step: L0 and L1 never shed by the node; L2 shed only when no
 * service's L3 is admitted at all. */
static void invariant(const struct sluice_node_arb *a)
{
	assert_int_equal(a->admit[0], ONE);
	assert_int_equal(a->admit[1], ONE);
	if (a->admit[2] < ONE)
		assert_int_equal(a->admit[3], 0);
}

static void test_l3_of_all_before_l2_stepwise(void **st)
{
	struct sluice_node_arb a;
	static const uint32_t l3[] = { ONE / 2, ONE / 4, ONE / 8, 0 };
	uint64_t t = 10 * S;
	(void)st;
	sluice_node_init(&a);
	assert_int_equal(obs(&a, t, 30, 100), 0);          /* calm: nothing */
	assert_false(sluice_node_shedding(&a));
	for (int k = 0; k < 4; k++) {
		t += S;
		assert_int_equal(obs(&a, t, 95, 100), 1);   /* a cut ... */
		assert_int_equal(a.admit[3], l3[k]);
		assert_int_equal(a.admit[2], ONE);
		invariant(&a);
		t += S;                                     /* ... and none within step_s */
		assert_int_equal(obs(&a, t, 95, 100), 0);
		assert_int_equal(a.admit[3], l3[k]);
	}
	t += S;
	assert_int_equal(obs(&a, t, 95, 100), 1);           /* L3 is off: now L2 */
	assert_int_equal(a.admit[2], ONE / 2);
	invariant(&a);
	for (int k = 0; k < 10; k++) {                      /* down to nothing, never L1 */
		t += 2 * S;
		obs(&a, t, 99, 100);
		invariant(&a);
	}
	assert_int_equal(a.admit[2], 0);
	assert_int_equal(a.admit[3], 0);
	assert_int_equal(a.cuts, 8);
}

/* Recovery moves only on observed calm while the services had traffic: never on the clock,
 * never on missing observations, never on calm without traffic; any saturated observation
 * starts the evidence over. L2 comes back in full before L3 gets anything. */
static void test_recovery_only_on_evidence(void **st)
{
	struct sluice_node_arb a;
	struct sluice_node_obs none = { 0 };
	uint64_t t = 0;
	(void)st;
	sluice_node_init(&a);
	for (int k = 0; k < 6; k++)                         /* L3 off, L2 at 1/4 */
		obs(&a, t += 2 * S, 90, 50);
	assert_int_equal(a.admit[3], 0);
	assert_int_equal(a.admit[2], ONE / 4);

	for (int k = 0; k < 120; k++)                       /* 2 minutes without a reading */
		assert_int_equal(sluice_node_tick(&a, &P, &none, t += S, NULL), 0);
	for (int k = 0; k < 120; k++)                       /* calm, but no traffic */
		assert_int_equal(obs(&a, t += S, 5, 0), 0);
	assert_int_equal(a.admit[2], ONE / 4);

	obs(&a, t += S, 5, 10);
	obs(&a, t += S, 5, 10);
	assert_int_equal(obs(&a, t += S, 80, 10), 1);       /* saturated again: a cut, no credit */
	assert_int_equal(a.admit[2], ONE / 8);
	assert_int_equal(obs(&a, t += S, 5, 10), 0);        /* evidence from the cut on */
	assert_int_equal(obs(&a, t += S, 5, 10), 0);
	assert_int_equal(obs(&a, t += S, 5, 10), 1);        /* 3 s of calm with traffic */
	assert_int_equal(a.admit[2], ONE / 4);
	invariant(&a);
	for (int k = 0; k < 40; k++) {
		obs(&a, t += S, 5, 10);
		invariant(&a);
		if (a.admit[2] < ONE)
			assert_int_equal(a.admit[3], 0);    /* L3 waits for L2 in full */
	}
	assert_int_equal(a.admit[2], ONE);
	assert_int_equal(a.admit[3], ONE);
	assert_false(sluice_node_shedding(&a));
}

/* Any sequence of readings, gaps and traffic keeps the order of the classes. */
static void test_order_holds_for_any_sequence(void **st)
{
	struct sluice_node_arb a;
	uint64_t t = 0, x = 88172645463325252ull;
	(void)st;
	sluice_node_init(&a);
	for (int k = 0; k < 20000; k++) {
		struct sluice_node_obs o;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		o.valid = (x & 7) != 0;
		o.pressure_pct = (double)(x >> 8 & 127) * 100.0 / 127;
		o.arrivals = (x >> 16) & 3;
		t += (x >> 20 & 3) * S / 2 + 1;
		sluice_node_tick(&a, &P, &o, t, NULL);
		invariant(&a);
	}
	assert_true(a.cuts > 10 && a.restores > 10);
}

static void test_combine(void **st)
{
	(void)st;
	assert_int_equal(sluice_node_combine(ONE, ONE), ONE);
	assert_int_equal(sluice_node_combine(ONE / 2, ONE), ONE / 2);
	assert_int_equal(sluice_node_combine(ONE / 2, ONE / 2), ONE / 4);
	assert_int_equal(sluice_node_combine(ONE, 0), 0);
}

static void test_psi_parse(void **st)
{
	uint64_t total = 0;
	double avg = 0;
	(void)st;
	assert_int_equal(sluice_psi_parse("some avg10=19.87 avg60=8.18 avg300=4.23 total=3498317266\n"
					  "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
					  &total, &avg), 0);
	assert_true(total == 3498317266ull);
	assert_true(avg > 19.86 && avg < 19.88);
	assert_int_equal(sluice_psi_parse("full avg10=1.00 avg60=0.00 avg300=0.00 total=7\n",
					  &total, &avg), -1);
	assert_int_equal(sluice_psi_parse("some avg10=1.00\nfull total=3\n", &total, &avg), -1);
	assert_int_equal(sluice_psi_parse("", &total, &avg), -1);
}

/* Asked for on a host whose pressure file cannot be read: --check warns, and sluiced runs
 * with arbitration off, says so, and leaves the verdicts alone. */
static void test_missing_pressure_file_disables(void **st)
{
	static struct daemon d;
	struct doc_errors w;
	struct sluice_verdict v = { 0 };
	char *out = NULL;
	size_t len = 0;
	(void)st;
	sluice_config_defaults(&d.cfg);
	d.cfg.node.arbitration = NODE_ARB_PSI;
	snprintf(d.cfg.node.pressure_file, sizeof(d.cfg.node.pressure_file),
		 "/nonexistent/sluice-test/pressure/cpu");
	assert_true(config_warnings(&d.cfg, &w) >= 1);
	assert_non_null(strstr(w.e[0].msg, "sluiced runs with it off"));

	d.events = open_memstream(&out, &len);
	assert_non_null(d.events);
	daemon_node_configure(&d, 1);
	fflush(d.events);
	assert_int_equal(d.node.on, 0);
	assert_non_null(strstr(out, "\"machine\":\"node\""));
	assert_non_null(strstr(out, "node arbitration disabled: cannot read "
				    "/nonexistent/sluice-test/pressure/cpu"));
	v.shed_prob[3] = 0;
	d.node.arb.admit[3] = 0;       /* whatever the arbiter held: off applies nothing */
	daemon_node_apply(&d, &v);
	assert_int_equal(v.shed_prob[3], 0);
	daemon_node_close(&d);
	fclose(d.events);
	free(out);

	/* and with a readable file it is on, and applies the node's cut */
	snprintf(d.cfg.node.pressure_file, sizeof(d.cfg.node.pressure_file), "/dev/null");
	d.events = fopen("/dev/null", "w");
	daemon_node_configure(&d, 1);
	assert_int_equal(d.node.on, 1);
	d.node.arb.admit[3] = ONE / 2;
	v.shed_prob[3] = ONE / 4;      /* the service's ladder admits 3/4 (not 1/2: shed != admit) */
	daemon_node_apply(&d, &v);
	assert_int_equal(v.shed_prob[3], ONE - 3 * ONE / 8);   /* admits 3/4 * 1/2 */
	daemon_node_close(&d);
	fclose(d.events);
}

/* A pressure file that stops being readable after the start (a cgroup's, removed with the
 * cgroup) is no evidence, but not for ever: cuts held on no reading at all would shed L3 and
 * L2 for good without a word. Past NODE_UNREADABLE_NS of failed reads arbitration turns off,
 * as at a start without the file: said once, the cuts lifted. */
static void test_pressure_file_unreadable_later_disables(void **st)
{
	static struct daemon d;
	struct sluice_verdict v = { 0 };
	char *out = NULL;
	size_t len = 0;
	const char *p;
	int n = 0;
	(void)st;
	memset(&d, 0, sizeof(d));
	sluice_config_defaults(&d.cfg);
	d.cfg.node.arbitration = NODE_ARB_PSI;
	snprintf(d.cfg.node.pressure_file, sizeof(d.cfg.node.pressure_file), "/dev/null");
	d.events = open_memstream(&out, &len);
	assert_non_null(d.events);
	daemon_node_configure(&d, 1);
	assert_int_equal(d.node.on, 1);
	d.node.arb.admit[3] = 0;       /* a cut made while it could be read */
	for (uint64_t t = 1; t <= NODE_UNREADABLE_NS / S + 3; t++)
		daemon_node_tick(&d, t * S);   /* every read is empty: no reading */
	fflush(d.events);
	assert_int_equal(d.node.on, 0);
	for (p = out; (p = strstr(p, "\"to\":\"disabled\"")); p++)
		n++;
	assert_int_equal(n, 1);
	assert_non_null(strstr(out, "cannot be read"));
	daemon_node_apply(&d, &v);
	assert_int_equal(v.shed_prob[3], 0);
	daemon_node_close(&d);
	fclose(d.events);
	free(out);
}

/* The node block: off by default, written values taken, bad ones refused with the key. */
static void test_config_node_block(void **st)
{
	static struct sluice_config c;
	struct doc_errors e;
	static const char good[] = "interface: lo\n"
		"node: { arbitration: psi, cpu_pressure_pct: 55.5, step_s: 1, recover_s: 4,\n"
		"        pressure_file: /sys/fs/cgroup/x/cpu.pressure }\n"
		"services:\n  - { name: a, port: 80 }\n";
	static const char bad[] = "interface: lo\n"
		"node: { arbitration: maybe, cpu_pressure_pct: 0, step_s: -1, other: 1 }\n"
		"services:\n  - { name: a, port: 80 }\n";
	(void)st;
	assert_int_equal(sluice_config_parse("interface: lo\nservices:\n  - { name: a, port: 80 }\n",
					     50, "t", &c, &e), 0);
	assert_int_equal(c.node.arbitration, NODE_ARB_OFF);
	assert_string_equal(c.node.pressure_file, "/proc/pressure/cpu");
	sluice_config_free(&c);
	assert_int_equal(sluice_config_parse(good, strlen(good), "t", &c, &e), 0);
	assert_int_equal(c.node.arbitration, NODE_ARB_PSI);
	assert_true(c.node.cpu_pressure_pct == 55.5 && c.node.step_s == 1 && c.node.recover_s == 4);
	assert_string_equal(c.node.pressure_file, "/sys/fs/cgroup/x/cpu.pressure");
	sluice_config_free(&c);
	assert_int_equal(sluice_config_parse(bad, strlen(bad), "t", &c, &e), -1);
	assert_int_equal(e.n, 4);
	assert_non_null(strstr(e.e[0].msg, "arbitration"));
	assert_non_null(strstr(e.e[1].msg, "cpu_pressure_pct"));
	assert_non_null(strstr(e.e[2].msg, "step_s"));
	assert_non_null(strstr(e.e[3].msg, "unknown key 'other' in node"));
	sluice_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_l3_of_all_before_l2_stepwise),
		cmocka_unit_test(test_recovery_only_on_evidence),
		cmocka_unit_test(test_order_holds_for_any_sequence),
		cmocka_unit_test(test_combine),
		cmocka_unit_test(test_psi_parse),
		cmocka_unit_test(test_missing_pressure_file_disables),
		cmocka_unit_test(test_pressure_file_unreadable_later_disables),
		cmocka_unit_test(test_config_node_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
