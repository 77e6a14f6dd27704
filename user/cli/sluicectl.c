// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl: the operator's CLI. Global options, then a command from cli_commands[] with its
 * own arguments; every command line is parsed from the commands' tables (common/cliopt.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "common/log.h"
#include "kernel/bpfmaps.h"
#include "kernel/bpflog.h"

#define DEFAULT_CONFIG "/etc/sluice/sluice.yaml"

/* Which services exist: from the pinned maps when attached, else from the config. */
static void load_known(struct cli_opts *o)
{
	struct sluice_maps m;
	int cap = 0;

	o->n_known = -1;
	if (maps_open_pinned(o->pin_dir, &m) == 0) {
		struct sluice_service *all = calloc((size_t)m.n_slots, sizeof(*all));

		cap = m.n_slots;
		o->known = calloc((size_t)cap + 1, sizeof(*o->known));
		if (all && o->known &&
		    maps_read_array(m.services, 0, (__u32)m.n_slots, sizeof(*all), all, NULL) == 0) {
			o->n_known = 0;
			for (int s = 0; s < m.n_slots; s++)
				if (all[s].name[0] && all[s].port)
					snprintf(o->known[o->n_known++], SLUICE_NAME_LEN, "%s", all[s].name);
		}
		free(all);
		maps_close(&m);
	} else if (o->cfg) {
		cap = o->cfg->n_services;
		o->known = calloc((size_t)cap + 1, sizeof(*o->known));
		if (o->known) {
			o->n_known = o->cfg->n_services;
			for (int i = 0; i < o->cfg->n_services; i++)
				snprintf(o->known[i], SLUICE_NAME_LEN, "%s", o->cfg->services[i].name);
		}
	}
	o->known_ptr = calloc((size_t)cap + 1, sizeof(*o->known_ptr));
	if (!o->known_ptr)
		o->n_known = -1;
	for (int i = 0; i < o->n_known; i++)
		o->known_ptr[i] = o->known[i];
}

/* An environment variable that is set and not empty: `SLUICE_STATE_DIR=$UNSET sluicectl ...`
 * means no state dir, not "" (which made the paths "/switches.json", "/audit.log": `switch
 * ls` read no file there and said all traffic was normal). */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

/* 1 (said) when a directory or file option was given empty: `--state-dir ""` names nothing. */
static int empty_path_given(const struct cli_global_args *g)
{
	const struct { const char *v, *name; } opt[] = {
		{ g->pin_dir, "--pin-dir" }, { g->state_dir, "--state-dir" },
		{ g->config, "--config" }, { g->run_dir, "--run-dir" },
	};

	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
		if (opt[i].v && !opt[i].v[0]) {
			log_error("%s: must not be empty", opt[i].name);
			return 1;
		}
	return 0;
}

/* The directories and the config: flags first, then the environment, then what the running
 * sluiced publishes (so that no flag is needed to reach it), then the config file. */
static void resolve(struct cli_opts *o, const struct cli_global_args *g,
		    struct sluice_config *cfg)
{
	const char *pin = g->pin_dir ? g->pin_dir : env("SLUICE_PIN_DIR");
	const char *state = g->state_dir ? g->state_dir : env("SLUICE_STATE_DIR");
	const char *conf = g->config ? g->config : env("SLUICE_CONFIG");
	struct doc_errors errs;
	int r;

	o->run_dir = g->run_dir ? g->run_dir : env("SLUICE_RUN_DIR") ? env("SLUICE_RUN_DIR")
		   : OPP_DEFAULT_RUN_DIR;
	r = opp_record_read(o->run_dir, &o->rec, o->rec_err, sizeof(o->rec_err));
	o->have_rec = r == 0;
	if (r)
		log_debug("%s", o->rec_err);
	o->config_path = conf ? conf : o->have_rec ? o->rec.config : DEFAULT_CONFIG;
	o->json = g->json;
	o->state_dir_given = state != NULL;
	o->pin_dir_given = pin != NULL;
	/* The config is optional for sluicectl: it supplies defaults for the directories,
	 * the switch group and the service names when nothing is attached. */
	if (sluice_config_load(o->config_path, cfg, &errs) == 0)
		o->cfg = cfg;
	else if (conf) {
		/* asked for by name (--config, $SLUICE_CONFIG): its state_dir, pin_dir and service
		 * names are what the caller means, so falling back to the defaults is said aloud */
		char at[24] = "";

		if (errs.e[0].line > 0)
			snprintf(at, sizeof(at), "line %d: ", errs.e[0].line);
		log_warn("config %s not used (%d error%s, the first: %s%s): its directories and "
			 "service names do NOT apply", o->config_path, errs.total,
			 errs.total == 1 ? "" : "s", at, errs.e[0].msg);
	}
	else
		log_debug("config %s not used (%d error%s)", o->config_path, errs.n,
			  errs.n == 1 ? "" : "s");
	o->pin_dir = pin ? pin : o->have_rec ? o->rec.pin_dir : o->cfg ? cfg->pin_dir
		   : SLUICE_PIN_DIR;
	o->state_dir = state ? state : o->have_rec ? o->rec.state_dir : o->cfg ? cfg->state_dir
		     : "/var/lib/sluice";
	load_known(o);
}

/* 1 (said) when --json was given to a command with no JSON form: run, it would print its
 * text where a script expects JSON. */
static int json_refused(const struct clicmd *cmd, const struct cli_global_args *g)
{
	if (!g->json || cli_has_json(cmd))
		return 0;
	log_error("%s: --json: this command has no JSON output (status, switch ls, switch log "
		  "and the changing commands have); nothing done", cmd->name);
	return 1;
}

/* A command's name that matched nothing: a group ("switch") gets its list of commands. */
static int unknown_command(int argc, char **argv)
{
	int group = cliopt_is_group(cli_commands, argv[0]);
	int help = group && argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
	FILE *f = help ? stdout : stderr;

	if (!group) {
		log_error("unknown command '%s'", argv[0]);
		cliopt_usage(stderr, "sluicectl", &cli_program);
		fprintf(stderr, "commands:\n");
		cliopt_list(stderr, cli_commands, NULL);
		return EXIT_USAGE;
	}
	if (argc > 1 && !help)
		log_error("unknown command '%s %s'", argv[0], argv[1]);
	fprintf(f, "usage: sluicectl %s COMMAND [ARGS]\ncommands:\n", argv[0]);
	cliopt_list(f, cli_commands, argv[0]);
	fprintf(f, "`sluicectl %s COMMAND --help` shows a command's options and an example\n",
		argv[0]);
	return help ? EXIT_OK : EXIT_USAGE;
}

int main(int argc, char **argv)
{
	static struct sluice_config cfg;
	static struct cli_opts o;
	struct cli_global_args g = { 0 };
	const struct clicmd *cmd;
	void *args;
	int next, words, rc;

	log_init("sluicectl", 0);
	rc = cliopt_parse_head("sluicectl", cli_global_opts, argc - 1, argv + 1, &g, &next);
	if (rc == CLIOPT_HELP || (rc == CLIOPT_OK && next == argc - 1)) {
		cliopt_help(rc == CLIOPT_HELP ? stdout : stderr, "sluicectl", &cli_program, NULL,
			    NULL);
		return rc == CLIOPT_HELP ? EXIT_OK : EXIT_USAGE;
	}
	if (rc != CLIOPT_OK)
		return EXIT_USAGE;
	argc -= 1 + next;
	argv += 1 + next;
	cmd = cliopt_find(cli_commands, argc, argv, &words);
	if (!cmd)
		return unknown_command(argc, argv);
	args = calloc(1, cmd->args_size + 1);
	if (!args)
		return EXIT_RUNTIME;
	rc = cliopt_parse("sluicectl", cmd, argc - words, argv + words, args, cli_global_opts, &g);
	if (rc == CLIOPT_HELP)
		cliopt_help(stdout, "sluicectl", cmd, cli_global_opts, "global options");
	if (rc != CLIOPT_OK) {
		free(args);
		return rc == CLIOPT_HELP ? EXIT_OK : EXIT_USAGE;
	}
	log_init("sluicectl", g.verbose - g.quiet);
	if (empty_path_given(&g) || json_refused(cmd, &g)) {
		free(args);
		return EXIT_USAGE;
	}
	bpflog_route();
	resolve(&o, &g, &cfg);
	rc = cmd->run(args, &o);
	free(args);
	return rc;
}
