// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* One http service's connection cap from tick to tick: see conncap.h. */
#include <string.h>
#include "control/conncap.h"

static int any_cap(const struct sluice_conncap *c)
{
	return (c->share.cap[1] | c->share.cap[2] | c->share.cap[3]) != 0;
}

int sluice_conncap_held(const struct sluice_conncap *c)
{
	return c->dirty || any_cap(c);
}

void sluice_conncap_written(struct sluice_conncap *c, int ok)
{
	c->dirty = !ok;
}

int sluice_conncap_adopting(const struct sluice_conncap *c, const struct sluice_conncap_in *in)
{
	return in->http && !c->adopted;
}

int sluice_conncap_adopt(struct sluice_conncap *c, const uint32_t cap[SLUICE_NUM_CLASSES],
			 const __u64 rejected[SLUICE_NUM_CLASSES], uint64_t now_ns)
{
	static const uint32_t none[SLUICE_NUM_CLASSES];
	/* caps that cannot be read are cleared too: left as they are, they would refuse the
	 * class's SYNs with nobody to lift them */
	int foreign = !cap || (!c->keep && (cap[1] | cap[2] | cap[3]));

	c->adopted = 1;
	/* another service's caps (a slot given to this one): not ours, cleared */
	sluice_connshare_adopt(&c->share, foreign ? none : cap, SLUICE_CONNSHARE_HOLD_NS, now_ns);
	memcpy(c->rejected, rejected, sizeof(c->rejected));
	/* caps taken over were set under churn (or auto): the gate holds them as the rule does */
	c->churn_ticks = 0;
	c->churn_until_ns = any_cap(c) ? now_ns + SLUICE_CONNSHARE_HOLD_NS : 0;
	return foreign;
}

int sluice_conncap_begin(struct sluice_conncap *c, const struct sluice_conncap_in *in,
			 uint64_t now_ns)
{
	int refusing = 0;

	if (in->on != CONN_CAP_CHURN) {
		/* the gate is churn mode's alone: a reload back to churn starts it closed, to be
		 * opened by two churning ticks then as at any other time */
		c->churn_ticks = 0;
		c->churn_until_ns = 0;
	}
	if (!in->http || in->on == CONN_CAP_OFF) {
		/* A tcp service's SYNs never read the http cap; one left from when a reload made
		 * the service tcp is cleared, so that it cannot apply should it become http
		 * again. Off (a reload turned it off): cleared too. */
		if (!sluice_conncap_held(c))
			return SLUICE_CONNCAP_IDLE;
		memset(&c->share, 0, sizeof(c->share));
		return SLUICE_CONNCAP_WRITE;
	}
	for (int k = 1; k < SLUICE_NUM_CLASSES; k++)
		refusing |= in->refused[k] != 0;
	if (sluice_conncap_held(c) || refusing)
		return SLUICE_CONNCAP_READ;
	c->churn_ticks = 0;                  /* a tick with no refusal breaks a churn's run */
	return SLUICE_CONNCAP_IDLE;
}

/* Churn mode: whether the rule runs this tick (rule in conncap.h). cap_refused are the SYNs the
 * cap refused this tick. */
static int churn_gate(struct sluice_conncap *c, const struct sluice_conncap_in *in,
		      const uint64_t cap_refused[SLUICE_NUM_CLASSES], uint64_t now_ns)
{
	uint64_t refusals = 0;
	int churning;

	for (int k = 1; k < SLUICE_NUM_CLASSES; k++)
		refusals += in->refused[k] + cap_refused[k];
	c->churn_refusals = refusals;
	c->churn_samples = in->samples;
	churning = in->dt_ns > 0 &&
		   (double)refusals >= SLUICE_CONNCAP_CHURN_RATIO * (double)in->samples &&
		   (double)refusals * 1e9 >= SLUICE_CONNCAP_CHURN_MIN_RATE * (double)in->dt_ns;
	c->churn_ticks = churning ? c->churn_ticks + 1 : 0;
	if (churning && (c->churn_until_ns || c->churn_ticks >= SLUICE_CONNCAP_CHURN_TICKS))
		c->churn_until_ns = now_ns + SLUICE_CONNSHARE_HOLD_NS;
	if (c->churn_until_ns && now_ns >= c->churn_until_ns)
		c->churn_until_ns = 0;
	return c->churn_until_ns != 0;
}

int sluice_conncap_decide(struct sluice_conncap *c, const struct sluice_conncap_in *in,
			  const __u64 *rejected, const __s64 open[SLUICE_NUM_CLASSES],
			  uint64_t now_ns)
{
	struct sluice_connshare_input ci = {
		.samples = in->samples, .mean_us = in->mean_us, .base_us = in->base_us,
		.open_unread = !open,
	};
	int any = any_cap(c);

	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		ci.refused[k] = in->refused[k];
		ci.room[k] = in->room[k];
		ci.inflight[k] = in->inflight[k];
		ci.open[k] = open ? open[k] : 0;
		if (!rejected)
			continue;
		/* the SYNs the cap refused since the last read, while one was set; a count
		 * that went back (a map made anew) moved by what it holds */
		ci.cap_refused[k] = !any ? 0 : rejected[k] >= c->rejected[k] ?
				    rejected[k] - c->rejected[k] : rejected[k];
		c->rejected[k] = rejected[k];
	}
	if (in->on == CONN_CAP_CHURN && !churn_gate(c, in, ci.cap_refused, now_ns)) {
		/* no churn: no cap starts, and one set under churn is lifted */
		if (any) {
			memset(&c->share, 0, sizeof(c->share));
			return SLUICE_CONNCAP_WRITE;
		}
		return c->dirty ? SLUICE_CONNCAP_WRITE : SLUICE_CONNCAP_IDLE;
	}
	/* A cap not written stays to be written: the map may hold one the rule lifted, which
	 * would otherwise refuse connections with nobody left to lift it. */
	if (sluice_connshare_tick(&c->share, &ci, SLUICE_CONNSHARE_HOLD_NS, now_ns) || c->dirty)
		return SLUICE_CONNCAP_WRITE;
	return SLUICE_CONNCAP_IDLE;
}
