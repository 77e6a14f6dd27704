/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Pending handshakes an older layout's programs left in the LRU `handshakes`, moved into
 * `handshake_slots`, where this layout's programs look for them. */
#ifndef SLUICE_HSMOVE_H
#define SLUICE_HSMOVE_H

/* Move every record of the hash map from_fd into its slot in the mmapable array slots_fd,
 * taking each slot's word by compare-and-swap as the data path does (a slot the data path
 * holds or is writing keeps what it has), and empty from_fd. Returns the number of records
 * moved (a record whose slot was taken is dropped: its connection is taken on at its first
 * data), or -errno. */
int hs_move_records(int from_fd, int slots_fd);

#endif
