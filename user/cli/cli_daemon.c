// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl's side of the operator socket: every changing command goes through cli_change(),
 * so each one finds the daemon the same way and judges its answer the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/jsonio.h"
#include "common/log.h"
#include "ops/switches.h"
#include "ops/switchstate.h"

/* sluiced answers at a tick: the first after the change when the verdict map shows it, else
 * the second (daemon/opserver.h, OPS_VERIFY_TICKS), or a tick later still while the audit
 * record waits its second (OPS_AUDIT_WAIT_MS). Allowed: this margin plus three ticks. */
#define ANSWER_WAIT_MS 5000
#define ANSWER_TICKS   3

int cli_reason_refused(const char *verb, const char *reason)
{
	char longer[48];
	const char *why = NULL;

	/* A reason given is held to a switch reason's rules, here for exit 2: sluiced refuses
	 * a long one too, but as exit 1, and would audit a blank one as the reason. */
	if (!reason)
		return 0;
	if (!reason[strspn(reason, " \t")])
		why = "must not be blank (say why, e.g. an incident id)";
	else if (strlen(reason) >= SW_REASON_LEN) {
		snprintf(longer, sizeof(longer), "is longer than %d bytes", SW_REASON_LEN - 1);
		why = longer;
	} else {
		why = sw_new_text_problem(reason);
	}
	if (why)
		log_error("%s: --reason %s", verb, why);
	return why != NULL;
}

/* How long to wait for sluiced's answer. Its ticks are control_interval_ms apart, which the
 * config may set up to a minute: a fixed wait shorter than three of them would call a change
 * sluiced applies "no answer, whether it applied is unknown", exit 1. The config is the
 * daemon's own unless --config names another; without one, the default interval. */
static int answer_wait_ms(const struct cli_opts *o)
{
	long long tick_ms = o->cfg ? o->cfg->control_interval_ms : 100;

	return (int)(ANSWER_WAIT_MS + ANSWER_TICKS * tick_ms);
}

/* Whether two names of a directory are the same directory: "/var/lib/sluice/", a symlink to
 * it or a relative name are the daemon's "/var/lib/sluice", not another one. */
static int same_dir(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!strcmp(a, b))
		return 1;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && S_ISDIR(sa.st_mode) &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The confirmation of a change sluiced put in force: a line of text, or with --json one JSON
 * object, sluiced's answer as it came ("ok", "message", "applied", "audited", "ticks",
 * "maps", ...) with "op" and the daemon's "pid" and "state_dir". */
static void print_confirmation(const struct cli_opts *o, const char *verb, json_t *ans)
{
	const char *msg = opp_str(ans, "message");
	long long ticks = json_integer_value(json_object_get(ans, "ticks"));

	if (o->json) {
		json_object_set_new(ans, "op", json_string(verb));
		json_object_set_new(ans, "pid", json_integer((json_int_t)o->rec.pid));
		json_object_set_new(ans, "state_dir", jsonio_text(o->rec.state_dir));
		if (jsonio_print_line(stdout, ans))
			log_error("%s: out of memory printing the answer", verb);
		return;
	}
	if (ticks > 0)
		printf("%s: %s (in the verdict map after %lld tick%s; sluiced pid %ld, state dir "
		       "%s)\n", verb, msg ? msg : "done", ticks, ticks == 1 ? "" : "s", o->rec.pid,
		       o->rec.state_dir);
	else
		printf("%s: %s (sluiced pid %ld, state dir %s)\n", verb, msg ? msg : "done",
		       o->rec.pid, o->rec.state_dir);
}

int cli_change(const struct cli_opts *o, const char *verb, json_t *req)
{
	char err[512], user[AUDIT_USER_LEN];
	const char *msg;
	json_t *ans = NULL;
	int fd, rc = EXIT_RUNTIME;

	if (!req) {
		/* json_pack refuses a string that is not UTF-8 (a file name, say): nothing sent */
		log_error("%s: cannot build the request (an argument is not valid UTF-8?); "
			  "nothing changed", verb);
		return EXIT_USAGE;
	}
	if (!o->have_rec) {
		log_error("%s: no sluiced is running to apply it (%s); nothing changed", verb,
			  o->rec_err);
		goto out;
	}
	if (o->state_dir_given && !same_dir(o->state_dir, o->rec.state_dir)) {
		log_error("%s: the running sluiced (pid %ld) keeps its switches in %s, not %s: "
			  "nothing changed (drop --state-dir / $SLUICE_STATE_DIR, or point "
			  "--run-dir at the daemon that uses %s)", verb, o->rec.pid,
			  o->rec.state_dir, o->state_dir, o->state_dir);
		goto out;
	}
	if (o->pin_dir_given && !same_dir(o->pin_dir, o->rec.pin_dir)) {
		log_error("%s: the running sluiced (pid %ld) pins its maps under %s, not %s: "
			  "nothing changed", verb, o->rec.pid, o->rec.pin_dir, o->pin_dir);
		goto out;
	}
	switch_caller(user, sizeof(user));
	json_object_set_new(req, "op", json_string(verb));
	json_object_set_new(req, "user", json_string(user));
	json_object_set_new(req, "state_dir", json_string(o->rec.state_dir));
	fd = opp_connect(o->rec.socket, err, sizeof(err));
	if (fd < 0) {
		log_error("%s: sluiced (pid %ld) does not answer: %s; nothing changed", verb,
			  o->rec.pid, err);
		goto out;
	}
	if (opp_send(fd, req, err, sizeof(err)) ||
	    opp_recv(fd, answer_wait_ms(o), &ans, err, sizeof(err))) {
		close(fd);
		log_error("%s: no answer from sluiced (pid %ld): %s; whether it applied the change "
			  "is unknown: check `sluicectl switch ls` and `switch log`", verb,
			  o->rec.pid, err);
		goto out;
	}
	close(fd);
	msg = opp_str(ans, "message");
	if (!json_is_true(json_object_get(ans, "ok"))) {
		log_error("%s: refused by sluiced: %s", verb,
			  opp_str(ans, "error") ? opp_str(ans, "error") : "(no reason given)");
		goto out;
	}
	if (!json_is_true(json_object_get(ans, "applied"))) {
		char *maps = json_dumps(json_object_get(ans, "maps"), JSON_COMPACT);
		log_error("%s: sluiced took it (%s) but the verdict map does not show it after "
			  "%lld tick(s): %s", verb, msg ? msg : "",
			  (long long)json_integer_value(json_object_get(ans, "ticks")),
			  maps ? maps : "[]");
		free(maps);
		goto out;
	}
	print_confirmation(o, verb, ans);
	if (!json_is_true(json_object_get(ans, "audited"))) {
		log_error("%s: IN FORCE but NOT (yet) saved and recorded in the audit log: %s", verb,
			  opp_str(ans, "audit_error") ? opp_str(ans, "audit_error") : "?");
		goto out;
	}
	rc = EXIT_OK;
out:
	json_decref(req);
	json_decref(ans);
	return rc;
}
