// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl's table of commands and its global options: what `sluicectl --help` lists and
 * what main() dispatches on. A new command is a table in its cli_*.c plus one line here. */
#include "cli/cli.h"

const struct cliopt cli_global_opts[] = {
	CLIOPT_STR(struct cli_global_args, pin_dir, "pin-dir", "DIR", 0,
		   "the pinned maps (default: $SLUICE_PIN_DIR, the running sluiced's, the "
		   "config's)"),
	CLIOPT_STR(struct cli_global_args, state_dir, "state-dir", "DIR", 0,
		   "switches and audit log (default: $SLUICE_STATE_DIR, the running sluiced's, "
		   "the config's)"),
	CLIOPT_STR(struct cli_global_args, config, "config", "FILE", 0,
		   "the config (default: $SLUICE_CONFIG, the running sluiced's, "
		   "/etc/sluice/sluice.yaml)"),
	CLIOPT_STR(struct cli_global_args, run_dir, "run-dir", "DIR", 0,
		   "where the running sluiced publishes itself (default: $SLUICE_RUN_DIR, "
		   "/run/sluice)"),
	CLIOPT_BOOL(struct cli_global_args, json, "json", 0,
		    "JSON output: status, switch ls/log and the changes (refused by the others)"),
	CLIOPT_CNT(struct cli_global_args, verbose, "verbose", 'v',
		   "more messages on stderr (-vv: libbpf's debug lines too)"),
	CLIOPT_CNT(struct cli_global_args, quiet, "quiet", 'q',
		   "fewer messages (-q: warnings and errors, -qq: errors only)"),
	CLIOPT_TABLE_END,
};

const struct clicmd *const cli_commands[] = {
	&cli_cmd_status, &cli_cmd_top, &cli_cmd_hist,
	&cli_cmd_switch_set, &cli_cmd_switch_clear, &cli_cmd_switch_renew, &cli_cmd_switch_ls,
	&cli_cmd_switch_log, &cli_cmd_plan_check, &cli_cmd_plan_show, &cli_cmd_plan_apply,
	&cli_cmd_plan_revert, &cli_cmd_budget_check, &cli_cmd_breaker_reset,
	&cli_cmd_cascade_clear, &cli_cmd_baseline_reset,
	&cli_cmd_detach,
	NULL,
};

/* The commands whose output has a JSON form (--json). The others refuse --json (exit 2): a
 * script that asked for JSON and got text would misread it, or fail far from the cause. */
static const struct clicmd *const json_commands[] = {
	&cli_cmd_status, &cli_cmd_switch_ls, &cli_cmd_switch_log,
	&cli_cmd_switch_set, &cli_cmd_switch_clear, &cli_cmd_switch_renew,
	&cli_cmd_plan_apply, &cli_cmd_plan_revert, &cli_cmd_breaker_reset,
	&cli_cmd_cascade_clear,
	NULL,
};

int cli_has_json(const struct clicmd *cmd)
{
	for (int i = 0; json_commands[i]; i++)
		if (json_commands[i] == cmd)
			return 1;
	return 0;
}

const struct clicmd cli_program = {
	.name = "",
	.summary = "the operator's CLI of sluice: read the pinned maps, set switches, apply plans",
	.opts = cli_global_opts,
	.args_size = sizeof(struct cli_global_args),
	.notes = "The global options may also follow the command's name.\n"
		 "`sluicectl COMMAND --help` shows a command's arguments, options and an example.\n"
		 "Changes (switch set/clear/renew, plan apply/revert, breaker reset, cascade clear) "
		 "go to the running\nsluiced over its socket; sluicectl finds it through "
		 "RUN_DIR/sluiced.json and waits until the\nchange is in the verdict map.\n"
		 "--json: status, switch ls and switch log print one JSON document; a change prints "
		 "sluiced's answer\nas one JSON object; the other commands have no JSON form and "
		 "refuse --json (exit 2).\n"
		 "exit codes: 0 ok, 1 runtime failure (no daemon, refused, not applied, I/O), "
		 "2 bad usage or input",
	.example = "sluicectl status\n"
		   "sluicectl -v --config /etc/sluice/sluice.yaml switch ls",
	.commands = cli_commands,
};
