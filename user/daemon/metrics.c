// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Prometheus text exposition (format 0.0.4) of a status snapshot plus the controller's own
 * state; metrics_http.c serves it. See metrics.h and docs/METRICS.md.
 *
 * Rules kept here: every family is written once, with # HELP and # TYPE, all its samples
 * together; names carry the unit (_seconds, _ratio) and counters end in _total; label values
 * are escaped (\\, \", \n); numbers are printed in the C locale whatever the process set. */
#define _GNU_SOURCE
#include "daemon/metrics.h"

#include <locale.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/names.h"
#include "common/utf8.h"
#include "control/window.h"

/* ------------------------------------------------------------------ output */

/* The exposition is written to a memory stream (open_memstream): stdio grows the buffer, and
 * a failed allocation shows as an error of the stream when it is closed. */

/* Label value escaping of the text format: backslash, double quote and line feed. A label
 * value must be UTF-8 too (a scraper refuses the whole exposition for one that is not, and
 * an interface name is whatever bytes the kernel took): a byte that is not part of a valid
 * character is written as U+FFFD. dst holds at least LABEL_BUF(n) bytes. */
#define LABEL_BUF(n) (3 * (n) + 1)

static void escape_label(char *dst, const char *s, size_t n)
{
	char clean[LABEL_BUF(SLUICE_NAME_LEN)];

	/* made UTF-8 first (3 bytes at most for each one read); the escapes then touch only
	 * ASCII, 2 bytes for 1, so the whole stays within LABEL_BUF(n) */
	utf8_scrub(clean, s, n < SLUICE_NAME_LEN ? n : SLUICE_NAME_LEN);
	for (const char *p = clean; *p; p++) {
		if (*p == '\\' || *p == '"' || *p == '\n')
			*dst++ = '\\';
		*dst++ = *p == '\n' ? 'n' : *p;
	}
	*dst = '\0';
}

/* A float as the text format wants it: NaN, +Inf, -Inf or a decimal (%.15g hides the last
 * digit of accumulated rounding noise, 0.1 stays "0.1"). */
static void put_double(FILE *b, double v)
{
	if (isnan(v))
		fputs("NaN", b);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", b);
	else
		fprintf(b, "%.15g", v == 0 ? 0.0 : v);   /* no "-0" */
}

/* ------------------------------------------------------------------ families and samples */

static void family(FILE *b, const char *name, const char *type, const char *help)
{
	fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label context of one sample: the service (already escaped into svc), an optional class,
 * and one optional extra label. */
struct lbl {
	const char *svc;            /* escaped service name, NULL: no service label */
	int cls;                    /* -1: no class label */
	const char *k, *v;          /* extra label (v is escaped by the caller), k NULL: none */
};

static void put_labels(FILE *b, const struct lbl *l)
{
	int first = 1;

	if (!l || (!l->svc && l->cls < 0 && !l->k))
		return;
	fputs("{", b);
	if (l->svc) {
		fprintf(b, "service=\"%s\"", l->svc);
		first = 0;
	}
	if (l->cls >= 0) {
		fprintf(b, "%sclass=\"%s\"", first ? "" : ",", sluice_class_name(l->cls));
		first = 0;
	}
	if (l->k)
		fprintf(b, "%s%s=\"%s\"", first ? "" : ",", l->k, l->v);
	fputs("}", b);
}

static void sample_u(FILE *b, const char *name, const struct lbl *l, unsigned long long v)
{
	fputs(name, b);
	put_labels(b, l);
	fprintf(b, " %llu\n", v);
}

static void sample_d(FILE *b, const char *name, const struct lbl *l, double v)
{
	fputs(name, b);
	put_labels(b, l);
	fputs(" ", b);
	put_double(b, v);
	fputs("\n", b);
}

/* ------------------------------------------------------------------ histogram buckets */

/* The exposed bucket boundaries: two per power of two (2^k and 1.5 * 2^k microseconds) from
 * 16 us up to 1.5 * 2^26 us (100.7 s). Each is the exact upper bound of a data-path bucket,
 * so the cumulative count at a boundary is exact (a sample of u microseconds lies below
 * boundary B when u < B). The last data-path bucket is open-ended (it also holds everything
 * above its range), so it only ever shows in le="+Inf". */
#define METRICS_MIN_LE_US 16

static int exposed_bucket(unsigned i)
{
	if (i >= SLUICE_HIST_BUCKETS - 1)                /* open-ended last bucket */
		return 0;
	if (sluice_hist_upper_us(i) < METRICS_MIN_LE_US)
		return 0;
	/* bucket i >= 4 has sub-bucket s = (i-4)%4 with upper bound (5+s) << (p-2):
	 * s == 1 gives 1.5 * 2^p, s == 3 gives 2^(p+1) */
	return i >= 4 && ((i - 4) % 4 == 1 || (i - 4) % 4 == 3);
}

/* "0.000016", "0.001536", "67.108864": microseconds are exact in six decimals. */
static void fmt_le(char *out, size_t n, unsigned long long us)
{
	size_t l;

	snprintf(out, n, "%llu.%06llu", us / 1000000ULL, us % 1000000ULL);
	l = strlen(out);
	while (l > 0 && out[l - 1] == '0')
		out[--l] = '\0';
	if (l > 0 && out[l - 1] == '.')
		out[--l] = '\0';
}

static void histogram(FILE *b, const char *svc, int cls, const struct sluice_hist *h)
{
	unsigned long long cum = 0, count = 0;
	char le[32];
	struct lbl l = { svc, cls, "le", le };

	for (unsigned i = 0; i < SLUICE_HIST_BUCKETS; i++)
		count += h->bucket[i];
	for (unsigned i = 0; i < SLUICE_HIST_BUCKETS; i++) {
		cum += h->bucket[i];
		if (!exposed_bucket(i))
			continue;
		fmt_le(le, sizeof(le), (unsigned long long)sluice_hist_upper_us(i));
		sample_u(b, "sluice_request_duration_seconds_bucket", &l, cum);
	}
	snprintf(le, sizeof(le), "+Inf");
	sample_u(b, "sluice_request_duration_seconds_bucket", &l, count);
	l.k = NULL;
	sample_d(b, "sluice_request_duration_seconds_sum", &l, (double)h->sum_us / 1e6);
	sample_u(b, "sluice_request_duration_seconds_count", &l, count);
}

/* ------------------------------------------------------------------ render */

struct svc_ref {
	char name[LABEL_BUF(SLUICE_NAME_LEN)];       /* escaped */
	const struct service_status *s;
	const struct metrics_service_extra *x;       /* NULL: the controller gave nothing */
};

int metrics_extra_copy(struct metrics_extra *dst, const struct metrics_extra *src)
{
	struct metrics_service_extra *keep = dst->s;
	int cap = dst->cap;

	if (cap < src->n) {
		keep = realloc(keep, sizeof(*keep) * (size_t)src->n);
		if (!keep)
			return -1;
		cap = src->n;
	}
	*dst = *src;
	dst->s = keep;
	dst->cap = cap;
	if (src->n)
		memcpy(dst->s, src->s, sizeof(*keep) * (size_t)src->n);
	return 0;
}

/* Per (service, class) counter from struct sluice_class_stats. */
#define CLASS_COUNTER(fam, field, help) do {                                          \
	family(b, fam, "counter", help);                                             \
	for (int i = 0; i < n; i++)                                                   \
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {                         \
			struct lbl l = { sv[i].name, c, NULL, NULL };                  \
			sample_u(b, fam, &l, (unsigned long long)sv[i].s->cls[c].st.field); \
		}                                                                     \
} while (0)

/* Per-service value from metrics_service_extra; services without an entry are left out. */
#define SVC_EXTRA(fam, type, expr, help) do {                                         \
	family(b, fam, type, help);                                                  \
	for (int i = 0; i < n; i++) {                                                 \
		const struct metrics_service_extra *e = sv[i].x;                       \
		struct lbl l = { sv[i].name, -1, NULL, NULL };                         \
		if (e)                                                                \
			sample_d(b, fam, &l, (double)(expr));                        \
	}                                                                             \
} while (0)

static double switch_shed(const struct svc_ref *r, int c)
{
	if (r->x)
		return r->x->sw[c].shed_ratio;
	return 1.0 - r->s->cls[c].switch_admit;
}

static double breaker_admit(const struct svc_ref *r)
{
	if (r->x)
		return r->x->breaker_admit;
	return breaker_admit_ratio(&r->s->v);
}

/* One info sample per configured service. */
static void render_services(FILE *b, const struct svc_ref *sv, int n)
{
	family(b, "sluice_service_info", "gauge",
	       "Configured service: always 1; labels give its protocol and port.");
	for (int i = 0; i < n; i++) {
		fprintf(b, "sluice_service_info{service=\"%s\",protocol=\"%s\",port=\"%u\"} 1\n",
			sv[i].name, protocol_name(sv[i].s->svc.protocol), sv[i].s->svc.port);
	}
}

/* Counters per (service, class), rejections also per reason. */
static void render_class_counters(FILE *b, const struct svc_ref *sv, int n)
{
	CLASS_COUNTER("sluice_requests_arrived_total", arrivals,
		      "Units (requests for http, connections for tcp) that reached admission.");
	CLASS_COUNTER("sluice_requests_admitted_total", admitted,
		      "Units admitted by the data path.");
	family(b, "sluice_requests_rejected_total", "counter",
	       "Units rejected by the data path, by the admission step that refused them.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			for (int r = 0; r < SLUICE_REJ_REASONS; r++) {
				struct lbl l = { sv[i].name, c, "reason", sluice_reject_name(r) };
				sample_u(b, "sluice_requests_rejected_total", &l,
					 (unsigned long long)sv[i].s->cls[c].st.rejected[r]);
			}
	/* tcp: SYNs refused by the open-connection cap, counted by the cap itself */
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES && sv[i].s->cls[c].open >= 0; c++) {
			struct lbl l = { sv[i].name, c, "reason", "connections" };
			sample_u(b, "sluice_requests_rejected_total", &l, sv[i].s->cls[c].conn_rejected);
		}
	CLASS_COUNTER("sluice_requests_completed_total", completed,
		      "Admitted units that got their response (http) or ended (tcp).");
	CLASS_COUNTER("sluice_request_errors_total", errors,
		      "Units that failed: 5xx responses and server resets (429s are not errors).");
	CLASS_COUNTER("sluice_responses_429_total", resp_429,
		      "429 responses from the server itself (counted apart, never a failure).");
	CLASS_COUNTER("sluice_retransmits_total", retransmits,
		      "Retransmitted SYNs and re-sent requests (retry-storm signal).");
	CLASS_COUNTER("sluice_fail_open_admits_total", fail_open,
		      "Units admitted only because the controller heartbeat was stale (fail open).");
	CLASS_COUNTER("sluice_requests_untracked_total", untracked,
		      "Units admitted without a slot, not counted in in-flight: the flow table was "
		      "full, or a refusal could not be answered cleanly.");
}

/* Gauges per (service, class). */
static void render_class_gauges(FILE *b, const struct svc_ref *sv, int n)
{
	family(b, "sluice_in_flight", "gauge",
	       "Admitted units not yet finished.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_d(b, "sluice_in_flight", &l, (double)sv[i].s->cls[c].in_flight);
		}
	family(b, "sluice_class_threshold", "gauge",
	       "In-flight threshold in force: the class is admitted while in-flight is below it.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_u(b, "sluice_class_threshold", &l, sv[i].s->cls[c].threshold);
		}
	family(b, "sluice_open_connections", "gauge",
	       "Open connections of the class (what the connection cap counts).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES && sv[i].s->cls[c].open >= 0; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_d(b, "sluice_open_connections", &l, (double)sv[i].s->cls[c].open);
		}
	family(b, "sluice_connection_cap", "gauge",
	       "A SYN of the class is refused while the open connections it is compared with reach "
	       "this: a tcp service's, an http service's of the class (0: no cap).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES && sv[i].s->cls[c].open >= 0; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_u(b, "sluice_connection_cap", &l, sv[i].s->cls[c].conn_cap);
		}
	family(b, "sluice_ladder_admit_ratio", "gauge",
	       "Priority ladder admit probability of the class, 0..1 (1 admits all).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_d(b, "sluice_ladder_admit_ratio", &l, sv[i].s->cls[c].admit_prob);
		}
}

/* Per service: priority marks ignored because the source is outside trust_from (services
 * whose pins predate the count are left out). */
static void render_untrusted(FILE *b, const struct svc_ref *sv, int n)
{
	family(b, "sluice_untrusted_priority_total", "counter",
	       "Units whose priority mark (X-Priority header or DSCP) was ignored because the "
	       "source is outside the service's trust_from, where the mark would have decided "
	       "the class.");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };

		if (sv[i].s->untrusted_priority >= 0)
			sample_u(b, "sluice_untrusted_priority_total", &l,
				 (unsigned long long)sv[i].s->untrusted_priority);
	}
}

/* Per service: the limit in force and the breaker. */
static void render_limit_breaker(FILE *b, const struct svc_ref *sv, int n)
{
	family(b, "sluice_concurrency_limit", "gauge",
	       "Concurrency limit in force (AIMD or fixed).");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		sample_u(b, "sluice_concurrency_limit", &l, sv[i].s->v.limit);
	}
	family(b, "sluice_breaker_state", "gauge",
	       "Circuit breaker state: 0 closed, 1 open, 2 half-open.");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		sample_u(b, "sluice_breaker_state", &l, (unsigned long long)breaker_state(&sv[i].s->v));
	}
	family(b, "sluice_breaker_admit_ratio", "gauge",
	       "Fraction of units the breaker lets through: 1 closed, 0 open, the step half-open.");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		sample_d(b, "sluice_breaker_admit_ratio", &l, breaker_admit(&sv[i]));
	}
	SVC_EXTRA("sluice_breaker_opens_total", "counter", e->breaker_opens,
		  "Breaker transitions to open since the controller started.");
	SVC_EXTRA("sluice_inflight_corrections_total", "counter", e->inflight_corrections,
		  "In-flight units the reconciliation with the flow table corrected; expected 0.");
	SVC_EXTRA("sluice_latency_target_seconds", "gauge", e->latency_target_seconds,
		  "Latency objective in force, whatever the limit algorithm (0: not known yet).");
	SVC_EXTRA("sluice_ladder_overloaded", "gauge", e->ladder_overloaded != 0,
		  "1 while the priority ladder considers the service overloaded.");
}

/* One gauge per service of a controller latency (the ctl_status field at off, in µs), in
 * seconds; services without the controller's entry are left out. */
static void ctl_seconds(FILE *b, const struct svc_ref *sv, int n, const char *name,
			const char *help, size_t off)
{
	family(b, name, "gauge", help);
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		unsigned us;

		if (!sv[i].s->ctl.known)
			continue;
		memcpy(&us, (const char *)&sv[i].s->ctl + off, sizeof(us));
		sample_d(b, name, &l, us / 1e6);
	}
}

/* Per service: what the limit steers by, from the controller's pinned entry (services whose
 * entry is not there yet are left out). A limit with no latency signal shows state "none". */
static void render_objective(FILE *b, const struct svc_ref *sv, int n)
{
	ctl_seconds(b, sv, n, "sluice_latency_baseline_seconds",
		    "Unloaded latency baseline the controller learned (0: not learned yet).",
		    offsetof(struct ctl_status, baseline_us));
	ctl_seconds(b, sv, n, "sluice_latency_objective_seconds",
		    "Latency objective of the highest busy classes (0: not known yet).",
		    offsetof(struct ctl_status, objective_us));
	ctl_seconds(b, sv, n, "sluice_latency_signal_seconds",
		    "Median latency of the last decided window, all classes: the limit's latency "
		    "signal (0: no window decided yet).",
		    offsetof(struct ctl_status, latency_us));
	ctl_seconds(b, sv, n, "sluice_latency_top_class_seconds",
		    "Latency of the last decided window's highest busy classes: what the objective "
		    "is judged on (0: no window decided yet).",
		    offsetof(struct ctl_status, top_class_us));
	family(b, "sluice_limit_signal", "gauge",
	       "Latency signal of the limit: 1 for the state it is in (none: blind, thin: too few "
	       "samples, ok).");
	for (int i = 0; i < n; i++)
		for (int st = 0; sv[i].s->ctl.known && st <= SLUICE_SIGNAL_OK; st++) {
			struct lbl l = { sv[i].name, -1, "state", sluice_signal_state_name(st) };
			sample_u(b, "sluice_limit_signal", &l, sv[i].s->ctl.signal == st);
		}
}

/* One gauge per service of a ladder time (the struct ctl_recovery field at off, in s; none
 * reads 0), from the controller's pinned record; services without it are left out. */
static void recovery_seconds(FILE *b, const struct svc_ref *sv, int n, const char *name,
			     const char *help, size_t off)
{
	family(b, name, "gauge", help);
	for (int i = 0; i < n; i++) {
		const struct ctl_recovery *r = &sv[i].s->ctl.rec;
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		double v;

		if (!sv[i].s->ctl.known || !r->known)
			continue;
		memcpy(&v, (const char *)r + off, sizeof(v));
		sample_d(b, name, &l, v > 0 ? v : 0);
	}
}

/* Per service: the ladder's shedding and recovery. A recovery is timed from the last
 * overloaded decision (the backend found healthy again) to every class admitted in full; 0
 * before the first (one takes at least a recovery hold). */
static void render_recovery(FILE *b, const struct svc_ref *sv, int n)
{
	recovery_seconds(b, sv, n, "sluice_ladder_shedding_seconds",
			 "Time since the priority ladder's first cut of the shedding under way (0: "
			 "every class admitted in full).", offsetof(struct ctl_recovery, shedding_s));
	recovery_seconds(b, sv, n, "sluice_ladder_last_recovery_seconds",
			 "How long the last recovery took: from the last overload to every class "
			 "admitted in full again (0: none yet).",
			 offsetof(struct ctl_recovery, last_recovery_s));
}

/* The kernel-measured latency histogram per (service, class). */
static void render_histograms(FILE *b, const struct svc_ref *sv, int n)
{
	family(b, "sluice_request_duration_seconds", "histogram",
	       "Time from the unit's admission to the first response byte, measured in the kernel.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			histogram(b, sv[i].name, c, &sv[i].s->cls[c].hist);
}

/* Manual switches per (service, class). */
static void render_switches(FILE *b, const struct svc_ref *sv, int n)
{
	family(b, "sluice_switch_shed_ratio", "gauge",
	       "Share of new units a manual switch sheds, 0..1 (0: no switch).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_d(b, "sluice_switch_shed_ratio", &l, switch_shed(&sv[i], c));
		}
	family(b, "sluice_switch_active", "gauge",
	       "1 while a manual switch is in force for the class.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			int on = sv[i].x ? sv[i].x->sw[c].active != 0 : switch_shed(&sv[i], c) > 0;
			sample_u(b, "sluice_switch_active", &l, (unsigned long long)on);
		}
	family(b, "sluice_switch_age_seconds", "gauge",
	       "Time since the active switch was set (only active switches).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			if (sv[i].x && sv[i].x->sw[c].active)
				sample_d(b, "sluice_switch_age_seconds", &l, sv[i].x->sw[c].age_s);
		}
	family(b, "sluice_switch_ttl_seconds", "gauge",
	       "Time until the active switch expires by itself (only active switches).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			if (sv[i].x && sv[i].x->sw[c].active)
				sample_d(b, "sluice_switch_ttl_seconds", &l,
					 sv[i].x->sw[c].ttl_left_s);
		}
}

/* Per service: the outcome measures the controller keeps. */
static void render_measures(FILE *b, const struct svc_ref *sv, int n)
{
	SVC_EXTRA("sluice_effective_request_ratio", "gauge", e->effective_ratio,
		  "Measure 1: successful / arrived requests over the last 60 s (goal > 0.8 under overload).");
	SVC_EXTRA("sluice_overload_seconds_total", "counter", e->overload_seconds,
		  "Measure 2: time overloaded, the latency objective missed or the priority ladder "
		  "shedding a class (share goal < 1%).");
	SVC_EXTRA("sluice_managed_seconds_total", "counter", e->uptime_seconds,
		  "Time the controller has managed the service (denominator of measure 2).");
	SVC_EXTRA("sluice_breaker_false_opens_total", "counter", e->breaker_false_opens,
		  "Measure 3: breaker opens judged false: the service was healthy when probed (estimate).");
	SVC_EXTRA("sluice_degradation_actions_total", "counter", e->degradation_actions,
		  "Measure 4 denominator: manual switches that came into force (degradation actions).");
	SVC_EXTRA("sluice_degradation_effective_total", "counter", e->degradation_effective,
		  "Measure 4 numerator: switches that were seen shedding traffic in the data path.");
	SVC_EXTRA("sluice_retry_amplification_ratio", "gauge", e->retry_amplification,
		  "Measure 5: (arrivals + retransmits) / arrivals over the last 60 s (alert > 1.3).");
	SVC_EXTRA("sluice_retry_storm_active", "gauge", e->retry_storm_active != 0,
		  "1 while the retry-storm alert is raised for the service.");
	SVC_EXTRA("sluice_accept_queue_length", "gauge", e->accept_queue,
		  "Connections waiting in the service's listen queue (sock_diag): the queue signal.");
	SVC_EXTRA("sluice_accept_queue_backlog", "gauge", e->accept_backlog,
		  "The listen backlog limit of the service's listening sockets.");
}

/* Per service: the wait before the server first read a unit, from the optional probe
 * (bpf/readwait.bpf.c); both families only while it runs (sluice_read_wait_probe says
 * whether it does). sum / count over a window is the mean wait. */
static void render_read_wait(FILE *b, const struct svc_ref *sv, int n,
			     const struct metrics_extra *x)
{
	if (!x || !x->read_wait_probe)
		return;
	family(b, "sluice_read_wait_seconds_total", "counter",
	       "Time admitted units (http requests, tcp turns) waited in the host, in their socket "
	       "or the accept queue, before the server first read them: the sum (the wait probe).");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };

		if (sv[i].x && sv[i].x->have_wait)
			sample_d(b, "sluice_read_wait_seconds_total", &l, (double)sv[i].x->wait_ns / 1e9);
	}
	family(b, "sluice_read_waits_total", "counter",
	       "Admitted units whose wait before the server's first read was measured (the wait "
	       "probe).");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };

		if (sv[i].x && sv[i].x->have_wait)
			sample_u(b, "sluice_read_waits_total", &l, sv[i].x->waits);
	}
	/* what the controller made of it (control/waitknee.h) */
	family(b, "sluice_read_wait_window_seconds", "gauge",
	       "Mean wait before the server's first read in the controller's last decided window "
	       "(the services whose last window had enough measured waits).");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };

		if (sv[i].x && sv[i].x->have_wait && sv[i].x->window_wait_s >= 0)
			sample_d(b, "sluice_read_wait_window_seconds", &l, sv[i].x->window_wait_s);
	}
	SVC_EXTRA("sluice_read_wait_trims_total", "counter", e->wait_trims,
		  "Times the limit was trimmed because admitted units waited before the server "
		  "read them (a queue sluice let in).");
	SVC_EXTRA("sluice_read_wait_undone_total", "counter", e->wait_undone,
		  "Trims undone because the wait did not follow the limit down (a server that "
		  "reads late whatever its load; that wait is then ignored).");
	/* the read gate (sluice.h, struct sluice_unread), which the probe's reads drive */
	SVC_EXTRA("sluice_read_gate_armed", "gauge", e->read_gate_armed,
		  "1 while the read gate is armed: the server's reads waited 1 ms or more on "
		  "average within the last 2 s, and lower classes wait for what it has not read.");
	SVC_EXTRA("sluice_read_gate_unread", "gauge", e->unread,
		  "Requests admitted while the read gate was armed that the server has not read "
		  "yet.");
	SVC_EXTRA("sluice_read_gate_refusals_total", "counter", e->gate_refused,
		  "Requests of the lower classes refused because the server left requests unread "
		  "(also counted in sluice_rejected_total, reason headroom).");
}

/* Process-wide: the controller, the data path's packet counters, config and switch file. */
/* One sample per mode and attached interface, 1 for the one XDP runs in: a fallback to
 * generic XDP shows as a change of series an alert can match on. */
static void render_xdp(FILE *b, const struct status_snapshot *snap)
{
	static const char *const modes[] = { "native", "generic", "offload", "none" };

	family(b, "sluice_xdp_mode", "gauge",
	       "1 for the mode XDP runs in on the interface (generic: every packet costs an skb first).");
	for (int i = 0; snap && i < snap->n_ifaces; i++) {
		const struct attached_iface *a = &snap->ifaces[i];
		char ifn[LABEL_BUF(IF_NAMESIZE)];

		if (!a->xdp_mode[0])
			continue; /* cannot be told from here */
		escape_label(ifn, a->name, IF_NAMESIZE);
		for (size_t j = 0; j < sizeof(modes) / sizeof(modes[0]); j++)
			fprintf(b, "sluice_xdp_mode{interface=\"%s\",mode=\"%s\"} %d\n", ifn,
				modes[j], !strcmp(a->xdp_mode, modes[j]));
	}
}

/* The data path's packet counters (struct sluice_pkt_stats), one counter family each. */
static const struct {
	const char *name, *help;
	size_t off;
} pkt_families[] = {
	{ "sluice_packets_service_total",
	  "Packets to or from a configured service seen by the data path.",
	  offsetof(struct sluice_pkt_stats, service) },
	{ "sluice_packets_malformed_total", "Truncated or garbage packets, passed untouched.",
	  offsetof(struct sluice_pkt_stats, malformed) },
	{ "sluice_rst_sent_total", "TCP resets sent to clients for rejected connections.",
	  offsetof(struct sluice_pkt_stats, rst_sent) },
	{ "sluice_http_replies_sent_total",
	  "HTTP 429/503 replies sent by the data path for rejected requests.",
	  offsetof(struct sluice_pkt_stats, reply_sent) },
	{ "sluice_http_replies_failed_total",
	  "Rejections that could not build a reply: the request was admitted instead.",
	  offsetof(struct sluice_pkt_stats, reply_failed) },
};

static void render_process(FILE *b, const struct status_snapshot *snap, const struct metrics_extra *x)
{
	family(b, "sluice_controller_alive", "gauge",
	       "1 while the controller heartbeat is younger than heartbeat_timeout (else fail open).");
	sample_u(b, "sluice_controller_alive", NULL,
		 (unsigned long long)(snap && snap->controller_alive));
	family(b, "sluice_controller_heartbeat_age_seconds", "gauge",
	       "Age of the controller heartbeat seen by the data path (absent: never written).");
	if (snap && snap->heartbeat_age_s >= 0)
		sample_d(b, "sluice_controller_heartbeat_age_seconds", NULL, snap->heartbeat_age_s);
	family(b, "sluice_interface_attached", "gauge",
	       "1 for each interface the data path runs on.");
	for (int i = 0; snap && i < snap->n_ifaces; i++) {
		char name[LABEL_BUF(IF_NAMESIZE)];
		struct lbl l = { NULL, -1, "interface", name };

		escape_label(name, snap->ifaces[i].name, IF_NAMESIZE);
		sample_u(b, "sluice_interface_attached", &l, 1);
	}
	for (size_t i = 0; i < sizeof pkt_families / sizeof pkt_families[0]; i++) {
		const __u64 *v = snap ? (const void *)((const char *)&snap->pkt + pkt_families[i].off)
				      : NULL;

		family(b, pkt_families[i].name, "counter", pkt_families[i].help);
		sample_u(b, pkt_families[i].name, NULL, v ? (unsigned long long)*v : 0);
	}

	if (x) {
		struct lbl ok = { NULL, -1, "result", "ok" }, bad = { NULL, -1, "result", "error" };

		family(b, "sluice_cascade_suspended", "gauge",
		       "1 while automatic breaker opening is suspended (too many opens at once).");
		sample_u(b, "sluice_cascade_suspended", NULL,
			 (unsigned long long)(x->cascade_suspended != 0));
		family(b, "sluice_cascade_triggers_total", "counter",
		       "Times cascade suppression was triggered.");
		sample_u(b, "sluice_cascade_triggers_total", NULL, x->cascade_triggers);
		family(b, "sluice_config_reloads_total", "counter",
		       "Config reloads: ok took effect, error was refused (the running config stayed).");
		sample_u(b, "sluice_config_reloads_total", &ok, x->config_reloads);
		sample_u(b, "sluice_config_reloads_total", &bad, x->config_reload_failures);
		family(b, "sluice_events_dropped_total", "counter",
		       "Event lines dropped whole because stdout did not take them as fast as they "
		       "came (its buffer was full).");
		sample_u(b, "sluice_events_dropped_total", NULL, x->events_dropped);
		family(b, "sluice_log_messages_dropped_total", "counter",
		       "Log messages dropped whole because stderr did not take them as fast as they "
		       "came (its buffer was full).");
		sample_u(b, "sluice_log_messages_dropped_total", NULL, x->log_dropped);
		family(b, "sluice_switch_file_error", "gauge",
		       "1 while the switch file is corrupt: running with no switches.");
		sample_u(b, "sluice_switch_file_error", NULL,
			 (unsigned long long)(x->switch_file_error != 0));
	}
	family(b, "sluice_read_wait_probe", "gauge",
	       "1 while the probe of the wait before the server reads runs (0: off, by "
	       "--no-read-wait or because the kernel refused it; the log says why).");
	sample_u(b, "sluice_read_wait_probe", NULL, (unsigned long long)(x && x->read_wait_probe));
	if (x && x->node_on) {
		family(b, "sluice_node_admit_ratio", "gauge",
		       "Node-wide arbitration: the share of each class every service may admit.");
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { NULL, c, NULL, NULL };

			sample_d(b, "sluice_node_admit_ratio", &l, x->node_admit[c]);
		}
		family(b, "sluice_node_cpu_pressure_percent", "gauge",
		       "Node-wide arbitration: share of the last observed second some task waited for "
		       "a CPU.");
		sample_d(b, "sluice_node_cpu_pressure_percent", NULL, x->node_pressure_pct);
	}
}

/* Fill sv[] (escaped names, the controller's extra state) from snap; returns how many. */
static int service_refs(const struct status_snapshot *snap, const struct metrics_extra *x,
			struct svc_ref *sv)
{
	const struct metrics_service_extra **by_idx = NULL;
	int n = 0, top = -1;

	/* the controller's rows by map index: one pass, not a search per service */
	for (int i = 0; x && i < x->n; i++)
		if (x->s[i].idx > top)
			top = x->s[i].idx;
	if (top >= 0 && (by_idx = calloc((size_t)top + 1, sizeof(*by_idx))))
		for (int i = 0; i < x->n; i++)
			if (x->s[i].idx >= 0)
				by_idx[x->s[i].idx] = &x->s[i];
	for (int i = 0; snap && i < snap->n; i++) {
		const struct service_status *s = &snap->s[i];

		escape_label(sv[n].name, s->svc.name, SLUICE_NAME_LEN);
		sv[n].s = s;
		sv[n].x = by_idx && s->idx >= 0 && s->idx <= top ? by_idx[s->idx] : NULL;
		n++;
	}
	free(by_idx);
	return n;
}

int metrics_render(const struct status_snapshot *snap, const struct metrics_extra *x,
		   char **out, size_t *len)
{
	struct svc_ref *sv;
	char *text = NULL;
	size_t size = 0;
	FILE *b;
	int n, bad;
	locale_t cloc, old = (locale_t)0;

	*out = NULL;
	if (len)
		*len = 0;
	sv = calloc(snap && snap->n > 0 ? (size_t)snap->n : 1, sizeof(*sv));
	b = sv ? open_memstream(&text, &size) : NULL;
	if (!b) {
		free(sv);
		return -1;
	}
	/* numbers in the C locale even if the daemon ever calls setlocale() */
	cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
	if (cloc)
		old = uselocale(cloc);

	n = service_refs(snap, x, sv);
	render_services(b, sv, n);
	render_class_counters(b, sv, n);
	render_untrusted(b, sv, n);
	render_class_gauges(b, sv, n);
	render_limit_breaker(b, sv, n);
	render_objective(b, sv, n);
	render_recovery(b, sv, n);
	render_histograms(b, sv, n);
	render_switches(b, sv, n);
	render_measures(b, sv, n);
	render_read_wait(b, sv, n, x);
	render_process(b, snap, x);
	render_xdp(b, snap);

	if (cloc) {
		uselocale(old);
		freelocale(cloc);
	}
	free(sv);
	bad = ferror(b);
	if (fclose(b) || bad || !text) {
		free(text);
		return -1;
	}
	*out = text;
	if (len)
		*len = size;
	return 0;
}
