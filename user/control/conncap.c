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
	int foreign = !c->keep && (cap[1] | cap[2] | cap[3]);

	c->adopted = 1;
	/* another service's caps (a slot given to this one): not ours, cleared */
	sluice_connshare_adopt(&c->share, foreign ? none : cap, SLUICE_CONNSHARE_HOLD_NS, now_ns);
	memcpy(c->rejected, rejected, sizeof(c->rejected));
	return foreign;
}

int sluice_conncap_begin(struct sluice_conncap *c, const struct sluice_conncap_in *in,
			 uint64_t now_ns)
{
	int refusing = 0;

	if (!in->http || !in->on) {
		/* A tcp service's SYNs never read the http cap; one left from when a reload made
		 * the service tcp is cleared, so that it cannot apply should it become http
		 * again. Off (a reload turned it off): cleared too. */
		if (!sluice_conncap_held(c))
			return SLUICE_CONNCAP_IDLE;
		memset(&c->share, 0, sizeof(c->share));
		return SLUICE_CONNCAP_WRITE;
	}
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		double x = in->inflight[k] > 0 ? (double)in->inflight[k] : 0;

		refusing |= k && in->refused[k];
		/* what the higher classes hold, on average: their peak would leave a class
		 * whose load is bursty (Poisson arrivals) room it never uses */
		c->busy_avg[k] += (x - c->busy_avg[k]) * 0.1;
	}
	return sluice_conncap_held(c) || refusing ? SLUICE_CONNCAP_READ : SLUICE_CONNCAP_IDLE;
}

/* The backend's concurrency, from a tick whose mean time in the service shows a queue (it was
 * saturated): its responses per second x the unloaded mean time in the service (Little's law:
 * how many it serves at once), averaged over such ticks; kept 30 s after the last. From a tick
 * without a queue it would read only the load a cap let through, and spiral down with it. One
 * more while this tick's mean shows no queue. 0: none known (the room under the limit alone,
 * control/connshare.h). */
static double knee_of(struct sluice_conncap *c, const struct sluice_conncap_in *in,
		      uint64_t now_ns)
{
	int measured, queue;

	if (in->base_us <= 0)
		return 0;
	measured = in->samples >= SLUICE_CONNCAP_MEAN_SAMPLES && in->mean_us > 0;
	queue = measured && in->mean_us > in->base_us * SLUICE_CONNCAP_QUEUE;
	if (queue && in->dt_s > 0) {
		/* responses per second (latency samples: the completion count also counts
		 * connections that end) x the unloaded mean time in the service */
		double k_now = (double)in->samples / in->dt_s * in->base_us / 1e6;
		int fresh = c->knee > 0 && now_ns - c->knee_ns <= SLUICE_CONNCAP_KNEE_NS;

		c->knee = fresh ? c->knee + (k_now - c->knee) * 0.2 : k_now;
		c->knee_ns = now_ns;
	}
	if (c->knee > 0 && now_ns - c->knee_ns <= SLUICE_CONNCAP_KNEE_NS)
		return c->knee + (measured && !queue ? 1 : 0);
	return 0;
}

int sluice_conncap_decide(struct sluice_conncap *c, const struct sluice_conncap_in *in,
			  const __u64 *rejected, const __s64 open[SLUICE_NUM_CLASSES],
			  uint64_t now_ns)
{
	struct sluice_connshare_input ci = { 0 };
	int any = any_cap(c);
	uint32_t above = 0;
	double knee;

	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		ci.refused[k] = in->refused[k];
		if (!rejected)
			continue;
		/* the SYNs the cap refused since the last read, while one was set; a count
		 * that went back (a map made anew) moved by what it holds */
		ci.cap_refused[k] = !any ? 0 : rejected[k] >= c->rejected[k] ?
				    rejected[k] - c->rejected[k] : rejected[k];
		c->rejected[k] = rejected[k];
	}
	knee = knee_of(c, in, now_ns);
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		int64_t idle = open[k] - in->inflight[k];

		if (k)
			ci.share[k] = sluice_connshare_share(in->room[k], knee, above,
							     idle > 0 ? (uint32_t)idle : 0);
		above += (uint32_t)(c->busy_avg[k] + 0.5);
	}
	/* A cap not written stays to be written: the map may hold one the rule lifted, which
	 * would otherwise refuse connections with nobody left to lift it. */
	if (sluice_connshare_tick(&c->share, &ci, SLUICE_CONNSHARE_HOLD_NS, now_ns) || c->dirty)
		return SLUICE_CONNCAP_WRITE;
	return SLUICE_CONNCAP_IDLE;
}
