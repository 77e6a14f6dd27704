// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "common/errf.h"

#include <stdarg.h>
#include <stdio.h>

int errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}
