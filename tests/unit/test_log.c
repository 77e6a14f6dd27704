// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the log (user/common/log.c): which levels -v/-q show, the prefix, a message that
 * already names its level, and libbpf's messages routed through it (user/kernel/bpflog.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "common/log.h"
#include "kernel/bpflog.h"

static char buf[4096];
static FILE *out;

static int open_log(void **state)
{
	buf[0] = 0;
	out = fmemopen(buf, sizeof(buf), "w");
	log_set_stream(out);
	return out ? 0 : -1;
}

static int close_log(void **state)
{
	log_set_stream(NULL);
	fclose(out);
	log_init("sluice", 0);
	return 0;
}

static void reset(void)
{
	fclose(out);
	open_log(NULL);
}

static const char *text(void)
{
	fflush(out);
	return buf;
}

static void all_levels(void)
{
	log_error("e %d", 1);
	log_warn("w %d", 2);
	log_info("i %d", 3);
	log_debug("d %d", 4);
}

static void test_default_shows_info(void **state)
{
	log_init("tool", 0);
	all_levels();
	assert_string_equal(text(), "tool: error: e 1\ntool: warning: w 2\ntool: i 3\n");
}

static void test_verbose_and_quiet(void **state)
{
	log_init("tool", 1);
	all_levels();
	assert_non_null(strstr(text(), "tool: debug: d 4\n"));
	reset();
	log_init("tool", -1);
	all_levels();
	assert_string_equal(text(), "tool: error: e 1\ntool: warning: w 2\n");
	reset();
	log_init("tool", -5);   /* errors are never silenced */
	all_levels();
	assert_string_equal(text(), "tool: error: e 1\n");
	assert_true(log_enabled(LOG_ERROR));
	assert_false(log_enabled(LOG_WARN));
}

static void test_level_word_once(void **state)
{
	log_init("tool", 0);
	log_error("ERROR: switch file x is corrupt");
	log_warn("warning: already said\n");
	log_error("errors: 3");
	assert_string_equal(text(), "tool: ERROR: switch file x is corrupt\n"
				    "tool: warning: already said\n"
				    "tool: error: errors: 3\n");
}

/* bpflog_route() installs the printer; libbpf_set_print() hands it back so it can be called. */
static int call_libbpf(libbpf_print_fn_t fn, enum libbpf_print_level l, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = fn(l, fmt, ap);
	va_end(ap);
	return r;
}

static char sunk[512];
static size_t sunk_n;

static void sink(void *ctx, const char *line, size_t n)
{
	(void)ctx;
	if (sunk_n + n < sizeof(sunk)) {
		memcpy(sunk + sunk_n, line, n);
		sunk_n += n;
		sunk[sunk_n] = 0;
	}
}

/* A config's errors keep the form tools read (FILE:LINE:COL: message, no prefix), on the
 * stream and through sluiced's sink alike, shown even at -qq. */
static void test_plain_lines_keep_their_form(void **state)
{
	log_init("sluiced", -2);
	log_plain("%s:%d:%d: %s", "/etc/sluice.yaml", 4, 11, "bad port");
	log_plain("last\n");
	assert_string_equal(text(), "/etc/sluice.yaml:4:11: bad port\nlast\n");
	sunk_n = 0;
	log_set_sink(sink, NULL);
	log_plain("%s:%d: %s", "/etc/sluice.yaml", 5, "unknown key");
	log_error("whole");
	log_set_sink(NULL, NULL);
	assert_string_equal(sunk, "/etc/sluice.yaml:5: unknown key\nsluiced: error: whole\n");
}

static void test_libbpf_routed(void **state)
{
	libbpf_print_fn_t fn;

	bpflog_route();
	fn = libbpf_set_print(NULL);
	assert_non_null(fn);
	log_init("tool", 0);
	call_libbpf(fn, LIBBPF_WARN, "libbpf: map '%s': failed\n", "m");
	call_libbpf(fn, LIBBPF_INFO, "libbpf: info\n");
	call_libbpf(fn, LIBBPF_DEBUG, "libbpf: debug\n");
	call_libbpf(fn, LIBBPF_WARN, "libbpf: Exclusivity flag on, cannot modify\n");
	assert_string_equal(text(), "tool: warning: libbpf: map 'm': failed\n");
	log_init("tool", 1);
	call_libbpf(fn, LIBBPF_INFO, "libbpf: info\n");
	call_libbpf(fn, LIBBPF_DEBUG, "libbpf: debug\n");
	assert_null(strstr(text(), "libbpf: debug"));
	assert_non_null(strstr(text(), "tool: debug: libbpf: info\n"));
	log_init("tool", 2);
	call_libbpf(fn, LIBBPF_DEBUG, "libbpf: debug\n");
	assert_non_null(strstr(text(), "tool: debug: libbpf: debug\n"));
	/* the clsact note of every restart is debug, not a warning */
	call_libbpf(fn, LIBBPF_WARN, "libbpf: Exclusivity flag on, cannot modify\n");
	assert_non_null(strstr(text(), "tool: debug: libbpf: Exclusivity flag on"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_default_shows_info, open_log, close_log),
		cmocka_unit_test_setup_teardown(test_verbose_and_quiet, open_log, close_log),
		cmocka_unit_test_setup_teardown(test_level_word_once, open_log, close_log),
		cmocka_unit_test_setup_teardown(test_libbpf_routed, open_log, close_log),
		cmocka_unit_test_setup_teardown(test_plain_lines_keep_their_form, open_log, close_log),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
