/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The controller's clock: CLOCK_MONOTONIC in nanoseconds, the same clock BPF's
 * bpf_ktime_get_ns() reads, so timestamps in the maps and in userspace compare directly. */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

unsigned long long monotonic_ns(void);

#endif
