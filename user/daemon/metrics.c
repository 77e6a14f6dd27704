// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Prometheus text exposition (format 0.0.4) of a status snapshot plus the controller's own
 * state, and the small libmicrohttpd server that serves it. See metrics.h and docs/METRICS.md.
 *
 * Rules kept here: every family is written once, with # HELP and # TYPE, all its samples
 * together; names carry the unit (_seconds, _ratio) and counters end in _total; label values
 * are escaped (\\, \", \n); numbers are printed in the C locale whatever the process set. */
#define _GNU_SOURCE
#include "daemon/metrics.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <microhttpd.h>

static const char *const CLASS_LABEL[SLUICE_NUM_CLASSES] = { "L0", "L1", "L2", "L3" };
static const char *const REASON_LABEL[SLUICE_REJ_REASONS] = {
	"switch", "breaker", "headroom", "ladder", "client_limit",
};

/* ------------------------------------------------------------------ output buffer */

struct buf {
	char *p;
	size_t len, cap;
	int oom;
};

static void buf_reserve(struct buf *b, size_t more)
{
	size_t want, cap;
	char *n;

	if (b->oom)
		return;
	want = b->len + more + 1;
	if (want <= b->cap)
		return;
	cap = b->cap ? b->cap : 16384;
	while (cap < want)
		cap *= 2;
	n = realloc(b->p, cap);
	if (!n) {
		b->oom = 1;
		return;
	}
	b->p = n;
	b->cap = cap;
}

static void bput(struct buf *b, const char *s, size_t n)
{
	buf_reserve(b, n);
	if (b->oom)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void bputs(struct buf *b, const char *s)
{
	bput(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3)))
static void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	buf_reserve(b, 256);
	if (b->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		buf_reserve(b, (size_t)n);
		if (b->oom)
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

/* Label value escaping of the text format: backslash, double quote and line feed. */
static void put_escaped(struct buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		switch (s[i]) {
		case '\\': bput(b, "\\\\", 2); break;
		case '"':  bput(b, "\\\"", 2); break;
		case '\n': bput(b, "\\n", 2); break;
		default:   bput(b, &s[i], 1); break;
		}
	}
}

/* A float as the text format wants it: NaN, +Inf, -Inf or a decimal (%.15g hides the last
 * digit of accumulated rounding noise, 0.1 stays "0.1"). */
static void put_double(struct buf *b, double v)
{
	if (isnan(v))
		bputs(b, "NaN");
	else if (isinf(v))
		bputs(b, v > 0 ? "+Inf" : "-Inf");
	else
		bprintf(b, "%.15g", v == 0 ? 0.0 : v);   /* no "-0" */
}

/* ------------------------------------------------------------------ families and samples */

static void family(struct buf *b, const char *name, const char *type, const char *help)
{
	bprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label context of one sample: the service (already escaped into svc), an optional class,
 * and one optional extra label. */
struct lbl {
	const char *svc;            /* escaped service name, NULL: no service label */
	int cls;                    /* -1: no class label */
	const char *k, *v;          /* extra label (v is escaped by the caller), k NULL: none */
};

static void put_labels(struct buf *b, const struct lbl *l)
{
	int first = 1;

	if (!l || (!l->svc && l->cls < 0 && !l->k))
		return;
	bputs(b, "{");
	if (l->svc) {
		bprintf(b, "service=\"%s\"", l->svc);
		first = 0;
	}
	if (l->cls >= 0) {
		bprintf(b, "%sclass=\"%s\"", first ? "" : ",", CLASS_LABEL[l->cls]);
		first = 0;
	}
	if (l->k)
		bprintf(b, "%s%s=\"%s\"", first ? "" : ",", l->k, l->v);
	bputs(b, "}");
}

static void sample_u(struct buf *b, const char *name, const struct lbl *l, unsigned long long v)
{
	bputs(b, name);
	put_labels(b, l);
	bprintf(b, " %llu\n", v);
}

static void sample_d(struct buf *b, const char *name, const struct lbl *l, double v)
{
	bputs(b, name);
	put_labels(b, l);
	bputs(b, " ");
	put_double(b, v);
	bputs(b, "\n");
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

static void histogram(struct buf *b, const char *svc, int cls, const struct sluice_hist *h)
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
	char name[SLUICE_NAME_LEN * 2 + 1];          /* escaped */
	const struct service_status *s;
	const struct metrics_service_extra *x;       /* NULL: the controller gave nothing */
};

static const struct metrics_service_extra *find_extra(const struct metrics_extra *x, int idx)
{
	if (!x)
		return NULL;
	for (int i = 0; i < x->n && i < SLUICE_MAX_SERVICES; i++)
		if (x->s[i].idx == idx)
			return &x->s[i];
	return NULL;
}

/* Per (service, class) counter from struct sluice_class_stats. */
#define CLASS_COUNTER(fam, field, help) do {                                          \
	family(&b, fam, "counter", help);                                             \
	for (int i = 0; i < n; i++)                                                   \
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {                         \
			struct lbl l = { sv[i].name, c, NULL, NULL };                  \
			sample_u(&b, fam, &l, (unsigned long long)sv[i].s->cls[c].st.field); \
		}                                                                     \
} while (0)

/* Per-service value from metrics_service_extra; services without an entry are left out. */
#define SVC_EXTRA(fam, type, expr, help) do {                                         \
	family(&b, fam, type, help);                                                  \
	for (int i = 0; i < n; i++) {                                                 \
		const struct metrics_service_extra *e = sv[i].x;                       \
		struct lbl l = { sv[i].name, -1, NULL, NULL };                         \
		if (e)                                                                \
			sample_d(&b, fam, &l, (double)(expr));                        \
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
	switch (r->s->v.breaker_state) {
	case SLUICE_BREAKER_OPEN: return 0.0;
	case SLUICE_BREAKER_HALF_OPEN: return (double)sluice_prob_complement(r->s->v.breaker_shed) / SLUICE_PROB_ONE;
	default: return 1.0;
	}
}

int metrics_render(const struct status_snapshot *snap, const struct metrics_extra *x,
		   char **out, size_t *len)
{
	struct buf b = { 0 };
	struct svc_ref *sv;
	int n = 0;
	locale_t cloc, old = (locale_t)0;

	*out = NULL;
	if (len)
		*len = 0;
	sv = calloc(SLUICE_MAX_SERVICES, sizeof(*sv));
	if (!sv)
		return -1;
	/* numbers in the C locale even if the daemon ever calls setlocale() */
	cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
	if (cloc)
		old = uselocale(cloc);

	for (int i = 0; snap && i < snap->n && i < SLUICE_MAX_SERVICES; i++) {
		struct buf nb = { 0 };
		const struct service_status *s = &snap->s[i];

		put_escaped(&nb, s->svc.name, SLUICE_NAME_LEN);
		if (nb.oom) {
			free(nb.p);
			b.oom = 1;
			break;
		}
		snprintf(sv[n].name, sizeof(sv[n].name), "%s", nb.p ? nb.p : "");
		free(nb.p);
		sv[n].s = s;
		sv[n].x = find_extra(x, s->idx);
		n++;
	}

	/* --- services --- */
	family(&b, "sluice_service_info", "gauge",
	       "Configured service: always 1; labels give its protocol and port.");
	for (int i = 0; i < n; i++) {
		bprintf(&b, "sluice_service_info{service=\"%s\",protocol=\"%s\",port=\"%u\"} 1\n",
			sv[i].name, protocol_name(sv[i].s->svc.protocol), sv[i].s->svc.port);
	}

	/* --- per (service, class) counters --- */
	CLASS_COUNTER("sluice_requests_arrived_total", arrivals,
		      "Units (requests for http, connections for tcp) that reached admission.");
	CLASS_COUNTER("sluice_requests_admitted_total", admitted,
		      "Units admitted by the data path.");
	family(&b, "sluice_requests_rejected_total", "counter",
	       "Units rejected by the data path, by the admission step that refused them.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			for (int r = 0; r < SLUICE_REJ_REASONS; r++) {
				struct lbl l = { sv[i].name, c, "reason", REASON_LABEL[r] };
				sample_u(&b, "sluice_requests_rejected_total", &l,
					 (unsigned long long)sv[i].s->cls[c].st.rejected[r]);
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
		      "Units admitted while the flow table was full: not counted in in-flight.");

	/* --- per (service, class) gauges --- */
	family(&b, "sluice_in_flight", "gauge",
	       "Admitted units not yet finished.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_d(&b, "sluice_in_flight", &l, (double)sv[i].s->cls[c].in_flight);
		}
	family(&b, "sluice_class_threshold", "gauge",
	       "In-flight threshold in force: the class is admitted while in-flight is below it.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_u(&b, "sluice_class_threshold", &l, sv[i].s->cls[c].threshold);
		}
	family(&b, "sluice_ladder_admit_ratio", "gauge",
	       "Priority ladder admit probability of the class, 0..1 (1 admits all).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_d(&b, "sluice_ladder_admit_ratio", &l, sv[i].s->cls[c].admit_prob);
		}

	/* --- per service: limit and breaker --- */
	family(&b, "sluice_concurrency_limit", "gauge",
	       "Concurrency limit in force (AIMD or fixed).");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		sample_u(&b, "sluice_concurrency_limit", &l, sv[i].s->v.limit);
	}
	family(&b, "sluice_breaker_state", "gauge",
	       "Circuit breaker state: 0 closed, 1 open, 2 half-open.");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		sample_u(&b, "sluice_breaker_state", &l, sv[i].s->v.breaker_state);
	}
	family(&b, "sluice_breaker_admit_ratio", "gauge",
	       "Fraction of units the breaker lets through: 1 closed, 0 open, the step half-open.");
	for (int i = 0; i < n; i++) {
		struct lbl l = { sv[i].name, -1, NULL, NULL };
		sample_d(&b, "sluice_breaker_admit_ratio", &l, breaker_admit(&sv[i]));
	}
	SVC_EXTRA("sluice_breaker_opens_total", "counter", e->breaker_opens,
		  "Breaker transitions to open since the controller started.");
	SVC_EXTRA("sluice_latency_target_seconds", "gauge", e->latency_target_seconds,
		  "AIMD latency target in force (0: not known yet).");
	SVC_EXTRA("sluice_ladder_overloaded", "gauge", e->ladder_overloaded != 0,
		  "1 while the priority ladder considers the service overloaded.");

	/* --- latency histogram --- */
	family(&b, "sluice_request_duration_seconds", "histogram",
	       "Time from the unit's admission to the first response byte, measured in the kernel.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			histogram(&b, sv[i].name, c, &sv[i].s->cls[c].hist);

	/* --- manual switches --- */
	family(&b, "sluice_switch_shed_ratio", "gauge",
	       "Share of new units a manual switch sheds, 0..1 (0: no switch).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			sample_d(&b, "sluice_switch_shed_ratio", &l, switch_shed(&sv[i], c));
		}
	family(&b, "sluice_switch_active", "gauge",
	       "1 while a manual switch is in force for the class.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			int on = sv[i].x ? sv[i].x->sw[c].active != 0 : switch_shed(&sv[i], c) > 0;
			sample_u(&b, "sluice_switch_active", &l, (unsigned long long)on);
		}
	family(&b, "sluice_switch_age_seconds", "gauge",
	       "Time since the active switch was set (only active switches).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			if (sv[i].x && sv[i].x->sw[c].active)
				sample_d(&b, "sluice_switch_age_seconds", &l, sv[i].x->sw[c].age_s);
		}
	family(&b, "sluice_switch_ttl_seconds", "gauge",
	       "Time until the active switch expires by itself (only active switches).");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct lbl l = { sv[i].name, c, NULL, NULL };
			if (sv[i].x && sv[i].x->sw[c].active)
				sample_d(&b, "sluice_switch_ttl_seconds", &l,
					 sv[i].x->sw[c].ttl_left_s);
		}

	/* --- the five measures of seed 001 section 11 --- */
	SVC_EXTRA("sluice_effective_request_ratio", "gauge", e->effective_ratio,
		  "Measure 1: successful / arrived requests over the last 60 s (goal > 0.8 under overload).");
	SVC_EXTRA("sluice_overload_seconds_total", "counter", e->overload_seconds,
		  "Measure 2: time with the limit below 70% of its maximum (share goal < 1%).");
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

	/* --- controller and data path, process-wide --- */
	family(&b, "sluice_controller_alive", "gauge",
	       "1 while the controller heartbeat is younger than heartbeat_timeout (else fail open).");
	sample_u(&b, "sluice_controller_alive", NULL,
		 (unsigned long long)(snap && snap->controller_alive));
	family(&b, "sluice_controller_heartbeat_age_seconds", "gauge",
	       "Age of the controller heartbeat seen by the data path (absent: never written).");
	if (snap && snap->heartbeat_age_s >= 0)
		sample_d(&b, "sluice_controller_heartbeat_age_seconds", NULL, snap->heartbeat_age_s);
	family(&b, "sluice_packets_service_total", "counter",
	       "Packets to or from a configured service seen by the data path.");
	sample_u(&b, "sluice_packets_service_total", NULL,
		 snap ? (unsigned long long)snap->pkt.service : 0);
	family(&b, "sluice_packets_malformed_total", "counter",
	       "Truncated or garbage packets, passed untouched.");
	sample_u(&b, "sluice_packets_malformed_total", NULL,
		 snap ? (unsigned long long)snap->pkt.malformed : 0);
	family(&b, "sluice_rst_sent_total", "counter",
	       "TCP resets sent to clients for rejected connections.");
	sample_u(&b, "sluice_rst_sent_total", NULL,
		 snap ? (unsigned long long)snap->pkt.rst_sent : 0);
	family(&b, "sluice_http_replies_sent_total", "counter",
	       "HTTP 429/503 replies sent by the data path for rejected requests.");
	sample_u(&b, "sluice_http_replies_sent_total", NULL,
		 snap ? (unsigned long long)snap->pkt.reply_sent : 0);
	family(&b, "sluice_http_replies_failed_total", "counter",
	       "Rejections that could not build a reply: the request was admitted instead.");
	sample_u(&b, "sluice_http_replies_failed_total", NULL,
		 snap ? (unsigned long long)snap->pkt.reply_failed : 0);

	if (x) {
		struct lbl ok = { NULL, -1, "result", "ok" }, bad = { NULL, -1, "result", "error" };

		family(&b, "sluice_cascade_suspended", "gauge",
		       "1 while automatic breaker opening is suspended (too many opens at once).");
		sample_u(&b, "sluice_cascade_suspended", NULL,
			 (unsigned long long)(x->cascade_suspended != 0));
		family(&b, "sluice_cascade_triggers_total", "counter",
		       "Times cascade suppression was triggered.");
		sample_u(&b, "sluice_cascade_triggers_total", NULL, x->cascade_triggers);
		family(&b, "sluice_config_reloads_total", "counter",
		       "Config reloads: ok took effect, error was refused (the running config stayed).");
		sample_u(&b, "sluice_config_reloads_total", &ok, x->config_reloads);
		sample_u(&b, "sluice_config_reloads_total", &bad, x->config_reload_failures);
		family(&b, "sluice_switch_file_error", "gauge",
		       "1 while the switch file is corrupt: running with no switches.");
		sample_u(&b, "sluice_switch_file_error", NULL,
			 (unsigned long long)(x->switch_file_error != 0));
	}

	if (cloc) {
		uselocale(old);
		freelocale(cloc);
	}
	free(sv);
	if (b.oom || !b.p) {
		free(b.p);
		return -1;
	}
	*out = b.p;
	if (len)
		*len = b.len;
	return 0;
}

/* ------------------------------------------------------------------ HTTP server */

struct metrics_server {
	struct MHD_Daemon *d;
	metrics_body_fn fn;
	void *ctx;
	int port;
};

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct metrics_server *srv = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body = NULL;
	size_t len = 0;

	(void)version;
	(void)upload_data;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		/* answer at once: any request body is not read */
		*upload_data_size = 0;
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n");
	}
	if (!strcmp(url, "/"))
		return reply_text(c, MHD_HTTP_OK, "sluice: metrics are at /metrics\n");
	if (strcmp(url, "/metrics"))
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
	if (srv->fn(srv->ctx, &body, &len) || !body) {
		free(body);
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics unavailable\n");
	}
	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* "host:port", "[v6]:port", ":port" (every address). Port: decimal digits only, 0..65535
 * (0: any free port, see metrics_port()). */
static int split_addr(const char *addr, char *host, size_t hostlen, char *port, size_t portlen,
		      char *err, size_t errlen)
{
	const char *h, *he, *p;
	unsigned long v = 0;
	size_t n;

	if (!addr || !*addr) {
		snprintf(err, errlen, "metrics address is empty: expected HOST:PORT");
		return -1;
	}
	if (addr[0] == '[') {
		h = addr + 1;
		he = strchr(h, ']');
		if (!he) {
			snprintf(err, errlen, "metrics address '%s': missing ']' (expected [IPV6]:PORT)",
				 addr);
			return -1;
		}
		if (he[1] != ':') {
			snprintf(err, errlen, "metrics address '%s': expected [IPV6]:PORT", addr);
			return -1;
		}
		p = he + 2;
	} else {
		const char *colon = strrchr(addr, ':');

		if (!colon) {
			snprintf(err, errlen, "metrics address '%s': expected HOST:PORT", addr);
			return -1;
		}
		h = addr;
		he = colon;
		if (memchr(h, ':', (size_t)(he - h))) {
			snprintf(err, errlen,
				 "metrics address '%s': IPv6 addresses must be written [ADDR]:PORT",
				 addr);
			return -1;
		}
		p = colon + 1;
	}
	n = (size_t)(he - h);      /* 0: every address (":9477", as the config allows) */
	if (n >= hostlen) {
		snprintf(err, errlen, "metrics address '%s': host too long", addr);
		return -1;
	}
	if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 5 ||
	    (v = strtoul(p, NULL, 10)) > 65535) {
		snprintf(err, errlen,
			 "metrics address '%s': port '%s' must be a number in 0..65535", addr, p);
		return -1;
	}
	memcpy(host, h, n);
	host[n] = '\0';
	snprintf(port, portlen, "%lu", v);
	return 0;
}

/* Resolve and bind; the first address that binds wins. An empty host is every address: the
 * IPv6 wildcard in dual-stack mode, or the IPv4 one where there is no IPv6. Returns the
 * listening fd or -1. */
static int listen_on(const char *addr, const char *host, const char *port, int *family_out,
		     char *err, size_t errlen)
{
	static const int any_families[] = { AF_INET6, AF_INET };
	struct addrinfo hints, *res = NULL, *ai;
	int rc, fd = -1, last_errno = 0;
	int any = !host[0];

	for (int pass = 0; fd < 0 && pass < (any ? 2 : 1); pass++) {
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = any ? any_families[pass] : AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
		rc = getaddrinfo(any ? NULL : host, port, &hints, &res);
		if (rc && any)
			continue;
		if (rc) {
			snprintf(err, errlen, "metrics address '%s': cannot resolve '%s': %s", addr,
				 host, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
			return -1;
		}
		for (ai = res; ai; ai = ai->ai_next) {
			int one = 1, zero = 0;

			if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
				continue;
			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
			if (fd < 0) {
				last_errno = errno;
				continue;
			}
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (any && ai->ai_family == AF_INET6)
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) {
				*family_out = ai->ai_family;
				break;
			}
			last_errno = errno;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(res);
		res = NULL;
	}
	if (fd < 0)
		snprintf(err, errlen, "metrics address '%s': cannot listen: %s", addr,
			 last_errno ? strerror(last_errno) : "no IPv4/IPv6 address");
	return fd;
}

struct metrics_server *metrics_start(const char *addr, metrics_body_fn fn, void *ctx,
				     char *err, size_t errlen)
{
	char host[256], port[8], dummy[1];
	struct metrics_server *srv;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, family = AF_INET;
	unsigned flags;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!fn) {
		snprintf(err, errlen, "metrics: no body function");
		return NULL;
	}
	if (split_addr(addr, host, sizeof(host), port, sizeof(port), err, errlen))
		return NULL;
	fd = listen_on(addr, host, port, &family, err, errlen);
	if (fd < 0)
		return NULL;
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		close(fd);
		snprintf(err, errlen, "metrics: out of memory");
		return NULL;
	}
	srv->fn = fn;
	srv->ctx = ctx;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		srv->port = ntohs(ss.ss_family == AF_INET6 ?
				  ((struct sockaddr_in6 *)&ss)->sin6_port :
				  ((struct sockaddr_in *)&ss)->sin_port);
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
	if (family == AF_INET6)
		flags |= MHD_USE_IPv6;
	srv->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, srv,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
				  MHD_OPTION_END);
	if (!srv->d) {
		close(fd);
		free(srv);
		snprintf(err, errlen, "metrics address '%s': libmicrohttpd failed to start", addr);
		return NULL;
	}
	return srv;
}

int metrics_port(const struct metrics_server *srv)
{
	return srv ? srv->port : -1;
}

void metrics_stop(struct metrics_server *srv)
{
	if (!srv)
		return;
	MHD_stop_daemon(srv->d);      /* joins the thread and closes the listening socket */
	free(srv);
}
