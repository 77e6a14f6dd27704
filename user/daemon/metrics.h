/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Prometheus text exposition of sluice (served by sluiced on metrics_address, /metrics).
 * The daemon fills a status snapshot (from the maps) and a metrics_extra (controller state the
 * maps do not hold) each tick under its lock; the HTTP thread renders from the copy. */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stddef.h>
#include "kernel/status.h"

struct metrics_switch {
	int active;
	double shed_ratio;          /* 0..1 */
	double age_s;               /* since set */
	double ttl_left_s;          /* until expiry */
};

struct metrics_service_extra {
	int idx;                    /* map index: matches status_snapshot.s[i].idx */
	double breaker_admit;       /* half-open step fraction 0..1 (1 when closed) */
	unsigned long long breaker_opens;        /* CLOSED -> OPEN transitions since start */
	unsigned long long inflight_corrections; /* units the reconciliation corrected (expected 0) */
	unsigned long long breaker_false_opens;  /* estimate: see docs/METRICS.md, measure 3 */
	double overload_seconds;    /* time overloaded: objective missed or the ladder
	                             * shedding (measure 2) */
	double uptime_seconds;      /* time this controller has managed the service */
	double effective_ratio;     /* successful / arrived requests over the last 60 s (measure 1) */
	double retry_amplification; /* (arrivals + retransmits) / arrivals, last 60 s (measure 5) */
	int retry_storm_active;
	double latency_target_seconds;  /* AIMD target in force, 0 unknown */
	int ladder_overloaded;
	unsigned long long degradation_actions;   /* switches set (measure 4 denominator) */
	unsigned long long degradation_effective; /* ... that shed traffic in the data path */
	struct metrics_switch sw[SLUICE_NUM_CLASSES];
	int have_accept_queue;          /* the listener was found in sluiced's netns */
	unsigned accept_queue;          /* connections waiting to be accepted (queue signal) */
	unsigned accept_backlog;        /* the listeners' backlog limit */
	int have_wait;                  /* the wait probe runs (metrics_extra.read_wait_probe) */
	unsigned long long waits;       /* units the server first read, measured by the probe */
	unsigned long long wait_ns;     /* ... and the sum of their waits before that read */
	double window_wait_s;           /* the controller's last decided window's mean wait, -1
	                                 * none (control/waitknee.h) */
	unsigned long long wait_trims, wait_undone;   /* its trims of the limit, and undone */
	int read_gate_armed;            /* the read gate is armed (SLUICE_VERDICT_READ_GATE) */
	long long unread;               /* requests counted unread now (sluice_unread.total) */
	unsigned long long gate_refused;   /* requests the read gate refused, every class */
};

struct metrics_extra {
	int cascade_suspended;
	unsigned long long cascade_triggers;
	unsigned long long config_reloads, config_reload_failures;  /* took effect / refused */
	unsigned long long events_dropped;  /* event lines stdout did not take (evstream.h) */
	unsigned long long log_dropped;     /* messages stderr did not take (logstream.h) */
	int switch_file_error;      /* the switch file is corrupt: running with no switches */
	int node_on;                /* node-wide arbitration running */
	double node_admit[SLUICE_NUM_CLASSES];   /* its admit fraction per class */
	double node_pressure_pct;   /* its last CPU pressure reading */
	int read_wait_probe;        /* the probe of the wait before the server reads runs
	                             * (kernel/readwait.h): the per-service waits are filled */
	int n;
	struct metrics_service_extra *s;   /* n of them, on the heap (cap allocated) */
	int cap;
};

/* Copy src into dst, growing dst's service array as needed (dst's own, never shared).
 * Returns 0, or -1 when out of memory. */
int metrics_extra_copy(struct metrics_extra *dst, const struct metrics_extra *src);

/* Render the exposition into a malloc'd buffer. Returns 0, or -1 on allocation failure. */
int metrics_render(const struct status_snapshot *snap, const struct metrics_extra *x,
		   char **out, size_t *len);

/* The HTTP side: serves GET /metrics (and / with a pointer to it) by calling fn, which
 * returns a malloc'd body. addr is "host:port" (IPv4, [IPv6] or a name for loopback). */
typedef int (*metrics_body_fn)(void *ctx, char **body, size_t *len);
struct metrics_server;
struct metrics_server *metrics_start(const char *addr, metrics_body_fn fn, void *ctx,
				     char *err, size_t errlen);
void metrics_stop(struct metrics_server *srv);
/* The TCP port the server listens on (useful with port 0: any free port), -1 for NULL. */
int metrics_port(const struct metrics_server *srv);

#endif
