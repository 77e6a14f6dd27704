// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl switch set|clear|ls|log and cascade clear (see docs/OPERATIONS.md); each command's
 * arguments, help and example are its table at the end of the file.
 *
 * Exit codes: 0 ok; 1 runtime failure (permission denied, I/O, damaged switch file for `ls`,
 * unreadable audit records for `log`, change in force but not audited); 2 bad usage or input
 * (nothing changed). Permission is checked after the arguments are validated, so a bad
 * argument is always exit 2 and a refused caller with good arguments exit 1. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ops/audit.h"
#include "kernel/bpfmaps.h"
#include "common/duration.h"
#include "common/jsonio.h"
#include "common/yamldoc.h"
#include "ops/switches.h"
#include "ops/switchstate.h"
#include "common/clock.h"
#include "common/log.h"

static uint64_t wall_now(void)
{
	return (uint64_t)time(NULL);
}

/* The services to check names against, or NULL when neither the pins nor the config could
 * be read (then names are not checked here; sluiced checks them). */
static const char *const *known_names(const struct cli_opts *o)
{
	return o->n_known >= 0 ? o->known_ptr : NULL;
}

static void warn_unknown_services(const struct cli_opts *o)
{
	if (o->n_known < 0)
		log_warn("neither the pinned maps (%s) nor the config (%s) "
			"could be read: service names are NOT checked", o->pin_dir ? o->pin_dir : "?",
			o->config_path ? o->config_path : "?");
}

struct set_args {
	const char *service, *class, *shed, *reason, *ttl, *owner, *kind, *runbook;
};

static const struct cliopt set_opts[] = {
	CLIOPT_POS(struct set_args, service, "SERVICE", 1, "a service of the running config"),
	CLIOPT_POS(struct set_args, class, "CLASS", 1, "L0, L1, L2 or L3 (L3 sheds first)"),
	CLIOPT_STR(struct set_args, shed, "shed", "PCT", 1,
		   "share of new units refused: 0..100, \"30\" or \"30%\""),
	CLIOPT_STR(struct set_args, reason, "reason", "TEXT", 1,
		   "why, with the incident id; not blank"),
	CLIOPT_STR(struct set_args, ttl, "ttl", "DUR", 1,
		   "expiry: 90s, 5m, 2h, 1d, 1h30m; at most 30d, never permanent"),
	CLIOPT_STR(struct set_args, owner, "owner", "NAME", 0, "who owns it (default: you)"),
	CLIOPT_STR(struct set_args, kind, "kind", "KIND", 0,
		   "ops (default: an incident lever), release or experiment"),
	CLIOPT_STR(struct set_args, runbook, "runbook", "URL", 0, "where its runbook is"),
	CLIOPT_TABLE_END,
};

static int do_set(const void *args, void *ctx)
{
	const struct set_args *a = args;
	struct cli_opts *o = ctx;
	char err[512], caller[SW_OWNER_LEN];
	const char *owner = a->owner;
	struct sw_switch sw;
	json_t *req;

	/* --owner as given: sw_make refuses one too long for the ledger (cut to fit, it would
	 * name someone else, or end inside a character) */
	if (!owner) {
		switch_caller(caller, sizeof(caller));
		owner = caller;
	}
	warn_unknown_services(o);
	/* Checked here for exit 2 before anything is sent; sluiced checks again. */
	if (sw_make(&sw, a->service, a->class, a->shed, a->reason, a->ttl, owner, wall_now(),
		    known_names(o), o->n_known, err, sizeof(err)) ||
	    sw_set_ledger(&sw, a->kind, a->runbook, err, sizeof(err))) {
		log_error("switch set: %s", err);
		return EXIT_USAGE;
	}
	req = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "service", a->service, "class", a->class,
			"shed", a->shed, "reason", a->reason, "ttl", a->ttl, "owner", owner,
			"kind", sw_kind_str(sw.kind));
	if (req && a->runbook)
		json_object_set_new(req, "runbook", json_string(a->runbook));
	return cli_change(o, "switch set", req);
}

struct clear_args {
	const char *service, *class, *reason;
};

static const struct cliopt clear_opts[] = {
	CLIOPT_POS(struct clear_args, service, "SERVICE", 1,
		   "the switch's service (one no longer configured can still be cleared)"),
	CLIOPT_POS(struct clear_args, class, "CLASS", 1, "L0, L1, L2 or L3"),
	CLIOPT_STR(struct clear_args, reason, "reason", "TEXT", 0,
		   "why, for the audit log (default: the switch's own reason)"),
	CLIOPT_TABLE_END,
};

static int do_clear(const void *args, void *ctx)
{
	const struct clear_args *a = args;
	struct cli_opts *o = ctx;
	const char *reason = a->reason;
	char err[512];
	json_t *req;
	int cls;

	if (cli_reason_refused("switch clear", reason))
		return EXIT_USAGE;
	/* The class must be valid; the service need not be configured any more (a switch of a
	 * removed service can still be cleared): sluiced judges it against its file. */
	if (sw_check_target(a->service, a->class, NULL, -1, &cls, err, sizeof(err))) {
		log_error("switch clear: %s", err);
		return EXIT_USAGE;
	}
	req = json_pack("{s:s,s:s}", "service", a->service, "class", a->class);
	if (req && reason)
		json_object_set_new(req, "reason", json_string(reason));
	return cli_change(o, "switch clear", req);
}

struct renew_args {
	const char *service, *class, *ttl, *reason;
};

static const struct cliopt renew_opts[] = {
	CLIOPT_POS(struct renew_args, service, "SERVICE", 1, "the switch's service"),
	CLIOPT_POS(struct renew_args, class, "CLASS", 1, "L0, L1, L2 or L3"),
	CLIOPT_STR(struct renew_args, ttl, "ttl", "DUR", 1,
		   "the new time left from now: 90s, 5m, 2h, at most 30d"),
	CLIOPT_STR(struct renew_args, reason, "reason", "TEXT", 0,
		   "why it is still needed, for the audit log"),
	CLIOPT_TABLE_END,
};

static int do_renew(const void *args, void *ctx)
{
	const struct renew_args *a = args;
	struct cli_opts *o = ctx;
	struct sw_switch probe = { .expires_at = UINT64_MAX };
	char err[512];
	json_t *req;
	int cls;

	/* Unlike a clear, a renew needs the service configured (sluiced refuses it otherwise):
	 * a name the pins or the config do not know is exit 2 here, nothing sent. */
	warn_unknown_services(o);
	if (sw_check_target(a->service, a->class, known_names(o), o->n_known, &cls, err,
			    sizeof(err)) ||
	    sw_renew(&probe, a->ttl, 1, wall_now(), err, sizeof(err))) {
		log_error("switch renew: %s", err);
		return EXIT_USAGE;
	}
	if (cli_reason_refused("switch renew", a->reason))
		return EXIT_USAGE;
	req = json_pack("{s:s,s:s,s:s}", "service", a->service, "class", a->class, "ttl", a->ttl);
	if (req && a->reason)
		json_object_set_new(req, "reason", json_string(a->reason));
	return cli_change(o, "switch renew", req);
}

static const char *service_note(const struct cli_opts *o, const char *service)
{
	if (o->n_known < 0)
		return "";
	for (int i = 0; i < o->n_known; i++)
		if (!strcmp(o->known[i], service))
			return "";
	return " (service not configured)";
}

/* `switch ls --json`: the file's fields of every switch plus its age and time left. */
/* Grows *w to the length of s. */
static void fit_width(int *w, const char *s)
{
	if ((int)strlen(s) > *w)
		*w = (int)strlen(s);
}

/* The table of `switch ls`. The free-length columns (a service name of 31 characters, a
 * 14-day switch's "13d23h59m12s" left) are as wide as their longest cell, so every row stays
 * under the headings. */
static void print_ls_table(const struct cli_opts *o, const struct sw_set *set, uint64_t now)
{
	static char age[SW_MAX][24], left[SW_MAX][24];
	int ws = 16, wo = 12, wa = 10, wl = 10;

	for (int i = 0; i < set->n; i++) {
		const struct sw_switch *sw = &set->sw[i];

		duration_format(now > sw->set_at ? now - sw->set_at : 0, age[i], sizeof(age[i]));
		if (sw->expires_at > now)
			duration_format(sw->expires_at - now, left[i], sizeof(left[i]));
		else
			snprintf(left[i], sizeof(left[i]), "EXPIRED");
		fit_width(&ws, sw->service);
		fit_width(&wo, sw->owner);
		fit_width(&wa, age[i]);
		fit_width(&wl, left[i]);
	}
	printf("%-*s %-5s %5s  %-10s %-*s %-*s %-*s %-20s %5s  %s\n", ws, "SERVICE", "CLASS",
	       "SHED", "KIND", wo, "OWNER", wa, "AGE", wl, "LEFT", "EXPIRES (UTC)", "RENEW",
	       "REASON");
	for (int i = 0; i < set->n; i++) {
		const struct sw_switch *sw = &set->sw[i];
		char iso[SLUICE_ISO_LEN];

		printf("%-*s %-5s %4d%%  %-10s %-*s %-*s %-*s %-20s %5d  %s%s%s%s\n",
		       ws, sw->service, sw_class_str(sw->class), sw->shed_pct, sw_kind_str(sw->kind),
		       wo, sw->owner, wa, age[i], wl, left[i],
		       time_format_iso(sw->expires_at, iso, sizeof(iso)), sw->renewals, sw->reason,
		       service_note(o, sw->service), sw->runbook[0] ? "  runbook " : "",
		       sw->runbook);
	}
}

static int print_ls_json(const struct sw_set *set, uint64_t now)
{
	json_t *arr = json_array();
	int rc;

	for (int i = 0; i < set->n; i++) {
		const struct sw_switch *sw = &set->sw[i];
		uint64_t left = sw->expires_at > now ? sw->expires_at - now : 0;
		uint64_t age = now > sw->set_at ? now - sw->set_at : 0;
		json_t *o = sw_switch_json(sw);

		if (o) {
			json_object_set_new(o, "age_s", json_integer((json_int_t)age));
			json_object_set_new(o, "left_s", json_integer((json_int_t)left));
			json_object_set_new(o, "expired", json_boolean(!left));
		}
		if (o && json_object_size(o) != 13) {    /* out of memory on the way */
			json_decref(o);
			o = NULL;
		}
		if (json_array_append_new(arr, o)) {
			json_decref(arr);
			return -1;
		}
	}
	rc = jsonio_print_line(stdout, arr);
	json_decref(arr);
	return rc;
}

struct ls_args {
	int json;
};

static const struct cliopt ls_opts[] = {
	CLIOPT_BOOL(struct ls_args, json, "json", 0, "a JSON array instead of the table"),
	CLIOPT_TABLE_END,
};

static int do_ls(const void *args, void *ctx)
{
	const struct ls_args *a = args;
	struct cli_opts *o = ctx;
	char path[PATH_MAX], err[1024];
	static struct sw_set set;
	uint64_t now = wall_now();
	int json = o->json || a->json;

	if (state_path(path, sizeof(path), o->state_dir, SW_FILE_NAME)) {
		log_error("state directory path too long");
		return EXIT_USAGE;
	}
	if (sw_load(path, &set, err, sizeof(err))) {
		log_error("%s", err);
		if (json)
			print_ls_json(&set, now);       /* the failed load left it empty */
		return EXIT_RUNTIME;
	}
	if (json && print_ls_json(&set, now)) {
		log_error("out of memory");
		return EXIT_RUNTIME;
	}
	if (json)
		return EXIT_OK;
	if (!set.n) {
		printf("no switches in force: all traffic normal (%s)\n", path);
		return EXIT_OK;
	}
	print_ls_table(o, &set, now);
	for (int i = 0; i < set.n; i++)
		if (set.sw[i].expires_at <= now) {
			printf("(EXPIRED switches shed nothing; sluiced removes them from the file)\n");
			break;
		}
	return EXIT_OK;
}

struct log_args {
	const char *last;
	int json;
};

static const struct cliopt log_opts[] = {
	CLIOPT_STR(struct log_args, last, "last", "N", 0, "only the last N records (1..1000000)"),
	CLIOPT_BOOL(struct log_args, json, "json", 0,
		    "a JSON array of the records (as in the log) instead of the text"),
	CLIOPT_TABLE_END,
};

static int do_log(const void *args, void *ctx)
{
	const struct log_args *a = args;
	struct cli_opts *o = ctx;
	char path[PATH_MAX], err[512];
	int last = 0, bad;

	if (a->last) {
		long long v;

		/* a plain decimal: strtol takes leading blanks */
		if (!yparse_int(a->last, &v) || v < 1 || v > 1000000) {
			log_error("switch log: --last must be a whole number "
				"1..1000000, not '%s'", a->last);
			return EXIT_USAGE;
		}
		last = (int)v;
	}
	if (state_path(path, sizeof(path), o->state_dir, AUDIT_FILE_NAME)) {
		log_error("state directory path too long");
		return EXIT_USAGE;
	}
	bad = o->json || a->json ? audit_print_json(stdout, stderr, path, last, err, sizeof(err))
				 : audit_print(stdout, path, last, err, sizeof(err));
	if (bad < 0) {
		log_error("switch log: %s", err);
		return EXIT_RUNTIME;
	}
	if (bad > 0) {
		log_error("switch log: %d unreadable record(s) in %s", bad, path);
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* ---- cascade clear, breaker reset ---- */

struct why_args {
	const char *service, *reason;
};

static const struct cliopt cascade_opts[] = {
	CLIOPT_STR(struct why_args, reason, "reason", "TEXT", 0, "why, for the audit log"),
	CLIOPT_TABLE_END,
};

static int do_cascade_clear(const void *args, void *ctx)
{
	const struct why_args *a = args;
	json_t *req;

	if (cli_reason_refused("cascade clear", a->reason))
		return EXIT_USAGE;
	req = json_object();
	if (a->reason)
		json_object_set_new(req, "reason", json_string(a->reason));
	return cli_change(ctx, "cascade clear", req);
}

static const struct cliopt breaker_opts[] = {
	CLIOPT_POS(struct why_args, service, "SERVICE", 1, "a service of the running config"),
	CLIOPT_STR(struct why_args, reason, "reason", "TEXT", 1,
		   "why, with the incident id; not blank"),
	CLIOPT_TABLE_END,
};

static int do_breaker_reset(const void *args, void *ctx)
{
	const struct why_args *a = args;
	struct cli_opts *o = ctx;
	char err[512];
	int cls;

	if (sw_check_target(a->service, "L0", known_names(o), o->n_known, &cls,
			    err, sizeof(err))) {
		log_error("breaker reset: %s", err);
		return EXIT_USAGE;
	}
	if (cli_reason_refused("breaker reset", a->reason))
		return EXIT_USAGE;
	return cli_change(o, "breaker reset",
			  json_pack("{s:s,s:s}", "service", a->service, "reason", a->reason));
}

/* ---- the commands ---- */

#define SWITCH_EXITS "sluiced applies it (sluicectl waits until the verdict map shows it).\n" \
	"exit codes: 0 applied and audited; 1 no daemon, another state dir, refused (permission,\n" \
	"unknown service), not applied or not audited; 2 bad usage or input (nothing changed)"

const struct clicmd cli_cmd_switch_set = {
	.name = "switch set",
	.summary = "shed part of a class until the TTL runs out",
	.opts = set_opts,
	.args_size = sizeof(struct set_args),
	.notes = "A switch for the same SERVICE and CLASS is replaced; the audit log records "
		 "old -> new.\nLedger: --kind, --runbook, the owner, the expiry and the renewals "
		 "are kept with the switch.\n" SWITCH_EXITS,
	.example = "sluicectl switch set web L3 --shed 50 --reason \"INC-42 payment slow\" "
		   "--ttl 30m",
	.run = do_set,
};

const struct clicmd cli_cmd_switch_clear = {
	.name = "switch clear",
	.summary = "remove a switch: the class is back to normal",
	.opts = clear_opts,
	.args_size = sizeof(struct clear_args),
	.notes = "Clearing a switch that is not there is not an error.\n" SWITCH_EXITS,
	.example = "sluicectl switch clear web L3 --reason \"INC-42 resolved\"",
	.run = do_clear,
};

const struct clicmd cli_cmd_switch_renew = {
	.name = "switch renew",
	.summary = "push a switch's expiry back (a limited number of times)",
	.opts = renew_opts,
	.args_size = sizeof(struct renew_args),
	.notes = "Refused once the switch was renewed switch_max_renewals times (config, default "
		 "3): a switch\nthat is still needed then gets a fresh `switch set` with a reason.\n"
		 SWITCH_EXITS,
	.example = "sluicectl switch renew web L3 --ttl 30m --reason \"INC-42 still degraded\"",
	.run = do_renew,
};

const struct clicmd cli_cmd_switch_ls = {
	.name = "switch ls",
	.alias = "switch list",
	.summary = "the switches in force: who, why, time left",
	.opts = ls_opts,
	.args_size = sizeof(struct ls_args),
	.notes = "exit codes: 0 ok, 1 the switch file is damaged (then NO switch is in force)",
	.example = "sluicectl switch ls --json",
	.run = do_ls,
};

const struct clicmd cli_cmd_switch_log = {
	.name = "switch log",
	.summary = "the audit log: every change, who and why",
	.opts = log_opts,
	.args_size = sizeof(struct log_args),
	.notes = "--json: one array of the records, each as its line in the log ([] when there "
		 "is none);\nunreadable records are said on stderr (exit 1), the others still "
		 "printed.\nexit codes: 0 ok, 1 unreadable records or log, 2 bad --last",
	.example = "sluicectl switch log --last 20\nsluicectl switch log --last 5 --json",
	.run = do_log,
};

const struct clicmd cli_cmd_cascade_clear = {
	.name = "cascade clear",
	.summary = "lift the cascade suppression of breakers",
	.opts = cascade_opts,
	.args_size = sizeof(struct why_args),
	.notes = SWITCH_EXITS,
	.example = "sluicectl cascade clear --reason \"INC-45 downstream recovered\"",
	.run = do_cascade_clear,
};

const struct clicmd cli_cmd_breaker_reset = {
	.name = "breaker reset",
	.summary = "close a service's breaker now, with an empty window",
	.opts = breaker_opts,
	.args_size = sizeof(struct why_args),
	.notes = SWITCH_EXITS,
	.example = "sluicectl breaker reset payment --reason \"INC-46 false open\"",
	.run = do_breaker_reset,
};
