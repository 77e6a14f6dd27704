// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Cascade suppression; see cascade.h. */
#include <string.h>
#include "control/cascade.h"

void sluice_cascade_params_default(struct sluice_cascade_params *p)
{
	p->max_opens = 5;
	p->window_s = 10;
	p->suspend_s = 0;
}

void sluice_cascade_params_from_conf(const struct cascade_conf *cc, struct sluice_cascade_params *p)
{
	sluice_cascade_params_default(p);
	if (cc->max_opens > 0)
		p->max_opens = (uint32_t)cc->max_opens < SLUICE_CASCADE_MAX_OPENS - 1 ?
			       (uint32_t)cc->max_opens : SLUICE_CASCADE_MAX_OPENS - 1;
	if (cc->window_s > 0)
		p->window_s = cc->window_s;
	if (cc->suspend_s >= 0)
		p->suspend_s = cc->suspend_s;    /* 0 is meaningful: operator only */
}

void sluice_cascade_init(struct sluice_cascade *c)
{
	memset(c, 0, sizeof(*c));
}

static void cascade_report(const struct sluice_cascade *c, const struct sluice_event_sink *sink,
		   uint64_t now, int level, const char *service, const char *from, const char *to,
		   const char *why, double opens, const struct sluice_cascade_params *p)
{
	struct sluice_event ev;

	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now, level, service, SLUICE_EVM_CASCADE, from, to, why);
	sluice_event_num(&ev, "opens_in_window", opens);
	sluice_event_num(&ev, "max_opens", p ? p->max_opens : 0);
	sluice_event_num(&ev, "window_s", p ? p->window_s : 0);
	sluice_event_num(&ev, "triggers", (double)c->triggers);
	sluice_event_emit(sink, &ev);
}

int sluice_cascade_record_open(struct sluice_cascade *c, const struct sluice_cascade_params *p,
			       const char *service, uint64_t now_ns,
			       const struct sluice_event_sink *sink)
{
	uint64_t win = (uint64_t)(p->window_s * 1e9);
	uint32_t i, count = 0;

	c->open_ns[c->head] = now_ns;
	c->head = (c->head + 1) % SLUICE_CASCADE_MAX_OPENS;
	if (c->n < SLUICE_CASCADE_MAX_OPENS)
		c->n++;
	for (i = 0; i < c->n; i++) {
		uint64_t t = c->open_ns[(c->head + SLUICE_CASCADE_MAX_OPENS - 1 - i) %
				       SLUICE_CASCADE_MAX_OPENS];
		if (t <= now_ns && now_ns - t < win)
			count++;
	}
	c->last_count = count;
	if (c->suspended || count <= p->max_opens)
		return 0;
	c->suspended = 1;
	c->suspended_since_ns = now_ns;
	c->triggers++;
	cascade_report(c, sink, now_ns, SLUICE_EV_ALERT, service, "armed", "suspended",
	       "too_many_breakers_opened", count, p);
	return 1;
}

int sluice_cascade_tick(struct sluice_cascade *c, const struct sluice_cascade_params *p,
			uint64_t now_ns, const struct sluice_event_sink *sink)
{
	if (c->suspended && p->suspend_s > 0 &&
	    now_ns - c->suspended_since_ns >= (uint64_t)(p->suspend_s * 1e9)) {
		c->suspended = 0;
		c->n = c->head = 0;   /* a fresh count: the old openings already had their say */
		cascade_report(c, sink, now_ns, SLUICE_EV_INFO, "", "suspended", "armed", "suspend_elapsed",
		       c->last_count, p);
	}
	return c->suspended;
}

void sluice_cascade_clear(struct sluice_cascade *c, uint64_t now_ns, const char *who,
			  const struct sluice_event_sink *sink)
{
	int was = c->suspended;

	c->suspended = 0;
	c->n = c->head = 0;
	if (was)
		cascade_report(c, sink, now_ns, SLUICE_EV_INFO, "", "suspended", "armed",
		       who && *who ? who : "operator_clear", c->last_count, NULL);
}
