// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* JSON form of controller events; see events.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control/events.h"
#include "common/jsonio.h"
#include "common/names.h"

json_t *sluice_event_object(const struct sluice_event *ev)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "t_ns", json_integer((json_int_t)ev->t_ns));
	json_object_set_new(o, "event", json_string("state_change"));
	json_object_set_new(o, "level", json_string(sluice_ev_level_name(ev->level)));
	/* text that may hold bytes from outside (an interface name, a message quoting a value):
	 * never a key gone missing for a byte that is not UTF-8 */
	json_object_set_new(o, "service", jsonio_text(ev->service ? ev->service : ""));
	json_object_set_new(o, "machine", json_string(ev->machine ? ev->machine : ""));
	if (ev->cls >= 0 && ev->cls < SLUICE_NUM_CLASSES)
		json_object_set_new(o, "class", json_string(sluice_class_name(ev->cls)));
	json_object_set_new(o, "from", jsonio_text(ev->from ? ev->from : ""));
	json_object_set_new(o, "to", jsonio_text(ev->to ? ev->to : ""));
	json_object_set_new(o, "why", jsonio_text(ev->why ? ev->why : ""));
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
