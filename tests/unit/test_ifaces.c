// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Interface selection: names, patterns and `auto` (default routes from the text of
 * /proc/net/route and /proc/net/ipv6_route), one packet path counted once (a bond's port and
 * a VLAN over a selected parent are left out), the config keys `interface` / `interfaces`,
 * and the links of a real namespace read over netlink. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sched.h>
#include <unistd.h>
#include <sys/wait.h>
#include <linux/rtnetlink.h>
#include <linux/pkt_sched.h>

#include "kernel/ifaces.h"
#include "common/config.h"

static const char route4[] =
	"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	"eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
	"eth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
	"eth2\t00000000\t0101A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
	"eth1\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	"eth3\t00000000\t00000000\t0201\t0\t0\t0\t00000000\t0\t0\t0\n"    /* unreachable */
	"eth4\t00000000\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n";   /* 0.0.0.0/8 */

static const char route6[] =
	"fe800000000000000000000000000000 40 00000000000000000000000000000000 00 "
	"00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth1\n"
	"00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
	"fe800000000000000000000000000001 00000400 00000001 00000000 00000003     bond0\n"
	"00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
	"00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n"
	"00000000000000000000000000000000 08 00000000000000000000000000000000 00 "
	"00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth5\n";

static void test_default_routes(void **st)
{
	char out[8][IF_NAMESIZE];
	int n = ifaces_parse_route4(route4, out, 0, 8);

	assert_int_equal(n, 2);
	assert_string_equal(out[0], "eth0");
	assert_string_equal(out[1], "eth2");
	n = ifaces_parse_route6(route6, out, n, 8);
	assert_int_equal(n, 3);
	assert_string_equal(out[2], "bond0");
	/* a device named twice is listed once */
	assert_int_equal(ifaces_parse_route4(route4, out, n, 8), 3);
}

/* 1 eth0, 2 eth1, 3 eth2, 4 bond0 (ports eth1, eth2), 5 eth0.100 (VLAN over eth0), 6 lo,
 * 7 ens3, 8 ens4 */
static const struct iface_link links[] = {
	{ 1, "eth0", 0, 0, 1 }, { 2, "eth1", 4, 0, 1 }, { 3, "eth2", 4, 0, 1 },
	{ 4, "bond0", 0, 0, 1 }, { 5, "eth0.100", 0, 1, 1 }, { 6, "lo", 0, 0, 1 },
	{ 7, "ens3", 0, 0, 1 }, { 8, "ens4", 0, 0, 1 },
};
#define N_LINKS ((int)(sizeof(links) / sizeof(links[0])))

static const char *pick(const char (*specs)[IF_NAMESIZE], int n_specs,
			const char (*def)[IF_NAMESIZE], int n_def, char *missing)
{
	static char buf[256];
	int sel[16], n = ifaces_pick(links, N_LINKS, specs, n_specs, def, n_def, sel, 16,
				     missing, IF_NAMESIZE);

	buf[0] = 0;
	for (int i = 0; i < n; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? " " : "",
			 links[sel[i]].name);
	return buf;
}

static void test_pick(void **st)
{
	char missing[IF_NAMESIZE];
	const char names[][IF_NAMESIZE] = { "eth0", "ens4" };
	const char glob[][IF_NAMESIZE] = { "ens*" };
	const char everything[][IF_NAMESIZE] = { "*" };
	const char vlan_only[][IF_NAMESIZE] = { "eth0.100" };
	const char ports[][IF_NAMESIZE] = { "eth1", "eth2" };
	const char autos[][IF_NAMESIZE] = { "auto" };
	const char gone[][IF_NAMESIZE] = { "eth0", "eth9" };
	const char def[][IF_NAMESIZE] = { "bond0" };

	assert_string_equal(pick(names, 2, NULL, 0, missing), "eth0 ens4");
	assert_string_equal(missing, "");
	assert_string_equal(pick(glob, 1, NULL, 0, missing), "ens3 ens4");
	/* everything: the bond's ports go (the bond sees their packets), the VLAN goes (its
	 * parent eth0 sees its packets, tag and all) */
	assert_string_equal(pick(everything, 1, NULL, 0, missing), "eth0 bond0 lo ens3 ens4");
	/* a VLAN or bond ports without their upper/lower device are kept */
	assert_string_equal(pick(vlan_only, 1, NULL, 0, missing), "eth0.100");
	assert_string_equal(pick(ports, 2, NULL, 0, missing), "eth1 eth2");
	assert_string_equal(pick(autos, 1, def, 1, missing), "bond0");
	assert_string_equal(pick(autos, 1, NULL, 0, missing), "");
	assert_string_equal(pick(gone, 2, NULL, 0, missing), "eth0");
	assert_string_equal(missing, "eth9");
	/* a pattern that matches nothing is not missing: its interfaces may appear later */
	assert_string_equal(pick(glob, 0, NULL, 0, missing), "");
	assert_string_equal(missing, "");
}

static void test_links_of_this_namespace(void **st)
{
	struct iface_link *l;
	int n = ifaces_links(&l), lo = 0;

	assert_true(n >= 1);
	for (int i = 0; i < n; i++)
		if (!strcmp(l[i].name, "lo"))
			lo = l[i].ifindex;
	assert_int_equal(lo, 1);
	free(l);
}

/* `auto` on a default route of several paths selects every path's interface:
 * /proc/net/route shows an IPv4 multipath route by its first nexthop only, and
 * /proc/net/ipv6_route a route through a nexthop group (IPv4 or IPv6) so too. In a network
 * namespace of its own (a child, so that the other tests keep theirs); without root or
 * iproute2 a skip. */
static int picks_both(const char *setup)
{
	char cmd[1024], out[8][IF_NAMESIZE];
	int n, d0 = 0, d1 = 0;

	snprintf(cmd, sizeof(cmd),
		 "set -e; for i in 0 1; do ip link add d$i type veth peer name p$i; "
		 "ip link set d$i up; ip link set p$i up; "
		 "ip addr add 10.0.$i.1/24 dev d$i; ip -6 addr add 2001:db8:$i::1/64 dev d$i nodad; "
		 "done; %s", setup);
	if (system(cmd))
		return 2;
	n = ifaces_default_route_devs(out, 8);
	for (int i = 0; i < n; i++) {
		d0 |= !strcmp(out[i], "d0");
		d1 |= !strcmp(out[i], "d1");
	}
	return d0 && d1 ? 0 : 1;
}

static void test_default_route_of_several_paths(void **st)
{
	static const char *const setups[] = {
		"ip route add default nexthop via 10.0.0.2 dev d0 nexthop via 10.0.1.2 dev d1",
		"ip -6 route add default nexthop via 2001:db8:0::2 dev d0 "
		"nexthop via 2001:db8:1::2 dev d1",
		"ip nexthop add id 1 via 2001:db8:0::2 dev d0; ip nexthop add id 2 via "
		"2001:db8:1::2 dev d1; ip nexthop add id 10 group 1/2; "
		"ip -6 route add default nhid 10",
	};

	if (geteuid() != 0 || system("ip -V >/dev/null 2>&1")) {
		print_message("# skip reason: needs root and iproute2 (a network namespace)\n");
		skip();
	}
	for (size_t i = 0; i < sizeof(setups) / sizeof(setups[0]); i++) {
		pid_t pid = fork();
		int status = 0;

		assert_true(pid >= 0);
		if (pid == 0)
			_exit(unshare(CLONE_NEWNET) ? 2 : picks_both(setups[i]));
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			fail_msg("%s: %s", setups[i],
				 WIFEXITED(status) && WEXITSTATUS(status) == 1 ?
				 "auto did not select both d0 and d1" : "setting up failed");
	}
}

/* One RTM_NEWLINK/RTM_DELLINK message for a link named name, or a route message. */
static struct nlmsghdr *link_msg(int type, const char *name)
{
	static union { struct nlmsghdr nh; char b[256]; } m;
	struct ifinfomsg *ifi;
	struct rtattr *a;

	memset(&m, 0, sizeof(m));
	m.nh.nlmsg_type = (unsigned short)type;
	ifi = NLMSG_DATA(&m.nh);
	ifi->ifi_index = 7;
	a = (struct rtattr *)((char *)ifi + NLMSG_ALIGN(sizeof(*ifi)));
	a->rta_type = IFLA_IFNAME;
	a->rta_len = (unsigned short)RTA_LENGTH(strlen(name) + 1);
	memcpy(RTA_DATA(a), name, strlen(name) + 1);
	m.nh.nlmsg_len = NLMSG_LENGTH(NLMSG_ALIGN(sizeof(*ifi)) + RTA_ALIGN(a->rta_len));
	return &m.nh;
}

static struct nlmsghdr *route_msg(int type, int dst_len)
{
	static union { struct nlmsghdr nh; char b[64]; } m;
	struct rtmsg *rt;

	memset(&m, 0, sizeof(m));
	m.nh.nlmsg_type = (unsigned short)type;
	m.nh.nlmsg_len = NLMSG_LENGTH(sizeof(*rt));
	rt = NLMSG_DATA(&m.nh);
	rt->rtm_family = AF_INET;
	rt->rtm_dst_len = (unsigned char)dst_len;
	return &m.nh;
}

static struct nlmsghdr *tc_msg(int type, unsigned parent)
{
	static union { struct nlmsghdr nh; char b[64]; } m;
	struct tcmsg *tc;

	memset(&m, 0, sizeof(m));
	m.nh.nlmsg_type = (unsigned short)type;
	m.nh.nlmsg_len = NLMSG_LENGTH(sizeof(*tc));
	tc = NLMSG_DATA(&m.nh);
	tc->tcm_ifindex = 2;
	tc->tcm_parent = parent;
	return &m.nh;
}

/* sluice's TC filters are not pinned: `tc qdisc del dev X clsact` by another tool took them
 * off for good, the interface still shown as attached and its HTTP services unjudged. The
 * deletion asks for a resolve (which puts them back), whatever the entries. */
static void test_clsact_deletions_matter(void **st)
{
	const char ens[][IF_NAMESIZE] = { "ens*" };
	const char autos[][IF_NAMESIZE] = { "auto" };

	assert_true(ifaces_message_matters(tc_msg(RTM_DELQDISC, TC_H_CLSACT), ens, 1));
	assert_true(ifaces_message_matters(tc_msg(RTM_DELQDISC, TC_H_CLSACT), autos, 1));
	assert_true(ifaces_message_matters(tc_msg(RTM_DELTFILTER,
		TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)), ens, 1));
	assert_true(ifaces_message_matters(tc_msg(RTM_DELTFILTER,
		TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)), ens, 1));
	/* a root qdisc or a class's filter going, a qdisc or filter added: nothing of sluice's */
	assert_false(ifaces_message_matters(tc_msg(RTM_DELQDISC, TC_H_ROOT), ens, 1));
	assert_false(ifaces_message_matters(tc_msg(RTM_DELTFILTER, TC_H_MAKE(0x10000, 0)), ens, 1));
	assert_false(ifaces_message_matters(tc_msg(RTM_NEWQDISC, TC_H_CLSACT), ens, 1));
	assert_false(ifaces_message_matters(tc_msg(RTM_NEWTFILTER,
		TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)), ens, 1));
}

static void test_which_changes_matter(void **st)
{
	const char ens[][IF_NAMESIZE] = { "ens*", "eth0" };
	const char autos[][IF_NAMESIZE] = { "auto" };

	assert_true(ifaces_message_matters(link_msg(RTM_NEWLINK, "ens5"), ens, 2));
	assert_true(ifaces_message_matters(link_msg(RTM_NEWLINK, "eth0"), ens, 2));
	assert_true(ifaces_message_matters(link_msg(RTM_DELLINK, "ens5"), ens, 2));
	/* a pod's veth comes and goes: no resolve */
	assert_false(ifaces_message_matters(link_msg(RTM_NEWLINK, "veth1a2b3c"), ens, 2));
	assert_false(ifaces_message_matters(link_msg(RTM_DELLINK, "veth1a2b3c"), ens, 2));
	assert_false(ifaces_message_matters(route_msg(RTM_NEWROUTE, 0), ens, 2));
	/* auto: default routes matter, other routes (a pod's /32) do not */
	assert_true(ifaces_message_matters(route_msg(RTM_NEWROUTE, 0), autos, 1));
	assert_true(ifaces_message_matters(route_msg(RTM_DELROUTE, 0), autos, 1));
	assert_false(ifaces_message_matters(route_msg(RTM_NEWROUTE, 32), autos, 1));
	assert_false(ifaces_message_matters(link_msg(RTM_NEWLINK, "veth1a2b3c"), autos, 1));
	assert_true(ifaces_message_matters(link_msg(RTM_DELLINK, "eth3"), autos, 1));
}

static int parse(const char *text, struct sluice_config *c, struct doc_errors *e)
{
	return sluice_config_parse(text, strlen(text), "t.yaml", c, e);
}

static void test_config_keys(void **st)
{
	static struct sluice_config c;
	struct doc_errors e;
	char buf[128];

	assert_int_equal(parse("interface: eth0\nservices: [{name: a, port: 80}]\n", &c, &e), 0);
	assert_int_equal(c.n_ifspecs, 1);
	assert_string_equal(c.ifspecs[0], "eth0");
	assert_string_equal(c.interface, "eth0");
	sluice_config_free(&c);
	assert_int_equal(parse("interfaces: [eth0, \"ens*\", auto, bond0.7]\n"
			       "services: [{name: a, port: 80}]\n", &c, &e), 0);
	assert_int_equal(c.n_ifspecs, 4);
	assert_string_equal(sluice_config_ifaces(&c, buf, sizeof(buf)), "eth0, ens*, auto, bond0.7");
	sluice_config_free(&c);
	assert_int_equal(parse("interfaces: eth1\nservices: [{name: a, port: 80}]\n", &c, &e), 0);
	assert_string_equal(c.ifspecs[0], "eth1");
	sluice_config_free(&c);
	assert_int_not_equal(parse("interfaces: []\nservices: [{name: a, port: 80}]\n", &c, &e), 0);
	sluice_config_free(&c);
	assert_int_not_equal(parse("interfaces: [eth0, eth0]\nservices: [{name: a, port: 80}]\n",
				   &c, &e), 0);
	assert_non_null(strstr(e.e[0].msg, "twice"));
	sluice_config_free(&c);
	assert_int_not_equal(parse("interface: eth0\ninterfaces: [eth1]\n"
				   "services: [{name: a, port: 80}]\n", &c, &e), 0);
	assert_non_null(strstr(e.e[0].msg, "not both"));
	sluice_config_free(&c);
	assert_int_not_equal(parse("interfaces: [\"a/b\"]\nservices: [{name: a, port: 80}]\n",
				   &c, &e), 0);
	sluice_config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_routes),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_links_of_this_namespace),
		cmocka_unit_test(test_default_route_of_several_paths),
		cmocka_unit_test(test_config_keys),
		cmocka_unit_test(test_which_changes_matter),
		cmocka_unit_test(test_clsact_deletions_matter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
