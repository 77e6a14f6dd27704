// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* `sluicectl status` as a table: the default form fits a 120-column terminal, `--wide` has
 * every column, and each percentage sits under a heading that says what it measures. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernel/status.h"
#include "common/names.h"
#include "control/signals.h"

#define BIG 4000000000ull                 /* ten digits: a long-lived node's counters */

/* Two services; "web" L3 as seen in an overload: 5316 arrived, 686 admitted, while the ladder
 * admits everything (100%) and no switch sheds (0%): the refusals came from headroom. */
static void snapshot(struct status_snapshot *s, unsigned long long big)
{
	memset(s, 0, sizeof(*s));
	s->controller_alive = 1;
	s->heartbeat_age_s = 0.1;
	s->flows = 123456789;
	s->pkt.service = s->pkt.malformed = s->pkt.rst_sent = s->pkt.reply_sent = big;
	s->pkt.reply_failed = big;
	s->n = s->cap = 2;
	s->s = calloc(2, sizeof(*s->s));
	assert_non_null(s->s);
	for (int i = 0; i < 2; i++) {
		struct service_status *sv = &s->s[i];

		snprintf(sv->svc.name, sizeof(sv->svc.name), i ? "a-service-name-of-31-characters" : "web");
		sv->svc.port = i ? 65535 : 8080;
		sv->svc.protocol = i ? SLUICE_PROTO_TCP : SLUICE_PROTO_HTTP;
		sv->v.limit = 4000000;
		sv->v.breaker_state = SLUICE_BREAKER_HALF_OPEN;
		sv->v.breaker_shed = SLUICE_PROB_ONE - SLUICE_PROB_ONE / 4;
		sv->in_flight = 4000000;
		sv->ctl.known = 1;           /* the longest controller line: blind, 67 s baseline */
		sv->ctl.signal = 0;
		sv->ctl.algorithm = SLUICE_CTL_ALG_GRADIENT;
		sv->ctl.baseline_us = 67108864;
		sv->ctl.objective_us = 80530636;
		sv->ctl.latency_us = 80530636;
		sv->ctl.rec = (struct ctl_recovery){ .known = 1, .shedding_s = 359999,
			.since_overload_s = 359999, .last_recovery_s = 359999,
			.last_episode_s = 359999, .recovered_ago_s = -1 };
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct class_status *cs = &sv->cls[c];

			cs->st.arrivals = big;
			cs->st.admitted = big;
			for (int r = 0; r < SLUICE_REJ_REASONS; r++)
				cs->st.rejected[r] = big / 8;
			cs->st.errors = cs->st.resp_429 = cs->st.retransmits = cs->st.fail_open = big;
			cs->in_flight = 4000000;
			cs->threshold = 4000000;
			cs->p50_us = 99999999;       /* 99999.9 ms */
			cs->p99_us = 99999999;
			cs->admit_prob = 1;
			cs->switch_admit = 1;
			cs->rate_per_s = 99999.9;
			cs->error_rate = 1;
		}
	}
	s->s[0].cls[3].st.arrivals = 5316;
	s->s[0].cls[3].st.admitted = 686;
	memset(s->s[0].cls[3].st.rejected, 0, sizeof(s->s[0].cls[3].st.rejected));
	s->s[0].cls[3].st.rejected[SLUICE_REJ_HEADROOM] = 5316 - 686;
	s->s[0].cls[2].st.arrivals = 0;                /* no arrivals yet: no ratio */
	s->s[0].cls[1].switch_admit = 0.25;            /* a switch sheds 75% of L1 */
	s->s[0].cls[0].admit_prob = 0.4;               /* the ladder admits 40% of L0 */
}

static char *table(const struct status_snapshot *s, int wide)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	status_print_table(f, s, wide);
	fclose(f);
	return buf;
}

static int widest_line(const char *t)
{
	int w = 0;

	for (const char *p = t, *e; *p; p = e + 1) {
		e = strchr(p, '\n');
		if (!e)
			e = p + strlen(p);
		if (e - p > w)
			w = (int)(e - p);
		if (!*e)
			break;
	}
	return w;
}

/* The cell of service `svc`'s class row under `heading` (right-aligned: it ends where the
 * heading ends), copied into out. */
static void cell(const char *t, const char *svc, const char *cls, const char *heading, char *out,
		 size_t len)
{
	char want[64];
	const char *s, *hdr, *eol, *at, *row, *start;
	size_t end;

	snprintf(want, sizeof(want), "\n%s  ", svc);
	s = strstr(t, want);
	if (!s)
		fail_msg("no service %s in:\n%s", svc, t);
	hdr = strstr(s, "\n  class ");
	assert_non_null(hdr);
	hdr++;
	eol = strchr(hdr, '\n');
	snprintf(want, sizeof(want), " %s ", heading);
	at = strstr(hdr, want);
	if (!at || at > eol) {          /* the last heading ends the line */
		snprintf(want, sizeof(want), " %s\n", heading);
		at = strstr(hdr, want);
	}
	if (!at || at > eol)
		fail_msg("no column \"%s\" in: %.*s", heading, (int)(eol - hdr), hdr);
	end = (size_t)(at - hdr) + 1 + strlen(heading);
	snprintf(want, sizeof(want), "\n  %-5s ", cls);
	row = strstr(eol, want);
	assert_non_null(row);
	row++;
	assert_true((size_t)(strchr(row, '\n') - row) >= end);
	start = row + end;
	while (start > row && start[-1] != ' ')
		start--;
	snprintf(out, len, "%.*s", (int)(row + end - start), start);
}

static void test_status_table_fits_120(void **state)
{
	static struct status_snapshot s;
	char *t;
	(void)state;

	snapshot(&s, BIG);
	t = table(&s, 0);
	if (widest_line(t) > 120) {
		fprintf(stderr, "%s", t);
		fail_msg("the status table is %d columns wide (at most 120)", widest_line(t));
	}
	free(t);
	/* the wide form is allowed to be wider, and is */
	t = table(&s, 1);
	assert_true(widest_line(t) > 120);
	free(t);
	status_free(&s);
}

static void test_status_table_says_what_it_measures(void **state)
{
	static struct status_snapshot s;
	char *t, v[32];
	(void)state;

	snapshot(&s, 1000);
	for (int wide = 0; wide <= 1; wide++) {
		t = table(&s, wide);
		/* the old headings, which read as "share admitted" and "share shed", are gone */
		assert_null(strstr(t, " admit% "));
		assert_null(strstr(t, " shed%"));
		cell(t, "web", "L3", "arrived", v, sizeof(v));
		assert_string_equal(v, "5316");
		cell(t, "web", "L3", "admitted", v, sizeof(v));
		assert_string_equal(v, "686");
		cell(t, "web", "L3", "admitted%", v, sizeof(v));
		assert_string_equal(v, "12.9%");              /* measured: 686 / 5316 */
		cell(t, "web", "L3", "ladder%", v, sizeof(v));
		assert_string_equal(v, "100%");               /* the ladder's admit probability */
		cell(t, "web", "L3", "switch%", v, sizeof(v));
		assert_string_equal(v, "0%");                 /* what a switch sheds */
		cell(t, "web", "L2", "admitted%", v, sizeof(v));
		assert_string_equal(v, "-");                  /* nothing arrived */
		cell(t, "web", "L1", "switch%", v, sizeof(v));
		assert_string_equal(v, "75%");
		cell(t, "web", "L0", "ladder%", v, sizeof(v));
		assert_string_equal(v, "40%");
		assert_non_null(strstr(t, "admitted% = admitted / arrived since attach; ladder% = admit "
					  "probability of the priority ladder now;\nswitch% = share a manual "
					  "switch sheds now"));
		if (!wide) {
			cell(t, "web", "L3", "rejected", v, sizeof(v));
			assert_string_equal(v, "4630");
		} else {
			cell(t, "web", "L3", sluice_reject_heading(SLUICE_REJ_HEADROOM), v, sizeof(v));
			assert_string_equal(v, "4630");
			cell(t, "web", "L0", "429s", v, sizeof(v));
			assert_string_equal(v, "1000");
			cell(t, "web", "L0", "fail-open", v, sizeof(v));
			assert_string_equal(v, "1000");
		}
		assert_non_null(strstr(t, "breaker half_open (this step admits 25%)"));
		free(t);
	}
	status_free(&s);
}

/* The controller's line: baseline, objective, and a limit without a signal says so. */
static void test_status_table_controller_line(void **state)
{
	static struct status_snapshot s;
	char *t;
	(void)state;

	snapshot(&s, 1000);
	s.s[0].ctl.signal = 2;                         /* web: ok */
	s.s[0].ctl.baseline_us = 50100;
	s.s[0].ctl.objective_us = 60120;
	s.s[0].ctl.latency_us = 71400;                 /* the last window's: above the objective */
	s.s[1].ctl.baseline_us = s.s[1].ctl.objective_us = 0;   /* blind, nothing learned */
	s.s[1].ctl.latency_us = 0;
	s.s[1].ctl.algorithm = SLUICE_CTL_ALG_FIXED;
	s.s[0].ctl.rec = (struct ctl_recovery){ .known = 1, .shedding_s = 12.44,
		.since_overload_s = 0.3, .last_recovery_s = 75, .last_episode_s = 80,
		.recovered_ago_s = -1 };
	s.s[1].ctl.rec = (struct ctl_recovery){ .known = 1, .shedding_s = -1,
		.since_overload_s = 40, .last_recovery_s = 21.25, .last_episode_s = 30.5,
		.recovered_ago_s = 4000 };
	t = table(&s, 0);
	assert_non_null(strstr(t, "latency 71.4ms  signal ok  limit gradient\n"
				  "  ladder: shedding for 12.4s, last overload 0.3s ago "
				  "(the last recovery took 1.2m)\n"));
	assert_non_null(strstr(t, "(no latency samples: the limit is blind)\n"
				  "  ladder: recovered 1.1h ago, 21.2s after the last overload "
				  "(shed for 30.5s)\n"));
	free(t);
	s.s[1].ctl.rec.last_recovery_s = -1;          /* never cut: no ladder line */
	s.s[0].ctl.rec.known = 0;                     /* a record it cannot read: none either */
	t = table(&s, 0);
	assert_null(strstr(t, "ladder:"));
	free(t);
	t = table(&s, 0);
	assert_non_null(strstr(t, "\n  baseline 50.1ms  objective 60.1ms  latency 71.4ms  signal ok  "
				  "limit gradient\n"));
	assert_non_null(strstr(t, "\n  baseline -  objective -  latency -  signal none  limit fixed  "
				  "(no latency samples: the limit is blind)\n"));
	free(t);
	s.s[0].ctl.known = 0;                          /* no entry: no line, nothing made up */
	t = table(&s, 0);
	assert_null(strstr(t, "signal ok"));
	assert_null(strstr(t, "read gate"));           /* said only while armed */
	free(t);
	s.s[0].v.flags |= SLUICE_VERDICT_READ_GATE;
	t = table(&s, 0);
	assert_non_null(strstr(t, "read gate armed\n"));
	free(t);
}

/* Counters since attach pass ten digits on a busy node (a day at 100k/s), and a SYN flood
 * passes a million a second: each number stays in its column, under its heading, so the
 * cells after it do too. */
static void test_status_table_long_numbers(void **state)
{
	static struct status_snapshot s;
	char v[32], *t;
	(void)state;

	snapshot(&s, 18446744073709551615ull);        /* every counter at its largest */
	s.pkt.service = s.pkt.malformed = s.pkt.rst_sent = s.pkt.reply_sent = BIG;
	s.pkt.reply_failed = BIG;                     /* (a line of words, not columns) */
	s.s[0].cls[0].st.arrivals = 12345678901ull;   /* 11 digits */
	s.s[0].cls[0].st.admitted = 1234567890ull;    /* 10: fits, exact */
	s.s[0].cls[0].rate_per_s = 2345678.9;
	for (int wide = 0; wide < 2; wide++) {
		t = table(&s, wide);
		if (!wide && widest_line(t) > 120) {
			fprintf(stderr, "%s", t);
			fail_msg("the status table is %d columns wide (at most 120)", widest_line(t));
		}
		cell(t, "web", "L0", "arrived", v, sizeof(v));
		assert_string_equal(v, "12345.7M");
		cell(t, "web", "L0", "admitted", v, sizeof(v));
		assert_string_equal(v, "1234567890");
		cell(t, "web", "L0", "req/s", v, sizeof(v));
		assert_string_equal(v, "2345.7k");
		cell(t, "web", "L1", "arrived", v, sizeof(v));
		assert_string_equal(v, "18446.7P");
		cell(t, "web", "L1", "p50", v, sizeof(v));   /* the cells after them in place */
		assert_string_equal(v, "100.0s");
		if (wide) {
			cell(t, "web", "L1", "errors", v, sizeof(v));
			assert_string_equal(v, "18446.7P");
			cell(t, "web", "L1", "fail-open", v, sizeof(v));
			assert_string_equal(v, "18446.7P");
		} else {
			cell(t, "web", "L1", "rejected", v, sizeof(v));
			assert_true(strlen(v) <= 10);
		}
		free(t);
	}
	status_free(&s);
}

/* A controller that never ticked has no heartbeat age: the line says so, never "-1.0s ago". */
static void test_status_table_no_heartbeat(void **state)
{
	static struct status_snapshot s;
	char *t;
	(void)state;

	snapshot(&s, 1000);
	s.controller_alive = 0;
	s.heartbeat_age_s = -1;                        /* status_collect: heartbeat_ns 0 */
	t = table(&s, 0);
	assert_null(strstr(t, "-1.0s"));
	assert_non_null(strstr(t, "controller: SILENT (no heartbeat yet) -- data path is failing "
				  "open"));
	free(t);
	s.controller_alive = 1;
	s.heartbeat_age_s = 0.25;
	t = table(&s, 0);
	assert_non_null(strstr(t, "controller: alive (heartbeat 0.2s ago)\n"));
	free(t);
	status_free(&s);
}

/* `hist`: the last bucket holds every latency from its lower bound on (a 5-minute request
 * too), so its range is open, not the 134 s a bucket of that width would end at. */
static void test_hist_overflow_bucket(void **state)
{
	static struct status_snapshot s;
	char *buf = NULL, want[64];
	size_t len = 0;
	FILE *f;
	(void)state;

	snapshot(&s, 1000);
	memset(&s.s[0].cls[0].hist, 0, sizeof(s.s[0].cls[0].hist));
	s.s[0].cls[0].hist.bucket[sluice_hist_bucket(300000000ull)] = 3;   /* 300 s */
	s.s[0].cls[0].hist.bucket[sluice_hist_bucket(1000)] = 1;
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	status_print_hist(f, &s.s[0], 0);
	fclose(f);
	snprintf(want, sizeof(want), "%llu -> inf : 3 ",
		 (unsigned long long)sluice_hist_lower_us(SLUICE_HIST_BUCKETS - 1));
	assert_non_null(strstr(buf, want));
	snprintf(want, sizeof(want), "-> %llu ",
		 (unsigned long long)sluice_hist_upper_us(SLUICE_HIST_BUCKETS - 1) - 1);
	assert_null(strstr(buf, want));
	assert_non_null(strstr(buf, "web L0: request latency, 4 requests\n"));
	free(buf);
	status_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_table_fits_120),
		cmocka_unit_test(test_status_table_controller_line),
		cmocka_unit_test(test_status_table_no_heartbeat),
		cmocka_unit_test(test_status_table_long_numbers),
		cmocka_unit_test(test_hist_overflow_bucket),
		cmocka_unit_test(test_status_table_says_what_it_measures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
