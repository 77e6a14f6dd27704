// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "common/clock.h"

#include <time.h>

unsigned long long monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void clock_deadline(clockid_t clk, unsigned long long in_ns, struct timespec *out)
{
	unsigned long long ns;

	clock_gettime(clk, out);
	ns = (unsigned long long)out->tv_nsec + in_ns % 1000000000ull;
	out->tv_sec += (time_t)(in_ns / 1000000000ull + ns / 1000000000ull);
	out->tv_nsec = (long)(ns % 1000000000ull);
}
