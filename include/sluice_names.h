/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * sluice: every enumeration whose members have names outside the program, defined once.
 *
 * Each table is an X-macro: SLUICE_..._TABLE(X) calls X(ID, "name", ...) once per member, in
 * value order (the first member is 0). include/sluice.h and user/control/events.h generate the
 * enums from these tables; user/common/names.c generates the name arrays that the JSON output,
 * the metric labels, the controller events and sluicectl print and parse. Adding a member is
 * one line here plus its tests: tests/unit/test_names.c walks every table and checks that each
 * member reaches each output.
 *
 * The names are an interface: metric label values and JSON strings are read by scripts,
 * alerts and dashboards. Never rename a member; add one instead.
 *
 * Plain macros only: the BPF programs include this file (through sluice.h).
 */
#ifndef SLUICE_NAMES_H
#define SLUICE_NAMES_H

/* Priority classes: X(ID, name). L0 is the core business, shed last; L3 is shed first. The name
 * is the class in the configuration, on the command line, in JSON and as the `class` label. */
#define SLUICE_CLASS_TABLE(X) \
	X(L0, "L0")                                                                            \
	X(L1, "L1")                                                                            \
	X(L2, "L2")                                                                            \
	X(L3, "L3")

/* Why a unit was refused, in admission order (the order bpf/admit.h checks them):
 * X(ID, name, heading). The name is the key under "rejected_by" in `sluicectl status --json`
 * and the `reason` label of sluice_requests_rejected_total; the heading is its column in the
 * `sluicectl status` table. */
#define SLUICE_REJECT_TABLE(X) \
	X(SWITCH,       "switch",       "rej:switch") /* manual degradation switch */         \
	X(BREAKER,      "breaker",      "rej:brkr")   /* breaker open, half-open not drawn */ \
	X(HEADROOM,     "headroom",     "rej:headrm") /* in_flight >= class threshold */      \
	X(LADDER,       "ladder",       "rej:ladder") /* priority ladder admit probability */ \
	X(CLIENT_LIMIT, "client_limit", "rej:client") /* per-client token bucket or cap */

/* Circuit breaker states: X(ID, name). The name appears in status, top, JSON and events. */
#define SLUICE_BREAKER_TABLE(X) \
	X(CLOSED,    "closed")                                                                 \
	X(OPEN,      "open")                                                                   \
	X(HALF_OPEN, "half_open")

/* What the ladder does with a class, as its events name it: X(ID, name). */
#define SLUICE_LADDER_STATE_TABLE(X) \
	X(OFF,     "off")       /* admits nothing */                                           \
	X(PARTIAL, "partial")   /* admits a fraction */                                        \
	X(FULL,    "full")      /* admits everything */

/* Quality of a service's latency signal: X(ID, name). Shown by status and metrics, so that a
 * limit that cannot see says so. */
#define SLUICE_SIGNAL_TABLE(X) \
	X(NONE,    "none")      /* no latency sample for a while: the limit is blind */         \
	X(THIN,    "thin")      /* the window is extended: fewer samples than a decision needs */\
	X(OK,      "ok")        /* windows decide on enough samples */

/* Controller event levels: X(ID, name). INFO: an operator wants to see it. DEBUG: routine
 * steps (AIMD +1), high volume. ALERT: something is wrong and someone should look. */
#define SLUICE_EV_LEVEL_TABLE(X) \
	X(INFO,  "info")                                                                       \
	X(DEBUG, "debug")                                                                      \
	X(ALERT, "alert")

/* Controller event kinds, the `machine` field of every event line: X(ID, name). */
#define SLUICE_EV_MACHINE_TABLE(X) \
	X(BREAKER,     "breaker")      /* circuit breaker state changes */                     \
	X(AIMD,        "aimd")         /* concurrency limit steps and the latency target */    \
	X(LADDER,      "ladder")       /* a class's admit probability */                       \
	X(CASCADE,     "cascade")      /* cascade suppression armed / suspended */             \
	X(RETRY_STORM, "retry_storm")  /* retry-storm signal */                                \
	X(SWITCH,      "switch")       /* one manual switch expired */                         \
	X(SWITCHES,    "switches")     /* the switch file: reloaded, ignored, write failed */  \
	X(FLOWS,       "flows")        /* flow GC reclaimed silent flows */                    \
	X(CONFIG,      "config")       /* configuration reload */                              \
	X(DAEMON,      "daemon")       /* sluiced attached / stopped */                        \
	X(METRICS,     "metrics")      /* the /metrics endpoint */                             \
	X(ACCEPT_QUEUE, "accept_queue") /* a service's listen queue over half its backlog */  \
	X(NODE,        "node")         /* node-wide arbitration: a class cut or restored */    \
	X(CONNECTION_CAP, "connection_cap") /* churn opened or closed an http cap's gate */

/* Helpers for the tables above. */
#define SLUICE_X_COUNT(...)  + 1                  /* 0 TABLE(SLUICE_X_COUNT) = member count */
#define SLUICE_X_NAME(id, name, ...)  name,       /* TABLE(SLUICE_X_NAME) = the names, in order */

#endif /* SLUICE_NAMES_H */
