/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: a minimal, strict JSON reader and writer for sluice's own files (switch state file,
 * audit log). Not a general JSON library:
 *   - numbers must be integers (optional '-', no fraction, no exponent) fitting int64;
 *   - duplicate keys in an object are an error; nesting depth is limited (SJSON_MAX_DEPTH);
 *   - anything after the top-level value other than whitespace is an error;
 *   - strings are UTF-8, escapes (\" \\ \/ \b \f \n \r \t \uXXXX incl. surrogate pairs) are
 *     decoded; raw control characters and "\u0000" are refused.
 * Errors name the line and column. No global state; every tree is freed with sjson_free(). */
#ifndef SLUICE_JSON_H
#define SLUICE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

#define SJSON_MAX_DEPTH 16

enum sjson_type { SJSON_NULL, SJSON_BOOL, SJSON_INT, SJSON_STR, SJSON_ARR, SJSON_OBJ };

struct sjson {
	enum sjson_type type;
	char *key;                 /* member name when the parent is an object, else NULL */
	int64_t i;                 /* SJSON_INT value; SJSON_BOOL: 0/1 */
	char *s;                   /* SJSON_STR value (NUL-terminated, no embedded NUL) */
	struct sjson *child;       /* first element / member of an array / object */
	struct sjson *next;        /* next sibling */
	int n;                     /* number of children (arrays, objects) */
	int line;                  /* 1-based line where the value starts */
};

/* Parse `len` bytes of `text`. Returns the tree, or NULL with "line L col C: what" in err. */
struct sjson *sjson_parse(const char *text, size_t len, char *err, size_t errlen);
void sjson_free(struct sjson *v);
/* Member `key` of object `obj`, or NULL (also when obj is not an object). */
const struct sjson *sjson_get(const struct sjson *obj, const char *key);
const char *sjson_type_name(enum sjson_type t);

/* A growable output buffer. Allocation failure is sticky: oom is set and later calls do nothing. */
struct sjbuf {
	char *p;
	size_t len, cap;
	int oom;
};
void sjbuf_init(struct sjbuf *b);
void sjbuf_free(struct sjbuf *b);
void sjbuf_puts(struct sjbuf *b, const char *s);
void sjbuf_printf(struct sjbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append `s` as a quoted, escaped JSON string (control characters as \u00XX). */
void sjbuf_str(struct sjbuf *b, const char *s);

#endif
