// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Controller events: filling and delivering them; see events.h. The JSON form is in
 * events_json.c, so the state machines build without a JSON library. */
#include <string.h>
#include "control/events.h"
#include "common/names.h"

void sluice_event_init(struct sluice_event *ev, uint64_t t_ns, int level, const char *service,
		       int machine, const char *from, const char *to, const char *why)
{
	memset(ev, 0, sizeof(*ev));
	ev->t_ns = t_ns;
	ev->level = level;
	ev->service = service ? service : "";
	ev->machine = sluice_ev_machine_name(machine);
	ev->from = from;
	ev->to = to;
	ev->why = why;
	ev->cls = -1;
}

void sluice_event_num(struct sluice_event *ev, const char *key, double val)
{
	if (ev->n_nums >= SLUICE_EV_MAX_NUMS)
		return;
	ev->num[ev->n_nums].key = key;
	ev->num[ev->n_nums].val = val;
	ev->n_nums++;
}

void sluice_event_emit(const struct sluice_event_sink *sink, const struct sluice_event *ev)
{
	if (sink && sink->fn)
		sink->fn(sink->ctx, ev);
}
