/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The control of the baseline object's new-connection stream (empty_xdp.bpf.c stream_xdp),
 * written by tests/bpf/bench_pktcost.c before each stream: one definition for both sides. */
#ifndef SLUICE_BENCH_STREAM_CTL_H
#define SLUICE_BENCH_STREAM_CTL_H
#include <linux/types.h>

#define STREAM_FRAME_MAX 256

struct stream_ctl {
	__u32 sport_off; /* the TCP source port's offset in the frame */
	__u16 base;      /* the first port */
	__u16 next;      /* runs so far */
	__u16 stride;    /* stream_xdp: run i writes base + i x stride (an odd stride visits all
	                  * 65536 ports in a scattered order); stream_tc steps by 1 */
	__u16 evict_lines; /* stream_xdp: cache lines of a 32 MiB table touched before each run,
	                    * each packet's share of what a host's other traffic does to the
	                    * caches (the baseline touches the same lines) */
	__u32 frame_len; /* stream_tc: when not 0, every run first writes frame back into the
	                  * packet (a path that rewrites it, such as the 429's RST) */
	__u8 frame[STREAM_FRAME_MAX];
};

#endif
