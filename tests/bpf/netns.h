// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A private network namespace for a test process (define _GNU_SOURCE before any include:
 * unshare needs it). */
#ifndef SLUICE_TEST_NETNS_H
#define SLUICE_TEST_NETNS_H
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* A private network namespace for the calling process, its loopback up: what the test sends
 * (real sockets, 429 replies cloned to the test skb's device) stays the test's alone, and goes
 * with the process. 0, or -1 with the reason on stderr. */
static inline int private_loopback(void)
{
	struct ifreq ifr = { 0 };
	int s, rc;

	if (unshare(CLONE_NEWNET) != 0) {
		perror("unshare(CLONE_NEWNET)");
		return -1;
	}
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		return -1;
	strcpy(ifr.ifr_name, "lo");
	rc = ioctl(s, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	if (rc == 0)
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	if (rc)
		perror("bringing lo up");
	close(s);
	return rc ? -1 : 0;
}

#endif
