// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Moving an older layout's pending handshakes into their slots. The data path changes a slot
 * only through its word (bpf/handshake.h), so this takes part the same way, through the
 * map's memory: a slot is written only after its word was swapped from empty to busy, and
 * made readable by the word written back. */
#include <errno.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <bpf/bpf.h>
#include "sluice.h"
#include "kernel/hsmove.h"

static int keys_unset(const struct sluice_hash_keys *keys)
{
	for (int i = 0; i < SLUICE_HASH_KEY_WORDS / 2; i++)
		if (keys->k[i])
			return 0;
	return 1;
}

int hs_hash_keys(int key_fd, struct sluice_hash_keys *keys)
{
	__u32 zero = 0;

	if (bpf_map_lookup_elem(key_fd, &zero, keys) != 0)
		return -errno;
	if (!keys_unset(keys))
		return 0;
	while (keys_unset(keys))
		if (getrandom(keys, sizeof(*keys), 0) != (ssize_t)sizeof(*keys))
			return -errno;
	return bpf_map_update_elem(key_fd, &zero, keys, BPF_ANY) ? -errno : 0;
}

static int move_one(struct sluice_handshake_slot *slots, const struct sluice_flow_key *k,
		    const struct sluice_handshake *r,
		    const struct sluice_hash_keys *keys)
{
	__u64 h = sluice_flow_key_hash(k, keys);
	struct sluice_handshake_slot *s = &slots[sluice_slot_index(h)];
	__u32 w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);

	if (w == SLUICE_SLOT_BUSY || (w & SLUICE_SLOT_HELD) ||
	    !__atomic_compare_exchange_n(&s->word, &w, SLUICE_SLOT_BUSY, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return 0;
	sluice_slot_fill(s, k, r);
	/* Older layouts counted every tcp record in its service's half-open count and kept no
	 * flag for it; an http service's count is always zero, so giving one back is a no-op. */
	s->flags = r->flags | SLUICE_HS_COUNTED;
	__atomic_store_n(&s->word, sluice_slot_tag(h) |
			 ((w + SLUICE_SLOT_GEN_ONE) & SLUICE_SLOT_GEN_MASK) | SLUICE_SLOT_HELD,
			 __ATOMIC_RELEASE);
	return 1;
}

int hs_move_records(int from_fd, int slots_fd, const struct sluice_hash_keys *keys)
{
	size_t len = (size_t)SLUICE_HANDSHAKE_SLOTS * sizeof(struct sluice_handshake_slot);
	struct sluice_flow_key k, next;
	struct sluice_handshake r;
	struct sluice_handshake_slot *slots;
	int moved = 0, left = 2 * SLUICE_MAX_HANDSHAKES;

	slots = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, slots_fd, 0);
	if (slots == MAP_FAILED)
		return -errno;
	/* Each record is deleted once read, so the walk always starts again at the first key:
	 * a hash map's next key after a deleted one starts the walk over anyway. Bounded: an
	 * older program still attached somewhere would otherwise be chased record by record. */
	while (left-- > 0 && bpf_map_get_next_key(from_fd, NULL, &next) == 0) {
		k = next;
		if (bpf_map_lookup_elem(from_fd, &k, &r) == 0)
			moved += move_one(slots, &k, &r, keys);
		if (bpf_map_delete_elem(from_fd, &k) != 0 && errno != ENOENT)
			break;
	}
	munmap(slots, len);
	return moved;
}
