// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/ifaces.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>
#include <linux/pkt_sched.h>

/* ---- the links (one RTM_GETLINK dump) */

static void link_attrs(struct ifinfomsg *ifi, int len, struct iface_link *l)
{
	struct rtattr *a;
	int is_vlan = 0, link = 0;

	memset(l, 0, sizeof(*l));
	l->ifindex = ifi->ifi_index;
	l->up = !!(ifi->ifi_flags & IFF_UP);
	for (a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == IFLA_IFNAME)
			snprintf(l->name, sizeof(l->name), "%s", (char *)RTA_DATA(a));
		else if (a->rta_type == IFLA_MASTER && RTA_PAYLOAD(a) >= 4)
			l->master = *(int *)RTA_DATA(a);
		else if (a->rta_type == IFLA_LINK && RTA_PAYLOAD(a) >= 4)
			link = *(int *)RTA_DATA(a);
		else if (a->rta_type == IFLA_LINKINFO) {
			struct rtattr *i = RTA_DATA(a);
			int ilen = (int)RTA_PAYLOAD(a);

			for (; RTA_OK(i, ilen); i = RTA_NEXT(i, ilen))
				if (i->rta_type == IFLA_INFO_KIND &&
				    !strncmp(RTA_DATA(i), "vlan", RTA_PAYLOAD(i)))
					is_vlan = 1;
		}
	}
	/* IFLA_LINK of a veth names its peer (maybe in another namespace): only a VLAN's is the
	 * device its packets pass. */
	if (is_vlan)
		l->vlan_lower = link;
}

int ifaces_links(struct iface_link **out)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = { .nh = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETLINK,
			  .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		  .ifi = { .ifi_family = AF_UNSPEC } };
	static __thread char buf[32768];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), n = 0, done = 0, cap = 0;
	struct iface_link *l = NULL;

	*out = NULL;
	if (fd < 0)
		return -errno;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	while (!done) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *nh;

		if (len <= 0) {
			int e = len < 0 ? errno : EIO;
			close(fd);
			free(l);
			return -e;
		}
		for (nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (unsigned)len);
		     nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_type == NLMSG_DONE || nh->nlmsg_type == NLMSG_ERROR) {
				done = 1;
				break;
			}
			if (nh->nlmsg_type != RTM_NEWLINK)
				continue;
			if (n == cap) {
				struct iface_link *nl = realloc(l, sizeof(*l) * (cap ? 2 * cap : 64));

				if (!nl) {
					close(fd);
					free(l);
					return -ENOMEM;
				}
				l = nl;
				cap = cap ? 2 * cap : 64;
			}
			link_attrs(NLMSG_DATA(nh), (int)IFLA_PAYLOAD(nh), &l[n]);
			if (l[n].name[0])
				n++;
		}
	}
	close(fd);
	*out = l;
	return n;
}

/* ---- default routes */

static int add_name(char (*out)[IF_NAMESIZE], int n, int max, const char *name)
{
	if (!name[0] || !strcmp(name, "lo") || n >= max)
		return n;
	for (int i = 0; i < n; i++)
		if (!strcmp(out[i], name))
			return n;
	snprintf(out[n], IF_NAMESIZE, "%s", name);
	return n + 1;
}

#define RTF_REJECT_FLAG 0x0200

/* Iface Destination Gateway Flags RefCnt Use Metric Mask ...: a default route has
 * destination and mask 0. */
int ifaces_parse_route4(const char *text, char (*out)[IF_NAMESIZE], int n, int max)
{
	const char *line = text;

	while (line && *line) {
		char dev[64];
		unsigned dst, gw, flags, mask;
		int refcnt, use, metric;

		if (sscanf(line, "%63s %x %x %x %d %d %d %x", dev, &dst, &gw, &flags, &refcnt,
			   &use, &metric, &mask) == 8 &&
		    dst == 0 && mask == 0 && !(flags & RTF_REJECT_FLAG) && strlen(dev) < IF_NAMESIZE)
			n = add_name(out, n, max, dev);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return n;
}

/* dst dst_len src src_len nexthop metric refcnt use flags dev: a default route is ::/0. */
int ifaces_parse_route6(const char *text, char (*out)[IF_NAMESIZE], int n, int max)
{
	const char *line = text;

	while (line && *line) {
		char dst[40], src[40], nh[40], dev[64];
		unsigned dlen, slen, metric, refcnt, use, flags;

		if (sscanf(line, "%39s %x %39s %x %39s %x %x %x %x %63s", dst, &dlen, src, &slen, nh,
			   &metric, &refcnt, &use, &flags, dev) == 10 &&
		    dlen == 0 && strspn(dst, "0") == 32 && !(flags & RTF_REJECT_FLAG) &&
		    strlen(dev) < IF_NAMESIZE)
			n = add_name(out, n, max, dev);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	size_t cap = 8192, len = 0, got;
	char *buf;

	if (!f)
		return NULL;
	buf = malloc(cap);
	while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += got;
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf)
		buf[len] = 0;
	return buf;
}

/* The devices of every nexthop of the default routes (main table), from a netlink dump of
 * family's routes. /proc/net/route and /proc/net/ipv6_route show one nexthop a route: the
 * first of an IPv4 multipath route, and of a route through a nexthop group (`ip route add
 * default nhid N`, IPv4 or IPv6); the other paths' interfaces carry default traffic too. */
static int default_route_nexthops(int family, char (*out)[IF_NAMESIZE], int n, int max)
{
	struct {
		struct nlmsghdr nlh;
		struct rtmsg rtm;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETROUTE,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.rtm = { .rtm_family = (unsigned char)family },
	};
	static char buf[32768];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), done = 0;

	if (fd < 0)
		return n;
	if (send(fd, &req, sizeof(req), 0) < 0)
		done = 1;
	while (!done) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (len <= 0)
			break;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
			struct rtmsg *rtm = NLMSG_DATA(h);
			struct rtattr *a = RTM_RTA(rtm);
			int alen = (int)RTM_PAYLOAD(h);
			char name[IF_NAMESIZE];

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = 1;
				break;
			}
			if (h->nlmsg_type != RTM_NEWROUTE || rtm->rtm_dst_len != 0 ||
			    rtm->rtm_type != RTN_UNICAST || rtm->rtm_table != RT_TABLE_MAIN)
				continue;
			for (; RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= 4) {
					if (if_indextoname(*(unsigned *)RTA_DATA(a), name))
						n = add_name(out, n, max, name);
				} else if (a->rta_type == RTA_MULTIPATH) {
					struct rtnexthop *nh = RTA_DATA(a);
					int left = (int)RTA_PAYLOAD(a);

					while (left >= (int)sizeof(*nh) && nh->rtnh_len >= sizeof(*nh) &&
					       nh->rtnh_len <= left) {
						if (if_indextoname((unsigned)nh->rtnh_ifindex, name))
							n = add_name(out, n, max, name);
						left -= RTNH_ALIGN(nh->rtnh_len);
						nh = RTNH_NEXT(nh);
					}
				}
			}
		}
	}
	close(fd);
	return n;
}

int ifaces_default_route_devs(char (*out)[IF_NAMESIZE], int max)
{
	char *t4 = slurp("/proc/net/route"), *t6 = slurp("/proc/net/ipv6_route");
	int n = 0;

	if (t4)
		n = ifaces_parse_route4(t4, out, n, max);
	if (t6)
		n = ifaces_parse_route6(t6, out, n, max);
	free(t4);
	free(t6);
	n = default_route_nexthops(AF_INET, out, n, max);
	return default_route_nexthops(AF_INET6, out, n, max);
}

/* ---- selection */

static int spec_matches(const char *spec, const char *name,
			const char (*defroute)[IF_NAMESIZE], int n_defroute)
{
	if (!strcmp(spec, "auto")) {
		for (int i = 0; i < n_defroute; i++)
			if (!strcmp(defroute[i], name))
				return 1;
		return 0;
	}
	return fnmatch(spec, name, 0) == 0;
}

static int is_pattern(const char *spec)
{
	return !strcmp(spec, "auto") || strpbrk(spec, "*?[") != NULL;
}

static int selected(const struct iface_link *links, const int *chosen, int ifindex, int n_links)
{
	for (int i = 0; i < n_links; i++)
		if (links[i].ifindex == ifindex)
			return chosen[i];
	return 0;
}

int ifaces_pick(const struct iface_link *links, int n_links,
		const char (*specs)[IF_NAMESIZE], int n_specs,
		const char (*defroute)[IF_NAMESIZE], int n_defroute,
		int *sel, int max, char *missing, size_t missing_len)
{
	int *chosen = calloc((size_t)(n_links > 0 ? n_links : 1), sizeof(int)), n = 0;

	if (missing_len)
		missing[0] = 0;
	if (!chosen)
		return -ENOMEM;
	for (int s = 0; s < n_specs; s++) {
		int hit = 0;

		for (int i = 0; i < n_links; i++)
			if (spec_matches(specs[s], links[i].name, defroute, n_defroute))
				chosen[i] = hit = 1;
		if (!hit && !is_pattern(specs[s]) && missing_len && !missing[0])
			snprintf(missing, missing_len, "%s", specs[s]);
	}
	for (int i = 0; i < n_links && n < max; i++) {
		if (!chosen[i])
			continue;
		/* A bond's port: the bond sees its packets. A VLAN: its lower device does. */
		if (links[i].master && selected(links, chosen, links[i].master, n_links))
			continue;
		if (links[i].vlan_lower && selected(links, chosen, links[i].vlan_lower, n_links))
			continue;
		sel[n++] = i;
	}
	free(chosen);
	return n;
}

/* ---- changes */

int ifaces_watch_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
				  .nl_groups = RTMGRP_LINK | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE |
						RTMGRP_TC };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int ifaces_message_matters(const struct nlmsghdr *nh, const char (*specs)[IF_NAMESIZE],
			   int n_specs)
{
	int want_auto = 0;

	for (int i = 0; i < n_specs; i++)
		want_auto |= !strcmp(specs[i], "auto");
	if (nh->nlmsg_type == RTM_NEWROUTE || nh->nlmsg_type == RTM_DELROUTE) {
		const struct rtmsg *rt = NLMSG_DATA(nh);

		return want_auto && nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*rt)) &&
		       rt->rtm_dst_len == 0;
	}
	/* A clsact qdisc or a filter on one of its hooks deleted: maybe sluice's TC programs,
	 * which the resolve puts back (other tc changes, a qdisc's statistics, do not matter). */
	if (nh->nlmsg_type == RTM_DELQDISC || nh->nlmsg_type == RTM_DELTFILTER) {
		const struct tcmsg *tc = NLMSG_DATA(nh);

		if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*tc)))
			return 0;
		if (nh->nlmsg_type == RTM_DELQDISC)
			return tc->tcm_parent == TC_H_CLSACT;
		return tc->tcm_parent != TC_H_ROOT &&
		       TC_H_MAJ(tc->tcm_parent) == TC_H_MAJ(TC_H_CLSACT);
	}
	if (nh->nlmsg_type == RTM_NEWLINK || nh->nlmsg_type == RTM_DELLINK) {
		struct iface_link l;

		if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg)))
			return 0;
		link_attrs(NLMSG_DATA(nh), (int)IFLA_PAYLOAD(nh), &l);
		/* auto: a link that carries a default route is announced by its route; one that
		 * goes away must be forgotten */
		for (int i = 0; i < n_specs; i++)
			if (strcmp(specs[i], "auto") ? fnmatch(specs[i], l.name, 0) == 0
						     : nh->nlmsg_type == RTM_DELLINK)
				return 1;
	}
	return 0;
}

int ifaces_watch_drain(int fd, const char (*specs)[IF_NAMESIZE], int n_specs)
{
	static __thread char buf[16384];
	int any = 0;
	ssize_t r;

	while ((r = recv(fd, buf, sizeof(buf), 0)) > 0 || (r < 0 && errno == ENOBUFS)) {
		struct nlmsghdr *nh;
		int len = (int)r;

		if (r < 0) {
			any = 1; /* messages were lost: resolve to be sure */
			continue;
		}
		for (nh = (struct nlmsghdr *)buf; !any && NLMSG_OK(nh, (unsigned)len);
		     nh = NLMSG_NEXT(nh, len))
			any = ifaces_message_matters(nh, specs, n_specs);
	}
	return any;
}
