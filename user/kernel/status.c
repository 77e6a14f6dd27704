// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/status.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include "control/signals.h"
#include "control/window.h"
#include "control/ladder.h"
#include "common/jsonio.h"
#include "common/clock.h"
#include "common/names.h"
#include "kernel/flowgc.h"
#include "kernel/attach.h"

const char *protocol_name(int p)
{
	return p == SLUICE_PROTO_HTTP ? "http" : "tcp";
}

/* The data path treats any state but open and half-open as closed; so does the display. */
const char *breaker_name(int s)
{
	if (s != SLUICE_BREAKER_OPEN && s != SLUICE_BREAKER_HALF_OPEN)
		s = SLUICE_BREAKER_CLOSED;
	return sluice_breaker_state_name(s);
}

int breaker_state(const struct sluice_verdict *v)
{
	return v->breaker_state == SLUICE_BREAKER_OPEN ||
	       v->breaker_state == SLUICE_BREAKER_HALF_OPEN ? (int)v->breaker_state
							    : SLUICE_BREAKER_CLOSED;
}

double breaker_admit_ratio(const struct sluice_verdict *v)
{
	switch (breaker_state(v)) {
	case SLUICE_BREAKER_OPEN:
		return 0.0;
	case SLUICE_BREAKER_HALF_OPEN:
		return (double)sluice_prob_complement(v->breaker_shed) / SLUICE_PROB_ONE;
	default:
		return 1.0;
	}
}

void status_free(struct status_snapshot *s)
{
	free(s->s);
	s->s = NULL;
	s->cap = s->n = 0;
}

const char *ctl_algorithm_name(int a)
{
	return a == SLUICE_CTL_ALG_AIMD ? "aimd" : a == SLUICE_CTL_ALG_FIXED ? "fixed" : "gradient";
}

/* The controller's summary for the service in slot i, when the entry is this service's. */
static void collect_ctl(const struct sluice_maps *m, int i, struct service_status *s)
{
	static __thread struct sluice_ctl_slot slot;   /* 3.7 KB: not on the stack */
	struct ctl_status *c = &s->ctl;

	memset(c, 0, sizeof(*c));
	if (maps_read_ctl_slot(m, i, &slot) || !slot.name[0] || slot.port != s->svc.port ||
	    strncmp(slot.name, s->svc.name, SLUICE_NAME_LEN))
		return;
	c->known = 1;
	c->signal = slot.signal;
	c->algorithm = slot.algorithm;
	c->baseline_us = slot.baseline_us;
	c->objective_us = slot.objective_us;
	c->latency_us = slot.latency_us;
	c->top_class_us = ctl_slot_top_class_us(&slot);
	c->reset_ack = slot.reset_ack;
	c->ticks = slot.ticks;
	ctl_slot_recovery(&slot, monotonic_ns(), &c->rec);
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		c->ladder[k] = !slot.ladder_admit[k] ? SLUICE_LADDER_OFF :
			       slot.ladder_admit[k] >= SLUICE_PROB_ONE ? SLUICE_LADDER_FULL :
			       SLUICE_LADDER_PARTIAL;
}

/* The local address of each ADDR:PORT service, from addr_services (a few entries). */
static void collect_addrs(const struct sluice_maps *m, struct status_snapshot *out)
{
	struct sluice_addr_key key, next;
	int more = m->addr_services >= 0 && !bpf_map_get_next_key(m->addr_services, NULL, &next);

	while (more) {
		__u32 v;

		key = next;
		more = !bpf_map_get_next_key(m->addr_services, &key, &next);
		if (bpf_map_lookup_elem(m->addr_services, &key, &v) || !v)
			continue;
		for (int i = 0; i < out->n; i++) {
			struct service_status *s = &out->s[i];
			static const __u8 v4mapped[12] = { [10] = 0xff, [11] = 0xff };
			char a[INET6_ADDRSTRLEN];

			if (s->idx != (int)v - 1 || s->svc.port != key.port)
				continue;
			if (!memcmp(key.addr, v4mapped, 12))
				snprintf(s->addr, sizeof(s->addr), "%s",
					 inet_ntop(AF_INET, key.addr + 12, a, sizeof(a)));
			else
				snprintf(s->addr, sizeof(s->addr), "[%s]",
					 inet_ntop(AF_INET6, key.addr, a, sizeof(a)));
		}
	}
}

/* Priority marks of slot i ignored for an untrusted source, -1 when the pins predate the count. */
static long long untrusted_of(const struct sluice_maps *m, int i)
{
	struct sluice_untrusted u;

	return maps_read_untrusted(m, i, &u) ? -1 : (long long)u.ignored;
}

void status_heartbeat(struct status_snapshot *s)
{
	long long age = (long long)(s->now_ns - s->g.heartbeat_ns);

	if (!s->g.heartbeat_ns) {
		s->heartbeat_age_s = -1;
		s->controller_alive = 0;
		return;
	}
	/* Signed, as the data path compares (bpf/admit.h): a heartbeat up to two coarse ticks
	 * ahead of our clock is a fresh one, not a silent controller. */
	s->controller_alive = age <= (long long)s->g.heartbeat_timeout_ns &&
		age >= -2 * (long long)SLUICE_COARSE_TICK_NS;
	s->heartbeat_age_s = age > 0 ? (double)age / 1e9 : 0;
}

int status_collect(const struct sluice_maps *m, struct status_snapshot *out, int count_flows)
{
	struct service_status *keep = out->s;
	struct sluice_service *svcs;
	int err, cap = out->cap;

	memset(out, 0, sizeof(*out));
	out->s = keep;
	out->cap = cap;
	if (out->cap < m->n_slots) {
		struct service_status *ns = realloc(out->s, sizeof(*ns) * (size_t)m->n_slots);

		if (!ns)
			return -ENOMEM;
		out->s = ns;
		out->cap = m->n_slots;
	}
	out->n_ifaces = -1;
	if ((err = maps_read_globals(m, &out->g)))
		return err;
	/* The clock after the heartbeat: read before, a tick written in between was "from the
	 * future" and its unsigned age 584 years. */
	out->now_ns = monotonic_ns();
	status_heartbeat(out);
	maps_read_pkt_stats(m, &out->pkt);
	out->flows = -1;
	if (count_flows)
		out->flows = maps_count_flows(m, NULL, 0);
	/* Which slots are services: one batch read, then counters only for those. */
	svcs = calloc((size_t)m->n_slots, sizeof(*svcs));
	if (!svcs)
		return -ENOMEM;
	if ((err = maps_read_array(m->services, 0, (__u32)m->n_slots, sizeof(*svcs), svcs, NULL))) {
		free(svcs);
		return err;
	}
	for (int i = 0; i < m->n_slots; i++) {
		struct service_status *s = &out->s[out->n];
		struct sluice_inflight inf;

		/* a read that fails (out of memory) shows 0, never another slot's or the
		 * stack's leftovers */
		memset(&inf, 0, sizeof(inf));
		memset(s, 0, sizeof(*s));
		s->svc = svcs[i];
		if (!s->svc.name[0] || !s->svc.port)
			continue;
		s->idx = i;
		maps_read_verdict(m, i, &s->v);
		collect_ctl(m, i, s);
		if (maps_read_concurrency(m, i, s->svc.protocol, &inf) == 0)
			s->in_flight = inf.total;
		s->connections = -1;
		s->untrusted_priority = untrusted_of(m, i);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			s->cls[c].open = -1;
		{
			/* The class's open connections and their cap: a tcp service's in
			 * `inflight` under `max_connections` (conn_cap), an http service's in
			 * `http_conns` under the cap sluiced sets while its requests are refused
			 * (pins from layout 9 on). Refusals of either are counted in conn_cap. */
			int http = s->svc.protocol == SLUICE_PROTO_HTTP;
			struct sluice_http_conn_cap hc = { { 0 } };
			struct sluice_inflight conns;
			struct sluice_conn_cap cc;

			memset(&cc, 0, sizeof(cc));
			if ((http ? maps_read_http_conns(m, i, &conns) :
				    maps_read_inflight(m, i, &conns)) == 0) {
				s->connections = conns.total;
				for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
					s->cls[c].open = conns.cls[c];
			}
			if (http)
				maps_read_http_conn_cap(m, i, &hc);
			maps_read_conn_cap(m, i, &cc);
			for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
				s->cls[c].conn_cap = http ? hc.cap[c] : cc.threshold[c];
				s->cls[c].conn_rejected = cc.rejected[c];
			}
		}
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct class_status *cs = &s->cls[c];

			maps_read_class_stats(m, i, c, &cs->st);
			maps_read_hist(m, i, c, &cs->hist);
			cs->in_flight = inf.cls[c];
			cs->p50_us = sluice_hist_quantile_us(&cs->hist, 0.50);
			cs->p99_us = sluice_hist_quantile_us(&cs->hist, 0.99);
			cs->threshold = s->v.class_threshold[c];
			cs->admit_prob = (double)sluice_prob_complement(s->v.shed_prob[c]) / SLUICE_PROB_ONE;
			cs->switch_admit = (double)sluice_prob_complement(s->v.switch_shed[c]) / SLUICE_PROB_ONE;
			cs->rate_per_s = -1;
			{
				/* 429s from the server are answers, not failures: counting a downstream's
				 * own shedding as errors would open the breaker against it. */
				double calls = (double)cs->st.completed - (double)cs->st.resp_429;
				cs->error_rate = calls > 0 ? (double)cs->st.errors / calls : 0;
			}
		}
		out->n++;
	}
	free(svcs);
	collect_addrs(m, out);
	return 0;
}

void status_rates(const struct status_snapshot *prev, struct status_snapshot *cur)
{
	double dt = (double)(cur->now_ns - prev->now_ns) / 1e9;

	if (dt <= 0)
		return;
	/* Both snapshots list services in slot order: one merge. */
	for (int i = 0, j = 0; i < cur->n; i++) {
		while (j < prev->n && prev->s[j].idx < cur->s[i].idx)
			j++;
		if (j == prev->n || prev->s[j].idx != cur->s[i].idx)
			continue;
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			double d = (double)cur->s[i].cls[c].st.arrivals -
				   (double)prev->s[j].cls[c].st.arrivals;
			cur->s[i].cls[c].rate_per_s = d >= 0 ? d / dt : -1;
		}
	}
}

static unsigned long long rejected_total(const struct sluice_class_stats *st)
{
	unsigned long long t = 0;
	for (int r = 0; r < SLUICE_REJ_REASONS; r++)
		t += st->rejected[r];
	return t;
}

/* A reject column is as wide as its heading, at least 9. */
static int rej_width(int r)
{
	int w = (int)strlen(sluice_reject_heading(r));
	return w < 9 ? 9 : w;
}

/* What share of the class's arrivals was admitted since attach, as "12.9%" ("-": none yet). */
static void admitted_pct(char *buf, size_t len, const struct sluice_class_stats *st)
{
	if (st->arrivals)
		snprintf(buf, len, "%.1f%%", 100.0 * (double)st->admitted / (double)st->arrivals);
	else
		snprintf(buf, len, "-");
}

/* The columns both forms share, up to and including admitted%. */
static void class_head(FILE *f)
{
	fprintf(f, "  %-5s %7s %9s %9s %10s %10s %9s", "class", "req/s", "in-flight", "threshold",
		"arrived", "admitted", "admitted%");
}

/* Shortens buf, which holds v as printed, to at most `width` characters in thousands,
 * millions, ... ("12.3G") when it is longer: a column's number is never wider than its
 * heading's column, so the cells after it stay under their headings. */
static const char *scale_to(char *buf, size_t len, double v, int width)
{
	static const char unit[] = "kMGTPE";

	for (int u = 0; (int)strlen(buf) > width && unit[u]; u++) {
		v /= 1000;
		snprintf(buf, len, "%.1f%c", v, unit[u]);
	}
	return buf;
}

/* A counter since attach in at most `width` characters: exact while it fits. At 100k
 * arrivals a second a class passes ten digits in a day. */
static const char *count_cell(char *buf, size_t len, unsigned long long v, int width)
{
	snprintf(buf, len, "%llu", v);
	return scale_to(buf, len, (double)v, width);
}

static void class_row(FILE *f, int c, const struct class_status *cs)
{
	char rate[24] = "-", adm[16], arr[24], ok[24];

	if (cs->rate_per_s >= 0) {
		snprintf(rate, sizeof(rate), "%.1f", cs->rate_per_s);
		scale_to(rate, sizeof(rate), cs->rate_per_s, 7);
	}
	admitted_pct(adm, sizeof(adm), &cs->st);
	fprintf(f, "  %-5s %7s %9lld %9u %10s %10s %9s", sluice_class_name(c), rate,
		cs->in_flight, cs->threshold, count_cell(arr, sizeof(arr), cs->st.arrivals, 10),
		count_cell(ok, sizeof(ok), cs->st.admitted, 10), adm);
}

/* A latency in at most 8 characters: "9999.9ms", then seconds ("67.1s"). */
static void latency(char *buf, size_t len, double us)
{
	if (us <= 0)
		snprintf(buf, len, "-");
	else if (us < 9999950)
		snprintf(buf, len, "%.1fms", us / 1000);
	else
		snprintf(buf, len, "%.1fs", us / 1e6);
}

/* The columns both forms end with: latency, then the two controls in force now. */
static void class_tail(FILE *f, const struct class_status *cs)
{
	char p50[16], p99[16];

	latency(p50, sizeof(p50), cs->p50_us);
	latency(p99, sizeof(p99), cs->p50_us > 0 ? cs->p99_us : 0);
	fprintf(f, " %8s %8s %6.0f%% %6.0f%%\n", p50, p99, 100.0 * cs->admit_prob,
		100.0 * (1 - cs->switch_admit));
}

/* A time in at most 7 characters: "59.9s", then minutes ("59.9m") and hours. */
static void seconds(char *buf, size_t len, double s)
{
	if (s < 59.95)
		snprintf(buf, len, "%.1fs", s);
	else if (s < 3597)
		snprintf(buf, len, "%.1fm", s / 60);
	else
		snprintf(buf, len, "%.1fh", s / 3600);
}

/* Under the controller's line, only once the ladder has cut something: how long it has been
 * shedding, or how long the last recovery took (from the last overload, which is when the
 * backend was found healthy again, to every class admitted in full) and how long ago. */
static void recovery_line(FILE *f, const struct ctl_recovery *r)
{
	char a[16], b[16], c[16];

	if (!r->known)
		return;
	if (r->shedding_s >= 0) {
		seconds(a, sizeof(a), r->shedding_s);
		seconds(b, sizeof(b), r->since_overload_s >= 0 ? r->since_overload_s : 0);
		fprintf(f, "  ladder: shedding for %s, last overload %s ago", a, b);
		if (r->last_recovery_s > 0) {
			seconds(c, sizeof(c), r->last_recovery_s);
			fprintf(f, " (the last recovery took %s)", c);
		}
		fputc('\n', f);
	} else if (r->last_recovery_s > 0) {
		seconds(a, sizeof(a), r->last_recovery_s);
		seconds(b, sizeof(b), r->last_episode_s);
		seconds(c, sizeof(c), r->recovered_ago_s >= 0 ? r->recovered_ago_s : 0);
		fprintf(f, "  ladder: recovered %s ago, %s after the last overload (shed for %s)\n",
			c, a, b);
	}
}

/* One line under the service's: what the limit steers by, and the last decided window's median
 * latency, all classes (the class columns' p50 and p99 are since the attach, which says
 * little of now). A limit without a latency signal says so instead of showing a baseline it
 * does not have. */
static void ctl_line(FILE *f, const struct ctl_status *c)
{
	char base[16], obj[16], now[16];

	if (!c->known)
		return;
	latency(base, sizeof(base), c->baseline_us);
	latency(obj, sizeof(obj), c->objective_us);
	latency(now, sizeof(now), c->latency_us);
	fprintf(f, "  baseline %s  objective %s  latency %s  signal %s  limit %s", base, obj, now,
		sluice_signal_state_name(c->signal), ctl_algorithm_name(c->algorithm));
	if (c->signal == SLUICE_SIGNAL_NONE)
		fprintf(f, "  (no latency samples: the limit is blind)");
	else if (c->signal == SLUICE_SIGNAL_THIN)
		fprintf(f, "  (too few samples: windows wait for more)");
	fputc('\n', f);
	recovery_line(f, &c->rec);
}

/* How XDP runs on each interface. Generic XDP is shouted: it works, but every packet costs an
 * skb before sluice sees it, which is what XDP is there to avoid under a flood. */
static void xdp_lines(FILE *f, const struct status_snapshot *s)
{
	for (int i = 0; i < s->n_ifaces; i++) {
		const struct attached_iface *a = &s->ifaces[i];

		if (!a->xdp_mode[0])
			continue;
		if (!strcmp(a->xdp_mode, "generic"))
			fprintf(f, "xdp: GENERIC on %s -- the driver did not take the program "
				"natively: every packet costs an skb before sluice sees it\n", a->name);
		else
			fprintf(f, "xdp: %s on %s\n", a->xdp_mode, a->name);
	}
}

/* The controller's line. An age of -1 is a heartbeat never written (sluiced attached but has
 * not ticked): said in words, not as "-1.0s ago". */
static void controller_line(FILE *f, const struct status_snapshot *s)
{
	char age[32];

	if (s->heartbeat_age_s < 0)
		snprintf(age, sizeof(age), "no heartbeat yet");
	else
		snprintf(age, sizeof(age), "heartbeat %.1fs ago", s->heartbeat_age_s);
	fprintf(f, "controller: %s (%s)%s\n", s->controller_alive ? "alive" : "SILENT", age,
		s->controller_alive ? "" : " -- data path is failing open: admitting everything");
}

void status_print_table(FILE *f, const struct status_snapshot *s, int wide)
{
	controller_line(f, s);
	if (s->n_ifaces >= 0) {
		fprintf(f, "interfaces:");
		for (int i = 0; i < s->n_ifaces; i++)
			fprintf(f, "%s %s", i ? "," : "", s->ifaces[i].name);
		fprintf(f, "%s\n", s->n_ifaces ? "" : " none (no interface matches the config)");
	}
	xdp_lines(f, s);
	for (int i = 0; i < s->n; i++) {
		const struct service_status *sv = &s->s[i];

		fprintf(f, "\n%s  %s/%s%s%u  limit %u  in-flight %lld  breaker %s",
			sv->svc.name, protocol_name(sv->svc.protocol), sv->addr, sv->addr[0] ? ":" : "",
			sv->svc.port, sv->v.limit,
			sv->in_flight, breaker_name((int)sv->v.breaker_state));
		if (sv->v.breaker_state == SLUICE_BREAKER_HALF_OPEN)
			fprintf(f, " (this step admits %.0f%%)",
				100.0 * sluice_prob_complement(sv->v.breaker_shed) / SLUICE_PROB_ONE);
		/* said only while armed: it refuses the lower classes under the limit */
		if (sv->svc.protocol == SLUICE_PROTO_HTTP && (sv->v.flags & SLUICE_VERDICT_READ_GATE))
			fprintf(f, "  read gate armed");
		fputc('\n', f);
		ctl_line(f, &sv->ctl);
		class_head(f);
		if (wide) {
			for (int r = 0; r < SLUICE_REJ_REASONS; r++)
				fprintf(f, " %*s", rej_width(r), sluice_reject_heading(r));
			fprintf(f, " %9s %6s %9s %9s %9s", "errors", "err%", "429s", "retrans",
				"fail-open");
		} else {
			fprintf(f, " %10s %6s", "rejected", "err%");
		}
		fprintf(f, " %8s %8s %7s %7s\n", "p50", "p99", "ladder%", "switch%");
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			const struct class_status *cs = &sv->cls[c];
			char n1[24], n2[24], n3[24], n4[24];

			class_row(f, c, cs);
			if (wide) {
				for (int r = 0; r < SLUICE_REJ_REASONS; r++)
					fprintf(f, " %*s", rej_width(r),
						count_cell(n1, sizeof(n1), cs->st.rejected[r],
							   rej_width(r)));
				fprintf(f, " %9s %5.1f%% %9s %9s %9s",
					count_cell(n1, sizeof(n1), cs->st.errors, 9),
					100.0 * cs->error_rate,
					count_cell(n2, sizeof(n2), cs->st.resp_429, 9),
					count_cell(n3, sizeof(n3), cs->st.retransmits, 9),
					count_cell(n4, sizeof(n4), cs->st.fail_open, 9));
			} else {
				fprintf(f, " %10s %5.1f%%",
					count_cell(n1, sizeof(n1), rejected_total(&cs->st), 10),
					100.0 * cs->error_rate);
			}
			class_tail(f, cs);
		}
	}
	if (!s->n)
		fprintf(f, "no services configured\n");
	else
		fprintf(f, "\nadmitted%% = admitted / arrived since attach; ladder%% = admit probability "
			"of the priority ladder now;\nswitch%% = share a manual switch sheds now%s\n",
			wide ? "" : "; rejected = every reason (--wide: by reason, errors, 429s)");
	if (s->flows >= 0)
		fprintf(f, "\nflows tracked: %d", s->flows);
	fprintf(f, "\npackets: service %llu, malformed %llu, rst sent %llu, http replies %llu, reply failed %llu\n",
		(unsigned long long)s->pkt.service, (unsigned long long)s->pkt.malformed,
		(unsigned long long)s->pkt.rst_sent, (unsigned long long)s->pkt.reply_sent,
		(unsigned long long)s->pkt.reply_failed);
}

static json_t *class_json(const struct class_status *cs, int c)
{
	json_t *by = json_object();

	json_t *o;

	for (int r = 0; r < SLUICE_REJ_REASONS; r++)
		json_object_set_new(by, sluice_reject_name(r), json_integer((json_int_t)cs->st.rejected[r]));
	/* The open-connection cap's refusals are counted by the cap itself (map conn_cap). */
	json_object_set_new(by, "connections", json_integer((json_int_t)cs->conn_rejected));
	o = json_pack("{s:s,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
			 "s:o,s:o,s:o,s:o,s:o}",
		"class", sluice_class_name(c), "arrivals", (json_int_t)cs->st.arrivals,
		"admitted", (json_int_t)cs->st.admitted,
		"rejected", (json_int_t)(rejected_total(&cs->st) + cs->conn_rejected),
		"rejected_by", by, "in_flight", (json_int_t)cs->in_flight,
		"threshold", (json_int_t)cs->threshold, "completed", (json_int_t)cs->st.completed,
		"p50_us", (json_int_t)llround(cs->p50_us), "p99_us", (json_int_t)llround(cs->p99_us),
		"errors", (json_int_t)cs->st.errors, "http_429", (json_int_t)cs->st.resp_429,
		"retransmits", (json_int_t)cs->st.retransmits, "fail_open", (json_int_t)cs->st.fail_open,
		"untracked", (json_int_t)cs->st.untracked, "admit_prob", jsonio_fixed(cs->admit_prob, 4),
		"switch_shed", jsonio_fixed(1 - cs->switch_admit, 4),
		"rate_per_s", jsonio_fixed(cs->rate_per_s, 2), "error_rate", jsonio_fixed(cs->error_rate, 4),
		/* measured: admitted / arrivals since attach (null before the first arrival) */
		"admitted_ratio", cs->st.arrivals ?
			jsonio_fixed((double)cs->st.admitted / (double)cs->st.arrivals, 4) : json_null());
	/* the class's open connections and their cap (null: no cap) */
	if (o && cs->open >= 0) {
		json_object_set_new(o, "open_connections", json_integer((json_int_t)cs->open));
		json_object_set_new(o, "connection_cap", cs->conn_cap ?
				    json_integer((json_int_t)cs->conn_cap) : json_null());
	}
	return o;
}

/* A value the controller reports only once known: null before. */
static json_t *known_us(const struct ctl_status *c, unsigned us)
{
	return c->known && us ? json_integer((json_int_t)us) : json_null();
}

/* Seconds, or null for -1 (none). */
static json_t *secs_or_null(double s)
{
	return s >= 0 ? jsonio_fixed(s, 2) : json_null();
}

/* The ladder's shedding and recovery (every key null when the entry cannot be read). */
static json_t *recovery_json(const struct ctl_recovery *r)
{
	const struct ctl_recovery none = CTL_RECOVERY_NONE, *v = r->known ? r : &none;

	return json_pack("{s:o,s:o,s:o,s:o,s:o}",
			 "shedding_s", secs_or_null(v->shedding_s),
			 "since_overload_s", secs_or_null(v->since_overload_s),
			 "last_recovery_s", secs_or_null(v->last_recovery_s),
			 "last_episode_s", secs_or_null(v->last_episode_s),
			 "recovered_ago_s", secs_or_null(v->recovered_ago_s));
}

/* The controller's keys of a service (null when its entry is not there). */
static void ctl_json(json_t *o, const struct ctl_status *c)
{
	json_t *lad = json_object();

	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		json_object_set_new(lad, sluice_class_name(k), c->known ?
				    json_string(sluice_ladder_state_name(c->ladder[k])) : json_null());
	json_object_set_new(o, "baseline_us", known_us(c, c->baseline_us));
	json_object_set_new(o, "objective_us", known_us(c, c->objective_us));
	json_object_set_new(o, "latency_us", known_us(c, c->latency_us));
	json_object_set_new(o, "top_class_latency_us", known_us(c, c->top_class_us));
	json_object_set_new(o, "signal", c->known ?
			    json_string(sluice_signal_state_name(c->signal)) : json_null());
	json_object_set_new(o, "limit_algorithm", c->known ?
			    json_string(ctl_algorithm_name(c->algorithm)) : json_null());
	json_object_set_new(o, "ladder", lad);
	json_object_set_new(o, "baseline_resets", c->known ?
			    json_integer((json_int_t)c->reset_ack) : json_null());
	json_object_set_new(o, "recovery", recovery_json(&c->rec));
}

static json_t *service_json(const struct service_status *sv)
{
	json_t *classes = json_array(), *o;
	char name[SLUICE_NAME_LEN + 1];

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		json_array_append_new(classes, class_json(&sv->cls[c], c));
	/* the name as the pinned map holds it (a field it may fill): never past it, and never a
	 * service left out of the list for a byte that is not UTF-8 */
	snprintf(name, sizeof(name), "%.*s", SLUICE_NAME_LEN, sv->svc.name);
	o = json_pack("{s:o,s:i,s:s,s:I,s:I,s:{s:s,s:o},s:o}",
		"name", jsonio_text(name), "port", (int)sv->svc.port,
		"protocol", protocol_name(sv->svc.protocol), "limit", (json_int_t)sv->v.limit,
		"in_flight", (json_int_t)sv->in_flight,
		"breaker", "state", breaker_name((int)sv->v.breaker_state),
		"step", jsonio_fixed(breaker_admit_ratio(&sv->v), 2),
		"classes", classes);
	if (o)
		ctl_json(o, &sv->ctl);
	/* tcp: in_flight counts busy connections; the open ones are their own key. */
	if (o && sv->addr[0])
		json_object_set_new(o, "address", json_string(sv->addr));
	if (o && sv->connections >= 0)
		json_object_set_new(o, "connections", json_integer(sv->connections));
	/* null when the pins predate the count */
	if (o)
		json_object_set_new(o, "untrusted_priority", sv->untrusted_priority >= 0 ?
				    json_integer(sv->untrusted_priority) : json_null());
	/* the read gate is http's: null for a tcp service */
	if (o)
		json_object_set_new(o, "read_gate_armed", sv->svc.protocol == SLUICE_PROTO_HTTP ?
				    json_boolean(sv->v.flags & SLUICE_VERDICT_READ_GATE) :
				    json_null());
	return o;
}

void status_collect_ifaces(struct status_snapshot *s, const char *pin_dir)
{
	s->n_ifaces = attach_list(pin_dir, s->g.netns_ino, s->ifaces, SLUICE_MAX_IFACES);
	for (int i = 0; i < s->n_ifaces; i++) {
		const char *mode = attach_xdp_mode(s->ifaces[i].ifindex, s->g.netns_ino);

		snprintf(s->ifaces[i].xdp_mode, sizeof(s->ifaces[i].xdp_mode), "%s",
			 mode ? mode : "");
	}
}

int status_print_json(FILE *f, const struct status_snapshot *s)
{
	json_t *services = json_array(), *root;
	int rc;

	for (int i = 0; i < s->n; i++)
		json_array_append_new(services, service_json(&s->s[i]));
	root = json_pack("{s:b,s:o,s:i,s:o,s:{s:I,s:I,s:I,s:I,s:I}}",
		"controller_alive", s->controller_alive,
		"heartbeat_age_s", jsonio_fixed(s->heartbeat_age_s, 3), "flows", s->flows,
		"services", services,
		"packets", "service", (json_int_t)s->pkt.service, "malformed", (json_int_t)s->pkt.malformed,
		"rst_sent", (json_int_t)s->pkt.rst_sent, "reply_sent", (json_int_t)s->pkt.reply_sent,
		"reply_failed", (json_int_t)s->pkt.reply_failed);
	if (s->n_ifaces >= 0) {
		json_t *ifs = json_array(), *xdp = json_array();

		/* xdp: per interface, the mode null when it cannot be told from here (another
		 * network namespace) */
		for (int i = 0; i < s->n_ifaces; i++) {
			const struct attached_iface *a = &s->ifaces[i];

			/* an interface name is whatever bytes the kernel took: one that is not
			 * UTF-8 is shown with U+FFFD, not left out of both lists */
			json_array_append_new(ifs, jsonio_text(a->name));
			json_array_append_new(xdp, json_pack("{s:o,s:o}", "interface",
					      jsonio_text(a->name), "mode", a->xdp_mode[0] ?
					      json_string(a->xdp_mode) : json_null()));
		}
		json_object_set_new(root, "interfaces", ifs);
		json_object_set_new(root, "xdp", xdp);
	}
	rc = jsonio_print_line(f, root);
	json_decref(root);
	return rc;
}

/* A bucket's bounds in microseconds. The last one has no upper bound: the data path puts every
 * latency from its lower bound on into it (sluice_hist_bucket), a 5-minute request too. */
static void hist_range(char *buf, size_t len, unsigned i)
{
	unsigned long long lo = sluice_hist_lower_us(i);

	if (i == SLUICE_HIST_BUCKETS - 1)
		snprintf(buf, len, "%llu -> inf", lo);
	else
		snprintf(buf, len, "%llu -> %llu", lo,
			 (unsigned long long)sluice_hist_upper_us(i) - 1);
}

void status_print_hist(FILE *f, const struct service_status *s, int cls)
{
	struct sluice_hist h;
	unsigned long long max = 0, total = 0;
	int first = -1, last = -1;

	memset(&h, 0, sizeof(h));
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		if (cls >= 0 && c != cls)
			continue;
		for (int i = 0; i < SLUICE_HIST_BUCKETS; i++)
			h.bucket[i] += s->cls[c].hist.bucket[i];
	}
	for (int i = 0; i < SLUICE_HIST_BUCKETS; i++) {
		if (!h.bucket[i])
			continue;
		if (first < 0)
			first = i;
		last = i;
		total += h.bucket[i];
		if (h.bucket[i] > max)
			max = h.bucket[i];
	}
	fprintf(f, "%s %s: request latency, %llu requests\n", s->svc.name,
		cls >= 0 ? sluice_class_name(cls) : "all classes", total);
	if (first < 0) {
		fprintf(f, "  (no samples)\n");
		return;
	}
	fprintf(f, "%24s : %-10s |%-40s|\n", "usecs", "count", "distribution");
	for (int i = first; i <= last; i++) {
		char range[32];
		int stars = (int)(40 * h.bucket[i] / max);

		hist_range(range, sizeof(range), (unsigned)i);
		fprintf(f, "%24s : %-10llu |%-40.*s|\n", range, (unsigned long long)h.bucket[i],
			stars, "****************************************");
	}
}
