/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluicectl's commands. Each is a table (common/cliopt.h): its arguments and options, its
 * help and an example; its run function returns the process exit code: 0 ok, 1 runtime
 * failure (nothing attached, daemon unreachable, I/O), 2 bad usage or input (nothing
 * changed). */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include "common/cliopt.h"
#include "common/config.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* The options every command accepts, before or after its name. */
struct cli_global_args {
	const char *pin_dir, *state_dir, *config;
	int json, verbose, quiet;
};

/* What a command's run function receives as its ctx. */
struct cli_opts {
	const char *pin_dir;        /* --pin-dir, $SLUICE_PIN_DIR, or the config's pin_dir */
	const char *state_dir;      /* --state-dir, $SLUICE_STATE_DIR, or the config's state_dir */
	const char *config_path;    /* --config, $SLUICE_CONFIG, default /etc/sluice/sluice.yaml */
	int json;                   /* --json given as a global option */
	/* Services known to exist, for validating SERVICE arguments: from the pinned maps when
	 * attached, else from the config file; n_known = -1 when neither could be read. */
	char known[SLUICE_MAX_SERVICES][SLUICE_NAME_LEN];
	int n_known;
	const struct sluice_config *cfg;   /* NULL when the config file could not be read */
};

extern const struct clicmd cli_cmd_status, cli_cmd_top, cli_cmd_hist, cli_cmd_detach;
extern const struct clicmd cli_cmd_switch_set, cli_cmd_switch_clear, cli_cmd_switch_ls,
	cli_cmd_switch_log, cli_cmd_cascade_clear;
extern const struct clicmd cli_cmd_plan_check, cli_cmd_plan_show, cli_cmd_plan_apply,
	cli_cmd_budget_check;
extern const struct clicmd cli_cmd_baseline_reset;

/* sluicectl itself (its help is the list of commands), its global options, and every command
 * in the order `sluicectl --help` lists them (NULL-terminated). */
extern const struct clicmd cli_program;
extern const struct cliopt cli_global_opts[];
extern const struct clicmd *const cli_commands[];

#endif
