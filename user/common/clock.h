/* The controller's clock: CLOCK_MONOTONIC in nanoseconds, the same clock BPF's
 * bpf_ktime_get_ns() reads, so timestamps in the maps and in userspace compare directly. */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

unsigned long long monotonic_ns(void);

#endif
