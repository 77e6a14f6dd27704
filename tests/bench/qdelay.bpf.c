// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* An experiment, not part of sluice: how long an admitted http request waits in the server's
 * host before the application first reads it. sluice's own latency runs from the request's
 * first segment (TC ingress) to the first response byte (TC egress): waiting plus service.
 * Here the first read is seen when tcp_recvmsg has copied data of the server's socket, and the
 * request's start is read from sluice's own pinned `flows` map (reused, never written), so
 * the wait is the time the request sat in the socket (or, on a new connection, the accept
 * queue) while every worker was busy: the queue alone, without the service time.
 *
 * One sample per request: the first read that returns data after the request started.
 * Run by tests/bench/qdelay.c; tests/bench/qdelay-knee.sh drives the experiment. */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "sluice.h"
#include "sock_fields.h"

#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

char LICENSE[] SEC("license") = "Dual BSD/GPL";


const volatile __u16 service_port = 8080;   /* host order */

/* sluice's map, found by its pin (the loader sets the pin root): the same definition. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SLUICE_MAX_FLOWS);
	__type(key, struct sluice_flow_key);
	__type(value, struct sluice_flow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} flows SEC(".maps");

/* The request start already measured, per flow: one sample per request. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SLUICE_MAX_FLOWS);
	__type(key, struct sluice_flow_key);
	__type(value, __u64);
} seen SEC(".maps");

#define QD_BUCKETS 128
/* Waits in log-linear buckets of 4 per power of two of nanoseconds (bucket = 4 log2 + the two
 * bits below the top one), and their count and sum. */
struct qd_hist {
	__u64 bucket[QD_BUCKETS];
	__u64 count;
	__u64 sum_ns;
	__u64 reads;          /* reads of the port's sockets that returned data */
	__u64 no_flow;        /* ... whose connection sluice did not track */
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct qd_hist);
} hist SEC(".maps");

static __always_inline __u32 bucket_of(__u64 v)
{
	__u64 ns = v;
	__u32 lg = 0, b;

	/* floor(log2(ns)) by halving (no count-leading-zeros instruction in BPF) */
	if (ns >> 32) { lg += 32; ns >>= 32; }
	if (ns >> 16) { lg += 16; ns >>= 16; }
	if (ns >> 8) { lg += 8; ns >>= 8; }
	if (ns >> 4) { lg += 4; ns >>= 4; }
	if (ns >> 2) { lg += 2; ns >>= 2; }
	if (ns >> 1) { lg += 1; }

	if (lg < 2)
		return (__u32)v;
	b = 4 * (lg - 1) + (__u32)((v >> (lg - 2)) & 3);
	return b < QD_BUCKETS ? b : QD_BUCKETS - 1;
}

/* tcp_recvmsg calls tcp_rcv_space_adjust (and its tracepoint) each time it has copied data
 * to the application. A BTF tracepoint: it reads the socket's fields directly (this host's
 * kernel has no kprobes and refuses fentry/fexit programs, EPERM). */
SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(first_read, struct sock *sk)
{
	struct sluice_flow_key key = {};
	struct sluice_flow *f;
	struct qd_hist *h;
	__u32 zero = 0, own;
	__u64 start, now, *last;

	if (sk->__sk_common.skc_num != service_port)
		return 0;
	h = bpf_map_lookup_elem(&hist, &zero);
	if (!h)
		return 0;
	h->reads++;
	if (sk->__sk_common.skc_family == 2 /* AF_INET */) {
		__be32 a = sk->__sk_common.skc_daddr;
		__be32 l = sk->__sk_common.skc_rcv_saddr;

		key.client_addr[10] = key.client_addr[11] = 0xff;
		key.local_addr[10] = key.local_addr[11] = 0xff;
		__builtin_memcpy(key.client_addr + 12, &a, 4);
		__builtin_memcpy(key.local_addr + 12, &l, 4);
	} else {
		__builtin_memcpy(key.client_addr, &sk->__sk_common.skc_v6_daddr, 16);
		__builtin_memcpy(key.local_addr, &sk->__sk_common.skc_v6_rcv_saddr, 16);
	}
	key.client_port = sk->__sk_common.skc_dport;
	key.service_port = bpf_htons(service_port);
	f = bpf_map_lookup_elem(&flows, &key);
	if (!f) {
		h->no_flow++;
		return 0;
	}
	own = READ_ONCE(f->req_active);
	start = READ_ONCE(f->req_start_ns);
	if ((own & SLUICE_OWN_STATE) != SLUICE_OWN_ACTIVE || !start)
		return 0;
	last = bpf_map_lookup_elem(&seen, &key);
	if (last && *last == start)
		return 0;                        /* a later read of the same request */
	bpf_map_update_elem(&seen, &key, &start, BPF_ANY);
	now = bpf_ktime_get_ns();
	if (now <= start)
		return 0;
	h->bucket[bucket_of(now - start)]++;
	h->count++;
	h->sum_ns += now - start;
	return 0;
}
