// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/nicinfo.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/ethtool.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>

int nic_rx_vlan_offload(const char *ifname)
{
	struct ethtool_value ev = { .cmd = ETHTOOL_GFLAGS };
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&ev;
	rc = ioctl(fd, SIOCETHTOOL, &ifr) ? -errno : !!(ev.data & ETH_FLAG_RXVLAN);
	close(fd);
	return rc;
}

/* One RTM_GETLINK dump of this network namespace: 1 when ifindex has a master or some link
 * names it as its lower device (IFLA_LINK), 0 when not, -errno. */
int nic_has_upper(int ifindex)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = {
		.nh = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETLINK,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.ifi = { .ifi_family = AF_UNSPEC },
	};
	static char buf[32768];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), found = 0, rc = -EIO;

	if (fd < 0)
		return -errno;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		rc = -errno;
		goto out;
	}
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *nh;

		if (n < 0) {
			rc = -errno;
			goto out;
		}
		for (nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n)) {
			struct ifinfomsg *ifi = NLMSG_DATA(nh);
			struct rtattr *a;
			int alen;

			if (nh->nlmsg_type == NLMSG_DONE) {
				rc = found;
				goto out;
			}
			if (nh->nlmsg_type == NLMSG_ERROR)
				goto out;
			if (nh->nlmsg_type != RTM_NEWLINK)
				continue;
			int link = 0, master = 0, other_ns = 0;

			alen = (int)IFLA_PAYLOAD(nh);
			for (a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				int v;

				if (RTA_PAYLOAD(a) < sizeof(v))
					continue;
				memcpy(&v, RTA_DATA(a), sizeof(v));
				if (a->rta_type == IFLA_LINK)
					link = v;
				else if (a->rta_type == IFLA_MASTER)
					master = v;
				else if (a->rta_type == IFLA_LINK_NETNSID)
					other_ns = 1; /* its IFLA_LINK is an index over there */
			}
			if ((ifi->ifi_index == ifindex && master) ||
			    (ifi->ifi_index != ifindex && link == ifindex && !other_ns))
				found = 1;
		}
	}
out:
	close(fd);
	return rc;
}
