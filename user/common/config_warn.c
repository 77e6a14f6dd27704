// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Conflicting settings; see config_warn.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "common/config_warn.h"
#include "common/names.h"

static int warn(struct doc_errors *out, int n, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int warn(struct doc_errors *out, int n, int line, const char *fmt, ...)
{
	va_list ap;

	if (n < DOC_MAX_ERRORS) {
		out->e[n].line = line;
		out->e[n].column = 0;
		va_start(ap, fmt);
		vsnprintf(out->e[n].msg, sizeof(out->e[n].msg), fmt, ap);
		va_end(ap);
		out->n = n + 1;
	}
	return n + 1;
}

/* The absolute latency objective written for a service, in ms; 0 when it is learned. */
static double written_objective_ms(const struct service_conf *s)
{
	if (s->latency_slo_ms > 0)
		return s->latency_slo_ms;
	return s->target_latency_ms > 0 ? s->target_latency_ms : 0;
}

/* An open-connection cap that defeats the limit or a class's share. */
static int conn_cap_warnings(struct doc_errors *out, int n, const struct service_conf *s)
{
	if (s->limit_min > s->max_connections)
		n = warn(out, n, s->line, "service '%s': limit %s %d is above max_connections (%d): "
			 "a connection is busy only while it is open, so the cap binds first and "
			 "the limit never does", s->name, s->limit_fixed ? "fixed" : "min",
			 s->limit_min, s->max_connections);
	for (int k = 1; k < SLUICE_NUM_CLASSES; k++)
		if (s->headroom_set && (long long)s->max_connections * s->headroom[k] < 100)
			n = warn(out, n, s->line, "service '%s': headroom %s %d %% of max_connections "
				 "(%d) is less than one connection; %s keeps 1", s->name,
				 sluice_class_name(k), s->headroom[k], s->max_connections,
				 sluice_class_name(k));
	return n;
}

/* Keys written with a value another key overrides: each is valid, one does nothing. */
static int without_effect_warnings(struct doc_errors *out, int n, const struct service_conf *s)
{
	static const char *const algorithms[] = { "auto", "gradient", "aimd" };

	if (s->limit_fixed > 0 && s->limit_algorithm_written &&
	    s->limit_algorithm != LIMIT_ALG_AUTO)
		n = warn(out, n, s->line, "service '%s': limit_algorithm %s has no effect: a fixed "
			 "limit (%d) does not move", s->name, algorithms[s->limit_algorithm],
			 s->limit_fixed);
	if (s->latency_slo_written && s->target_latency_ms > 0) {
		if (s->latency_slo_ms > 0)
			n = warn(out, n, s->line, "service '%s': target_latency_ms (%g) has no "
				 "effect: latency_slo %gms sets the objective", s->name,
				 s->target_latency_ms, s->latency_slo_ms);
		else
			n = warn(out, n, s->line, "service '%s': latency_slo %gx has no effect: "
				 "target_latency_ms (%g) sets the objective", s->name,
				 s->latency_slo_ratio, s->target_latency_ms);
	}
	/* an http service answers a refused request 429 (503 from the breaker): reject says only
	 * how the SYNs its connection cap refuses are answered */
	if (s->protocol == SLUICE_PROTO_HTTP && s->reject == SLUICE_REJECT_DROP &&
	    s->connection_cap == CONN_CAP_OFF)
		n = warn(out, n, s->line, "service '%s': reject drop has no effect: with "
			 "connection_cap off no SYN of this http service is refused (a refused "
			 "request is answered 429, or 503 from the breaker)", s->name);
	return n;
}

/* A header or DSCP rule: a class the client marks itself. */
static int has_client_marked_rule(const struct service_conf *s)
{
	for (int r = 0; r < s->n_rules; r++)
		if (s->rules[r].kind == RULE_HEADER || s->rules[r].kind == RULE_DSCP)
			return 1;
	return 0;
}

int config_warnings(const struct sluice_config *cfg, struct doc_errors *out)
{
	int n = 0;

	memset(out, 0, sizeof(*out));
	if (cfg->node.arbitration == NODE_ARB_PSI && access(cfg->node.pressure_file, R_OK))
		n = warn(out, n, 0, "node arbitration psi: %s cannot be read here (a kernel without "
			 "pressure stall information, or booted with psi=0): sluiced runs with it off",
			 cfg->node.pressure_file);
	for (int i = 0; i < cfg->n_services; i++) {
		const struct service_conf *s = &cfg->services[i];
		double obj = written_objective_ms(s);
		/* the classic aimd's growth band (0.7 x the objective) in units of the baseline */
		double aimd_band = 0.7 * (s->latency_slo_ratio >= 1 ? s->latency_slo_ratio : 1.2);

		if (obj > 0 && s->breaker.slow_call_ms < obj)
			n = warn(out, n, s->line, "service '%s': breaker slow_call_ms (%d) is below the "
				 "latency objective (%g ms): the breaker opens on calls the limiter "
				 "counts as on target", s->name, s->breaker.slow_call_ms, obj);
		if (s->limit_fixed > 0 && obj == 0)
			n = warn(out, n, s->line, "service '%s': a fixed limit with a learned latency "
				 "objective: the baseline is learned at whatever load the fixed limit "
				 "admits; write latency_slo as a latency (e.g. 50ms)", s->name);
		if (s->limit_algorithm == LIMIT_ALG_AIMD && !s->limit_fixed && obj == 0 &&
		    aimd_band <= 1)
			n = warn(out, n, s->line, "service '%s': limit_algorithm aimd grows only while "
				 "the median is below 0.7 x the objective, here %.2f x the learned "
				 "baseline (its unloaded median), which a service seldom shows: after a "
				 "cut the limit seldom grows back; write latency_slo as a latency, or "
				 "use gradient", s->name, aimd_band);
		if (s->aimd_window_ms < cfg->control_interval_ms)
			n = warn(out, n, s->line, "service '%s': aimd_window_ms (%d) is shorter than "
				 "control_interval_ms (%d): a window cannot end between two ticks",
				 s->name, s->aimd_window_ms, cfg->control_interval_ms);
		if (s->max_connections > 0 && s->protocol != SLUICE_PROTO_HTTP)
			n = conn_cap_warnings(out, n, s);
		if (s->retry_after_s == 0 && s->protocol == SLUICE_PROTO_HTTP)
			n = warn(out, n, s->line, "service '%s': retry_after_s 0 tells refused clients "
				 "to come back at once, feeding the overload it sheds", s->name);
		n = without_effect_warnings(out, n, s);
		if (!s->n_trust && has_client_marked_rule(s))
			n = warn(out, n, s->line, "service '%s': its header and dscp rules are inert "
				 "without trust_from (no source is trusted to set a priority); list the "
				 "prefixes whose marks count in trust_from", s->name);
	}
	return n;
}
