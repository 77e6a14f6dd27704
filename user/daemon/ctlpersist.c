// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "daemon/ctlpersist.h"

#include "control/ctlslot.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The cascade suppression in force as the entries carry it: since when, 0 = none. */
static uint64_t cascade_since(const struct daemon *d)
{
	if (!d->cascade.suspended)
		return 0;
	return d->cascade.suspended_since_ns ? d->cascade.suspended_since_ns : 1;
}

/* The suppression the newest of the adopted entries carried (since: when it began, 0 none),
 * in force again: a restart is not the operator's decision to lift it. */
static void adopt_cascade(struct daemon *d, uint64_t since, unsigned long long now_ns)
{
	if (since) {
		d->cascade.suspended = 1;
		d->cascade.suspended_since_ns = since < now_ns ? since : now_ns;
		daemon_event(d, SLUICE_EVM_CASCADE, "armed", "suspended",
			     "cascade suppression carried over from the pinned state: breakers open "
			     "by themselves again after `sluicectl cascade clear`", "", SLUICE_EV_ALERT);
	}
	d->cascade_written = cascade_since(d);
}

/* The adoption writes the heartbeat after every this many services (daemon_beat_if_due). */
#define IMPORT_BEAT_EVERY 1024

void daemon_ctl_import(struct daemon *d, unsigned long long now_ns)
{
	uint64_t newest = 0, cascade = 0, since;
	struct sluice_ctl_slot slot_buf; /* 3.7 KB: a thread's stack holds it easily */

	for (int i = 0; i < d->cfg.n_services; i++) {
		const struct service_conf *sc = &d->cfg.services[i];
		const char *why = "";
		int rc;

		/* tens of thousands of entries take a quarter of a second and more */
		if (i % IMPORT_BEAT_EVERY == IMPORT_BEAT_EVERY - 1)
			daemon_beat_if_due(d);
		if (maps_read_ctl_slot(&d->m, d->idx[i], &slot_buf)) {
			log_warn("%s: the pinned controller state cannot be read; starting afresh",
				 sc->name);
			continue;
		}
		rc = ctl_slot_adopt(&d->ctl[i], sc, &slot_buf, now_ns, &why);
		if (ctl_slot_belongs(&slot_buf, sc)) {
			d->books[i].ctl_reset_ack = slot_buf.reset_ack;  /* done requests stay done */
			d->books[i].conncap.keep = 1;   /* and its connection caps stand */
		}
		/* the suppression is the operator's to lift, however old the entry */
		if (rc >= 1 && ctl_slot_cascade(&slot_buf, &since) && slot_buf.written_ns >= newest) {
			newest = slot_buf.written_ns;
			cascade = since;
		}
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
		} else if (rc == 2) {
			struct sluice_event ev;

			sluice_event_init(&ev, now_ns, SLUICE_EV_INFO, sc->name, SLUICE_EVM_DAEMON,
					  "pinned", "baseline", why);
			sluice_event_num(&ev, "baseline_us", d->ctl[i].base.value_us);
			sluice_event_num(&ev, "age_s", slot_buf.written_ns < now_ns ?
					 (double)(now_ns - slot_buf.written_ns) / 1e9 : 0);
			daemon_print_event(d, &ev);
		} else {
			daemon_event(d, SLUICE_EVM_DAEMON, "pinned", "fresh", why, sc->name,
				     rc < 0 ? SLUICE_EV_ALERT : SLUICE_EV_INFO);
		}
	}
	adopt_cascade(d, cascade, now_ns);
}

/* Slots read per tick: 65536 services are all read within 8 ticks, under a second, which
 * is as long as `sluicectl baseline reset` waits for a settled service. */
#define CTL_RQ_SLICE 8192

/* The slice's pending requests, found by the kernel and read one by one (requests are rare:
 * most ticks read none). Non-zero when the slice must be read whole instead: the program is
 * not there, or more are pending than it lists. */
static int find_pending(struct daemon *d, int first, int n)
{
	struct sluice_pending_requests a;

	d->ctl_rq_listed = 0;
	if (maps_pending_requests(&d->m, (__u32)first, (__u32)n, &a) || a.found > SLUICE_PENDING_MAX ||
	    a.found > (__u32)d->ctl_rq_cap)
		return -1;
	for (__u32 j = 0; j < a.found; j++) {
		if (maps_read_ctl_request(&d->m, (int)a.slot[j], &d->ctl_rq[j]))
			return -1;
		d->ctl_rq_keys[j] = a.slot[j];
	}
	d->ctl_rq_listed = (int)a.found;
	return 0;
}

void daemon_ctl_poll(struct daemon *d, int n_used)
{
	int first = d->ctl_rq_next, n, want = n_used < CTL_RQ_SLICE ? n_used : CTL_RQ_SLICE;

	d->ctl_rq_n = 0;
	if (d->m.ctl_requests < 0 || n_used <= 0)
		return;
	if (want > d->ctl_rq_cap) {
		struct sluice_ctl_request *rq = realloc(d->ctl_rq, sizeof(*rq) * (size_t)want);
		__u32 *keys = rq ? realloc(d->ctl_rq_keys, sizeof(*keys) * (size_t)want) : NULL;

		if (rq)
			d->ctl_rq = rq;
		if (!keys)
			return;   /* the running services still look theirs up */
		d->ctl_rq_keys = keys;
		d->ctl_rq_cap = want;
	}
	if (first >= n_used)
		first = 0;
	n = n_used - first < want ? n_used - first : want;
	d->ctl_rq_next = first + n;
	if (find_pending(d, first, n) == 0) {
		d->ctl_rq_first = first;
		d->ctl_rq_n = n;
		return;
	}
	d->ctl_rq_listed = -1;
	if (maps_read_array(d->m.ctl_requests, (__u32)first, (__u32)n, sizeof(*d->ctl_rq),
			    d->ctl_rq, d->ctl_rq_keys))
		return;
	d->ctl_rq_first = first;
	d->ctl_rq_n = n;
}

/* Service i's request as read this tick (an empty one when its slot holds none pending), or
 * NULL when its slot is not in the slice. */
static const struct sluice_ctl_request *polled(const struct daemon *d, int i)
{
	static const struct sluice_ctl_request none;
	int k = d->idx[i] - d->ctl_rq_first;

	if (k < 0 || k >= d->ctl_rq_n)
		return NULL;
	if (d->ctl_rq_listed < 0)
		return &d->ctl_rq[k];
	for (int j = 0; j < d->ctl_rq_listed; j++)
		if (d->ctl_rq_keys[j] == (__u32)d->idx[i])
			return &d->ctl_rq[j];
	return &none;
}

int daemon_ctl_pending(const struct daemon *d, int i)
{
	const struct sluice_ctl_request *rq = polled(d, i);

	return rq && ctl_request_reset_gen(rq, &d->cfg.services[i], d->books[i].ctl_reset_ack);
}

/* The audit record of an operator's baseline reset, in the state directory's audit log next
 * to switch changes and breaker resets (the incident review asks who reset what, and what
 * the baseline was before): user from the uid sluicectl wrote into the request (named as
 * daemon/uidnames.h has it, never looked up here: this is the tick), written by
 * the file writer thread like every other record. A full queue is said on stderr and in the
 * event log, never silently dropped. */
static void audit_reset(struct daemon *d, const struct service_conf *sc,
			const struct sluice_ctl_request *rq, uint32_t gen, unsigned was_us)
{
	struct audit_entry *a = calloc(1, sizeof(*a));
	char user[AUDIT_USER_LEN], why[SW_REASON_LEN];

	uidn_name(&d->names, rq->uid, user, sizeof(user));
	if (was_us)
		snprintf(why, sizeof(why), "baseline %.1f ms forgotten (request %u)", was_us / 1000.0,
			 (unsigned)gen);
	else
		snprintf(why, sizeof(why), "no baseline learned yet (request %u)", (unsigned)gen);
	if (a)
		audit_entry_make(a, (uint64_t)time(NULL), rq->uid, user, "baseline reset", sc->name,
				 -1, NULL, NULL, why);
	if (!a || !iow_enqueue(&d->iow, NULL, 0, a, 1)) {
		free(a);
		log_error("%s: baseline reset done but not audited (the file writer's queue is full)",
			  sc->name);
		daemon_event(d, SLUICE_EVM_DAEMON, "audit", "dropped", "baseline reset not audited",
			     sc->name, SLUICE_EV_ALERT);
	}
}

void daemon_ctl_requests(struct daemon *d, int i, unsigned long long now_ns)
{
	const struct service_conf *sc = &d->cfg.services[i];
	const struct sluice_ctl_request *polled_rq = polled(d, i);
	struct sluice_ctl_request rq;
	uint32_t gen;

	/* A running service outside this tick's slice looks its slot up: the command waits
	 * for two of its ticks. */
	if (polled_rq)
		rq = *polled_rq;
	else if (maps_read_ctl_request(&d->m, d->idx[i], &rq))
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
	audit_reset(d, sc, &rq, gen, d->ctl[i].base.value_us);
	service_ctl_reset_baseline(&d->ctl[i]);
	d->books[i].ctl_reset_ack = gen;
}

void daemon_ctl_export(struct daemon *d, int i, unsigned long long now_ns)
{
	struct service_books *b = &d->books[i];
	struct sluice_ctl_slot slot_buf;

	b->ctl_ticks++;
	ctl_slot_fill(&slot_buf, &d->ctl[i], &d->cfg.services[i], b->ctl_reset_ack, b->ctl_ticks,
		      now_ns);
	ctl_slot_set_cascade(&slot_buf, cascade_since(d));
	maps_write_ctl_slot(&d->m, d->idx[i], &slot_buf);
}

static void export_key(const struct daemon *d, int i, struct ctl_export_key *k)
{
	const struct service_ctl *s = &d->ctl[i];

	memset(k, 0, sizeof(*k));
	k->lad_change_ns = s->lad.last_change_ns;
	k->brk_since_ns = s->brk.since_ns;
	k->brk_step_start_ns = s->brk.step_start_ns;
	k->above_since_ns = s->above_since_ns;
	k->limit = s->lim.limit;
	k->brk_state = (uint32_t)s->brk.state;
	k->brk_step = s->brk.step;
	k->reset_ack = d->books[i].ctl_reset_ack;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		k->admit[c] = s->lad.admit[c];
}

/* The entry of service i into the tick's write batch (written by daemon_ctl_flush); when
 * the batch cannot take it, written now. */
static void export_batched(struct daemon *d, int i, unsigned long long now_ns)
{
	struct service_books *b = &d->books[i];
	struct sluice_ctl_slot *slot = maps_batch_put(&d->cwb, (__u32)d->idx[i], i);

	if (!slot && d->cwb.vals) {
		daemon_ctl_flush(d);
		slot = maps_batch_put(&d->cwb, (__u32)d->idx[i], i);
	}
	if (!slot) {
		daemon_ctl_export(d, i, now_ns);
		return;
	}
	b->ctl_ticks++;
	ctl_slot_fill(slot, &d->ctl[i], &d->cfg.services[i], b->ctl_reset_ack, b->ctl_ticks,
		      now_ns);
	ctl_slot_set_cascade(slot, cascade_since(d));
}

void daemon_ctl_flush(struct daemon *d)
{
	int done = maps_batch_flush(&d->cwb);

	/* not written: due again at the next tick */
	for (int k = done; k < d->cwb.last_n; k++)
		if (d->cwb.who[k] >= 0 && d->cwb.who[k] < d->cfg.n_services)
			d->books[d->cwb.who[k]].exported_ns = 0;
}

/* A refresh whose only news is the breaker's count of calls that did not fail (and the
 * clocks) waits up to this many seconds: with no failure or slow call in the breaker's
 * window the count cannot open it, so an entry that lacks the last seconds of it adopts the
 * same decisions. */
#define CTL_REFRESH_IDLE_S 10

/* What the refresh carries that an adopting sluiced would decide differently without: a
 * decided window (the baseline's ring, the limit's estimate and reference), the latency
 * signal's state (status shows it), the breaker's window while it holds failures or slow
 * calls (their rate is over the calls counted with them), and whatever the ladder, the
 * breaker and the objective do while they are under way. */
static int refresh_material(const struct daemon *d, int i)
{
	const struct service_books *b = &d->books[i];
	const struct service_ctl *s = &d->ctl[i];

	if (s->windows != b->exported_windows || s->signal != b->exported_signal ||
	    s->brk.state != SLUICE_BREAKER_CLOSED || s->brk.win_error_rate > 0 ||
	    s->brk.win_slow_rate > 0 || s->lad.overloaded || s->above_since_ns)
		return 1;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (s->lad.admit[c] != SLUICE_PROB_ONE)
			return 1;
	return 0;
}

void daemon_ctl_export_tick(struct daemon *d, int i, unsigned long long now_ns)
{
	struct service_books *b = &d->books[i];
	struct ctl_export_key k;
	unsigned long long tick = (unsigned long long)(d->cfg.control_interval_ms > 0 ?
						       d->cfg.control_interval_ms : 100) * 1000000ull;
	unsigned long long per_s = d->ticks_per_s ? d->ticks_per_s : 1;
	/* The refresh, once a second: at the service's own one of the second's ticks (by its
	 * slot), so that the services' refreshes are spread evenly over the ticks and stay so.
	 * Dated by the time of the last write, services started together refreshed in the same
	 * tick, and a move they all made at once (the first windows of services started
	 * together decide at the same tick) brought them back into step: 1000 entries in one
	 * tick of ten. */
	int turn = daemon_service_turns(d, i)->ctl_turn == d->ctl_turn_now;

	/* a service that ran at none of its turns (it runs every other tick, say) is written
	 * at its first tick past the second */
	turn |= now_ns - b->exported_ns > per_s * tick;
	export_key(d, i, &k);
	if (b->exported_ns && !memcmp(&k, &b->exported, sizeof(k)) &&
	    (!turn || (!refresh_material(d, i) &&
		       now_ns - b->exported_ns + tick / 2 < CTL_REFRESH_IDLE_S * 1000000000ull))) {
		b->ctl_ticks++;          /* counted; written with the next entry */
		return;
	}
	export_batched(d, i, now_ns);
	b->exported = k;
	b->exported_ns = now_ns;
	b->exported_windows = d->ctl[i].windows;
	b->exported_signal = d->ctl[i].signal;
}

void daemon_ctl_export_all(struct daemon *d, unsigned long long now_ns)
{
	for (int i = 0; i < d->cfg.n_services; i++) {
		d->books[i].ctl_ticks--;     /* not a tick: keep the count honest */
		daemon_ctl_export(d, i, now_ns);
	}
}

void daemon_ctl_cascade(struct daemon *d, unsigned long long now_ns)
{
	uint64_t since = cascade_since(d);

	if (since == d->cascade_written)
		return;
	daemon_ctl_export_all(d, now_ns);
	d->cascade_written = since;
}
