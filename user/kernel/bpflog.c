// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/bpflog.h"

#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "common/log.h"

static int bpflog_print(enum libbpf_print_level l, const char *fmt, va_list ap)
{
	enum log_level level = l == LIBBPF_WARN ? LOG_WARN : LOG_DEBUG;
	char line[1024];

	if (l == LIBBPF_DEBUG && log_verbosity() < 2)
		return 0;
	if (!log_enabled(level))
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	/* The kernel's note that the clsact qdisc already exists comes on every restart that
	 * adopts the pinned data path: expected, so not a warning. */
	if (strstr(line, "Exclusivity flag on"))
		level = LOG_DEBUG;
	log_msg(level, "%s", line);
	return 0;
}

void bpflog_route(void)
{
	libbpf_set_print(bpflog_print);
}
