/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The one error-message helper of the library: format into (err, errlen), return -1. */
#ifndef SLUICE_ERRF_H
#define SLUICE_ERRF_H

#include <stddef.h>

int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
