// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Node-wide arbitration; the rule is in nodearb.h. */
#include "control/nodearb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sluice_node_init(struct sluice_node_arb *a)
{
	memset(a, 0, sizeof(*a));
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		a->admit[c] = SLUICE_PROB_ONE;
}

int sluice_node_shedding(const struct sluice_node_arb *a)
{
	for (int c = SLUICE_NODE_HIGHEST_SHED; c <= SLUICE_NODE_LOWEST; c++)
		if (a->admit[c] < SLUICE_PROB_ONE)
			return 1;
	return 0;
}

uint32_t sluice_node_combine(uint32_t service_admit, uint32_t node_admit)
{
	if (node_admit >= SLUICE_PROB_ONE)
		return service_admit;
	return (uint32_t)(((uint64_t)service_admit * node_admit) / SLUICE_PROB_ONE);
}

static void report(const struct sluice_event_sink *sink, uint64_t now, int cls, uint32_t from,
		   uint32_t to, const char *why, double pct)
{
	struct sluice_event ev;

	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now, to < from ? SLUICE_EV_ALERT : SLUICE_EV_INFO, "",
			  SLUICE_EVM_NODE, from >= SLUICE_PROB_ONE ? "full" : from ? "partial" : "off",
			  to >= SLUICE_PROB_ONE ? "full" : to ? "partial" : "off", why);
	ev.cls = cls;
	sluice_event_num(&ev, "admit_pct_from", (double)from * 100.0 / SLUICE_PROB_ONE);
	sluice_event_num(&ev, "admit_pct_to", (double)to * 100.0 / SLUICE_PROB_ONE);
	sluice_event_num(&ev, "cpu_pressure_pct", pct);
	sluice_event_emit(sink, &ev);
}

/* The lowest class still admitted (L3, then L2), halved; -1 when both are off already. */
static int cut(struct sluice_node_arb *a, uint64_t now, double pct,
	       const struct sluice_event_sink *sink)
{
	for (int c = SLUICE_NODE_LOWEST; c >= SLUICE_NODE_HIGHEST_SHED; c--) {
		uint32_t old = a->admit[c], nv = old / 2;

		if (!old)
			continue;
		if (nv < SLUICE_NODE_FLOOR)
			nv = 0;
		a->admit[c] = nv;
		a->cuts++;
		report(sink, now, c, old, nv, "node_cpu_pressure", pct);
		return c;
	}
	return -1;
}

/* The highest class shed (L2, then L3), doubled (from nothing: to the floor). */
static int restore(struct sluice_node_arb *a, uint64_t now, double pct,
		   const struct sluice_event_sink *sink)
{
	for (int c = SLUICE_NODE_HIGHEST_SHED; c <= SLUICE_NODE_LOWEST; c++) {
		uint32_t old = a->admit[c], nv;

		if (old >= SLUICE_PROB_ONE)
			continue;
		nv = old ? (old >= SLUICE_PROB_ONE / 2 ? SLUICE_PROB_ONE : old * 2) : SLUICE_NODE_FLOOR;
		a->admit[c] = nv;
		a->restores++;
		report(sink, now, c, old, nv, "node_calm", pct);
		return c;
	}
	return -1;
}

int sluice_node_tick(struct sluice_node_arb *a, const struct sluice_node_params *p,
		     const struct sluice_node_obs *obs, uint64_t now_ns,
		     const struct sluice_event_sink *sink)
{
	uint64_t dt;

	if (!obs->valid) {
		a->last_obs_ns = 0;     /* a gap: the time in it is evidence of nothing */
		return 0;
	}
	dt = a->last_obs_ns && now_ns > a->last_obs_ns ? now_ns - a->last_obs_ns : 0;
	a->last_obs_ns = now_ns;
	a->last_pct = obs->pressure_pct;
	a->saturated = obs->pressure_pct > p->threshold_pct;
	if (a->saturated) {
		a->good_ns = 0;
		if (a->changed_once && now_ns - a->last_change_ns < p->step_ns)
			return 0;
		if (cut(a, now_ns, obs->pressure_pct, sink) < 0)
			return 0;
	} else {
		if (!sluice_node_shedding(a))
			return 0;
		if (obs->arrivals > 0)
			a->good_ns += dt;   /* calm measured while the services had traffic */
		if (a->good_ns < p->recover_ns)
			return 0;
		restore(a, now_ns, obs->pressure_pct, sink);
		a->good_ns = 0;
	}
	a->last_change_ns = now_ns;
	a->changed_once = 1;
	return 1;
}

int sluice_psi_parse(const char *text, uint64_t *some_total_us, double *some_avg10)
{
	const char *line = text;

	while (line && *line) {
		if (!strncmp(line, "some ", 5)) {
			const char *avg = strstr(line, "avg10="), *tot = strstr(line, "total=");
			const char *eol = strchr(line, '\n');
			char *end;

			if (!avg || !tot || (eol && (avg > eol || tot > eol)))
				return -1;
			*some_avg10 = strtod(avg + 6, &end);
			if (end == avg + 6)
				return -1;
			*some_total_us = strtoull(tot + 6, &end, 10);
			return end == tot + 6 ? -1 : 0;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}
