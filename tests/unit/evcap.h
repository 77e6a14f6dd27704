/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test helper: an event sink that keeps the last events (and their JSON) for assertions. */
#ifndef SLUICE_TEST_EVCAP_H
#define SLUICE_TEST_EVCAP_H

#include <string.h>
#include "control/events.h"

#define EVCAP_MAX 64

struct evcap {
	int n;
	struct sluice_event ev[EVCAP_MAX];
	char json[EVCAP_MAX][512];
};

static void evcap_fn(void *ctx, const struct sluice_event *ev)
{
	struct evcap *c = ctx;
	int i = c->n < EVCAP_MAX ? c->n : EVCAP_MAX - 1;

	c->ev[i] = *ev;
	sluice_event_json(ev, c->json[i], sizeof(c->json[i]));
	c->n++;
}

static inline struct sluice_event_sink evcap_sink(struct evcap *c, const char *service)
{
	struct sluice_event_sink s = { evcap_fn, c, service };
	memset(c, 0, sizeof(*c));
	return s;
}

static inline const struct sluice_event *evcap_last(const struct evcap *c)
{
	return c->n ? &c->ev[(c->n < EVCAP_MAX ? c->n : EVCAP_MAX) - 1] : NULL;
}

static inline const char *evcap_last_json(const struct evcap *c)
{
	return c->n ? c->json[(c->n < EVCAP_MAX ? c->n : EVCAP_MAX) - 1] : "";
}

#endif
