// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The name arrays, generated from include/sluice_names.h; see common/names.h. */
#include "common/names.h"

#include <string.h>

#define REJ_HEADING(id, name, heading) heading,

static const char *const class_names[] = { SLUICE_CLASS_TABLE(SLUICE_X_NAME) };
static const char *const reject_names[] = { SLUICE_REJECT_TABLE(SLUICE_X_NAME) };
static const char *const reject_headings[] = { SLUICE_REJECT_TABLE(REJ_HEADING) };
static const char *const breaker_names[] = { SLUICE_BREAKER_TABLE(SLUICE_X_NAME) };
static const char *const ladder_names[] = { SLUICE_LADDER_STATE_TABLE(SLUICE_X_NAME) };
static const char *const ev_level_names[] = { SLUICE_EV_LEVEL_TABLE(SLUICE_X_NAME) };
static const char *const ev_machine_names[] = { SLUICE_EV_MACHINE_TABLE(SLUICE_X_NAME) };

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

_Static_assert(N(reject_names) == SLUICE_REJ_REASONS, "one name per reject reason");

/* a[i] when i is a member of the table, else dflt. */
static const char *pick(const char *const *a, int n, int i, const char *dflt)
{
	return i >= 0 && i < n ? a[i] : dflt;
}

int sluice_class_from_name(const char *s)
{
	if (!s)
		return -1;
	for (int i = 0; i < N(class_names); i++)
		if (strcmp(s, class_names[i]) == 0)
			return i;
	return -1;
}

const char *sluice_class_name(int cls)
{
	if (cls == SLUICE_CLASS_FROM_HEADER)
		return "from-header";
	return pick(class_names, N(class_names), cls, "?");
}

const char *sluice_reject_name(int r)
{
	return pick(reject_names, N(reject_names), r, "unknown");
}

const char *sluice_reject_heading(int r)
{
	return pick(reject_headings, N(reject_headings), r, "rej:?");
}

const char *sluice_breaker_state_name(int state)
{
	return pick(breaker_names, N(breaker_names), state, "?");
}

const char *sluice_ladder_state_name(int state)
{
	return pick(ladder_names, N(ladder_names), state, "?");
}

const char *sluice_ev_level_name(int level)
{
	return pick(ev_level_names, N(ev_level_names), level, "info");
}

const char *sluice_ev_machine_name(int machine)
{
	return pick(ev_machine_names, N(ev_machine_names), machine, "?");
}
