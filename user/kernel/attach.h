/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Loading, attaching, adopting and detaching the data path.
 * Programs are loaded fresh on every start; maps are reused from the pins (LIBBPF_PIN_BY_NAME)
 * so counts survive; the XDP link is pinned and swapped in place with bpf_link_update; the TC
 * filter is replaced at a fixed handle. Traffic never sees a moment without a program. */
#ifndef SLUICE_ATTACH_H
#define SLUICE_ATTACH_H

#include <stddef.h>
#include "kernel/layout.h"

struct sluice_bpf;

#define SLUICE_TC_HANDLE 0x51ce
#define SLUICE_TC_PRIO   0x51

struct attach_state {
	struct sluice_bpf *skel;
	int ifindex;
	int xdp_link_fd;
	int adopted;                /* maps were already pinned: a restart (or an upgrade) */
	struct layout_plan layout;  /* what was done with the pins (layout.note for the log) */
	const char *xdp_mode_used;  /* "native" | "generic" */
	int xdp_native_errno;       /* why native attach failed before a fallback to generic */
	int rst_at_tc;              /* refused SYNs are answered from TC (VLAN tags, see attach.c) */
};

/* Open and load the BPF object with maps pinned under pin_dir (created on bpffs if needed),
 * the per-service maps sized for n_services (maps_service_slots), or as pinned when the pins
 * hold that many; smaller pins are carried into bigger maps (layout_plan's grow). On failure
 * returns -errno and a message in err. */
int attach_load(struct attach_state *st, const char *pin_dir, int n_services, char *err,
		size_t errlen);

/* Set max_entries of the per-service maps of an opened object for `slots` services. */
struct bpf_object;
void attach_size_services(struct bpf_object *obj, unsigned slots);

/* Attach (or adopt and swap) XDP ingress and TC egress/ingress on ifname.
 * xdp_mode: 0 auto (native, else generic), 1 native, 2 generic. */
int attach_interface(struct attach_state *st, const char *pin_dir, const char *ifname,
		     int xdp_mode, char *err, size_t errlen);

/* How XDP runs on the interface the pinned globals g record: "native", "generic",
 * "offload", "none" (no XDP program there), or NULL when that cannot be told from here (no
 * interface recorded, another network namespace, the interface gone). ifname gets the
 * interface's name, "" when unknown. Asks the kernel, so it is true after a restart or an
 * adoption too. */
struct sluice_globals;
const char *attach_xdp_mode(const struct sluice_globals *g, char *ifname, size_t n);

/* Release the process's handles; pinned state stays (traffic keeps flowing). */
void attach_release(struct attach_state *st);

/* Remove everything: TC filters, XDP link, pinned maps, the pin directory.
 * Returns 0, -ENOENT when nothing was attached, or -errno. */
int detach_all(const char *pin_dir, char *err, size_t errlen);

/* The loaded object's flow GC program and change counts (not pinned; see flowgc.h). */
void attach_flow_handles(const struct attach_state *st, int *reclaim_prog, int *own_ops);

#endif
