/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What the data path needs to know about a NIC beyond its index, asked of the kernel in the
 * caller's network namespace (never through /sys, which may show another namespace). */
#ifndef SLUICE_NICINFO_H
#define SLUICE_NICINFO_H

/* 1 when the interface strips VLAN tags on receive into skb metadata (rx VLAN offload:
 * XDP then sees frames without their tag), 0 when not, -errno. */
int nic_rx_vlan_offload(const char *ifname);

/* 1 when something sits on top of the interface (a master such as a bridge or bond, or a
 * device with it as its lower link such as a VLAN device), 0 when not, -errno. */
int nic_has_upper(int ifindex);

#endif
