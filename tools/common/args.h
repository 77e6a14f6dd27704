/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Command-line helpers shared by the tools. A tool's main.c defines TOOL_NAME before including
 * this, and so defines die() for all its files: "NAME: message" on stderr, exit 2 (bad usage). */
#ifndef SLUICE_TOOLS_ARGS_H
#define SLUICE_TOOLS_ARGS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void die(const char *fmt, ...);

#ifdef TOOL_NAME
void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, TOOL_NAME ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}
#endif

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
