// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The http connection cap of the lower classes with a fake clock: set to the class's share
 * when its requests are refused, lowered to it, held while the cap turns SYNs away, following
 * the share down at once and up paced once the class is not refused, lifted after the hold,
 * never on L0, and taken over from the map by a restarted sluiced; the share from the room, the
 * backend's concurrency, the higher classes and the idle connections. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "control/connshare.h"

#define MS 1000000ull
#define S  1000000000ull
#define HOLD SLUICE_CONNSHARE_HOLD_NS
#define TICK (100 * MS)

static struct sluice_connshare_input busy_input(uint32_t share3)
{
	struct sluice_connshare_input in = { 0 };

	for (int k = 0; k < SLUICE_NUM_CLASSES; k++)
		in.share[k] = 20;
	in.share[3] = share3;
	return in;
}

static void test_refusals_set_cap_to_room(void **st)
{
	struct sluice_connshare cs = { 0 };
	struct sluice_connshare_input in = busy_input(17);
	(void)st;

	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, 1 * S), 0);
	assert_int_equal(cs.cap[3], 0);
	in.refused[3] = 5;
	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, 1 * S + TICK), 1);
	assert_int_equal(cs.cap[3], 17);
	assert_int_equal(cs.cap[1] | cs.cap[2] | cs.cap[0], 0); /* only the refused class */
	/* the room shrinks (the limit was cut): the cap follows it down */
	in.share[3] = 12;
	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, 1 * S + 2 * TICK), 1);
	assert_int_equal(cs.cap[3], 12);
	/* a shut class keeps the floor: its demand must still reach the ladder */
	in.share[3] = 0;
	sluice_connshare_tick(&cs, &in, HOLD, 1 * S + 3 * TICK);
	assert_int_equal(cs.cap[3], SLUICE_CONNSHARE_MIN);
}

static void test_l0_never_capped(void **st)
{
	struct sluice_connshare cs = { 0 };
	struct sluice_connshare_input in = busy_input(10);
	(void)st;

	in.refused[0] = 100;
	in.cap_refused[0] = 100;
	for (uint64_t t = 0; t < 5 * S; t += TICK) {
		sluice_connshare_tick(&cs, &in, HOLD, t);
		assert_int_equal(cs.cap[0], 0);
	}
}

static void test_held_while_syns_refused_then_lifted(void **st)
{
	struct sluice_connshare cs = { 0 };
	struct sluice_connshare_input in = busy_input(16);
	uint64_t t = 10 * S;
	(void)st;

	in.refused[3] = 3;
	sluice_connshare_tick(&cs, &in, HOLD, t);
	assert_int_equal(cs.cap[3], 16);
	/* no more 429s, but the cap keeps turning SYNs away for 30 s: it stays, unchanged (its
	 * share did not move) */
	in.refused[3] = 0;
	in.cap_refused[3] = 1000;
	for (int n = 0; n < 300; n++) {
		t += TICK;
		sluice_connshare_tick(&cs, &in, HOLD, t);
		assert_int_equal(cs.cap[3], 16);
	}
	/* the surge ends: nothing refused; the cap stays for the hold, then goes */
	in.cap_refused[3] = 0;
	t += TICK;
	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, t), 0);
	assert_int_equal(cs.cap[3], 16);
	t += HOLD - 2 * TICK;
	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, t), 0);
	assert_int_equal(cs.cap[3], 16);
	t += TICK;
	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, t), 1);
	assert_int_equal(cs.cap[3], 0);
}

static void test_follows_share_up_paced_and_down_at_once(void **st)
{
	struct sluice_connshare cs = { 0 };
	struct sluice_connshare_input in = busy_input(8);
	uint64_t t = 0;
	uint32_t last;
	(void)st;

	in.refused[3] = 1;
	sluice_connshare_tick(&cs, &in, HOLD, t);
	assert_int_equal(cs.cap[3], 8);
	/* the share rises (the backend serves more) while the cap turns SYNs away, but the class
	 * was refused just now: no growth for half the hold */
	in.refused[3] = 0;
	in.cap_refused[3] = 50;
	in.share[3] = 20;
	for (t = TICK; t < HOLD / 2; t += TICK) {
		sluice_connshare_tick(&cs, &in, HOLD, t);
		assert_int_equal(cs.cap[3], 8);
	}
	/* then towards it by a quarter, at most every SLUICE_CONNSHARE_GROW_NS, never past it */
	sluice_connshare_tick(&cs, &in, HOLD, t);
	assert_int_equal(cs.cap[3], 10);
	last = cs.cap[3];
	for (uint64_t end = t + 3 * S; t < end;) {
		t += TICK;
		sluice_connshare_tick(&cs, &in, HOLD, t);
		if (cs.cap[3] != last) {
			assert_true(cs.cap[3] == last + (last / 4 ? last / 4 : 1) || cs.cap[3] == 20);
			assert_true(cs.grown_ns[3] == t);
		}
		last = cs.cap[3];
	}
	assert_int_equal(cs.cap[3], 20); /* 10 12 15 18 20 */
	/* the share falls: the cap follows at once */
	in.share[3] = 9;
	t += TICK;
	sluice_connshare_tick(&cs, &in, HOLD, t);
	assert_int_equal(cs.cap[3], 9);
	/* and a refusal brings it to the share of the moment */
	in.share[3] = 6;
	in.refused[3] = 2;
	t += TICK;
	sluice_connshare_tick(&cs, &in, HOLD, t);
	assert_int_equal(cs.cap[3], 6);
}

static void test_share(void **st)
{
	(void)st;
	/* the backend's concurrency (15 busy at once) under the room of 30, less the higher
	 * classes' 2, plus the class's 3 idle connections */
	assert_int_equal(sluice_connshare_share(30, 15.0, 2, 3), 16);
	/* not known yet: the room alone */
	assert_int_equal(sluice_connshare_share(30, 0, 2, 0), 28);
	/* the room is the bound when it is lower */
	assert_int_equal(sluice_connshare_share(10, 15.0, 0, 0), 10);
	/* nothing left above the higher classes: only the idle connections */
	assert_int_equal(sluice_connshare_share(10, 15.0, 12, 4), 4);
	assert_int_equal(sluice_connshare_share(0, 15.0, 0, 0), 0);
}

static void test_adopt_holds_then_lifts(void **st)
{
	struct sluice_connshare cs;
	const uint32_t found[SLUICE_NUM_CLASSES] = { 7, 0, 5, 9 };
	struct sluice_connshare_input in = busy_input(9);
	uint64_t t = 100 * S;
	(void)st;

	memset(&cs, 0xff, sizeof(cs));
	sluice_connshare_adopt(&cs, found, HOLD, t);
	assert_int_equal(cs.cap[0], 0); /* L0 is never capped, whatever the map said */
	assert_int_equal(cs.cap[1], 0);
	assert_int_equal(cs.cap[2], 5);
	assert_int_equal(cs.cap[3], 9);
	/* nothing refused since the restart: lifted after the hold, not at once */
	t += TICK;
	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, t), 0);
	assert_int_equal(cs.cap[3], 9);
	t += HOLD;
	assert_int_equal(sluice_connshare_tick(&cs, &in, HOLD, t), 1);
	assert_int_equal(cs.cap[2] | cs.cap[3], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals_set_cap_to_room),
		cmocka_unit_test(test_l0_never_capped),
		cmocka_unit_test(test_held_while_syns_refused_then_lifted),
		cmocka_unit_test(test_follows_share_up_paced_and_down_at_once),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_adopt_holds_then_lifts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
