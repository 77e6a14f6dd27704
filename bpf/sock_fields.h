/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The fields of a kernel socket that the tracepoint programs read (bpf/readwait.bpf.c, and the
 * experiment tests/bench/qdelay.bpf.c), declared here and placed by CO-RE from the running
 * kernel's BTF: no vmlinux.h, only what is read. */
#ifndef SLUICE_SOCK_FIELDS_H
#define SLUICE_SOCK_FIELDS_H

#include <linux/types.h>

struct in6_addr___sk {
	__u8 s6_addr[16];
};
struct sock_common {
	__be32 skc_daddr;               /* the peer's IPv4 address */
	__be32 skc_rcv_saddr;           /* the local IPv4 address */
	__be16 skc_dport;               /* the peer's port, network order */
	__u16 skc_num;                  /* the local port, host order */
	unsigned short skc_family;
	struct in6_addr___sk skc_v6_daddr;
	struct in6_addr___sk skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));
struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

#endif
