// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* JSON formatting of controller events; see events.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
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

/* Appends into buf while counting the full length, so a short buffer truncates but the
 * return value still tells the caller how much was needed. */
struct out {
	char *buf;
	size_t len, pos;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	size_t room = o->pos < o->len ? o->len - o->pos : 0;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->pos : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

/* Service names come from the config file: escape anything JSON would choke on. */
static void put_str(struct out *o, const char *s)
{
	put(o, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 0x20)
			put(o, "\\u%04x", c);
		else
			put(o, "%c", c);
	}
	put(o, "\"");
}

int sluice_event_json(const struct sluice_event *ev, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	int i;

	if (len)
		buf[0] = '\0';
	put(&o, "{\"t_ns\":%llu,\"event\":\"state_change\",\"level\":\"%s\",\"service\":",
	    (unsigned long long)ev->t_ns, sluice_ev_level_name(ev->level));
	put_str(&o, ev->service);
	put(&o, ",\"machine\":");
	put_str(&o, ev->machine);
	if (ev->cls >= 0 && ev->cls < SLUICE_NUM_CLASSES)
		put(&o, ",\"class\":\"%s\"", sluice_class_name(ev->cls));
	put(&o, ",\"from\":");
	put_str(&o, ev->from);
	put(&o, ",\"to\":");
	put_str(&o, ev->to);
	put(&o, ",\"why\":");
	put_str(&o, ev->why);
	for (i = 0; i < ev->n_nums; i++) {
		double v = ev->num[i].val;
		put(&o, ",");
		put_str(&o, ev->num[i].key);
		if (!isfinite(v))
			put(&o, ":null");           /* JSON has no NaN/inf */
		else if (v == (double)(long long)v && fabs(v) < 9e15)
			put(&o, ":%lld", (long long)v);
		else
			put(&o, ":%.6g", v);
	}
	put(&o, "}");
	if (len && o.pos >= len)
		buf[len - 1] = '\0';
	return (int)o.pos;
}
