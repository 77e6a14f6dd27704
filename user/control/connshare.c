// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The connection cap of an http service's lower classes: see connshare.h. */
#include "control/connshare.h"

static uint32_t share_of(const struct sluice_connshare_input *in, int k)
{
	uint32_t s = in->share[k];

	return s > SLUICE_CONNSHARE_MIN ? s : SLUICE_CONNSHARE_MIN;
}

int sluice_connshare_tick(struct sluice_connshare *cs, const struct sluice_connshare_input *in,
			  uint64_t hold_ns, uint64_t now_ns)
{
	int changed = 0;

	for (int k = 1; k < SLUICE_NUM_CLASSES; k++) {
		uint32_t was = cs->cap[k], cap = was, s = share_of(in, k);

		if (in->refused[k]) {
			/* More of the class asks than it has room for: its connections at most
			 * its share. */
			cap = !cap || cap > s ? s : cap;
			cs->until_ns[k] = now_ns + hold_ns;
			cs->refused_ns[k] = now_ns;
		} else if (cap && in->cap_refused[k]) {
			cs->until_ns[k] = now_ns + hold_ns;
			if (s < cap) {
				cap = s;
			} else if (s > cap && now_ns - cs->refused_ns[k] >= hold_ns / 2 &&
				   now_ns - cs->grown_ns[k] >= SLUICE_CONNSHARE_GROW_NS) {
				/* the share grew (the backend serves more, the higher classes
				 * hold less): towards it, a quarter at a time */
				uint32_t step = cap / 4 ? cap / 4 : 1;

				cap = cap + step < s ? cap + step : s;
				cs->grown_ns[k] = now_ns;
			}
		}
		if (cap && now_ns >= cs->until_ns[k])
			cap = 0;
		cs->cap[k] = cap;
		changed |= cap != was;
	}
	cs->cap[0] = 0;
	return changed;
}

void sluice_connshare_adopt(struct sluice_connshare *cs, const uint32_t cap[SLUICE_NUM_CLASSES],
			    uint64_t hold_ns, uint64_t now_ns)
{
	cs->cap[0] = 0;
	cs->until_ns[0] = cs->refused_ns[0] = cs->grown_ns[0] = 0;
	for (int k = 1; k < SLUICE_NUM_CLASSES; k++) {
		cs->cap[k] = cap[k];
		cs->until_ns[k] = cap[k] ? now_ns + hold_ns : 0;
		cs->refused_ns[k] = now_ns; /* as if refused now: no growth before it is seen */
		cs->grown_ns[k] = now_ns;
	}
}

uint32_t sluice_connshare_share(uint32_t room, double knee, uint32_t above, uint32_t idle)
{
	double busy = room;

	if (knee > 0 && knee < busy)
		busy = knee;
	busy -= above;
	if (busy < 0)
		busy = 0;
	busy += idle;
	return busy > 1e9 ? 1000000000u : (uint32_t)busy;
}
