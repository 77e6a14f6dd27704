// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl switch ... and sluicectl cascade clear (see docs/OPERATIONS.md).
 *
 *   switch set SERVICE CLASS --shed PCT --reason TEXT --ttl DUR [--owner NAME]
 *   switch clear SERVICE CLASS [--reason TEXT]
 *   switch ls [--json]
 *   switch log [--last N]
 *   cascade clear
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

static uint64_t wall_now(void)
{
	return (uint64_t)time(NULL);
}

static const char *group_of(const struct cli_opts *o)
{
	return o->cfg ? o->cfg->switch_group : "";
}

static void known_list(const struct cli_opts *o, const char *known[SLUICE_MAX_SERVICES])
{
	for (int i = 0; i < o->n_known && i < SLUICE_MAX_SERVICES; i++)
		known[i] = o->known[i];
}

static void switch_usage(FILE *f)
{
	fprintf(f,
		"usage: sluicectl switch set SERVICE CLASS --shed PCT --reason TEXT --ttl DUR [--owner NAME]\n"
		"       sluicectl switch clear SERVICE CLASS [--reason TEXT]\n"
		"       sluicectl switch ls [--json]\n"
		"       sluicectl switch log [--last N]\n"
		"  CLASS: L0..L3   PCT: 0..100 (\"30\" or \"30%%\")   DUR: 90s, 5m, 2h, 1d, 1h30m (at most 30d)\n"
		"exit codes: 0 ok, 1 runtime failure or permission denied, 2 bad usage or input\n");
}

/* Parse "--opt VALUE" / "--opt=VALUE" pairs after the positional arguments.
 * names[] NULL-terminated; vals[i] receives the value. Positional args go to pos[]. */
static int parse_opts(int argc, char **argv, int first, const char *const *names,
		      const char **vals, const char **pos, int max_pos, int *n_pos)
{
	*n_pos = 0;
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		int found = 0;

		if (a[0] == '-' && a[1] == '-' && a[2]) {
			for (int k = 0; names[k]; k++) {
				size_t l = strlen(names[k]);
				if (strncmp(a, names[k], l))
					continue;
				if (a[l] == '=') {
					vals[k] = a + l + 1;
				} else if (a[l] == 0) {
					if (i + 1 >= argc) {
						fprintf(stderr, "sluicectl: %s needs a value\n", a);
						return -1;
					}
					vals[k] = argv[++i];
				} else {
					continue;
				}
				found = 1;
				break;
			}
			if (!found) {
				fprintf(stderr, "sluicectl: unknown option '%s'\n", a);
				return -1;
			}
			continue;
		}
		if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
			fprintf(stderr, "sluicectl: unknown option '%s'\n", a);
			return -1;
		}
		if (*n_pos >= max_pos) {
			fprintf(stderr, "sluicectl: unexpected argument '%s'\n", a);
			return -1;
		}
		pos[(*n_pos)++] = a;
	}
	return 0;
}

static void warn_unknown_services(const struct cli_opts *o)
{
	if (o->n_known < 0)
		fprintf(stderr, "sluicectl: warning: neither the pinned maps (%s) nor the config (%s) "
			"could be read: service names are NOT checked\n", o->pin_dir ? o->pin_dir : "?",
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
		fprintf(stderr, "sluicectl: ERROR: the change to %s/%s IS IN FORCE but was NOT "
			"recorded in the audit log: %s\n  write it into the incident notes by hand\n",
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

static int do_set(int argc, char **argv, struct cli_opts *o)
{
	static const char *const names[] = { "--shed", "--reason", "--ttl", "--owner", NULL };
	const char *vals[4] = { 0 }, *pos[2], *known[SLUICE_MAX_SERVICES];
	char err[512], note[1024], path[PATH_MAX], owner[SW_OWNER_LEN], ttlbuf[24], old_s[160];
	struct sw_switch sw, old;
	static struct sw_set set;
	uint64_t now = wall_now();
	int n_pos, fd, had, rc = EXIT_OK;

	if (parse_opts(argc, argv, 2, names, vals, pos, 2, &n_pos))
		return switch_usage(stderr), EXIT_USAGE;
	if (n_pos != 2) {
		fprintf(stderr, "sluicectl: switch set needs SERVICE and CLASS\n");
		return switch_usage(stderr), EXIT_USAGE;
	}
	for (int k = 0; k < 3; k++)
		if (!vals[k]) {
			fprintf(stderr, "sluicectl: switch set: %s is required%s\n", names[k],
				k == 2 ? " (there are no permanent switches)" : "");
			return switch_usage(stderr), EXIT_USAGE;
		}
	if (vals[3])
		snprintf(owner, sizeof(owner), "%s", vals[3]);
	else
		switch_caller(owner, sizeof(owner));
	warn_unknown_services(o);
	known_list(o, known);
	if (sw_make(&sw, pos[0], pos[1], vals[0], vals[1], vals[2], owner, now,
		    o->n_known >= 0 ? known : NULL, o->n_known, err, sizeof(err))) {
		fprintf(stderr, "sluicectl: switch set: %s\n", err);
		return EXIT_USAGE;
	}
	if (switch_may_change(group_of(o), err, sizeof(err))) {
		fprintf(stderr, "sluicectl: switch set: %s; nothing changed\n", err);
		return EXIT_RUNTIME;
	}
	fd = switch_writer_open(o->state_dir, now, &set, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "sluicectl: switch set: %s\n", err);
		return EXIT_RUNTIME;
	}
	if (note[0])
		fprintf(stderr, "sluicectl: %s\n", note);
	had = sw_set_put(&set, &sw, &old);
	if (had < 0) {
		sw_unlock(fd);
		fprintf(stderr, "sluicectl: switch set: the switch set is full (%d switches); "
			"nothing changed\n", SW_MAX);
		return EXIT_RUNTIME;
	}
	if (switch_writer_save(path, &set, err, sizeof(err))) {
		sw_unlock(fd);
		fprintf(stderr, "sluicectl: switch set: %s; nothing changed\n", err);
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

static int do_clear(int argc, char **argv, struct cli_opts *o)
{
	static const char *const names[] = { "--reason", NULL };
	const char *vals[1] = { 0 }, *pos[2], *known[SLUICE_MAX_SERVICES];
	char err[512], note[1024], path[PATH_MAX], old_s[160];
	struct sw_switch old;
	static struct sw_set set;
	uint64_t now = wall_now();
	int n_pos, fd, cls, rc = EXIT_OK;

	if (parse_opts(argc, argv, 2, names, vals, pos, 2, &n_pos))
		return switch_usage(stderr), EXIT_USAGE;
	if (n_pos != 2) {
		fprintf(stderr, "sluicectl: switch clear needs SERVICE and CLASS\n");
		return switch_usage(stderr), EXIT_USAGE;
	}
	if (vals[0] && (strlen(vals[0]) >= SW_REASON_LEN || !vals[0][strspn(vals[0], " \t")])) {
		fprintf(stderr, "sluicectl: switch clear: --reason must be non-blank and shorter "
			"than %d bytes\n", SW_REASON_LEN);
		return EXIT_USAGE;
	}
	/* The class must be valid. The service is checked against the known ones, except when
	 * the file holds a switch for it (a service removed from the config can still be
	 * cleared). */
	if (sw_check_target(pos[0], pos[1], NULL, -1, &cls, err, sizeof(err))) {
		fprintf(stderr, "sluicectl: switch clear: %s\n", err);
		return EXIT_USAGE;
	}
	warn_unknown_services(o);
	known_list(o, known);
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
			fprintf(stderr, "sluicectl: switch clear: %s\n", err);
			return EXIT_USAGE;
		}
	}
	if (switch_may_change(group_of(o), err, sizeof(err))) {
		fprintf(stderr, "sluicectl: switch clear: %s; nothing changed\n", err);
		return EXIT_RUNTIME;
	}
	fd = switch_writer_open(o->state_dir, now, &set, path, sizeof(path), note, sizeof(note),
				err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "sluicectl: switch clear: %s\n", err);
		return EXIT_RUNTIME;
	}
	if (note[0])
		fprintf(stderr, "sluicectl: %s\n", note);
	if (!sw_set_clear(&set, pos[0], cls, &old)) {
		if (note[0] && switch_writer_save(path, &set, err, sizeof(err))) {
			fprintf(stderr, "sluicectl: switch clear: %s\n", err);
			rc = EXIT_RUNTIME;
		}
		sw_unlock(fd);
		printf("switch clear: no switch for %s %s; nothing to clear\n", pos[0],
		       sw_class_str(cls));
		return rc;
	}
	if (switch_writer_save(path, &set, err, sizeof(err))) {
		sw_unlock(fd);
		fprintf(stderr, "sluicectl: switch clear: %s; nothing changed\n", err);
		return EXIT_RUNTIME;
	}
	if (audit_one(o, now, "switch clear", old.service, cls, &old, NULL,
		      vals[0] ? vals[0] : old.reason))
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

static int do_ls(int argc, char **argv, struct cli_opts *o)
{
	static const char *const names[] = { NULL };
	const char *pos[1];
	char path[PATH_MAX], err[1024];
	static struct sw_set set;
	uint64_t now = wall_now();
	int n_pos, json = o->json;

	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--json")) {
			json = 1;
			for (int j = i; j < argc - 1; j++)
				argv[j] = argv[j + 1];
			argc--;
			i--;
		}
	if (parse_opts(argc, argv, 2, names, NULL, pos, 0, &n_pos))
		return switch_usage(stderr), EXIT_USAGE;
	if (state_path(path, sizeof(path), o->state_dir, SW_FILE_NAME)) {
		fprintf(stderr, "sluicectl: state directory path too long\n");
		return EXIT_USAGE;
	}
	if (sw_load(path, &set, err, sizeof(err))) {
		fprintf(stderr, "sluicectl: %s\n", err);
		if (json)
			print_ls_json(&set, now);       /* the failed load left it empty */
		return EXIT_RUNTIME;
	}
	if (json && print_ls_json(&set, now)) {
		fprintf(stderr, "sluicectl: out of memory\n");
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

static int do_log(int argc, char **argv, struct cli_opts *o)
{
	static const char *const names[] = { "--last", NULL };
	const char *vals[1] = { 0 }, *pos[1];
	char path[PATH_MAX], err[512];
	int n_pos, last = 0, bad;

	if (parse_opts(argc, argv, 2, names, vals, pos, 0, &n_pos))
		return switch_usage(stderr), EXIT_USAGE;
	if (vals[0]) {
		char *end;
		long v;

		errno = 0;
		v = strtol(vals[0], &end, 10);
		if (errno || end == vals[0] || *end || v < 1 || v > 1000000) {
			fprintf(stderr, "sluicectl: switch log: --last must be a whole number "
				"1..1000000, not '%s'\n", vals[0]);
			return EXIT_USAGE;
		}
		last = (int)v;
	}
	if (state_path(path, sizeof(path), o->state_dir, AUDIT_FILE_NAME)) {
		fprintf(stderr, "sluicectl: state directory path too long\n");
		return EXIT_USAGE;
	}
	bad = audit_print(stdout, path, last, err, sizeof(err));
	if (bad < 0) {
		fprintf(stderr, "sluicectl: switch log: %s\n", err);
		return EXIT_RUNTIME;
	}
	if (bad > 0) {
		fprintf(stderr, "sluicectl: switch log: %d unreadable record(s) in %s\n", bad, path);
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int cli_switch(int argc, char **argv, struct cli_opts *o)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (!sub) {
		switch_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
		switch_usage(stdout);
		return EXIT_OK;
	}
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			switch_usage(stdout);
			return EXIT_OK;
		}
	if (!strcmp(sub, "set"))
		return do_set(argc, argv, o);
	if (!strcmp(sub, "clear"))
		return do_clear(argc, argv, o);
	if (!strcmp(sub, "ls") || !strcmp(sub, "list"))
		return do_ls(argc, argv, o);
	if (!strcmp(sub, "log"))
		return do_log(argc, argv, o);
	fprintf(stderr, "sluicectl: unknown switch command '%s'\n", sub);
	switch_usage(stderr);
	return EXIT_USAGE;
}

/* ---- cascade clear ---- */

int cli_cascade(int argc, char **argv, struct cli_opts *o)
{
	char err[512], user[AUDIT_USER_LEN], iso[SLUICE_ISO_LEN], path[PATH_MAX];
	struct sluice_maps m;
	uint64_t now = wall_now();

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: sluicectl cascade clear\n"
		       "  ask sluiced to lift the cascade suppression of automatic breaker opening\n");
		return EXIT_OK;
	}
	if (argc != 2 || strcmp(argv[1], "clear")) {
		fprintf(stderr, "usage: sluicectl cascade clear\n");
		return EXIT_USAGE;
	}
	if (switch_may_change(group_of(o), err, sizeof(err))) {
		fprintf(stderr, "sluicectl: cascade clear: %s; nothing requested\n", err);
		return EXIT_RUNTIME;
	}
	if (state_dir_ensure(o->state_dir, err, sizeof(err))) {
		fprintf(stderr, "sluicectl: cascade clear: %s\n", err);
		return EXIT_RUNTIME;
	}
	switch_caller(user, sizeof(user));
	if (cascade_clear_request(o->state_dir, user, (uint32_t)getuid(), now, err, sizeof(err))) {
		fprintf(stderr, "sluicectl: cascade clear: %s\n", err);
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
			fprintf(stderr, "sluicectl: warning: sluiced's heartbeat is stale: the request "
				"takes effect when it runs again\n");
		maps_close(&m);
	} else {
		fprintf(stderr, "sluicectl: warning: nothing attached at %s: the request takes "
			"effect when sluiced starts\n", o->pin_dir ? o->pin_dir : "?");
	}
	return EXIT_OK;
}
