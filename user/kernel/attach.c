// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/attach.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/mount.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sluice.h"
#include "kernel/bpfmaps.h"
#include "kernel/layout.h"
#include "kernel/mapconfig.h"
#include "kernel/ifaces.h"
#include "kernel/nicinfo.h"
#include "kernel/hsmove.h"
#include "kernel/pinlock.h"
#include "common/log.h"
#include "sluice.skel.h"

#define XDP_LINK_PIN "link_xdp"

static __u64 current_netns_ino(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) == 0 ? (__u64)st.st_ino : 0;
}

/* 1 when dir is the root of a mounted file system (its device is not its parent's, or it is
 * "/"): for a BPF file system, the place every tool on the host pins in. sluice's pins live
 * in a directory of their own below it: a pin dir at the root would have detach take off
 * other tools' links and unlink their pins, and the attach mount over the root's parent. */
static int is_mount_root(const char *dir)
{
	char parent[PATH_MAX];
	struct stat d, p;

	snprintf(parent, sizeof(parent), "%s/..", dir);
	if (stat(dir, &d) != 0 || stat(parent, &p) != 0)
		return 0;
	return d.st_dev != p.st_dev || d.st_ino == p.st_ino;
}

static int refuse_mount_root(const char *pin_dir, char *err, size_t errlen)
{
	if (!is_mount_root(pin_dir))
		return 0;
	snprintf(err, errlen, "pin dir %s is the root of a mounted file system, where other tools "
		 "pin too: sluice's pins go in a directory of their own (the default is "
		 SLUICE_PIN_DIR "); nothing done", pin_dir);
	return -EINVAL;
}

/* 1 when dir holds anything: a directory with files is not one to mount over. */
static int has_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int any = 0;

	if (!d)
		return 0;
	while (!any && (de = readdir(d)))
		any = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return any;
}

static int ensure_bpffs_dir(const char *pin_dir, char *err, size_t errlen)
{
	char parent[512];
	struct statfs fs;
	char *slash;
	int rc = refuse_mount_root(pin_dir, err, errlen);

	if (rc)
		return rc;
	snprintf(parent, sizeof(parent), "%s", pin_dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = 0;
	if (statfs(parent, &fs) == 0 && fs.f_type != BPF_FS_MAGIC) {
		/* Hosts without a bpffs mount (a bare container): mount one, over an empty
		 * directory only (a mount over /sys/fs would hide the host's cgroups). */
		if (has_entries(parent)) {
			snprintf(err, errlen, "%s is not a BPF file system and holds other files: "
				 "mount one there (mount -t bpf bpf DIR) or choose a pin dir below "
				 "one; nothing mounted", parent);
			return -ENOTDIR;
		}
		if (mount("bpf", parent, "bpf", 0, NULL) != 0) {
			snprintf(err, errlen, "%s is not a bpf filesystem and mounting one failed: %s",
				 parent, strerror(errno));
			return -errno;
		}
	}
	if (mkdir(pin_dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", pin_dir, strerror(errno));
		return -errno;
	}
	return 0;
}

/* The per-service maps and their entries per service. */
static const struct { const char *name; unsigned per; } per_service[] = {
	{ "services", 1 }, { "verdicts", 1 }, { "inflight", 1 }, { "inflight_released", 1 },
	{ "inflight_pcpu", 1 }, { "inflight_est", 1 }, { "inflight_pub", 1 },
	{ "busy", 1 }, { "busy_released", 1 }, { "busy_copy", 1 }, { "inflight_copy", 1 },
	{ "replies", 2 }, { "class_stats", 1 },
	{ "latency_hist", 1 }, { "latency_hist1", 1 }, { "latency_hist2", 1 },
	{ "latency_hist3", 1 },
	{ "halfopen", 1 },
	{ "ctl_state", 1 }, { "ctl_requests", 1 }, { "conn_cap", 1 }, { "untrusted_marks", 1 },
	{ "http_conns", 1 }, { "http_conn_cap", 1 }, { "unread", 1 },
};
#define N_PER_SERVICE (sizeof(per_service) / sizeof(per_service[0]))

/* Size the per-service maps for `slots` services before loading. */
void attach_size_services(struct bpf_object *obj, unsigned slots)
{
	for (size_t i = 0; i < N_PER_SERVICE; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, per_service[i].name);

		if (m)
			bpf_map__set_max_entries(m, slots * per_service[i].per);
	}
}

/* Service slots of the pinned maps (max_entries of `services`), 0 when none are pinned. */
static unsigned pinned_slots(const char *pin_dir)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/services", pin_dir);
	if ((fd = bpf_obj_get(path)) < 0)
		return 0;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		info.max_entries = 0;
	close(fd);
	return info.max_entries;
}

int attach_load(struct attach_state *st, const char *pin_dir, int n_services, char *err,
		size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pin_dir);
	unsigned slots = maps_service_slots(n_services), pinned;
	const char *grow[N_PER_SERVICE + 1];
	int rc;

	memset(st, 0, sizeof(*st));
	st->xdp_link_fd = -1;
	st->pin_lock_fd = -1;
	rc = ensure_bpffs_dir(pin_dir, err, errlen);
	if (rc)
		return rc;
	/* Before anything is read from the pins: a second sluiced waits here, untouched. */
	rc = pin_dir_lock(pin_dir, PIN_LOCK_WAIT_FOREVER, err, errlen);
	if (rc < 0)
		return rc;
	st->pin_lock_fd = rc;
	st->skel = sluice_bpf__open_opts(&opts);
	if (!st->skel) {
		rc = -errno;
		snprintf(err, errlen, "cannot open BPF object: %s", strerror(-rc));
		return rc;
	}
	/* The pins' size wins when it holds the config: a restart keeps its maps, whatever size
	 * they were created for. Smaller pins are grown: the layout plan carries them into
	 * bigger fresh maps (a migration within the same layout). */
	pinned = pinned_slots(pin_dir);
	attach_size_services(st->skel->obj, pinned >= (unsigned)n_services ? pinned : slots);
	for (size_t i = 0; i < N_PER_SERVICE; i++)
		grow[i] = per_service[i].name;
	grow[N_PER_SERVICE] = NULL;
	/* Adopt, migrate or refuse the pins before loading touches any of them. */
	rc = layout_plan(&st->layout, st->skel->obj, pin_dir, grow, err, errlen);
	if (rc) {
		sluice_bpf__destroy(st->skel);
		st->skel = NULL;
		return rc;
	}
	st->adopted = st->layout.action != LAYOUT_FRESH;
	rc = sluice_bpf__load(st->skel);
	if (rc) {
		/* The programs read two fields of the kernel's struct tcp_sock, placed from the
		 * kernel's BTF: without it libbpf's own message is easy to miss in the log. */
		int no_btf = access("/sys/kernel/btf/vmlinux", R_OK) != 0;

		snprintf(err, errlen,
			 "cannot load BPF programs: %s%s%s", strerror(-rc),
			 no_btf ? " (no kernel BTF at /sys/kernel/btf/vmlinux: sluice needs a "
				  "kernel built with CONFIG_DEBUG_INFO_BTF; in a pod, mount the "
				  "host's /sys/kernel/btf)" : "",
			 st->adopted ? " (pinned maps under the pin dir may be from an incompatible "
				       "version: run `sluicectl detach` first)" : "");
		sluice_bpf__destroy(st->skel);
		st->skel = NULL;
		return rc;
	}
	rc = layout_copy(&st->layout, err, errlen);
	if (rc)
		return rc;
	/* Before the programs attach: an empty bitmap would leave every service's packets
	 * unjudged until the controller's first programming of the ports. */
	rc = maps_derive_port_bits(bpf_map__fd(st->skel->maps.port_to_service),
				   bpf_map__fd(st->skel->maps.service_ports));
	if (rc) {
		snprintf(err, errlen, "cannot fill the service ports' bitmap: %s", strerror(-rc));
		return rc;
	}
	/* The 4-tuples' hash keys, before any program runs and after the copy (a migration
	 * that copies the map brings the pins' keys): drawn for a new map, kept from the pins
	 * (where the slots' records were placed by them). */
	rc = hs_hash_keys(bpf_map__fd(st->skel->maps.flow_hash_key), &st->hash_keys);
	if (rc)
		snprintf(err, errlen, "cannot set the flow hash keys: %s", strerror(-rc));
	return rc;
}

/* ---- pinned XDP links: one per interface, "link_xdp_<ifindex>" (a single-interface layout
 * pinned its one link as "link_xdp"; it is found and kept by the same scan) */

/* The interface of a pinned XDP link: its ifindex, 0 when the device is gone, -1 when the
 * pin is not an XDP link. */
static int link_ifindex(int fd)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.type != BPF_LINK_TYPE_XDP)
		return -1;
	return (int)info.xdp.ifindex;
}

typedef int (*link_fn)(void *ctx, const char *path, int fd, int ifindex);

/* Call fn for every pinned XDP link (fd closed after); returns how many there were. */
static int each_link(const char *pin_dir, link_fn fn, void *ctx)
{
	char path[768];
	struct dirent *de;
	DIR *d = opendir(pin_dir);
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		int fd, idx;

		if (strncmp(de->d_name, XDP_LINK_PIN, strlen(XDP_LINK_PIN)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_dir, de->d_name);
		if ((fd = bpf_obj_get(path)) < 0)
			continue;
		idx = link_ifindex(fd);
		if (idx >= 0) {
			n++;
			if (fn && fn(ctx, path, fd, idx)) {
				close(fd);
				break;
			}
		}
		close(fd);
	}
	closedir(d);
	return n;
}

struct find_ctx {
	int ifindex;
	char *path;
	size_t len;
	int found;
};

static int find_fn(void *ctx, const char *path, int fd, int ifindex)
{
	struct find_ctx *c = ctx;

	if (ifindex != c->ifindex)
		return 0;
	snprintf(c->path, c->len, "%s", path);
	c->found = 1;
	return 1;
}

/* Where the XDP link of ifindex is pinned, or is to be. */
static void xdp_link_path(const char *pin_dir, int ifindex, char *path, size_t len)
{
	struct find_ctx c = { ifindex, path, len, 0 };

	each_link(pin_dir, find_fn, &c);
	if (!c.found)
		snprintf(path, len, "%s/%s_%d", pin_dir, XDP_LINK_PIN, ifindex);
}

static void detach_tc(int ifindex, enum bpf_tc_attach_point where);

struct prune_ctx {
	const int *keep;
	int n_keep;
	int only;       /* > 0: this interface only */
};

static int prune_fn(void *ctx, const char *path, int fd, int ifindex)
{
	struct prune_ctx *c = ctx;

	if (c->only ? ifindex != c->only : c->n_keep < 0 && ifindex > 0)
		return 0;
	for (int i = 0; i < c->n_keep; i++)
		if (c->keep[i] == ifindex)
			return 0;
	if (ifindex > 0) {
		detach_tc(ifindex, BPF_TC_EGRESS);
		detach_tc(ifindex, BPF_TC_INGRESS);
	}
	bpf_link_detach(fd);
	unlink(path);
	return 0;
}

/* Detach the programs from every interface not in keep (a link whose device is gone only
 * loses its pin; n_keep -1: only those); returns how many pinned links there were. */
static int detach_links(const char *pin_dir, const int *keep, int n_keep)
{
	struct prune_ctx c = { keep, n_keep, 0 };

	return each_link(pin_dir, prune_fn, &c);
}

static void detach_ifindex(const char *pin_dir, int ifindex)
{
	struct prune_ctx c = { NULL, 0, ifindex };

	each_link(pin_dir, prune_fn, &c);
}

struct list_ctx {
	struct attached_iface *out;
	int n, max;
	int names;      /* the caller is in the links' namespace: ifindex -> name means it */
};

static int list_fn(void *ctx, const char *path, int fd, int ifindex)
{
	struct list_ctx *c = ctx;

	if (ifindex <= 0 || c->n >= c->max)
		return 0;
	c->out[c->n].ifindex = ifindex;
	if (!c->names || !if_indextoname((unsigned)ifindex, c->out[c->n].name))
		snprintf(c->out[c->n].name, sizeof(c->out[c->n].name), "#%d", ifindex);
	c->n++;
	return 0;
}

int attach_list(const char *pin_dir, unsigned long long netns_ino, struct attached_iface *out,
		int max)
{
	struct list_ctx c = { out, 0, max, !netns_ino || netns_ino == current_netns_ino() };

	each_link(pin_dir, list_fn, &c);
	/* Readdir order is the pins' hash order: sort by ifindex for stable output. */
	for (int i = 1; i < c.n; i++)
		for (int j = i; j > 0 && out[j - 1].ifindex > out[j].ifindex; j--) {
			struct attached_iface t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return c.n;
}

/* The XDP on ifindex runs in the other mode than xdp_mode names (1 native, 2 generic; auto
 * keeps what runs). xdp_mode can change only with a restart, which adopts the pinned link:
 * swapping its program kept its mode, so `xdp_mode: generic` over a native link (or native
 * over an earlier fallback to generic) was silently not applied. Recreating the link leaves
 * XDP off the interface for the moment between the two calls, only on that change. */
static int mode_differs(int ifindex, int xdp_mode)
{
	const char *now = attach_xdp_mode(ifindex, 0);

	if (!now || !xdp_mode)
		return 0;
	return strcmp(now, xdp_mode == 1 ? "native" : "generic") != 0;
}

/* Pinned XDP link on this interface: swap its program. Otherwise create and pin one. */
static int attach_xdp(struct attach_state *st, const char *pin_dir, int xdp_mode,
		      char *err, size_t errlen)
{
	int prog_fd = bpf_program__fd(st->skel->progs.sluice_xdp_ingress);
	char path[512];
	int fd;

	xdp_link_path(pin_dir, st->ifindex, path, sizeof(path));
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		struct bpf_link_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    info.type == BPF_LINK_TYPE_XDP && (int)info.xdp.ifindex == st->ifindex &&
		    !mode_differs(st->ifindex, xdp_mode) && bpf_link_update(fd, prog_fd, NULL) == 0) {
			st->xdp_link_fd = fd;
			st->xdp_mode_used = "adopted";
			return 0;
		}
		/* Stale link (interface gone or changed), or one in the mode the config no longer
		 * asks for: replace it. */
		bpf_link_detach(fd);
		close(fd);
		unlink(path);
	}

	int modes[2] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	int first = xdp_mode == 2 ? 1 : 0, last = xdp_mode == 1 ? 0 : 1;

	for (int i = first; i <= last; i++) {
		LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = modes[i]);

		fd = bpf_link_create(prog_fd, st->ifindex, BPF_XDP, &lo);
		if (fd >= 0) {
			st->xdp_mode_used = i == 0 ? "native" : "generic";
			break;
		}
		if (i == 0)
			st->xdp_native_errno = errno;
	}
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot attach XDP to ifindex %d: %s%s", st->ifindex,
			 strerror(e), e == EBUSY || e == EEXIST ?
			 " (another XDP program is attached to this interface)" : "");
		return -e;
	}
	if (bpf_obj_pin(fd, path) != 0) {
		int e = errno;
		snprintf(err, errlen, "cannot pin XDP link at %s: %s", path, strerror(e));
		bpf_link_detach(fd);
		close(fd);
		return -e;
	}
	st->xdp_link_fd = fd;
	return 0;
}

static int attach_tc(int ifindex, enum bpf_tc_attach_point where, int prog_fd,
		     char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = where);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = SLUICE_TC_HANDLE, .priority = SLUICE_TC_PRIO,
		    .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE);
	int rc = bpf_tc_hook_create(&hook);

	if (rc && rc != -EEXIST) {
		snprintf(err, errlen, "cannot create clsact qdisc: %s", strerror(-rc));
		return rc;
	}
	rc = bpf_tc_attach(&hook, &opts);
	if (rc)
		snprintf(err, errlen, "cannot attach TC %s program: %s",
			 where == BPF_TC_EGRESS ? "egress" : "ingress", strerror(-rc));
	return rc;
}

/* XDP sees a frame without the VLAN tag the NIC stripped into the skb (rx VLAN offload): its
 * RST would leave untagged and never reach a client behind a VLAN device or a VLAN-filtering
 * bridge on top of the interface. There, refused SYNs are answered from TC ingress, which
 * still has the tag. Without anything on top, a tagged SYN reaches no socket anyway, and XDP
 * keeps answering (the cheap path under a flood). When in doubt (a query failed): TC. */
static void choose_rst_path(struct attach_state *st, const char *ifname)
{
	__u32 key = (__u32)st->ifindex, one = 1;

	st->rst_at_tc = nic_rx_vlan_offload(ifname) == 1 && nic_has_upper(st->ifindex) != 0;
	if (st->rst_at_tc)
		bpf_map_update_elem(bpf_map__fd(st->skel->maps.syn_reply_tc), &key, &one, BPF_ANY);
	else /* an index an interface that went away had may come back on another one */
		bpf_map_delete_elem(bpf_map__fd(st->skel->maps.syn_reply_tc), &key);
}

/* The programs on one interface, by index (no layout commit, no record). */
static int attach_ifindex(struct attach_state *st, const char *pin_dir, int ifindex,
			  const char *ifname, int xdp_mode, char *err, size_t errlen)
{
	int rc;

	if (st->xdp_link_fd >= 0)
		close(st->xdp_link_fd); /* the earlier interface's link stays: it is pinned */
	st->xdp_link_fd = -1;
	st->ifindex = ifindex;
	st->xdp_native_errno = 0;
	choose_rst_path(st, ifname);
	rc = attach_xdp(st, pin_dir, xdp_mode, err, errlen);
	if (rc)
		return rc;
	rc = attach_tc(st->ifindex, BPF_TC_EGRESS,
		       bpf_program__fd(st->skel->progs.sluice_tc_egress), err, errlen);
	if (rc)
		return rc;
	return attach_tc(st->ifindex, BPF_TC_INGRESS,
			 bpf_program__fd(st->skel->progs.sluice_tc_ingress), err, errlen);
}

/* The program of sluice's filter on one hook of ifindex: its id, 0 when there is none. */
static __u32 tc_prog_id(int ifindex, enum bpf_tc_attach_point where)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = where);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = SLUICE_TC_HANDLE, .priority = SLUICE_TC_PRIO);

	return bpf_tc_query(&hook, &opts) == 0 ? opts.prog_id : 0;
}

/* The TC filters are owned by the interface's clsact qdisc, not pinned: another tool's
 * `tc qdisc del dev X clsact` (or `tc filter del`) takes them off while the pinned XDP link
 * stays, and the interface still looks attached. Without TC ingress no HTTP request is
 * judged, without TC egress none ends: the service runs unprotected. Put them back. */
static void restore_tc(struct attach_state *st, const struct attached_iface *a)
{
	static const enum bpf_tc_attach_point hooks[2] = { BPF_TC_INGRESS, BPF_TC_EGRESS };
	int fds[2] = { bpf_program__fd(st->skel->progs.sluice_tc_ingress),
		       bpf_program__fd(st->skel->progs.sluice_tc_egress) };
	char err[256];

	for (int i = 0; i < 2; i++) {
		if (tc_prog_id(a->ifindex, hooks[i]))
			continue; /* there: the running programs put it there (attach or adopt) */
		if (attach_tc(a->ifindex, hooks[i], fds[i], err, sizeof(err)))
			log_msg(LOG_WARN, "TC %s program on %s is gone and cannot be put back: %s",
				i ? "egress" : "ingress", a->name, err);
		else
			log_msg(LOG_WARN, "TC %s program on %s was gone (its clsact qdisc or filter "
				"deleted by something else): put back", i ? "egress" : "ingress",
				a->name);
	}
}

static int is_attached(const struct attach_state *st, int ifindex)
{
	for (int i = 0; i < st->n_ifaces; i++)
		if (st->ifaces[i].ifindex == ifindex)
			return 1;
	return 0;
}

static void record_ifindex(const char *pin_dir, int ifindex)
{
	struct sluice_maps m;
	struct sluice_globals g;

	/* A single-interface sluicectl finds one interface here; every version of it reads
	 * this field, so the first interface stays recorded. */
	if (maps_open_pinned(pin_dir, &m) == 0) {
		if (maps_read_globals(&m, &g) == 0 && (!g.ifindex || g.ifindex == (__u32)ifindex ||
		    !if_indextoname(g.ifindex, (char[IF_NAMESIZE]){ 0 }) ||
		    g.netns_ino != current_netns_ino())) {
			g.ifindex = (__u32)ifindex;
			g.netns_ino = current_netns_ino();
			maps_write_globals(&m, &g);
		}
		maps_close(&m);
	}
}

int attach_config(struct attach_state *st, const char *pin_dir,
		  const char (*specs)[IF_NAMESIZE], int n_specs, int xdp_mode, int start,
		  char *err, size_t errlen)
{
	struct iface_link *links;
	char defroute[SLUICE_MAX_IFACES][IF_NAMESIZE], missing[IF_NAMESIZE];
	int sel[SLUICE_MAX_IFACES], keep[SLUICE_MAX_IFACES];
	int n_links, n_def, n_sel, added = 0, rc = 0;

	n_links = ifaces_links(&links);
	if (n_links < 0) {
		snprintf(err, errlen, "cannot list the interfaces: %s", strerror(-n_links));
		return n_links;
	}
	n_def = ifaces_default_route_devs(defroute, SLUICE_MAX_IFACES);
	n_sel = ifaces_pick(links, n_links, specs, n_specs, (const char (*)[IF_NAMESIZE])defroute,
			    n_def, sel, SLUICE_MAX_IFACES, missing, sizeof(missing));
	if (n_sel < 0) {
		free(links);
		return n_sel;
	}
	if (start && missing[0]) {
		snprintf(err, errlen, "no interface named '%s'", missing);
		free(links);
		return -ENODEV;
	}
	for (int i = 0; i < n_sel; i++)
		keep[i] = links[sel[i]].ifindex;
	/* At start the config says where the programs run: links pinned by an earlier run on
	 * interfaces no longer selected are taken off (they would run the old programs). */
	if (start)
		detach_links(pin_dir, keep, n_sel);
	/* Interfaces that went away: forget them (the kernel took their programs off). One
	 * attached before it became the port of a selected bond or bridge (or before its VLAN
	 * parent was selected): its programs come off, the other device sees its packets. */
	for (int i = 0; i < st->n_ifaces; i++) {
		const struct iface_link *l = NULL;
		int covered = 0;

		for (int j = 0; j < n_links; j++)
			if (links[j].ifindex == st->ifaces[i].ifindex &&
			    !strcmp(links[j].name, st->ifaces[i].name))
				l = &links[j];
		for (int j = 0; l && j < n_sel; j++)
			covered |= keep[j] == l->master || keep[j] == l->vlan_lower;
		if (covered)
			detach_ifindex(pin_dir, l->ifindex);
		if (!l || covered) {
			__u32 key = (__u32)st->ifaces[i].ifindex;

			bpf_map_delete_elem(bpf_map__fd(st->skel->maps.syn_reply_tc), &key);
			st->ifaces[i--] = st->ifaces[--st->n_ifaces];
		}
	}
	if (!start) {
		detach_links(pin_dir, NULL, -1); /* only the pins of links whose device is gone */
		for (int i = 0; i < st->n_ifaces; i++)
			restore_tc(st, &st->ifaces[i]);
	}
	for (int i = 0; i < n_sel && st->n_ifaces < SLUICE_MAX_IFACES; i++) {
		const struct iface_link *l = &links[sel[i]];

		if (is_attached(st, l->ifindex))
			continue;
		rc = attach_ifindex(st, pin_dir, l->ifindex, l->name, xdp_mode, err, errlen);
		if (rc) {
			size_t used = strlen(err);

			snprintf(err + used, errlen - used, " (interface %s)", l->name);
			if (start)
				break;
			continue; /* hot-plug: the others stay attached; tried again next change */
		}
		st->ifaces[st->n_ifaces].ifindex = l->ifindex;
		snprintf(st->ifaces[st->n_ifaces].name, IF_NAMESIZE, "%s", l->name);
		snprintf(st->ifaces[st->n_ifaces].xdp_mode, sizeof(st->ifaces[0].xdp_mode), "%s",
			 st->xdp_mode_used ? st->xdp_mode_used : "");
		st->ifaces[st->n_ifaces].xdp_native_errno = st->xdp_native_errno;
		st->ifaces[st->n_ifaces].rst_at_tc = st->rst_at_tc;
		st->n_ifaces++;
		added++;
	}
	free(links);
	if (start && rc)
		return rc;
	if (start) {
		/* The new programs run: a migration moves the pin names to the fresh maps now. */
		rc = layout_commit(&st->layout, st->skel->obj, pin_dir, err, errlen);
		if (rc)
			return rc;
		/* What an older layout's programs left pending in `handshakes` goes where these
		 * look (none after a restart of this layout: nothing writes it any more). */
		int moved = hs_move_records(bpf_map__fd(st->skel->maps.handshakes),
					    bpf_map__fd(st->skel->maps.handshake_slots),
					    &st->hash_keys);
		if (moved > 0)
			log_msg(LOG_INFO, "%d pending handshakes moved into their slots", moved);
		else if (moved < 0)
			log_msg(LOG_WARN, "pending handshakes of an older layout not moved: %s "
				"(their connections are taken on at their first data)",
				strerror(-moved));
	}
	if (st->n_ifaces && (start || added))
		record_ifindex(pin_dir, st->ifaces[0].ifindex);
	return rc ? rc : added;
}

const char *attach_xdp_mode(int ifindex, unsigned long long netns_ino)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	if (ifindex <= 0 || (netns_ino && netns_ino != current_netns_ino()) ||
	    bpf_xdp_query(ifindex, 0, &q))
		return NULL;
	switch (q.attach_mode) {
	case XDP_ATTACHED_DRV:
		return "native";
	case XDP_ATTACHED_SKB:
		return "generic";
	case XDP_ATTACHED_HW:
		return "offload";
	case XDP_ATTACHED_MULTI:
		/* Programs in several modes at once: the driver's runs first. */
		return q.drv_prog_id ? "native" : q.skb_prog_id ? "generic" : "offload";
	default:
		return "none";
	}
}

void attach_release(struct attach_state *st)
{
	if (st->pin_lock_fd >= 0)
		close(st->pin_lock_fd);
	st->pin_lock_fd = -1;
	if (st->xdp_link_fd >= 0)
		close(st->xdp_link_fd);
	st->xdp_link_fd = -1;
	layout_plan_release(&st->layout);
	if (st->skel)
		sluice_bpf__destroy(st->skel); /* links are pinned / netlink-owned: they stay */
	st->skel = NULL;
}

static void detach_tc(int ifindex, enum bpf_tc_attach_point where)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = where);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = SLUICE_TC_HANDLE, .priority = SLUICE_TC_PRIO);

	bpf_tc_detach(&hook, &opts);
}

int detach_all(const char *pin_dir, char *err, size_t errlen)
{
	struct sluice_maps m;
	struct sluice_globals g = { 0 };
	char path[768];
	struct dirent *de;
	struct statfs fs;
	DIR *d;
	int found = 0, rc = refuse_mount_root(pin_dir, err, errlen);

	if (rc)
		return rc;
	if (maps_open_pinned(pin_dir, &m) == 0) {
		if (maps_read_globals(&m, &g) == 0 && g.ifindex && g.netns_ino &&
		    g.netns_ino != current_netns_ino()) {
			/* An ifindex means nothing in another namespace: refuse, change nothing. */
			snprintf(err, errlen, "sluice is attached in another network namespace (netns "
				 "inode %llu): run detach there, e.g. with nsenter --net",
				 (unsigned long long)g.netns_ino);
			maps_close(&m);
			return -EXDEV;
		}
		struct find_ctx c = { (int)g.ifindex, path, sizeof(path), 0 };

		/* The interface of a pinned link has its filters taken off with the link below:
		 * deleting them twice made libbpf warn of a missing filter on every detach. */
		if (g.ifindex)
			each_link(pin_dir, find_fn, &c);
		if (g.ifindex && !c.found) {
			detach_tc(g.ifindex, BPF_TC_EGRESS);
			detach_tc(g.ifindex, BPF_TC_INGRESS);
		}
		maps_close(&m);
		found = 1;
	}
	if (detach_links(pin_dir, NULL, 0))
		found = 1;
	d = opendir(pin_dir);
	if (!d) {
		if (errno == ENOENT && !found) {
			snprintf(err, errlen, "nothing attached (no %s)", pin_dir);
			return -ENOENT;
		}
		if (errno != ENOENT) {
			snprintf(err, errlen, "cannot read %s: %s", pin_dir, strerror(errno));
			return -errno;
		}
		return 0;
	}
	/* Pins live on a BPF filesystem only: a directory elsewhere (a typo, the state dir)
	 * holds nothing of sluice, and its files are someone's data. */
	if (!found && fstatfs(dirfd(d), &fs) == 0 && fs.f_type != BPF_FS_MAGIC) {
		closedir(d);
		snprintf(err, errlen, "nothing attached under %s (not a BPF filesystem: nothing "
			 "removed)", pin_dir);
		return -ENOENT;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_dir, de->d_name);
		unlink(path);
		found = 1;
	}
	closedir(d);
	if (rmdir(pin_dir) != 0) {
		snprintf(err, errlen, "cannot remove %s: %s", pin_dir, strerror(errno));
		return -errno;
	}
	if (!found) {
		snprintf(err, errlen, "nothing attached under %s", pin_dir);
		return -ENOENT;
	}
	return 0;
}

void attach_flow_handles(const struct attach_state *st, struct sluice_maps *m)
{
	m->reclaim_prog = st->skel ? bpf_program__fd(st->skel->progs.sluice_reclaim) : -1;
	m->own_ops = st->skel ? bpf_map__fd(st->skel->maps.own_ops) : -1;
	m->pending_prog = st->skel ? bpf_program__fd(st->skel->progs.sluice_pending_requests) : -1;
	m->copy_prog = st->skel ? bpf_program__fd(st->skel->progs.sluice_copy_counts) : -1;
	m->publish_prog = st->skel ? bpf_program__fd(st->skel->progs.sluice_publish_stripes) : -1;
	m->conncap_prog = st->skel ? bpf_program__fd(st->skel->progs.sluice_set_conn_cap) : -1;
	m->busy_copy = st->skel ? bpf_map__fd(st->skel->maps.busy_copy) : -1;
	m->inflight_copy = st->skel ? bpf_map__fd(st->skel->maps.inflight_copy) : -1;
	m->service_ports = st->skel ? bpf_map__fd(st->skel->maps.service_ports) : -1;
	m->addr_class = st->skel ? bpf_map__fd(st->skel->maps.addr_class) : -1;
	m->unread = st->skel ? bpf_map__fd(st->skel->maps.unread) : -1;
}
