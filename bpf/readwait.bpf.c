// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The wait before the server reads: an optional object sluiced loads beside the data path
 * (user/kernel/readwait.c). Where the data path measures a unit's latency from its first
 * segment (TC ingress) to the first response byte (TC egress), this measures the first part
 * alone: how long the unit sat in the host -- in its socket, or on a new connection in the
 * accept queue -- before the server first read it. Admitting more than the server has
 * workers for adds only this wait, so it marks the knee where the latency cannot
 * (docs/CONTROLLER.md, "The wait before the server reads").
 *
 * A BTF tracepoint at tcp_rcv_space_adjust, which tcp_recvmsg (and the kernel's other ways of
 * reading a TCP socket) calls each time it has copied data to the application. For a socket
 * whose local port is a service, the probe reads that connection's entry of the data path's
 * `flows` (the same map, shared by fd): while the entry holds an open unit -- an http request,
 * or a tcp turn -- the first read after the unit started is one sample, now - req_start_ns,
 * counted for the service in `wait_stats`. The one write to `flows`: an http request counted
 * by the read gate (SLUICE_OWN_UNREAD in its ownership word) is read now, so the bit is taken
 * off and the request's count in `unread` with it.
 *
 * What a packet can do here: nothing it could not already do to `flows`. The probe runs on
 * reads of local sockets, creates no entry in any map of the data path, and keeps one 8-byte
 * note per socket (`seen`, socket-local storage freed with the socket) only for a connection
 * that holds a flow with a unit open; a read of a socket of another port costs one array
 * lookup. No kprobe, no fentry: a tracepoint with BTF arguments (some kernels refuse fentry
 * programs, and kprobes may be compiled out). */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "sluice.h"
#include "map_shapes.h"
#include "sock_fields.h"

#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET  2
#define AF_INET6 10


/* Set by the loader before load: the service slots of the data path's per-service maps (the
 * max_entries of its `services`) and the CPUs (libbpf_num_possible_cpus). `wait_stats` is
 * sized nr_cpus x nr_slots. */
const volatile __u32 nr_slots = SLUICE_MIN_SERVICE_SLOTS;
const volatile __u32 nr_cpus = 1;

/* The data path's maps, their shapes from map_shapes.h (bpf/maps.h's too); the loader hands
 * this object the loaded data path's own maps (bpf_map__reuse_fd) before load, so nothing is
 * created or pinned here. The probe writes none of them but for the read gate's bit above.
 *   port_to_service  local port -> service index + 1 (0: none), SLUICE_PORT_BY_ADDR flag;
 *                    written by sluiced
 *   addr_services    (local address, port) -> service index + 1 for the ports flagged
 *                    SLUICE_PORT_BY_ADDR; written by sluiced
 *   flows            the data path's tracked units by 4-tuple; written by the data path and
 *                    by sluiced's flow GC */
struct {
	SLUICE_PORT_TO_SERVICE_SHAPE;
} port_to_service SEC(".maps");

struct {
	SLUICE_ADDR_SERVICES_SHAPE;
} addr_services SEC(".maps");

struct {
	SLUICE_FLOWS_SHAPE;
} flows SEC(".maps");

/* The read gate's counts (struct sluice_unread), the data path's map handed over like the
 * ones above: the probe takes a request off at the server's first read of it. */
struct {
	SLUICE_UNREAD_SHAPE;
} unread SEC(".maps");

#include "unread.h"

/* The unit already measured on a socket (one sample per request or turn; a unit the server
 * reads in several reads is measured at the first): a tcp turn's req_start_ns, an http
 * request's first sequence number with the top bit set (its req_start_ns moves on while more
 * of its bytes arrive). Socket-local storage:
 * written by this probe only, created for a socket only while its flow holds an open unit,
 * freed by the kernel with the socket (its memory is charged to the socket). Nobody else
 * reads it. Not pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} seen SEC(".maps");

/* The counters (struct sluice_wait_stats: samples and the sum of their waits), cumulative
 * since this object was loaded, one per CPU and service slot at cpu x nr_slots + slot: each
 * CPU writes only its own block, so no cache line is shared by two CPUs' writes (a block is
 * nr_slots x 16 bytes, a multiple of 64). Written by this probe with atomic adds (a preempted
 * program and the one that ran meanwhile on the same CPU both land, and no counter ever goes
 * back), the sum before the count (x86's locked adds keep that order; elsewhere a reader may
 * see a sample's count a moment before its wait: the next read has both). Read by sluiced through a memory mapping (BPF_F_MMAPABLE): the
 * tick sums a slot's CPUs from memory without a syscall (user/kernel/readwait.c). Not pinned:
 * a restarted sluiced loads its own, from zero (the controller takes deltas and its first tick
 * a snapshot). max_entries is set by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_wait_stats);
} wait_stats SEC(".maps");

/* The service slot of a local (address, port) whose port_to_service value is v (non-zero), as
 * the data path's service_of finds it, or -1. */
static __always_inline int service_slot(__u32 v, __u32 port, const __u8 local[16])
{
	if (v & SLUICE_PORT_BY_ADDR) {
		struct sluice_addr_key k = { .port = port };
		__u32 *a;

		__builtin_memcpy(k.addr, local, 16);
		a = bpf_map_lookup_elem(&addr_services, &k);
		v = a ? *a : v & ~SLUICE_PORT_BY_ADDR;
	}
	if (!v || v > SLUICE_MAX_SERVICES || v > nr_slots)
		return -1;
	return (int)(v - 1);
}

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(read_wait, struct sock *sk)
{
	struct sluice_flow_key key;
	struct sluice_wait_stats *st;
	struct sluice_flow *f;
	__u32 port, v, w, cpu, idx, *p;
	__u64 start, id, now, *last;
	int slot;

	/* A socket of another port: this lookup, and back. */
	port = sk->__sk_common.skc_num;
	p = bpf_map_lookup_elem(&port_to_service, &port);
	if (!p || !(v = *p))
		return 0;
	/* The key as the data path makes it at TC ingress (flow_key_of): the client's address
	 * and port, the service port, the local address; IPv4 v4-mapped (::ffff:a.b.c.d). An
	 * IPv6 socket carries an IPv4 peer's addresses v4-mapped already, as the key does. */
	if (sk->__sk_common.skc_family == AF_INET) {
		__be32 a = sk->__sk_common.skc_daddr;
		__be32 l = sk->__sk_common.skc_rcv_saddr;

		__builtin_memset(&key, 0, sizeof(key));
		key.client_addr[10] = key.client_addr[11] = 0xff;
		key.local_addr[10] = key.local_addr[11] = 0xff;
		__builtin_memcpy(key.client_addr + 12, &a, 4);
		__builtin_memcpy(key.local_addr + 12, &l, 4);
	} else if (sk->__sk_common.skc_family == AF_INET6 &&
		   bpf_core_field_exists(sk->__sk_common.skc_v6_daddr)) {
		BPF_CORE_READ_INTO(&key.client_addr, sk, __sk_common.skc_v6_daddr);
		BPF_CORE_READ_INTO(&key.local_addr, sk, __sk_common.skc_v6_rcv_saddr);
	} else {
		return 0;
	}
	slot = service_slot(v, port, key.local_addr);
	if (slot < 0)
		return 0;
	key.client_port = sk->__sk_common.skc_dport;
	key.service_port = bpf_htons((__u16)port);
	f = bpf_map_lookup_elem(&flows, &key);
	if (!f || READ_ONCE(f->svc) != (__u32)slot)
		return 0;
	/* An open unit: an http request admitted (SLUICE_OWN_ACTIVE) or a tcp turn open
	 * (SLUICE_OWN_ACTIVE | SLUICE_OWN_TURN); the data path writes req_start_ns before it
	 * swaps the word to ACTIVE. The word is read again after the start: a unit that ended
	 * meanwhile may have left something else there (a tcp connection's first turn keeps
	 * its latency with SLUICE_SETUP_PENDING), and a tagged word names its service. */
	w = READ_ONCE(f->req_active);
	if ((w & SLUICE_OWN_STATE) != SLUICE_OWN_ACTIVE)
		return 0;
	if ((w & SLUICE_OWN_TAGGED) && (w >> SLUICE_OWN_SVC_SHIFT) != (__u32)slot)
		return 0;
	start = READ_ONCE(f->req_start_ns);
	if (!start || (start & SLUICE_SETUP_PENDING) || READ_ONCE(f->req_active) != w)
		return 0;
	/* The read gate: a request counted unread is read now. The bit is cleared by
	 * compare-and-swap, the one change this probe makes to a word, and whoever clears it
	 * takes the count off: this read, or the request's end should that come first. */
	if ((w & (SLUICE_OWN_UNREAD | SLUICE_OWN_TURN | SLUICE_OWN_TAGGED)) ==
		    (SLUICE_OWN_UNREAD | SLUICE_OWN_TAGGED) &&
	    __sync_val_compare_and_swap(&f->req_active, w, w & ~SLUICE_OWN_UNREAD) == w)
		unread_take_off(w >> SLUICE_OWN_SVC_SHIFT, (w >> SLUICE_OWN_CLASS_SHIFT) & 3);
	/* One sample per unit: a later read of the same one (a body, the rest of a turn) is not
	 * its first. Readers of one socket hold its lock: no two at once. */
	id = (w & SLUICE_OWN_TURN) ? start : SLUICE_SETUP_PENDING | READ_ONCE(f->req_seq);
	last = bpf_sk_storage_get(&seen, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!last || *last == id)
		return 0;
	*last = id;
	now = bpf_ktime_get_ns();
	if (now <= start)
		return 0;
	cpu = bpf_get_smp_processor_id();
	if (cpu >= nr_cpus)
		return 0;
	idx = cpu * nr_slots + (__u32)slot;
	st = bpf_map_lookup_elem(&wait_stats, &idx);
	if (!st)
		return 0;
	__sync_fetch_and_add(&st->sum_ns, now - start);
	__sync_fetch_and_add(&st->count, 1);
	return 0;
}
