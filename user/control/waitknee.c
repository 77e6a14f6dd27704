// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The knee from the wait before the server reads; the rule is in waitknee.h. */
#include <string.h>
#include "control/waitknee.h"

void sluice_waitknee_params_default(struct sluice_waitknee_params *p, uint64_t window_ns)
{
	p->allow_frac = 0.05;
	p->allow_min_us = 500;
	p->min_waiting = 0.5;
	p->min_waiting_free = 2;
	p->respond = 0.5;
	p->min_gradient = 0.5;
	p->min_samples = 20;
	p->hold_ns = 5 * window_ns;
	p->off_ns = 30 * window_ns;
	p->judge_wait = 5;
}

void sluice_waitknee_init(struct sluice_waitknee *k)
{
	memset(k, 0, sizeof(*k));
	k->last_wait_us = -1;
}

double sluice_waitknee_allowance(const struct sluice_waitknee_params *p, double mean_us)
{
	double a = p->allow_frac * mean_us;

	return a > p->allow_min_us ? a : p->allow_min_us;
}

/* The queue's share of the window's mean wait: what is above the floor. */
static double queue_wait(const struct sluice_waitknee *k, const struct sluice_waitknee_input *in)
{
	double w = in->wait_us - k->floor_us;

	return w > 0 ? w : 0;
}

int sluice_waitknee_queued(const struct sluice_waitknee *k, const struct sluice_waitknee_params *p,
			   const struct sluice_waitknee_input *in)
{
	double w = queue_wait(k, in);

	if (in->waits < p->min_samples || in->mean_us <= 0)
		return -1;
	return w > sluice_waitknee_allowance(p, in->mean_us) &&
	       in->rate * w / 1e6 >= (in->bound ? p->min_waiting : p->min_waiting_free);
}

void sluice_waitknee_forget(struct sluice_waitknee *k)
{
	k->ref_limit = 0;
	k->postponed = 0;
	k->strikes = 0;
}

int sluice_waitknee_decide(struct sluice_waitknee *k, const struct sluice_waitknee_params *p,
			   const struct sluice_waitknee_input *in, uint64_t now_ns, double *to)
{
	int queued = sluice_waitknee_queued(k, p, in);
	double w = queue_wait(k, in), g, base, excess;

	if (queued < 0) {
		k->last_wait_us = -1;
		return now_ns < k->hold_until_ns ? SLUICE_WAITKNEE_HOLD : SLUICE_WAITKNEE_NONE;
	}
	k->last_wait_us = in->wait_us;
	k->last_allow_us = sluice_waitknee_allowance(p, in->mean_us);
	if (k->ref_limit) {
		uint32_t ref = k->ref_limit;

		/* what was admitted before the trim is still in flight above the limit: its
		 * samples carry the old backlog, the judgement waits (a first start's 154 -> 79
		 * was judged on the drain: 249 -> 185 ms) */
		if (in->peak_inflight > in->limit && k->postponed < p->judge_wait) {
			k->postponed++;
			return SLUICE_WAITKNEE_HOLD;
		}
		k->postponed = 0;
		k->ref_limit = 0;
		if (!queued || w <= p->respond * k->ref_wait_us) {
			k->strikes = 0;                  /* the trim removed queue */
		} else if (++k->strikes == 1) {
			k->undo_to = ref;                /* unclear: one more trim tells */
		} else {
			/* two trims, the same wait: it is not sluice's queue */
			k->strikes = 0;
			k->undone++;
			k->floor_us = in->wait_us;
			k->off_until_ns = now_ns + p->off_ns;
			k->hold_until_ns = 0;
			*to = k->undo_to;
			return SLUICE_WAITKNEE_UNDO;
		}
	}
	if (now_ns < k->off_until_ns)
		return SLUICE_WAITKNEE_NONE;
	if (queued) {
		g = (in->mean_us - w) / in->mean_us;
		if (g < p->min_gradient)
			g = p->min_gradient;
		/* the waiting share of what was in flight comes off the limit where it bound
		 * (it keeps what it holds above in-flight, the burst margins of the lower
		 * classes' thresholds: taking the limit itself to in-flight x g took the
		 * backend's in-flight below its workers), off the peak where it did not */
		base = in->peak_inflight && in->peak_inflight < in->limit ? in->peak_inflight :
		       in->limit;
		excess = base * (1 - g);
		if (excess < 1)
			excess = 1;                       /* a request waited: one less at least */
		*to = (in->bound ? (double)in->limit : base) - excess;
		k->ref_limit = in->limit;
		k->ref_wait_us = w;
		k->hold_until_ns = now_ns + p->hold_ns;
		k->trims++;
		return SLUICE_WAITKNEE_TRIM;
	}
	return now_ns < k->hold_until_ns ? SLUICE_WAITKNEE_HOLD : SLUICE_WAITKNEE_NONE;
}
