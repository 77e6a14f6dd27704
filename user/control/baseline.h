/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The unloaded latency baseline of one service: a low percentile (q, 0.1) of the latency signal
 * of the last SLUICE_BASELINE_N decided windows that qualify:
 *   - at least min_samples samples (a thin window never teaches anything),
 *   - error rate (errors / calls) and the share of 429s both at most max_error_rate (0.05):
 *     fast failures and "too fast" answers say nothing about how long real work takes,
 *   - not saturated: a window whose in-flight reached the limit carries sluice's own queueing,
 *     so it may lower the baseline but not raise it -- unless the last stale_windows (64)
 *     qualifying windows were all saturated and higher: then the backend itself has changed and saturated windows count;
 *   - not queued: where the wait before the server reads is measured, a window whose requests
 *     waited (control/waitknee.h) never sets or raises the baseline, not even the first one
 *     (a first start during an overload would learn the backlog as the unloaded latency).
 * A percentile of a rolling ring, not the minimum ever seen: one lucky window cannot set it
 * for ever, and it follows a backend that became slower or faster within about N windows.
 * Plain data (no pointers): it is part of the state exported across restarts. */
#ifndef SLUICE_BASELINE_H
#define SLUICE_BASELINE_H

#include <stdint.h>

#define SLUICE_BASELINE_N 64

struct sluice_baseline_params {
	uint32_t n;                /* ring length used, 8..SLUICE_BASELINE_N: 64 */
	double q;                  /* 0.1 */
	uint64_t min_samples;      /* 20 */
	double max_error_rate;     /* 0.05 */
	uint32_t stale_windows;    /* 64 */
};

struct sluice_baseline {
	double ring[SLUICE_BASELINE_N];
	uint32_t count, head;      /* entries held, next slot */
	uint32_t stale;            /* saturated higher windows refused in a row */
	uint32_t _pad;
	double value_us;           /* 0 = not learned yet */
	uint64_t learned;          /* windows that entered the ring */
};

/* One decided window of the service. */
struct sluice_baseline_window {
	uint64_t samples;
	double latency_us;         /* the window's latency signal (the quantile the limit uses) */
	uint64_t calls, errors, resp_429;
	int saturated;             /* in-flight reached the limit during the window */
	int queued;                /* its requests' measured wait before the server read them
	                            * was above the allowance (control/waitknee.h): a queue it
	                            * measured, not an estimate; such a window may lower the
	                            * baseline but never set or raise it, however long */
};

void sluice_baseline_params_default(struct sluice_baseline_params *p);
void sluice_baseline_reset(struct sluice_baseline *b);
/* A baseline of one window's value v (> 0): what a restart adopts of a baseline whose ring was
 * not kept. */
void sluice_baseline_seed(struct sluice_baseline *b, double v);
/* A baseline read back from a saved record (another process wrote it): kept when it is one
 * sluice_baseline_add could have left with these parameters -- at most n entries, each a
 * latency (a finite number > 0), the next slot right after the last while the ring fills --
 * with its value worked out again from its ring; else forgotten (relearned). Returns 1 when
 * kept. */
int sluice_baseline_adopt(struct sluice_baseline *b, const struct sluice_baseline_params *p);
/* Returns 1 when the window entered the ring. */
int sluice_baseline_add(struct sluice_baseline *b, const struct sluice_baseline_params *p,
			const struct sluice_baseline_window *w);

#endif
