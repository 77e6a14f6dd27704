// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Rolling low-percentile baseline; see baseline.h. */
#include <math.h>
#include <string.h>
#include "control/baseline.h"

void sluice_baseline_params_default(struct sluice_baseline_params *p)
{
	p->n = SLUICE_BASELINE_N;
	p->q = 0.1;
	p->min_samples = 20;
	p->max_error_rate = 0.05;
	p->stale_windows = 64;
}

void sluice_baseline_reset(struct sluice_baseline *b)
{
	memset(b, 0, sizeof(*b));
}

void sluice_baseline_seed(struct sluice_baseline *b, double v)
{
	sluice_baseline_reset(b);
	if (!(v > 0) || !isfinite(v))
		return;
	b->ring[0] = v;
	b->count = 1;
	b->head = 1;
	b->learned = 1;
	b->value_us = v;
}

static double percentile(const struct sluice_baseline *b, double q)
{
	double v[SLUICE_BASELINE_N];
	uint32_t n = b->count, i, j, k;

	memcpy(v, b->ring, sizeof(double) * n);
	for (i = 1; i < n; i++) {                 /* insertion sort: n <= 64, once per window */
		double x = v[i];
		for (j = i; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
	k = (uint32_t)(q * (double)(n - 1) + 0.5);
	return v[k < n ? k : n - 1];
}

static uint32_t ring_len(const struct sluice_baseline_params *p)
{
	return p->n < 8 ? 8 : p->n > SLUICE_BASELINE_N ? SLUICE_BASELINE_N : p->n;
}

/* A ring whose entries or places are not what sluice_baseline_add leaves gives a value that is
 * not one: with a head past its entries, the next window is written where the percentile does
 * not read and the entry read instead is a zero, a value of 0 that leaves the objective
 * unknown (no latency overload seen) until that zero has left the ring, 60 windows later. */
int sluice_baseline_adopt(struct sluice_baseline *b, const struct sluice_baseline_params *p)
{
	uint32_t n = ring_len(p);
	int ok = b->count <= n && b->head < n && (b->count == n || b->head == b->count);

	if (b->stale >= p->stale_windows)
		b->stale = 0;                     /* a count no add leaves: none refused yet */
	for (uint32_t i = 0; ok && i < b->count; i++)
		ok = b->ring[i] > 0 && isfinite(b->ring[i]);
	if (!ok) {
		sluice_baseline_reset(b);
		return 0;
	}
	b->value_us = b->count ? percentile(b, p->q) : 0;
	return 1;
}

int sluice_baseline_add(struct sluice_baseline *b, const struct sluice_baseline_params *p,
			const struct sluice_baseline_window *w)
{
	uint32_t n = ring_len(p);
	double v = w->latency_us;

	if (w->samples < p->min_samples || v <= 0 ||
	    (double)w->errors > p->max_error_rate * (double)(w->calls ? w->calls : 1) ||
	    (double)w->resp_429 > p->max_error_rate * (double)(w->calls + w->resp_429))
		return 0;
	if (w->queued && (b->value_us <= 0 || v > b->value_us))
		return 0;                 /* a measured queue is in this number */
	if (w->saturated && b->value_us > 0 && v > b->value_us) {
		/* our own queue is in this number: it may not raise the baseline, unless nothing
		 * else has qualified for a long time (the backend itself changed) */
		if (++b->stale < p->stale_windows)
			return 0;
	}
	b->stale = 0;
	b->ring[b->head] = v;
	b->head = (b->head + 1) % n;
	if (b->count < n)
		b->count++;
	b->learned++;
	b->value_us = percentile(b, p->q);
	return 1;
}
