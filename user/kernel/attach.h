/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Loading, attaching, adopting and detaching the data path.
 * Programs are loaded fresh on every start; maps are reused from the pins (LIBBPF_PIN_BY_NAME)
 * so counts survive; the XDP link is pinned and swapped in place with bpf_link_update; the TC
 * filter is replaced at a fixed handle. Traffic never sees a moment without a program. */
#ifndef SLUICE_ATTACH_H
#define SLUICE_ATTACH_H

#include <stddef.h>
#include <net/if.h>
#include "kernel/layout.h"
#include "kernel/ifaces.h"

struct sluice_bpf;

#define SLUICE_TC_HANDLE 0x51ce
#define SLUICE_TC_PRIO   0x51

struct attached_iface {
	int ifindex;
	char name[IF_NAMESIZE];
	char xdp_mode[12];          /* "native" | "generic" | "adopted" ("" when only listed);
	                             * status: what the kernel says (attach_xdp_mode) */
	int xdp_native_errno;       /* why native XDP failed there before generic, 0 if it did not */
	int rst_at_tc;              /* refused SYNs on it are answered from TC (VLAN offload) */
};

struct attach_state {
	struct sluice_bpf *skel;
	int ifindex;                /* the interface the last attach ran on */
	struct attached_iface ifaces[SLUICE_MAX_IFACES];   /* attach_config: where it runs */
	int n_ifaces;
	int xdp_link_fd;
	int adopted;                /* maps were already pinned: a restart (or an upgrade) */
	struct layout_plan layout;  /* what was done with the pins (layout.note for the log) */
	const char *xdp_mode_used;  /* "native" | "generic" */
	int xdp_native_errno;       /* why native attach failed before a fallback to generic */
	int rst_at_tc;              /* refused SYNs are answered from TC (VLAN tags, see attach.c) */
	struct sluice_hash_keys hash_keys; /* the 4-tuples' hash keys (map flow_hash_key) */
	int pin_lock_fd;            /* the pin dir's lock (kernel/pinlock.h), held until release */
};

/* Open and load the BPF object with maps pinned under pin_dir (created on bpffs if needed),
 * once no other sluiced holds the pin dir (kernel/pinlock.h: waits for it to stop),
 * the per-service maps sized for n_services (maps_service_slots), or as pinned when the pins
 * hold that many; smaller pins are carried into bigger maps (layout_plan's grow). On failure
 * returns -errno and a message in err. */
int attach_load(struct attach_state *st, const char *pin_dir, int n_services, char *err,
		size_t errlen);

/* Set max_entries of the per-service maps of an opened object for `slots` services. */
struct bpf_object;
void attach_size_services(struct bpf_object *obj, unsigned slots);

/* Attach (or adopt and swap) XDP ingress and TC egress/ingress on every interface the
 * config's entries select (names, patterns, "auto": see
 * kernel/ifaces.h) that is not attached yet. start: the first call after attach_load: a
 * literal name that does not exist fails, links pinned for interfaces no longer selected are
 * detached, and the layout is committed once all run the new programs. Later calls (links or
 * routes changed) attach what is new and forget what went away; an interface that fails is
 * reported in err and the others stay. Returns the number attached by this call, or -errno.
 * xdp_mode: 0 auto (native, else generic), 1 native, 2 generic. */
int attach_config(struct attach_state *st, const char *pin_dir,
		  const char (*specs)[IF_NAMESIZE], int n_specs, int xdp_mode, int start,
		  char *err, size_t errlen);

/* The interfaces the pinned XDP links under pin_dir run on, sorted by ifindex. Their names
 * are looked up only when the caller is in their network namespace netns_ino (the one
 * recorded in globals; 0 = unknown, look up): elsewhere an ifindex names another interface,
 * so they are listed as "#IFINDEX". Returns how many (at most max). */
int attach_list(const char *pin_dir, unsigned long long netns_ino, struct attached_iface *out,
		int max);

/* How XDP runs on interface ifindex: "native", "generic", "offload", "none" (no XDP program
 * there), or NULL when that cannot be told from here (the caller is not in its network
 * namespace netns_ino, 0 = unknown: ask; the interface gone). Asks the kernel, so it is true
 * after a restart or an adoption too. */
const char *attach_xdp_mode(int ifindex, unsigned long long netns_ino);

/* Release the process's handles; pinned state stays (traffic keeps flowing). */
void attach_release(struct attach_state *st);

/* Remove everything: TC filters, XDP link, pinned maps, the pin directory.
 * Returns 0, -ENOENT when nothing was attached, or -errno. */
int detach_all(const char *pin_dir, char *err, size_t errlen);

/* The loaded object's maps and programs that are not pinned, into m: the flow GC program and
 * change counts (flowgc.h), the request scan (maps_pending_requests), the copies of `busy`
 * and in-flight. */
struct sluice_maps;
void attach_flow_handles(const struct attach_state *st, struct sluice_maps *m);

#endif
