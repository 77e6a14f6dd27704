/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Command-line helpers shared by the load generator and the test server. Each tool defines
 * die() (print, exit 2 on bad usage) before including this. */
#ifndef SLUICE_TOOLS_ARGS_H
#define SLUICE_TOOLS_ARGS_H

#include <stdlib.h>

void die(const char *fmt, ...);

/* A number in [lo, hi], or die naming the option and the range. */
static inline double num_arg(const char *name, const char *v, double lo, double hi)
{
	char *end;
	double x = strtod(v, &end);
	if (!*v || *end || !(x >= lo && x <= hi))
		die("bad value for %s: '%s' (want %g..%g)", name, v, lo, hi);
	return x;
}

/* Inside an argv loop with `i`, `a` = argv[i] and `has` = i + 1 < argc: the option's value. */
#define ARG() (has ? argv[++i] : (die("%s needs a value", a), ""))

#endif
