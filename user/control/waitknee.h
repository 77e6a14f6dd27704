/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The knee from the wait before the server reads (bpf/readwait.bpf.c). A request's latency is
 * the time it waited in the host before the server read it plus the time the server took.
 * Admitting more requests than the server has workers adds only wait: on Apache with 16
 * workers the mean wait was under 0.7 ms at 16 in flight and 3.7 ms at 17, while the median
 * latency moved 1.00-1.09x between 16 and 20, inside the limit's aim (docs/CONTROLLER.md,
 * "The wait before the server reads"). So the wait marks the knee where the median cannot.
 *
 * Rule, per decided window whose requests' waits were measured (at least min_samples):
 *   the queue's wait is the mean wait above the floor (0 until a trim found one, below);
 *   the window is **queued** when that wait is above the allowance, max(allow_frac (0.05)
 *     x the window's mean latency, allow_min_us (500 us)) -- the wait a request meets
 *     without a queue (wake-up, the network stack) stays below it -- and the requests it
 *     holds by Little's law (response rate x wait) are at least min_waiting (0.5) where the
 *     limit refused units, min_waiting_free (2) where it did not (a queue is requests
 *     waiting: a slow reader in calm, 4 clients reading 5 ms late, holds 0.45);
 *   a pending trim is judged first, on the first window in which in-flight stayed within
 *     the limit (what was admitted before the trim has drained; at most judge_wait (5)
 *     windows later, holding meanwhile): the wait fell within the allowance or to respond
 *     (0.5) x its value before the trim -> the trim removed queue; else once is unclear (a
 *     backlog still draining, the wait of a queue that was still building), and after two
 *     trims in a row the wait does not come from the concurrency sluice admits (a server
 *     that reads late whatever its load) -> the limit goes back to where it was before the
 *     first of them, the wait now is the floor (what is left of it is no queue), and the
 *     rule is off for off_ns (30 windows);
 *   queued -> trim by the waiting share of in-flight, peak x wait / mean (by
 *     Little's law the share of the concurrency the server was not working on; at least one,
 *     at most half): off the limit where it refused units (it keeps what it holds above
 *     in-flight: the burst margins of the lower classes' thresholds), off the peak where it
 *     did not (a limit above the demand would not bind); then no growth for hold_ns (5
 *     windows): the knee was just found there, and probing again at once would put the
 *     queue back every other window;
 *   else within hold_ns of the last trim -> hold (no growth); else nothing (the limit's own
 *     rules).
 * A window without enough measured waits decides nothing here. The controller asks only
 * where the median is within the aim, or no aim is known yet (above it the median's own cut
 * acts), and a queued window does not teach the baseline (control/baseline.h, `queued`).
 * Pure state machine on the caller's clock; its state is relearned after a restart. */
#ifndef SLUICE_WAITKNEE_H
#define SLUICE_WAITKNEE_H

#include <stdint.h>

struct sluice_waitknee_params {
	double allow_frac;            /* 0.05 */
	double allow_min_us;          /* 500 */
	double min_waiting;           /* 0.5 requests waiting, where the limit refused units */
	double min_waiting_free;      /* 2, where it did not */
	double respond;               /* 0.5 */
	double min_gradient;          /* 0.5: a trim at most halves */
	uint64_t min_samples;         /* 20: measured waits a window needs */
	uint64_t hold_ns;             /* 5 windows */
	uint64_t off_ns;              /* 30 windows */
	uint32_t judge_wait;          /* 5: decided windows a judgement may wait for a drain */
};

struct sluice_waitknee {
	uint64_t hold_until_ns;       /* no growth before (the last trim's hold) */
	uint64_t off_until_ns;        /* the rule is off before (a trim did not lower the wait) */
	uint32_t ref_limit;           /* the limit before the trim being judged, 0 = none */
	uint32_t postponed;           /* windows its judgement waited for the backlog to drain */
	double ref_wait_us;           /* ... and the wait that caused it */
	uint32_t strikes;             /* trims in a row after which the wait stayed */
	uint32_t undo_to;             /* the limit before the first of them */
	uint64_t trims, undone;       /* for status and tests */
	double floor_us;              /* the wait a trim did not remove: no queue (0 = none) */
	double last_wait_us;          /* the last window's mean wait, -1 = not measured */
	double last_allow_us;         /* ... and its allowance */
};

struct sluice_waitknee_input {
	uint64_t waits;               /* requests whose wait was measured in the window */
	double wait_us;               /* their mean wait */
	double mean_us;               /* the window's mean latency (wait and service) */
	uint32_t limit;               /* in force */
	uint32_t peak_inflight;
	int bound;                    /* the limit refused units in the window */
	double rate;                  /* responses per second in the window */
};

enum sluice_waitknee_verdict {
	SLUICE_WAITKNEE_NONE = 0,     /* the limit's own rules */
	SLUICE_WAITKNEE_HOLD,         /* the limit's own rules, but no growth */
	SLUICE_WAITKNEE_TRIM,         /* *to: cut to this */
	SLUICE_WAITKNEE_UNDO,         /* *to: back to this (the trim did not help) */
};

void sluice_waitknee_params_default(struct sluice_waitknee_params *p, uint64_t window_ns);
void sluice_waitknee_init(struct sluice_waitknee *k);
/* The wait a request may meet without a queue, for a window of mean latency mean_us. */
double sluice_waitknee_allowance(const struct sluice_waitknee_params *p, double mean_us);
/* 1 when the window's waits were measured and show a queue (the rule above), 0 when measured
 * and not, -1 when not measured. */
int sluice_waitknee_queued(const struct sluice_waitknee *k, const struct sluice_waitknee_params *p,
			   const struct sluice_waitknee_input *in);
/* One decided window: enum sluice_waitknee_verdict; *to for TRIM and UNDO. */
int sluice_waitknee_decide(struct sluice_waitknee *k, const struct sluice_waitknee_params *p,
			   const struct sluice_waitknee_input *in, uint64_t now_ns, double *to);
/* The limit cut since for another cause (the median above the aim): a pending trim is not
 * judged any more (its window would see that cut too). */
void sluice_waitknee_forget(struct sluice_waitknee *k);

#endif
