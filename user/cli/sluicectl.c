// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl: the operator's CLI. Global options, then a subcommand (see usage()). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "cli/cli.h"
#include "kernel/bpfmaps.h"

#define DEFAULT_CONFIG "/etc/sluice/sluice.yaml"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluicectl [--pin-dir DIR] [--state-dir DIR] [--config FILE] COMMAND ...\n"
		"  status [--json]                     per service and class: limit, in-flight, outcomes\n"
		"  top [--interval S]                  live view\n"
		"  hist SERVICE [CLASS]                request latency histogram\n"
		"  switch set SERVICE CLASS --shed PCT --reason TEXT --ttl DUR [--owner NAME]\n"
		"  switch clear SERVICE CLASS [--reason TEXT]\n"
		"  switch ls [--json] | switch log [--last N]\n"
		"  plan check FILE | plan show FILE\n"
		"  plan apply FILE LEVEL --reason TEXT --ttl DUR [--owner NAME]\n"
		"  budget check FILE                   worst-case timeout path of call chains\n"
		"  cascade clear                       lift cascade suppression of breakers\n"
		"  detach                              remove programs, links and maps\n"
		"exit codes: 0 ok, 1 runtime failure (nothing attached, I/O), 2 bad usage or input\n");
}

static int quiet_libbpf(enum libbpf_print_level l, const char *fmt, va_list ap)
{
	return 0;
}

/* Which services exist: from the pinned maps when attached, else from the config. */
static void load_known(struct cli_opts *o)
{
	struct sluice_maps m;

	o->n_known = -1;
	if (maps_open_pinned(o->pin_dir, &m) == 0) {
		o->n_known = 0;
		for (int s = 0; s < SLUICE_MAX_SERVICES; s++) {
			struct sluice_service sv;
			if (maps_read_service(&m, s, &sv) == 0 && sv.name[0] && sv.port)
				snprintf(o->known[o->n_known++], SLUICE_NAME_LEN, "%s", sv.name);
		}
		maps_close(&m);
		return;
	}
	if (o->cfg) {
		o->n_known = o->cfg->n_services;
		for (int i = 0; i < o->cfg->n_services; i++)
			snprintf(o->known[i], SLUICE_NAME_LEN, "%s", o->cfg->services[i].name);
	}
}

int main(int argc, char **argv)
{
	static struct sluice_config cfg;
	static struct cli_opts o;
	struct doc_errors errs;
	const char *pin = getenv("SLUICE_PIN_DIR"), *state = getenv("SLUICE_STATE_DIR");
	int i;

	libbpf_set_print(quiet_libbpf);
	o.config_path = getenv("SLUICE_CONFIG") ? getenv("SLUICE_CONFIG") : DEFAULT_CONFIG;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return EXIT_OK;
		}
		if (!strcmp(a, "--json")) {
			o.json = 1;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "sluicectl: option %s needs a value\n", a);
			return EXIT_USAGE;
		}
		if (!strcmp(a, "--pin-dir"))
			pin = argv[++i];
		else if (!strcmp(a, "--state-dir"))
			state = argv[++i];
		else if (!strcmp(a, "--config"))
			o.config_path = argv[++i];
		else {
			fprintf(stderr, "sluicectl: unknown option '%s'\n", a);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* The config is optional for sluicectl: it supplies defaults for the directories,
	 * the switch group and the service names when nothing is attached. */
	if (sluice_config_load(o.config_path, &cfg, &errs) == 0)
		o.cfg = &cfg;
	o.pin_dir = pin ? pin : o.cfg ? cfg.pin_dir : SLUICE_PIN_DIR;
	o.state_dir = state ? state : o.cfg ? cfg.state_dir : "/var/lib/sluice";
	load_known(&o);

	const char *cmd = argv[i];
	int sub_argc = argc - i;
	char **sub_argv = argv + i;

	if (!strcmp(cmd, "status"))
		return cli_status(sub_argc, sub_argv, &o);
	if (!strcmp(cmd, "top"))
		return cli_top(sub_argc, sub_argv, &o);
	if (!strcmp(cmd, "hist"))
		return cli_hist(sub_argc, sub_argv, &o);
	if (!strcmp(cmd, "switch"))
		return cli_switch(sub_argc, sub_argv, &o);
	if (!strcmp(cmd, "plan"))
		return cli_plan(sub_argc, sub_argv, &o);
	if (!strcmp(cmd, "budget"))
		return cli_budget(sub_argc, sub_argv, &o);
	if (!strcmp(cmd, "cascade"))
		return cli_cascade(sub_argc, sub_argv, &o);
	if (!strcmp(cmd, "detach"))
		return cli_detach(sub_argc, sub_argv, &o);
	fprintf(stderr, "sluicectl: unknown command '%s'\n", cmd);
	usage(stderr);
	return EXIT_USAGE;
}
