// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The connection cap of an http service's lower classes: see connshare.h. */
#include <string.h>
#include "control/connshare.h"

static uint32_t floor_min(uint32_t v)
{
	return v > SLUICE_CONNSHARE_MIN ? v : SLUICE_CONNSHARE_MIN;
}

static void window_restart(struct sluice_connshare *cs, uint64_t now_ns)
{
	cs->win_ns = now_ns;
	cs->win_samples = 0;
	cs->win_sum_us = cs->win_inflight = 0;
	cs->win_ticks = cs->win_open_ticks = 0;
	memset(cs->win_busy, 0, sizeof(cs->win_busy));
	memset(cs->win_open, 0, sizeof(cs->win_open));
	memset(cs->win_cap_refused, 0, sizeof(cs->win_cap_refused));
}

/* A queue in the closed window: cut the lowest capped class that holds connections by it. */
static void cut(struct sluice_connshare *cs, double q, double rate, double total,
		const double busy[SLUICE_NUM_CLASSES], const double open[SLUICE_NUM_CLASSES],
		uint64_t now_ns)
{
	double excess = total * (1.0 - 1.0 / q);
	uint32_t n = excess >= 1 ? (uint32_t)excess : 1;

	/* the backend answers slower than it did since the cap was set: the cuts so far cost it
	 * work, so the mean is not a queue a cap takes away */
	if (rate < cs->best_rate * SLUICE_CONNSHARE_RATE_KEEP)
		return;
	for (int k = SLUICE_NUM_CLASSES - 1; k >= 1; k--) {
		uint32_t lo = SLUICE_CONNSHARE_MIN;

		if (!cs->cap[k] || busy[k] < 0.5)
			continue;
		/* the class holds more than its cap (connections open from before it, which
		 * the limit's 429s close one by one and the cap keeps out): a lower cap would
		 * not take the queue away now, only starve the class later */
		if (open[k] > (double)cs->cap[k] + 0.5)
			return;
		/* the backend served `proven` at once without a queue a moment ago: the class
		 * keeps what that leaves it beside the others */
		if (cs->proven_ns && now_ns - cs->proven_ns <= SLUICE_CONNSHARE_PROVEN_NS &&
		    cs->proven - (total - busy[k]) > lo)
			lo = (uint32_t)(cs->proven - (total - busy[k]));
		if (cs->cap[k] > lo)
			cs->cap[k] = cs->cap[k] - lo > n ? cs->cap[k] - n : lo;
		cs->cut[k] = 1;
		/* a raise this queue answered: the next one waits longer */
		if (cs->raised_ns[k] && now_ns - cs->raised_ns[k] <= 2 * SLUICE_CONNSHARE_WIN_NS &&
		    cs->raised_ns[k] > cs->lowered_ns[k]) {
			uint32_t p = cs->patience[k] ? cs->patience[k] : 1;

			cs->patience[k] = p * 2 < SLUICE_CONNSHARE_PATIENCE_MAX ?
					  p * 2 : SLUICE_CONNSHARE_PATIENCE_MAX;
		}
		cs->lowered_ns[k] = now_ns;
		return;
	}
}

/* No queue in the closed window: raise the highest class whose cap kept busy connections from
 * free workers. idle: the backend answered well below its best rate, with nothing waiting
 * (workers stood idle); without it a raise is a probe, made after `patience` windows. */
static void raise_one(struct sluice_connshare *cs, const double busy[SLUICE_NUM_CLASSES],
		      const double open[SLUICE_NUM_CLASSES], int idle, uint64_t now_ns)
{
	int done = 0;

	for (int k = 1; k < SLUICE_NUM_CLASSES; k++) {
		uint32_t p;

		if (done || !cs->cap[k] || !cs->win_cap_refused[k] ||
		    open[k] + 0.5 < (double)cs->cap[k] || busy[k] + 0.5 < open[k]) {
			cs->spare[k] = 0;
			continue;
		}
		done = 1;
		/* the last raise held for two windows (no queue took it back): the next probe
		 * comes sooner */
		if (cs->raised_ns[k] > cs->lowered_ns[k] && !cs->judged[k] &&
		    now_ns - cs->raised_ns[k] > 2 * SLUICE_CONNSHARE_WIN_NS) {
			cs->judged[k] = 1;
			if (cs->patience[k] > 1)
				cs->patience[k] /= 2;
		}
		p = cs->patience[k] ? cs->patience[k] : 1;
		if (!cs->cut[k]) {
			/* no queue seen since the cap was set (it was set where the class stood
			 * when a burst met the limit): up by a quarter a window until one shows */
			cs->cap[k] += cs->cap[k] / 4 ? cs->cap[k] / 4 : 1;
			cs->spare[k] = 0;
			continue;
		}
		if (++cs->spare[k] < p && !idle)
			continue;
		cs->cap[k]++;
		cs->spare[k] = 0;
		cs->raised_ns[k] = now_ns;
		cs->judged[k] = 0;
	}
}

/* Close the window when it is long enough and holds enough samples: cut, raise or hold. */
static void window_tick(struct sluice_connshare *cs, const struct sluice_connshare_input *in,
			uint64_t now_ns)
{
	double busy[SLUICE_NUM_CLASSES], open[SLUICE_NUM_CLASSES], total, mean, q, rate, secs;

	/* gathered only while a cap is set: the first window starts with it */
	if (!cs->win_ns || now_ns < cs->win_ns || !(cs->cap[1] | cs->cap[2] | cs->cap[3])) {
		window_restart(cs, now_ns);
		return;
	}
	cs->win_samples += in->samples;
	cs->win_sum_us += (double)in->samples * in->mean_us;
	cs->win_ticks++;
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		double x = in->inflight[k] > 0 ? (double)in->inflight[k] : 0;

		cs->win_inflight += x;
		cs->win_busy[k] += x;
		if (!in->open_unread)
			cs->win_open[k] += in->open[k] > 0 ? (double)in->open[k] : 0;
		cs->win_cap_refused[k] += in->cap_refused[k];
	}
	cs->win_open_ticks += !in->open_unread;
	if (now_ns - cs->win_ns < SLUICE_CONNSHARE_WIN_NS)
		return;
	/* too few samples for too long (or a gap in the ticks): no decision, a new window */
	if (now_ns - cs->win_ns > SLUICE_CONNSHARE_WIN_MAX_NS) {
		window_restart(cs, now_ns);
		return;
	}
	if (cs->win_samples < SLUICE_CONNSHARE_WIN_SAMPLES)
		return;
	/* no tick of it could read the open connections: whether a cap holds them is not
	 * known, no decision */
	if (!cs->win_open_ticks) {
		window_restart(cs, now_ns);
		return;
	}
	secs = (double)(now_ns - cs->win_ns) / 1e9;
	mean = cs->win_sum_us / (double)cs->win_samples;
	rate = (double)cs->win_samples / secs;
	total = cs->win_inflight / cs->win_ticks;
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		busy[k] = cs->win_busy[k] / cs->win_ticks;
		open[k] = cs->win_open[k] / cs->win_open_ticks;
	}
	/* the lowest window mean of the last SLUICE_CONNSHARE_LOW_NS: the time in the service
	 * of a window with nothing waiting, when the cap or the load gave one */
	if (mean > 0 && (mean <= cs->low_us || !cs->low_ns ||
			 now_ns - cs->low_ns > SLUICE_CONNSHARE_LOW_NS)) {
		/* a lower reference: what was judged served without a queue against the old
		 * one may have queued */
		if (mean < cs->low_us)
			cs->proven_ns = 0;
		cs->low_us = mean;
		cs->low_ns = now_ns;
	}
	if (in->base_us > 0 && mean > 0) {
		/* against the unloaded mean, or the lowest window when that is lower: the
		 * unloaded mean is learned from the first windows of a rise and can hold a
		 * request's worth of queue of its own (Apache, 16 workers: 53 ms for a 50 ms
		 * handler), which would hide one connection past the workers */
		q = mean / (cs->low_us < in->base_us ? cs->low_us : in->base_us);
		if (q > SLUICE_CONNSHARE_QUEUE) {
			for (int k = 1; k < SLUICE_NUM_CLASSES; k++)
				cs->spare[k] = 0;
			cut(cs, q, rate, total, busy, open, now_ns);
		} else if (q <= SLUICE_CONNSHARE_SPARE) {
			/* below the best rate by more than half a request in service: idle
			 * workers */
			int idle = total > 0 &&
				   rate < cs->best_rate * (1.0 - SLUICE_CONNSHARE_IDLE / total);

			/* the most the backend served at once without a queue in the last
			 * SLUICE_CONNSHARE_PROVEN_NS: at least that many workers */
			if (total >= cs->proven || !cs->proven_ns ||
			    now_ns - cs->proven_ns > SLUICE_CONNSHARE_PROVEN_NS) {
				cs->proven = total;
				cs->proven_ns = now_ns;
			}
			raise_one(cs, busy, open, idle, now_ns);
		} else {
			for (int k = 1; k < SLUICE_NUM_CLASSES; k++)
				cs->spare[k] = 0;
		}
		if (rate > cs->best_rate)
			cs->best_rate = rate;
	}
	window_restart(cs, now_ns);
}

int sluice_connshare_tick(struct sluice_connshare *cs, const struct sluice_connshare_input *in,
			  uint64_t hold_ns, uint64_t now_ns)
{
	uint32_t was[SLUICE_NUM_CLASSES];
	int changed = 0, any = 0;

	memcpy(was, cs->cap, sizeof(was));
	for (int k = 1; k < SLUICE_NUM_CLASSES; k++) {
		uint32_t room = floor_min(in->room[k]);

		if (in->refused[k]) {
			/* More of the class asks than it has room for: its connections at most
			 * what it holds now, within its room. */
			if (!cs->cap[k]) {
				cs->cap[k] = room;
				cs->cut[k] = 0;
				cs->spare[k] = 0;
				cs->patience[k] = SLUICE_CONNSHARE_PATIENCE_START;
				cs->judged[k] = 1;
				cs->raised_ns[k] = cs->lowered_ns[k] = 0;
			}
			cs->until_ns[k] = now_ns + hold_ns;
		} else if (cs->cap[k] && in->cap_refused[k]) {
			cs->until_ns[k] = now_ns + hold_ns;
		}
		/* never above the room: a limit cut takes the cap down at once */
		if (cs->cap[k] > room)
			cs->cap[k] = room;
	}
	window_tick(cs, in, now_ns);
	for (int k = 1; k < SLUICE_NUM_CLASSES; k++) {
		if (cs->cap[k] && now_ns >= cs->until_ns[k])
			cs->cap[k] = 0;
		any |= cs->cap[k] != 0;
		changed |= cs->cap[k] != was[k];
	}
	if (!any)
		cs->best_rate = 0;
	cs->cap[0] = 0;
	return changed;
}

void sluice_connshare_adopt(struct sluice_connshare *cs, const uint32_t cap[SLUICE_NUM_CLASSES],
			    uint64_t hold_ns, uint64_t now_ns)
{
	memset(cs, 0, sizeof(*cs));
	for (int k = 1; k < SLUICE_NUM_CLASSES; k++) {
		cs->cap[k] = cap[k];
		cs->until_ns[k] = cap[k] ? now_ns + hold_ns : 0;
		cs->patience[k] = SLUICE_CONNSHARE_PATIENCE_START;
		cs->judged[k] = 1;
	}
}
