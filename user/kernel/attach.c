// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/attach.h"

#include <errno.h>
#include <stdio.h>
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
#include "sluice.skel.h"

#define XDP_LINK_PIN "link_xdp"

static __u64 current_netns_ino(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) == 0 ? (__u64)st.st_ino : 0;
}

static int ensure_bpffs_dir(const char *pin_dir, char *err, size_t errlen)
{
	char parent[512];
	struct statfs fs;
	char *slash;

	snprintf(parent, sizeof(parent), "%s", pin_dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = 0;
	if (statfs(parent, &fs) == 0 && fs.f_type != BPF_FS_MAGIC) {
		/* Hosts without a bpffs mount (a bare container): mount one. */
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
	{ "busy", 1 }, { "busy_released", 1 },
	{ "replies", 2 }, { "class_stats", SLUICE_NUM_CLASSES },
	{ "latency_hist", SLUICE_NUM_CLASSES }, { "latency_samples", 1 },
	{ "halfopen", 1 },
	{ "ctl_state", 1 }, { "ctl_requests", 1 },
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
	rc = ensure_bpffs_dir(pin_dir, err, errlen);
	if (rc)
		return rc;
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
		snprintf(err, errlen,
			 "cannot load BPF programs: %s%s", strerror(-rc),
			 st->adopted ? " (pinned maps under the pin dir may be from an incompatible "
				       "version: run `sluicectl detach` first)" : "");
		sluice_bpf__destroy(st->skel);
		st->skel = NULL;
		return rc;
	}
	return layout_copy(&st->layout, err, errlen);
}

/* Pinned XDP link on this interface: swap its program. Otherwise create and pin one. */
static int attach_xdp(struct attach_state *st, const char *pin_dir, int xdp_mode,
		      char *err, size_t errlen)
{
	int prog_fd = bpf_program__fd(st->skel->progs.sluice_xdp_ingress);
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, XDP_LINK_PIN);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		struct bpf_link_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    info.type == BPF_LINK_TYPE_XDP && (int)info.xdp.ifindex == st->ifindex &&
		    bpf_link_update(fd, prog_fd, NULL) == 0) {
			st->xdp_link_fd = fd;
			st->xdp_mode_used = "adopted";
			return 0;
		}
		/* Stale link (interface gone or changed): replace it. */
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

int attach_interface(struct attach_state *st, const char *pin_dir, const char *ifname,
		     int xdp_mode, char *err, size_t errlen)
{
	struct sluice_maps m;
	struct sluice_globals g;
	int rc;

	st->ifindex = if_nametoindex(ifname);
	if (!st->ifindex) {
		snprintf(err, errlen, "no interface named '%s'", ifname);
		return -ENODEV;
	}
	rc = attach_xdp(st, pin_dir, xdp_mode, err, errlen);
	if (rc)
		return rc;
	rc = attach_tc(st->ifindex, BPF_TC_EGRESS,
		       bpf_program__fd(st->skel->progs.sluice_tc_egress), err, errlen);
	if (rc)
		return rc;
	rc = attach_tc(st->ifindex, BPF_TC_INGRESS,
		       bpf_program__fd(st->skel->progs.sluice_tc_ingress), err, errlen);
	if (rc)
		return rc;
	/* The new programs run: a migration moves the pin names to the fresh maps now. */
	rc = layout_commit(&st->layout, st->skel->obj, pin_dir, err, errlen);
	if (rc)
		return rc;
	/* Record where we are attached, so `sluicectl detach` can find the TC filters. */
	if (maps_open_pinned(pin_dir, &m) == 0) {
		if (maps_read_globals(&m, &g) == 0) {
			g.ifindex = st->ifindex;
			g.netns_ino = current_netns_ino();
			maps_write_globals(&m, &g);
		}
		maps_close(&m);
	}
	return 0;
}

void attach_release(struct attach_state *st)
{
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
	DIR *d;
	int fd, found = 0;

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
		if (g.ifindex) {
			detach_tc(g.ifindex, BPF_TC_EGRESS);
			detach_tc(g.ifindex, BPF_TC_INGRESS);
		}
		maps_close(&m);
		found = 1;
	}
	snprintf(path, sizeof(path), "%s/%s", pin_dir, XDP_LINK_PIN);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		bpf_link_detach(fd);
		close(fd);
		found = 1;
	}
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
