// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Priority ladder; the rule is in ladder.h and docs/CONTROLLER.md. */
#include <string.h>
#include "control/ladder.h"

static const uint32_t ladder_default_steps[] = { 10, 30, 50, 80, 100 };

void sluice_ladder_params_default(struct sluice_ladder_params *p)
{
	uint32_t i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < 5; i++)
		p->steps[i] = ladder_default_steps[i];
	p->n_steps = 5;
	p->step_s = 5;
	p->shed_factor = 0.5;
	p->shed_interval_s = 0.2;
	p->l0_floor_pct = 10;
	p->rej_frac = 0.02;
	p->rej_min = 5;
	p->cut[0] = 0.2;
	p->cut[1] = 0.3;
	p->cut[2] = 0.3;
	p->cut[3] = 0.5;
	p->full_excess = 0.25;
	p->min_samples = 20;
}

void sluice_ladder_params_from_conf(const struct service_conf *sc, struct sluice_ladder_params *p)
{
	int i;

	sluice_ladder_params_default(p);
	if (sc->n_ladder_steps > 0) {
		p->n_steps = 0;
		for (i = 0; i < sc->n_ladder_steps && i < SLUICE_LADDER_MAX_STEPS; i++)
			if (sc->ladder_steps[i] > 0 && sc->ladder_steps[i] <= 100)
				p->steps[p->n_steps++] = (uint32_t)sc->ladder_steps[i];
		/* recovery must be able to reach 100% */
		if (p->n_steps == 0 || p->steps[p->n_steps - 1] != 100) {
			if (p->n_steps < SLUICE_LADDER_MAX_STEPS)
				p->steps[p->n_steps++] = 100;
			else
				p->steps[p->n_steps - 1] = 100;
		}
	}
	if (sc->recovery_step_s > 0)
		p->step_s = sc->recovery_step_s;
	if (sc->min_samples > 0)
		p->min_samples = (uint64_t)sc->min_samples;
}

void sluice_ladder_init(struct sluice_ladder *l, uint64_t now_ns)
{
	int c;

	memset(l, 0, sizeof(*l));
	for (c = 0; c < SLUICE_NUM_CLASSES; c++)
		l->admit[c] = SLUICE_PROB_ONE;
	l->last_change_ns = now_ns;
}

static uint32_t pct_fp(uint32_t pct)
{
	return (uint32_t)((uint64_t)pct * SLUICE_PROB_ONE / 100);
}

int sluice_ladder_overloaded(const struct sluice_ladder *l, const struct sluice_ladder_params *p,
			     const struct sluice_overload_input *in, const char **why)
{
	int k, j;

	if (in->target_us > 0 && in->latency_us > in->target_us) {
		if (why)
			*why = "latency_above_objective";
		return 1;
	}
	for (k = 0; k < SLUICE_NUM_CLASSES - 1; k++) {
		double lost = (double)in->headroom_rej[k];
		if (lost < (double)p->rej_min || lost <= p->rej_frac * (double)in->arrivals[k])
			continue;
		for (j = k + 1; j < SLUICE_NUM_CLASSES; j++)
			if (l->admit[j] > 0 && in->arrivals[j] > 0) {
				if (why)
					*why = "priority_inversion";
				return 1;
			}
	}
	return 0;
}

static const char *admit_state(uint32_t a)
{
	if (a == 0)
		return sluice_ladder_state_name(SLUICE_LADDER_OFF);
	return sluice_ladder_state_name(a >= SLUICE_PROB_ONE ? SLUICE_LADDER_FULL :
					SLUICE_LADDER_PARTIAL);
}

static void ladder_report(const struct sluice_event_sink *sink, uint64_t now, int cls, uint32_t from,
		   uint32_t to, const char *why, const struct sluice_ladder_input *in)
{
	struct sluice_event ev;

	if (!sink || !sink->fn)
		return;
	sluice_event_init(&ev, now, SLUICE_EV_INFO, sink->service, SLUICE_EVM_LADDER, admit_state(from),
			  admit_state(to), why);
	ev.cls = cls;
	sluice_event_num(&ev, "admit_pct_from", (double)from * 100.0 / SLUICE_PROB_ONE);
	sluice_event_num(&ev, "admit_pct_to", (double)to * 100.0 / SLUICE_PROB_ONE);
	sluice_event_num(&ev, "demand", (double)in->demand[cls]);
	sluice_event_emit(sink, &ev);
}

static int cut(struct sluice_ladder *l, const struct sluice_ladder_params *p,
	       const struct sluice_ladder_input *in, uint64_t now_ns,
	       const struct sluice_event_sink *sink)
{
	uint32_t first = pct_fp(p->n_steps ? p->steps[0] : 10);
	uint32_t floor0 = pct_fp(p->l0_floor_pct), old, nv;
	double s = in->excess < 0 || p->full_excess <= 0 ? 1 : in->excess / p->full_excess;
	int k;

	for (k = SLUICE_NUM_CLASSES - 1; k >= 1; k--)
		if (l->admit[k] > 0 && in->demand[k] > 0)
			break;
	if (k == 0 && (l->admit[0] <= floor0 || in->demand[0] == 0 || in->l0_spared))
		return 0;                       /* nothing left to shed */
	s = s < 0.05 ? 0.05 : s > 1 ? 1 : s;
	old = l->admit[k];
	nv = (uint32_t)((double)old * (1 - p->cut[k] * s));
	if (k == 0) {
		if (nv < floor0)
			nv = floor0;
	} else if (nv < first) {
		nv = 0;                         /* below the first recovery step: off */
	}
	l->admit[k] = nv;
	l->last_cut_ns = now_ns;
	l->cut_once = 1;
	l->last_change_ns = now_ns;
	l->step_good = 0;
	if (!l->episode_ns)
		l->episode_ns = now_ns;
	ladder_report(sink, now_ns, k, old, nv, "overload_shed", in);
	return 1;
}

static int recover(struct sluice_ladder *l, const struct sluice_ladder_params *p,
		   const struct sluice_ladder_input *in, uint64_t now_ns,
		   const struct sluice_event_sink *sink)
{
	uint32_t old, nv = SLUICE_PROB_ONE, i;
	int k, kc;

	for (k = 0; k < SLUICE_NUM_CLASSES; k++)
		if (l->admit[k] < SLUICE_PROB_ONE)
			break;
	if (k == SLUICE_NUM_CLASSES)
		return 0;
	kc = k;
	old = l->admit[k];
	for (i = 0; i < p->n_steps; i++)
		if (pct_fp(p->steps[i]) > old) {
			nv = pct_fp(p->steps[i]);
			break;
		}
	if (nv > SLUICE_PROB_ONE)
		nv = SLUICE_PROB_ONE;
	l->admit[k] = nv;
	l->last_change_ns = now_ns;
	l->step_good = 0;
	for (k = 0; k < SLUICE_NUM_CLASSES && l->admit[k] == SLUICE_PROB_ONE; k++)
		;
	if (k < SLUICE_NUM_CLASSES || !l->episode_ns) {
		ladder_report(sink, now_ns, kc, old, nv, "recovery_step", in);
		return 1;
	}
	/* every class admits everything again: report how long it took */
	l->last_recovery_s = (double)(now_ns - l->last_overload_ns) / 1e9;
	l->last_episode_s = (double)(now_ns - l->episode_ns) / 1e9;
	l->episode_ns = 0;
	if (sink && sink->fn) {
		struct sluice_event ev;

		sluice_event_init(&ev, now_ns, SLUICE_EV_INFO, sink->service, SLUICE_EVM_LADDER,
				  admit_state(old), admit_state(nv), "recovered");
		ev.cls = kc;
		sluice_event_num(&ev, "admit_pct_from", (double)old * 100.0 / SLUICE_PROB_ONE);
		sluice_event_num(&ev, "admit_pct_to", 100);
		sluice_event_num(&ev, "recovery_s", l->last_recovery_s);
		sluice_event_num(&ev, "episode_s", l->last_episode_s);
		sluice_event_emit(sink, &ev);
	}
	return 1;
}

int sluice_ladder_tick(struct sluice_ladder *l, const struct sluice_ladder_params *p,
		       const struct sluice_ladder_input *in, uint64_t now_ns,
		       const struct sluice_event_sink *sink)
{
	uint64_t hold = (uint64_t)((p->step_s > in->feedback_s ? p->step_s : in->feedback_s) * 1e9);
	uint64_t shed_gap = (uint64_t)(p->shed_interval_s * 1e9);

	l->overloaded = in->overloaded;
	if (in->overloaded) {
		l->last_overload_ns = now_ns;
		l->step_good = 0;
		if (l->cut_once && now_ns - l->last_cut_ns < shed_gap)
			return 0;
		return cut(l, p, in, now_ns, sink);
	}
	l->step_good += in->good_samples;
	/* calm: climb one step once the step has been held since the last overload and the last
	 * change, and has seen enough samples within the objective */
	if (now_ns - l->last_change_ns < hold)
		return 0;
	if (l->last_overload_ns && now_ns - l->last_overload_ns < hold)
		return 0;
	if (l->step_good < p->min_samples)
		return 0;
	return recover(l, p, in, now_ns, sink);
}
