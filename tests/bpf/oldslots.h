/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test helper for reloads that must reuse a slot: the maps' other slots taken by services
 * removed long ago, some with units still open. Include after harness.h. */
#ifndef SLUICE_TEST_OLDSLOTS_H
#define SLUICE_TEST_OLDSLOTS_H

#include <stdbool.h>

/* Slot s holds one tcp turn under way (a unit still open there). */
static void hold_a_turn(const struct sluice_maps *m, int s)
{
	struct sluice_inflight b;

	memset(&b, 0, sizeof(b));
	b.cls[1] = 1;
	b.total = 1;
	assert_int_equal(bpf_map_update_elem(m->busy, &(__u32){ (__u32)s }, &b, BPF_ANY), 0);
}

/* Every slot no service names is given to a service removed long ago ("old<slot>"), so that a
 * new service can only take a slot a reload freed; with_open_turn: each also holds a tcp turn
 * still under way, as a removed service's flows may. */
static void name_the_free_slots(const struct sluice_maps *m, bool with_open_turn)
{
	for (int s = 0; s < m->n_slots; s++) {
		struct sluice_service sv;

		assert_int_equal(maps_read_service(m, s, &sv), 0);
		if (sv.name[0])
			continue;
		snprintf(sv.name, sizeof(sv.name), "old%d", s);
		assert_int_equal(bpf_map_update_elem(m->services, &(__u32){ (__u32)s }, &sv,
						     BPF_ANY), 0);
		if (with_open_turn)
			hold_a_turn(m, s);
	}
}

#endif
