/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice controller events: every state change of a controller state machine (breaker, AIMD,
 * ladder, cascade suppression, retry storm) is handed to a caller-supplied callback as one
 * struct sluice_event, which sluice_event_json() turns into one JSON line. The state machines
 * themselves never print: the daemon decides where lines go (stdout) and what to filter. */
#ifndef SLUICE_EVENTS_H
#define SLUICE_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include "sluice.h"
#include <jansson.h>

#define SLUICE_EV_MAX_NUMS 12

/* Levels and kinds, with their names: SLUICE_EV_LEVEL_TABLE and SLUICE_EV_MACHINE_TABLE in
 * include/sluice_names.h (names: common/names.h). */
#define SLUICE_X_EV_LEVEL_ENUM(id, ...) SLUICE_EV_##id,
enum sluice_ev_level { SLUICE_EV_LEVEL_TABLE(SLUICE_X_EV_LEVEL_ENUM) };

#define SLUICE_X_EV_MACHINE_ENUM(id, ...) SLUICE_EVM_##id,
enum sluice_ev_machine { SLUICE_EV_MACHINE_TABLE(SLUICE_X_EV_MACHINE_ENUM) SLUICE_EV_MACHINES };

struct sluice_ev_num {
	const char *key;                  /* static string, a JSON-safe identifier */
	double val;
};

struct sluice_event {
	uint64_t t_ns;                    /* the controller clock (CLOCK_MONOTONIC) of the decision */
	int level;                        /* enum sluice_ev_level */
	const char *service;              /* service name, "" for host-wide machines */
	const char *machine;              /* the kind's name: "breaker", "aimd", "ladder", ... */
	const char *from, *to;            /* state names */
	const char *why;                  /* short reason, e.g. "error_rate" */
	int cls;                          /* class 0..3 for per-class machines, -1 otherwise */
	int n_nums;
	struct sluice_ev_num num[SLUICE_EV_MAX_NUMS];   /* the numbers that decided it */
};

typedef void (*sluice_event_fn)(void *ctx, const struct sluice_event *ev);

/* Where a machine reports. fn may be NULL (events dropped). service names the events. */
struct sluice_event_sink {
	sluice_event_fn fn;
	void *ctx;
	const char *service;
};

/* Start an event of kind `machine` (enum sluice_ev_machine); zeroes nums, cls = -1. */
void sluice_event_init(struct sluice_event *ev, uint64_t t_ns, int level, const char *service,
		       int machine, const char *from, const char *to, const char *why);
/* Append one number; silently ignored past SLUICE_EV_MAX_NUMS. */
void sluice_event_num(struct sluice_event *ev, const char *key, double val);
/* Deliver to the sink (no-op when sink or sink->fn is NULL). */
void sluice_event_emit(const struct sluice_event_sink *sink, const struct sluice_event *ev);
/* The event as a JSON object (json_decref() it), or NULL when out of memory. Keys in this
 * order: t_ns, event, level, service, machine, class (per-class machines), from, to, why, then
 * the numbers. */
json_t *sluice_event_object(const struct sluice_event *ev);
/* Format as one JSON object without a trailing newline. Returns the length it needed (like
 * snprintf); the output is always NUL-terminated when len > 0. */
int sluice_event_json(const struct sluice_event *ev, char *buf, size_t len);

#endif
