/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The controller's clock: CLOCK_MONOTONIC in nanoseconds, the same clock BPF's
 * bpf_ktime_get_ns() reads, so timestamps in the maps and in userspace compare directly. */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <time.h>

unsigned long long monotonic_ns(void);
/* *out = clock clk's now plus in_ns: the absolute time pthread_cond_timedwait waits until
 * (clk: the clock the condition variable was made with, CLOCK_REALTIME by default). */
void clock_deadline(clockid_t clk, unsigned long long in_ns, struct timespec *out);

#endif
