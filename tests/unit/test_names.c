// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The name tables of include/sluice_names.h: every member of every table reaches every output
 * that names it (metric labels, `sluicectl status --json`, the `sluicectl status` table, event
 * lines, CLI parsing), and the names scripts rely on never change. The loops run over the
 * tables, so a member added to a table is checked here without editing this file. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "common/names.h"
#include "control/events.h"
#include "control/ladder.h"
#include "daemon/metrics.h"
#include "kernel/status.h"
#include "ops/switches.h"

#define MEMBERS(table) (0 table(SLUICE_X_COUNT))

/* The count of rejections of reason r in class c: distinct for every pair. */
static unsigned long long rej_count(int r, int c)
{
	return 100000ull + 10ull * (unsigned long long)r + (unsigned long long)c;
}

/* One tcp service "web" with a distinct count for every (class, reason). */
static void make_snapshot(struct status_snapshot *s, int breaker_state)
{
	struct service_status *web;

	memset(s, 0, sizeof(*s));
	s->s = calloc(2, sizeof(*s->s));
	s->cap = 2;
	web = &s->s[0];
	s->controller_alive = 1;
	s->flows = -1;
	s->n = 1;
	snprintf(web->svc.name, sizeof(web->svc.name), "web");
	web->svc.port = 8080;
	web->v.breaker_state = (uint32_t)breaker_state;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		web->cls[c].admit_prob = 1.0;
		web->cls[c].switch_admit = 1.0;
		web->cls[c].rate_per_s = -1;
		for (int r = 0; r < SLUICE_REJ_REASONS; r++)
			web->cls[c].st.rejected[r] = rej_count(r, c);
	}
}

/* The status JSON or table in a malloc'd string (a heap copy of the stream's buffer). */
static char *print_status(const struct status_snapshot *s, int json)
{
	char *buf = NULL, *copy;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	if (json)
		status_print_json(f, s);
	else
		status_print_table(f, s, 1);
	fclose(f);
	copy = strdup(buf);
	free(buf);
	assert_non_null(copy);
	return copy;
}

static char *render_metrics(const struct status_snapshot *s)
{
	char *out = NULL;
	size_t len = 0;

	assert_int_equal(metrics_render(s, NULL, &out, &len), 0);
	return out;
}

/* A name usable as a JSON key, a metric label value and a CLI word: [a-z0-9_]+ (or L0.. for
 * classes, which allows upper case). */
static int plain_word(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

/* Every name of fn(0..n-1) is a plain word and no two are the same. */
static void assert_distinct_words(const char *(*fn)(int), int n)
{
	for (int i = 0; i < n; i++) {
		if (!plain_word(fn(i)))
			fail_msg("member %d: name \"%s\" is not a plain word", i, fn(i));
		for (int j = 0; j < i; j++)
			if (!strcmp(fn(i), fn(j)))
				fail_msg("members %d and %d share the name \"%s\"", j, i, fn(i));
	}
}

/* ---------------------------------------------------------------- reject reasons */

static void test_reasons_named_everywhere(void **st)
{
	struct status_snapshot s;
	char *metrics, *json, *table, want[256];

	assert_int_equal(MEMBERS(SLUICE_REJECT_TABLE), SLUICE_REJ_REASONS);
	assert_distinct_words(sluice_reject_name, SLUICE_REJ_REASONS);
	make_snapshot(&s, SLUICE_BREAKER_CLOSED);
	metrics = render_metrics(&s);
	json = print_status(&s, 1);
	table = print_status(&s, 0);
	for (int r = 0; r < SLUICE_REJ_REASONS; r++) {
		const char *name = sluice_reject_name(r), *head = sluice_reject_heading(r);

		/* the CLI heading: "rej:" and a word, distinct */
		assert_int_equal(strncmp(head, "rej:", 4), 0);
		assert_true(plain_word(head + 4));
		for (int q = 0; q < r; q++)
			assert_string_not_equal(head, sluice_reject_heading(q));
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			/* metric label */
			snprintf(want, sizeof(want), "\nsluice_requests_rejected_total{service=\"web\","
				 "class=\"%s\",reason=\"%s\"} %llu\n", sluice_class_name(c), name,
				 rej_count(r, c));
			if (!strstr(metrics, want))
				fail_msg("reason %d (%s): no metric line %s", r, name, want + 1);
			/* JSON key under rejected_by */
			snprintf(want, sizeof(want), "\"%s\":%llu", name, rej_count(r, c));
			if (!strstr(json, want))
				fail_msg("reason %d (%s): not in status JSON as %s", r, name, want);
		}
		/* the status table: a column with this heading, and each class's count right under
		 * it (right-aligned: the number ends where the heading ends) */
		{
			const char *hdr = strstr(table, "  class "), *at, *eol;
			size_t end;

			assert_non_null(hdr);
			eol = strchr(hdr, '\n');
			snprintf(want, sizeof(want), " %s ", head);
			at = strstr(hdr, want);
			if (!at || at > eol)
				fail_msg("reason %d (%s): no column \"%s\" in the status table", r, name,
					 head);
			end = (size_t)(at - hdr) + 1 + strlen(head);    /* column just after it */
			for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
				char row[16], num[32];
				const char *line;
				int nl;

				snprintf(row, sizeof(row), "\n  %-5s ", sluice_class_name(c));
				line = strstr(eol, row);
				assert_non_null(line);
				line++;
				snprintf(num, sizeof(num), "%llu", rej_count(r, c));
				nl = (int)strlen(num);
				assert_true(strchr(line, '\n') - line > (long)end);
				if (strncmp(line + end - nl, num, (size_t)nl) || line[end - nl - 1] != ' ')
					fail_msg("reason %d (%s), class %d: %s is not under \"%s\"", r,
						 name, c, num, head);
			}
		}
	}
	/* out of range */
	assert_string_equal(sluice_reject_name(SLUICE_REJ_REASONS), "unknown");
	assert_string_equal(sluice_reject_name(-1), "unknown");
	assert_string_equal(sluice_reject_heading(SLUICE_REJ_REASONS), "rej:?");
	free(metrics);
	free(json);
	free(table);
}

/* Scripts, alerts and dashboards read these strings: they never change. New reasons go after
 * them (the loop above checks those). */
static void test_reason_names_stable(void **st)
{
	static const char *const json[] = { "switch", "breaker", "headroom", "ladder",
					    "client_limit" };
	static const char *const head[] = { "rej:switch", "rej:brkr", "rej:headrm", "rej:ladder",
					    "rej:client" };

	assert_true(SLUICE_REJ_REASONS >= 5);
	for (int r = 0; r < 5; r++) {
		assert_string_equal(sluice_reject_name(r), json[r]);
		assert_string_equal(sluice_reject_heading(r), head[r]);
	}
	assert_int_equal(SLUICE_REJ_SWITCH, 0);
	assert_int_equal(SLUICE_REJ_CLIENT_LIMIT, 4);
}

/* ---------------------------------------------------------------- classes */

static void test_classes(void **st)
{
	struct status_snapshot s;
	struct sluice_event ev;
	char *metrics, *json, want[128], line[512];

	assert_int_equal(MEMBERS(SLUICE_CLASS_TABLE), SLUICE_NUM_CLASSES);
	make_snapshot(&s, SLUICE_BREAKER_CLOSED);
	metrics = render_metrics(&s);
	json = print_status(&s, 1);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		const char *n = sluice_class_name(c);

		snprintf(want, sizeof(want), "L%d", c);
		assert_string_equal(n, want);                       /* the names scripts use */
		assert_int_equal(sluice_class_from_name(n), c);     /* config and CLI parsing */
		assert_int_equal(sw_class_parse(n), c);
		assert_string_equal(sw_class_str(c), n);
		snprintf(want, sizeof(want), "class=\"%s\"", n);
		assert_non_null(strstr(metrics, want));
		snprintf(want, sizeof(want), "{\"class\":\"%s\",", n);
		assert_non_null(strstr(json, want));
		sluice_event_init(&ev, 1, SLUICE_EV_INFO, "web", SLUICE_EVM_LADDER, "a", "b", "c");
		ev.cls = c;
		sluice_event_json(&ev, line, sizeof(line));
		snprintf(want, sizeof(want), ",\"class\":\"%s\",", n);
		assert_non_null(strstr(line, want));
	}
	assert_int_equal(sluice_class_from_name("l0"), -1);
	assert_int_equal(sluice_class_from_name("L4"), -1);
	assert_int_equal(sw_class_parse(NULL), -1);
	assert_string_equal(sluice_class_name(SLUICE_NUM_CLASSES), "?");
	assert_string_equal(sw_class_str(SLUICE_NUM_CLASSES), "L?");
	assert_string_equal(sluice_class_name(SLUICE_CLASS_FROM_HEADER), "from-header");
	free(metrics);
	free(json);
}

/* ---------------------------------------------------------------- breaker, ladder */

static void test_breaker_states(void **st)
{
	static const char *const want_names[] = { "closed", "open", "half_open" };
	int n = MEMBERS(SLUICE_BREAKER_TABLE);

	assert_distinct_words(sluice_breaker_state_name, n);
	for (int i = 0; i < 3; i++)
		assert_string_equal(sluice_breaker_state_name(i), want_names[i]);
	assert_int_equal(SLUICE_BREAKER_HALF_OPEN, 2);
	for (int b = 0; b < n; b++) {
		struct status_snapshot s;
		char *json, *table, want[128];

		make_snapshot(&s, b);
		json = print_status(&s, 1);
		table = print_status(&s, 0);
		snprintf(want, sizeof(want), "\"breaker\":{\"state\":\"%s\"",
			 sluice_breaker_state_name(b));
		assert_non_null(strstr(json, want));
		snprintf(want, sizeof(want), "breaker %s", sluice_breaker_state_name(b));
		assert_non_null(strstr(table, want));
		free(json);
		free(table);
	}
	/* the data path treats an unknown state as closed, and so does the display */
	assert_string_equal(breaker_name(n), "closed");
	assert_string_equal(sluice_breaker_state_name(n), "?");
}

static void test_ladder_states(void **st)
{
	static const char *const want_names[] = { "off", "partial", "full" };

	assert_int_equal(MEMBERS(SLUICE_LADDER_STATE_TABLE), 3);
	assert_distinct_words(sluice_ladder_state_name, 3);
	assert_string_equal(sluice_ladder_state_name(SLUICE_LADDER_OFF), want_names[0]);
	assert_string_equal(sluice_ladder_state_name(SLUICE_LADDER_PARTIAL), want_names[1]);
	assert_string_equal(sluice_ladder_state_name(SLUICE_LADDER_FULL), want_names[2]);
	assert_string_equal(sluice_ladder_state_name(3), "?");
}

/* ---------------------------------------------------------------- events */

static void test_event_levels_and_kinds(void **st)
{
	static const char *const levels[] = { "info", "debug", "alert" };
	static const char *const kinds[] = { "breaker", "aimd", "ladder", "cascade", "retry_storm",
		"switch", "switches", "flows", "config", "daemon", "metrics", "accept_queue", "node",
		"connection_cap" };
	int nl = MEMBERS(SLUICE_EV_LEVEL_TABLE);
	struct sluice_event ev;
	char line[512], want[128];

	assert_int_equal(MEMBERS(SLUICE_EV_MACHINE_TABLE), SLUICE_EV_MACHINES);
	assert_distinct_words(sluice_ev_level_name, nl);
	assert_distinct_words(sluice_ev_machine_name, SLUICE_EV_MACHINES);
	for (int i = 0; i < 3; i++)
		assert_string_equal(sluice_ev_level_name(i), levels[i]);
	assert_int_equal(SLUICE_EV_ALERT, 2);
	assert_true(SLUICE_EV_MACHINES >= (int)(sizeof(kinds) / sizeof(kinds[0])));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		assert_string_equal(sluice_ev_machine_name((int)i), kinds[i]);
	for (int l = 0; l < nl; l++)
		for (int m = 0; m < SLUICE_EV_MACHINES; m++) {
			sluice_event_init(&ev, 7, l, "web", m, "a", "b", "c");
			sluice_event_json(&ev, line, sizeof(line));
			snprintf(want, sizeof(want), "\"level\":\"%s\"", sluice_ev_level_name(l));
			assert_non_null(strstr(line, want));
			snprintf(want, sizeof(want), "\"machine\":\"%s\"", sluice_ev_machine_name(m));
			assert_non_null(strstr(line, want));
		}
	assert_string_equal(sluice_ev_level_name(nl), "info");
	assert_string_equal(sluice_ev_machine_name(SLUICE_EV_MACHINES), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reasons_named_everywhere),
		cmocka_unit_test(test_reason_names_stable),
		cmocka_unit_test(test_classes),
		cmocka_unit_test(test_breaker_states),
		cmocka_unit_test(test_ladder_states),
		cmocka_unit_test(test_event_levels_and_kinds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
