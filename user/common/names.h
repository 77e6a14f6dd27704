/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: the names of the enumerations (classes, reject reasons, breaker and ladder states,
 * event levels and kinds), generated from the tables in include/sluice_names.h. Every place
 * that prints or parses one of these names goes through here, so JSON, metric labels, events
 * and sluicectl cannot drift apart. */
#ifndef SLUICE_COMMON_NAMES_H
#define SLUICE_COMMON_NAMES_H

#include "sluice.h"

/* "L0".."L3" -> 0..3, else -1 (exact, case-sensitive). */
int sluice_class_from_name(const char *s);
/* 0..3 -> "L0".."L3", SLUICE_CLASS_FROM_HEADER -> "from-header", else "?". */
const char *sluice_class_name(int cls);

/* Reject reason r: its JSON key and metric label ("switch", ...), "unknown" when out of range. */
const char *sluice_reject_name(int r);
/* Reject reason r: its `sluicectl status` column heading ("rej:switch", ...), "rej:?" when out
 * of range. */
const char *sluice_reject_heading(int r);

/* enum sluice_breaker_state -> "closed" | "open" | "half_open", else "?". */
const char *sluice_breaker_state_name(int state);

/* Ladder state (user/control/ladder.h) -> "off" | "partial" | "full", else "?". */
const char *sluice_ladder_state_name(int state);

/* Signal quality (user/control/window.h) -> "none" | "thin" | "ok", else "?". */
const char *sluice_signal_state_name(int state);

/* Event level (user/control/events.h) -> "info" | "debug" | "alert", else "info". */
const char *sluice_ev_level_name(int level);
/* Event kind (user/control/events.h) -> "breaker", "aimd", ..., else "?". */
const char *sluice_ev_machine_name(int machine);

#endif
