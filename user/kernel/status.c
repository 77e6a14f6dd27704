// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/status.h"

#include <string.h>
#include "control/signals.h"
#include "common/clock.h"
#include "kernel/flowgc.h"

static const char *CLASS_NAMES[] = { "L0", "L1", "L2", "L3" };

const char *protocol_name(int p)
{
	return p == SLUICE_PROTO_HTTP ? "http" : "tcp";
}

const char *breaker_name(int s)
{
	switch (s) {
	case SLUICE_BREAKER_OPEN: return "open";
	case SLUICE_BREAKER_HALF_OPEN: return "half_open";
	default: return "closed";
	}
}

const char *reject_reason_name(int r)
{
	static const char *n[] = { "switch", "breaker", "headroom", "ladder", "client_limit" };
	return r >= 0 && r < SLUICE_REJ_REASONS ? n[r] : "unknown";
}

int status_collect(const struct sluice_maps *m, struct status_snapshot *out, int count_flows)
{
	int err;

	memset(out, 0, sizeof(*out));
	out->now_ns = monotonic_ns();
	if ((err = maps_read_globals(m, &out->g)))
		return err;
	out->heartbeat_age_s = out->g.heartbeat_ns ?
		(double)(out->now_ns - out->g.heartbeat_ns) / 1e9 : -1;
	out->controller_alive = out->g.heartbeat_ns &&
		out->now_ns - out->g.heartbeat_ns <= out->g.heartbeat_timeout_ns;
	maps_read_pkt_stats(m, &out->pkt);
	out->flows = -1;
	if (count_flows) {
		int per[SLUICE_MAX_SERVICES];
		out->flows = maps_count_flows(m, per, SLUICE_MAX_SERVICES);
	}
	for (int i = 0; i < SLUICE_MAX_SERVICES; i++) {
		struct service_status *s = &out->s[out->n];
		struct sluice_inflight inf;

		if (maps_read_service(m, i, &s->svc) || !s->svc.name[0] || !s->svc.port)
			continue;
		s->idx = i;
		maps_read_verdict(m, i, &s->v);
		if (maps_read_inflight(m, i, &inf) == 0)
			s->in_flight = inf.total;
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
				/* 429s from the server are answers, not failures (seed 001 pit 2). */
				double calls = (double)cs->st.completed - (double)cs->st.resp_429;
				cs->error_rate = calls > 0 ? (double)cs->st.errors / calls : 0;
			}
		}
		out->n++;
	}
	return 0;
}

void status_rates(const struct status_snapshot *prev, struct status_snapshot *cur)
{
	double dt = (double)(cur->now_ns - prev->now_ns) / 1e9;

	if (dt <= 0)
		return;
	for (int i = 0; i < cur->n; i++)
		for (int j = 0; j < prev->n; j++) {
			if (prev->s[j].idx != cur->s[i].idx)
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

void status_print_table(FILE *f, const struct status_snapshot *s)
{
	fprintf(f, "controller: %s (heartbeat %.1fs ago)%s\n",
		s->controller_alive ? "alive" : "SILENT",
		s->heartbeat_age_s,
		s->controller_alive ? "" : " -- data path is failing open: admitting everything");
	for (int i = 0; i < s->n; i++) {
		const struct service_status *sv = &s->s[i];

		fprintf(f, "\n%s  %s/%u  limit %u  in-flight %lld  breaker %s",
			sv->svc.name, protocol_name(sv->svc.protocol), sv->svc.port, sv->v.limit,
			sv->in_flight, breaker_name((int)sv->v.breaker_state));
		if (sv->v.breaker_state == SLUICE_BREAKER_HALF_OPEN)
			fprintf(f, " (admit %.0f%%)", 100.0 * sluice_prob_complement(sv->v.breaker_shed) / SLUICE_PROB_ONE);
		fprintf(f, "\n  %-5s %8s %9s %9s %9s %9s %7s %9s %9s %9s %9s %9s %6s %9s %8s %8s %6s\n",
			"class", "req/s", "in-flight", "threshold", "arrived", "admitted", "admit%",
			"rej:switch", "rej:brkr", "rej:headrm", "rej:ladder", "errors", "err%", "429s",
			"p50", "p99", "shed%");
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			const struct class_status *cs = &sv->cls[c];
			char p50[16] = "-", p99[16] = "-", rate[16] = "-";

			if (cs->p50_us > 0) {
				snprintf(p50, sizeof(p50), "%.1fms", cs->p50_us / 1000);
				snprintf(p99, sizeof(p99), "%.1fms", cs->p99_us / 1000);
			}
			if (cs->rate_per_s >= 0)
				snprintf(rate, sizeof(rate), "%.1f", cs->rate_per_s);
			fprintf(f, "  %-5s %8s %9lld %9u %9llu %9llu %6.0f%% %10llu %9llu %10llu %10llu %9llu %5.1f%% %9llu %8s %8s %5.0f%%\n",
				CLASS_NAMES[c], rate, cs->in_flight, cs->threshold,
				(unsigned long long)cs->st.arrivals,
				(unsigned long long)cs->st.admitted, 100.0 * cs->admit_prob,
				(unsigned long long)cs->st.rejected[SLUICE_REJ_SWITCH],
				(unsigned long long)cs->st.rejected[SLUICE_REJ_BREAKER],
				(unsigned long long)cs->st.rejected[SLUICE_REJ_HEADROOM],
				(unsigned long long)cs->st.rejected[SLUICE_REJ_LADDER],
				(unsigned long long)cs->st.errors, 100.0 * cs->error_rate,
				(unsigned long long)cs->st.resp_429,
				p50, p99, 100.0 * (1 - cs->switch_admit));
		}
	}
	if (!s->n)
		fprintf(f, "no services configured\n");
	if (s->flows >= 0)
		fprintf(f, "\nflows tracked: %d", s->flows);
	fprintf(f, "\npackets: service %llu, malformed %llu, rst sent %llu, http replies %llu, reply failed %llu\n",
		(unsigned long long)s->pkt.service, (unsigned long long)s->pkt.malformed,
		(unsigned long long)s->pkt.rst_sent, (unsigned long long)s->pkt.reply_sent,
		(unsigned long long)s->pkt.reply_failed);
}

void status_print_json(FILE *f, const struct status_snapshot *s)
{
	fprintf(f, "{\"controller_alive\":%s,\"heartbeat_age_s\":%.3f,\"flows\":%d,\"services\":[",
		s->controller_alive ? "true" : "false", s->heartbeat_age_s, s->flows);
	for (int i = 0; i < s->n; i++) {
		const struct service_status *sv = &s->s[i];

		fprintf(f, "%s{\"name\":\"%s\",\"port\":%u,\"protocol\":\"%s\",\"limit\":%u,"
			"\"in_flight\":%lld,\"breaker\":{\"state\":\"%s\",\"step\":%.2f},\"classes\":[",
			i ? "," : "", sv->svc.name, sv->svc.port, protocol_name(sv->svc.protocol),
			sv->v.limit, sv->in_flight, breaker_name((int)sv->v.breaker_state),
			(double)sluice_prob_complement(sv->v.breaker_shed) / SLUICE_PROB_ONE);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			const struct class_status *cs = &sv->cls[c];

			fprintf(f, "%s{\"class\":\"%s\",\"arrivals\":%llu,\"admitted\":%llu,"
				"\"rejected\":%llu,\"rejected_by\":{",
				c ? "," : "", CLASS_NAMES[c], (unsigned long long)cs->st.arrivals,
				(unsigned long long)cs->st.admitted, rejected_total(&cs->st));
			for (int r = 0; r < SLUICE_REJ_REASONS; r++)
				fprintf(f, "%s\"%s\":%llu", r ? "," : "", reject_reason_name(r),
					(unsigned long long)cs->st.rejected[r]);
			fprintf(f, "},\"in_flight\":%lld,\"threshold\":%u,\"completed\":%llu,"
				"\"p50_us\":%.0f,\"p99_us\":%.0f,\"errors\":%llu,\"http_429\":%llu,"
				"\"retransmits\":%llu,\"fail_open\":%llu,\"untracked\":%llu,"
				"\"admit_prob\":%.4f,\"switch_shed\":%.4f,\"rate_per_s\":%.2f,"
				"\"error_rate\":%.4f}",
				cs->in_flight, cs->threshold, (unsigned long long)cs->st.completed,
				cs->p50_us, cs->p99_us, (unsigned long long)cs->st.errors,
				(unsigned long long)cs->st.resp_429,
				(unsigned long long)cs->st.retransmits,
				(unsigned long long)cs->st.fail_open,
				(unsigned long long)cs->st.untracked, cs->admit_prob,
				1 - cs->switch_admit, cs->rate_per_s, cs->error_rate);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "],\"packets\":{\"service\":%llu,\"malformed\":%llu,\"rst_sent\":%llu,"
		"\"reply_sent\":%llu,\"reply_failed\":%llu}}\n",
		(unsigned long long)s->pkt.service, (unsigned long long)s->pkt.malformed,
		(unsigned long long)s->pkt.rst_sent, (unsigned long long)s->pkt.reply_sent,
		(unsigned long long)s->pkt.reply_failed);
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
		cls >= 0 ? CLASS_NAMES[cls] : "all classes", total);
	if (first < 0) {
		fprintf(f, "  (no samples)\n");
		return;
	}
	fprintf(f, "%24s : %-10s |%-40s|\n", "usecs", "count", "distribution");
	for (int i = first; i <= last; i++) {
		char range[32];
		int stars = (int)(40 * h.bucket[i] / max);

		snprintf(range, sizeof(range), "%llu -> %llu",
			 (unsigned long long)sluice_hist_lower_us((unsigned)i),
			 (unsigned long long)sluice_hist_upper_us((unsigned)i) - 1);
		fprintf(f, "%24s : %-10llu |%-40.*s|\n", range, (unsigned long long)h.bucket[i],
			stars, "****************************************");
	}
}
