/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluicectl's commands. Each is a table (common/cliopt.h): its arguments and options, its
 * help and an example; its run function returns the process exit code: 0 ok, 1 runtime
 * failure (nothing attached, daemon unreachable, I/O), 2 bad usage or input (nothing
 * changed). */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include "common/cliopt.h"
#include "common/config.h"
#include "ops/opproto.h"
#include <jansson.h>

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* The options every command accepts, before or after its name. */
struct cli_global_args {
	const char *pin_dir, *state_dir, *config, *run_dir;
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
	char (*known)[SLUICE_NAME_LEN];          /* n_known names, on the heap */
	const char **known_ptr;                  /* the same names as pointers */
	int n_known;
	const struct sluice_config *cfg;   /* NULL when the config file could not be read */
	/* The running sluiced, from the record it publishes (ops/opproto.h). */
	const char *run_dir;        /* --run-dir, $SLUICE_RUN_DIR, default /run/sluice */
	struct opp_record rec;
	int have_rec;               /* 1: a record of a running sluiced was read */
	char rec_err[512];          /* why not, when have_rec is 0 */
	int state_dir_given;        /* --state-dir or $SLUICE_STATE_DIR named it */
	int pin_dir_given;
};

/* Send one change to sluiced (ops/opproto.h) and wait for its answer: the request object is
 * consumed; "op" is verb. Prints the daemon's message on success. Exit code: 0 when sluiced
 * applied it (seen in the verdict map) and audited it; 1 when there is no daemon, it runs on
 * another state dir or pin dir, it refused (permission, unknown service, ...), or the change
 * is not visible in the maps or not audited (each said on stderr). */
int cli_change(const struct cli_opts *o, const char *verb, json_t *req);

/* 1 (and said on stderr, "VERB: --reason ...") when an operator's reason cannot go into a
 * request: blank, SW_REASON_LEN bytes or more, control characters, or not UTF-8; 0 for a
 * usable one or none (NULL). */
int cli_reason_refused(const char *verb, const char *reason);

/* Open the pinned maps for a command that reads them (verb names it in errors): exit code 0,
 * or 1 with the reason said (nothing attached, no permission, maps of a newer layout). */
struct sluice_maps;
int cli_open_maps(const struct cli_opts *o, struct sluice_maps *m, const char *verb);

extern const struct clicmd cli_cmd_status, cli_cmd_top, cli_cmd_hist, cli_cmd_detach;
extern const struct clicmd cli_cmd_switch_set, cli_cmd_switch_clear, cli_cmd_switch_ls,
	cli_cmd_switch_log, cli_cmd_switch_renew, cli_cmd_cascade_clear, cli_cmd_breaker_reset;
extern const struct clicmd cli_cmd_plan_check, cli_cmd_plan_show, cli_cmd_plan_apply,
	cli_cmd_plan_revert,
	cli_cmd_budget_check;
extern const struct clicmd cli_cmd_baseline_reset;

/* sluicectl itself (its help is the list of commands), its global options, and every command
 * in the order `sluicectl --help` lists them (NULL-terminated). */
/* 1 when the command's output has a JSON form (--json), 0 when it refuses --json. */
int cli_has_json(const struct clicmd *cmd);

extern const struct clicmd cli_program;
extern const struct cliopt cli_global_opts[];
extern const struct clicmd *const cli_commands[];

#endif
