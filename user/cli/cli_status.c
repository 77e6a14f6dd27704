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

static int open_maps(const struct cli_opts *o, struct sluice_maps *m)
{
	int err = maps_open_pinned(o->pin_dir, m);

	if (err == -ENOENT) {
		log_error("nothing attached at %s (is sluiced running?)", o->pin_dir);
		return EXIT_RUNTIME;
	}
	if (err) {
		log_error("cannot open maps under %s: %s%s", o->pin_dir,
			strerror(-err), err == -EPERM || err == -EACCES ? " (run as root)" : "");
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

struct status_args {
	int json, wide;
};

static const struct cliopt status_opts[] = {
	CLIOPT_BOOL(struct status_args, json, "json", 0, "one JSON object instead of the table"),
	CLIOPT_BOOL(struct status_args, wide, "wide", 0,
		    "every column: rejections by reason, errors, 429s, retransmits, fail-open "
		    "(wider than 120 columns)"),
	CLIOPT_TABLE_END,
};

static int do_status(const void *args, void *ctx)
{
	const struct status_args *a = args;
	struct cli_opts *o = ctx;
	static struct status_snapshot snap, first;
	struct sluice_maps m;
	int rc;

	if ((rc = open_maps(o, &m)))
		return rc;
	/* Two snapshots a quarter second apart give the request rates. */
	if (status_collect(&m, &first, 0) || (usleep(250000), status_collect(&m, &snap, 1))) {
		log_error("cannot read maps under %s", o->pin_dir);
		maps_close(&m);
		return EXIT_RUNTIME;
	}
	maps_close(&m);
	status_rates(&first, &snap);
	status_collect_ifaces(&snap, o->pin_dir);
	if ((o->json || a->json) && status_print_json(stdout, &snap)) {
		log_error("out of memory");
		return EXIT_RUNTIME;
	}
	if (!(o->json || a->json))
		status_print_table(stdout, &snap, a->wide);
	return EXIT_OK;
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
	if ((rc = open_maps(o, &m)))
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
	.notes = "exit codes: 0 removed, 1 nothing attached or removal failed",
	.example = "sluicectl detach",
	.run = do_detach,
};
