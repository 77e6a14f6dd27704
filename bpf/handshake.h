/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Pending handshakes in their slots (map handshake_slots; the layout and why in
 * include/sluice.h, struct sluice_handshake_slot).
 *
 * A slot's word is the only thing CPUs race on. Whoever swaps it to SLUICE_SLOT_BUSY has the
 * slot to itself until it writes a held word back (a record written or changed) and never
 * waits for anyone: a CPU that finds the slot busy does without it, as if it held no record
 * of its 4-tuple (a SYN goes unrecorded, an ACK completes nothing and the connection is taken
 * on at its first data). Whoever swaps a held word to empty owns what the record held: its
 * promotion to a flow, its half-open count. Every write moves the word's generation, so a
 * reader whose two reads of the word agree read one record whole on x86, whose loads keep
 * their order. On a CPU that may reorder loads (arm64) the word would need acquire loads,
 * which this toolchain's BPF target does not have: a copy could then be torn, which the
 * sequence-number checks of the SYN, ACK and FIN paths turn away, but a server RST's or FIN's
 * give-back of a half-open count could go to the wrong service (a count that lapses within a
 * second). */
#ifndef SLUICE_BPF_HANDSHAKE_H
#define SLUICE_BPF_HANDSHAKE_H

#define compiler_barrier() asm volatile("" ::: "memory")

/* The stack copy of a key compared with a slot's: read in 8-byte words, which the verifier
 * allows only on an 8-byte boundary of the stack. */
#define SLOT_KEY_ALIGNED __attribute__((aligned(8)))

/* A 4-tuple's slot, and the held word its record was read under (0: none read). */
struct hs_at {
	struct sluice_handshake_slot *slot;
	__u64 h;                          /* sluice_flow_key_hash of the 4-tuple */
	__u32 tag;
	__u32 word;
};

/* The 4-tuple's hash under this host's keys (see sluice_flow_key_hash). */
static __always_inline __u64 flow_hash(const struct sluice_flow_key *key)
{
	__u32 zero = 0;
	const struct sluice_hash_keys *keys = bpf_map_lookup_elem(&flow_hash_key, &zero);

	return keys ? sluice_flow_key_hash(key, keys) : 0; /* a one-entry array: never NULL */
}

static __always_inline void hs_locate(struct hs_at *at, __u64 h)
{
	__u32 i = sluice_slot_index(h);

	at->slot = bpf_map_lookup_elem(&handshake_slots, &i);
	at->h = h;
	at->tag = sluice_slot_tag(h);
	at->word = 0;
}

static __always_inline int hs_key_is(const struct sluice_handshake_slot *s,
				     const struct sluice_flow_key *k)
{
	const __u64 *a = (const __u64 *)&s->key, *b = (const __u64 *)k;
	const __u32 *a4 = (const __u32 *)&s->key, *b4 = (const __u32 *)k;

	return !((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) |
		 (__u64)(a4[8] ^ b4[8]));
}

/* Whether a slot's word says it holds a record of the 4-tuple whose tag is at->tag (its key
 * still to be compared). */
static __always_inline int hs_word_names(const struct hs_at *at, __u32 w)
{
	return (w & (SLUICE_SLOT_TAG_MASK | SLUICE_SLOT_HELD)) == (at->tag | SLUICE_SLOT_HELD);
}

/* 1 with key's record copied into *r when its slot holds one (at->word then names it). A
 * packet inside an established connection ends at the first read of the word. */
static __always_inline int hs_read(struct hs_at *at, const struct sluice_flow_key *key,
				   struct sluice_handshake *r)
{
	struct sluice_handshake_slot *s = at->slot;
	__u32 w;

	if (!s)
		return 0;
	w = READ_ONCE(s->word);
	if (!hs_word_names(at, w))
		return 0;
	compiler_barrier();
	if (!hs_key_is(s, key))
		return 0;
	sluice_slot_record(s, r);
	compiler_barrier();
	if (READ_ONCE(s->word) != w)
		return 0;
	at->word = w;
	return 1;
}

/* 1 when key's slot holds a record of it, read or not. */
static __always_inline int hs_holds(const struct sluice_flow_key *key)
{
	struct hs_at at;

	hs_locate(&at, flow_hash(key));
	return at.slot && hs_word_names(&at, READ_ONCE(at.slot->word)) &&
	       hs_key_is(at.slot, key);
}

/* Take the record read by hs_read out of its slot: 1 for the one caller that did. */
static __always_inline int hs_remove(struct hs_at *at)
{
	__u32 w = at->word;

	return at->slot && w &&
	       __sync_val_compare_and_swap(&at->slot->word, w, w & SLUICE_SLOT_GEN_MASK) == w;
}

/* The slot to this caller alone, to change the record read by hs_read in place (hs_publish
 * ends it): 0 when it changed or went since, or another CPU has the slot. */
static __always_inline int hs_claim(struct hs_at *at)
{
	__u32 w = at->word;

	return at->slot && w &&
	       __sync_val_compare_and_swap(&at->slot->word, w, SLUICE_SLOT_BUSY) == w;
}

/* The slot's record readable again, under a new generation (from the word it was claimed
 * from, in at->word). */
static __always_inline void hs_publish(struct hs_at *at)
{
	__u32 w = at->tag | ((at->word + SLUICE_SLOT_GEN_ONE) & SLUICE_SLOT_GEN_MASK) |
		  SLUICE_SLOT_HELD;

	__sync_lock_test_and_set(&at->slot->word, w);
	at->word = w;
}

/* Whether a record stamped at syn_ns is within window of now. Signed, as another CPU's later
 * clock may have stamped it. */
static __always_inline int hs_within(__u64 syn_ns, __u64 now, __u64 window)
{
	return (__s64)(now - syn_ns) <= (__s64)window;
}

/* Write r as key's record into its slot: an empty one, or over another 4-tuple's record older
 * than SLUICE_HS_SLOT_HOLD_NS (whose half-open count, if it had one, lapsed long since: a
 * window lasts SLUICE_HALFOPEN_TIMEOUT_NS, so nothing is given back). 0 when the slot is busy
 * or holds a younger record: the SYN goes unrecorded (see handshake_slots). */
static __always_inline int hs_write(struct hs_at *at, const struct sluice_flow_key *key,
				    const struct sluice_handshake *r, __u64 now)
{
	struct sluice_handshake_slot *s = at->slot;
	__u32 w;

	if (!s)
		return 0;
	w = READ_ONCE(s->word);
	if (w == SLUICE_SLOT_BUSY ||
	    ((w & SLUICE_SLOT_HELD) && hs_within(READ_ONCE(s->syn_ns), now, SLUICE_HS_SLOT_HOLD_NS)))
		return 0;
	if (__sync_val_compare_and_swap(&s->word, w, SLUICE_SLOT_BUSY) != w)
		return 0;
	sluice_slot_fill(s, key, r);
	at->word = w;
	hs_publish(at);
	return 1;
}

#endif /* SLUICE_BPF_HANDSHAKE_H */
