// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The listen queue as a controller input; the rule is in listenq.h. */
#include <string.h>
#include "control/listenq.h"

void sluice_listenq_init(struct sluice_listenq *q)
{
	memset(q, 0, sizeof(*q));
}

static void listenq_report(const struct sluice_event_sink *sink, uint64_t now, int on,
		   const struct sluice_listenq *q)
{
	struct sluice_event ev;

	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now, on ? SLUICE_EV_ALERT : SLUICE_EV_INFO, sink->service,
			  SLUICE_EVM_ACCEPT_QUEUE, on ? "normal" : "saturated",
			  on ? "saturated" : "normal",
			  on ? "listen queue held connections for a window and grew" :
			       "listen queue empty");
	sluice_event_num(&ev, "queued", q->last);
	sluice_event_num(&ev, "queued_at_start", q->first);
	sluice_event_num(&ev, "backlog", q->backlog);
	sluice_event_emit(sink, &ev);
}

int sluice_listenq_tick(struct sluice_listenq *q, const struct sluice_listenq_input *in,
			uint64_t window_ns, uint64_t now_ns, const struct sluice_event_sink *sink)
{
	int was = q->saturated;

	if (!in->have || !in->queued) {
		q->since_ns = 0;
		q->first = q->last = 0;
		q->saturated = 0;
	} else {
		if (!q->since_ns) {
			q->since_ns = now_ns;
			q->first = in->queued;
		}
		q->last = in->queued;
		q->backlog = in->backlog;
		q->saturated = now_ns - q->since_ns >= window_ns &&
			       (q->last > q->first || (q->backlog && 2ull * q->last > q->backlog));
	}
	if (q->saturated != was)
		listenq_report(sink, now_ns, q->saturated, q);
	return q->saturated;
}

int sluice_listenq_overload(struct sluice_listenq *q, uint64_t window_ns, uint64_t now_ns,
			    double *excess)
{
	if (!q->saturated || (q->told_ns && now_ns - q->told_ns < window_ns))
		return 0;
	q->told_ns = now_ns;
	*excess = q->backlog ? (double)q->last / (double)q->backlog : 1;
	return 1;
}
