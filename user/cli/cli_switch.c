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
#include "ops/switches.h"
#include "ops/switchstate.h"
#include "common/clock.h"
#include "common/log.h"

static uint64_t wall_now(void)
{
	return (uint64_t)time(NULL);
}

static const char *group_of(const struct cli_opts *o)
{
	return o->cfg ? o->cfg->switch_group : "";
}


static void warn_unknown_services(const struct cli_opts *o)
{
	if (o->n_known < 0)
		log_warn("neither the pinned maps (%s) nor the config (%s) "
			"could be read: service names are NOT checked", o->pin_dir ? o->pin_dir : "?",
			o->config_path ? o->config_path : "?");
}

/* The audit record for one change; loud on failure. 0 / -1. */
static int audit_one(const struct cli_opts *o, uint64_t now, const char *command,
		     const char *service, int cls, const struct sw_switch *old,
		     const struct sw_switch *new, const char *reason)
{
	struct audit_entry e;
	char user[AUDIT_USER_LEN], err[512];

	switch_caller(user, sizeof(user));
	audit_entry_make(&e, now, (uint32_t)getuid(), user, command, service, cls, old, new,
			 reason);
	if (state_audit_append(o->state_dir, &e, err, sizeof(err))) {
		log_error("ERROR: the change to %s/%s IS IN FORCE but was NOT "
			"recorded in the audit log: %s\n  write it into the incident notes by hand",
			service, sw_class_str(cls), err);
		return -1;
	}
	return 0;
}

static void describe_old(const struct sw_switch *old, uint64_t now, char *buf, size_t len)
{
	char left[24];

	duration_format(old->expires_at > now ? old->expires_at - now : 0, left, sizeof(left));
	snprintf(buf, len, "shed %d%% by %s, %s left", old->shed_pct, old->owner, left);
}

struct set_args {
	const char *service, *class, *shed, *reason, *ttl, *owner;
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
	CLIOPT_TABLE_END,
};

static int do_set(const void *args, void *ctx)
{
	const struct set_args *a = args;
	struct cli_opts *o = ctx;
	const char **known = o->known_ptr;
	char err[512], note[1024], path[PATH_MAX], owner[SW_OWNER_LEN], ttlbuf[24], old_s[160];
	struct sw_switch sw, old;
	static struct sw_set set;
	uint64_t now = wall_now();
	int fd, had, rc = EXIT_OK;

	if (a->owner)
		snprintf(owner, sizeof(owner), "%s", a->owner);
	else
		switch_caller(owner, sizeof(owner));
	warn_unknown_services(o);
	if (sw_make(&sw, a->service, a->class, a->shed, a->reason, a->ttl, owner, now,
		    o->n_known >= 0 ? known : NULL, o->n_known, err, sizeof(err))) {
		log_error("switch set: %s", err);
		return EXIT_USAGE;
	}
	if (switch_may_change(group_of(o), err, sizeof(err))) {
		log_error("switch set: %s; nothing changed", err);
		return EXIT_RUNTIME;
	}
	fd = switch_writer_open(o->state_dir, now, &set, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	if (fd < 0) {
		log_error("switch set: %s", err);
		return EXIT_RUNTIME;
	}
	if (note[0])
		log_error("%s", note);
	had = sw_set_put(&set, &sw, &old);
	if (had < 0) {
		sw_unlock(fd);
		log_error("switch set: the switch set is full (%d switches); nothing changed",
			  SW_MAX);
		return EXIT_RUNTIME;
	}
	if (switch_writer_save(path, &set, err, sizeof(err))) {
		sw_unlock(fd);
		log_error("switch set: %s; nothing changed", err);
		return EXIT_RUNTIME;
	}
	if (audit_one(o, now, "switch set", sw.service, sw.class, had ? &old : NULL, &sw,
		      sw.reason))
		rc = EXIT_RUNTIME;
	sw_unlock(fd);
	duration_format(sw.expires_at - sw.set_at, ttlbuf, sizeof(ttlbuf));
	if (had)
		describe_old(&old, now, old_s, sizeof(old_s));
	printf("switch set: %s %s shed %d%% for %s (reason %s)%s%s\n", sw.service,
	       sw_class_str(sw.class), sw.shed_pct, ttlbuf, sw.reason,
	       had ? "; replaces " : "", had ? old_s : "");
	return rc;
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
	const char *pos[2] = { a->service, a->class }, **known = o->known_ptr;
	const char *reason = a->reason;
	char err[512], note[1024], path[PATH_MAX], old_s[160];
	struct sw_switch old;
	static struct sw_set set;
	uint64_t now = wall_now();
	int fd, cls, rc = EXIT_OK;

	if (reason && (strlen(reason) >= SW_REASON_LEN || !reason[strspn(reason, " \t")])) {
		log_error("switch clear: --reason must be non-blank and shorter "
			"than %d bytes", SW_REASON_LEN);
		return EXIT_USAGE;
	}
	/* The class must be valid. The service is checked against the known ones, except when
	 * the file holds a switch for it (a service removed from the config can still be
	 * cleared). */
	if (sw_check_target(pos[0], pos[1], NULL, -1, &cls, err, sizeof(err))) {
		log_error("switch clear: %s", err);
		return EXIT_USAGE;
	}
	warn_unknown_services(o);
	if (o->n_known >= 0 &&
	    sw_check_target(pos[0], pos[1], known, o->n_known, &cls, err, sizeof(err))) {
		char p[PATH_MAX];
		struct sw_set *cur = malloc(sizeof(*cur));
		int in_file = 0;

		if (cur && state_path(p, sizeof(p), o->state_dir, SW_FILE_NAME) == 0 &&
		    sw_load(p, cur, note, sizeof(note)) == 0)
			in_file = sw_set_find(cur, pos[0], cls) != NULL;
		free(cur);
		if (!in_file) {
			log_error("switch clear: %s", err);
			return EXIT_USAGE;
		}
	}
	if (switch_may_change(group_of(o), err, sizeof(err))) {
		log_error("switch clear: %s; nothing changed", err);
		return EXIT_RUNTIME;
	}
	fd = switch_writer_open(o->state_dir, now, &set, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	if (fd < 0) {
		log_error("switch clear: %s", err);
		return EXIT_RUNTIME;
	}
	if (note[0])
		log_error("%s", note);
	if (!sw_set_clear(&set, pos[0], cls, &old)) {
		if (note[0] && switch_writer_save(path, &set, err, sizeof(err))) {
			log_error("switch clear: %s", err);
			rc = EXIT_RUNTIME;
		}
		sw_unlock(fd);
		printf("switch clear: no switch for %s %s; nothing to clear\n", pos[0],
		       sw_class_str(cls));
		return rc;
	}
	if (switch_writer_save(path, &set, err, sizeof(err))) {
		sw_unlock(fd);
		log_error("switch clear: %s; nothing changed", err);
		return EXIT_RUNTIME;
	}
	if (audit_one(o, now, "switch clear", old.service, cls, &old, NULL,
		      reason ? reason : old.reason))
		rc = EXIT_RUNTIME;
	sw_unlock(fd);
	describe_old(&old, now, old_s, sizeof(old_s));
	printf("switch clear: %s %s back to normal (was %s; reason %s)\n", old.service,
	       sw_class_str(cls), old_s, old.reason);
	return rc;
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
		if (o && json_object_size(o) != 10) {    /* out of memory on the way */
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
	printf("%-16s %-5s %5s  %-12s %-10s %-10s %-20s  %s\n", "SERVICE", "CLASS", "SHED",
	       "OWNER", "AGE", "LEFT", "EXPIRES (UTC)", "REASON");
	for (int i = 0; i < set.n; i++) {
		const struct sw_switch *sw = &set.sw[i];
		char age[24], left[32], iso[SLUICE_ISO_LEN];

		duration_format(now > sw->set_at ? now - sw->set_at : 0, age, sizeof(age));
		if (sw->expires_at > now)
			duration_format(sw->expires_at - now, left, sizeof(left));
		else
			snprintf(left, sizeof(left), "EXPIRED");
		printf("%-16s %-5s %4d%%  %-12s %-10s %-10s %-20s  %s%s\n", sw->service,
		       sw_class_str(sw->class), sw->shed_pct, sw->owner, age, left,
		       time_format_iso(sw->expires_at, iso, sizeof(iso)), sw->reason,
		       service_note(o, sw->service));
	}
	for (int i = 0; i < set.n; i++)
		if (set.sw[i].expires_at <= now) {
			printf("(EXPIRED switches shed nothing; sluiced removes them from the file)\n");
			break;
		}
	return EXIT_OK;
}

struct log_args {
	const char *last;
};

static const struct cliopt log_opts[] = {
	CLIOPT_STR(struct log_args, last, "last", "N", 0, "only the last N records (1..1000000)"),
	CLIOPT_TABLE_END,
};

static int do_log(const void *args, void *ctx)
{
	const struct log_args *a = args;
	struct cli_opts *o = ctx;
	char path[PATH_MAX], err[512];
	int last = 0, bad;

	if (a->last) {
		char *end;
		long v;

		errno = 0;
		v = strtol(a->last, &end, 10);
		if (errno || end == a->last || *end || v < 1 || v > 1000000) {
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
	bad = audit_print(stdout, path, last, err, sizeof(err));
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

/* ---- cascade clear ---- */

static int do_cascade_clear(const void *args, void *ctx)
{
	struct cli_opts *o = ctx;
	char err[512], user[AUDIT_USER_LEN], iso[SLUICE_ISO_LEN], path[PATH_MAX];
	struct sluice_maps m;
	uint64_t now = wall_now();

	if (switch_may_change(group_of(o), err, sizeof(err))) {
		log_error("cascade clear: %s; nothing requested", err);
		return EXIT_RUNTIME;
	}
	if (state_dir_ensure(o->state_dir, err, sizeof(err))) {
		log_error("cascade clear: %s", err);
		return EXIT_RUNTIME;
	}
	switch_caller(user, sizeof(user));
	if (cascade_clear_request(o->state_dir, user, (uint32_t)getuid(), now, err, sizeof(err))) {
		log_error("cascade clear: %s", err);
		return EXIT_RUNTIME;
	}
	state_path(path, sizeof(path), o->state_dir, CASCADE_CLEAR_FILE);
	printf("cascade clear: requested by %s at %s (%s); sluiced lifts the cascade suppression "
	       "at its next tick and removes the file\n", user,
	       time_format_iso(now, iso, sizeof(iso)), path);
	if (o->pin_dir && maps_open_pinned(o->pin_dir, &m) == 0) {
		struct sluice_globals g;
		unsigned long long t = monotonic_ns();

		if (maps_read_globals(&m, &g) == 0 &&
		    (!g.heartbeat_ns || t - g.heartbeat_ns > g.heartbeat_timeout_ns))
			log_warn("sluiced's heartbeat is stale: the request "
				"takes effect when it runs again");
		maps_close(&m);
	} else {
		log_warn("nothing attached at %s: the request takes "
			"effect when sluiced starts", o->pin_dir ? o->pin_dir : "?");
	}
	return EXIT_OK;
}

/* ---- the commands ---- */

#define SWITCH_EXITS "exit codes: 0 ok, 1 runtime failure or permission denied, " \
	"2 bad usage or input (nothing changed)"

const struct clicmd cli_cmd_switch_set = {
	.name = "switch set",
	.summary = "shed part of a class until the TTL runs out",
	.opts = set_opts,
	.args_size = sizeof(struct set_args),
	.notes = "A switch for the same SERVICE and CLASS is replaced; the audit log records "
		 "old -> new.\n" SWITCH_EXITS,
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
	.notes = "exit codes: 0 ok, 1 unreadable records or log, 2 bad --last",
	.example = "sluicectl switch log --last 20",
	.run = do_log,
};

const struct clicmd cli_cmd_cascade_clear = {
	.name = "cascade clear",
	.summary = "lift the cascade suppression of breakers",
	.notes = "sluiced acts on the request at its next tick and removes the request file.\n"
		 "exit codes: 0 requested, 1 permission denied or I/O",
	.example = "sluicectl cascade clear",
	.run = do_cascade_clear,
};
