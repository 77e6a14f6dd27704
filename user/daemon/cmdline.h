/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluiced's command line, as a table (common/cliopt.h): parsed by main(), its help generated
 * from the same rows. */
#ifndef SLUICE_DAEMON_CMDLINE_H
#define SLUICE_DAEMON_CMDLINE_H

#include "common/cliopt.h"

struct sluiced_args {
	const char *config, *check, *pin_dir, *run_dir;
	int verbose, quiet;
	int no_read_wait;
};

extern const struct clicmd sluiced_cmd;

#endif
