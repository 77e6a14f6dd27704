// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "control/verdict.h"

#include <string.h>

int verdict_initial_limit(const struct service_conf *sc)
{
	int l;

	if (sc->limit_fixed > 0)
		return sc->limit_fixed;
	l = (int)(0.3 * sc->limit_max);
	if (l < sc->limit_min)
		l = sc->limit_min;
	if (l > sc->limit_max)
		l = sc->limit_max;
	return l;
}

unsigned verdict_class_threshold(int limit, int headroom_pct)
{
	long t;

	if (limit <= 0 || headroom_pct <= 0)
		return 0;
	t = (long)limit * headroom_pct / 100;
	return t < 1 ? 1 : (unsigned)t;
}

void verdict_default(const struct service_conf *sc, int limit, struct sluice_verdict *v)
{
	memset(v, 0, sizeof(*v));
	v->limit = (unsigned)limit;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		v->class_threshold[c] = verdict_class_threshold(limit, sc->headroom[c]);
	sluice_verdict_mark_shut(v);
	v->breaker_state = SLUICE_BREAKER_CLOSED; /* no shedding: the shed fractions stay 0 */
	v->retry_after_s = (unsigned)sc->retry_after_s;
}
