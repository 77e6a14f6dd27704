/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * sluice: the one definition of everything the BPF programs and userspace share.
 *
 * Included by the BPF programs (UAPI types only) and by userspace. Keep it free of
 * libc and of kernel-only types: only __u8..__u64 from <linux/types.h>.
 *
 * Who writes what (see docs/ARCHITECTURE.md):
 *   controller (sluiced) writes : services, port_to_service, source_rules, verdicts,
 *                                 globals (heartbeat), inflight_released, busy_released,
 *                                 sluice_layout, ctl_state
 *   the operator (sluicectl)    : ctl_requests
 *   BPF programs write          : flows, handshakes, halfopen, inflight_pcpu, busy,
 *                                 class_stats, latency_hist(1..3), pkt_stats,
 *                                 untrusted_marks
 *                                 (inflight: layouts before 6 only)
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <linux/types.h>
#include "sluice_names.h"

/* Services: the per-service maps (services, verdicts, inflight, inflight_released, replies,
 * class_stats, the latency histograms) are sized when sluiced loads them, from the number of
 * services in the config (user/kernel/mapconfig.c: a power of two, at least SLUICE_MIN_SERVICE_SLOTS,
 * which is also the size compiled into the object). SLUICE_MAX_SERVICES is the built-in
 * upper limit: a flow records its service index in 16 bits (struct sluice_flow.svc), and a
 * service is one port, so 65536 is also the port space. A config beyond it is refused. */
#define SLUICE_MAX_SERVICES       65536
#define SLUICE_MIN_SERVICE_SLOTS  64
#define SLUICE_NUM_CLASSES    4          /* L0 core .. L3 non-critical */
#define SLUICE_NAME_LEN       32
#define SLUICE_MAX_FLOWS      65536      /* tracked units; beyond this new units are admitted untracked */
#define SLUICE_MAX_CPUS       8192       /* admission sums the in-flight stripes of up to this many */
#define SLUICE_MAX_SRC_RULES  1024
#define SLUICE_MAX_PATH_RULES 4
#define SLUICE_PATH_LEN       24
#define SLUICE_HEADER_LEN     32         /* header name for from-header classification; a power
                                          * of two: the data path masks indices with it */
#define SLUICE_PIN_DIR        "/sys/fs/bpf/sluice"

/* Layout version of the pinned maps. Bump it whenever the key or value layout, the size, the
 * type or the meaning of any pinned map changes (every struct below that lives in a pinned
 * map, and the map definitions in bpf/maps.h), and teach user/kernel/layout.c how to carry the
 * previous version over (or let it refuse). A restarted sluiced compares it with the record in
 * the map `sluice_layout` to adopt, migrate or refuse the pins (docs/ARCHITECTURE.md).
 *   1  the maps as first released; pins of this version carry no `sluice_layout` record
 *   2  the same maps, unchanged, plus the `sluice_layout` record
 *   3  verdicts hold shed fractions (zero admits), flows keep the client's next sequence,
 *      new maps `handshakes` and `halfopen` (a slot only after the handshake)
 *   4  new maps `ctl_state` and `ctl_requests` (the controller's learned state across
 *      restarts, operator requests to it); the others unchanged
 *   5  tcp turns: flows keep the server's next sequence and an open turn in the request
 *      fields, new maps `busy` and `busy_released` (tcp flows with a turn open: what tcp
 *      admission and the controller count)
 *   6  new maps `conn_cap` (the open-connection cap per class and its refusals) and
 *      `inflight_pcpu` (in-flight striped per CPU; the shared `inflight` keeps what older
 *      layouts counted), a flow's req_active is its ownership word (SLUICE_OWN_*, older
 *      values read as they are); services by local address and port: new map
 *      `addr_services`, and a port_to_service value may carry SLUICE_PORT_BY_ADDR (never set
 *      by layout 5, so its values are kept)
 *   7  the layout record continues in a second map, `sluice_layout_ext` (room for more pinned
 *      maps than `sluice_layout` holds); new map `untrusted_marks` (priority marks ignored
 *      per service because the source is outside trust_from); flow keys (flows, handshakes,
 *      rejected_syns) carry the local address: a client using one source port towards two
 *      local addresses of one port holds two units; `class_stats` holds one per-CPU entry per
 *      service (struct sluice_svc_stats: the four classes' counters and their latency sample
 *      counts) instead of one per service and class: the controller's tick reads a quarter of
 *      the entries; a migration starts the counters from zero (the controller sees a reset,
 *      as after an attach)
 *   8  latency histograms one map per class, indexed by service: `latency_hist` holds L0's
 *      (it held every class's, at service x 4 + class), new maps `latency_hist1`,
 *      `latency_hist2`, `latency_hist3` hold L1's to L3's: the tick reads the histograms of
 *      the classes that moved, and the services that moved in one class are consecutive
 *      entries of one map (one batch), where before a batch over them copied the other
 *      three classes' entries between; a migration starts the histograms from zero (the
 *      controller sees a reset, as after an attach)
 *   9  new maps `http_conns` and `http_conn_cap` (an http service's open connections per
 *      class and the cap on the lower classes' connections); an http flow may carry
 *      SLUICE_FLOW_CONN_COUNTED (never set by layout 8, whose flows are adopted: they were
 *      never counted)
 *  10  new map `handshake_slots` (pending handshakes, one cache line per slot, in place of the
 *      LRU `handshakes`, which stays pinned and empty): sluiced moves the records an older
 *      layout's programs left in `handshakes` into their slots when it attaches, and new map
 *      `flow_hash_key` (the secret of the 4-tuples' hash the slots are addressed by)
 *  11  `flow_hash_key` holds ten key words (struct sluice_hash_keys) where it held one 64-bit
 *      secret: the 4-tuples' hash is no longer linear in the key's words. A migration from
 *      10 replaces it and `handshake_slots` unread with empty ones: the records sit where
 *      the old hash put them. A handshake pending across the upgrade is taken on at its
 *      first data, as one whose SYN went unrecorded; its half-open count lapses with its
 *      window. */
#define SLUICE_MAP_LAYOUT_VERSION 11

/* Services by local address: two services may share a port on different local addresses
 * (pods with the same containerPort). port_to_service then holds SLUICE_PORT_BY_ADDR with the
 * port-only service (index + 1, or 0 for none) in the low bits, and the data path looks the
 * packet's local address and port up in `addr_services` first. A port with no address-specific
 * service keeps the one array lookup. */
#define SLUICE_PORT_BY_ADDR      0x80000000u
#define SLUICE_MAX_ADDR_SERVICES 4096

/* One bit per port that has a service (of any address), set exactly where port_to_service's
 * value is not 0: 8 KiB, which a host's other traffic leaves in cache where it evicts the
 * 256 KiB of port_to_service. The data path reads it first, so a packet to a port no service
 * has (most of a host's packets: replies to its own outbound connections land on ephemeral
 * ports all over the port space) never touches the big array. */
#define SLUICE_PORT_WORDS 1024

struct sluice_port_bits {
	__u64 word[SLUICE_PORT_WORDS];   /* port p: bit p % 64 of word[p / 64] */
};

struct sluice_addr_key {
	__u8 addr[16];                   /* local address, v4-mapped for IPv4 */
	__u32 port;                      /* host byte order */
};

/* Probabilities in the data path are fixed point: SLUICE_PROB_ONE means "always". */
#define SLUICE_PROB_ONE       65536u

#define SLUICE_X_CLASS_ENUM(id, ...) SLUICE_##id,
enum sluice_class { SLUICE_CLASS_TABLE(SLUICE_X_CLASS_ENUM) };
_Static_assert(0 SLUICE_CLASS_TABLE(SLUICE_X_COUNT) == SLUICE_NUM_CLASSES,
	       "SLUICE_CLASS_TABLE and SLUICE_NUM_CLASSES disagree");

enum sluice_protocol { SLUICE_PROTO_TCP = 0, SLUICE_PROTO_HTTP = 1 };

enum sluice_reject_mode { SLUICE_REJECT_RST = 0, SLUICE_REJECT_DROP = 1 };

/* Why a unit was refused (SLUICE_REJECT_TABLE in sluice_names.h); index into
 * sluice_class_stats.rejected[]. Order = admission order. */
#define SLUICE_X_REJ_ENUM(id, ...) SLUICE_REJ_##id,
enum sluice_reject_reason {
	SLUICE_REJECT_TABLE(SLUICE_X_REJ_ENUM)
	SLUICE_REJ_REASONS,
};

#define SLUICE_X_BREAKER_ENUM(id, ...) SLUICE_BREAKER_##id,
enum sluice_breaker_state { SLUICE_BREAKER_TABLE(SLUICE_X_BREAKER_ENUM) };

/* ---- Static per-service configuration (map `services`, written on (re)load) ---- */

/* A packed classification decision: rule position in the config (first match wins) and class. */
#define SLUICE_RULE_NONE      0xff
#define SLUICE_CLASS_FROM_HEADER 0xfe   /* header rule whose value L0..L3 picks the class */

struct sluice_path_rule {
	__u8 len;                        /* 0 = unused slot */
	__u8 class;
	__u8 order;                      /* position among the service's classify rules */
	__u8 _pad;
	char prefix[SLUICE_PATH_LEN];
};

struct sluice_service {
	char name[SLUICE_NAME_LEN];
	__u16 port;                      /* host byte order */
	__u8 protocol;                   /* enum sluice_protocol */
	__u8 reject_mode;                /* enum sluice_reject_mode (tcp only) */
	__u8 default_class;
	__u8 header_order;               /* position of the from-header rule, SLUICE_RULE_NONE if none */
	__u8 header_len;
	__u8 retry_after_s;
	char header[SLUICE_HEADER_LEN];  /* lower-case header name, e.g. "x-priority" */
	/* dscp_rule[d] = (order << 2) | class, or SLUICE_RULE_NONE */
	__u8 dscp_rule[64];
	struct sluice_path_rule path[SLUICE_MAX_PATH_RULES];
	/* Per-client entry limits, 0 = off: at most client_max_in_flight units of
	 * one client address at once, and a token bucket of client_rate units/s, burst
	 * client_burst (GCRA: one timestamp per client). */
	__u32 client_max_in_flight;
	__u32 client_rate;
	__u32 client_burst;
	/* The rules stamp: the second (sluice_rules_second of CLOCK_MONOTONIC) in which sluiced
	 * last finished changing this service's entries in `source_rules` (its source rules and
	 * trust_from), read after the trie's writes were done. A flow's cached source answer
	 * (sluice_flow._pad) counts only when the flow was admitted in a later second. Never
	 * moves back while the pins live (the monotonic clock does not) and this sluiced
	 * programs them. The field keeps its old name: the layout record hashes field names,
	 * and the map's layout is unchanged. An older sluiced writes 0 here: adopting its pins,
	 * this one stamps every service before its programs' first cached answer can count;
	 * going back to it, the programs still attached until it swaps them may go by answers
	 * cached before its rewrite of the rules (for the milliseconds of that swap). */
	__u32 _pad1;
};

/* The rules stamp's unit: 2^30 ns (about 1.07 s) of CLOCK_MONOTONIC, which is what
 * bpf_ktime_get_ns reads. Coarse, so that the stamp fits in 32 bits (146 years of uptime). */
#define SLUICE_RULES_SHIFT    30

static inline __u32 sluice_rules_second(__u64 mono_ns)
{
	return (__u32)(mono_ns >> SLUICE_RULES_SHIFT);
}

/* Map `clients` (LRU_HASH): per (service, client address) state for the client limits. LRU is
 * acceptable here: an evicted client starts afresh, which is lenient, never strict. */
struct sluice_client_key {
	__u32 svc;
	__u8 addr[16];                   /* v4-mapped for IPv4 */
};

struct sluice_client {
	__s64 in_flight;
	__u64 tat_ns;                    /* GCRA theoretical arrival time */
};

/* The client an address belongs to, as `clients` keys it: an IPv4 address is itself, an IPv6
 * address its /64 (a host is routinely given a whole /64 and may pick addresses in it at will:
 * keyed by address, every one would get a budget of its own). addr is v4-mapped for IPv4. */
static inline void sluice_client_addr(__u8 addr[16])
{
	/* In 32-bit words, not bytes: a branch per byte cost the data path's verifier walk a
	 * path per byte at every caller. */
	static const __u8 v4_prefix[4] = { 0, 0, 0xff, 0xff };  /* bytes 8-11 of ::ffff:a.b.c.d */
	__u32 w[4], mapped;

	__builtin_memcpy(w, addr, 16);
	__builtin_memcpy(&mapped, v4_prefix, 4);
	if (!w[0] && !w[1] && w[2] == mapped)
		return;
	w[2] = 0;
	w[3] = 0;
	__builtin_memcpy(addr, w, 16);
}

/* Map `source_rules` (LPM trie). IPv4 is stored v4-mapped (::ffff:a.b.c.d), so prefixlen for a
 * v4 /24 is 32 (svc) + 96 + 24. Value: the first-matching rule among those covering the prefix
 * (userspace resolves overlaps so that longest-prefix lookup gives first-match semantics). */
struct sluice_src_key {
	__u32 prefixlen;
	__u32 svc;                       /* service index: always fully matched (prefixlen >= 32);
	                                  * | SLUICE_SRC_TRUST for the service's trust_from */
	__u8 addr[16];
};

/* The same trie holds each service's trust_from prefixes under svc | SLUICE_SRC_TRUST (value
 * unused): a source inside one may classify by DSCP and by the priority header; any other's
 * DSCP marks and header are ignored. A key space of its own, so the longest-prefix lookup of
 * the source rules never lands on one. */
#define SLUICE_SRC_TRUST      0x80000000u

/* An IPv6 prefix never matches an IPv4 client: when one spans the v4-mapped range (::/0),
 * that range (::ffff:0:0/96) gets an entry of its own in the same key space, which an IPv4
 * source's longest match finds first -- among source rules, order SLUICE_RULE_NONE (no rule);
 * among trust_from prefixes, class SLUICE_SRC_UNTRUSTED (not trusted). */
#define SLUICE_SRC_UNTRUSTED  1

struct sluice_src_rule {
	__u8 class;
	__u8 order;
	__u8 _pad[2];
};

/* ---- Verdicts (map `verdicts`, one per service, rewritten by the controller every tick) ----
 * Every field is encoded so that 0 admits: an all-zero verdict (a slot never written, a new
 * service before the controller's first tick, a torn or lost write) means "admit everything",
 * never "refuse everything". Shedding is always a fraction refused, never one admitted. */

struct sluice_verdict {
	__u32 limit;                                 /* concurrency limit (AIMD or fixed); 0 = none */
	__u32 class_threshold[SLUICE_NUM_CLASSES];   /* admit class k while in_flight < this;
	                                              * 0 = no threshold (a class with no room at
	                                              * all is shut by SLUICE_VERDICT_SHUT(k)) */
	__u32 shed_prob[SLUICE_NUM_CLASSES];         /* ladder: fraction refused, 0 = none,
	                                              * SLUICE_PROB_ONE = all */
	__u32 switch_shed[SLUICE_NUM_CLASSES];       /* manual switch: fraction refused, 0 = none */
	__u32 breaker_state;                         /* enum sluice_breaker_state, 0 = closed */
	__u32 breaker_shed;                          /* half-open: fraction refused, 0 = none */
	__u32 retry_after_s;                         /* Retry-After for http rejections */
	__u32 flags;                                 /* SLUICE_VERDICT_*, 0 = fixed headroom */
};

/* Headroom counts by priority: class k is compared with the in-flight of classes 0..k only, so
 * lower classes never hold a slot a higher class needs (adaptive headroom). Without the flag
 * every class is compared with the service's total in-flight (fixed headroom). */
#define SLUICE_VERDICT_PRIORITY_COUNT 1u
/* The read gate is armed (struct sluice_unread): requests admitted meanwhile are counted until
 * the server reads them, and the lower classes wait for what the server has not read. Set by
 * the controller only while the wait probe runs. */
#define SLUICE_VERDICT_READ_GATE      2u
/* Class k has no room at all (a threshold of 0 in the controller's terms). */
#define SLUICE_VERDICT_SHUT(k)        (1u << (8 + ((k) & 3)))

/* The controller computes thresholds where 0 means "no room"; the map encodes that as a shut
 * class so that a zero threshold can mean "no threshold". Call after setting the thresholds. */
static inline void sluice_verdict_mark_shut(struct sluice_verdict *v)
{
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		if (!v->class_threshold[k])
			v->flags |= SLUICE_VERDICT_SHUT(k);
}

/* Fixed-point admit fraction <-> the shed fraction stored in a verdict. */
static inline __u32 sluice_prob_complement(__u32 p)
{
	return p >= SLUICE_PROB_ONE ? 0 : SLUICE_PROB_ONE - p;
}

/* ---- Globals (map `globals`, one entry) ---- */

struct sluice_globals {
	__u64 heartbeat_ns;              /* CLOCK_MONOTONIC (== bpf_ktime_get_ns) of the last tick */
	__u64 heartbeat_timeout_ns;      /* older than this: fail open, admit everything */
	/* ifindex and netns_ino keep their place in every layout: any version's `sluicectl
	 * detach` reads them to find the TC filters. */
	__u32 ifindex;                   /* where the programs are attached (for detach) */
	__u32 _pad;
	__u64 netns_ino;                 /* ... in this network namespace (ifindex is per netns) */
};

/* Map `replies` (ARRAY, index svc * 2 + kind): the complete HTTP response sent for a rejected
 * request, prepared by the controller. Length is a multiple of 4; csum is its ones' complement
 * partial sum (as bpf_csum_diff would compute it) so the data path never sums the text. */
#define SLUICE_REPLY_MAX      256
enum sluice_reply_kind { SLUICE_REPLY_429 = 0, SLUICE_REPLY_503 = 1 };

struct sluice_reply {
	__u32 len;
	__u32 csum;
	char text[SLUICE_REPLY_MAX];
};

/* ---- Controller state (map `ctl_state`, ARRAY, one per service slot, sluiced only) ----
 * What the controller has learned for the service in the slot (limit, baseline, ladder,
 * breaker), rewritten after each of its ticks, so a restarted sluiced continues where the last
 * one stopped, and a summary that `sluicectl status` and /metrics show without knowing the
 * controller's structs. The data path never reads it. `state` holds the controller's own
 * record (user/control/controller.h, struct sluice_ctl_state) with its own version and size:
 * a sluiced that does not know that record starts afresh instead of misreading it, so the
 * record may change without a new map layout. The entry belongs to the service named here
 * at this port: a slot given to another service is never adopted. */
#define SLUICE_CTL_STATE_LEN  3584

enum sluice_ctl_algorithm {
	SLUICE_CTL_ALG_GRADIENT = 0,
	SLUICE_CTL_ALG_AIMD = 1,
	SLUICE_CTL_ALG_FIXED = 2,
};

struct sluice_ctl_slot {
	char name[SLUICE_NAME_LEN];      /* "" = never written */
	__u16 port;                      /* host byte order */
	__u8 signal;                     /* enum sluice_signal_state: none, thin, ok */
	__u8 algorithm;                  /* enum sluice_ctl_algorithm */
	__u32 reset_ack;                 /* the last baseline reset request done (generation) */
	__u64 written_ns;                /* CLOCK_MONOTONIC of the write */
	__u64 ticks;                     /* ticks of this service since sluiced started */
	__u32 limit;
	__u32 baseline_us;               /* 0 = not learned yet */
	__u32 objective_us;              /* 0 = not known yet */
	__u32 latency_us;                /* the last decided window's latency signal */
	__u32 ladder_admit[SLUICE_NUM_CLASSES];   /* SLUICE_PROB_ONE fixed point */
	__u32 breaker_state;
	__u32 state_len;                 /* bytes of `state` in use */
	__u8 state[SLUICE_CTL_STATE_LEN];
};

/* Map `ctl_requests` (ARRAY, one per service slot, written by sluicectl only): what an
 * operator asks of the controller. A baseline reset is asked while reset_gen is greater than
 * the slot's reset_ack; sluiced does it at its next tick and echoes the generation. */
struct sluice_ctl_request {
	char name[SLUICE_NAME_LEN];      /* the request is for this service at this port only */
	__u16 port;
	__u16 _pad;
	__u32 reset_gen;
	__u32 uid;                       /* who asked (for the daemon's event) */
	__u32 _pad2;
	__u64 asked_ns;                  /* CLOCK_MONOTONIC */
};

/* The argument of the program sluice_pending_requests (run by sluiced every tick with
 * BPF_PROG_TEST_RUN): which of the slots [first, first + n) of `ctl_requests` hold a request
 * their `ctl_state` entry has not acknowledged (reset_gen above its reset_ack). Requests are
 * rare and the slots many: copying every slot out to look costs about 70 ns a slot (70 us a
 * tick with 1000 services), looking in the kernel a few. A slot reported is only a candidate:
 * sluiced reads it and decides as before. */
#define SLUICE_PENDING_MAX 32

struct sluice_pending_requests {
	__u32 first;                     /* in: the first slot */
	__u32 n;                         /* in: how many slots (the map's end stops it sooner) */
	__u32 found;                     /* out: candidates, all of them (may exceed the list) */
	__u32 scanned;                   /* out: slots looked at */
	__u32 slot[SLUICE_PENDING_MAX];  /* out: the first SLUICE_PENDING_MAX candidates */
};

/* The argument of the program sluice_copy_counts (run by sluiced each tick with
 * BPF_PROG_TEST_RUN): copy the `busy` entries [first, first + n) into `busy_copy`, or the
 * in-flight of those services (`inflight` plus every CPU's stripe) into `inflight_copy`. */
enum sluice_copy_what {
	SLUICE_COPY_BUSY = 0,
	SLUICE_COPY_INFLIGHT = 1,
};

struct sluice_copy_counts {
	__u32 first;                     /* in */
	__u32 n;                         /* in */
	__u32 what;                      /* in: enum sluice_copy_what */
	__u32 copied;                    /* out: entries copied (the map's end stops it sooner) */
};

/* Argument of the program sluice_set_conn_cap (BPF_PROG_TEST_RUN, from sluiced): the thresholds
 * of one slot's `conn_cap` entry, stored in the kernel field by field, so that the refusal
 * counts BPF adds to beside them are never written back with an older value (a read, a change
 * and a write of the whole entry from userspace lost the refusals counted in between, and the
 * count went back). */
struct sluice_set_conn_cap {
	__u32 svc;
	__u32 threshold[SLUICE_NUM_CLASSES];
	__s32 done;                      /* out: 1 written, 0 no such slot */
};

/* Context of the syscall program sluice_publish_stripes, which sluiced runs after its programs
 * are attached (and after any migration has merged the old programs' counts) and then once a
 * second: it puts every CPU's unpublished change of every service slot into the in-flight
 * estimate and then lets takes use it (struct sluice_inflight_est). */
struct sluice_publish_stripes {
	__u32 cpus;                      /* out: CPUs published, 0 when the estimate stays off */
	__u32 pad;
};

/* ---- Layout record (map `sluice_layout`, one entry, written by sluiced) ----
 * What the pins under the pin dir are: the layout version and, per pinned map, its type, sizes
 * and a hash of its key and value types as the BPF object's BTF describes them (field names,
 * offsets, sizes; a change that keeps the size still changes the hash). This struct and that
 * map never change layout: every version reads them. */
#define SLUICE_LAYOUT_MAX_MAPS 24
#define SLUICE_LAYOUT_NAME_LEN 24

struct sluice_layout_map {
	char name[SLUICE_LAYOUT_NAME_LEN];
	__u32 type;                      /* enum bpf_map_type */
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u64 btf_hash;                  /* key and value types; 0 = unknown */
};

struct sluice_layout {
	__u32 version;                   /* SLUICE_MAP_LAYOUT_VERSION of the sluiced that wrote it */
	__u32 migrating_from;            /* non-zero while a migration re-pins the maps */
	__u32 n_maps;
	__u32 _pad;
	struct sluice_layout_map map[SLUICE_LAYOUT_MAX_MAPS];
};

/* ---- Layout record, continued (map `sluice_layout_ext`, one entry, written by sluiced) ----
 * The pinned maps beyond the first SLUICE_LAYOUT_MAX_MAPS, in the same format. Layouts before 7
 * pinned at most SLUICE_LAYOUT_MAX_MAPS maps and never had this map. `sluice_layout` keeps the
 * version and the first SLUICE_LAYOUT_MAX_MAPS entries (its n_maps counts only those), so a
 * sluiced of an older layout still reads the version where it always did and refuses a newer
 * one without knowing the rest. Written before `sluice_layout` with the same version; a record
 * whose version differs from `sluice_layout`'s is left over and not read. Like `sluice_layout`,
 * this struct and its map never change layout: a layout that needs still more pinned maps
 * adds another record map the same way. */
#define SLUICE_LAYOUT_EXT_MAPS 40
#define SLUICE_LAYOUT_ALL_MAPS (SLUICE_LAYOUT_MAX_MAPS + SLUICE_LAYOUT_EXT_MAPS)

struct sluice_layout_ext {
	__u32 version;                   /* the same as sluice_layout's when both are current */
	__u32 n_maps;                    /* entries in use in map[] */
	struct sluice_layout_map map[SLUICE_LAYOUT_EXT_MAPS];
};

/* ---- Flow table (map `flows`, HASH, BPF-owned) ---- */

struct sluice_flow_key {
	__u8 client_addr[16];            /* v4-mapped for IPv4 */
	__u16 client_port;               /* network byte order */
	__u16 service_port;              /* network byte order */
	__u8 local_addr[16];             /* the server's address, v4-mapped for IPv4: last, so
	                                  * the keys of one client address and port sort
	                                  * together (layouts before 7 had no more) */
};

enum sluice_flow_state {
	SLUICE_FLOW_SYN = 0,             /* the client completed the handshake, the server has not
	                                  * spoken since: after syn_timeout_s the GC asks the
	                                  * socket table whether the server ever accepted it */
	SLUICE_FLOW_OPEN = 1,            /* established: the server spoke on it */
};

/* A tcp service has no requests sluice could parse; it measures turns instead. The client
 * speaking (data beyond what it sent before) when the server spoke last, or nobody yet, starts
 * a turn; the server's first new data after that ends it, with a latency sample. A flow with
 * a turn open is busy: the client spoke last and waits. So `req_active` is who spoke last
 * (1: the client, with a turn open since req_start_ns), and busy flows, not open connections,
 * are the concurrency of a tcp service: an idle pooled connection holds no capacity. */
#define SLUICE_FLOW_SERVER_SEQ 1         /* sluice_flow.flags: server_next is known */
/* sluice_flow.flags: the connection's first turn has ended. The first turn may be the
 * connection's setup rather than a request: a database forking a process and authenticating
 * (PostgreSQL answers the startup packet after the fork, about 8 ms against 2 ms for the
 * bench's query), a TLS handshake, a login. Mixed in, a client that connects per request
 * makes every other sample a setup, and the service looks 3-4x slower than its baseline
 * while it is idle. So the first turn's latency is held back in req_start_ns (with
 * SLUICE_SETUP_PENDING) and dropped when the connection has a next turn; a connection that
 * ends after a single turn (one request per connection: the turn was the request) gives it
 * as its sample at its end. A flow from before the flag gives one setup sample at most. */
#define SLUICE_FLOW_TURNED     2
#define SLUICE_SETUP_PENDING   (1ull << 63)  /* req_start_ns holds the first turn's latency */
#define SLUICE_FLOW_OPAQUE     4         /* http: after a 101, or a 2xx answer to a CONNECT, the
                                          * bytes are another protocol's: no request starts on
                                          * the flow again */
/* sluice_flow.flags, http: the connection counts in `http_conns` under the class in the two
 * bits at SLUICE_FLOW_CONN_CLASS_SHIFT, and whoever ends the flow (end_flow's killer) gives it
 * back. Both are set in the new entry before its insert and never change: the other flags are
 * or-ed in later, which keeps them. A flow from before layout 9 has neither. */
#define SLUICE_FLOW_CONN_COUNTED     8
#define SLUICE_FLOW_CONN_CLASS_SHIFT 4
/* ... and that class came from what the address's requests were given (addr_class), not from
 * the SYN itself: its requests of that class keep the address remembered. */
#define SLUICE_FLOW_CONN_LEARNED     0x40
/* http: the open request is a CONNECT. Its final answer decides: a 2xx makes the flow opaque
 * (a tunnel), anything else leaves it http. Opaque from the CONNECT's admission on, a CONNECT
 * the server refused would have let every later request on the connection pass undecided. */
#define SLUICE_FLOW_CONNECT_ASKED    0x80

struct sluice_flow {
	__u64 admitted_ns;               /* when the unit was admitted (a tcp connection: its
	                                  * SYN's time, which says whether its `halfopen` count
	                                  * is still the current one) */
	__u64 last_seen_ns;              /* refreshed at most once a second; used by flow GC */
	__u64 req_start_ns;              /* http: start of the request in flight;
	                                  * tcp: start of the open turn */
	__u32 syn_seq;                   /* client ISN: a SYN with the same seq is a retransmit */
	__u32 req_active;                /* the flow's ownership word (SLUICE_OWN_*): what the
	                                  * flow holds, changed only by compare-and-swap;
	                                  * whoever swaps a holding out releases it */
	union {
		__u32 req_seq;           /* http: seq of the current request's first segment */
		__u32 server_next;       /* tcp: the end of the server's newest data: server data
		                          * not beyond it is a retransmit and ends no turn */
	};
	__u32 client_next;               /* the client's next sequence number as far as sluice
	                                  * has seen it (its ISN + 1 at the handshake, then the
	                                  * server's acks and, for http, the request bytes):
	                                  * where a new request must start, and the reference a
	                                  * client FIN/RST is checked against */
	__u16 svc;
	__u8 class;
	__u8 state;                      /* enum sluice_flow_state */
	__u8 tracked_inflight;           /* tcp: this flow holds one connection slot in
	                                  * `inflight`; only tcp flows do, so it also says that
	                                  * the flow's turns are measured and counted in `busy` */
	__u8 client_counted;             /* its unit counts against the client's in-flight */
	__u8 flags;                      /* SLUICE_FLOW_* */
	/* http: what `source_rules` said of the client when the flow was created (its handshake
	 * completed), SLUICE_SRC_* below; 0 = nothing cached. Written only into the new entry
	 * before its insert, from the entry's own key, never afterwards. Counts only while the
	 * flow's admission second is later than its service's rules stamp (sluice_service._pad1):
	 * an answer found from rules that changed since was found before the change finished,
	 * so at or after the flow's admission, which then lies at or before the stamp's second.
	 * The field keeps its old name (the layout record hashes field names). */
	__u8 _pad;
};

/* The cached source answer (sluice_flow._pad). A source rule of order 15 or more is not
 * cached (the flow walks the trie at each request, as without the cache). */
#define SLUICE_SRC_CACHED      0x80      /* the byte holds an answer */
#define SLUICE_SRC_TRUSTED     0x40      /* the client is inside the service's trust_from */
#define SLUICE_SRC_CLASS_SHIFT 4         /* 2 bits: the source rule's class */
#define SLUICE_SRC_ORDER       0x0f      /* the source rule's order; SLUICE_SRC_NO_RULE: none */
#define SLUICE_SRC_NO_RULE     0x0f

/* The ownership word (sluice_flow.req_active). Every slot a flow holds is described by the
 * word itself, so whoever swaps it out knows exactly what to give back, even on an entry
 * deleted and reused under its feet (a stale pointer's swap then moves a token that still
 * says its own service and class, and the counts stay exact):
 *   state (bits 0-1)  IDLE, ACTIVE (a request or a turn is open: one unit in `inflight`
 *                     (http) or `busy` (tcp, SLUICE_OWN_TURN)), DECIDING (TC ingress is
 *                     deciding a request, nothing taken yet), DEAD (the flow is ending: it
 *                     holds nothing any more; its killer deletes it)
 *   SLUICE_OWN_TAGGED the service and class below are the token's; a word without it (1 for
 *                     open, 0 idle) comes from an older layout and is read with the flow's
 *                     own svc, class, tracked_inflight and client_counted
 *   SLUICE_OWN_CONN   tcp: the connection holds one slot in `inflight`, released at DEAD
 *   SLUICE_OWN_CLIENT the unit counts against its client's cap (the request for http, the
 *                     connection for tcp)
 *   SLUICE_OWN_ORPHAN DEAD, and its killer could not delete it (the entry had been reused
 *                     under another key): the GC deletes it
 *   SLUICE_OWN_PENDING tcp: the connection is counted in its service's `halfopen` fresh
 *                     connections (no client data yet); whoever swaps it out (the first turn,
 *                     the end) takes it off. Older programs ignore the bit (the count lapses)
 *   SLUICE_OWN_UNREAD http: the open request is counted in its service's `unread` (admitted
 *                     while the read gate was armed, not read by the server yet); cleared by
 *                     compare-and-swap at the server's first read of it (the wait probe),
 *                     else by whoever swaps the request out: whoever clears it takes the
 *                     count off. Older programs ignore the bit */
#define SLUICE_OWN_STATE       3u
#define SLUICE_OWN_IDLE        0u
#define SLUICE_OWN_ACTIVE      1u
#define SLUICE_OWN_DECIDING    2u
#define SLUICE_OWN_DEAD        3u
#define SLUICE_OWN_TAGGED      4u
#define SLUICE_OWN_CLIENT      8u
#define SLUICE_OWN_CLASS_SHIFT 4         /* 2 bits */
#define SLUICE_OWN_TURN        0x40u
#define SLUICE_OWN_CONN        0x80u
#define SLUICE_OWN_ORPHAN      0x100u
#define SLUICE_OWN_PENDING     0x200u
#define SLUICE_OWN_UNREAD      0x400u
#define SLUICE_OWN_SVC_SHIFT   16        /* 16 bits: the service index */
#define SLUICE_OWN_OPS_BUCKETS 256       /* the data path's change counts (map own_ops) */

static inline __u32 sluice_own_tag(__u32 svc, __u32 cls)
{
	return SLUICE_OWN_TAGGED | (svc << SLUICE_OWN_SVC_SHIFT) | ((cls & 3) << SLUICE_OWN_CLASS_SHIFT);
}

/* The argument of the program sluice_reclaim (run by the flow GC with BPF_PROG_TEST_RUN):
 * end the flow at key through its ownership word, as a FIN would, if it is still silent by
 * these timeouts (it may have spoken since the GC's scan); an orphaned DEAD entry is deleted. */
enum sluice_reclaim_result {
	SLUICE_RECLAIM_KEPT = 0,         /* gone already, alive again, or ended by someone else */
	SLUICE_RECLAIM_ENDED = 1,        /* ended here: what it held is given back */
	SLUICE_RECLAIM_ORPHAN = 2,       /* a DEAD orphan, deleted */
};

struct sluice_reclaim {
	struct sluice_flow_key key;
	__u32 result;                    /* out: enum sluice_reclaim_result */
	__u64 now_ns;
	__u64 syn_timeout_ns;
	__u64 idle_timeout_ns;
};

/* ---- Handshakes (map `handshake_slots` since layout 10, `handshakes` before; BPF-owned) ----
 * A SYN sluice admitted is only a record here until the peer proves it receives our packets:
 * its ACK of the server's SYN-ACK (ack = server ISN + 1, the server ISN learned from the
 * SYN-ACK at egress) or, failing that, the server's own first segment of the established
 * connection whose SYN-ACK was seen. Only then does the unit get a flow entry and, for tcp
 * services, an in-flight slot. A record holds no capacity. SLUICE_MAX_HANDSHAKES: the size of
 * the older layouts' LRU `handshakes`, kept as it was pinned. */
#define SLUICE_MAX_HANDSHAKES 65536

/* How far a segment's sequence (or acknowledgement) number may lie from what sluice expects
 * and still count as the peer's own: 1 MiB, so a blind forger hits it once in 4096 tries and
 * a real peer's segments after ones sluice did not follow still fit. */
#define SLUICE_SEQ_WINDOW     (1u << 20)

/* ---- TC ingress's memo of the http client it last followed on a CPU (map `client_memo`,
 * per-CPU, BPF-owned, not pinned; bpf/client_memo.h says how it stays exact) ---- */
struct sluice_client_memo {
	struct sluice_flow_key key;      /* the client's flow */
	__u32 next;                      /* its next sequence number, as followed on this CPU */
	__u64 admitted_ns;               /* the flow entry's: which connection on the 4-tuple */
	__u64 jiffies;                   /* when it was taken from the entry */
	__u32 synced;                    /* the entry's client_next then (next == synced: nothing
	                                  * to write back) */
	__u8 valid;
	__u8 gathered;                   /* the whole way that took it found the entry as every
	                                  * CPU's memo has it (or had no need to look) */
	__u8 request_open;               /* the entry had a request open: a segment of a later
	                                  * jiffy goes the whole way, which moves the request's
	                                  * start to it (sluice.bpf.c, request_bytes_arrived) */
	__u8 _pad;
};
_Static_assert(sizeof(struct sluice_client_memo) == 64, "one cache line");

/* The most client data the memo follows between write-backs: the flow entry's client_next
 * stays well inside the window a client FIN or RST is checked against. */
#define SLUICE_MEMO_BYTES     (SLUICE_SEQ_WINDOW / 4)

/* Gathers of the other CPUs' memos a CPU may start per jiffy (map `memo_budget`, per-CPU,
 * BPF-owned, not pinned): what a client that keeps its segments ahead of a gap on many
 * connections can make each CPU spend reading the others' memos. */
#define SLUICE_MEMO_GATHERS   4

struct sluice_memo_budget {
	__u64 jiffies;                   /* the jiffy this CPU last started a gather in */
	__u32 used;                      /* gathers started in it */
	__u32 _pad;
};

/* Admitted handshakes not yet complete are a budget of their own: up to
 * limit / SLUICE_HALFOPEN_SHARE of them count against the headroom of L1..L3 (a burst of SYNs
 * inside one round trip is partly held back there), none against L0's: forged SYNs can take
 * at most that share from the lower classes and nothing from L0. The count lapses
 * SLUICE_HALFOPEN_TIMEOUT_NS after it was started (a handshake takes a round trip, not a
 * second), so forged SYNs hold nothing for long. */
#define SLUICE_HALFOPEN_SHARE 4
#define SLUICE_HALFOPEN_TIMEOUT_NS 1000000000ull
/* The longest the coarse clock (bpf_ktime_get_coarse_ns, read by a new SYN) lags the exact one:
 * a tick, 10 ms at the lowest HZ. Checks that read it against exact stamps are signed, or give
 * this much where a lag would refuse. */
#define SLUICE_COARSE_TICK_NS 10000000ull

#define SLUICE_HS_SERVER_ISN  1          /* sluice_handshake.flags: server_isn is known */
#define SLUICE_HS_CLASSED     2          /* http: class is what the SYN was judged by (the
                                          * connection cap): the connection counts under it */
#define SLUICE_HS_LEARNED     4          /* ... raised to what its address's requests were
                                          * given (addr_class) */
#define SLUICE_HS_DSCP        8          /* http: dscp holds the SYN's DSCP (a record from
                                          * before it was kept has neither) */
#define SLUICE_HS_COUNTED     16         /* tcp: counted in its service's half-open count, which
                                          * whoever removes the record gives back while the
                                          * window it was counted in is current (a lapsed
                                          * window's count is gone: nothing to give) */

struct sluice_handshake {
	__u64 syn_ns;                    /* when the SYN was admitted */
	__u32 client_isn;
	__u32 server_isn;                /* from the SYN-ACK, once SLUICE_HS_SERVER_ISN is set */
	__u16 svc;
	__u8 class;
	__u8 flags;
	__u8 client_limited;             /* the client's limits apply: count the unit against its
	                                  * cap and take its token once the handshake completes */
	__u8 dscp;                       /* http: the SYN's DSCP, with SLUICE_HS_DSCP */
	__u8 _pad[6];
};

/* ---- Handshake slots (map `handshake_slots`, ARRAY, BPF-owned) ----
 * Where the data path keeps its pending handshakes (the records above, in the fields below):
 * a table of slots addressed by sluice_flow_key_hash of the client's 4-tuple, one cache line
 * each. A hash table cost a new SYN its insert (an LRU's, ~220 ns, with a walk of the bucket
 * and a pop from the free list) and every client ACK a lookup of its 36-byte key (~40 ns, and
 * ~280 with a table full of a SYN flood's records); a slot costs one load of the line for
 * either. A slot holds one 4-tuple's record at a time: a SYN whose slot holds another
 * 4-tuple's record younger than SLUICE_HS_SLOT_HOLD_NS gets none (a flood cannot push out a
 * real client's record, as it could an LRU's oldest), and its connection is taken on at its
 * first data like any the data path did not see complete (adopt_established); an older
 * record gives way. The word says whether the slot holds a record and whose (the top
 * 16 bits of the 4-tuple's hash), and is what CPUs take turns on: one compare-and-swap to
 * SLUICE_SLOT_BUSY gives a CPU the slot to write, and the word it writes back (with a new
 * generation) makes the record readable; one to empty removes it, and whoever does that owns
 * what the record held (its half-open count, its promotion). A reader copies the record
 * between two reads of the word and keeps the copy only when both are the same held word, so
 * it never acts on half of one record and half of another. */
#define SLUICE_HANDSHAKE_SLOTS   65536
#define SLUICE_SLOT_BUSY         1u            /* the whole word while one CPU writes the slot */
#define SLUICE_SLOT_HELD         2u            /* the slot holds a record */
#define SLUICE_SLOT_GEN_ONE      4u            /* bits 2..15: the generation, moved at each write */
#define SLUICE_SLOT_GEN_MASK     0xfffcu
#define SLUICE_SLOT_TAG_MASK     0xffff0000u
/* How long a record holds its slot against another 4-tuple's SYN: past a client's second SYN
 * retransmit (Linux sends them 1 s and 3 s after the first), so that the retransmit of an
 * admitted SYN whose SYN-ACK was lost still finds its record, counts as a retransmit and is
 * never decided again (and perhaps refused with an RST). */
#define SLUICE_HS_SLOT_HOLD_NS   3500000000ull

struct sluice_handshake_slot {
	__u32 word;                      /* 0 or a generation: empty; BUSY; tag|gen|HELD: held */
	__u32 client_isn;
	__u32 server_isn;
	__u16 svc;
	__u8 class;
	__u8 flags;                      /* SLUICE_HS_* */
	__u64 syn_ns;
	struct sluice_flow_key key;      /* at 24: the slot is read in 8-byte words */
	__u8 client_limited;
	__u8 dscp;
	__u8 _pad[2];
};
_Static_assert(sizeof(struct sluice_handshake_slot) == 64, "a handshake slot is one cache line");

/* A slot's record as the data path passes it on (the word and key not included). */
static inline __attribute__((always_inline)) void
sluice_slot_record(const struct sluice_handshake_slot *s, struct sluice_handshake *r)
{
	r->syn_ns = s->syn_ns;
	r->client_isn = s->client_isn;
	r->server_isn = s->server_isn;
	r->svc = s->svc;
	r->class = s->class;
	r->flags = s->flags;
	r->client_limited = s->client_limited;
	r->dscp = s->dscp;
}

/* A record into a slot, with its 4-tuple (the word not included: it is what makes it
 * readable, written last). */
static inline __attribute__((always_inline)) void
sluice_slot_fill(struct sluice_handshake_slot *s, const struct sluice_flow_key *key,
		 const struct sluice_handshake *r)
{
	__builtin_memcpy(&s->key, key, sizeof(*key));
	s->syn_ns = r->syn_ns;
	s->client_isn = r->client_isn;
	s->server_isn = r->server_isn;
	s->svc = r->svc;
	s->class = r->class;
	s->flags = r->flags;
	s->client_limited = r->client_limited;
	s->dscp = r->dscp;
}

/* The keys of the 4-tuples' hash (map `flow_hash_key`): ten random 32-bit words, drawn by
 * sluiced when the map is new and kept with the pins, so the slots' records stay where a new
 * load looks for them. */
#define SLUICE_HASH_KEY_WORDS 10
struct sluice_hash_keys {
	__u64 k[SLUICE_HASH_KEY_WORDS / 2];   /* each: a pair's two key words, low then high */
};

/* The hash a 4-tuple's handshake slot (the low bits past the first 16) and tag (the top 16)
 * and its refused_syns slot are taken from; one definition for the data path and for
 * sluiced, which moves an older layout's pending handshakes into their slots.
 *
 * The key's nine 32-bit words (and a zero tenth) are taken in pairs, each word plus a key
 * word of its own, the pair's two sums multiplied into 64 bits and the five products added
 * (NH, as in UMAC), then mixed once: five independent multiplies, cheap enough for every
 * client packet at XDP. For two different 4-tuples, the chance over the keys that their sums
 * agree is at most 2^-32, whatever the 4-tuples: a client cannot pick, offline, addresses or
 * ports whose SYNs land on a slot its own unfinished SYN holds (and so go unrecorded, taken
 * on at their first data past its client's token bucket). A hash linear in the key's words (each
 * word times a constant, summed) would not do, secret or not: an IPv6 client owns the low 64
 * bits of its address, and two of its addresses whose words differ by (+7, -5) where the
 * multipliers are (5c, 7c) sum to the same value under any secret.
 *
 * Read in 16-bit halves, the key's own alignment (the verifier refuses a stack read wider
 * than the alignment of where it lands). */
static inline __u64 sluice_flow_key_hash(const struct sluice_flow_key *key,
					 const struct sluice_hash_keys *keys)
{
	const __u16 *w = (const __u16 *)key;
	const int n = (int)(sizeof(*key) / 4);   /* nine words; the tenth is zero */
	__u64 h = 0;

#ifdef __clang__
#pragma unroll
#endif
	for (int i = 0; i < SLUICE_HASH_KEY_WORDS; i += 2) {
		__u32 a = i < n ? (__u32)w[2 * i] | (__u32)w[2 * i + 1] << 16 : 0;
		__u32 b = i + 1 < n ? (__u32)w[2 * i + 2] | (__u32)w[2 * i + 3] << 16 : 0;

		__u64 k = keys->k[i / 2];   /* one load for the pair's two key words */

		h += (__u64)(__u32)(a + (__u32)k) * (__u64)(__u32)(b + (__u32)(k >> 32));
	}
	h ^= h >> 29;
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 32);
}
_Static_assert(sizeof(struct sluice_flow_key) == 36, "the hash takes a key of nine words");

static inline __u32 sluice_slot_index(__u64 h)
{
	return (__u32)(h >> 16) & (SLUICE_HANDSHAKE_SLOTS - 1);
}

static inline __u32 sluice_slot_tag(__u64 h)
{
	return (__u32)(h >> 32) & SLUICE_SLOT_TAG_MASK;
}

/* Map `halfopen` (ARRAY, one per service): admitted handshakes not yet complete, and
 * connections whose handshake completed but whose client has not sent anything yet. BPF.
 * A connection between its handshake and its first data is neither half-open nor busy; a SYN
 * in that instant must still see it, or one more than the headroom gets in. It is not counted
 * for long: both counts lapse together, and an idle connection (a pool's) holds nothing after
 * that. The two counts were one __s64 until layout 7's first release; a pin from then reads as
 * the same handshake count with no fresh connections (the count is small and never below
 * zero), and lapses within a second anyway, so the layout was not bumped. */
struct sluice_halfopen {
	__s32 count;                     /* admitted handshakes not yet complete */
	__s32 fresh;                     /* completed, no client data yet (SLUICE_OWN_PENDING) */
	__u64 since_ns;                  /* both lapse SLUICE_HALFOPEN_TIMEOUT_NS after this */
};

/* ---- Accounting ---- */

/* Map `inflight_pcpu` (PERCPU_ARRAY, one per service): in-flight units per class, each CPU on
 * its own copy (total unused); only the sum over CPUs means anything. Map `inflight` (ARRAY,
 * one per service): what layouts before 6 counted, frozen since. The controller never writes
 * either; its corrections are counted in `inflight_released`, and the effective in-flight is
 * inflight + the stripes - released. One writer per map, no races.
 * What it counts: http services, requests in flight; tcp services, open connections (kept
 * for a connection cap; admission and the controller use `busy` for tcp).
 * Map `busy` / `busy_released` (the same struct, same rules): tcp flows with a turn open,
 * per class; the concurrency of a tcp service. Always 0 for http services. */
struct sluice_inflight {
	__s64 total;
	__s64 cls[SLUICE_NUM_CLASSES];
};

/* Map `unread` (ARRAY, one per service, not pinned): an http service's requests admitted while
 * the read gate was armed (SLUICE_VERDICT_READ_GATE) that the server has not read yet, in
 * total and by class -- a queue at the server's door that the server will take in its own
 * order, which is not the classes' order. Each such request's ownership word carries
 * SLUICE_OWN_UNREAD; whoever clears the bit takes its count off (at the server's first read
 * of it, or at its end). A count never goes below 0: a decrement that would is given back
 * (after a restart, words counted in the last load's map are taken off a fresh one: the
 * counts read low until the queue next empties, which only lets more in). since_ns: when the
 * total last rose from 0 (written by the increment that saw it empty; two at once both
 * write about the same time). refused: the requests the gate refused, by class (also
 * counted as refused for headroom in class_stats). */
struct sluice_unread {
	__s64 total;
	__s64 cls[SLUICE_NUM_CLASSES];
	__u64 since_ns;
	__u64 refused[SLUICE_NUM_CLASSES];
};

/* The read gate: while it is armed, a request of class k > 0 is refused (429, like a
 * headroom refusal) when the server has left some admitted request unread continuously for
 * SLUICE_READ_GATE_AGE_NS or more and either a request of a higher class is among those
 * waiting or they number SLUICE_NUM_CLASSES - k or more (L3 waits behind none, L2 behind
 * one, L1 behind two). Whatever waits unread will be served before anything admitted after
 * it: a server's listener picks up ready connections in its own order (Apache: keep-alive
 * requests before new connections), so on a saturated server the only way L0 overtakes the
 * lower classes is for them not to be there. A server that reads at once has nothing unread
 * for long, and nothing is refused. The age is also the controller's arming threshold: the
 * gate is armed for SLUICE_READ_GATE_HOLD_NS after a tick whose requests waited that long
 * on average before the server read them (docs/CONTROLLER.md, "The read gate"). */
#define SLUICE_READ_GATE_AGE_NS  1000000ull
#define SLUICE_READ_GATE_HOLD_NS 2000000000ull

/* The wait before the server reads (bpf/readwait.bpf.c, optional; not part of the pinned
 * layout): per service slot, how many admitted requests (http) or turns (tcp) the server
 * first read since the probe was loaded, and the sum of how long each had waited in the
 * host -- in its socket or, on a new connection, the accept queue -- from its first segment
 * to that read. The service time is not in it: latency minus wait is what the backend took.
 * Cumulative; the controller takes deltas. */
struct sluice_wait_stats {
	__u64 count;
	__u64 sum_ns;
};

/* Map `inflight_est` (ARRAY, one per service, not pinned: each load makes and fills its own):
 * per class, the sum of what every CPU has published of its stripe of `inflight_pcpu`; map
 * `inflight_pub` (PERCPU_ARRAY, the same struct sluice_inflight, total unused, not pinned):
 * how much of this CPU's stripe that is. A CPU publishes the change of its stripe whenever it
 * reaches SLUICE_STRIPE_BATCH either way, adding the same amount to both, so at any moment no
 * other CPU holds more than SLUICE_STRIPE_BATCH unpublished per class, and
 *     estimate - own published + own stripe + (CPUs - 1) x SLUICE_STRIPE_BATCH per class
 * is an upper bound of the true in-flight. A take whose bound is below its threshold is
 * admitted without reading the other CPUs' stripes (their lines are what CPUs fight over); a
 * take near its threshold reads them all, as before, so the admission bound stays exact. One
 * cache line per service, so two services' publishes never share one. */
#define SLUICE_STRIPE_BATCH 4
#define SLUICE_STRIPE_RELEASE_BATCH 16
struct sluice_inflight_est {
	__s64 cls[SLUICE_NUM_CLASSES];
	__s64 pad[4];
};

/* Map `conn_cap` (ARRAY, one per service): the open-connection cap of a tcp service, for
 * servers that spend a slot per connection (PostgreSQL's max_connections) whatever the
 * connection does. A SYN of class k is refused while the service's open connections (the
 * `inflight` count of a tcp service, net of `inflight_released`, plus its admitted handshakes
 * not yet complete) reach threshold[k]; 0 = no cap for the class. sluiced writes threshold[]
 * when it programs the services and a threshold changed (a read-modify-write that keeps
 * rejected[], so never when nothing changed: refusals counted between its read and its write
 * would be lost); BPF counts the refusals in rejected[] with atomics: they are their own
 * reason (`connections`), not in class_stats.rejected[]. */
struct sluice_conn_cap {
	__u32 threshold[SLUICE_NUM_CLASSES];
	__u64 rejected[SLUICE_NUM_CLASSES];
};

/* The connection cap of an http service's lower classes. Each in-kernel 429 is a connection
 * the server accepted and then lost, and a server that holds connections in a fixed number of
 * slots (Apache's event MPM) closes idle keep-alive connections -- the highest class's too --
 * to make room for them: what queues ahead of L0 under an L3 flood is L3's connections, not
 * its requests. While a class's requests are refused for lack of room, sluiced caps that
 * class's open connections at about its share of the limit, and its SYNs beyond the cap get
 * an RST from XDP, which costs the server nothing.
 * Map `http_conns` (ARRAY, one per service, struct sluice_inflight, BPF): an http service's
 * open connections per class (cls[]; total is their sum), counted when the handshake
 * completes under the class the SYN was judged by (SLUICE_HS_CLASSED), else the class its
 * source and DSCP rules give (the SYN's DSCP, kept in its record), else the default class;
 * given back by whoever ends the flow, once.
 * Map `http_conn_cap` (ARRAY, one per service, struct sluice_http_conn_cap, sluiced): a SYN
 * of class k is refused while http_conns.cls[k] >= cap[k]; 0 = no cap (L0's is always 0).
 * Only a class's own connections count against its cap: connections of a lower class never
 * hold a higher one back. Refusals are counted in conn_cap.rejected[k] (reason
 * `connections`), as a tcp service's connection cap's are. */
struct sluice_http_conn_cap {
	__u32 cap[SLUICE_NUM_CLASSES];
};

/* Map `addr_class` (LRU_HASH, key struct sluice_client_key, BPF): the highest class a client
 * address's requests were given (by a header or DSCP mark from a trusted source) that is
 * higher than its connection was counted under, and when; for SLUICE_ADDR_CLASS_TTL_NS,
 * refreshed at most once a second by its requests of that class. A SYN carries no header, so
 * without this a client that is L0 by its header would be judged by the lower default class at
 * its next SYN while that class is capped. A path rule's class teaches it too (a client that
 * asks for an L0 path is L0 at its next SYN). Not pinned: after a restart, or with the entry
 * lost to the LRU, such a client is judged by its source until one of its requests comes on a
 * connection it already holds -- while its default class is at its cap, not before it has one
 * (a reason the cap is off by default: a class told apart by source rules has no such gap). */
#define SLUICE_ADDR_CLASS_TTL_NS (60ull * 1000000000ull)
struct sluice_addr_class {
	__u64 seen_ns;
	__u32 class;
	__u32 _pad;
};

/* Map `untrusted_marks` (PERCPU_ARRAY, one per service slot, BPF): units (a tcp connection at
 * its SYN, an http request) that carried a priority mark the service's rules read, a DSCP value
 * or the priority header, from a source outside the service's trust_from, where the mark would
 * have decided the class had the source been trusted. The mark was ignored (the other rules or
 * the default class decided); a unit counts once whatever marks it carried. Cumulative, and
 * pinned so that a restart keeps it. Per-CPU: the count costs nothing shared, and only a unit
 * with such a mark pays it. */
struct sluice_untrusted {
	__u64 ignored;
};

/* One class's counters, cumulative since attach (in struct sluice_svc_stats). */
struct sluice_class_stats {
	__u64 arrivals;
	__u64 admitted;
	__u64 completed;
	__u64 errors;                    /* 5xx responses, server RSTs */
	__u64 resp_429;                  /* 429 from the server: counted apart, never a failure */
	__u64 retransmits;               /* SYN retransmits / re-sent requests (retry-storm signal) */
	__u64 fail_open;                 /* admitted only because the controller was silent */
	__u64 untracked;                 /* admitted without a slot (not in in-flight): the flow
	                                  * table full, a refusal's reply not buildable, or a
	                                  * refusal that would land inside an answer still on
	                                  * its way to the client */
	__u64 rejected[SLUICE_REJ_REASONS];
};

/* Map `class_stats` (PERCPU_ARRAY, index = service): a service's counters by class, and
 * per class the latency samples put in its histogram, counted after the histogram (on the
 * same CPU): the controller, which reads these before the histograms, reads a histogram only
 * when its count moved (a tcp turn moves no other counter). One entry a service: the tick
 * reads every service's counters in one batch of as many entries as services, and the
 * kernel's cost of a batch is mostly per entry. */
struct sluice_svc_stats {
	struct sluice_class_stats cls[SLUICE_NUM_CLASSES];
	__u64 samples[SLUICE_NUM_CLASSES];
};

/* Map `pkt_stats` (PERCPU_ARRAY, one entry): what the parser saw. */
struct sluice_pkt_stats {
	__u64 malformed;                 /* truncated / garbage headers: passed untouched (the
	                                  * one exception, never seen: a frame generic XDP
	                                  * copied whose MAC header TC could not write back,
	                                  * dropped) */
	__u64 service;                   /* service packets the data path acted on: SYN/FIN/RST in,
	                                  * data/SYN/FIN/RST out (bare ACKs, data in, and
	                                  * non-service packets are not counted: that path stays
	                                  * the parse and one array lookup) */
	__u64 rst_sent;
	__u64 reply_sent;                /* http 429/503 replies */
	__u64 reply_failed;              /* could not build a reply: unit admitted instead */
};

/* ---- Latency histograms (PERCPU_ARRAY, one map per class, index = service: `latency_hist`
 * for L0, `latency_hist1` .. `latency_hist3` for L1 .. L3, SLUICE_HIST_MAP_NAMES) ----
 * Log-linear in microseconds: values 0..3 exact, then 4 sub-buckets per power of two, the
 * last power 2^26 us (67 s); the last bucket, from 7 << 24 us (117 s), is open. Bucket i >= 4 covers [lo, hi) with p = (i-4)/4 + 2, s = (i-4)%4,
 * lo = (4+s) << (p-2), hi = (5+s) << (p-2). */
#define SLUICE_HIST_MAX_POW   26
#define SLUICE_HIST_BUCKETS   (4 + (SLUICE_HIST_MAX_POW - 1) * 4)   /* 104 */

struct sluice_hist {
	__u64 bucket[SLUICE_HIST_BUCKETS];
	__u64 sum_us;
};

static inline __u32 sluice_log2_u64(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8)  { v >>= 8;  r += 8; }
	if (v >> 4)  { v >>= 4;  r += 4; }
	if (v >> 2)  { v >>= 2;  r += 2; }
	if (v >> 1)  { r += 1; }
	return r;
}

static inline __u32 sluice_hist_bucket(__u64 us)
{
	__u32 p, s, i;
	if (us < 4)
		return (__u32)us;
	p = sluice_log2_u64(us);
	s = (__u32)(us >> (p - 2)) & 3;
	i = 4 + (p - 2) * 4 + s;
	return i < SLUICE_HIST_BUCKETS ? i : SLUICE_HIST_BUCKETS - 1;
}

/* Upper bound (exclusive) of bucket i, in microseconds. */
static inline __u64 sluice_hist_upper_us(__u32 i)
{
	__u32 p, s;
	if (i < 4)
		return (__u64)i + 1;
	p = (i - 4) / 4 + 2;
	s = (i - 4) % 4;
	return (__u64)(5 + s) << (p - 2);
}

/* The histogram map of each class, as pinned. */
#define SLUICE_HIST_MAP_NAMES { "latency_hist", "latency_hist1", "latency_hist2", "latency_hist3" }

/* Layouts before 8 kept every class's histogram in `latency_hist`, at this index (a sluicectl
 * still reads such pins). */
static inline __u32 sluice_stat_index(__u32 svc, __u32 cls)
{
	return svc * SLUICE_NUM_CLASSES + cls;
}

#endif /* SLUICE_H */
