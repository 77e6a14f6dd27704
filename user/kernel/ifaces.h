/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Which interfaces the data path runs on. The config names interfaces, shell patterns
 * (`ens*`) and `auto` (the interfaces that carry a default route); they are resolved against
 * the links of the network namespace, at start and again whenever links or routes change
 * (hot-plug: a new interface that matches is attached without a restart).
 *
 * One packet must meet the programs once: the maps are shared, so a unit is counted once
 * whatever interface it arrives on or leaves by, but the same packet passing two attached
 * devices would be judged twice. A bond's port hands its packets to the bond and a VLAN
 * device's packets pass its lower device (whose programs parse the tag), so when both the
 * upper and the lower device are selected only the upper one (the bond) or the lower one (the
 * VLAN's parent) is kept: see ifaces_pick. */
#ifndef SLUICE_IFACES_H
#define SLUICE_IFACES_H

#include <stddef.h>
#include <net/if.h>
#include <linux/netlink.h>

#define SLUICE_MAX_IFACES 64   /* interfaces attached at once */

struct iface_link {
	int ifindex;
	char name[IF_NAMESIZE];
	int master;            /* IFLA_MASTER: the bond (or bridge) this link is a port of; 0 */
	int vlan_lower;        /* a VLAN device: its lower device's ifindex; 0 otherwise */
	int up;
};

/* The links of this network namespace (RTM_GETLINK dump), in *out (malloc'd, the caller
 * frees it; a node with a veth per pod has thousands). Returns how many, or -errno. */
int ifaces_links(struct iface_link **out);

/* Names of the devices that carry a default route in the text of /proc/net/route (IPv4) and
 * /proc/net/ipv6_route (IPv6), appended to out (n in use, at most max, no duplicates; a
 * rejecting default route and lo are skipped). Returns the new count. */
int ifaces_parse_route4(const char *text, char (*out)[IF_NAMESIZE], int n, int max);
int ifaces_parse_route6(const char *text, char (*out)[IF_NAMESIZE], int n, int max);

/* Both files read from this process's network namespace, and every nexthop of a default
 * route of several paths (a route dump: the files show one path a route). */
int ifaces_default_route_devs(char (*out)[IF_NAMESIZE], int max);

/* The links selected by the config's entries (names, fnmatch patterns, "auto" = the names in
 * defroute), one packet path counted once (see above). Returns the count, indices into links
 * in sel. A literal name that matches no link is reported in missing (one name, "" if none). */
int ifaces_pick(const struct iface_link *links, int n_links,
		const char (*specs)[IF_NAMESIZE], int n_specs,
		const char (*defroute)[IF_NAMESIZE], int n_defroute,
		int *sel, int max, char *missing, size_t missing_len);

/* A netlink socket told of link, route and tc changes (non-blocking), or -errno. */
int ifaces_watch_open(void);
/* Read what arrived: 1 when it may change the selection (time to resolve again), 0 when not.
 * A link's appearance or removal matters when its name matches an entry (a pod's veth coming
 * and going on a node does not, unless a pattern selects it); a route change only when it
 * is a default route and an entry is `auto`; the deletion of a clsact qdisc or of a filter on
 * one of its hooks does (sluice's TC programs may have gone with it: the resolve puts them
 * back); lost messages (ENOBUFS) always do. */
int ifaces_watch_drain(int fd, const char (*specs)[IF_NAMESIZE], int n_specs);

/* The same decision for one netlink message (tests). */
int ifaces_message_matters(const struct nlmsghdr *nh, const char (*specs)[IF_NAMESIZE],
			   int n_specs);

#endif
