// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice data path.
 *   sluice_xdp_ingress : every packet in. Decides connections (tcp services) at SYN; a unit
 *                        gets its flow and slot only when the client's ACK proves it received
 *                        the SYN-ACK; ends flows at a client FIN/RST inside the window.
 *                        A non-service packet costs the parse and one array lookup.
 *   sluice_tc_ingress  : http services: a request starts on an established flow, at the
 *                        sequence the client is at, with a method token; it is classified and
 *                        admitted, or answered 429/503 from here (XDP cannot both answer the
 *                        client and reset the server). tcp services: new client data when
 *                        the server spoke last starts a turn (the flow is busy).
 *   sluice_tc_egress   : every packet out. Learns the server's ISN from its SYN-ACK, ends flows
 *                        at server FIN/RST, keeps flows' last-seen fresh for the GC; for http
 *                        services the first response segment ends the request, for tcp
 *                        services the server's first new data ends the turn.
 * A packet of an admitted unit is never dropped or altered: only the first packet of a refused
 * unit is acted upon (a SYN: RST via XDP_TX or drop; a request's first segment: 429/503 to the
 * client, RST to the server). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "sluice.h"
#include "maps.h"
#include "parse.h"
#include "admit.h"
#include "tcp_reset.h"
#include "http.h"
#include "handshake.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define NS_PER_SEC 1000000000ull
/* Test builds run a racing step at named points of the data path (tests/bpf/hooks.h); the
 * product build compiles the points away. */
#ifdef SLUICE_TEST_HOOKS
#include "hooks.h"
#else
#define SLUICE_TEST_HOOK(point, key) do { } while (0)
#endif

static __always_inline struct sluice_pkt_stats *pkt_counters(void)
{
	return only_entry(&pkt_stats);
}

/* A port shared by address-specific services: the service at the packet's local address (the
 * destination coming in, the source going out), else the port-only one (v, 0 = none). */
static __always_inline int service_by_addr(__u32 port, __u32 v, const struct pkt *p, int ingress)
{
	struct sluice_addr_key k = { .port = port };
	__u32 *a;

	pkt_addr(p, !ingress, k.addr);
	a = bpf_map_lookup_elem(&addr_services, &k);
	if (a)
		v = *a;
	if (!v || v > SLUICE_MAX_SERVICES)
		return -1;
	return v - 1;
}

/* Service index for a port (at the packet's local address), or -1. The bitmap first: a
 * port no service has is answered from 8 KiB instead of a line of the 256 KiB array. */
static __always_inline int service_of(__be16 port, const struct pkt *p, int ingress)
{
	__u32 key = bpf_ntohs(port), zero = 0;
	struct sluice_port_bits *bits = bpf_map_lookup_elem(&service_ports, &zero);
	__u32 *v;

	if (!bits || !(bits->word[(key / 64) % SLUICE_PORT_WORDS] & (1ULL << (key % 64))))
		return -1;
	v = bpf_map_lookup_elem(&port_to_service, &key);

	if (v && (*v & SLUICE_PORT_BY_ADDR))
		return service_by_addr(key, *v & ~SLUICE_PORT_BY_ADDR, p, ingress);
	if (!v || !*v || *v > SLUICE_MAX_SERVICES)
		return -1;
	return *v - 1;
}

/* Where a frame's parse leaves its offsets: memory whose contents the verifier does not
 * follow. Parsed into the stack, the common frame's shapes (an 802.1Q tag or none, IPv4 or
 * IPv6), inlined, would reach the rest of the program as that many sets of known offsets, and
 * the verifier would walk the program once for each (XDP's walk went from 73,787 to 135,112
 * instructions): read back from a map value they are one set of unknown, bounds-checked ones,
 * as a global function's results are, and the parse costs no call. The offsets live from the
 * parse to pkt_from_offs only, with no helper between that could run a program of this object
 * on the same CPU (a pull runs none), so one entry per CPU serves every hook. Not pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkt_offs);
} parse_offsets SEC(".maps");

static __always_inline struct pkt_offs *parse_offsets_here(void)
{
	return only_entry(&parse_offsets);
}

/* Parse a frame and find the service it belongs to: the service index, or -1 for anything
 * sluice leaves alone (not TCP, not a service port; malformed frames are counted), or -2
 * (ingress) for a frame whose headers cannot be followed to its TCP header but the host would
 * take (PKT_DEEP, headers past the first buffer of a multi-buffer frame among them): it is
 * dropped, not passed unjudged. */
static __always_inline int parse_service_packet(struct xdp_md *ctx, struct pkt *p, int ingress)
{
	struct sluice_pkt_stats *ps;
	struct pkt_offs *o = parse_offsets_here();
	enum pkt_kind kind;
	int k;

	if (!o)
		return -1; /* a one-entry array: never */
	k = parse_xdp_offs(ctx, o);
	asm volatile("" ::: "memory"); /* the frame's pointers read again: see parse_offsets */
	kind = pkt_from_offs((void *)(long)ctx->data, (void *)(long)ctx->data_end, k, o, p);

	if (kind != PKT_TCP) {
		if ((kind == PKT_MALFORMED || kind == PKT_DEEP) && (ps = pkt_counters()))
			ps->malformed++;
		return kind == PKT_DEEP && ingress ? -2 : -1;
	}
	return service_of(ingress ? p->tcp->dest : p->tcp->source, p, ingress);
}

/* Writes every byte of the key (it has no padding): callers need not zero it first. */
static __always_inline void flow_key_of(const struct pkt *p, int ingress,
					struct sluice_flow_key *k)
{
	pkt_addr(p, ingress, k->client_addr);
	k->client_port = ingress ? p->tcp->source : p->tcp->dest;
	k->service_port = ingress ? p->tcp->dest : p->tcp->source;
	pkt_addr(p, !ingress, k->local_addr);
}

/* The coarse clock as last read on this CPU, and the jiffies it was read at. Not pinned: it
 * holds nothing between loads that matters. */
struct coarse_clock {
	__u64 jiffies;
	__u64 ns;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct coarse_clock);
} coarse_clock SEC(".maps");

/* The coarse clock for last-seen, read anew only when jiffies moved (the coarse clock moves
 * with the tick, so it would give the same time; jiffies and this CPU's copy cost a few loads,
 * the clock a helper call on every data segment). */
static __always_inline __u64 coarse_now(void)
{
	__u32 zero = 0;
	struct coarse_clock *c = bpf_map_lookup_elem(&coarse_clock, &zero);
	__u64 j = bpf_jiffies64();

	if (!c)
		return bpf_ktime_get_coarse_ns();
	if (c->jiffies != j) {
		c->ns = bpf_ktime_get_coarse_ns();
		c->jiffies = j;
	}
	return c->ns;
}

/* What TC egress last found on an http server socket (socket storage, so that it goes with the
 * socket and costs no lookup of the flow table): the ack its last data segment that went the
 * whole way carried, a segment that left no request open on the flow. A request opens at TC
 * ingress on client bytes the server's stack has not received yet, and every segment the
 * server sends once it has them acknowledges them: so a data segment carrying the same ack has
 * nothing to end and nothing to advance, and stops here. The jiffies bound the memo's age: a
 * segment goes the whole way at least every SLUICE_MEMO_JIFFIES (64 ms to 640 ms with HZ 1000
 * to 100), which keeps the flow's last-seen fresh for the GC (it needs seconds) and makes up
 * for a request that a retransmit of bytes the server had already acknowledged opened in the
 * instant before the memo was written. Not pinned: a new program starts with no memo, so
 * every socket's next segment goes the whole way. */
struct egress_memo {
	__u64 jiffies;                   /* when it was written */
	__u32 ack;                       /* the segment's ack, as on the wire */
	__u32 _pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct egress_memo);
} egress_memo SEC(".maps");

#define SLUICE_MEMO_JIFFIES 64

/* 1 for a segment the memo may answer for: data with ACK, no SYN, FIN or RST. */
static __always_inline int plain_data(const struct pkt *p)
{
	return p->payload_len && p->tcp->ack && !p->tcp->syn && !p->tcp->fin && !p->tcp->rst;
}

/* 1 when a plain data segment of an http server socket may stop before the flow table: its
 * socket's memo holds its ack and is young. */
static __always_inline int response_data_settled(struct __sk_buff *skb, const struct pkt *p)
{
	struct bpf_sock *sk = skb->sk;
	struct egress_memo *m;

	if (!sk)
		return 0;
	m = bpf_sk_storage_get(&egress_memo, sk, 0, 0);
	return m && m->ack == p->tcp->ack_seq && bpf_jiffies64() - m->jiffies < SLUICE_MEMO_JIFFIES;
}

/* After a data segment went the whole way and left no request open: its ack, remembered. */
static __always_inline void settle_response_data(struct __sk_buff *skb, const struct pkt *p)
{
	struct bpf_sock *sk = skb->sk;
	struct egress_memo *m;

	if (!sk || !p->tcp->ack)
		return;
	m = bpf_sk_storage_get(&egress_memo, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!m)
		return; /* no memory for it: every segment goes the whole way, as before */
	m->ack = p->tcp->ack_seq;
	m->jiffies = bpf_jiffies64();
}

/* Last-seen at most once a second (the GC needs seconds, not a write per packet). */
static __always_inline void touch_flow(struct sluice_flow *f, __u64 now)
{
	/* Signed: the coarse clock may lag the exact one that wrote last_seen by a tick or two. */
	if ((__s64)(now - f->last_seen_ns) > (__s64)NS_PER_SEC)
		f->last_seen_ns = now;
}

/* 1 when seq lies in [ref, ref + SLUICE_SEQ_WINDOW), modulo 2^32. */
static __always_inline int seq_in_window(__u32 seq, __u32 ref)
{
	return seq - ref < SLUICE_SEQ_WINDOW;
}

/* 1 when seq lies in the window just behind ref: [ref - SLUICE_SEQ_WINDOW, ref), modulo 2^32. */
static __always_inline int seq_behind(__u32 seq, __u32 ref)
{
	return ref - seq - 1 < SLUICE_SEQ_WINDOW;
}

/* What the server acknowledged, the client has sent: the server's ack moves the client's
 * expected sequence forward (the local stack is trusted, so by any amount). A client_next of
 * 0 is not known yet (a flow carried over from a layout without it): the ack sets it. */
static __always_inline void advance_by_server(struct sluice_flow *f, __u32 ack)
{
	if (!f->client_next || (__s32)(ack - f->client_next) > 0)
		f->client_next = ack;
}

/* A client segment moves it only when it carries on from where the client is (starts at or
 * before it, ends after it): a segment ahead of a gap waits for the server's ack, and a
 * forger who does not know where the client is cannot drag it away. */
static __always_inline int advance_by_client(struct sluice_flow *f, __u32 seq, __u32 end)
{
	__u32 d = end - f->client_next;

	if (f->client_next - seq <= SLUICE_SEQ_WINDOW && d && d <= SLUICE_SEQ_WINDOW) {
		f->client_next = end;
		return 1;
	}
	return 0;
}

#include "client_memo.h"

/* A flow entry for a new unit (the caller sets what only it knows: tracking, client count). */
static __always_inline void init_flow(struct sluice_flow *f, __u64 now, __u32 isn, __u32 svc,
				      __u32 cls, __u8 state)
{
	f->admitted_ns = now;
	f->last_seen_ns = now;
	f->syn_seq = isn;
	f->svc = svc;
	f->class = cls & 3;
	f->state = state;
}

/* The refused_syns slot of a SYN's 4-tuple (h: sluice_flow_key_hash). */
static __always_inline __u64 *refused_slot(__u64 h)
{
	__u32 slot = (__u32)h & (SLUICE_REFUSED_SLOTS - 1);

	return bpf_map_lookup_elem(&refused_syns, &slot);
}

/* What a refused SYN leaves in its slot: its 4-tuple's tag and its ISN. */
static __always_inline __u64 refused_mark(__u64 h, __u32 isn)
{
	return (h & 0x7fffffff00000000ull) | isn;
}

/* What an admitted SYN whose handshake completed leaves there: the same with the top bit set
 * (a refused SYN's never has it), so that the two never read as each other. A late copy of
 * that SYN is then known by the slot the SYN path reads anyway, without a lookup of the flow
 * table on every new SYN (the copy's one use of it). */
static __always_inline __u64 promoted_mark(__u64 h, __u32 isn)
{
	return refused_mark(h, isn) | (1ull << 63);
}

static __always_inline void note_rejected_syn(__u64 *seen, __u64 h, __u32 isn,
					      struct sluice_class_stats *st)
{
	__u64 mark = refused_mark(h, isn);

	if (!seen)
		return;
	if (READ_ONCE(*seen) == mark) {
		st->retransmits++;
		return;
	}
	*seen = mark;
}

/* Interfaces (by ifindex) where a refused SYN's RST is sent from TC ingress, not XDP: the NIC
 * strips VLAN tags on receive (rx VLAN offload) and something above the interface takes
 * tagged traffic, so the tag a reply needs is in the skb but not in the frame XDP sees (the
 * kernel's rx-VLAN-tag metadata needs a device-bound program). Written by sluiced at attach;
 * not pinned: each load writes it anew. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} syn_reply_tc SEC(".maps");

/* Marks a frame, in XDP metadata, as a refused SYN for TC ingress to answer. */
#define SLUICE_META_RST_AT_TC 0x51ce0257u

static __always_inline int rst_belongs_to_tc(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;

	return bpf_map_lookup_elem(&syn_reply_tc, &ifindex) != 0;
}

/* Hand a refused SYN to TC ingress to answer: marked in metadata, passed. A driver that keeps
 * no metadata gets it dropped instead (the client's SYN retry ends in a timeout, never in a
 * connection). */
static __always_inline int leave_rst_to_tc(struct xdp_md *ctx)
{
	struct sluice_pkt_stats *ps;
	__u32 *meta;

	if (bpf_xdp_adjust_meta(ctx, -4) == 0) {
		meta = (void *)(long)ctx->data_meta;
		if ((void *)(meta + 1) <= (void *)(long)ctx->data) {
			*meta = SLUICE_META_RST_AT_TC;
			return XDP_PASS;
		}
	}
	if ((ps = pkt_counters()))
		ps->reply_failed++;
	return XDP_DROP;
}

/* Whether a pending handshake stands against a SYN with another ISN on its 4-tuple (anyone
 * who guesses the 4-tuple can send one; replacing the record would leave the real connection
 * to complete untracked). It stands once the server answered it: the server itself ignores
 * such a SYN while its half-open connection lives and answers it with an ACK of the first
 * ISN, which the genuine owner of the new ISN resets at that ISN + 1 (client_end then ends the
 * record and the owner's next SYN is decided afresh). Before that, it stands for a round trip's
 * worth (the SYN-ACK follows within microseconds): a SYN the server never answered within
 * SLUICE_HALFOPEN_TIMEOUT_NS is dead, and a client starting afresh replaces it. */
static __always_inline int handshake_stands(const struct sluice_handshake *r, __u64 now)
{
	/* signed (hs_within): a record another CPU stamped a moment after this one read its
	 * clock is young, not wrapped around into dead */
	return (r->flags & SLUICE_HS_SERVER_ISN) ||
	       hs_within(r->syn_ns, now, SLUICE_HALFOPEN_TIMEOUT_NS);
}

/* A SYN sent again for a unit already decided: counted, passed, nothing decided again. */
static __always_inline int count_syn_retransmit(__u32 svc, __u32 cls)
{
	struct sluice_class_stats *st = class_stats_of(svc, cls);

	if (st)
		st->retransmits++;
	return XDP_PASS;
}

static __always_inline int handle_syn(struct xdp_md *ctx, struct pkt *p, __u32 svc)
{
	const struct sluice_service *sc;
	struct sluice_flow_key key SLOT_KEY_ALIGNED;
	struct sluice_handshake hs, old;
	struct sluice_class_stats *st;
	struct hs_at at;
	__u64 h, *seen;
	struct sluice_pkt_stats *ps;
	struct sluice_flow *f;
	struct class_pick pick;
	__u32 isn = bpf_ntohl(p->tcp->seq);
	__u64 now;
	int reason = 0, had, stands = 0;
	__u32 len;

	flow_key_of(p, 1, &key);
	/* A client resends its SYN while it has no SYN-ACK, that is while the handshake is
	 * pending: its slot first, so the common retransmit costs one read of it. */
	h = flow_hash(&key);
	hs_locate(&at, h);
	had = hs_read(&at, &key, &old);
	if (had && old.client_isn == isn)
		return count_syn_retransmit(svc, old.class);
	/* Not a pending handshake's: a late copy of a completed one's, or a new SYN. Its
	 * refused_syns slot tells: a late copy of the SYN of a unit whose handshake completed
	 * and whose flow still stands is the same unit, counted once. The slot says which SYNs
	 * may be one, so that a new SYN costs no lookup of the flow table; the flow decides (a
	 * slot outlives its flow: a replay of an old 4-tuple and ISN is judged as new). Should
	 * another 4-tuple have taken the slot since, a copy is judged as a new SYN: the server
	 * answers it with an ACK of the connection it holds, and a record made for it ages out
	 * (an RST for it, ignored). The slot is in cache then should the SYN be refused. */
	seen = refused_slot(h);
	if (seen && READ_ONCE(*seen) == promoted_mark(h, isn)) {
		f = bpf_map_lookup_elem(&flows, &key);
		if (f && f->syn_seq == isn)
			return count_syn_retransmit(svc, f->class);
	}
	/* A new SYN: the retransmits above need neither the service nor the clock. */
	sc = bpf_map_lookup_elem(&services, &svc);
	if (!sc)
		return XDP_PASS;
	/* A SYN with a new ISN on a live flow never ends it: anyone can send one. Should the
	 * server accept it as a new connection, its SYN-ACK (seen at egress) ends the old.
	 * The coarse clock: what a SYN times (a handshake's second, a window's, the controller's
	 * heartbeat) needs no better than a tick, and the exact clock's read was a sixth of what
	 * a new SYN cost (every comparison of the two is signed, see SLUICE_COARSE_TICK_NS). */
	now = bpf_ktime_get_coarse_ns();
	if (had) {
		/* A standing record keeps its place (see above), but a tcp SYN is still judged.
		 * Else the record's admission could carry over to it from a handshake the server
		 * had long forgotten: a client that let a SYN-ACK go unanswered while the service
		 * was quiet would connect on that 4-tuple later, past every refusal. A refusal's
		 * RST acknowledges the new ISN only, which the record's own client (if another)
		 * ignores. An http connection needs no such judgement: each of its requests is
		 * judged, and while its class holds more connections than its cap, its next
		 * request is answered 429. */
		stands = handshake_stands(&old, now);
		if (stands && sc->protocol == SLUICE_PROTO_HTTP)
			return XDP_PASS;
		/* A dead record gives way. It owes no half-open count: it is dead only once the
		 * window it was counted in has lapsed, and a lapsed window's count is gone. */
		if (!stands)
			hs_remove(&at);
	}
	__builtin_memset(&hs, 0, sizeof(hs));
	hs.syn_ns = now;
	hs.client_isn = isn;
	hs.svc = svc;

	/* http services admit per request (TC ingress); the connection is only tracked, and
	 * refused only while its class's connections are capped (sluice_http_conn_cap): the
	 * one lookup of the cap is all a SYN pays while no class is. */
	if (sc->protocol == SLUICE_PROTO_HTTP) {
		const struct sluice_http_conn_cap *cap = bpf_map_lookup_elem(&http_conn_cap, &svc);

		hs.class = sc->default_class & 3;
		/* kept for a connection not judged now: it counts by its SYN's rules all the
		 * same (promote) */
		hs.dscp = p->dscp;
		hs.flags = SLUICE_HS_DSCP;
		if (cap && (cap->cap[1] | cap->cap[2] | cap->cap[3]) && controller_alive(now)) {
			__u8 learned = 0;

			hs.class = http_syn_class(sc, svc, p, now, &learned);
			hs.flags |= SLUICE_HS_CLASSED | (learned ? SLUICE_HS_LEARNED : 0);
			if (!http_conn_admit(cap, svc, hs.class))
				goto refuse_conn; /* SYN retransmits are not the requests' retries */
		}
		hs_write(&at, &key, &hs, now);
		return XDP_PASS;
	}

	pick = classify_l3(sc, svc, p);
	count_untrusted(svc, &pick);
	st = class_stats_of(svc, pick.class);
	if (!st)
		return XDP_PASS;
	st->arrivals++;

	if (admit_unit(svc, pick.class, now, st, &reason, 0, NULL)) {
		if (!admit_conn_cap(svc, pick.class, now)) {
			reason = SLUICE_REJ_REASONS; /* counted in conn_cap */
			goto refuse;
		}
		if (!admit_client(sc, svc, key.client_addr, now, &hs.client_limited, 0)) {
			reason = SLUICE_REJ_CLIENT_LIMIT;
			goto refuse;
		}
		if (stands) {
			/* undecided: the server does not take it (see above); counted only when
			 * refused. Counted above and taken back here, not counted at `refuse`:
			 * a flag still read there would have the verifier walk the whole
			 * refusal (the RST) once for each of its values. */
			st->arrivals--;
			return XDP_PASS;
		}
		/* Admitted: answered by the server, but no slot until the handshake completes. */
		hs.class = pick.class & 3;
		hs.flags = SLUICE_HS_COUNTED;
		st->admitted++;
		/* Counted whether or not it gets a record: a SYN whose slot another 4-tuple holds
		 * is a handshake under way all the same (its count lapses with the others'). Of
		 * two SYNs with different ISNs at once, the first record stands. */
		halfopen_add(svc, now);
		hs_write(&at, &key, &hs, now);
		return XDP_PASS;
	}
refuse:
	if (reason >= 0 && reason < SLUICE_REJ_REASONS)
		st->rejected[reason]++;
	note_rejected_syn(seen, h, isn, st);
refuse_conn:
	if (sc->reject_mode == SLUICE_REJECT_DROP)
		return XDP_DROP;
	if (rst_belongs_to_tc(ctx))
		return leave_rst_to_tc(ctx);

	ps = pkt_counters();
	len = build_syn_reset(p, (void *)(long)ctx->data_end);
	if (!len) {
		/* Cannot answer this one cleanly: dropping is what the client's SYN retry
		 * logic handles best. */
		if (ps)
			ps->reply_failed++;
		return XDP_DROP;
	}
	{
		int cut = (int)bpf_xdp_get_buff_len(ctx) - (int)len;

		if (cut > 0 && bpf_xdp_adjust_tail(ctx, -cut) != 0) {
			if (ps)
				ps->reply_failed++;
			return XDP_DROP;
		}
	}
	if (ps)
		ps->rst_sent++;
	return XDP_TX;
}

/* The handshake of an admitted SYN completed (hs copied by the caller): the unit gets its
 * flow entry and, for tcp services, its in-flight slot. Whoever deletes the record does this,
 * so a unit is promoted once even when XDP and TC egress both see proof at the same time. */
/* How track_flow is called: from a handshake's completion (either protocol), or to take on a
 * connection of the one protocol the caller was made for (a constant there, so the other
 * protocol's code and stack fall away: see track_adopted_http / _tcp). */
enum track_how { TRACK_PROMOTED, TRACK_ADOPTED_HTTP, TRACK_ADOPTED_TCP };

static __always_inline void track_flow(struct sluice_flow_key *key,
				       const struct sluice_handshake *hs, __u64 now, __u8 state,
				       enum track_how how);

static __always_inline void promote(struct hs_at *at, struct sluice_flow_key *key,
				    const struct sluice_handshake *hs, __u64 now, __u8 state)
{
	__u64 *slot, was;

	if (!hs_remove(at))
		return;
	slot = refused_slot(at->h);
	/* never over a refused SYN's mark: its retransmit is the retry-storm signal */
	if (slot && (!(was = READ_ONCE(*slot)) || (was >> 63)))
		*slot = promoted_mark(at->h, hs->client_isn);
	track_flow(key, hs, now, state, TRACK_PROMOTED);
}

/* The flow entry of a connection, from its handshake record (promote) or from what the local
 * stack holds (adopt_established, whose record is made up and was never counted as
 * half-open). */
static __always_inline void track_flow(struct sluice_flow_key *key,
				       const struct sluice_handshake *hs, __u64 now, __u8 state,
				       enum track_how how)
{
	struct sluice_flow nf = {};
	const struct sluice_service *sc;
	struct sluice_class_stats *st;
	__u32 svc = hs->svc, cls = hs->class & 3, pending = 0;

	if (svc >= SLUICE_MAX_SERVICES)
		return;
	sc = bpf_map_lookup_elem(&services, &svc);
	if (!sc || (how != TRACK_PROMOTED &&
		    (how == TRACK_ADOPTED_HTTP) != (sc->protocol == SLUICE_PROTO_HTTP)))
		return;
	init_flow(&nf, now, hs->client_isn, svc, cls, state);
	nf.client_next = hs->client_isn + 1;
	if (how == TRACK_ADOPTED_TCP ||
	    (how == TRACK_PROMOTED && sc->protocol != SLUICE_PROTO_HTTP)) {
		nf.admitted_ns = hs->syn_ns; /* what its half-open count is matched with */
		/* a connection taken on was never counted as half-open: not asked (its syn_ns of
		 * 0 would match counts started in a host's first second) */
		pending = how == TRACK_PROMOTED && (hs->flags & SLUICE_HS_COUNTED) &&
			  halfopen_promoted(svc, hs->syn_ns, now) ?
			  SLUICE_OWN_PENDING : 0;
		take_unit(svc, cls);
		nf.tracked_inflight = 1;
		if (hs->flags & SLUICE_HS_SERVER_ISN) {
			nf.server_next = hs->server_isn + 1;
			nf.flags = SLUICE_FLOW_SERVER_SEQ;
		}
		/* A connection taken on counts against its client's cap, not its token bucket
		 * (client_count). Its setup, if it had one, is long past: the first turn seen is
		 * a request's. */
		if (how == TRACK_ADOPTED_TCP)
			nf.flags |= SLUICE_FLOW_TURNED;
		if (how == TRACK_ADOPTED_TCP || hs->client_limited)
			nf.client_counted = client_count(sc, svc, key->client_addr, now,
							 how != TRACK_ADOPTED_TCP);
		/* The word owns the connection from the insert on. */
		nf.req_active = sluice_own_tag(svc, cls) | SLUICE_OWN_CONN | pending |
				(nf.client_counted ? SLUICE_OWN_CLIENT : 0);
	} else {
		__u32 conn_cls = sc->default_class & 3;

		if (sluice_rules_second(now) > sc->_pad1) {
			/* What the source rules say of the client, once for all its requests:
			 * into the new entry before its insert, from its own key (no packet
			 * writes it later). Not in the rules stamp's own second: such an answer
			 * would never count. */
			nf._pad = source_cache_of(sc, svc, key->client_addr);
		}
		/* The connection counts under the class its SYN was judged by, if it was; else
		 * under the class its SYN's source and DSCP rules give (http_conn_class: the
		 * source answer cached, or the trie when none was cached -- the rules' own
		 * second, a late rule); else under the default class. */
		if (hs->flags & SLUICE_HS_CLASSED) {
			conn_cls = hs->class & 3;
		} else {
			struct src_answer a;

			if (nf._pad) {
				source_answer_of_cache(nf._pad, &a);
			} else {
				struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc };

				__builtin_memcpy(k.addr, key->client_addr, 16);
				source_rule_at(&k, &a);
			}
			conn_cls = http_conn_class(sc, svc, key->client_addr, &a, hs);
		}
		nf.flags = SLUICE_FLOW_CONN_COUNTED | (conn_cls << SLUICE_FLOW_CONN_CLASS_SHIFT) |
			   ((hs->flags & SLUICE_HS_LEARNED) ? SLUICE_FLOW_CONN_LEARNED : 0);
		/* Counted before the insert: from the insert on a FIN may end it and give the
		 * count back, which must never find it missing. */
		count_unit(&http_conns, svc, conn_cls, 1);
	}
	if (bpf_map_update_elem(&flows, key, &nf, BPF_NOEXIST) == 0) {
		own_bump(svc);
		return;
	}
	if (nf.flags & SLUICE_FLOW_CONN_COUNTED)
		count_unit(&http_conns, svc, nf.flags >> SLUICE_FLOW_CONN_CLASS_SHIFT, -1);
	if (!nf.tracked_inflight)
		return;
	/* Table full: admitted, but not counted. */
	if (pending)
		halfopen_fresh_done(svc, hs->syn_ns, now);
	release_unit(svc, cls);
	own_bump(svc);
	if (nf.client_counted)
		release_client(svc, key->client_addr);
	/* An adoption is tried again at the connection's next data: counting each try would
	 * count one connection many times. */
	st = how != TRACK_PROMOTED ? NULL : class_stats_of(svc, cls);
	if (st)
		st->untracked++;
}

/* A client segment with no SYN, FIN or RST: the ACK that completes an admitted handshake (or
 * the first data, should that ACK be lost) carries ack = the server's ISN + 1, which only a
 * peer that received our SYN-ACK knows. Exactly that: the listener answers any other ack
 * with an RST, and a client that took a flow with one (ISN + 2) would have that RST counted
 * against the service as a server error, as often as it likes. A connection that the kernel
 * did complete without sluice seeing it is taken on at its first data (adopt_established). */
static __always_inline void client_ack(const struct pkt *p)
{
	struct sluice_flow_key key SLOT_KEY_ALIGNED;
	struct sluice_handshake hs;
	struct hs_at at;

	if (!p->tcp->ack)
		return;
	flow_key_of(p, 1, &key);
	hs_locate(&at, flow_hash(&key));
	if (!hs_read(&at, &key, &hs) || !(hs.flags & SLUICE_HS_SERVER_ISN))
		return;
	if (bpf_ntohl(p->tcp->ack_seq) != hs.server_isn + 1 ||
	    !seq_in_window(bpf_ntohl(p->tcp->seq), hs.client_isn + 1))
		return;
	/* Until the server speaks on it, the flow stays SLUICE_FLOW_SYN: should the server never
	 * have accepted it, the GC reclaims it after syn_timeout_s, not the idle timeout. */
	promote(&at, &key, &hs, bpf_ktime_get_ns(), SLUICE_FLOW_SYN);
}

/* A client's data on a 4-tuple with no flow: a connection whose handshake sluice did not see
 * complete. It was open before sluiced attached (an operator reaching for sluice while a
 * service drowns under keep-alive clients), or its SYN found its handshake slot held by another
 * 4-tuple's record (a SYN flood), or another CPU had the slot at the SYN-ACK. Left so, its
 * requests would never be decided. The local stack is asked: a connection it holds
 * ESTABLISHED, with this segment at exactly the next byte it expects from the client (rcv_nxt,
 * which a blind forger does not know), is taken on as if its handshake completed now, in the
 * class a SYN of it would have been given (tcp) or its source rule's (http). Anything else --
 * no socket (a forged 4-tuple, a server in another network namespace), one not established, a
 * segment elsewhere in the stream -- creates nothing.
 * Two functions of their own, each called from the packet path (not one from the other), so
 * that neither frame is stacked on the other over the request path's: the verifier's 512-byte
 * bound leaves room for one at a time. */

/* The local stack's socket of key's connection (a client's segment's key), referenced (the
 * caller releases it), or NULL. From the key, not the packet: a packet handed to a function of
 * its own is kept in memory, where the verifier loses the family its header pointers depend
 * on. */
static __always_inline struct bpf_sock *server_socket(struct __sk_buff *skb,
						      const struct sluice_flow_key *key)
{
	/* read in 16-bit words, the key's own alignment */
	const __u16 *w = (const __u16 *)key->client_addr, *l = (const __u16 *)key->local_addr;
	int v4 = !(w[0] | w[1] | w[2] | w[3] | w[4]) && w[5] == 0xffff;
	struct bpf_sock_tuple t;

	/* Both v4-mapped (IPv4) or neither: an IPv6 packet from a v4-mapped source (which the
	 * stack drops) to any address ending in the server's IPv4 one would otherwise find the
	 * IPv4 connection and take it on under a key of its own, as many times as it likes. */
	if (v4 != (!(l[0] | l[1] | l[2] | l[3] | l[4]) && l[5] == 0xffff))
		return NULL;
	__builtin_memset(&t, 0, sizeof(t));
	if (v4) {
		__builtin_memcpy(&t.ipv4.saddr, key->client_addr + 12, 4);
		__builtin_memcpy(&t.ipv4.daddr, key->local_addr + 12, 4);
		t.ipv4.sport = key->client_port;
		t.ipv4.dport = key->service_port;
		return bpf_sk_lookup_tcp(skb, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0);
	}
	__builtin_memcpy(t.ipv6.saddr, key->client_addr, 16);
	__builtin_memcpy(t.ipv6.daddr, key->local_addr, 16);
	t.ipv6.sport = key->client_port;
	t.ipv6.dport = key->service_port;
	return bpf_sk_lookup_tcp(skb, &t, sizeof(t.ipv6), BPF_F_CURRENT_NETNS, 0);
}

/* Where the server is (its snd_nxt) with 1 << 32 set, when the local stack holds the
 * connection of key (a client's segment's) established and expects exactly seq next from its
 * client; else 0. */
static __noinline __u64 established_at(struct __sk_buff *skb, const struct sluice_flow_key *key,
				       __u32 seq)
{
	struct bpf_sock *sk = server_socket(skb, key);
	struct bpf_tcp_sock *tp;
	__u64 found = 0;

	if (!sk)
		return 0;
	if (sk->state == BPF_TCP_ESTABLISHED) {
		tp = bpf_tcp_sock(sk);
		if (tp && tp->rcv_nxt == seq)
			found = (1ull << 32) | tp->snd_nxt;
	}
	bpf_sk_release(sk);
	return found;
}

/* Only the fields read here, placed by CO-RE from the running kernel's BTF (struct tcp_sock is
 * no UAPI; its layout moves between kernels and configs). */
struct tcp_sock {
	__u32 write_seq;                 /* the end of what the server's application wrote */
	__u32 snd_una;                   /* the oldest byte the client has not acknowledged */
} __attribute__((preserve_access_index));

/* 1 when the server's socket of key's connection holds bytes its client has not acknowledged
 * at ack: sent and unacknowledged, or written and still queued behind a window the client
 * keeps shut. A refusal sent now would land at the client's ack, inside those bytes (an
 * answer still streaming to a client that pipelined its next request), and its RST would cut
 * the answer: sluice never breaks an admitted one. 0 when the stack holds no such socket
 * (nothing there to cut), when the client has everything the server wrote, and when ack lies
 * behind what the client already acknowledged (snd_una: this segment's ack is not counted
 * yet, and a real client's acks only move forward): such a stale ack is a crafted segment's,
 * which would otherwise turn every refusal of its requests into an admission. A global
 * function, verified once (see classify_payload), not at each state the refusal path reaches
 * it in. */
__attribute__((noinline))
int answer_outstanding(struct __sk_buff *skb, const struct sluice_flow_key *key, __u32 ack)
{
	struct bpf_sock *sk;
	struct tcp_sock *tp;
	int outstanding = 0;

	if (!skb || !key)
		return 0;
	sk = server_socket(skb, key);
	if (!sk)
		return 0;
	/* The lookup falls back to the port's listener when the stack holds no such
	 * connection: nothing of an answer there. */
	tp = sk->state == BPF_TCP_ESTABLISHED ? bpf_skc_to_tcp_sock(sk) : NULL;
	if (tp)
		outstanding = (__s32)(ack - tp->snd_una) >= 0 && (__s32)(tp->write_seq - ack) > 0;
	bpf_sk_release(sk);
	return outstanding;
}

/* The flow of an established connection found by established_at, as if its handshake had
 * completed now: its record is made up here and was never counted as half-open (syn_ns 0), so
 * nothing is taken from those counts. One function a protocol, each of its own frame: the
 * request path's frame and one of these must fit the verifier's 512 bytes together. */
static __always_inline void adopted_record(struct sluice_handshake *hs, __u32 svc, __u32 cls,
					   __u32 seq, __u32 snd_nxt)
{
	__builtin_memset(hs, 0, sizeof(*hs));
	hs->client_isn = seq - 1;
	hs->server_isn = snd_nxt - 1;
	hs->flags = SLUICE_HS_SERVER_ISN;
	hs->svc = svc;
	hs->class = cls & 3;
}

/* cls: the service's default class (the flow's own until a request is decided). */
static __noinline void track_adopted_http(struct sluice_flow_key *key, __u32 svc, __u32 cls,
					  __u32 seq, __u32 snd_nxt)
{
	struct sluice_handshake hs;

	adopted_record(&hs, svc & 0xffff, cls, seq, snd_nxt);
	track_flow(key, &hs, bpf_ktime_get_ns(), SLUICE_FLOW_OPEN, TRACK_ADOPTED_HTTP);
}

/* cls: the class a SYN of the connection would have been given. */
static __noinline void track_adopted_tcp(struct sluice_flow_key *key, __u32 svc, __u32 cls,
					 __u32 seq, __u32 snd_nxt)
{
	struct sluice_handshake hs;

	adopted_record(&hs, svc & 0xffff, cls, seq, snd_nxt);
	track_flow(key, &hs, bpf_ktime_get_ns(), SLUICE_FLOW_OPEN, TRACK_ADOPTED_TCP);
}

/* The segment's connection's flow, taken on now (see established_at), or NULL. */
static __always_inline struct sluice_flow *adopt_established(struct __sk_buff *skb,
							     const struct pkt *p,
							     struct sluice_flow_key *key, __u32 svc,
							     const struct sluice_service *sc)
{
	__u32 seq = bpf_ntohl(p->tcp->seq), cls = sc->default_class & 3;
	__u64 at;

	at = established_at(skb, key, seq);
	if (!at)
		return NULL;
	if (sc->protocol == SLUICE_PROTO_HTTP) {
		track_adopted_http(key, svc, cls, seq, (__u32)at);
	} else {
		cls = classify_l3(sc, svc, p).class & 3;
		track_adopted_tcp(key, svc, cls, seq, (__u32)at);
	}
	return bpf_map_lookup_elem(&flows, key);
}

/* A client FIN or RST ends a unit only when it is the client's own: its sequence number where
 * the client is (RFC 5961: a blind forger does not know it). Where the client is may not be
 * known (client_next 0: a flow carried over from an older layout, until the server speaks):
 * then the FIN/RST is taken as the client's, as that layout did, so the unit still ends.
 * A FIN ends an idle flow only: it closes the client's sending side, and what it asked still
 * runs at the server (end_flow's keep_open); the flow then ends with the server's close, so a
 * client cannot half-close after each request to have it run uncounted. A FIN that carries
 * data does not come here: sluice_xdp_ingress takes it as data (it may start a request, which
 * TC decides on this flow, or complete a handshake), and the server's close follows.
 * What a client can still do to its own connection: an RST inside the window but not at the
 * byte the stack expects (answered with a challenge ACK), or one with a wrong checksum
 * (dropped), ends the unit here while the connection goes on; its next data takes it on again
 * (adopt_established). Neither is told apart here: the stack's rcv_nxt may not yet count data
 * of the same receive batch (GRO, a socket's backlog), and traffic from a local namespace
 * carries partial checksums (offload) that only the stack completes.
 * handshake_only: a segment that ends a handshake under way but no connection (a SYN that
 * carries FIN: a connection answers it with a challenge ACK and goes on). */
static __always_inline void client_end(const struct pkt *p, int handshake_only)
{
	struct sluice_flow_key key SLOT_KEY_ALIGNED;
	struct sluice_handshake r;
	struct sluice_flow *f;
	struct hs_at at;
	__u32 seq = bpf_ntohl(p->tcp->seq);
	int fin_only = p->tcp->fin && !p->tcp->rst;

	flow_key_of(p, 1, &key);
	f = bpf_map_lookup_elem(&flows, &key);
	if (f) {
		if (handshake_only)
			return;
		if (!f->client_next || seq_in_window(seq, f->client_next))
			end_flow(&key, 0, 1, fin_only);
		return;
	}
	/* Gone before its handshake completed: the record goes (it held no slot). */
	hs_locate(&at, flow_hash(&key));
	if (hs_read(&at, &key, &r) && seq_in_window(seq, r.client_isn + 1) && hs_remove(&at) &&
	    (r.flags & SLUICE_HS_COUNTED))
		halfopen_done(r.svc, r.syn_ns, bpf_ktime_get_ns());
}

/* xdp.frags: the program takes multi-buffer frames (a jumbo MTU), so drivers attach it natively
 * at any MTU; headers are read from the first buffer, which holds them. */
SEC("xdp.frags")
int sluice_xdp_ingress(struct xdp_md *ctx)
{
	const struct sluice_service *sc;
	struct sluice_pkt_stats *ps;
	struct pkt p;
	int svc;

	svc = parse_service_packet(ctx, &p, 1);
	if (svc == -2)
		return XDP_DROP;
	if (svc < 0)
		return XDP_PASS;
	/* A packet inside a unit costs the parse, the port's bit and its array entry, and one
	 * read of its handshake slot's word. Flows are kept fresh from the egress side (touch_flow there).
	 * A FIN that carries data goes this way too: on a flow it ends nothing here (its data
	 * may be a request, and the flow ends with the server's close), and with no flow it may
	 * be what completes the handshake -- a client that wrote its whole request and
	 * half-closed before the SYN-ACK came sends the ACK, the request and the FIN as one
	 * segment, and the kernel establishes the connection from it. Taken as an end, it
	 * removed the handshake's record, and the request passed undecided and uncounted. */
	if (!p.tcp->syn && !p.tcp->rst && (!p.tcp->fin || p.payload_len)) {
		client_ack(&p);
		return XDP_PASS;
	}
	if ((ps = pkt_counters()))
		ps->service++;
	/* A SYN is judged as the kernel takes it. With RST it is an RST: in every state the kernel
	 * resets a connection or a handshake at the client's sequence on it, so it ends the unit
	 * as one (were it judged as a SYN, a client could reset its own connection unseen and
	 * leave its unit held). With FIN it opens nothing: a listener discards it and a connection
	 * answers it with a challenge ACK; only a handshake under way drops on it. */
	if (p.tcp->syn && !p.tcp->rst && !p.tcp->fin) {
		if (!p.tcp->ack)
			return handle_syn(ctx, &p, svc);
		return XDP_PASS; /* SYN-ACK towards a service port: not ours to judge */
	}
	sc = bpf_map_lookup_elem(&services, &svc);
	if (!sc)
		return XDP_PASS;
	/* A host firewall may drop what conntrack calls invalid (a SYN with RST, an RST out of
	 * its window) after sluice ended the unit here: the connection is then taken on again at
	 * its client's next data (adopt_established), a short miscount and never a break. */
	client_end(&p, p.tcp->syn && !p.tcp->rst);
	return XDP_PASS;
}

/* Bytes TC makes sure are in the linear part before parsing: Ethernet, two VLAN tags, IPv6
 * with a few extension headers (or IPv4 with options), TCP with options. */
#define SLUICE_TC_PULL 192
/* The farthest a header the parser follows can end: Ethernet, two VLAN tags, IPv6, four 2 KiB
 * extension headers, a fragment header, TCP with 40 bytes of options. */
#define SLUICE_TC_PULL_MAX (ETH_HLEN + 8 + 40 + SLUICE_MAX_EXT_HDRS * 2048 + 8 + 60)

/* Parse an skb at TC. A driver may leave headers outside the linear part (header split,
 * page-fragment receive): when the linear part is shorter than what parsing may need, those
 * bytes are pulled in first and the frame is parsed from fresh pointers (a pull moves the
 * data). Headers that reach past SLUICE_TC_PULL (IPv6 extension headers of a few hundred
 * bytes, legal and rare) parse as PKT_SHORT: as much as any header the parser follows can
 * take (SLUICE_TC_PULL_MAX; the payload is read with bpf_skb_load_bytes, it need not be
 * linear) is then pulled in and the frame parsed once more, or a client could pad its
 * headers to put its requests out of sluice's sight on such a NIC. A pull that fails makes
 * it PKT_DEEP: dropped at ingress, not passed unjudged (the size of that pull is the
 * client's to choose). Common headers never come to the second pull, nor does any packet of
 * a driver that hands the stack linear frames. The parse is a global function and the
 * pointers are made once after it (pkt_from_offs): two inlined parses took sluice_tc_ingress
 * past the verifier's 1M instructions. Lengths come from skb->len, so a BIG TCP packet
 * (length field 0) parses too. */
static __always_inline enum pkt_kind tc_parse(struct __sk_buff *skb, struct pkt *p)
{
	__u32 linear = skb->data_end - skb->data, want = skb->len;
	struct pkt_offs *o = parse_offsets_here();
	int k;

	if (!o)
		return PKT_MALFORMED; /* a one-entry array: never */
	if (want > SLUICE_TC_PULL)
		want = SLUICE_TC_PULL;
	if (linear < want && bpf_skb_pull_data(skb, want))
		return PKT_MALFORMED;
	k = parse_skb_offs(skb, o);
	if (k == PKT_SHORT) {
		want = skb->len < SLUICE_TC_PULL_MAX ? skb->len : SLUICE_TC_PULL_MAX;
		if (bpf_skb_pull_data(skb, want))
			return PKT_DEEP;
		k = parse_skb_full(skb, o); /* the headers went past the first pull: not common */
	}
	asm volatile("" ::: "memory"); /* the frame's pointers read again: see parse_offsets */
	return pkt_from_offs((void *)(long)skb->data, (void *)(long)skb->data_end, k, o, p);
}

/* The server's first new data of a tcp turn: latency sample, busy - 1. The caller took the
 * turn out of the ownership word (u), so this runs once per turn. The connection goes on and
 * is not counted as completed (its end is). The connection's first turn is held back (see
 * SLUICE_FLOW_TURNED): a next turn's start overwrites it, the connection's end gives it. */
static __always_inline void end_turn(struct sluice_flow *f, const struct own_units *u,
				     __u64 now)
{
	__u32 svc = u->svc, cls = u->cls;
	__u64 start = f->req_start_ns, us = (now - start) / 1000;

	if (svc >= SLUICE_MAX_SERVICES)
		return;
	count_unit(&busy, svc, cls, -1);
	own_bump(svc);
	if (!(f->flags & SLUICE_FLOW_TURNED)) {
		f->flags |= SLUICE_FLOW_TURNED;
		/* unless a next turn started meanwhile (then it was a setup: dropped) */
		__sync_val_compare_and_swap(&f->req_start_ns, start, us | SLUICE_SETUP_PENDING);
		return;
	}
	record_latency(svc, cls, us);
}

/* A tcp server segment with data: 1 when it carries data beyond what the server sent before
 * (a retransmit ends no turn). The local stack is trusted: its newest data moves the mark. */
static __always_inline int server_data_new(struct sluice_flow *f, const struct pkt *p)
{
	__u32 end = bpf_ntohl(p->tcp->seq) + p->payload_len;

	if ((f->flags & SLUICE_FLOW_SERVER_SEQ) && (__s32)(end - f->server_next) <= 0)
		return 0;
	f->server_next = end;
	if (!(f->flags & SLUICE_FLOW_SERVER_SEQ))
		f->flags |= SLUICE_FLOW_SERVER_SEQ;
	return 1;
}

/* The first response segment of a request: latency sample, status, in-flight - 1. The caller
 * took the request out of the ownership word (u), so this runs once per request. */
static __always_inline void end_request(struct __sk_buff *skb, const struct pkt *p,
					struct sluice_flow *f, const struct sluice_flow_key *key,
					const struct own_units *u, __u64 now)
{
	__u32 svc = u->svc, cls = u->cls;
	struct sluice_class_stats *st;
	int status;

	if (svc >= SLUICE_MAX_SERVICES)
		return;
	release_unit(svc, cls);
	if (u->unread)
		unread_take_off(svc, cls); /* answered before the probe saw a read (or none runs) */
	if (u->client)
		release_client(svc, key->client_addr);
	own_bump(svc);
	record_latency(svc, cls, (now - f->req_start_ns) / 1000);
	st = class_stats_of(svc, cls);
	if (!st)
		return;
	st->completed++;
	status = response_status(skb, p);
	/* 501 (a method the server does not implement) and 505 (an HTTP version it does not
	 * speak) answer the form of the request: any client can have them at will, at no cost
	 * to the backend, and counted as failures they opened the service's breaker against
	 * every class */
	if (status >= 500 && status != 501 && status != 505)
		st->errors++;
	else if (status == 429)
		st->resp_429++; /* the server shedding by itself is not a failure */
}

/* A server segment on a 4-tuple with no flow: the server's SYN-ACK gives away its ISN (what
 * the client must acknowledge); should the client's ACK not be seen, the server's own first
 * segment of the established connection, acknowledging the client's SYN, completes it (the
 * local stack is trusted: it only speaks so on a connection it accepted, and a SYN it
 * accepted is one it answered with a SYN-ACK seen here; one whose record that SYN-ACK could
 * not update, another CPU holding the slot, is taken on at its client's first data). */
static __always_inline void server_handshake(const struct pkt *p, struct sluice_flow_key *key,
					     __u64 now)
{
	__u32 ack = bpf_ntohl(p->tcp->ack_seq);
	struct sluice_handshake_slot *s;
	struct sluice_handshake hs;
	struct hs_at at;

	if (!p->tcp->ack)
		return;
	hs_locate(&at, flow_hash(key));
	if (!hs_read(&at, key, &hs))
		return;
	if (p->tcp->syn) {
		if (ack != hs.client_isn + 1) {
			/* The server took another SYN on the 4-tuple than the record's: one let
			 * through undecided while the record stood (handshake_stands), after the
			 * server ignored or gave up the record's. The admission made for the 4-tuple
			 * carries over to the SYN the server took, so that connection is tracked.
			 * Not while the record's own SYN-ACK is under a second old: a server
			 * answering with SYN cookies keeps no half-open state and answers a forged
			 * SYN too; the first answered stands. */
			if ((hs.flags & SLUICE_HS_SERVER_ISN) &&
			    hs_within(hs.syn_ns, now, SLUICE_HALFOPEN_TIMEOUT_NS))
				return;
		}
		/* Changed in place, the slot held meanwhile; should another CPU have it, the
		 * server's ISN goes unrecorded and the connection is taken on at its first data. */
		if (!hs_claim(&at))
			return;
		s = at.slot;
		if (ack != hs.client_isn + 1) {
			/* restamped: a count from a window that lapsed meanwhile would read as
			 * the current window's, and giving it back would take another SYN's */
			if (!halfopen_current(hs.svc, hs.syn_ns, now))
				hs.flags &= ~SLUICE_HS_COUNTED;
			s->client_isn = ack - 1;
			s->syn_ns = now;
		}
		s->server_isn = bpf_ntohl(p->tcp->seq);
		s->flags = hs.flags | SLUICE_HS_SERVER_ISN;
		hs_publish(&at);
		return;
	}
	if (p->tcp->rst || p->tcp->fin) {
		/* Refused or closed by the server before it held a slot. */
		if (hs_remove(&at) && (hs.flags & SLUICE_HS_COUNTED))
			halfopen_done(hs.svc, hs.syn_ns, now);
		return;
	}
	/* Only a SYN the server answered (its SYN-ACK seen: the record holds the server's ISN)
	 * is a connection its segments complete. A record of a SYN it never answered -- one on
	 * a 4-tuple whose connection is still open or closing, answered with an ACK of that
	 * connection (a SYN with FIN or RST makes no record: sluice_xdp_ingress) -- is acknowledged all the
	 * same by that older connection's segments when it carried the client's sequence number
	 * there (the client's FIN's: the server's data resent after its own FIN acknowledges
	 * it): completed, it made a flow after the connection's end, holding its slot until the
	 * GC. A connection whose SYN-ACK went unrecorded (another CPU had the slot) is taken on
	 * at its client's first data. */
	if ((hs.flags & SLUICE_HS_SERVER_ISN) && seq_in_window(ack, hs.client_isn + 1))
		promote(&at, key, &hs, now, SLUICE_FLOW_OPEN);
}

/* 1 when an http response segment is an interim (1xx) response other than 101: it does not
 * end the request. A 101 does, and the flow is opaque from then on (another protocol). Read
 * only while the flow's word has a request open, so a response costs the read once. */
static __always_inline int interim_response(struct __sk_buff *skb, const struct pkt *p,
					    struct sluice_flow *f)
{
	int status;

	if ((READ_ONCE(f->req_active) & SLUICE_OWN_STATE) != SLUICE_OWN_ACTIVE)
		return 0;
	status = response_status(skb, p);
	if (status >= 100 && status <= 199 && status != 101)
		return 1;
	/* The final answer to a CONNECT opens a tunnel only when it is a 2xx (RFC 9110 9.3.6);
	 * any other leaves the connection http, its next requests decided as any. */
	if (f->flags & SLUICE_FLOW_CONNECT_ASKED)
		f->flags = (f->flags & ~SLUICE_FLOW_CONNECT_ASKED) |
			   (status >= 200 && status <= 299 ? SLUICE_FLOW_OPAQUE : 0);
	if (status == 101)
		f->flags |= SLUICE_FLOW_OPAQUE;
	return 0;
}

static __always_inline int tc_egress(struct __sk_buff *skb)
{
	struct sluice_flow_key key SLOT_KEY_ALIGNED;
	struct sluice_pkt_stats *ps;
	struct sluice_flow *f;
	struct own_units u;
	const struct sluice_service *sc;
	struct pkt p;
	__u64 now;
	int svc, settled;

	if (tc_parse(skb, &p) != PKT_TCP)
		return TC_ACT_OK;
	svc = service_of(p.tcp->source, &p, 0);
	if (svc < 0)
		return TC_ACT_OK;
	/* A bare ACK ends nothing and starts nothing; segments with data keep flows fresh. */
	if (!p.payload_len && !p.tcp->syn && !p.tcp->rst && !p.tcp->fin)
		return TC_ACT_OK;
	if ((ps = pkt_counters()))
		ps->service++;
	/* only http sockets hold a memo: a tcp service's segments, and control segments, do not
	 * ask for one (nor look the service up) */
	if (plain_data(&p) && (sc = bpf_map_lookup_elem(&services, &svc)) &&
	    sc->protocol == SLUICE_PROTO_HTTP && response_data_settled(skb, &p))
		return TC_ACT_OK;

	flow_key_of(&p, 0, &key);
	f = bpf_map_lookup_elem(&flows, &key);
	if (!f) {
		server_handshake(&p, &key, bpf_ktime_get_ns());
		return TC_ACT_OK;
	}
	/* The exact clock only where a time is recorded (a latency sample, a promotion);
	 * last-seen needs seconds, which the coarse clock gives for less. */
	now = 0;
	if (p.tcp->syn) {
		/* A SYN-ACK for a new ISN on a live flow: the server accepted a new connection
		 * on this 4-tuple, so the old one is over (only the server can say so). */
		if (p.tcp->ack && bpf_ntohl(p.tcp->ack_seq) != f->syn_seq + 1 &&
		    hs_holds(&key)) {
			end_flow(&key, 0, 0, 0);
			server_handshake(&p, &key, bpf_ktime_get_ns());
		}
		return TC_ACT_OK;
	}
	/* The reference for the client's FIN/RST and for where its next request starts. */
	if (p.tcp->ack)
		advance_by_server(f, bpf_ntohl(p.tcp->ack_seq));
	/* A response that carries FIN (Connection: close) still ends its request first; so does
	 * a tcp reply its turn. */
	settled = 0;
	if (!p.payload_len)
		;
	else if (!f->tracked_inflight && interim_response(skb, &p, f))
		; /* 100 Continue, 102, 103: the final response is still to come */
	else {
		if ((!f->tracked_inflight || server_data_new(f, &p)) && own_take_open(f, &u)) {
			/* what is given back is what the word held, whatever this path expected
			 * (the plain read in own_take_open first: response data with no request
			 * open, the common case, takes no locked instruction) */
			if (u.turn)
				end_turn(f, &u, now = bpf_ktime_get_ns());
			else
				end_request(skb, &p, f, &key, &u, now = bpf_ktime_get_ns());
		}
		/* Nothing open on an http flow now. A tcp flow's segments all go the whole way:
		 * its turn ends at the server's new data, which a retransmit carrying a new ack
		 * is not, and only each segment's seq keeps that mark. */
		settled = !f->tracked_inflight;
	}
	if (p.tcp->rst || p.tcp->fin) {
		end_flow(&key, p.tcp->rst, 1, 0);
		return TC_ACT_OK;
	}
	if (f->state != SLUICE_FLOW_OPEN)
		f->state = SLUICE_FLOW_OPEN; /* the server speaks on it: its socket is established */
	touch_flow(f, now ? now : coarse_now());
	if (settled)
		settle_response_data(skb, &p);
	return TC_ACT_OK;
}

/* More bytes of an open http request (the rest of its head, its body) before the server
 * answered: the request's clock starts again from them. Its latency sample is then the
 * server's time after the client's last bytes, not the client's own pace: a client that sends
 * the first bytes of its requests early and the rest late would otherwise make slow samples
 * while the backend idles, and the adaptive limit they steer binds every class. The start
 * moves to the first such segment of each later tick of the coarse clock (now, which the
 * caller has for last-seen): the exact clock is read only then, at most once a tick and
 * request, and segments later in the same tick (a burst: microseconds) leave it. By
 * compare-and-swap, so a start the next request wrote meanwhile is not put back. */
static __always_inline void request_bytes_arrived(struct sluice_flow *f, __u64 now)
{
	__u32 w = READ_ONCE(f->req_active);
	__u64 start;

	if ((w & (SLUICE_OWN_STATE | SLUICE_OWN_TURN)) != SLUICE_OWN_ACTIVE)
		return;
	start = READ_ONCE(f->req_start_ns);
	if (start && (__s64)(now - start) > 0)
		__sync_val_compare_and_swap(&f->req_start_ns, start, bpf_ktime_get_ns());
}

/* An admitted request becomes the flow's: its token (service, class, client count) goes into
 * the ownership word by compare-and-swap from DECIDING. Should the flow have ended meanwhile
 * (a server FIN or RST, the GC, while this CPU decided: the word is DEAD, or the entry was
 * even reused), the swap fails and the decider gives back what it took itself. */
static __always_inline void commit_request(struct sluice_flow *f, struct sluice_flow_key *key,
					   __u32 svc, __u32 cls, __u8 counted, __u32 seq,
					   __u32 end, __u64 now, struct sluice_class_stats *st,
					   __u32 gate)
{
	__u32 w = SLUICE_OWN_ACTIVE | sluice_own_tag(svc, cls) | (counted ? SLUICE_OWN_CLIENT : 0);

	/* Written before the swap: whoever ends the request reads them after. */
	f->req_seq = seq;
	f->req_start_ns = now;
	f->client_next = end;
	/* The read gate armed: the request waits unread until the server reads it. */
	if (gate) {
		w |= SLUICE_OWN_UNREAD;
		unread_add(svc, cls, now);
	}
	SLUICE_TEST_HOOK(SLUICE_HOOK_DECIDING, key);
	if (__sync_val_compare_and_swap(&f->req_active, SLUICE_OWN_DECIDING, w) ==
	    SLUICE_OWN_DECIDING) {
		f->class = cls; /* a DECIDING word is an http flow's: never a tcp connection's */
		own_bump(svc);
		return;
	}
	if (gate)
		unread_take_off(svc, cls);
	release_unit(svc, cls);
	if (counted)
		release_client(svc, key->client_addr);
	own_bump(svc);
	st->completed++; /* admitted, and over with its connection */
}

/* What the source rules say of a request's client: the flow's cached answer when it counts
 * (made for this service, the flow admitted in a second after the service's rules stamp: see
 * sluice_flow._pad), else the source rule from the trie (trust_from then looked up only if a
 * rule needs it). Read after this CPU claimed the flow's word: an entry deleted and reused for
 * another flow under this pointer meanwhile does not hold DECIDING (a new entry starts idle,
 * and a request of its own needs its own handshake and segment first), so its answer is not
 * taken for this client's. */
static __always_inline void request_source(struct sluice_flow *f, const struct sluice_service *sc,
					   __u32 svc, const struct sluice_flow_key *key,
					   struct src_answer *a)
{
	struct sluice_src_key k = { .prefixlen = 32 + 128, .svc = svc };
	__u64 admitted = READ_ONCE(f->admitted_ns);
	__u8 c = READ_ONCE(f->_pad);

	if ((c & SLUICE_SRC_CACHED) && READ_ONCE(f->svc) == svc &&
	    sluice_rules_second(admitted) > sc->_pad1 &&
	    READ_ONCE(f->req_active) == SLUICE_OWN_DECIDING) {
		source_answer_of_cache(c, a);
		return;
	}
	__builtin_memcpy(k.addr, key->client_addr, 16);
	source_rule_at(&k, a);
}

/* "GET " and "POST " read in place: what request_token would say of them (a start, nothing
 * skipped, no CONNECT) without its call, whose return costs the most on a host whose returns
 * go through a mitigation thunk. 0 for anything else, request_token then reads it. */
static __always_inline __u32 common_method(struct __sk_buff *skb, const struct pkt *p)
{
	__u8 *b = payload_in_place(skb, p, 5);

	if (!b)
		return 0;
	if (b[0] == 'G' && b[1] == 'E' && b[2] == 'T' && b[3] == ' ')
		return TOKEN_START;
	if (b[0] == 'P' && b[1] == 'O' && b[2] == 'S' && b[3] == 'T' && b[4] == ' ')
		return TOKEN_START;
	return 0;
}

/* Start of a request on an http service: classify, admit, or answer 429/503. A request starts
 * only on a flow whose handshake sluice saw complete, at the sequence number the client is at
 * (after the handshake, or after the previous request's bytes), with a method token: data
 * anywhere else (no handshake, a body, a retransmit, a forged segment) starts nothing. */
static __always_inline int start_request(struct __sk_buff *skb, struct pkt *p, __u32 svc,
					 const struct sluice_service *sc)
{
	struct sluice_flow_key key;
	struct sluice_flow *f;
	struct sluice_class_stats *st;
	struct sluice_pkt_stats *ps;
	struct class_pick pick;
	struct src_answer src;
	__u32 seq = bpf_ntohl(p->tcp->seq), end = seq + p->payload_len, kind, rk;
	__u32 tok, vflags = 0, gate = 0;
	int gathered, more = 0;
	__u64 now;
	int reason = 0, rc;

	flow_key_of(p, 1, &key);
	f = bpf_map_lookup_elem(&flows, &key);
	/* Only a request's start takes a connection on: not the middle of a body being
	 * uploaded at the attach (a chunk that happens to read like a method would then be
	 * decided as a request), not a tunnel's bytes; and junk costs no socket lookup. */
	if (!f && (request_token(skb, p->payload_off, p->payload_len, 1) & TOKEN_START))
		f = adopt_established(skb, p, &key, svc, sc);
	if (!f)
		return TC_ACT_OK; /* no connection the stack holds: no flow, no slot, no decision */
	/* A resend of bytes the entry already has the client past, while its word is taken (a
	 * request open, being decided, or the flow ended): it can start nothing (a request
	 * starts only where the client is, on an idle word) and moves nothing, so neither the
	 * memos nor the clock are worth reading. An entry behind the client (a memo holds the
	 * rest) only sends more segments the whole way. A resend on an idle word goes on: it
	 * may be the retry of an answered request, which is counted. */
	if (READ_ONCE(f->req_active) && (__s32)(end - READ_ONCE(f->client_next)) <= 0)
		return TC_ACT_OK;
	gathered = client_memo_write_back(&key, f) || client_memo_gather(&key, f, seq, end);
	/* Last-seen needs seconds (a client uploading a long body is not idle): the coarse
	 * clock does for any other segment; a request that is decided reads the exact one
	 * anyway and touches with it (one clock, not two). */
	if (f->flags & SLUICE_FLOW_OPAQUE)
		goto not_a_start; /* a tunnel or an upgraded protocol: nothing to decide */
	if (f->req_active)
		goto not_a_start; /* more of the request in flight (body, pipelining) */
	/* Not where the client is: a start only when it lies behind it (see below). */
	if (seq != f->client_next && !seq_behind(seq, f->client_next))
		goto not_at_client;
	tok = common_method(skb, p) ?: request_token(skb, p->payload_off, p->payload_len, 0);
	if (!(tok & TOKEN_START))
		goto not_a_start;
	/* Behind where sluice followed the client: bytes sluice saw may never have reached the
	 * server (its stack throws away what carries a bad checksum or acknowledges data never
	 * sent, after TC ingress). A client that sent such bytes first would have all its
	 * requests pass undecided; so a start there counts when it is exactly the byte the
	 * server's stack expects next (which a blind forger does not know). Anything else
	 * there is a resend of bytes the server has. */
	if (seq != f->client_next && !established_at(skb, &key, seq))
		goto not_at_client;
	/* Claim the decision: two segments of one new request on two CPUs must not both take a
	 * slot (DECIDING holds nothing, so nothing ends a request before it is admitted). */
	if (__sync_val_compare_and_swap(&f->req_active, 0, SLUICE_OWN_DECIDING) != 0)
		goto undecided;

	now = bpf_ktime_get_ns();
	touch_flow(f, now);
	request_source(f, sc, svc, &key, &src);
	pick = classify_request(skb, sc, svc, p, tok >> TOKEN_SKIP_SHIFT, &src);
	st = class_stats_of(svc, pick.class);
	if (!st) {
		__sync_val_compare_and_swap(&f->req_active, SLUICE_OWN_DECIDING, 0);
		return TC_ACT_OK;
	}
	st->arrivals++;
	http_learn_class(svc, key.client_addr, pick.class, READ_ONCE(f->flags), now);
	if (http_conn_over_cap(svc, READ_ONCE(f->flags), pick.class, now)) {
		reason = SLUICE_REJ_REASONS; /* counted in conn_cap */
		goto refuse;
	}
	if (admit_unit(svc, pick.class, now, st, &reason, 1, &vflags)) {
		__u8 counted;

		gate = vflags & SLUICE_VERDICT_READ_GATE;
		if (!admit_client(sc, svc, key.client_addr, now, &counted, 1)) {
			release_unit(svc, pick.class);
			reason = SLUICE_REJ_CLIENT_LIMIT;
			goto refuse;
		}
		st->admitted++;
		if (tok & TOKEN_CONNECT)
			f->flags |= SLUICE_FLOW_CONNECT_ASKED; /* a tunnel if its answer is a 2xx */
		commit_request(f, &key, svc, pick.class & 3, counted, seq, end, now, st, gate);
		return TC_ACT_OK;
	}
refuse:

	/* The breaker refusing (open, or a half-open step not drawn) says 503; shedding says 429. */
	kind = reason == SLUICE_REJ_BREAKER ? SLUICE_REPLY_503 : SLUICE_REPLY_429;
	rk = svc * 2 + kind;
	ps = pkt_counters();
	/* Only a flow the server spoke on can have an answer still on its way (the cost of the
	 * socket lookup is not paid at a connection's first request). */
	if (READ_ONCE(f->state) == SLUICE_FLOW_OPEN &&
	    answer_outstanding(skb, &key, bpf_ntohl(p->tcp->ack_seq)))
		goto admit_untracked;
	rc = answer_refused_request(skb, p, rk);
	if (rc == ANSWER_NOT_SENT) {
		/* Could not answer cleanly: on doubt, admit (untracked, counted as admitted). */
		if (ps)
			ps->reply_failed++;
admit_untracked:
		st->admitted++;
		st->untracked++;
		f->client_next = end;
		/* give up the claim: the request holds no slot */
		__sync_val_compare_and_swap(&f->req_active, SLUICE_OWN_DECIDING, 0);
		return TC_ACT_OK;
	}
	if (reason >= 0 && reason < SLUICE_REJ_REASONS)
		st->rejected[reason]++;
	else if (reason == SLUICE_REJ_REASONS)
		count_conn_cap_refusal(svc, READ_ONCE(f->flags));
	if (ps && rc == ANSWER_SENT)
		ps->reply_sent++;
	/* The connection is closed on both sides now (http flows hold no connection slot): the
	 * flow ends like any other, through its ownership word (still DECIDING: it holds
	 * nothing). */
	end_flow(&key, 0, 0, 0);
	return rc == ANSWER_SENT ? TC_ACT_OK : TC_ACT_SHOT;
not_at_client:
	if (!f->req_active && f->req_seq == seq && f->req_start_ns) {
		/* The client resent a request that was already answered: a retry. */
		st = class_stats_of(svc, f->class);
		if (st)
			st->retransmits++;
	}
not_a_start:
	more = advance_by_client(f, seq, end);
undecided:
	now = coarse_now();
	if (more)
		request_bytes_arrived(f, now);
	touch_flow(f, now);
	client_memo_take(&key, f, gathered);
	return TC_ACT_OK;
}

/* Client data on a tcp service. Only data that carries on from where the client is (not a
 * retransmit, not ahead of a gap, not a blind forger's) counts: it moves the client's mark,
 * and when no turn is open (the server spoke last, or nobody yet) it starts one and the flow
 * is busy. More client data before the reply belongs to the same turn. */
static __always_inline int tcp_client_data(struct __sk_buff *skb, const struct pkt *p,
					   __u32 sc_svc, const struct sluice_service *sc)
{
	struct sluice_flow_key key;
	struct sluice_flow *f;
	__u32 seq = bpf_ntohl(p->tcp->seq), svc, cls, w, nw;
	__u64 now, syn_ns;

	flow_key_of(p, 1, &key);
	f = bpf_map_lookup_elem(&flows, &key);
	if (!f)
		f = adopt_established(skb, p, &key, sc_svc, sc);
	if (!f || !f->tracked_inflight)
		return TC_ACT_OK; /* no handshake seen, or untracked: nothing to measure */
	w = READ_ONCE(f->req_active);
	if (!advance_by_client(f, seq, seq + p->payload_len)) {
		/* Behind where sluice followed the client, while no turn is open: bytes sluice saw
		 * may never have reached the server (its stack throws away what carries a bad
		 * checksum or acknowledges data never sent, after TC ingress), and a client that
		 * sent such bytes first would have its turns out of sight. Data there carries on
		 * from where the client is when it is exactly the byte the server's stack expects
		 * next (which a blind forger does not know); anything else is a resend. */
		if ((w & SLUICE_OWN_STATE) != SLUICE_OWN_IDLE ||
		    !seq_behind(seq, f->client_next) || !established_at(skb, &key, seq))
			return TC_ACT_OK;
		f->client_next = seq + p->payload_len;
	}
	if ((w & SLUICE_OWN_STATE) != SLUICE_OWN_IDLE)
		return TC_ACT_OK;
	if (w & SLUICE_OWN_TAGGED)
		nw = w & ~SLUICE_OWN_PENDING;
	else /* an older layout's flow: its connection moves into the word with its first turn */
		nw = sluice_own_tag(f->svc, f->class) | SLUICE_OWN_CONN |
		     (f->client_counted ? SLUICE_OWN_CLIENT : 0);
	svc = nw >> SLUICE_OWN_SVC_SHIFT;
	cls = (nw >> SLUICE_OWN_CLASS_SHIFT) & 3;
	if (svc >= SLUICE_MAX_SERVICES)
		return TC_ACT_OK;
	/* The start is written before the turn opens: whoever ends it reads it after. */
	now = bpf_ktime_get_ns();
	f->req_start_ns = now;
	syn_ns = f->admitted_ns; /* read while the entry is surely this flow's: before the swap */
	SLUICE_TEST_HOOK(SLUICE_HOOK_TURN, &key);
	/* The turn is the word's from the swap on: whoever takes it out (the server's reply, the
	 * flow's end) gives back this busy count, even on an entry ended and reused meanwhile. */
	if (__sync_val_compare_and_swap(&f->req_active, w, nw | SLUICE_OWN_ACTIVE | SLUICE_OWN_TURN) != w)
		return TC_ACT_OK;
	count_unit(&busy, svc, cls, 1);
	if (w & SLUICE_OWN_PENDING) /* busy now: no longer counted as fresh */
		halfopen_fresh_done(svc, syn_ns, now);
	own_bump(svc);
	return TC_ACT_OK;
}

/* A SYN XDP refused and marked for TC (leave_rst_to_tc): the same RST XDP would send, from
 * here, where the skb still carries the VLAN tag the NIC stripped; redirected out of the
 * device it came in on, it leaves with that tag. */
static __always_inline int marked_rst_at_tc(struct __sk_buff *skb)
{
	__u32 *meta = (void *)(long)skb->data_meta;

	return (void *)(meta + 1) <= (void *)(long)skb->data && *meta == SLUICE_META_RST_AT_TC;
}

static __always_inline int rst_at_tc(struct __sk_buff *skb, struct pkt *p)
{
	struct sluice_pkt_stats *ps = pkt_counters();
	__u32 len;

	len = build_syn_reset(p, (void *)(long)skb->data_end);
	if (!len || bpf_skb_change_tail(skb, len, 0)) {
		if (ps)
			ps->reply_failed++;
		return TC_ACT_SHOT;
	}
	if (ps)
		ps->rst_sent++;
	return bpf_redirect(skb->ifindex, 0);
}

/* Generic XDP that had to copy a frame first (a cloned, paged or headroom-short skb: most
 * are) leaves the copy with a MAC header length of 0, so TC ingress sees it from its IP header
 * while its Ethernet header lies just before, out of view: the parse then finds no IPv4 or
 * IPv6 at all (every request passed undecided), or worse, reads the IP header as Ethernet.
 * Such a frame is told first by what is at data, in direct reads: an IP version where a MAC
 * address would start, the one the kernel parsed, and an IP length within the frame. A frame
 * whose MAC header is in view passes that only when its destination MAC happens to read so
 * (a sixteenth of MACs by their first byte, then a length below the frame's). Then
 * exactly: the bytes at the MAC header differ from those at data (they are one and the same
 * in every other frame), data is where the network header is, and the MAC header's type
 * names the frame's protocol. Its 14 bytes are put back in view (bpf_skb_change_head pushes
 * them again and makes them the MAC header, as the kernel had them before the copy; the same
 * bytes are written back): from there every path reads it like any other frame, and the hook,
 * which pulls what is then the MAC header's length, hands the stack the frame as it came.
 * 1 when done, 0 when the frame is not such a one (or could not be put right: it goes on as it
 * came), -1 when its header was pushed but not written back (it must not go on with a zeroed
 * MAC header, which a bridge or macvlan above would read). */
static __always_inline int show_lost_mac_header(struct __sk_buff *skb)
{
	__u8 *b = (void *)(long)skb->data;
	__u8 eth[ETH_HLEN], at[ETH_HLEN], net[4];
	__u32 ip_len, len = skb->len;
	__u16 proto;
	int differ = 0;

	if ((void *)(b + 6) > (void *)(long)skb->data_end)
		return 0;
	if (b[0] >> 4 == 4 && skb->protocol == bpf_htons(ETH_P_IP))
		ip_len = (__u32)b[2] << 8 | b[3];
	else if (b[0] >> 4 == 6 && skb->protocol == bpf_htons(ETH_P_IPV6))
		ip_len = ((__u32)b[4] << 8 | b[5]) + 40;
	else
		return 0;
	/* The IP length, when it is one (0 is BIG TCP's "the rest of the frame"), fits the
	 * frame; bytes after it (padding, a trailer the stack trims) do not count against it. */
	if (ip_len > len)
		return 0;
	if (bpf_skb_load_bytes_relative(skb, 0, eth, ETH_HLEN, BPF_HDR_START_MAC) ||
	    bpf_skb_load_bytes_relative(skb, 0, net, sizeof(net), BPF_HDR_START_NET) ||
	    bpf_skb_load_bytes(skb, 0, at, ETH_HLEN))
		return 0;
#pragma unroll
	for (int i = 0; i < ETH_HLEN; i++)
		differ |= eth[i] ^ at[i];
	__builtin_memcpy(&proto, eth + 12, sizeof(proto));
	if (!differ || proto != skb->protocol || net[0] != at[0] || net[1] != at[1] ||
	    net[2] != at[2] || net[3] != at[3])
		return 0;
	if (bpf_skb_change_head(skb, ETH_HLEN, 0))
		return 0;
	return bpf_skb_store_bytes(skb, 0, eth, ETH_HLEN, 0) ? -1 : 1;
}

static __always_inline int tc_ingress(struct __sk_buff *skb)
{
	const struct sluice_service *sc;
	enum pkt_kind kind;
	struct pkt p;
	int svc;

	if (show_lost_mac_header(skb) < 0) {
		/* not seen to happen (the head was just made writable): counted as a frame
		 * sluice could not read, and dropped rather than passed with a zeroed header */
		struct sluice_pkt_stats *ps = pkt_counters();

		if (ps)
			ps->malformed++;
		return TC_ACT_SHOT;
	}
	kind = tc_parse(skb, &p);
	if (kind == PKT_DEEP)
		return TC_ACT_SHOT; /* as XDP does; reached without it, or when the headers could
				     * not be pulled in */
	if (kind != PKT_TCP)
		return TC_ACT_OK; /* malformed frames are counted once, by XDP */
	svc = service_of(p.tcp->dest, &p, 1);
	if (svc < 0)
		return TC_ACT_OK;
	if (p.tcp->syn && !p.tcp->ack) {
		if (marked_rst_at_tc(skb))
			return rst_at_tc(skb, &p);
		client_memo_forget(&p); /* a new connection: no earlier one's memo answers it */
	}
	/* Only data can start a request or a turn: bare ACKs and control segments stop before
	 * any map. */
	if (!p.payload_len || p.tcp->syn || p.tcp->rst)
		return TC_ACT_OK;
	sc = bpf_map_lookup_elem(&services, &svc);
	if (!sc)
		return TC_ACT_OK;
	if (sc->protocol != SLUICE_PROTO_HTTP)
		return tcp_client_data(skb, &p, svc, sc);
	if (client_data_followed(skb, &p))
		return TC_ACT_OK; /* more of what this CPU follows: no request can start in it */
	return start_request(skb, &p, svc, sc);
}

/* What sluice lets through goes on to the hook's next filter (TC_ACT_UNSPEC), as though sluice
 * were not there: another clsact filter on the same hook (a counter, a firewall, a second
 * shaper) still runs after it. With no filter after it, UNSPEC passes the packet like OK. */
static __always_inline int tc_next(int rc)
{
	return rc == TC_ACT_OK ? TC_ACT_UNSPEC : rc;
}

SEC("tc")
int sluice_tc_egress(struct __sk_buff *skb)
{
	return tc_next(tc_egress(skb));
}

SEC("tc")
int sluice_tc_ingress(struct __sk_buff *skb)
{
	return tc_next(tc_ingress(skb));
}

/* The flow GC's hand in the data path: ends one flow whose end was never seen, through the
 * same ownership word as a FIN (end_flow), so a request or turn that starts on it while the
 * GC decides is either ended with it or never taken. Run by sluiced with BPF_PROG_TEST_RUN. */
SEC("syscall")
int sluice_reclaim(struct sluice_reclaim *a)
{
	struct sluice_flow_key key;
	struct sluice_flow *f;
	__u64 now = a->now_ns;

	__builtin_memcpy(&key, &a->key, sizeof(key));
	a->result = SLUICE_RECLAIM_KEPT;
	f = bpf_map_lookup_elem(&flows, &key);
	if (!f)
		return 0;
	if ((READ_ONCE(f->req_active) & (SLUICE_OWN_STATE | SLUICE_OWN_ORPHAN)) ==
	    (SLUICE_OWN_DEAD | SLUICE_OWN_ORPHAN)) {
		/* its killer could not delete it: nobody else will */
		if (bpf_map_delete_elem(&flows, &key) == 0)
			a->result = SLUICE_RECLAIM_ORPHAN;
		return 0;
	}
	if (!((f->state == SLUICE_FLOW_SYN && now > f->admitted_ns + a->syn_timeout_ns) ||
	      now > f->last_seen_ns + a->idle_timeout_ns))
		return 0; /* it spoke since the GC's scan */
	if (end_flow(&key, 0, 0, 0))
		a->result = SLUICE_RECLAIM_ENDED;
	return 0;
}

/* One slot for sluice_pending_requests: a candidate when its request's generation is above
 * what the controller's state acknowledges (or that state cannot be read: on doubt, report). */
static long pending_request_at(__u32 i, struct sluice_pending_requests *a)
{
	const struct sluice_ctl_request *rq;
	const struct sluice_ctl_slot *st;
	__u32 k = a->first + i;

	rq = bpf_map_lookup_elem(&ctl_requests, &k);
	if (!rq)
		return 1; /* past the map's end */
	a->scanned++;
	if (!rq->reset_gen)
		return 0;
	st = bpf_map_lookup_elem(&ctl_state, &k);
	if (st && rq->reset_gen <= st->reset_ack)
		return 0;
	if (a->found < SLUICE_PENDING_MAX)
		a->slot[a->found & (SLUICE_PENDING_MAX - 1)] = k;
	a->found++;
	return 0;
}

/* Which request slots sluiced must read this tick (struct sluice_pending_requests). */
SEC("syscall")
int sluice_pending_requests(struct sluice_pending_requests *arg)
{
	struct sluice_pending_requests a;

	__builtin_memset(&a, 0, sizeof(a));
	a.first = arg->first;
	a.n = arg->n;
	bpf_loop(a.n, pending_request_at, &a, 0);
	arg->found = a.found;
	arg->scanned = a.scanned;
	__builtin_memcpy(arg->slot, a.slot, sizeof(a.slot));
	return 0;
}

/* One entry of `busy` for sluice_copy_counts. Each count is read whole (an aligned 8-byte
 * load), as a lookup from user space reads it. */
static long copy_busy_at(__u32 i, struct sluice_copy_counts *a)
{
	__u32 k = a->first + i;
	const struct sluice_inflight *src = bpf_map_lookup_elem(&busy, &k);
	struct sluice_inflight *dst = bpf_map_lookup_elem(&busy_copy, &k);

	if (!src || !dst)
		return 1;
	dst->total = READ_ONCE(src->total);
#pragma unroll
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		dst->cls[c] = READ_ONCE(src->cls[c]);
	a->copied++;
	return 0;
}


struct stripes_of {
	__u32 svc;
	struct sluice_inflight *sum;
	struct sluice_inflight_est *est;
};

/* One CPU's stripe of a service into its sum, as user space adds them (the total too), and its
 * unpublished change into the in-flight estimate (fold_stripe). */
static long add_stripe(__u32 cpu, struct stripes_of *s)
{
	const struct sluice_inflight *x = bpf_map_lookup_percpu_elem(&inflight_pcpu, &s->svc, cpu);
	struct sluice_inflight *pub;

	if (!x)
		return 1; /* past the last CPU */
#pragma unroll
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		__s64 v = READ_ONCE(x->cls[c]);

		s->sum->cls[c] += v;
		s->sum->total += v;
	}
	pub = bpf_map_lookup_percpu_elem(&inflight_pub, &s->svc, cpu);
	if (pub && s->est)
		fold_stripe(x, pub, s->est);
	return 0;
}

/* One service's in-flight for sluice_copy_counts: the shared count and every CPU's stripe. */
static long copy_inflight_at(__u32 i, struct sluice_copy_counts *a)
{
	__u32 k = a->first + i;
	const struct sluice_inflight *src = bpf_map_lookup_elem(&inflight, &k);
	struct sluice_inflight *dst = bpf_map_lookup_elem(&inflight_copy, &k), sum;
	struct stripes_of s = { .svc = k, .sum = &sum, .est = bpf_map_lookup_elem(&inflight_est, &k) };

	if (!src || !dst)
		return 1;
	sum.total = READ_ONCE(src->total);
#pragma unroll
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		sum.cls[c] = READ_ONCE(src->cls[c]);
	bpf_loop(SLUICE_MAX_CPUS, add_stripe, &s, 0);
	*dst = sum;
	a->copied++;
	return 0;
}

/* The tick's read of `busy` or of http services' in-flight (struct sluice_copy_counts). */
SEC("syscall")
int sluice_copy_counts(struct sluice_copy_counts *arg)
{
	struct sluice_copy_counts a = { .first = arg->first, .n = arg->n, .what = arg->what };

	if (a.what == SLUICE_COPY_BUSY)
		bpf_loop(a.n, copy_busy_at, &a, 0);
	else if (a.what == SLUICE_COPY_INFLIGHT)
		bpf_loop(a.n, copy_inflight_at, &a, 0);
	arg->copied = a.copied;
	return 0;
}

/* Set the thresholds of one slot's open-connection cap (struct sluice_set_conn_cap), leaving
 * its refusal counts to the atomics that move them. */
SEC("syscall")
int sluice_set_conn_cap(struct sluice_set_conn_cap *arg)
{
	__u32 svc = arg->svc;
	struct sluice_conn_cap *cc = bpf_map_lookup_elem(&conn_cap, &svc);

	arg->done = 0;
	if (!cc)
		return 0;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		cc->threshold[c] = arg->threshold[c];
	arg->done = 1;
	return 0;
}

/* Fill the in-flight estimate and turn it on (struct sluice_publish_stripes): sluiced runs it
 * once after attaching. */
SEC("syscall")
int sluice_publish_stripes(struct sluice_publish_stripes *arg)
{
	return publish_stripes(arg);
}
