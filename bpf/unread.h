/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The read gate's counts (struct sluice_unread in sluice.h), shared by the data path and the
 * wait probe (bpf/readwait.bpf.c): both objects define the map `unread` before including this. */
#ifndef SLUICE_UNREAD_H
#define SLUICE_UNREAD_H

#include "sluice.h"

/* One count less, never below 0: a decrement that would go below is given back. Only a word
 * counted in an earlier load's map can do that (the map is not pinned), and the count then
 * reads low until the queue empties: the gate lets more in, never fewer. */
static __always_inline void unread_sub(__s64 *c)
{
	if (__sync_fetch_and_add(c, -1) <= 0)
		__sync_fetch_and_add(c, 1);
}

/* A request of (svc, cls) counted unread is read or over: whoever cleared its word's
 * SLUICE_OWN_UNREAD calls this, once. A global function, verified once (the flow's ending
 * that calls it is inlined in many places). */
__attribute__((noinline))
int unread_take_off(__u32 svc, __u32 cls)
{
	struct sluice_unread *u = bpf_map_lookup_elem(&unread, &svc);

	if (!u)
		return 0;
	unread_sub(&u->cls[cls & 3]);
	unread_sub(&u->total);
	return 0;
}

#endif
