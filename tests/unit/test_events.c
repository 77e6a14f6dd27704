// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Event JSON: fields, escaping, numbers, truncation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>
#include "control/events.h"

static void test_json_line(void **st)
{
	struct sluice_event ev;
	char buf[512];
	int n;
	(void)st;
	sluice_event_init(&ev, 123456789ull, SLUICE_EV_INFO, "we\"b\\x\n", SLUICE_EVM_BREAKER, "closed",
			  "open", "error_rate");
	sluice_event_num(&ev, "calls", 22);
	sluice_event_num(&ev, "error_rate", 0.5);
	sluice_event_num(&ev, "bad", NAN);
	n = sluice_event_json(&ev, buf, sizeof(buf));
	assert_int_equal(n, (int)strlen(buf));
	assert_string_equal(buf,
		"{\"t_ns\":123456789,\"event\":\"state_change\",\"level\":\"info\","
		"\"service\":\"we\\\"b\\\\x\\n\",\"machine\":\"breaker\",\"from\":\"closed\","
		"\"to\":\"open\",\"why\":\"error_rate\",\"calls\":22,\"error_rate\":0.5,\"bad\":null}");
	assert_null(strchr(buf, '\n'));
}

static void test_json_truncation_and_limits(void **st)
{
	struct sluice_event ev;
	char small[16];
	int i, n;
	(void)st;
	sluice_event_init(&ev, 1, SLUICE_EV_DEBUG, NULL, SLUICE_EVM_AIMD, "limit", "limit", "x");
	for (i = 0; i < 20; i++)
		sluice_event_num(&ev, "k", i);
	assert_int_equal(ev.n_nums, SLUICE_EV_MAX_NUMS);
	n = sluice_event_json(&ev, small, sizeof(small));
	assert_true(n > (int)sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	ev.cls = 2;
	{
		char buf[512];
		sluice_event_json(&ev, buf, sizeof(buf));
		assert_non_null(strstr(buf, "\"class\":\"L2\""));
		assert_non_null(strstr(buf, "\"service\":\"\""));
		assert_non_null(strstr(buf, "\"level\":\"debug\""));
	}
}

/* Every key is there whatever bytes its text holds: an interface name the kernel took as it
 * came, a message cut inside a character. jansson refuses a string that is not UTF-8, and the
 * key went missing from the line (a script reading "why" got nothing); such a byte shows as
 * U+FFFD instead, and text that is UTF-8 is kept as it is. */
static void test_json_keys_whatever_the_bytes(void **st)
{
	struct sluice_event ev;
	char buf[512];
	(void)st;

	sluice_event_init(&ev, 7, SLUICE_EV_ALERT, "veth\xff" "0", SLUICE_EVM_DAEMON, "native",
			  "gen\xc3", "bad key 'caf\xc3\xa9\xc3': cut");
	sluice_event_json(&ev, buf, sizeof(buf));
	assert_string_equal(buf,
		"{\"t_ns\":7,\"event\":\"state_change\",\"level\":\"alert\","
		"\"service\":\"veth\xef\xbf\xbd" "0\",\"machine\":\"daemon\",\"from\":\"native\","
		"\"to\":\"gen\xef\xbf\xbd\",\"why\":\"bad key 'caf\xc3\xa9\xef\xbf\xbd': cut\"}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_line),
		cmocka_unit_test(test_json_truncation_and_limits),
		cmocka_unit_test(test_json_keys_whatever_the_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
