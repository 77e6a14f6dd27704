/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Per-tick signals of one service: deltas between two snapshots of the cumulative BPF counters
 * (struct sluice_class_stats, already summed over CPUs) and latency histograms. Pure: no clock
 * reads, no I/O; the caller passes the elapsed time. */
#ifndef SLUICE_SIGNALS_H
#define SLUICE_SIGNALS_H

#include <stdint.h>
#include "sluice.h"

struct sluice_class_signals {
	/* counter deltas over the interval */
	uint64_t arrivals, admitted, completed, errors, resp_429, retransmits;
	uint64_t rejected[SLUICE_REJ_REASONS];
	uint64_t rejected_total;
	uint64_t calls;          /* completed - resp_429: the calls that count for error rates */
	uint64_t samples;        /* latency samples (histogram delta count) */
	double rate_per_s;       /* arrivals per second */
	double completed_per_s;
	double p50_us, p90_us, p99_us;   /* 0 when samples == 0 */
	double mean_us;
	double slow;             /* estimated samples above slow_call (fractional: interpolated) */
	double error_rate;       /* errors / calls, 0 when no calls; 429s never count */
	double slow_rate;        /* slow / samples, 0 when no samples */
	double retransmit_ratio; /* retransmits / arrivals, 0 when no arrivals */
	int reset;               /* a counter went backwards: this interval counted from zero */
};

struct sluice_service_signals {
	double dt_s;
	struct sluice_class_signals cls[SLUICE_NUM_CLASSES];
	struct sluice_class_signals total;                 /* all classes together */
	unsigned zero_cls;       /* bit c: cls[c] is all zero (nothing moved in class c) */
	unsigned deferred;       /* bit c: class c had latency samples this tick whose histogram
	                          * was not read: they are counted by a later tick (the caller
	                          * sets it; see struct ctl_inputs, hist_deferred) */
};

/* Lower bound (inclusive) of histogram bucket i, in microseconds. */
uint64_t sluice_hist_lower_us(uint32_t i);

/* d = cur - prev per bucket; if any bucket went backwards (map recreated, CPU counters reset)
 * the whole of cur is taken as the delta. Returns 1 on such a reset. */
int sluice_hist_delta(const struct sluice_hist *prev, const struct sluice_hist *cur,
		      struct sluice_hist *d);

/* Sum of the buckets. */
uint64_t sluice_hist_count(const struct sluice_hist *h);

/* Quantile q in (0,1] in microseconds, linearly interpolated inside the bucket holding the
 * rank ceil(q*n). Exact for the 0..3 us buckets; the open last bucket reports its lower bound.
 * 0 when the histogram is empty. */
double sluice_hist_quantile_us(const struct sluice_hist *h, double q);

/* Estimated number of samples strictly above thr_us (uniform spread inside a bucket). */
double sluice_hist_above_us(const struct sluice_hist *h, uint64_t thr_us);

/* Compute one service's signals. prev/cur/prev_h/cur_h are arrays of SLUICE_NUM_CLASSES
 * (index = class). prev == NULL / prev_h == NULL means "no previous snapshot": everything
 * counts from zero. dt_ns == 0 gives rates of 0. slow_call_us: 0 disables slow counting. */
void sluice_signals_compute(const struct sluice_class_stats *prev,
			    const struct sluice_class_stats *cur,
			    const struct sluice_hist *prev_h, const struct sluice_hist *cur_h,
			    uint64_t dt_ns, uint64_t slow_call_us,
			    struct sluice_service_signals *out);
/* The same, told which classes' histograms are unchanged (bit c of hist_same: cur_h[c] equals
 * prev_h[c]): their empty deltas are not computed. The result is the same as without the
 * hint; a hint that is wrong gives wrong signals. */
void sluice_signals_compute_same(const struct sluice_class_stats *prev,
				 const struct sluice_class_stats *cur,
				 const struct sluice_hist *prev_h, const struct sluice_hist *cur_h,
				 unsigned hist_same, uint64_t dt_ns, uint64_t slow_call_us,
				 struct sluice_service_signals *out);
/* The same again for one service from tick to tick: out holds what the last call left there
 * (or zeros). A class that did not move and whose signals were zero already is not written
 * again, so a tick touches only the classes that moved. The result is the same as
 * sluice_signals_compute_same's. */
void sluice_signals_update(const struct sluice_class_stats *prev,
			   const struct sluice_class_stats *cur,
			   const struct sluice_hist *prev_h, const struct sluice_hist *cur_h,
			   unsigned hist_same, uint64_t dt_ns, uint64_t slow_call_us,
			   struct sluice_service_signals *out);
/* The tick's form of sluice_signals_update, which also takes the histograms' snapshot: the
 * histograms now by pointer (cur_h[c], not looked at for the classes in hist_same), and
 * prev_h[c] becomes *cur_h[c] in the same pass as the delta, only its buckets that moved
 * written (the classes in hist_same are left as they are: equal already). The signals are
 * sluice_signals_update's. */
void sluice_signals_step(const struct sluice_class_stats *prev,
			 const struct sluice_class_stats *cur, struct sluice_hist *prev_h,
			 const struct sluice_hist *const cur_h[SLUICE_NUM_CLASSES],
			 unsigned hist_same, uint64_t dt_ns, uint64_t slow_call_us,
			 struct sluice_service_signals *out);

#endif
