/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test helper: a simulated service behind a simulated data path, on a fake clock, driven by
 * the real controller (service_ctl_tick) the way sluiced drives it.
 *
 * Backend: `workers` workers and one FIFO queue; each request takes service_ms (a scenario
 * callback may change it over time or answer with an error). Data path: for each arrival, the
 * breaker's admit fraction, the ladder's admit_prob[class], then the class threshold against
 * the in-flight of classes 0..k (SLUICE_VERDICT_PRIORITY_COUNT) or the total -- as bpf/admit.h
 * does. Counters and latency histograms are cumulative, as the maps are. Clients: open-loop
 * Poisson per class (rate may change over time) and/or closed-loop clients (think time, a
 * back-off after a refusal). Time advances in steps of 100 us; the controller ticks every
 * 100 ms. Every admitted request's (admission time, latency, class) is kept for measurement.
 * With wait_probe the controller also gets the wait before the server reads, as
 * bpf/readwait.bpf.c measures it: from a request's arrival to the worker taking it (plus
 * read_delay_ms, a server that reads late whatever its load). */
#ifndef SLUICE_TEST_SIM_H
#define SLUICE_TEST_SIM_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "control/controller.h"
#include "common/rng.h"
#include "control/verdict.h"

#define SIM_STEP_US    100ull
#define SIM_TICK_US    100000ull
#define SIM_MAX_WORKERS 256
#define SIM_MAX_CLIENTS 1024
#define SIM_QMAX       65536

struct sim;
/* Service time of a request starting at t_us; *err = 1 makes it an error answer. */
typedef double (*sim_svc_fn)(struct sim *s, uint64_t t_us, int *err);
/* Open-loop rate per class (requests/s) at t_us. */
typedef double (*sim_rate_fn)(struct sim *s, uint64_t t_us, int cls);

struct sim_req { uint64_t arr_us; int cls; int client; };
struct sim_rec { uint64_t arr_us; uint32_t lat_us; uint8_t cls, err; };

struct sim {
	/* scenario */
	int workers;
	double service_ms;
	double jitter;                    /* service time x uniform(1 - j, 1 + j) */
	sim_svc_fn svc;
	sim_rate_fn rate;
	int clients;                      /* closed-loop clients (class client % 4 unless cls_of) */
	int client_cls;                   /* -1: client i is class i % 4 */
	int l0_clients;                   /* clients 0 .. l0_clients - 1 are L0 (else as above) */
	double think_ms, backoff_ms;
	int wait_probe;                   /* the wait before the server reads is measured (as
	                                   * bpf/readwait.bpf.c does): arrival to a worker */
	double read_delay_ms;             /* a server that reads each request this late whatever
	                                   * its load (a wait that is not a queue) */
	void *ctx;

	/* controller */
	struct service_conf sc;
	struct sluice_config cfg;
	struct service_ctl ctl;
	struct sluice_verdict v;
	struct ctl_inputs in;
	struct sluice_event_sink sink;

	/* state */
	uint64_t now_us, rng;
	struct sim_req q[SIM_QMAX];
	uint32_t qh, qn;
	uint64_t busy_until[SIM_MAX_WORKERS];
	struct sim_req on[SIM_MAX_WORKERS];
	int on_err[SIM_MAX_WORKERS];
	uint64_t next_send[SIM_MAX_CLIENTS];
	uint64_t next_arr[SLUICE_NUM_CLASSES];
	int64_t inflight[SLUICE_NUM_CLASSES];
	uint64_t busy_us;                 /* worker time spent serving */
	struct sim_rec *rec;
	size_t nrec, caprec;
	uint32_t min_admit[SLUICE_NUM_CLASSES];
	uint32_t min_limit, max_limit;
	int cur_cls;                      /* class of the request svc is asked about */
};

static uint64_t sim_seed = 42;
static int sim_wait_probe;            /* sim_init: the new sim measures the wait */

static inline void sim_init(struct sim *s, int workers, double service_ms)
{
	memset(s, 0, sizeof(*s));
	s->workers = workers;
	s->service_ms = service_ms;
	s->jitter = 0.1;
	s->client_cls = -1;
	s->backoff_ms = 20;
	s->rng = sluice_rng_seed(sim_seed);
	sluice_config_defaults(&s->cfg);
	sluice_service_defaults(&s->sc);
	snprintf(s->sc.name, sizeof(s->sc.name), "sim");
	s->sc.protocol = SLUICE_PROTO_HTTP;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		s->min_admit[c] = SLUICE_PROB_ONE;
	s->min_limit = UINT32_MAX;
	s->wait_probe = sim_wait_probe;
}

/* After changing s->sc: (re)create the controller. */
static inline void sim_start(struct sim *s)
{
	service_ctl_init(&s->ctl, &s->sc, &s->cfg, 7, 0);
	verdict_default(&s->sc, (int)s->ctl.lim.limit, &s->v);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		s->in.switch_admit[c] = SLUICE_PROB_ONE;
		s->next_arr[c] = 0;
	}
	s->v.flags = SLUICE_VERDICT_PRIORITY_COUNT;
}

static inline double sim_u(struct sim *s)
{
	return sluice_rng_uniform(&s->rng);
}

static inline void sim_record(struct sim *s, const struct sim_req *r, uint64_t lat, int err)
{
	if (s->nrec == s->caprec) {
		s->caprec = s->caprec ? 2 * s->caprec : 65536;
		s->rec = realloc(s->rec, s->caprec * sizeof(*s->rec));
	}
	s->rec[s->nrec].arr_us = r->arr_us;
	s->rec[s->nrec].lat_us = (uint32_t)lat;
	s->rec[s->nrec].cls = (uint8_t)r->cls;
	s->rec[s->nrec].err = (uint8_t)err;
	s->nrec++;
}

static inline int sim_admit(struct sim *s, int c)
{
	int64_t n = 0;
	struct sluice_class_stats *st = &s->in.stats[c];

	st->arrivals++;
	if (sluice_prob_complement(s->v.breaker_shed) < SLUICE_PROB_ONE &&
	    sim_u(s) * SLUICE_PROB_ONE >= sluice_prob_complement(s->v.breaker_shed)) {
		st->rejected[SLUICE_REJ_BREAKER]++;
		return 0;
	}
	if (sluice_prob_complement(s->v.shed_prob[c]) < SLUICE_PROB_ONE && sim_u(s) * SLUICE_PROB_ONE >= sluice_prob_complement(s->v.shed_prob[c])) {
		st->rejected[SLUICE_REJ_LADDER]++;
		return 0;
	}
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		if (k <= c || !(s->v.flags & SLUICE_VERDICT_PRIORITY_COUNT))
			n += s->inflight[k];
	/* the data path's encoding: threshold 0 is "no threshold", a shut class has its flag */
	if ((s->v.flags & SLUICE_VERDICT_SHUT(c)) ||
	    (s->v.class_threshold[c] && n >= (int64_t)s->v.class_threshold[c])) {
		st->rejected[SLUICE_REJ_HEADROOM]++;
		return 0;
	}
	st->admitted++;
	s->inflight[c]++;
	return 1;
}

static inline void sim_arrive(struct sim *s, int c, int client)
{
	struct sim_req r = { s->now_us, c, client };

	if (!sim_admit(s, c)) {
		if (client >= 0)
			s->next_send[client] = s->now_us + (uint64_t)(s->backoff_ms * 1000);
		return;
	}
	if (s->qn < SIM_QMAX) {
		s->q[(s->qh + s->qn) % SIM_QMAX] = r;
		s->qn++;
	}
	if (client >= 0)
		s->next_send[client] = UINT64_MAX;        /* waiting for the answer */
}

static inline void sim_tick(struct sim *s)
{
	int opened;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		s->in.inflight.cls[c] = s->inflight[c];
	s->in.inflight.total = s->inflight[0] + s->inflight[1] + s->inflight[2] + s->inflight[3];
	s->in.wait_have = s->wait_probe;
	service_ctl_tick(&s->ctl, &s->sc, &s->in, 0, s->now_us * 1000, &s->sink, &s->v, &opened);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (sluice_prob_complement(s->v.shed_prob[c]) < s->min_admit[c])
			s->min_admit[c] = sluice_prob_complement(s->v.shed_prob[c]);
	if (s->v.limit < s->min_limit)
		s->min_limit = s->v.limit;
	if (s->v.limit > s->max_limit)
		s->max_limit = s->v.limit;
}

/* Run until t_end_us (absolute). */
static inline void sim_run(struct sim *s, uint64_t t_end_us)
{
	while (s->now_us < t_end_us) {
		uint64_t t = s->now_us += SIM_STEP_US;
		int w, c, i;

		/* completions */
		for (w = 0; w < s->workers; w++) {
			struct sim_req *r = &s->on[w];
			if (!s->busy_until[w] || s->busy_until[w] > t)
				continue;
			{
				uint64_t lat = s->busy_until[w] - r->arr_us;
				struct sluice_class_stats *st = &s->in.stats[r->cls];
				st->completed++;
				if (s->on_err[w])
					st->errors++;
				s->in.hist[r->cls].bucket[sluice_hist_bucket(lat)]++;
				s->in.hist[r->cls].sum_us += lat;
				s->inflight[r->cls]--;
				sim_record(s, r, lat, s->on_err[w]);
				if (r->client >= 0)
					s->next_send[r->client] = s->busy_until[w] +
						(uint64_t)(s->think_ms * 1000 * (0.5 + sim_u(s)));
			}
			s->busy_until[w] = 0;
		}
		/* arrivals */
		if (s->rate)
			for (c = 0; c < SLUICE_NUM_CLASSES; c++) {
				double rt = s->rate(s, t, c);
				if (rt <= 0) {
					s->next_arr[c] = 0;
					continue;
				}
				if (!s->next_arr[c])
					s->next_arr[c] = t + (uint64_t)(-log(1 - sim_u(s)) / rt * 1e6);
				while (s->next_arr[c] <= t) {
					sim_arrive(s, c, -1);
					s->next_arr[c] += (uint64_t)(-log(1 - sim_u(s)) / rt * 1e6) + 1;
				}
			}
		for (i = 0; i < s->clients; i++)
			if (s->next_send[i] <= t)
				sim_arrive(s, i < s->l0_clients ? 0 : s->client_cls >= 0 ?
					   s->client_cls : i % 4, i);
		/* free workers take queued requests */
		for (w = 0; w < s->workers && s->qn; w++) {
			int err = 0;
			double ms;
			if (s->busy_until[w])
				continue;
			s->on[w] = s->q[s->qh];
			s->qh = (s->qh + 1) % SIM_QMAX;
			s->qn--;
			s->cur_cls = s->on[w].cls;
			ms = s->svc ? s->svc(s, t, &err) : s->service_ms;
			ms *= 1 - s->jitter + 2 * s->jitter * sim_u(s);
			/* the worker reads the request now (a late reader: read_delay_ms on) */
			s->in.wait.count++;
			s->in.wait.sum_ns += (t - s->on[w].arr_us) * 1000 +
					     (uint64_t)(s->read_delay_ms * 1e6);
			ms += s->read_delay_ms;
			s->on_err[w] = err;
			s->busy_until[w] = t + (uint64_t)(ms * 1000) + 1;
			s->busy_us += (uint64_t)(ms * 1000);
		}
		if (t % SIM_TICK_US == 0)
			sim_tick(s);
	}
}

static int sim_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Quantile q of the latency (us) of requests admitted in [from, to) of class mask cls_mask
 * (bit c), errors excluded; *n gets their number. 0 when none. */
static inline double sim_quantile(const struct sim *s, uint64_t from, uint64_t to, int cls_mask,
				  double q, size_t *n)
{
	uint32_t *v = malloc((s->nrec + 1) * sizeof(uint32_t));
	size_t k = 0, i;
	double r = 0;

	for (i = 0; i < s->nrec; i++)
		if (s->rec[i].arr_us >= from && s->rec[i].arr_us < to && !s->rec[i].err &&
		    (cls_mask >> s->rec[i].cls & 1))
			v[k++] = s->rec[i].lat_us;
	if (k) {
		size_t idx = (size_t)ceil(q * (double)k);
		qsort(v, k, sizeof(uint32_t), sim_cmp_u32);
		r = v[(idx ? idx : 1) - 1];
	}
	if (n)
		*n = k;
	free(v);
	return r;
}

static inline void sim_free(struct sim *s)
{
	free(s->rec);
	s->rec = NULL;
}

#endif
