// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "daemon/ctlpersist.h"

#include "control/ctlslot.h"
#include "common/log.h"

/* One entry is 3.7 KB: kept off the stack, the daemon is single-threaded on this path. */
static struct sluice_ctl_slot slot_buf;

void daemon_ctl_import(struct daemon *d, unsigned long long now_ns)
{
	for (int i = 0; i < d->cfg.n_services; i++) {
		const struct service_conf *sc = &d->cfg.services[i];
		const char *why = "";
		int rc;

		if (maps_read_ctl_slot(&d->m, d->idx[i], &slot_buf)) {
			log_warn("%s: the pinned controller state cannot be read; starting afresh",
				 sc->name);
			continue;
		}
		rc = ctl_slot_adopt(&d->ctl[i], sc, &slot_buf, now_ns, &why);
		if (ctl_slot_belongs(&slot_buf, sc))
			d->books[i].ctl_reset_ack = slot_buf.reset_ack;  /* done requests stay done */
		if (rc == 1) {
			struct sluice_event ev;

			sluice_event_init(&ev, now_ns, SLUICE_EV_INFO, sc->name, SLUICE_EVM_DAEMON,
					  "pinned", "adopted", "controller state carried over");
			sluice_event_num(&ev, "limit", d->ctl[i].lim.limit);
			sluice_event_num(&ev, "baseline_us", d->ctl[i].base.value_us);
			sluice_event_num(&ev, "breaker", d->ctl[i].brk.state);
			for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
				static const char *const key[SLUICE_NUM_CLASSES] = {
					"admit_L0", "admit_L1", "admit_L2", "admit_L3" };
				sluice_event_num(&ev, key[c], (double)d->ctl[i].lad.admit[c] /
						 SLUICE_PROB_ONE);
			}
			sluice_event_num(&ev, "age_s", slot_buf.written_ns < now_ns ?
					 (double)(now_ns - slot_buf.written_ns) / 1e9 : 0);
			daemon_print_event(d, &ev);
		} else {
			daemon_event(d, SLUICE_EVM_DAEMON, "pinned", "fresh", why, sc->name,
				     rc < 0 ? SLUICE_EV_ALERT : SLUICE_EV_INFO);
		}
	}
}

void daemon_ctl_requests(struct daemon *d, int i, unsigned long long now_ns)
{
	const struct service_conf *sc = &d->cfg.services[i];
	struct sluice_ctl_request rq;
	uint32_t gen;

	if (maps_read_ctl_request(&d->m, d->idx[i], &rq))
		return;
	gen = ctl_request_reset_gen(&rq, sc, d->books[i].ctl_reset_ack);
	if (!gen)
		return;
	{
		struct sluice_event ev;

		sluice_event_init(&ev, now_ns, SLUICE_EV_INFO, sc->name, SLUICE_EVM_AIMD,
				  "learned", "reset", "operator baseline reset");
		sluice_event_num(&ev, "baseline_us", d->ctl[i].base.value_us);
		sluice_event_num(&ev, "generation", gen);
		sluice_event_num(&ev, "uid", rq.uid);
		daemon_print_event(d, &ev);
	}
	service_ctl_reset_baseline(&d->ctl[i]);
	d->books[i].ctl_reset_ack = gen;
}

void daemon_ctl_export(struct daemon *d, int i, unsigned long long now_ns)
{
	struct service_books *b = &d->books[i];

	b->ctl_ticks++;
	ctl_slot_fill(&slot_buf, &d->ctl[i], &d->cfg.services[i], b->ctl_reset_ack, b->ctl_ticks,
		      now_ns);
	maps_write_ctl_slot(&d->m, d->idx[i], &slot_buf);
}

void daemon_ctl_export_all(struct daemon *d, unsigned long long now_ns)
{
	for (int i = 0; i < d->cfg.n_services; i++) {
		d->books[i].ctl_ticks--;     /* not a tick: keep the count honest */
		daemon_ctl_export(d, i, now_ns);
	}
}
