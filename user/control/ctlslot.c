// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "control/ctlslot.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static uint32_t us32(double us)
{
	if (!(us > 0))
		return 0;
	return us >= 4294967295.0 ? 4294967295u : (uint32_t)llround(us);
}

/* The state is exported straight into the record (a tenth of the running services refresh
 * theirs every tick): no copy on the stack first. */
_Static_assert(offsetof(struct sluice_ctl_slot, state) % _Alignof(struct sluice_ctl_state) == 0,
	       "the record's state is not aligned for struct sluice_ctl_state");

void ctl_slot_fill(struct sluice_ctl_slot *out, const struct service_ctl *s,
		   const struct service_conf *sc, uint32_t reset_ack, uint64_t ticks,
		   uint64_t now_ns)
{
	memset(out, 0, offsetof(struct sluice_ctl_slot, state));
	/* the name as snprintf would put it (at most SLUICE_NAME_LEN - 1 bytes, the rest zero),
	 * without its formatting: a tenth of a refresh's own work */
	memcpy(out->name, sc->name, strnlen(sc->name, sizeof(out->name) - 1));
	out->port = (uint16_t)sc->port;
	out->signal = (uint8_t)s->signal;
	out->algorithm = s->mp.fixed ? SLUICE_CTL_ALG_FIXED :
			 s->mp.algorithm == SLUICE_LIMIT_AIMD ? SLUICE_CTL_ALG_AIMD :
			 SLUICE_CTL_ALG_GRADIENT;
	out->reset_ack = reset_ack;
	out->written_ns = now_ns;
	out->ticks = ticks;
	out->limit = s->lim.limit;
	out->baseline_us = us32(s->base.value_us);
	out->objective_us = us32(s->objective_us);
	out->latency_us = us32(s->last_latency_us);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		out->ladder_admit[c] = s->lad.admit[c];
	out->breaker_state = (uint32_t)s->brk.state;
	ctl_state_export(s, now_ns, (struct sluice_ctl_state *)(void *)out->state);
	memset(out->state + sizeof(struct sluice_ctl_state), 0,
	       sizeof(out->state) - sizeof(struct sluice_ctl_state));
	out->state_len = sizeof(struct sluice_ctl_state);
}

/* The slot's state into *st when it is a record this sluiced adopts, this version's or an
 * older one's (its prefix: the rest zero, unlearned), of the length the record says; its
 * version, or 0 for any other. */
static int ctl_state_copy(const struct sluice_ctl_slot *slot, struct sluice_ctl_state *st)
{
	if (slot->state_len != sizeof(*st) && slot->state_len != SLUICE_CTL_STATE_V3_SIZE &&
	    slot->state_len != SLUICE_CTL_STATE_V2_SIZE)
		return 0;
	memset(st, 0, sizeof(*st));
	memcpy(st, slot->state, slot->state_len);
	return st->size == slot->state_len ? ctl_state_adoptable(st) : 0;
}

void ctl_slot_set_cascade(struct sluice_ctl_slot *slot, uint64_t since_ns)
{
	((struct sluice_ctl_state *)(void *)slot->state)->cascade_since_ns = since_ns;
}

int ctl_slot_cascade(const struct sluice_ctl_slot *slot, uint64_t *since_ns)
{
	static __thread struct sluice_ctl_state st;   /* 2.9 KB: not on the stack */

	if (ctl_state_copy(slot, &st) != SLUICE_CTL_STATE_VERSION)
		return 0;
	*since_ns = st.cascade_since_ns;
	return 1;
}

int ctl_slot_belongs(const struct sluice_ctl_slot *slot, const struct service_conf *sc)
{
	return slot->name[0] && strncmp(slot->name, sc->name, SLUICE_NAME_LEN) == 0 &&
	       slot->port == (uint16_t)sc->port;
}

#define AGE_TEXT_(n) #n
#define AGE_TEXT(n) AGE_TEXT_(n)

int ctl_slot_adopt(struct service_ctl *s, const struct service_conf *sc,
		   const struct sluice_ctl_slot *slot, uint64_t now_ns, const char **why)
{
	static struct sluice_ctl_state st;   /* 2.9 KB: not on the stack */

	*why = "";
	if (!slot->name[0]) {
		*why = "no pinned state for this slot";
		return 0;
	}
	if (!ctl_slot_belongs(slot, sc)) {
		*why = "the slot's pinned state belongs to another service or port";
		return 0;
	}
	if (!ctl_state_copy(slot, &st)) {
		*why = "the pinned state was written by another sluiced version";
		return -1;
	}
	/* (a time ahead of now is no write of this boot's clock: not trusted either) */
	if (slot->written_ns > now_ns ||
	    now_ns - slot->written_ns > SLUICE_CTL_STATE_MAX_AGE_S * 1000000000ull) {
		if (ctl_state_import_learned(s, &st, now_ns)) {
			*why = "the pinned state was written by another sluiced version";
			return -1;
		}
		*why = "the pinned state is older than " AGE_TEXT(SLUICE_CTL_STATE_MAX_AGE_S)
		       " s (or dated ahead of now): its baselines adopted, not its limit, "
		       "ladder or breaker";
		return 2;
	}
	if (ctl_state_import(s, &st, now_ns)) {
		*why = "the pinned state was written by another sluiced version";
		return -1;
	}
	return 1;
}

static double age_s(uint64_t then_ns, uint64_t now_ns)
{
	return then_ns < now_ns ? (double)(now_ns - then_ns) / 1e9 : 0;
}

unsigned ctl_slot_top_class_us(const struct sluice_ctl_slot *slot)
{
	static __thread struct sluice_ctl_state st;   /* 2.9 KB: not on the stack */

	return ctl_state_copy(slot, &st) ? us32(st.top_class_us) : 0;
}

int ctl_slot_recovery(const struct sluice_ctl_slot *slot, uint64_t now_ns,
		      struct ctl_recovery *out)
{
	/* 2.9 KB: not on the stack; per thread, as status is read from /metrics' thread too */
	static __thread struct sluice_ctl_state st;
	const struct sluice_ladder *l = &st.lad;

	*out = CTL_RECOVERY_NONE;
	if (!ctl_state_copy(slot, &st))
		return -1;
	out->known = 1;
	if (l->episode_ns)
		out->shedding_s = age_s(l->episode_ns, now_ns);
	if (l->last_overload_ns)
		out->since_overload_s = age_s(l->last_overload_ns, now_ns);
	/* A recovery takes at least one hold (seconds), so 0 is "none yet". The ladder's last
	 * change is the recovery itself until the next cut opens an episode. */
	if (l->last_recovery_s > 0) {
		out->last_recovery_s = l->last_recovery_s;
		out->last_episode_s = l->last_episode_s;
		if (!l->episode_ns)
			out->recovered_ago_s = age_s(l->last_change_ns, now_ns);
	}
	return 0;
}

uint32_t ctl_request_reset_gen(const struct sluice_ctl_request *rq,
			       const struct service_conf *sc, uint32_t ack)
{
	if (!rq->name[0] || strncmp(rq->name, sc->name, SLUICE_NAME_LEN) ||
	    rq->port != (uint16_t)sc->port || rq->reset_gen <= ack)
		return 0;
	return rq->reset_gen;
}
