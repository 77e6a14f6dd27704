// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl status | hist | detach: read-only views of the pinned maps, and removal; each
 * command's table is at the end of the file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "kernel/status.h"
#include "kernel/attach.h"
#include "kernel/layout.h"

int cli_open_maps(const struct cli_opts *o, struct sluice_maps *m, const char *verb)
{
	__u32 pinned = 0;
	int err;

	/* A newer sluiced's maps may hold other structs at the same names: read as this build's,
	 * they would show wrong numbers (or take a request in the wrong shape), worse than none. */
	if (layout_pinned_version(o->pin_dir, &pinned) == 0 && pinned > layout_version()) {
		log_error("%s: the maps under %s are layout %u, written by a newer sluiced; this "
			  "sluicectl reads layouts up to %u and would misread them: use the sluicectl "
			  "that came with the running sluiced", verb, o->pin_dir, pinned,
			  layout_version());
		return EXIT_RUNTIME;
	}
	err = maps_open_pinned(o->pin_dir, m);
	if (err == -ENOENT) {
		log_error("%s: nothing attached at %s (is sluiced running?)", verb, o->pin_dir);
		return EXIT_RUNTIME;
	}
	if (err) {
		log_error("%s: cannot open maps under %s: %s%s", verb, o->pin_dir,
			strerror(-err), err == -EPERM || err == -EACCES ? " (run as root)" : "");
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

struct status_args {
	int json, wide, no_rates;
};

static const struct cliopt status_opts[] = {
	CLIOPT_BOOL(struct status_args, json, "json", 0, "one JSON object instead of the table"),
	CLIOPT_BOOL(struct status_args, wide, "wide", 0,
		    "every column: rejections by reason, errors, 429s, retransmits, fail-open "
		    "(wider than 120 columns)"),
	CLIOPT_BOOL(struct status_args, no_rates, "no-rates", 0,
		    "answer at once: skip the quarter second that measures req/s (it then reads "
		    "'-', rate_per_s -1)"),
	CLIOPT_TABLE_END,
};

static int do_status(const void *args, void *ctx)
{
	const struct status_args *a = args;
	struct cli_opts *o = ctx;
	static struct status_snapshot snap, first;
	struct sluice_maps m;
	int rc;

	if ((rc = cli_open_maps(o, &m, "status")))
		return rc;
	/* Two snapshots a quarter second apart give the request rates; a script that polls
	 * only counters, in-flight or state need not wait for them. */
	if (a->no_rates) {
		if (status_collect(&m, &snap, 1))
			goto unreadable;
	} else if (status_collect(&m, &first, 0) ||
		   (usleep(250000), status_collect(&m, &snap, 1))) {
		goto unreadable;
	}
	maps_close(&m);
	if (!a->no_rates)
		status_rates(&first, &snap);
	status_collect_ifaces(&snap, o->pin_dir);
	if ((o->json || a->json) && status_print_json(stdout, &snap)) {
		log_error("out of memory");
		return EXIT_RUNTIME;
	}
	if (!(o->json || a->json))
		status_print_table(stdout, &snap, a->wide);
	return EXIT_OK;
unreadable:
	log_error("cannot read maps under %s", o->pin_dir);
	maps_close(&m);
	return EXIT_RUNTIME;
}

struct hist_args {
	const char *service, *class;
};

static const struct cliopt hist_opts[] = {
	CLIOPT_POS(struct hist_args, service, "SERVICE", 1, "an attached service"),
	CLIOPT_POS(struct hist_args, class, "CLASS", 0, "L0, L1, L2 or L3 (default: every class)"),
	CLIOPT_TABLE_END,
};

static int do_hist(const void *args, void *ctx)
{
	const struct hist_args *a = args;
	struct cli_opts *o = ctx;
	static struct status_snapshot snap;
	struct sluice_maps m;
	int cls = -1, rc;

	if (a->class && (cls = sluice_class_from_name(a->class)) < 0) {
		log_error("hist: bad class '%s': expected L0, L1, L2 or L3", a->class);
		return EXIT_USAGE;
	}
	if ((rc = cli_open_maps(o, &m, "hist")))
		return rc;
	rc = status_collect(&m, &snap, 0);
	maps_close(&m);
	if (rc) {
		log_error("cannot read maps under %s", o->pin_dir);
		return EXIT_RUNTIME;
	}
	for (int i = 0; i < snap.n; i++)
		if (!strcmp(snap.s[i].svc.name, a->service)) {
			status_print_hist(stdout, &snap.s[i], cls);
			return EXIT_OK;
		}
	log_error("hist: unknown service '%s'", a->service);
	return EXIT_USAGE;
}

static int do_detach(const void *args, void *ctx)
{
	struct cli_opts *o = ctx;
	char err[256];
	int rc;

	rc = detach_all(o->pin_dir, err, sizeof(err));
	if (rc == -ENOENT) {
		log_error("%s", err);
		return EXIT_RUNTIME;
	}
	if (rc) {
		log_error("detach: %s", err);
		return EXIT_RUNTIME;
	}
	printf("detached: programs, links and maps under %s removed\n", o->pin_dir);
	return EXIT_OK;
}

/* ---- the commands ---- */

const struct clicmd cli_cmd_status = {
	.name = "status",
	.summary = "per service and class: limit, in-flight, outcomes",
	.opts = status_opts,
	.args_size = sizeof(struct status_args),
	.notes = "exit codes: 0 ok, 1 nothing attached or the maps cannot be read",
	.example = "sluicectl status --json",
	.run = do_status,
};

const struct clicmd cli_cmd_hist = {
	.name = "hist",
	.summary = "latency histogram of a service",
	.opts = hist_opts,
	.args_size = sizeof(struct hist_args),
	.notes = "exit codes: 0 ok, 1 nothing attached, 2 unknown service or class",
	.example = "sluicectl hist web L0",
	.run = do_hist,
};

const struct clicmd cli_cmd_detach = {
	.name = "detach",
	.summary = "remove programs, links and maps from the node",
	.notes = "A pin dir that is not on a BPF filesystem holds nothing of sluice: nothing there "
		 "is removed.\nexit codes: 0 removed, 1 nothing attached or removal failed",
	.example = "sluicectl detach",
	.run = do_detach,
};
