// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl status | hist | detach: read-only views of the pinned maps, and removal. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kernel/status.h"
#include "kernel/attach.h"

static int open_maps(const struct cli_opts *o, struct sluice_maps *m)
{
	int err = maps_open_pinned(o->pin_dir, m);

	if (err == -ENOENT) {
		fprintf(stderr, "sluicectl: nothing attached at %s (is sluiced running?)\n", o->pin_dir);
		return EXIT_RUNTIME;
	}
	if (err) {
		fprintf(stderr, "sluicectl: cannot open maps under %s: %s%s\n", o->pin_dir,
			strerror(-err), err == -EPERM || err == -EACCES ? " (run as root)" : "");
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int cli_status(int argc, char **argv, struct cli_opts *o)
{
	static struct status_snapshot snap, first;
	struct sluice_maps m;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			o->json = 1;
		} else {
			fprintf(stderr, "sluicectl status: unknown argument '%s'\nusage: sluicectl status [--json]\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if ((rc = open_maps(o, &m)))
		return rc;
	/* Two snapshots a quarter second apart give the request rates. */
	if (status_collect(&m, &first, 0) || (usleep(250000), status_collect(&m, &snap, 1))) {
		fprintf(stderr, "sluicectl: cannot read maps under %s\n", o->pin_dir);
		maps_close(&m);
		return EXIT_RUNTIME;
	}
	maps_close(&m);
	status_rates(&first, &snap);
	if (o->json && status_print_json(stdout, &snap)) {
		fprintf(stderr, "sluicectl: out of memory\n");
		return EXIT_RUNTIME;
	}
	if (!o->json)
		status_print_table(stdout, &snap);
	return EXIT_OK;
}

int cli_hist(int argc, char **argv, struct cli_opts *o)
{
	static struct status_snapshot snap;
	struct sluice_maps m;
	int cls = -1, rc;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: sluicectl hist SERVICE [CLASS]\n");
		return EXIT_USAGE;
	}
	if (argc == 3 && (cls = sluice_class_from_name(argv[2])) < 0) {
		fprintf(stderr, "sluicectl hist: bad class '%s': expected L0, L1, L2 or L3\n", argv[2]);
		return EXIT_USAGE;
	}
	if ((rc = open_maps(o, &m)))
		return rc;
	rc = status_collect(&m, &snap, 0);
	maps_close(&m);
	if (rc) {
		fprintf(stderr, "sluicectl: cannot read maps under %s\n", o->pin_dir);
		return EXIT_RUNTIME;
	}
	for (int i = 0; i < snap.n; i++)
		if (!strcmp(snap.s[i].svc.name, argv[1])) {
			status_print_hist(stdout, &snap.s[i], cls);
			return EXIT_OK;
		}
	fprintf(stderr, "sluicectl hist: unknown service '%s'\n", argv[1]);
	return EXIT_USAGE;
}

int cli_detach(int argc, char **argv, struct cli_opts *o)
{
	char err[256];
	int rc;

	if (argc != 1) {
		fprintf(stderr, "usage: sluicectl detach\n");
		return EXIT_USAGE;
	}
	rc = detach_all(o->pin_dir, err, sizeof(err));
	if (rc == -ENOENT) {
		fprintf(stderr, "sluicectl: %s\n", err);
		return EXIT_RUNTIME;
	}
	if (rc) {
		fprintf(stderr, "sluicectl detach: %s\n", err);
		return EXIT_RUNTIME;
	}
	printf("detached: programs, links and maps under %s removed\n", o->pin_dir);
	return EXIT_OK;
}
