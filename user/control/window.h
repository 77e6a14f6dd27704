/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The evidence window of one service: per-tick signals accumulate until the window may decide.
 * A window decides when it is at least window_ns old AND holds at least min_samples latency
 * samples; a window past its length without enough samples is extended (it keeps
 * accumulating), it never decides on thin evidence. The controller may close it early (at
 * least one feedback delay old, enough samples, latency above the objective): overload
 * evidence need not wait out a full window.
 * Signal quality for status and metrics: ok (decided in time), thin (extended for lack of
 * samples), none (no latency sample for none_ns). */
#ifndef SLUICE_WINDOW_H
#define SLUICE_WINDOW_H

#include <stdint.h>
#include "sluice.h"
#include "control/signals.h"

#define SLUICE_X_SIGNAL_ENUM(id, ...) SLUICE_SIGNAL_##id,
enum sluice_signal_state { SLUICE_SIGNAL_TABLE(SLUICE_X_SIGNAL_ENUM) };

struct sluice_evwin {
	uint64_t start_ns;
	uint64_t last_sample_ns;      /* last tick that brought a latency sample */
	uint64_t prev_ns;             /* the last tick added (or the start) */
	uint64_t active_ns;           /* time of the ticks that brought completions */
	uint64_t cls_samples[SLUICE_NUM_CLASSES];
	uint64_t samples, calls, errors, resp_429, arrivals, headroom_rej;
	uint64_t cls_arrivals[SLUICE_NUM_CLASSES], cls_headroom_rej[SLUICE_NUM_CLASSES];
	uint32_t peak_inflight;       /* highest in-flight sampled at the window's ticks */
	uint32_t ticks;
	uint64_t inflight_sum;        /* in-flight summed over the window's ticks */
	uint64_t waits, wait_ns;      /* waits before the server's first read measured in the
	                               * window (control/waitknee.h), and their sum */
	int wait_gap;                 /* a tick of the window had no wait signal: its waits
	                               * are not the window's (the result says none) */
	uint64_t gate_rej;            /* of headroom_rej, what the read gate refused (as the
	                               * data path counts them: may run ahead of headroom_rej) */
	/* last: the counters above are touched every tick, these only when a window starts or
	 * is decided */
	struct sluice_hist base[SLUICE_NUM_CLASSES];  /* the cumulative histograms at the start:
						       * the window's own is cur - base */
};

/* What a closed window says. */
struct sluice_evwin_result {
	uint64_t samples, calls, errors, resp_429, arrivals, headroom_rej;
	uint64_t limit_rej;           /* of headroom_rej, the refusals of the limit and the
	                               * thresholds made from it: not the read gate's, which
	                               * no limit moves (0 when the gate refused them all) */
	uint32_t peak_inflight;
	double mean_inflight;         /* in-flight averaged over the window's ticks */
	uint64_t dur_ns;
	uint64_t active_ns;           /* of it, the ticks that brought completions: a rate over
				       * it is not diluted by an idle start (traffic beginning) */
	double latency_us;            /* the service's signal: quantile q over all classes */
	double mean_us;               /* the samples' mean over all classes (the sums) */
	double top_us;                /* the highest busy classes: quantile q over L0, L0+L1, ...
				       * merged from the top until min_samples (all when fewer) */
	int top_cls;                  /* the highest class with samples, -1 when none */
	uint64_t waits;               /* measured waits before the server's first read (0: no
	                               * wait signal over the whole window) ... */
	double wait_us;               /* ... and their mean */
};

/* Start a window at now; cur: the cumulative histograms now (SLUICE_NUM_CLASSES), NULL = 0. */
void sluice_evwin_reset(struct sluice_evwin *w, uint64_t now_ns, const struct sluice_hist *cur);
/* Add one tick's signals (counts only: the histograms come from the cumulative ones) and the
 * in-flight sampled at this tick. */
void sluice_evwin_add(struct sluice_evwin *w, const struct sluice_service_signals *sig,
		      int64_t inflight, uint64_t now_ns);
/* Nothing has happened in the window so far (no sample, call, arrival or active time): what
 * the next tick adds began at since_ns at the earliest, and its active time counts from there.
 * A tick that follows a stretch nobody ticked (sluiced does not tick a service while nothing
 * of it moves) spans that whole stretch, of which the traffic it brings took the last tick
 * (or the last few, where sluiced reads services at rest in turn: user/kernel/bpfmaps.h). */
void sluice_evwin_idle_until(struct sluice_evwin *w, uint64_t since_ns);
/* Add one tick's waits before the server's first read (deltas); have 0: the tick had no wait
 * signal, and the window then has none. */
void sluice_evwin_add_wait(struct sluice_evwin *w, int have, uint64_t waits, uint64_t wait_ns);
/* Add one tick's read-gate refusals (a delta; sluice.h, SLUICE_VERDICT_READ_GATE). */
void sluice_evwin_add_gate(struct sluice_evwin *w, uint64_t refused);
/* 1 when the window is old enough (window_ns) and has min_samples samples. */
int sluice_evwin_full(const struct sluice_evwin *w, uint64_t now_ns, uint64_t window_ns,
		      uint64_t min_samples);
/* cur: the cumulative histograms now (a class whose buckets went backwards since the start
 * counts from zero). */
void sluice_evwin_result(const struct sluice_evwin *w, const struct sluice_hist *cur, double q,
			 uint64_t min_samples, uint64_t now_ns, struct sluice_evwin_result *out);
/* enum sluice_signal_state of the window now. */
int sluice_evwin_signal(const struct sluice_evwin *w, uint64_t now_ns, uint64_t window_ns,
			uint64_t min_samples, uint64_t none_ns);

#endif
