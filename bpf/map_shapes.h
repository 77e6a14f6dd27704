/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The shapes (type, size, key and value) of the data path's maps that another BPF object
 * reads too: written once here, so the data path (maps.h, which adds the pinning) and the
 * wait probe (readwait.bpf.c, which is handed the data path's own maps by fd before load and
 * pins nothing) cannot drift apart. What each map holds and who writes it: maps.h. */
#ifndef SLUICE_MAP_SHAPES_H
#define SLUICE_MAP_SHAPES_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "sluice.h"

#define SLUICE_PORT_TO_SERVICE_SHAPE          \
	__uint(type, BPF_MAP_TYPE_ARRAY);     \
	__uint(max_entries, 65536);           \
	__type(key, __u32);                   \
	__type(value, __u32)

#define SLUICE_ADDR_SERVICES_SHAPE                       \
	__uint(type, BPF_MAP_TYPE_HASH);                 \
	__uint(max_entries, SLUICE_MAX_ADDR_SERVICES);   \
	__type(key, struct sluice_addr_key);             \
	__type(value, __u32)

#define SLUICE_FLOWS_SHAPE                           \
	__uint(type, BPF_MAP_TYPE_HASH);             \
	__uint(max_entries, SLUICE_MAX_FLOWS);       \
	__type(key, struct sluice_flow_key);         \
	__type(value, struct sluice_flow)

/* The requests the server has not read yet, per service (struct sluice_unread): shared with the
 * wait probe (bpf/readwait.bpf.c), which takes a request off at the server's first read. */
#define SLUICE_UNREAD_SHAPE \
	__uint(type, BPF_MAP_TYPE_ARRAY); \
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS); \
	__type(key, __u32); \
	__type(value, struct sluice_unread)

#endif
