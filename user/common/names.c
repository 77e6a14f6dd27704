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
static const char *const signal_names[] = { SLUICE_SIGNAL_TABLE(SLUICE_X_NAME) };
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

/* One lookup per table: the name of member i, or the given text when i is not a member. */
#define NAME_FN(fn, names, dflt) \
	const char *fn(int i) { return pick(names, N(names), i, dflt); }

NAME_FN(sluice_reject_name, reject_names, "unknown")
NAME_FN(sluice_reject_heading, reject_headings, "rej:?")
NAME_FN(sluice_breaker_state_name, breaker_names, "?")
NAME_FN(sluice_ladder_state_name, ladder_names, "?")
NAME_FN(sluice_signal_state_name, signal_names, "?")
NAME_FN(sluice_ev_level_name, ev_level_names, "info")
NAME_FN(sluice_ev_machine_name, ev_machine_names, "?")
