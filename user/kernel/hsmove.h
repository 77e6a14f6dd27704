/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Pending handshakes an older layout's programs left in the LRU `handshakes`, moved into
 * `handshake_slots`, where this layout's programs look for them. */
#ifndef SLUICE_HSMOVE_H
#define SLUICE_HSMOVE_H

#include <linux/types.h>

struct sluice_hash_keys;

/* The keys of the 4-tuples' hash in the map key_fd (flow_hash_key) into *keys: drawn from
 * the kernel's random source and written when the map holds none (a new map: all zero), kept
 * as they are otherwise (the pins of a running data path). 0, or -errno. */
int hs_hash_keys(int key_fd, struct sluice_hash_keys *keys);

/* Move every record of the hash map from_fd into its slot in the mmapable array slots_fd
 * (placed by the hash under keys), taking each slot's word by compare-and-swap as the data
 * path does (a slot the data path holds or is writing keeps what it has), and empty from_fd.
 * Returns the number of records moved (a record whose slot was taken is dropped: its
 * connection is taken on at its first data), or -errno. */
int hs_move_records(int from_fd, int slots_fd, const struct sluice_hash_keys *keys);

#endif
