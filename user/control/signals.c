// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Signals from counter and histogram deltas; see signals.h. */
#include <string.h>
#include "control/signals.h"

uint64_t sluice_hist_lower_us(uint32_t i)
{
	uint32_t p, s;

	if (i < 4)
		return i;
	p = (i - 4) / 4 + 2;
	s = (i - 4) % 4;
	return (uint64_t)(4 + s) << (p - 2);
}

int sluice_hist_delta(const struct sluice_hist *prev, const struct sluice_hist *cur,
		      struct sluice_hist *d)
{
	uint32_t i;

	if (!prev) {
		*d = *cur;
		return 0;
	}
	for (i = 0; i < SLUICE_HIST_BUCKETS; i++) {
		if (cur->bucket[i] < prev->bucket[i]) {
			*d = *cur;
			return 1;
		}
		d->bucket[i] = cur->bucket[i] - prev->bucket[i];
	}
	/* sum_us can wrap independently of the buckets; a backwards sum alone is not a reset */
	d->sum_us = cur->sum_us >= prev->sum_us ? cur->sum_us - prev->sum_us : cur->sum_us;
	return 0;
}

uint64_t sluice_hist_count(const struct sluice_hist *h)
{
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; i < SLUICE_HIST_BUCKETS; i++)
		n += h->bucket[i];
	return n;
}

static double quantile_n(const struct sluice_hist *h, double q, uint64_t n)
{
	uint64_t rank, cum = 0;
	uint32_t i;

	if (n == 0)
		return 0;
	if (q <= 0)
		q = 1e-9;
	if (q > 1)
		q = 1;
	rank = (uint64_t)(q * (double)n);
	if ((double)rank < q * (double)n)
		rank++;                       /* ceil */
	if (rank == 0)
		rank = 1;
	for (i = 0; i < SLUICE_HIST_BUCKETS; i++) {
		uint64_t c = h->bucket[i];
		if (c == 0)
			continue;
		if (cum + c >= rank) {
			double lo = (double)sluice_hist_lower_us(i);
			double hi = (double)sluice_hist_upper_us(i);
			if (i < 4 || i == SLUICE_HIST_BUCKETS - 1)
				return lo;    /* exact value / open-ended overflow bucket */
			return lo + (hi - lo) * (double)(rank - cum) / (double)c;
		}
		cum += c;
	}
	return (double)sluice_hist_lower_us(SLUICE_HIST_BUCKETS - 1);
}

static uint64_t rank_of(double q, uint64_t n)
{
	uint64_t r = (uint64_t)(q * (double)n);

	if ((double)r < q * (double)n)
		r++;
	return r ? r : 1;
}

static double interp(uint32_t i, uint64_t c, uint64_t rank, uint64_t cum)
{
	double lo = (double)sluice_hist_lower_us(i), hi = (double)sluice_hist_upper_us(i);

	if (i < 4 || i == SLUICE_HIST_BUCKETS - 1)
		return lo;
	return lo + (hi - lo) * (double)(rank - cum) / (double)c;
}

/* The buckets of a histogram that can hold samples: [lo, hi]. A tick's delta holds a few
 * samples in a few buckets, so what scans it starts and stops there instead of walking all
 * SLUICE_HIST_BUCKETS; the buckets outside are zero, so the results are the same. */
struct hist_span {
	uint32_t lo, hi;
};

static const struct hist_span full_span = { 0, SLUICE_HIST_BUCKETS - 1 };

/* p50, p90, p99 in one scan (the tick runs this for every class of every service). */
static void quantiles3(const struct sluice_hist *h, uint64_t n, struct hist_span sp,
		       double *p50, double *p90, double *p99)
{
	uint64_t r[3], cum = 0;
	double *o[3] = { p50, p90, p99 };
	uint32_t i, k = 0;

	*p50 = *p90 = *p99 = 0;
	if (n == 0)
		return;
	r[0] = rank_of(0.50, n);
	r[1] = rank_of(0.90, n);
	r[2] = rank_of(0.99, n);
	for (i = sp.lo; i <= sp.hi && k < 3; i++) {
		uint64_t c = h->bucket[i];
		if (c == 0)
			continue;
		while (k < 3 && cum + c >= r[k]) {
			*o[k] = interp(i, c, r[k], cum);
			k++;
		}
		cum += c;
	}
}

double sluice_hist_quantile_us(const struct sluice_hist *h, double q)
{
	return quantile_n(h, q, sluice_hist_count(h));
}

static double above_span(const struct sluice_hist *h, uint64_t thr_us, struct hist_span sp)
{
	double above = 0;
	uint32_t i = sluice_hist_bucket(thr_us);

	/* buckets below the one holding thr are entirely <= thr: start there */
	if (i < sp.lo)
		i = sp.lo;
	for (; i <= sp.hi && i < SLUICE_HIST_BUCKETS; i++) {
		uint64_t lo = sluice_hist_lower_us(i), hi = sluice_hist_upper_us(i);
		if (h->bucket[i] == 0 || hi <= thr_us + 1) {
			/* every value in [lo, hi) is <= thr: hi - 1 <= thr */
			continue;
		}
		if (lo > thr_us || i == SLUICE_HIST_BUCKETS - 1)
			above += (double)h->bucket[i];
		else   /* values thr+1 .. hi-1 of lo .. hi-1 are above */
			above += (double)h->bucket[i] * (double)(hi - 1 - thr_us) / (double)(hi - lo);
	}
	return above;
}

double sluice_hist_above_us(const struct sluice_hist *h, uint64_t thr_us)
{
	return above_span(h, thr_us, full_span);
}

/* Counter delta for one class; any counter going backwards means the maps were recreated
 * (or a CPU went away): count the new values from zero rather than wrapping. *moved: some
 * counter of the delta is not zero. */
static int stats_delta(const struct sluice_class_stats *p, const struct sluice_class_stats *c,
		       struct sluice_class_stats *d, int *moved)
{
	const uint64_t *pp = (const uint64_t *)p, *cc = (const uint64_t *)c;
	uint64_t *dd = (uint64_t *)d, any = 0;
	size_t i, n = sizeof(*c) / sizeof(uint64_t);

	*moved = 1;
	if (!p) {
		*d = *c;
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (cc[i] < pp[i]) {
			*d = *c;
			return 1;
		}
		dd[i] = cc[i] - pp[i];
		any |= dd[i];
	}
	*moved = any != 0;
	return 0;
}

/* Derived numbers, recomputed from the accumulated fields (works for the total too). one:
 * the class whose histogram delta h is (the same histogram and count), whose quantiles, mean
 * and slow count are taken as they are instead of computed again; NULL: computed. */
static void derive(struct sluice_class_signals *s, const struct sluice_hist *h,
		   struct hist_span sp, uint64_t samples, double dt_s, uint64_t slow_us,
		   const struct sluice_class_signals *one)
{
	s->calls = s->completed > s->resp_429 ? s->completed - s->resp_429 : 0;
	s->samples = samples;
	s->rate_per_s = dt_s > 0 ? (double)s->arrivals / dt_s : 0;
	s->completed_per_s = dt_s > 0 ? (double)s->completed / dt_s : 0;
	if (one) {
		s->p50_us = one->p50_us;
		s->p90_us = one->p90_us;
		s->p99_us = one->p99_us;
		s->mean_us = one->mean_us;
		s->slow = one->slow;
	} else {
		quantiles3(h, s->samples, sp, &s->p50_us, &s->p90_us, &s->p99_us);
		s->mean_us = s->samples ? (double)h->sum_us / (double)s->samples : 0;
		s->slow = slow_us && s->samples ? above_span(h, slow_us, sp) : 0;
	}
	s->slow_rate = s->samples ? s->slow / (double)s->samples : 0;
	s->error_rate = s->calls ? (double)(s->errors < s->calls ? s->errors : s->calls) /
				   (double)s->calls : 0;
	s->retransmit_ratio = s->arrivals ? (double)s->retransmits / (double)s->arrivals : 0;
}

static void fill(struct sluice_class_signals *s, const struct sluice_class_stats *d,
		 const struct sluice_hist *h, struct hist_span sp, uint64_t samples, double dt_s,
		 uint64_t slow_us)
{
	int r;

	s->arrivals += d->arrivals;
	s->admitted += d->admitted;
	s->completed += d->completed;
	s->errors += d->errors;
	s->resp_429 += d->resp_429;
	s->retransmits += d->retransmits;
	for (r = 0; r < SLUICE_REJ_REASONS; r++) {
		s->rejected[r] += d->rejected[r];
		s->rejected_total += d->rejected[r];
	}
	if (h)
		derive(s, h, sp, samples, dt_s, slow_us, NULL);
}

void sluice_signals_compute(const struct sluice_class_stats *prev,
			    const struct sluice_class_stats *cur,
			    const struct sluice_hist *prev_h, const struct sluice_hist *cur_h,
			    uint64_t dt_ns, uint64_t slow_call_us,
			    struct sluice_service_signals *out)
{
	sluice_signals_compute_same(prev, cur, prev_h, cur_h, 0, dt_ns, slow_call_us, out);
}

/* One class's histogram delta cur - prev (prev NULL: zero) into d; its sample count in *n,
 * the buckets that moved in *sp. snap (NULL, or ph itself): ph becomes cur in the same pass,
 * only its buckets that moved written. Returns 1 when a bucket went backwards: the whole of
 * cur counts from zero. */
static int hist_delta_n(const struct sluice_hist *ph, const struct sluice_hist *ch,
			struct sluice_hist *d, uint64_t *n, struct hist_span *sp,
			struct sluice_hist *snap)
{
	uint64_t sum = 0;
	uint32_t i, lo = SLUICE_HIST_BUCKETS, hi = 0;

	/* one pass: delta, its count and where it lies (this loop is most of a tick with
	 * samples) */
	for (i = 0; i < SLUICE_HIST_BUCKETS; i++) {
		uint64_t v = ch->bucket[i], pv = ph ? ph->bucket[i] : 0;
		if (v < pv)
			break;
		d->bucket[i] = v - pv;
		sum += v - pv;
		if (v != pv) {
			if (lo == SLUICE_HIST_BUCKETS)
				lo = i;
			hi = i;
			if (snap)
				snap->bucket[i] = v;
		}
	}
	if (i < SLUICE_HIST_BUCKETS) {
		*d = *ch;
		*n = sluice_hist_count(d);
		*sp = full_span;
		if (snap)
			*snap = *ch;
		return 1;
	}
	d->sum_us = !ph ? ch->sum_us : ch->sum_us >= ph->sum_us ? ch->sum_us - ph->sum_us :
		    ch->sum_us;
	if (snap)
		snap->sum_us = ch->sum_us;
	*n = sum;
	sp->lo = lo;
	sp->hi = hi;
	return 0;
}

/* reuse: out holds this service's signals of the last call (or zeros): a class that did not
 * move and whose signals are all zero already (out->zero_cls) is not written again.
 * cur_h[c]: class c's histogram now (not looked at when hist_same says it did not move).
 * snap (NULL, or prev_h itself): prev_h[c] becomes *cur_h[c] in the pass of the delta. */
static void compute(const struct sluice_class_stats *prev, const struct sluice_class_stats *cur,
		    const struct sluice_hist *prev_h, const struct sluice_hist *const *cur_h,
		    unsigned hist_same, uint64_t dt_ns, uint64_t slow_call_us, int reuse,
		    struct sluice_hist *snap, struct sluice_service_signals *out)
{
	double dt_s = (double)dt_ns / 1e9;
	struct sluice_class_stats d;
	static const struct sluice_hist empty_h;
	struct sluice_hist hd[SLUICE_NUM_CLASSES], total_h;
	const struct sluice_hist *th = &empty_h;   /* the histogram delta of all classes */
	const struct sluice_class_signals *one = NULL;  /* the class th is, when only one */
	struct hist_span tsp = { SLUICE_HIST_BUCKETS, 0 };   /* where th's samples lie */
	uint64_t total_n = 0;
	unsigned zero = reuse ? out->zero_cls : 0;
	uint32_t c, i;
	int with = 0;                               /* classes whose delta is not empty */

	if (reuse)
		memset(&out->total, 0, sizeof(out->total));
	else
		memset(out, 0, sizeof(*out));
	out->dt_s = dt_s;
	for (c = 0; c < SLUICE_NUM_CLASSES; c++) {
		struct sluice_class_signals *s = &out->cls[c];
		const struct sluice_hist *ph = prev_h ? &prev_h[c] : NULL;
		int moved, reset = stats_delta(prev ? &prev[c] : NULL, &cur[c], &d, &moved);
		uint64_t n = 0;
		struct hist_span sp;

		if (ph && (hist_same >> c & 1)) {
			/* the caller says cur == prev: the delta is empty, nothing to add up */
			if (!moved && !reset) {
				/* all of this class's signals are zero */
				if (!(zero >> c & 1))
					memset(s, 0, sizeof(*s));
				zero |= 1u << c;
				continue;
			}
			if (reuse)
				memset(s, 0, sizeof(*s));
			zero &= ~(1u << c);
			s->reset = reset;
			out->total.reset |= reset;
			fill(s, &d, &empty_h, full_span, 0, dt_s, slow_call_us);
			fill(&out->total, &d, NULL, full_span, 0, dt_s, slow_call_us);
			continue;
		}
		if (hist_delta_n(ph, cur_h[c], &hd[c], &n, &sp, snap ? &snap[c] : NULL))
			reset = 1;
		if (reuse)
			memset(s, 0, sizeof(*s));
		if (!moved && !reset && !n && !hd[c].sum_us)
			zero |= 1u << c;
		else
			zero &= ~(1u << c);
		if (n || hd[c].sum_us) {
			/* the total's histogram: one class's delta as it is, or their sum (of the
			 * buckets where this class's delta lies: the others add zero) */
			if (with == 1) {
				total_h = *th;
				th = &total_h;
			}
			if (!with) {
				th = &hd[c];
				one = s;
			} else {
				for (i = sp.lo; i <= sp.hi && i < SLUICE_HIST_BUCKETS; i++)
					total_h.bucket[i] += hd[c].bucket[i];
				total_h.sum_us += hd[c].sum_us;
			}
			if (sp.lo < tsp.lo)
				tsp.lo = sp.lo;
			if (sp.lo <= sp.hi && sp.hi > tsp.hi)
				tsp.hi = sp.hi;
			with++;
		}
		total_n += n;
		s->reset = reset;
		out->total.reset |= reset;
		fill(s, &d, &hd[c], sp, n, dt_s, slow_call_us);
		fill(&out->total, &d, NULL, full_span, 0, dt_s, slow_call_us);
	}
	out->zero_cls = zero;
	/* second pass computes the derived numbers of the total from its summed fields */
	derive(&out->total, th, tsp, total_n, dt_s, slow_call_us, with == 1 ? one : NULL);
}

/* cur_h as one pointer a class. */
static void hist_ptrs(const struct sluice_hist *cur_h, const struct sluice_hist **p)
{
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		p[c] = &cur_h[c];
}

void sluice_signals_compute_same(const struct sluice_class_stats *prev,
				 const struct sluice_class_stats *cur,
				 const struct sluice_hist *prev_h, const struct sluice_hist *cur_h,
				 unsigned hist_same, uint64_t dt_ns, uint64_t slow_call_us,
				 struct sluice_service_signals *out)
{
	const struct sluice_hist *p[SLUICE_NUM_CLASSES];

	hist_ptrs(cur_h, p);
	compute(prev, cur, prev_h, p, hist_same, dt_ns, slow_call_us, 0, NULL, out);
}

void sluice_signals_update(const struct sluice_class_stats *prev,
			   const struct sluice_class_stats *cur,
			   const struct sluice_hist *prev_h, const struct sluice_hist *cur_h,
			   unsigned hist_same, uint64_t dt_ns, uint64_t slow_call_us,
			   struct sluice_service_signals *out)
{
	const struct sluice_hist *p[SLUICE_NUM_CLASSES];

	hist_ptrs(cur_h, p);
	compute(prev, cur, prev_h, p, hist_same, dt_ns, slow_call_us, 1, NULL, out);
}

void sluice_signals_step(const struct sluice_class_stats *prev,
			 const struct sluice_class_stats *cur, struct sluice_hist *prev_h,
			 const struct sluice_hist *const cur_h[SLUICE_NUM_CLASSES],
			 unsigned hist_same, uint64_t dt_ns, uint64_t slow_call_us,
			 struct sluice_service_signals *out)
{
	compute(prev, cur, prev_h, cur_h, hist_same, dt_ns, slow_call_us, 1, prev_h, out);
}
