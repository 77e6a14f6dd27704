// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl plan ... and sluicectl budget check (see docs/OPERATIONS.md).
 *
 *   plan check FILE     findings one per line ("file:line: level NAME: what [kind]").
 *                       exit 0 clean, 1 when there is any finding, 2 when the file is invalid.
 *   plan show FILE      the levels and what applying each one sets (cumulative). 0 / 2.
 *   plan apply FILE LEVEL --reason TEXT --ttl DUR [--owner NAME]
 *                       all switches of the level in ONE save of the switch file, one audit
 *                       record per switch (command "plan apply LEVEL").
 *                       exit 0 ok, 1 permission denied / I/O / not audited, 2 bad plan, level or
 *                       argument (nothing changed).
 *   budget check FILE   budget_report(); exit 0 within budget, 1 when any chain is over budget,
 *                       2 when the file is invalid.
 * Each command's arguments, help and example are its table at the end of the file. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "ops/audit.h"
#include "ops/budget.h"
#include "common/duration.h"
#include "ops/plan.h"
#include "ops/switches.h"
#include "ops/switchstate.h"

#define MAX_FINDINGS 256

static const char *const *known_ptrs(const struct cli_opts *o)
{
	return o->n_known >= 0 ? o->known_ptr : NULL;
}

static int load_plan(const char *file, struct sluice_plan *p)
{
	static struct doc_errors errs;

	if (plan_load(file, p, &errs)) {
		doc_errors_print(stderr, &errs);
		log_error("%s: invalid plan", file);
		return -1;
	}
	return 0;
}

struct file_args {
	const char *file;
};

static const struct cliopt plan_file_opts[] = {
	CLIOPT_POS(struct file_args, file, "FILE", 1, "the plan (YAML)"),
	CLIOPT_TABLE_END,
};

static int plan_do_check(const void *args, void *ctx)
{
	const char *file = ((const struct file_args *)args)->file;
	struct cli_opts *o = ctx;
	static struct sluice_plan p;
	static struct plan_finding f[MAX_FINDINGS];
	const char *const *known = known_ptrs(o);
	int n;

	if (load_plan(file, &p))
		return EXIT_USAGE;
	if (!known)
		log_warn("no service list (neither pinned maps nor config): "
			"services named in the plan are NOT checked");
	n = plan_check(&p, (uint64_t)time(NULL), known, known ? o->n_known : 0, f, MAX_FINDINGS);
	for (int i = 0; i < n && i < MAX_FINDINGS; i++)
		printf("%s\n", f[i].msg);
	if (n > MAX_FINDINGS)
		printf("%s: %d more findings\n", file, n - MAX_FINDINGS);
	if (n) {
		printf("%s: %d finding%s in %d level%s\n", file, n, n == 1 ? "" : "s", p.n_levels,
		       p.n_levels == 1 ? "" : "s");
		return EXIT_RUNTIME;
	}
	printf("%s: clean (%d level%s)\n", file, p.n_levels, p.n_levels == 1 ? "" : "s");
	return EXIT_OK;
}

static int plan_do_show(const void *args, void *ctx)
{
	const char *file = ((const struct file_args *)args)->file;
	static struct sluice_plan p;
	char iso[SLUICE_ISO_LEN];

	if (load_plan(file, &p))
		return EXIT_USAGE;
	printf("plan %s", file);
	if (p.service[0])
		printf("  service %s", p.service);
	if (p.owner[0])
		printf("  owner %s", p.owner);
	if (p.has_last_reviewed)
		printf("  last reviewed %.10s", time_format_iso(p.last_reviewed, iso, sizeof(iso)));
	printf("\n");
	for (int l = 0; l < p.n_levels; l++) {
		const struct plan_level *lv = &p.levels[l];
		/* cumulative effect: levels 0..l, later wins */
		struct { const char *svc; int cls, pct, from; } eff[PLAN_MAX_LEVELS * PLAN_MAX_ACTIONS];
		int ne = 0;

		printf("\nlevel %s%s%s\n", lv->name, lv->description[0] ? ": " : "", lv->description);
		if (lv->verified) {
			time_format_iso(lv->verified_at, iso, sizeof(iso));
			iso[10] = 0;
		}
		printf("  reversible: %s   approver: %s   drilled: %s   expected saving: %s\n",
		       lv->reversible ? "yes" : "NO", lv->approver[0] ? lv->approver : "(none)",
		       lv->verified ? iso : "never",
		       lv->expected_saving[0] ? lv->expected_saving : "(not given)");
		for (int k = 0; k <= l; k++)
			for (int a = 0; a < p.levels[k].n_actions; a++) {
				const struct plan_action *ac = &p.levels[k].actions[a];
				int j;
				for (j = 0; j < ne; j++)
					if (!strcmp(eff[j].svc, ac->service) && eff[j].cls == ac->class)
						break;
				if (j == ne)
					ne++;
				eff[j].svc = ac->service;
				eff[j].cls = ac->class;
				eff[j].pct = ac->shed_pct;
				eff[j].from = k;
			}
		printf("  applying %s sets:\n", lv->name);
		for (int j = 0; j < ne; j++)
			printf("    %-16s %s shed %3d%%%s%s%s\n", eff[j].svc, sw_class_str(eff[j].cls),
			       eff[j].pct, eff[j].from != l ? "   (from level " : "",
			       eff[j].from != l ? p.levels[eff[j].from].name : "",
			       eff[j].from != l ? ")" : "");
	}
	return EXIT_OK;
}

struct apply_args {
	const char *file, *level, *reason, *ttl, *owner;
	int force;
};

static const struct cliopt apply_opts[] = {
	CLIOPT_POS(struct apply_args, file, "FILE", 1, "the plan (YAML)"),
	CLIOPT_POS(struct apply_args, level, "LEVEL", 1, "the level to apply, by name"),
	CLIOPT_STR(struct apply_args, reason, "reason", "TEXT", 1,
		   "why, with the incident id; each switch's reason is \"plan LEVEL: TEXT\""),
	CLIOPT_STR(struct apply_args, ttl, "ttl", "DUR", 1,
		   "expiry of every switch: 90s, 5m, 2h, 1d, at most 30d"),
	CLIOPT_STR(struct apply_args, owner, "owner", "NAME", 0, "who owns them (default: you)"),
	CLIOPT_BOOL(struct apply_args, force, "force", 0,
		    "apply even when a level was not drilled recently enough, or when it would "
		    "loosen a stricter switch in force"),
	CLIOPT_TABLE_END,
};

static int plan_do_apply(const void *args, void *ctx)
{
	const struct apply_args *a = args;
	struct cli_opts *o = ctx;
	static struct sluice_plan p;
	static struct sw_switch sw[SW_MAX];
	static struct plan_finding f[MAX_FINDINGS];
	const char *const *known = known_ptrs(o);
	char err[1024], caller[SW_OWNER_LEN];
	const char *owner = a->owner;
	uint64_t now = (uint64_t)time(NULL);
	json_t *arr, *req;
	int n, nf, level;

	/* --owner as given: sw_make refuses one too long rather than cutting it */
	if (!owner) {
		switch_caller(caller, sizeof(caller));
		owner = caller;
	}
	if (load_plan(a->file, &p))
		return EXIT_USAGE;
	if (!known)
		log_warn("no service list (neither pinned maps nor config): "
			"services named in the plan are NOT checked");
	n = plan_level_switches(&p, a->level, a->reason, a->ttl, owner, now, known,
				known ? o->n_known : 0, sw, SW_MAX, err, sizeof(err));
	if (n < 0) {
		log_error("plan apply: %s; nothing changed", err);
		return EXIT_USAGE;
	}
	level = plan_find_level(&p, a->level);
	/* An undrilled degradation is a guess: refused unless the operator says --force. */
	if (plan_drill_too_old(&p, level, now, err, sizeof(err))) {
		if (!a->force) {
			log_error("plan apply: %s; nothing changed (--force to apply anyway)", err);
			return EXIT_USAGE;
		}
		log_warn("plan apply: %s; applying because of --force", err);
	}
	nf = plan_check(&p, now, known, known ? o->n_known : 0, f, MAX_FINDINGS);
	for (int i = 0; i < nf && i < MAX_FINDINGS; i++)
		if (f[i].level <= level && f[i].kind != PLAN_NEVER_VERIFIED &&
		    f[i].kind != PLAN_VERIFY_STALE)
			log_warn("%s", f[i].msg);
	arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, sw_switch_json(&sw[i]));
	req = json_pack("{s:s,s:s,s:o,s:b}", "file", a->file, "level", p.levels[level].name,
			"switches", arr, "force", a->force);
	return cli_change(o, "plan apply", req);
}

struct revert_args {
	const char *file, *reason;
};

static const struct cliopt revert_opts[] = {
	CLIOPT_POS(struct revert_args, file, "FILE", 1, "the plan (YAML) that was applied"),
	CLIOPT_STR(struct revert_args, reason, "reason", "TEXT", 0, "why, for the audit log"),
	CLIOPT_TABLE_END,
};

/* Every class the plan's levels touch, and the level names whose reasons mark a switch as set
 * by this plan ("plan LEVEL: ..."): sluiced clears those and keeps the others. */
static int plan_do_revert(const void *args, void *ctx)
{
	const struct revert_args *a = args;
	static struct sluice_plan p;
	json_t *targets, *levels, *req;

	if (cli_reason_refused("plan revert", a->reason))
		return EXIT_USAGE;
	targets = json_array();
	levels = json_array();
	if (load_plan(a->file, &p)) {
		json_decref(targets);
		json_decref(levels);
		return EXIT_USAGE;
	}
	for (int l = 0; l < p.n_levels; l++) {
		json_array_append_new(levels, json_string(p.levels[l].name));
		for (int k = 0; k < p.levels[l].n_actions; k++) {
			const struct plan_action *ac = &p.levels[l].actions[k];
			json_array_append_new(targets, json_pack("{s:s,s:s}", "service", ac->service,
								 "class", sw_class_str(ac->class)));
		}
	}
	req = json_pack("{s:s,s:o,s:o}", "file", a->file, "targets", targets, "levels", levels);
	if (req && a->reason)
		json_object_set_new(req, "reason", json_string(a->reason));
	return cli_change(ctx, "plan revert", req);
}

static const struct cliopt budget_opts[] = {
	CLIOPT_POS(struct file_args, file, "FILE", 1, "the call chains (YAML)"),
	CLIOPT_TABLE_END,
};

static int budget_do_check(const void *args, void *ctx)
{
	const char *file = ((const struct file_args *)args)->file;
	static struct budget_file bf;
	static struct doc_errors errs;
	int over;

	if (budget_load(file, &bf, &errs)) {
		doc_errors_print(stderr, &errs);
		log_error("%s: invalid budget file", file);
		return EXIT_USAGE;
	}
	over = budget_report(stdout, &bf);
	return over > 0 ? EXIT_RUNTIME : EXIT_OK;
}

/* ---- the commands ---- */

const struct clicmd cli_cmd_plan_check = {
	.name = "plan check",
	.summary = "review a plan: one finding per line, file:line first",
	.opts = plan_file_opts,
	.args_size = sizeof(struct file_args),
	.notes = "exit codes: 0 clean, 1 findings, 2 invalid file",
	.example = "sluicectl plan check plans/web.yaml",
	.run = plan_do_check,
};

const struct clicmd cli_cmd_plan_show = {
	.name = "plan show",
	.summary = "a plan's levels and what each one sets",
	.opts = plan_file_opts,
	.args_size = sizeof(struct file_args),
	.notes = "exit codes: 0 ok, 2 invalid file",
	.example = "sluicectl plan show plans/web.yaml",
	.run = plan_do_show,
};

const struct clicmd cli_cmd_plan_apply = {
	.name = "plan apply",
	.summary = "set every switch of a plan's level at once",
	.opts = apply_opts,
	.args_size = sizeof(struct apply_args),
	.notes = "Applying LEVEL sets the switches of the levels before it too (later levels win), "
		 "in one save of the\nswitch file, with one audit record per switch. Refused "
		 "without --force when a level it includes\nwas never drilled or longer ago than "
		 "the plan's max_drill_age_days (default 90), and when it\nwould loosen a stricter "
		 "switch in force.\n"
		 "exit codes: 0 applied and audited, 1 no daemon, refused or not applied, 2 bad "
		 "plan, level,\nundrilled level or argument (nothing changed)",
	.example = "sluicectl plan apply plans/web.yaml L2 --reason INC-44 --ttl 1h",
	.run = plan_do_apply,
};

const struct clicmd cli_cmd_plan_revert = {
	.name = "plan revert",
	.summary = "clear the switches a plan's apply set",
	.opts = revert_opts,
	.args_size = sizeof(struct revert_args),
	.notes = "Clears the switches on the plan's classes whose reason says a level of this plan "
		 "set them;\nswitches set by hand on the same classes stay. One audit record per "
		 "switch.\nexit codes: 0 done and audited, 1 no daemon, refused or not applied, "
		 "2 invalid plan",
	.example = "sluicectl plan revert plans/web.yaml --reason \"INC-44 resolved\"",
	.run = plan_do_revert,
};

const struct clicmd cli_cmd_budget_check = {
	.name = "budget check",
	.summary = "worst-case timeout path vs budget (for CI)",
	.opts = budget_opts,
	.args_size = sizeof(struct file_args),
	.notes = "exit codes: 0 every chain within budget, 1 a chain over budget, 2 invalid file",
	.example = "sluicectl budget check chains.yaml",
	.run = budget_do_check,
};
