// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* JSON formatting of controller events; see events.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control/events.h"
#include "common/jsonio.h"

static const char *level_name(int level)
{
	switch (level) {
	case SLUICE_EV_DEBUG: return "debug";
	case SLUICE_EV_ALERT: return "alert";
	default: return "info";
	}
}

void sluice_event_init(struct sluice_event *ev, uint64_t t_ns, int level, const char *service,
		       const char *machine, const char *from, const char *to, const char *why)
{
	memset(ev, 0, sizeof(*ev));
	ev->t_ns = t_ns;
	ev->level = level;
	ev->service = service ? service : "";
	ev->machine = machine;
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

json_t *sluice_event_object(const struct sluice_event *ev)
{
	static const char *cls_name[] = { "L0", "L1", "L2", "L3" };
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "t_ns", json_integer((json_int_t)ev->t_ns));
	json_object_set_new(o, "event", json_string("state_change"));
	json_object_set_new(o, "level", json_string(level_name(ev->level)));
	json_object_set_new(o, "service", json_string(ev->service ? ev->service : ""));
	json_object_set_new(o, "machine", json_string(ev->machine ? ev->machine : ""));
	if (ev->cls >= 0 && ev->cls < 4)
		json_object_set_new(o, "class", json_string(cls_name[ev->cls]));
	json_object_set_new(o, "from", json_string(ev->from ? ev->from : ""));
	json_object_set_new(o, "to", json_string(ev->to ? ev->to : ""));
	json_object_set_new(o, "why", json_string(ev->why ? ev->why : ""));
	for (int i = 0; i < ev->n_nums; i++)
		json_object_set_new(o, ev->num[i].key, jsonio_number(ev->num[i].val));
	return o;
}

int sluice_event_json(const struct sluice_event *ev, char *buf, size_t len)
{
	json_t *o = sluice_event_object(ev);
	char *s = jsonio_dumps(o);
	int n = s ? (int)strlen(s) : 0;

	json_decref(o);
	if (len)
		snprintf(buf, len, "%s", s ? s : "");
	free(s);
	return n;
}
