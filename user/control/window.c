// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Evidence window; see window.h. */
#include <stddef.h>
#include <string.h>
#include "control/window.h"

void sluice_evwin_reset(struct sluice_evwin *w, uint64_t now_ns, const struct sluice_hist *cur)
{
	uint64_t last = w->last_sample_ns;

	memset(w, 0, offsetof(struct sluice_evwin, base));
	if (cur)
		memcpy(w->base, cur, sizeof(w->base));
	else
		memset(w->base, 0, sizeof(w->base));
	memset((char *)w + offsetof(struct sluice_evwin, base) + sizeof(w->base), 0,
	       sizeof(*w) - offsetof(struct sluice_evwin, base) - sizeof(w->base));
	w->start_ns = now_ns;
	w->prev_ns = now_ns;
	w->last_sample_ns = last;
}

void sluice_evwin_add(struct sluice_evwin *w, const struct sluice_service_signals *sig,
		      int64_t inflight, uint64_t now_ns)
{
	int c;

	for (c = 0; c < SLUICE_NUM_CLASSES; c++) {
		const struct sluice_class_signals *s = &sig->cls[c];
		w->cls_arrivals[c] += s->arrivals;
		w->cls_headroom_rej[c] += s->rejected[SLUICE_REJ_HEADROOM];
		if (!s->samples)
			continue;
		w->cls_samples[c] += s->samples;
		w->samples += s->samples;
	}
	/* samples whose histogram waits for a later tick are samples of this one all the same */
	if (sig->total.samples || sig->deferred)
		w->last_sample_ns = now_ns;
	if (sig->total.samples || sig->total.calls || sig->deferred)
		w->active_ns += now_ns - w->prev_ns;
	w->prev_ns = now_ns;
	w->calls += sig->total.calls;
	w->errors += sig->total.errors;
	w->resp_429 += sig->total.resp_429;
	w->arrivals += sig->total.arrivals;
	w->headroom_rej += sig->total.rejected[SLUICE_REJ_HEADROOM];
	if (inflight > 0)
		w->inflight_sum += (uint64_t)inflight;
	if (inflight > (int64_t)w->peak_inflight)
		w->peak_inflight = inflight > UINT32_MAX ? UINT32_MAX : (uint32_t)inflight;
	w->ticks++;
}

void sluice_evwin_idle_until(struct sluice_evwin *w, uint64_t since_ns)
{
	if (!w->samples && !w->calls && !w->arrivals && !w->active_ns && since_ns > w->prev_ns)
		w->prev_ns = since_ns;
}

void sluice_evwin_add_wait(struct sluice_evwin *w, int have, uint64_t waits, uint64_t wait_ns)
{
	if (!have) {
		w->wait_gap = 1;
		return;
	}
	w->waits += waits;
	w->wait_ns += wait_ns;
}

void sluice_evwin_add_gate(struct sluice_evwin *w, uint64_t refused)
{
	w->gate_rej += refused;
}

int sluice_evwin_full(const struct sluice_evwin *w, uint64_t now_ns, uint64_t window_ns,
		      uint64_t min_samples)
{
	return now_ns - w->start_ns >= window_ns && w->samples >= min_samples &&
	       w->samples > 0;
}

void sluice_evwin_result(const struct sluice_evwin *w, const struct sluice_hist *cur, double q,
			 uint64_t min_samples, uint64_t now_ns, struct sluice_evwin_result *out)
{
	struct sluice_hist all, top;
	uint64_t n = 0, sum_us = 0, cnt = 0;
	uint32_t i;
	int c, topped = 0;

	memset(out, 0, sizeof(*out));
	memset(&all, 0, sizeof(all));
	memset(&top, 0, sizeof(top));
	out->top_cls = -1;
	for (c = 0; c < SLUICE_NUM_CLASSES; c++) {
		struct sluice_hist d;

		if (!w->cls_samples[c])
			continue;
		if (out->top_cls < 0)
			out->top_cls = c;
		sluice_hist_delta(&w->base[c], &cur[c], &d);
		for (i = 0; i < SLUICE_HIST_BUCKETS; i++) {
			all.bucket[i] += d.bucket[i];
			cnt += d.bucket[i];
		}
		sum_us += d.sum_us;
		if (!topped) {
			for (i = 0; i < SLUICE_HIST_BUCKETS; i++)
				top.bucket[i] += d.bucket[i];
			n += w->cls_samples[c];
			topped = n >= min_samples;
		}
	}
	out->samples = w->samples;
	out->calls = w->calls;
	out->errors = w->errors;
	out->resp_429 = w->resp_429;
	out->arrivals = w->arrivals;
	out->headroom_rej = w->headroom_rej;
	out->limit_rej = w->headroom_rej > w->gate_rej ? w->headroom_rej - w->gate_rej : 0;
	out->peak_inflight = w->peak_inflight;
	out->mean_inflight = w->ticks ? (double)w->inflight_sum / (double)w->ticks : 0;
	out->dur_ns = now_ns - w->start_ns;
	out->active_ns = w->active_ns;
	out->latency_us = sluice_hist_quantile_us(&all, q);
	out->top_us = sluice_hist_quantile_us(&top, q);
	out->mean_us = cnt ? (double)sum_us / (double)cnt : 0;
	if (!w->wait_gap && w->waits) {
		out->waits = w->waits;
		out->wait_us = (double)w->wait_ns / (double)w->waits / 1e3;
	}
}

int sluice_evwin_signal(const struct sluice_evwin *w, uint64_t now_ns, uint64_t window_ns,
			uint64_t min_samples, uint64_t none_ns)
{
	if (now_ns - w->start_ns >= none_ns &&
	    (!w->last_sample_ns || now_ns - w->last_sample_ns >= none_ns))
		return SLUICE_SIGNAL_NONE;
	if (now_ns - w->start_ns >= window_ns && w->samples < min_samples)
		return SLUICE_SIGNAL_THIN;
	return SLUICE_SIGNAL_OK;
}
