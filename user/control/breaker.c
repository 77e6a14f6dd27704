// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Circuit breaker state machine; the rules are in breaker.h. */
#include <string.h>
#include "control/breaker.h"
#include "common/rng.h"

#define NS 1000000000ull

static const uint32_t brk_default_steps[] = { 10, 30, 60, 100 };

void sluice_breaker_params_default(struct sluice_breaker_params *p)
{
	uint32_t i;

	memset(p, 0, sizeof(*p));
	p->min_calls = 20;
	p->error_rate = 0.5;
	p->slow_rate = 0.6;
	p->slow_call_us = 800000;
	p->open_s = 5;
	for (i = 0; i < 4; i++)
		p->steps[i] = brk_default_steps[i];
	p->n_steps = 4;
	p->step_s = 5;
	p->success = 0.9;
	p->window_s = 10;
	p->ho_min_calls = 5;
}

void sluice_breaker_params_from_conf(const struct breaker_conf *bc, struct sluice_breaker_params *p)
{
	int i;

	sluice_breaker_params_default(p);
	if (bc->min_calls > 0)
		p->min_calls = (uint32_t)bc->min_calls;
	if (bc->error_rate > 0)
		p->error_rate = bc->error_rate;
	if (bc->slow_call_ms > 0)
		p->slow_call_us = (uint64_t)bc->slow_call_ms * 1000;
	if (bc->slow_call_rate > 0)
		p->slow_rate = bc->slow_call_rate;
	if (bc->open_s > 0)
		p->open_s = bc->open_s;
	if (bc->n_half_open_steps > 0) {
		p->n_steps = 0;
		for (i = 0; i < bc->n_half_open_steps && i < SLUICE_BRK_MAX_STEPS; i++)
			if (bc->half_open_steps[i] > 0 && bc->half_open_steps[i] <= 100)
				p->steps[p->n_steps++] = (uint32_t)bc->half_open_steps[i];
		if (p->n_steps == 0 || p->steps[p->n_steps - 1] != 100) {
			/* the walk must end at 100% or the breaker could never close */
			if (p->n_steps < SLUICE_BRK_MAX_STEPS)
				p->steps[p->n_steps++] = 100;
			else
				p->steps[p->n_steps - 1] = 100;
		}
	}
	if (bc->step_s > 0)
		p->step_s = bc->step_s;
	if (bc->half_open_success > 0)
		p->success = bc->half_open_success;
	if (bc->window_s > 0) {
		uint32_t w = (uint32_t)(bc->window_s + 0.999);
		p->window_s = w > SLUICE_BRK_MAX_WINDOW_S ? SLUICE_BRK_MAX_WINDOW_S : w;
	}
}

void sluice_breaker_init(struct sluice_breaker *b, uint64_t seed, uint64_t now_ns)
{
	memset(b, 0, sizeof(*b));
	b->state = SLUICE_BREAKER_CLOSED;
	b->rng = sluice_rng_seed(seed);
	b->since_ns = now_ns;
}

static void clear_window(struct sluice_breaker *b)
{
	memset(b->ring, 0, sizeof(b->ring));
	b->win_calls = 0;
	b->win_error_rate = b->win_slow_rate = 0;
}

static void account(struct sluice_breaker *b, uint64_t calls, uint64_t errors, double slow,
		    uint64_t now_ns)
{
	uint64_t sec = now_ns / NS;
	struct sluice_brk_bucket *k = &b->ring[sec % SLUICE_BRK_MAX_WINDOW_S];

	if (k->sec != sec) {
		memset(k, 0, sizeof(*k));
		k->sec = sec;
	}
	k->calls += calls;
	k->errors += errors;
	k->slow += slow;
}

/*
 * Counts of the last window_s seconds: the window_s newest one-second buckets (the current,
 * partial one included) plus the bucket just before them, weighted by the part of its second
 * still inside the window. Without that oldest share a 1 s window would be only "the calls
 * since the last whole second": 50 ms after each second began it would hold a twentieth of
 * the calls it should, and min_calls would be out of reach for most of every second.
 * The share assumes the oldest bucket's calls were spread evenly over its second.
 */
static uint64_t window_secs(const struct sluice_breaker_params *p)
{
	uint64_t w = p->window_s ? p->window_s : 1;

	return w > SLUICE_BRK_MAX_WINDOW_S ? SLUICE_BRK_MAX_WINDOW_S : w;
}

/* The share of the bucket i seconds before now's that lies in a window of w seconds; 0 past
 * it. With the ring full (w = its size) the oldest second's slot is the current one's, so it
 * has no share to add. */
static double window_share(uint64_t i, uint64_t w, uint64_t now_ns)
{
	if (i < w)
		return 1.0;
	if (i == w && w < SLUICE_BRK_MAX_WINDOW_S)
		return 1.0 - (double)(now_ns % NS) / NS;
	return 0;
}

static void window_sum(const struct sluice_breaker *b, const struct sluice_breaker_params *p,
		       uint64_t now_ns, uint64_t *calls, uint64_t *errors, double *slow)
{
	uint64_t sec = now_ns / NS, w = window_secs(p);
	double c = 0, e = 0, s = 0, share;
	uint32_t i;

	*calls = *errors = 0;
	*slow = 0;
	/* only the slots that can hold this window's seconds */
	for (i = 0; i <= w && i <= sec; i++) {
		const struct sluice_brk_bucket *k = &b->ring[(sec - i) % SLUICE_BRK_MAX_WINDOW_S];
		if (k->sec != sec - i)
			continue;
		if (!(share = window_share(i, w, now_ns)))
			break;
		c += share * (double)k->calls;
		e += share * (double)k->errors;
		s += share * k->slow;
	}
	/* whole calls: min_calls compares against what was really seen, never a fraction */
	*calls = (uint64_t)(c + 1e-9);
	*errors = (uint64_t)(e + 1e-9);
	*slow = s < (double)*calls ? s : (double)*calls;
}

/* Class c's calls this tick, its errors and slow calls bounded by them as the service's are. */
static uint64_t class_calls(const struct sluice_breaker_input *in, int c, uint64_t *errors,
			    double *slow)
{
	uint64_t calls = in->class_completed[c] > in->class_429[c] ?
			 in->class_completed[c] - in->class_429[c] : 0;

	*errors = in->class_errors[c] < calls ? in->class_errors[c] : calls;
	*slow = in->class_slow[c] < 0 ? 0 : in->class_slow[c] < (double)calls ?
		in->class_slow[c] : (double)calls;
	return calls;
}

static void account_classes(struct sluice_brk_classes *cl, const struct sluice_breaker_input *in,
			    uint64_t now_ns)
{
	uint64_t sec = now_ns / NS, calls, errors;
	struct sluice_brk_class_bucket *k = &cl->ring[sec % SLUICE_BRK_MAX_WINDOW_S];
	double slow;

	if (k->sec != sec) {
		memset(k, 0, sizeof(*k));
		k->sec = sec;
	}
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		calls = class_calls(in, c, &errors, &slow);
		k->calls[c] += (uint32_t)calls;
		k->errors[c] += (uint32_t)errors;
		k->slow[c] += (float)slow;
	}
}

/* The highest class with at least ho_min_calls calls (and one) among `calls`, its error and
 * slow rates in *er and *sr; -1 when there is none. */
static int top_class(const struct sluice_breaker_params *p, const double *calls,
		     const double *errors, const double *slow, double *er, double *sr)
{
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		double n = (double)(uint64_t)(calls[c] + 1e-9);   /* whole calls, as the service's */

		if (n < 1 || n < (double)p->ho_min_calls)
			continue;
		*er = errors[c] / n;
		*sr = (slow[c] < n ? slow[c] : n) / n;
		return c;
	}
	return -1;
}

/* top_class over the classes' window, summed as window_sum sums the service's. */
static int top_class_window(const struct sluice_brk_classes *cl,
			    const struct sluice_breaker_params *p, uint64_t now_ns, double *er,
			    double *sr)
{
	double c[SLUICE_NUM_CLASSES] = { 0 }, e[SLUICE_NUM_CLASSES] = { 0 };
	double s[SLUICE_NUM_CLASSES] = { 0 }, share;
	uint64_t sec = now_ns / NS, w = window_secs(p);

	for (uint64_t i = 0; i <= w && i <= sec; i++) {
		const struct sluice_brk_class_bucket *k = &cl->ring[(sec - i) % SLUICE_BRK_MAX_WINDOW_S];
		if (k->sec != sec - i)
			continue;
		if (!(share = window_share(i, w, now_ns)))
			break;
		for (int x = 0; x < SLUICE_NUM_CLASSES; x++) {
			c[x] += share * k->calls[x];
			e[x] += share * k->errors[x];
			s[x] += share * k->slow[x];
		}
	}
	return top_class(p, c, e, s, er, sr);
}

static void brk_report(const struct sluice_breaker *b, const struct sluice_event_sink *sink,
		   uint64_t now, int level, int from, int to, const char *why, uint64_t calls,
		   double err, double slow, double extra_val, const char *extra_key)
{
	struct sluice_event ev;

	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now, level, sink->service, SLUICE_EVM_BREAKER, sluice_breaker_state_name(from),
			  sluice_breaker_state_name(to), why);
	sluice_event_num(&ev, "calls", (double)calls);
	sluice_event_num(&ev, "error_rate", err);
	sluice_event_num(&ev, "slow_rate", slow);
	if (to == SLUICE_BREAKER_HALF_OPEN || from == SLUICE_BREAKER_HALF_OPEN)
		sluice_event_num(&ev, "step", b->step);
	if (extra_key)
		sluice_event_num(&ev, extra_key, extra_val);
	sluice_event_emit(sink, &ev);
}

static void go_open(struct sluice_breaker *b, const struct sluice_breaker_params *p,
		    uint64_t now_ns)
{
	/* actual wait = open_s x (0.8 + rand x 0.4): instances that opened together do not all
	 * probe the recovering downstream at the same moment */
	b->open_dur_s = p->open_s * (0.8 + 0.4 * sluice_rng_uniform(&b->rng));
	b->open_until_ns = now_ns + (uint64_t)(b->open_dur_s * 1e9);
	b->state = SLUICE_BREAKER_OPEN;
	b->since_ns = now_ns;
	b->step = 0;
	b->would_open = 0;
	clear_window(b);
}

static void start_step(struct sluice_breaker *b, uint32_t step, uint64_t now_ns)
{
	b->state = SLUICE_BREAKER_HALF_OPEN;
	b->step = step;
	b->step_start_ns = now_ns;
	b->step_calls = 0;
	b->step_fail = 0;
}

static int tick_closed(struct sluice_breaker *b, const struct sluice_breaker_params *p,
		       const struct sluice_breaker_input *in, uint64_t calls, uint64_t now_ns,
		       const struct sluice_event_sink *sink)
{
	uint64_t wc, we;
	double ws, er, sr;
	int err_trip, slow_trip;

	account(b, calls, in->errors, in->slow, now_ns);
	window_sum(b, p, now_ns, &wc, &we, &ws);
	er = wc ? (double)we / (double)wc : 0;
	sr = wc ? ws / (double)wc : 0;
	b->win_calls = wc;
	b->win_error_rate = er;
	b->win_slow_rate = sr;
	/* below min_calls nothing is judged: a quiet night must not open the breaker */
	err_trip = wc >= p->min_calls && er >= p->error_rate;
	slow_trip = wc >= p->min_calls && sr >= p->slow_rate;
	if ((err_trip || slow_trip) && in->classes) {
		double cer, csr;
		int top = top_class_window(in->classes, p, now_ns, &cer, &csr);

		if (top >= 0) {
			err_trip = err_trip && cer >= p->error_rate;
			slow_trip = slow_trip && csr >= p->slow_rate;
			if (!err_trip && !slow_trip) {
				/* a lower class fails, the highest busy one does not: the breaker
				 * would shut that one out too (said once an episode) */
				if (!in->classes->spared)
					brk_report(b, sink, now_ns, SLUICE_EV_INFO, SLUICE_BREAKER_CLOSED,
						   SLUICE_BREAKER_CLOSED, "lower_class_failures_only",
						   wc, er, sr, top, "top_class");
				in->classes->spared = 1;
				return 0;
			}
		}
	}
	if (!err_trip && !slow_trip) {
		b->would_open = 0;
		if (in->classes)
			in->classes->spared = 0;
		return 0;
	}
	if (in->suppressed) {
		if (b->would_open)
			return 0;
		b->would_open = 1;
		brk_report(b, sink, now_ns, SLUICE_EV_ALERT, SLUICE_BREAKER_CLOSED, SLUICE_BREAKER_CLOSED,
		       err_trip ? "would_open_error_rate_suppressed" : "would_open_slow_rate_suppressed",
		       wc, er, sr, 0, NULL);
		return SLUICE_BRK_WOULD_OPEN;
	}
	go_open(b, p, now_ns);
	b->opens++;
	brk_report(b, sink, now_ns, SLUICE_EV_INFO, SLUICE_BREAKER_CLOSED, SLUICE_BREAKER_OPEN,
	       err_trip ? "error_rate" : "slow_rate", wc, er, sr, b->open_dur_s, "open_s");
	b->win_calls = wc;                  /* keep the numbers that opened it visible */
	b->win_error_rate = er;
	b->win_slow_rate = sr;
	return SLUICE_BRK_OPENED | SLUICE_BRK_CHANGED;
}

/* The step's calls and failures by class (the counts of another step, or of none, start
 * afresh). */
static void account_step(struct sluice_brk_classes *cl, const struct sluice_breaker *b,
			 const struct sluice_breaker_input *in)
{
	uint64_t calls, errors;
	double slow, fail;

	if (cl->step_start_ns != b->step_start_ns) {
		memset(cl->step_calls, 0, sizeof(cl->step_calls));
		memset(cl->step_fail, 0, sizeof(cl->step_fail));
		cl->step_start_ns = b->step_start_ns;
	}
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		calls = class_calls(in, c, &errors, &slow);
		fail = (double)errors + slow;
		cl->step_calls[c] += calls;
		cl->step_fail[c] += fail < (double)calls ? fail : (double)calls;
	}
}

/* The step's success as judged: a step fails only when the highest class with ho_min_calls in
 * it fails too, so the better of the service's and that class's success (the service's when
 * no class has them). */
static double step_success_of_top(const struct sluice_brk_classes *cl,
				  const struct sluice_breaker_params *p, double succ)
{
	double c[SLUICE_NUM_CLASSES], zero[SLUICE_NUM_CLASSES] = { 0 }, fr, unused;

	for (int x = 0; x < SLUICE_NUM_CLASSES; x++)
		c[x] = (double)cl->step_calls[x];
	/* the failures as "errors", no slow calls: fr is the class's failure rate */
	if (top_class(p, c, cl->step_fail, zero, &fr, &unused) < 0)
		return succ;
	return 1.0 - fr > succ ? 1.0 - fr : succ;
}

static int tick_half_open(struct sluice_breaker *b, const struct sluice_breaker_params *p,
			  const struct sluice_breaker_input *in, uint64_t calls, uint64_t now_ns,
			  const struct sluice_event_sink *sink)
{
	double fail = (double)in->errors + in->slow, succ;
	uint64_t step_ns = (uint64_t)(p->step_s * 1e9);

	if (fail > (double)calls)
		fail = (double)calls;
	b->step_calls += calls;
	b->step_fail += fail;
	if (in->classes)
		account_step(in->classes, b, in);
	if (b->step_calls < p->ho_min_calls) {
		/* too few calls to judge: the step is held (extended past step_s) until it has them */
		return 0;
	}
	succ = 1.0 - b->step_fail / (double)b->step_calls;
	if (in->classes)
		succ = step_success_of_top(in->classes, p, succ);
	/* The step is judged over all its calls when it ends; it is cut short only when it
	 * already has min_calls calls (the evidence that opens a closed breaker) and fails. */
	if (succ < p->success &&
	    (now_ns - b->step_start_ns >= step_ns || b->step_calls >= p->min_calls)) {
		uint64_t n = b->step_calls;
		brk_report(b, sink, now_ns, SLUICE_EV_INFO, SLUICE_BREAKER_HALF_OPEN, SLUICE_BREAKER_OPEN,
		       "half_open_failed", n, 0, 0, succ, "success");
		go_open(b, p, now_ns);
		return SLUICE_BRK_CHANGED;
	}
	if (now_ns - b->step_start_ns < step_ns)
		return 0;
	if (b->step + 1 >= p->n_steps) {
		uint64_t n = b->step_calls;
		brk_report(b, sink, now_ns, SLUICE_EV_INFO, SLUICE_BREAKER_HALF_OPEN, SLUICE_BREAKER_CLOSED,
		       "half_open_passed", n, 0, 0, succ, "success");
		b->state = SLUICE_BREAKER_CLOSED;
		b->since_ns = now_ns;
		b->step = 0;
		clear_window(b);
		return SLUICE_BRK_CHANGED;
	}
	brk_report(b, sink, now_ns, SLUICE_EV_INFO, SLUICE_BREAKER_HALF_OPEN, SLUICE_BREAKER_HALF_OPEN,
	       "step_passed", b->step_calls, 0, 0, succ, "success");
	start_step(b, b->step + 1, now_ns);
	return SLUICE_BRK_CHANGED;
}

static int breaker_step(struct sluice_breaker *b, const struct sluice_breaker_params *p,
			const struct sluice_breaker_input *adj, uint64_t calls, uint64_t now_ns,
			const struct sluice_event_sink *sink)
{
	switch (b->state) {
	case SLUICE_BREAKER_CLOSED:
		return tick_closed(b, p, adj, calls, now_ns, sink);
	case SLUICE_BREAKER_OPEN:
		/* stragglers completing while open are not evidence about recovery: ignored */
		if (now_ns < b->open_until_ns)
			return 0;
		start_step(b, 0, now_ns);
		b->since_ns = now_ns;
		brk_report(b, sink, now_ns, SLUICE_EV_INFO, SLUICE_BREAKER_OPEN, SLUICE_BREAKER_HALF_OPEN,
		       "open_elapsed", 0, 0, 0, p->n_steps ? p->steps[0] : 100, "admit_pct");
		return SLUICE_BRK_CHANGED;
	case SLUICE_BREAKER_HALF_OPEN:
		return tick_half_open(b, p, adj, calls, now_ns, sink);
	}
	return 0;
}

void sluice_brk_classes_clear(struct sluice_brk_classes *cl)
{
	memset(cl, 0, sizeof(*cl));
}

int sluice_breaker_tick(struct sluice_breaker *b, const struct sluice_breaker_params *p,
			const struct sluice_breaker_input *in, uint64_t now_ns,
			const struct sluice_event_sink *sink)
{
	uint64_t calls = in->completed > in->resp_429 ? in->completed - in->resp_429 : 0;
	struct sluice_breaker_input adj = *in;
	int rc;

	/* errors and slow calls can never outnumber the calls they belong to */
	if (adj.errors > calls)
		adj.errors = calls;
	if (adj.slow > (double)calls)
		adj.slow = (double)calls;
	if (adj.slow < 0)
		adj.slow = 0;

	if (adj.classes && b->state == SLUICE_BREAKER_CLOSED)
		account_classes(adj.classes, &adj, now_ns);
	rc = breaker_step(b, p, &adj, calls, now_ns, sink);
	/* every transition clears the window: the classes' too */
	if (adj.classes && (rc & SLUICE_BRK_CHANGED))
		sluice_brk_classes_clear(adj.classes);
	return rc;
}

void sluice_breaker_reset(struct sluice_breaker *b, uint64_t now_ns, const char *why,
			  const struct sluice_event_sink *sink)
{
	int from = b->state;

	b->state = SLUICE_BREAKER_CLOSED;
	b->since_ns = now_ns;
	b->step = 0;
	b->would_open = 0;
	clear_window(b);
	brk_report(b, sink, now_ns, SLUICE_EV_INFO, from, SLUICE_BREAKER_CLOSED, why ? why : "reset",
	       0, 0, 0, 0, NULL);
}

uint32_t sluice_breaker_admit(const struct sluice_breaker *b, const struct sluice_breaker_params *p)
{
	switch (b->state) {
	case SLUICE_BREAKER_OPEN:
		return 0;
	case SLUICE_BREAKER_HALF_OPEN:
		if (b->step < p->n_steps)
			return (uint32_t)((uint64_t)p->steps[b->step] * SLUICE_PROB_ONE / 100);
		return SLUICE_PROB_ONE;
	default:
		return SLUICE_PROB_ONE;
	}
}

uint64_t sluice_breaker_remaining_ns(const struct sluice_breaker *b, uint64_t now_ns)
{
	if (b->state != SLUICE_BREAKER_OPEN || now_ns >= b->open_until_ns)
		return 0;
	return b->open_until_ns - now_ns;
}

uint32_t sluice_breaker_retry_after_s(const struct sluice_breaker *b, uint64_t now_ns)
{
	uint64_t r = sluice_breaker_remaining_ns(b, now_ns);

	if (b->state != SLUICE_BREAKER_OPEN)
		return 0;
	r = (r + NS - 1) / NS;
	return r ? (uint32_t)r : 1;
}
