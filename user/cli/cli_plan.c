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

static const char *const *known_ptrs(const struct cli_opts *o, const char **buf)
{
	if (o->n_known < 0)
		return NULL;
	(void)buf;
	return o->known_ptr;
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
	const char **kbuf = NULL;
	const char *const *known = known_ptrs(o, kbuf);
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
};

static const struct cliopt apply_opts[] = {
	CLIOPT_POS(struct apply_args, file, "FILE", 1, "the plan (YAML)"),
	CLIOPT_POS(struct apply_args, level, "LEVEL", 1, "the level to apply, by name"),
	CLIOPT_STR(struct apply_args, reason, "reason", "TEXT", 1,
		   "why, with the incident id; each switch's reason is \"plan LEVEL: TEXT\""),
	CLIOPT_STR(struct apply_args, ttl, "ttl", "DUR", 1,
		   "expiry of every switch: 90s, 5m, 2h, 1d, at most 30d"),
	CLIOPT_STR(struct apply_args, owner, "owner", "NAME", 0, "who owns them (default: you)"),
	CLIOPT_TABLE_END,
};

static int plan_do_apply(const void *args, void *ctx)
{
	const struct apply_args *a = args;
	struct cli_opts *o = ctx;
	static struct sluice_plan p;
	static struct sw_switch sw[SW_MAX], old[SW_MAX];
	static int had_old[SW_MAX];
	static struct sw_set set;
	static struct plan_finding f[MAX_FINDINGS];
	const char *pos[2] = { a->file, a->level }, *reason = a->reason, *ttl = a->ttl;
	const char *owner_arg = a->owner;
	const char **kbuf = NULL;
	const char *const *known = known_ptrs(o, kbuf);
	char err[1024], note[1024], path[PATH_MAX], owner[SW_OWNER_LEN], cmd[AUDIT_CMD_LEN];
	char ttlbuf[24];
	uint64_t now = (uint64_t)time(NULL);
	int n, nf, fd, rc = EXIT_OK, level;

	if (owner_arg)
		snprintf(owner, sizeof(owner), "%s", owner_arg);
	else
		switch_caller(owner, sizeof(owner));
	if (load_plan(pos[0], &p))
		return EXIT_USAGE;
	if (!known)
		log_warn("no service list (neither pinned maps nor config): "
			"services named in the plan are NOT checked");
	n = plan_level_switches(&p, pos[1], reason, ttl, owner_arg ? owner_arg : owner, now, known,
				known ? o->n_known : 0, sw, SW_MAX, err, sizeof(err));
	if (n < 0) {
		log_error("plan apply: %s; nothing changed", err);
		return EXIT_USAGE;
	}
	level = plan_find_level(&p, pos[1]);
	/* Say what the review would say about the levels being applied (not blocking). */
	nf = plan_check(&p, now, known, known ? o->n_known : 0, f, MAX_FINDINGS);
	for (int i = 0; i < nf && i < MAX_FINDINGS; i++)
		if (f[i].level <= level)
			log_warn("%s", f[i].msg);
	if (switch_may_change(o->cfg ? o->cfg->switch_group : "", err, sizeof(err))) {
		log_error("plan apply: %s; nothing changed", err);
		return EXIT_RUNTIME;
	}
	fd = switch_writer_open(o->state_dir, now, &set, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	if (fd < 0) {
		log_error("plan apply: %s", err);
		return EXIT_RUNTIME;
	}
	if (note[0])
		log_error("%s", note);
	if (plan_apply_to_set(&set, sw, n, old, had_old, err, sizeof(err))) {
		sw_unlock(fd);
		log_error("plan apply: %s; nothing changed", err);
		return EXIT_RUNTIME;
	}
	if (switch_writer_save(path, &set, err, sizeof(err))) {
		sw_unlock(fd);
		log_error("plan apply: %s; nothing changed", err);
		return EXIT_RUNTIME;
	}
	snprintf(cmd, sizeof(cmd), "plan apply %s", p.levels[level].name);
	for (int i = 0; i < n; i++) {
		struct audit_entry e;
		char user[AUDIT_USER_LEN], aerr[512];

		switch_caller(user, sizeof(user));
		audit_entry_make(&e, now, (uint32_t)getuid(), user, cmd, sw[i].service, sw[i].class,
				 had_old[i] ? &old[i] : NULL, &sw[i], sw[i].reason);
		if (state_audit_append(o->state_dir, &e, aerr, sizeof(aerr))) {
			log_error("ERROR: %s/%s IS IN FORCE but was NOT recorded in "
				"the audit log: %s", sw[i].service, sw_class_str(sw[i].class), aerr);
			rc = EXIT_RUNTIME;
		}
	}
	sw_unlock(fd);
	duration_format(sw[0].expires_at - sw[0].set_at, ttlbuf, sizeof(ttlbuf));
	printf("plan apply: level %s of %s: %d switch%s for %s (reason %s)\n",
	       p.levels[level].name, pos[0], n, n == 1 ? "" : "es", ttlbuf, sw[0].reason);
	for (int i = 0; i < n; i++)
		printf("  %-16s %s shed %3d%%%s\n", sw[i].service, sw_class_str(sw[i].class),
		       sw[i].shed_pct, had_old[i] ? "  (replaced an existing switch)" : "");
	if (rc)
		log_error("write the missing audit records into the incident notes "
			"by hand");
	return rc;
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
		 "in one save of the\nswitch file, with one audit record per switch.\n"
		 "exit codes: 0 ok, 1 permission denied, I/O or not audited, 2 bad plan, level or "
		 "argument (nothing changed)",
	.example = "sluicectl plan apply plans/web.yaml L2 --reason INC-44 --ttl 1h",
	.run = plan_do_apply,
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
