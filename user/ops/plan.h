/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: degradation plans: what to give up, in which order, decided and drilled before the
 * incident rather than during it.
 *
 * A plan is a YAML file listing degradation levels in escalation order. Applying a level sets
 * one manual switch per action (see switches.h). File format (keys not listed are refused):
 *
 *   service: order-api            # optional: whose plan this is (free text)
 *   owner: order-team             # optional
 *   last_reviewed: 2026-11-01     # optional, YYYY-MM-DD
 *   max_drill_age_days: 90        # optional (default PLAN_STALE_DAYS): `plan apply` refuses a
 *                                 # level drilled longer ago than this, or never, without --force
 *   levels:                       # required, 1..PLAN_MAX_LEVELS, names unique
 *     - name: L1                  # required ("L1", "level-1", ... any [A-Za-z0-9._-]+)
 *       description: read degradation, hide non-critical modules     # optional
 *       actions:                  # required, 1..PLAN_MAX_ACTIONS
 *         - { service: web, class: L3, shed: 100 }    # shed: percent 0..100
 *         - { service: web, class: L2, shed: 50 }
 *       expected_saving: "12% CPU"   # optional, but plan_check reports it missing
 *       reversible: true             # required boolean (true / false)
 *       approver: [ic, business_owner]  # string or list of strings; required in practice
 *                                       # when reversible is false (plan_check reports it)
 *       verified_at: 2026-10-18      # required key: drill date YYYY-MM-DD, or null = never
 *
 * Levels are CUMULATIVE: applying level k applies the actions of every level listed before it
 * and of k itself; when two of them name the same service/class, the later level wins.
 *
 * Time: uint64_t seconds since the epoch (UTC), passed in as `now` (see duration.h).
 * No global state. */
#ifndef SLUICE_PLAN_H
#define SLUICE_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "sluice.h"
#include "common/yamldoc.h"
#include "ops/switches.h"

/* ---- plans ---- */

#define PLAN_MAX_LEVELS   16
#define PLAN_MAX_ACTIONS  64
#define PLAN_NAME_LEN     32
#define PLAN_TEXT_LEN     256
#define PLAN_STALE_DAYS   90            /* a drill older than this no longer counts */

struct plan_action {
	char service[SLUICE_NAME_LEN];
	int class;                       /* 0..3 */
	int shed_pct;                    /* 0..100 */
	int line;
};

struct plan_level {
	char name[PLAN_NAME_LEN];
	char description[PLAN_TEXT_LEN];
	char expected_saving[PLAN_TEXT_LEN];  /* "" = not given */
	char approver[PLAN_TEXT_LEN];         /* list joined with ", "; "" = none */
	int reversible;                       /* 0 / 1 */
	int verified;                         /* 0: verified_at is null (never drilled) */
	uint64_t verified_at;                 /* midnight UTC of the drill date */
	int line;
	int n_actions;
	struct plan_action actions[PLAN_MAX_ACTIONS];
};

struct sluice_plan {
	char file[256];
	char service[PLAN_TEXT_LEN];
	char owner[PLAN_TEXT_LEN];
	int has_last_reviewed;
	uint64_t last_reviewed;
	int max_drill_age_days;          /* PLAN_STALE_DAYS unless the plan says otherwise */
	int n_levels;
	struct plan_level levels[PLAN_MAX_LEVELS];
};

/* Load and validate a plan. 0 when valid; otherwise -1 and every error found
 * (file:line:column) in errs. Unknown keys, missing required keys, bad classes / percentages / dates, duplicate level
 * names and duplicate service/class actions within a level are errors. */
int plan_load(const char *path, struct sluice_plan *out, struct doc_errors *errs);
int plan_parse(const char *text, size_t len, const char *name, struct sluice_plan *out,
	       struct doc_errors *errs);

enum plan_finding_kind {
	PLAN_NEVER_VERIFIED = 0,         /* verified_at: null */
	PLAN_VERIFY_STALE,               /* verified more than PLAN_STALE_DAYS days before now */
	PLAN_VERIFY_FUTURE,              /* verified_at after now */
	PLAN_IRREVERSIBLE_NO_APPROVER,   /* reversible: false without an approver */
	PLAN_NO_SAVING,                  /* no expected_saving */
	PLAN_UNKNOWN_SERVICE,            /* action names a service not in `known` */
	PLAN_SHEDS_ALL_L0,               /* a level sheds 100% of L0: the core action is gone */
};

struct plan_finding {
	enum plan_finding_kind kind;
	int level;                       /* index into plan->levels */
	int line;
	char msg[384];                   /* "file:line: level L3: ... [kind]" ready to print */
};

/* Review the plan against `now`. known/n_known: configured services (NULL = skip that check).
 * Stores up to max findings; returns how many there are in total (0 = plan is clean). */
int plan_check(const struct sluice_plan *p, uint64_t now, const char *const *known, int n_known,
	       struct plan_finding *out, int max);
const char *plan_finding_name(enum plan_finding_kind k);

/* Index of level `name`, or -1. */
int plan_find_level(const struct sluice_plan *p, const char *name);

/* The switches that applying `level` means (cumulative, see above), one per service/class,
 * each with set_at = now, expires_at = now + ttl, owner, and reason "plan LEVEL: REASON".
 * Everything is validated first (ttl and reason as in sw_make, services against known);
 * an unknown level is an error naming it and listing the plan's levels; a level (or an earlier
 * one it includes) that is irreversible without an approver is refused.
 * Returns the number of switches written to out (<= max), or -1 with err. */
int plan_level_switches(const struct sluice_plan *p, const char *level, const char *reason,
			const char *ttl, const char *owner, uint64_t now,
			const char *const *known, int n_known,
			struct sw_switch *out, int max, char *err, size_t errlen);

/* Whether applying level index `level` rests on a drill that does not count: that level or an
 * earlier one it includes was never drilled, or longer ago than the plan's
 * max_drill_age_days. 1 with the levels named in why; 0 when every drill is recent enough. */
int plan_drill_too_old(const struct sluice_plan *p, int level, uint64_t now, char *why,
		       size_t len);

/* Put all n switches into set, all or nothing (set unchanged on failure: invalid switch or
 * not enough room). old[i]/had_old[i] (either may be NULL) receive what each one replaced,
 * for the audit log. The caller then saves the set ONCE with sw_save(). 0 / -1 with err. */
int plan_apply_to_set(struct sw_set *set, const struct sw_switch *sw, int n,
		      struct sw_switch *old, int *had_old, char *err, size_t errlen);

#endif
