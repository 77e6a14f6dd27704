// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Metrics: exposition text of a synthetic snapshot (exact lines, escaping, histogram,
 * HELP/TYPE for every family, line grammar) and the HTTP server over a real TCP socket. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <regex.h>
#include <math.h>
#include <errno.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <cmocka.h>
#include <jansson.h>
#include "daemon/metrics.h"

/* ---------------------------------------------------------------- fixtures */

static void add(struct sluice_hist *h, uint64_t us, uint64_t n)
{
	h->bucket[sluice_hist_bucket(us)] += n;
	h->sum_us += us * n;
}

/* Two services: "web" (map index 0, http) and "db" (map index 5, tcp). */
static void make_snapshot(struct status_snapshot *s, struct metrics_extra *x)
{
	struct service_status *web, *db;

	memset(s, 0, sizeof(*s));
	s->s = calloc(2, sizeof(*s->s));
	s->cap = 2;
	s->controller_alive = 1;
	s->heartbeat_age_s = 0.25;
	s->pkt.malformed = 7;
	s->pkt.service = 1000;
	s->pkt.rst_sent = 3;
	s->pkt.reply_sent = 11;
	s->n = 2;

	web = &s->s[0];
	web->idx = 0;
	snprintf(web->svc.name, sizeof(web->svc.name), "web");
	web->svc.port = 8080;
	web->svc.protocol = SLUICE_PROTO_HTTP;
	web->v.limit = 64;
	web->v.breaker_state = SLUICE_BREAKER_HALF_OPEN;
	web->v.breaker_shed = SLUICE_PROB_ONE - SLUICE_PROB_ONE * 3 / 10;
	web->in_flight = 9;
	web->ctl.known = 1;                    /* the controller's entry: baseline learned */
	web->ctl.signal = 2;                   /* ok */
	web->ctl.baseline_us = 41500;
	web->ctl.objective_us = 49800;
	web->ctl.latency_us = 52300;           /* the last decided window's */
	web->ctl.top_class_us = 57100;         /* ... its highest busy classes' */
	web->ctl.rec = (struct ctl_recovery){ .known = 1, .shedding_s = 3.5, .since_overload_s = 0.5,
		.last_recovery_s = 21.25, .last_episode_s = 30, .recovered_ago_s = -1 };
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		struct class_status *cs = &web->cls[c];
		cs->threshold = 64 - 8 * c;
		cs->admit_prob = 1.0;
		cs->switch_admit = 1.0;
	}
	web->cls[0].st.arrivals = 50;
	web->cls[0].st.admitted = 42;
	web->cls[0].st.completed = 40;
	web->cls[0].st.errors = 2;
	web->cls[0].st.resp_429 = 1;
	web->cls[0].st.retransmits = 4;
	web->cls[0].st.fail_open = 5;
	web->cls[0].st.rejected[SLUICE_REJ_HEADROOM] = 8;
	web->cls[0].in_flight = 2;
	add(&web->cls[0].hist, 100, 50);       /* [96,112) us */
	add(&web->cls[0].hist, 1000, 40);      /* [896,1024) us */
	add(&web->cls[0].hist, 10000, 10);     /* [8192,10240) us */
	add(&web->cls[0].hist, 5, 3);          /* below the first exposed boundary (16 us) */
	add(&web->cls[0].hist, 500000000, 2);  /* 500 s: the open-ended last bucket */
	web->cls[3].st.rejected[SLUICE_REJ_LADDER] = 17;
	web->cls[3].admit_prob = 0.3;
	web->cls[3].switch_admit = 0.5;
	web->cls[3].in_flight = 7;
	web->untrusted_priority = 12;          /* priority marks ignored (untrusted sources) */

	db = &s->s[1];
	db->idx = 5;
	snprintf(db->svc.name, sizeof(db->svc.name), "db");
	db->svc.port = 5432;
	db->svc.protocol = SLUICE_PROTO_TCP;
	db->v.limit = 16;
	db->v.breaker_state = SLUICE_BREAKER_OPEN;
	db->untrusted_priority = -1;           /* pins that predate the count */
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		db->cls[c].admit_prob = 1.0;
		db->cls[c].switch_admit = 1.0;
	}
	db->cls[1].st.admitted = 1234567890123ULL;
	add(&db->cls[1].hist, 2000, 1);

	if (!x)
		return;
	memset(x, 0, sizeof(*x));
	x->s = calloc(2, sizeof(*x->s));
	x->cap = 2;
	x->cascade_suspended = 1;
	x->cascade_triggers = 2;
	x->config_reloads = 3;
	x->config_reload_failures = 1;
	x->events_dropped = 5;
	x->log_dropped = 7;
	x->switch_file_error = 0;
	x->node_on = 1;
	x->node_admit[0] = x->node_admit[1] = x->node_admit[2] = 1;
	x->node_admit[3] = 0.25;
	x->node_pressure_pct = 62.5;
	x->n = 2;
	/* deliberately in the other order than the snapshot: matched by idx */
	x->s[0].idx = 5;
	x->s[0].breaker_admit = 0;
	x->s[0].breaker_opens = 6;
	x->s[0].breaker_false_opens = 1;
	x->s[0].effective_ratio = 0.5;
	x->s[0].retry_amplification = 2.5;
	x->s[0].retry_storm_active = 1;
	x->s[1].idx = 0;
	x->s[1].breaker_admit = 0.3;
	x->s[1].breaker_opens = 1;
	x->s[1].overload_seconds = 12.5;
	x->s[1].uptime_seconds = 3600;
	x->s[1].effective_ratio = 0.92;
	x->s[1].retry_amplification = 1.1;
	x->s[1].latency_target_seconds = 0.05;
	x->s[1].degradation_actions = 4;
	x->s[1].degradation_effective = 3;
	x->s[1].sw[3].active = 1;
	x->s[1].sw[3].shed_ratio = 0.5;
	x->s[1].sw[3].age_s = 90;
	x->s[1].sw[3].ttl_left_s = 1710;
}

static char *render(const struct status_snapshot *s, const struct metrics_extra *x)
{
	char *out = NULL;
	size_t len = 0;

	assert_int_equal(metrics_render(s, x, &out, &len), 0);
	assert_non_null(out);
	assert_int_equal(strlen(out), len);
	return out;
}

/* The text holds this exact line. */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line))) {
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return 1;
		p += n;
	}
	return 0;
}

#define assert_line(text, line) do {                                            \
	if (!has_line((text), (line)))                                          \
		fail_msg("missing line: %s", (line));                           \
} while (0)

#define assert_no_line_prefix(text, prefix) do {                               \
	if (has_prefix_line((text), (prefix)))                                  \
		fail_msg("unexpected line starting: %s", (prefix));             \
} while (0)

static int has_prefix_line(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	const char *p = text;

	while ((p = strstr(p, prefix))) {
		if (p == text || p[-1] == '\n')
			return 1;
		p += n;
	}
	return 0;
}

/* Value of the sample line that starts with "prefix " (name + labels). -1 if absent. */
static double value_of(const char *text, const char *series)
{
	size_t n = strlen(series);
	const char *p = text;

	while ((p = strstr(p, series))) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	return -1;
}

/* ---------------------------------------------------------------- render tests */

static void test_exact_lines(void **st)
{
	struct status_snapshot s;
	struct metrics_extra x;
	char *t;
	(void)st;

	make_snapshot(&s, &x);
	t = render(&s, &x);
	assert_line(t, "# TYPE sluice_requests_admitted_total counter");
	assert_line(t, "sluice_requests_admitted_total{service=\"web\",class=\"L0\"} 42");
	assert_line(t, "sluice_requests_admitted_total{service=\"db\",class=\"L1\"} 1234567890123");
	assert_line(t, "sluice_requests_arrived_total{service=\"web\",class=\"L0\"} 50");
	assert_line(t, "sluice_requests_completed_total{service=\"web\",class=\"L0\"} 40");
	assert_line(t, "sluice_request_errors_total{service=\"web\",class=\"L0\"} 2");
	assert_line(t, "sluice_responses_429_total{service=\"web\",class=\"L0\"} 1");
	assert_line(t, "sluice_retransmits_total{service=\"web\",class=\"L0\"} 4");
	assert_line(t, "sluice_fail_open_admits_total{service=\"web\",class=\"L0\"} 5");
	/* every reason present, zeros included */
	assert_line(t, "sluice_requests_rejected_total{service=\"web\",class=\"L0\",reason=\"switch\"} 0");
	assert_line(t, "sluice_requests_rejected_total{service=\"web\",class=\"L0\",reason=\"breaker\"} 0");
	assert_line(t, "sluice_requests_rejected_total{service=\"web\",class=\"L0\",reason=\"headroom\"} 8");
	assert_line(t, "sluice_requests_rejected_total{service=\"web\",class=\"L0\",reason=\"ladder\"} 0");
	assert_line(t, "sluice_requests_rejected_total{service=\"web\",class=\"L0\",reason=\"client_limit\"} 0");
	assert_line(t, "sluice_requests_rejected_total{service=\"web\",class=\"L3\",reason=\"ladder\"} 17");
	assert_line(t, "sluice_requests_rejected_total{service=\"db\",class=\"L2\",reason=\"client_limit\"} 0");
	assert_line(t, "sluice_in_flight{service=\"web\",class=\"L3\"} 7");
	assert_line(t, "sluice_in_flight{service=\"db\",class=\"L0\"} 0");
	assert_line(t, "sluice_concurrency_limit{service=\"web\"} 64");
	assert_line(t, "sluice_concurrency_limit{service=\"db\"} 16");
	assert_line(t, "sluice_class_threshold{service=\"web\",class=\"L2\"} 48");
	assert_line(t, "sluice_ladder_admit_ratio{service=\"web\",class=\"L3\"} 0.3");
	assert_line(t, "sluice_ladder_admit_ratio{service=\"web\",class=\"L0\"} 1");
	assert_line(t, "sluice_breaker_state{service=\"web\"} 2");
	assert_line(t, "sluice_breaker_state{service=\"db\"} 1");
	assert_line(t, "sluice_breaker_admit_ratio{service=\"web\"} 0.3");
	assert_line(t, "sluice_breaker_admit_ratio{service=\"db\"} 0");
	assert_line(t, "sluice_breaker_opens_total{service=\"db\"} 6");
	assert_line(t, "sluice_breaker_opens_total{service=\"web\"} 1");
	assert_line(t, "# TYPE sluice_untrusted_priority_total counter");
	assert_line(t, "sluice_untrusted_priority_total{service=\"web\"} 12");
	assert_null(strstr(t, "sluice_untrusted_priority_total{service=\"db\"}"));
	assert_line(t, "sluice_service_info{service=\"web\",protocol=\"http\",port=\"8080\"} 1");
	assert_line(t, "sluice_service_info{service=\"db\",protocol=\"tcp\",port=\"5432\"} 1");
	/* switches */
	assert_line(t, "sluice_switch_shed_ratio{service=\"web\",class=\"L3\"} 0.5");
	assert_line(t, "sluice_switch_shed_ratio{service=\"web\",class=\"L0\"} 0");
	assert_line(t, "sluice_switch_active{service=\"web\",class=\"L3\"} 1");
	assert_line(t, "sluice_switch_active{service=\"web\",class=\"L2\"} 0");
	assert_line(t, "sluice_switch_age_seconds{service=\"web\",class=\"L3\"} 90");
	assert_line(t, "sluice_switch_ttl_seconds{service=\"web\",class=\"L3\"} 1710");
	assert_no_line_prefix(t, "sluice_switch_age_seconds{service=\"web\",class=\"L2\"}");
	/* the five measures */
	assert_line(t, "sluice_effective_request_ratio{service=\"web\"} 0.92");
	assert_line(t, "sluice_effective_request_ratio{service=\"db\"} 0.5");
	assert_line(t, "sluice_overload_seconds_total{service=\"web\"} 12.5");
	assert_line(t, "sluice_managed_seconds_total{service=\"web\"} 3600");
	assert_line(t, "sluice_breaker_false_opens_total{service=\"db\"} 1");
	assert_line(t, "sluice_degradation_actions_total{service=\"web\"} 4");
	assert_line(t, "sluice_degradation_effective_total{service=\"web\"} 3");
	assert_line(t, "sluice_retry_amplification_ratio{service=\"web\"} 1.1");
	assert_line(t, "sluice_retry_amplification_ratio{service=\"db\"} 2.5");
	assert_line(t, "sluice_retry_storm_active{service=\"db\"} 1");
	assert_line(t, "sluice_retry_storm_active{service=\"web\"} 0");
	assert_line(t, "sluice_latency_target_seconds{service=\"web\"} 0.05");
	/* the HELP says what docs/METRICS.md says: every algorithm has an objective, and a
	 * flow table that is full is not the only way a unit goes untracked */
	assert_line(t, "# HELP sluice_latency_target_seconds Latency objective in force, whatever "
		    "the limit algorithm (0: not known yet).");
	/* what counts as overloaded is what update_books() counts and docs/METRICS.md says, not
	 * a limit below 70 % of its maximum (a limit follows demand down in calm) */
	assert_line(t, "# HELP sluice_overload_seconds_total Measure 2: time overloaded, the "
		    "latency objective missed or the priority ladder shedding a class (share goal "
		    "< 1%).");
	assert_line(t, "# HELP sluice_requests_untracked_total Units admitted without a slot, not "
		    "counted in in-flight: the flow table was full, or a refusal could not be "
		    "answered cleanly.");
	/* what the limit steers by, from the controller's pinned entry; db has none: left out */
	assert_line(t, "sluice_latency_baseline_seconds{service=\"web\"} 0.0415");
	assert_line(t, "sluice_latency_objective_seconds{service=\"web\"} 0.0498");
	assert_line(t, "sluice_latency_signal_seconds{service=\"web\"} 0.0523");
	assert_line(t, "sluice_latency_top_class_seconds{service=\"web\"} 0.0571");
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"ok\"} 1");
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"none\"} 0");
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"thin\"} 0");
	assert_no_line_prefix(t, "sluice_limit_signal{service=\"db\"");
	assert_no_line_prefix(t, "sluice_latency_baseline_seconds{service=\"db\"");
	/* the ladder: shedding since 3.5 s, the last recovery took 21.25 s; db has no entry */
	assert_line(t, "sluice_ladder_shedding_seconds{service=\"web\"} 3.5");
	assert_line(t, "sluice_ladder_last_recovery_seconds{service=\"web\"} 21.25");
	assert_no_line_prefix(t, "sluice_ladder_shedding_seconds{service=\"db\"");
	assert_no_line_prefix(t, "sluice_ladder_last_recovery_seconds{service=\"db\"");
	free(t);
	/* a service the ladder never cut: shedding 0, no recovery yet reads 0 */
	s.s[0].ctl.rec = (struct ctl_recovery){ .known = 1, .shedding_s = -1, .since_overload_s = -1,
		.last_recovery_s = -1, .last_episode_s = -1, .recovered_ago_s = -1 };
	t = render(&s, &x);
	assert_line(t, "sluice_ladder_shedding_seconds{service=\"web\"} 0");
	assert_line(t, "sluice_ladder_last_recovery_seconds{service=\"web\"} 0");
	/* process-wide */
	assert_line(t, "sluice_controller_alive 1");
	assert_line(t, "sluice_controller_heartbeat_age_seconds 0.25");
	assert_line(t, "sluice_packets_malformed_total 7");
	assert_line(t, "sluice_rst_sent_total 3");
	assert_line(t, "sluice_http_replies_sent_total 11");
	assert_line(t, "sluice_cascade_suspended 1");
	assert_line(t, "sluice_cascade_triggers_total 2");
	assert_line(t, "sluice_config_reloads_total{result=\"ok\"} 3");
	assert_line(t, "sluice_config_reloads_total{result=\"error\"} 1");
	assert_line(t, "sluice_events_dropped_total 5");
	assert_line(t, "sluice_log_messages_dropped_total 7");
	assert_line(t, "sluice_switch_file_error 0");
	assert_line(t, "sluice_node_admit_ratio{class=\"L3\"} 0.25");
	assert_line(t, "sluice_node_admit_ratio{class=\"L2\"} 1");
	assert_line(t, "sluice_node_cpu_pressure_percent 62.5");
	assert_true(t[strlen(t) - 1] == '\n');
	free(t);
	/* a limit gone blind (no latency sample for a while) says so: "none" is 1, the others 0;
	 * a window waiting for samples shows "thin" the same way */
	s.s[0].ctl.signal = SLUICE_SIGNAL_NONE;
	t = render(&s, &x);
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"none\"} 1");
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"thin\"} 0");
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"ok\"} 0");
	assert_no_line_prefix(t, "sluice_limit_signal{service=\"db\"");
	free(t);
	s.s[0].ctl.signal = SLUICE_SIGNAL_THIN;
	t = render(&s, &x);
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"none\"} 0");
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"thin\"} 1");
	assert_line(t, "sluice_limit_signal{service=\"web\",state=\"ok\"} 0");
	free(t);
}

/* The breaker as the data path reads the verdict: open refuses all, half-open admits its step,
 * and any other state admits everything, as closed. sluice_breaker_state is 0, 1 or 2 and
 * nothing else, and the admit ratio follows the state, not a share the state does not use. */
static void test_breaker_as_the_data_path_reads_it(void **st)
{
	struct status_snapshot s;
	char *t;
	(void)st;

	make_snapshot(&s, NULL);
	s.s[0].v.breaker_state = 7;                   /* no state the data path knows */
	s.s[0].v.breaker_shed = SLUICE_PROB_ONE / 2;
	s.s[1].v.breaker_shed = 0;                    /* db: open, whatever the share says */
	t = render(&s, NULL);
	assert_line(t, "sluice_breaker_state{service=\"web\"} 0");
	assert_line(t, "sluice_breaker_admit_ratio{service=\"web\"} 1");
	assert_line(t, "sluice_breaker_state{service=\"db\"} 1");
	assert_line(t, "sluice_breaker_admit_ratio{service=\"db\"} 0");
	free(t);
	s.s[0].v.breaker_state = SLUICE_BREAKER_CLOSED;
	t = render(&s, NULL);
	assert_line(t, "sluice_breaker_admit_ratio{service=\"web\"} 1");
	free(t);
	status_free(&s);
}

static void test_histogram_cumulative(void **st)
{
	struct status_snapshot s;
	const char *pre = "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"";
	char *t, *p;
	double last = -1, le_last = -1;
	int nb = 0, inf_seen = 0;
	(void)st;

	make_snapshot(&s, NULL);
	t = render(&s, NULL);
	assert_line(t, "# TYPE sluice_request_duration_seconds histogram");
	/* exact boundaries: 16 us is the first, 128 us holds the 3 + 50 below it */
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"0.000016\"} 3");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"0.000096\"} 3");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"0.000128\"} 53");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"0.001024\"} 93");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"0.008192\"} 93");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"0.012288\"} 103");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"67.108864\"} 103");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"100.663296\"} 103");
	/* the 500 s samples are only in +Inf */
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"web\",class=\"L0\",le=\"+Inf\"} 105");
	assert_line(t, "sluice_request_duration_seconds_count{service=\"web\",class=\"L0\"} 105");
	/* sum: 15 + 5000 + 40000 + 100000 + 1e9 us */
	assert_line(t, "sluice_request_duration_seconds_sum{service=\"web\",class=\"L0\"} 1000.145015");
	/* empty class: every bucket present, all zero */
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"db\",class=\"L3\",le=\"+Inf\"} 0");
	assert_line(t, "sluice_request_duration_seconds_count{service=\"db\",class=\"L3\"} 0");
	assert_line(t, "sluice_request_duration_seconds_sum{service=\"db\",class=\"L3\"} 0");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"db\",class=\"L1\",le=\"0.002048\"} 1");
	assert_line(t, "sluice_request_duration_seconds_bucket{service=\"db\",class=\"L1\",le=\"0.001536\"} 0");

	/* walk web/L0's buckets: le increasing, counts non-decreasing, +Inf last == count */
	for (p = t; (p = strstr(p, pre)); p++) {
		char *q = p + strlen(pre), *end;
		double le, v;

		if (p != t && p[-1] != '\n')
			continue;
		if (!strncmp(q, "+Inf\"} ", 7)) {
			v = strtod(q + 7, NULL);
			assert_true(v >= last);
			assert_true(v == value_of(t, "sluice_request_duration_seconds_count{service=\"web\",class=\"L0\"}"));
			inf_seen = 1;
			continue;
		}
		assert_false(inf_seen);
		le = strtod(q, &end);
		assert_true(le > le_last);
		assert_memory_equal(end, "\"} ", 3);
		v = strtod(end + 3, NULL);
		assert_true(v >= last);
		le_last = le;
		last = v;
		nb++;
	}
	assert_true(inf_seen);
	/* two boundaries per power of two from 16 us to 100.7 s: a bounded series count */
	assert_int_equal(nb, 46);
	free(t);
}

static void test_label_escaping(void **st)
{
	struct status_snapshot s;
	char *t;
	(void)st;

	make_snapshot(&s, NULL);
	snprintf(s.s[1].svc.name, sizeof(s.s[1].svc.name), "a\"b\\c\nd");
	t = render(&s, NULL);
	assert_line(t, "sluice_concurrency_limit{service=\"a\\\"b\\\\c\\nd\"} 16");
	assert_line(t, "sluice_requests_admitted_total{service=\"a\\\"b\\\\c\\nd\",class=\"L1\"} 1234567890123");
	/* a name filling the whole field (no NUL inside it) is not read past */
	memset(s.s[1].svc.name, 'x', sizeof(s.s[1].svc.name));
	free(t);
	t = render(&s, NULL);
	assert_line(t, "sluice_concurrency_limit{service=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"} 16");
	free(t);
}

/* One sample line (already matched against the grammar) taken apart: its name, its labels
 * other than `le` as written, the `le` value ("" without one) and the value. A label name
 * that appears twice in the line fails. */
struct parsed {
	char name[96], labels[512], le[32];
	double v;
};

static void parse_sample(const char *line, struct parsed *p)
{
	const char *q = line;
	size_t n = strcspn(q, "{ ");
	char seen[8][48];
	int ns = 0;

	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%.*s", (int)n, q);
	q += n;
	if (*q == '{') {
		for (q++; *q != '}';) {
			size_t kl = strcspn(q, "="), vl = 0, used;
			char key[48], val[256];

			snprintf(key, sizeof(key), "%.*s", (int)kl, q);
			for (int i = 0; i < ns; i++)
				if (!strcmp(seen[i], key))
					fail_msg("label %s twice: %s", key, line);
			assert_true(ns < 8);
			snprintf(seen[ns++], sizeof(seen[0]), "%s", key);
			for (q += kl + 2; *q != '"'; q++) {      /* past =" */
				if (*q == '\\')
					val[vl++] = *q++;
				val[vl++] = *q;
				assert_true(vl < sizeof(val) - 2);
			}
			val[vl] = '\0';
			q++;
			used = strlen(p->labels);
			if (!strcmp(key, "le"))
				snprintf(p->le, sizeof(p->le), "%.31s", val);
			else
				snprintf(p->labels + used, sizeof(p->labels) - used, "%s=\"%s\",", key,
					 val);
			if (*q == ',')
				q++;
		}
		q++;
	}
	assert_true(*q == ' ');
	p->v = strtod(q + 1, NULL);
}

/* One histogram series (a family and its labels but `le`): its buckets so far. */
struct hseries {
	char fam[96], labels[512];
	double last_le, last_cum, inf;
	int has_inf, has_sum, has_count;
};

static struct hseries *hseries_of(struct hseries *h, int *nh, int cap, const char *fam,
				  const char *labels, int create)
{
	for (int i = 0; i < *nh; i++)
		if (!strcmp(h[i].fam, fam) && !strcmp(h[i].labels, labels))
			return &h[i];
	if (!create)
		fail_msg("%s{%s}: _sum or _count before its buckets", fam, labels);
	assert_true(*nh < cap);
	memset(&h[*nh], 0, sizeof(h[*nh]));
	snprintf(h[*nh].fam, sizeof(h[*nh].fam), "%s", fam);
	snprintf(h[*nh].labels, sizeof(h[*nh].labels), "%s", labels);
	h[*nh].last_le = -1;
	return &h[(*nh)++];
}

/* A sample of histogram family fam: buckets with `le` rising and counts never falling,
 * +Inf last, then _sum and _count, _count equal to +Inf. */
static void check_histogram_sample(struct hseries *h, int *nh, int cap, const char *fam,
				   const char *line)
{
	struct parsed p;
	struct hseries *r;
	const char *suffix;

	parse_sample(line, &p);
	suffix = p.name + strlen(fam);
	if (!strcmp(suffix, "_bucket")) {
		if (!p.le[0])
			fail_msg("bucket without le: %s", line);
		r = hseries_of(h, nh, cap, fam, p.labels, 1);
		if (r->has_inf)
			fail_msg("bucket after le=\"+Inf\": %s", line);
		if (p.v < r->last_cum)
			fail_msg("cumulative count falls: %s", line);
		r->last_cum = p.v;
		if (!strcmp(p.le, "+Inf")) {
			r->has_inf = 1;
			r->inf = p.v;
			return;
		}
		if (strtod(p.le, NULL) <= r->last_le)
			fail_msg("le does not rise: %s", line);
		r->last_le = strtod(p.le, NULL);
		return;
	}
	if (p.le[0])
		fail_msg("le outside a bucket: %s", line);
	r = hseries_of(h, nh, cap, fam, p.labels, 0);
	if (!r->has_inf)
		fail_msg("%s before le=\"+Inf\"", line);
	if (!strcmp(suffix, "_sum")) {
		if (!(p.v >= 0) || isinf(p.v))
			fail_msg("bad sum: %s", line);
		r->has_sum++;
	} else {
		if (p.v != r->inf)
			fail_msg("_count is not the +Inf bucket: %s", line);
		r->has_count++;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The whole text is UTF-8 (a scraper refuses the exposition for one label value that is not;
 * jansson's check, not the renderer's own). */
static void check_utf8(const char *text)
{
	json_t *j = json_stringn(text, strlen(text));

	if (!j)
		fail_msg("the exposition is not valid UTF-8");
	json_decref(j);
}

/* The text format, strictly: every non-comment line matches the sample grammar; its family
 * has one HELP and one TYPE before it and its samples are contiguous; TYPE counter names end
 * in _total and their values are finite and not negative; no series (name and labels) twice,
 * no label name twice in a sample; HELP text escapes only \\ and \n; histograms as
 * check_histogram_sample says, each with its _sum and _count; the text is UTF-8. Returns how
 * many samples it checked. */
static int check_exposition(const char *text)
{
	static const char *sample_re =
		"^([a-zA-Z_:][a-zA-Z0-9_:]*)"
		"(\\{[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\\n]|\\\\[\\\\\"n])*\""
		"(,[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\\n]|\\\\[\\\\\"n])*\")*\\})?"
		" (NaN|[+-]Inf|[-+]?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?)$";
	struct fam { char name[96], type[16]; int help, done; } fams[128];
	static struct hseries hs[256];
	int nf = 0, cur = -1, samples = 0, nh = 0, nseries = 0;
	regex_t re;
	char *copy = strdup(text), *save = NULL, *line, **series;

	check_utf8(text);
	for (const char *c = text; *c; c++)
		nseries += *c == '\n';
	series = calloc((size_t)nseries + 1, sizeof(*series));
	nseries = 0;
	assert_non_null(copy);
	assert_non_null(series);
	assert_int_equal(regcomp(&re, sample_re, REG_EXTENDED), 0);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		regmatch_t m[2];
		char name[96], fname[96];
		int f;

		if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
			char nm[96], rest[128] = "";

			assert_int_equal(sscanf(line + 7, "%95s %127s", nm, rest), 2);
			for (f = 0; f < nf && strcmp(fams[f].name, nm); f++)
				;
			if (f == nf) {
				assert_true(nf < 128);
				memset(&fams[nf], 0, sizeof(fams[nf]));
				snprintf(fams[nf].name, sizeof(fams[nf].name), "%s", nm);
				nf++;
			}
			if (fams[f].done || (f == cur && samples))
				fail_msg("HELP or TYPE of %s after its samples", nm);
			if (line[2] == 'H') {
				if (fams[f].help)
					fail_msg("second HELP for %s", nm);
				fams[f].help = 1;
				for (const char *h = strchr(line + 7, ' '); *h; h++) {
					if (*h != '\\')
						continue;
					if (h[1] != '\\' && h[1] != 'n')
						fail_msg("HELP of %s: a backslash not escaped", nm);
					h++;
				}
			} else {
				if (fams[f].type[0])
					fail_msg("second TYPE for %s", nm);
				snprintf(fams[f].type, sizeof(fams[f].type), "%s", rest);
				assert_true(!strcmp(rest, "counter") || !strcmp(rest, "gauge") ||
					    !strcmp(rest, "histogram"));
				if (!strcmp(rest, "counter")) {
					size_t l = strlen(nm);
					assert_true(l > 6 && !strcmp(nm + l - 6, "_total"));
				}
			}
			assert_int_equal(strncmp(nm, "sluice_", 7), 0);
			continue;
		}
		if (line[0] == '#')
			fail_msg("unexpected comment: %s", line);
		if (regexec(&re, line, 2, m, 0))
			fail_msg("bad sample line: %s", line);
		snprintf(name, sizeof(name), "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line);
		snprintf(fname, sizeof(fname), "%s", name);
		for (f = 0; f < nf && strcmp(fams[f].name, fname); f++)
			;
		if (f == nf) {   /* histogram parts */
			static const char *suf[] = { "_bucket", "_sum", "_count" };
			for (int k = 0; k < 3 && f == nf; k++) {
				size_t l = strlen(name), sl = strlen(suf[k]);
				if (l > sl && !strcmp(name + l - sl, suf[k])) {
					snprintf(fname, sizeof(fname), "%.*s", (int)(l - sl), name);
					for (f = 0; f < nf && strcmp(fams[f].name, fname); f++)
						;
					if (f < nf && strcmp(fams[f].type, "histogram"))
						f = nf;
				}
			}
		}
		if (f == nf)
			fail_msg("sample without HELP/TYPE: %s", line);
		assert_true(fams[f].help);
		assert_true(fams[f].type[0]);
		if (f != cur) {
			if (fams[f].done)
				fail_msg("family %s is not contiguous", fams[f].name);
			if (cur >= 0)
				fams[cur].done = 1;
			cur = f;
		}
		{
			struct parsed p;

			parse_sample(line, &p);
			if (!strcmp(fams[f].type, "counter") && (!(p.v >= 0) || isinf(p.v)))
				fail_msg("counter not a finite count: %s", line);
			if (strcmp(fams[f].type, "histogram") && p.le[0])
				fail_msg("le outside a histogram: %s", line);
		}
		if (!strcmp(fams[f].type, "histogram"))
			check_histogram_sample(hs, &nh, 256, fams[f].name, line);
		series[nseries] = strndup(line, strrchr(line, ' ') - line);
		assert_non_null(series[nseries]);
		nseries++;
		samples++;
	}
	for (int i = 0; i < nh; i++)
		if (hs[i].has_sum != 1 || hs[i].has_count != 1)
			fail_msg("%s{%s}: _sum and _count once each", hs[i].fam, hs[i].labels);
	qsort(series, (size_t)nseries, sizeof(*series), cmp_str);
	for (int i = 1; i < nseries; i++)
		if (!strcmp(series[i - 1], series[i]))
			fail_msg("series twice: %s", series[i]);
	for (int i = 0; i < nseries; i++)
		free(series[i]);
	free(series);
	regfree(&re);
	free(copy);
	return samples;
}

static void test_grammar_and_help_type(void **st)
{
	struct status_snapshot s;
	struct metrics_extra x;
	char *t;
	(void)st;

	make_snapshot(&s, &x);
	snprintf(s.s[1].svc.name, sizeof(s.s[1].svc.name), "we\"ird\\name\n");
	s.s[0].cls[2].admit_prob = 1.0 / 3;
	x.s[0].effective_ratio = 0.0 / 0.0;    /* NaN must still be a valid sample */
	t = render(&s, &x);
	assert_true(check_exposition(t) > 100);
	assert_line(t, "sluice_effective_request_ratio{service=\"we\\\"ird\\\\name\\n\"} NaN");
	free(t);

	/* no controller extras, no services at all */
	memset(&s, 0, sizeof(s));
	s.heartbeat_age_s = -1;
	t = render(&s, NULL);
	assert_line(t, "sluice_controller_alive 0");
	assert_no_line_prefix(t, "sluice_controller_heartbeat_age_seconds ");
	assert_line(t, "# TYPE sluice_requests_admitted_total counter");
	free(t);
}

static void test_without_extra(void **st)
{
	struct status_snapshot s;
	struct metrics_extra x;
	char *t;
	(void)st;

	/* extras only for db: web falls back to what the verdict says, and has no measures */
	make_snapshot(&s, &x);
	x.n = 1;
	t = render(&s, &x);
	assert_true(check_exposition(t) > 100);
	assert_line(t, "sluice_switch_shed_ratio{service=\"web\",class=\"L3\"} 0.5");
	assert_line(t, "sluice_switch_active{service=\"web\",class=\"L3\"} 1");
	assert_line(t, "sluice_switch_shed_ratio{service=\"web\",class=\"L0\"} 0");   /* admit 1: no shed */
	assert_line(t, "sluice_switch_active{service=\"web\",class=\"L0\"} 0");
	/* fixed point from the verdict: 19660 / 65536 */
	assert_true(fabs(value_of(t, "sluice_breaker_admit_ratio{service=\"web\"}") - 0.3) < 1e-4);
	assert_no_line_prefix(t, "sluice_effective_request_ratio{service=\"web\"}");
	assert_no_line_prefix(t, "sluice_switch_age_seconds{");
	assert_line(t, "sluice_effective_request_ratio{service=\"db\"} 0.5");
	free(t);

	t = render(&s, NULL);
	assert_true(check_exposition(t) > 100);
	assert_no_line_prefix(t, "sluice_cascade_suspended");
	assert_no_line_prefix(t, "sluice_node_admit_ratio");
	assert_line(t, "# TYPE sluice_effective_request_ratio gauge");
	assert_no_line_prefix(t, "sluice_effective_request_ratio{");
	free(t);
}

/* The checker over the states a daemon goes through: nothing configured, the controller not
 * reporting yet, a service whose pins predate most counts, the wait probe on, the node
 * arbitration on, interfaces in every XDP mode, counters at their largest, histograms with a
 * sample in every bucket. */
static void test_exposition_over_states(void **st)
{
	static const char *const modes[] = { "native", "generic", "offload", "none", "" };
	struct status_snapshot s;
	struct metrics_extra x;
	char *t;
	(void)st;

	/* no services, no controller rows */
	memset(&s, 0, sizeof(s));
	s.heartbeat_age_s = -1;
	t = render(&s, NULL);
	assert_true(check_exposition(t) > 5);
	free(t);
	t = render(NULL, NULL);
	assert_true(check_exposition(t) > 5);
	free(t);
	memset(&x, 0, sizeof(x));
	x.node_on = 1;
	x.read_wait_probe = 1;
	t = render(&s, &x);
	assert_true(check_exposition(t) > 5);
	free(t);

	/* services the controller has no rows for yet */
	make_snapshot(&s, &x);
	x.n = 0;
	t = render(&s, &x);
	assert_true(check_exposition(t) > 100);
	free(t);

	/* everything at once: the probe, node arbitration, interfaces, no controller entry or
	 * open-connection count for db, counters at their largest, every bucket filled */
	make_snapshot(&s, &x);
	x.read_wait_probe = 1;
	x.s[0].have_wait = 1;
	x.s[0].waits = 12;
	x.s[0].wait_ns = 3000000000ull;
	x.s[0].window_wait_s = -1;
	x.s[1].have_wait = 1;
	x.s[1].window_wait_s = 0.004;
	x.s[1].wait_trims = 2;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		s.s[1].cls[c].open = -1;
	s.s[1].cls[2].st.arrivals = ~0ull;
	s.pkt.service = ~0ull;
	for (unsigned i = 0; i < SLUICE_HIST_BUCKETS; i++)
		s.s[0].cls[1].hist.bucket[i] = i + 1;
	s.n_ifaces = 5;
	for (int i = 0; i < s.n_ifaces; i++) {
		snprintf(s.ifaces[i].name, sizeof(s.ifaces[i].name), "eth%d", i);
		snprintf(s.ifaces[i].xdp_mode, sizeof(s.ifaces[i].xdp_mode), "%s", modes[i]);
	}
	t = render(&s, &x);
	assert_true(check_exposition(t) > 100);
	assert_line(t, "sluice_xdp_mode{interface=\"eth1\",mode=\"generic\"} 1");
	assert_line(t, "sluice_requests_arrived_total{service=\"db\",class=\"L2\"} 18446744073709551615");
	assert_line(t, "sluice_read_waits_total{service=\"db\"} 12");
	assert_no_line_prefix(t, "sluice_read_wait_window_seconds{service=\"db\"}");
	assert_line(t, "sluice_read_wait_window_seconds{service=\"web\"} 0.004");
	free(t);
}

/* The families docs/METRICS.md lists in its tables ("| `sluice_...` |" rows) are exactly the
 * families a full exposition declares: none documented that is not there, none there that
 * is not documented. */
static void test_documented_families(void **st)
{
	const char *dir = getenv("SLUICE_SRCDIR");
	char path[512], line[4096], doc[128][96], *t;
	int nd = 0, nh = 0;
	struct status_snapshot s;
	struct metrics_extra x;
	FILE *f;
	(void)st;

	snprintf(path, sizeof(path), "%s%sdocs/METRICS.md", dir ? dir : "", dir ? "/" : "");
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot read %s (run from the repository, or set SLUICE_SRCDIR)", path);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "| `sluice_", 10)) {
			assert_true(nd < 128);
			assert_int_equal(sscanf(line + 3, "%95[a-z0-9_]", doc[nd]), 1);
			nd++;
		}
	fclose(f);
	make_snapshot(&s, &x);
	x.read_wait_probe = 1;
	s.n_ifaces = 1;
	snprintf(s.ifaces[0].name, sizeof(s.ifaces[0].name), "eth0");
	t = render(&s, &x);
	for (const char *p = t; (p = strstr(p, "# HELP ")); p++) {
		char fam[96];
		int k;

		assert_int_equal(sscanf(p + 7, "%95s", fam), 1);
		for (k = 0; k < nd && strcmp(doc[k], fam); k++)
			;
		if (k == nd)
			fail_msg("%s is not in docs/METRICS.md", fam);
		nh++;
	}
	for (int k = 0; k < nd; k++) {
		char help[128];

		snprintf(help, sizeof(help), "# HELP %.95s ", doc[k]);
		if (!strstr(t, help))
			fail_msg("docs/METRICS.md lists %s, which /metrics does not have", doc[k]);
	}
	assert_int_equal(nh, nd);
	free(t);
}

/* A label value is UTF-8 whatever the bytes behind it: an interface name is what the kernel
 * took (any byte but '/', ':' and spaces), and one byte that is not UTF-8 in a label value
 * makes a scraper refuse the whole exposition. Such a byte shows as U+FFFD; a name that is
 * UTF-8 is written as it is. */
static void test_label_values_are_utf8(void **st)
{
	struct status_snapshot s;
	struct metrics_extra x;
	char *t;
	(void)st;

	make_snapshot(&s, &x);
	s.n_ifaces = 3;
	snprintf(s.ifaces[0].name, sizeof(s.ifaces[0].name), "veth\xff" "0");
	snprintf(s.ifaces[0].xdp_mode, sizeof(s.ifaces[0].xdp_mode), "native");
	snprintf(s.ifaces[1].name, sizeof(s.ifaces[1].name), "br\xc3");      /* cut short */
	snprintf(s.ifaces[2].name, sizeof(s.ifaces[2].name), "caf\xc3\xa9");  /* UTF-8 */
	snprintf(s.s[1].svc.name, sizeof(s.s[1].svc.name), "d\xe0\x80\x80" "b"); /* overlong */
	t = render(&s, &x);
	assert_true(check_exposition(t) > 100);
	assert_line(t, "sluice_interface_attached{interface=\"veth\xef\xbf\xbd" "0\"} 1");
	assert_line(t, "sluice_xdp_mode{interface=\"veth\xef\xbf\xbd" "0\",mode=\"native\"} 1");
	assert_line(t, "sluice_interface_attached{interface=\"br\xef\xbf\xbd\"} 1");
	assert_line(t, "sluice_interface_attached{interface=\"caf\xc3\xa9\"} 1");
	assert_line(t, "sluice_concurrency_limit{service=\"d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b\"} 16");
	free(t);
	/* a whole field of bytes that are not UTF-8, no NUL: three bytes out for each */
	memset(s.s[1].svc.name, 0xfe, sizeof(s.s[1].svc.name));
	t = render(&s, &x);
	assert_true(check_exposition(t) > 100);
	free(t);
}

/* ---------------------------------------------------------------- HTTP server */

struct body_ctx {
	int fail;
	int calls;
};

static int body_fn(void *ctx, char **body, size_t *len)
{
	struct body_ctx *c = ctx;
	struct status_snapshot s;
	struct metrics_extra x;

	c->calls++;
	if (c->fail)
		return -1;
	make_snapshot(&s, &x);
	return metrics_render(&s, &x, body, len);
}

/* One request over a plain TCP socket; returns the whole response (malloc'd). */
static char *http(int family, int port, const char *req)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct timeval tv = { 5, 0 };
	size_t cap = 65536, len = 0;
	char *resp = malloc(cap);
	int fd;
	ssize_t n;

	assert_non_null(resp);
	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	}
	fd = socket(family, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ss, sl))
		fail_msg("connect to port %d: %s", port, strerror(errno));
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while ((n = read(fd, resp + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 2) {
			cap *= 2;
			resp = realloc(resp, cap);
			assert_non_null(resp);
		}
	}
	resp[len] = '\0';
	close(fd);
	return resp;
}

static int status_code(const char *resp)
{
	int code = 0;

	if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
		return -1;
	return code;
}

static const char *body_of(const char *resp)
{
	const char *p = strstr(resp, "\r\n\r\n");
	return p ? p + 4 : "";
}

static void test_server_roundtrip(void **st)
{
	struct body_ctx ctx = { 0, 0 };
	char err[256], *r, *want;
	size_t wlen;
	struct metrics_server *srv;
	struct status_snapshot s;
	struct metrics_extra x;
	int port;
	(void)st;

	srv = metrics_start("127.0.0.1:0", body_fn, &ctx, err, sizeof(err));
	if (!srv)
		fail_msg("metrics_start: %s", err);
	port = metrics_port(srv);
	assert_true(port > 0 && port < 65536);

	r = http(AF_INET, port, "GET /metrics HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 200);
	assert_non_null(strcasestr(r, "\r\nContent-Type: text/plain; version=0.0.4"));
	make_snapshot(&s, &x);
	assert_int_equal(metrics_render(&s, &x, &want, &wlen), 0);
	assert_string_equal(body_of(r), want);
	assert_line(body_of(r), "sluice_requests_admitted_total{service=\"web\",class=\"L0\"} 42");
	free(want);
	free(r);
	assert_int_equal(ctx.calls, 1);

	/* query strings are fine */
	r = http(AF_INET, port, "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
	assert_int_equal(status_code(r), 200);
	free(r);

	r = http(AF_INET, port, "GET /nope HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 404);
	assert_non_null(strstr(body_of(r), "/metrics"));
	free(r);

	r = http(AF_INET, port, "GET / HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 200);
	assert_non_null(strstr(body_of(r), "/metrics"));
	free(r);

	r = http(AF_INET, port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc");
	assert_int_equal(status_code(r), 405);
	assert_non_null(strcasestr(r, "\r\nAllow: GET"));
	free(r);

	r = http(AF_INET, port, "DELETE /metrics HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 405);
	free(r);

	ctx.fail = 1;
	r = http(AF_INET, port, "GET /metrics HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 500);
	free(r);
	metrics_stop(srv);

	/* stopped: the port no longer answers */
	{
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(fd >= 0);
		assert_int_not_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		close(fd);
	}
}

/* The status of one GET /metrics over IPv4 loopback, -1 when there is no answer within 5 s.
 * Never fails the test itself, so a caller holding sockets gets to close them. */
static int scrape_status(int port)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { 5, 0 };
	char head[64] = "";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), code = -1;
	size_t len = 0;
	ssize_t n = 0;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (!connect(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1) {
		while (len < sizeof(head) - 1 &&
		       (n = read(fd, head + len, sizeof(head) - 1 - len)) > 0)
			len += (size_t)n;
		head[len] = '\0';
		code = status_code(head);
	}
	close(fd);
	return code;
}

/* A local process holding more connections than the server serves at a time, each with a
 * request head it never finishes (a header line now and then keeps libmicrohttpd's idle
 * timeout away), does not keep a scrape out: the scrape's connection closes the oldest of
 * them, and is answered. Loopback only; every socket is closed. */
static void test_server_scrape_past_held_connections(void **st)
{
	enum { HOLDERS = 70 };               /* more than the 64 served at a time */
	static const char partial[] = "GET /metrics HTTP/1.1\r\nHost: a\r\nX-Slow: 1\r\n";
	struct body_ctx ctx = { 0, 0 };
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { 5, 0 };
	int fd[HOLDERS], held = 0, port;
	struct metrics_server *srv;
	char err[256];
	(void)st;

	srv = metrics_start("127.0.0.1:0", body_fn, &ctx, err, sizeof(err));
	if (!srv)
		fail_msg("metrics_start: %s", err);
	port = metrics_port(srv);
	a.sin_port = htons((uint16_t)port);
	for (int i = 0; i < HOLDERS; i++) {
		fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd[i] < 0)
			break;
		held++;
		setsockopt(fd[i], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)); /* bounds connect */
		if (connect(fd[i], (struct sockaddr *)&a, sizeof(a)) ||
		    write(fd[i], partial, sizeof(partial) - 1) != (ssize_t)sizeof(partial) - 1)
			break;
	}
	/* The scrape comes after all of them (the listen queue is first come, first served). */
	int code = scrape_status(port), code2 = scrape_status(port);

	for (int i = 0; i < held; i++)
		close(fd[i]);
	metrics_stop(srv);
	assert_int_equal(held, HOLDERS);
	assert_int_equal(code, 200);
	assert_int_equal(code2, 200);
}

/* ":PORT" (empty host) listens on every address: reachable over IPv4 loopback. */
static void test_server_any_address(void **st)
{
	struct body_ctx ctx = { 0, 0 };
	char err[256], *r;
	struct metrics_server *srv;
	(void)st;

	srv = metrics_start(":0", body_fn, &ctx, err, sizeof(err));
	if (!srv)
		fail_msg("metrics_start :0: %s", err);
	r = http(AF_INET, metrics_port(srv), "GET /metrics HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 200);
	free(r);
	metrics_stop(srv);

	/* a name is resolved: localhost is 127.0.0.1 or ::1, whichever the resolver gives first */
	srv = metrics_start("localhost:0", body_fn, &ctx, err, sizeof(err));
	if (!srv)
		fail_msg("metrics_start localhost:0: %s", err);
	{
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons((uint16_t)metrics_port(srv)),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM, 0), v4;

		assert_true(fd >= 0);
		v4 = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		r = http(v4 ? AF_INET : AF_INET6, metrics_port(srv), "GET /metrics HTTP/1.0\r\n\r\n");
	}
	assert_int_equal(status_code(r), 200);
	free(r);
	metrics_stop(srv);
}

/* A free port found by binding port 0 and closing, then served by name. */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void test_server_fixed_port_and_busy(void **st)
{
	struct body_ctx ctx = { 0, 0 };
	char addr[64], err[256], *r;
	struct metrics_server *srv, *srv2;
	int port = free_port();
	(void)st;

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	srv = metrics_start(addr, body_fn, &ctx, err, sizeof(err));
	if (!srv)
		fail_msg("metrics_start %s: %s", addr, err);
	assert_int_equal(metrics_port(srv), port);
	r = http(AF_INET, port, "GET /metrics HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 200);
	free(r);

	/* the same port twice: refused with the reason */
	err[0] = '\0';
	srv2 = metrics_start(addr, body_fn, &ctx, err, sizeof(err));
	assert_null(srv2);
	assert_non_null(strstr(err, "in use"));
	metrics_stop(srv);
	metrics_stop(NULL);
	assert_int_equal(metrics_port(NULL), -1);
}

static void test_server_ipv6(void **st)
{
	struct body_ctx ctx = { 0, 0 };
	char err[256], *r;
	struct metrics_server *srv;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	(void)st;

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		if (fd >= 0)
			close(fd);
		/* tests/run.sh accepts a skip only with a reason it allows. */
		print_message("# skip reason: no IPv6 on this host's loopback\n");
		skip();
	}
	close(fd);
	srv = metrics_start("[::1]:0", body_fn, &ctx, err, sizeof(err));
	if (!srv)
		fail_msg("metrics_start [::1]:0: %s", err);
	r = http(AF_INET6, metrics_port(srv), "GET /metrics HTTP/1.0\r\n\r\n");
	assert_int_equal(status_code(r), 200);
	assert_line(body_of(r), "sluice_concurrency_limit{service=\"web\"} 64");
	free(r);
	metrics_stop(srv);
}

static void test_bad_addresses(void **st)
{
	static const struct { const char *addr, *why; } bad[] = {
		{ "", "empty" },
		{ "9477", "HOST:PORT" },
		{ "127.0.0.1", "HOST:PORT" },
		{ "127.0.0.1:", "port" },
		{ "127.0.0.1:http", "port" },
		{ "127.0.0.1:99999", "port" },
		{ "127.0.0.1:65536", "port" },
		{ "127.0.0.1:-1", "port" },
		{ "127.0.0.1:+80", "port" },
		{ "127.0.0.1:80x", "port" },
		{ "127.0.0.1: 80", "port" },
		{ "::1:9477", "[ADDR]:PORT" },
		{ "[::1]9477", "[IPV6]:PORT" },
		{ "[::1", "]" },
		{ "no-such-host.invalid:9477", "resolve" },
		{ "192.0.2.1:9477", "cannot listen" },   /* not a local address */
	};
	struct body_ctx ctx = { 0, 0 };
	char err[256];
	(void)st;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct metrics_server *srv;

		err[0] = '\0';
		srv = metrics_start(bad[i].addr, body_fn, &ctx, err, sizeof(err));
		if (srv) {
			metrics_stop(srv);
			fail_msg("accepted bad address '%s'", bad[i].addr);
		}
		if (!strstr(err, bad[i].why))
			fail_msg("address '%s': error '%s' does not mention '%s'", bad[i].addr, err,
				 bad[i].why);
	}
	/* NULL address, NULL err buffer: refused, no crash */
	assert_null(metrics_start(NULL, body_fn, &ctx, err, sizeof(err)));
	assert_null(metrics_start("127.0.0.1:x", body_fn, &ctx, NULL, 0));
	assert_null(metrics_start("127.0.0.1:0", NULL, &ctx, err, sizeof(err)));
	assert_int_equal(ctx.calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_lines),
		cmocka_unit_test(test_breaker_as_the_data_path_reads_it),
		cmocka_unit_test(test_histogram_cumulative),
		cmocka_unit_test(test_label_escaping),
		cmocka_unit_test(test_grammar_and_help_type),
		cmocka_unit_test(test_without_extra),
		cmocka_unit_test(test_exposition_over_states),
		cmocka_unit_test(test_documented_families),
		cmocka_unit_test(test_label_values_are_utf8),
		cmocka_unit_test(test_server_roundtrip),
		cmocka_unit_test(test_server_scrape_past_held_connections),
		cmocka_unit_test(test_server_fixed_port_and_busy),
		cmocka_unit_test(test_server_ipv6),
		cmocka_unit_test(test_server_any_address),
		cmocka_unit_test(test_bad_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
