// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* `sluicectl status --json`: scripts read its keys and value types, so both are pinned here
 * (integers stay integers, fractions carry a point, one compact line). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernel/status.h"
#include "common/jsonio.h"

static void snapshot(struct status_snapshot *s)
{
	struct service_status *sv;

	memset(s, 0, sizeof(*s));
	s->s = calloc(2, sizeof(*s->s));
	s->cap = 2;
	sv = &s->s[0];
	s->controller_alive = 1;
	s->heartbeat_age_s = 0.1234;
	s->flows = 7;
	s->pkt.service = 100;
	s->n = 1;
	snprintf(sv->svc.name, sizeof(sv->svc.name), "we\"b");
	sv->svc.port = 8080;
	sv->svc.protocol = SLUICE_PROTO_HTTP;
	sv->v.limit = 20;
	sv->v.breaker_state = SLUICE_BREAKER_HALF_OPEN;
	sv->v.breaker_shed = SLUICE_PROB_ONE - SLUICE_PROB_ONE / 4;
	sv->in_flight = 3;
	sv->ctl.known = 1;                     /* a tcp-like service whose limit cannot see */
	sv->ctl.signal = 0;                    /* none */
	sv->ctl.algorithm = SLUICE_CTL_ALG_GRADIENT;
	sv->ctl.objective_us = 0;
	sv->ctl.baseline_us = 0;
	sv->ctl.ladder[3] = 1;                 /* partial */
	sv->ctl.ladder[0] = 2;                 /* full */
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		struct class_status *cs = &sv->cls[c];
		cs->st.arrivals = c == 3 ? 0 : 10 + c;
		cs->st.admitted = cs->st.arrivals / 4;  /* not 1/2: admitted != refused */
		cs->st.rejected[SLUICE_REJ_HEADROOM] = 2;
		cs->p50_us = 1234.6;
		cs->p99_us = 9999.4;
		cs->admit_prob = 0.25;                 /* not 0.5: p and 1 - p must differ */
		cs->switch_admit = 1;
		cs->rate_per_s = c == 2 ? 12.5 : -1;
		cs->error_rate = 1.0 / 3;
	}
}

static json_t *at(json_t *o, const char *path)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
		o = json_is_array(o) ? json_array_get(o, (size_t)atoi(k)) : json_object_get(o, k);
	if (!o)
		fail_msg("no %s", path);
	return o;
}

static char *status_text(const struct status_snapshot *s);

/* The JSON type of the first service's read_gate_armed. */
static json_type read_gate_armed_key(const struct status_snapshot *s)
{
	char *text = status_text(s), err[200];
	json_t *v = jsonio_parse(text, strlen(text), err, sizeof(err));
	json_type t;

	if (!v)
		fail_msg("%s: %s", err, text);
	t = json_typeof(at(v, "services.0.read_gate_armed"));
	json_decref(v);
	free(text);
	return t;
}

static void test_status_json_keys_and_types(void **state)
{
	static struct status_snapshot s;
	char *text = NULL, err[200];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	json_t *v;
	(void)state;

	snapshot(&s);
	assert_int_equal(status_print_json(f, &s), 0);
	fclose(f);
	assert_non_null(strstr(text, "{\"controller_alive\":true,\"heartbeat_age_s\":0.123,"));
	assert_ptr_equal(strchr(text, '\n'), text + len - 1);          /* one line */
	v = jsonio_parse(text, len, err, sizeof(err));
	if (!v)
		fail_msg("%s: %s", err, text);
	assert_true(json_is_integer(at(v, "flows")));
	assert_string_equal(json_string_value(at(v, "services.0.name")), "we\"b");
	assert_int_equal(json_integer_value(at(v, "services.0.port")), 8080);
	assert_string_equal(json_string_value(at(v, "services.0.protocol")), "http");
	assert_string_equal(json_string_value(at(v, "services.0.breaker.state")), "half_open");
	assert_true(json_is_real(at(v, "services.0.breaker.step")));
	assert_true(json_real_value(at(v, "services.0.breaker.step")) == 0.25);   /* admits 1/4 */
	assert_string_equal(json_string_value(at(v, "services.0.classes.2.class")), "L2");
	assert_int_equal(json_integer_value(at(v, "services.0.classes.2.arrivals")), 12);
	assert_int_equal(json_integer_value(at(v, "services.0.classes.2.rejected")), 2);
	assert_int_equal(json_integer_value(at(v, "services.0.classes.2.rejected_by.headroom")), 2);
	assert_int_equal(json_integer_value(at(v, "services.0.classes.2.p50_us")), 1235);
	assert_true(json_is_real(at(v, "services.0.classes.2.admit_prob")));
	assert_true(json_real_value(at(v, "services.0.classes.2.admit_prob")) == 0.25);
	assert_true(json_is_real(at(v, "services.0.classes.2.switch_shed")));
	assert_true(json_real_value(at(v, "services.0.classes.2.switch_shed")) == 0.0);
	assert_true(json_is_real(at(v, "services.0.classes.2.rate_per_s")));
	assert_true(json_real_value(at(v, "services.0.classes.2.rate_per_s")) == 12.5);
	assert_true(json_real_value(at(v, "services.0.classes.2.error_rate")) == 0.3333);
	/* measured admitted / arrivals: 3 of 12, and null while nothing arrived */
	assert_true(json_real_value(at(v, "services.0.classes.2.admitted_ratio")) == 0.25);
	assert_true(json_is_null(at(v, "services.0.classes.3.admitted_ratio")));
	/* keys are added, never removed: every class carries at least these */
	{
		static const char *const keys[] = { "class", "arrivals", "admitted", "rejected",
			"rejected_by", "in_flight", "threshold", "completed", "p50_us", "p99_us", "errors",
			"http_429", "retransmits", "fail_open", "untracked", "admit_prob", "switch_shed",
			"rate_per_s", "error_rate", "admitted_ratio", NULL };
		for (const char *const *k = keys; *k; k++)
			if (!json_object_get(at(v, "services.0.classes.0"), *k))
				fail_msg("class key %s missing", *k);
	}
	/* the controller's keys: a limit without a signal says so, an unknown baseline is null */
	assert_string_equal(json_string_value(at(v, "services.0.signal")), "none");
	assert_string_equal(json_string_value(at(v, "services.0.limit_algorithm")), "gradient");
	assert_true(json_is_null(at(v, "services.0.baseline_us")));
	assert_true(json_is_null(at(v, "services.0.objective_us")));
	assert_true(json_is_null(at(v, "services.0.latency_us")));
	assert_true(json_is_null(at(v, "services.0.top_class_latency_us")));
	assert_string_equal(json_string_value(at(v, "services.0.ladder.L3")), "partial");
	assert_string_equal(json_string_value(at(v, "services.0.ladder.L0")), "full");
	assert_int_equal(json_integer_value(at(v, "services.0.baseline_resets")), 0);
	/* the ladder's recovery: a record it could not read gives nulls, never zeros */
	assert_int_equal(json_object_size(at(v, "services.0.recovery")), 5);
	assert_true(json_is_null(at(v, "services.0.recovery.shedding_s")));
	assert_true(json_is_null(at(v, "services.0.recovery.last_recovery_s")));
	assert_int_equal(json_integer_value(at(v, "packets.service")), 100);
	assert_int_equal(json_object_size(at(v, "packets")), 5);
	assert_true(json_is_false(at(v, "services.0.read_gate_armed")));
	json_decref(v);
	free(text);
	/* the read gate armed by the verdict in force; a tcp service has none: null */
	s.s[0].v.flags |= SLUICE_VERDICT_READ_GATE;
	assert_int_equal(read_gate_armed_key(&s), JSON_TRUE);
	s.s[0].svc.protocol = SLUICE_PROTO_TCP;
	assert_int_equal(read_gate_armed_key(&s), JSON_NULL);
	s.s[0].svc.protocol = SLUICE_PROTO_HTTP;
	s.s[0].v.flags = 0;
	/* a baseline known: integers in microseconds */
	s.s[0].ctl.signal = 2;
	s.s[0].ctl.baseline_us = 50100;
	s.s[0].ctl.objective_us = 60120;
	s.s[0].ctl.latency_us = 71400;
	s.s[0].ctl.top_class_us = 78200;
	s.s[0].ctl.rec = (struct ctl_recovery){ .known = 1, .shedding_s = -1,
		.since_overload_s = 40.004, .last_recovery_s = 21.25, .last_episode_s = 30.5,
		.recovered_ago_s = 12 };
	text = NULL;
	f = open_memstream(&text, &len);
	assert_int_equal(status_print_json(f, &s), 0);
	fclose(f);
	v = jsonio_parse(text, len, err, sizeof(err));
	assert_non_null(v);
	assert_string_equal(json_string_value(at(v, "services.0.signal")), "ok");
	assert_int_equal(json_integer_value(at(v, "services.0.baseline_us")), 50100);
	assert_int_equal(json_integer_value(at(v, "services.0.objective_us")), 60120);
	assert_int_equal(json_integer_value(at(v, "services.0.latency_us")), 71400);
	assert_int_equal(json_integer_value(at(v, "services.0.top_class_latency_us")), 78200);
	assert_true(json_is_null(at(v, "services.0.recovery.shedding_s")));   /* not shedding */
	assert_true(json_real_value(at(v, "services.0.recovery.since_overload_s")) == 40.0);
	assert_true(json_real_value(at(v, "services.0.recovery.last_recovery_s")) == 21.25);
	assert_true(json_real_value(at(v, "services.0.recovery.last_episode_s")) == 30.5);
	assert_true(json_real_value(at(v, "services.0.recovery.recovered_ago_s")) == 12);
	json_decref(v);
	free(text);
}

static char *status_text(const struct status_snapshot *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	assert_int_equal(status_print_json(f, s), 0);
	fclose(f);
	return text;
}

/* breaker.state and breaker.step as the data path reads the verdict: a state it does not
 * know admits everything (closed, step 1), open admits nothing (step 0) whatever share the
 * verdict holds beside it. */
static void test_status_json_breaker_as_the_data_path(void **state)
{
	static struct status_snapshot s;
	char *text;
	json_t *v;
	(void)state;

	snapshot(&s);
	s.s[0].v.breaker_state = 7;
	s.s[0].v.breaker_shed = SLUICE_PROB_ONE / 2;
	text = status_text(&s);
	v = json_loads(text, 0, NULL);
	assert_non_null(v);
	assert_string_equal(json_string_value(at(v, "services.0.breaker.state")), "closed");
	assert_true(json_real_value(at(v, "services.0.breaker.step")) == 1.0);
	json_decref(v);
	free(text);
	s.s[0].v.breaker_state = SLUICE_BREAKER_OPEN;
	s.s[0].v.breaker_shed = 0;
	text = status_text(&s);
	v = json_loads(text, 0, NULL);
	assert_non_null(v);
	assert_string_equal(json_string_value(at(v, "services.0.breaker.state")), "open");
	assert_true(json_is_real(at(v, "services.0.breaker.step")));
	assert_true(json_real_value(at(v, "services.0.breaker.step")) == 0.0);
	json_decref(v);
	free(text);
	status_free(&s);
}

/* The heartbeat's age as the data path judges it: a heartbeat stamped a moment after the
 * snapshot's clock is fresh (age 0, alive), not 584 years old and silent. */
static void test_status_heartbeat_edges(void **state)
{
	static struct status_snapshot s;
	char *text;
	json_t *v;
	(void)state;

	snapshot(&s);
	s.g.heartbeat_timeout_ns = 500000000ull;
	s.now_ns = 1000000000000ull;
	s.g.heartbeat_ns = s.now_ns + 1000;           /* written between the two reads */
	status_heartbeat(&s);
	assert_int_equal(s.controller_alive, 1);
	assert_true(s.heartbeat_age_s == 0);
	text = status_text(&s);
	v = json_loads(text, 0, NULL);
	assert_non_null(v);
	assert_true(json_is_true(at(v, "controller_alive")));
	assert_true(json_real_value(at(v, "heartbeat_age_s")) == 0);
	json_decref(v);
	free(text);
	s.g.heartbeat_ns = s.now_ns - 250000000ull;   /* a quarter second old: alive */
	status_heartbeat(&s);
	assert_int_equal(s.controller_alive, 1);
	assert_true(s.heartbeat_age_s == 0.25);
	s.g.heartbeat_ns = s.now_ns - 600000000ull;   /* past the timeout: silent */
	status_heartbeat(&s);
	assert_int_equal(s.controller_alive, 0);
	assert_true(s.heartbeat_age_s == 0.6);
	s.g.heartbeat_ns = s.now_ns + 3 * SLUICE_COARSE_TICK_NS;   /* too far ahead: the data
								     * path fails open */
	status_heartbeat(&s);
	assert_int_equal(s.controller_alive, 0);
	s.g.heartbeat_ns = 0;                          /* never written */
	status_heartbeat(&s);
	assert_int_equal(s.controller_alive, 0);
	assert_true(s.heartbeat_age_s == -1);
	status_free(&s);
}

/* Scripts find every interface and every service whatever bytes their names hold: an
 * interface name is what the kernel took (any byte but '/', ':' and spaces), and jansson
 * refuses a string that is not UTF-8, which left the interface out of `interfaces` and `xdp`
 * (and a service out of `services`). Such a byte shows as U+FFFD; a name filling its whole
 * field is not read past. */
static void test_status_json_names_whatever_the_bytes(void **state)
{
	static struct status_snapshot s;
	char *text;
	json_t *v;
	(void)state;

	snapshot(&s);
	s.n_ifaces = 2;
	snprintf(s.ifaces[0].name, sizeof(s.ifaces[0].name), "veth\xff" "0");
	snprintf(s.ifaces[0].xdp_mode, sizeof(s.ifaces[0].xdp_mode), "generic");
	snprintf(s.ifaces[1].name, sizeof(s.ifaces[1].name), "eth0");
	memset(s.s[0].svc.name, 'w', sizeof(s.s[0].svc.name));
	s.s[0].svc.name[3] = (char)0xc3;       /* a character cut short */
	text = status_text(&s);
	v = json_loads(text, 0, NULL);
	if (!v)
		fail_msg("not JSON: %s", text);
	assert_int_equal(json_array_size(at(v, "interfaces")), 2);
	assert_string_equal(json_string_value(at(v, "interfaces.0")), "veth\xef\xbf\xbd" "0");
	assert_string_equal(json_string_value(at(v, "interfaces.1")), "eth0");
	assert_int_equal(json_array_size(at(v, "xdp")), 2);
	assert_string_equal(json_string_value(at(v, "xdp.0.interface")), "veth\xef\xbf\xbd" "0");
	assert_string_equal(json_string_value(at(v, "xdp.0.mode")), "generic");
	assert_true(json_is_null(at(v, "xdp.1.mode")));
	assert_int_equal(json_array_size(at(v, "services")), 1);
	assert_string_equal(json_string_value(at(v, "services.0.name")),
			    "www\xef\xbf\xbdwwwwwwwwwwwwwwwwwwwwwwwwwwww");
	json_decref(v);
	free(text);
	status_free(&s);
}

/* Every key of the JSON, nested ones too, is named in docs/OPERATIONS.md or docs/METRICS.md
 * (as `key` or "key"), so a script's author finds what each means: none is there undocumented.
 * The ladder's per-class keys are the class names. */
static char docs_text[1 << 20];

static void key_documented(const char *key)
{
	char a[96], b[96];

	snprintf(a, sizeof(a), "`%s`", key);
	snprintf(b, sizeof(b), "\"%s\"", key);
	if (!strstr(docs_text, a) && !strstr(docs_text, b))
		fail_msg("status --json key \"%s\" is not in docs/OPERATIONS.md or docs/METRICS.md",
			 key);
}

static void keys_documented(json_t *v)
{
	const char *k;
	json_t *child;
	size_t i;

	if (json_is_array(v))
		json_array_foreach(v, i, child)
			keys_documented(child);
	if (!json_is_object(v))
		return;
	json_object_foreach(v, k, child) {
		key_documented(k);
		if (strcmp(k, "ladder"))
			keys_documented(child);
	}
}

static void test_status_json_keys_documented(void **state)
{
	static const char *const docs[] = { "docs/OPERATIONS.md", "docs/METRICS.md" };
	const char *dir = getenv("SLUICE_SRCDIR");
	static struct status_snapshot s;
	size_t used = 0;
	char *text;
	json_t *v;
	(void)state;

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		char path[512];
		FILE *f;

		snprintf(path, sizeof(path), "%s%s%s", dir ? dir : "", dir ? "/" : "", docs[i]);
		f = fopen(path, "r");
		if (!f)
			fail_msg("cannot read %s (run from the repository, or set SLUICE_SRCDIR)", path);
		used += fread(docs_text + used, 1, sizeof(docs_text) - 1 - used, f);
		fclose(f);
	}
	docs_text[used] = '\0';
	/* every optional key present: an ADDR:PORT service whose pins count connections */
	snapshot(&s);
	snprintf(s.s[0].addr, sizeof(s.s[0].addr), "198.18.0.1");
	s.s[0].connections = 4;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		s.s[0].cls[c].open = c;
	s.s[0].untrusted_priority = 2;
	s.n_ifaces = 1;
	snprintf(s.ifaces[0].name, sizeof(s.ifaces[0].name), "eth0");
	text = status_text(&s);
	v = json_loads(text, 0, NULL);
	assert_non_null(v);
	assert_non_null(json_object_get(at(v, "services.0"), "address"));
	assert_non_null(json_object_get(at(v, "services.0.classes.1"), "connection_cap"));
	keys_documented(v);
	json_decref(v);
	free(text);
	status_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_json_keys_and_types),
		cmocka_unit_test(test_status_json_breaker_as_the_data_path),
		cmocka_unit_test(test_status_heartbeat_edges),
		cmocka_unit_test(test_status_json_names_whatever_the_bytes),
		cmocka_unit_test(test_status_json_keys_documented),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
