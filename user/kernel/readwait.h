/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The wait before the server reads (bpf/readwait.bpf.c): an optional probe sluiced loads
 * beside the data path, sharing its `flows`, `port_to_service` and `addr_services`. Per
 * service slot it counts the units (http requests, tcp turns) the server first read and the
 * sum of how long each had waited in the host until then (struct sluice_wait_stats), per CPU
 * in a mapped array: a slot's totals are a few loads from memory, no syscall.
 *
 * Optional: a kernel without BTF, without the tracepoint, or whose verifier refuses the probe
 * leaves it off (readwait_start says why); the data path and the controller run without the
 * signal. Not pinned: the probe lives as long as the sluiced that loaded it, and a new one
 * counts from zero. */
#ifndef SLUICE_READWAIT_H
#define SLUICE_READWAIT_H

#include <stddef.h>
#include "sluice.h"

struct readwait_bpf;
struct sluice_bpf;

struct readwait {
	struct readwait_bpf *skel;               /* NULL while off */
	const struct sluice_wait_stats *stats;   /* `wait_stats` mapped: [cpu * slots + slot] */
	size_t map_len;
	int slots, ncpus;
	/* By slot, the slot's totals when it last passed to a service new to it: what the
	 * service's counts start from (NULL until a slot first passes). */
	struct sluice_wait_stats *base;
};

/* Load and attach the probe over the loaded data path dp (its maps are shared, never
 * written; its `services` gives the slot count). 0 when it runs; else -errno, rw stays off
 * and err says why in one line. libbpf's own messages meanwhile go to the debug level (-v). */
int readwait_start(struct readwait *rw, const struct sluice_bpf *dp, char *err, size_t errlen);

/* 1 while the probe runs. */
static inline int readwait_on(const struct readwait *rw)
{
	return rw->stats != NULL;
}

/* Slot's cumulative counts since the probe was loaded, or since the slot passed to its
 * service (readwait_slot_passed), summed over CPUs: 0, or -1 when the probe is off or the
 * slot out of range (out zeroed). Neither count goes back while one probe runs. */
int readwait_read(const struct readwait *rw, int slot, struct sluice_wait_stats *out);

/* The slot just passed to a service new to it (a reload: another service's slot, or its own
 * back after a reload removed it): its counts read from zero from now on, as /metrics shows
 * them under the new service's name (a counter series never starts at another's total).
 * 0, also with the probe off (nothing counted); -ENOMEM when it cannot be done. */
int readwait_slot_passed(struct readwait *rw, int slot);

/* Detach and free (nothing is pinned: the probe is gone). Safe on an off one. */
void readwait_stop(struct readwait *rw);

#endif
