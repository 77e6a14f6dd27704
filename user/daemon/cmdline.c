// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "daemon/cmdline.h"

static const struct cliopt sluiced_opts[] = {
	CLIOPT_STR(struct sluiced_args, config, "config", "FILE", 0,
		   "the config to run (needed unless --check is given)"),
	CLIOPT_STR(struct sluiced_args, check, "check", "FILE", 0,
		   "only validate FILE: each error with its line; exit 0 or 2"),
	CLIOPT_STR(struct sluiced_args, pin_dir, "pin-dir", "DIR", 0,
		   "pin the data path here instead of the config's pin_dir (an absolute path)"),
	CLIOPT_STR(struct sluiced_args, run_dir, "run-dir", "DIR", 0,
		   "publish sluiced.json and the operator socket here, an absolute path (default "
		   "$SLUICE_RUN_DIR, /run/sluice)"),
	CLIOPT_BOOL(struct sluiced_args, no_read_wait, "no-read-wait", 0,
		    "do not load the probe of the wait before the server reads (its metrics and "
		    "the limit's wait signal stay off)"),
	CLIOPT_CNT(struct sluiced_args, verbose, "verbose", 'v',
		   "debug messages and debug events too (-vv: libbpf's debug lines)"),
	CLIOPT_CNT(struct sluiced_args, quiet, "quiet", 'q',
		   "fewer messages on stderr (-q: warnings and errors, -qq: errors only)"),
	CLIOPT_TABLE_END,
};

const struct clicmd sluiced_cmd = {
	.name = "",
	.summary = "the node agent of sluice: attaches the data path, runs the controllers, "
		   "serves /metrics,\nprints one JSON event per line on stdout",
	.opts = sluiced_opts,
	.args_size = sizeof(struct sluiced_args),
	.notes = "Messages go to stderr; the events on stdout do not depend on -q.\n"
		 "SIGHUP or a change of the config file reloads it; SIGTERM stops sluiced and "
		 "leaves the data path in place.\n"
		 "exit codes: 0 ok, 1 runtime failure, 2 bad usage or invalid config",
	.example = "sluiced --config /etc/sluice/sluice.yaml\n"
		   "sluiced --check /etc/sluice/sluice.yaml",
};
