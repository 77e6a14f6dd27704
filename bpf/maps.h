/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Every map sluice uses, pinned by name under the pin root (default /sys/fs/bpf/sluice) so a
 * restarted sluiced adopts them with their counts intact. Value layouts live in sluice.h. */
#ifndef SLUICE_MAPS_H
#define SLUICE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "sluice.h"
#include "map_shapes.h"

/* The entry of a one-entry map (a per-CPU scratch or memo, a global): key 0. NULL only for a
 * map that is not a one-entry array, so callers check it for the verifier and nothing else. */
static __always_inline void *only_entry(void *map)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(map, &zero);
}

/* Destination port (host order) -> service index + 1; 0 = not a service. One array lookup is
 * all a non-service packet pays. Written by the controller on (re)load. */
struct {
	SLUICE_PORT_TO_SERVICE_SHAPE;
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} port_to_service SEC(".maps");

/* The service ports as a bitmap (struct sluice_port_bits, its one entry), read before
 * port_to_service. Not pinned: each load derives it from the pinned port_to_service before its
 * programs attach (attach_load), and the controller rewrites it after every change of the
 * ports (maps_program_services). A bit set where port_to_service holds 0 costs a packet the
 * array lookup it costs today; a bit missing would leave a service's packets unjudged, which
 * is why the bitmap is written after the array when ports are added. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_port_bits);
} service_ports SEC(".maps");

/* (local address, port) -> service index + 1, for the ports whose port_to_service value
 * carries SLUICE_PORT_BY_ADDR. Controller. */
struct {
	SLUICE_ADDR_SERVICES_SHAPE;
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} addr_services SEC(".maps");

/* Static per-service configuration: protocol, reject mode, classification tables. Controller. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_service);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} services SEC(".maps");

/* Source-prefix classification rules, (service, v4-mapped prefix) -> (class, rule order).
 * Controller. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SLUICE_MAX_SRC_RULES);
	__type(key, struct sluice_src_key);
	__type(value, struct sluice_src_rule);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} source_rules SEC(".maps");

/* Per-service verdicts: limit, class thresholds, ladder/switch/breaker admit fractions.
 * Rewritten by the controller every tick. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_verdict);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} verdicts SEC(".maps");

/* Heartbeat and fail-open timeout. Controller, every tick. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_globals);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} globals SEC(".maps");

/* Prepared HTTP 429/503 responses, index svc * 2 + kind. Controller. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS * 2);
	__type(key, __u32);
	__type(value, struct sluice_reply);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} replies SEC(".maps");

/* Admitted units by client 4-tuple. A plain HASH, not an LRU: silent eviction would leak
 * in-flight counts. Whoever deletes an entry (BPF at FIN/RST, or the controller's idle GC)
 * owns its in-flight decrement, so every unit is released exactly once. When full, new units
 * are admitted untracked (counted). BPF. */
struct {
	SLUICE_FLOWS_SHAPE;
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} flows SEC(".maps");

/* Admitted SYNs waiting for the handshake to complete, as layouts before 10 kept them. No
 * longer written: handshake_slots below does its work for less. Kept because older pins name
 * it; sluiced moves what an older layout's programs left here into the slots at attach. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SLUICE_MAX_HANDSHAKES);
	__type(key, struct sluice_flow_key);
	__type(value, struct sluice_handshake);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} handshakes SEC(".maps");

/* Admitted SYNs waiting for the handshake to complete: one record per slot, addressed by the
 * 4-tuple's keyed hash (see sluice_handshake_slot, and bpf/handshake.h for how CPUs share a
 * slot). A record holds no capacity: a SYN that finds its slot taken by another 4-tuple's
 * record under SLUICE_HS_SLOT_HOLD_NS old goes unrecorded, and its connection is taken on at
 * its first data. Mmapable only for the
 * placement: its values then start on a page, so each 64-byte slot is one cache line. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_HANDSHAKE_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sluice_handshake_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} handshake_slots SEC(".maps");

/* The keys of the 4-tuples' hash (sluice_flow_key_hash): the handshake slots and
 * refused_syns are addressed by it. Drawn by sluiced when the map is new, before the programs
 * are attached, and kept with the pins: the slots' records stay where a new load looks for
 * them. sluiced. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_hash_keys);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} flow_hash_key SEC(".maps");

/* Admitted handshakes not yet complete, per service (see sluice_halfopen). BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_halfopen);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} halfopen SEC(".maps");

/* Recently rejected SYNs (client 4-tuple -> ISN), only to recognise retransmitted SYNs for the
 * retry-storm signal. Losing entries costs only accuracy of that signal, so LRU is right. BPF.
 * No longer written: refused_syns below does its work for less (an LRU insert per refused SYN
 * cost more than the RST). Kept because the pinned layout names it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sluice_flow_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} rejected_syns SEC(".maps");

/* Recently refused SYNs, to recognise their retransmits (the retry-storm signal), and the SYNs
 * of handshakes that completed, so that a new SYN asks the flow table only when it may be a late
 * copy of one (promoted_mark: the tag's top bit flipped): a table of
 * slots addressed by a hash of the client's 4-tuple, each holding a 32-bit tag of that hash
 * and the SYN's ISN in one 64-bit word, so a slot is read and written in one access without a
 * lock. Two 4-tuples on one slot: the later replaces the earlier, whose retransmit then counts
 * as a new refusal, as an entry lost to an LRU would; losing entries costs only accuracy of
 * that signal. As many slots as the LRU it replaced had entries, in 128 KiB: small enough to
 * stay in cache (with 65536 slots, 512 KiB, the slot's cache miss cost a refused SYN ~80 ns),
 * which a hash table with an insert per SYN does not. Not pinned: after a restart the first
 * retransmits of SYNs refused before it count as new, and a late copy of a SYN whose handshake
 * completed before it is judged as a new SYN (as one whose slot another 4-tuple took is). BPF. */
#define SLUICE_REFUSED_SLOTS 16384
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_REFUSED_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} refused_syns SEC(".maps");

/* Per-client state for the client limits (concurrency cap, token bucket). LRU: losing an
 * entry only makes that client's limits start afresh. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sluice_client_key);
	__type(value, struct sluice_client);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} clients SEC(".maps");

/* In-flight units per service and class. Shared atomics: admission reads the total. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} inflight SEC(".maps");

/* In-flight units per service and class, striped per CPU: every CPU takes and gives back
 * slots on its own copy (cls[] only; total stays 0), so no cache line is shared by the CPUs'
 * writes. Admission sums the stripes (bpf/admit.h: take_slot). The shared `inflight` above
 * holds what layouts before 6 counted (frozen since), so effective in-flight =
 * inflight + the stripes - inflight_released. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} inflight_pcpu SEC(".maps");

/* The in-flight estimate and each CPU's published share of it (include/sluice.h: struct
 * sluice_inflight_est): what lets a take far below its threshold skip the other CPUs'
 * stripes. Not pinned: each load makes its own, and sluice_publish_stripes fills it before
 * any take relies on it; sized like the services. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight_est);
} inflight_est SEC(".maps");

/* An http service's admitted requests the server has not read yet (struct sluice_unread, the
 * read gate): added when a request is admitted while the gate is armed, taken off at the
 * server's first read (the wait probe, bpf/readwait.bpf.c, which shares this map) or at the
 * request's end. Not pinned: each load starts from 0 (sluice_unread says why that is safe). */
struct {
	SLUICE_UNREAD_SHAPE;
} unread SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
} inflight_pub SEC(".maps");

/* Units released by the controller's flow GC; effective in-flight = inflight - released.
 * Controller only (so neither side races the other's writes). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} inflight_released SEC(".maps");

/* tcp services: flows with a turn open, per service and class (sluice_flow). What tcp
 * admission compares with the class thresholds. Shared atomics. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} busy SEC(".maps");

/* A copy of `busy` that sluiced reads through a memory mapping, written by the program
 * sluice_copy_counts that sluiced runs each tick: copying 1000 entries in the kernel and
 * reading them from memory costs a fraction of a batch lookup, which pays about 60 ns an
 * entry in copies to user space. Not pinned: each load makes its own; sized like the
 * services. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
} busy_copy SEC(".maps");

/* The same for http services' in-flight: `inflight` plus every CPU's stripe of
 * `inflight_pcpu`, summed by the program sluice_copy_counts (a batch lookup of each costs
 * about 58 us for 1000 services). Not pinned; sized like the services. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
} inflight_copy SEC(".maps");

/* Turns of flows the controller's GC reclaimed mid-turn; effective busy = busy - released.
 * Controller only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} busy_released SEC(".maps");

/* Cumulative counters per service (by class, with the classes' latency sample counts), per
 * CPU (struct sluice_svc_stats). BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_svc_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} class_stats SEC(".maps");

/* Latency histograms per service, per CPU, one map per class (latency_hist: L0,
 * latency_hist1..3: L1..L3): http requests and tcp turns. BPF (TC egress). One map a class
 * so that the services whose class moved are consecutive entries: the tick reads them in one
 * batch without copying the other classes' histograms between. */
#define SLUICE_HIST_MAP(name)                                                                  \
	struct {                                                                               \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                       \
		__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);  /* sized at load */            \
		__type(key, __u32);                                                            \
		__type(value, struct sluice_hist);                                             \
		__uint(pinning, LIBBPF_PIN_BY_NAME);                                           \
	} name SEC(".maps")
SLUICE_HIST_MAP(latency_hist);
SLUICE_HIST_MAP(latency_hist1);
SLUICE_HIST_MAP(latency_hist2);
SLUICE_HIST_MAP(latency_hist3);

/* Parser counters, per CPU. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_pkt_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pkt_stats SEC(".maps");

/* The controller's learned state per service slot (struct sluice_ctl_slot), so a restart
 * continues the loop. sluiced only; the data path never touches it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_ctl_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ctl_state SEC(".maps");

/* Operator requests to the controller per service slot (baseline reset). sluicectl only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_ctl_request);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ctl_requests SEC(".maps");

/* Open-connection cap per service slot (struct sluice_conn_cap). sluiced writes the
 * thresholds (through sluice_set_conn_cap, which leaves the counts alone), BPF the refusal
 * counts. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_conn_cap);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} conn_cap SEC(".maps");

/* http services: open connections per class (struct sluice_inflight, see
 * sluice_http_conn_cap in sluice.h). Shared atomics: a connection moves it twice in its life.
 * BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_inflight);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} http_conns SEC(".maps");

/* http services: the cap on each class's open connections (struct sluice_http_conn_cap), 0 =
 * none. Written by sluiced when it changes; pinned so that a restarted sluiced takes the caps
 * over where it left them, and `sluicectl status` shows them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_http_conn_cap);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} http_conn_cap SEC(".maps");

/* http services: the class a client's requests were last given above what its connection
 * counted under (struct sluice_addr_class), for its next SYN. An IPv6 client is its /64, as in
 * `clients`: a host's temporary addresses share what it was given, and addresses churned
 * inside one /64 make one entry, not thousands that push the others' out. LRU: losing an entry
 * costs one connection judged by its source. Not pinned. BPF. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct sluice_client_key);
	__type(value, struct sluice_addr_class);
} addr_class SEC(".maps");

/* What the pins are: layout version and per-map layout (struct sluice_layout). Written by the
 * controller after it adopted, migrated or created the maps; never read by the data path. Its
 * own layout never changes, so every version of sluiced can read it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_layout);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sluice_layout SEC(".maps");

/* The layout record's continuation: the pinned maps beyond what `sluice_layout` holds
 * (struct sluice_layout_ext). Written by the controller with `sluice_layout`; never read by
 * the data path. Its own layout never changes either. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_layout_ext);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sluice_layout_ext SEC(".maps");

/* Priority marks ignored per service slot because the source is outside trust_from (struct
 * sluice_untrusted), per CPU. Pinned: a restart keeps the count. BPF; touched only for a unit
 * that carried such a mark. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MIN_SERVICE_SLOTS);   /* sized at load, like the services */
	__type(key, __u32);
	__type(value, struct sluice_untrusted);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} untrusted_marks SEC(".maps");

/* Changes of the accounting (a slot taken or given back, an ownership word swapped), per CPU
 * and per bucket of services (index svc & (SLUICE_OWN_OPS_BUCKETS - 1)), counted after each
 * change. The reconciliation compares sweeps of the flow table only while a service's bucket
 * stood still across the sweep (user/kernel/flowgc.c). Not pinned: it only has to be
 * monotonic while one sluiced reads it. */
struct own_ops {
	__u64 n[SLUICE_OWN_OPS_BUCKETS];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct own_ops);
} own_ops SEC(".maps");

/* Scratch space for the first bytes of a request (per CPU, not pinned: holds nothing between
 * packets). bpf_skb_load_bytes copies here so the header scan works on non-linear skbs. */
#define SLUICE_SCAN_LEN 256
struct scan_buf {
	char b[SLUICE_SCAN_LEN];
	char tail[64];   /* the word-wise header scan reads up to 64 bytes past any start < 256 */
	__u32 scan_state[4]; /* the header scans' state between bpf_loop steps (LS_*, BS_*) */
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scan_buf);
} scan_scratch SEC(".maps");

#endif
