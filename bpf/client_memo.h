/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* TC ingress's memo of the last http client it followed on this CPU.
 *
 * Most client data on an http connection is not a request's start: the body of an upload, the
 * rest of a long header, a tunnel's bytes. All TC ingress does with such a segment is move the
 * flow's client_next (where a next request must start) and keep its last-seen fresh, and the
 * flow lookup that needs is most of what the segment costs. A connection's segments come in on
 * one CPU (the NIC hashes the 4-tuple to a queue), one after another: so this CPU remembers
 * where the client it last followed is, and a segment of that client that carries on from
 * there (or is the last one again) moves only the memo, not the flow entry.
 *
 * What keeps the flow entry right:
 * - Only a segment whose first byte can begin no request is answered here (not a token
 *   character, not CR or LF): a segment that might start one always takes the whole way,
 *   and that way first writes what the memo followed back into the entry: the start is
 *   checked against where the client really is.
 * - The memo is taken over by another client's segment only after it is written back (one
 *   more flow lookup, only for a memo that followed something).
 * - It is written back at least every SLUICE_MEMO_BYTES of client data and every
 *   SLUICE_MEMO_JIFFIES: the entry's client_next stays within the window a client FIN or RST
 *   is checked against at XDP (SLUICE_SEQ_WINDOW, four times as much), and its last-seen as
 *   fresh as the whole way keeps it. While the flow has a request open, every jiffy: the
 *   whole way moves the request's start to its latest bytes.
 * - A write-back goes only into the entry the memo was taken from (its admission time tells a
 *   later connection on the same 4-tuple from it), and only while the entry still lies
 *   between where the memo took it and where the memo got to (forwards, and never from a
 *   memo the entry has moved past since).
 * - A new connection's SYN (at TC ingress, on the CPU its data will meet, RPS or not) clears
 *   this CPU's memo of the 4-tuple, after writing it back should that connection's entry
 *   still stand (a SYN on a live 4-tuple may be anyone's), so the memo never answers for a
 *   later connection's bytes (one taken on at TC ingress, adopt_established, writes back
 *   first and so clears it too).
 * Each CPU has its own memo (a per-CPU array), so no other CPU writes it. A connection whose
 * segments move to another CPU (RFS following a thread, the queue mapping changed, a client on
 * a veth that moves itself) finds its entry behind, where the old CPU's memo left it: its
 * first segment there lies ahead of the entry, and a segment ahead by at most
 * SLUICE_MEMO_BYTES reads every CPU's memo of the 4-tuple (bpf_map_lookup_percpu_elem) and
 * writes back what they followed, so the segment carries on from there (client_memo_gather
 * says when, and what bounds its cost). Not pinned: at a new
 * program, what the old one had followed and not written back (at most SLUICE_MEMO_BYTES per
 * CPU, one connection per CPU) is made up only by the server's next data (its ack), like a
 * segment ahead of a gap: until then that connection's next request start is not seen as
 * one, and its client's FIN or RST counts only within the window of where the entry is. */
#ifndef SLUICE_CLIENT_MEMO_H
#define SLUICE_CLIENT_MEMO_H

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_client_memo);
} client_memo SEC(".maps");

static __always_inline struct sluice_client_memo *client_memo_here(void)
{
	return only_entry(&client_memo);
}

static __always_inline int same_flow_key(const struct sluice_flow_key *a,
					 const struct sluice_flow_key *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;
	__u32 d = 0;

#pragma unroll
	for (int i = 0; i < (int)(sizeof(*a) / 4); i++)
		d |= x[i] ^ y[i];
	return !d;
}

/* 1 when memo m is of the packet's flow (a client segment's), read in place: no key is built
 * on TC ingress's stack, which is near its bound. The key: the client's address (v4-mapped
 * for IPv4), its port, the service port, the local address. */
static __always_inline int memo_is_of(const struct sluice_client_memo *m, const struct pkt *p)
{
	const __u32 *k = (const __u32 *)&m->key;

	if (m->key.client_port != p->tcp->source || m->key.service_port != p->tcp->dest)
		return 0;
	if (!p->v6)
		return !k[0] && !k[1] && k[2] == bpf_htonl(0xffff) && k[3] == p->ip4->saddr &&
		       !k[5] && !k[6] && k[7] == bpf_htonl(0xffff) && k[8] == p->ip4->daddr;
	const __u32 *a = p->ip6->saddr.in6_u.u6_addr32, *b = p->ip6->daddr.in6_u.u6_addr32;

	return k[0] == a[0] && k[1] == a[1] && k[2] == a[2] && k[3] == a[3] &&
	       k[5] == b[0] && k[6] == b[1] && k[7] == b[2] && k[8] == b[3];
}

/* The payload's first n bytes where the program may read them in place, or NULL (not in the
 * linear part: the caller loads them). The offset is bounded below 64 KiB with room for the
 * bytes, or the verifier grants the read no range (headers end far below that). */
static __always_inline __u8 *payload_in_place(struct __sk_buff *skb, const struct pkt *p,
					      __u32 n)
{
	__u32 off = p->payload_off;
	__u8 *b;

	if (off > 0x7fff || p->payload_len < n)
		return NULL;
	b = (void *)(long)skb->data + off;
	if ((void *)(b + n) > (void *)(long)skb->data_end)
		return NULL;
	return b;
}

/* 1 when the segment's first byte can begin no request: not a token character, not a blank
 * line's (0 too when it cannot be read). */
static __always_inline int no_method_byte(struct __sk_buff *skb, const struct pkt *p)
{
	__u8 *b = payload_in_place(skb, p, 1), c;

	if (b)
		c = *b;
	else if (bpf_skb_load_bytes(skb, p->payload_off, &c, 1))
		return 0;
	return !method_char(c, 0) && c != '\r' && c != '\n';
}

/* 1 when the segment is answered by this CPU's memo: plain client data (no SYN, FIN or RST)
 * whose first byte can begin no request, carrying on from where the memo's client is or
 * resending its last bytes, young and near enough its last write-back. The memo then moves;
 * the flow entry is not looked up. */
static __always_inline int client_data_followed(struct __sk_buff *skb, const struct pkt *p)
{
	struct sluice_client_memo *m;
	__u32 seq, end;
	__u64 j;

	if (!plain_data(p))
		return 0;
	m = client_memo_here();
	if (!m || !m->valid)
		return 0;
	seq = bpf_ntohl(p->tcp->seq);
	end = seq + p->payload_len;
	if (seq != m->next && end != m->next)
		return 0;
	j = bpf_jiffies64();
	if (end - m->synced > SLUICE_MEMO_BYTES || j - m->jiffies >= SLUICE_MEMO_JIFFIES)
		return 0;
	/* new bytes of an open request at a new tick: the whole way moves its start to them */
	if (m->request_open && j != m->jiffies && seq == m->next)
		return 0;
	if (!no_method_byte(skb, p) || !memo_is_of(m, p))
		return 0;
	m->next = end;
	return 1;
}

/* What a memo followed of flow f goes into f's entry: only f's own connection's memo (its
 * admission time), only while the entry lies between where the memo took it (synced) and where
 * it got to (next), in sequence space (so never back, and never from a memo the entry has moved
 * past since), and never more than the memo may follow (a memo read from another CPU while it
 * is being written can pair one take's next with another's synced: such a pair reads as far
 * more). limit: the memo's next may not lie past it either (the segment that made the caller
 * look; the entry's own position plus the window for a write-back from this CPU). */
static __always_inline void client_memo_apply(__u32 next, __u32 synced, __u64 admitted_ns,
					      struct sluice_flow *f, __u32 limit)
{
	__u32 at = f->client_next;

	if (admitted_ns == f->admitted_ns && next - synced <= SLUICE_MEMO_BYTES &&
	    next - at <= next - synced && limit - next <= limit - at)
		f->client_next = next;
}

/* A memo of this CPU into flow f's entry (no segment bounds it: the window a client segment
 * could move the entry by does). */
static __always_inline void client_memo_write(const struct sluice_client_memo *m,
					      struct sluice_flow *f)
{
	client_memo_apply(m->next, m->synced, m->admitted_ns, f, f->client_next + SLUICE_SEQ_WINDOW);
}

/* Before the whole way decides anything on flow f (key): what the memo followed of that client
 * goes into the entry. Then the memo is empty; the whole way takes it again at its end.
 * 1 when there is no need to gather the other CPUs' memos: this CPU's memo was taken at the
 * entry's very position by a whole way that gathered (or had no need to), followed nothing
 * since and is young, so this CPU went the whole way for that client last, a moment ago (a
 * segment behind a loss: the first of them gathered already). */
static __always_inline int client_memo_write_back(const struct sluice_flow_key *key,
						  struct sluice_flow *f)
{
	struct sluice_client_memo *m = client_memo_here();
	int here;

	if (!m || !m->valid || !same_flow_key(key, &m->key))
		return 0;
	here = m->gathered && m->next == m->synced && m->synced == f->client_next &&
	       bpf_jiffies64() - m->jiffies < SLUICE_MEMO_JIFFIES;
	client_memo_write(m, f);
	m->valid = 0;
	return here;
}

/* At the end of the whole way for a segment that started nothing: the memo follows this
 * client from here, once what it followed of another client is back in that one's entry. */
static __always_inline void client_memo_take(const struct sluice_flow_key *key,
					     const struct sluice_flow *f, int gathered)
{
	struct sluice_client_memo *m = client_memo_here();
	struct sluice_flow *old;

	if (!m)
		return;
	if (m->valid && m->next != m->synced && !same_flow_key(key, &m->key)) {
		old = bpf_map_lookup_elem(&flows, &m->key);
		if (old)
			client_memo_write(m, old);
	}
	__builtin_memcpy(&m->key, key, sizeof(*key));
	m->next = m->synced = f->client_next;
	m->admitted_ns = f->admitted_ns;
	m->jiffies = bpf_jiffies64();
	m->gathered = gathered;
	m->request_open = (READ_ONCE(f->req_active) & SLUICE_OWN_STATE) == SLUICE_OWN_ACTIVE;
	m->valid = 1;
}

/* A new connection on the 4-tuple (its SYN, at TC ingress: on the CPU its data will meet,
 * RPS or not): this CPU's memo of the earlier one goes, after what it followed is written
 * back should that connection's entry still stand. */
static __always_inline void client_memo_forget(const struct pkt *p)
{
	struct sluice_client_memo *m = client_memo_here();
	struct sluice_flow *f;

	if (!m || !m->valid || !memo_is_of(m, p))
		return;
	/* Written back first: a SYN on a live connection's 4-tuple (anyone can send one) must
	 * not lose what the memo followed of it. */
	if (m->next != m->synced && (f = bpf_map_lookup_elem(&flows, &m->key)))
		client_memo_write(m, f);
	m->valid = 0;
}

struct memo_search {
	const struct sluice_flow_key *key;
	struct sluice_flow *f;
	__u32 me, seq;
};

static long memo_search_cpu(__u32 cpu, void *ctx)
{
	struct memo_search *s = ctx;
	struct sluice_client_memo *m;
	__u32 next, synced;
	__u64 admitted_ns;

	if (cpu == s->me)
		return 0;
	m = bpf_map_lookup_percpu_elem(&client_memo, &(__u32){ 0 }, cpu);
	if (!m)
		return 1; /* past the last CPU */
	if (!READ_ONCE(m->valid) || !same_flow_key(s->key, &m->key))
		return 0;
	/* once each: that CPU may be moving its memo on meanwhile (apply bounds what a torn
	 * read can pair) */
	next = READ_ONCE(m->next);
	synced = READ_ONCE(m->synced);
	admitted_ns = READ_ONCE(m->admitted_ns);
	client_memo_apply(next, synced, admitted_ns, s->f, s->seq);
	return 0;
}

/* Per CPU: the jiffy it last gathered in and how many gathers it started in it
 * (SLUICE_MEMO_GATHERS a jiffy). Not pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_memo_budget);
} memo_budget SEC(".maps");

/* A segment of flow f that lies ahead of its entry by at most SLUICE_MEMO_BYTES: its
 * connection may have come from another CPU, whose memo followed it there. What every other
 * CPU's memo of it followed, up to this segment's end (a resend of the last bytes followed
 * elsewhere counts), goes into the entry. 1 when it looked; 0 when it did not (no need, or the
 * budget), so that the next segment ahead of the entry looks. Costs a lookup per CPU,
 * paid only for such a segment that this CPU did not just go the whole way for
 * (client_memo_write_back): once per move of a connection, once per loss or reordering (the
 * segments after the first behind it pay nothing), a segment behind a gap while another client
 * holds this CPU's memo, or a forger's that lands in that range of the sequence space; and at
 * most SLUICE_MEMO_GATHERS times per jiffy on a CPU. Not exact (what another CPU followed then
 * waits for the server's next data, its ack, as after a loss) for a connection that moves away
 * and comes back within SLUICE_MEMO_JIFFIES of its last whole way on a CPU, nor when the CPU's
 * gathers for the jiffy are spent. */
static __always_inline int client_memo_gather(const struct sluice_flow_key *key,
					      struct sluice_flow *f, __u32 seq, __u32 end)
{
	struct memo_search s = { .key = key, .f = f, .me = bpf_get_smp_processor_id(),
				 .seq = end };
	__u32 ahead = seq - f->client_next, zero = 0;
	struct sluice_memo_budget *b;
	__u64 j;

	if (!ahead || ahead > SLUICE_MEMO_BYTES)
		return 0; /* nothing looked at: the next segment ahead of the entry looks */
	b = bpf_map_lookup_elem(&memo_budget, &zero);
	if (!b)
		return 0;
	j = bpf_jiffies64();
	if (b->jiffies != j) {
		b->jiffies = j;
		b->used = 0;
	}
	if (b->used >= SLUICE_MEMO_GATHERS)
		return 0; /* spent: the next such segment tries again */
	b->used++;
	bpf_loop(SLUICE_MAX_CPUS, memo_search_cpu, &s, 0);
	return 1;
}

#endif
