// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* JSON on jansson; see jsonio.h. */
#include "common/jsonio.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "common/errf.h"
#include "common/utf8.h"

/* %.15g for fractions: a value rounded to a few decimals prints as written ("0.1234"),
 * without the binary noise jansson's default of 17 digits shows. */
#define JSONIO_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* jansson tells a failed allocation from bad text in no reliable way: a string it could not
 * copy reads as a syntax error at a good token. A good switch file must not be taken for a
 * damaged one (moved aside, written over), so the allocations of a parse are watched: one
 * that failed says why the parse did. Installed once, over whatever allocator is in place. */
static json_malloc_t next_malloc;
static json_free_t next_free;
static _Thread_local int alloc_failed;
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

static void *watched_malloc(size_t n)
{
	void *p = next_malloc(n);

	if (!p)
		alloc_failed = 1;
	return p;
}

static void watch_allocs(void)
{
	json_get_alloc_funcs(&next_malloc, &next_free);
	json_set_alloc_funcs(watched_malloc, next_free);
}

json_t *jsonio_parse(const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t e;
	json_t *v;

	pthread_once(&watch_once, watch_allocs);
	alloc_failed = 0;
	v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
	if (v)
		return v;
	if (alloc_failed || json_error_code(&e) == json_error_out_of_memory) {
		errf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	errno = EINVAL;
	if (json_error_code(&e) == json_error_duplicate_key)
		errf(err, errlen, "line %d column %d: duplicate key (%s)", e.line, e.column, e.text);
	else
		errf(err, errlen, "line %d column %d: %s", e.line, e.column, e.text);
	return NULL;
}

const char *jsonio_type_name(const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number with a fraction";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

json_t *jsonio_fixed(double v, int decimals)
{
	double scale = pow(10, decimals);

	if (!isfinite(v))
		return json_null();
	v = round(v * scale) / scale;
	return json_real(v == 0 ? 0.0 : v);      /* no "-0.0" */
}

json_t *jsonio_number(double v)
{
	char txt[32];

	if (!isfinite(v))
		return json_null();
	if (v == (double)(long long)v && fabs(v) < 9e15)
		return json_integer((json_int_t)v);
	snprintf(txt, sizeof(txt), "%.6g", v);
	if (strpbrk(txt, ".e"))
		return json_real(strtod(txt, NULL));
	return json_integer(strtoll(txt, NULL, 10));
}

json_t *jsonio_text(const char *s)
{
	json_t *v = json_string(s ? s : "");
	size_t n;
	char *fixed;

	if (v || !s)
		return v;
	n = strlen(s);
	if (!(fixed = malloc(3 * n + 1)))
		return NULL;
	v = json_string(utf8_scrub(fixed, s, n));
	free(fixed);
	return v;
}

char *jsonio_dumps(const json_t *v)
{
	return v ? json_dumps(v, JSONIO_DUMP_FLAGS) : NULL;
}

int jsonio_dump_text(const json_t *v, size_t flags, char **out, size_t *len)
{
	char *text = v ? json_dumps(v, flags ? flags : JSONIO_DUMP_FLAGS) : NULL, *grown;
	size_t n;

	if (!text)
		return -1;
	n = strlen(text);
	grown = realloc(text, n + 2);
	if (!grown) {
		free(text);
		return -1;
	}
	memcpy(grown + n, "\n", 2);
	*out = grown;
	*len = n + 1;
	return 0;
}

int jsonio_print_line(FILE *f, const json_t *v)
{
	char *s = jsonio_dumps(v);
	int rc;

	if (!s)
		return -1;
	rc = fprintf(f, "%s\n", s) < 0 ? -1 : 0;
	free(s);
	return rc;
}
