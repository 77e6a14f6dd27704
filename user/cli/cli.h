/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluicectl subcommands. Each returns the process exit code: 0 ok, 1 runtime failure
 * (nothing attached, daemon unreachable, I/O), 2 bad usage or input (nothing changed). */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include "common/config.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

struct cli_opts {
	const char *pin_dir;        /* --pin-dir, $SLUICE_PIN_DIR, or the config's pin_dir */
	const char *state_dir;      /* --state-dir, $SLUICE_STATE_DIR, or the config's state_dir */
	const char *config_path;    /* --config, $SLUICE_CONFIG, default /etc/sluice/sluice.yaml */
	int json;                   /* --json */
	/* Services known to exist, for validating SERVICE arguments: from the pinned maps when
	 * attached, else from the config file; n_known = -1 when neither could be read. */
	char known[SLUICE_MAX_SERVICES][SLUICE_NAME_LEN];
	int n_known;
	const struct sluice_config *cfg;   /* NULL when the config file could not be read */
};

/* argv[0] is the subcommand's name ("switch", "plan", ...). */
int cli_status(int argc, char **argv, struct cli_opts *o);
int cli_hist(int argc, char **argv, struct cli_opts *o);
int cli_top(int argc, char **argv, struct cli_opts *o);
int cli_switch(int argc, char **argv, struct cli_opts *o);
int cli_plan(int argc, char **argv, struct cli_opts *o);
int cli_budget(int argc, char **argv, struct cli_opts *o);
int cli_detach(int argc, char **argv, struct cli_opts *o);
int cli_cascade(int argc, char **argv, struct cli_opts *o);

#endif
