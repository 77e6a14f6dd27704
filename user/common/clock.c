// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "common/clock.h"

#include <time.h>

unsigned long long monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
